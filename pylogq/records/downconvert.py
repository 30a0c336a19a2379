"""Down-conversion: a log's entries as the legacy message sets of old Fetch versions.

Fetch v0-1 clients read magic 0 messages and v2-3 clients magic 1; a log holds v2
record batches (and the v0/v1 message sets old producers wrote). Kafka converts on
the way out (its ``RecordsUtil.downConvert``); so does :func:`down_convert`, entry by
entry:

* a v2 batch becomes legacy messages with the same absolute offsets (the gaps
  compaction left are kept), keys, values and, for magic 1, timestamps and
  timestamp type; headers are dropped (legacy messages have none); control
  batches are skipped. An uncompressed batch gives one message per record, from
  the fetch offset on; a compressed one gives one wrapper message of the same
  codec around all its records (a client skips those below its offset). A
  magic 1 wrapper holds inner offsets relative to its first record and carries
  the last record's absolute offset and the largest timestamp; a magic 0 wrapper
  holds absolute inner offsets and carries the last offset.
* a legacy entry whose magic is at most the target passes through unchanged; a
  magic 1 entry becomes magic 0 (a wrapper stays one wrapper of its codec).
* zstd needs magic 2: a zstd batch cannot be converted. The conversion stops
  before it, and when it is the first entry :class:`UnsupportedCompressionTypeError`
  is raised (the partition's answer, as in Kafka).

Memory stays bounded: entries are read one at a time, and the conversion stops
before the converted bytes would pass ``max_bytes``; at least the first converted
message (or wrapper) is returned however large, as Kafka returns a first batch
larger than the fetch's limit. Pure Python; not thread-safe per call, callers run
it off the event loop.
"""

from __future__ import annotations

import struct
from typing import Callable, Iterator, List, Optional, Union

from ..errors import InvalidArgumentError, UnsupportedCompressionTypeError
from . import codecs
from ._impl import RecordBatch
from .default_records import ATTRIBUTES_OFFSET, CONTROL_MASK, ENTRY_HEAD, ENTRY_MAGIC_OFFSET, LOG_OVERHEAD
from .legacy import (
    CODEC_MASK,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    _append_message,
    iter_legacy_messages,
)

__all__ = ["down_convert", "down_convert_buffer", "target_magic"]

Buffer = Union[bytes, bytearray, memoryview]
#: Reads ``n`` bytes at a position of the records being converted (fewer at their end).
ReadAt = Callable[[int, int], bytes]

_HEAD_BYTES = ENTRY_MAGIC_OFFSET + 1  # offset, length, epoch or CRC, magic: enough to frame any entry
_V2_ATTRIBUTES = struct.Struct(">h")


def target_magic(fetch_version: int) -> int:
    """The message format a Fetch version reads: magic 0 for v0-1, 1 for v2-3, 2 from v4."""
    if fetch_version <= 1:
        return 0
    if fetch_version <= 3:
        return 1
    return 2


def _entries(read_at: ReadAt, size: int) -> Iterator[bytes]:
    """Each whole entry of ``size`` bytes of records, read one at a time; stops at a partial one."""
    pos = 0
    while size - pos >= _HEAD_BYTES:
        head = read_at(pos, _HEAD_BYTES)
        if len(head) < _HEAD_BYTES:
            return
        _, length = ENTRY_HEAD.unpack_from(head)
        entry_size = LOG_OVERHEAD + length
        if length < 0 or pos + entry_size > size:
            return
        entry = read_at(pos, entry_size)
        if len(entry) < entry_size:
            return
        yield entry
        pos += entry_size


def down_convert(read_at: ReadAt, size: int, to_magic: int, fetch_offset: int, max_bytes: int) -> bytes:
    """The records at ``read_at`` (``size`` bytes of whole entries) as magic ``to_magic``
    messages, at most ``max_bytes`` of them unless the first is larger.

    Raises :class:`UnsupportedCompressionTypeError` when the first entry to convert is a
    zstd batch; a later one ends the conversion before it.
    """
    if to_magic not in (0, 1):
        raise InvalidArgumentError("to_magic must be 0 or 1, not %r" % (to_magic,))
    out = bytearray()
    for entry in _entries(read_at, size):
        magic = entry[ENTRY_MAGIC_OFFSET]
        if magic <= to_magic:
            units: List[bytes] = [entry]
        elif magic == 2:
            converted = _from_v2(entry, to_magic, fetch_offset, out)
            if converted is None:
                break
            units = converted
        else:
            units = _from_v1(entry)
        for unit in units:
            if out and len(out) + len(unit) > max_bytes:
                return bytes(out)
            out += unit
    return bytes(out)


