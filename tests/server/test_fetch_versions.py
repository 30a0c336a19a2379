"""Fetch over every version Kafka 3.9 serves (0-17, flexible from 12, topic ids from 13).

Each version is sent raw to a served broker and its records decoded in the format that
version reads: v0-1 magic 0 messages, v2-3 magic 1 messages (both down-converted from
the log's v2 batches, or passed through when the log holds legacy sets), v4+ the log's
own entries. Offsets, keys, values and the timestamps the format carries must be what
was produced, for every codec, a compacted log with gaps, and a log written by old
producers. Topic ids (v13+) survive a restart and name nothing once their topic is deleted.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import pytest

import pylogq
from pylogq import errors
from pylogq.client.connection import BrokerConnection
from pylogq.protocol import SUPPORTED_VERSIONS, ApiKey
from pylogq.records import RecordBatch, build_batch, iter_batches
from pylogq.records.legacy import (LegacyRecordBatchBuilder, assign_offsets_legacy, iter_legacy_messages,
                                   iter_legacy_records)
from pylogq.server.handler_base import uuid_of
from pylogq.storage.cleaner import LogCleaner

TS = 1_700_000_000_000
VERSIONS = range(18)
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
UNSUPPORTED_COMPRESSION_TYPE = 76
UNKNOWN_TOPIC_ID = 100


class Got(NamedTuple):
    """A record as a fetch at some version returned it (timestamp -1 where the format has none)."""

    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    timestamp: int


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[pylogq.Broker, BrokerConnection]]:
    with pylogq.Broker(str(tmp_path / "data")) as broker:
        host, port = broker.serve()
        conn = BrokerConnection(host, port, "fetch-versions-test", 10.0)
        try:
            yield broker, conn
        finally:
            conn.close()


def fetch_request(version: int, topics: Sequence[Tuple[Any, Sequence[Tuple[int, int, int]]]],
                  max_bytes: int = 1 << 20, max_wait_ms: int = 0, min_bytes: int = 0,
                  replica_id: int = -1) -> Dict[str, Any]:
    """A Fetch body: ``topics`` are (name or id, [(partition, offset, partition max bytes)])."""
    return {
        "replica_id": replica_id, "replica_state": {"replica_id": replica_id, "replica_epoch": -1},
        "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": key if isinstance(key, str) else "",
                    "topic_id": key if isinstance(key, uuid.UUID) else uuid.UUID(int=0),
                    "partitions": [{"partition": p, "fetch_offset": o, "partition_max_bytes": m}
                                   for p, o, m in partitions]}
                   for key, partitions in topics],
        "forgotten_topics_data": [], "rack_id": "",
    }


def fetch_one(conn: BrokerConnection, version: int, key: Any, offset: int = 0, partition_max: int = 1 << 20,
              partition: int = 0) -> Dict[str, Any]:
    """Fetch one partition at ``version``; -> its partition response (topic checked)."""
    response = conn.request(ApiKey.FETCH, fetch_request(version, [(key, [(partition, offset, partition_max)])]),
                            version=version)
    [topic] = response["responses"]
    if version >= 13:
        assert topic["topic_id"] == key
    else:
        assert topic["topic"] == key
    [part] = topic["partitions"]
    assert part["partition_index"] == partition
    return part


def decode(version: int, records: Optional[bytes]) -> List[Got]:
    """The records of a fetch response in the format ``version`` reads (checking that format)."""
    data = records or b""
    if version >= 4:
        out = []
        for header in iter_batches(data):
            entry = data[header.position:header.position + header.size]
            if header.magic < 2:
                out += [Got(r.offset, r.key, r.value, r.timestamp) for r in iter_legacy_records(entry)]
            else:
                out += [Got(r.offset, r.key, r.value, r.timestamp) for r in RecordBatch(entry)]
        return out
    magic = 0 if version <= 1 else 1
    messages = list(iter_legacy_messages(data, True, False))  # whole messages only, CRCs checked
    # Converted entries have the version's magic; older ones in the log pass through.
    assert all(m.magic <= magic for m in messages), [m.magic for m in messages]
    out = []
    for m in messages:
        for r in m.records():
            assert r.magic == m.magic
            out.append(Got(r.offset, r.key, r.value, r.timestamp))
    return out


def fetch_all(conn: BrokerConnection, version: int, key: Any, end: int, partition_max: int = 1 << 20,
              start: int = 0) -> List[Got]:
    """Every record from ``start`` up to ``end``, fetching on from after the last one returned
    (a compressed legacy wrapper may hold records below the fetch offset: skipped, as clients do)."""
    out: List[Got] = []
    offset = start
    while offset < end:
        part = fetch_one(conn, version, key, offset, partition_max)
        assert part["error_code"] == 0, part
        got = [g for g in decode(version, part["records"]) if g.offset >= offset]
        assert got, "no progress at offset %d" % offset
        out += got
        offset = got[-1].offset + 1
    return out


def expected(records: Sequence[Got], version: int) -> List[Got]:
    """What a version's format carries of ``records``: magic 0 has no timestamps."""
    if version <= 1:
        return [g._replace(timestamp=-1) for g in records]
    return list(records)


