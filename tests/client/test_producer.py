"""pylogq.client.producer: round trips through a real in-process broker, partitioning, retries."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Dict, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pylogq
from pylogq import records
from pylogq.client.producer import BatchResult, FutureRecordMetadata, Producer, ProducerBatch, RecordMetadata
from pylogq.cluster.broker.in_process import InProcessTransport
from pylogq.cluster.partitioner import murmur2, murmur2_many, partition_for_key
from pylogq.errors import (
    BufferExhaustedError,
    ConfigError,
    IllegalStateError,
    KafkaTimeoutError,
    MessageTooLargeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)


@pytest.fixture
def broker(tmp_path):
    with pylogq.Broker(str(tmp_path / "data"), group_initial_rebalance_delay_ms=0) as b:
        yield b


def read_all(broker, topic: str, partition: int) -> List[Any]:
    """Every record of topic-partition, in offset order."""
    out: List[Any] = []
    offset = 0
    while True:
        res = broker.fetch([(topic, partition, offset, 1 << 30)], max_wait_ms=0)[(topic, partition)]
        assert res.error_code == 0
        data = res.records.read()
        batch_records = [r for pos_batch in records.iter_batches(data) for r in _records_of(data, pos_batch)]
        if not batch_records:
            return out
        out.extend(batch_records)
        offset = batch_records[-1].offset + 1


def _records_of(data: bytes, info: Any) -> List[Any]:
    return list(records.RecordBatch(data, info.position))


def batch_headers(broker, topic: str, partition: int) -> List[Any]:
    res = broker.fetch([(topic, partition, 0, 1 << 30)], max_wait_ms=0)[(topic, partition)]
    data = res.records.read()
    return [records.RecordBatch(data, info.position) for info in records.iter_batches(data)]


def values_of(broker, topic: str, partitions: int) -> List[bytes]:
    return [r.value for p in range(partitions) for r in read_all(broker, topic, p)]


# -- configuration ---------------------------------------------------------------------


def test_unknown_config_is_named(broker):
    with pytest.raises(ConfigError, match="lingerms"):
        Producer(broker=broker, lingerms=5)


def test_bad_values_rejected(broker):
    with pytest.raises(ConfigError, match="acks"):
        Producer(broker=broker, acks=2)
    with pytest.raises(ConfigError, match="compression"):
        Producer(broker=broker, compression_type="brotli")
    with pytest.raises(ConfigError, match="batch_size"):
        Producer(broker=broker, batch_size=0)
    with pytest.raises(ConfigError, match="bootstrap_servers"):
        Producer(bootstrap_servers="localhost")  # no port


def test_idempotence_follows_kafka_python(broker):
    with Producer(broker=broker) as p:
        assert p._idempotent and p._acks == -1 and p._producer_id >= 0
    with Producer(broker=broker, acks=1) as p:  # a user's acks=1 quietly turns it off
        assert not p._idempotent and p._acks == 1
    with Producer(broker=broker, acks="all") as p:
        assert p._acks == -1 and p._idempotent
    with pytest.raises(ConfigError, match="acks=1"):
        Producer(broker=broker, acks=1, enable_idempotence=True)
    with Producer(broker=broker, enable_idempotence=False) as p:
        assert not p._idempotent and p._producer_id == -1


# -- round trips -----------------------------------------------------------------------


def test_round_trip_values_keys_headers_timestamps(broker):
    broker.create_topic("t", 1)
    sent = [(b"v%d" % i, b"k%d" % i if i % 3 else None, [("h", b"%d" % i)] if i % 2 else [], 1_600_000_000_000 + i)
            for i in range(50)]
    with Producer(broker=broker) as p:
        futures = [p.send("t", value=v, key=k, headers=h, timestamp_ms=ts) for v, k, h, ts in sent]
        p.flush()
        metas = [f.get(timeout=10) for f in futures]
    got = read_all(broker, "t", 0)
    assert [(r.value, r.key, r.headers, r.timestamp) for r in got] == [
        (v, k, list(h), ts) for v, k, h, ts in sent]
    assert [m.offset for m in metas] == list(range(50))
    m = metas[5]
    assert isinstance(m, RecordMetadata) and m.topic == "t" and m.partition == 0 and m.topic_partition == ("t", 0)
    assert m.timestamp == sent[5][3] and m.checksum is None and m.log_start_offset == 0
    assert (m.serialized_key_size, m.serialized_value_size, m.serialized_header_size) == (2, 2, 2)
    assert metas[0].serialized_key_size == -1 and metas[0].serialized_header_size == -1


def test_mixed_records_land_where_their_futures_say(broker):
    """Keyless, keyed, tombstones, headers and explicit partitions interleaved (send's fast and full paths)."""
    broker.create_topic("mix", 3)
    sent = []
    for i in range(3000):
        key = None if i % 4 == 0 else b"k%d" % (i % 7)
        value = None if key is not None and i % 11 == 0 else b"v%d" % i
        headers = [("h", b"%d" % i)] if i % 13 == 0 else None
        partition = i % 3 if i % 17 == 0 else None
        sent.append((key, value, headers, partition))
    with Producer(broker=broker, acks=1, batch_size=2048) as p:
        futures = [p.send("mix", value=v, key=k, headers=h, partition=part) for k, v, h, part in sent]
        p.flush()
        metas = [f.get(timeout=10) for f in futures]
    stored = {part: read_all(broker, "mix", part) for part in range(3)}
    assert sum(len(rs) for rs in stored.values()) == len(sent)
    for (key, value, headers, partition), meta in zip(sent, metas):
        record = stored[meta.partition][meta.offset]
        assert (record.key, record.value, record.headers) == (key, value, headers or [])
        if partition is not None:
            assert meta.partition == partition
        elif key is not None:
            assert meta.partition == partition_for_key(key, 3)
        assert meta.serialized_key_size == (-1 if key is None else len(key))
        assert meta.serialized_value_size == (-1 if value is None else len(value))


def test_tombstone_and_columns(broker):
    broker.create_topic("t", 1)
    with Producer(broker=broker) as p:
        p.send("t", key=b"gone").get(timeout=10)
        p.send("t", value=b"x" * 10, key=b"k").get(timeout=10)
    res = broker.fetch([("t", 0, 0, 1 << 20)], max_wait_ms=0)[("t", 0)]
    cols = records.decode_columns(res.records.read())
    assert cols.count == 2 and list(cols.offsets) == [0, 1] and list(cols.value_length) == [-1, 10]
    assert [(r.key, r.value) for r in read_all(broker, "t", 0)] == [(b"gone", None), (b"k", b"x" * 10)]


def test_record_without_key_or_value_and_bytes(broker):
    broker.create_topic("t", 1)
    with Producer(broker=broker) as p:
        # Kafka's producer (and librdkafka) send a record with neither: a mirror must copy one.
        assert p.send("t", partition=0, headers=[("h", b"1")]).get(timeout=10).offset == 0
        with pytest.raises(TypeError, match="str"):
            p.send("t", value="text")
        with pytest.raises(TypeError, match="headers"):
            p.send("t", value=b"v", headers=[("h", "not bytes")])
        with pytest.raises(MessageTooLargeError):
            p.send("t", value=b"x" * 2_000_000)
    assert [(r.key, r.value, r.headers) for r in read_all(broker, "t", 0)] == [(None, None, [("h", b"1")])]


def test_default_timestamp_is_now(broker):
    before = int(time.time() * 1000)
    with Producer(broker=broker) as p:
        meta = p.send("t", b"v").get(timeout=10)
    assert before <= meta.timestamp <= int(time.time() * 1000)
    assert read_all(broker, "t", 0)[0].timestamp == meta.timestamp


def test_serializers(broker):
    class Upper:
        def serialize(self, topic, headers, data):
            return ("%s:%s" % (topic, data)).upper().encode()

    with Producer(broker=broker, value_serializer=lambda v: json.dumps(v).encode(), key_serializer=Upper()) as p:
        p.send("s", value={"a": 1}, key="k").get(timeout=10)
        p.send("s", value=None, key="k2").get(timeout=10)  # a None value stays a tombstone
        with pytest.raises(TypeError):
            p.send("s", value={"b": object()})  # the serializer's error raises from send
    got = read_all(broker, "s", 0)
    assert [(r.key, r.value) for r in got] == [(b"S:K", b'{"a": 1}'), (b"S:K2", None)]


# -- partitioning ---------------------------------------------------------------------


def test_keyed_partition_is_kafkas(broker):
    broker.create_topic("k", 7)
    keys = [b"key-%d" % i for i in range(10_000)]
    with Producer(broker=broker, linger_ms=1000, acks=1) as p:
        futures = [p.send("k", value=b"v", key=k) for k in keys]
        p.flush()
        metas = [f.get(timeout=10) for f in futures]
    assert [m.partition for m in metas] == [partition_for_key(k, 7) for k in keys]
    for part in range(7):
        assert [r.key for r in read_all(broker, "k", part)] == [k for k in keys if partition_for_key(k, 7) == part]


def test_per_partition_order_and_explicit_partition(broker):
    broker.create_topic("o", 3)
    with Producer(broker=broker, batch_size=200) as p:
        for i in range(300):
            p.send("o", value=b"%d" % i, partition=i % 3)
        p.flush()
        with pytest.raises(ValueError, match="unknown partition"):
            p.send("o", b"v", partition=3)
    for part in range(3):
        assert [int(r.value) for r in read_all(broker, "o", part)] == list(range(part, 300, 3))


def test_custom_partitioner(broker):
    broker.create_topic("c", 4)
    seen = []

    def last(key, all_partitions, available):
        seen.append((key, list(all_partitions)))
        return all_partitions[-1]

    with Producer(broker=broker, partitioner=last) as p:
        assert p.send("c", b"v", key=b"k").get(timeout=10).partition == 3
    assert seen == [(b"k", [0, 1, 2, 3])]


def test_sticky_partitioner_fills_one_batch_then_moves(broker):
    broker.create_topic("s", 4)
    with Producer(broker=broker, batch_size=1000, linger_ms=60_000, acks=1) as p:
        futures = [p.send("s", b"x" * 90) for _ in range(200)]
        p.flush()
        parts = [f.get(timeout=10).partition for f in futures]
    runs: List[Tuple[int, int]] = []
    for part in parts:
        if runs and runs[-1][0] == part:
            runs[-1] = (part, runs[-1][1] + 1)
        else:
            runs.append((part, 1))
    assert len(runs) > 1 and all(count <= 10 for _, count in runs)  # ~9 records of 100 bytes per 1000-byte batch
    for (a, _), (b, _) in zip(runs, runs[1:]):
        assert a != b
    assert len(set(parts)) > 1


def test_unknown_topic_without_auto_create(tmp_path):
    with pylogq.Broker(str(tmp_path / "d"), auto_create_topics_enable=False) as b:
        with Producer(broker=b) as p:
            with pytest.raises(UnknownTopicOrPartitionError, match="nope"):
                p.send("nope", b"v")
    with pylogq.Broker(str(tmp_path / "e")) as b:
        with Producer(broker=b, allow_auto_create_topics=False) as p:
            with pytest.raises(UnknownTopicOrPartitionError):
                p.send("nope", b"v")


def test_partitions_for(broker):
    broker.create_topic("p", 5)
    with Producer(broker=broker) as p:
        assert p.partitions_for("p") == {0, 1, 2, 3, 4}
        assert "producer-metrics" in p.metrics()  # what it holds: tests/client/test_client_metrics.py


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=60))
def test_murmur2_many_matches_java_murmur2(keys):
    assert murmur2_many(keys).tolist() == [murmur2(k) for k in keys]


