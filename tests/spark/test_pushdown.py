"""Column pruning and pushdown of partition, offset and timestamp bounds, without Spark.

Every projection and every filter must give exactly the Consumer's rows (projected,
filtered): logs with every codec, v0/v1 sets, a transaction marker, LogAppendTime and
compaction gaps (the ``logs`` fixture of test_splits.py). The reads must also skip what
the bounds exclude: segments before a timestamp are not read, and a read of the columns
that batch headers give decodes no batch without gaps.
"""

from __future__ import annotations

import datetime
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from pylogq import Broker, records  # noqa: E402
from pylogq.errors import OffsetOutOfRangeError  # noqa: E402
from pylogq.spark import splits as sp  # noqa: E402
from pylogq.spark.splits import (  # noqa: E402
    COLUMNS,
    Pushdown,
    arrow_schema,
    offset_for_time,
    plan_splits,
    read_split,
    schema_ddl,
)

from .test_splits import TS, logs  # noqa: E402,F401 - the fixture, shared

TOPICS = ("mixed", "appendtime", "compacted")
# A Consumer row as test_splits builds it: (offset, key, value, timestamp ms, timestamp type, headers).
FIELDS = {"offset": 0, "key": 1, "value": 2, "timestamp": 3, "timestampType": 4, "headers": 5}


def _expected_rows(expected: Dict[int, List[Any]], columns: Sequence[str], topic: str,
                   keep: Any = lambda p, row: True) -> List[Tuple[Any, ...]]:
    out = []
    for p, rows in sorted(expected.items()):
        for row in rows:
            if not keep(p, row):
                continue
            values = []
            for c in columns:
                if c == "topic":
                    values.append(topic)
                elif c == "partition":
                    values.append(p)
                else:
                    values.append(row[FIELDS[c]])
            out.append(tuple(values))
    return out


