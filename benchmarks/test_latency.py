"""Latency targets that tests used to assert, as benchmarks: each against a reference row or a peer.

Commit 4c06e33 took every timing assertion out of the tests (a test now asserts
what happens, and bounds its wait generously); the bounds they asserted are the
targets here. Every benchmark asserts its outcome in every run; a target is
asserted on the median, in a full timed run only (``summary.asserting``). All
on loopback with OS-chosen ports; every wait is a condition polled with a
deadline. "Read by the broker" below means Linux's ``/proc/net/tcp`` shows the
client's bytes acknowledged and none left unread on the broker's side of the
connection; "still waiting" means the client's socket has nothing to read
(``poll`` with no timeout). Rows of a group run the same rounds: 5 timed after
1 warm-up, or 1 and none at the smoke sizes (``--quick``, ``--benchmark-disable``).

Groups:
- "probe under attack" (tests/server/test_bombs.py, test_limits.py; target: answered
  < 1 s). One ``pylogq-broker`` process (benchmarks/peers.py, Kafka's single-node
  settings) for the three rows. A round is the probe: on a connection opened
  before the clock starts, ApiVersions v2 and then Metadata v4 of one topic, each
  answered without error. ``idle`` (the reference): nothing else going on.
  ``bombs``: four connections have each sent one gzip decompression bomb of about
  1 MB that holds a gigabyte (one 1000 MiB record, or 980 records of 1 MiB, twice
  each: test_bombs.py's, accepted in the end; four is the broker's limit of
  produces decompressing at once), every one read by the broker before the clock
  starts and still unanswered when the probe's last answer came (checked each
  round: the probe ran while all four were being validated). ``500 half-open``:
  500 connections have each sent a size prefix of 1,000 bytes and no body, all
  read by the broker before the first round, checked before each, and still held
  open by it after the last (Kafka's default queued.max.requests is 500).
- "long poll wake" (tests/server/test_server.py; the old assert: < 4 s). A Fetch v11
  for the next offset of an empty one-partition topic (max_wait_ms 20,000,
  min_bytes 1) is read by the broker, the broker then answers an ApiVersions on
  the producing connection, and the fetch is still waiting; timed: one
  one-record Produce v7 (acks=1) sent on the other connection, until the fetch's
  answer, holding that record, is read. ``pylogq`` (pylogq-broker) against the peer
  ``tansu`` (Tansu 0.6, in-memory storage, the reference), both started by
  benchmarks/peers.py as benchmarks/test_server.py starts them. Tansu's answer
  (with the record) came about 10 s after the produce in every round measured
  here: its row is its own wait, not a wake.
- "parked fetch at close" (tests/test_broker.py and test_server.py; the old assert:
  answered within 10 s of close). A ``pylogq.Broker`` in this process
  (``pylogq.testing.TEST_DEFAULTS``, serving on loopback, one one-partition topic),
  made anew before each round; timed: from ``close()`` until it has returned and
  the parked fetch is answered. ``nothing parked`` (the reference): close() alone.
  ``embedded fetch``: a ``fetch_async`` with max_wait_ms 20,000 parked in the
  broker's purgatory (answered NOT_LEADER_OR_FOLLOWER, not expired). ``wire fetch``:
  a Fetch v11 with max_wait_ms 20,000 parked on a connection (answered empty
  without error, then the connection closed); close() runs in a thread while
  this one reads the answer. The time to the answer alone is in
  ``extra_info["answered_s"]`` (its median).
- "client error on dead bootstrap" (tests/client/test_tcp.py; old assert: < 2 s). A
  client built with ``bootstrap_servers`` a loopback port nothing listens on;
  timed: until its constructor raises. pylogq's ``Producer``, ``Consumer`` and
  ``AdminClient`` (``request_timeout_ms=2000``; one connection attempt per
  address: NoBrokersAvailable naming the refusal), against the peer kafka-python
  3.0's ``KafkaProducer`` (the reference), given the same 2 s:
  ``bootstrap_timeout_ms=2000, request_timeout_ms=2000``, the rest at its defaults
  (it retries the bootstrap every ``reconnect_backoff_ms`` = 50 ms, growing to
  ``reconnect_backoff_max_ms``, until its bootstrap timeout: KafkaTimeoutError).
- "client request timeout" (tests/client/test_tcp.py; old assert: < 2 s). The same
  against a listener that accepts connections and never answers, with a 300 ms
  request timeout: pylogq's ``BrokerConnection`` (as the test: RequestTimedOutError
  naming ApiVersions and 300 ms) and ``Producer(request_timeout_ms=300)``
  (NoBrokersAvailable with that message), against kafka-python's
  ``KafkaProducer(request_timeout_ms=300, bootstrap_timeout_ms=300)`` (the reference).
- "not a Kafka port" (tests/cli/test_conventions.py, the old NOT_KAFKA_BOUND_S: 10 s).
  ``python -m pylogq topics --list --bootstrap-server`` against an HTTP server that
  answers any bytes with "400 Bad Request" at once (the test's ``_Http400``); timed:
  spawn to exit with status 1 and the error naming the port. The reference: kcat
  (``kcat -L -b HOST:PORT -m 5``: the 5 s metadata timeout matches the 5 s pylogq
  gives ApiVersions on a port that may not speak Kafka), exit status 1 with
  "Failed to acquire metadata". Both are process spawns; pylogq's includes its
  interpreter's start.

A peer or part that is missing (Tansu's binary, kcat) skips its row with the
reason, and under ``PYLOGQ_REQUIRE_ALL=1`` fails it.
"""

