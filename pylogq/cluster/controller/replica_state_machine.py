"""The controller's replica state machine: which replicas are told of their partition's
state, which stop, and which are being deleted (Kafka's ReplicaStateMachine, with the
replica deletion states its TopicDeletionManager drives).

:class:`ReplicaStateMachine` moves replicas online (the replicas on a broker that
registered hear their partitions' states), offline (a broker shutting down stops the
replicas it follows), and through deletion: a replica of a topic being deleted is asked
to stop and delete its log (deletion started) on a live broker, and is deleted once that
broker answers without error (deletion successful); one that failed, or was on a broker
that is down, is asked again when its broker registers again. The topic's znodes go once
every replica is deleted, which the controller checks with :meth:`ReplicaStateMachine.all_deleted`.
"""

from __future__ import annotations

import logging
from typing import AbstractSet, Dict, Iterable, Set, Tuple

from .context import ControllerContext, TopicPartition
from .request_batch import RequestBatch

__all__ = ["EPOCH_DURING_DELETE", "ReplicaStateMachine"]

log = logging.getLogger("pylogq.controller")

#: StopReplica's leader epoch for a partition being deleted.
EPOCH_DURING_DELETE = -2


class ReplicaStateMachine:
    """The replica transitions of the partitions in ``context``, added to request batches.

    Not thread-safe: called on the controller's event thread only.
    """

    def __init__(self, context: ControllerContext) -> None:
        self.context = context
        #: Replicas of topics being deleted: asked to delete, and known deleted.
        self._awaiting_delete: Dict[str, Set[Tuple[TopicPartition, int]]] = {}
        self._deleted_replicas: Dict[str, Set[Tuple[TopicPartition, int]]] = {}

    def clear(self) -> None:
        """Forget every deletion under way (the controller resigned, or reads the cluster again)."""
        self._awaiting_delete.clear()
        self._deleted_replicas.clear()

    def online(self, brokers: AbstractSet[int], batch: RequestBatch) -> None:
        """The replicas on ``brokers`` (registered just now) learn their partitions' states."""
        for tp, state in self.context.states.items():
            if tp[0] in self.context.deleting:
                continue
            replicas = self.context.assignments.get(tp[0], {}).get(tp[1], [])
            here = [r for r in replicas if r in brokers]
            if here:
                batch.leader_and_isr_to(here, self.context.request_state(tp, state))

    def offline(self, broker: int, tps: Iterable[TopicPartition], batch: RequestBatch) -> None:
        """``broker``'s replicas of these partitions stop (keeping their logs)."""
        for tp in tps:
            batch.stop_replica_to(broker, tp, self.context.states[tp].leader_epoch, False)

    def start_deletion(self, topic: str, batch: RequestBatch) -> None:
        """Ask every live replica of ``topic`` not yet asked to stop and delete its log."""
        awaiting = self._awaiting_delete.setdefault(topic, set())
        for p, replicas in self.context.assignments[topic].items():
            for r in replicas:
                key = ((topic, p), r)
                if r in self.context.live and key not in awaiting:
                    awaiting.add(key)
                    batch.stop_replica_to(r, (topic, p), EPOCH_DURING_DELETE, True)

    def replicas_stopped(self, broker: int, response: Tuple[int, Dict[TopicPartition, int]]) -> Set[str]:
        """A broker's answer to StopReplica: the replicas it deleted are deleted; -> the topics it
        answered for."""
        code, per_partition = response
        for tp, c in per_partition.items():
            awaiting = self._awaiting_delete.get(tp[0])
            if awaiting is None:
                continue
            if code == 0 and c == 0:
                awaiting.discard((tp, broker))
                self._deleted_replicas.setdefault(tp[0], set()).add((tp, broker))
            else:
                log.warning("controller: broker %d could not delete %s-%d (error %d/%d); it is retried when the "
                            "broker registers again", broker, tp[0], tp[1], code, c)
        return {tp[0] for tp in per_partition}

    def all_deleted(self, topic: str) -> bool:
        """Whether every replica of ``topic`` is known deleted."""
        done = self._deleted_replicas.get(topic, set())
        every = {((topic, p), r) for p, replicas in self.context.assignments[topic].items() for r in replicas}
        return every <= done

    def forget(self, topic: str) -> None:
        """The topic is deleted: its replicas' deletion states go."""
        self._awaiting_delete.pop(topic, None)
        self._deleted_replicas.pop(topic, None)
