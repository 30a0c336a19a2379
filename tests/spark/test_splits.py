"""Split planning and the segment-file reader, without Spark: rows equal a Consumer's, splits tile the range."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from pylogq import Broker, Consumer, records  # noqa: E402
from pylogq.client.consumer import TopicPartition  # noqa: E402
from pylogq.errors import OffsetOutOfRangeError, PylogqError, UnknownTopicOrPartitionError  # noqa: E402
from pylogq.records.legacy import LegacyRecordBatchBuilder, assign_offsets_legacy  # noqa: E402
from pylogq.storage.index_file import read_offset_index  # noqa: E402
from pylogq.spark import splits as sp  # noqa: E402
from pylogq.spark.splits import (  # noqa: E402
    ARROW_SCHEMA,
    DEFAULT_MAX_SPLIT_BYTES,
    SPARK_SCHEMA_DDL,
    DataLossError,
    DataLossWarning,
    Split,
    pack_splits,
    partition_bounds,
    plan_splits,
    read_split,
)
from pylogq.storage.cleaner import LogCleaner  # noqa: E402

TS = 1_700_000_000_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SMALL_SEGMENTS = {"segment.bytes": "4096", "index.interval.bytes": "256", "file.delete.delay.ms": "0"}

Row = Tuple[int, Optional[bytes], Optional[bytes], int, int, Optional[List[Tuple[str, Optional[bytes]]]]]


# -- building logs ---------------------------------------------------------------------------------


def _v2(i: int, n: int, codec: str, timestamp_type: int = 0) -> bytes:
    values = [None if j % 11 == 10 else b"value %d.%d " % (i, j) + b"x" * (j % 40) for j in range(n)]
    keys = [None if j % 7 == 3 else b"key-%d" % (j % 13) for j in range(n)]
    headers = [[("h%d" % j, b"hv"), ("empty", None)] if j % 5 == 0 else [] for j in range(n)]
    timestamps = [TS + i * 100 + j for j in range(n)]
    return bytes(records.build_batch(values, keys=keys, headers=headers, timestamps=timestamps,
                                     compression_type=codec, timestamp_type=timestamp_type))


def _legacy(magic: int, n: int, codec: str) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec)
    for j in range(n):
        builder.append(j, TS + j, None if j == 1 else b"lk%d" % j, b"legacy v%d %d" % (magic, j))
    return bytes(builder.build())


def _control_marker(base_offset: int) -> bytes:
    builder = records.RecordBatchBuilder(is_control=True, is_transactional=True, producer_id=5, producer_epoch=0)
    builder.append(0, TS, struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x00\x00")
    data = builder.build()
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def _fill_mixed(broker: Broker, topic: str, partitions: int, rounds: int) -> None:
    """Batches of every codec, legacy v0/v1 sets, and a transaction marker in partition 0."""
    for i in range(rounds):
        for p in range(partitions):
            broker.produce(topic, p, _v2(i, 5 + (i * 7 + p) % 30, CODECS[(i + p) % len(CODECS)]))
            if i % 4 == 1:  # as an old segment holds them (appends are up-converted to v2)
                log = broker.logs.get_log(topic, p)
                assert log is not None
                stored, _ = assign_offsets_legacy(_legacy((i // 4) % 2, 3, CODECS[i % 3]), log.log_end_offset)
                log.append_as_follower(stored)
        if i == rounds // 2:
            log = broker.logs.get_log(topic, 0)
            assert log is not None
            log.append_as_follower(_control_marker(log.log_end_offset))


def _expected(broker: Broker, topic: str, partition: int) -> List[Row]:
    """What a pylogq Consumer reads of the partition, as read_split's row tuples."""
    consumer = Consumer(broker=broker, enable_auto_commit=False)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    rows: List[Row] = []
    deadline = time.monotonic() + 30
    while consumer.position(tp) < end:
        assert time.monotonic() < deadline, "consumer stuck at %d of %d" % (consumer.position(tp), end)
        for batch in consumer.poll(timeout_ms=500, max_records=100000).values():
            for r in batch:
                headers = [(k, v) for k, v in r.headers] if r.headers else None
                rows.append((r.offset, r.key, r.value, r.timestamp, r.timestamp_type, headers))
    consumer.close(autocommit=False)
    return rows


def _rows(batches: Iterator[Any]) -> List[Row]:
    out: List[Row] = []
    for rb in batches:
        assert rb.schema.equals(ARROW_SCHEMA)
        d = rb.to_pydict()
        micros = rb.column("timestamp").cast(pa.int64()).to_pylist()
        for i in range(rb.num_rows):
            headers = d["headers"][i]
            out.append((d["offset"][i], d["key"][i], d["value"][i], micros[i] // 1000, d["timestampType"][i],
                        None if headers is None else [(h["key"], h["value"]) for h in headers]))
    return out


