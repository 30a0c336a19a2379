"""The requests one controller decision sends, gathered per broker and then sent together
(Kafka's ControllerBrokerRequestBatch): LeaderAndIsr to the replicas of a changed
partition, UpdateMetadata to every live broker (for the partitions named, or all of them),
StopReplica to replicas that stop. The controller sends a batch through its channel
(:mod:`.channel`) once the decision is made.
"""

from __future__ import annotations

from typing import Dict, Iterable, Set, Tuple

from ..contract import LeaderAndIsrPartition
from .context import TopicPartition

__all__ = ["RequestBatch"]


class RequestBatch:
    """The requests one decision sends, gathered per broker then sent together
    (Kafka's ControllerBrokerRequestBatch)."""

    def __init__(self) -> None:
        self.leader_and_isr: Dict[int, Dict[TopicPartition, LeaderAndIsrPartition]] = {}
        self.update_metadata: Set[TopicPartition] = set()
        self.update_metadata_all = False
        self.stop_replica: Dict[int, Dict[TopicPartition, Tuple[int, bool]]] = {}

    def leader_and_isr_to(self, brokers: Iterable[int], state: LeaderAndIsrPartition) -> None:
        for b in brokers:
            self.leader_and_isr.setdefault(b, {})[(state.topic, state.partition)] = state
        self.update_metadata.add((state.topic, state.partition))

    def stop_replica_to(self, broker: int, tp: TopicPartition, epoch: int, delete: bool) -> None:
        self.stop_replica.setdefault(broker, {})[tp] = (epoch, delete)
