"""Leader elections asked for: ElectLeaders (KIP-460) and ``/admin/preferred_replica_election``.

A *preferred* election gives a partition back to its preferred replica (the first of its
replicas) where that replica is alive and in the ISR; a partition it already leads needs
none (ELECTION_NOT_NEEDED), one whose preferred replica is down or out of sync cannot have
one (PREFERRED_LEADER_NOT_AVAILABLE). An *unclean* election gives a partition without a live
leader one: the first live ISR member, else any live replica (records only the old ISR had
are lost), whatever the topic's ``unclean.leader.election.enable``; a partition with a live
leader needs none, one with no live replica cannot have one (ELIGIBLE_LEADERS_NOT_AVAILABLE).

Asked for every partition (no list), the answer leaves out those that needed no election,
as Kafka's does. ``/admin/preferred_replica_election``, which older tools write, is a
preferred election of the partitions it lists; the controller deletes it once done.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional

from ... import errors
from ..contract import PartitionOutcome
from ..zk.client import KafkaZkClient, Watcher
from .context import ControllerContext, TopicPartition
from .partition_state_machine import PartitionStateMachine
from .request_batch import RequestBatch

__all__ = ["PREFERRED", "UNCLEAN", "LeaderElections"]

log = logging.getLogger("pylogq.controller")

#: ElectLeaders' election types.
PREFERRED, UNCLEAN = 0, 1

class LeaderElections:
    """The elections of partitions in ``context`` that a client or a tool asks for.

    Not thread-safe: called on the controller's event thread only. ``request_watcher()`` is
    the watcher of ``/admin/preferred_replica_election`` (the controller's, which calls
    :meth:`store_request_changed` on its event thread).
    """

    def __init__(self, context: ControllerContext, zk: KafkaZkClient, partitions: PartitionStateMachine,
                 request_watcher: Callable[[], Watcher]) -> None:
        self.context = context
        self.zk = zk
        self._partitions = partitions
        self._request_watcher = request_watcher

    def elect(self, election_type: int, tps: Optional[List[TopicPartition]], batch: RequestBatch
              ) -> Dict[TopicPartition, PartitionOutcome]:
        """Elect leaders of ``tps`` (None: every partition) -> each one's outcome (those that
        needed no election left out when ``tps`` is None)."""
        every = tps is None
        wanted = sorted(tp for tp in self.context.states if tp[0] not in self.context.deleting) if every \
            else list(dict.fromkeys(tps or []))
        out: Dict[TopicPartition, PartitionOutcome] = {}
        known = [tp for tp in wanted if self._replicas(tp) is not None and tp in self.context.states]
        for tp in wanted:
            if tp not in known:
                out[tp] = (errors.UnknownTopicOrPartitionError.code, "unknown partition %s-%d" % tp)
        self._partitions.refresh(known)
        for tp in known:
            if election_type == PREFERRED:
                out[tp] = self._preferred(tp, batch)
            elif election_type == UNCLEAN:
                out[tp] = self._unclean(tp, batch)
            else:
                out[tp] = (errors.InvalidRequestError.code, "unknown election type %d" % election_type)
        if every:
            out = {tp: o for tp, o in out.items() if o[0] != errors.ElectionNotNeededError.code}
        return out

    def _replicas(self, tp: TopicPartition) -> Optional[List[int]]:
        if tp[0] in self.context.deleting:
            return None
        return self.context.assignments.get(tp[0], {}).get(tp[1])

    def _preferred(self, tp: TopicPartition, batch: RequestBatch) -> PartitionOutcome:
        replicas = self._replicas(tp) or []
        state = self.context.states[tp]
        preferred = replicas[0]
        if state.leader == preferred:
            return errors.ElectionNotNeededError.code, "%s-%d is led by its preferred replica %d" % (
                tp[0], tp[1], preferred)
        if preferred not in self.context.live or preferred in self.context.shutting_down or \
                preferred not in state.isr:
            return errors.PreferredLeaderNotAvailableError.code, \
                "the preferred replica %d of %s-%d is not alive and in sync (ISR %s)" % (preferred, tp[0], tp[1],
                                                                                          state.isr)
        self._partitions.elect_preferred(preferred, [tp], batch)
        if self.context.states[tp].leader != preferred:
            return errors.PreferredLeaderNotAvailableError.code, \
                "the preferred replica %d of %s-%d left the ISR meanwhile" % (preferred, tp[0], tp[1])
        return 0, None

    def _unclean(self, tp: TopicPartition, batch: RequestBatch) -> PartitionOutcome:
        state = self.context.states[tp]
        if state.leader in self.context.live:
            return errors.ElectionNotNeededError.code, "%s-%d has a live leader, %d" % (tp[0], tp[1], state.leader)
        if self._partitions.elect_unclean(tp, batch) is None:
            return errors.EligibleLeadersNotAvailableError.code, "no replica of %s-%d is alive (replicas %s)" % (
                tp[0], tp[1], self._replicas(tp))
        return 0, None

    def store_request_changed(self, batch: RequestBatch) -> None:
        """``/admin/preferred_replica_election`` was created (or a controller took over): a
        preferred election of the partitions it lists, then the znode goes."""
        request = self.zk.get_preferred_election_request(watch=self._request_watcher())
        if request is None:
            return
        outcomes = self.elect(PREFERRED, request, batch)
        failed = {tp: o for tp, o in outcomes.items() if o[0] and o[0] != errors.ElectionNotNeededError.code}
        log.info("controller: preferred replica election of %d partitions asked for in the store%s", len(request),
                 "; not possible for %s" % sorted(failed) if failed else "")
        self.zk.delete_preferred_election_request(self.context.epoch)
