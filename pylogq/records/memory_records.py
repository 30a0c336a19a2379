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
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..errors import CorruptRecordError, RecordProblem
from . import _impl
from . import default_records as _v2py
from .default_records import BATCH_HEADER, ENTRY_HEAD

__all__ = [
    "AppendResult", "BatchHeader", "ScanResult", "assign_offsets", "iter_batches", "parse_header",
    "patch_offsets", "scan", "uncompressed_v2", "valid_prefix_length", "validate_batches",
]

Buffer = Union[bytes, bytearray, memoryview]


class BatchHeader(NamedTuple):
    """One entry of a buffer of batches as its header says, in any format: pylogq's one batch-header type.

    What the walker, a segment's reader, an append (producer state, index
    entries, size and time checks) and the cleaner read of an entry. A v0/v1
    entry is one message (a compressed wrapper carries its last inner offset):
    ``records_count`` -1 (a wrapper's count needs decompression), no producer.
    """

    position: int
    size: int  # the whole entry, offset and length included
    magic: int
    base_offset: int
    last_offset: int
    max_timestamp: int  # v2: the log append time on LogAppendTime batches; v0: -1
    records_count: int = -1
    attributes: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1



class ScanResult(NamedTuple):
    """The outcome of walking a buffer: the valid prefix and why it ended."""

    valid_bytes: int
    batches: int
    error: Optional[str]  # None when it stopped at the end or before a partial entry
    problem: Optional[RecordProblem] = None  # the error's kind


class AppendResult(NamedTuple):
    """What one append did, from the log to the wire: Kafka's LogAppendInfo and PartitionResponse in one.

    ``Log.append`` fills it, ``Partition.append`` returns it (``duplicate``
    for a retried idempotent batch: the offsets and time are the original
    append's and nothing was written), and the first five fields are a
    ProduceResponse partition's. ``error_code`` is 0 for an append that
    happened (a failed one raises); a client reading a response sets it.
    """

    error_code: int
    base_offset: int  # the first offset (Kafka's LogAppendInfo calls it firstOffset)
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int  # -1 where no log is involved (records.assign_offsets)
    record_count: int
    last_offset: int = -1
    batch_count: int = 0
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    duplicate: bool = False

    @property
    def first_offset(self) -> int:
        """Kafka's LogAppendInfo name for :attr:`base_offset`."""
        return self.base_offset


def scan(buffer: Buffer, position: int = 0, check_crc: bool = True) -> ScanResult:
    """Walk whole entries from ``position``; stop at the end, a partial or a bad entry."""
    return ScanResult(*_impl.scan_entries(buffer, position, check_crc))


def valid_prefix_length(buffer: Buffer, position: int = 0, check_crc: bool = True) -> int:
    """Bytes of whole, well-formed entries from ``position`` (CRC checked by default)."""
    return _impl.scan_entries(buffer, position, check_crc)[0]


_LEGACY_ATTRIBUTES = _v2py.ENTRY_MAGIC_OFFSET + 1
_LEGACY_TIMESTAMP = _LEGACY_ATTRIBUTES + 1  # v1 only


def parse_header(head: Buffer, position: int, start: int = 0) -> BatchHeader:
    """The header of the entry at ``start`` of ``head``, reported at ``position``.

    ``head`` holds at least 17 bytes of the entry (its magic), 61 for every
    field of a v2 batch (fewer give its offsets as a v0/v1 entry's). Framing is
    the caller's (:func:`iter_batches`, the segment reader): nothing is checked.
    """
    have = len(head) - start
    magic = head[start + _v2py.ENTRY_MAGIC_OFFSET]
    if magic == 2 and have >= _v2py.HEADER_SIZE:
        (base, length, _, _, _, attributes, last_delta, _, max_ts, pid, epoch, seq,
         count) = BATCH_HEADER.unpack_from(head, start)
        return BatchHeader(position, _v2py.LOG_OVERHEAD + length, 2, base, base + last_delta, max_ts, count,
                           attributes & 0xFFFF, pid, epoch, seq)
    base, length = ENTRY_HEAD.unpack_from(head, start)
    max_ts = struct.unpack_from(">q", head, start + _LEGACY_TIMESTAMP)[0] if magic == 1 and have >= 26 else -1
    attributes = head[start + _LEGACY_ATTRIBUTES] if have > _LEGACY_ATTRIBUTES else 0
    return BatchHeader(position, _v2py.LOG_OVERHEAD + length, magic, base, base, max_ts, -1, attributes)


