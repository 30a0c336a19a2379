"""aiokafka 0.14 against pylogq-broker (subprocess) and the in-process fixture.

Each test body is a coroutine run on a fresh event loop. aiokafka's admin client has
no delete-groups call, so that one request goes as aiokafka's own DeleteGroupsRequest
through the admin client's connection.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.protocol.admin import DeleteGroupsRequest
from aiokafka.structs import OffsetAndMetadata

from ._support import CODECS, Sent, by_offset, consumer_settings, records, stored_batches, unique

ACKS = (0, 1, "all")
SOURCE_DYNAMIC_TOPIC, SOURCE_DEFAULT = 1, 5


def run(body: Callable[[AIOKafkaAdminClient], Awaitable[None]], bootstrap: str) -> None:
    """Run ``body(admin)`` with a started admin client on a new event loop."""

    async def main() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        await admin.start()
        try:
            await asyncio.wait_for(body(admin), 60)
        finally:
            await admin.close()

    asyncio.run(main())


async def _create(admin: AIOKafkaAdminClient, topic: str, partitions: int, **configs: str) -> None:
    response = await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or None)])
    assert [(t[0], t[1]) for t in response.topic_errors] == [(topic, 0)]


async def _produce(bootstrap: str, topic: str, batches: Dict[int, List[Sent]],
                   **config: Any) -> List[Optional[int]]:
    """Send each partition's records; -> the offsets the broker gave (None for acks=0)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=10000, **config)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                                       timestamp_ms=r.timestamp, partition=p)
                   for p, batch in batches.items() for r in batch]
        results = [await f for f in futures]
        return [None if r is None else r.offset for r in results]
    finally:
        await producer.stop()


def _consumer(bootstrap: str, **config: Any) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(**consumer_settings(bootstrap, **config))


def _as_sent(record: Any) -> Sent:
    assert record.timestamp_type == 0, "CreateTime expected"
    return Sent(record.key, record.value, tuple((k, v) for k, v in record.headers), record.timestamp)


async def _read(consumer: AIOKafkaConsumer, count: int, timeout: float = 15.0) -> Dict[int, List[Tuple[int, Sent]]]:
    """Fetch until ``count`` records arrived; -> {partition: [(offset, record)]}."""
    got: Dict[int, List[Tuple[int, Sent]]] = {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while sum(map(len, got.values())) < count:
        assert loop.time() < deadline, "timed out waiting for %d records, got %s" % (count, got)
        for tp, batch in (await consumer.getmany(timeout_ms=100)).items():
            got.setdefault(tp.partition, []).extend((r.offset, _as_sent(r)) for r in batch)
    assert sum(map(len, got.values())) == count, "more records than sent: %s" % got
    return got


async def _configs(admin: AIOKafkaAdminClient, topic: str) -> Dict[str, Tuple[str, int]]:
    """A topic's configs: -> {name: (value, config source)}."""
    [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    [resource] = response.resources
    assert resource[0] == 0, resource
    return {e[0]: (e[1], e[3]) for e in resource[4]}


def test_admin_topics_configs_offsets_and_delete(bootstrap: str) -> None:
    async def body(admin: AIOKafkaAdminClient) -> None:
        topic, other = unique("aio-admin"), unique("aio-admin")
        await _create(admin, topic, 3)
        await _create(admin, other, 1, **{"cleanup.policy": "compact"})
        assert {topic, other} <= set(await admin.list_topics())
        described = {t["topic"]: t for t in await admin.describe_topics([topic, other])}
        assert sorted(p["partition"] for p in described[topic]["partitions"]) == [0, 1, 2]

        configs = await _configs(admin, other)
        assert configs["cleanup.policy"] == ("compact", SOURCE_DYNAMIC_TOPIC)
        assert configs["retention.ms"] == ("604800000", SOURCE_DEFAULT)
        [altered] = await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "3600000"})])
        assert [r[0] for r in altered.resources] == [0]
        assert (await _configs(admin, topic))["retention.ms"] == ("3600000", SOURCE_DYNAMIC_TOPIC)

        sent = records(6, "aio-adm")
        await _produce(bootstrap, topic, {2: sent})
        tp = TopicPartition(topic, 2)
        consumer = _consumer(bootstrap)
        await consumer.start()
        try:
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: 6}
            found = (await consumer.offsets_for_times({tp: sent[3].timestamp - 1}))[tp]
            assert (found.offset, found.timestamp) == (3, sent[3].timestamp)
            assert (await consumer.offsets_for_times({tp: sent[-1].timestamp + 1}))[tp] is None

            assert await admin.delete_records({tp: RecordsToDelete(4)}) == {tp: 4}
            assert await consumer.beginning_offsets([tp]) == {tp: 4}
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = await _read(consumer, 2)
            assert [o for o, _ in got[2]] == [4, 5] and by_offset(got[2]) == sent[4:]
        finally:
            await consumer.stop()

        response = await admin.delete_topics([topic, other])
        assert sorted(e[1] for e in response.topic_error_codes) == [0, 0]
        remaining = set(await admin.list_topics())
        assert topic not in remaining and other not in remaining

    run(body, bootstrap)


