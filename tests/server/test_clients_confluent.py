"""confluent-kafka 2.x (librdkafka) against pylogq-broker (subprocess) and the in-process fixture.

librdkafka's consumer reads with isolation.level=read_committed by default, so these
tests also hold the broker's last stable offset to the high watermark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from ._support import (
    BASE_TIMESTAMP,
    CODECS,
    HEARTBEAT_MS,
    SESSION_TIMEOUT_MS,
    Sent,
    by_offset,
    records,
    stored_batches,
    unique,
    wait_for,
)

ACKS = ("0", "1", "all")
TIMEOUT_S = 15.0


@pytest.fixture
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _known(value: Optional[int]) -> int:
    """A partition or offset of a delivered or consumed message (never None for those)."""
    assert value is not None
    return value


def _create(admin: AdminClient, topic: str, partitions: int, **config: str) -> None:
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config=config)], operation_timeout=10)
    futures[topic].result(TIMEOUT_S)


def _produce(bootstrap: str, topic: str, batches: Dict[int, List[Sent]],
             **config: Any) -> List[Tuple[int, int]]:
    """Send each partition's records; -> the sorted (partition, offset) of the delivery reports
    (offset -1 with acks=0: the broker does not answer)."""
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    settings.update({k.replace("_", "."): v for k, v in config.items()})
    producer = Producer(settings)
    reports: List[Tuple[Optional[KafkaError], int, int]] = []

    def on_delivery(err: Optional[KafkaError], msg: Any) -> None:
        offset = msg.offset()
        reports.append((err, _known(msg.partition()), -1 if offset is None else offset))

    for partition, batch in batches.items():
        for r in batch:
            producer.produce(topic, value=r.value, key=r.key, partition=partition, timestamp=r.timestamp,
                             headers=list(r.headers),
                             on_delivery=on_delivery)
    assert producer.flush(TIMEOUT_S) == 0, "records left undelivered"
    assert [err for err, _, _ in reports if err is not None] == []
    return sorted((partition, offset) for _, partition, offset in reports)


def _consumer(bootstrap: str, group: str, **config: Any) -> Consumer:
    settings = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_MS}
    settings.update({k.replace("_", "."): v for k, v in config.items()})
    return Consumer(settings)


def _as_sent(message: Any) -> Sent:
    kind, timestamp = message.timestamp()
    assert kind == 1, "CreateTime expected"  # TIMESTAMP_CREATE_TIME
    return Sent(message.key(), message.value(), tuple(message.headers() or ()), timestamp)


def _read(consumer: Consumer, count: int, timeout: float = TIMEOUT_S) -> Dict[int, List[Tuple[int, Sent]]]:
    """Consume until ``count`` records arrived; -> {partition: [(offset, record)]}."""
    got: Dict[int, List[Tuple[int, Sent]]] = {}

    def step() -> None:
        for message in consumer.consume(count, 0.1):
            assert message.error() is None, message.error()
            got.setdefault(_known(message.partition()), []).append((_known(message.offset()), _as_sent(message)))

    wait_for(lambda: sum(map(len, got.values())) >= count, timeout, "%d records" % count, step)
    assert sum(map(len, got.values())) == count, "more records than sent: %s" % got
    return got


def _configs(admin: AdminClient, topic: str) -> Dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    result: Dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    return result


def _offset(admin: AdminClient, tp: TopicPartition, spec: OffsetSpec) -> Tuple[int, int]:
    info = admin.list_offsets({tp: spec})[tp].result(TIMEOUT_S)
    return info.offset, info.timestamp


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_admin_topics_configs_offsets_and_delete(bootstrap: str, admin: AdminClient) -> None:
    topic, other = unique("ck-admin"), unique("ck-admin")
    _create(admin, topic, 3)
    _create(admin, other, 1, **{"cleanup.policy": "compact"})
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    assert len(metadata.topics[topic].partitions) == 3 and len(metadata.topics[other].partitions) == 1
    assert metadata.controller_id == 0 and metadata.cluster_id

    configs = _configs(admin, other)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].value == "604800000" and configs["retention.ms"].is_default
    # the classic AlterConfigs replaces every override; the incremental one sets only its keys
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "3600000"})
    admin.alter_configs([resource])[resource].result(TIMEOUT_S)
    assert _configs(admin, topic)["retention.ms"].value == "3600000"
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("segment.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    configs = _configs(admin, topic)
    assert configs["segment.ms"].value == "7200000" and configs["retention.ms"].value == "3600000"

    sent = records(6, "ck-adm")
    _produce(bootstrap, topic, {0: sent})
    tp = TopicPartition(topic, 0)
    assert _offset(admin, tp, OffsetSpec.earliest())[0] == 0
    assert _offset(admin, tp, OffsetSpec.latest())[0] == 6
    assert _offset(admin, tp, OffsetSpec.for_timestamp(sent[3].timestamp - 1)) == (3, sent[3].timestamp)
    assert _offset(admin, tp, OffsetSpec.for_timestamp(sent[-1].timestamp + 1))[0] == -1

    deleted = admin.delete_records([TopicPartition(topic, 0, 4)])
    assert next(iter(deleted.values())).result(TIMEOUT_S).low_watermark == 4
    assert _offset(admin, tp, OffsetSpec.earliest())[0] == 4
    consumer = _consumer(bootstrap, unique("ck-unused"))
    try:
        assert consumer.get_watermark_offsets(tp, TIMEOUT_S) == (4, 6)
        consumer.assign([TopicPartition(topic, 0, 0)])  # deleted: auto.offset.reset=earliest takes over
        got = _read(consumer, 2)
        assert [o for o, _ in got[0]] == [4, 5] and by_offset(got[0]) == sent[4:]
    finally:
        consumer.close()

    for future in admin.delete_topics([topic, other], operation_timeout=10).values():
        future.result(TIMEOUT_S)
    remaining = admin.list_topics(timeout=TIMEOUT_S).topics
    assert topic not in remaining and other not in remaining


@pytest.mark.parametrize("acks", ACKS)
def test_produce_every_codec_and_read_back_with_assign_and_seek(bootstrap: str, admin: AdminClient,
                                                                broker_data_dir: Path, acks: str) -> None:
    topic = unique("ck-codecs")
    _create(admin, topic, len(CODECS))
    expected: Dict[int, List[Sent]] = {}
    for partition, codec in enumerate(CODECS):
        expected[partition] = records(5, "%s-%s" % (acks, codec))
        offsets = _produce(bootstrap, topic, {partition: expected[partition]}, acks=acks,
                           enable_idempotence=False, compression_type=codec)
        assert offsets == [(partition, -1 if acks == "0" else i) for i in range(5)], codec
    consumer = _consumer(bootstrap, unique("ck-unused"))
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in expected])
        got = _read(consumer, 5 * len(CODECS))
        for partition, batch in expected.items():
            assert [o for o, _ in got[partition]] == list(range(5)), CODECS[partition]
            assert by_offset(got[partition]) == batch, CODECS[partition]
        tp = TopicPartition(topic, CODECS.index("gzip"), 3)
        consumer.assign([tp])
        got = _read(consumer, 2)
        assert got[tp.partition] == [(i, expected[tp.partition][i]) for i in (3, 4)]
    finally:
        consumer.close()
    for partition, codec in enumerate(CODECS):  # the client really compressed, with this codec
        stored = stored_batches(broker_data_dir, topic, partition)
        assert {b.codec for b in stored} == {codec} and sum(b.records_count for b in stored) == 5, stored


def test_idempotent_producer(bootstrap: str, admin: AdminClient, broker_data_dir: Path) -> None:
    topic = unique("ck-idempotent")
    _create(admin, topic, 2)
    sent = {0: records(6, "ck-idem0"), 1: records(3, "ck-idem1")}
    offsets = _produce(bootstrap, topic, sent, enable_idempotence=True, compression_type="lz4")
    assert offsets == [(0, i) for i in range(6)] + [(1, i) for i in range(3)]
    consumer = _consumer(bootstrap, unique("ck-unused"))
    try:
        consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        got = _read(consumer, 9)
        assert {p: by_offset(items) for p, items in got.items()} == sent
    finally:
        consumer.close()


def test_group_consume_commit_resume_and_group_admin(bootstrap: str, admin: AdminClient) -> None:
    topic, group = unique("ck-group"), unique("ck-group")
    _create(admin, topic, 2)
    sent = {0: records(5, "cg0"), 1: records(4, "cg1")}
    _produce(bootstrap, topic, sent)

    first = _consumer(bootstrap, group)
    try:
        first.subscribe([topic])
        got = _read(first, 9)
        assert {p: by_offset(items) for p, items in got.items()} == sent
        assert {(tp.topic, tp.partition) for tp in first.assignment()} == {(topic, 0), (topic, 1)}
        first.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 3)], asynchronous=False)
        committed = first.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], TIMEOUT_S)
        assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 2), (1, 3)]

        listed = admin.list_consumer_groups().result(TIMEOUT_S)
        assert group in {g.group_id for g in listed.valid}
        description = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
        assert description.state == ConsumerGroupState.STABLE
        assert description.partition_assignor == "range"
        [member] = description.members
        assert {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions} == {(topic, 0), (topic, 1)}
    finally:
        first.close()

    second = _consumer(bootstrap, group)
    try:
        second.subscribe([topic])
        got = _read(second, 3 + 1)
        assert [o for o, _ in got[0]] == [2, 3, 4] and by_offset(got[0]) == sent[0][2:]
        assert [o for o, _ in got[1]] == [3] and by_offset(got[1]) == sent[1][3:]
        second.commit(asynchronous=False)
    finally:
        second.close()

    wait_for(lambda: admin.describe_consumer_groups([group])[group].result(TIMEOUT_S).state
             == ConsumerGroupState.EMPTY, TIMEOUT_S, "the group to be empty after its member left")
    admin.delete_consumer_groups([group])[group].result(TIMEOUT_S)
    listed = admin.list_consumer_groups().result(TIMEOUT_S)
    assert group not in {g.group_id for g in listed.valid}


def test_consumer_offsets_for_times(bootstrap: str, admin: AdminClient) -> None:
    topic = unique("ck-times")
    _create(admin, topic, 1)
    sent = records(4, "ck-t")
    _produce(bootstrap, topic, {0: sent})
    consumer = _consumer(bootstrap, unique("ck-unused"))
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT_S) == (0, 4)
        [found] = consumer.offsets_for_times([TopicPartition(topic, 0, sent[1].timestamp)], TIMEOUT_S)
        assert found.offset == 1
        [found] = consumer.offsets_for_times([TopicPartition(topic, 0, sent[-1].timestamp + 1)], TIMEOUT_S)
        assert found.offset == -1
    finally:
        consumer.close()


def test_large_fetch_read_back(bootstrap: str, admin: AdminClient) -> None:
    """Batches far above the broker's sendfile threshold come back whole."""
    topic = unique("ck-large")
    _create(admin, topic, 1)
    sent = [Sent(b"k%d" % i, bytes([i % 251]) * 1000 + b"%d" % i, (), BASE_TIMESTAMP + i) for i in range(400)]
    _produce(bootstrap, topic, {0: sent}, linger_ms=50, batch_size=512 * 1024)
    consumer = _consumer(bootstrap, unique("ck-unused"))
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = _read(consumer, len(sent))
        assert [o for o, _ in got[0]] == list(range(len(sent))) and by_offset(got[0]) == sent
    finally:
        consumer.close()