def iter_batches(buffer: Buffer, position: int = 0, check_crc: bool = False) -> Iterator[BatchHeader]:
    """Yield each whole entry's header; a partial entry at the end ends the walk.

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
            _, _, error, _ = _impl.scan_entries(memoryview(buf)[pos : pos + size], 0, True)
            if error is not None:
                raise CorruptRecordError(error.replace("at byte 0", "at byte %d" % pos), kind=RecordProblem.BAD_CRC)
        yield parse_header(buf, pos, pos)
        pos += size


def uncompressed_v2(buffer: Buffer) -> bool:
    """True when every entry of a producer's buffer is an uncompressed v2 batch.

    Such a buffer is validated in one pass over its bytes; a compressed batch
    may stand for far more bytes than it has, and a v0/v1 message set is
    checked message by message in Python. Only each entry's length, magic and
    attributes are read, nothing is checked: a malformed buffer answers either
    way and fails its (then cheap) validation. The server appends what this
    accepts on its event loop and the rest in its executor.
    """
    view = buffer if isinstance(buffer, (bytes, bytearray)) else memoryview(buffer).cast("B")
    end = len(view)
    pos = 0
    while pos < end:
        if end - pos <= _v2py.MAGIC_OFFSET:
            return True
        if view[pos + _v2py.MAGIC_OFFSET] != _v2py.MAGIC:
            return False
        if end - pos < _v2py.HEADER_SIZE:
            return True
        if view[pos + _v2py.ATTRIBUTES_OFFSET + 1] & _v2py.COMPRESSION_MASK:
            return False
        length = ENTRY_HEAD.unpack_from(view, pos)[1]
        if length < _v2py.HEADER_SIZE - _v2py.LOG_OVERHEAD:
            return True
        pos += _v2py.LOG_OVERHEAD + length
    return True


def validate_batches(buffer: Buffer, require_keys: bool = False) -> Tuple[List[BatchHeader], int, int]:
    """Check a producer's v2 batches in one pass over the buffer; -> (headers, records, keyless).

    The one walk an append makes: every batch's framing, CRC-32C, count
    against its offset range and every record's structure (decompressing when
    needed), collecting each batch's header (producer fields, size, offsets
    as the buffer says, max timestamp) and the record count. With
    ``require_keys`` (a compacted topic) it also finds the first record
    without a key: ``keyless`` is its offset delta from the buffer's first
    offset, -1 when every record has one. Patches nothing. Raises
    CorruptRecordError for bad bytes and InvalidRecordError for a well-formed
    batch a producer may not send (no records, offset gaps).

    A compressed batch is read as it decompresses (``codecs.DecompressStream``),
    a chunk at a time, the bytes of records larger than
    ``codecs.DECOMPRESS_WINDOW`` skipped instead of kept, so memory stays
    bounded whatever the compression ratio; more than
    ``codecs.MAX_DECOMPRESSED`` decompressed bytes in one batch raise
    MessageTooLargeError (docs/operations.md, "Compressed batches").
    """
    headers, records, keyless = _impl.validate_batches(buffer, require_keys)
    return [BatchHeader._make(h) for h in headers], records, keyless


def patch_offsets(
    buffer: Union[bytearray, memoryview],
    headers: Sequence[BatchHeader],
    base_offset: int,
    partition_leader_epoch: int = 0,
    log_append_time: Optional[int] = None,
) -> List[BatchHeader]:
    """Give the batches :func:`validate_batches` accepted their offsets from ``base_offset``; -> headers as written.

    Patches each batch's base offset and partition leader epoch in place
    (neither is covered by the CRC, so no re-hash); with ``log_append_time``
    (ms) the timestamp type bit and max timestamp are set and the CRC
    recomputed, as Kafka does for LogAppendTime topics. Reads no record: the
    headers say where the batches are, and are checked against the buffer
    (ValueError when they do not describe it).
    """
    written = _impl.patch_offsets(buffer, headers, base_offset, partition_leader_epoch, log_append_time)
    return [BatchHeader._make(h) for h in written]


def assign_offsets(
    buffer: Union[bytearray, memoryview],
    base_offset: int,
    partition_leader_epoch: int = 0,
    log_append_time: Optional[int] = None,
) -> AppendResult:
    """Validate a producer's batches and give their records offsets from ``base_offset``.

    :func:`validate_batches` then :func:`patch_offsets`: every batch is
    checked whole first, nothing is patched unless all are valid. Raises
    CorruptRecordError for bad bytes and InvalidRecordError for a
    well-formed batch a producer may not send (no records, offset gaps).
    No log is involved: ``log_start_offset`` is -1.
    """
    first, last, records, batches, max_ts, max_ts_offset = _impl.assign_offsets(
        buffer, base_offset, partition_leader_epoch, log_append_time)
    lat = -1 if log_append_time is None else log_append_time
    return AppendResult(0, first, lat, -1, records, last, batches, max_ts, max_ts_offset)
