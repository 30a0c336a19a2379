"""kafka-python 3.x against pylogq-broker (subprocess) and the in-process fixture.

Admin (topics, configs, groups, offsets, delete records), every acks level and codec,
the default idempotent producer, assign+seek and group consumption with exact
read-back, and a new group member resuming at the committed offset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec
from kafka.structs import OffsetAndMetadata

from ._support import (
    consumer_settings,
    BASE_TIMESTAMP,
    CODECS,
    Sent,
    by_offset,
    records,
    stored_batches,
    unique,
    wait_for,
)

ACKS = (0, 1, "all")
# poll() returns as soon as records arrive; the timeout only bounds an idle wait.
POLL_MS = 500


@pytest.fixture
def admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def _producer(bootstrap: str, **config: Any) -> KafkaProducer:
    settings: Dict[str, Any] = dict(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=10000)
    settings.update(config)
    return KafkaProducer(**settings)


def _send(producer: KafkaProducer, topic: str, partition: int, batch: List[Sent]) -> None:
    for r in batch:
        producer.send(topic, key=r.key, value=r.value, headers=list(r.headers), timestamp_ms=r.timestamp,
                      partition=partition)
    producer.flush(10)


def _consumer(bootstrap: str, **config: Any) -> KafkaConsumer:
    return KafkaConsumer(**consumer_settings(bootstrap, **config))


def _subscribe(consumer: KafkaConsumer, topic: str, partitions: int) -> None:
    """Subscribe once the consumer knows the topic's partitions.

    kafka-python 3.0.12 loses a rebalance that new topic metadata started if its
    SyncGroup answer arrives after ``poll()`` timed out: it stops heartbeating and
    the broker rightly expires it. Joining with the metadata already known avoids
    that rebalance, and a poll timeout well above a join's duration (``POLL_MS``)
    keeps a join inside one poll.
    """
    assert consumer.partitions_for_topic(topic) == set(range(partitions))
    consumer.subscribe([topic])


def _as_sent(record: Any) -> Sent:
    assert record.timestamp_type == 0, "CreateTime expected"
    return Sent(record.key, record.value, tuple((k, v) for k, v in record.headers), record.timestamp)


def _read(consumer: KafkaConsumer, count: int, timeout: float = 15.0) -> Dict[int, List[Tuple[int, Sent]]]:
    """Poll until ``count`` records arrived; -> {partition: [(offset, record)]}."""
    got: Dict[int, List[Tuple[int, Sent]]] = {}

    def step() -> None:
        for tp, batch in consumer.poll(POLL_MS).items():
            got.setdefault(tp.partition, []).extend((r.offset, _as_sent(r)) for r in batch)

    wait_for(lambda: sum(map(len, got.values())) >= count, timeout, "%d records" % count, step)
    assert sum(map(len, got.values())) == count, "more records than sent: %s" % got
    return got


def test_admin_topics_configs_offsets_and_delete(bootstrap: str, admin: KafkaAdminClient) -> None:
    topic, other = unique("kp-admin"), unique("kp-admin")
    admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1},
                         other: {"num_partitions": 1, "replication_factor": 1,
                                 "configs": {"cleanup.policy": "compact"}}})
    assert {topic, other} <= set(admin.list_topics())
    described = {t["name"]: t for t in admin.describe_topics([topic, other])}
    assert sorted(p["partition_index"] for p in described[topic]["partitions"]) == [0, 1, 2]
    assert len(described[other]["partitions"]) == 1

    # describe: the override shows as such, defaults as defaults
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, other)], config_filter="all")
    entries = configs["topic"][other]
    assert entries["cleanup.policy"]["value"] == "compact"
    assert entries["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert entries["retention.ms"]["value"] == "604800000"
    assert entries["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    # alter (kafka-python picks IncrementalAlterConfigs) and read it back
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "3600000"})])
    entries = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                     config_filter="all")["topic"][topic]
    assert entries["retention.ms"]["value"] == "3600000"
    # the classic AlterConfigs too (kafka-python resends the other overrides with it)
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"segment.ms": "7200000"})],
                        incremental=False)
    entries = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                     config_filter="all")["topic"][topic]
    assert entries["segment.ms"]["value"] == "7200000"
    assert entries["retention.ms"]["value"] == "3600000"

    # list offsets earliest, latest and by timestamp, before and after delete records
    sent = records(6, "adm")
    producer = _producer(bootstrap)
    try:
        _send(producer, topic, 1, sent)
    finally:
        producer.close()
    tp = TopicPartition(topic, 1)
    found = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp]
    assert found.offset == 0
    assert admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset == 6
    by_time = admin.list_partition_offsets({tp: sent[3].timestamp - 1})[tp]
    assert (by_time.offset, by_time.timestamp) == (3, sent[3].timestamp)
    assert admin.list_partition_offsets({tp: sent[-1].timestamp + 1})[tp].offset == -1

    deleted = admin.delete_records({tp: 4})
    assert deleted[tp]["low_watermark"] == 4
    assert admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp].offset == 4
    consumer = _consumer(bootstrap)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = _read(consumer, 2)
        assert [o for o, _ in got[1]] == [4, 5]
        assert by_offset(got[1]) == sent[4:]
    finally:
        consumer.close()

    admin.delete_topics([topic, other])
    remaining = set(admin.list_topics())
    assert topic not in remaining and other not in remaining


@pytest.mark.parametrize("acks", ACKS)
def test_produce_every_codec_and_read_back_with_assign_and_seek(bootstrap: str, admin: KafkaAdminClient,
                                                                broker_data_dir: Path, acks: Any) -> None:
    topic = unique("kp-codecs")
    admin.create_topics({topic: {"num_partitions": len(CODECS), "replication_factor": 1}})
    expected: Dict[int, List[Sent]] = {}
    for partition, codec in enumerate(CODECS):
        producer = _producer(bootstrap, acks=acks, enable_idempotence=False,
                             compression_type=None if codec == "none" else codec)
        try:
            expected[partition] = records(5, "%s-%s" % (acks, codec))
            _send(producer, topic, partition, expected[partition])
        finally:
            producer.close()
    consumer = _consumer(bootstrap)
    try:
        partitions = [TopicPartition(topic, p) for p in expected]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        got = _read(consumer, 5 * len(CODECS))
        for partition, batch in expected.items():
            assert [o for o, _ in got[partition]] == list(range(5)), CODECS[partition]
            assert by_offset(got[partition]) == batch, CODECS[partition]
        # seek into the middle of a compressed batch: only the records from there on
        tp = TopicPartition(topic, CODECS.index("zstd"))
        consumer.assign([tp])
        consumer.seek(tp, 3)
        got = _read(consumer, 2)
        assert got[tp.partition] == [(3, expected[tp.partition][3]), (4, expected[tp.partition][4])]
    finally:
        consumer.close()
    for partition, codec in enumerate(CODECS):  # the client really compressed, with this codec
        stored = stored_batches(broker_data_dir, topic, partition)
        assert {b.codec for b in stored} == {codec} and sum(b.records_count for b in stored) == 5, stored


def test_default_idempotent_producer(bootstrap: str, admin: KafkaAdminClient, broker_data_dir: Path) -> None:
    topic = unique("kp-idempotent")
    admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}})
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        assert producer.config["enable_idempotence"] is True
        assert producer.config["acks"] == -1
        sent = {0: records(8, "idem0"), 1: records(4, "idem1")}
        futures = [producer.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                                 timestamp_ms=r.timestamp, partition=p)
                   for p, batch in sent.items() for r in batch]
        producer.flush(10)
        offsets = [f.get(10).offset for f in futures]
        assert offsets == list(range(8)) + list(range(4))
        manager = producer._transaction_manager
        assert manager is not None and manager.has_producer_id()  # InitProducerId answered
    finally:
        producer.close()
    consumer = _consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got = _read(consumer, 12)
        assert by_offset(got[0]) == sent[0] and by_offset(got[1]) == sent[1]
    finally:
        consumer.close()
    stored = stored_batches(broker_data_dir, topic, 0) + stored_batches(broker_data_dir, topic, 1)
    assert len({b.producer_id for b in stored}) == 1 and stored[0].producer_id >= 0, stored


def test_group_consume_commit_resume_and_group_admin(bootstrap: str, admin: KafkaAdminClient) -> None:
    topic, group = unique("kp-group"), unique("kp-group")
    admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}})
    sent = {0: records(6, "g0"), 1: records(4, "g1")}
    producer = _producer(bootstrap)
    try:
        for p, batch in sent.items():
            _send(producer, topic, p, batch)
    finally:
        producer.close()

    first = _consumer(bootstrap, group_id=group)
    try:
        _subscribe(first, topic, 2)
        got = _read(first, 10)
        assert {p: by_offset(items) for p, items in got.items()} == sent
        assert first.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
        # commit part of what was read: a new member must resume there
        first.commit({TopicPartition(topic, 0): OffsetAndMetadata(4, "meta-0", -1),
                      TopicPartition(topic, 1): OffsetAndMetadata(1, "", -1)})
        assert first.committed(TopicPartition(topic, 0)) == 4

        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["protocol_type"] == "consumer"
        description = admin.describe_groups([group])[group]
        assert description["group_state"] == "Stable"
        assert description["protocol_type"] == "consumer"
        [member] = description["members"]
        assigned = member["member_assignment"]["assigned_partitions"]
        assert {(t["topic"], p) for t in assigned for p in t["partitions"]} == {(topic, 0), (topic, 1)}
    finally:
        first.close(autocommit=False)

    committed = admin.list_group_offsets({group: None})[group]
    assert committed[TopicPartition(topic, 0)].offset == 4
    assert committed[TopicPartition(topic, 1)].offset == 1

    second = _consumer(bootstrap, group_id=group)
    try:
        _subscribe(second, topic, 2)
        got = _read(second, 2 + 3)
        assert [o for o, _ in got[0]] == [4, 5] and by_offset(got[0]) == sent[0][4:]
        assert [o for o, _ in got[1]] == [1, 2, 3] and by_offset(got[1]) == sent[1][1:]
        second.commit()
    finally:
        second.close(autocommit=False)
    assert admin.describe_groups([group])[group]["group_state"] == "Empty"
    results = dict(admin.delete_groups([group]))
    assert results[group] is None or getattr(results[group], "errno", 0) == 0, results
    assert group not in {g["group_id"] for g in admin.list_groups()}


def test_consumer_offsets_lookup(bootstrap: str, admin: KafkaAdminClient) -> None:
    topic = unique("kp-offsets")
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    sent = records(5, "lo")
    producer = _producer(bootstrap)
    try:
        _send(producer, topic, 0, sent)
    finally:
        producer.close()
    tp = TopicPartition(topic, 0)
    consumer = _consumer(bootstrap)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 5}
        found = consumer.offsets_for_times({tp: sent[2].timestamp})[tp]
        assert (found.offset, found.timestamp) == (2, sent[2].timestamp)
        assert consumer.offsets_for_times({tp: sent[-1].timestamp + 1})[tp] is None
    finally:
        consumer.close()


def test_large_fetch_read_back(bootstrap: str, admin: KafkaAdminClient) -> None:
    """Batches far above the broker's sendfile threshold come back whole."""
    topic = unique("kp-large")
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    sent = [Sent(b"k%d" % i, bytes([i % 251]) * 1000 + b"%d" % i, (), BASE_TIMESTAMP + i) for i in range(400)]
    producer = _producer(bootstrap, batch_size=256 * 1024, linger_ms=50)
    try:
        _send(producer, topic, 0, sent)
    finally:
        producer.close()
    consumer = _consumer(bootstrap, isolation_level="read_committed")
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got = _read(consumer, len(sent))
        assert [o for o, _ in got[0]] == list(range(len(sent))) and by_offset(got[0]) == sent
    finally:
        consumer.close()
