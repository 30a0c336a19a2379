"""Client quotas (pylogq/server/quotas.py, pylogq/cluster/broker/client_quotas.py) on one broker.

Kafka's precedence among the eight quota levels and the sensors it names, on a clock the
test moves; then a served broker: a produce over its quota is answered at once with its
throttle time and the connection muted (its next request is answered no sooner than the
delay, while another connection is served meanwhile), a consumer over its quota gets
Kafka's empty throttled fetch, controller mutations past a strict quota answer
THROTTLING_QUOTA_EXCEEDED, DescribeClientQuotas and AlterClientQuotas round trip through
kafka-python's own codec with Kafka's validation errors, quotas survive a restart, the
throttle metrics are served, and connection creation rates hold back new connections.
How closely a throttled client keeps to its quota is measured in benchmarks/test_quotas.py.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from pylogq import AdminClient, Broker
from pylogq.client.admin import ClientQuotaAlteration, ClientQuotaFilterComponent
from pylogq.client.connection import BrokerConnection
from pylogq.errors import InvalidRequestError
from pylogq.protocol.constants import ApiKey
from pylogq.records import build_batch
from pylogq.server import handlers_fetch
from pylogq.server.quotas import DEFAULT, ClientQuotaManager, ClientQuotas, ConnectionQuotas, QuotaSettings

from ._support import wait_for
from .test_server import Wire, produce_body

Address = Tuple[str, int]
DEADLINE_S = 30.0
THROTTLING_QUOTA_EXCEEDED, INVALID_REQUEST = 89, 42


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- precedence and sensors ----------------------------------------------------------------------

#: Kafka's eight levels, most specific first, for user alice (sanitized) and client id app.
LEVELS = [("alice", "app"), ("alice", DEFAULT), ("alice", None), (DEFAULT, "app"), (DEFAULT, DEFAULT),
          (DEFAULT, None), (None, "app"), (None, DEFAULT)]
#: The metric tags (the sensor) each level's quota is recorded in.
TAGS = [("alice", "app"), ("alice", "app"), ("alice", ""), ("alice", "app"), ("alice", "app"), ("alice", ""),
        ("", "app"), ("", "app")]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_of_the_eight_levels_applies(level: int) -> None:
    manager = ClientQuotaManager("Produce", "producer_byte_rate")
    manager.set_overrides({key: 1000.0 * (i + 1) for i, key in enumerate(LEVELS) if i >= level})
    assert manager.limit("alice", "app") == 1000.0 * (level + 1)
    assert manager.tags("alice", "app") == TAGS[level]


def test_quotas_of_one_kind_share_sensors_as_kafka_does() -> None:
    manager = ClientQuotaManager("Produce", "producer_byte_rate")
    manager.set_overrides({(None, "app"): 10.0})
    # Client-id quotas only: every user of "app" shares one sensor, other clients are unbounded.
    assert manager.tags("alice", "app") == manager.tags("bob", "app") == ("", "app")
    assert manager.limit("alice", "other") is None
    manager.set_overrides({(DEFAULT, None): 20.0})  # user quotas only: the anonymous user too
    assert manager.tags("ANONYMOUS", "x") == ("ANONYMOUS", "") and manager.limit("ANONYMOUS", "x") == 20.0
    manager.set_overrides({})
    assert not manager.enabled and manager.record("alice", "app", 10 ** 9) == 0


def test_recording_past_the_quota_throttles_and_idle_sensors_expire() -> None:
    clock = Clock()
    manager = ClientQuotaManager("Produce", "producer_byte_rate", samples=11, window_s=1.0, clock=clock)
    manager.set_overrides({(None, DEFAULT): 1000.0})
    assert manager.record("", "a", 10000) == 0  # 10 000 bytes over the 10 s window: at the bound
    # 20 000 bytes over 10 s is 2 000 B/s: (2000 - 1000) / 1000 * 10 s.
    assert manager.record("", "a", 10000) == 10000
    manager.unrecord("", "a", 10000)
    assert manager.record("", "a", 0) == 0
    manager.record("", "b", 1)
    assert manager.sensor_count == 2
    clock.now += 3601.0  # an hour without a record: Kafka's inactive sensor expiry
    manager.record("", "c", 1)
    assert manager.sensor_count == 1


def test_a_request_time_throttle_is_bounded_by_one_window() -> None:
    clock = Clock()
    quotas = ClientQuotas(QuotaSettings(samples=11, window_s=1.0), clock=clock)
    quotas.update({(("client-id", "busy"),): {"request_percentage": 1.0}})
    assert quotas.request.record("", "busy", 500.0) == 1000


def test_the_enabled_flags_follow_the_quotas() -> None:
    quotas = ClientQuotas()
    assert not quotas.enabled and not any(m.enabled for m in quotas.managers)
    quotas.update({(("client-id", "a"),): {"producer_byte_rate": 10.0},
                   (("ip", None),): {"connection_creation_rate": 5}})
    assert quotas.enabled and quotas.produce.enabled
    assert not (quotas.fetch.enabled or quotas.request.enabled or quotas.controller_mutation.enabled)
    quotas.update({(("ip", None),): {"connection_creation_rate": 5}})  # an ip quota is no client quota
    assert not quotas.enabled and not quotas.produce.enabled and quotas.ip_rates == {None: 5}


def test_controller_mutations_take_tokens() -> None:
    clock = Clock()
    quotas = ClientQuotas(QuotaSettings(controller_samples=2, controller_window_s=1.0), clock=clock)
    quotas.update({(("user", None),): {"controller_mutation_rate": 5.0}})
    manager = quotas.controller_mutation
    assert manager.mutation_throttle_ms("ANONYMOUS", "x") == 0  # a full bucket: 2 * 1 s * 5
    assert manager.take_mutations("ANONYMOUS", "x", 15) == 1000  # 5 tokens owed at 5 a second
    assert manager.mutation_throttle_ms("ANONYMOUS", "x") == 1000
    clock.now += 1.0
    assert manager.mutation_throttle_ms("ANONYMOUS", "x") == 0


def test_a_sensors_token_bucket_exists_only_while_a_bound_applies() -> None:
    clock = Clock()
    manager = ClientQuotaManager("ControllerMutation", "controller_mutation_rate", samples=2, window_s=1.0,
                                 token_bucket=True, clock=clock)
    manager.set_overrides({(None, "a"): 5.0})  # a's bucket holds 2 * 1 s * 5; b is unbounded
    assert manager.take_mutations("", "a", 15) == 1000
    assert manager.take_mutations("", "b", 1000) == 0
    tokens = {tags: value for _, tags, _, _, value in manager.readings()}
    # An unbounded sensor has no bucket and reads as Kafka's TokenBucket without a quota does.
    assert tokens == {("", "a"): -5.0, ("", "b"): float(2 ** 63 - 1)}
    manager.set_overrides({(None, DEFAULT): 5.0})  # b bounded now, with a full bucket; a keeps its debt
    assert manager.mutation_throttle_ms("", "b") == 0 and manager.mutation_throttle_ms("", "a") == 1000
    assert {tags: value for _, tags, _, _, value in manager.readings()} == {("", "a"): -5.0, ("", "b"): 10.0}


def test_connection_creation_rates() -> None:
    clock = Clock()
    quotas = ConnectionQuotas(2, {"PLAINTEXT": 1, "SASL_PLAINTEXT": None}, "SASL_PLAINTEXT",
                              QuotaSettings(samples=2, window_s=1.0), clock=clock)
    assert quotas.limits("PLAINTEXT") and not quotas.limits("SASL_PLAINTEXT")  # the inter-broker listener
    assert quotas.accept_delay_ms("PLAINTEXT") == 0
    assert quotas.accept_delay_ms("PLAINTEXT") == 1000  # 2 a second on a 1-a-second listener: bounded
    quotas.set_ip_rates({"10.0.0.1": 1, None: 100})
    assert quotas.ip_throttle_ms("10.0.0.1", "SASL_PLAINTEXT") == 0
    assert quotas.ip_throttle_ms("10.0.0.1", "SASL_PLAINTEXT") == 1000
    assert quotas.ip_throttle_ms("10.0.0.2", "SASL_PLAINTEXT") == 0  # the default's 100 a second


def test_a_scrape_reads_the_connection_rates_under_the_lock_the_loop_records_under() -> None:
    scraping, release = threading.Event(), threading.Event()
    order: List[str] = []

    def clock() -> float:
        if threading.current_thread().name == "scrape" and not release.is_set():
            scraping.set()  # the scrape is reading: hold it there
            assert release.wait(DEADLINE_S)
        return 1000.0

    quotas = ConnectionQuotas(None, {"PLAINTEXT": 10}, None, QuotaSettings(samples=2, window_s=1.0), clock=clock)
    scrape = threading.Thread(target=lambda: order.append("read %d" % len(list(quotas.readings()))), name="scrape")
    scrape.start()
    assert scraping.wait(DEADLINE_S)
    accept = threading.Thread(target=lambda: order.append("recorded %d" % quotas.accept_delay_ms("PLAINTEXT")))
    accept.start()
    accept.join(0.2)  # a new connection's rate is not recorded while the scrape reads the rates ...
    assert order == []
    release.set()
    scrape.join(DEADLINE_S)
    accept.join(DEADLINE_S)
    assert order == ["read 1", "recorded 0"]  # ... but once it is done


def test_a_managers_readings_hold_no_lock_once_returned() -> None:
    manager = ClientQuotaManager("Produce", "producer_byte_rate")
    manager.set_overrides({(None, DEFAULT): 1000.0})
    manager.record("", "a", 10)
    manager.record("", "b", 10)
    readings = manager.readings()
    assert isinstance(readings, list)
    for quota_type, tags, rate, throttle, tokens in readings:  # a record meanwhile does not wait for the reader
        assert manager.record(*tags, 10) == 0 and quota_type == "Produce" and rate > 0 and tokens is None
    assert sorted(tags for _, tags, _, _, _ in readings) == [("", "a"), ("", "b")]


# -- a served broker --------------------------------------------------------------------------------

SETTINGS: Dict[str, Any] = {"quota.window.num": 2, "quota.window.size.seconds": 1,
                            "controller.quota.window.num": 2, "group.initial.rebalance.delay.ms": 0,
                            "offsets.topic.num.partitions": 1}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[Broker, Address]]:
    broker = Broker(str(tmp_path / "broker"), **SETTINGS)
    try:
        yield broker, broker.serve("127.0.0.1", 0)
    finally:
        broker.close()


def _admin(address: Address) -> AdminClient:
    return AdminClient(bootstrap_servers="%s:%d" % address)


def _set(address: Address, entity: Dict[str, Optional[str]], **values: Optional[float]) -> None:
    admin = _admin(address)
    try:
        admin.alter_client_quotas([ClientQuotaAlteration(entity, list(values.items()))])
    finally:
        admin.close()


def test_a_throttled_produce_is_answered_at_once_then_its_connection_muted(served: Tuple[Broker, Address]) -> None:
    broker, address = served
    broker.create_topic("t", 1)
    _set(address, {"client-id": "greedy"}, producer_byte_rate=10000)
    wait_for(lambda: broker.client_quota_configs(), DEADLINE_S, "the quota")
    greedy = BrokerConnection(address[0], address[1], "greedy", 10.0, None)
    other = BrokerConnection(address[0], address[1], "modest", 10.0, None)
    try:
        greedy.request(ApiKey.API_VERSIONS, {})
        sent = time.monotonic()
        answer = greedy.request(ApiKey.PRODUCE, produce_body("t", [b"x" * 30000]))
        throttle_ms = answer["throttle_time_ms"]
        # 30 KB over the 1 s window at 10 KB/s: about 2 s, and the records were appended.
        assert throttle_ms > 1000 and answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        samples = broker.metrics_registry.samples()  # (the average of the throttles of the last windows)
        assert samples['kafka_server_produce_throttle_time{client_id="greedy",user=""}'] == throttle_ms
        assert samples['kafka_server_produce_byte_rate{client_id="greedy",user=""}'] > 10000
        pending = greedy.send(ApiKey.METADATA, {"topics": [{"name": "t"}]})
        # Another client is served while the throttled connection is muted ...
        assert other.request(ApiKey.PRODUCE, produce_body("t", [b"x" * 30000]))["throttle_time_ms"] == 0
        assert not pending.done()
        # ... and the muted one's next request is answered no sooner than the delay,
        pending.result(DEADLINE_S)
        assert time.monotonic() - sent >= throttle_ms / 1000.0
        # its connection unmuted then: its later requests do not wait on the throttle again.
        muted = [conn.muted_until for server in broker._servers for conn in list(server._connections)
                 if conn.client_id == "greedy"]
        assert muted == [0.0]
    finally:
        greedy.close()
        other.close()


def test_a_throttled_fetch_is_answered_empty_as_kafka_answers_it(served: Tuple[Broker, Address]) -> None:
    broker, address = served
    broker.create_topic("t", 1)
    batch = len(build_batch([b"y" * 4000]))
    for _ in range(20):
        broker.produce("t", 0, bytes(build_batch([b"y" * 4000])))
    _set(address, {"user": None, "client-id": "reader"}, consumer_byte_rate=20000)
    wait_for(lambda: broker.client_quota_configs(), DEADLINE_S, "the quota")
    conn = BrokerConnection(address[0], address[1], "reader", 10.0, None)
    throttled, offset = 0, 0
    try:
        while offset < 12:
            answer = conn.request(ApiKey.FETCH, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "rack_id": "",
                "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": offset,
                                                          "partition_max_bytes": 1 << 20, "log_start_offset": -1,
                                                          "current_leader_epoch": -1}]}]})
            if answer["throttle_time_ms"] > 0:
                throttled += 1
                assert answer["responses"] == []  # no partitions: its bytes were taken back
                assert broker.metrics_registry.samples()[
                    'kafka_server_fetch_throttle_time{client_id="reader",user="ANONYMOUS"}'] > 0
                continue
            records = answer["responses"][0]["partitions"][0]["records"]
            # Kafka's cap: no more than the quota allows at once on an idle sensor (20 KB).
            assert 0 < len(records) <= 20000
            offset += len(records) // batch
    finally:
        conn.close()
    assert throttled > 0


def _fetch_v(conn: Wire, version: int, min_bytes: int = 0, max_wait_ms: int = 0) -> Dict[str, Any]:
    """A Fetch of ``t``-0 from offset 0 at ``version``."""
    return conn.request(ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                                  "log_start_offset": -1, "current_leader_epoch": -1}]}]})


def test_a_throttled_legacy_fetch_is_never_down_converted(served: Tuple[Broker, Address],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    broker, address = served
    broker.create_topic("t", 1)
    for _ in range(10):
        broker.produce("t", 0, bytes(build_batch([b"y" * 4000])))
    conversions: List[int] = []

    def counted(*args: Any) -> Any:
        conversions.append(1)
        return convert(*args)

    convert = handlers_fetch._down_convert_results
    monkeypatch.setattr(handlers_fetch, "_down_convert_results", counted)
    _set(address, {"client-id": "old-reader"}, consumer_byte_rate=10000)
    wait_for(lambda: broker.client_quota_configs(), DEADLINE_S, "the quota")
    served_fetches, throttled = 0, 0
    with Wire(address, client_id="old-reader") as conn:
        deadline = time.monotonic() + DEADLINE_S
        while served_fetches < 2 or throttled < 2:
            assert time.monotonic() < deadline, "never throttled twice and served twice"
            answer = _fetch_v(conn, 3)  # magic 1 messages: converted when answered
            if answer["throttle_time_ms"] > 0:
                throttled += 1
                assert answer["responses"] == []
            else:
                served_fetches += 1
                assert answer["responses"][0]["partitions"][0]["records"]
            # Kafka decides on the unconverted size: a throttled fetch is answered without converting.
            assert len(conversions) == served_fetches


def test_a_fetch_waits_for_no_more_than_its_quota_lets_it_read(served: Tuple[Broker, Address]) -> None:
    broker, address = served
    broker.create_topic("t", 1)
    broker.produce("t", 0, bytes(build_batch([b"z" * 4000])))
    # 1000 B/s over two 1 s windows: a fetch is capped at 1000 bytes, and so is its min_bytes
    # (Kafka's fetchMinBytes), so the 4 KB batch there answers a fetch asking for 1 MB at once
    # (throttled: 4 KB is past the quota) rather than after its max_wait_ms of a minute.
    _set(address, {"client-id": "waiter"}, consumer_byte_rate=1000)
    wait_for(lambda: broker.client_quota_configs(), DEADLINE_S, "the quota")
    with Wire(address, timeout=10.0, client_id="waiter") as conn:
        answer = _fetch_v(conn, 11, min_bytes=1 << 20, max_wait_ms=60000)
    assert answer["throttle_time_ms"] > 0 and answer["responses"] == []
    assert broker.metrics_registry.samples()['kafka_server_fetch_throttle_time{client_id="waiter",user=""}'] > 0


def test_a_consumers_offset_for_leader_epoch_is_throttled(served: Tuple[Broker, Address]) -> None:
    broker, address = served
    broker.create_topic("t", 1)
    # Any request of this client id is over a request_percentage this small.
    _set(address, {"client-id": "truncation-check"}, request_percentage=1e-9)
    wait_for(lambda: broker.client_quota_configs(), DEADLINE_S, "the quota")
    with Wire(address, client_id="truncation-check") as conn:
        # KIP-320: consumers send it too (replica id -1), so Kafka does not exempt it.
        answer = conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, {"replica_id": -1, "topics": [
            {"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    assert answer["topics"][0]["partitions"][0]["error_code"] == 0 and answer["throttle_time_ms"] > 0


def test_the_sasl_exchange_is_never_throttled(tmp_path: Path) -> None:
    broker = Broker(str(tmp_path / "broker"), **SETTINGS)
    try:
        address = broker.serve("127.0.0.1", 0, sasl_users={"al ice": "secret"})
        admin = AdminClient(broker=broker)
        try:  # every user, ANONYMOUS too, is over a request_percentage this small
            admin.alter_client_quotas([ClientQuotaAlteration({"user": None}, [("request_percentage", 1e-9)])])
        finally:
            admin.close()
        wait_for(lambda: broker.client_quota_configs(), DEADLINE_S, "the quota")
        with Wire(address, client_id="sasl") as conn:
            # Kafka's authenticator answers ApiVersions, SaslHandshake and SaslAuthenticate
            # before any quota applies: none is recorded, none mutes the connection.
            versions = conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "quota-test",
                                                              "client_software_version": "1"})
            assert (versions["error_code"], versions["throttle_time_ms"]) == (0, 0)
            assert conn.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
            answer = conn.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\x00al ice\x00secret"})
            assert answer["error_code"] == 0
            assert not [name for name in broker.metrics_registry.samples() if name.startswith("kafka_server_request_")]
            # Authenticated, the client is User:al ice, its quota the default user's, and its
            # sensor tagged with its name sanitized as Kafka's Sanitizer does.
            after = conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "quota-test",
                                                           "client_software_version": "1"})
            assert after["throttle_time_ms"] > 0
        samples = broker.metrics_registry.samples()
        assert samples['kafka_server_request_throttle_time{client_id="",user="al%20ice"}'] == after["throttle_time_ms"]
        assert not any("ANONYMOUS" in name for name in samples)
    finally:
        broker.close()


def _create(conn: Wire, name: str, partitions: int, version: int = 6) -> Dict[str, Any]:
    return conn.request(ApiKey.CREATE_TOPICS, version, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                    "configs": []}], "timeout_ms": 5000, "validate_only": False})


def test_controller_mutations_past_a_strict_quota_are_refused(served: Tuple[Broker, Address]) -> None:
    broker, address = served
    _set(address, {"client-id": "maker"}, controller_mutation_rate=2)
    wait_for(lambda: broker.client_quota_configs(), DEADLINE_S, "the quota")
    with Wire(address, client_id="maker") as first, Wire(address, client_id="maker") as second:
        # The bucket holds 2 windows * 1 s * 2 = 4 partitions. A strict quota (v6+) checks the
        # bucket, then takes a change it accepted whole: 10 partitions leave it 6 in debt (3 s
        # at 2 a second), and the accepted request is not throttled (Kafka's strict quota).
        created = _create(first, "big", 10)
        assert created["topics"][0]["error_code"] == 0 and created["throttle_time_ms"] == 0
        # The next change, on the same connection (not muted), is refused while the bucket owes,
        # and that answer carries the throttle.
        refused = _create(first, "more", 1)
        assert refused["topics"][0]["error_code"] == THROTTLING_QUOTA_EXCEEDED
        assert refused["topics"][0]["error_message"].endswith("The throttling quota has been exceeded.")
        assert refused["throttle_time_ms"] > 2000 and "more" not in broker.list_topics()
        # Below v6 the quota is permissive: created, and throttled after (on another connection:
        # the refused one is muted now).
        permissive = _create(second, "older", 1, version=5)
        assert permissive["topics"][0]["error_code"] == 0 and permissive["throttle_time_ms"] > 2000
        assert "older" in broker.list_topics()


def _kafka_python_call(address: Address, request: Any, response_class: Any, version: int) -> Any:
    """One request in kafka-python's own encoding, its answer decoded by kafka-python."""
    request.with_header(correlation_id=7, client_id="kafka-python-quotas")
    with Wire(address) as wire:
        wire.sock.sendall(request.encode(version=version, header=True, framed=True))
        frame = wire.read_frame()
    assert frame is not None, "the broker closed the connection"
    return response_class.decode(frame, version=version, header=True)


