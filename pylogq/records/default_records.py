"""Magic v2 record batches, pure Python (the twin of ``pylogq._core._records``).

RecordBatch =>                        offset  size
  BaseOffset           int64          0       8   not covered by the CRC (broker patches it)
  BatchLength          int32          8       4   bytes after this field
  PartitionLeaderEpoch int32          12      4   not covered by the CRC (broker patches it)
  Magic                int8           16      1   2
  CRC                  uint32         17      4   CRC-32C of Attributes..end
  Attributes           int16          21      2   bits 0-2 codec, 3 timestamp type,
                                                   4 transactional, 5 control, 6 delete horizon
  LastOffsetDelta      int32          23      4
  BaseTimestamp        int64          27      8
  MaxTimestamp         int64          35      8
  ProducerId           int64          43      8
  ProducerEpoch        int16          51      2
  BaseSequence         int32          53      4
  RecordsCount         int32          57      4
  Records              [Record]       61          compressed as one block when codec != 0

Record =>
  Length varint, Attributes int8, TimestampDelta varlong, OffsetDelta varint,
  KeyLength varint (-1 null), Key, ValueLength varint (-1 null), Value,
  HeadersCount varint, Headers => [KeyLength varint, Key (UTF-8), ValueLength varint, Value]

Varints are Protobuf's zigzag varints: at most 5 bytes for a varint, 10 for a varlong.
Every decoder here checks each length against the bytes it has and raises
:class:`~pylogq.errors.CorruptRecordError` on anything inconsistent.
"""

from __future__ import annotations

import struct
import sys
import time
from typing import TYPE_CHECKING, Iterator, List, Optional, Sequence, Tuple, Union


from ..errors import (
    CorruptRecordError,
    IllegalStateError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidRecordError,
    RecordProblem,
)
from . import codecs
from .crc import crc32, crc32c

__all__ = [
    "BASE_OFFSET_OFFSET", "BASE_OFFSET_LENGTH", "LENGTH_OFFSET", "LENGTH_LENGTH",
    "PARTITION_LEADER_EPOCH_OFFSET", "PARTITION_LEADER_EPOCH_LENGTH", "MAGIC_OFFSET",
    "MAGIC_LENGTH", "CRC_OFFSET", "CRC_LENGTH", "ATTRIBUTES_OFFSET", "ATTRIBUTES_LENGTH",
    "LAST_OFFSET_DELTA_OFFSET", "LAST_OFFSET_DELTA_LENGTH", "BASE_TIMESTAMP_OFFSET",
    "BASE_TIMESTAMP_LENGTH", "MAX_TIMESTAMP_OFFSET", "MAX_TIMESTAMP_LENGTH", "PRODUCER_ID_OFFSET",
    "PRODUCER_ID_LENGTH", "PRODUCER_EPOCH_OFFSET", "PRODUCER_EPOCH_LENGTH", "BASE_SEQUENCE_OFFSET",
    "BASE_SEQUENCE_LENGTH", "RECORDS_COUNT_OFFSET", "RECORDS_COUNT_LENGTH", "RECORDS_OFFSET",
    "HEADER_SIZE", "LOG_OVERHEAD", "MAGIC", "COMPRESSION_MASK", "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK", "CONTROL_MASK", "DELETE_HORIZON_MASK", "CREATE_TIME", "LOG_APPEND_TIME",
    "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "NO_SEQUENCE", "NO_PARTITION_LEADER_EPOCH", "INT32_MAX",
    "MIN_RECORD_SIZE", "DEFAULT_BATCH_SIZE", "encode_varint", "size_of_varint", "decode_varint",
    "Record", "RecordBatchBuilder", "build_batch", "RecordBatch", "decode_headers",
    "BATCH_HEADER", "ENTRY_HEAD", "ENTRY_MAGIC_OFFSET", "LEGACY_CRC_OFFSET", "scan_entries", "validate_batches", "patch_offsets",
    "assign_offsets", "COLUMN_NAMES",
    "decode_columns"
]

Buffer = Union[bytes, bytearray, memoryview]
Header = Tuple[str, Optional[bytes]]

BASE_OFFSET_OFFSET = 0
BASE_OFFSET_LENGTH = 8
LENGTH_OFFSET = BASE_OFFSET_OFFSET + BASE_OFFSET_LENGTH
LENGTH_LENGTH = 4
PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + LENGTH_LENGTH
PARTITION_LEADER_EPOCH_LENGTH = 4
MAGIC_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + PARTITION_LEADER_EPOCH_LENGTH
MAGIC_LENGTH = 1
CRC_OFFSET = MAGIC_OFFSET + MAGIC_LENGTH
CRC_LENGTH = 4
ATTRIBUTES_OFFSET = CRC_OFFSET + CRC_LENGTH
ATTRIBUTES_LENGTH = 2
LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH
LAST_OFFSET_DELTA_LENGTH = 4
BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH
BASE_TIMESTAMP_LENGTH = 8
MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + BASE_TIMESTAMP_LENGTH
MAX_TIMESTAMP_LENGTH = 8
PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH
PRODUCER_ID_LENGTH = 8
PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH
PRODUCER_EPOCH_LENGTH = 2
BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + PRODUCER_EPOCH_LENGTH
BASE_SEQUENCE_LENGTH = 4
RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + BASE_SEQUENCE_LENGTH
RECORDS_COUNT_LENGTH = 4
RECORDS_OFFSET = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH
HEADER_SIZE = RECORDS_OFFSET  # 61
LOG_OVERHEAD = LENGTH_OFFSET + LENGTH_LENGTH  # 12: offset and length precede every batch

MAGIC = 2
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
INT32_MAX = 2**31 - 1

# The smallest encodable record: a 1-byte length then attributes, timestamp delta,
# offset delta, key length, value length and header count of 1 byte each.
MIN_RECORD_SIZE = 7

#: The 61-byte v2 batch header, from its base offset to its record count (every module reading one uses this).
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_HEADER = BATCH_HEADER
_CONTROL_KEY = struct.Struct(">hh")

# Records a builder holds by default before it reports itself full: Kafka's
# default max.message.bytes is about 1 MB; a builder is bounded the same way.
DEFAULT_BATCH_SIZE = 1048588


# -- varints -----------------------------------------------------------------


