"""Clients that skip ApiVersions or pin an old protocol still produce, consume and commit.

kafka-python with ``api_version=(0, 9)`` or ``(0, 10, 1)`` and librdkafka with
``api.version.request=false`` and ``broker.version.fallback=0.9.0.0`` never ask which
versions the broker serves: they send Metadata v0, Produce v0-2 with legacy message sets,
Fetch v0-3 (answered with batches down-converted to the legacy formats), GroupCoordinator
v0 and the first versions of the group APIs. Each writes records, reads them back in a
consumer group, commits, and a second consumer of the group resumes after the commit.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Dict, Iterator, List, Set, Tuple

import pytest

import pylogq
from pylogq.protocol import ApiKey
from pylogq.records import build_batch
from pylogq.server.handlers import Handlers

from .test_server import TEST_CONFIG

DEADLINE_S = 30.0
COUNT = 40


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Dict[int, Set[int]]:
    """API key -> the versions the broker was asked at (the server runs in this process)."""
    versions: Dict[int, Set[int]] = {}
    handle = Handlers.handle

    def recording(self: Handlers, conn: Any, api_key: int, version: int, *args: Any) -> Any:
        versions.setdefault(api_key, set()).add(version)
        return handle(self, conn, api_key, version, *args)

    monkeypatch.setattr(Handlers, "handle", recording)
    return versions


@pytest.fixture
def served(tmp_path: Any, seen: Dict[int, Set[int]]) -> Iterator[Tuple[pylogq.Broker, str]]:
    with pylogq.Broker(str(tmp_path / "data"), **TEST_CONFIG) as broker:
        host, port = broker.serve()
        yield broker, "%s:%d" % (host, port)


def _assert_spoke_old_versions(seen: Dict[int, Set[int]], metadata: int, asked_versions: bool) -> None:
    assert (ApiKey.API_VERSIONS in seen) == asked_versions, seen
    assert seen[ApiKey.METADATA] == {metadata}, seen
    assert max(seen[ApiKey.PRODUCE]) <= 2 and max(seen[ApiKey.FETCH]) <= 3, seen
    assert ApiKey.OFFSET_COMMIT in seen and ApiKey.JOIN_GROUP in seen, seen


def _topic() -> str:
    return "old-%s" % uuid.uuid4().hex[:8]


# -- kafka-python ----------------------------------------------------------------------------


def _kafka_python_round(bootstrap: str, api_version: Tuple[int, ...], topic: str, group: str,
                        expected: List[bytes], end: int) -> List[bytes]:
    """Consume ``expected`` in ``group`` and commit (up to ``end``); -> the values read."""
    import kafka

    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, api_version=api_version, group_id=group,
                                   auto_offset_reset="earliest", enable_auto_commit=False)
    values: List[bytes] = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < len(expected) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                values += [m.value for m in batch]
        consumer.commit()
        committed = consumer.committed(kafka.TopicPartition(topic, 0))
        assert committed == end, committed
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("api_version", [(0, 9), (0, 10, 1)], ids=["0.9", "0.10.1"])
@pytest.mark.parametrize("codec", [None, "gzip"])
def test_kafka_python_pinned_to_an_old_version(served: Tuple[pylogq.Broker, str], seen: Dict[int, Set[int]],
                                               api_version: Tuple[int, ...], codec: Any) -> None:
    """0.9 never asks for the broker's versions; 0.10.1 asks (ApiVersions v0 came with 0.10)
    and keeps to the versions of 0.10.1 (Metadata v2, Fetch v3)."""
    import kafka

    broker, bootstrap = served
    topic, group = _topic(), "g-%s" % uuid.uuid4().hex[:8]
    broker.create_topic(topic, 1)
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, acks=1,
                                   compression_type=codec)
    try:
        for i in range(COUNT):
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
        producer.flush(DEADLINE_S)
    finally:
        producer.close()
    # Batches a current producer wrote are read through the down-conversion too.
    broker.produce(topic, 0, build_batch([b"v%d" % i for i in range(COUNT, COUNT + 10)],
                                         compression_type="snappy" if codec else 0))
    expected = [b"v%d" % i for i in range(COUNT + 10)]
    assert _kafka_python_round(bootstrap, api_version, topic, group, expected, COUNT + 10) == expected
    broker.produce(topic, 0, build_batch([b"after"]))
    assert _kafka_python_round(bootstrap, api_version, topic, group, [b"after"], COUNT + 11) == [b"after"]
    _assert_spoke_old_versions(seen, 0 if api_version == (0, 9) else 2, asked_versions=api_version >= (0, 10))


# -- librdkafka -------------------------------------------------------------------------------


def _librdkafka_config(bootstrap: str) -> Dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "api.version.request": False,
            "broker.version.fallback": "0.9.0.0", "log_level": 0}


def _librdkafka_round(bootstrap: str, topic: str, group: str, count: int, end: int) -> List[bytes]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(dict(_librdkafka_config(bootstrap), **{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    values: List[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
        consumer.commit(asynchronous=False)
        [committed] = consumer.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=DEADLINE_S)
        assert committed.error is None and committed.offset == end, committed
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_librdkafka_without_api_version_request(served: Tuple[pylogq.Broker, str], seen: Dict[int, Set[int]],
                                                codec: str) -> None:
    import confluent_kafka

    broker, bootstrap = served
    topic, group = _topic(), "g-%s" % uuid.uuid4().hex[:8]
    broker.create_topic(topic, 1)
    failures: List[Any] = []
    producer = confluent_kafka.Producer(dict(_librdkafka_config(bootstrap), **{
        "compression.codec": codec, "linger.ms": 5}))
    for i in range(COUNT):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0,
                         on_delivery=lambda err, msg: failures.append(err) if err else None)
    assert producer.flush(DEADLINE_S) == 0 and failures == []
    # The log holds legacy v0 message sets from this producer; a current batch follows.
    broker.produce(topic, 0, build_batch([b"v%d" % i for i in range(COUNT, COUNT + 10)]))
    values = _librdkafka_round(bootstrap, topic, group, COUNT + 10, COUNT + 10)
    assert values == [b"v%d" % i for i in range(COUNT + 10)]
    broker.produce(topic, 0, build_batch([b"after"]))
    assert _librdkafka_round(bootstrap, topic, group, 1, COUNT + 11) == [b"after"]
    _assert_spoke_old_versions(seen, 0, asked_versions=False)
