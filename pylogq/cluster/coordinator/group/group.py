"""One consumer group's state (Kafka's GroupMetadata and MemberMetadata) and its states.

Group states, as Kafka's::

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader syncs--> Stable
    Stable / CompletingRebalance --join of a new or changed member, leave, session expiry--> PreparingRebalance
    PreparingRebalance --every member gone--> Empty
    Empty --delete--> Dead

The coordinator (:mod:`.coordinator`) drives the transitions; the metadata manager
(:mod:`.metadata_manager`) builds groups from ``__consumer_offsets`` and writes them back.
Nothing here locks: every object is mutated only under the coordinator's lock.
"""

from __future__ import annotations

import struct
import time
from typing import Dict, Iterable, List, Optional, Set, Tuple

from ....errors import FencedInstanceIdError, InconsistentGroupProtocolError, UnknownMemberIdError
from ...contract import JoinResult, SyncResult
from . import offsets_schema as schema

__all__ = [
    "COMPLETING_REBALANCE",
    "CONSUMER_PROTOCOL_TYPE",
    "DEAD",
    "EMPTY",
    "GroupMetadata",
    "MemberMetadata",
    "PREPARING_REBALANCE",
    "Partition",
    "STABLE",
    "now_ms",
    "subscribed_topics",
]

#: A topic partition, as the group's offsets are keyed.
Partition = Tuple[str, int]
#: The error code of success.
NONE = 0

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

# Kafka's GroupMetadata.validPreviousStates: a transition from any other state is a bug.
VALID_PREVIOUS = {
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    EMPTY: {PREPARING_REBALANCE},
}

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> Set[str]:
    """The topics of a consumer protocol subscription (every version starts with
    ``version int16, topics [string]``); empty when it does not parse, as Kafka then
    knows no subscription."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, set()
        for _ in range(count):
            (size,) = struct.unpack_from(">h", metadata, pos)
            if size < 0 or pos + 2 + size > len(metadata):
                return set()
            topics.add(bytes(metadata[pos + 2:pos + 2 + size]).decode("utf-8"))
            pos += 2 + size
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()


def now_ms() -> int:
    return int(time.time() * 1000)


class MemberMetadata:
    """A group member (Kafka's MemberMetadata); mutated only under the coordinator's lock."""

    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "awaiting_join",
        "join_result",
        "awaiting_sync",
        "sync_result",
        "heartbeat_deadline",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: Optional[str],
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: List[Tuple[str, bytes]],
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.awaiting_join = False
        self.join_result: Optional[JoinResult] = None
        self.awaiting_sync = False
        self.sync_result: Optional[SyncResult] = None
        self.heartbeat_deadline = 0.0

    def metadata(self, protocol: Optional[str]) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def vote(self, candidates: Set[str]) -> str:
        """The first protocol in this member's preference order that every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise InconsistentGroupProtocolError("member %r supports none of %r" % (self.member_id, sorted(candidates)))

    def kept_alive(self) -> bool:
        """A member blocked in a join or a sync cannot heartbeat: its session does not run."""
        return self.awaiting_join or self.awaiting_sync


class GroupMetadata:
    """One group's state (Kafka's GroupMetadata); mutated only under the coordinator's lock."""

    def __init__(self, group_id: str, state: str = EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms()
        self.protocol_type: Optional[str] = None
        self.protocol_name: Optional[str] = None
        self.generation_id = 0
        self.leader_id: Optional[str] = None
        self.members: Dict[str, MemberMetadata] = {}
        # Member ids handed out with MEMBER_ID_REQUIRED, by the deadline of their second join.
        self.pending: Dict[str, float] = {}
        self.offsets: Dict[Partition, schema.OffsetCommitValue] = {}
        # Commits written and not yet replicated, by partition: (the write's sequence number,
        # the value). OffsetFetch does not see them (Kafka's pendingOffsetCommits).
        self.pending_offsets: Dict[Partition, Tuple[int, schema.OffsetCommitValue]] = {}
        # The write sequence number of each committed offset (later writes win).
        self.offset_writes: Dict[Partition, int] = {}
        # Transactional offset commits written and not yet decided, by producer id then
        # partition: (the write's sequence number, the value). OffsetFetch does not see them
        # until the producer's COMMIT marker; its ABORT marker drops them (Kafka's
        # pendingTransactionalOffsetCommits).
        self.pending_txn_offsets: Dict[int, Dict[Partition, Tuple[int, schema.OffsetCommitValue]]] = {}
        self.join_deadline: Optional[float] = None
        self.initial_delay_active = False
        self.initial_delay_remaining_ms = 0
        self.new_member_added = False

    def has_pending_txn_offset(self, tp: Partition) -> bool:
        """Whether a transaction not yet decided holds an offset of ``tp`` (OffsetFetch's
        require_stable answers UNSTABLE_OFFSET_COMMIT for it)."""
        return any(tp in offsets for offsets in self.pending_txn_offsets.values())

    def drop_pending_txn_offsets(self, partitions: Iterable[Partition]) -> None:
        """Forget the undecided transactional offsets of these partitions (their tombstones
        are written): a later COMMIT marker does not bring them back."""
        for tp in partitions:
            for producer_id in list(self.pending_txn_offsets):
                offsets = self.pending_txn_offsets[producer_id]
                offsets.pop(tp, None)
                if not offsets:
                    del self.pending_txn_offsets[producer_id]

    def unused(self) -> bool:
        """Whether nothing of the group is left to keep: no member, no committed, pending or
        transactional offset, an Empty group with no protocol (Kafka keeps a group while a
        transaction holds offsets of it)."""
        return not self.members and not self.pending and not self.offsets and not self.pending_offsets \
            and not self.pending_txn_offsets and self.state == EMPTY and self.protocol_type is None

    def transition(self, state: str) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise AssertionError("group %r cannot go from %s to %s" % (self.group_id, self.state, state))
        self.state = state
        self.state_timestamp = now_ms()

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> Set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: List[Tuple[str, bytes]]) -> bool:
        """Kafka's supportsProtocols: an empty group takes any; otherwise one protocol all support."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        candidates = self.candidate_protocols()
        return any(name in candidates for name, _ in protocols)

    def select_protocol(self) -> str:
        """The protocol that gets the most votes; ties go to the leader's preference order."""
        candidates = self.candidate_protocols()
        votes: Dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        order = self.members[self.leader_id].protocols if self.leader_id in self.members else []
        for name, _ in order:
            if votes.get(name) == best:
                return name
        return min(name for name, n in votes.items() if n == best)

    def all_joined(self) -> bool:
        """Kafka's hasAllMembersJoined: a pending member holds the join phase open too."""
        return not self.pending and all(m.awaiting_join for m in self.members.values())

    def static_member_id(self, group_instance_id: Optional[str]) -> Optional[str]:
        """The member id that holds ``group_instance_id`` now (None if none does)."""
        if group_instance_id is None:
            return None
        for m in self.members.values():
            if m.group_instance_id == group_instance_id:
                return m.member_id
        return None

    def validate_member(self, member_id: str, group_instance_id: Optional[str]) -> int:
        """Kafka's ClassicGroup.validateMember: a static member must hold its instance id
        (else FENCED_INSTANCE_ID: another process took it over), and the member must exist."""
        if group_instance_id is not None:
            current = self.static_member_id(group_instance_id)
            if current is None:
                return UnknownMemberIdError.code
            if current != member_id:
                return FencedInstanceIdError.code
        if member_id not in self.members:
            return UnknownMemberIdError.code
        return NONE