def encode_varint(value: int, out: bytearray) -> None:
    """Append the zigzag varint of a signed 64-bit integer to ``out``."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def size_of_varint(value: int) -> int:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


def decode_varint(buf: Buffer, pos: int, end: int, max_bytes: int = 5) -> Tuple[int, int]:
    """Decode a zigzag varint at ``pos`` that must end before ``end``; -> (value, next pos)."""
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise CorruptRecordError("varint at byte %d runs past the end of its record" % start,
                                     kind=RecordProblem.BAD_RECORD)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if pos - start >= max_bytes:
            raise CorruptRecordError("varint at byte %d is longer than %d bytes" % (start, max_bytes),
                                     kind=RecordProblem.BAD_RECORD)
    if max_bytes == 5 and result > 0xFFFFFFFF:
        raise CorruptRecordError("varint at byte %d overflows 32 bits" % start, kind=RecordProblem.BAD_RECORD)
    return (result >> 1) ^ -(result & 1), pos


# -- records -----------------------------------------------------------------


class Record:
    """One record of a v2 batch, with its absolute offset and timestamp.

    ``headers`` is a list of ``(str, bytes | None)``; for a control record
    (``is_control``) ``control_type`` is 0 (abort) or 1 (commit).
    """

    __slots__ = ("offset", "timestamp", "timestamp_type", "key", "value", "headers", "attributes", "is_control")

    def __init__(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: Optional[bytes],
        value: Optional[bytes],
        headers: List[Header],
        attributes: int = 0,
        is_control: bool = False,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.attributes = attributes
        self.is_control = is_control

    @property
    def control_type(self) -> int:
        """0 for an abort marker, 1 for a commit; -1 when not a control record."""
        if not self.is_control or self.key is None or len(self.key) < 4:
            return -1
        return _CONTROL_KEY.unpack_from(self.key)[1]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record) and type(other).__name__ != "Record":
            return NotImplemented
        return (
            self.offset == other.offset  # type: ignore[attr-defined]
            and self.timestamp == other.timestamp  # type: ignore[attr-defined]
            and self.timestamp_type == other.timestamp_type  # type: ignore[attr-defined]
            and self.key == other.key  # type: ignore[attr-defined]
            and self.value == other.value  # type: ignore[attr-defined]
            and list(self.headers) == list(other.headers)  # type: ignore[attr-defined]
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "Record(offset=%r, timestamp=%r, timestamp_type=%r, key=%r, value=%r, headers=%r)" % (
            self.offset,
            self.timestamp,
            self.timestamp_type,
            self.key,
            self.value,
            self.headers,
        )


def _encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: Optional[Buffer],
    value: Optional[Buffer],
    headers: Optional[Sequence[Tuple[Union[str, bytes], Optional[Buffer]]]],
) -> int:
    body = bytearray(b"\x00")
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    if key is None:
        body.append(1)
    else:
        encode_varint(len(key), body)
        body += key
    if value is None:
        body.append(1)
    else:
        encode_varint(len(value), body)
        body += value
    if headers:
        encode_varint(len(headers), body)
        for h_key, h_value in headers:
            if isinstance(h_key, str):
                h_key = h_key.encode("utf-8", "surrogateescape")
            elif not isinstance(h_key, (bytes, bytearray)):
                raise InvalidArgumentTypeError("header key must be str or bytes, not %s" % type(h_key).__name__)
            encode_varint(len(h_key), body)
            body += h_key
            if h_value is None:
                body.append(1)
            else:
                _check_bytes(h_value, "header value")
                encode_varint(len(h_value), body)
                body += h_value
    else:
        body.append(0)
    start = len(out)
    encode_varint(len(body), out)
    out += body
    return len(out) - start


def _check_bytes(obj: object, what: str) -> None:
    if not isinstance(obj, (bytes, bytearray, memoryview)):
        raise InvalidArgumentTypeError("%s must be bytes, bytearray or memoryview, not %s" % (what, type(obj).__name__))


class RecordBatchBuilder:
    """Builds one v2 record batch, record by record.

    ``append`` takes the offset delta (0, 1, ... for a producer), the timestamp
    in ms (None: now), key, value and headers, and returns the record's encoded
    size, or 0 when the record would take the batch past ``batch_size`` (the
    first record always fits). ``build()`` compresses, writes the header and
    CRC, and returns the batch as a bytearray; the builder is then spent.
    Not thread-safe.
    """

    def __init__(
        self,
        compression_type: Union[int, str] = 0,
        *,
        base_offset: int = 0,
        partition_leader_epoch: int = 0,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        timestamp_type: int = CREATE_TIME,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        self.compression_type = codecs.codec_id(compression_type)
        if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise InvalidArgumentError("timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), not %r" % (timestamp_type,))
        if batch_size <= 0:
            raise InvalidArgumentError("batch_size must be positive, not %r" % (batch_size,))
        self.base_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = bool(is_transactional)
        self.is_control = bool(is_control)
        self.timestamp_type = timestamp_type
        self.batch_size = batch_size
        self._buffer = bytearray(HEADER_SIZE)
        self._count = 0
        self._last_offset_delta = -1
        self._first_timestamp: Optional[int] = None
        self._max_timestamp = -1
        self.max_record_size = 0  # the largest record appended, encoded (Kafka's maxRecordSize)
        self._built = False

    def append(
        self,
        offset: int,
        timestamp: Optional[int],
        key: Optional[Buffer],
        value: Optional[Buffer],
        headers: Optional[Sequence[Header]] = None,
    ) -> int:
        if self._built:
            raise IllegalStateError("this batch was already built")
        if type(offset) is not int:
            raise InvalidArgumentTypeError("offset must be int, not %s" % type(offset).__name__)
        if offset <= self._last_offset_delta or offset > INT32_MAX:
            raise InvalidArgumentError(
                "offset delta %d must be above the previous one (%d) and fit 32 bits" % (offset, self._last_offset_delta)
            )
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        elif type(timestamp) is not int:
            raise InvalidArgumentTypeError("timestamp must be int milliseconds or None, not %s" % type(timestamp).__name__)
        if key is not None:
            _check_bytes(key, "key")
        if value is not None:
            _check_bytes(value, "value")
        first = self._first_timestamp
        if first is None:
            first = timestamp
        mark = len(self._buffer)
        size = _encode_record(self._buffer, offset, timestamp - first, key, value, headers)
        if self._count and len(self._buffer) > self.batch_size:
            del self._buffer[mark:]
            return 0
        self._first_timestamp = first
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        if size > self.max_record_size:
            self.max_record_size = size
        self._count += 1
        self._last_offset_delta = offset
        return size

    def append_next(
        self,
        timestamp: Optional[int],
        key: Optional[Buffer],
        value: Optional[Buffer],
        headers: Optional[Sequence[Header]] = None,
    ) -> int:
        """Append at the next offset delta; -> that delta, or -1 when the record would pass ``batch_size``.

        The producer's append (Kafka's ``MemoryRecordsBuilder.append``): the
        delta is the record's index in the batch when every record came this way.
        """
        delta = self._last_offset_delta + 1
        return delta if self.append(delta, timestamp, key, value, headers) else -1

    def size(self) -> int:
        """Bytes written so far, header included (before compression)."""
        return len(self._buffer)

    @property
    def record_count(self) -> int:
        return self._count

    def build(self) -> bytearray:
        if self._built:
            raise IllegalStateError("this batch was already built")
        self._built = True
        buf = self._buffer
        attributes = self.compression_type
        if self.timestamp_type == LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if self.is_control:
            attributes |= CONTROL_MASK
        if self.compression_type != codecs.NONE:
            compressed = codecs.compress(self.compression_type, memoryview(buf)[HEADER_SIZE:])
            del buf[HEADER_SIZE:]
            buf += compressed
        first = self._first_timestamp if self._first_timestamp is not None else -1
        _HEADER.pack_into(
            buf,
            0,
            self.base_offset,
            len(buf) - LOG_OVERHEAD,
            self.partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            max(self._last_offset_delta, 0),
            first,
            self._max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._count,
        )
        struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
        return buf


if TYPE_CHECKING:
    from typing import TypeGuard  # Python 3.10+


def _is_ndarray(obj: object) -> TypeGuard[Sequence[int]]:
    """Whether ``obj`` is a numpy array, without loading numpy (an array means it is loaded)."""
    # (numpy half imported by another thread has no ndarray yet, and so no arrays)
    return isinstance(obj, getattr(sys.modules.get("numpy"), "ndarray", ()))


def build_batch(
    values: Sequence[Optional[Buffer]],
    keys: Optional[Sequence[Optional[Buffer]]] = None,
    timestamps: Union[None, int, Sequence[int]] = None,
    headers: Optional[Sequence[Optional[Sequence[Header]]]] = None,
    compression_type: Union[int, str] = 0,
    **kwargs: int,
) -> bytearray:
    """Build one batch from sequences in one call (the bulk producer path).

    ``keys`` and ``headers`` are None or as long as ``values``; ``timestamps`` is
    None (now), one int for every record, or a sequence. The other keyword
    arguments are :class:`RecordBatchBuilder`'s; ``batch_size`` does not apply.
    """
    n = len(values)
    if keys is not None and len(keys) != n:
        raise InvalidArgumentError("keys has %d items, values %d" % (len(keys), n))
    if headers is not None and len(headers) != n:
        raise InvalidArgumentError("headers has %d items, values %d" % (len(headers), n))
    if isinstance(timestamps, (list, tuple)) or _is_ndarray(timestamps):
        if len(timestamps) != n:
            raise InvalidArgumentError("timestamps has %d items, values %d" % (len(timestamps), n))
    elif timestamps is None:
        timestamps = int(time.time() * 1000)
    kwargs["batch_size"] = INT32_MAX
    builder = RecordBatchBuilder(compression_type, **kwargs)  # type: ignore[arg-type]
    for i in range(n):
        builder.append(
            i,
            timestamps if isinstance(timestamps, int) else int(timestamps[i]),
            None if keys is None else keys[i],
            values[i],
            None if headers is None else headers[i],
        )
    return builder.build()


# -- reading -----------------------------------------------------------------


def _require_v2(buf: Buffer, pos: int, end: int) -> int:
    """Check a v2 batch header at pos; -> the batch end. Raises on a bad frame."""
    if end - pos < HEADER_SIZE:
        raise CorruptRecordError(
            "record batch at byte %d has %d bytes, fewer than the %d-byte header" % (pos, end - pos, HEADER_SIZE),
            kind=RecordProblem.BAD_LENGTH
        )
    (length,) = struct.unpack_from(">i", buf, pos + LENGTH_OFFSET)
    magic = buf[pos + MAGIC_OFFSET]
    if magic != MAGIC:
        raise CorruptRecordError("record batch at byte %d has magic %d, expected 2" % (pos, magic),
                                 kind=RecordProblem.BAD_MAGIC)
    if length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError("record batch at byte %d claims length %d, below the header size" % (pos, length),
                                 kind=RecordProblem.BAD_LENGTH)
    if length > end - pos - LOG_OVERHEAD:
        raise CorruptRecordError(
            "record batch at byte %d claims length %d but only %d bytes follow"
            % (pos, length, end - pos - LOG_OVERHEAD), kind=RecordProblem.BAD_LENGTH
        )
    return pos + LOG_OVERHEAD + length


class RecordBatch:
    """A read-only view of one v2 batch in a buffer (header fields and records).

    The header is checked on construction (magic, length inside the buffer).
    Iterating checks the CRC first (unless ``check_crc=False``) and then every
    record's structure; a bad byte raises CorruptRecordError.
    """

    def __init__(self, buffer: Buffer, position: int = 0, check_crc: bool = True) -> None:
        self._buf = buffer if isinstance(buffer, (bytes, bytearray)) else memoryview(buffer).cast("B")
        if position < 0 or position > len(self._buf):
            raise InvalidArgumentError("position %d is outside the buffer of %d bytes" % (position, len(self._buf)))
        self.position = position
        self.end = _require_v2(self._buf, position, len(self._buf))
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = _HEADER.unpack_from(self._buf, position)
        self.check_crc = check_crc

    size_in_bytes = property(lambda self: self.batch_length + LOG_OVERHEAD)
    compression_type = property(lambda self: self.attributes & COMPRESSION_MASK)
    timestamp_type = property(lambda self: LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME)
    is_transactional = property(lambda self: bool(self.attributes & TRANSACTIONAL_MASK))
    is_control_batch = property(lambda self: bool(self.attributes & CONTROL_MASK))
    has_delete_horizon = property(lambda self: bool(self.attributes & DELETE_HORIZON_MASK))
    last_offset = property(lambda self: self.base_offset + self.last_offset_delta)
    next_offset = property(lambda self: self.base_offset + self.last_offset_delta + 1)
    first_timestamp = property(lambda self: self.base_timestamp)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (INT32_MAX + 1)

    def validate_crc(self) -> bool:
        """True when the stored CRC matches the bytes it covers."""
        return crc32c(memoryview(self._buf)[self.position + ATTRIBUTES_OFFSET : self.end]) == self.crc

    def _records_section(self) -> Buffer:
        section = memoryview(self._buf)[self.position + RECORDS_OFFSET : self.end]
        codec = self.compression_type
        if codec == codecs.NONE:
            return section
        if codec not in codecs.NAMES:
            raise CorruptRecordError(
                "record batch at offset %d names compression codec %d, which does not exist" % (self.base_offset, codec),
                kind=RecordProblem.UNKNOWN_CODEC
            )
        return codecs.decompress(codec, section)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def records(self) -> List[Record]:
        """Every record of the batch, checked; raises CorruptRecordError on bad bytes."""
        if self.check_crc and not self.validate_crc():
            raise CorruptRecordError(
                "record batch at offset %d failed its CRC-32C check (stored 0x%08x)" % (self.base_offset, self.crc),
                kind=RecordProblem.BAD_CRC
            )
        return _decode_records(self)

    def validate(self) -> int:
        """Check CRC, sizes, count and every record's structure; -> record count."""
        return len(self.records())

    def __repr__(self) -> str:
        return "RecordBatch(base_offset=%d, last_offset_delta=%d, records_count=%d, attributes=0x%x, size=%d)" % (
            self.base_offset,
            self.last_offset_delta,
            self.records_count,
            self.attributes,
            self.size_in_bytes,
        )