# -- futures and callbacks ------------------------------------------------------------


def test_callbacks_and_errbacks(broker):
    broker.create_topic("cb", 1)
    got: List[Any] = []
    with Producer(broker=broker, linger_ms=60_000) as p:
        f = p.send("cb", b"a")
        assert isinstance(f, FutureRecordMetadata) and not f.is_done
        f.add_callback(got.append)
        f.add_callback(lambda tag, m: got.append((tag, m.offset)), "extra")
        f.add_errback(lambda e: got.append(("unexpected", e)))
        f.add_callback(lambda m: 1 / 0)  # logged, does not stop the others
        f.add_callback(lambda m: got.append("after"))
        p.flush()
        assert f.succeeded() and not f.failed() and f.exception is None
        assert got[0] == f.value and got[1:] == [("extra", 0), "after"]
        late: List[Any] = []
        f.add_callback(late.append)  # already done: runs at once
        assert late == [f.value]
        with pytest.raises(ValueError):
            p.send("cb", b"v", partition=5)
    failing = FailingTransport(InProcessTransport(broker), fail_times=1_000_000,
                               error=MessageTooLargeError("refused"))
    errors: List[Any] = []
    with Producer(broker=failing, acks=1) as p:
        f = p.send("cb", b"b")
        f.add_errback(errors.append)
        f.add_callback(lambda m: errors.append("unexpected"))
        with pytest.raises(MessageTooLargeError):
            f.get(timeout=10)
        assert f.failed() and isinstance(f.exception, MessageTooLargeError) and f.value is None
        assert errors == [f.exception] and failing.calls == 1  # not retriable: one attempt


