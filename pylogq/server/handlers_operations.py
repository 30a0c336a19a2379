"""The cluster operations APIs: ElectLeaders, AlterPartitionReassignments and
ListPartitionReassignments.

All three are the controller's (KIP-460, KIP-455): a broker that is not the active
controller answers NOT_CONTROLLER, and a client finds the controller in Metadata. The
controller holds an election (:mod:`pylogq.cluster.controller.leader_election`) before it
answers, and starts a reassignment (:mod:`pylogq.cluster.controller.reassignments`); each
partition answers its own error. A single node leads all its partitions and takes only
reassignments onto itself.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .. import errors
from ..protocol.message_data import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from .connection import Connection, RequestSlot
from .handler_base import HandlerBase

__all__ = ["OperationsHandlers"]

_NOT_CONTROLLER = errors.NotControllerError.code
_AlteredTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_AlteredPartition = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse
_OngoingTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
_OngoingPartition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment
_Elected = ElectLeadersResponse.ReplicaElectionResult
_ElectedPartition = ElectLeadersResponse.PartitionResult
#: ElectLeaders v0 has no election type: it is a preferred election.
_PREFERRED = 0


class OperationsHandlers(HandlerBase):
    """ElectLeaders (43), AlterPartitionReassignments (45) and ListPartitionReassignments (46)."""

    async def elect_leaders(self, conn: Connection, req: ElectLeadersRequest, version: int,
                            slot: RequestSlot) -> ElectLeadersResponse:
        wanted = None if req.topic_partitions is None else \
            [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
        election = req.election_type if version >= 1 else _PREFERRED
        outcomes = await self._admin(self.broker.elect_leaders, election, wanted)
        answer = ElectLeadersResponse(throttle_time_ms=0, error_code=0)
        if outcomes is None:
            # v0 has no top-level error: each partition asked for says it.
            answer.error_code = _NOT_CONTROLLER
            outcomes = {tp: (_NOT_CONTROLLER, "broker %d is not the controller" % self.broker.broker_id)
                        for tp in wanted or []}
        by_topic: Dict[str, List[_ElectedPartition]] = {}
        for (topic, p), (code, message) in outcomes.items():
            by_topic.setdefault(topic, []).append(_ElectedPartition(partition_id=p, error_code=code,
                                                                    error_message=message))
        answer.replica_election_results = [_Elected(topic=t, partition_result=ps) for t, ps in by_topic.items()]
        return answer

    async def alter_partition_reassignments(self, conn: Connection, req: AlterPartitionReassignmentsRequest,
                                            version: int, slot: RequestSlot) -> AlterPartitionReassignmentsResponse:
        targets: Dict[Tuple[str, int], Optional[List[int]]] = {}
        twice = set()
        for t in req.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp in targets:
                    twice.add(tp)
                targets[tp] = None if p.replicas is None else list(p.replicas)
        answer = AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None)
        if twice:
            answer.error_code = errors.InvalidRequestError.code
            answer.error_message = "the request names a partition twice: %s" % ", ".join(
                "%s-%d" % tp for tp in sorted(twice))
            return answer
        outcomes = await self._admin(self.broker.alter_partition_reassignments, targets)
        if any(code == _NOT_CONTROLLER for code, _ in outcomes.values()):
            answer.error_code = _NOT_CONTROLLER
            answer.error_message = "broker %d is not the controller" % self.broker.broker_id
            return answer
        for t in req.topics:
            answer.responses.append(_AlteredTopic(name=t.name, partitions=[
                _AlteredPartition(partition_index=p.partition_index, error_code=outcomes[(t.name, p.partition_index)][0],
                                  error_message=outcomes[(t.name, p.partition_index)][1])
                for p in t.partitions]))
        return answer

    async def list_partition_reassignments(self, conn: Connection, req: ListPartitionReassignmentsRequest,
                                           version: int, slot: RequestSlot) -> ListPartitionReassignmentsResponse:
        wanted = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
        found = await self._admin(self.broker.list_partition_reassignments, wanted)
        answer = ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None)
        if found is None:
            answer.error_code = _NOT_CONTROLLER
            answer.error_message = "broker %d is not the controller" % self.broker.broker_id
            return answer
        by_topic: Dict[str, List[_OngoingPartition]] = {}
        for (topic, p), moving in sorted(found.items()):
            by_topic.setdefault(topic, []).append(_OngoingPartition(
                partition_index=p, replicas=list(moving.replicas), adding_replicas=list(moving.adding),
                removing_replicas=list(moving.removing)))
        answer.topics = [_OngoingTopic(name=topic, partitions=ps) for topic, ps in by_topic.items()]
        return answer