def _read_all(splits: List[Split], **kwargs: Any) -> Dict[int, List[Row]]:
    out: Dict[int, List[Row]] = {}
    for s in splits:
        out.setdefault(s.partition, []).extend(_rows(read_split(s, **kwargs)))
    return out


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[str, Dict[str, Dict[int, List[Row]]]]]:
    """A closed broker's data dir: ``mixed`` (3 partitions), ``appendtime`` and ``compacted`` (cleaned)."""
    data_dir = str(tmp_path_factory.mktemp("splits"))
    broker = Broker(data_dir, log_cleaner_enable=False)
    broker.create_topic("mixed", 3, config=SMALL_SEGMENTS)
    _fill_mixed(broker, "mixed", 3, 40)
    broker.create_topic("appendtime", 1, config={"message.timestamp.type": "LogAppendTime"})
    for i in range(3):
        broker.produce("appendtime", 0, _v2(i, 10, "lz4"))
    broker.create_topic("compacted", 1, config={"cleanup.policy": "compact", "segment.bytes": "2048",
                                                "index.interval.bytes": "128", "min.cleanable.dirty.ratio": "0.01"})
    for i in range(30):
        keys = [b"k%d" % ((i * 3 + j) % 9) for j in range(6)]
        values = [None if (i + j) % 10 == 0 else b"round %d" % i for j in range(6)]
        broker.produce("compacted", 0, bytes(records.build_batch(values, keys=keys, timestamps=TS + i,
                                                                 compression_type=CODECS[i % 5])))
    log = broker.logs.get_log("compacted", 0)
    assert log is not None
    log.roll()
    LogCleaner(broker.logs).clean_log(log)
    expected = {t: {p: _expected(broker, t, p) for p in range(broker.partitions_for(t))}
                for t in ("mixed", "appendtime", "compacted")}
    broker.close()
    yield data_dir, expected


# -- the schema -----------------------------------------------------------------------------------


def test_arrow_schema_is_what_pyspark_expects_for_the_ddl() -> None:
    types = pytest.importorskip("pyspark.sql.types")
    from pyspark.sql.pandas.types import to_arrow_schema

    t = types
    header = t.StructType([t.StructField("key", t.StringType()), t.StructField("value", t.BinaryType())])
    schema = t.StructType([
        t.StructField("key", t.BinaryType()), t.StructField("value", t.BinaryType()),
        t.StructField("topic", t.StringType()), t.StructField("partition", t.IntegerType()),
        t.StructField("offset", t.LongType()), t.StructField("timestamp", t.TimestampType()),
        t.StructField("timestampType", t.IntegerType()), t.StructField("headers", t.ArrayType(header)),
    ])
    assert to_arrow_schema(schema, timezone="UTC").equals(ARROW_SCHEMA)
    assert [f.split()[0] for f in SPARK_SCHEMA_DDL.split(", ") if " " in f][:7] == ARROW_SCHEMA.names[:7]
    assert SPARK_SCHEMA_DDL.startswith("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT")


# -- reading --------------------------------------------------------------------------------------


@pytest.mark.parametrize("topic", ["mixed", "appendtime", "compacted"])
def test_every_row_equals_what_a_consumer_reads(logs: Any, topic: str) -> None:
    data_dir, expected = logs
    splits = plan_splits(data_dir, topic, max_split_bytes=3000)
    got = _read_all(splits)
    assert set(got) == set(expected[topic])
    for p, rows in expected[topic].items():
        assert got[p] == rows, "%s-%d differs" % (topic, p)


def test_the_logs_have_what_the_tests_claim(logs: Any) -> None:
    _, expected = logs
    mixed = [r for rows in expected["mixed"].values() for r in rows]
    assert {r[4] for r in mixed} == {-1, 0}  # v0 records have no timestamp type; v1/v2 CreateTime
    assert any(r[5] for r in mixed) and any(r[5] is None for r in mixed)
    assert any(r[1] is None for r in mixed) and any(r[2] is None for r in mixed)
    offsets = [r[0] for r in expected["mixed"][0]]
    assert len(offsets) < offsets[-1] + 1  # the transaction marker takes an offset no record has
    assert {r[4] for r in expected["appendtime"][0]} == {1}
    compacted = [r[0] for r in expected["compacted"][0]]
    assert len(compacted) < compacted[-1] + 1  # compaction left gaps