def test_get_times_out(broker):
    gate = threading.Event()
    blocked = BlockingTransport(InProcessTransport(broker), gate)
    p = Producer(broker=blocked, acks=1)
    try:
        f = p.send("g", b"v")
        with pytest.raises(KafkaTimeoutError):
            f.get(timeout=0.05)
        gate.set()
        assert f.get(timeout=10).offset == 0
    finally:
        gate.set()
        p.close()


# -- acks and compression ------------------------------------------------------------


@pytest.mark.parametrize("acks", [0, 1, "all", -1])
def test_acks(broker, acks):
    broker.create_topic("a", 1)
    with Producer(broker=broker, acks=acks) as p:
        metas = [p.send("a", b"%d" % i) for i in range(20)]
        p.flush()
        offsets = [f.get(timeout=10).offset for f in metas]
    assert offsets == ([-1] * 20 if acks == 0 else list(range(20)))
    assert [r.value for r in read_all(broker, "a", 0)] == [b"%d" % i for i in range(20)]


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_compression(broker, codec):
    broker.create_topic("z", 1)
    values = [b"value-%d-" % i * 20 for i in range(300)]
    with Producer(broker=broker, compression_type=codec, linger_ms=60_000) as p:
        for v in values:
            p.send("z", v)
        p.flush()
        result = p.send_batch("z", values)
    assert values_of(broker, "z", 1) == values * 2
    assert sum(r.record_count for r in result) == 300
    expected = records.codecs.codec_id(codec)
    assert {b.compression_type for b in batch_headers(broker, "z", 0)} == {expected}