@pytest.mark.parametrize("version", [0, 1])
def test_describe_and_alter_through_kafka_pythons_codec(served: Tuple[Broker, Address], version: int) -> None:
    admin_module = pytest.importorskip("kafka.protocol.admin")
    alter, altered = admin_module.AlterClientQuotasRequest, admin_module.AlterClientQuotasResponse
    describe, described = admin_module.DescribeClientQuotasRequest, admin_module.DescribeClientQuotasResponse
    _, address = served

    def entry(entity: List[Tuple[str, Optional[str]]], ops: List[Tuple[str, float, bool]]) -> Any:
        return alter.EntryData(entity=[alter.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                               ops=[alter.EntryData.OpData(key=k, value=v, remove=r) for k, v, r in ops])

    answer = _kafka_python_call(address, alter(version=version, validate_only=False, entries=[
        entry([("user", "alice"), ("client-id", None)], [("producer_byte_rate", 1048576.0, False)]),
        entry([("client-id", "app")], [("request_percentage", 12.5, False)]),
        entry([("client-id", "bad")], [("producer_byte_rate", 1.5, False)]),
        entry([("client-id", "")], [("producer_byte_rate", 1.0, False)]),
        entry([("ip", "127.0.0.1"), ("user", "x")], [("connection_creation_rate", 1.0, False)]),
        entry([("client-id", "x")], [("no_such_quota", 1.0, False)]),
    ]), altered, version)
    errors = {tuple((e.entity_type, e.entity_name) for e in r.entity): (r.error_code, r.error_message)
              for r in answer.entries}
    assert errors[(("client-id", None), ("user", "alice"))] == (0, None)
    assert errors[(("client-id", "app"),)] == (0, None)
    assert errors[(("client-id", "bad"),)] == (INVALID_REQUEST, "Configuration producer_byte_rate must be a LONG value")
    assert errors[(("client-id", ""),)] == (INVALID_REQUEST, "Empty client-id not supported")
    assert errors[(("ip", "127.0.0.1"), ("user", "x"))] == (
        INVALID_REQUEST, "Invalid quota entity combination, IP entity should not be used with user/client ID entity.")
    assert errors[(("client-id", "x"),)] == (INVALID_REQUEST, "Invalid configuration key no_such_quota")

    def query(components: List[Tuple[str, int, Optional[str]]], strict: bool) -> Any:
        return _kafka_python_call(address, describe(version=version, strict=strict, components=[
            describe.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components]),
            described, version)

    everything = query([], False)
    assert everything.error_code == 0
    found = {tuple(sorted((e.entity_type, e.entity_name) for e in r.entity)): {v.key: v.value for v in r.values}
             for r in everything.entries}
    assert found == {(("client-id", None), ("user", "alice")): {"producer_byte_rate": 1048576.0},
                     (("client-id", "app"),): {"request_percentage": 12.5}}
    only_clients = query([("client-id", 2, None)], True)  # any named client, and nothing else
    assert [[(e.entity_type, e.entity_name) for e in r.entity] for r in only_clients.entries] == [[("client-id", "app")]]
    bad = query([("user", 0, "a"), ("user", 0, "b")], False)
    assert (bad.error_code, bad.error_message, bad.entries) == (
        INVALID_REQUEST, "Duplicate user filter component entity type", None)
    assert query([("nope", 0, "a")], False).error_code == 35  # UNSUPPORTED_VERSION: a custom entity type


def test_quotas_survive_a_restart_and_keep_a_users_scram_credentials(tmp_path: Path) -> None:
    data = str(tmp_path / "broker")
    broker = Broker(data, **SETTINGS)
    try:
        address = broker.serve("127.0.0.1", 0)
        _set(address, {"user": "alice"}, consumer_byte_rate=2097152)
        _set(address, {"ip": None}, connection_creation_rate=50)
        admin = _admin(address)
        try:
            with pytest.raises(InvalidRequestError, match="Invalid empty client quota entity"):
                admin.alter_client_quotas([ClientQuotaAlteration({}, [("producer_byte_rate", 1.0)])])
        finally:
            admin.close()
    finally:
        broker.close()
    broker = Broker(data, **SETTINGS)
    try:
        assert broker.client_quota_configs() == {(("user", "alice"),): {"consumer_byte_rate": 2097152.0},
                                                 (("ip", None),): {"connection_creation_rate": 50.0}}
        admin = _admin(broker.serve("127.0.0.1", 0))
        try:
            assert admin.describe_client_quotas([ClientQuotaFilterComponent.of_entity("user", "alice")]) == {
                (("user", "alice"),): {"consumer_byte_rate": 2097152.0}}
            admin.alter_client_quotas([ClientQuotaAlteration({"user": "alice"}, [("consumer_byte_rate", None)])])
            assert admin.describe_client_quotas([]) == {(("ip", None),): {"connection_creation_rate": 50.0}}
        finally:
            admin.close()
    finally:
        broker.close()


def test_the_listener_rate_holds_back_new_connections(tmp_path: Path) -> None:
    broker = Broker(str(tmp_path / "broker"), **SETTINGS,
                    **{"listener.name.plaintext.max.connection.creation.rate": 2})
    try:
        address = broker.serve("127.0.0.1", 0)
        started = time.monotonic()
        connections = [BrokerConnection(address[0], address[1], "c%d" % i, 10.0, None) for i in range(5)]
        try:
            for conn in connections:  # every one is served, in the end
                conn.request(ApiKey.API_VERSIONS, {})
        finally:
            for conn in connections:
                conn.close()
        # At 2 a second over a 1 s window, the last of five waits for the ones before it.
        assert time.monotonic() - started >= 1.0
        samples = broker.metrics_registry.samples()
        assert samples['kafka_server_socket_server_metrics_connection_accept_throttle_time{listener="PLAINTEXT"}'] > 0
    finally:
        broker.close()


def test_an_address_past_its_connection_rate_is_closed(served: Tuple[Broker, Address]) -> None:
    broker, address = served
    _set(address, {"ip": "127.0.0.1"}, connection_creation_rate=1)
    wait_for(lambda: broker.client_quota_configs(), DEADLINE_S, "the quota")
    first = BrokerConnection(address[0], address[1], "first", 10.0, None)
    try:
        first.request(ApiKey.API_VERSIONS, {})
        with socket.create_connection(address, timeout=10.0) as sock:
            sock.sendall(b"")
            assert sock.recv(1) == b""  # closed (after the throttle time), never served
    finally:
        first.close()


def test_a_connection_held_for_its_address_throttle_counts_against_no_limit(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Two windows of 3 s: a connection from an address bounded at 0 connections a second is
    # held 3 s, then closed. The broker takes one connection at a time.
    broker = Broker(str(tmp_path / "broker"), **{**SETTINGS, "quota.window.size.seconds": 3, "max.connections": 1})
    try:
        address = broker.serve("127.0.0.1", 0)
        admin = AdminClient(broker=broker)
        try:
            admin.alter_client_quotas([ClientQuotaAlteration({"ip": "127.0.0.2"}, [("connection_creation_rate", 0)])])
        finally:
            admin.close()
        wait_for(lambda: broker.client_quota_configs(), DEADLINE_S, "the quota")
        caplog.set_level("WARNING", logger="pylogq")
        with socket.create_connection(address, timeout=DEADLINE_S, source_address=("127.0.0.2", 0)) as held:
            wait_for(lambda: "connection throttled peer=127.0.0.2" in caplog.text, DEADLINE_S, "the throttle")
            # Kafka throttles before counting: the held connection does not take the broker's one.
            with Wire(address, client_id="other") as conn:
                assert conn.request(ApiKey.API_VERSIONS, 0)["error_code"] == 0
            assert held.recv(1) == b""  # closed after its throttle, never served
    finally:
        broker.close()
