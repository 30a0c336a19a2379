"""Consumer group partition assignors and the "consumer" embedded protocol bytes.

A consumer joining a group sends its *subscription* as the JoinGroup protocol
metadata; the group leader runs an assignor over every member's subscription
and returns one *assignment* per member through SyncGroup. Both are opaque to
the broker and encoded with Kafka's non-flexible data schemas
(``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``), all
integers big-endian::

    Subscription =>
      version          int16      0..3 written; any version >= 0 read
      topics           [string]   int32 count, each int16 length + UTF-8
      user_data        bytes      int32 length + bytes; -1 means null
      owned_partitions (v1+)      int32 count of
        topic          string
        partitions     [int32]
      generation_id    (v2+)      int32; -1 when absent
      rack_id          (v3+)      nullable string

    Assignment =>
      version          int16      the fields below are the same in v0..v3
      partitions       int32 count of
        topic          string
        partitions     [int32]
      user_data        bytes      nullable

Forward compatibility follows Kafka: a version newer than the newest known is
read as the newest known, and whatever follows the known fields is ignored.
For a known version, trailing bytes are corruption. Anything that does not
parse raises :class:`InvalidConsumerProtocolError`.

The sticky assignor's user data is Kafka's ``StickyAssignorUserData`` v1,
written without a version header (readers try v1, then v0)::

    previous_assignment  int32 count of (topic string, partitions [int32])
    generation           int32 (v1 only; absent means -1)
"""

from __future__ import annotations

import abc
import struct
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Set, Tuple, Type

from ..errors import ConfigError, InvalidArgumentError, InvalidArgumentTypeError, InvalidConsumerProtocolError

__all__ = ["Subscription", "Assignment", "encode_subscription", "decode_subscription", "encode_assignment",
           "decode_assignment", "encode_sticky_user_data", "decode_sticky_user_data", "PartitionAssignor", "RangeAssignor",
    "RoundRobinAssignor", "StickyAssignor", "ASSIGNORS", "assignor_for_name"]

TopicPartitions = Dict[str, List[int]]

SUBSCRIPTION_MAX_VERSION = 3
ASSIGNMENT_MAX_VERSION = 3
DEFAULT_GENERATION = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_STRING_MAX = 0x7FFF
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


@dataclass
class Subscription:
    """A member's decoded JoinGroup metadata: its topics and what it owned."""

    version: int
    topics: List[str]
    user_data: Optional[bytes] = None
    owned_partitions: TopicPartitions = field(default_factory=dict)
    generation_id: int = -1
    rack_id: Optional[str] = None


@dataclass
class Assignment:
    """A member's decoded SyncGroup assignment: partitions per topic."""

    version: int
    partitions: TopicPartitions
    user_data: Optional[bytes] = None


def _check_version(version: int, highest: int, what: str) -> None:
    if not isinstance(version, int) or not 0 <= version <= highest:
        raise InvalidConsumerProtocolError(
            "cannot write %s version %r: versions 0..%d are supported" % (what, version, highest))


def _put_string(out: bytearray, value: str, what: str) -> None:
    if not isinstance(value, str):
        raise InvalidArgumentTypeError("%s must be a str, not %r" % (what, value))
    raw = value.encode("utf-8")
    if len(raw) > _STRING_MAX:
        raise InvalidConsumerProtocolError(
            "%s %r is %d bytes in UTF-8, more than a protocol string holds (%d)"
            % (what, value[:40], len(raw), _STRING_MAX))
    out += _INT16.pack(len(raw))
    out += raw


def _put_int32(out: bytearray, value: int, what: str) -> None:
    if not isinstance(value, int) or not _INT32_MIN <= value <= _INT32_MAX:
        raise InvalidConsumerProtocolError("%s %r is not an int32" % (what, value))
    out += _INT32.pack(value)


def _put_bytes(out: bytearray, value: Optional[bytes]) -> None:
    if value is None:
        out += _INT32.pack(-1)
        return
    raw = bytes(value)
    out += _INT32.pack(len(raw))
    out += raw


def _put_topic_partitions(out: bytearray, value: Mapping[str, Iterable[int]]) -> None:
    out += _INT32.pack(len(value))
    for topic, partitions in value.items():
        _put_string(out, topic, "topic")
        parts = list(partitions)
        out += _INT32.pack(len(parts))
        for p in parts:
            _put_int32(out, p, "partition of topic %r" % topic)