_RECORD_ERRORS = {
    "varint": "a malformed or truncated varint",
    "length": "a record length that overruns the batch",
    "delta": "an offset delta out of order or past the last offset delta",
    "key": "a key length that overruns its record",
    "value": "a value length that overruns its record",
    "headers": "a malformed header",
    "trailing": "bytes beyond its fields",
}


def _varint_or_fault(data: Buffer, pos: int, end: int, max_bytes: int = 5) -> Tuple[int, int]:
    try:
        return decode_varint(data, pos, end, max_bytes)
    except CorruptRecordError:
        raise CorruptRecordError("varint", kind=RecordProblem.BAD_RECORD) from None


def _parse_record(data: Buffer, pos: int, end: int, prev_delta: int, last_delta: int) -> tuple:
    """Parse and check the record at pos (its length varint first).

    -> (end, attributes, timestamp delta, offset delta, key pos, key length,
    value pos, value length, headers pos, headers count); lengths are -1 for
    null. A problem raises CorruptRecordError whose one argument is its key in
    ``_RECORD_ERRORS``; the caller, which knows the batch, writes the message.
    The compiled kernel's ``_parse_record`` checks exactly the same things.
    """
    length, pos = _varint_or_fault(data, pos, end)
    if length < MIN_RECORD_SIZE - 1 or length > end - pos:
        raise CorruptRecordError("length", kind=RecordProblem.BAD_RECORD)
    rec_end = pos + length
    attributes = data[pos]
    pos += 1
    ts_delta, pos = _varint_or_fault(data, pos, rec_end, 10)
    delta, pos = _varint_or_fault(data, pos, rec_end)
    if delta <= prev_delta or delta > last_delta:
        raise CorruptRecordError("delta", kind=RecordProblem.BAD_RECORD)
    fields = [rec_end, attributes, ts_delta, delta]
    for what in ("key", "value"):
        n, pos = _varint_or_fault(data, pos, rec_end)
        if n < -1 or n > rec_end - pos:
            raise CorruptRecordError(what, kind=RecordProblem.BAD_RECORD)
        fields += [pos, n]
        pos += max(n, 0)
    count, pos = _varint_or_fault(data, pos, rec_end)
    if count < 0 or count > rec_end - pos:
        raise CorruptRecordError("headers", kind=RecordProblem.BAD_RECORD)
    fields += [pos, count]
    for _ in range(count):
        n, pos = _varint_or_fault(data, pos, rec_end)
        if n < 0 or n > rec_end - pos:
            raise CorruptRecordError("headers", kind=RecordProblem.BAD_RECORD)
        pos += n
        n, pos = _varint_or_fault(data, pos, rec_end)
        if n < -1 or n > rec_end - pos:
            raise CorruptRecordError("headers", kind=RecordProblem.BAD_RECORD)
        pos += max(n, 0)
    if pos != rec_end:
        raise CorruptRecordError("trailing", kind=RecordProblem.BAD_RECORD)
    return tuple(fields)


