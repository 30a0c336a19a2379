"""Which replica a consumer should fetch a partition from: Kafka's ``replica.selector.class`` (KIP-392).

A consumer that names its rack (``client.rack``, sent as the Fetch request's ``rack_id``
from v11) may read a partition from a follower in its own rack rather than cross racks
(or availability zones, which cloud providers bill for) to reach the leader. The leader
decides: for each partition of a consumer's Fetch it asks the broker's selector for the
preferred replica, among the replicas that may serve the fetch (:func:`partition_view`:
in the ISR, on a live broker, holding the fetch offset), and when that is another broker
it answers the partition with ``preferred_read_replica`` set and no records; the
consumer then fetches that partition from there until its metadata max age passes or
that broker answers an error. Without a selector (Kafka's default) the leader never
names another replica.

The selectors are Kafka's, by Kafka's class names; Kafka loads any class implementing
its ``ReplicaSelector`` interface, pylogq knows :class:`RackAwareReplicaSelector` only.
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping, NamedTuple, Optional, Protocol, Tuple

__all__ = [
    "KAFKA_RACK_AWARE_SELECTOR",
    "PartitionView",
    "RackAwareReplicaSelector",
    "ReplicaSelector",
    "ReplicaView",
    "SELECTORS",
    "partition_view",
    "replica_selector",
]

#: Kafka's rack-aware selector, the one ``replica.selector.class`` value pylogq knows.
KAFKA_RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


class ReplicaView(NamedTuple):
    """One replica as a selector sees it (Kafka's ReplicaView): its broker, that broker's rack,
    its log end offset and how long ago it was last caught up with the leader (0 for the leader)."""

    broker_id: int
    rack: Optional[str]
    log_end_offset: int
    time_since_last_caught_up_ms: int


def _most_caught_up(replica: ReplicaView) -> Tuple[int, int, int]:
    """The key that sorts replicas from least to most caught up (Kafka's ReplicaView.comparator):
    the longer log first, then the one caught up more recently, then the higher broker id, so
    that a tie is broken the same way on every call."""
    return replica.log_end_offset, -replica.time_since_last_caught_up_ms, replica.broker_id


class PartitionView(NamedTuple):
    """The replicas that may serve a consumer's fetch of one partition, the leader among them
    (Kafka's PartitionView)."""

    replicas: Tuple[ReplicaView, ...]
    leader: ReplicaView


class ReplicaSelector(Protocol):
    """Chooses the replica a consumer should fetch a partition from (Kafka's ReplicaSelector)."""

    def select(self, topic: str, partition: int, client_rack: str, view: PartitionView) -> Optional[ReplicaView]:
        """The preferred replica of ``view`` for a consumer in ``client_rack`` ("" when it named
        none), or None for no preference (the leader serves)."""
        ...


class RackAwareReplicaSelector:
    """Kafka's RackAwareReplicaSelector: a replica in the consumer's rack, the leader if it is
    there (it is never behind), else the most caught-up one; the leader when the consumer
    names no rack or no replica is in its rack. Stateless, so thread-safe."""

    def select(self, topic: str, partition: int, client_rack: str, view: PartitionView) -> Optional[ReplicaView]:
        if not client_rack:
            return view.leader
        same_rack = [r for r in view.replicas if r.rack == client_rack]
        if not same_rack:
            return view.leader
        if view.leader in same_rack:
            return view.leader
        return max(same_rack, key=_most_caught_up)


#: ``replica.selector.class`` values -> the selector (one shared instance: selectors keep no state).
SELECTORS: Dict[str, ReplicaSelector] = {KAFKA_RACK_AWARE_SELECTOR: RackAwareReplicaSelector()}


def replica_selector(class_name: Optional[str]) -> Optional[ReplicaSelector]:
    """The selector ``replica.selector.class`` names; None when it is unset (leaders only).
    The config has checked the name already (ConfigError on an unknown one)."""
    if class_name is None:
        return None
    return SELECTORS[class_name]


def partition_view(leader_id: int, leader_end: int, isr: Iterable[int], followers: Mapping[int, Tuple[int, int, int]],
                   racks: Mapping[int, Optional[str]], fetch_offset: int, now_ms: int) -> PartitionView:
    """The replicas a leader may send a consumer to for a fetch at ``fetch_offset``.

    ``followers``: broker id -> (log start offset, log end offset, last caught-up time in ms)
    as the leader knows each from its fetches; ``racks``: the live brokers and their racks.
    As Kafka's leader does, a follower qualifies only when it is in the ISR (one out of it
    may lag for ever, and its consumers with it), on a live broker, and holds the fetch
    offset (its log starts at or before it and ends at or after it), so that it can answer
    the consumer's next fetch from where this one asked.
    """
    leader = ReplicaView(leader_id, racks.get(leader_id), leader_end, 0)
    members = set(isr)
    replicas = [leader]
    for broker_id, (log_start, log_end, caught_up_ms) in sorted(followers.items()):
        if broker_id not in members or broker_id not in racks:
            continue
        if not log_start <= fetch_offset <= log_end:
            continue
        replicas.append(ReplicaView(broker_id, racks[broker_id], log_end, max(0, now_ms - caught_up_ms)))
    return PartitionView(tuple(replicas), leader)
