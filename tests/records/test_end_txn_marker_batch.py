"""A transaction marker's control batch (KIP-98), as Kafka lays it out, and every reader's view of it.

Kafka writes a COMMIT or ABORT marker with ``MemoryRecords.withEndTransactionMarker``: one
uncompressed v2 batch, transactional and control (attributes 0x30), CreateTime, carrying the
producer's id and epoch and no sequence (-1), holding one record whose timestamp is the batch's
and whose deltas are 0::

    key   => Version int16 (0), Type int16 (0 ABORT, 1 COMMIT)       ControlRecordType.recordKey
    value => Version int16 (0), CoordinatorEpoch int32               EndTransactionMarker.serializeValue

so the batch is 61 + 17 bytes (Kafka sizes its buffer as ``RECORD_BATCH_OVERHEAD +
CURRENT_END_TXN_SCHEMA_RECORD_SIZE``). pylogq's batch builder, compiled and pure (the ``impl``
fixture), builds those bytes, written here field by field with ``struct`` and the CRC-32C of an
independent library. kafka-python's and aiokafka's readers read it as a marker; pylogq's readers
(the walkers, the producer-batch validation, record iteration, the columnar decoder, down
conversion, the timestamp search, a segment's reader and dump-log) see a control batch and give
applications none of its records.
"""

from __future__ import annotations

import importlib
import io
import struct
from typing import Any, List

import crc32c as crc32c_peer
import pytest
from aiokafka.record.control_record import ABORT_MARKER, COMMIT_MARKER
from aiokafka.record.control_record import ControlRecord as AioControlRecord
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from kafka.record.default_records import DefaultRecordBatch as KpBatch

from tests.conftest import IMPLEMENTATIONS
from pylogq import records
from pylogq.cli import dump_log
from pylogq.records import default_records
from pylogq.records.downconvert import down_convert_buffer
from pylogq.records.record_times import iter_record_times
from pylogq.storage.segment import SegmentReader

TS = 1_700_000_000_000
ABORT, COMMIT = 0, 1
PRODUCER_ID, PRODUCER_EPOCH, COORDINATOR_EPOCH = 4000, 3, 7


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request: Any) -> Any:
    if request.param == "pure":
        return default_records
    # A compiled module that does not import fails here: never a skip.
    return importlib.import_module("pylogq._core._records")


def marker_batch(impl: Any, control_type: int, base_offset: int = 0, partition_leader_epoch: int = 0) -> bytes:
    """The marker batch as the builder makes it with Kafka's settings for one."""
    builder = impl.RecordBatchBuilder(0, base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                                      producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH,
                                      base_sequence=-1, is_transactional=True, is_control=True)
    builder.append(0, TS, struct.pack(">hh", 0, control_type), struct.pack(">hi", 0, COORDINATOR_EPOCH))
    return bytes(builder.build())


def golden(control_type: int, base_offset: int, partition_leader_epoch: int) -> bytes:
    """Kafka's DefaultRecordBatch of one EndTransactionMarker record, field by field."""
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, COORDINATOR_EPOCH)
    record_body = (
        b"\x00"                             # attributes
        + b"\x00"                           # timestamp delta (varlong 0)
        + b"\x00"                           # offset delta (varint 0)
        + b"\x08" + key                     # key length 4 (zigzag varint 8)
        + b"\x0c" + value                   # value length 6 (zigzag varint 12)
        + b"\x00"                           # no headers
    )
    record = bytes([len(record_body) * 2]) + record_body  # length 16, zigzag
    after_crc = struct.pack(
        ">hiqqqhii",
        0x30,                               # attributes: transactional (bit 4) and control (bit 5), codec none
        0,                                  # last offset delta
        TS, TS,                             # base and max timestamp
        PRODUCER_ID, PRODUCER_EPOCH,
        -1,                                 # base sequence: none
        1,                                  # records
    ) + record
    length = 4 + 1 + 4 + len(after_crc)     # partition leader epoch, magic, CRC, the rest
    return (struct.pack(">qiib", base_offset, length, partition_leader_epoch, 2)
            + struct.pack(">I", crc32c_peer.crc32c(after_crc)) + after_crc)


# -- the bytes --------------------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [ABORT, COMMIT])
def test_the_builder_makes_kafkas_marker_batch(impl: Any, control_type: int) -> None:
    expected = golden(control_type, 1234, 5)
    assert len(expected) == 61 + 17  # RECORD_BATCH_OVERHEAD + CURRENT_END_TXN_SCHEMA_RECORD_SIZE
    assert marker_batch(impl, control_type, base_offset=1234, partition_leader_epoch=5) == expected


def test_the_golden_commit_marker() -> None:
    # The same bytes spelled out, so a slip in golden() itself cannot pass unseen.
    assert golden(COMMIT, 0, 0).hex() == (
        "0000000000000000" "00000042" "00000000" "02" + "%08x" % crc32c_peer.crc32c(golden(COMMIT, 0, 0)[21:])
        + "0030" "00000000" "0000018bcfe56800" "0000018bcfe56800" "0000000000000fa0" "0003" "ffffffff" "00000001"
        + "20" "00" "00" "00" "08" "00000001" "0c" "000000000007" "00")


