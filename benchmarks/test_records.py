"""Record batch hot paths: pylogq against aiokafka's Cython records, in the same run.

Groups and targets:
- "v2 build 1000x100B": build one v2 batch of 1,000 records with 100-byte
  values; pylogq record by record (``append``) and in one call
  (``build_batch``) against aiokafka 0.14's Cython ``DefaultRecordBatchBuilder``
  (the peer) and kafka-python's pure builder. Target >= 1.5x aiokafka.
- "v2 iterate 1000x100B": CRC check then every record as an object; pylogq
  against aiokafka's Cython ``DefaultRecordBatch`` (the peer). Target >= 1.5x.
- "columnar 100x1000": 100 such batches into numpy columns. Target >= 40M records/s.
  The peer for scale is aiokafka iterating the same 100 batches.
- "validate+assign 1MB": check and assign offsets to a 1 MB batch of 100-byte
  records in place. Target >= 5 GB/s; aiokafka's CRC check plus iteration of
  the same batch is shown for scale.
"""

from __future__ import annotations

import importlib
import random

import pytest
from aiokafka.record._crecords.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record._crecords.default_records import (
    DefaultRecordBatchBuilder as AioBuilder,
)
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from summary import info

from pylogq import _speedups
from pylogq.records import columnar, default_records

IMPLS = [("pure", default_records)]
if not _speedups.NO_EXTENSIONS:
    IMPLS.insert(0, ("compiled", importlib.import_module("pylogq._core._records")))

TS = 1_700_000_000_000
N = 1000


@pytest.fixture(scope="module")
def values():
    rng = random.Random(7)
    return [bytes(rng.getrandbits(8) for _ in range(100)) for _ in range(N)]


@pytest.fixture(scope="module")
def batch_bytes(values):
    return bytes(default_records.build_batch(values, timestamps=TS))


# -- build ----------------------------------------------------------------------


@pytest.mark.parametrize("name, impl", IMPLS, ids=[n for n, _ in IMPLS])
def test_build_append(benchmark, values, name, impl):
    info(benchmark, "v2 build 1000x100B", N, "records", target=">= 1.5x aiokafka")

    def run():
        builder = impl.RecordBatchBuilder(0, batch_size=1 << 24)
        append = builder.append
        for i, v in enumerate(values):
            append(i, TS, None, v)
        return builder.build()

    assert len(benchmark(run)) > 100 * N


@pytest.mark.parametrize("name, impl", IMPLS, ids=[n for n, _ in IMPLS])
def test_build_bulk(benchmark, values, name, impl):
    info(benchmark, "v2 build 1000x100B", N, "records")
    assert len(benchmark(impl.build_batch, values, None, TS)) > 100 * N


@pytest.mark.parametrize("name, builder_class", [("aiokafka", AioBuilder), ("kafka-python", KpBuilder)])
def test_build_client(benchmark, values, name, builder_class):
    info(benchmark, "v2 build 1000x100B", N, "records", peer=name == "aiokafka")

    def run():
        builder = builder_class(2, 0, 0, -1, -1, -1, 1 << 24)
        append = builder.append
        for i, v in enumerate(values):
            append(i, TS, None, v, [])
        return builder.build()

    assert len(benchmark(run)) > 100 * N


# -- iterate --------------------------------------------------------------------


@pytest.mark.parametrize("name, impl", IMPLS, ids=[n for n, _ in IMPLS])
def test_iterate(benchmark, batch_bytes, name, impl):
    info(benchmark, "v2 iterate 1000x100B", N, "records", target=">= 1.5x aiokafka")

    def run():
        n = 0
        for record in impl.RecordBatch(batch_bytes):  # checks the CRC first
            n += len(record.value)
        return n

    assert benchmark(run) == 100 * N


def test_iterate_aiokafka(benchmark, batch_bytes):
    info(benchmark, "v2 iterate 1000x100B", N, "records", peer=True)

    def run():
        batch = AioBatch(batch_bytes)
        if not batch.validate_crc():
            raise AssertionError("crc")
        n = 0
        for record in batch:
            n += len(record.value)
        return n

    assert benchmark(run) == 100 * N


# -- columnar -------------------------------------------------------------------


@pytest.fixture(scope="module")
def hundred_batches(values):
    out = bytearray()
    for i in range(100):
        out += default_records.build_batch(values, timestamps=TS, base_offset=i * N)
    return bytes(out)


@pytest.mark.parametrize("name, impl", IMPLS, ids=[n for n, _ in IMPLS])
def test_columnar(benchmark, hundred_batches, name, impl):
    info(benchmark, "columnar 100x1000", 100 * N, "records", target=">= 40M records/s")
    lo = hi = None
    if name == "pure":
        benchmark.pedantic(lambda: impl.decode_columns(hundred_batches, True, True, lo, hi), rounds=3)
        return
    cols = columnar.RecordColumns(*benchmark(impl.decode_columns, hundred_batches, True, True, lo, hi))
    assert len(cols) == 100 * N and int(cols.offsets[-1]) == 100 * N - 1


def test_columnar_aiokafka_iteration(benchmark, hundred_batches, batch_bytes):
    info(benchmark, "columnar 100x1000", 100 * N, "records", peer=True)
    size = len(batch_bytes)
    slices = [hundred_batches[i * size : (i + 1) * size] for i in range(100)]

    def run():
        n = 0
        for s in slices:
            batch = AioBatch(s)
            batch.validate_crc()
            for _ in batch:
                n += 1
        return n

    assert benchmark(run) == 100 * N


# -- validate and assign offsets ------------------------------------------------------


@pytest.fixture(scope="module")
def megabyte_batch():
    rng = random.Random(3)
    values = [bytes(rng.getrandbits(8) for _ in range(100)) for _ in range(9000)]
    data = bytes(default_records.build_batch(values, timestamps=TS))
    assert 0.9e6 < len(data) < 1.1e6
    return data


@pytest.mark.parametrize("name, impl", IMPLS, ids=[n for n, _ in IMPLS])
def test_validate_assign(benchmark, megabyte_batch, name, impl):
    info(benchmark, "validate+assign 1MB", len(megabyte_batch), "B", target=">= 5 GB/s")
    buf = bytearray(megabyte_batch)
    offsets = iter(range(0, 1 << 62, 10_000))
    if name == "pure":
        appended = benchmark.pedantic(lambda: impl.assign_offsets(buf, next(offsets), 1, None), rounds=3)
    else:
        appended = benchmark(lambda: impl.assign_offsets(buf, next(offsets), 1, None))
    assert appended[2] == 9000


def test_validate_aiokafka_iteration(benchmark, megabyte_batch):
    info(benchmark, "validate+assign 1MB", len(megabyte_batch), "B", peer=True)

    def run():
        batch = AioBatch(megabyte_batch)
        if not batch.validate_crc():
            raise AssertionError("crc")
        return sum(1 for _ in batch)

    assert benchmark(run) == 9000
