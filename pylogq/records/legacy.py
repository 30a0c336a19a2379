"""Legacy message sets: Kafka's magic v0 (0.8-0.9) and v1 (0.10) formats, pure Python.

A message set is entries laid end to end, with no count in front::

    MessageSet => [Offset MessageSize Message]     offset  size
      Offset       int64                           0       8   not covered by the CRC
      MessageSize  int32                           8       4   bytes of Message; not covered by the CRC

    Message v0 =>                                  offset  size (within the entry)
      Crc          uint32                          12      4   CRC-32 of Magic..end of Value
      Magic        int8                            16      1   0
      Attributes   int8                            17      1   bits 0-2 codec
      Key          bytes                           18
      Value        bytes

    Message v1 =>
      Crc          uint32                          12      4   CRC-32 of Magic..end of Value
      Magic        int8                            16      1   1
      Attributes   int8                            17      1   bits 0-2 codec, bit 3 timestamp type
      Timestamp    int64                           18      8   ms; -1 for none
      Key          bytes                           26
      Value        bytes

``bytes`` is an int32 length (-1 for null) then that many bytes. Codecs are
0 none, 1 gzip, 2 snappy, 3 lz4 (zstd needs magic 2). Timestamp type 0 is
CreateTime, 1 LogAppendTime. A v0 message has neither: its records report
timestamp -1 and timestamp type -1, as Kafka does.

Compression wraps a whole inner message set in one "wrapper" message: null key,
codec bits set, value = the compressed inner set. Kafka nests one level only,
and the inner messages carry the wrapper's magic. Offsets differ by magic:

* v0: inner offsets are absolute, so a broker assigning offsets must
  decompress, rewrite them and recompress (and re-hash the wrapper).
* v1: inner offsets are relative (0..n-1) and the wrapper carries the absolute
  offset of the last inner message, so a broker only patches the wrapper's
  offset field: absolute = wrapper offset - last relative + relative. A wrapper
  whose offset is below its last relative offset (a producer's set, before a
  broker assigned offsets) yields the inner offsets unchanged, as Kafka does.
  When the wrapper's timestamp type is LogAppendTime, every inner record takes
  the wrapper's timestamp.

Neither the offset nor the size field is covered by the CRC. The offset is
what a broker patches; a damaged size is still caught, because a message's
key and value lengths must fill it exactly. A size that runs past the end of
the buffer reads as a partial message, which fetch responses legitimately end
with: readers stop there, and ``valid_prefix_length`` says how many bytes
were whole. Everything else that is wrong raises
:class:`~pylogq.errors.CorruptRecordError` naming the offset and the problem.
"""

from __future__ import annotations

import struct
import time
from typing import Iterator, List, NamedTuple, Optional, Tuple, Union

from ..errors import (
    CorruptRecordError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidRecordError,
    RecordProblem,
    UnsupportedCodecError,
)
from . import codecs
from .crc import crc32

__all__ = [
    "OFFSET_OFFSET", "OFFSET_LENGTH", "SIZE_OFFSET", "SIZE_LENGTH", "LOG_OVERHEAD", "CRC_OFFSET",
    "CRC_LENGTH", "MAGIC_OFFSET", "MAGIC_LENGTH", "ATTRIBUTES_OFFSET", "ATTRIBUTES_LENGTH",
    "TIMESTAMP_OFFSET", "TIMESTAMP_LENGTH", "KEY_SIZE_OFFSET_V0", "KEY_SIZE_OFFSET_V1",
    "KEY_SIZE_LENGTH", "VALUE_SIZE_LENGTH", "RECORD_OVERHEAD_V0", "RECORD_OVERHEAD_V1",
    "CODEC_MASK", "TIMESTAMP_TYPE_MASK", "CREATE_TIME", "LOG_APPEND_TIME", "NO_TIMESTAMP",
    "NO_TIMESTAMP_TYPE", "INT32_MAX", "INT64_MAX", "LegacyRecord", "LegacyMessage",
    "iter_legacy_messages", "iter_legacy_records", "valid_prefix_length", "validate_legacy",
    "LegacyRecordMetadata", "LegacyRecordBatchBuilder", "assign_offsets_legacy", "first_keyless_offset",
    "is_legacy"
]