class _Reader:
    """Checked big-endian reader: every read is bounded by the buffer."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self.buf = memoryview(data).cast("B")
        self.pos = 0
        self.what = what

    def fail(self, problem: str) -> InvalidConsumerProtocolError:
        return InvalidConsumerProtocolError(
            "invalid consumer protocol %s at byte %d of %d: %s"
            % (self.what, self.pos, len(self.buf), problem))

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def need(self, n: int, field_name: str) -> None:
        if self.remaining() < n:
            raise self.fail("%s needs %d bytes, %d left" % (field_name, n, self.remaining()))

    def int16(self, field_name: str) -> int:
        self.need(2, field_name)
        (value,) = _INT16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(value)

    def int32(self, field_name: str) -> int:
        self.need(4, field_name)
        (value,) = _INT32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def string(self, field_name: str) -> str:
        n = self.int16(field_name + " length")
        if n < 0:
            raise self.fail("%s is null (length %d) but is not nullable" % (field_name, n))
        self.need(n, field_name)
        raw = bytes(self.buf[self.pos:self.pos + n])
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail("%s is not valid UTF-8 (%s)" % (field_name, exc.reason)) from None
        self.pos += n
        return value

    def nullable_string(self, field_name: str) -> Optional[str]:
        n = self.int16(field_name + " length")
        if n == -1:
            return None
        self.pos -= 2
        return self.string(field_name)

    def nullable_bytes(self, field_name: str) -> Optional[bytes]:
        n = self.int32(field_name + " length")
        if n == -1:
            return None
        if n < 0:
            raise self.fail("%s has negative length %d" % (field_name, n))
        self.need(n, field_name)
        value = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return value

    def count(self, field_name: str, min_item_size: int) -> int:
        n = self.int32(field_name + " count")
        if n < 0:
            raise self.fail("%s is null (count %d) but is not nullable" % (field_name, n))
        # Refuse a count the remaining bytes cannot hold before allocating for it.
        if n * min_item_size > self.remaining():
            raise self.fail("%s count %d needs at least %d bytes, %d left"
                            % (field_name, n, n * min_item_size, self.remaining()))
        return n

    def topic_partitions(self, field_name: str) -> TopicPartitions:
        result: TopicPartitions = {}
        for _ in range(self.count(field_name, 6)):
            topic = self.string(field_name + " topic")
            n = self.count(field_name + " partitions of %r" % topic, 4)
            parts = [self.int32(field_name + " partition") for _ in range(n)]
            # Duplicate topic entries are merged rather than dropped: no partition is lost.
            result.setdefault(topic, []).extend(parts)
        return result

    def end(self, version: int, highest_known: int) -> None:
        if version <= highest_known and self.remaining():
            raise self.fail("%d trailing bytes after a version %d message"
                            % (self.remaining(), version))


def _coerce_bytes(data: bytes, what: str) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentTypeError("consumer protocol %s must be bytes-like, not %s" % (what, type(data).__name__))
    return data


def encode_subscription(
    topics: Iterable[str],
    user_data: Optional[bytes] = None,
    owned_partitions: Optional[Mapping[str, Iterable[int]]] = None,
    version: int = 0,
    generation_id: int = -1,
    rack_id: Optional[str] = None,
) -> bytes:
    """Encode a member's subscription; topics are written in the order given.

    Fields the version lacks must keep their defaults, so nothing given is lost.
    """
    _check_version(version, SUBSCRIPTION_MAX_VERSION, "subscription")
    if isinstance(topics, str):
        raise InvalidArgumentTypeError("topics must be an iterable of topic names, not the str %r" % topics)
    if owned_partitions and version < 1:
        raise InvalidConsumerProtocolError(
            "owned_partitions need subscription version 1 or later, got version %d" % version)
    if generation_id != -1 and version < 2:
        raise InvalidConsumerProtocolError(
            "generation_id %r needs subscription version 2 or later, got version %d"
            % (generation_id, version))
    if rack_id is not None and version < 3:
        raise InvalidConsumerProtocolError(
            "rack_id %r needs subscription version 3 or later, got version %d" % (rack_id, version))
    topic_list = list(topics)
    out = bytearray(_INT16.pack(version))
    out += _INT32.pack(len(topic_list))
    for topic in topic_list:
        _put_string(out, topic, "topic")
    _put_bytes(out, user_data)
    if version >= 1:
        _put_topic_partitions(out, owned_partitions or {})
    if version >= 2:
        _put_int32(out, generation_id, "generation_id")
    if version >= 3:
        if rack_id is None:
            out += _INT16.pack(-1)
        else:
            _put_string(out, rack_id, "rack_id")
    return bytes(out)


def decode_subscription(data: bytes) -> Subscription:
    """Decode a subscription; a version above 3 is read as version 3."""
    r = _Reader(_coerce_bytes(data, "subscription"), "subscription")
    version = r.int16("version")
    if version < 0:
        raise r.fail("version %d is negative" % version)
    topics = [r.string("topic") for _ in range(r.count("topics", 2))]
    user_data = r.nullable_bytes("user_data")
    owned: TopicPartitions = {}
    generation_id = -1
    rack_id = None
    if version >= 1:
        owned = r.topic_partitions("owned_partitions")
    if version >= 2:
        generation_id = r.int32("generation_id")
    if version >= 3:
        rack_id = r.nullable_string("rack_id")
    r.end(version, SUBSCRIPTION_MAX_VERSION)
    return Subscription(version, topics, user_data, owned, generation_id, rack_id)


def encode_assignment(
    assignment: Mapping[str, Iterable[int]],
    user_data: Optional[bytes] = None,
    version: int = 0,
) -> bytes:
    """Encode a member's assignment; topics and partitions in the order given."""
    _check_version(version, ASSIGNMENT_MAX_VERSION, "assignment")
    out = bytearray(_INT16.pack(version))
    _put_topic_partitions(out, assignment)
    _put_bytes(out, user_data)
    return bytes(out)


