"""pylogq.client.tcp: Producer, Consumer and AdminClient over the Kafka protocol to a served Broker.

The client test bodies of test_producer, test_consumer and test_admin are bound
here a second time, with every ``broker=`` a client receives turned into
``bootstrap_servers=`` of that broker served on a free loopback port; the tests
below them cover what only the TCP transport has (connections, errors on the
wire, SASL, acks=0 without a response).
"""

from __future__ import annotations

import re
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterator, List

import pytest

import pylogq
from pylogq import AdminClient, Consumer, Producer, errors
from pylogq.client import admin as admin_module
from pylogq.client import consumer as consumer_module
from pylogq.client import producer as producer_module
from pylogq.client import transport as transport_module
from pylogq.client.connection import CLIENT_VERSIONS, BrokerConnection
from pylogq.client.consumer import TopicPartition
from pylogq.client.tcp import TcpTransport, parse_bootstrap
from pylogq.errors import KafkaConnectionError, NoBrokersAvailable
from tests._ports import free_port
from tests.client import test_admin, test_consumer, test_producer

# Test bodies that exercise the in-process transport itself (a wrapper around
# InProcessTransport injecting failures, or a transport object passed as broker=)
# and so would only run in-process a second time.
_IN_PROCESS_ONLY = {
    "test_idempotent_retry_writes_once", "test_retry_without_idempotence_duplicates",
    "test_retries_exhausted_and_order_kept", "test_delivery_timeout_expires_batches",
    "test_close_with_timeout_fails_what_is_stuck", "test_accepts_a_transport",
}


def _bind(module: Any, prefix: str) -> None:
    for name, obj in list(vars(module).items()):
        if name.startswith("test_") and callable(obj) and name not in _IN_PROCESS_ONLY:
            globals()["test_%s_%s" % (prefix, name[5:])] = obj


_bind(test_producer, "producer")
_bind(test_consumer, "consumer")
_bind(test_admin, "admin")

BROKER_CONFIG = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 100}


def _bootstrap(broker: pylogq.Broker) -> str:
    """The broker's "host:port", serving it on a free loopback port on first use."""
    address = getattr(broker, "_test_bootstrap", None)
    if address is None:
        host, port = broker.serve("127.0.0.1", 0)
        address = broker._test_bootstrap = "%s:%d" % (host, port)  # type: ignore[attr-defined]
    return address