Buffer = Union[bytes, bytearray, memoryview]

OFFSET_OFFSET = 0
OFFSET_LENGTH = 8
SIZE_OFFSET = OFFSET_OFFSET + OFFSET_LENGTH
SIZE_LENGTH = 4
LOG_OVERHEAD = SIZE_OFFSET + SIZE_LENGTH  # 12
CRC_OFFSET = LOG_OVERHEAD
CRC_LENGTH = 4
MAGIC_OFFSET = CRC_OFFSET + CRC_LENGTH  # 16: the CRC covers from here to the end
MAGIC_LENGTH = 1
ATTRIBUTES_OFFSET = MAGIC_OFFSET + MAGIC_LENGTH
ATTRIBUTES_LENGTH = 1
TIMESTAMP_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH  # v1 only
TIMESTAMP_LENGTH = 8
KEY_SIZE_OFFSET_V0 = TIMESTAMP_OFFSET
KEY_SIZE_OFFSET_V1 = TIMESTAMP_OFFSET + TIMESTAMP_LENGTH
KEY_SIZE_LENGTH = 4
VALUE_SIZE_LENGTH = 4

# Bytes of a message (after the size field) with a null key and a null value.
RECORD_OVERHEAD_V0 = KEY_SIZE_OFFSET_V0 - CRC_OFFSET + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH  # 14
RECORD_OVERHEAD_V1 = KEY_SIZE_OFFSET_V1 - CRC_OFFSET + KEY_SIZE_LENGTH + VALUE_SIZE_LENGTH  # 22

CODEC_MASK = codecs.CODEC_MASK
TIMESTAMP_TYPE_MASK = 0x08
CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1
NO_TIMESTAMP_TYPE = -1
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

_LOG_HEADER = struct.Struct(">qi")
_CRC_MAGIC_ATTRIBUTES = struct.Struct(">Ibb")
_HEADER_V0 = struct.Struct(">qiIbb")
_HEADER_V1 = struct.Struct(">qiIbbq")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")

_OVERHEAD = (RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1)
_KEY_SIZE_OFFSET = (KEY_SIZE_OFFSET_V0, KEY_SIZE_OFFSET_V1)


def _detail(exc: BaseException) -> str:
    return str(exc.args[0]) if exc.args else str(exc)


def _kind_of(exc: BaseException) -> RecordProblem:
    """The kind of a codec's failure: a CorruptRecordError's own, else the data does not decompress."""
    kind = exc.kind if isinstance(exc, CorruptRecordError) else None
    return kind or RecordProblem.BAD_COMPRESSED_DATA


# -- reading ---------------------------------------------------------------


class LegacyRecord:
    """One record of a v0/v1 message set, with its absolute offset.

    ``checksum`` and ``attributes`` are those of the message that holds the
    record (the inner message when it came out of a wrapper);
    ``compression_type`` is the codec it travelled with (the wrapper's).
    v0 records have timestamp -1 and timestamp type -1. Legacy records have no
    headers: ``headers`` is always an empty list.
    """

    __slots__ = (
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "checksum",
        "magic",
        "attributes",
        "compression_type",
    )

    def __init__(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: Optional[bytes],
        value: Optional[bytes],
        checksum: int,
        magic: int,
        attributes: int,
        compression_type: int,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.checksum = checksum
        self.magic = magic
        self.attributes = attributes
        self.compression_type = compression_type

    @property
    def headers(self) -> list:
        return []

    def _fields(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LegacyRecord):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            "LegacyRecord(offset=%r, timestamp=%r, timestamp_type=%r, key=%r, value=%r, "
            "checksum=%r, magic=%r, attributes=%r, compression_type=%r)" % self._fields()
        )


