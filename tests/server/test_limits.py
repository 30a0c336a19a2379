"""What a client can hold of the server: request slots, request memory, time and connections.

Real sockets against a real ``pylogq.Broker(...).serve()`` listener, with the raw
protocol client of :mod:`.test_server`: half-open requests (a size prefix and no body)
hold no ``queued.max.requests`` slot, a request that does not arrive within
``socket.request.read.timeout.ms`` or stops arriving for ``connections.max.idle.ms``
closes its connection, ``queued.max.request.bytes`` bounds the requests being read,
and ``max.connections``, ``max.connections.per.ip`` and its overrides refuse new
connections at once, with rate-limited log lines. Waits are on the server's state with
a deadline; no assertion is on how long anything took.
"""

from __future__ import annotations

import socket
import struct
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from pylogq import Broker
from pylogq.errors import ConfigError
from pylogq.server import KafkaServer, ServerConfig
from pylogq.server.connection import Connection

from .._limits import need_files
from .test_server import (  # noqa: F401 - no_server_errors is an autouse fixture: it applies here too
    API_VERSIONS, DEADLINE_S, TEST_CONFIG, Wire, encode_request, no_server_errors, wait_for)

#: Connection and request limits, with ApiVersions and raw frames only (no record is served): the
#: compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

Address = Tuple[str, int]
HALF_OPEN = 500  # Kafka's default queued.max.requests: once every slot was taken by these
PROBE_TIMEOUT_S = 60.0  # a probe's answer that never comes; how soon it comes is not asserted


class Served:
    """A broker serving on a free loopback port, and its listener."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.address: Address = broker.serve("127.0.0.1", 0)
        server = broker._servers[-1]
        assert isinstance(server, KafkaServer)
        self.server = server

    def connections(self) -> List[Connection]:
        for _ in range(100):
            try:
                return list(self.server._connections)
            except RuntimeError:  # the set changed size under the copy: the loop thread accepted one
                continue
        raise AssertionError("could not copy the server's connections")

    def connection_of(self, wire: Wire) -> Optional[Connection]:
        """The server's side of ``wire`` (None before it is accepted and once it is closed)."""
        host, port = wire.sock.getsockname()[:2]
        peer = "%s:%d" % (host, port)
        return next((conn for conn in self.connections() if conn.peer == peer), None)

    def accepted(self, wire: Wire) -> Connection:
        """The server's side of ``wire``, once the server has accepted it."""
        wait_for(lambda: self.connection_of(wire) is not None, "the server to accept the connection")
        conn = self.connection_of(wire)
        assert conn is not None
        return conn


@pytest.fixture
def serve(tmp_path: Any) -> Iterator[Any]:
    """Start brokers with ``TEST_CONFIG`` plus the given Kafka keys; close them after the test."""
    started: List[Broker] = []

    def start(**config: Any) -> Served:
        settings: Dict[str, Any] = dict(TEST_CONFIG)
        settings.update(config)
        broker = Broker(str(tmp_path / ("broker%d" % len(started))), **settings)
        started.append(broker)
        return Served(broker)

    yield start
    for broker in started:
        broker.close()


def logged(caplog: pytest.LogCaptureFixture, text: str) -> List[str]:
    return [r.getMessage() for r in caplog.get_records("call") if text in r.getMessage()]