from __future__ import annotations

import http.server
import os
import re
import select
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import kafka
import pytest
from kafka.errors import KafkaTimeoutError
from peers import BROKERS, PEER, BrokerProcess, free_port, pylogq_broker, running_brokers, skip_missing
from summary import asserting, info, smoke

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # the checkout, for the test suite's helpers
    sys.path.insert(0, ROOT)

from pylogq import AdminClient, Broker, Consumer, Producer, errors  # noqa: E402
from pylogq.client.connection import BrokerConnection  # noqa: E402
from pylogq.errors import NoBrokersAvailable  # noqa: E402
from pylogq.records import codecs  # noqa: E402
from pylogq.testing import TEST_DEFAULTS  # noqa: E402
from tests._limits import need_files  # noqa: E402
from tests.cli.test_conventions import _env, _Http400  # noqa: E402
from tests.server.test_bombs import MiB, _create_topics, v2_bomb  # noqa: E402
from tests.server.test_limits import HALF_OPEN  # noqa: E402
from tests.server.test_server import (  # noqa: E402
    API_VERSIONS, FETCH, METADATA, PRODUCE, Wire, fetch_body, fetched_values, metadata_body, produce_body,
    requests_in_flight, wait_for)

ROUNDS, WARMUP = 5, 1
DEADLINE_S = 60.0  # the wait for something that must happen, when it does not
PROBE_TOPIC, BOMB_TOPIC, WAKE_TOPIC = "probe", "bombs", "wake"
PROBE_TARGET_S = 1.0
BOMB_TIMEOUT_S = 300.0  # a bomb's answer, read after the round: not what is timed
WAKE_MAX_WAIT_MS = 20000
WAKE_TARGET_S = 4.0
CLOSE_PARK_MS = 20000
CLOSE_TARGET_S = 10.0
BOOTSTRAP_BUDGET_MS = 2000
DEAD_TARGET_S = 2.0
REQUEST_TIMEOUT_MS = 300
TIMEOUT_TARGET_S = 2.0
KCAT = "/usr/bin/kcat"
NOT_KAFKA_TARGET_S = 10.0
KCAT_METADATA_TIMEOUT_S = 5

_ESTABLISHED = 1
_LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it


