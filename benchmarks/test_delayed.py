"""Requests answered while a thousand joins and a thousand long polls wait.

Group "create+produce while parked": one CreateTopics (a new two-partition topic) and
one Produce (a one-record batch) from a fresh raw-protocol connection, against an
in-process broker serving on loopback; the peer is the same round on a broker with
nothing parked. The measured broker has 1,000 JoinGroups (each the first member of
its own group, waiting out the initial rebalance delay) and 1,000 long-poll Fetches
(an empty partition, max_wait 120 s) parked, each on its own connection.
Target: under 100 ms per round with them parked (the delayed operations park no
thread, so nothing queues behind them).
"""

from __future__ import annotations

import socket
import statistics
import struct
import uuid
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from summary import asserting, info, smoke

from pylogq import Broker
from pylogq.protocol import REQUEST_HEADER, REQUESTS, RESPONSE_HEADER, RESPONSES, Reader, Writer, header_versions
from pylogq.records import build_batch

PRODUCE, FETCH, JOIN_GROUP, CREATE_TOPICS = 0, 1, 11, 19
PARKED = 1000
MEMBER_ID_REQUIRED = 79
PARK_MS = 120000
TARGET_S = 0.100
ROUNDS = 30

Address = Tuple[str, int]


class _Raw:
    """A raw Kafka protocol connection: framed requests out, whole frames in."""

    def __init__(self, address: Address) -> None:
        self.sock = socket.create_connection(address, timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.next_id = 0

    def send(self, api_key: int, version: int, body: Dict[str, Any]) -> None:
        self.next_id += 1
        w = Writer()
        REQUEST_HEADER.encode_into(w, {"request_api_key": api_key, "request_api_version": version,
                                       "correlation_id": self.next_id, "client_id": "bench"},
                                   header_versions(api_key, version)[0])
        REQUESTS[api_key].encode_into(w, body, version)
        data = w.getvalue()
        self.sock.sendall(struct.pack(">i", len(data)) + data)

    def receive(self, api_key: int, version: int) -> Dict[str, Any]:
        size = struct.unpack(">i", self._exactly(4))[0]
        r = Reader(self._exactly(size))
        RESPONSE_HEADER.decode_from(r, header_versions(api_key, version)[1])
        body: Dict[str, Any] = RESPONSES[api_key].decode_from(r, version)
        return body

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()


def _create_and_produce(address: Address) -> None:
    conn = _Raw(address)
    try:
        conn.send(CREATE_TOPICS, 3, {"topics": [{"name": "t-" + uuid.uuid4().hex[:12], "num_partitions": 2,
                                                 "replication_factor": 1, "assignments": [], "configs": []}],
                                     "timeout_ms": 5000, "validate_only": False})
        assert conn.receive(CREATE_TOPICS, 3)["topics"][0]["error_code"] == 0
        batch = bytes(build_batch([b"v"], keys=[b"k"]))
        conn.send(PRODUCE, 7, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "other", "partition_data": [{"index": 0, "records": batch}]}]})
        assert conn.receive(PRODUCE, 7)["responses"][0]["partition_responses"][0]["error_code"] == 0
    finally:
        conn.close()


def _broker(tmp_path: Any, name: str) -> Tuple[Broker, Address]:
    broker = Broker(str(tmp_path / name), **{"group.initial.rebalance.delay.ms": PARK_MS,
                                             "offsets.topic.num.partitions": 4})
    broker.create_topic("waiting", 1)
    broker.create_topic("other", 1)
    return broker, broker.serve("127.0.0.1", 0)


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Address]:
    broker, address = _broker(tmp_path_factory.mktemp("quiet"), "b")
    try:
        yield address
    finally:
        broker.close()


@pytest.fixture(scope="module")
def parked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Address]:
    broker, address = _broker(tmp_path_factory.mktemp("parked"), "b")
    conns: List[_Raw] = []
    try:
        for i in range(PARKED):
            conn = _Raw(address)
            conns.append(conn)
            join = {"group_id": "g-%d" % i, "session_timeout_ms": 6000, "rebalance_timeout_ms": PARK_MS,
                    "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b"\x00" * 10}]}
            # JoinGroup v4+ (KIP-394): the first join gets a member id, the second parks with it.
            conn.send(JOIN_GROUP, 5, join)
            first = conn.receive(JOIN_GROUP, 5)
            assert first["error_code"] == MEMBER_ID_REQUIRED and first["member_id"], first
            conn.send(JOIN_GROUP, 5, dict(join, member_id=first["member_id"]))
        for _ in range(PARKED):
            conn = _Raw(address)
            conns.append(conn)
            conn.send(FETCH, 11, {
                "replica_id": -1, "max_wait_ms": PARK_MS, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": "waiting", "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""})
        _create_and_produce(address)  # answered only once every request above was read
        broker.fetch_purgatory.purge()
        assert broker.fetch_purgatory.watched() == PARKED
        assert broker.group_coordinator._waits.watched() == PARKED
        yield address
    finally:
        for conn in conns:
            conn.close()
        broker.close()


def _rounds(config: Any) -> int:
    return 3 if smoke(config) else ROUNDS


def test_nothing_parked(benchmark: Any, request: Any, quiet: Address) -> None:
    info(benchmark, "create+produce while parked", 1, "rounds", peer=True)
    benchmark.pedantic(_create_and_produce, args=(quiet,), rounds=_rounds(request.config), iterations=1)


def test_2000_parked(benchmark: Any, request: Any, parked: Address) -> None:
    info(benchmark, "create+produce while parked", 1, "rounds",
         target="< 100 ms with 1,000 joins and 1,000 fetches parked")
    benchmark.pedantic(_create_and_produce, args=(parked,), rounds=_rounds(request.config), iterations=1)
    stats: Optional[Any] = benchmark.stats
    if stats is not None and asserting(request.config):
        median = statistics.median(stats.stats.data)
        assert median < TARGET_S, "median %.1f ms per round, target %.0f ms" % (median * 1e3, TARGET_S * 1e3)