def decode_assignment(data: bytes) -> Assignment:
    """Decode an assignment; every version so far has the same fields."""
    r = _Reader(_coerce_bytes(data, "assignment"), "assignment")
    version = r.int16("version")
    if version < 0:
        raise r.fail("version %d is negative" % version)
    partitions = r.topic_partitions("assigned_partitions")
    user_data = r.nullable_bytes("user_data")
    r.end(version, ASSIGNMENT_MAX_VERSION)
    return Assignment(version, partitions, user_data)


def encode_sticky_user_data(partitions: Mapping[str, Iterable[int]],
                            generation: int = DEFAULT_GENERATION) -> bytes:
    """Encode the sticky assignor's user data (v1: previous assignment + generation)."""
    out = bytearray()
    _put_topic_partitions(out, partitions)
    _put_int32(out, generation, "generation")
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> Tuple[TopicPartitions, int]:
    """Decode sticky user data to (previous assignment, generation); v0 has generation -1."""
    r = _Reader(_coerce_bytes(data, "sticky user data"), "sticky user data")
    partitions = r.topic_partitions("previous_assignment")
    if r.remaining() == 0:
        return partitions, DEFAULT_GENERATION
    generation = r.int32("generation")
    r.end(1, 1)
    return partitions, generation


def _sorted_assignment(partitions: Mapping[str, Iterable[int]]) -> TopicPartitions:
    return {t: sorted(ps) for t, ps in sorted(partitions.items()) if ps}


def _check_cluster(cluster_partitions: Mapping[str, int]) -> None:
    for topic, count in cluster_partitions.items():
        if not isinstance(count, int) or count < 0:
            raise InvalidArgumentError("partition count of topic %r must be an int >= 0, not %r" % (topic, count))


class PartitionAssignor(abc.ABC):
    """Computes a group's assignment on the leader; remembers this member's share.

    ``assign`` is a pure function of its arguments. ``on_assignment`` and
    ``metadata`` keep per-member state: not thread-safe.
    """

    name: str = ""
    version: int = 0

    def __init__(self) -> None:
        self.owned: TopicPartitions = {}
        self.generation = DEFAULT_GENERATION

    @abc.abstractmethod
    def assign(self, cluster_partitions: Mapping[str, int],
               member_subscriptions: Mapping[str, Subscription]) -> Dict[str, Assignment]:
        """Map every member id to its assignment; every member gets an entry."""

    def user_data(self) -> Optional[bytes]:
        """The user data this member sends with its subscription."""
        return None

    def metadata(self, topics: Iterable[str]) -> bytes:
        """The subscription this member sends: v1, with what it owns now."""
        return encode_subscription(sorted(set(topics)), self.user_data(), self.owned, version=1)

    def on_assignment(self, assignment: Assignment, generation: int = DEFAULT_GENERATION) -> None:
        """Record this member's new assignment (sent back as owned partitions)."""
        self.owned = _sorted_assignment(assignment.partitions)
        self.generation = generation

    def _result(self, members: Iterable[str],
                assigned: Mapping[str, Mapping[str, Iterable[int]]]) -> Dict[str, Assignment]:
        return {m: Assignment(0, _sorted_assignment(assigned.get(m, {}))) for m in members}