# -- batching and memory -----------------------------------------------------------------


def test_linger_batches_records_together(broker):
    broker.create_topic("l", 1)
    with Producer(broker=broker, linger_ms=60_000, acks=1) as p:
        futures = [p.send("l", b"%d" % i) for i in range(100)]
        assert not any(f.is_done for f in futures)
        p.flush()
        assert all(f.succeeded() for f in futures)
    batches = batch_headers(broker, "l", 0)
    assert len(batches) == 1 and batches[0].records_count == 100


def test_batch_size_splits_batches(broker):
    broker.create_topic("b", 1)
    with Producer(broker=broker, linger_ms=60_000, batch_size=2000, acks=1) as p:
        for _ in range(100):
            p.send("b", b"x" * 100, partition=0)
        p.flush()
    batches = batch_headers(broker, "b", 0)
    assert len(batches) > 1 and all(b.size_in_bytes <= 2000 for b in batches)
    assert sum(b.records_count for b in batches) == 100


def test_buffer_memory_blocks_then_times_out(broker):
    gate = threading.Event()
    blocked = BlockingTransport(InProcessTransport(broker), gate)
    p = Producer(broker=blocked, acks=1, batch_size=1000, buffer_memory=3000, max_block_ms=100)
    try:
        futures = []
        with pytest.raises(BufferExhaustedError):
            for i in range(1000):
                futures.append(p.send("m", b"x" * 100, partition=0))
        assert 2 <= len(futures) < 100
        started = time.monotonic()
        with pytest.raises(BufferExhaustedError, match="max_block_ms=100"):
            p.send("m", b"x" * 100, partition=0)
        assert time.monotonic() - started >= 0.09
        gate.set()  # the broker answers: memory frees and send proceeds
        p.send("m", b"last", partition=0).get(timeout=10)
        assert all(f.succeeded() for f in futures)
    finally:
        gate.set()
        p.close()
    assert len(read_all(broker, "m", 0)) == len(futures) + 1


