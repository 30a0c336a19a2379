"""Control records: the transaction markers a control batch carries (Kafka's ControlRecordType and
EndTransactionMarker).

A control batch (attribute bit 5) holds one record, the control record, which
applications never see. Its key says what it is; a COMMIT or ABORT marker's
value carries the epoch of the transaction coordinator that wrote it::

    ControlRecordKey =>            offset  size
      Version          int16       0       2   0
      Type             int16       2       2   0 ABORT, 1 COMMIT (others: KRaft's)

    EndTransactionMarker value =>
      Version          int16       0       2   0 (a later version is read as 0)
      CoordinatorEpoch int32       2       4

A transaction marker's batch is transactional and control, carries the
producer's id and epoch, no sequence (-1), and is never compressed. A control
batch with no record is one the cleaner emptied: it marks nothing.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Optional, Union

from ..errors import InvalidRecordError
from ._impl import RecordBatch, RecordBatchBuilder
from .default_records import NO_SEQUENCE

__all__ = ["ABORT", "COMMIT", "CONTROL_KEY", "CONTROL_KEY_SIZE", "END_TXN_MARKER_VALUE", "END_TXN_MARKER_VALUE_SIZE",
           "EndTxnMarker", "build_end_txn_marker", "end_txn_marker", "control_key", "end_txn_marker_value"]

Buffer = Union[bytes, bytearray, memoryview]

#: Control record types (Kafka's ControlRecordType): the two transaction markers.
ABORT = 0
COMMIT = 1
_TYPE_NAMES = {ABORT: "ABORT", COMMIT: "COMMIT"}

CONTROL_KEY = struct.Struct(">hh")  # version, type
CONTROL_KEY_SIZE = CONTROL_KEY.size
END_TXN_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch
END_TXN_MARKER_VALUE_SIZE = END_TXN_MARKER_VALUE.size


class EndTxnMarker(NamedTuple):
    """A COMMIT or ABORT marker: how the transaction ended and the coordinator epoch that ended it."""

    control_type: int  # ABORT or COMMIT
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == ABORT

    def __repr__(self) -> str:
        return "EndTxnMarker(%s, coordinator_epoch=%d)" % (_TYPE_NAMES.get(self.control_type, self.control_type),
                                                            self.coordinator_epoch)


def control_key(control_type: int) -> bytes:
    """The key of a control record of ``control_type`` (version 0)."""
    return CONTROL_KEY.pack(0, control_type)


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    """The value of a transaction marker written by a coordinator in ``coordinator_epoch`` (version 0)."""
    return END_TXN_MARKER_VALUE.pack(0, coordinator_epoch)


def build_end_txn_marker(producer_id: int, producer_epoch: int, control_type: int, coordinator_epoch: int,
                         timestamp: int, *, base_offset: int = 0, partition_leader_epoch: int = 0) -> bytearray:
    """A control batch holding one COMMIT or ABORT marker of ``producer_id`` (Kafka's
    MemoryRecords.withEndTransactionMarker): transactional, uncompressed, no sequence."""
    if control_type not in _TYPE_NAMES:
        raise InvalidRecordError("a transaction marker is ABORT (0) or COMMIT (1), not control type %r"
                                 % (control_type,))
    builder = RecordBatchBuilder(0, base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                                 producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                                 is_transactional=True, is_control=True)
    builder.append(0, timestamp, control_key(control_type), end_txn_marker_value(coordinator_epoch))
    return builder.build()


def end_txn_marker(buffer: Buffer, position: int = 0) -> Optional[EndTxnMarker]:
    """The transaction marker of the control batch at ``position`` of ``buffer``; None for a control
    batch with no record left (emptied by the cleaner: it marks nothing).

    Kafka's EndTransactionMarker.deserialize on the batch's first record. The
    batch's CRC is not checked here (the log checked it on the way in). A key
    or value too short, a negative version or a type other than ABORT and
    COMMIT raise :class:`~pylogq.errors.InvalidRecordError`, as Kafka refuses
    them; bytes that do not decode raise CorruptRecordError.
    """
    records = RecordBatch(buffer, position, check_crc=False).records()
    if not records:
        return None
    record = records[0]
    key, value = record.key, record.value
    if key is None or len(key) < CONTROL_KEY_SIZE:
        raise InvalidRecordError("the control record at offset %d has a key of %d bytes; a control record key "
                                 "has at least %d" % (record.offset, 0 if key is None else len(key), CONTROL_KEY_SIZE))
    version, control_type = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError("the control record at offset %d has key version %d: its bytes may be corrupt"
                                 % (record.offset, version))
    if control_type not in _TYPE_NAMES:
        raise InvalidRecordError("the control record at offset %d has type %d, not a transaction marker "
                                 "(ABORT 0 or COMMIT 1)" % (record.offset, control_type))
    if value is None or len(value) < END_TXN_MARKER_VALUE_SIZE:
        raise InvalidRecordError("the transaction marker at offset %d has a value of %d bytes; it needs at least %d"
                                 % (record.offset, 0 if value is None else len(value), END_TXN_MARKER_VALUE_SIZE))
    value_version, coordinator_epoch = END_TXN_MARKER_VALUE.unpack_from(value)
    if value_version < 0:
        raise InvalidRecordError("the transaction marker at offset %d has value version %d: its bytes may be corrupt"
                                 % (record.offset, value_version))
    return EndTxnMarker(control_type, coordinator_epoch)