class LegacyMessage:
    """One outer message of a message set as it lies in the buffer (for tools).

    ``position`` is where its entry starts in the buffer and ``size`` the
    entry's whole length, the 12 bytes of offset and size included, so the
    next entry starts at ``position + size``. For a v1 wrapper ``offset`` is
    the offset of its last inner record. ``key``/``value`` are the raw fields
    (a wrapper's value is the compressed inner set). Holds a view of the
    buffer: the buffer must not change while the message is in use.
    """

    __slots__ = (
        "offset",
        "position",
        "size",
        "crc",
        "magic",
        "attributes",
        "timestamp",
        "_key",
        "_value",
        "_entry",
        "_where",
    )

    def __init__(
        self,
        offset: int,
        position: int,
        size: int,
        crc: int,
        magic: int,
        attributes: int,
        timestamp: int,
        key: Optional[memoryview],
        value: Optional[memoryview],
        entry: memoryview,
        where: str,
    ) -> None:
        self.offset = offset
        self.position = position
        self.size = size
        self.crc = crc
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self._key = key
        self._value = value
        self._entry = entry
        self._where = where

    @property
    def compression_type(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime; -1 for v0, which has no timestamp."""
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_wrapper(self) -> bool:
        return self.attributes & CODEC_MASK != codecs.NONE

    @property
    def key(self) -> Optional[bytes]:
        return None if self._key is None else self._key.tobytes()

    @property
    def value(self) -> Optional[bytes]:
        return None if self._value is None else self._value.tobytes()

    def inner_messages(self, validate_crc: bool = True) -> List["LegacyMessage"]:
        """The messages of a wrapper's decompressed inner set, each checked."""
        return _inner_messages(self, validate_crc)

    def records(self, validate_crc: bool = True) -> List[LegacyRecord]:
        """The records this message holds: itself, or a wrapper's inner records."""
        return _records_of(self, validate_crc)

    def __repr__(self) -> str:
        return "LegacyMessage(offset=%r, position=%r, size=%r, crc=%r, magic=%r, attributes=%r, timestamp=%r)" % (
            self.offset,
            self.position,
            self.size,
            self.crc,
            self.magic,
            self.attributes,
            self.timestamp,
        )


def _as_view(buffer: Buffer) -> memoryview:
    view = memoryview(buffer)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _read_message(
    view: memoryview, pos: int, limit: int, validate_crc: bool, allow_partial: bool, where: str
) -> Optional[LegacyMessage]:
    """The message whose entry starts at ``pos``; None when it is partial and that is allowed."""
    remaining = limit - pos
    if remaining < LOG_OVERHEAD:
        if allow_partial:
            return None
        raise CorruptRecordError(
            "%smessage set ends with %d bytes at byte %d, fewer than an offset and a size" % (where, remaining, pos),
            kind=(RecordProblem.BAD_WRAPPER if where else RecordProblem.BAD_LENGTH)
        )
    offset, size = _LOG_HEADER.unpack_from(view, pos)
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            "%smessage at offset %d has size %d, below the minimum of %d" % (where, offset, size, RECORD_OVERHEAD_V0),
            kind=RecordProblem.BAD_LENGTH
        )
    end = pos + LOG_OVERHEAD + size
    if end > limit:
        if allow_partial:
            return None
        raise CorruptRecordError(
            "%smessage at offset %d has size %d but only %d bytes follow"
            % (where, offset, size, remaining - LOG_OVERHEAD),
            kind=(RecordProblem.BAD_WRAPPER if where else RecordProblem.BAD_LENGTH)
        )
    crc, magic, attributes = _CRC_MAGIC_ATTRIBUTES.unpack_from(view, pos + CRC_OFFSET)
    if magic != 0 and magic != 1:
        raise CorruptRecordError("%smessage at offset %d has magic %d, not 0 or 1" % (where, offset, magic),
                                 kind=RecordProblem.BAD_MAGIC)
    if size < _OVERHEAD[magic]:
        raise CorruptRecordError(
            "%smessage at offset %d has size %d, below the minimum of %d for magic %d"
            % (where, offset, size, _OVERHEAD[magic], magic), kind=RecordProblem.BAD_LENGTH
        )
    if validate_crc:
        computed = crc32(view[pos + MAGIC_OFFSET : end])
        if computed != crc:
            raise CorruptRecordError(
                "%smessage at offset %d fails its CRC-32 check: stored 0x%08x, computed 0x%08x"
                % (where, offset, crc, computed), kind=RecordProblem.BAD_CRC
            )
    codec = attributes & CODEC_MASK
    if codec > codecs.LZ4:
        raise CorruptRecordError(
            "%smessage at offset %d names codec %d, which magic %d cannot carry" % (where, offset, codec, magic),
            kind=RecordProblem.UNKNOWN_CODEC
        )
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(view, pos + TIMESTAMP_OFFSET)
    else:
        timestamp = NO_TIMESTAMP
    p = pos + _KEY_SIZE_OFFSET[magic]
    key = value = None
    # The minimum-size check above guarantees both length fields lie inside the message.
    (key_size,) = _INT32.unpack_from(view, p)
    p += KEY_SIZE_LENGTH
    if key_size >= 0:
        if p + key_size + VALUE_SIZE_LENGTH > end:
            raise CorruptRecordError(
                "%smessage at offset %d has a key of %d bytes that overruns the message" % (where, offset, key_size),
                kind=RecordProblem.BAD_RECORD
            )
        key = view[p : p + key_size]
        p += key_size
    elif key_size != -1:
        raise CorruptRecordError("%smessage at offset %d has key length %d" % (where, offset, key_size),
                                 kind=RecordProblem.BAD_RECORD)
    (value_size,) = _INT32.unpack_from(view, p)
    p += VALUE_SIZE_LENGTH
    if value_size >= 0:
        if p + value_size > end:
            raise CorruptRecordError(
                "%smessage at offset %d has a value of %d bytes that overruns the message" % (where, offset, value_size),
                kind=RecordProblem.BAD_RECORD
            )
        value = view[p : p + value_size]
        p += value_size
    elif value_size != -1:
        raise CorruptRecordError("%smessage at offset %d has value length %d" % (where, offset, value_size),
                                 kind=RecordProblem.BAD_RECORD)
    if p != end:
        raise CorruptRecordError(
            "%smessage at offset %d has size %d but its fields end %d bytes earlier" % (where, offset, size, end - p),
            kind=RecordProblem.BAD_RECORD
        )
    return LegacyMessage(offset, pos, end - pos, crc, magic, attributes, timestamp, key, value, view[pos:end], where)


