"""The binary key and value formats of the internal topic ``__consumer_offsets``.

Kafka's group coordinator stores two record types in this compacted topic; the
key's leading int16 version tells them apart (and keeps them from compacting
together), the value's leading int16 version evolves each value. All integers
are big-endian; ``STRING`` is an int16 length then UTF-8, ``NULLABLE_STRING``
the same with length -1 for null, ``BYTES`` an int32 length then the bytes, an
array an int32 count then its elements::

    offset commit key (version 0 and 1; written as 1)
        version          int16
        group            STRING
        topic            STRING
        partition        int32

    offset commit value (versions 0..3; written as 3)
        version          int16
        offset           int64
        leader_epoch     int32            (v3 only; -1 = none)
        metadata         STRING
        commit_timestamp int64            (v0 calls it timestamp)
        expire_timestamp int64            (v1 only)

    group metadata key (version 2)
        version          int16
        group            STRING

    group metadata value (versions 0..3; written as 3)
        version                 int16
        protocol_type           STRING
        generation              int32
        protocol                NULLABLE_STRING
        leader                  NULLABLE_STRING
        current_state_timestamp int64     (v2+; -1 = none)
        members                 [member]

    member (inside the group metadata value)
        member_id         STRING
        group_instance_id NULLABLE_STRING (v3 only)
        client_id         STRING
        client_host       STRING
        rebalance_timeout int32           (v1+; v0 uses the session timeout)
        session_timeout   int32
        subscription      BYTES
        assignment        BYTES

A null value is a tombstone: it deletes the key's offset or group on load and
lets compaction drop the key. The group's partition of the topic is
``abs(java_string_hash(group_id)) % num_partitions``, with Java's
``String.hashCode`` and Kafka's ``Utils.abs`` (which maps ``Integer.MIN_VALUE``
to 0), so a group lands on the partition Kafka would choose.
"""

from __future__ import annotations

import struct
from typing import List, NamedTuple, Optional, Tuple, Union

from ....errors import CorruptRecordError, InvalidArgumentError

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OFFSET_COMMIT_KEY_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_record",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
    "partition_for_group",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class OffsetCommitKey(NamedTuple):
    """The key of a committed offset: one per (group, topic, partition)."""

    group: str
    topic: str
    partition: int


class GroupMetadataKey(NamedTuple):
    """The key of a group's membership record: one per group."""

    group: str


class OffsetCommitValue(NamedTuple):
    """A committed offset; ``leader_epoch`` and ``expire_timestamp`` are -1 when absent."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1


class MemberMetadata(NamedTuple):
    """One member as stored in the group metadata value."""

    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


class GroupMetadataValue(NamedTuple):
    """A group after a completed rebalance: generation, protocol, leader and members."""

    protocol_type: str
    generation: int
    protocol: Optional[str]
    leader: Optional[str]
    current_state_timestamp: int
    members: List[MemberMetadata]


# -- Java's hashing, for the partition of a group ------------------------------


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition that holds ``group_id`` (Kafka's ``partitionFor``)."""
    # Imported here: the partitioner loads the hashing kernel, which a broker needs only
    # once a group asks for its coordinator.
    from ...partitioner import java_string_hash

    if num_partitions <= 0:
        raise InvalidArgumentError("num_partitions must be positive, got %r" % (num_partitions,))
    h = java_string_hash(group_id)
    # Kafka's Utils.abs: Integer.MIN_VALUE has no positive twin and maps to 0.
    return (0 if h == -0x80000000 else abs(h)) % num_partitions


# -- writing --------------------------------------------------------------------


def _put_string(out: bytearray, s: str, what: str) -> None:
    data = s.encode("utf-8")
    if len(data) > 0x7FFF:
        raise InvalidArgumentError("%s is %d bytes long, the limit is 32767" % (what, len(data)))
    out += _I16.pack(len(data))
    out += data


def _put_nullable_string(out: bytearray, s: Optional[str], what: str) -> None:
    if s is None:
        out += _I16.pack(-1)
    else:
        _put_string(out, s, what)


def _put_bytes(out: bytearray, b: bytes) -> None:
    out += _I32.pack(len(b))
    out += b


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """The key (version 1) of the committed offset of ``group`` for ``topic``/``partition``."""
    out = bytearray(_I16.pack(OFFSET_COMMIT_KEY_VERSION))
    _put_string(out, group, "group")
    _put_string(out, topic, "topic")
    out += _I32.pack(partition)
    return bytes(out)


def encode_group_metadata_key(group: str) -> bytes:
    """The key (version 2) of the metadata of ``group``."""
    out = bytearray(_I16.pack(GROUP_METADATA_KEY_VERSION))
    _put_string(out, group, "group")
    return bytes(out)


def encode_offset_commit_value(
    offset: int, metadata: str = "", commit_timestamp: int = -1, leader_epoch: int = -1
) -> bytes:
    """The value (version 3) of a committed offset."""
    out = bytearray(_I16.pack(OFFSET_COMMIT_VALUE_VERSION))
    out += _I64.pack(offset)
    out += _I32.pack(leader_epoch)
    _put_string(out, metadata, "metadata")
    out += _I64.pack(commit_timestamp)
    return bytes(out)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """The value (version 3) of a group's metadata."""
    out = bytearray(_I16.pack(GROUP_METADATA_VALUE_VERSION))
    _put_string(out, value.protocol_type, "protocol_type")
    out += _I32.pack(value.generation)
    _put_nullable_string(out, value.protocol, "protocol")
    _put_nullable_string(out, value.leader, "leader")
    out += _I64.pack(value.current_state_timestamp)
    out += _I32.pack(len(value.members))
    for m in value.members:
        _put_string(out, m.member_id, "member_id")
        _put_nullable_string(out, m.group_instance_id, "group_instance_id")
        _put_string(out, m.client_id, "client_id")
        _put_string(out, m.client_host, "client_host")
        out += _I32.pack(m.rebalance_timeout)
        out += _I32.pack(m.session_timeout)
        _put_bytes(out, bytes(m.subscription))
        _put_bytes(out, bytes(m.assignment))
    return bytes(out)


