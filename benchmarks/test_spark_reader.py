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

Without compiled kernels (``PYLOGQ_NO_EXTENSIONS=1``) or in a smoke
run (``--quick``, as CI runs them, or ``--benchmark-disable``) the topic has 50k records.
"""

from __future__ import annotations

import pytest
from summary import info, smoke

from pylogq import Broker, records

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
