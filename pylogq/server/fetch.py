"""Fetch: long polls woken by appends, and responses framed around file regions for sendfile.

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

import asyncio
import struct
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, TypeVar, Union

from ..broker import Broker, FetchResult

__all__ = ["frame_fetch_response", "FetchWaiters", "Part"]

Part = Union[bytes, Any]  # bytes or a FileRegion
_T = TypeVar("_T")

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


class FetchWaiters:
    """Long-poll fetches parked on the event loop until an append to one of their partitions.

    Appends may come from any thread (the network server's loop, in-process producers);
    ``notify`` hands the wakeup to the loop. A waiter re-reads after registering, so an
    append that lands between its read and its registration is never missed. Not
    thread-safe except ``notify``.
    """

    def __init__(self, broker: Broker, loop: asyncio.AbstractEventLoop) -> None:
        self._broker = broker
        self._loop = loop
        self._waiters: Dict[Tuple[str, int], Set["asyncio.Future[None]"]] = {}
        broker.add_append_listener(self.notify)

    def close(self) -> None:
        try:
            self._broker.remove_append_listener(self.notify)
        except ValueError:
            pass
        for futures in self._waiters.values():
            for fut in futures:
                if not fut.done():
                    fut.set_result(None)
        self._waiters.clear()

    def notify(self, topic: str, partition: int) -> None:
        key = (topic, partition)
        if key not in self._waiters:
            return
        try:
            self._loop.call_soon_threadsafe(self._wake, key)
        except RuntimeError:  # the loop closed: nobody is waiting any more
            pass

    def _wake(self, key: Tuple[str, int]) -> None:
        for fut in self._waiters.pop(key, ()):
            if not fut.done():
                fut.set_result(None)

    async def wait(self, keys: Sequence[Tuple[str, int]], timeout: float,
                   read: Callable[[], Optional[_T]]) -> Optional[_T]:
        """Register for appends to ``keys``, then ``read()``: its result when not None, else
        wait until one of ``keys`` gets an append or ``timeout`` seconds pass (-> None).

        Reading after registering means data that arrived since the caller last looked
        is found at once, and one read per wakeup is enough.
        """
        fut: "asyncio.Future[None]" = self._loop.create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        try:
            found = read()
            if found is not None:
                return found
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            for key in keys:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting.discard(fut)
                    if not waiting:
                        del self._waiters[key]
        return None


def total_bytes(results: Dict[Tuple[str, int], FetchResult]) -> Tuple[int, bool]:
    """(record bytes across partitions, whether any partition has an error)."""
    size = 0
    failed = False
    for r in results.values():
        if r.error_code:
            failed = True
        elif r.records is not None:
            size += len(r.records)
    return size, failed