def _check_count(base_offset: int, count: int, section_bytes: int) -> None:
    if count < 0 or count * MIN_RECORD_SIZE > section_bytes:
        raise CorruptRecordError(
            "record batch at offset %d claims %d records in %d bytes" % (base_offset, count, section_bytes),
            kind=RecordProblem.BAD_RECORD_COUNT
        )


def _iter_fields(batch: "RecordBatch", data: Buffer, pos: int, end: int) -> Iterator[tuple]:
    """The checked fields of every record of a batch's records section data[pos:end]."""
    count = batch.records_count
    _check_count(batch.base_offset, count, end - pos)
    prev = -1
    for _ in range(count):
        try:
            fields = _parse_record(data, pos, end, prev, batch.last_offset_delta)
        except CorruptRecordError as fault:
            raise CorruptRecordError(
                "record at byte %d of the batch at offset %d has %s"
                % (pos, batch.base_offset, _RECORD_ERRORS[fault.args[0]]), kind=RecordProblem.BAD_RECORD
            ) from None
        prev = fields[3]
        pos = fields[0]
        yield fields
    if pos != end:
        raise CorruptRecordError(
            "record batch at offset %d has %d bytes after its %d records" % (batch.base_offset, end - pos, count),
            kind=RecordProblem.BAD_RECORD_COUNT
        )


def _decode_records(batch: RecordBatch) -> List[Record]:
    data = batch._records_section()
    ts_type = batch.timestamp_type
    is_control = batch.is_control_batch
    out: List[Record] = []
    for _, attributes, ts_delta, delta, kpos, klen, vpos, vlen, hpos, hcount in _iter_fields(batch, data, 0, len(data)):
        out.append(
            Record(
                batch.base_offset + delta,
                batch.max_timestamp if ts_type == LOG_APPEND_TIME else batch.base_timestamp + ts_delta,
                ts_type,
                None if klen < 0 else bytes(data[kpos : kpos + klen]),
                None if vlen < 0 else bytes(data[vpos : vpos + vlen]),
                decode_headers(data, hpos, hcount) if hcount else [],
                attributes,
                is_control,
            )
        )
    return out


