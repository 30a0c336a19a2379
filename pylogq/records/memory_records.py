"""Buffers of batches: walking, validating and assigning offsets.

A buffer of batches is what a segment file, a produce request and a fetch
response hold: entries laid end to end, each ``[offset int64][length int32]``
then ``length`` bytes. Byte 16 of every entry is its magic in all three formats
(v2 batch: after the partition leader epoch; v0/v1 message: after the CRC), so
the walker frames entries of any format. A fetch response may end with a
partial entry; the walker stops before it and reports the exact length of the
valid prefix, which is also where log recovery truncates a segment.
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple, Optional, Union

from ..errors import CorruptRecordError
from . import _impl
from . import default_records as _v2py

__all__ = ["AppendInfo", "BatchInfo", "ScanResult", "assign_offsets", "iter_batches", "scan", "valid_prefix_length"]

Buffer = Union[bytes, bytearray, memoryview]


class BatchInfo(NamedTuple):
    """Where one entry lies in a buffer and what its header says."""

    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    records_count: int  # -1 for a v0/v1 message (a wrapper's count needs decompression)


class ScanResult(NamedTuple):
    """The outcome of walking a buffer: the valid prefix and why it ended."""

    valid_bytes: int
    batches: int
    error: Optional[str]  # None when it stopped at the end or before a partial entry


class AppendInfo(NamedTuple):
    """What validating and assigning offsets to a producer's buffer found."""

    first_offset: int
    last_offset: int
    record_count: int
    batch_count: int
    max_timestamp: int
    offset_of_max_timestamp: int


def scan(buffer: Buffer, position: int = 0, check_crc: bool = True) -> ScanResult:
    """Walk whole entries from ``position``; stop at the end, a partial or a bad entry."""
    return ScanResult(*_impl.scan_entries(buffer, position, check_crc))


def valid_prefix_length(buffer: Buffer, position: int = 0, check_crc: bool = True) -> int:
    """Bytes of whole, well-formed entries from ``position`` (CRC checked by default)."""
    return _impl.scan_entries(buffer, position, check_crc)[0]


_V2_FIELDS = struct.Struct(">qi")


def iter_batches(buffer: Buffer, position: int = 0, check_crc: bool = False) -> Iterator[BatchInfo]:
    """Yield each whole entry's BatchInfo; a partial entry at the end ends the walk.

    A malformed entry (bad magic, impossible length, and with ``check_crc`` a
    CRC mismatch) raises CorruptRecordError naming its byte position.
    """
    buf = _v2py._as_bytes_view(buffer)
    end = len(buf)
    pos = position
    while pos < end:
        size, magic = _v2py._frame_entry(buf, pos, end, False)
        if size == 0:
            return
        if check_crc:
            _, _, error = _impl.scan_entries(memoryview(buf)[pos : pos + size], 0, True)
            if error is not None:
                raise CorruptRecordError(error.replace("at byte 0", "at byte %d" % pos))
        (offset,) = struct.unpack_from(">q", buf, pos)
        if magic == 2:
            (last_delta,) = struct.unpack_from(">i", buf, pos + _v2py.LAST_OFFSET_DELTA_OFFSET)
            (max_ts,) = struct.unpack_from(">q", buf, pos + _v2py.MAX_TIMESTAMP_OFFSET)
            (count,) = struct.unpack_from(">i", buf, pos + _v2py.RECORDS_COUNT_OFFSET)
            yield BatchInfo(pos, size, 2, offset, offset + last_delta, max_ts, count)
        else:
            ts = struct.unpack_from(">q", buf, pos + 18)[0] if magic == 1 else -1
            yield BatchInfo(pos, size, magic, offset, offset, ts, -1)
        pos += size


def assign_offsets(
    buffer: Union[bytearray, memoryview],
    base_offset: int,
    partition_leader_epoch: int = 0,
    log_append_time: Optional[int] = None,
) -> AppendInfo:
    """Validate a producer's batches and give their records offsets from ``base_offset``.

    v2 batches are patched in place: each batch's base offset and partition
    leader epoch (neither is covered by the CRC, so no re-hash); with
    ``log_append_time`` (ms) the timestamp type bit and max timestamp are set
    and the CRC recomputed, as Kafka does for LogAppendTime topics. Every batch
    is checked whole first (CRC, framing, count against the offset range,
    every record's structure); nothing is patched unless all are valid.
    Raises CorruptRecordError for bad bytes and InvalidRecordError for a
    well-formed batch a producer may not send (no records, offset gaps).
    """
    return AppendInfo(*_impl.assign_offsets(buffer, base_offset, partition_leader_epoch, log_append_time))
