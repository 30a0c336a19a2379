"""The Kafka protocol server over raw sockets: framing, versions, limits, long polls, SASL.

Requests are framed with :mod:`pylogq.protocol` and written to a plain socket
(:class:`Wire`), so each test controls the exact bytes and their timing: the
server's behaviour at the edges (unsupported versions, bad sizes, idle and
queue limits, shutdown) is checked without a client library smoothing it over.
Real clients appear where the behaviour is theirs to see (SASL/PLAIN).
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
import time
from types import SimpleNamespace
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from pylogq import Broker
from pylogq.protocol import (
    REQUEST_HEADER,
    REQUESTS,
    RESPONSE_HEADER,
    RESPONSES,
    SUPPORTED_VERSIONS,
    Reader,
    Writer,
    header_versions,
)
from pylogq.records import build_batch, iter_batches
from pylogq.server.connection import COPY_CHUNK, Connection
from pylogq.storage.segment import FileRegion

TEST_CONFIG: Dict[str, Any] = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 2}
DEADLINE_S = 30.0  # how long a test waits for something that should happen at once, on a loaded machine

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
CREATE_TOPICS = 19
SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 17, 18, 36
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
DESCRIBE_GROUPS = 15
SASL_AUTHENTICATION_FAILED = 58

Address = Tuple[str, int]


# -- a raw protocol connection ---------------------------------------------------------


def encode_request(api_key: int, version: int, body: Optional[Dict[str, Any]], correlation_id: int,
                   client_id: Optional[str] = "pylogq-test") -> bytes:
    """A whole request frame (size prefix, header, body) for ``api_key`` at ``version``."""
    w = Writer()
    REQUEST_HEADER.encode_into(w, {"request_api_key": api_key, "request_api_version": version,
                                   "correlation_id": correlation_id, "client_id": client_id},
                               header_versions(api_key, version)[0])
    REQUESTS[api_key].encode_into(w, body or {}, version)
    data = w.getvalue()
    return struct.pack(">i", len(data)) + data


def decode_response(api_key: int, version: int, frame: bytes,
                    header_version: Optional[int] = None) -> Tuple[int, Dict[str, Any]]:
    """(correlation id, body) of a response frame without its size prefix."""
    r = Reader(frame)
    if header_version is None:
        header_version = header_versions(api_key, version)[1]
    header = RESPONSE_HEADER.decode_from(r, header_version)
    body = RESPONSES[api_key].decode_from(r, version)
    assert r.remaining == 0, "%d trailing bytes in a %d v%d response" % (r.remaining, api_key, version)
    return header["correlation_id"], body


class Wire:
    """One raw Kafka protocol connection with blocking reads bounded by a deadline."""

    def __init__(self, address: Address, timeout: float = DEADLINE_S, client_id: Optional[str] = "pylogq-test") -> None:
        self.client_id = client_id
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_id = 0

    def __enter__(self) -> "Wire":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: Optional[Dict[str, Any]] = None,
             correlation_id: Optional[int] = None) -> int:
        """Send one request; -> its correlation id."""
        if correlation_id is None:
            self._next_id += 1
            correlation_id = self._next_id
        self.sock.sendall(encode_request(api_key, version, body, correlation_id, self.client_id))
        return correlation_id

    def read_frame(self) -> Optional[bytes]:
        """The next response frame without its size prefix; None when the server closed."""
        head = self._read_exactly(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        body = self._read_exactly(size)
        assert body is not None, "connection closed inside a %d-byte response" % size
        return body

    def _read_exactly(self, n: int) -> Optional[bytes]:
        chunks = []
        while n:
            try:
                chunk = self.sock.recv(n)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self, api_key: int, version: int) -> Tuple[int, Dict[str, Any]]:
        frame = self.read_frame()
        assert frame is not None, "the server closed the connection instead of answering"
        return decode_response(api_key, version, frame)

    def request(self, api_key: int, version: int, body: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Send a request and read its response, checking the correlation id."""
        cid = self.send(api_key, version, body)
        got, response = self.receive(api_key, version)
        assert got == cid
        return response

    def closed_by_server(self) -> bool:
        """Whether the server closed the connection (True) or sent a frame (False)."""
        return self.read_frame() is None


# -- request bodies --------------------------------------------------------------------


def produce_body(topic: str, values: List[bytes], acks: int = 1, partition: int = 0) -> Dict[str, Any]:
    batch = bytes(build_batch(values, keys=[b"k%d" % i for i in range(len(values))]))
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}


def fetch_body(topic: str, offset: int, max_wait_ms: int, min_bytes: int = 1, partition: int = 0) -> Dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def metadata_body(*topics: str) -> Dict[str, Any]:
    return {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False}


