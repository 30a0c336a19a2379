"""Control records: COMMIT and ABORT transaction markers, built and read back as Kafka lays them out."""

from __future__ import annotations

import struct

import pytest

from pylogq import records
from pylogq.errors import InvalidRecordError
from pylogq.records.control import (
    ABORT,
    COMMIT,
    EndTxnMarker,
    build_end_txn_marker,
    control_key,
    end_txn_marker,
    end_txn_marker_value,
)
from pylogq.records.crc import crc32c
from pylogq.records.default_records import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, LENGTH_OFFSET, RECORDS_COUNT_OFFSET

TS = 1_700_000_000_000


def control_batch(key, value, producer_id=7, epoch=3):
    """A control batch of one record with ``key`` and ``value`` (not necessarily a marker)."""
    return bytes(records.build_batch([value], keys=[key], timestamps=TS, producer_id=producer_id,
                                     producer_epoch=epoch, is_transactional=True, is_control=True))


def emptied(batch: bytes) -> bytes:
    """``batch`` with its records gone, as the cleaner leaves a control batch it emptied."""
    out = bytearray(batch[:HEADER_SIZE])
    struct.pack_into(">i", out, LENGTH_OFFSET, HEADER_SIZE - 12)
    struct.pack_into(">i", out, RECORDS_COUNT_OFFSET, 0)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


def test_key_and_value_bytes_are_kafkas():
    # ControlRecordType's key (version 0, type) and EndTransactionMarker's value (version 0, epoch).
    assert control_key(ABORT) == bytes.fromhex("00000000")
    assert control_key(COMMIT) == bytes.fromhex("00000001")
    assert end_txn_marker_value(0x01020304) == bytes.fromhex("0000" "01020304")


@pytest.mark.parametrize("control_type", [ABORT, COMMIT])
def test_a_marker_batch_round_trips(control_type):
    data = build_end_txn_marker(42, 5, control_type, 9, TS, base_offset=100, partition_leader_epoch=4)
    (header,) = records.iter_batches(bytes(data), check_crc=True)
    # Transactional and control, the producer's id and epoch, no sequence, one record, uncompressed.
    assert header.attributes == records.TRANSACTIONAL_MASK | records.CONTROL_MASK
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 5, -1)
    assert (header.base_offset, header.last_offset, header.records_count, header.max_timestamp) == (100, 100, 1, TS)
    (record,) = records.RecordBatch(bytes(data))
    assert record.is_control and record.control_type == control_type
    assert record.key == control_key(control_type) and record.value == end_txn_marker_value(9)
    assert end_txn_marker(data) == EndTxnMarker(control_type, 9)
    assert end_txn_marker(data).is_abort == (control_type == ABORT)


def test_a_marker_is_read_where_it_lies_in_a_buffer():
    first = bytes(records.build_batch([b"a", b"b"], timestamps=TS))
    marker = bytes(build_end_txn_marker(1, 0, ABORT, 2, TS, base_offset=2))
    buffer = memoryview(first + marker)
    assert end_txn_marker(buffer, len(first)) == EndTxnMarker(ABORT, 2)


def test_a_later_value_version_is_read_as_version_0():
    data = control_batch(control_key(COMMIT), struct.pack(">hi", 3, 11) + b"more")
    assert end_txn_marker(data) == EndTxnMarker(COMMIT, 11)


def test_an_emptied_control_batch_marks_nothing():
    assert end_txn_marker(emptied(bytes(build_end_txn_marker(1, 0, COMMIT, 0, TS)))) is None


@pytest.mark.parametrize("key, value, match", [
    (b"\x00", end_txn_marker_value(1), "a key of 1 bytes"),
    (None, end_txn_marker_value(1), "a key of 0 bytes"),
    (struct.pack(">hh", -1, 0), end_txn_marker_value(1), "key version -1"),
    (struct.pack(">hh", 0, 2), end_txn_marker_value(1), "type 2, not a transaction marker"),
    (control_key(ABORT), b"\x00\x00\x00", "a value of 3 bytes"),
    (control_key(ABORT), None, "a value of 0 bytes"),
    (control_key(ABORT), struct.pack(">hi", -2, 1), "value version -2"),
])
def test_a_control_record_that_is_no_marker_is_refused(key, value, match):
    with pytest.raises(InvalidRecordError, match=match):
        end_txn_marker(control_batch(key, value))


def test_only_abort_and_commit_are_built():
    with pytest.raises(InvalidRecordError, match="control type 2"):
        build_end_txn_marker(1, 0, 2, 0, TS)


@pytest.mark.parametrize("control_type", [ABORT, COMMIT])
def test_a_marker_batch_is_kafkas_byte_for_byte(control_type):
    from tests.records import test_end_txn_marker_batch as kafka

    built = build_end_txn_marker(kafka.PRODUCER_ID, kafka.PRODUCER_EPOCH, control_type, kafka.COORDINATOR_EPOCH,
                                 kafka.TS, base_offset=42, partition_leader_epoch=5)
    assert bytes(built) == kafka.golden(control_type, 42, 5)  # MemoryRecords.withEndTransactionMarker's bytes
