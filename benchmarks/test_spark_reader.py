"""The Spark segment reader without Spark: rows/s of ``read_split`` into Arrow batches.

Group "spark segment reader": a topic of 1M records with 100-byte values and
16-byte keys (4 partitions, ~1 MB uncompressed v2 batches, 128 MB segments),
written by a pylogq broker and closed; each round plans the splits and reads
them all with :func:`pylogq.spark.splits.read_split`, keeping every Arrow
batch's row count. This is the decoding half of the Spark read path
(``read_topic`` adds Spark's transfer). The reference (the ratio's) is pyarrow
reading the same rows, every column, from parquet files written in setup (one
per partition, with pyarrow's defaults), as Arrow tables: the same rows from
files on disk into Arrow, from a format made for it.

Group "spark read_committed": the same 1M records written as transactions (one
per batch, each committed by its marker, none aborted), read whole with
``isolation_level="read_committed"`` against the same reads with read_uncommitted,
the reference, their rounds alternating. read_committed plans more (each
partition's last stable offset from a walk over its batch headers, the
``.txnindex`` files looked for) and must not be slower: target at most 1.10x
the reference's time (the two differ by well under that; the margin is the
noise of a shared 2-core machine).

Without compiled kernels (``PYLOGQ_NO_EXTENSIONS=1``) or in a smoke
run (``--quick``, as CI runs them, or ``--benchmark-disable``) the topic has 50k records.
"""

from __future__ import annotations

import pytest
from summary import alternate, asserting, info, smoke

from pylogq import Broker, records
from pylogq.records.control import COMMIT, build_end_txn_marker

pytest.importorskip("pyarrow")

from pylogq.spark.splits import plan_splits, read_split  # noqa: E402

RECORDS = 1_000_000
SMALL = 50_000
PARTITIONS = 4
PER_BATCH = 8192  # ~1 MB of 100-byte values per batch
TS = 1_700_000_000_000
#: Timed rounds of both rows, after WARMUP untimed ones.
ROUNDS = 5
WARMUP = 1


def _full_size(request) -> bool:
    return not smoke(request.config)


@pytest.fixture(scope="module")
def topic_dir(request, tmp_path_factory) -> str:
    count = RECORDS if _full_size(request) else SMALL
    data_dir = str(tmp_path_factory.mktemp("spark-reader"))
    with Broker(data_dir, log_cleaner_enable=False) as broker:
        broker.create_topic("bench", PARTITIONS, config={"segment.bytes": str(128 << 20)})
        written = 0
        while written < count:
            n = min(PER_BATCH, count - written)
            values = [(b"%010d" % (written + i)) * 10 for i in range(n)]
            keys = [b"key-%012d" % ((written + i) % 100000) for i in range(n)]
            batch = bytes(records.build_batch(values, keys=keys, timestamps=TS))
            broker.produce("bench", (written // PER_BATCH) % PARTITIONS, batch)
            written += n
    return data_dir


def test_read_split_rows(benchmark, request, topic_dir) -> None:
    count = RECORDS if _full_size(request) else SMALL

    def read_all() -> int:
        rows = 0
        for split in plan_splits(topic_dir, "bench"):
            for batch in read_split(split):
                rows += batch.num_rows
        return rows

    info(benchmark, "spark segment reader", count, "rows")
    rows = benchmark.pedantic(read_all, rounds=ROUNDS, iterations=1, warmup_rounds=WARMUP)
    assert rows == count


@pytest.fixture(scope="module")
def parquet_files(topic_dir, tmp_path_factory) -> list:
    """The topic's rows as parquet, one file per split, written with pyarrow from ``read_split``'s batches."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = tmp_path_factory.mktemp("spark-reader-parquet")
    paths = []
    for i, split in enumerate(plan_splits(topic_dir, "bench")):
        path = str(directory / ("split-%d.parquet" % i))
        pq.write_table(pa.Table.from_batches(list(read_split(split))), path)
        paths.append(path)
    return paths


def test_read_parquet_rows(benchmark, request, parquet_files) -> None:
    import pyarrow.parquet as pq

    count = RECORDS if _full_size(request) else SMALL

    def read_all() -> int:
        return sum(pq.read_table(path).num_rows for path in parquet_files)

    info(benchmark, "spark segment reader", count, "rows", peer=True)
    rows = benchmark.pedantic(read_all, rounds=ROUNDS, iterations=1, warmup_rounds=WARMUP)
    assert rows == count


@pytest.fixture(scope="module")
def committed_dir(request, tmp_path_factory) -> str:
    """The topic of ``topic_dir``, each batch a transaction of its partition's producer, committed."""
    count = RECORDS if _full_size(request) else SMALL
    data_dir = str(tmp_path_factory.mktemp("spark-reader-committed"))
    with Broker(data_dir, log_cleaner_enable=False) as broker:
        broker.create_topic("bench", PARTITIONS, config={"segment.bytes": str(128 << 20)})
        sequences = [0] * PARTITIONS
        written = 0
        while written < count:
            n = min(PER_BATCH, count - written)
            p = (written // PER_BATCH) % PARTITIONS
            values = [(b"%010d" % (written + i)) * 10 for i in range(n)]
            keys = [b"key-%012d" % ((written + i) % 100000) for i in range(n)]
            batch = bytes(records.build_batch(values, keys=keys, timestamps=TS, producer_id=1000 + p, producer_epoch=0,
                                              base_sequence=sequences[p], is_transactional=True))
            partition = broker.partition("bench", p)
            partition.append(batch)
            partition.append(bytes(build_end_txn_marker(1000 + p, 0, COMMIT, 0, TS)), origin="coordinator")
            sequences[p] += n
            written += n
    return data_dir


class _ReadAll:
    """One round: plan the topic's splits with an isolation level and read them all (summary.Rounds)."""

    def __init__(self, directory: str, isolation_level: str) -> None:
        self.directory = directory
        self.isolation_level = isolation_level

    def prepare(self) -> None:
        pass

    def run(self) -> int:
        rows = 0
        for split in plan_splits(self.directory, "bench", isolation_level=self.isolation_level):
            for batch in read_split(split):
                rows += batch.num_rows
        return rows

    def finish(self) -> None:
        pass


def test_read_committed_rows(benchmark, request, committed_dir) -> None:
    count = RECORDS if _full_size(request) else SMALL
    info(benchmark, "spark read_committed", count, "rows", target="<= 1.10x read_uncommitted's time")
    own, peer = _ReadAll(committed_dir, "read_committed"), _ReadAll(committed_dir, "read_uncommitted")
    rows, peer_rows = alternate(benchmark, own, peer, ROUNDS, WARMUP)
    assert rows == peer_rows == count
    if asserting(request.config):
        import statistics

        peer_median = statistics.median(benchmark.extra_info["alternating_peer_seconds"])
        assert benchmark.stats.stats.median <= 1.10 * peer_median, (benchmark.stats.stats.median, peer_median)


def test_read_uncommitted_rows(benchmark, request, committed_dir) -> None:
    count = RECORDS if _full_size(request) else SMALL
    info(benchmark, "spark read_committed", count, "rows", peer=True)
    rows = benchmark.pedantic(_ReadAll(committed_dir, "read_uncommitted").run, rounds=ROUNDS, iterations=1,
                              warmup_rounds=WARMUP)
    assert rows == count
