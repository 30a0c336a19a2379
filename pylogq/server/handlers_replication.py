"""The inter-broker APIs: what a cluster's controller and followers send a broker.

LeaderAndIsr, UpdateMetadata and StopReplica come from the controller, ControlledShutdown
from a broker to the controller, OffsetForLeaderEpoch from followers (and from
consumers checking their position after a leader change, KIP-320). Each is decoded
into the contract's typed request (:mod:`pylogq.cluster.contract`) and handed to the
broker off the event loop, since they open, close and truncate logs; the wire forms
of every version are in :mod:`pylogq.protocol.messages`. A broker that is a single
node answers the controller's requests with STALE_CONTROLLER_EPOCH (no controller of
its own cluster sent them) and ControlledShutdown with NOT_CONTROLLER.

:mod:`.inter_broker` is the other side: the client a broker sends these with.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from .. import errors
from ..cluster.contract import (
    BrokerEndpoint,
    BrokerRegistration,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from .connection import Connection, RequestSlot
from .handler_base import Body, HandlerBase, text_of, uuid_of

__all__ = ["ReplicationHandlers", "leader_and_isr_of", "stop_replica_of", "update_metadata_of"]

_STALE_CONTROLLER = errors.StaleControllerEpochError.code
_NOT_CONTROLLER = errors.NotControllerError.code


def _partition_of(topic: str, p: Dict[str, Any], offline: bool) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(
        topic, p["partition_index"], p["controller_epoch"], p["leader"], p["leader_epoch"], list(p["isr"]),
        p["zk_version"] if "zk_version" in p else p["partition_epoch"], list(p["replicas"]),
        list(p.get("offline_replicas") or []) if offline else [], bool(p.get("is_new", False)))


def leader_and_isr_of(req: Dict[str, Any], version: int) -> LeaderAndIsrRequest:
    """A LeaderAndIsr request of any version, as the contract's type."""
    partitions: List[LeaderAndIsrPartition] = []
    topic_ids: Dict[str, str] = {}
    if version < 2:
        partitions = [_partition_of(p["topic_name"], p, False) for p in req["ungrouped_partition_states"]]
    else:
        for t in req["topic_states"]:
            if version >= 5:
                topic_ids[t["topic_name"]] = text_of(t["topic_id"])
            partitions += [_partition_of(t["topic_name"], p, False) for p in t["partition_states"]]
    leaders = [BrokerRegistration(b["broker_id"], (BrokerEndpoint("PLAINTEXT", b["host_name"], b["port"]),))
               for b in req["live_leaders"]]
    return LeaderAndIsrRequest(req["controller_id"], req["controller_epoch"], req["broker_epoch"], partitions,
                               topic_ids, leaders)


def update_metadata_of(req: Dict[str, Any], version: int) -> UpdateMetadataRequest:
    """An UpdateMetadata request of any version, as the contract's type."""
    partitions: List[LeaderAndIsrPartition] = []
    topic_ids: Dict[str, str] = {}
    if version < 5:
        partitions = [_partition_of(p["topic_name"], p, True) for p in req["ungrouped_partition_states"]]
    else:
        for t in req["topic_states"]:
            if version >= 7:
                topic_ids[t["topic_name"]] = text_of(t["topic_id"])
            partitions += [_partition_of(t["topic_name"], p, True) for p in t["partition_states"]]
    brokers = []
    for b in req["live_brokers"]:
        if version == 0:
            endpoints: Tuple[BrokerEndpoint, ...] = (BrokerEndpoint("PLAINTEXT", b["v0_host"], b["v0_port"]),)
        else:
            endpoints = tuple(BrokerEndpoint(e["listener"] or _protocol_name(e["security_protocol"]), e["host"],
                                             e["port"], _protocol_name(e["security_protocol"]))
                              for e in b["endpoints"])
        brokers.append(BrokerRegistration(b["id"], endpoints, b["rack"]))
    return UpdateMetadataRequest(req["controller_id"], req["controller_epoch"], req["broker_epoch"], partitions,
                                 brokers, topic_ids)


