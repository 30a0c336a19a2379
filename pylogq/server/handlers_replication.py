"""The inter-broker APIs: what a cluster's controller and followers send a broker.

LeaderAndIsr, UpdateMetadata and StopReplica come from the controller, ControlledShutdown
from a broker to the controller, OffsetForLeaderEpoch from followers (and from
consumers checking their position after a leader change, KIP-320). Each is decoded
into the contract's typed request (:mod:`pylogq.cluster.contract`) and handed to the
broker off the event loop, since they open, close and truncate logs; the wire forms
of every version are in :mod:`pylogq.protocol.messages`. A broker that is a single
node answers the controller's requests with STALE_CONTROLLER_EPOCH (no controller of
its own cluster sent them) and ControlledShutdown with NOT_CONTROLLER.

:mod:`.replication_wire` converts between the wire's message classes
(:mod:`pylogq.protocol.message_data`) and those types (both ways, for this side and the
other); :mod:`.inter_broker` is the other side: the client a broker sends these with.
"""

from __future__ import annotations

from .. import errors
from ..cluster.acl import AclOperation, ResourceType
from ..cluster.contract import EpochEndOffset
from ..protocol import message_data as msg
from .authorization import NOTHING_REFUSED
from .connection import Connection, RequestSlot
from .handler_base import HandlerBase

__all__ = ["ReplicationHandlers"]

_STALE_CONTROLLER = errors.StaleControllerEpochError.code
_NOT_CONTROLLER = errors.NotControllerError.code


class ReplicationHandlers(HandlerBase):
    """LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6), ControlledShutdown (7) and
    OffsetForLeaderEpoch (23).

    Each handler imports :mod:`.replication_wire` where it runs, not this module: a single
    node answers none of these but OffsetForLeaderEpoch, and starts without loading it."""

    async def leader_and_isr(self, conn: Connection, req: msg.LeaderAndIsrRequest, version: int,
                             slot: RequestSlot) -> msg.LeaderAndIsrResponse:
        from . import replication_wire as wire

        request = wire.decode_leader_and_isr(req, version)
        if not self.broker.clustered:
            code, per_partition = _STALE_CONTROLLER, {(p.topic, p.partition): _STALE_CONTROLLER
                                                      for p in request.partitions}
        else:
            code, per_partition = await self._blocking(self.broker.leader_and_isr, request)
        return wire.encode_leader_and_isr_response(code, per_partition, request.topic_ids, version)

    async def update_metadata(self, conn: Connection, req: msg.UpdateMetadataRequest, version: int,
                              slot: RequestSlot) -> msg.UpdateMetadataResponse:
        from . import replication_wire as wire

        if not self.broker.clustered:
            return wire.encode_update_metadata_response(_STALE_CONTROLLER)
        code = await self._blocking(self.broker.update_metadata, wire.decode_update_metadata(req, version))
        return wire.encode_update_metadata_response(code)

    async def stop_replica(self, conn: Connection, req: msg.StopReplicaRequest, version: int,
                           slot: RequestSlot) -> msg.StopReplicaResponse:
        from . import replication_wire as wire

        request = wire.decode_stop_replica(req, version)
        if not self.broker.clustered:
            code, per_partition = _STALE_CONTROLLER, {tp: _STALE_CONTROLLER for tp in request.partitions}
        else:
            code, per_partition = await self._blocking(self.broker.stop_replica, request)
        return wire.encode_stop_replica_response(code, per_partition)

    async def controlled_shutdown(self, conn: Connection, req: msg.ControlledShutdownRequest, version: int,
                                  slot: RequestSlot) -> msg.ControlledShutdownResponse:
        from . import replication_wire as wire

        if not self.broker.clustered:
            return wire.encode_controlled_shutdown_response(_NOT_CONTROLLER, [])
        slot.release()  # the controller may take a while: other requests go on
        broker_id, broker_epoch = wire.decode_controlled_shutdown(req)
        code, remaining = await self._blocking(self.broker.controlled_shutdown_of, broker_id, broker_epoch)
        return wire.encode_controlled_shutdown_response(code, remaining)

    def offset_for_leader_epoch(self, conn: Connection, req: msg.OffsetForLeaderEpochRequest, version: int,
                                slot: RequestSlot) -> msg.OffsetForLeaderEpochResponse:
        """Where each asked epoch ends in this leader's log (followers truncating, consumers
        validating their position after a leader change)."""
        from . import replication_wire as wire

        _, asks = wire.decode_offset_for_leader_epoch(req)
        # A follower (CLUSTER_ACTION on the cluster) asks of any topic, a consumer of those it may describe.
        refused = NOTHING_REFUSED if not self.authz.enabled or self.authz.cluster(conn, AclOperation.CLUSTER_ACTION) \
            else self.authz.refused_names(conn, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in asks))
        if not refused:
            return wire.encode_offset_for_leader_epoch_response(req, self.broker.offsets_for_leader_epoch(asks))
        answers = self.broker.offsets_for_leader_epoch({tp: a for tp, a in asks.items() if tp[0] not in refused})
        for tp in asks:
            if tp[0] in refused:
                answers[tp] = EpochEndOffset(errors.TopicAuthorizationFailedError.code, -1, -1)
        return wire.encode_offset_for_leader_epoch_response(req, answers)