def _read_rows(splits: List[sp.Split], columns: Sequence[str], **kwargs: Any) -> List[Tuple[Any, ...]]:
    out = []
    schema = arrow_schema(columns)
    for split in splits:
        for batch in read_split(split, columns=columns, **kwargs):
            assert batch.schema.equals(schema)
            table = {}
            for c in columns:
                if c == "timestamp":
                    table[c] = [m // 1000 for m in batch.column(c).cast(pa.int64()).to_pylist()]
                elif c == "headers":
                    table[c] = [None if h is None else [(x["key"], x["value"]) for x in h]
                                for h in batch.column(c).to_pylist()]
                else:
                    table[c] = batch.column(c).to_pylist()
            out.extend(zip(*(table[c] for c in columns)))
    return out


PROJECTIONS = [
    ["value"],
    ["key"],
    ["offset"],
    ["partition", "offset"],
    ["topic", "partition", "offset"],
    ["offset", "partition"],
    ["timestamp", "value"],
    ["headers", "key", "timestampType"],
    list(reversed(COLUMNS)),
]


@pytest.mark.parametrize("topic", TOPICS)
@pytest.mark.parametrize("columns", PROJECTIONS, ids=lambda c: "-".join(c))
def test_projections_equal_what_a_consumer_reads(logs: Any, topic: str, columns: List[str]) -> None:
    data_dir, expected = logs
    got = _read_rows(plan_splits(data_dir, topic, max_split_bytes=3000), columns)
    assert got == _expected_rows(expected[topic], columns, topic)


def test_offsets_come_from_batch_headers_without_decoding(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A topic of uncompressed and compressed v2 batches without gaps: reading partition and offset
    decodes (and decompresses) nothing; a compacted batch with gaps is decoded, and only it."""
    broker = Broker(str(tmp_path), log_cleaner_enable=False)
    broker.create_topic("t", 1)
    codecs = ("none", "zstd", "gzip", "lz4", "snappy")
    for i in range(20):
        broker.produce("t", 0, records.build_batch([b"v%d" % j for j in range(50)], compression_type=codecs[i % 5]))
    broker.close()
    calls = []
    real = sp.decode_columns
    monkeypatch.setattr(sp, "decode_columns", lambda *a, **k: calls.append(1) or real(*a, **k))
    splits = plan_splits(str(tmp_path), "t")
    got = _read_rows(splits, ["partition", "offset"])
    assert got == [(0, o) for o in range(1000)] and not calls
    got = _read_rows(splits, ["offset"], batch_rows=7)
    assert [r[0] for r in got] == list(range(1000)) and not calls
    assert _read_rows(splits, ["value"])[:2] == [(b"v0",), (b"v1",)] and calls


def test_bad_columns_are_named() -> None:
    with pytest.raises(ValueError, match="unknown column.*'vlaue'"):
        schema_ddl(["vlaue"])
    with pytest.raises(ValueError, match="twice"):
        schema_ddl(["value", "value"])
    with pytest.raises(ValueError, match="at least one"):
        schema_ddl([])
    assert schema_ddl("offset, value") == "offset BIGINT, value BINARY"
    assert schema_ddl() == sp.SPARK_SCHEMA_DDL


# -- offsets for times ---------------------------------------------------------------------------


def _first_at_or_after(rows: List[Any], timestamp: int, start: int = 0, end: Optional[int] = None) -> Optional[int]:
    for row in rows:
        if row[0] >= start and (end is None or row[0] < end) and row[3] >= timestamp:
            return int(row[0])
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_offset_for_time_is_the_first_record_at_or_after(logs: Any, data: st.DataObject) -> None:
    data_dir, expected = logs
    topic = data.draw(st.sampled_from(TOPICS))
    p = data.draw(st.sampled_from(sorted(expected[topic])))
    rows = expected[topic][p]
    stamps = sorted({r[3] for r in rows})
    timestamp = data.draw(st.one_of(st.sampled_from(stamps), st.integers(stamps[0] - 5, stamps[-1] + 5),
                                    st.just(-1), st.just(0)))
    start = data.draw(st.integers(0, int(rows[-1][0]) + 2))
    directory = os.path.join(data_dir, "%s-%d" % (topic, p))
    assert offset_for_time(directory, timestamp, start) == _first_at_or_after(rows, timestamp, start)


def test_offset_for_time_reads_only_the_segment_that_holds_it(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments whose time index shows every record older are passed over by their indexes and the
    few headers past their last entry: no batch before the answer's is read."""
    broker = Broker(str(tmp_path), log_cleaner_enable=False)
    broker.create_topic("t", 1, config={"segment.bytes": "20000", "index.interval.bytes": "1000"})
    for i in range(200):
        broker.produce("t", 0, records.build_batch([os.urandom(90) for _ in range(10)], timestamps=TS + i))
    broker.close()
    read: List[int] = []
    real = sp.SegmentReader.read
    monkeypatch.setattr(sp.SegmentReader, "read", lambda self, pos, size: read.append(size) or real(self, pos, size))
    directory = str(tmp_path / "t-0")
    assert offset_for_time(directory, TS + 150) == 1500
    assert len(read) == 1  # the one batch holding offset 1500, decoded to find the record
    assert offset_for_time(directory, TS + 1000) is None


def test_starting_and_ending_timestamps(logs: Any) -> None:
    data_dir, expected = logs
    rows = expected["mixed"]
    ts = TS + 2000
    splits = plan_splits(data_dir, "mixed", starting_timestamp=ts, ending_timestamp=ts + 700)
    bounds = {s.partition: [s.start_offset, s.end_offset] for s in splits}
    for p, prow in rows.items():
        start, end = _first_at_or_after(prow, ts), _first_at_or_after(prow, ts + 700)
        assert start is not None
        if end is None:
            end = int(prow[-1][0]) + 1
        if start < end:
            assert bounds[p][0] == start and max(s.end_offset for s in splits if s.partition == p) == end
    with pytest.raises(OffsetOutOfRangeError, match="no record at or after.*timestamp_strategy='latest'"):
        plan_splits(data_dir, "mixed", starting_timestamp=TS + 10**9)
    assert plan_splits(data_dir, "mixed", starting_timestamp=TS + 10**9, timestamp_strategy="latest") == []
    with pytest.raises(ValueError, match="milliseconds"):
        plan_splits(data_dir, "mixed", starting_timestamp=datetime.datetime.now())  # type: ignore[arg-type]


# -- filters -------------------------------------------------------------------------------------


def _keep(pushdown: Pushdown) -> Any:
    def keep(p: int, row: Any) -> bool:
        offset, ts = row[0], row[3]
        return ((pushdown.partitions is None or p in pushdown.partitions)
                and (pushdown.min_offset is None or offset >= pushdown.min_offset)
                and (pushdown.max_offset is None or offset < pushdown.max_offset)
                and (pushdown.min_timestamp is None or ts >= pushdown.min_timestamp)
                and (pushdown.max_timestamp is None or ts < pushdown.max_timestamp))
    return keep


def _draw_pushdown(data: st.DataObject, partitions: Dict[int, List[Any]]) -> Pushdown:
    """Bounds on a topic's partitions, offsets and timestamps, each maybe absent, around its rows."""
    rows = [r for prow in partitions.values() for r in prow]
    stamps = sorted({r[3] for r in rows})
    last = max(r[0] for r in rows)
    maybe = lambda s: st.one_of(st.none(), s)  # noqa: E731
    stamp = st.one_of(st.sampled_from(stamps), st.integers(stamps[0] - 3, stamps[-1] + 3))
    return Pushdown(
        partitions=data.draw(maybe(st.frozensets(st.sampled_from(sorted(partitions))))),
        min_offset=data.draw(maybe(st.integers(0, last + 1))),
        max_offset=data.draw(maybe(st.integers(0, last + 2))),
        min_timestamp=data.draw(maybe(stamp)),
        max_timestamp=data.draw(maybe(stamp)),
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_filters_give_exactly_the_consumers_rows(logs: Any, data: st.DataObject) -> None:
    data_dir, expected = logs
    topic = data.draw(st.sampled_from(TOPICS))
    pushdown = _draw_pushdown(data, expected[topic])
    columns = data.draw(st.sampled_from(PROJECTIONS))
    splits = plan_splits(data_dir, topic, max_split_bytes=data.draw(st.sampled_from([2000, 10**9])),
                         pushdown=pushdown)
    got = _read_rows(splits, columns, pushdown=pushdown)
    assert got == _expected_rows(expected[topic], columns, topic, _keep(pushdown))


def test_a_timestamp_lower_bound_starts_past_older_segments(tmp_path: Any) -> None:
    broker = Broker(str(tmp_path), log_cleaner_enable=False)
    broker.create_topic("t", 2, config={"segment.bytes": "50000"})
    for i in range(400):
        broker.produce("t", i % 2, records.build_batch([os.urandom(100) for _ in range(10)], timestamps=TS + i))
    broker.close()
    pushdown = Pushdown(min_timestamp=TS + 396)
    splits = plan_splits(str(tmp_path), "t", pushdown=pushdown)
    assert [(s.partition, s.start_offset, s.end_offset) for s in splits] == [(0, 1980, 2000), (1, 1980, 2000)]
    assert len(_read_rows(splits, ["offset"], pushdown=pushdown)) == 40