def produce_batches(broker: pylogq.Broker, topic: str, codec: str, batches: int = 3, per_batch: int = 4,
                    start: int = 0) -> List[Got]:
    """v2 batches of ``codec`` with keys (one null), values, headers and distinct timestamps."""
    sent: List[Got] = []
    offset = start
    for b in range(batches):
        keys = [None if offset + i == 0 else b"key-%d" % (offset + i) for i in range(per_batch)]
        values = [b"value-%d-" % (offset + i) + b"x" * (offset + i) for i in range(per_batch)]
        stamps = [TS + (offset + i) * 1000 for i in range(per_batch)]
        headers = [[("h", b"%d" % i)] for i in range(per_batch)]
        broker.produce(topic, 0, bytes(build_batch(values, keys=keys, timestamps=stamps, headers=headers,
                                                   compression_type=codec)))
        sent += [Got(offset + i, keys[i], values[i], stamps[i]) for i in range(per_batch)]
        offset += per_batch
    return sent


def test_every_kafka_version_is_served() -> None:
    assert SUPPORTED_VERSIONS[ApiKey.FETCH] == (0, 17)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("version", VERSIONS)
def test_each_version_returns_the_records(served: Tuple[pylogq.Broker, BrokerConnection], version: int,
                                          codec: str) -> None:
    broker, conn = served
    broker.create_topic("t")
    sent = produce_batches(broker, "t", codec)
    key: Any = uuid_of(broker.topic_id("t")) if version >= 13 else "t"
    if codec == "zstd" and version < 4:
        part = fetch_one(conn, version, key)
        assert part["error_code"] == UNSUPPORTED_COMPRESSION_TYPE
        assert not part["records"]
        return
    assert fetch_all(conn, version, key, len(sent)) == expected(sent, version)
    if version < 4:  # every entry converted to the version's own magic
        records = fetch_one(conn, version, key)["records"]
        assert {m.magic for m in iter_legacy_messages(records)} == {0 if version <= 1 else 1}
    part = fetch_one(conn, version, key, len(sent))  # at the end: nothing, no error
    assert part["error_code"] == 0 and part["high_watermark"] == len(sent) and not part["records"]
    if version >= 5:
        assert part["log_start_offset"] == 0


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_old_versions_read_a_log_of_mixed_codecs_up_to_a_zstd_batch(
        served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    broker.create_topic("t")
    sent: List[Got] = []
    for codec in ("none", "gzip", "snappy", "lz4"):
        sent += produce_batches(broker, "t", codec, batches=1, start=len(sent))
    produce_batches(broker, "t", "zstd", batches=1, start=len(sent))
    # Everything before the zstd batch comes back; the zstd batch itself is refused.
    assert fetch_all(conn, version, "t", len(sent)) == expected(sent, version)
    assert fetch_one(conn, version, "t", len(sent))["error_code"] == UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize("version", [0, 2, 3])
def test_a_fetch_into_an_uncompressed_batch_starts_at_its_offset(
        served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    broker.create_topic("t")
    sent = produce_batches(broker, "t", "none", batches=1, per_batch=6)
    part = fetch_one(conn, version, "t", 4)
    assert decode(version, part["records"]) == expected(sent[4:], version)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_old_versions_get_at_most_the_partition_max_bytes(
        served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    broker.create_topic("t")
    sent = produce_batches(broker, "t", "none", batches=4, per_batch=25)
    limit = 600
    offset = 0
    got: List[Got] = []
    while offset < len(sent):
        part = fetch_one(conn, version, "t", offset, limit)
        records = part["records"]
        batch = decode(version, records)
        assert batch and (len(records) <= limit or len(batch) == 1)
        got += batch
        offset = batch[-1].offset + 1
    assert got == expected(sent, version)
    # A first message larger than the limit still comes back, alone.
    part = fetch_one(conn, version, "t", 0, 10)
    assert decode(version, part["records"]) == expected(sent[:1], version)


def test_v3_response_max_bytes_bounds_the_converted_records(
        served: Tuple[pylogq.Broker, BrokerConnection]) -> None:
    broker, conn = served
    broker.create_topic("t", partitions=2)
    for partition in (0, 1):
        broker.produce("t", partition, bytes(build_batch([b"v" * 100] * 20, keys=[b"k"] * 20, timestamps=TS)))
    request = fetch_request(3, [("t", [(0, 0, 1 << 20), (1, 0, 1 << 20)])], max_bytes=1000)
    response = conn.request(ApiKey.FETCH, request, version=3)
    [topic] = response["responses"]
    sizes = [len(p["records"] or b"") for p in topic["partitions"]]
    assert 0 < sizes[0] <= 1000 and sum(sizes) <= 1000
    assert "throttle_time_ms" in response


@pytest.mark.parametrize("version", VERSIONS)
def test_a_compacted_log_keeps_its_gaps(served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    broker.create_topic("c", config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    for b, codec in enumerate(("none", "gzip", "lz4", "snappy")):
        # Even records have keys of their own; odd ones share keys the next batch overwrites.
        keys = [b"own-%d-%d" % (b, i) if i % 2 == 0 else b"shared-%d" % i for i in range(6)]
        broker.produce("c", 0, bytes(build_batch([b"%s-%d" % (codec.encode(), i) for i in range(6)], keys=keys,
                                                 timestamps=TS, compression_type=codec)))
    log = broker.partition("c", 0).log
    log.roll()
    broker.produce("c", 0, bytes(build_batch([b"active"], keys=[b"own-0-0"], timestamps=TS + 1)))
    LogCleaner(broker.logs).clean_log(log)
    end = broker.list_offsets("c", 0, -1)[0]
    truth = fetch_all(conn, 11, "c", end)
    offsets = [g.offset for g in truth]
    assert offsets != list(range(offsets[0], offsets[-1] + 1)), "compaction left no gap"
    key: Any = uuid_of(broker.topic_id("c")) if version >= 13 else "c"
    assert fetch_all(conn, version, key, end) == expected(truth, version)


def _produce_raw(conn: BrokerConnection, produce_version: int, topic: str, records: bytes) -> None:
    response = conn.request(ApiKey.PRODUCE, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]},
        version=produce_version)
    assert response["responses"][0]["partition_responses"][0]["error_code"] == 0


def _legacy(magic: int, codec: str, start: int, count: int) -> Tuple[bytes, List[Got]]:
    builder = LegacyRecordBatchBuilder(magic, codec)
    sent = []
    for i in range(count):
        value = b"legacy-%d-%d" % (magic, start + i)
        key = b"lk-%d" % (start + i)
        builder.append(i, TS + start + i, key, value)
        sent.append(Got(start + i, key, value, TS + start + i if magic else -1))
    return bytes(builder.build()), sent


@pytest.mark.parametrize("version", VERSIONS)
def test_a_log_of_legacy_message_sets(served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    """Sets produced at Produce v0 (magic 0) and v2 (magic 1), plain and compressed, then v2 batches."""
    broker, conn = served
    broker.create_topic("old")
    sent: List[Got] = []
    for produce_version, magic, codec in ((0, 0, "none"), (0, 0, "gzip"), (1, 0, "lz4"), (2, 1, "none"),
                                          (2, 1, "snappy"), (2, 1, "lz4")):
        data, records = _legacy(magic, codec, len(sent), 3)
        _produce_raw(conn, produce_version, "old", data)
        sent += records
    sent += produce_batches(broker, "old", "gzip", batches=1, start=len(sent))
    key: Any = uuid_of(broker.topic_id("old")) if version >= 13 else "old"
    # Magic 0 sets carry no timestamp (-1 in ``sent``), whatever version reads them.
    assert fetch_all(conn, version, key, len(sent)) == expected(sent, version)


def test_magic_1_sets_pass_through_unchanged_to_v2_and_v3(served: Tuple[pylogq.Broker, BrokerConnection]) -> None:
    """A magic 1 set an old segment holds (appends are up-converted to v2) is served as it lies."""
    broker, conn = served
    broker.create_topic("old")
    data, _ = _legacy(1, "gzip", 0, 5)
    log = broker.logs.get_log("old", 0)
    assert log is not None
    log.append_as_follower(assign_offsets_legacy(data, 0)[0])
    stored = broker.fetch([("old", 0, 0, 1 << 20)], max_wait_ms=0)[("old", 0)].records
    assert stored is not None
    for version in (2, 3):
        assert fetch_one(conn, version, "old")["records"] == stored.read()


@pytest.mark.parametrize("version", [2, 3])
def test_log_append_time_reaches_magic_1(tmp_path: Path, version: int) -> None:
    with pylogq.Broker(str(tmp_path / "data")) as broker:
        host, port = broker.serve()
        broker.create_topic("lat", config={"message.timestamp.type": "LogAppendTime"})
        before = int(time.time() * 1000)
        for codec in ("none", "gzip"):
            broker.produce("lat", 0, bytes(build_batch([b"a", b"b"], keys=[b"k", b"k"], timestamps=1,
                                                       compression_type=codec)))
        conn = BrokerConnection(host, port, "fetch-versions-test", 10.0)
        try:
            part = fetch_one(conn, version, "lat")
        finally:
            conn.close()
    records = [r for m in iter_legacy_messages(part["records"], True, False) for r in m.records()]
    assert [r.offset for r in records] == [0, 1, 2, 3]
    assert all(r.timestamp_type == 1 and r.timestamp >= before for r in records)


@pytest.mark.parametrize("version", [0, 3, 4, 12, 17])
def test_a_long_poll_is_answered_when_records_arrive(served: Tuple[pylogq.Broker, BrokerConnection],
                                                     version: int) -> None:
    broker, conn = served
    broker.create_topic("t")
    key: Any = uuid_of(broker.topic_id("t")) if version >= 13 else "t"
    request = fetch_request(version, [(key, [(0, 0, 1 << 20)])], max_wait_ms=30000, min_bytes=1)
    future = conn.send(ApiKey.FETCH, request, version)
    sent = produce_batches(broker, "t", "gzip", batches=1)
    response = conn.wait(future, ApiKey.FETCH, 20.0)
    [part] = response["responses"][0]["partitions"]
    assert decode(version, part["records"]) == expected(sent, version)


# -- topic ids (v13+) ---------------------------------------------------------------------


@pytest.mark.parametrize("version", range(13, 18))
def test_an_unknown_or_zero_topic_id_answers_unknown_topic_id(
        served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    broker.create_topic("t")
    sent = produce_batches(broker, "t", "none", batches=1)
    known = uuid_of(broker.topic_id("t"))
    for unknown in (uuid.uuid4(), uuid.UUID(int=0)):
        request = fetch_request(version, [(unknown, [(0, 0, 1 << 20), (1, 0, 1 << 20)]), (known, [(0, 0, 1 << 20)])])
        response = conn.request(ApiKey.FETCH, request, version=version)
        bad, good = response["responses"]
        assert bad["topic_id"] == unknown and good["topic_id"] == known
        assert [p["error_code"] for p in bad["partitions"]] == [UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_ID]
        assert [p["partition_index"] for p in bad["partitions"]] == [0, 1]
        assert all(p["high_watermark"] == -1 and not p["records"] for p in bad["partitions"])
        [part] = good["partitions"]
        assert part["error_code"] == 0 and decode(version, part["records"]) == sent


def test_fetch_by_id_after_a_restart_and_a_recreated_topic(tmp_path: Path) -> None:
    """Fetch by topic ID after a restart (close the broker, open a new one on the same data dir)
    returns the same records as by name; a deleted and re-created topic gets a new ID and a
    Fetch with the old ID answers UNKNOWN_TOPIC_ID."""
    data_dir = str(tmp_path / "data")
    with pylogq.Broker(data_dir) as broker:
        broker.create_topic("t")
        sent = produce_batches(broker, "t", "lz4", batches=2)
        old_id = broker.topic_id("t")
    with pylogq.Broker(data_dir) as broker:
        host, port = broker.serve()
        assert broker.topic_id("t") == old_id
        conn = BrokerConnection(host, port, "fetch-versions-test", 10.0)
        try:
            by_name = fetch_one(conn, 12, "t")
            for version in range(13, 18):
                by_id = fetch_one(conn, version, uuid_of(old_id))
                assert by_id["error_code"] == 0
                assert by_id["records"] == by_name["records"]
                assert decode(version, by_id["records"]) == sent
            broker.delete_topic("t")
            broker.create_topic("t")
            new_id = broker.topic_id("t")
            assert new_id != old_id
            fresh = produce_batches(broker, "t", "none", batches=1)
            for version in range(13, 18):
                assert fetch_one(conn, version, uuid_of(old_id))["error_code"] == UNKNOWN_TOPIC_ID
                part = fetch_one(conn, version, uuid_of(new_id))
                assert part["error_code"] == 0 and decode(version, part["records"]) == fresh
        finally:
            conn.close()


# -- follower fetches -------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 4, 11, 14, 15, 17])
def test_a_follower_fetch_closes_the_connection(served: Tuple[pylogq.Broker, BrokerConnection],
                                                version: int) -> None:
    broker, conn = served
    broker.create_topic("t")
    key: Any = uuid_of(broker.topic_id("t")) if version >= 13 else "t"
    with pytest.raises(errors.KafkaConnectionError):
        conn.request(ApiKey.FETCH, fetch_request(version, [(key, [(0, 0, 1024)])], replica_id=1), version=version)


@pytest.mark.parametrize("version", [15, 17])
def test_from_v15_only_the_replica_state_names_a_follower(served: Tuple[pylogq.Broker, BrokerConnection],
                                                          version: int) -> None:
    """ReplicaId left v15's request: a consumer's body sets no ReplicaState, so it is a consumer."""
    broker, conn = served
    broker.create_topic("t")
    sent = produce_batches(broker, "t", "none", batches=1)
    request = fetch_request(version, [(uuid_of(broker.topic_id("t")), [(0, 0, 1 << 20)])])
    del request["replica_state"]
    response = conn.request(ApiKey.FETCH, request, version=version)
    assert decode(version, response["responses"][0]["partitions"][0]["records"]) == sent


# -- kafka-python with old protocol versions -----------------------------------------------


@pytest.mark.parametrize("api_version", [(0, 10, 1), (0, 9)])
def test_kafka_python_consumes_down_converted_records(tmp_path: Path, api_version: Tuple[int, ...]) -> None:
    """kafka-python pinned to 0.10.1 (Fetch v3, magic 1) and 0.9 (Fetch v1, magic 0) reads
    what a modern producer wrote (v2 batches, compressed and not)."""
    kafka = pytest.importorskip("kafka")
    with pylogq.Broker(str(tmp_path / "data")) as broker:
        host, port = broker.serve()
        broker.create_topic("kp")
        sent: List[Got] = []
        for codec in ("none", "gzip", "snappy", "lz4", "none"):
            sent += produce_batches(broker, "kp", codec, batches=2, per_batch=5, start=len(sent))
        consumer = kafka.KafkaConsumer(bootstrap_servers="%s:%d" % (host, port), api_version=api_version,
                                       enable_auto_commit=False, auto_offset_reset="earliest",
                                       request_timeout_ms=10000, fetch_max_wait_ms=100,
                                       max_partition_fetch_bytes=300)
        try:
            tp = kafka.TopicPartition("kp", 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            got: List[Got] = []
            deadline = time.monotonic() + 30
            while len(got) < len(sent) and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=500).values():
                    got += [Got(r.offset, r.key, r.value, -1 if r.timestamp is None else r.timestamp)
                            for r in batch]
        finally:
            consumer.close()
    assert got == expected(sent, 0 if api_version < (0, 10) else 2)


@pytest.mark.parametrize("version", [9, 12, 13, 17])
def test_a_newer_leader_epoch_is_answered_at_once(served: Tuple[pylogq.Broker, BrokerConnection],
                                                  version: int) -> None:
    """KIP-320: a partition asked for with a leader epoch past the leader's (0) answers
    UNKNOWN_LEADER_EPOCH at once, even in a long poll; -1 and 0 read as usual."""
    broker, conn = served
    broker.create_topic("t", 3)
    sent = produce_batches(broker, "t", "none", batches=1)
    key: Any = uuid_of(broker.topic_id("t")) if version >= 13 else "t"
    request = fetch_request(version, [(key, [(0, 0, 1 << 20), (1, 0, 1 << 20), (2, 0, 1 << 20)])],
                            max_wait_ms=60000, min_bytes=1 << 30)
    for p, epoch in zip(request["topics"][0]["partitions"], (-1, 0, 1)):
        p["current_leader_epoch"] = epoch
    [topic] = conn.request(ApiKey.FETCH, request, version=version)["responses"]
    unfenced, current, newer = topic["partitions"]
    assert unfenced["error_code"] == current["error_code"] == 0
    assert decode(version, unfenced["records"]) == sent
    assert newer["error_code"] == errors.UnknownLeaderEpochError.code