class RangeAssignor(PartitionAssignor):
    """Kafka's range assignor: per topic, contiguous ranges over the sorted subscribers.

    With n partitions and k subscribers each gets n // k, and the first
    n % k (by member id) one more: C0 gets t0p0, t0p1 and C1 gets t0p2.
    """

    name = "range"

    def assign(self, cluster_partitions: Mapping[str, int],
               member_subscriptions: Mapping[str, Subscription]) -> Dict[str, Assignment]:
        _check_cluster(cluster_partitions)
        subscribers: Dict[str, List[str]] = {}
        for member in sorted(member_subscriptions):
            for topic in set(member_subscriptions[member].topics):
                subscribers.setdefault(topic, []).append(member)
        assigned: Dict[str, TopicPartitions] = {}
        for topic, members in subscribers.items():
            n = cluster_partitions.get(topic)
            if n is None:
                continue
            per_member, extra = divmod(n, len(members))
            start = 0
            for i, member in enumerate(members):
                length = per_member + (1 if i < extra else 0)
                if length:
                    assigned.setdefault(member, {})[topic] = list(range(start, start + length))
                start += length
        return self._result(member_subscriptions, assigned)


class RoundRobinAssignor(PartitionAssignor):
    """Kafka's round-robin assignor: sorted partitions dealt to sorted members in turn.

    A member not subscribed to a partition's topic is skipped. With identical
    subscriptions member loads differ by at most one.
    """

    name = "roundrobin"

    def assign(self, cluster_partitions: Mapping[str, int],
               member_subscriptions: Mapping[str, Subscription]) -> Dict[str, Assignment]:
        _check_cluster(cluster_partitions)
        members = sorted(member_subscriptions)
        topics_of = {m: set(member_subscriptions[m].topics) for m in members}
        all_topics = sorted({t for ts in topics_of.values() for t in ts if t in cluster_partitions})
        assigned: Dict[str, TopicPartitions] = {}
        turn = 0
        for topic in all_topics:
            for p in range(cluster_partitions[topic]):
                # Some member subscribes to every topic in all_topics, so this stops.
                while topic not in topics_of[members[turn % len(members)]]:
                    turn += 1
                member = members[turn % len(members)]
                assigned.setdefault(member, {}).setdefault(topic, []).append(p)
                turn += 1
        return self._result(members, assigned)


TP = Tuple[str, int]