def test_batches_take_memory_as_they_fill(broker):
    """An open batch reserves 16 KiB and grows while memory is free: a large batch_size costs nothing per partition."""
    broker.create_topic("g", 20)
    with Producer(broker=broker, acks=1, linger_ms=60_000, batch_size=1 << 20, buffer_memory=400_000,
                  max_block_ms=0) as p:
        # 20 open batches of 16 KiB fit in 400 kB (20 of batch_size would not: max_block_ms=0 raises at once).
        futures = [p.send("g", b"x" * 100, partition=i) for i in range(20)]
        # One of them grows to 64 KiB, past its first reservation, and stays one batch.
        futures += [p.send("g", b"y" * 1000, partition=0) for _ in range(60)]
        p.flush()
        assert all(f.succeeded() for f in futures)
    assert [len(batch_headers(broker, "g", i)) for i in range(20)] == [1] * 20
    assert batch_headers(broker, "g", 0)[0].records_count == 61


def test_a_batch_that_cannot_grow_is_full(broker):
    """Without free memory to grow into, a batch is closed as full, and the next waits for memory."""
    broker.create_topic("f", 1)
    with Producer(broker=broker, acks=1, linger_ms=60_000, batch_size=1 << 20, buffer_memory=40_000) as p:
        futures = [p.send("f", b"x" * 1000, partition=0) for _ in range(100)]
        p.flush()
        assert all(f.succeeded() for f in futures)
    batches = batch_headers(broker, "f", 0)
    assert len(batches) > 1 and all(b.size_in_bytes <= 40_000 for b in batches)
    assert sum(b.records_count for b in batches) == 100


def test_a_batch_stays_within_max_request_size(broker):
    broker.create_topic("r", 1)
    with Producer(broker=broker, acks=1, linger_ms=60_000, batch_size=10 << 20, max_request_size=50_000) as p:
        for _ in range(200):
            p.send("r", b"x" * 1000)
        p.flush()
    batches = batch_headers(broker, "r", 0)
    assert len(batches) > 1 and all(b.size_in_bytes <= 50_000 for b in batches)
    assert sum(b.records_count for b in batches) == 200


def test_batch_done_callback(broker):
    """A batch's callback runs once, when its records are acknowledged (or at once, when they are)."""
    broker.create_topic("d", 1)
    with Producer(broker=broker, acks=1, linger_ms=60_000) as p:
        futures = [p.send("d", b"%d" % i) for i in range(10)]
        batch = futures[0].batch
        assert isinstance(batch, ProducerBatch) and all(f.batch is batch for f in futures)
        seen: List[Tuple[bool, Any, int]] = []
        batch.add_done_callback(lambda b: seen.append((b.done, b.error, b.count)))
        assert seen == []
        p.flush()
        assert seen == [(True, None, 10)]
        batch.add_done_callback(lambda b: seen.append((b.done, b.error, b.base_offset)))
        assert seen[1:] == [(True, None, 0)]


# -- threads -----------------------------------------------------------------------------


def test_eight_threads_share_a_producer(broker):
    broker.create_topic("mt", 3)
    per_thread = 2000
    with Producer(broker=broker, batch_size=4096) as p:
        def work(t: int) -> None:
            for i in range(per_thread):
                p.send("mt", value=b"%d:%d" % (t, i), key=b"%d" % t if t % 2 else None)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        p.flush()
    seen: Dict[int, List[int]] = {t: [] for t in range(8)}
    for part in range(3):
        for r in read_all(broker, "mt", part):
            t, i = map(int, r.value.split(b":"))
            seen[t].append(i)
    for t in range(8):
        assert sorted(seen[t]) == list(range(per_thread))
    # A keyed thread's records all land in one partition, in the order sent.
    for t in (1, 3, 5, 7):
        part = partition_for_key(b"%d" % t, 3)
        assert [int(r.value.split(b":")[1]) for r in read_all(broker, "mt", part)
                if r.value.startswith(b"%d:" % t)] == list(range(per_thread))