def fetched_values(response: Dict[str, Any]) -> List[bytes]:
    """Every record value in a Fetch response's first partition."""
    from pylogq.records import decode_columns

    data = response["responses"][0]["partitions"][0]["records"] or b""
    if not data:
        return []
    assert list(iter_batches(data, check_crc=True))
    columns = decode_columns(data)
    return [bytes(columns.value(i) or b"") for i in range(len(columns))]


def advertised_table() -> List[Dict[str, int]]:
    return [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())]


def requests_in_flight(broker: Broker) -> int:
    """Requests read and not yet answered across the broker's listeners (e.g. parked fetches)."""
    total = 0
    for server in broker._servers:
        for _ in range(100):
            try:
                connections = list(server._connections)
                break
            except RuntimeError:  # the set changed size under the copy: the loop thread accepted one
                continue
        total += sum(conn.in_flight for conn in connections)
    return total


def wait_for(condition: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.005)


# -- fixtures --------------------------------------------------------------------------


ServeFn = Callable[..., Tuple[Broker, Address]]


@pytest.fixture
def serve(tmp_path: Any) -> Iterator[ServeFn]:
    """Start a broker in ``tmp_path`` serving on a free loopback port with the given server options."""
    brokers: List[Broker] = []

    def start(**options: Any) -> Tuple[Broker, Address]:
        config = dict(TEST_CONFIG)
        config.update(options.pop("config", {}))
        broker = Broker(str(tmp_path / ("broker%d" % len(brokers))), **config)
        brokers.append(broker)
        address = broker.serve("127.0.0.1", 0, **options)
        return broker, address

    yield start
    for broker in brokers:
        broker.close()