# -- reading --------------------------------------------------------------------


class _Reader:
    """A bounds-checked cursor: every read checks the remaining length first."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > len(self.buf):
            raise CorruptRecordError(
                "%s: need %d bytes at position %d, %d left" % (self.what, n, start, len(self.buf) - start)
            )
        self.pos = start + n
        return start

    def i16(self) -> int:
        return int(_I16.unpack_from(self.buf, self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack_from(self.buf, self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack_from(self.buf, self._take(8))[0])

    def nullable_string(self) -> Optional[str]:
        n = self.i16()
        if n == -1:
            return None
        if n < 0:
            raise CorruptRecordError("%s: string length %d at position %d" % (self.what, n, self.pos - 2))
        start = self._take(n)
        try:
            return self.buf[start : start + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError("%s: string at position %d is not UTF-8" % (self.what, start)) from exc

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise CorruptRecordError("%s: null string at position %d" % (self.what, self.pos - 2))
        return s

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            raise CorruptRecordError("%s: bytes length %d at position %d" % (self.what, n, self.pos - 4))
        start = self._take(n)
        return bytes(self.buf[start : start + n])

    def array_count(self) -> int:
        n = self.i32()
        # A member takes at least 18 bytes (three empty strings, a timeout, two empty
        # byte fields): a larger count cannot fit in what is left.
        if n < 0 or n * 18 > len(self.buf) - self.pos:
            raise CorruptRecordError("%s: array count %d at position %d" % (self.what, n, self.pos - 4))
        return n

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise CorruptRecordError(
                "%s: %d trailing bytes after position %d" % (self.what, len(self.buf) - self.pos, self.pos)
            )


def decode_key(key: Union[bytes, bytearray, memoryview]) -> Optional[Union[OffsetCommitKey, GroupMetadataKey]]:
    """Decode a key of ``__consumer_offsets``; None for a key version this module does not know.

    Versions 0 and 1 are offset commit keys, 2 a group metadata key. Newer key
    versions (other record types of later coordinators) are not errors: a
    loader skips them. Malformed bytes raise CorruptRecordError.
    """
    r = _Reader(bytes(key), "__consumer_offsets key")
    version = r.i16()
    if version in (0, 1):
        group = r.string()
        topic = r.string()
        partition = r.i32()
        r.done()
        return OffsetCommitKey(group, topic, partition)
    if version == 2:
        group = r.string()
        r.done()
        return GroupMetadataKey(group)
    return None


def decode_offset_commit_value(value: Union[bytes, bytearray, memoryview]) -> OffsetCommitValue:
    """Decode an offset commit value of any version 0..3."""
    r = _Reader(bytes(value), "offset commit value")
    version = r.i16()
    if version == 0:
        offset = r.i64()
        metadata = r.string()
        ts = r.i64()
        r.done()
        return OffsetCommitValue(offset, metadata, ts)
    if version == 1:
        offset = r.i64()
        metadata = r.string()
        ts = r.i64()
        expire = r.i64()
        r.done()
        return OffsetCommitValue(offset, metadata, ts, -1, expire)
    if version == 2:
        offset = r.i64()
        metadata = r.string()
        ts = r.i64()
        r.done()
        return OffsetCommitValue(offset, metadata, ts)
    if version == 3:
        offset = r.i64()
        epoch = r.i32()
        metadata = r.string()
        ts = r.i64()
        r.done()
        return OffsetCommitValue(offset, metadata, ts, epoch)
    raise CorruptRecordError("offset commit value version %d is unknown (0..3)" % version)


def decode_group_metadata_value(value: Union[bytes, bytearray, memoryview]) -> GroupMetadataValue:
    """Decode a group metadata value of any version 0..3."""
    r = _Reader(bytes(value), "group metadata value")
    version = r.i16()
    if not 0 <= version <= 3:
        raise CorruptRecordError("group metadata value version %d is unknown (0..3)" % version)
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.i64() if version >= 2 else -1
    members: List[MemberMetadata] = []
    for _ in range(r.array_count()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        if version >= 1:
            rebalance_timeout = r.i32()
            session_timeout = r.i32()
        else:
            session_timeout = r.i32()
            rebalance_timeout = session_timeout
        subscription = r.bytes_()
        assignment = r.bytes_()
        members.append(
            MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.done()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)


def decode_record(
    key: Optional[bytes], value: Optional[bytes]
) -> Tuple[Optional[Union[OffsetCommitKey, GroupMetadataKey]], Optional[Union[OffsetCommitValue, GroupMetadataValue]]]:
    """Decode one record of the topic: (key, value), value None for a tombstone.

    A record without a key or with an unknown key version yields ``(None, None)``.
    """
    if key is None:
        return None, None
    k = decode_key(key)
    if k is None or value is None:
        return k, None
    if isinstance(k, OffsetCommitKey):
        return k, decode_offset_commit_value(value)
    return k, decode_group_metadata_value(value)