def stop_replica_of(req: Dict[str, Any], version: int) -> StopReplicaRequest:
    """A StopReplica request of any version, as the contract's type."""
    partitions: Dict[Tuple[str, int], Tuple[int, bool]] = {}
    if version == 0:
        for p in req["ungrouped_partitions"]:
            partitions[(p["topic_name"], p["partition_index"])] = (-2, bool(req["delete_partitions"]))
    elif version < 3:
        for t in req["topics"]:
            for index in t["partition_indexes"]:
                partitions[(t["name"], index)] = (-2, bool(req["delete_partitions"]))
    else:
        for t in req["topic_states"]:
            for p in t["partition_states"]:
                partitions[(t["topic_name"], p["partition_index"])] = (p["leader_epoch"], bool(p["delete_partition"]))
    return StopReplicaRequest(req["controller_id"], req["controller_epoch"], req["broker_epoch"], partitions)


#: Kafka's SecurityProtocol ids, as UpdateMetadata v1+ carries them.
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
SECURITY_PROTOCOL_IDS = {name: i for i, name in SECURITY_PROTOCOLS.items()}


def _protocol_name(code: int) -> str:
    return SECURITY_PROTOCOLS.get(code, "PLAINTEXT")


class ReplicationHandlers(HandlerBase):
    """LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6), ControlledShutdown (7) and
    OffsetForLeaderEpoch (23)."""

    async def leader_and_isr(self, conn: Connection, req: Body, version: int, slot: RequestSlot) -> Body:
        request = leader_and_isr_of(req, version)
        if not self.broker.clustered:
            code, per_partition = _STALE_CONTROLLER, {(p.topic, p.partition): _STALE_CONTROLLER
                                                      for p in request.partitions}
        else:
            code, per_partition = await self._blocking(self.broker.leader_and_isr, request)
        if version < 5:
            return {"error_code": code, "partition_errors": [{"topic_name": t, "partition_index": p, "error_code": c}
                                                             for (t, p), c in sorted(per_partition.items())]}
        by_topic: Dict[str, List[Dict[str, Any]]] = {}
        for (t, p), c in sorted(per_partition.items()):
            by_topic.setdefault(t, []).append({"partition_index": p, "error_code": c})
        topics = []
        for t, errors_of in by_topic.items():
            topic_id = request.topic_ids.get(t)
            if topic_id is not None:
                topics.append({"topic_id": uuid_of(topic_id), "partition_errors": errors_of})
        return {"error_code": code, "topics": topics}

    async def update_metadata(self, conn: Connection, req: Body, version: int, slot: RequestSlot) -> Body:
        if not self.broker.clustered:
            return {"error_code": _STALE_CONTROLLER}
        code = await self._blocking(self.broker.update_metadata, update_metadata_of(req, version))
        return {"error_code": code}

    async def stop_replica(self, conn: Connection, req: Body, version: int, slot: RequestSlot) -> Body:
        request = stop_replica_of(req, version)
        if not self.broker.clustered:
            code, per_partition = _STALE_CONTROLLER, {tp: _STALE_CONTROLLER for tp in request.partitions}
        else:
            code, per_partition = await self._blocking(self.broker.stop_replica, request)
        return {"error_code": code, "partition_errors": [
            {"topic_name": t, "partition_index": p, "error_code": c} for (t, p), c in sorted(per_partition.items())]}

    async def controlled_shutdown(self, conn: Connection, req: Dict[str, Any], version: int,
                                  slot: RequestSlot) -> Dict[str, Any]:
        if not self.broker.clustered:
            return {"error_code": _NOT_CONTROLLER, "remaining_partitions": []}
        slot.release()  # the controller may take a while: other requests go on
        code, remaining = await self._blocking(self.broker.controlled_shutdown_of, req["broker_id"],
                                               req["broker_epoch"])
        return {"error_code": code, "remaining_partitions": [
            {"topic_name": t, "partition_index": p} for t, p in remaining]}

    def offset_for_leader_epoch(self, conn: Connection, req: Dict[str, Any], version: int,
                                slot: RequestSlot) -> Dict[str, Any]:
        """Where each asked epoch ends in this leader's log (followers truncating, consumers
        validating their position after a leader change)."""
        asks: Dict[Tuple[str, int], Tuple[int, int]] = {}
        for t in req["topics"]:
            for p in t["partitions"]:
                asks[(t["topic"], p["partition"])] = (p["current_leader_epoch"], p["leader_epoch"])
        answers = self.broker.offsets_for_leader_epoch(asks)
        topics = []
        for t in req["topics"]:
            parts = []
            for p in t["partitions"]:
                a = answers[(t["topic"], p["partition"])]
                parts.append({"error_code": a.error_code, "partition": p["partition"], "leader_epoch": a.leader_epoch,
                              "end_offset": a.end_offset})
            topics.append({"topic": t["topic"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