def decode_headers(data: Buffer, position: int, count: int) -> List[Header]:
    """Decode ``count`` headers starting at ``position`` (the columnar headers column).

    Header keys are UTF-8 by contract, but a broker does not enforce it (Kafka
    decodes them leniently). Bytes that are not UTF-8 decode with
    ``surrogateescape``, so they round-trip unchanged through ``append``.
    """
    end = len(data)
    if position < 0 or position > end:
        raise InvalidArgumentError("position %d is outside the data of %d bytes" % (position, end))
    headers: List[Header] = []
    pos = position
    for _ in range(count):
        klen, pos = decode_varint(data, pos, end)
        if klen < 0 or klen > end - pos:
            raise CorruptRecordError("header key at byte %d overruns the data" % pos, kind=RecordProblem.BAD_RECORD)
        hkey = bytes(data[pos : pos + klen]).decode("utf-8", "surrogateescape")
        pos += klen
        vlen, pos = decode_varint(data, pos, end)
        if vlen < -1 or vlen > end - pos:
            raise CorruptRecordError("header value at byte %d overruns the data" % pos, kind=RecordProblem.BAD_RECORD)
        hval = None
        if vlen >= 0:
            hval = bytes(data[pos : pos + vlen])
            pos += vlen
        headers.append((hkey, hval))
    return headers


# -- buffers of entries (any magic) -------------------------------------------

ENTRY_MAGIC_OFFSET = 16  # byte 16 is the magic in v0, v1 and v2 alike
LEGACY_CRC_OFFSET = 12
# The smallest well-formed entry per magic, offset and length included.
_MIN_ENTRY = (12 + 14, 12 + 22, HEADER_SIZE)
#: The first 12 bytes of every entry, whatever its magic: base offset, then the length of the rest.
ENTRY_HEAD = struct.Struct(">qi")
_OFFSET_AND_LENGTH = ENTRY_HEAD


def _frame_entry(buf: Buffer, pos: int, end: int, check_crc: bool) -> Tuple[int, int]:
    """Frame the entry at pos: -> (size, magic); size 0 means a partial entry."""
    if end - pos < LOG_OVERHEAD + 5:
        return 0, -1
    offset, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    magic = buf[pos + ENTRY_MAGIC_OFFSET]
    if magic > MAGIC:
        raise CorruptRecordError("entry at byte %d has unknown magic %d" % (pos, magic), kind=RecordProblem.BAD_MAGIC)
    size = LOG_OVERHEAD + length
    if length < 0 or size < _MIN_ENTRY[magic]:
        raise CorruptRecordError("entry at byte %d claims length %d, too small for magic %d" % (pos, length, magic),
                                 kind=RecordProblem.BAD_LENGTH)
    if size > end - pos:
        return 0, magic
    if check_crc:
        if magic == MAGIC:
            (stored,) = struct.unpack_from(">I", buf, pos + CRC_OFFSET)
            if crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]) != stored:
                raise CorruptRecordError(
                    "record batch at byte %d (offset %d) failed its CRC-32C check" % (pos, offset),
                    kind=RecordProblem.BAD_CRC
                )
        else:
            (stored,) = struct.unpack_from(">I", buf, pos + LEGACY_CRC_OFFSET)
            if crc32(memoryview(buf)[pos + ENTRY_MAGIC_OFFSET : pos + size]) != stored:
                raise CorruptRecordError("message at byte %d (offset %d) failed its CRC-32 check" % (pos, offset),
                                         kind=RecordProblem.BAD_CRC)
    return size, magic


def scan_entries(buffer: Buffer, position: int = 0, check_crc: bool = True
                 ) -> Tuple[int, int, Optional[str], Optional[RecordProblem]]:
    """Walk whole entries from position: -> (valid bytes, entries, error or None, its kind or None).

    The walk stops at the end of the buffer, before a partial entry (error
    None), or before the first malformed entry (error names it, kind is its
    RecordProblem).
    """
    buf = _as_bytes_view(buffer)
    end = len(buf)
    if position < 0 or position > end:
        raise InvalidArgumentError("position %d is outside the buffer of %d bytes" % (position, end))
    pos = position
    n = 0
    while pos < end:
        try:
            size, _ = _frame_entry(buf, pos, end, check_crc)
        except CorruptRecordError as exc:
            return pos - position, n, str(exc), exc.kind
        if size == 0:
            break
        pos += size
        n += 1
    return pos - position, n, None, None


def _header(buf: Buffer, pos: int, size: int) -> Tuple[int, ...]:
    """The BatchHeader fields of the v2 batch at ``pos`` (its 61 header bytes checked by the caller)."""
    (base, _, _, _, _, attributes, last_delta, _, max_ts, pid, epoch, seq, count) = _HEADER.unpack_from(buf, pos)
    return (pos, size, MAGIC, base, base + last_delta, max_ts, count, attributes & 0xFFFF, pid, epoch, seq)


def validate_batches(buffer: Buffer, require_keys: bool = False) -> Tuple[List[Tuple[int, ...]], int, int]:
    """Check a producer's v2 batches whole, in one pass; -> (headers, records, keyless).

    ``headers`` are BatchHeader fields (tuples) as the buffer says; ``keyless``
    is the offset delta, from the buffer's first offset, of the first record
    without a key when ``require_keys`` (control batches are not looked at),
    else -1. See :func:`pylogq.records.validate_batches`.
    """
    buf = _as_bytes_view(buffer)
    end = len(buf)
    if end == 0:
        raise InvalidRecordError("produce buffer holds no record batch")
    pos = 0
    headers = []
    records = 0
    offsets = 0
    keyless = -1
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise CorruptRecordError(
                "produce buffer ends with %d bytes at byte %d, fewer than a batch header" % (end - pos, pos),
                kind=RecordProblem.BAD_LENGTH
            )
        size, magic = _frame_entry(buf, pos, end, True)
        if magic != MAGIC:
            raise CorruptRecordError("record batch at byte %d has magic %d, expected 2" % (pos, magic),
                                     kind=RecordProblem.BAD_MAGIC)
        if size == 0:
            raise CorruptRecordError(
                "record batch at byte %d claims length %d but only %d bytes follow"
                % (pos, _OFFSET_AND_LENGTH.unpack_from(buf, pos)[1], end - pos - LOG_OVERHEAD),
                kind=RecordProblem.BAD_LENGTH
            )
        batch = RecordBatch(buf, pos, check_crc=False)
        if batch.records_count <= 0 or batch.last_offset_delta != batch.records_count - 1:
            raise InvalidRecordError(
                "record batch at byte %d has %d records but last offset delta %d"
                % (pos, batch.records_count, batch.last_offset_delta), kind=RecordProblem.BAD_RECORD_COUNT
            )
        # With count == last delta + 1 and deltas strictly increasing up to the
        # last delta (checked by the parser), the deltas are exactly 0..count-1.
        keys = require_keys and keyless < 0 and not batch.is_control_batch
        if batch.compression_type == codecs.NONE:
            section = memoryview(buf)[pos + RECORDS_OFFSET : batch.end]
            for fields in _iter_fields(batch, section, 0, len(section)):
                records += 1
                if keys and fields[5] < 0 and keyless < 0:
                    keyless = offsets + fields[3]
        else:
            count, missing = _validate_compressed(batch, buf, pos, keys)
            records += count
            if missing >= 0:
                keyless = offsets + missing
        headers.append(_header(buf, pos, size))
        offsets += batch.last_offset_delta + 1
        pos = batch.end
    return headers, records, keyless


