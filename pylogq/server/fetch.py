"""Fetch responses framed around file regions, for sendfile.

A Fetch response is mostly record bytes that already sit in segment files. It is framed
by hand (``frame_fetch_response``) as a list of parts, ``bytes`` for the fields and
:class:`~pylogq.storage.segment.FileRegion` for each partition's records, so the
connection can write the fields and ``sendfile`` the records without copying them
through Python. The bytes equal what the generic codec writes (tested).

Layout of FetchResponse v4-v11 (non-flexible), after the response header:

    ThrottleTimeMs int32 | ErrorCode int16 (v7+) | SessionId int32 (v7+)
    [Topic string | [PartitionIndex int32 | ErrorCode int16 | HighWatermark int64
      | LastStableOffset int64 | LogStartOffset int64 (v5+)
      | AbortedTransactions nullable [ProducerId int64 | FirstOffset int64]
      | PreferredReadReplica int32 (v11+) | Records nullable bytes]]
"""

from __future__ import annotations

import struct
from typing import Dict, List, Sequence, Tuple, Union

from ..cluster.contract import FetchResult, RecordsView

__all__ = ["frame_fetch_response", "Part"]

Part = Union[bytes, RecordsView]  # bytes, or a FileRegion to sendfile

_I32 = struct.Struct(">i")
_I16_I32 = struct.Struct(">hi")
_PARTITION_V4 = struct.Struct(">ihqq")
_I64 = struct.Struct(">q")


def frame_fetch_response(correlation_id: int, version: int, throttle_time_ms: int, error_code: int,
                         session_id: int, topics: Sequence[Tuple[str, Sequence[Tuple[int, FetchResult]]]],
                         read_committed: bool = False) -> Tuple[List[Part], int]:
    """Frame a whole FetchResponse (v4-v11) with its size prefix; -> (parts, total size).

    Aborted transactions are null for read_uncommitted and an empty list for
    read_committed, as Kafka sends them (pylogq has no transactions to abort).
    """
    if not 4 <= version <= 11:
        raise ValueError("frame_fetch_response covers Fetch v4-v11, not v%d" % version)
    parts: List[Part] = []
    buf = bytearray(8)  # size prefix, filled in last, then the correlation id
    _I32.pack_into(buf, 4, correlation_id)
    buf += _I32.pack(throttle_time_ms)
    if version >= 7:
        buf += _I16_I32.pack(error_code, session_id)
    buf += _I32.pack(len(topics))
    total = 0
    for name, partitions in topics:
        encoded = name.encode("utf-8")
        buf += struct.pack(">h", len(encoded))
        buf += encoded
        buf += _I32.pack(len(partitions))
        for index, result in partitions:
            lso = result.high_watermark
            buf += _PARTITION_V4.pack(index, result.error_code, result.high_watermark, lso)
            if version >= 5:
                buf += _I64.pack(result.log_start_offset)
            buf += _I32.pack(0 if read_committed and not result.error_code else -1)
            if version >= 11:
                buf += _I32.pack(-1)
            region = result.records
            if region is None:
                # An empty record set, not null: librdkafka fails the whole response on a
                # null one ("invalid MessageSetSize -1"); Kafka sends empty records too.
                buf += _I32.pack(0)
            else:
                length = len(region)
                buf += _I32.pack(length)
                if length:
                    if length < 4096:
                        buf += region.read()  # cheaper than a sendfile call
                    else:
                        total += len(buf)
                        parts.append(bytes(buf))
                        parts.append(region)
                        total += length
                        buf = bytearray()
    if buf:
        total += len(buf)
        parts.append(bytes(buf))
    first = parts[0]
    assert isinstance(first, bytes)
    parts[0] = _I32.pack(total - 4) + first[4:]
    return parts, total
