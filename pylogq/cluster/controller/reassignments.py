"""Partition reassignment, as Kafka 2.4+ carries it out (KIP-455; KafkaController's
``onPartitionReassignment``).

A partition moving from its original replicas (ORS) to a target set (TRS) goes through two
phases, each a write of the topic's znode and requests to the brokers:

1. Its replicas become TRS and ORS together (RS, the target's first), with the replicas
   being added (AR = TRS - ORS) and removed (RR = ORS - TRS) recorded beside them in the
   topic's znode (``adding_replicas``, ``removing_replicas``). The leader epoch goes up and
   every replica of RS hears the new set: the adding ones start following and catching up.
2. Once every target replica is in the ISR (the leader added them, in the partition state's
   znode, which the controller watches), the replicas become TRS alone: the leader moves to
   the first live in-sync target replica if it is being removed, the removed ones leave the
   ISR in the same write, are told to stop and delete their logs, and the znode forgets the
   reassignment. A removed replica whose broker is down is deleted when it registers again.

The topic's znode is the reassignment's record: a new controller finds the partitions
whose znode lists adding or removing replicas and carries them on (phase 1 again, then 2
once the ISR has the target). A reassignment asked for while another is under way starts
from the original replicas of the first (so AR and RR are always relative to ORS); a
cancellation is a reassignment back to them. ``/admin/reassign_partitions`` is read too,
for tools that write it: its partitions are reassigned as the API's, and each is removed
from the znode once complete (the znode goes with the last one).
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from ... import errors
from ..contract import PartitionOutcome
from ..zk.client import KafkaZkClient, Watcher
from ..zk.data import PartitionState, TopicAssignment
from .context import ControllerContext, Reassignment, TopicPartition
from .partition_state_machine import PartitionStateMachine
from .request_batch import RequestBatch

__all__ = ["Reassignments"]

log = logging.getLogger("pylogq.controller")

class Reassignments:
    """The reassignments of the partitions in ``context``, carried out through ``zk`` and the
    partition state machine. ``state_watcher(tp)`` is the watcher of a reassigning partition's
    state znode, ``request_watcher()`` that of ``/admin/reassign_partitions``: the controller's,
    which call :meth:`state_changed` and :meth:`store_request_changed` on its event thread.

    Not thread-safe: called on the controller's event thread only.
    """

    def __init__(self, context: ControllerContext, zk: KafkaZkClient, partitions: PartitionStateMachine,
                 state_watcher: Callable[[TopicPartition], Watcher], request_watcher: Callable[[], Watcher]) -> None:
        self.context = context
        self.zk = zk
        self._partitions = partitions
        self._state_watcher = state_watcher
        self._request_watcher = request_watcher

    # -- asking -------------------------------------------------------------------------

    def alter(self, targets: Mapping[TopicPartition, Optional[List[int]]], batch: RequestBatch,
              requested_in_store: bool = False) -> Dict[TopicPartition, PartitionOutcome]:
        """Start (or replace) each partition's reassignment to its target replicas; None
        cancels one under way (back to its original replicas). -> each partition's outcome;
        those that fail change nothing."""
        out: Dict[TopicPartition, PartitionOutcome] = {}
        started: List[Tuple[TopicPartition, List[int], Reassignment]] = []
        for tp, target in targets.items():
            outcome = self._validate(tp, target)
            if outcome is not None:
                out[tp] = outcome
                continue
            if target is None:
                target = self.context.reassigning[tp].original
                log.info("controller: reassignment of %s-%d cancelled: back to %s", tp[0], tp[1], target)
            started.append(self._begin(tp, list(target), requested_in_store))
            out[tp] = (0, None)
        for topic in dict.fromkeys(tp[0] for tp, _, _ in started):  # each topic's znode once
            self._write_topic(topic)
        for tp, before, moving in started:
            self._proceed(tp, before, moving, batch)
        return out

    def _validate(self, tp: TopicPartition, target: Optional[List[int]]) -> Optional[PartitionOutcome]:
        replicas = self.context.assignments.get(tp[0], {}).get(tp[1])
        if replicas is None or tp[0] in self.context.deleting:
            return errors.UnknownTopicOrPartitionError.code, "unknown partition %s-%d" % tp
        if target is None:
            if tp not in self.context.reassigning:
                return errors.NoReassignmentInProgressError.code, "no reassignment of %s-%d is under way" % tp
            return None
        bad = errors.InvalidReplicationAssignmentError.code
        if not target:
            return bad, "the target replicas of %s-%d are empty" % tp
        if len(set(target)) != len(target):
            return bad, "the target replicas of %s-%d name a broker twice: %s" % (tp[0], tp[1], target)
        unknown = sorted(r for r in target if r not in self.context.live)
        if unknown:
            return bad, "the target replicas of %s-%d name brokers that are not alive: %s" % (tp[0], tp[1], unknown)
        # A replica an earlier reassignment was adding, and that leads now (its leader
        # failed), can only be dropped where another in-sync replica can take over.
        state = self.context.states.get(tp)
        moving = self.context.reassigning.get(tp)
        if state is not None and moving is not None and state.leader in moving.adding and \
                state.leader not in target + moving.original and \
                not [r for r in target + moving.original if r in state.isr and r in self.context.live]:
            return (errors.ReassignmentInProgressError.code,
                    "%s-%d is led by %d, which the reassignment under way added, and no other in-sync replica "
                    "can take over: try again once the ISR has another" % (tp[0], tp[1], state.leader))
        return None

    def listing(self, tps: Optional[Iterable[TopicPartition]] = None) -> Dict[TopicPartition, Reassignment]:
        """The reassignments under way (of ``tps`` only, when given)."""
        if tps is None:
            return dict(self.context.reassigning)
        return {tp: self.context.reassigning[tp] for tp in tps if tp in self.context.reassigning}

    # -- carrying out -------------------------------------------------------------------

    def _begin(self, tp: TopicPartition, target: List[int], requested_in_store: bool
               ) -> Tuple[TopicPartition, List[int], Reassignment]:
        """Phase 1 in the context (the topic's znode is written next): -> the partition, its
        replicas before, and its reassignment."""
        current = self.context.reassigning.get(tp)
        original = current.original if current is not None else list(self.context.assignments[tp[0]][tp[1]])
        adding = [r for r in target if r not in original]
        removing = [r for r in original if r not in target]
        was_in_store = current is not None and current.requested_in_store
        moving = Reassignment(target, adding, removing, requested_in_store)
        before = self.context.assignments[tp[0]][tp[1]]
        self.context.reassigning[tp] = moving
        self.context.assignments[tp[0]][tp[1]] = moving.replicas
        if was_in_store and not requested_in_store:
            self._drop_from_store_request([tp])  # the API's reassignment replaces the tool's
        log.info("controller: reassigning %s-%d from %s to %s (adding %s, removing %s)", tp[0], tp[1], original,
                 target, adding, removing)
        return tp, before, moving

    def _proceed(self, tp: TopicPartition, before: List[int], moving: Reassignment, batch: RequestBatch) -> None:
        """Phase 1 on the brokers, once the znode has it; or phase 2 at once when complete."""
        self._watch_state(tp)
        # Replicas an earlier reassignment was adding that this one does not keep go at once.
        unneeded = [r for r in before if r not in moving.replicas]
        if unneeded:
            self._remove(tp, unneeded, moving.replicas, batch)
        if self._complete(tp):
            self._finish(tp, moving, batch)
        else:
            self._restate(tp, batch)

    def resume(self, batch: RequestBatch) -> None:
        """A new controller carries on the reassignments its topics' znodes record, then those
        of ``/admin/reassign_partitions`` not already under way."""
        for tp, moving in sorted(self.context.reassigning.items()):
            self._watch_state(tp)
            log.info("controller: carrying on the reassignment of %s-%d to %s", tp[0], tp[1], moving.target)
            if self._complete(tp):
                self._finish(tp, moving, batch)
            else:
                self._restate(tp, batch)
        self.store_request_changed(batch)

    def store_request_changed(self, batch: RequestBatch) -> None:
        """``/admin/reassign_partitions`` was created or changed (or a controller took over):
        reassign what it asks for that is not already under way with the same target."""
        request = self.zk.get_reassignment_request(watch=self._request_watcher())
        if not request:
            return
        wanted: Dict[TopicPartition, Optional[List[int]]] = {}
        for tp, target in request.items():
            moving = self.context.reassigning.get(tp)
            if moving is None or moving.target != target:
                wanted[tp] = target
            elif not moving.requested_in_store:
                self.context.reassigning[tp] = moving._replace(requested_in_store=True)
        failed = [tp for tp, (code, _) in self.alter(wanted, batch, requested_in_store=True).items() if code]
        if failed:
            log.warning("controller: %s asks for reassignments that cannot be made: %s; they are dropped from it",
                        "/admin/reassign_partitions", failed)
            self._drop_from_store_request(failed)

    def isr_changed(self, tp: TopicPartition, batch: RequestBatch) -> None:
        """A reassigning partition's state changed: phase 2 once the ISR holds the target."""
        moving = self.context.reassigning.get(tp)
        if moving is not None and self._complete(tp):
            self._finish(tp, moving, batch)

    def state_changed(self, tp: TopicPartition, batch: RequestBatch) -> None:
        """The watch on a reassigning partition's state znode fired: read it (watching again)."""
        if tp not in self.context.reassigning or tp[0] in self.context.deleting:
            return
        state = self.zk.get_partition_state(*tp, watch=self._state_watcher(tp))
        if state is not None:
            self.context.states[tp] = state
            batch.update_metadata.add(tp)
            self.isr_changed(tp, batch)

    def topic_deleted(self, topic: str) -> None:
        """A topic being deleted takes its reassignments with it."""
        gone = [tp for tp in self.context.reassigning if tp[0] == topic]
        for tp in gone:
            del self.context.reassigning[tp]
        for tps in self.context.stray.values():
            tps.difference_update([tp for tp in tps if tp[0] == topic])

    def broker_started(self, broker: int, batch: RequestBatch) -> None:
        """A broker that was down when a reassignment removed its replicas deletes them now."""
        for tp in sorted(self.context.stray.pop(broker, ())):
            state = self.context.states.get(tp)
            batch.stop_replica_to(broker, tp, state.leader_epoch if state is not None else -1, True)

    def _complete(self, tp: TopicPartition) -> bool:
        """Every target replica is in the ISR, and one of them can lead (alive, not shutting down)."""
        state = self.context.states.get(tp)
        moving = self.context.reassigning[tp]
        return state is not None and set(moving.target) <= set(state.isr) and \
            any(r in self.context.live and r not in self.context.shutting_down for r in moving.target)

    def _restate(self, tp: TopicPartition, batch: RequestBatch) -> None:
        """Phase 1's word to the brokers: a new leader epoch, and every replica of the full set
        told of it (the adding ones start following)."""
        written = self._partitions.update_state(
            tp, lambda s: None if s.leader < 0 else s._replace(leader_epoch=s.leader_epoch + 1))
        state = written or self.context.states.get(tp)
        if state is None:
            return
        replicas = self.context.assignments[tp[0]][tp[1]]
        batch.leader_and_isr_to([r for r in replicas if r in self.context.live],
                                self.context.request_state(tp, state, is_new=written is not None))

    def _finish(self, tp: TopicPartition, moving: Reassignment, batch: RequestBatch) -> None:
        """Phase 2: the replicas become the target alone (every other replica of the full set,
        and any an earlier reassignment added, is removed)."""
        target = list(moving.target)
        unneeded = [r for r in self.context.assignments[tp[0]][tp[1]] if r not in target]
        self.context.reassigning.pop(tp, None)
        self.context.assignments[tp[0]][tp[1]] = target
        state = self._remove(tp, unneeded, target, batch, restate=True)
        self._write_topic(tp[0])
        if moving.requested_in_store:
            self._drop_from_store_request([tp])
        log.info("controller: reassignment of %s-%d complete: replicas %s, leader %s", tp[0], tp[1], target,
                 state.leader if state is not None else None)

    def _remove(self, tp: TopicPartition, unneeded: List[int], keep: List[int], batch: RequestBatch,
                restate: bool = False) -> Optional[PartitionState]:
        """``unneeded`` replicas leave the ISR (a leader among them hands over to the first live
        in-sync replica of ``keep``), in one write with a new leader epoch that ``keep``'s
        replicas hear, then stop and delete their logs; those on brokers that are down do so
        when they register again. ``restate``: the epoch goes up even with nothing removed
        (the replica set changed). -> the partition's state now."""
        def settle(state: PartitionState) -> Optional[PartitionState]:
            isr = [r for r in state.isr if r not in unneeded]
            leader = state.leader
            if leader in unneeded or leader not in self.context.live:
                eligible = [r for r in keep if r in isr and r in self.context.live
                            and r not in self.context.shutting_down]
                leader = eligible[0] if eligible else state.leader
            if not restate and isr == state.isr and leader == state.leader:
                return None
            return PartitionState(leader, state.leader_epoch + 1, isr or [leader], self.context.epoch[0])

        written = self._partitions.update_state(tp, settle)
        state = written or self.context.states.get(tp)
        if state is not None and written is not None:
            batch.leader_and_isr_to([r for r in keep if r in self.context.live], self.context.request_state(tp, state))
        for r in unneeded:
            if r in self.context.live:
                batch.stop_replica_to(r, tp, state.leader_epoch if state is not None else -1, True)
            else:
                self.context.stray.setdefault(r, set()).add(tp)
        batch.update_metadata.add(tp)
        return state

    # -- the store ----------------------------------------------------------------------

    def _write_topic(self, topic: str) -> None:
        """The topic's znode as the context has it: replicas, and the reassignments under way."""
        moving = {tp[1]: r for tp, r in self.context.reassigning.items() if tp[0] == topic}
        self.zk.set_topic_assignment(topic, TopicAssignment(
            {p: list(r) for p, r in self.context.assignments[topic].items()}, self.context.topic_ids.get(topic),
            {p: r.adding for p, r in moving.items() if r.adding},
            {p: r.removing for p, r in moving.items() if r.removing}), controller=self.context.epoch)

    def _watch_state(self, tp: TopicPartition) -> None:
        state = self.zk.get_partition_state(*tp, watch=self._state_watcher(tp))
        if state is not None:
            self.context.states[tp] = state

    def _drop_from_store_request(self, tps: List[TopicPartition]) -> None:
        request = self.zk.get_reassignment_request()
        if request is None:
            return
        left = {tp: r for tp, r in request.items() if tp not in tps}
        if len(left) != len(request):
            self.zk.set_reassignment_request(left, controller=self.context.epoch)