def _where(wrapper: LegacyMessage) -> str:
    return "%swrapper at offset %d: " % (wrapper._where, wrapper.offset)


def _inner_messages(wrapper: LegacyMessage, validate_crc: bool) -> List[LegacyMessage]:
    """Decompress a wrapper and check its inner set whole: no partial, no nesting, same magic."""
    codec = wrapper.compression_type
    if codec == codecs.NONE:
        raise ValueError("the message at offset %d is not a wrapper" % wrapper.offset)
    where = _where(wrapper)
    if wrapper._value is None:
        raise CorruptRecordError("%scompressed value is null" % where, kind=RecordProblem.BAD_WRAPPER)
    try:
        data = codecs.decompress(codec, wrapper._value, wrapper.magic)
    except UnsupportedCodecError:
        raise
    except Exception as exc:  # codec libraries raise their own error types
        raise CorruptRecordError(
            "%s%s payload does not decompress: %s" % (where, codecs.NAMES[codec], _detail(exc)), kind=_kind_of(exc)
        ) from None
    return list(_iter_inner(wrapper, data, validate_crc))


def _iter_inner(wrapper: LegacyMessage, data: bytes, validate_crc: bool) -> Iterator[LegacyMessage]:
    """The messages of a wrapper's decompressed inner set ``data``, each checked as it comes
    (no partial, no nesting, the wrapper's magic): a caller that keeps none holds one at a time."""
    where = _where(wrapper)
    view = memoryview(data)
    limit = len(data)
    if limit == 0:
        raise CorruptRecordError("%sinner message set is empty" % where, kind=RecordProblem.BAD_WRAPPER)
    pos = 0
    while pos < limit:
        msg = _read_message(view, pos, limit, validate_crc, False, where + "inner ")
        assert msg is not None
        if msg.magic != wrapper.magic:
            raise CorruptRecordError(
                "%sinner message at offset %d has magic %d, the wrapper magic %d"
                % (where, msg.offset, msg.magic, wrapper.magic), kind=RecordProblem.BAD_MAGIC
            )
        if msg.is_wrapper:
            raise CorruptRecordError("%sinner message at offset %d is itself compressed" % (where, msg.offset),
                                     kind=RecordProblem.BAD_WRAPPER)
        yield msg
        pos += msg.size


