"""Fetch responses framed around file regions, for sendfile.

A Fetch response is mostly record bytes that already sit in segment files. It is framed
by hand (``frame_fetch_response``) as a list of parts, ``bytes`` for the fields and
:class:`~pylogq.storage.segment.FileRegion` for each partition's records, so the
connection can write the fields and ``sendfile`` the records without copying them
through Python. The bytes equal what the generic codec writes (tested).

Layout of FetchResponse v0-v17, after the response header (v0 below v12; v1 from v12,
which adds an empty tagged-field section after the correlation id):

    ThrottleTimeMs int32 (v1+) | ErrorCode int16 (v7+) | SessionId int32 (v7+)
    [Topic string (v0-12) | TopicId uuid (v13+)
     [PartitionIndex int32 | ErrorCode int16 | HighWatermark int64
      | LastStableOffset int64 (v4+) | LogStartOffset int64 (v5+)
      | AbortedTransactions nullable [ProducerId int64 | FirstOffset int64] (v4+)
      | PreferredReadReplica int32 (v11+) | Records nullable bytes
      | TaggedFields (v12+)]
     | TaggedFields (v12+)]
    | TaggedFields (v12+)

From v12 (flexible, KIP-482) strings, arrays and bytes are compact: an unsigned
varint of length + 1 (0 for null) in place of the int16/int32 length. The tagged
fields pylogq could send (a partition's DivergingEpoch, CurrentLeader, SnapshotId;
the response's NodeEndpoints) are all absent: each section is the single byte 0.
"""

from __future__ import annotations

import logging
import struct
import uuid
from typing import TYPE_CHECKING, List, Sequence, Tuple, Union, cast

from ..cluster.contract import FetchResult, RecordBytes
from .connection import Part, Region
from ..errors import InvalidArgumentError, InvalidArgumentTypeError, KafkaStorageError

if TYPE_CHECKING:
    from ..protocol.message_data import FetchRequest

__all__ = ["frame_fetch_response", "replica_id_of", "TopicKey"]

log = logging.getLogger("pylogq.server")

#: How a response names a topic: its name below v13, its id (Kafka's Uuid) from v13.
TopicKey = Union[str, uuid.UUID]

# Records below this go into the field bytes: a sendfile call costs more than the copy.
_INLINE_RECORDS = 4096
FIRST_FLEXIBLE = 12
FIRST_TOPIC_ID = 13
#: The first version with a ReplicaState (KIP-903) in place of the ReplicaId field.
FIRST_REPLICA_STATE = 15
MAX_VERSION = 17

_I32 = struct.Struct(">i")


def replica_id_of(req: FetchRequest, version: int) -> int:
    """Who sent a Fetch: a broker's id for a follower, negative for a consumer."""
    return req.replica_state.replica_id if version >= FIRST_REPLICA_STATE else req.replica_id

_I16 = struct.Struct(">h")
_I16_I32 = struct.Struct(">hi")
_PARTITION_V0 = struct.Struct(">ihq")
_PARTITION_V4 = struct.Struct(">ihqq")
_I64 = struct.Struct(">q")
_NO_TAGS = b"\x00"
_NULL_ABORTED = _I32.pack(-1)
_ABORTED = struct.Struct(">qq")  # an aborted transaction: producer id, first offset
_NO_ABORTED = _I32.pack(0)
_NO_REPLICA = _I32.pack(-1)
_EMPTY_RECORDS = _I32.pack(0)
# Compact forms (v12+): a null array is 0, an empty one 1.
_NULL_ABORTED_COMPACT = b"\x00"
_NO_ABORTED_COMPACT = b"\x01"
_EMPTY_RECORDS_COMPACT = b"\x01"


_ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))