def test_batches_hold_at_most_batch_rows(logs: Any) -> None:
    data_dir, expected = logs
    (split,) = [s for s in plan_splits(data_dir, "mixed") if s.partition == 1]
    batches = list(read_split(split, batch_rows=7))
    assert batches and all(0 < b.num_rows <= 7 for b in batches)
    assert _rows(iter(batches)) == expected["mixed"][1]
    with pytest.raises(ValueError, match="batch_rows"):
        next(read_split(split, batch_rows=0))


def test_batches_kept_past_later_reads_keep_their_rows(logs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # A segment is read in chunks through one reused buffer: the batches of a chunk must not
    # point into it. Small chunks make segments several reads; every batch is kept first.
    data_dir, expected = logs
    monkeypatch.setattr(sp, "_MIN_CHUNK", 256)
    chunks = []
    decode = sp.decode_columns
    monkeypatch.setattr(sp, "decode_columns", lambda data, **kw: chunks.append(len(data)) or decode(data, **kw))
    for split in plan_splits(data_dir, "mixed"):
        segments = sp._list_segments(split.directory)
        del chunks[:]
        batches = list(read_split(split, batch_rows=1))  # (one row each: keys all null in some, none in others)
        assert len(chunks) > 2 * len(segments)
        assert _rows(iter(batches)) == expected["mixed"][split.partition]


_FREEZE_CHECK = """
import gc, json, sys
from pylogq.spark import splits
gc.collect()
walked_before = len(gc.get_objects())
left = splits._freezing_after(iter([1, 2]))
assert next(left) == 1
del left  # a read left early freezes nothing
after_partial = gc.get_freeze_count()
assert list(splits._freezing_after(iter([3]))) == [3]
frozen = gc.get_freeze_count()
walked_after = len(gc.get_objects())
later = [[i] for i in range(1000)]
assert list(splits._freezing_after(iter([]))) == []  # once per process
print(json.dumps([walked_before, after_partial, frozen, walked_after, gc.get_freeze_count()]))
"""


def test_a_finished_read_freezes_the_worker_objects_once() -> None:
    # In a process of its own: a freeze would last for the rest of this one.
    out = subprocess.run([sys.executable, "-c", _FREEZE_CHECK], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr
    walked_before, after_partial, frozen, walked_after, frozen_at_end = json.loads(out.stdout)
    assert after_partial == 0
    # What the daemon's collection after a task walks: from every module's objects to a few.
    assert walked_before > 10_000 and frozen > 10_000 and walked_after < 100
    assert frozen_at_end == frozen


@pytest.fixture
def loopback_pair() -> Iterator[Tuple[Any, Any]]:
    """(the accepting end, the connecting end) of a TCP connection on loopback, as a worker and the JVM."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        worker, _ = server.accept()
    with worker, client:
        yield worker, client


def _in_pyspark_frame(outfile: Any, call: Any) -> Any:
    """``call()`` from a frame of a module named like PySpark's worker, with ``outfile`` a local there."""
    namespace = {"__name__": "pyspark.worker"}
    exec("def invoke_udf(message_receiver, outfile, call):\n    return call()\n", namespace)
    return namespace["invoke_udf"](None, outfile, call)


def _nodelay(sock: Any) -> int:
    import socket

    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_a_task_socket_is_set_to_answer_at_once(loopback_pair: Tuple[Any, Any]) -> None:
    worker, client = loopback_pair
    outfile = os.fdopen(os.dup(worker.fileno()), "wb", 65536)  # (as PySpark's daemon opens it)
    try:
        assert _nodelay(worker) == 0
        assert _in_pyspark_frame(outfile, sp._task_socket_fd) == outfile.fileno()
        assert _in_pyspark_frame(outfile, sp._answer_promptly) is True
        assert _nodelay(worker) != 0
        # Only the duplicate was closed: the connection still carries data both ways.
        outfile.write(b"ping")
        outfile.flush()
        assert client.recv(4) == b"ping"
        client.sendall(b"pong")
        assert worker.recv(4) == b"pong"
    finally:
        outfile.close()


def test_outside_a_pyspark_worker_no_socket_is_touched(loopback_pair: Tuple[Any, Any]) -> None:
    import socket

    worker, _ = loopback_pair
    outfile = os.fdopen(os.dup(worker.fileno()), "wb")
    try:
        # A local named outfile in a frame that is not PySpark's is not the task's socket.
        assert sp._task_socket_fd() is None and sp._answer_promptly() is False
        assert _nodelay(worker) == 0
    finally:
        outfile.close()
    # A worker on a Unix domain socket (spark.python.unix.domain.socket.enabled) has nothing to set.
    left, right = socket.socketpair()
    with left, right, open(os.devnull, "wb") as devnull:
        with os.fdopen(os.dup(left.fileno()), "wb") as unix_out:
            assert _in_pyspark_frame(unix_out, sp._answer_promptly) is False
        # Nor has a file that is no socket at all.
        assert _in_pyspark_frame(devnull, sp._answer_promptly) is False


def test_read_topics_task_sets_its_socket_before_reading(loopback_pair: Tuple[Any, Any], logs: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """read_topic's task function sets the socket when Spark calls it, before it takes its input."""
    from pylogq.spark import _SplitReader

    monkeypatch.setattr(sp, "_worker_frozen", True)  # (a finished read would freeze this process's objects)
    data_dir, expected = logs
    worker, _ = loopback_pair
    splits = plan_splits(data_dir, "mixed")
    seen = []

    def numbers() -> Iterator[Any]:
        seen.append(_nodelay(worker))  # the input is read only after the socket is set
        yield pa.RecordBatch.from_pydict({"id": [0]})

    with os.fdopen(os.dup(worker.fileno()), "wb") as outfile:
        read = _in_pyspark_frame(outfile, lambda: _SplitReader([splits], True, 1000)(numbers()))
        assert _nodelay(worker) != 0
        got = _rows(read)
    assert seen and seen[0] != 0
    assert [s.partition for s in splits] == sorted(expected["mixed"])
    assert got == [r for s in splits for r in expected["mixed"][s.partition]]


def test_a_data_source_task_sets_its_socket_when_its_command_is_unpickled(loopback_pair: Tuple[Any, Any],
                                                                         tmp_path: Any) -> None:
    """A Data Source read task gets its partition as input after the command: the reader's settings
    set the socket as they are unpickled with the command, so that input is not held back."""
    import pickle

    pytest.importorskip("pyspark.sql.datasource", reason="pyspark is not installed")
    from pylogq.spark.datasource import PylogqBatchReader, _Settings

    worker, _ = loopback_pair
    reader = PylogqBatchReader(_Settings({"source": str(tmp_path), "topic": "t"}, streaming=False))
    command = pickle.dumps(reader)
    assert _nodelay(worker) == 0
    with os.fdopen(os.dup(worker.fileno()), "wb") as outfile:
        unpickled = _in_pyspark_frame(outfile, lambda: pickle.loads(command))
    assert _nodelay(worker) != 0
    assert vars(unpickled.settings) == vars(reader.settings)


def test_a_split_starting_mid_segment_seeks_through_the_index(logs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir, expected = logs
    rows = expected["mixed"][2]
    (split,) = [s for s in plan_splits(data_dir, "mixed") if s.partition == 2]
    start, end = rows[len(rows) // 3][0], rows[len(rows) // 2][0]
    # A start just past an index entry: the entry's batch ends before it.
    segment = sp._list_segments(split.directory)[2]
    entries, _ = read_offset_index(segment.path, segment.base, os.path.getsize(segment.path))
    assert len(entries) and start < int(entries[0]) + 1 < end
    start = int(entries[0]) + 1
    real = sp._start_position

    def spy(reader: Any, offsets: Any, positions: Any, target: int, size: int, skip_older: bool = True) -> int:
        found = real(reader, offsets, positions, target, size, skip_older)
        seen.append(found)
        # The scan starts at the batch holding the target (or a later one), never at the older
        # batch whose index entry comes before it.
        header = reader.header_at(found, size)
        assert header is None or header.last_offset >= target
        k = int(np.searchsorted(offsets, target, side="right")) - 1
        if k >= 0 and int(offsets[k]) < target:
            skipped.append(found - int(positions[k]))
        return found

    seen: List[int] = []
    skipped: List[int] = []
    monkeypatch.setattr(sp, "_start_position", spy)
    got = _rows(read_split(Split("mixed", 2, split.directory, start, end)))
    assert got == [r for r in rows if start <= r[0] < end]
    assert seen and seen[0] > 0  # not scanned from the segment's first byte
    assert skipped and all(n > 0 for n in skipped)


# -- planning -------------------------------------------------------------------------------------


def test_bounds_come_from_the_files(logs: Any) -> None:
    data_dir, expected = logs
    bounds = partition_bounds(data_dir, "mixed")
    assert sorted(bounds) == [0, 1, 2]
    for p, (start, end, directory) in bounds.items():
        assert start == 0 and end == expected["mixed"][p][-1][0] + 1
        assert directory == os.path.join(data_dir, "mixed-%d" % p)


def test_a_replication_checkpoint_caps_the_committed_end(tmp_path: Any) -> None:
    with Broker(str(tmp_path)) as broker:
        broker.create_topic("t", 1)
        for i in range(4):
            broker.produce("t", 0, _v2(i, 10, "none"))
    with open(os.path.join(str(tmp_path), "replication-offset-checkpoint"), "w") as f:
        f.write("0\n1\nt 0 25\n")
    assert partition_bounds(str(tmp_path), "t")[0][:2] == (0, 25)
    assert [(s.start_offset, s.end_offset) for s in plan_splits(str(tmp_path), "t")] == [(0, 25)]


def test_big_partitions_are_cut_into_many_splits(logs: Any) -> None:
    data_dir, _ = logs
    whole = plan_splits(data_dir, "mixed")
    assert len(whole) == 3 and all(s.start_offset == 0 for s in whole)
    many = plan_splits(data_dir, "mixed", max_split_bytes=4096)
    assert len(many) > 3 * 4
    # A segment larger than max_split_bytes is cut inside, at index entries.
    inside = plan_splits(data_dir, "mixed", max_split_bytes=1000)
    assert len(inside) > len(many)


def test_splits_know_their_bytes(logs: Any) -> None:
    """Each split spans about ``size_bytes`` of segment files: a partition's splits add up to its
    files, and the size is not part of a split's identity."""
    data_dir, _ = logs
    for max_bytes in (DEFAULT_MAX_SPLIT_BYTES, 4096, 1000):
        splits = plan_splits(data_dir, "mixed", max_split_bytes=max_bytes)
        for p in {s.partition for s in splits}:
            mine = [s for s in splits if s.partition == p]
            files = sum(os.path.getsize(os.path.join(mine[0].directory, n))
                        for n in os.listdir(mine[0].directory) if n.endswith(".log"))
            assert sum(s.size_bytes for s in mine) == files
            assert all(s.size_bytes > 0 for s in mine)
    first = plan_splits(data_dir, "mixed")[0]
    assert first == Split(first.topic, first.partition, first.directory, first.start_offset, first.end_offset)


def _split(size: int, n: int = 0) -> Split:
    return Split("t", n, "/nowhere", n, n + 1, size)


def test_packing_a_small_read_fills_about_one_task_per_core() -> None:
    MB = 1 << 20
    four = [_split(28 * MB, p) for p in range(4)]
    assert pack_splits(four, 2) == [four[:2], four[2:]]
    assert pack_splits(four, 1) == [four]  # 128 MB with the open costs: one task's worth
    assert pack_splits(four, 4) == [[s] for s in four]
    assert pack_splits(four, 64) == [[s] for s in four]
    # A big read keeps tasks of at most about max_bytes, whatever the parallelism.
    big = [_split(100 * MB, p) for p in range(10)]
    assert pack_splits(big, 2) == [[s] for s in big]
    tiny = [_split(1000, p) for p in range(100)]
    tasks = pack_splits(tiny, 2, max_bytes=64 * 1024 * 1024)
    assert [len(t) for t in tasks] == [16] * 6 + [4]  # each split weighs its bytes and the 4 MiB open cost
    assert pack_splits([], 2) == []
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="parallelism"):
            pack_splits(four, bad)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 300 << 20), max_size=60), parallelism=st.integers(1, 16),
       max_bytes=st.integers(1, 256 << 20), open_cost=st.integers(0, 8 << 20))
def test_packing_keeps_every_split_once_in_order(sizes: List[int], parallelism: int, max_bytes: int,
                                                 open_cost: int) -> None:
    splits = [_split(size, n) for n, size in enumerate(sizes)]
    tasks = pack_splits(splits, parallelism, max_bytes=max_bytes, open_cost=open_cost)
    assert [s for t in tasks for s in t] == splits
    assert all(tasks)
    total = sum(size + open_cost for size in sizes)
    target = min(max_bytes, max(open_cost, -(-total // parallelism))) if sizes else 0
    for task in tasks:
        # A task holds one split, or splits whose bytes stay within the target (each but the last with its open cost).
        assert len(task) == 1 or sum(s.size_bytes + open_cost for s in task) - open_cost <= target
    for a, b in zip(tasks, tasks[1:]):
        # A task closes only when its next split would not fit.
        assert sum(s.size_bytes + open_cost for s in a) + b[0].size_bytes > target


def test_splits_pickle(logs: Any) -> None:
    import pickle

    data_dir, _ = logs
    for s in plan_splits(data_dir, "mixed", max_split_bytes=4096):
        assert pickle.loads(pickle.dumps(s)) == s


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_bytes=st.integers(1, 60000), data=st.data())
def test_splits_tile_the_range_exactly(logs: Any, max_bytes: int, data: st.DataObject) -> None:
    data_dir, expected = logs
    topic = data.draw(st.sampled_from(["mixed", "compacted"]))
    bounds = partition_bounds(data_dir, topic)
    starts, ends = {}, {}
    for p, (low, high, _) in bounds.items():
        a = data.draw(st.integers(low, high))
        starts[p], ends[p] = a, data.draw(st.integers(a, high))
    splits = plan_splits(data_dir, topic, starts, ends, max_split_bytes=max_bytes)
    for p in bounds:
        mine = [s for s in splits if s.partition == p]
        if starts[p] == ends[p]:
            assert not mine
            continue
        assert mine[0].start_offset == starts[p] and mine[-1].end_offset == ends[p]
        assert all(a.end_offset == b.start_offset for a, b in zip(mine, mine[1:]))
        assert all(s.start_offset < s.end_offset for s in mine)
    if data.draw(st.booleans()):  # reading every example would be slow without the compiled kernels
        got = _read_all(splits)
        for p, rows in expected[topic].items():
            assert got.get(p, []) == [r for r in rows if starts[p] <= r[0] < ends[p]]


def test_offset_forms(logs: Any) -> None:
    data_dir, expected = logs
    ends = {p: rows[-1][0] + 1 for p, rows in expected["mixed"].items()}

    def ranges(start: Any, end: Any) -> Dict[int, Tuple[int, int]]:
        out: Dict[int, Tuple[int, int]] = {}
        for s in plan_splits(data_dir, "mixed", start, end):
            low, high = out.get(s.partition, (s.start_offset, s.end_offset))
            out[s.partition] = (min(low, s.start_offset), max(high, s.end_offset))
        return out

    assert ranges("earliest", "latest") == ranges(None, None) == {p: (0, e) for p, e in ends.items()}
    assert ranges("latest", "latest") == {}
    assert ranges({0: 10, "1": 20}, {2: 30}) == {0: (10, ends[0]), 1: (20, ends[1]), 2: (0, 30)}
    assert ranges('{"mixed": {"0": 5, "1": -2, "2": -1}}', '{"mixed": {"0": -1, "1": 9}}') == {
        0: (5, ends[0]), 1: (0, 9)}
    assert ranges({"mixed": {0: 3}}, {"mixed": {0: "latest", 1: 4, 2: "earliest"}}) == {
        0: (3, ends[0]), 1: (0, 4)}
    assert ranges(" EARLIEST ", {0: ends[0]}) == {0: (0, ends[0]), 1: (0, ends[1]), 2: (0, ends[2])}


def test_bad_offsets_are_named(logs: Any) -> None:
    data_dir, expected = logs
    end0 = expected["mixed"][0][-1][0] + 1
    with pytest.raises(OffsetOutOfRangeError, match=r"mixed-0 is %d, out of range: valid offsets are 0\.\.%d"
                       % (end0 + 1, end0)):
        plan_splits(data_dir, "mixed", {0: end0 + 1})
    with pytest.raises(OffsetOutOfRangeError, match="ending_offsets for mixed-1"):
        plan_splits(data_dir, "mixed", ending_offsets='{"mixed": {"1": 999999}}')
    with pytest.raises(OffsetOutOfRangeError, match="starting offset 9 is past ending offset 4"):
        plan_splits(data_dir, "mixed", {0: 9}, {0: 4})
    with pytest.raises(UnknownTopicOrPartitionError, match="partition.s. 7 of mixed"):
        plan_splits(data_dir, "mixed", {7: 0})
    with pytest.raises(ValueError, match="names topic.s. other"):
        plan_splits(data_dir, "mixed", {"other": {"0": 1}})
    with pytest.raises(ValueError, match="-5"):
        plan_splits(data_dir, "mixed", {0: -5})
    with pytest.raises(ValueError, match="not valid JSON"):
        plan_splits(data_dir, "mixed", "{nope")
    with pytest.raises(ValueError, match="'earliest', 'latest'"):
        plan_splits(data_dir, "mixed", "first")
    with pytest.raises(TypeError):
        plan_splits(data_dir, "mixed", 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_split_bytes"):
        plan_splits(data_dir, "mixed", max_split_bytes=0)


def test_unknown_topics_and_bad_directories_are_named(logs: Any, tmp_path: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir, _ = logs
    with pytest.raises(UnknownTopicOrPartitionError, match="'nope' has no partition directories"):
        plan_splits(data_dir, "nope")
    missing = str(tmp_path / "missing")
    with pytest.raises(PylogqError, match="log directory %s does not exist" % missing):
        plan_splits(missing, "mixed")
    with pytest.raises(PylogqError, match="bootstrap_servers"):
        plan_splits("localhost:9092", "mixed")
    (tmp_path / "file").write_text("x")
    with pytest.raises(PylogqError, match="is not a directory"):
        plan_splits(str(tmp_path / "file"), "mixed")
    # A broker's topic file lists partitions whose directories are not in the given dirs.
    partial = tmp_path / "partial"
    partial.mkdir()
    os.symlink(os.path.join(data_dir, "mixed-0"), str(partial / "mixed-0"))
    (partial / "pylogq-topics.json").write_text(json.dumps({"topics": {"mixed": {"partitions": 3}}}))
    with pytest.raises(PylogqError, match=r"no directory for partition\(s\) 1, 2"):
        plan_splits(str(partial), "mixed")

    real = os.listdir

    def denied(path: Any = ".") -> List[str]:
        if os.fspath(path) == data_dir:
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(os, "listdir", denied)
    with pytest.raises(PylogqError, match="cannot read log directory %s: Permission denied" % data_dir):
        plan_splits(data_dir, "mixed")


def test_several_log_directories(tmp_path: Any) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with Broker(str(tmp_path / "meta"), log_dirs=",".join(dirs)) as broker:
        broker.create_topic("t", 4)
        for p in range(4):
            broker.produce("t", p, _v2(p, 5 + p, "gzip"))
        expected = {p: _expected(broker, "t", p) for p in range(4)}
    assert all(os.listdir(d) for d in dirs)
    for source in (dirs, ",".join(dirs)):
        assert _read_all(plan_splits(source, "t")) == expected


def test_bootstrap_servers_give_the_committed_end(pylogq_broker: Broker, pylogq_bootstrap: str) -> None:
    pylogq_broker.create_topic("served", 2)
    for i in range(6):
        pylogq_broker.produce("served", i % 2, _v2(i, 10, "snappy"))
    pylogq_broker.delete_records("served", 1, 4)
    bounds = partition_bounds(pylogq_broker.data_dir, "served", bootstrap_servers=pylogq_bootstrap)
    assert {p: b[:2] for p, b in bounds.items()} == {0: (0, 30), 1: (4, 30)}
    splits = plan_splits(pylogq_broker.data_dir, "served", bootstrap_servers=pylogq_bootstrap)
    got = _read_all(splits)
    assert got == {p: [r for r in _expected(pylogq_broker, "served", p)] for p in (0, 1)}
    with pytest.raises(UnknownTopicOrPartitionError):
        partition_bounds(pylogq_broker.data_dir, "other", bootstrap_servers=pylogq_bootstrap)


# -- a live broker: appends, retention, data loss --------------------------------------------------------


def _live(tmp_path: Any, records_per_round: int = 20, rounds: int = 30) -> Broker:
    broker = Broker(str(tmp_path), log_cleaner_enable=False)
    broker.create_topic("live", 1, config=SMALL_SEGMENTS)
    for i in range(rounds):
        broker.produce("live", 0, _v2(i, records_per_round, CODECS[i % 5]))
    return broker


def test_reads_return_the_planned_range_while_the_broker_appends(tmp_path: Any) -> None:
    broker = _live(tmp_path)
    try:
        splits = plan_splits(str(tmp_path), "live", max_split_bytes=5000)
        planned_end = splits[-1].end_offset
        assert len(splits) > 2 and planned_end == 600
        stop = threading.Event()
        appended = [0]

        def append() -> None:
            i = 0
            while not stop.is_set() and i < 2000:
                broker.produce("live", 0, _v2(100 + i, 5, CODECS[i % 5]))
                appended[0] += 1
                i += 1

        writer = threading.Thread(target=append)
        writer.start()
        try:
            deadline = time.monotonic() + 30
            while appended[0] < 20 and time.monotonic() < deadline:
                time.sleep(0.001)
            first = _read_all(splits)[0]
            second = _read_all(splits)[0]
        finally:
            stop.set()
            writer.join()
        assert appended[0] >= 20
        assert first == second == [r for r in _expected(broker, "live", 0) if r[0] < planned_end]
        assert [r[0] for r in first] == list(range(planned_end))
    finally:
        broker.close()


def test_records_deleted_before_the_read_raise_data_loss(tmp_path: Any) -> None:
    broker = _live(tmp_path)
    try:
        expected = _expected(broker, "live", 0)
        (split,) = plan_splits(str(tmp_path), "live")
        assert broker.delete_records("live", 0, 250) == 250
        broker.logs.checkpoint()  # the log start reaches the checkpoint file (the manager does it periodically)
        with pytest.raises(DataLossError, match=r"offsets 0\.\.249 of live-0 were deleted before they could be read"
                           ) as info:
            list(read_split(split))
        assert (info.value.topic, info.value.partition, info.value.start, info.value.end) == ("live", 0, 0, 250)
        with pytest.warns(DataLossWarning, match=r"offsets 0\.\.249 of live-0"):
            got = _rows(read_split(split, fail_on_data_loss=False))
        assert got == [r for r in expected if r[0] >= 250]
    finally:
        broker.close()


def test_segments_deleted_by_retention_without_a_checkpoint_are_detected(tmp_path: Any) -> None:
    broker = _live(tmp_path)
    try:
        (split,) = plan_splits(str(tmp_path), "live")
        log = broker.logs.get_log("live", 0)
        assert log is not None
        log.config = log.config.merged({"retention.bytes": "8000"})
        assert broker.logs.cleanup_logs() > 0
        start = log.log_start_offset
        with pytest.raises(DataLossError) as info:
            list(read_split(split))
        assert (info.value.start, info.value.end) == (0, start)
    finally:
        broker.close()


def _bases(directory: str) -> List[int]:
    return sorted(int(n[:20]) for n in os.listdir(directory) if n.endswith(".log"))


@pytest.mark.parametrize("fail", [True, False])
def test_retention_during_a_read(tmp_path: Any, fail: bool) -> None:
    broker = _live(tmp_path)
    try:
        expected = _expected(broker, "live", 0)
        (split,) = plan_splits(str(tmp_path), "live")
        batches = read_split(split, fail_on_data_loss=fail, batch_rows=10)
        first = _rows(iter([next(batches)]))  # the first segment is open now: its records stay readable
        read_to = first[-1][0]
        first_segment_end = _bases(split.directory)[1]
        broker.delete_records("live", 0, 400)
        # Without a checkpoint of the new log start, the files show the first remaining segment's base.
        lost_to = _bases(split.directory)[0]
        assert read_to < _bases(split.directory)[0] <= 400
        if fail:
            with pytest.raises(DataLossError) as info:
                list(batches)
            assert (info.value.start, info.value.end) == (first_segment_end, lost_to)
        else:
            with pytest.warns(DataLossWarning, match=r"\.\.%d of live-0" % (lost_to - 1)):
                rest = _rows(batches)
            assert first + rest == [r for r in expected if r[0] < first_segment_end or r[0] >= lost_to]
    finally:
        broker.close()


def test_a_deleted_topic_is_data_loss(tmp_path: Any) -> None:
    broker = _live(tmp_path)
    try:
        (split,) = plan_splits(str(tmp_path), "live")
        broker.delete_topic("live")
        with pytest.raises(DataLossError, match=r"offsets 0\.\.599 of live-0 .* no longer exists"):
            list(read_split(split))
        with pytest.warns(DataLossWarning):
            assert list(read_split(split, fail_on_data_loss=False)) == []
    finally:
        broker.close()


def test_a_compaction_swap_mid_read_loses_nothing(tmp_path: Any) -> None:
    broker = Broker(str(tmp_path), log_cleaner_enable=False)
    try:
        broker.create_topic("c", 1, config={"cleanup.policy": "compact", "segment.bytes": "2048",
                                            "file.delete.delay.ms": "0", "min.cleanable.dirty.ratio": "0.01"})
        for i in range(40):
            broker.produce("c", 0, bytes(records.build_batch([b"v%d" % i] * 4, keys=[b"a", b"b", b"c%d" % i, b"d"],
                                                             timestamps=TS)))
        (split,) = plan_splits(str(tmp_path), "c")
        batches = read_split(split, batch_rows=3)
        first = _rows(iter([next(batches)]))
        log = broker.logs.get_log("c", 0)
        assert log is not None
        log.roll()
        LogCleaner(broker.logs).clean_log(log)
        rest = _rows(batches)
        offsets = [r[0] for r in first + rest]
        assert offsets == sorted(set(offsets))  # no duplicate, in order
        keys_seen = {r[1] for r in first + rest}
        assert {b"a", b"b", b"d"} <= keys_seen and offsets[-1] == split.end_offset - 1
    finally:
        broker.close()


def test_nothing_is_written_into_the_log_directories(logs: Any) -> None:
    data_dir, _ = logs

    def snapshot() -> Dict[str, Tuple[int, float]]:
        out = {}
        for root, _, files in os.walk(data_dir):
            for name in files:
                st_ = os.stat(os.path.join(root, name))
                out[os.path.join(root, name)] = (st_.st_size, st_.st_mtime)
        return out

    before = snapshot()
    for topic in ("mixed", "compacted"):
        _read_all(plan_splits(data_dir, topic, max_split_bytes=2000))
    assert snapshot() == before
