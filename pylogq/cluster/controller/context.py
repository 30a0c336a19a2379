"""The active controller's view of the cluster (Kafka's ControllerContext): its epoch,
the live brokers and those shutting down, every topic's replica assignment and id, every
partition's state as last read or written, the topics being deleted and the partitions
being reassigned.

The controller fills it when it is elected (reading the metadata store) and keeps it
current from the store's watches; the state machines (:mod:`.partition_state_machine`,
:mod:`.replica_state_machine`) decide from it and write their decisions back to it.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Set, Tuple

from ..contract import BrokerRegistration, LeaderAndIsrPartition
from ..zk.client import ControllerEpochZkVersion
from ..zk.data import PartitionState

__all__ = ["ControllerContext", "Reassignment", "TopicPartition"]

TopicPartition = Tuple[str, int]


class Reassignment(NamedTuple):
    """A partition's reassignment under way (KIP-455). Until every ``target`` replica is in
    the ISR the partition's replicas are the target's and the original's together: the
    ``adding`` ones catch up, then the ``removing`` ones stop and are deleted."""

    target: List[int]
    adding: List[int]
    removing: List[int]
    #: Asked for through ``/admin/reassign_partitions`` (removed from it once complete), not the API.
    requested_in_store: bool = False

    @property
    def original(self) -> List[int]:
        """The replicas before the reassignment: the full set less those being added (in the
        full set's order, as Kafka derives them, also after a controller failover)."""
        return [r for r in self.replicas if r not in self.adding]

    @property
    def replicas(self) -> List[int]:
        """The partition's replicas while it moves: the target's, then the original's that are not in it."""
        return self.target + [r for r in self.removing if r not in self.target]


class ControllerContext:
    """What the active controller knows of the cluster (empty while standing by).

    Not thread-safe: owned by the controller's event thread, like the rest of its state.
    """

    def __init__(self) -> None:
        self.epoch: ControllerEpochZkVersion = (0, -1)
        self.live: Dict[int, BrokerRegistration] = {}
        self.shutting_down: Set[int] = set()
        self.assignments: Dict[str, Dict[int, List[int]]] = {}
        self.topic_ids: Dict[str, str] = {}
        self.states: Dict[TopicPartition, PartitionState] = {}
        self.deleting: Set[str] = set()
        self.reassigning: Dict[TopicPartition, Reassignment] = {}
        #: Replicas a completed reassignment removed while their broker was down: deleted
        #: when it registers again (broker -> its partitions).
        self.stray: Dict[int, Set[TopicPartition]] = {}
        #: Replicas of live brokers that are offline: their log directory failed (the broker
        #: answered LeaderAndIsr with KAFKA_STORAGE_ERROR), broker -> its partitions. Forgotten
        #: when the broker goes or registers again (Kafka's replicasOnOfflineDirs).
        self.offline_replicas: Dict[int, Set[TopicPartition]] = {}

    def replica_online(self, broker: int, tp: TopicPartition) -> bool:
        """Whether ``broker``'s replica of ``tp`` can serve: its broker is live and its log
        directory has not failed (Kafka's isReplicaOnline)."""
        return broker in self.live and tp not in self.offline_replicas.get(broker, ())

    def offline_on(self, tp: TopicPartition, replicas: List[int]) -> Set[int]:
        """The live brokers among ``replicas`` whose replica of ``tp`` is in a failed log directory."""
        return {r for r in replicas if tp in self.offline_replicas.get(r, ())}

    def clear(self) -> None:
        """Forget the cluster (the controller epoch stays): resigned, or about to read it again."""
        self.live.clear()
        self.shutting_down.clear()
        self.assignments.clear()
        self.topic_ids.clear()
        self.states.clear()
        self.deleting.clear()
        self.reassigning.clear()
        self.stray.clear()
        self.offline_replicas.clear()

    def offline_partitions(self) -> List[TopicPartition]:
        """Partitions with no state yet or no live leader (deleting topics aside)."""
        out = []
        for topic, parts in self.assignments.items():
            if topic in self.deleting:
                continue
            for p in parts:
                state = self.states.get((topic, p))
                if state is None or not self.replica_online(state.leader, (topic, p)):
                    out.append((topic, p))
        return out

    def request_state(self, tp: TopicPartition, state: PartitionState, is_new: bool = False) -> LeaderAndIsrPartition:
        """A partition's state as LeaderAndIsr and UpdateMetadata carry it: with its replicas, and
        those of them that are offline (their broker is not live, or their log directory failed)."""
        replicas = self.assignments.get(tp[0], {}).get(tp[1], [])
        return LeaderAndIsrPartition(tp[0], tp[1], state.controller_epoch, state.leader, state.leader_epoch,
                                     list(state.isr), state.partition_epoch, list(replicas),
                                     [r for r in replicas if not self.replica_online(r, tp)], is_new)