def _uvarint(value: int) -> bytes:
    """Kafka's unsigned varint (the compact length prefix); lengths of records take 2-4 bytes."""
    if value < 0x80:
        return _ONE_BYTE[value]
    if value < 0x4000:
        return bytes((value & 0x7F | 0x80, value >> 7))
    if value < 0x200000:
        return bytes((value & 0x7F | 0x80, (value >> 7) & 0x7F | 0x80, value >> 14))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def frame_fetch_response(correlation_id: int, version: int, throttle_time_ms: int, error_code: int,
                         session_id: int, topics: Sequence[Tuple[TopicKey, Sequence[Tuple[int, FetchResult]]]],
                         read_committed: bool = False) -> Tuple[List[Part], int]:
    """Frame a whole FetchResponse (v0-v17) with its size prefix; -> (parts, total size).

    A topic is named by its name below v13 and by its id (a :class:`uuid.UUID`) from v13.
    Aborted transactions (v4+) are null for read_uncommitted and for a partition's error,
    and a list (maybe empty) for read_committed, as Kafka sends them; the last stable offset
    is the result's, or its high watermark when the read knew no transactions.
    A partition's records are a file region (sent with sendfile when large) or
    :class:`~pylogq.cluster.contract.RecordBytes`; fields a version lacks (throttle time before v1, the
    session before v7, ...) are left out.
    """
    if not 0 <= version <= MAX_VERSION:
        raise InvalidArgumentError("frame_fetch_response covers Fetch v0-v%d, not v%d" % (MAX_VERSION, version))
    flexible = version >= FIRST_FLEXIBLE
    by_id = version >= FIRST_TOPIC_ID
    parts: List[Part] = []
    buf = bytearray(8)  # size prefix, filled in last, then the correlation id
    _I32.pack_into(buf, 4, correlation_id)
    if flexible:
        buf += _NO_TAGS  # response header v1
    if version >= 1:
        buf += _I32.pack(throttle_time_ms)
    if version >= 7:
        buf += _I16_I32.pack(error_code, session_id)
    buf += _uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    if flexible:
        aborted_null, aborted_empty = _NULL_ABORTED_COMPACT, _NO_ABORTED_COMPACT
    else:
        aborted_null, aborted_empty = _NULL_ABORTED, _NO_ABORTED
    empty_records = _EMPTY_RECORDS_COMPACT if flexible else _EMPTY_RECORDS
    total = 0
    for key, partitions in topics:
        if by_id:
            if not isinstance(key, uuid.UUID):
                raise InvalidArgumentTypeError("Fetch v%d names topics by id (a uuid.UUID), not %r" % (version, key))
            buf += key.bytes
        else:
            if not isinstance(key, str):
                raise InvalidArgumentTypeError("Fetch v%d names topics by name (a str), not %r" % (version, key))
            encoded = key.encode("utf-8")
            buf += _uvarint(len(encoded) + 1) if flexible else _I16.pack(len(encoded))
            buf += encoded
        buf += _uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for index, result in partitions:
            region = result.records
            inline = b""
            if region is not None and 0 < len(region) < _INLINE_RECORDS:
                try:
                    inline = region.read()  # cheaper than a sendfile call
                except OSError as exc:
                    # The disk failed between the read and the answer (its log directory goes
                    # offline at the log's next read): this partition answers KAFKA_STORAGE_ERROR
                    # with no records, as Kafka answers a read that hit a storage error.
                    log.warning("fetch of partition %d: its records could not be read (%s); answered "
                                "KAFKA_STORAGE_ERROR", index, exc)
                    result = result._replace(error_code=KafkaStorageError.code, records=None)
                    region = None
            if version >= 4:
                lso = result.last_stable_offset
                if lso is None:
                    lso = result.high_watermark  # a read that knew no transactions: the LSO is the HW
                buf += _PARTITION_V4.pack(index, result.error_code, result.high_watermark, lso)
                if version >= 5:
                    buf += _I64.pack(result.log_start_offset)
                aborted = result.aborted_transactions
                if not read_committed or result.error_code:
                    buf += aborted_null
                elif not aborted:
                    buf += aborted_empty
                else:
                    buf += _uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                    for producer_id, first_offset in aborted:
                        buf += _ABORTED.pack(producer_id, first_offset)
                        if flexible:
                            buf += _NO_TAGS
                if version >= 11:
                    replica = result.preferred_read_replica
                    buf += _NO_REPLICA if replica < 0 else _I32.pack(replica)
            else:
                buf += _PARTITION_V0.pack(index, result.error_code, result.high_watermark)
            if region is None:
                # An empty record set, not null: librdkafka fails the whole response on a
                # null one ("invalid MessageSetSize -1"); Kafka sends empty records too.
                buf += empty_records
            else:
                length = len(region)
                buf += _uvarint(length + 1) if flexible else _I32.pack(length)
                if length:
                    if length < _INLINE_RECORDS:
                        buf += inline
                    else:
                        total += len(buf)
                        parts.append(bytes(buf))
                        # In-memory records go out as bytes; a file region (a segment's, the only
                        # other RecordsView a read returns) with sendfile.
                        parts.append(region.data if isinstance(region, RecordBytes) else cast(Region, region))
                        total += length
                        buf = bytearray()
            if flexible:
                buf += _NO_TAGS  # partition
        if flexible:
            buf += _NO_TAGS  # topic
    if flexible:
        buf += _NO_TAGS  # response (NodeEndpoints absent)
    if buf:
        total += len(buf)
        parts.append(bytes(buf))
    first = parts[0]
    assert isinstance(first, bytes)
    parts[0] = _I32.pack(total - 4) + first[4:]
    return parts, total