# -- shared: rounds, targets, sockets ------------------------------------------------------------


def _rounds(config: Any) -> Tuple[int, int]:
    """(timed rounds, warm-up rounds): every row of every group the same."""
    return (1, 0) if smoke(config) else (ROUNDS, WARMUP)


def _measure(benchmark: Any, request: Any, run: Callable[..., Any], setup: Callable[[], Any]) -> Any:
    """``run`` timed, ``setup`` before each round (untimed)."""
    rounds, warmup = _rounds(request.config)
    return benchmark.pedantic(run, setup=setup, rounds=rounds, warmup_rounds=warmup, iterations=1)


def _target(benchmark: Any, request: Any, bound_s: float, what: str) -> None:
    """Assert the median under ``bound_s``, in a full timed run only."""
    stats = benchmark.stats
    if stats is not None and asserting(request.config):
        median = stats.stats.median
        assert median < bound_s, "%s: median %.3f s, target < %.1f s" % (what, median, bound_s)


def _tcp() -> Dict[Tuple[int, int], Tuple[int, int, int]]:
    """This network namespace's loopback IPv4 TCP sockets: (local port, remote port) -> (state, unacknowledged
    bytes sent, bytes received and not yet read by the owner)."""
    out: Dict[Tuple[int, int], Tuple[int, int, int]] = {}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote, state, queues = fields[1], fields[2], fields[3], fields[4]
            if not local.startswith(_LOOPBACK):
                continue
            tx, rx = queues.split(":")
            out[(int(local.split(":")[1], 16), int(remote.split(":")[1], 16))] = (
                int(state, 16), int(tx, 16), int(rx, 16))
    return out


def _read_by_peer(socks: Sequence[socket.socket]) -> bool:
    """Whether every byte sent on each socket was acknowledged and read by the process at the other end."""
    table = _tcp()
    for sock in socks:
        ours, theirs = sock.getsockname()[1], sock.getpeername()[1]
        client, server = table.get((ours, theirs)), table.get((theirs, ours))
        if client is None or server is None or client[1] != 0 or server[0] != _ESTABLISHED or server[2] != 0:
            return False
    return True


def _readable(socks: Sequence[socket.socket]) -> List[socket.socket]:
    """The sockets with something to read now (an answer, or the peer's close). ``poll``, not
    ``select``: the 500 half-open connections take descriptors past select's 1,024."""
    poller = select.poll()
    by_fd = {sock.fileno(): sock for sock in socks}
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    return [by_fd[fd] for fd, _ in poller.poll(0)]


# -- "probe under attack" ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[str, int]]:
    """One pylogq-broker process for the group's three rows, with the probe's and the bombs' topics."""
    process = pylogq_broker(str(tmp_path_factory.mktemp("attacked")))
    try:
        process.start()
        address = (process.host, process.port)
        _create_topics(address, PROBE_TOPIC, BOMB_TOPIC)
        yield address
    finally:
        status = process.stop()
    assert status == 0, "pylogq-broker exited with %s:\n%s" % (status, "\n".join(process.tail))


@pytest.fixture(scope="module")
def bomb_batches() -> List[bytes]:
    """test_bombs.py's slowest bombs to validate that the broker accepts, a gigabyte each in about 1 MB,
    twice: gzip (about 2 s each here, alone). Its zstd ones of the same size take tens of milliseconds,
    and would be done before the probe began."""
    one_record, many_records = v2_bomb(codecs.GZIP, 1, 1000 * MiB), v2_bomb(codecs.GZIP, 980, MiB)
    return [one_record, many_records, one_record, many_records]


def _probe(wire: Wire) -> None:
    """The probe: ApiVersions, then Metadata of the probe's topic, each answered without error."""
    assert wire.request(API_VERSIONS, 2)["error_code"] == 0
    topics = wire.request(METADATA, 4, metadata_body(PROBE_TOPIC))["topics"]
    assert [(t["name"], t["error_code"]) for t in topics] == [(PROBE_TOPIC, 0)], topics