def _bounded_inner_set(wrapper: LegacyMessage) -> bytes:
    """A producer's wrapper decompressed for the broker: at most ``codecs.DECOMPRESS_WINDOW`` bytes.

    The inner set is renumbered and recompressed whole (v0), so it cannot be
    streamed: a larger one is refused (MessageTooLargeError) instead.
    """
    where = _where(wrapper)
    if wrapper._value is None:
        raise CorruptRecordError("%scompressed value is null" % where, kind=RecordProblem.BAD_WRAPPER)
    window = codecs.DECOMPRESS_WINDOW
    why = "the most a v0/v1 wrapper's inner message set may (the broker decompresses it whole)"
    with codecs.DecompressStream(wrapper.compression_type, wrapper._value, wrapper.magic, max_size=window,
                                 what=where[:-2], why=why) as stream:
        return stream.read(window + 1)


def _records_of(msg: LegacyMessage, validate_crc: bool) -> List[LegacyRecord]:
    codec = msg.compression_type
    if codec == codecs.NONE:
        return [
            LegacyRecord(
                msg.offset,
                msg.timestamp,
                msg.timestamp_type,
                msg.key,
                msg.value,
                msg.crc,
                msg.magic,
                msg.attributes,
                codec,
            )
        ]
    inner = _inner_messages(msg, validate_crc)
    base = -1
    if msg.magic > 0:
        base = msg.offset - inner[-1].offset
    ts_type = msg.timestamp_type
    out = []
    for m in inner:
        offset = m.offset + base if base >= 0 else m.offset
        timestamp = msg.timestamp if ts_type == LOG_APPEND_TIME else m.timestamp
        out.append(LegacyRecord(offset, timestamp, ts_type, m.key, m.value, m.crc, m.magic, m.attributes, codec))
    return out


def iter_legacy_messages(
    buffer: Buffer, validate_crc: bool = True, allow_partial: bool = True
) -> Iterator[LegacyMessage]:
    """The outer messages of a message set, each checked (wrappers stay compressed).

    Stops before a trailing partial message when ``allow_partial`` (a fetch
    response), raises on one otherwise (a produce request).
    """
    view = _as_view(buffer)
    limit = len(view)
    pos = 0
    while pos < limit:
        msg = _read_message(view, pos, limit, validate_crc, allow_partial, "")
        if msg is None:
            return
        yield msg
        pos += msg.size


def iter_legacy_records(
    buffer: Buffer, validate_crc: bool = True, allow_partial: bool = True
) -> Iterator[LegacyRecord]:
    """Every record of a message set in order, wrappers decompressed and flattened."""
    for msg in iter_legacy_messages(buffer, validate_crc, allow_partial):
        yield from _records_of(msg, validate_crc)


def first_keyless_offset(buffer: Buffer) -> int:
    """The offset of the first record without a key in a checked message set; -1 when all have one.

    The compacted topic's check of a producer's set after its offsets were
    assigned (:func:`assign_offsets_legacy`): wrappers are decompressed as that
    bounds them, and no record is kept, so memory stays within the window.
    """
    for msg in iter_legacy_messages(buffer, False, False):
        if not msg.is_wrapper:
            if msg._key is None:
                return msg.offset
            continue
        data = _bounded_inner_set(msg)
        base = -1
        if msg.magic > 0:
            # The last inner message's relative offset: the walk needs it first.
            for m in _iter_inner(msg, data, False):
                base = msg.offset - m.offset
        for m in _iter_inner(msg, data, False):
            if m._key is None:
                return m.offset + base if base >= 0 else m.offset
    return -1


def is_legacy(buffer: Buffer) -> bool:
    """Whether a producer's buffer is a v0/v1 message set (its first entry's magic, byte 16, below 2)."""
    return len(buffer) > MAGIC_OFFSET and buffer[MAGIC_OFFSET] < 2