def _validate_compressed(batch: RecordBatch, buf: Buffer, pos: int, want_keys: bool) -> Tuple[int, int]:
    """Check a compressed batch's records as they decompress; -> (records, offset delta of the first without a key).

    A section of up to ``codecs.STREAM_CHUNK`` bytes is decompressed whole and
    walked as an uncompressed one. A larger one is walked as it decompresses,
    a chunk at a time (:class:`_SectionReader`): a record crossing a chunk's
    end is gathered whole when it is at most ``codecs.DECOMPRESS_WINDOW``
    bytes, and a longer one is checked field by field, its key, value and
    header bytes skipped, not kept. Memory stays within about a window and two
    chunks whatever the compression ratio; ``codecs.MAX_DECOMPRESSED`` bounds
    the work. The delta is -1 unless ``want_keys`` and a record has no key.
    """
    codec = batch.compression_type
    if codec not in codecs.NAMES:
        raise CorruptRecordError("record batch at byte %d names compression codec %d, which does not exist"
                                 % (pos, codec), kind=RecordProblem.UNKNOWN_CODEC)
    raw = memoryview(buf)[pos + RECORDS_OFFSET : batch.end]
    with codecs.DecompressStream(codec, raw, 2, codecs.MAX_DECOMPRESSED, "record batch at byte %d" % pos) as stream:
        first = stream.read(codecs.STREAM_CHUNK)
        if len(first) < codecs.STREAM_CHUNK or stream.at_end():
            missing = -1
            for fields in _iter_fields(batch, first, 0, len(first)):
                if want_keys and fields[5] < 0 and missing < 0:
                    missing = fields[3]
            return batch.records_count, missing
        return _walk_stream(batch, _SectionReader(stream, first), want_keys, codecs.DECOMPRESS_WINDOW)


class _SectionReader:
    """A batch's records section as it decompresses: the chunk being walked, the rest to come.

    ``buf[pos:]`` is decompressed and not walked; ``base`` is the section
    position of ``buf[0]``, so ``at`` is the section position of the walk
    (errors name it, as for a section held whole). A record crossing a
    chunk's end is gathered into a ``buf`` of its own; the rest of the chunk
    it ends in waits in ``rest`` (from ``rest_pos``). Not thread-safe.
    """

    __slots__ = ("stream", "buf", "pos", "base", "rest", "rest_pos")

    def __init__(self, stream: codecs.DecompressStream, first: bytes) -> None:
        self.stream = stream
        self.buf = first
        self.pos = 0
        self.base = 0
        self.rest = b""
        self.rest_pos = 0

    @property
    def at(self) -> int:
        return self.base + self.pos

    def _next(self) -> Tuple[bytes, int]:
        """The decompressed bytes that follow ``buf``: (bytes, start), b"" at the end of the section."""
        if self.rest_pos < len(self.rest):
            chunk, start = self.rest, self.rest_pos
            self.rest, self.rest_pos = b"", 0
            return chunk, start
        return self.stream.read1(codecs.STREAM_CHUNK), 0

    def ensure(self, n: int) -> bool:
        """At least ``n`` bytes at ``buf[pos:]``; False when the section ends first."""
        have = len(self.buf) - self.pos
        if have >= n:
            return True
        at = self.at
        if have == 0:  # the next chunk, walked where it lies
            chunk, start = self._next()
            self.buf, self.pos, self.base = chunk, start, at - start
            have = len(chunk) - start
            if have >= n or not chunk:
                return have >= n
        parts = [self.buf[self.pos :]]
        while have < n:
            chunk, start = self._next()
            if not chunk:
                break
            take = min(n - have, len(chunk) - start)
            parts.append(chunk[start : start + take])
            have += take
            if start + take < len(chunk):
                self.rest, self.rest_pos = chunk, start + take
        self.buf, self.pos, self.base = b"".join(parts), 0, at
        return have >= n

    def skip(self, n: int) -> bool:
        """Pass over ``n`` bytes without keeping them; False when the section ends first."""
        have = len(self.buf) - self.pos
        if have >= n:
            self.pos += n
            return True
        target = self.at + n
        n -= have
        while True:
            chunk, start = self._next()
            if not chunk:
                self.buf, self.pos, self.base = b"", 0, target - n
                return False
            if len(chunk) - start >= n:
                self.buf, self.pos = chunk, start + n
                self.base = target - self.pos
                return True
            n -= len(chunk) - start

    def remaining(self) -> int:
        """Bytes from ``at`` to the end of the section (decompressed and dropped)."""
        n = len(self.buf) - self.pos + len(self.rest) - self.rest_pos
        self.rest, self.rest_pos = b"", 0
        while True:
            chunk = self.stream.read1(codecs.STREAM_CHUNK)
            if not chunk:
                return n
            n += len(chunk)


def _walk_stream(batch: RecordBatch, reader: _SectionReader, want_keys: bool, window: int) -> Tuple[int, int]:
    """:func:`_iter_fields`' checks over a section read as it decompresses; -> (records, first keyless delta).

    A record of up to ``window`` bytes is gathered whole and parsed as in a
    section held whole; a larger one goes field by field (:func:`_parse_large`).
    The compiled kernel's ``_walk_stream`` checks exactly the same things.
    """
    prev = -1
    missing = -1
    last = batch.last_offset_delta
    for _ in range(batch.records_count):
        try:  # the usual case: the record lies whole in the chunk being walked
            fields = _parse_record(reader.buf, reader.pos, len(reader.buf), prev, last)
        except CorruptRecordError:
            pass  # not whole here, or bad: gathered and looked at again below
        else:
            reader.pos = fields[0]
            prev = fields[3]
            if want_keys and fields[5] < 0 and missing < 0:
                missing = prev
            continue
        start = reader.at
        reader.ensure(5)
        try:
            length, after = _varint_or_fault(reader.buf, reader.pos, len(reader.buf))
            if length < MIN_RECORD_SIZE - 1:
                raise CorruptRecordError("length", kind=RecordProblem.BAD_RECORD)
            size = after - reader.pos + length
            if size <= window:
                if not reader.ensure(size):
                    raise CorruptRecordError("length", kind=RecordProblem.BAD_RECORD)
                fields = _parse_record(reader.buf, reader.pos, reader.pos + size, prev, last)
                reader.pos += size
                delta, key_length = fields[3], fields[5]
            else:
                delta, key_length = _parse_large(reader, after - reader.pos, length, prev, last)
        except CorruptRecordError as fault:
            if not fault.args or fault.args[0] not in _RECORD_ERRORS:
                raise  # the codec's (bad or truncated compressed data)
            raise CorruptRecordError(
                "record at byte %d of the batch at offset %d has %s"
                % (start, batch.base_offset, _RECORD_ERRORS[fault.args[0]]), kind=RecordProblem.BAD_RECORD
            ) from None
        prev = delta
        if want_keys and key_length < 0 and missing < 0:
            missing = delta
    rest = reader.remaining()
    if rest:
        raise CorruptRecordError(
            "record batch at offset %d has %d bytes after its %d records" % (batch.base_offset, rest, batch.records_count),
            kind=RecordProblem.BAD_RECORD_COUNT
        )
    return batch.records_count, missing