@pytest.mark.parametrize("acks", ACKS)
def test_produce_every_codec_and_read_back_with_assign_and_seek(bootstrap: str, broker_data_dir: Path,
                                                                acks: Any) -> None:
    async def body(admin: AIOKafkaAdminClient) -> None:
        topic = unique("aio-codecs")
        await _create(admin, topic, len(CODECS))
        expected: Dict[int, List[Sent]] = {}
        for partition, codec in enumerate(CODECS):
            expected[partition] = records(5, "%s-%s" % (acks, codec))
            offsets = await _produce(bootstrap, topic, {partition: expected[partition]}, acks=acks,
                                     compression_type=None if codec == "none" else codec)
            assert offsets == ([None] * 5 if acks == 0 else list(range(5))), codec
        consumer = _consumer(bootstrap)
        await consumer.start()
        try:
            partitions = [TopicPartition(topic, p) for p in expected]
            consumer.assign(partitions)
            for tp in partitions:
                consumer.seek(tp, 0)
            got = await _read(consumer, 5 * len(CODECS))
            for partition, batch in expected.items():
                assert [o for o, _ in got[partition]] == list(range(5)), CODECS[partition]
                assert by_offset(got[partition]) == batch, CODECS[partition]
            tp = TopicPartition(topic, CODECS.index("lz4"))
            consumer.assign([tp])
            consumer.seek(tp, 2)
            got = await _read(consumer, 3)
            assert got[tp.partition] == [(i, expected[tp.partition][i]) for i in (2, 3, 4)]
        finally:
            await consumer.stop()
        for partition, codec in enumerate(CODECS):  # the client really compressed, with this codec
            stored = stored_batches(broker_data_dir, topic, partition)
            assert {b.codec for b in stored} == {codec} and sum(b.records_count for b in stored) == 5, stored

    run(body, bootstrap)


def test_idempotent_producer(bootstrap: str, broker_data_dir: Path) -> None:
    async def body(admin: AIOKafkaAdminClient) -> None:
        topic = unique("aio-idempotent")
        await _create(admin, topic, 1)
        sent = records(7, "aio-idem")
        offsets = await _produce(bootstrap, topic, {0: sent}, enable_idempotence=True, compression_type="zstd")
        assert offsets == list(range(7))
        consumer = _consumer(bootstrap)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            got = await _read(consumer, 7)
            assert by_offset(got[0]) == sent
        finally:
            await consumer.stop()
        stored = stored_batches(broker_data_dir, topic, 0)
        assert {b.codec for b in stored} == {"zstd"} and stored[0].producer_id >= 0, stored

    run(body, bootstrap)


def test_group_consume_commit_resume_and_group_admin(bootstrap: str) -> None:
    async def body(admin: AIOKafkaAdminClient) -> None:
        topic, group = unique("aio-group"), unique("aio-group")
        await _create(admin, topic, 2)
        sent = {0: records(5, "ag0"), 1: records(3, "ag1")}
        await _produce(bootstrap, topic, sent)

        first = _consumer(bootstrap, group_id=group)
        await first.start()
        try:
            first.subscribe([topic])
            got = await _read(first, 8)
            assert {p: by_offset(items) for p, items in got.items()} == sent
            assert first.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
            await first.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "m"),
                                TopicPartition(topic, 1): 2})
            assert await first.committed(TopicPartition(topic, 0)) == 3

            assert (group, "consumer") in await admin.list_consumer_groups()
            [response] = await admin.describe_consumer_groups([group])
            [described] = response.groups
            error, group_id, state, protocol_type, protocol, members = described[:6]
            assert (error, group_id, state, protocol_type, protocol) == (0, group, "Stable", "consumer", "roundrobin")
            assert len(members) == 1
        finally:
            await first.stop()

        offsets = await admin.list_consumer_group_offsets(group)
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {0: 3, 1: 2}

        second = _consumer(bootstrap, group_id=group)
        await second.start()
        try:
            second.subscribe([topic])
            got = await _read(second, 2 + 1)
            assert [o for o, _ in got[0]] == [3, 4] and by_offset(got[0]) == sent[0][3:]
            assert [o for o, _ in got[1]] == [2] and by_offset(got[1]) == sent[1][2:]
            await second.commit()
        finally:
            await second.stop()

        [response] = await admin.describe_consumer_groups([group])
        assert response.groups[0][2] == "Empty"
        coordinator = await admin.find_coordinator(group)
        deleted = await admin._client.send(coordinator, DeleteGroupsRequest([group]))
        assert [tuple(r[:2]) for r in deleted.results] == [(group, 0)]
        assert group not in {g for g, _ in await admin.list_consumer_groups()}

    run(body, bootstrap)