@pytest.mark.parametrize("control_type", [ABORT, COMMIT])
def test_pylogqs_batch_view(impl: Any, control_type: int) -> None:
    batch = impl.RecordBatch(marker_batch(impl, control_type, base_offset=9))
    assert batch.is_control_batch and batch.is_transactional and batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (PRODUCER_ID, PRODUCER_EPOCH, -1)
    assert (batch.compression_type, batch.timestamp_type, batch.last_sequence) == (0, records.CREATE_TIME, -1)
    (record,) = batch.records()
    assert record.is_control and record.control_type == control_type
    assert (record.offset, record.timestamp, record.headers) == (9, TS, [])
    assert record.value == struct.pack(">hi", 0, COORDINATOR_EPOCH)


# -- other clients' readers -------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [ABORT, COMMIT])
def test_kafka_python_reads_a_marker(impl: Any, control_type: int) -> None:
    batch = KpBatch(marker_batch(impl, control_type, base_offset=9))
    assert batch.is_control_batch and batch.is_transactional and batch.validate_crc()
    (record,) = list(batch)
    assert (record.version, record.type, record.offset) == (0, control_type, 9)
    assert record.commit == (control_type == COMMIT) and record.abort == (control_type == ABORT)


@pytest.mark.parametrize("control_type", [ABORT, COMMIT])
def test_aiokafka_reads_a_marker(impl: Any, control_type: int) -> None:
    batch = AioBatch(marker_batch(impl, control_type, base_offset=9))
    assert batch.is_control_batch and batch.is_transactional and batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch) == (PRODUCER_ID, PRODUCER_EPOCH)
    # What aiokafka's read_committed fetcher looks at to drop an aborted transaction.
    (record,) = list(batch)
    assert AioControlRecord.parse(record.key) == (ABORT_MARKER if control_type == ABORT else COMMIT_MARKER)


# -- pylogq's readers -------------------------------------------------------------------------


def _partition_log(impl: Any) -> bytes:
    """A transaction's two records at offsets 0-1, its COMMIT marker at 2, a plain record at 3."""
    data = impl.RecordBatchBuilder(0, producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH, base_sequence=0,
                                   is_transactional=True)
    data.append(0, TS, b"k0", b"v0")
    data.append(1, TS, b"k1", b"v1")
    plain = impl.RecordBatchBuilder(0, base_offset=3)
    plain.append(0, TS + 1, b"k3", b"v3")
    return bytes(data.build()) + marker_batch(impl, COMMIT, base_offset=2) + bytes(plain.build())


def test_the_walkers_see_a_control_batch(impl: Any) -> None:
    log = _partition_log(impl)
    headers = list(records.iter_batches(log, check_crc=True))
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 1), (2, 2), (3, 3)]
    control = [bool(h.attributes & records.CONTROL_MASK) for h in headers]
    transactional = [bool(h.attributes & records.TRANSACTIONAL_MASK) for h in headers]
    assert control == [False, True, False] and transactional == [True, True, False]
    assert (headers[1].producer_id, headers[1].producer_epoch, headers[1].base_sequence) == (
        PRODUCER_ID, PRODUCER_EPOCH, -1)
    assert records.scan(log) == records.ScanResult(len(log), 3, None, None)
    # The producer-batch validation an append makes: whole, CRC-clean, headers as the walker's.
    checked, count, keyless = records.validate_batches(log, require_keys=True)
    assert [tuple(h) for h in checked] == [tuple(h) for h in headers] and (count, keyless) == (4, -1)


def test_record_readers_keep_markers_from_applications(impl: Any) -> None:
    log = _partition_log(impl)
    # Iterating batches gives the marker as a control record.
    everything = [r for h in records.iter_batches(log)
                  for r in records.RecordBatch(log, h.position)]
    assert [(r.offset, r.is_control, r.control_type) for r in everything] == [
        (0, False, -1), (1, False, -1), (2, True, COMMIT), (3, False, -1)]
    # The columnar decoder (read_topic, the Spark source) leaves it out unless asked.
    assert records.decode_columns(log).offsets.tolist() == [0, 1, 3]
    assert records.decode_columns(log, skip_control=False).offsets.tolist() == [0, 1, 2, 3]
    # Down conversion for an old consumer drops it: a v0/v1 message set has no control records.
    for magic in (0, 1):
        converted = down_convert_buffer(log, magic)
        assert [h.base_offset for h in records.iter_batches(converted)] == [0, 1, 3]
    # The search by timestamp sees no record in it.
    marker_at = list(records.iter_batches(log))[1].position
    assert list(iter_record_times(log, marker_at)) == []


def test_a_segment_reader_and_dump_log_see_a_control_batch(impl: Any, tmp_path: Any) -> None:
    path = tmp_path / ("%020d.log" % 0)
    path.write_bytes(_partition_log(impl))
    reader = SegmentReader.open(str(path))
    try:
        headers = [b.header for b in reader.batches(check_crc=True)]
    finally:
        reader.close()
    assert [bool(h.attributes & records.CONTROL_MASK) for h in headers] == [False, True, False]
    out, err = io.StringIO(), io.StringIO()
    assert dump_log.run(dump_log.build_parser().parse_args(["--deep-iteration", "--files", str(path)]),
                        out, err) == 0, err.getvalue()
    lines: List[str] = out.getvalue().splitlines()
    (marker,) = [ln for ln in lines if ln.startswith("baseOffset: 2 ")]
    assert "isTransactional: true isControl: true" in marker
    assert "producerId: %d producerEpoch: %d" % (PRODUCER_ID, PRODUCER_EPOCH) in marker
    (record,) = [ln for ln in lines if ln.startswith("| offset: 2 ")]
    assert record.endswith("endTxnMarker: COMMIT coordinatorEpoch: %d" % COORDINATOR_EPOCH)
    assert not err.getvalue()
