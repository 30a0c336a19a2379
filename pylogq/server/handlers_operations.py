"""The cluster operations APIs: AlterPartitionReassignments and ListPartitionReassignments.

Both are the controller's (KIP-455): a broker that is not the active controller answers
NOT_CONTROLLER, and a client finds the controller in Metadata. The broker carries a
reassignment out through its controller (:mod:`pylogq.cluster.controller.reassignments`)
and answers once it has started, each partition with its own error; a single node takes
only reassignments onto itself.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .. import errors
from ..protocol.message_data import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
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


class OperationsHandlers(HandlerBase):
    """AlterPartitionReassignments (45) and ListPartitionReassignments (46)."""

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
