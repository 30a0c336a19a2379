"""How a broker reaches the other brokers of its cluster over the Kafka protocol.

:class:`TcpInterBrokerClient` implements the contract's
:class:`~pylogq.cluster.contract.InterBrokerClient` on a blocking socket: the
controller's sender threads, the follower fetchers and a broker's controlled shutdown
each own one and call it from their own thread. Requests go out at the newest version
the tables know (brokers of one pylogq version understand each other's), as the
typed objects of the contract turned into the wire's dicts; :mod:`.handlers_replication`
is the receiving side. A connection that fails, times out or answers garbage is closed
and the call raises :class:`~pylogq.errors.BrokerNotAvailableError`: the caller retries
with a new client.

Importing :mod:`pylogq.server` registers :func:`connect` as the brokers' connector.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from .. import errors
from ..cluster.contract import (
    EpochEndOffset,
    FetchResult,
    LeaderAndIsrRequest,
    RecordBytes,
    ReplicaFetchPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from ..protocol import REQUEST_HEADER, REQUESTS, RESPONSE_HEADER, RESPONSES, ApiKey, Reader, Writer, header_versions
from .handler_base import uuid_of
from .handlers_replication import SECURITY_PROTOCOL_IDS

__all__ = ["TcpInterBrokerClient", "connect"]

_SIZE = struct.Struct(">i")
#: The versions brokers send each other (Kafka 3.9's newest; Fetch by name, before topic ids).
VERSIONS: Dict[int, int] = {ApiKey.LEADER_AND_ISR: 7, ApiKey.UPDATE_METADATA: 8, ApiKey.STOP_REPLICA: 4,
            ApiKey.CONTROLLED_SHUTDOWN: 3, ApiKey.OFFSET_FOR_LEADER_EPOCH: 4, ApiKey.FETCH: 12}
#: How long a request may take beyond its own wait (Kafka's ``replica.socket.timeout.ms``).
SOCKET_TIMEOUT_S = 30.0
#: The largest response accepted (a fetch answers at most replica.fetch.response.max.bytes).
MAX_RESPONSE_BYTES = 1 << 30


class TcpInterBrokerClient:
    """One connection to another broker. Used by one thread at a time (a lock serializes
    calls anyway)."""

    def __init__(self, broker_id: int, host: str, port: int, client_id: str = "pylogq-broker") -> None:
        self.broker_id = broker_id
        self.address = (host, port)
        self.client_id = client_id
        self._lock = threading.Lock()
        self._sock: Any = None
        self._correlation = 0

    def _connect(self) -> socket.socket:
        if self._sock is None:
            try:
                sock = socket.create_connection(self.address, timeout=SOCKET_TIMEOUT_S)
            except OSError as exc:
                raise errors.BrokerNotAvailableError("cannot connect to broker %d at %s:%d: %s"
                                                     % ((self.broker_id,) + self.address + (exc,))) from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
        return self._sock  # type: ignore[no-any-return]

    def _call(self, api_key: int, body: Mapping[str, Any], wait_ms: int = 0) -> Dict[str, Any]:
        version = VERSIONS[api_key]
        with self._lock:
            self._correlation = (self._correlation + 1) & 0x7FFFFFFF
            cid = self._correlation
            w = Writer()
            request_header, response_header = header_versions(api_key, version)
            REQUEST_HEADER.encode_into(w, {"request_api_key": api_key, "request_api_version": version,
                                           "correlation_id": cid, "client_id": self.client_id}, request_header)
            REQUESTS[api_key].encode_into(w, body, version)
            data = w.getvalue()
            try:
                sock = self._connect()
                sock.settimeout(SOCKET_TIMEOUT_S + wait_ms / 1000.0)
                sock.sendall(_SIZE.pack(len(data)) + data)
                frame = self._read_frame(sock)
                r = Reader(frame)
                header = RESPONSE_HEADER.decode_from(r, response_header)
                if header["correlation_id"] != cid:
                    raise errors.ProtocolError("response to correlation id %d, expected %d"
                                               % (header["correlation_id"], cid))
                return RESPONSES[api_key].decode_from(r, version)
            except (OSError, errors.ProtocolError, ValueError) as exc:
                self._close_locked()
                raise errors.BrokerNotAvailableError("broker %d at %s:%d: %s"
                                                     % ((self.broker_id,) + self.address + (exc,))) from None

    @staticmethod
    def _read_frame(sock: socket.socket) -> bytes:
        head = _exactly(sock, 4)
        (size,) = _SIZE.unpack(head)
        if not 0 <= size <= MAX_RESPONSE_BYTES:
            raise errors.ProtocolError("response size %d" % size)
        return _exactly(sock, size)

    # -- the controller's requests ------------------------------------------------------

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[Tuple[str, int], int]]:
        by_topic: Dict[str, List[Dict[str, Any]]] = {}
        for p in request.partitions:
            by_topic.setdefault(p.topic, []).append({
                "partition_index": p.partition, "controller_epoch": p.controller_epoch, "leader": p.leader,
                "leader_epoch": p.leader_epoch, "isr": p.isr, "partition_epoch": p.partition_epoch,
                "replicas": p.replicas, "adding_replicas": [], "removing_replicas": [], "is_new": p.is_new,
                "leader_recovery_state": 0})
        topics = [{"topic_name": t, "topic_id": uuid_of(request.topic_ids[t]) if t in request.topic_ids
                   else uuid_of("AAAAAAAAAAAAAAAAAAAAAA"), "partition_states": ps} for t, ps in by_topic.items()]
        leaders = []
        for b in request.live_leaders:
            e = b.endpoint()
            leaders.append({"broker_id": b.broker_id, "host_name": e.host if e else "", "port": e.port if e else -1})
        answer = self._call(ApiKey.LEADER_AND_ISR, {
            "controller_id": request.controller_id, "is_kraft_controller": False,
            "controller_epoch": request.controller_epoch, "broker_epoch": request.broker_epoch, "type": 0,
            "topic_states": topics, "live_leaders": leaders})
        names = {uuid_of(i): t for t, i in request.topic_ids.items()}
        out: Dict[Tuple[str, int], int] = {}
        for t in answer["topics"]:
            name = names.get(t["topic_id"])
            if name is not None:
                for p in t["partition_errors"]:
                    out[(name, p["partition_index"])] = p["error_code"]
        return answer["error_code"], out

    def update_metadata(self, request: UpdateMetadataRequest) -> int:
        by_topic: Dict[str, List[Dict[str, Any]]] = {}
        for p in request.partitions:
            by_topic.setdefault(p.topic, []).append({
                "partition_index": p.partition, "controller_epoch": p.controller_epoch, "leader": p.leader,
                "leader_epoch": p.leader_epoch, "isr": p.isr, "zk_version": p.partition_epoch,
                "replicas": p.replicas, "offline_replicas": p.offline_replicas})
        topics = [{"topic_name": t, "topic_id": uuid_of(request.topic_ids.get(t, "AAAAAAAAAAAAAAAAAAAAAA")),
                   "partition_states": ps} for t, ps in by_topic.items()]
        brokers = [{"id": b.broker_id, "rack": b.rack, "endpoints": [
            {"port": e.port, "host": e.host, "listener": e.listener,
             "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)} for e in b.endpoints]}
            for b in request.live_brokers]
        answer = self._call(ApiKey.UPDATE_METADATA, {
            "controller_id": request.controller_id, "is_kraft_controller": False,
            "controller_epoch": request.controller_epoch, "broker_epoch": request.broker_epoch, "type": 0,
            "topic_states": topics, "live_brokers": brokers})
        code: int = answer["error_code"]
        return code

    def stop_replica(self, request: StopReplicaRequest) -> Tuple[int, Dict[Tuple[str, int], int]]:
        by_topic: Dict[str, List[Dict[str, Any]]] = {}
        for (t, p), (epoch, delete) in sorted(request.partitions.items()):
            by_topic.setdefault(t, []).append({"partition_index": p, "leader_epoch": epoch,
                                               "delete_partition": delete})
        answer = self._call(ApiKey.STOP_REPLICA, {
            "controller_id": request.controller_id, "is_kraft_controller": False,
            "controller_epoch": request.controller_epoch, "broker_epoch": request.broker_epoch,
            "topic_states": [{"topic_name": t, "partition_states": ps} for t, ps in by_topic.items()]})
        return answer["error_code"], {(p["topic_name"], p["partition_index"]): p["error_code"]
                                      for p in answer["partition_errors"]}

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[Tuple[str, int]]]:
        answer = self._call(ApiKey.CONTROLLED_SHUTDOWN, {"broker_id": broker_id, "broker_epoch": broker_epoch},
                            wait_ms=int(SOCKET_TIMEOUT_S * 1000))
        return answer["error_code"], [(p["topic_name"], p["partition_index"]) for p in answer["remaining_partitions"]]

    # -- a follower's requests ----------------------------------------------------------

    def replica_fetch(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                      max_wait_ms: int, min_bytes: int, max_bytes: int) -> Dict[Tuple[str, int], FetchResult]:
        by_topic: Dict[str, List[Dict[str, Any]]] = {}
        for p in partitions:
            by_topic.setdefault(p.topic, []).append({
                "partition": p.partition, "current_leader_epoch": p.current_leader_epoch,
                "fetch_offset": p.fetch_offset, "last_fetched_epoch": -1, "log_start_offset": p.log_start_offset,
                "partition_max_bytes": p.max_bytes})
        answer = self._call(ApiKey.FETCH, {
            "cluster_id": None, "replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            "forgotten_topics_data": [], "rack_id": ""}, wait_ms=max_wait_ms)
        out: Dict[Tuple[str, int], FetchResult] = {}
        for t in answer["responses"]:
            for p in t["partitions"]:
                records = p["records"]
                out[(t["topic"], p["partition_index"])] = FetchResult(
                    p["error_code"], p["high_watermark"], p["log_start_offset"],
                    RecordBytes(bytes(records)) if records is not None else None)
        return out

    def offsets_for_leader_epoch(self, replica_id: int, partitions: Mapping[Tuple[str, int], Tuple[int, int]]
                                 ) -> Dict[Tuple[str, int], EpochEndOffset]:
        by_topic: Dict[str, List[Dict[str, Any]]] = {}
        for (t, p), (current, epoch) in partitions.items():
            by_topic.setdefault(t, []).append({"partition": p, "current_leader_epoch": current,
                                               "leader_epoch": epoch})
        answer = self._call(ApiKey.OFFSET_FOR_LEADER_EPOCH, {
            "replica_id": replica_id, "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
        return {(t["topic"], p["partition"]): EpochEndOffset(p["error_code"], p["leader_epoch"], p["end_offset"])
                for t in answer["topics"] for p in t["partitions"]}

    # -- lifecycle ----------------------------------------------------------------------

    def _close_locked(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def abort(self) -> None:
        """End the call in flight (its blocked read fails at once) without waiting for it."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # not connected, or closed meanwhile

    def close(self) -> None:
        with self._lock:
            self._close_locked()


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    left = n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def connect(broker_id: int, host: str, port: int) -> TcpInterBrokerClient:
    """The brokers' connector (registered with the contract when :mod:`pylogq.server` is imported)."""
    return TcpInterBrokerClient(broker_id, host, port)