def _stream_record_times(batch: RecordBatch, reader: "_SectionReader", log_append: bool) -> Iterator[Tuple[int, int]]:
    for _ in range(batch.records_count):
        if not reader.ensure(5):  # a record is at least MIN_RECORD_SIZE (7) bytes
            raise CorruptRecordError("record batch at offset %d ends before its %d records"
                                     % (batch.base_offset, batch.records_count), kind=RecordProblem.BAD_RECORD_COUNT)
        length, after = _varint_or_fault(reader.buf, reader.pos, len(reader.buf))
        head = after - reader.pos
        if length < MIN_RECORD_SIZE - 1 or not reader.ensure(head + min(length, 16)):
            raise CorruptRecordError("record batch at offset %d has a record of bad length %d"
                                     % (batch.base_offset, length), kind=RecordProblem.BAD_RECORD)
        at = reader.pos + head + 1  # past the attributes
        end = reader.pos + head + min(length, 16)
        ts_delta, at = _varint_or_fault(reader.buf, at, end, 10)
        delta, _ = _varint_or_fault(reader.buf, at, end)
        yield batch.base_offset + delta, batch.max_timestamp if log_append else batch.base_timestamp + ts_delta
        if not reader.skip(head + length):
            raise CorruptRecordError("record batch at offset %d ends inside a record" % batch.base_offset,
                                     kind=RecordProblem.BAD_RECORD)


def _parse_large(reader: _SectionReader, header: int, length: int, prev_delta: int, last_delta: int) -> Tuple[int, int]:
    """Check a record longer than the window field by field, skipping its key, value and header bytes.

    ``reader`` is at the record, whose length varint takes ``header`` bytes.
    -> (offset delta, key length). Faults are :func:`_parse_record`'s, and
    "length" where the section ends inside the record.
    """
    end = reader.at + header + length

    def varint(max_bytes: int) -> int:
        left = end - reader.at
        if not reader.ensure(min(max_bytes, left)):
            raise CorruptRecordError("length", kind=RecordProblem.BAD_RECORD)
        limit = reader.pos + min(len(reader.buf) - reader.pos, left)
        value, reader.pos = _varint_or_fault(reader.buf, reader.pos, limit, max_bytes)
        return value

    def skip(n: int) -> None:
        if not reader.skip(n):
            raise CorruptRecordError("length", kind=RecordProblem.BAD_RECORD)

    reader.pos += header
    if not reader.ensure(1):
        raise CorruptRecordError("length", kind=RecordProblem.BAD_RECORD)
    reader.pos += 1  # attributes
    varint(10)  # timestamp delta
    delta = varint(5)
    if delta <= prev_delta or delta > last_delta:
        raise CorruptRecordError("delta", kind=RecordProblem.BAD_RECORD)
    lengths = []
    for what in ("key", "value"):
        n = varint(5)
        if n < -1 or n > end - reader.at:
            raise CorruptRecordError(what, kind=RecordProblem.BAD_RECORD)
        skip(max(n, 0))
        lengths.append(n)
    count = varint(5)
    if count < 0 or count > end - reader.at:
        raise CorruptRecordError("headers", kind=RecordProblem.BAD_RECORD)
    for _ in range(count):
        n = varint(5)
        if n < 0 or n > end - reader.at:
            raise CorruptRecordError("headers", kind=RecordProblem.BAD_RECORD)
        skip(n)
        n = varint(5)
        if n < -1 or n > end - reader.at:
            raise CorruptRecordError("headers", kind=RecordProblem.BAD_RECORD)
        skip(max(n, 0))
    if reader.at != end:
        raise CorruptRecordError("trailing", kind=RecordProblem.BAD_RECORD)
    return delta, lengths[0]