@pytest.fixture(autouse=True)
def over_tcp(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client built with ``broker=<a Broker>`` talks to it over TCP instead."""
    def connect(broker: Any = None, bootstrap_servers: Any = None, **options: Any) -> Any:
        if isinstance(broker, pylogq.Broker) and bootstrap_servers is None:
            broker, bootstrap_servers = None, _bootstrap(broker)
        return transport_module.connect(broker=broker, bootstrap_servers=bootstrap_servers, **options)

    for module in (producer_module, consumer_module, admin_module):
        monkeypatch.setattr(module, "connect", connect)


@pytest.fixture
def data_dir(tmp_path: Any) -> str:
    return str(tmp_path / "data")


@pytest.fixture
def broker(data_dir: str) -> Iterator[pylogq.Broker]:
    with pylogq.Broker(data_dir, **BROKER_CONFIG) as b:
        yield b


@pytest.fixture
def bootstrap(broker: pylogq.Broker) -> str:
    return _bootstrap(broker)


@pytest.fixture
def admin(broker: pylogq.Broker) -> Iterator[AdminClient]:
    with AdminClient(broker=broker) as a:
        yield a


def _poll_until(consumer: Consumer, count: int, timeout_s: float = 10.0) -> List[Any]:
    out: List[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        for records in consumer.poll(200).values():
            out.extend(records)
    return out


# -- bootstrap and configuration ---------------------------------------------------------------


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["PLAINTEXT://h:9092", "[::1]:9093"]) == [("h", 9092), ("::1", 9093)]
    for bad in ("", "host", "host:port", "host:0", ":9092", 9092, []):
        with pytest.raises(errors.ConfigError, match="bootstrap_servers"):
            parse_bootstrap(bad)


def _raised_by(call: Callable[[], Any], bound_s: float = 60.0) -> BaseException:
    """What ``call`` raised, run in a thread; fails if it returned, or had not ended within ``bound_s``."""
    raised: List[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound_s)
    assert not thread.is_alive(), "still waiting after %.0f s" % bound_s
    assert raised, "returned instead of raising"
    return raised[0]


def test_dead_bootstrap_is_a_quick_clear_error() -> None:
    """Refused at once: the error is the refusal itself, from the one attempt per address, not a
    timeout of retries (the clients' request timeout is left at its 30 s default)."""
    port = free_port()  # outside the ephemeral range: no connection takes it meanwhile
    for make in (lambda: Producer(bootstrap_servers="127.0.0.1:%d" % port),
                 lambda: Consumer(bootstrap_servers="127.0.0.1:%d" % port),
                 lambda: AdminClient(bootstrap_servers="127.0.0.1:%d" % port)):
        error = _raised_by(make)
        assert isinstance(error, NoBrokersAvailable), repr(error)
        assert str(error).endswith("(bootstrap_servers 127.0.0.1:%d): cannot connect to 127.0.0.1:%d: "
                                   "Connection refused" % (port, port)), str(error)
        assert isinstance(error, KafkaConnectionError) and error.retriable


def test_unsupported_security_settings_are_config_errors(bootstrap: str) -> None:
    with pytest.raises(errors.ConfigError, match="security_protocol"):
        AdminClient(bootstrap_servers=bootstrap, security_protocol="TLS")  # SSL is Kafka's name
    with pytest.raises(errors.ConfigError, match="sasl_mechanism"):
        AdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                    sasl_plain_username="u", sasl_plain_password="p")
    with pytest.raises(errors.ConfigError, match="sasl_plain_username"):
        AdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT")


def test_versions_are_the_implemented_ones(bootstrap: str) -> None:
    transport = TcpTransport(bootstrap)
    try:
        conn = transport._any_connection()
        expected = {k: hi for k, (lo, hi) in CLIENT_VERSIONS.items()}
        assert conn.versions == expected
    finally:
        transport.close()


def test_connection_is_reopened_after_the_broker_drops_it(tmp_path: Any) -> None:
    """The broker closes idle connections (connections.max.idle.ms); the next send reconnects."""
    with pylogq.Broker(str(tmp_path / "idle"), connections_max_idle_ms=200) as broker:
        broker.create_topic("t", 1)
        with Producer(bootstrap_servers=_bootstrap(broker), acks=1) as p:
            assert p.send("t", b"one").get(10).offset == 0
            transport = p._transport
            assert isinstance(transport, TcpTransport) and transport._connections
            deadline = time.monotonic() + 10
            while not all(c.closed for c in transport._connections.values()):
                assert time.monotonic() < deadline, "the broker did not close the idle connections"
                time.sleep(0.01)
            assert p.send("t", b"two").get(10).offset == 1


def _connection_threads() -> List[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("pylogq-conn-")]


def test_closed_clients_leave_no_connection_behind(broker: pylogq.Broker, bootstrap: str) -> None:
    broker.create_topic("t", 1)
    before = _connection_threads()
    with Producer(bootstrap_servers=bootstrap) as p:
        p.send("t", b"v").get(10)
    with Consumer("t", bootstrap_servers=bootstrap, group_id="g", auto_offset_reset="earliest") as c:
        assert _poll_until(c, 1)
    with AdminClient(bootstrap_servers=bootstrap) as a:
        a.list_topics()
    deadline = time.monotonic() + 10
    while _connection_threads() != before:  # each reader thread ends once its socket is closed
        assert time.monotonic() < deadline, _connection_threads()
        time.sleep(0.01)


def test_find_coordinator_names_the_broker_and_its_address(broker: pylogq.Broker, bootstrap: str) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as a:
        found = a.find_coordinator("g")
    assert (found.broker_id, "%s:%d" % (found.host, found.port)) == (broker.broker_id, bootstrap)
    with AdminClient(broker=broker) as a:  # in-process: the same broker, as DescribeCluster names it
        assert a.find_coordinator("g")[:3] == found[:3]
        with pytest.raises(TypeError, match="group_id"):
            a.find_coordinator(["g"])  # type: ignore[arg-type]


def test_request_timeout_names_the_request(tmp_path: Any) -> None:
    """A broker that accepts but never answers: RequestTimedOutError after request_timeout_ms."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        error = _raised_by(lambda: BrokerConnection("127.0.0.1", port, "c", 0.3))
        assert isinstance(error, errors.RequestTimedOutError), repr(error)
        assert re.search("ApiVersions.*127.0.0.1:%d.*300 ms" % port, str(error)), str(error)


# -- produce and consume back ---------------------------------------------------------------------


@pytest.mark.parametrize("acks", [0, 1, "all"])
@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_then_consume_exactly(broker: pylogq.Broker, bootstrap: str, acks: Any, codec: Any) -> None:
    broker.create_topic("t", 2)
    sent = []
    for i in range(300):
        key = b"k%d" % i if i % 3 else None
        value = None if key is not None and i % 5 == 0 else b"v%d" % i * (i % 7)  # tombstones, empty values
        sent.append((key, value, [("h%d" % j, b"x%d" % j) for j in range(i % 3)], 1_600_000_000_000 + i))
    with Producer(bootstrap_servers=bootstrap, acks=acks, compression_type=codec, linger_ms=5) as p:
        for i, (key, value, headers, ts) in enumerate(sent):
            p.send("t", value=value, key=key, headers=headers, partition=i % 2, timestamp_ms=ts)
        p.flush(10)
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
        got = _poll_until(c, len(sent))
    by_partition: Dict[int, List[Any]] = {0: [], 1: []}
    for r in got:
        by_partition[r.partition].append(r)
    expected = [(k, v, h, ts) for k, v, h, ts in sent]
    for partition in (0, 1):
        records = by_partition[partition]
        assert [r.offset for r in records] == list(range(len(records)))
        assert [(r.key, r.value, list(r.headers), r.timestamp) for r in records] == expected[partition::2]


def test_acks_zero_gets_no_response_and_keeps_the_connection(broker: pylogq.Broker, bootstrap: str) -> None:
    broker.create_topic("t", 1)
    with Producer(bootstrap_servers=bootstrap, acks=0) as p:
        metas = [p.send("t", b"%d" % i).get(10) for i in range(20)]
        assert {m.offset for m in metas} == {-1}
        conn = p._transport._connection(0)  # type: ignore[attr-defined]
        assert not conn.closed and not conn._in_flight
        assert p.partitions_for("t") == {0}  # a request after acks=0 ones still gets its own answer
        for i in range(20, 30):
            p.send("t", b"%d" % i)
    # close drained the connection: the broker has read every acks=0 request
    assert broker.list_offsets("t", 0, -1)[0] == 30


def test_idempotent_producer_gets_a_producer_id(bootstrap: str) -> None:
    with Producer(bootstrap_servers=bootstrap) as p1, Producer(bootstrap_servers=bootstrap) as p2:
        assert p1._idempotent and p1._producer_id >= 0 and p2._producer_id != p1._producer_id


def test_list_offsets_earliest_latest_and_by_time(broker: pylogq.Broker, bootstrap: str) -> None:
    broker.create_topic("t", 1)
    with Producer(bootstrap_servers=bootstrap) as p:
        for i in range(10):  # one batch each: the time index then finds each record
            p.send("t", b"%d" % i, timestamp_ms=1_000 * (i + 1)).get(10)
    with AdminClient(bootstrap_servers=bootstrap) as a:
        a.delete_records({TopicPartition("t", 0): 3})
    with Consumer(bootstrap_servers=bootstrap) as c:
        tp = TopicPartition("t", 0)
        assert c.beginning_offsets([tp]) == {tp: 3}
        assert c.end_offsets([tp]) == {tp: 10}
        found = c.offsets_for_times({tp: 5_500})[tp]
        assert found is not None and (found.offset, found.timestamp) == (5, 6_000)
        assert c.offsets_for_times({tp: 99_000}) == {tp: None}
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            c.end_offsets([TopicPartition("nope", 0)])


# -- groups ----------------------------------------------------------------------------------------


def test_group_commit_and_a_new_consumer_resumes(broker: pylogq.Broker, bootstrap: str) -> None:
    broker.create_topic("t", 2)
    with Producer(bootstrap_servers=bootstrap) as p:
        for i in range(10):
            p.send("t", b"%d" % i, partition=i % 2)
        p.flush(10)
    options = dict(bootstrap_servers=bootstrap, group_id="g", auto_offset_reset="earliest",
                   enable_auto_commit=False, session_timeout_ms=1000, heartbeat_interval_ms=100)
    with Consumer("t", **options) as c:
        got = _poll_until(c, 10)
        assert sorted(r.value for r in got) == sorted(b"%d" % i for i in range(10))
        c.commit({TopicPartition("t", 0): 3, TopicPartition("t", 1): 5})
    with Consumer("t", **options) as c:
        got = _poll_until(c, 2 + 0)
        assert sorted((r.partition, r.offset) for r in got) == [(0, 3), (0, 4)]
        assert c.committed(TopicPartition("t", 1)) == 5


def test_two_consumers_share_partitions_and_rebalance_on_leave(broker: pylogq.Broker, bootstrap: str) -> None:
    broker.create_topic("t", 4)
    options = dict(bootstrap_servers=bootstrap, group_id="g", auto_offset_reset="earliest",
                   session_timeout_ms=1000, heartbeat_interval_ms=100)
    c1 = Consumer("t", client_id="one", **options)
    c2 = Consumer("t", client_id="two", **options)
    try:
        deadline = time.monotonic() + 20
        while True:
            c1.poll(50)
            c2.poll(50)
            a1, a2 = c1.assignment(), c2.assignment()
            if len(a1) == 2 and len(a2) == 2 and not a1 & a2:
                break
            assert time.monotonic() < deadline, (a1, a2)
        with AdminClient(bootstrap_servers=bootstrap) as a:
            (info,) = a.describe_consumer_groups(["g"])
            assert info.state == "Stable" and sorted(m.client_id for m in info.members) == ["one", "two"]
        c2.close()
        while len(c1.assignment()) != 4:
            c1.poll(50)
            assert time.monotonic() < deadline
    finally:
        c1.close()
        c2.close()


def test_join_left_waiting_by_poll_zero_is_resumed_not_repeated(broker: pylogq.Broker, bootstrap: str) -> None:
    """poll(0) cannot wait for a rebalance; its JoinGroup stays in flight and the next poll takes the answer."""
    broker.create_topic("t", 4)
    options = dict(bootstrap_servers=bootstrap, group_id="g", session_timeout_ms=1000, heartbeat_interval_ms=100)
    with Consumer("t", **options) as c1, Consumer("t", **options) as c2:
        deadline = time.monotonic() + 20
        while not c1.assignment():
            c1.poll(50)
            assert time.monotonic() < deadline
        while len(c1.assignment()) != 2 or len(c2.assignment()) != 2:
            c2.poll(0)
            c1.poll(20)
            assert time.monotonic() < deadline, (c1.assignment(), c2.assignment())
        assert c1.assignment().isdisjoint(c2.assignment())
        with AdminClient(bootstrap_servers=bootstrap) as a:
            (info,) = a.describe_consumer_groups(["g"])
        assert len(info.members) == 2  # no member left behind by a repeated join


def test_heartbeat_is_not_held_behind_a_long_fetch(broker: pylogq.Broker, bootstrap: str) -> None:
    """A consumer blocked in a long-poll fetch keeps its group membership."""
    broker.create_topic("t", 1)
    with Consumer("t", bootstrap_servers=bootstrap, group_id="g", session_timeout_ms=1000,
                  heartbeat_interval_ms=100, fetch_max_wait_ms=3000) as c:
        deadline = time.monotonic() + 10
        while not c.assignment():
            c.poll(50)
            assert time.monotonic() < deadline
        generation, member_id = c._generation, c._member_id
        c.poll(2500)  # one fetch waits longer than the session timeout
        with AdminClient(bootstrap_servers=bootstrap) as a:
            (info,) = a.describe_consumer_groups(["g"])
        assert info.state == "Stable" and [m.member_id for m in info.members] == [member_id]
        assert c._generation == generation


# -- SASL ---------------------------------------------------------------------------------------------


@pytest.fixture
def sasl_bootstrap(broker: pylogq.Broker) -> str:
    host, port = broker.serve("127.0.0.1", 0, sasl_users={"alice": "secret"})
    return "%s:%d" % (host, port)


def test_sasl_plain(broker: pylogq.Broker, sasl_bootstrap: str) -> None:
    broker.create_topic("t", 1)
    creds = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username="alice")
    with Producer(bootstrap_servers=sasl_bootstrap, sasl_plain_password="secret", **creds) as p:
        assert p.send("t", b"v").get(10).offset == 0
    with pytest.raises(errors.SaslAuthenticationFailedError, match="alice"):
        AdminClient(bootstrap_servers=sasl_bootstrap, sasl_plain_password="wrong", **creds)
    with pytest.raises((KafkaConnectionError, errors.IllegalSaslStateError, errors.SaslAuthenticationFailedError)):
        AdminClient(bootstrap_servers=sasl_bootstrap).list_topics()


# -- many threads, one transport ----------------------------------------------------------------------


def test_concurrent_requests_share_connections(broker: pylogq.Broker, bootstrap: str) -> None:
    broker.create_topic("t", 4)
    transport = TcpTransport(bootstrap)
    failures: List[BaseException] = []

    def work(partition: int) -> None:
        try:
            for _ in range(50):
                assert transport.partitions_for("t") == 4
                assert transport.list_offsets("t", partition, -2) == (0, -1)
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(i % 4,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    transport.close()
    assert not failures
