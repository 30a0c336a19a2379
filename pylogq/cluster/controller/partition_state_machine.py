"""The controller's partition state machine: each partition's leader and ISR (Kafka's
PartitionStateMachine with its leader election strategies).

:class:`PartitionStateMachine` gives new partitions their first leader, and brings
existing ones in line with the live brokers: ISR members that are gone leave the ISR,
and a leader that is gone is replaced by a clean election among the live ISR (an unclean
one when the topic allows it), or the partition goes offline; the automatic leader
rebalance gives partitions back to their preferred leader. Each decision is written
to the metadata store under the controller epoch's version, made again on the state read
back when a leader changed its ISR meanwhile, kept in the
:class:`~pylogq.cluster.controller.context.ControllerContext` and added to the request
batch for the partition's live replicas.
"""

from __future__ import annotations

import logging
from typing import AbstractSet, Callable, Dict, Iterable, List, Optional

from ... import errors
from ..zk.client import KafkaZkClient
from ..zk.data import NO_LEADER, PartitionState, partition_state_path
from .context import ControllerContext, TopicPartition
from .request_batch import RequestBatch

__all__ = ["STATE_WRITE_ATTEMPTS", "PartitionStateMachine"]

log = logging.getLogger("pylogq.controller")

#: How often a partition's state write is decided again on the state read back after a
#: conflicting write (a leader changing its ISR meanwhile) before the event gives up.
STATE_WRITE_ATTEMPTS = 10