# -- retries and idempotence --------------------------------------------------------------


class FailingTransport(InProcessTransport):
    """Appends for real, then fails the call: the producer cannot tell the write happened."""

    def __init__(self, inner: InProcessTransport, fail_times: int, error: Exception,
                 before_append: bool = False) -> None:
        super().__init__(inner.broker)
        self.fail_times = fail_times
        self.error = error
        self.before_append = before_append
        self.calls = 0

    def produce(self, topic: str, partition: int, records: Any, acks: int) -> Any:
        self.calls += 1
        if self.fail_times > 0:
            self.fail_times -= 1
            if not self.before_append:
                super().produce(topic, partition, records, acks)
            raise self.error
        return super().produce(topic, partition, records, acks)


class BlockingTransport(InProcessTransport):
    """Holds every produce until ``gate`` is set."""

    def __init__(self, inner: InProcessTransport, gate: threading.Event) -> None:
        super().__init__(inner.broker)
        self.gate = gate

    def produce(self, topic: str, partition: int, records: Any, acks: int) -> Any:
        assert self.gate.wait(30)
        return super().produce(topic, partition, records, acks)


def test_idempotent_retry_writes_once(broker):
    broker.create_topic("i", 1)
    flaky = FailingTransport(InProcessTransport(broker), fail_times=3, error=RequestTimedOutError("lost reply"))
    with Producer(broker=flaky, retry_backoff_ms=1, linger_ms=60_000) as p:
        futures = [p.send("i", b"%d" % i) for i in range(10)]
        p.flush()
        first = [f.get(timeout=10).offset for f in futures]
        again = p.send("i", b"again")
        p.flush()
        more = [again.get(timeout=10).offset]
    assert first == list(range(10)) and more == [10]
    assert [r.value for r in read_all(broker, "i", 0)] == [b"%d" % i for i in range(10)] + [b"again"]
    assert flaky.calls == 5


def test_retry_without_idempotence_duplicates(broker):
    """The contrast that makes the idempotent test meaningful: a plain retry writes twice."""
    broker.create_topic("d", 1)
    flaky = FailingTransport(InProcessTransport(broker), fail_times=1, error=RequestTimedOutError("lost reply"))
    with Producer(broker=flaky, acks=1, retry_backoff_ms=1, linger_ms=60_000) as p:
        p.send("d", b"once")
        p.flush()
    assert [r.value for r in read_all(broker, "d", 0)] == [b"once", b"once"]


def test_retries_exhausted_and_order_kept(broker):
    broker.create_topic("r", 1)
    flaky = FailingTransport(InProcessTransport(broker), fail_times=2, error=RequestTimedOutError("busy"),
                             before_append=True)
    with Producer(broker=flaky, retries=1, acks=1, retry_backoff_ms=1, batch_size=100, linger_ms=60_000) as p:
        futures = [p.send("r", b"%d" % i + b"x" * 40, partition=0) for i in range(6)]
        p.flush()
        assert futures[0].failed() and isinstance(futures[0].exception, RequestTimedOutError)
        assert all(f.succeeded() for f in futures[2:])
    values = [r.value[:1] for r in read_all(broker, "r", 0)]
    assert values == sorted(values)  # the failed batch's successors kept their order


def test_delivery_timeout_expires_batches(broker):
    flaky = FailingTransport(InProcessTransport(broker), fail_times=1_000_000, error=RequestTimedOutError("down"),
                             before_append=True)
    with Producer(broker=flaky, retry_backoff_ms=5, delivery_timeout_ms=50, request_timeout_ms=10) as p:
        f = p.send("e", b"v")
        with pytest.raises((KafkaTimeoutError, RequestTimedOutError)):
            f.get(timeout=10)
    assert flaky.calls >= 2


# -- flush and close --------------------------------------------------------------------