def _time_probes(benchmark: Any, request: Any, address: Tuple[str, int],
                 before: Callable[[], None] = lambda: None, after: Callable[[], None] = lambda: None) -> None:
    """The probe timed on a fresh connection per round; ``before`` sets up the round's load, ``after``
    (timed, right after the probe's last answer) checks that the load was still on."""
    wires: List[Wire] = []
    answered: List[int] = []

    def setup() -> Any:
        while wires:
            wires.pop().close()
        before()
        wires.append(Wire(address, timeout=DEADLINE_S))
        return (wires[-1],), {}

    def run(wire: Wire) -> None:
        _probe(wire)
        after()
        answered.append(1)

    try:
        _measure(benchmark, request, run, setup)
    finally:
        for wire in wires:
            wire.close()
    assert answered, "no probe answered"


def test_probe_idle(benchmark: Any, request: Any, attacked: Tuple[str, int]) -> None:
    info(benchmark, "probe under attack", 1, "answers", peer=True)
    _time_probes(benchmark, request, attacked)


def test_probe_while_bombs_are_validated(benchmark: Any, request: Any, attacked: Tuple[str, int],
                                         bomb_batches: List[bytes]) -> None:
    info(benchmark, "probe under attack", 1, "answers", target="answered < 1 s")
    senders = [Wire(attacked, timeout=BOMB_TIMEOUT_S) for _ in bomb_batches]
    sent: List[Wire] = []  # the connections whose bomb has not been answered yet

    def collect() -> None:
        """The last round's bombs: each accepted (error 0), however long its validation took."""
        while sent:
            _, response = sent.pop().receive(PRODUCE, 7)
            answer = response["responses"][0]["partition_responses"][0]
            assert answer["error_code"] == 0, answer

    def attack() -> None:
        collect()
        for wire, batch in zip(senders, bomb_batches):
            wire.send(PRODUCE, 7, {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
                {"name": BOMB_TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
            sent.append(wire)
        wait_for(lambda: _read_by_peer([w.sock for w in senders]), "the broker to read every bomb", DEADLINE_S)
        assert not _readable([w.sock for w in senders]), "a bomb was answered before the probe began"

    def still_validating() -> None:
        done = _readable([w.sock for w in senders])
        assert not done, "%d of %d bombs answered before the probe was: the round's load ended early" % (
            len(done), len(senders))

    try:
        _time_probes(benchmark, request, attacked, attack, still_validating)
        collect()
    finally:
        for wire in senders:
            wire.close()
    _target(benchmark, request, PROBE_TARGET_S, "a probe while bombs are validated")


def test_probe_with_500_half_open_requests(benchmark: Any, request: Any, attacked: Tuple[str, int]) -> None:
    info(benchmark, "probe under attack", 1, "answers", target="answered < 1 s")
    need_files(HALF_OPEN + 256)
    held: List[Wire] = []

    def still_held() -> None:
        """Each size prefix read, and no connection closed by the broker."""
        assert _read_by_peer([w.sock for w in held]), "a half-open request is no longer held as sent"
        closed = _readable([w.sock for w in held])
        assert not closed, "the broker closed %d of the %d half-open connections" % (len(closed), HALF_OPEN)

    try:
        for _ in range(HALF_OPEN):
            wire = Wire(attacked, timeout=DEADLINE_S)
            held.append(wire)
            wire.sock.sendall(struct.pack(">i", 1000))  # a size, and never the body
        wait_for(lambda: _read_by_peer([w.sock for w in held]), "the broker to read every size prefix", DEADLINE_S)
        _time_probes(benchmark, request, attacked, still_held)
        still_held()  # held for every round (socket.request.read.timeout.ms is 30 s)
    finally:
        for wire in held:
            wire.close()
    _target(benchmark, request, PROBE_TARGET_S, "a probe with 500 half-open requests held")


# -- "long poll wake" -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wake_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, BrokerProcess]]:
    """Both brokers, each with the empty one-partition topic the fetches wait on."""
    with running_brokers(tmp_path_factory, "wake") as started:
        for process in started.values():
            _create_topics((process.host, process.port), WAKE_TOPIC)
        yield started


class _Wake:
    """One fetch parked per round, woken by one produce. Not thread-safe."""

    def __init__(self, address: Tuple[str, int]) -> None:
        self.consumer = Wire(address, timeout=DEADLINE_S)
        self.producer = Wire(address, timeout=DEADLINE_S)
        self.offset = 0
        self.woken = 0
        self.pending: Optional[Tuple[bytes, Dict[str, Any]]] = None

    def setup(self) -> Any:
        self.finish()
        self.consumer.send(FETCH, 11, fetch_body(WAKE_TOPIC, self.offset, max_wait_ms=WAKE_MAX_WAIT_MS))
        wait_for(lambda: _read_by_peer([self.consumer.sock]), "the broker to read the fetch", DEADLINE_S)
        assert self.producer.request(API_VERSIONS, 2)["error_code"] == 0  # answered after it read the fetch
        assert not _readable([self.consumer.sock]), "the fetch was answered before anything was produced"
        return (b"wake %d" % self.offset,), {}

    def run(self, value: bytes) -> None:
        self.producer.send(PRODUCE, 7, produce_body(WAKE_TOPIC, [value]))
        _, response = self.consumer.receive(FETCH, 11)
        self.pending = (value, response)

    def finish(self) -> None:
        """The last round's produce acknowledged at the offset fetched, and the fetch holding its record."""
        if self.pending is None:
            return
        (value, response), self.pending = self.pending, None
        answer = self.producer.receive(PRODUCE, 7)[1]["responses"][0]["partition_responses"][0]
        assert answer["error_code"] == 0 and answer["base_offset"] == self.offset, answer
        partition = response["responses"][0]["partitions"][0]
        assert partition["error_code"] == 0, partition
        assert fetched_values(response) == [value]
        self.offset += 1
        self.woken += 1

    def close(self) -> None:
        self.consumer.close()
        self.producer.close()


@pytest.mark.parametrize("name", BROKERS)
def test_long_poll_wake(benchmark: Any, request: Any, name: str, wake_brokers: Dict[str, BrokerProcess]) -> None:
    skip_missing(name)
    info(benchmark, "long poll wake", 1, "wakes", peer=name == PEER,
         target="pylogq: a fetch parked for 20 s answered < 4 s after the produce")
    process = wake_brokers[name]
    wake = _Wake((process.host, process.port))
    try:
        _measure(benchmark, request, wake.run, wake.setup)
        wake.finish()
    finally:
        wake.close()
    assert wake.woken >= 1
    if name != PEER:
        _target(benchmark, request, WAKE_TARGET_S, "pylogq's parked fetch after a produce")


# -- "parked fetch at close" ------------------------------------------------------------------


class _Closing:
    """A served broker made before each round and closed in it, with a fetch parked the ``park`` way
    ("" for none, "embedded", "wire"). Not thread-safe."""

    def __init__(self, base: Path, park: str) -> None:
        self.base = base
        self.park = park
        self.made = 0
        self.closed = 0
        self.broker: Optional[Broker] = None
        self.op: Any = None
        self.wire: Optional[Wire] = None
        self.cid = 0
        self.closer: Optional[threading.Thread] = None
        self.response: Optional[Dict[str, Any]] = None
        self.delivered_at: Optional[float] = None
        self.answered_s: List[float] = []

    def setup(self) -> Any:
        self.finish()
        self.made += 1
        broker = self.broker = Broker(str(self.base / ("b%d" % self.made)), **TEST_DEFAULTS)
        broker.create_topic("t", 1)
        address = broker.serve("127.0.0.1", 0)
        if self.park == "embedded":
            self.delivered_at = None
            self.op = broker.fetch_async([("t", 0, 0, 1 << 20)], max_wait_ms=CLOSE_PARK_MS, min_bytes=1,
                                         max_bytes=1 << 20, deliver=self._delivered)
            assert broker.fetch_purgatory.watched() == 1, "the fetch did not park"
        elif self.park == "wire":
            self.wire = Wire(address, timeout=DEADLINE_S)
            self.cid = self.wire.send(FETCH, 11, fetch_body("t", 0, max_wait_ms=CLOSE_PARK_MS))
            wait_for(lambda: requests_in_flight(broker) == 1, "the fetch to park", DEADLINE_S)
        return (), {}

    def run(self) -> None:
        broker = self.broker
        assert broker is not None
        start = time.perf_counter()
        if self.park == "wire":
            assert self.wire is not None
            self.closer = threading.Thread(target=broker.close, name="closer", daemon=True)
            self.closer.start()
            got, self.response = self.wire.receive(FETCH, 11)
            self.answered_s.append(time.perf_counter() - start)
            assert got == self.cid
            self.closer.join(DEADLINE_S)
            return
        broker.close()
        if self.park == "embedded":
            assert self.op.wait(DEADLINE_S), "the parked fetch was not answered"
            assert self.delivered_at is not None
            self.answered_s.append(self.delivered_at - start)

    def _delivered(self, results: Any) -> None:
        """The embedded fetch's answer handed over (on the thread that completed it)."""
        self.delivered_at = time.perf_counter()

    def finish(self) -> None:
        """The last round's broker closed, and its fetch answered as the close answers it."""
        broker, self.broker = self.broker, None
        if broker is None:
            return
        if self.park == "embedded":
            answer = self.op.answer()[("t", 0)]
            assert answer.error_code == errors.NotLeaderOrFollowerError.code and not self.op.expired, answer
        elif self.park == "wire":
            assert self.closer is not None and self.wire is not None and self.response is not None
            assert not self.closer.is_alive(), "Broker.close did not return"
            partition = self.response["responses"][0]["partitions"][0]
            assert partition["error_code"] == 0 and fetched_values(self.response) == [], partition
            assert self.wire.closed_by_server()
            self.wire.close()
        assert broker.closed
        self.closed += 1

    def abandon(self) -> None:
        """After a failure: close whatever a round left open."""
        if self.wire is not None:
            self.wire.close()
        if self.closer is not None:
            self.closer.join(DEADLINE_S)
        if self.broker is not None:
            self.broker.close()


@pytest.mark.parametrize("park", ["", "embedded", "wire"], ids=["nothing-parked", "embedded-fetch", "wire-fetch"])
def test_close_with_a_parked_fetch(benchmark: Any, request: Any, tmp_path: Path, park: str) -> None:
    info(benchmark, "parked fetch at close", 1, "closes", peer=not park,
         target="a fetch parked for 20 s answered < 10 s after close()")
    closing = _Closing(tmp_path, park)
    try:
        _measure(benchmark, request, closing.run, closing.setup)
        closing.finish()
    finally:
        closing.abandon()
    assert closing.closed == closing.made >= 1
    if park:
        timed = closing.answered_s[-_rounds(request.config)[0]:]  # the warm-up's left out
        benchmark.extra_info["answered_s"] = statistics.median(timed)
        _target(benchmark, request, CLOSE_TARGET_S, "a parked fetch answered after close()")


# -- "client error on dead bootstrap" and "client request timeout" ---------------------------


def _raises(make: Callable[[str], Any], bootstrap: str) -> BaseException:
    """What ``make(bootstrap)`` raised; fails if it returned a client (closed first)."""
    try:
        client = make(bootstrap)
    except Exception as exc:  # noqa: BLE001 - the benchmark's outcome: checked by the caller
        return exc
    client.close()
    raise AssertionError("%r connected to %s" % (client, bootstrap))


def _time_errors(benchmark: Any, request: Any, make: Callable[[str], Any], listener: Callable[[], Any],
                 check: Callable[[BaseException, int], None]) -> None:
    """``make`` timed against a fresh ``listener()`` per round (a free port, or a listening socket)."""
    made: List[Any] = []
    raised: List[Tuple[BaseException, int]] = []

    def setup() -> Any:
        while made:
            made.pop().close()
        opened = listener()
        if isinstance(opened, socket.socket):
            made.append(opened)
            port = opened.getsockname()[1]
        else:
            port = opened
        return (port,), {}

    def run(port: int) -> None:
        raised.append((_raises(make, "127.0.0.1:%d" % port), port))

    try:
        _measure(benchmark, request, run, setup)
    finally:
        for sock in made:
            sock.close()
    assert raised
    for exc, port in raised:
        check(exc, port)


def _kafka_python(**config: Any) -> Callable[[str], Any]:
    return lambda bootstrap: kafka.KafkaProducer(bootstrap_servers=bootstrap, **config)


def _check_kafka_python(exc: BaseException, port: int) -> None:
    assert isinstance(exc, KafkaTimeoutError), repr(exc)
    assert "Unable to bootstrap from" in str(exc) and "127.0.0.1:%d" % port in str(exc), str(exc)


DEAD_CLIENTS: Dict[str, Callable[[str], Any]] = {
    "pylogq-Producer": lambda b: Producer(bootstrap_servers=b, request_timeout_ms=BOOTSTRAP_BUDGET_MS),
    "pylogq-Consumer": lambda b: Consumer(bootstrap_servers=b, request_timeout_ms=BOOTSTRAP_BUDGET_MS),
    "pylogq-AdminClient": lambda b: AdminClient(bootstrap_servers=b, request_timeout_ms=BOOTSTRAP_BUDGET_MS),
    "kafka-python": _kafka_python(bootstrap_timeout_ms=BOOTSTRAP_BUDGET_MS, request_timeout_ms=BOOTSTRAP_BUDGET_MS),
}


def _check_refused(exc: BaseException, port: int) -> None:
    assert isinstance(exc, NoBrokersAvailable) and exc.retriable, repr(exc)
    assert str(exc).endswith("(bootstrap_servers 127.0.0.1:%d): cannot connect to 127.0.0.1:%d: "
                             "Connection refused" % (port, port)), str(exc)


@pytest.mark.parametrize("client", list(DEAD_CLIENTS))
def test_dead_bootstrap(benchmark: Any, request: Any, client: str) -> None:
    peer = client == "kafka-python"
    info(benchmark, "client error on dead bootstrap", 1, "errors", peer=peer, target="pylogq raises < 2 s")
    _time_errors(benchmark, request, DEAD_CLIENTS[client], free_port, _check_kafka_python if peer else _check_refused)
    if not peer:
        _target(benchmark, request, DEAD_TARGET_S, "%s against a dead bootstrap" % client)


def _silent_listener() -> socket.socket:
    """A listener whose connections the kernel completes and nobody ever reads or answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    return server


def _timed_out_message(exc: BaseException, port: int) -> None:
    assert re.search("ApiVersions.*127.0.0.1:%d.*%d ms" % (port, REQUEST_TIMEOUT_MS), str(exc)), str(exc)


def _check_connection_timeout(exc: BaseException, port: int) -> None:
    assert isinstance(exc, errors.RequestTimedOutError), repr(exc)
    _timed_out_message(exc, port)


def _check_producer_timeout(exc: BaseException, port: int) -> None:
    assert isinstance(exc, NoBrokersAvailable), repr(exc)
    _timed_out_message(exc, port)


TIMEOUT_CLIENTS: Dict[str, Tuple[Callable[[str], Any], Callable[[BaseException, int], None]]] = {
    "pylogq-BrokerConnection": (
        lambda b: BrokerConnection(b.split(":")[0], int(b.split(":")[1]), "c", REQUEST_TIMEOUT_MS / 1000.0),
        _check_connection_timeout),
    "pylogq-Producer": (lambda b: Producer(bootstrap_servers=b, request_timeout_ms=REQUEST_TIMEOUT_MS),
                        _check_producer_timeout),
    "kafka-python": (_kafka_python(request_timeout_ms=REQUEST_TIMEOUT_MS, bootstrap_timeout_ms=REQUEST_TIMEOUT_MS),
                     _check_kafka_python),
}


@pytest.mark.parametrize("client", list(TIMEOUT_CLIENTS))
def test_request_timeout(benchmark: Any, request: Any, client: str) -> None:
    peer = client == "kafka-python"
    info(benchmark, "client request timeout", 1, "errors", peer=peer,
         target="pylogq raises < 2 s with a 300 ms request timeout")
    make, check = TIMEOUT_CLIENTS[client]
    _time_errors(benchmark, request, make, _silent_listener, check)
    if not peer:
        _target(benchmark, request, TIMEOUT_TARGET_S, "%s against a listener that never answers" % client)


# -- "not a Kafka port" -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_400() -> Iterator[int]:
    """An HTTP server that answers whatever it is sent with 400 at once (test_conventions.py's)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Http400)
    worker = threading.Thread(target=server.serve_forever, daemon=True)
    worker.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        worker.join(DEADLINE_S)


def _pylogq_cli(port: int) -> List[str]:
    return [sys.executable, "-m", "pylogq", "topics", "--list", "--bootstrap-server", "127.0.0.1:%d" % port]


def _kcat(kcat: str, port: int) -> List[str]:
    return [kcat, "-L", "-b", "127.0.0.1:%d" % port, "-m", str(KCAT_METADATA_TIMEOUT_S)]


def _check_pylogq_cli(done: "subprocess.CompletedProcess[str]", port: int) -> None:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "127.0.0.1:%d" % port in done.stderr and "is it a Kafka listener?" in done.stderr, done.stderr


def _check_kcat(done: "subprocess.CompletedProcess[str]", port: int) -> None:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Failed to acquire metadata" in done.stderr, done.stderr


NOT_KAFKA_CHECKS: Dict[str, Callable[["subprocess.CompletedProcess[str]", int], None]] = {
    "pylogq": _check_pylogq_cli, "kcat": _check_kcat}


def _kcat_path() -> Optional[str]:
    """kcat where Debian's package puts it, else on PATH; None without it."""
    if os.path.isfile(KCAT) and os.access(KCAT, os.X_OK):
        return KCAT
    return shutil.which("kcat")


@pytest.mark.parametrize("tool", list(NOT_KAFKA_CHECKS))
def test_not_a_kafka_port(benchmark: Any, request: Any, tool: str, http_400: int) -> None:
    argv = _pylogq_cli(http_400)
    if tool == "kcat":
        kcat = _kcat_path()
        if kcat is None:
            pytest.skip("kcat is not installed (%s, or on PATH): apt-get install kcat" % KCAT)
        argv = _kcat(kcat, http_400)
    info(benchmark, "not a Kafka port", 1, "reports", peer=tool == "kcat",
         target="pylogq exits 1 naming the port < 10 s")
    env = _env()
    results: List["subprocess.CompletedProcess[str]"] = []

    def run() -> None:
        results.append(subprocess.run(argv, capture_output=True, text=True, timeout=DEADLINE_S, env=env,
                                      stdin=subprocess.DEVNULL))

    _measure(benchmark, request, run, lambda: None)
    assert results
    for done in results:
        NOT_KAFKA_CHECKS[tool](done, http_400)
    if tool == "pylogq":
        _target(benchmark, request, NOT_KAFKA_TARGET_S, "pylogq topics --list against an HTTP server")