def patch_offsets(
    buffer: Union[bytearray, memoryview],
    headers: Sequence[Sequence[int]],
    base_offset: int,
    partition_leader_epoch: int = 0,
    log_append_time: Optional[int] = None,
) -> List[Tuple[int, ...]]:
    """Give batches that :func:`validate_batches` accepted their offsets, in place; -> headers as written.

    Reads no record. Each header's place is checked against the buffer (the
    batches lie end to end from byte 0 and fill it, each a whole v2 batch),
    so a stale or foreign header list raises ValueError instead of writing
    astray. See :func:`pylogq.records.patch_offsets`.
    """
    view = memoryview(buffer)
    if view.readonly:
        raise InvalidArgumentTypeError("patch_offsets needs a writable buffer (bytearray or writable memoryview)")
    buf = view.cast("B")
    end = len(buf)
    pos = 0
    for i, header in enumerate(headers):
        if header[0] != pos:
            raise InvalidArgumentError("header %d is at byte %d, the batches lie end to end from 0 (expected %d)"
                             % (i, header[0], pos))
        size = header[1]
        if (size < HEADER_SIZE or size > end - pos or buf[pos + MAGIC_OFFSET] != MAGIC
                or LOG_OVERHEAD + _OFFSET_AND_LENGTH.unpack_from(buf, pos)[1] != size):
            raise InvalidArgumentError("header %d does not describe the v2 batch at byte %d of this buffer" % (i, pos))
        pos += size
    if pos != end:
        raise InvalidArgumentError("the headers cover %d of the buffer's %d bytes" % (pos, end))
    out = []
    next_offset = base_offset
    pos = 0
    for header in headers:
        size = header[1]
        struct.pack_into(">q", buf, pos, next_offset)
        struct.pack_into(">i", buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
        if log_append_time is not None:
            (attributes,) = struct.unpack_from(">h", buf, pos + ATTRIBUTES_OFFSET)
            struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
            struct.pack_into(">q", buf, pos + MAX_TIMESTAMP_OFFSET, log_append_time)
            struct.pack_into(">I", buf, pos + CRC_OFFSET, crc32c(buf[pos + ATTRIBUTES_OFFSET : pos + size]))
        written = _header(buf, pos, size)
        out.append(written)
        next_offset = written[4] + 1
        pos += size
    return out


def assign_offsets(
    buffer: Union[bytearray, memoryview],
    base_offset: int,
    partition_leader_epoch: int = 0,
    log_append_time: Optional[int] = None,
) -> Tuple[int, int, int, int, int, int]:
    """Validate a producer's v2 batches and give them offsets; -> AppendResult's offset fields.

    Returns (first offset, last offset, records, batches, max timestamp,
    offset of max timestamp): :func:`validate_batches` then
    :func:`patch_offsets`. See :func:`pylogq.records.assign_offsets`.
    """
    view = memoryview(buffer)
    if view.readonly:
        raise InvalidArgumentTypeError("assign_offsets needs a writable buffer (bytearray or writable memoryview)")
    headers, records, _ = validate_batches(view)
    max_ts = -1
    max_ts_offset = -1
    last = base_offset - 1
    for header in patch_offsets(view, headers, base_offset, partition_leader_epoch, log_append_time):
        last = header[4]
        if header[5] > max_ts:
            max_ts, max_ts_offset = header[5], last
    return base_offset, last, records, len(headers), max_ts, max_ts_offset


def _as_bytes_view(buffer: Buffer) -> Buffer:
    if isinstance(buffer, (bytes, bytearray)):
        return buffer
    return memoryview(buffer).cast("B")


# -- columnar decode ---------------------------------------------------------

COLUMN_NAMES = (
    "offsets",
    "timestamps",
    "timestamp_types",
    "key_start",
    "key_length",
    "value_start",
    "value_length",
    "headers_start",
    "headers_count",
)


def _new_columns(n: int) -> list:
    """The nine column arrays of n rows, carved from one allocation.

    One block instead of nine arrays: a large block is backed by huge pages
    (numpy advises the kernel to), so filling it costs a handful of page
    faults instead of one per 4 KB page.
    """
    a, b = 8 * n, 4 * n
    import numpy as np  # loaded by the first decode: a broker starting up needs none of it

    block = np.empty(5 * a + 3 * b + n, np.uint8)
    return [
        block[0:a].view(np.int64),
        block[a : 2 * a].view(np.int64),
        block[5 * a + 3 * b :].view(np.int8),
        block[2 * a : 3 * a].view(np.int64),
        block[5 * a : 5 * a + b].view(np.int32),
        block[3 * a : 4 * a].view(np.int64),
        block[5 * a + b : 5 * a + 2 * b].view(np.int32),
        block[4 * a : 5 * a].view(np.int64),
        block[5 * a + 2 * b : 5 * a + 3 * b].view(np.int32),
    ]


def decode_columns(
    buffer: Buffer,
    check_crc: bool = True,
    skip_control: bool = True,
    start_offset: Optional[int] = None,
    end_offset: Optional[int] = None,
) -> tuple:
    """Decode a buffer of batches into columns: -> (data, n, *columns in COLUMN_NAMES order).

    Records with offset in [start_offset, end_offset) are kept (None: no
    bound); a partial
    entry at the end is ignored. ``data`` is the input buffer itself when every
    entry is an uncompressed v2 batch (no copy); otherwise a new buffer holding,
    entry after entry, each v2 batch's (decompressed) records section, or each
    v0/v1 record's key then value bytes. Starts index into ``data``; a length
    of -1 is a null key or value.
    """
    from .legacy import iter_legacy_records  # legacy reads v0/v1 and uses this module's CRC

    if start_offset is None:
        start_offset = -(2**63)
    if end_offset is None:
        end_offset = 2**63 - 1
    buf = _as_bytes_view(buffer)
    end = len(buf)
    entries: List[Tuple[int, Optional[RecordBatch], Optional[list]]] = []  # (position, v2 batch, legacy records)
    pos = 0
    copy = False
    # Pass 1: frame and check every entry; data is copied only when an included
    # entry is compressed or legacy (the compiled kernel decides the same way).
    while pos < end:
        size, magic = _frame_entry(buf, pos, end, check_crc)
        if size == 0:
            break
        if magic == MAGIC:
            v2 = RecordBatch(buf, pos, check_crc=False)
            included = not (skip_control and v2.is_control_batch) and (
                v2.last_offset >= start_offset and v2.base_offset < end_offset
            )
            if included:
                copy = copy or v2.compression_type != codecs.NONE
                entries.append((pos, v2, None))
        else:
            copy = True
            recs = [
                r
                for r in iter_legacy_records(bytes(buf[pos : pos + size]), validate_crc=check_crc)
                if start_offset <= r.offset < end_offset
            ]
            entries.append((pos, None, recs))
        pos += size
    # Pass 2: parse records into the columns.
    cols: list = [[] for _ in COLUMN_NAMES]
    out = bytearray()
    for pos, batch, legacy in entries:
        if batch is not None:
            if copy:
                section = batch._records_section()
                section_start = len(out)
                out += section
            else:
                section = memoryview(buf)[pos + RECORDS_OFFSET : batch.end]
                section_start = pos + RECORDS_OFFSET
            _columns_of_section(batch, section, section_start, start_offset, end_offset, cols)
            continue
        for rec in legacy or ():
            row = [rec.offset, rec.timestamp, rec.timestamp_type]
            for part in (rec.key, rec.value):
                row.append(len(out))
                if part is None:
                    row.append(-1)
                else:
                    out += part
                    row.append(len(part))
            row += [len(out), 0]
            for col, v in zip(cols, row):
                col.append(v)
    arrays = _new_columns(len(cols[0]))
    for arr, col in zip(arrays, cols):
        arr[:] = col
    return (out if copy else buf, len(cols[0]), *arrays)


def _columns_of_section(batch, section, section_start, start_offset, end_offset, cols) -> None:
    ts_type = batch.timestamp_type
    for _, _, ts_delta, delta, kpos, klen, vpos, vlen, hpos, hcount in _iter_fields(batch, section, 0, len(section)):
        offset = batch.base_offset + delta
        if not start_offset <= offset < end_offset:
            continue
        timestamp = batch.max_timestamp if ts_type == LOG_APPEND_TIME else batch.base_timestamp + ts_delta
        row = (offset, timestamp, ts_type, section_start + kpos, klen, section_start + vpos, vlen,
               section_start + hpos, hcount)
        for col, v in zip(cols, row):
            col.append(v)