def down_convert_buffer(buffer: Buffer, to_magic: int, fetch_offset: int = 0,
                        max_bytes: int = 0x7FFFFFFF) -> bytes:
    """:func:`down_convert` over records already in memory."""
    view = memoryview(buffer).cast("B")

    def read_at(position: int, n: int) -> bytes:
        return bytes(view[position:position + n])

    return down_convert(read_at, len(view), to_magic, fetch_offset, max_bytes)


def _from_v2(entry: bytes, to_magic: int, fetch_offset: int, converted: bytearray) -> Optional[List[bytes]]:
    """One v2 batch as legacy messages: one per record when uncompressed, else one wrapper;
    None for a zstd batch after other entries (the conversion ends there)."""
    (attributes,) = _V2_ATTRIBUTES.unpack_from(entry, ATTRIBUTES_OFFSET)
    if attributes & CONTROL_MASK:
        return []
    codec = attributes & CODEC_MASK
    if codec == codecs.ZSTD:
        if converted:
            return None
        base_offset = ENTRY_HEAD.unpack_from(entry)[0]
        raise UnsupportedCompressionTypeError(
            "the batch at offset %d is zstd-compressed, which magic %d messages cannot hold "
            "(Fetch v%s reads them)" % (base_offset, to_magic, "0-1" if to_magic == 0 else "2-3"))
    batch = RecordBatch(entry, 0, False)  # the log checked the CRC on append
    log_append = bool(attributes & TIMESTAMP_TYPE_MASK) and to_magic == 1
    ts_bits = TIMESTAMP_TYPE_MASK if log_append else 0
    records = batch.records()
    if codec == codecs.NONE:
        units = []
        for r in records:
            if r.offset < fetch_offset:
                continue
            message = bytearray()
            timestamp = (batch.max_timestamp if log_append else r.timestamp) if to_magic else NO_TIMESTAMP
            _append_message(message, r.offset, to_magic, ts_bits, timestamp, r.key, r.value)
            units.append(bytes(message))
        return units
    if not records:
        return []
    inner = bytearray()
    first = records[0].offset
    max_timestamp = NO_TIMESTAMP
    for r in records:
        stored = r.offset - first if to_magic else r.offset
        timestamp = (batch.max_timestamp if log_append else r.timestamp) if to_magic else NO_TIMESTAMP
        max_timestamp = max(max_timestamp, timestamp)
        _append_message(inner, stored, to_magic, ts_bits, timestamp, r.key, r.value)
    return [_wrapper(inner, records[-1].offset, to_magic, codec, ts_bits, max_timestamp)]


def _from_v1(entry: bytes) -> List[bytes]:
    """One magic 1 message (or wrapper) as magic 0: timestamps dropped, offsets absolute."""
    out: List[bytes] = []
    for msg in iter_legacy_messages(entry, False, False):
        codec = msg.compression_type
        if codec == codecs.NONE:
            message = bytearray()
            _append_message(message, msg.offset, 0, 0, NO_TIMESTAMP, msg.key, msg.value)
            out.append(bytes(message))
            continue
        records = msg.records(False)
        if not records:
            continue
        inner = bytearray()
        for r in records:
            _append_message(inner, r.offset, 0, 0, NO_TIMESTAMP, r.key, r.value)
        out.append(_wrapper(inner, records[-1].offset, 0, codec, 0, NO_TIMESTAMP))
    return out


def _wrapper(inner: bytearray, last_offset: int, magic: int, codec: int, ts_bits: int, timestamp: int) -> bytes:
    """A wrapper message around a compressed inner message set."""
    out = bytearray()
    value = codecs.compress(codec, inner, magic)
    _append_message(out, last_offset, magic, codec | ts_bits, timestamp, None, value)
    return bytes(out)