@pytest.fixture(autouse=True)
def no_server_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Whatever a client sends, the server logs no error (an unhandled exception would)."""
    caplog.set_level("INFO", logger="pylogq")
    yield
    bad = [r for r in caplog.get_records("call") + caplog.get_records("teardown")
           if r.levelno >= 40 and (r.name.startswith("pylogq") or r.name == "asyncio")]
    assert not bad, "server errors logged: %s" % ["%s: %s" % (r.name, r.getMessage()) for r in bad]


@pytest.fixture
def served(serve: ServeFn) -> Tuple[Broker, Address]:
    """A broker with default server options and a one-partition topic ``t``."""
    broker, address = serve()
    broker.create_topic("t", 1)
    return broker, address


# -- ApiVersions -----------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_api_versions_answers_the_advertised_table(served: Tuple[Broker, Address], version: int) -> None:
    with Wire(served[1]) as wire:
        response = wire.request(API_VERSIONS, version)
    assert response["error_code"] == 0
    assert response["api_keys"] == advertised_table()


@pytest.mark.parametrize("version", [3, 4])
def test_flexible_api_versions_answered_in_its_own_layout(served: Tuple[Broker, Address], version: int) -> None:
    """kafka-python opens with v4 and librdkafka with v3 (request header v2, response header v0)."""
    with Wire(served[1]) as wire:
        assert header_versions(API_VERSIONS, version) == (2, 0)
        response = wire.request(API_VERSIONS, version,
                                {"client_software_name": "pylogq-test", "client_software_version": "1.0"})
        assert response["error_code"] == 0
        assert response["api_keys"] == advertised_table()
        assert response["finalized_features_epoch"] == -1 and response["supported_features"] == []


@pytest.mark.parametrize("name, version", [("", "1.0"), ("-bad", "1.0"), ("ok", "1.0 beta"), ("ok", "")])
def test_api_versions_v3_refuses_a_bad_client_software_name(served: Tuple[Broker, Address], name: str,
                                                            version: str) -> None:
    with Wire(served[1]) as wire:
        response = wire.request(API_VERSIONS, 3, {"client_software_name": name, "client_software_version": version})
        assert response["error_code"] == INVALID_REQUEST


def test_a_newer_api_versions_gets_v0_layout_unsupported_with_the_full_list(served: Tuple[Broker, Address]) -> None:
    """A client newer than the broker opens with an ApiVersions version past the table: it must
    read a v0 response with error 35 and the table, then retry at a version in it."""
    newest = SUPPORTED_VERSIONS[API_VERSIONS][1]
    with Wire(served[1]) as wire:
        cid = 7
        frame = bytearray(encode_request(API_VERSIONS, newest, {"client_software_name": "future",
                                                                "client_software_version": "9"}, cid))
        struct.pack_into(">h", frame, 6, newest + 1)  # the request header's version
        wire.sock.sendall(frame)
        frame = wire.read_frame()
        assert frame is not None
        got, response = decode_response(API_VERSIONS, 0, frame, header_version=0)
        assert got == cid
        assert response["error_code"] == UNSUPPORTED_VERSION
        assert response["api_keys"] == advertised_table()
        # The connection stays usable: the client retries at a version it shares.
        retry = wire.request(API_VERSIONS, newest, {"client_software_name": "future", "client_software_version": "9"})
        assert retry["error_code"] == 0


def test_aiokafka_is_offered_describe_groups_up_to_v2(served: Tuple[Broker, Address]) -> None:
    """aiokafka 0.14 decodes DescribeGroups v3+ with the v2 layout: its ApiVersions (v0, client id
    aiokafka-<version>) gets DescribeGroups up to v2; other clients, even at v0, get every version."""
    def describe_groups_range(client_id: str, version: int) -> Tuple[int, int]:
        with Wire(served[1], client_id=client_id) as wire:
            table = wire.request(API_VERSIONS, version)["api_keys"]
        (entry,) = [e for e in table if e["api_key"] == DESCRIBE_GROUPS]
        return entry["min_version"], entry["max_version"]

    assert describe_groups_range("aiokafka-0.14.0", 0) == (0, 2)
    assert describe_groups_range("aiokafka-0.14.0", 3) == SUPPORTED_VERSIONS[DESCRIBE_GROUPS]
    assert describe_groups_range("kafka-python-3.0.12", 0) == SUPPORTED_VERSIONS[DESCRIBE_GROUPS]


def _unadvertised_versions() -> List[Tuple[int, int]]:
    out = []
    for key, (lo, hi) in sorted(SUPPORTED_VERSIONS.items()):
        if key == API_VERSIONS:
            continue
        if lo > 0:
            out.append((key, lo - 1))
        out.append((key, hi + 1))
    return out


@pytest.mark.parametrize("api_key,version", _unadvertised_versions())
def test_unadvertised_version_gets_unsupported_version_or_a_close(
        served: Tuple[Broker, Address], api_key: int, version: int) -> None:
    """Outside the advertised range the server answers UNSUPPORTED_VERSION where the
    response has a top-level error code at that version, else it closes the connection;
    either way other connections keep being served."""
    _, address = served
    schema = RESPONSES[api_key]
    with Wire(address) as other, Wire(address) as wire:
        assert other.request(API_VERSIONS, 2)["error_code"] == 0
        table = REQUESTS[api_key]
        body = table.defaults() if table.min_version <= version <= table.max_version else None
        cid = 77
        if body is not None:
            wire.send(api_key, version, body, correlation_id=cid)
        else:  # a version the table cannot even encode: a bare header is enough
            header = struct.pack(">hhi", api_key, version, cid) + struct.pack(">h", 4) + b"test"
            wire.sock.sendall(struct.pack(">i", len(header)) + header)
        frame = wire.read_frame()
        if frame is not None:
            assert schema.min_version <= version <= schema.max_version
            got, response = decode_response(api_key, version, frame)
            assert got == cid
            assert response["error_code"] == UNSUPPORTED_VERSION
            # Answered, not closed: the connection still serves a supported request.
            assert wire.request(API_VERSIONS, 2)["error_code"] == 0
        assert other.request(METADATA, 4, metadata_body("t"))["topics"][0]["error_code"] == 0


@pytest.mark.parametrize("api_key", [-1, 4, 5, 6, 7, 23, 60, 1000, 32767])
def test_unknown_api_key_closes_only_that_connection(served: Tuple[Broker, Address], api_key: int) -> None:
    _, address = served
    with Wire(address) as other, Wire(address) as wire:
        assert other.request(API_VERSIONS, 2)["error_code"] == 0
        header = struct.pack(">hhi", api_key, 0, 5) + struct.pack(">h", -1)
        wire.sock.sendall(struct.pack(">i", len(header)) + header)
        assert wire.closed_by_server()
        assert other.request(API_VERSIONS, 1)["error_code"] == 0
    with Wire(address) as fresh:
        assert fresh.request(API_VERSIONS, 0)["error_code"] == 0


@pytest.mark.parametrize("count", [10001, 0x7FFFFFFF])
def test_partition_counts_past_kafkas_per_request_cap_are_refused(served: Tuple[Broker, Address],
                                                                   count: int) -> None:
    """Kafka refuses more than 10,000 new partitions per request (POLICY_VIOLATION); a broker
    that tried would spend minutes and every file descriptor opening logs."""
    broker, address = served
    with Wire(address) as wire:
        created = wire.request(19, 3, {"topics": [{"name": "huge", "num_partitions": count, "replication_factor": 1,
                                                   "assignments": [], "configs": []}],
                                       "timeout_ms": 5000, "validate_only": False})
        assert created["topics"][0]["error_code"] == 44
        assert "Excessively large number of partitions" in created["topics"][0]["error_message"]
        for validate_only in (False, True):
            grown = wire.request(37, 1, {"topics": [{"name": "t", "count": min(count + 1, 0x7FFFFFFF),
                                                     "assignments": None}], "timeout_ms": 5000,
                                         "validate_only": validate_only})
            assert grown["results"][0]["error_code"] == 44
        checked = wire.request(37, 1, {"topics": [{"name": "t", "count": 3, "assignments": None}],
                                       "timeout_ms": 5000, "validate_only": True})
        assert checked["results"][0]["error_code"] == 0  # valid, and nothing was created
    assert broker.list_topics() == ["t"]
    assert broker.partitions_for("t") == 1


# -- pipelining and acks=0 ------------------------------------------------------------


def test_pipelined_requests_are_answered_in_order(served: Tuple[Broker, Address]) -> None:
    _, address = served
    plan: List[Tuple[int, int, Dict[str, Any]]] = []
    for i in range(50):
        kind = i % 3
        if kind == 0:
            plan.append((METADATA, 4, metadata_body("t")))
        elif kind == 1:
            plan.append((API_VERSIONS, i % 3, {}))
        else:
            plan.append((PRODUCE, 7, produce_body("t", [b"value-%d" % i])))
    with Wire(address) as wire:
        frames = b"".join(encode_request(k, v, body, 1000 + i) for i, (k, v, body) in enumerate(plan))
        wire.sock.sendall(frames)  # all 50 before reading any response
        produced = 0
        for i, (api_key, version, _) in enumerate(plan):
            cid, response = wire.receive(api_key, version)
            assert cid == 1000 + i
            if api_key == PRODUCE:
                partition = response["responses"][0]["partition_responses"][0]
                assert partition["error_code"] == 0
                assert partition["base_offset"] == produced
                produced += 1
            elif api_key == API_VERSIONS:
                assert response["error_code"] == 0
            else:
                assert response["topics"][0]["name"] == "t"


def test_produce_with_acks_0_gets_no_response(served: Tuple[Broker, Address]) -> None:
    broker, address = served
    with Wire(address) as wire:
        wire.send(PRODUCE, 7, produce_body("t", [b"fire", b"forget"], acks=0), correlation_id=1)
        cid = wire.send(API_VERSIONS, 2, correlation_id=2)
        got, response = wire.receive(API_VERSIONS, 2)  # the first frame back answers the second request
        assert got == cid == 2
        assert response["error_code"] == 0
        # The acks=0 records were appended all the same.
        cid = wire.send(PRODUCE, 7, produce_body("t", [b"acked"]), correlation_id=3)
        got, response = wire.receive(PRODUCE, 7)
        assert got == 3
        assert response["responses"][0]["partition_responses"][0]["base_offset"] == 2
    assert broker.list_offsets("t", 0, -1)[0] == 3


# -- size limits -----------------------------------------------------------------------


@pytest.mark.parametrize("size", [1025, 1 << 30, 0x7FFFFFFF, -1, -(1 << 31)])
def test_request_size_outside_the_limit_closes_before_the_body(serve: ServeFn, size: int) -> None:
    """Only the 4-byte size is sent: the server must close without waiting for (or
    allocating) the body, and keep serving everyone else."""
    _, address = serve(socket_request_max_bytes=1024)
    with Wire(address) as other, Wire(address) as wire:
        wire.sock.sendall(struct.pack(">i", size))
        assert wire.closed_by_server()
        assert other.request(API_VERSIONS, 2)["error_code"] == 0


def test_request_at_the_size_limit_is_read(serve: ServeFn) -> None:
    broker, address = serve(socket_request_max_bytes=1024)
    broker.create_topic("t", 1)
    with Wire(address) as wire:
        body = metadata_body("t")
        frame = encode_request(METADATA, 4, body, 9)
        # Pad the client id so the request is exactly 1024 bytes.
        pad = 1024 - (len(frame) - 4)
        frame = encode_request(METADATA, 4, body, 9, client_id="pylogq-test" + "x" * pad)
        assert len(frame) - 4 == 1024
        wire.sock.sendall(frame)
        cid, response = wire.receive(METADATA, 4)
        assert cid == 9 and response["topics"][0]["error_code"] == 0


def test_short_request_closes_the_connection(served: Tuple[Broker, Address]) -> None:
    _, address = served
    for payload in (b"", b"\x00\x12", b"\x00\x12\x00\x00\x00\x00\x00"):
        with Wire(address) as wire:
            wire.sock.sendall(struct.pack(">i", len(payload)) + payload)
            assert wire.closed_by_server()


# -- connections.max.idle.ms -----------------------------------------------------------


def test_idle_connection_is_closed_but_not_one_with_a_fetch_in_flight(serve: ServeFn,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    broker, address = serve(connections_max_idle_ms=300)
    broker.create_topic("t", 1)
    with Wire(address, timeout=60) as polling:
        cid = polling.send(FETCH, 11, fetch_body("t", 0, max_wait_ms=120000))
        wait_for(lambda: requests_in_flight(broker) == 1, "the fetch to park")
        with Wire(address) as idle:
            assert idle.request(API_VERSIONS, 2)["error_code"] == 0
            assert idle.closed_by_server()

        def reasons() -> List[str]:
            return [r.getMessage().split(" reason=", 1)[1] for r in caplog.get_records("call")
                    if "connection closed id=" in r.getMessage()]

        # Closed for being idle (the server logs the reason once the socket is closed), and only it.
        wait_for(lambda: bool(reasons()), "the server to log the idle connection's close")
        assert reasons() == ["idle for more than connections.max.idle.ms (300)"]
        # The polling connection has been waiting longer than the idle one lived:
        # it must still be open, and answer when data arrives.
        broker.produce("t", 0, bytes(build_batch([b"wake"])))
        got, response = polling.receive(FETCH, 11)
        assert got == cid
        assert fetched_values(response) == [b"wake"]
        assert polling.request(API_VERSIONS, 2)["error_code"] == 0


def test_half_sent_requests_reaped_as_idle_do_not_leak_queue_slots(serve: ServeFn) -> None:
    """A client that sends a size and part of a body holds a request slot while the server
    reads; reaping it as idle must give the slot back, or the server stops reading."""
    _, address = serve(connections_max_idle_ms=200, queued_max_requests=2)
    for _ in range(3):
        stalled = [Wire(address) for _ in range(2)]
        for wire in stalled:
            wire.sock.sendall(struct.pack(">i", 100) + b"\x00\x12")
        for wire in stalled:
            assert wire.closed_by_server()
            wire.close()
    with Wire(address) as wire:
        assert wire.request(API_VERSIONS, 2)["error_code"] == 0


# -- queued.max.requests ---------------------------------------------------------------


def test_queue_limit_still_answers_every_pipelined_request(serve: ServeFn) -> None:
    broker, address = serve(queued_max_requests=1)
    broker.create_topic("t", 1)
    with Wire(address) as parked:
        # A parked long poll must not hold the only slot.
        parked_cid = parked.send(FETCH, 11, fetch_body("t", 0, max_wait_ms=30000))
        wait_for(lambda: requests_in_flight(broker) == 1, "the fetch to park")
        wires = [Wire(address) for _ in range(4)]
        try:
            for n, wire in enumerate(wires):
                wire.sock.sendall(b"".join(
                    encode_request(API_VERSIONS, 2, {}, i) if i % 2 else
                    encode_request(PRODUCE, 7, produce_body("t", [b"%d-%d" % (n, i)]), i)
                    for i in range(100)))
            for wire in wires:
                for i in range(100):
                    cid, response = wire.receive(API_VERSIONS if i % 2 else PRODUCE, 2 if i % 2 else 7)
                    assert cid == i
        finally:
            for wire in wires:
                wire.close()
        got, response = parked.receive(FETCH, 11)  # woken by the first produce
        assert got == parked_cid and fetched_values(response)
    assert broker.list_offsets("t", 0, -1)[0] == 200


# -- long-poll Fetch -------------------------------------------------------------------


def test_long_poll_fetch_returns_when_another_client_produces(served: Tuple[Broker, Address]) -> None:
    """Woken by the produce, not by its max_wait_ms: that is longer than the whole wait for the
    answer (the reader's socket timeout), so an answer with the record can only come from it."""
    broker, address = served
    events: List[str] = []
    with Wire(address, timeout=60) as consumer, Wire(address) as producer:
        cid = consumer.send(FETCH, 11, fetch_body("t", 0, max_wait_ms=120000))
        wait_for(lambda: requests_in_flight(broker) == 1, "the fetch to park")
        response_box: List[Dict[str, Any]] = []

        def read() -> None:
            response_box.append(consumer.receive(FETCH, 11)[1])
            events.append("fetch answered")

        reader = threading.Thread(target=read)
        reader.start()
        events.append("producing")
        answer = producer.request(PRODUCE, 7, produce_body("t", [b"hello"]))
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        reader.join(90)
        assert not reader.is_alive(), "the parked fetch was not answered after the produce"
    assert events == ["producing", "fetch answered"]
    assert response_box, "the fetch's reader failed (see its thread's exception)"
    assert fetched_values(response_box[0]) == [b"hello"]
    assert cid == 1


def test_long_poll_fetch_returns_empty_after_max_wait(served: Tuple[Broker, Address]) -> None:
    _, address = served
    with Wire(address) as wire:
        started = time.monotonic()
        response = wire.request(FETCH, 11, fetch_body("t", 0, max_wait_ms=300))
        elapsed = time.monotonic() - started
    partition = response["responses"][0]["partitions"][0]
    assert partition["error_code"] == 0
    assert partition["high_watermark"] == 0
    assert fetched_values(response) == []
    assert elapsed >= 0.25


def test_fetch_behind_a_parked_fetch_on_one_connection_waits_its_turn(served: Tuple[Broker, Address]) -> None:
    """Responses leave in request order: a quick request pipelined after a parked long
    poll is answered after it, but a produce behind it still appends at once."""
    broker, address = served
    with Wire(address) as wire:
        wire.sock.sendall(encode_request(FETCH, 11, fetch_body("t", 0, max_wait_ms=30000), 1)
                          + encode_request(PRODUCE, 7, produce_body("t", [b"behind"]), 2))
        cid, response = wire.receive(FETCH, 11)
        assert cid == 1 and fetched_values(response) == [b"behind"]
        cid, response = wire.receive(PRODUCE, 7)
        assert cid == 2 and response["responses"][0]["partition_responses"][0]["base_offset"] == 0


def test_large_fetch_is_sent_whole(served: Tuple[Broker, Address]) -> None:
    """Regions past the copy threshold go out with sendfile; the bytes must be the same."""
    broker, address = served
    values = [b"%06d" % i + b"v" * 1000 for i in range(600)]
    for start in range(0, len(values), 100):
        broker.produce("t", 0, bytes(build_batch(values[start:start + 100])))
    with Wire(address) as wire:
        body = fetch_body("t", 0, max_wait_ms=0)
        body["topics"][0]["partitions"][0]["partition_max_bytes"] = 8 << 20
        body["max_bytes"] = 8 << 20
        response = wire.request(FETCH, 11, body)
        assert len(response["responses"][0]["partitions"][0]["records"]) > 512 * 1024
        assert fetched_values(response) == values
        # A client that goes away mid-response costs the server nothing but that connection.
        wire.send(FETCH, 11, body)
    with Wire(address) as wire:
        assert wire.request(API_VERSIONS, 2)["error_code"] == 0


def test_fetch_response_is_capped_by_fetch_max_bytes_but_always_makes_progress(serve: ServeFn) -> None:
    """The broker's ``fetch.max.bytes`` bounds a response below what the client asked for,
    yet a batch larger than the cap still comes back whole, so a consumer never stalls."""
    broker, address = serve(config={"fetch.max.bytes": 4096})
    big = [b"%04d" % i + b"b" * 2000 for i in range(4)]  # one ~8 KB batch, over the cap
    small = [[b"%04d" % i + b"s" * 1000] for i in range(10)]  # ~1 KB batches
    broker.produce("t", 0, bytes(build_batch(big)))
    for values in small:
        broker.produce("t", 0, bytes(build_batch(values)))
    with Wire(address) as wire:
        body = fetch_body("t", 0, max_wait_ms=0)
        body["max_bytes"] = body["topics"][0]["partitions"][0]["partition_max_bytes"] = 50 << 20
        first = wire.request(FETCH, 11, body)
        assert fetched_values(first) == big  # the whole oversized batch, and nothing after it
        body["topics"][0]["partitions"][0]["fetch_offset"] = len(big)
        second = wire.request(FETCH, 11, body)
        records = second["responses"][0]["partitions"][0]["records"]
        assert 0 < len(records) <= 4096
        got = fetched_values(second)
        assert got == [v[0] for v in small[:len(got)]] and 1 < len(got) < len(small)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_failing_handler_closes_only_its_connection(served: Tuple[Broker, Address], asynchronous: bool,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    broker, address = served
    handlers = broker._servers[0].handlers

    def fail(*args: Any) -> Any:
        raise RuntimeError("handler bug")

    async def fail_later(*args: Any) -> Any:
        raise RuntimeError("handler bug")

    handlers._table[METADATA] = fail_later if asynchronous else fail
    with Wire(address) as other, Wire(address) as wire:
        wire.send(METADATA, 4, metadata_body("t"))
        assert wire.closed_by_server()
        assert other.request(API_VERSIONS, 2)["error_code"] == 0
    failures = [r for r in caplog.records if r.name == "pylogq.server" and r.levelname == "ERROR"]
    assert failures and failures[0].exc_info is not None
    caplog.clear()  # the error was the point here


# -- file regions --------------------------------------------------------------------


class RecordingWriter:
    """A writing end that is no StreamWriter (as a TLS connection's): what it is given, in order."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, bytes]] = []

    def write(self, data: bytes) -> None:
        self.calls.append(("write", bytes(data)))

    async def drain(self) -> None:
        self.calls.append(("drain", b""))

    def close(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def test_regions_are_copied_in_chunks_where_there_is_no_sendfile(tmp_path: Any) -> None:
    """A writer that cannot send a file gets a large region a chunk at a time, each drained before
    the next is read, and a small one whole with no drain of its own (it leaves with the rest of
    the response: over TLS, in the same records as its framing)."""
    data = os.urandom(2 * COPY_CHUNK + 1000)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"x" * 10 + data)
    writer = RecordingWriter()
    conn = SimpleNamespace(writer=writer)  # all _send_region uses of its connection
    with open(path, "rb", buffering=0) as f:
        asyncio.run(Connection._send_region(conn, FileRegion(f, 10, len(data), 0)))  # type: ignore[arg-type]
        assert [kind for kind, _ in writer.calls] == ["write", "drain"] * 3
        assert [len(d) for kind, d in writer.calls if kind == "write"] == [COPY_CHUNK, COPY_CHUNK, 1000]
        assert b"".join(d for kind, d in writer.calls if kind == "write") == data
        writer.calls.clear()
        asyncio.run(Connection._send_region(conn, FileRegion(f, 10, 5000, 0)))  # type: ignore[arg-type]
        assert writer.calls == [("write", data[:5000])]


# -- SASL/PLAIN ------------------------------------------------------------------------


SASL_USERS = {"alice": "secret"}


def _kafka_python_sasl(address: Address, password: str) -> Dict[str, Any]:
    return {"bootstrap_servers": "%s:%d" % address, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice", "sasl_plain_password": password,
            "request_timeout_ms": 5000}


def test_sasl_plain_with_kafka_python(serve: ServeFn) -> None:
    kafka = pytest.importorskip("kafka")
    broker, address = serve(sasl_users=SASL_USERS)
    broker.create_topic("secure", 1)
    producer = kafka.KafkaProducer(acks="all", **_kafka_python_sasl(address, "secret"))
    try:
        metadata = producer.send("secure", key=b"k", value=b"authenticated").get(timeout=DEADLINE_S)
    finally:
        producer.close()
    assert metadata.offset == 0
    consumer = kafka.KafkaConsumer(auto_offset_reset="earliest", **_kafka_python_sasl(address, "secret"))
    values: List[bytes] = []
    try:
        consumer.assign([kafka.TopicPartition("secure", 0)])
        deadline = time.monotonic() + DEADLINE_S
        while not values and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                values += [m.value for m in batch]
    finally:
        consumer.close()
    assert values == [b"authenticated"]


def test_sasl_plain_wrong_password_fails_with_an_authentication_error(
        serve: ServeFn, caplog: pytest.LogCaptureFixture) -> None:
    """The failure answer reaches the client before the connection closes, so each client
    reports an authentication error, not a lost connection."""
    kafka = pytest.importorskip("kafka")
    confluent_kafka = pytest.importorskip("confluent_kafka")
    _, address = serve(sasl_users=SASL_USERS)

    errors: List[Any] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": "%s:%d" % address, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "wrong",
        "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + DEADLINE_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.05)
    assert errors, "confluent-kafka reported no error for a wrong password"
    assert errors[0].code() == confluent_kafka.KafkaError._AUTHENTICATION
    assert "Invalid username or password" in errors[0].str()

    caplog.set_level("ERROR", logger="kafka")
    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaProducer(bootstrap_timeout_ms=1000, **_kafka_python_sasl(address, "wrong"))
    seen = [r.getMessage() for r in caplog.records if r.name.startswith("kafka")]
    assert any("SaslAuthenticationFailedError" in m for m in seen), "no authentication failure in %s" % seen

    with Wire(address) as wire:
        handshake = wire.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert handshake == {"error_code": 0, "mechanisms": ["PLAIN"]}
        answer = wire.request(SASL_AUTHENTICATE, 1, {"auth_bytes": b"\x00alice\x00wrong"})
        assert answer["error_code"] == SASL_AUTHENTICATION_FAILED
        assert "Invalid username or password" in answer["error_message"]
        assert wire.closed_by_server()


@pytest.mark.parametrize("api_key,version,body", [
    (METADATA, 4, metadata_body("t")),
    (PRODUCE, 7, produce_body("t", [b"x"])),
    (FETCH, 11, fetch_body("t", 0, 0)),
    (SASL_AUTHENTICATE, 1, {"auth_bytes": b"\x00alice\x00secret"}),  # no handshake first
])
def test_sasl_unauthenticated_requests_close_the_connection(
        serve: ServeFn, api_key: int, version: int, body: Dict[str, Any]) -> None:
    broker, address = serve(sasl_users=SASL_USERS)
    broker.create_topic("t", 1)
    with Wire(address) as wire:
        # ApiVersions is answered before authentication ...
        assert wire.request(API_VERSIONS, 2)["error_code"] == 0
        # ... anything else but SaslHandshake closes the connection.
        wire.send(api_key, version, body)
        assert wire.closed_by_server()
    assert broker.list_offsets("t", 0, -1)[0] == 0


@pytest.mark.parametrize("version", range(3))
def test_sasl_handshake_v1_then_authenticate(serve: ServeFn, version: int) -> None:
    _, address = serve(sasl_users=SASL_USERS)
    with Wire(address) as wire:
        assert wire.request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 33
    with Wire(address) as wire:
        assert wire.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        answer = wire.request(SASL_AUTHENTICATE, version, {"auth_bytes": b"alice\x00alice\x00secret"})
        assert answer["error_code"] == 0 and answer["auth_bytes"] == b""
        if version >= 1:
            assert answer["session_lifetime_ms"] == 0  # no re-authentication required
        response = wire.request(METADATA, 4, metadata_body())
        assert response["brokers"][0]["port"] == address[1]


def test_sasl_handshake_v0_then_raw_token(serve: ServeFn) -> None:
    """SaslHandshake v0: the token follows as a bare frame and success is an empty frame."""
    _, address = serve(sasl_users=SASL_USERS)
    with Wire(address) as wire:
        assert wire.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}) == {"error_code": 0, "mechanisms": ["PLAIN"]}
        token = b"\x00alice\x00secret"
        wire.sock.sendall(struct.pack(">i", len(token)) + token)
        assert wire.read_frame() == b""
        assert wire.request(API_VERSIONS, 2)["error_code"] == 0
        assert wire.request(METADATA, 4, metadata_body())["controller_id"] == 0
    with Wire(address) as wire:
        wire.request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        token = b"\x00alice\x00nope"
        wire.sock.sendall(struct.pack(">i", len(token)) + token)
        assert wire.closed_by_server()


def test_plain_listener_refuses_sasl_handshake(served: Tuple[Broker, Address]) -> None:
    with Wire(served[1]) as wire:
        answer = wire.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert answer["error_code"] == 34  # ILLEGAL_SASL_STATE
        assert wire.request(API_VERSIONS, 2)["error_code"] == 0


# -- shutdown --------------------------------------------------------------------------


def test_close_answers_a_parked_long_poll(tmp_path: Any) -> None:
    broker = Broker(str(tmp_path / "b"), **TEST_CONFIG)
    try:
        broker.create_topic("t", 1)
        address = broker.serve("127.0.0.1", 0)
        # The fetch could wait longer than the reader's socket timeout: an answer is the close's.
        with Wire(address, timeout=60) as wire:
            cid = wire.send(FETCH, 11, fetch_body("t", 0, max_wait_ms=120000))
            wait_for(lambda: requests_in_flight(broker) == 1, "the fetch to park")
            closer = threading.Thread(target=broker.close)
            closer.start()
            got, response = wire.receive(FETCH, 11)
            assert got == cid
            assert response["responses"][0]["partitions"][0]["error_code"] == 0
            assert fetched_values(response) == []
            assert wire.closed_by_server()
            closer.join(60)
            assert not closer.is_alive(), "Broker.close did not return"
    finally:
        broker.close()
    assert broker.closed


def test_the_request_log_has_a_line_per_answered_request(served: Tuple[Broker, Address],
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's request logger: at DEBUG, ``pylogq.request`` names each answered request, its
    client and the error codes of its answer (here a topic that does not exist: 3)."""
    caplog.set_level("DEBUG", logger="pylogq.request")
    with Wire(served[1], client_id="request-log-test") as wire:
        wire.request(API_VERSIONS, 3)
        response = wire.request(METADATA, 4, {"topics": [{"name": "no-such-topic"}], "allow_auto_topic_creation": False})
    assert [t["error_code"] for t in response["topics"]] == [3]
    deadline = time.monotonic() + DEADLINE_S
    while True:  # the line is written once the answer's last byte is sent, just after the client reads it
        lines = [r.getMessage() for r in caplog.records if r.name == "pylogq.request"]
        if len(lines) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert lines[0].startswith("completed ApiVersions v3 id=") and "corr=1 client_id=request-log-test" in lines[0]
    assert lines[1].startswith("completed Metadata v4 ") and "corr=2 " in lines[1] and "errors={3: 1}" in lines[1]
    assert "total_ms=" in lines[1]
