"""Record batch hot paths: pylogq against aiokafka's Cython records, in the same run.

A ratio is printed only between rows that do the same task (same input, same
result); a row that does less is marked as context and gets none.

Groups and targets:
- "v2 build 1000x100B": build one v2 batch of 1,000 records with 100-byte
  values; pylogq record by record (``append``) and in one call
  (``build_batch``) against aiokafka 0.14's Cython ``DefaultRecordBatchBuilder``
  (the peer) and kafka-python's pure builder. Target >= 1.5x aiokafka.
- "v2 iterate 1000x100B": CRC check then every record as an object; pylogq
  against aiokafka's Cython ``DefaultRecordBatch`` (the peer). Target >= 1.5x.
- "columnar 100x1000": 100 such batches, CRC-checked, into numpy columns
  (offsets, timestamps, timestamp types, key and value places and lengths,
  header counts). Target >= 40M records/s. The peer does the same with
  aiokafka's reader: each record's fields gathered into the same columns, keys
  and values copied into one buffer (aiokafka has no columnar decode). Context:
  aiokafka iterating the batches without building columns.
- "validate+assign 1MB": check a 1 MB batch of 100-byte records (its CRC and
  every record's framing) and assign its offsets in place. Target >= 5 GB/s.
  The peer does the same with aiokafka, which has no check that reads no
  record: its CRC check, every record parsed (its reader raises on a record
  whose framing is off), then the base offset and leader epoch written; both
  give the same bytes and the same offsets.
"""

from __future__ import annotations

import importlib
import random
import struct

import numpy as np

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


@pytest.fixture(scope="module")
def hundred_slices(hundred_batches, batch_bytes):
    size = len(batch_bytes)
    return [hundred_batches[i * size : (i + 1) * size] for i in range(100)]


@pytest.mark.parametrize("name, impl", IMPLS, ids=[n for n, _ in IMPLS])
def test_columnar(benchmark, hundred_batches, name, impl):
    info(benchmark, "columnar 100x1000", 100 * N, "records", target=">= 40M records/s")
    lo = hi = None
    if name == "pure":
        columns = benchmark.pedantic(lambda: impl.decode_columns(hundred_batches, True, True, lo, hi), rounds=3)
    else:
        columns = benchmark(impl.decode_columns, hundred_batches, True, True, lo, hi)
    cols = columnar.RecordColumns(*columns)
    assert len(cols) == 100 * N and int(cols.offsets[-1]) == 100 * N - 1


def _aiokafka_columns(slices):
    """The columns of ``decode_columns`` built with aiokafka's reader: -> (columns, data)."""
    offsets, timestamps, types = [], [], []
    key_start, key_length, value_start, value_length, headers_count = [], [], [], [], []
    data = bytearray()
    for s in slices:
        batch = AioBatch(s)
        if not batch.validate_crc():
            raise AssertionError("crc")
        timestamp_type = batch.timestamp_type
        for record in batch:
            offsets.append(record.offset)
            timestamps.append(record.timestamp)
            types.append(timestamp_type)
            key = record.key
            key_start.append(len(data))
            if key is None:
                key_length.append(-1)
            else:
                key_length.append(len(key))
                data += key
            value = record.value
            value_start.append(len(data))
            if value is None:
                value_length.append(-1)
            else:
                value_length.append(len(value))
                data += value
            headers_count.append(len(record.headers))
    columns = (np.array(offsets, np.int64), np.array(timestamps, np.int64), np.array(types, np.int8),
               np.array(key_start, np.int64), np.array(key_length, np.int32), np.array(value_start, np.int64),
               np.array(value_length, np.int32), np.array(headers_count, np.int32))
    return columns, bytes(data)


def test_columnar_aiokafka(benchmark, hundred_batches, hundred_slices):
    info(benchmark, "columnar 100x1000", 100 * N, "records", peer=True)
    columns, data = benchmark(_aiokafka_columns, hundred_slices)
    offsets, timestamps, _, _, _, value_start, value_length, _ = columns
    ours = columnar.RecordColumns(*default_records.decode_columns(hundred_batches, True, True, None, None))
    assert np.array_equal(offsets, ours.offsets) and np.array_equal(timestamps, ours.timestamps)
    assert np.array_equal(value_length, ours.value_length)
    last, last_ours = int(value_start[-1]), int(ours.value_start[-1])
    assert data[last : last + 100] == ours.data[last_ours : last_ours + 100]


def test_columnar_aiokafka_iteration(benchmark, hundred_slices):
    """aiokafka iterating the same batches, building nothing: for scale."""
    info(benchmark, "columnar 100x1000", 100 * N, "records", context=True)

    def run():
        n = 0
        for s in hundred_slices:
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


#: The v2 batch header's first fields: base offset, length, partition leader epoch.
_BASE_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")


def _aiokafka_assign(buf, base_offset, leader_epoch):
    """``assign_offsets`` of one batch with aiokafka's reader: -> the same (first, last, records, batches,
    max timestamp, its offset)."""
    batch = AioBatch(buf)
    if not batch.validate_crc():
        raise AssertionError("crc")
    records = 0
    for _ in batch:  # aiokafka's reader checks each record's framing as it parses it
        records += 1
    _, length, _ = _BASE_OFFSET_LENGTH_EPOCH.unpack_from(buf, 0)
    _BASE_OFFSET_LENGTH_EPOCH.pack_into(buf, 0, base_offset, length, leader_epoch)
    last = base_offset + batch.last_offset_delta
    return base_offset, last, records, 1, batch.max_timestamp, last


def test_validate_assign_aiokafka(benchmark, megabyte_batch):
    info(benchmark, "validate+assign 1MB", len(megabyte_batch), "B", peer=True)
    buf = bytearray(megabyte_batch)
    offsets = iter(range(0, 1 << 62, 10_000))
    appended = benchmark(lambda: _aiokafka_assign(buf, next(offsets), 1))
    assert appended[2] == 9000
    ours = bytearray(megabyte_batch)
    assert default_records.assign_offsets(ours, appended[0], 1, None) == appended and ours == buf