def valid_prefix_length(buffer: Buffer) -> int:
    """The byte length of the whole messages at the start of ``buffer``.

    Walks the offset and size fields only, so it is cheap; a size that no
    message can have raises. The CRCs are checked when the records are read.
    """
    view = _as_view(buffer)
    limit = len(view)
    pos = 0
    while limit - pos >= LOG_OVERHEAD:
        offset, size = _LOG_HEADER.unpack_from(view, pos)
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                "message at offset %d has size %d, below the minimum of %d" % (offset, size, RECORD_OVERHEAD_V0),
                kind=RecordProblem.BAD_LENGTH
            )
        if pos + LOG_OVERHEAD + size > limit:
            break
        pos += LOG_OVERHEAD + size
    return pos


def validate_legacy(buffer: Buffer) -> int:
    """Check a whole message set (CRCs, structure, every wrapper's inner set); -> record count.

    A trailing partial message is an error here: a producer sends whole messages.
    """
    count = 0
    for msg in iter_legacy_messages(buffer, True, False):
        if msg.is_wrapper:
            count += len(_inner_messages(msg, True))
        else:
            count += 1
    return count


# -- writing ---------------------------------------------------------------


class LegacyRecordMetadata(NamedTuple):
    """Where an appended record went: its offset, entry size, timestamp and message CRC."""

    offset: int
    size: int
    timestamp: int
    crc: int


def _append_message(
    out: bytearray,
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: Optional[Buffer],
    value: Optional[Buffer],
) -> Tuple[int, int]:
    """Encode one message entry at the end of ``out``; -> (crc, entry size)."""
    start = len(out)
    key_size = -1 if key is None else len(key)
    value_size = -1 if value is None else len(value)
    size = _OVERHEAD[magic] + max(key_size, 0) + max(value_size, 0)
    if size > INT32_MAX:
        raise InvalidArgumentError("a message of %d bytes does not fit the int32 size field" % size)
    if magic:
        out += _HEADER_V1.pack(offset, size, 0, magic, attributes, timestamp)
    else:
        out += _HEADER_V0.pack(offset, size, 0, magic, attributes)
    out += _INT32.pack(key_size)
    if key is not None:
        out += key
    out += _INT32.pack(value_size)
    if value is not None:
        out += value
    crc = crc32(memoryview(out)[start + MAGIC_OFFSET :])
    _UINT32.pack_into(out, start + CRC_OFFSET, crc)
    return crc, LOG_OVERHEAD + size


def _as_bytes(obj: object, what: str) -> Optional[Buffer]:
    if obj is None or isinstance(obj, (bytes, bytearray)):
        return obj
    if isinstance(obj, memoryview):
        return obj.tobytes()
    raise InvalidArgumentTypeError("%s must be bytes, bytearray, memoryview or None, not %s"
                                   % (what, type(obj).__name__))