def test_close_flushes_and_forbids_send(broker):
    broker.create_topic("f", 1)
    p = Producer(broker=broker, linger_ms=60_000)
    futures = [p.send("f", b"%d" % i) for i in range(10)]
    p.close()
    assert all(f.succeeded() for f in futures)
    with pytest.raises(IllegalStateError):
        p.send("f", b"late")
    with pytest.raises(IllegalStateError):
        p.send_batch("f", [b"late"])
    p.close()  # twice is fine
    assert len(read_all(broker, "f", 0)) == 10


def test_close_with_timeout_fails_what_is_stuck(broker):
    gate = threading.Event()
    blocked = BlockingTransport(InProcessTransport(broker), gate)
    p = Producer(broker=blocked, acks=1)
    try:
        f = p.send("s", b"v")
        with pytest.raises(KafkaTimeoutError):
            p.flush(timeout=0.05)
        p.close(timeout=0.05)
        assert f.failed() and isinstance(f.exception, IllegalStateError)
    finally:
        gate.set()


# -- bulk ----------------------------------------------------------------------------


def test_send_batch_keyless_round_trip(broker):
    broker.create_topic("bk", 3)
    values = [b"%06d" % i + b"y" * 94 for i in range(30_000)]
    with Producer(broker=broker, max_request_size=200_000) as p:
        results = p.send_batch("bk", values, timestamp_ms=1_700_000_000_000)
    assert all(isinstance(r, BatchResult) for r in results) and len(results) > 10
    assert sum(r.record_count for r in results) == 30_000
    got = {(part, rec.offset): rec for part in range(3) for rec in read_all(broker, "bk", part)}
    # Batches cover the values in input order, each on its (sticky) partition.
    i = 0
    for res in results:
        for j in range(res.record_count):
            rec = got[(res.partition, res.base_offset + j)]
            assert rec.value == values[i] and rec.timestamp == 1_700_000_000_000
            i += 1
    assert len({r.partition for r in results}) > 1  # the sticky partition moves per batch


def test_send_batch_keyed_groups_by_partition(broker):
    broker.create_topic("kb", 5)
    keys = [b"k%d" % i for i in range(5000)] + [None] * 10
    values = [b"v%d" % i for i in range(5010)]
    headers = [[("i", b"%d" % i)] for i in range(5010)]
    timestamps = list(range(1_000, 6_010))
    with Producer(broker=broker, acks=1) as p:
        p.send("kb", b"before", key=b"k1")  # queued behind nothing, ahead of the bulk records
        results = p.send_batch("kb", values, keys=keys, headers=headers, timestamp_ms=timestamps)
    assert sum(r.record_count for r in results) == 5010
    for part in range(5):
        recs = read_all(broker, "kb", part)
        expected = [i for i in range(5000) if partition_for_key(keys[i], 5) == part]
        keyed = [r for r in recs if r.key is not None and r.value != b"before"]
        assert [int(r.value[1:]) for r in keyed] == expected
        assert all(r.headers == [("i", r.value[1:])] and r.timestamp == 1000 + int(r.value[1:]) for r in keyed)
    nulls = [r for part in range(5) for r in read_all(broker, "kb", part) if r.key is None]
    assert len(nulls) == 10


def test_send_batch_explicit_partition_and_idempotent_sequences(broker):
    broker.create_topic("ep", 2)
    with Producer(broker=broker, max_request_size=50_000) as p:
        p.send("ep", b"a", partition=1)
        results = p.send_batch("ep", [b"x" * 100] * 2000, partition=1)
        p.send("ep", b"z", partition=1).get(timeout=10)
    assert {r.partition for r in results} == {1}
    sequences = [(b.base_sequence, b.records_count) for b in batch_headers(broker, "ep", 1)]
    expected = 0
    for base, count in sequences:
        assert base == expected
        expected += count
    assert expected == 2002
    assert [r.base_offset for r in results] == [1 + sum(x.record_count for x in results[:i]) for i in range(len(results))]


def test_send_batch_empty_and_mismatched(broker):
    with Producer(broker=broker) as p:
        assert p.send_batch("t", []) == []
        with pytest.raises(ValueError, match="keys"):
            p.send_batch("t", [b"a"], keys=[b"a", b"b"])