class StickyAssignor(PartitionAssignor):
    """Kafka's sticky assignor (KIP-54): balanced first, then as few moves as possible.

    Each member's previous assignment comes from its sticky user data
    (previous partitions and generation), or else from its owned partitions.
    A partition claimed by several members goes to the highest generation; on
    a tie nobody keeps it. With identical subscriptions the result is balanced
    within one partition and every member keeps as much of its previous
    assignment as that balance allows (Kafka's constrained algorithm). With
    differing subscriptions previous partitions are kept, new ones go to the
    least-loaded eligible member, and partitions then move one at a time to an
    eligible member with at least two fewer until no such move exists.
    """

    name = "sticky"

    def user_data(self) -> Optional[bytes]:
        if not self.owned and self.generation == DEFAULT_GENERATION:
            return None
        return encode_sticky_user_data(self.owned, self.generation)

    def assign(self, cluster_partitions: Mapping[str, int],
               member_subscriptions: Mapping[str, Subscription]) -> Dict[str, Assignment]:
        _check_cluster(cluster_partitions)
        members = sorted(member_subscriptions)
        topics_of = {m: set(member_subscriptions[m].topics) & set(cluster_partitions) for m in members}
        previous = self._previous_owners(cluster_partitions, member_subscriptions, topics_of)
        owned: Dict[str, List[TP]] = {m: [] for m in members}
        for tp, member in sorted(previous.items()):
            owned[member].append(tp)
        if members and all(topics_of[m] == topics_of[members[0]] for m in members):
            all_tps = [(t, p) for t in sorted(topics_of[members[0]]) for p in range(cluster_partitions[t])]
            final = self._constrained(members, all_tps, owned)
        else:
            final = self._general(members, cluster_partitions, topics_of, owned)
        assigned: Dict[str, TopicPartitions] = {}
        for member, tps in final.items():
            for topic, p in tps:
                assigned.setdefault(member, {}).setdefault(topic, []).append(p)
        return self._result(members, assigned)

    @staticmethod
    def _previous_owners(cluster_partitions: Mapping[str, int],
                         member_subscriptions: Mapping[str, Subscription],
                         topics_of: Mapping[str, Set[str]]) -> Dict[TP, str]:
        """Each still-valid previously owned partition mapped to its one rightful owner."""
        claims: Dict[TP, List[Tuple[int, str]]] = {}
        for member, sub in member_subscriptions.items():
            parts, generation = sub.owned_partitions, sub.generation_id
            if sub.user_data:
                try:
                    parts, generation = decode_sticky_user_data(sub.user_data)
                except InvalidConsumerProtocolError:
                    parts, generation = sub.owned_partitions, sub.generation_id
            for topic, ps in parts.items():
                if topic not in topics_of[member]:
                    continue
                for p in set(ps):
                    if 0 <= p < cluster_partitions[topic]:
                        claims.setdefault((topic, p), []).append((generation, member))
        owners: Dict[TP, str] = {}
        for tp, claimants in claims.items():
            claimants.sort(reverse=True)
            if len(claimants) == 1 or claimants[0][0] > claimants[1][0]:
                owners[tp] = claimants[0][1]
        return owners

    @staticmethod
    def _constrained(members: List[str], all_tps: List[TP],
                     owned: Mapping[str, List[TP]]) -> Dict[str, List[TP]]:
        """Identical subscriptions: keep up to the quota, deal the rest round robin."""
        min_quota, expected_max = divmod(len(all_tps), len(members))
        max_quota = min_quota + (1 if expected_max else 0)
        at_max = 0
        final: Dict[str, List[TP]] = {}
        for member in members:
            mine = owned[member]
            if len(mine) <= min_quota:
                final[member] = list(mine)
            elif at_max < expected_max:
                final[member] = mine[:max_quota]
                at_max += 1
            else:
                final[member] = mine[:min_quota]
        kept = {tp for tps in final.values() for tp in tps}
        unassigned = [tp for tp in all_tps if tp not in kept]
        pos = 0
        under = [m for m in members if len(final[m]) < min_quota]
        while under:
            still_under = []
            for member in under:
                final[member].append(unassigned[pos])
                pos += 1
                if len(final[member]) < min_quota:
                    still_under.append(member)
            under = still_under
        for member in members:
            if pos == len(unassigned):
                break
            if len(final[member]) == min_quota:
                final[member].append(unassigned[pos])
                pos += 1
        return final

    @staticmethod
    def _general(members: List[str], cluster_partitions: Mapping[str, int],
                 topics_of: Mapping[str, Set[str]],
                 owned: Mapping[str, List[TP]]) -> Dict[str, List[TP]]:
        """Differing subscriptions: keep, fill the least loaded, then move to balance."""
        eligible: Dict[str, List[str]] = {}
        for member in members:
            for topic in topics_of[member]:
                eligible.setdefault(topic, []).append(member)
        final = {m: list(owned[m]) for m in members}
        kept = {tp for tps in final.values() for tp in tps}
        unassigned = [(t, p) for t in sorted(eligible) for p in range(cluster_partitions[t])
                      if (t, p) not in kept]
        # Partitions with the fewest possible consumers are placed first.
        unassigned.sort(key=lambda tp: (len(eligible[tp[0]]), tp))
        for tp in unassigned:
            target = min(eligible[tp[0]], key=lambda m: (len(final[m]), m))
            final[target].append(tp)
        moved = True
        while moved:
            moved = False
            for source in sorted(members, key=lambda m: (-len(final[m]), m)):
                load = len(final[source])
                # Newly placed partitions move before previously owned ones.
                previously = set(owned[source])
                for tp in sorted(final[source], key=lambda tp: (tp in previously, tp)):
                    targets = [m for m in eligible[tp[0]] if len(final[m]) <= load - 2]
                    if targets:
                        target = min(targets, key=lambda m: (len(final[m]), m))
                        final[source].remove(tp)
                        final[target].append(tp)
                        moved = True
                        break
                if moved:
                    break
        return final


ASSIGNORS: Dict[str, Type[PartitionAssignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    StickyAssignor.name: StickyAssignor,
}


def assignor_for_name(name: str) -> PartitionAssignor:
    """A new assignor for Kafka's strategy name ("range", "roundrobin", "sticky")."""
    try:
        return ASSIGNORS[name]()
    except KeyError:
        raise ConfigError("unknown partition assignment strategy %r; known: %s"
                          % (name, ", ".join(sorted(ASSIGNORS)))) from None