class LegacyRecordBatchBuilder:
    """Builds one producer message set of magic 0 or 1, record by record.

    ``append`` returns a :class:`LegacyRecordMetadata`, or None when the
    record would take the set past ``batch_size`` bytes (the first record
    always fits). Offsets must increase. ``build()`` returns the message set:
    the messages themselves without compression, otherwise one wrapper whose
    value is the compressed inner set. A v1 wrapper holds inner offsets
    relative to the first record and carries the last offset and the largest
    timestamp; a v0 wrapper holds the absolute offsets and carries the last
    offset. ``build()`` leaves the builder unchanged, so more records may be
    appended and the set built again. Not thread-safe.
    """

    __slots__ = (
        "magic",
        "compression_type",
        "batch_size",
        "_buffer",
        "_count",
        "_first_offset",
        "_last_offset",
        "_max_timestamp",
    )

    def __init__(self, magic: int, compression_type: Union[int, str, None] = 0, batch_size: int = INT32_MAX) -> None:
        if magic not in (0, 1) or isinstance(magic, bool):
            raise InvalidArgumentError("legacy message sets have magic 0 or 1, not %r" % (magic,))
        codec = codecs.codec_id(compression_type)
        if codec > codecs.LZ4:
            raise UnsupportedCodecError("%s compression needs magic 2, not magic %d" % (codecs.NAMES[codec], magic))
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise InvalidArgumentError("batch_size must be an int >= 1, not %r" % (batch_size,))
        self.magic = magic
        self.compression_type = codec
        self.batch_size = batch_size
        self._buffer = bytearray()
        self._count = 0
        self._first_offset = -1
        self._last_offset = -1
        self._max_timestamp = NO_TIMESTAMP

    def append(
        self,
        offset: int,
        timestamp: Optional[int],
        key: Optional[Buffer],
        value: Optional[Buffer],
        headers: Optional[list] = None,
    ) -> Optional[LegacyRecordMetadata]:
        """Add one record; None when the set is full. ``timestamp`` (ms) is ignored for v0."""
        if headers:
            raise InvalidArgumentError("headers must be empty for magic %d messages, not %r" % (self.magic, headers))
        _check_offset(offset, "offset")
        if self._count and offset <= self._last_offset:
            raise InvalidArgumentError("offset %d does not follow the previous offset %d" % (offset, self._last_offset))
        if self.magic == 0:
            timestamp = NO_TIMESTAMP
        elif timestamp is None:
            timestamp = int(time.time() * 1000)
        elif not isinstance(timestamp, int) or isinstance(timestamp, bool):
            raise InvalidArgumentTypeError("timestamp must be an int (ms) or None, not %r" % (timestamp,))
        elif not NO_TIMESTAMP <= timestamp <= INT64_MAX:
            raise InvalidArgumentError("timestamp must be -1 (none) or a non-negative int64, not %r" % (timestamp,))
        key = _as_bytes(key, "key")
        value = _as_bytes(value, "value")
        projected = len(self._buffer) + self.size_in_bytes(self.magic, key, value)
        if self.compression_type:
            projected += LOG_OVERHEAD + _OVERHEAD[self.magic]
        if self._count and projected > self.batch_size:
            return None
        if not self._count:
            self._first_offset = offset
        stored = offset - self._first_offset if self.magic and self.compression_type else offset
        crc, size = _append_message(self._buffer, stored, self.magic, 0, timestamp, key, value)
        self._count += 1
        self._last_offset = offset
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return LegacyRecordMetadata(offset, size, timestamp, crc)

    def size(self) -> int:
        """Bytes of the uncompressed message set so far."""
        return len(self._buffer)

    def record_count(self) -> int:
        return self._count

    def build(self) -> bytearray:
        """The message set: plain messages, or one wrapper around the compressed set."""
        if not self.compression_type or not self._count:
            return bytearray(self._buffer)
        value = codecs.compress(self.compression_type, self._buffer, self.magic)
        out = bytearray()
        timestamp = self._max_timestamp if self.magic else NO_TIMESTAMP
        _append_message(out, self._last_offset, self.magic, self.compression_type, timestamp, None, value)
        return out

    @staticmethod
    def size_in_bytes(magic: int, key: Optional[Buffer], value: Optional[Buffer]) -> int:
        """The entry size of one uncompressed message, offset and size fields included."""
        return LOG_OVERHEAD + _OVERHEAD[magic] + (0 if key is None else len(key)) + (0 if value is None else len(value))


# -- offsets (broker side) -------------------------------------------------