class PartitionStateMachine:
    """Leader elections and ISR changes of the partitions in ``context``, written through ``zk``.

    Not thread-safe: called on the controller's event thread only. ``unclean(topic)``
    says whether the topic allows an unclean leader election.
    """

    def __init__(self, context: ControllerContext, zk: KafkaZkClient, unclean: Callable[[str], bool]) -> None:
        self.context = context
        self.zk = zk
        self._unclean = unclean

    def online(self, tps: Iterable[TopicPartition], batch: RequestBatch) -> None:
        """Give each partition a leader where a replica is eligible: new partitions their first
        live replica, others a live ISR member (:meth:`repair`)."""
        new: Dict[TopicPartition, PartitionState] = {}
        tps = list(tps)
        existing = [tp for tp in tps if tp in self.context.states]
        self.refresh(existing)
        self.repair(existing, batch)
        for tp in tps:
            replicas = self.context.assignments.get(tp[0], {}).get(tp[1])
            if replicas is None or tp in self.context.states:
                continue
            live = [r for r in replicas if r in self.context.live and r not in self.context.shutting_down]
            if not live:
                log.warning("controller: no live replica of new partition %s-%d (replicas %s)", tp[0], tp[1],
                            replicas)
                continue
            new[tp] = PartitionState(live[0], 0, live, self.context.epoch[0])
        if new:
            written = self.zk.create_partition_states(new, self.context.epoch)
            for tp, state in written.items():
                self.context.states[tp] = state
                replicas = self.context.assignments[tp[0]][tp[1]]
                batch.leader_and_isr_to([r for r in replicas if r in self.context.live],
                                        self.context.request_state(tp, state, is_new=True))
                log.info("controller: new partition %s-%d led by %d, ISR %s", tp[0], tp[1], state.leader, state.isr)
            created = [tp for tp in new if tp not in written]  # by an earlier controller: read it
            self.refresh(created)
            self.repair([tp for tp in created if tp in self.context.states], batch)

    def _bounced(self, broker: int, state: PartitionState) -> bool:
        """Whether ``broker`` registered after ``state`` was written: it restarted since, and may
        have come back without the records the state counts it for (an empty disk)."""
        reg = self.context.live.get(broker)
        return reg is not None and state.zxid >= 0 and reg.epoch > state.zxid

    def repair(self, tps: Iterable[TopicPartition], batch: RequestBatch, failed: AbstractSet[int] = frozenset(),
               moving: bool = False, untold: AbstractSet[int] = frozenset()) -> None:
        """Bring each partition's state in line with the live brokers (Kafka's OfflineReplica
        and OfflinePartition transitions, as one decision per partition).

        ``failed`` brokers are treated as gone even if registered (a controlled shutdown's
        broker, with ``moving``: its leaderships move only where another ISR member can
        take them). Every live replica hears the outcome except ``untold`` brokers.
        """
        for tp in tps:
            replicas = self.context.assignments.get(tp[0], {}).get(tp[1])
            if replicas is None or tp[0] in self.context.deleting:
                continue
            written = self.update_state(tp, lambda state: self._decide(tp, state, replicas, failed, moving))
            if written is not None:
                batch.leader_and_isr_to([r for r in replicas if r in self.context.live and r not in untold],
                                        self.context.request_state(tp, written))

    def elect_preferred(self, broker: int, tps: List[TopicPartition], batch: RequestBatch) -> None:
        """Give these partitions back to ``broker``, their preferred leader, where it is in the ISR
        (Kafka's preferred replica election)."""
        self.refresh(tps)
        for tp in tps:
            def back(state: PartitionState, broker: int = broker) -> Optional[PartitionState]:
                if state.leader == broker or broker not in state.isr:
                    return None
                return PartitionState(broker, state.leader_epoch + 1, list(state.isr), self.context.epoch[0])

            written = self.update_state(tp, back)
            if written is not None:
                log.info("controller: %s-%d back to its preferred leader %d (epoch %d)", tp[0], tp[1], broker,
                         written.leader_epoch)
                replicas = self.context.assignments[tp[0]][tp[1]]
                batch.leader_and_isr_to([r for r in replicas if r in self.context.live],
                                        self.context.request_state(tp, written))

    def elect_unclean(self, tp: TopicPartition, batch: RequestBatch) -> Optional[PartitionState]:
        """An election asked for (ElectLeaders UNCLEAN) of a partition without a live leader:
        the first live ISR member in replica order (a clean election), else any live replica,
        whatever the topic's ``unclean.leader.election.enable``. -> the state written, None
        when no replica could take it (or it has a live leader after all)."""
        replicas = self.context.assignments.get(tp[0], {}).get(tp[1])
        if replicas is None:
            return None

        def decide(state: PartitionState) -> Optional[PartitionState]:
            if self.context.replica_online(state.leader, tp):
                return None
            up = [r for r in replicas if self.context.replica_online(r, tp) and r not in self.context.shutting_down]
            in_sync = [r for r in up if r in state.isr]
            if in_sync:
                return PartitionState(in_sync[0], state.leader_epoch + 1,
                                      [r for r in state.isr if self.context.replica_online(r, tp)],
                                      self.context.epoch[0])
            if not up:
                return None
            log.warning("controller: UNCLEAN leader election for %s-%d asked for: %d leads without being in the ISR "
                        "%s; records only the old ISR had are lost", tp[0], tp[1], up[0], state.isr)
            return PartitionState(up[0], state.leader_epoch + 1, [up[0]], self.context.epoch[0])

        written = self.update_state(tp, decide)
        if written is not None:
            batch.leader_and_isr_to([r for r in replicas if r in self.context.live],
                                    self.context.request_state(tp, written))
        return written

    def _decide(self, tp: TopicPartition, state: PartitionState, replicas: List[int], failed: AbstractSet[int],
                moving: bool) -> Optional[PartitionState]:
        """A partition's next state given who is alive; None when it stays as it is.

        ISR members that are not registered, that registered again since the state was
        written, or that are in ``failed`` leave the ISR, which is never emptied (its last
        members stay: only they can hold every committed record). A leader among them is
        replaced by the first live ISR member in replica order that is not shutting down
        (a clean election); with none, by any live replica if the topic allows unclean
        elections; else by a live member the ISR kept (one that restarted: the only one
        that may have the records); else the partition has no leader (-1) until one
        returns. Any change bumps the leader epoch, as Kafka's ZooKeeper controller does.
        A replica whose log directory failed counts as failed.
        """
        failed = set(failed) | self.context.offline_on(tp, replicas)
        gone = {r for r in state.isr if r not in self.context.live or r in failed or self._bounced(r, state)}
        isr = [r for r in state.isr if r not in gone]
        epoch = state.leader_epoch + 1
        if state.leader not in gone and state.leader in self.context.live:
            if isr == state.isr:
                return None
            return PartitionState(state.leader, epoch, isr or [state.leader], self.context.epoch[0])
        eligible = [r for r in replicas if r in isr and r not in self.context.shutting_down]
        if eligible:
            return PartitionState(eligible[0], epoch, isr, self.context.epoch[0])
        if moving:
            return None  # no other ISR member: it stays with the broker shutting down
        if self._unclean(tp[0]):
            candidates = [r for r in replicas if r in self.context.live and r not in failed
                          and r not in self.context.shutting_down]
            if candidates:
                log.warning("controller: UNCLEAN leader election for %s-%d: %d leads without being in the ISR %s; "
                            "records only the old ISR had are lost", tp[0], tp[1], candidates[0], state.isr)
                return PartitionState(candidates[0], epoch, [candidates[0]], self.context.epoch[0])
        kept = isr or list(state.isr)
        back = [r for r in replicas if r in kept and r in self.context.live and r not in failed
                and r not in self.context.shutting_down]
        if back:
            log.warning("controller: %s-%d: its only in-sync replica %d restarted since it was last decided; it "
                        "leads again with whatever its log holds", tp[0], tp[1], back[0])
            return PartitionState(back[0], epoch, kept, self.context.epoch[0])
        if state.leader == NO_LEADER and kept == state.isr:
            return None
        log.error("controller: %s-%d is OFFLINE: no live in-sync replica (ISR %s, live %s)", tp[0], tp[1],
                  state.isr, sorted(self.context.live))
        return PartitionState(NO_LEADER, epoch, kept, self.context.epoch[0])

    def update_state(self, tp: TopicPartition,
                     decide: Callable[[PartitionState], Optional[PartitionState]]) -> Optional[PartitionState]:
        """Write the state ``decide`` makes of a partition's current one; -> what was written,
        None when it decided to leave it. A conflicting write (a leader changed its ISR since
        the state was read) makes the whole decision again on the state read back, as
        Kafka's controller does, never a patch of the old one."""
        for _ in range(STATE_WRITE_ATTEMPTS):
            state = self.context.states.get(tp)
            if state is None:
                return None
            new = decide(state)
            if new is None:
                return None
            written = self.zk.update_partition_state(tp[0], tp[1], new._replace(
                controller_epoch=self.context.epoch[0], partition_epoch=state.partition_epoch), self.context.epoch)
            if written is not None:
                self.context.states[tp] = written
                if new.leader != state.leader:
                    log.info("controller: %s-%d led by %d in epoch %d, ISR %s", tp[0], tp[1], written.leader,
                             written.leader_epoch, written.isr)
                return written
            current = self.zk.get_partition_state(*tp)
            if current is None:
                self.context.states.pop(tp, None)
                return None
            self.context.states[tp] = current
        raise errors.MetadataStoreError(partition_state_path(*tp), "the state kept changing under %d writes"
                                        % STATE_WRITE_ATTEMPTS)

    def refresh(self, tps: Iterable[TopicPartition]) -> None:
        """Read these partitions' states from the store: leaders change their ISRs there without
        the controller (it hears of it later, by a notification)."""
        for tp in tps:
            found = self.zk.get_partition_state(*tp)
            if found is not None:
                self.context.states[tp] = found
