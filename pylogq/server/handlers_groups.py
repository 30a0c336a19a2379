"""The group coordinator's APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups and OffsetDelete.

Joins and syncs wait as delayed operations; a group's offsets are read and written through the
broker's group coordinator (:class:`~pylogq.cluster.contract.GroupCoordinatorApi`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional, Tuple

from .. import errors
from ..cluster.contract import GroupCoordinatorApi, JoinResult, SyncResult
from .connection import Connection
from .handler_base import HandlerBase, error_code, resolve

__all__ = ["GroupHandlers"]


class GroupHandlers(HandlerBase):
    """The group APIs."""

    @property
    def _groups(self) -> GroupCoordinatorApi:
        return self.broker.group_coordinator

    def find_coordinator(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Dict[str, Any]:
        host, port = self.server.advertised_for(conn)
        if req["key_type"] != 0:
            return {"throttle_time_ms": 0, "error_code": errors.CoordinatorNotAvailableError.code,
                    "error_message": "transactions are not supported by this broker",
                    "node_id": -1, "host": "", "port": -1}
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "node_id": self.broker.broker_id, "host": host, "port": port}

    async def join_group(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Dict[str, Any]:
        slot.release()  # parked until the rebalance completes
        rebalance_timeout = req["rebalance_timeout_ms"]
        if rebalance_timeout < 0:
            rebalance_timeout = req["session_timeout_ms"]
        future: "asyncio.Future[JoinResult]" = self.server.new_future()
        op = self._groups.join_group_async(
            req["group_id"], req["member_id"], conn.client_id, req["session_timeout_ms"], rebalance_timeout,
            req["protocol_type"], [(p["name"], p["metadata"]) for p in req["protocols"]],
            group_instance_id=req["group_instance_id"], client_host="/" + conn.peer_host,
            deliver=self.server.on_loop(resolve, future))
        result = await self.server.parked(op, future, JoinResult(errors.NotCoordinatorError.code))
        return {
            "throttle_time_ms": 0, "error_code": result.error_code, "generation_id": result.generation_id,
            "protocol_name": result.protocol_name or "", "leader": result.leader_id,
            "member_id": result.member_id,
            "members": [{"member_id": m, "group_instance_id": g, "metadata": md} for m, g, md in result.members],
        }

    async def sync_group(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Dict[str, Any]:
        slot.release()  # a follower waits for the leader's assignment
        assignments = {a["member_id"]: a["assignment"] for a in req["assignments"]} or None
        future: "asyncio.Future[SyncResult]" = self.server.new_future()
        op = self._groups.sync_group_async(req["group_id"], req["generation_id"], req["member_id"], assignments,
                                           deliver=self.server.on_loop(resolve, future))
        result = await self.server.parked(op, future, SyncResult(errors.NotCoordinatorError.code))
        return {"throttle_time_ms": 0, "error_code": result.error_code, "assignment": result.assignment}

    def heartbeat(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Dict[str, Any]:
        code = self._groups.heartbeat(req["group_id"], req["generation_id"], req["member_id"])
        return {"throttle_time_ms": 0, "error_code": code}

    def leave_group(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Dict[str, Any]:
        members = req["members"] or [{"member_id": req["member_id"]}]
        codes = [self._groups.leave_group(req["group_id"], m["member_id"]) for m in members]
        return {"throttle_time_ms": 0, "error_code": codes[0] if len(codes) == 1 else 0,
                "members": [{"member_id": m["member_id"], "group_instance_id": m.get("group_instance_id"),
                             "error_code": c} for m, c in zip(members, codes)]}

    def offset_commit(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Dict[str, Any]:
        offsets: Dict[Tuple[str, int], Tuple[int, Optional[str]]] = {}
        epochs: Dict[Tuple[str, int], int] = {}
        for topic in req["topics"]:
            for p in topic["partitions"]:
                tp = (topic["name"], p["partition_index"])
                offsets[tp] = (p["committed_offset"], p["committed_metadata"])
                epochs[tp] = p["committed_leader_epoch"]
        unknown = {tp for tp in offsets if not self._partition_exists(*tp)}
        codes = self._groups.commit_offsets(
            req["group_id"], req["generation_id_or_member_epoch"], req["member_id"],
            {tp: v for tp, v in offsets.items() if tp not in unknown},
            {tp: e for tp, e in epochs.items() if tp not in unknown}) if len(unknown) < len(offsets) else {}
        for tp in unknown:
            codes[tp] = errors.UnknownTopicOrPartitionError.code
        return {"throttle_time_ms": 0, "topics": [
            {"name": topic["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": codes[(topic["name"], p["partition_index"])]}
                for p in topic["partitions"]]}
            for topic in req["topics"]]}

    def _partition_exists(self, topic: str, partition: int) -> bool:
        try:
            return 0 <= partition < self.broker.partitions_for(topic)
        except errors.UnknownTopicOrPartitionError:
            return False

    def offset_fetch(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Dict[str, Any]:
        wanted = None
        if req["topics"] is not None:
            wanted = [(t["name"], p) for t in req["topics"] for p in t["partition_indexes"]]
        found = self._groups.fetch_offsets(req["group_id"], wanted)
        by_topic: Dict[str, List[Dict[str, Any]]] = {}
        for (topic, partition), (offset, metadata, code) in sorted(found.items()):
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                "metadata": metadata if offset >= 0 else "", "error_code": code})
        if wanted is not None:  # keep the request's order
            order = list(dict.fromkeys(t for t, _ in wanted))
            topics = [{"name": t, "partitions": by_topic.get(t, [])} for t in order]
        else:
            topics = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
        return {"throttle_time_ms": 0, "topics": topics, "error_code": 0}

    def describe_groups(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Dict[str, Any]:
        out = []
        for group_id in req["groups"]:
            d = self._groups.describe_group(group_id)
            out.append({
                "error_code": d.error, "group_id": group_id, "group_state": d.state,
                "protocol_type": d.protocol_type, "protocol_data": d.protocol,
                "members": [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                             "member_metadata": m.metadata, "member_assignment": m.assignment}
                            for m in d.members],
            })
        return {"throttle_time_ms": 0, "groups": out}

    def list_groups(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Dict[str, Any]:
        groups = [{"group_id": g, "protocol_type": t} for g, t in self._groups.list_groups()]
        return {"throttle_time_ms": 0, "error_code": 0, "groups": groups}

    async def delete_groups(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Dict[str, Any]:
        codes = await self._blocking(self._groups.delete_groups, list(req["groups_names"]))
        return {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": codes[g]} for g in req["groups_names"]]}

    async def offset_delete(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Dict[str, Any]:
        wanted = [(t["name"], p["partition_index"]) for t in req["topics"] for p in t["partitions"]]
        try:
            group_error, codes = await self._blocking(self.broker.delete_offsets, req["group_id"], wanted)
        except Exception as exc:  # noqa: BLE001 - reported as the response's error
            group_error, codes = error_code(self._failed(conn, exc, "delete offsets of group %r" % req["group_id"])), {}
        if group_error:
            return {"error_code": group_error, "throttle_time_ms": 0, "topics": []}
        by_topic: Dict[str, List[int]] = {}
        for topic, partition in dict.fromkeys(wanted):
            by_topic.setdefault(topic, []).append(partition)
        return {"error_code": 0, "throttle_time_ms": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "error_code": codes[(topic, p)]} for p in parts]}
            for topic, parts in by_topic.items()]}