def _check_offset(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentTypeError("%s must be an int, not %r" % (what, value))
    if not 0 <= value <= INT64_MAX:
        raise InvalidArgumentError("%s must be in [0, 2**63-1], not %r" % (what, value))
    return value


def assign_offsets_legacy(
    buffer: Buffer, base_offset: int, log_append_time: Optional[int] = None
) -> Tuple[Union[bytearray, memoryview], int]:
    """Give a producer's message set consecutive offsets from ``base_offset``; -> (set, last offset).

    Every message is checked first (as :func:`validate_legacy`); nothing is
    patched unless all are valid. Plain messages and v1 wrappers only need
    their offset field patched (the CRC does not cover it); that is done in
    place when the buffer is writable (bytearray, writable memoryview), in a
    bytearray copy otherwise. A v0 wrapper holds absolute inner offsets, so it
    is decompressed, renumbered, recompressed with its codec and re-hashed,
    and the result is a new bytearray; so is a v1 wrapper whose relative inner
    offsets are not 0..n-1, which Kafka renumbers the same way. With
    ``log_append_time`` (ms), every v1 message (a wrapper, not its inner
    messages) gets the LogAppendTime bit and that timestamp, and a new CRC,
    as a broker does for a LogAppendTime topic; v0 messages have no timestamp.
    A wrapper's inner set may decompress to at most ``codecs.DECOMPRESS_WINDOW``
    bytes (it is handled whole): a larger one raises MessageTooLargeError.
    """
    base_offset = _check_offset(base_offset, "base_offset")
    if log_append_time is not None:
        log_append_time = _check_offset(log_append_time, "log_append_time")
    messages = list(iter_legacy_messages(buffer, True, False))
    if not messages:
        raise InvalidRecordError("produce message set holds no message")
    plan = []  # (message, new offset, re-encoded entry or None)
    next_offset = base_offset
    rebuild = False
    for msg in messages:
        last = next_offset
        replacement = None
        if msg.is_wrapper:
            # Bounded (the window), and no inner message is kept: a set of tiny messages
            # would otherwise cost far more as objects than as bytes.
            data = _bounded_inner_set(msg)
            first_inner = 0 if msg.magic > 0 else next_offset
            count = 0
            in_order = True
            for m in _iter_inner(msg, data, True):
                in_order = in_order and m.offset == first_inner + count
                count += 1
            last = next_offset + count - 1
            if last <= INT64_MAX and not in_order:
                replacement = _rewrap(msg, data, first_inner, last, log_append_time)
                rebuild = True
        if last > INT64_MAX:
            raise InvalidArgumentError("offsets from %d overflow int64 at the message at byte %d" % (base_offset, msg.position))
        plan.append((msg, last, replacement))
        next_offset = last + 1
    view = _as_view(buffer)
    if rebuild:
        out = bytearray()
        for msg, offset, replacement in plan:
            if replacement is None:
                start = len(out)
                out += msg._entry
                _patch(out, start, msg, offset, log_append_time)
            else:
                out += replacement
        return out, next_offset - 1
    target: Union[bytearray, memoryview]
    patch: Union[bytearray, memoryview]
    if isinstance(buffer, bytearray) or (isinstance(buffer, memoryview) and not buffer.readonly):
        target, patch = buffer, view
    else:
        target = patch = bytearray(view)
    for msg, offset, _ in plan:
        _patch(patch, msg.position, msg, offset, log_append_time)
    return target, next_offset - 1


def _patch(
    out: Union[bytearray, memoryview], start: int, msg: LegacyMessage, offset: int, log_append_time: Optional[int]
) -> None:
    """Write a new offset (and for v1 a LogAppendTime timestamp) into the entry at ``start``."""
    _INT64.pack_into(out, start, offset)
    if log_append_time is not None and msg.magic == 1:
        out[start + ATTRIBUTES_OFFSET] = (msg.attributes | TIMESTAMP_TYPE_MASK) & 0xFF
        _INT64.pack_into(out, start + TIMESTAMP_OFFSET, log_append_time)
        with memoryview(out) as mv:
            crc = crc32(mv[start + MAGIC_OFFSET : start + msg.size])
        _UINT32.pack_into(out, start + CRC_OFFSET, crc)


def _rewrap(
    wrapper: LegacyMessage, data: bytes, first: int, offset: int, log_append_time: Optional[int]
) -> bytearray:
    """The wrapper re-encoded around its (checked) inner set ``data`` renumbered first, first+1, ...,
    at outer ``offset``."""
    inner_set = bytearray(data)
    pos = i = 0
    while pos < len(inner_set):
        _INT64.pack_into(inner_set, pos, first + i)
        pos += LOG_OVERHEAD + _INT32.unpack_from(inner_set, pos + SIZE_OFFSET)[0]
        i += 1
    value = codecs.compress(wrapper.compression_type, inner_set, wrapper.magic)
    attributes, timestamp = wrapper.attributes, wrapper.timestamp
    if log_append_time is not None and wrapper.magic == 1:
        attributes |= TIMESTAMP_TYPE_MASK
        timestamp = log_append_time
    out = bytearray()
    _append_message(out, offset, wrapper.magic, attributes, timestamp, wrapper._key, value)
    return out