def closed_reasons(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [m.split(" reason=", 1)[1] for m in logged(caplog, "connection closed id=")]


class WireFrom(Wire):
    """A raw connection from another loopback address (all of 127/8 is loopback on Linux)."""

    def __init__(self, address: Address, source: str) -> None:
        try:
            self.sock = socket.create_connection(address, timeout=DEADLINE_S, source_address=(source, 0))
        except OSError as exc:
            pytest.skip("cannot connect from %s: %s" % (source, exc))
        self._next_id = 0
        self.client_id = "pylogq-test"


# -- request slots: taken once the request has arrived -----------------------------------


def test_half_open_requests_hold_no_slot_and_a_probe_is_answered(serve: Any) -> None:
    need_files(2 * HALF_OPEN + 256)  # both ends of each connection live in this process
    served = serve()
    assert served.server.queued_max_requests == HALF_OPEN
    half_open = []
    try:
        for _ in range(HALF_OPEN):
            wire = Wire(served.address)
            wire.sock.sendall(struct.pack(">i", 1000))  # a size, and never the body
            half_open.append(wire)
        wait_for(lambda: sum(conn.reading_since is not None for conn in served.connections()) == HALF_OPEN,
                 "the server to read every size prefix")
        # Every slot is still free while 500 requests are half read: a request holds one only
        # once it has arrived, so the probe below is read and answered, not queued behind them.
        assert served.server.request_places.free == HALF_OPEN
        with Wire(served.address, timeout=PROBE_TIMEOUT_S) as probe:
            assert probe.request(API_VERSIONS, 2)["error_code"] == 0
    finally:
        for wire in half_open:
            wire.close()
    wait_for(lambda: served.server.connection_count == 0, "the server to close the half-open connections")
    assert served.server.request_places.free == HALF_OPEN  # none leaked


# -- time: socket.request.read.timeout.ms and connections.max.idle.ms ----------------------


def test_a_trickling_request_is_closed_at_the_read_deadline(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    """One byte at a time, each as soon as the server has the last: never idle (progress),
    closed because the whole request did not arrive in time."""
    served = serve(**{"socket.request.read.timeout.ms": 2000, "connections.max.idle.ms": 1000})
    with Wire(served.address) as wire:
        wire.sock.sendall(struct.pack(">i", 1 << 20))
        conn = served.accepted(wire)
        sent = 0
        while served.connection_of(wire) is conn:
            try:
                wire.sock.sendall(b"x")
            except OSError:  # reset: the server closed while we sent
                break
            sent += 1
            wait_for(lambda: conn.reading_received >= sent or served.connection_of(wire) is not conn,
                     "the server to receive byte %d" % sent)
        assert wire.closed_by_server()
    assert 0 < conn.reading_received < 1 << 20
    reasons = closed_reasons(caplog)
    assert reasons == ["request not received within socket.request.read.timeout.ms (2000): %d of %d bytes"
                       % (conn.reading_received, 1 << 20)], reasons
    assert logged(caplog, "request read timed out id=%d" % conn.id)


def test_a_stalled_partial_request_is_closed_as_idle(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    served = serve(**{"connections.max.idle.ms": 300})
    with Wire(served.address) as stalled:
        stalled.sock.sendall(struct.pack(">i", 100) + b"\x00\x12")
        assert stalled.closed_by_server()
    with Wire(served.address) as other:
        assert other.request(API_VERSIONS, 2)["error_code"] == 0
    assert "idle for more than connections.max.idle.ms (300)" in closed_reasons(caplog)


def test_a_request_in_two_pieces_is_read_whole(serve: Any) -> None:
    served = serve()
    frame = encode_request(API_VERSIONS, 2, {}, 7)
    with Wire(served.address) as wire:
        wire.sock.sendall(frame[:9])
        conn = served.accepted(wire)
        wait_for(lambda: conn.reading_received == 5, "the first piece to arrive")
        wire.sock.sendall(frame[9:])
        cid, response = wire.receive(API_VERSIONS, 2)
        assert cid == 7 and response["error_code"] == 0


# -- memory: queued.max.request.bytes ------------------------------------------------------


def test_request_memory_bounds_requests_being_read(serve: Any) -> None:
    served = serve(**{"queued.max.request.bytes": 4096, "socket.request.max.bytes": 4096})
    memory = served.server.request_memory
    assert memory is not None
    with Wire(served.address) as holder, Wire(served.address) as waiting:
        holder.sock.sendall(struct.pack(">i", 4096) + b"\x00" * 10)  # its declared size takes the budget
        wait_for(lambda: memory.available == 0, "the first request to reserve its size")
        waiting.sock.sendall(encode_request(API_VERSIONS, 2, {}, 1))
        blocked = served.accepted(waiting)
        wait_for(lambda: blocked.waiting_for_server, "the second request to wait for memory")
        holder.close()  # its reservation goes back with its connection
        cid, response = waiting.receive(API_VERSIONS, 2)
        assert cid == 1 and response["error_code"] == 0
    wait_for(lambda: memory.available == 4096, "every reservation to be given back")


# -- connections: max.connections, max.connections.per.ip and its overrides -----------------


def test_max_connections_refuses_at_once_and_frees_a_place_on_close(serve: Any,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    served = serve(**{"max.connections": 3})
    wires = [Wire(served.address) for _ in range(3)]
    try:
        for wire in wires:
            assert wire.request(API_VERSIONS, 2)["error_code"] == 0
        with Wire(served.address) as refused:
            assert refused.closed_by_server()
        assert logged(caplog, "reason=max.connections (3) reached")
        wires.pop().close()
        wait_for(lambda: served.server.connection_count == 2, "the server to see the close")
        with Wire(served.address) as admitted:
            assert admitted.request(API_VERSIONS, 2)["error_code"] == 0
    finally:
        for wire in wires:
            wire.close()


def test_max_connections_per_ip_counts_each_address(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    served = serve(**{"max.connections.per.ip": 2})
    with Wire(served.address) as first, Wire(served.address) as second:
        for wire in (first, second):
            assert wire.request(API_VERSIONS, 2)["error_code"] == 0
        with Wire(served.address) as refused:
            assert refused.closed_by_server()
        assert logged(caplog, "reason=max.connections.per.ip (2) reached for 127.0.0.1")
        with WireFrom(served.address, "127.0.0.2") as elsewhere:
            assert elsewhere.request(API_VERSIONS, 2)["error_code"] == 0


def test_max_connections_per_ip_overrides(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    served = serve(**{"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "127.0.0.1:2"})
    served.server._rejections.interval = 0.0  # log each refusal: the test reads both reasons
    with Wire(served.address) as first, Wire(served.address) as second:
        for wire in (first, second):
            assert wire.request(API_VERSIONS, 2)["error_code"] == 0
        with Wire(served.address) as refused:
            assert refused.closed_by_server()
        with WireFrom(served.address, "127.0.0.2") as elsewhere:
            assert elsewhere.closed_by_server()
    assert logged(caplog, "reason=max.connections.per.ip.overrides (2) reached for 127.0.0.1")
    assert logged(caplog, "reason=max.connections.per.ip (0) reached for 127.0.0.2")


def test_refusals_are_logged_once_per_interval(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    served = serve(**{"max.connections": 0})
    for _ in range(20):
        with Wire(served.address) as refused:
            assert refused.closed_by_server()
    lines = logged(caplog, "connection rejected")
    assert len(lines) == 1 and lines[0].endswith("not_logged_since_last=0"), lines
    served.server._rejections.interval = 0.0  # the next one is due at once
    with Wire(served.address) as refused:
        assert refused.closed_by_server()
    lines = logged(caplog, "connection rejected")
    assert len(lines) == 2 and lines[1].endswith("not_logged_since_last=19"), lines


# -- the keys ----------------------------------------------------------------------------


def test_kafka_defaults() -> None:
    config = ServerConfig()
    assert config.max_connections == config.max_connections_per_ip == 2**31 - 1
    assert config.max_connections_per_ip_overrides == ""
    assert config.queued_max_request_bytes == -1
    assert config.connections_max_idle_ms == 600000
    assert config.socket_request_read_timeout_ms == 30000


@pytest.mark.parametrize("settings,named", [
    ({"max.connections.per.ip": 0}, "max.connections.per.ip can be set to zero only if"),
    ({"max.connections.per.ip.overrides": "10.0.0.1"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "10.0.0.1:many"}, "max.connections.per.ip.overrides"),
    ({"max.connections": -1}, "max.connections"),
    ({"queued.max.request.bytes": 1000}, "queued.max.request.bytes (1000) must be larger or equal to "
                                         "socket.request.max.bytes"),
    ({"socket.request.read.timeout.ms": 0}, "socket.request.read.timeout.ms"),
])
def test_bad_limits_are_refused_naming_the_key(settings: Dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace(")", r"\)")):
        ServerConfig(**settings)


def test_overrides_take_ipv6_and_host_names(serve: Any) -> None:
    from pylogq.server.config import parse_connection_overrides

    assert parse_connection_overrides(" ::1:5, [fe80::1]:0 ,localhost:7") == {"::1": 5, "fe80::1": 0, "localhost": 7}
    served = serve(**{"max.connections.per.ip.overrides": "localhost:7"})
    assert served.server.max_connections_per_ip_overrides.get("127.0.0.1") == 7
