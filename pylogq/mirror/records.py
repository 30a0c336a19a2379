"""The records of MirrorMaker's internal topics, byte for byte Kafka's.

A mirror writes three kinds of record besides the ones it copies, each a key and a value
in Kafka's ``Schema`` types (big-endian integers; ``STRING`` is an int16 length, then that
many bytes of UTF-8, never null)::

    offset sync (the offset-syncs topic, mm2-offset-syncs.<cluster>.internal, partition 0)
      key    topic             STRING    the source partition's topic
             partition         INT32
      value  upstreamOffset    INT64     an offset on the source partition ...
             offset            INT64     ... and the offset its copy got on the target
                                         (no version: Kafka never gave this value one)

    checkpoint (<source>.checkpoints.internal on the target, partition 0)
      key    group             STRING    a consumer group of the source cluster
             topic             STRING    the topic on the TARGET (the remote topic's name)
             partition         INT32
      value  version           INT16     0
             upstreamOffset    INT64     the group's committed offset on the source ...
             offset            INT64     ... translated to the target
             metadata          STRING    the commit's metadata

    heartbeat (heartbeats)
      key    sourceClusterAlias STRING
             targetClusterAlias STRING
      value  version           INT16     0
             timestamp         INT64     milliseconds since the epoch

Decoding is bounds-checked: truncated bytes, a negative or overlong string length, text
that is not UTF-8, an unknown value version, bytes after the last field or a missing
key or value raise :class:`~pylogq.errors.CorruptRecordError` naming the record kind,
the part and the position. Encoding refuses a value its field cannot hold (a string of
more than 32767 bytes, an integer out of its range) with
:class:`~pylogq.errors.InvalidArgumentError` naming the field. The types are immutable
and safe to share between threads.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Optional, Union

from ..errors import CorruptRecordError, InvalidArgumentError

__all__ = ["CHECKPOINT_VERSION", "HEARTBEAT_VERSION", "Checkpoint", "Heartbeat", "OffsetSync"]

#: The value version Kafka writes (and the only one it defines) for checkpoints and heartbeats.
CHECKPOINT_VERSION = 0
HEARTBEAT_VERSION = 0

Buffer = Union[bytes, bytearray, memoryview]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_STRING_MAX = 0x7FFF  # Kafka's Type.STRING: the length is an int16


# -- writing --------------------------------------------------------------------


def _put_string(out: bytearray, value: str, what: str) -> None:
    if not isinstance(value, str):
        raise InvalidArgumentError("%s must be a str, not %s" % (what, type(value).__name__))
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError("%s cannot be written as UTF-8: %s" % (what, exc.reason)) from None
    if len(data) > _STRING_MAX:
        raise InvalidArgumentError("%s is %d bytes long in UTF-8, the limit is %d" % (what, len(data), _STRING_MAX))
    out += _I16.pack(len(data))
    out += data


def _put_int(out: bytearray, packer: struct.Struct, value: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError("%s must be an int, not %r" % (what, value))
    try:
        out += packer.pack(value)
    except struct.error:
        bits = packer.size * 8
        raise InvalidArgumentError("%s must be a %d-bit signed integer, not %d" % (what, bits, value)) from None


# -- reading --------------------------------------------------------------------


class _Reader:
    """A bounds-checked cursor over one key or value: every read checks what is left first."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: Optional[Buffer], what: str) -> None:
        if buf is None:
            raise CorruptRecordError("%s: missing (the record has none)" % what)
        self.buf = bytes(buf)
        self.pos = 0
        self.what = what

    def _take(self, n: int, field: str) -> int:
        start = self.pos
        if start + n > len(self.buf):
            raise CorruptRecordError("%s: truncated at %s: need %d bytes at position %d, %d left"
                                     % (self.what, field, n, start, len(self.buf) - start))
        self.pos = start + n
        return start

    def i16(self, field: str) -> int:
        return int(_I16.unpack_from(self.buf, self._take(2, field))[0])

    def i32(self, field: str) -> int:
        return int(_I32.unpack_from(self.buf, self._take(4, field))[0])

    def i64(self, field: str) -> int:
        return int(_I64.unpack_from(self.buf, self._take(8, field))[0])

    def string(self, field: str) -> str:
        n = self.i16(field)
        if n < 0:
            raise CorruptRecordError("%s: %s has length %d at position %d (a STRING is never null)"
                                     % (self.what, field, n, self.pos - 2))
        start = self._take(n, field)
        try:
            return self.buf[start:start + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError("%s: %s at position %d is not UTF-8" % (self.what, field, start)) from exc

    def version(self, known: int) -> None:
        version = self.i16("version")
        if version != known:
            raise CorruptRecordError("%s: version %d is unknown (Kafka's MirrorMaker writes version %d)"
                                     % (self.what, version, known))

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise CorruptRecordError("%s: %d bytes after the last field (position %d)"
                                     % (self.what, len(self.buf) - self.pos, self.pos))


# -- the records ----------------------------------------------------------------


class OffsetSync(NamedTuple):
    """Source offset ``upstream_offset`` of ``topic``/``partition`` was copied to offset
    ``downstream_offset`` of its remote topic on the target (Kafka's ``OffsetSync``)."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def encode_key(self) -> bytes:
        """The record key: topic, partition."""
        out = bytearray()
        _put_string(out, self.topic, "offset sync topic")
        _put_int(out, _I32, self.partition, "offset sync partition")
        return bytes(out)

    def encode_value(self) -> bytes:
        """The record value: upstream offset, downstream offset (no version)."""
        out = bytearray()
        _put_int(out, _I64, self.upstream_offset, "offset sync upstream offset")
        _put_int(out, _I64, self.downstream_offset, "offset sync downstream offset")
        return bytes(out)

    @classmethod
    def decode(cls, key: Optional[Buffer], value: Optional[Buffer]) -> "OffsetSync":
        """The offset sync a record of the offset-syncs topic holds; CorruptRecordError on bad bytes."""
        k = _Reader(key, "offset sync key")
        topic = k.string("topic")
        partition = k.i32("partition")
        k.done()
        v = _Reader(value, "offset sync value")
        upstream = v.i64("upstreamOffset")
        downstream = v.i64("offset")
        v.done()
        return cls(topic, partition, upstream, downstream)


class Checkpoint(NamedTuple):
    """Consumer group ``group``'s committed offset ``upstream_offset`` on the source,
    translated to ``downstream_offset`` of ``topic``/``partition`` on the target (Kafka's
    ``Checkpoint``; ``topic`` is the remote topic's name, as the target knows it)."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def encode_key(self) -> bytes:
        """The record key: group, topic, partition."""
        out = bytearray()
        _put_string(out, self.group, "checkpoint group")
        _put_string(out, self.topic, "checkpoint topic")
        _put_int(out, _I32, self.partition, "checkpoint partition")
        return bytes(out)

    def encode_value(self) -> bytes:
        """The record value: version 0, upstream offset, downstream offset, metadata."""
        out = bytearray(_I16.pack(CHECKPOINT_VERSION))
        _put_int(out, _I64, self.upstream_offset, "checkpoint upstream offset")
        _put_int(out, _I64, self.downstream_offset, "checkpoint downstream offset")
        _put_string(out, self.metadata, "checkpoint metadata")
        return bytes(out)

    @classmethod
    def decode(cls, key: Optional[Buffer], value: Optional[Buffer]) -> "Checkpoint":
        """The checkpoint a record of a checkpoints topic holds; CorruptRecordError on bad bytes
        (a value version other than 0 included)."""
        k = _Reader(key, "checkpoint key")
        group = k.string("group")
        topic = k.string("topic")
        partition = k.i32("partition")
        k.done()
        v = _Reader(value, "checkpoint value")
        v.version(CHECKPOINT_VERSION)
        upstream = v.i64("upstreamOffset")
        downstream = v.i64("offset")
        metadata = v.string("metadata")
        v.done()
        return cls(group, topic, partition, upstream, downstream, metadata)


class Heartbeat(NamedTuple):
    """The flow ``source_cluster_alias``->``target_cluster_alias`` was alive at ``timestamp``
    (milliseconds since the epoch; Kafka's ``Heartbeat``)."""

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def encode_key(self) -> bytes:
        """The record key: source alias, target alias."""
        out = bytearray()
        _put_string(out, self.source_cluster_alias, "heartbeat source cluster alias")
        _put_string(out, self.target_cluster_alias, "heartbeat target cluster alias")
        return bytes(out)

    def encode_value(self) -> bytes:
        """The record value: version 0, timestamp."""
        out = bytearray(_I16.pack(HEARTBEAT_VERSION))
        _put_int(out, _I64, self.timestamp, "heartbeat timestamp")
        return bytes(out)

    @classmethod
    def decode(cls, key: Optional[Buffer], value: Optional[Buffer]) -> "Heartbeat":
        """The heartbeat a record of a heartbeats topic holds; CorruptRecordError on bad bytes
        (a value version other than 0 included)."""
        k = _Reader(key, "heartbeat key")
        source = k.string("sourceClusterAlias")
        target = k.string("targetClusterAlias")
        k.done()
        v = _Reader(value, "heartbeat value")
        v.version(HEARTBEAT_VERSION)
        timestamp = v.i64("timestamp")
        v.done()
        return cls(source, target, timestamp)
