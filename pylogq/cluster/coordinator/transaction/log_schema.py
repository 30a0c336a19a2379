"""The binary key and value formats of the internal topic ``__transaction_state``.

Kafka's transaction coordinator keeps one record per transactional id in this compacted
topic: the key names the id, the value its latest state. A null value (a tombstone)
removes an expired id. Integers are big-endian; ``STRING`` is an int16 length then UTF-8::

    key (version 0)
        version                 int16
        transactional_id        STRING

    value (version 0; version 1 is the flexible form, read but not written)
        version                 int16
        producer_id             int64
        producer_epoch          int16
        transaction_timeout_ms  int32
        transaction_status      int8      (see TxnState)
        partitions              nullable array of
            topic               STRING
            partition_ids       [int32]
        last_update_timestamp   int64
        start_timestamp         int64

Version 1 (KIP-890's transaction version 2) uses compact strings and arrays and tagged
fields (the previous and next producer ids, the client's transaction version). pylogq
writes version 0, as Kafka 3.9 does at transaction version 0, and reads both. The id's
partition of the topic is ``abs(java_string_hash(id)) % num_partitions``, as for groups.
"""

from __future__ import annotations

import struct
from typing import FrozenSet, NamedTuple, Optional, Tuple, Union

from ....errors import CorruptRecordError
from ..group.offsets_schema import _put_string, _Reader, partition_for_group

__all__ = [
    "KEY_VERSION",
    "VALUE_VERSION",
    "TxnLogValue",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "partition_for_transactional_id",
]

KEY_VERSION = 0
VALUE_VERSION = 0
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

Buffer = Union[bytes, bytearray, memoryview]


class TxnLogValue(NamedTuple):
    """One transactional id's state as stored. ``last_producer_id`` and ``last_producer_epoch``
    are -1 in version 0 records (they are not stored there)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: FrozenSet[Tuple[str, int]]
    last_update_ms: int
    start_ms: int
    last_producer_id: int = -1


def partition_for_transactional_id(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition of ``transactional_id`` (Kafka's ``partitionFor``)."""
    return partition_for_group(transactional_id, num_partitions)


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(_I16.pack(KEY_VERSION))
    _put_string(out, transactional_id, "transactional id")
    return bytes(out)


def encode_value(value: TxnLogValue) -> bytes:
    """Version 0, partitions grouped by topic in name order (Kafka writes null for none in
    the Empty and Complete states; an empty array reads the same)."""
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _I64.pack(value.producer_id)
    out += _I16.pack(value.producer_epoch)
    out += _I32.pack(value.timeout_ms)
    out += _I8.pack(value.state)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in value.partitions:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(by_topic))
        for topic in sorted(by_topic):
            _put_string(out, topic, "topic")
            ids = sorted(by_topic[topic])
            out += _I32.pack(len(ids))
            for p in ids:
                out += _I32.pack(p)
    out += _I64.pack(value.last_update_ms)
    out += _I64.pack(value.start_ms)
    return bytes(out)


def decode_key(key: Buffer) -> Optional[str]:
    """The transactional id of a key; None for a key version this module does not know."""
    r = _Reader(bytes(key), "__transaction_state key")
    version = r.i16()
    if version != KEY_VERSION:
        return None
    transactional_id = r.string()
    r.done()
    return transactional_id


class _CompactReader(_Reader):
    """Version 1's compact forms: unsigned varints, lengths stored plus one, tagged fields."""

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            if shift > 28:
                raise CorruptRecordError("%s: varint too long at position %d" % (self.what, self.pos))
            b = self.buf[self._take(1)]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptRecordError("%s: null compact string at position %d" % (self.what, self.pos))
        start = self._take(n)
        try:
            return self.buf[start:start + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError("%s: string at position %d is not UTF-8" % (self.what, start)) from exc

    def compact_count(self, min_size: int) -> int:
        n = self.uvarint() - 1
        if n > 0 and n * min_size > len(self.buf) - self.pos:
            raise CorruptRecordError("%s: array count %d at position %d" % (self.what, n, self.pos))
        return n

    def tagged_fields(self) -> dict[int, bytes]:
        fields = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            start = self._take(size)
            fields[tag] = bytes(self.buf[start:start + size])
        return fields


def decode_value(value: Buffer) -> TxnLogValue:
    """Decode a value of version 0 or 1; CorruptRecordError for anything else."""
    r = _CompactReader(bytes(value), "__transaction_state value")
    version = r.i16()
    if version not in (0, 1):
        raise CorruptRecordError("__transaction_state value version %d is unknown" % version)
    producer_id = r.i64()
    epoch = r.i16()
    timeout_ms = r.i32()
    state = int(_I8.unpack_from(r.buf, r._take(1))[0])
    partitions = set()
    if version == 0:
        count = r.i32()
        if count < -1 or count * 6 > len(r.buf) - r.pos:
            raise CorruptRecordError("__transaction_state value: partition count %d" % count)
        for _ in range(max(count, 0)):
            topic = r.string()
            n = r.i32()
            if n < 0 or n * 4 > len(r.buf) - r.pos:
                raise CorruptRecordError("__transaction_state value: partition id count %d" % n)
            for _ in range(n):
                partitions.add((topic, r.i32()))
    else:
        for _ in range(max(r.compact_count(3), 0)):
            topic = r.compact_string()
            for _ in range(max(r.compact_count(4), 0)):
                partitions.add((topic, r.i32()))
            r.tagged_fields()
    last_update_ms = r.i64()
    start_ms = r.i64()
    last_producer_id = -1
    if version == 1:
        tags = r.tagged_fields()
        if 0 in tags and len(tags[0]) == 8:
            last_producer_id = int(_I64.unpack(tags[0])[0])
    r.done()
    return TxnLogValue(producer_id, epoch, timeout_ms, state, frozenset(partitions), last_update_ms, start_ms,
                       last_producer_id)
