"""What a broker of a cluster knows of the whole cluster: live brokers, the controller and every
partition's leader and ISR (Kafka's ZkMetadataCache).

The controller keeps it current with UpdateMetadata requests: each carries every live
broker and the partitions whose state changed (a partition being deleted comes with
the leader -2 and leaves the cache). Metadata, FindCoordinator and DescribeCluster
answer clients from it, so every broker answers alike, whichever partitions it hosts.
"""

from __future__ import annotations

import threading
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..contract import LEADER_DURING_DELETE, BrokerRegistration, LeaderAndIsrPartition, UpdateMetadataRequest

__all__ = ["MetadataCache", "MetadataSnapshot"]

class MetadataSnapshot(NamedTuple):
    """One consistent view of the cluster; never changed once published."""

    controller_id: int
    controller_epoch: int
    brokers: Dict[int, BrokerRegistration]
    partitions: Dict[str, Dict[int, LeaderAndIsrPartition]]
    topic_ids: Dict[str, str]


_EMPTY = MetadataSnapshot(-1, -1, {}, {}, {})


class MetadataCache:
    """The cluster as the controller last described it to this broker.

    Copy-on-write: :meth:`update` builds a new :class:`MetadataSnapshot` and publishes it
    with one assignment; readers take :attr:`snapshot` without a lock and see one
    consistent state. Updates are serialized by a lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.snapshot: MetadataSnapshot = _EMPTY

    def update(self, request: UpdateMetadataRequest) -> List[Tuple[str, int]]:
        """Apply an UpdateMetadata; -> the partitions it deleted."""
        with self._lock:
            old = self.snapshot
            partitions = {t: dict(ps) for t, ps in old.partitions.items()}
            topic_ids = dict(old.topic_ids)
            topic_ids.update(request.topic_ids)
            deleted = []
            for state in request.partitions:
                if state.leader == LEADER_DURING_DELETE:
                    by_topic = partitions.get(state.topic)
                    if by_topic is not None and by_topic.pop(state.partition, None) is not None:
                        deleted.append((state.topic, state.partition))
                        if not by_topic:
                            del partitions[state.topic]
                            topic_ids.pop(state.topic, None)
                else:
                    partitions.setdefault(state.topic, {})[state.partition] = state
            self.snapshot = MetadataSnapshot(
                request.controller_id, request.controller_epoch,
                {b.broker_id: b for b in request.live_brokers}, partitions,
                {t: i for t, i in topic_ids.items() if t in partitions})
            return deleted

    # -- reads (lock-free) ----------------------------------------------------------------

    @property
    def controller_id(self) -> int:
        return self.snapshot.controller_id

    def live_brokers(self) -> Dict[int, BrokerRegistration]:
        return self.snapshot.brokers

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.snapshot.brokers

    def topics(self) -> List[str]:
        return sorted(self.snapshot.partitions)

    def has_topic(self, topic: str) -> bool:
        return topic in self.snapshot.partitions

    def partitions_of(self, topic: str) -> Dict[int, LeaderAndIsrPartition]:
        return self.snapshot.partitions.get(topic, {})

    def partition(self, topic: str, partition: int) -> Optional[LeaderAndIsrPartition]:
        return self.snapshot.partitions.get(topic, {}).get(partition)

    def leader_of(self, topic: str, partition: int) -> int:
        """The leader's broker id, -1 when the partition has none or is unknown."""
        state = self.partition(topic, partition)
        return state.leader if state is not None else -1

    def topic_id(self, topic: str) -> Optional[str]:
        return self.snapshot.topic_ids.get(topic)
