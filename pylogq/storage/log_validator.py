"""The checks an append's batches pass before :class:`~pylogq.storage.log.Log` writes them.

Kafka's LogValidator, for what pylogq's one pass over the records
(:func:`~pylogq.records.validate_batches`) leaves to the log: the sizes against
``max.message.bytes`` and ``segment.bytes``, control batches from a client, the
per-record checks (a key on a compacted topic, CreateTime timestamps within the
topic's limits) with Kafka's errors and messages, the offsets of a follower's
batches, and the batches' largest timestamp. Functions of the batches and the
log's config only: they read nothing of the log, hold no state and are safe from
any thread.
"""

from __future__ import annotations

import struct
from typing import Dict, Optional, Sequence, Tuple, Union

from .. import records
from ..errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    RecordListTooLargeError,
)
from ..records import BatchHeader
from ..records.record_times import iter_record_times
from ..config import LogConfig
from .segment import NO_TIMESTAMP

__all__ = ["check_batch_sizes", "check_follower_offsets", "check_records", "check_sizes", "max_timestamp_of",
           "refuse_control", "timestamp_limits"]

_BATCH_LENGTH = struct.Struct(">i")  # at byte 8 of a batch: its size after the offset and this field
_LOG_OVERHEAD = 12


def check_batch_sizes(buffer: Union[bytes, bytearray], limit: int) -> None:
    """``max.message.bytes`` from the batches' length fields alone, before any batch is read
    (Kafka checks sizes first too): an oversized compressed batch is refused without being
    decompressed. Framing faults are left to the validation that follows."""
    pos, end = 0, len(buffer)
    while pos + _LOG_OVERHEAD <= end:
        size = _BATCH_LENGTH.unpack_from(buffer, pos + 8)[0] + _LOG_OVERHEAD
        if size <= _LOG_OVERHEAD:
            return
        if size > limit + _LOG_OVERHEAD:
            raise MessageTooLargeError("batch of %d bytes at byte %d of the append exceeds max.message.bytes=%d"
                                       % (size, pos, limit))
        pos += size


def _offset_of(headers: Sequence[BatchHeader], i: int, first_offset: Optional[int]) -> int:
    """The offset batch ``i`` gets: its own (already assigned), or counted on from ``first_offset``."""
    if first_offset is None:
        return headers[i].base_offset
    return first_offset + sum(h.last_offset - h.base_offset + 1 for h in headers[:i])


_LONG_MAX = 2**63 - 1
_CLIENT_CONTROL = "Clients are not allowed to write control records"


def refuse_control(headers: Sequence[BatchHeader]) -> None:
    """A client may not write control batches (Kafka answers INVALID_RECORD with its message).

    Every record of the first control batch is listed (each is a control record); Kafka
    names none, which its clients read the same way: the whole batch failed.
    """
    for h in headers:
        if h.attributes & records.CONTROL_MASK:
            raise InvalidRecordError(
                "%s (the record batch at byte %d is a control batch, attributes 0x%x)"
                % (_CLIENT_CONTROL, h.position, h.attributes),
                record_errors=[(i, _CLIENT_CONTROL) for i in range(h.last_offset - h.base_offset + 1)])


def _rejected(record_errors: Sequence[Tuple[int, str]], timestamps: bool) -> Exception:
    """Kafka's LogValidator.processRecordErrors: the error for the records of a batch that failed."""
    if timestamps:
        return InvalidTimestampError("One or more records have been rejected due to invalid timestamp",
                                     record_errors=record_errors)
    shown = ", ".join("RecordError(batchIndex=%d, message='%s')" % e for e in record_errors[:3])
    return InvalidRecordError("One or more records have been rejected due to %d record errors in total, and only "
                              "showing the first three errors at most: [%s]" % (len(record_errors), shown),
                              record_errors=record_errors)


def max_timestamp_of(headers: Sequence[BatchHeader]) -> Tuple[int, int]:
    """(the largest max timestamp, the last offset of the first batch with it); (-1, -1) for none."""
    max_ts, max_ts_offset = -1, -1
    for h in headers:
        if h.max_timestamp > max_ts:
            max_ts, max_ts_offset = h.max_timestamp, h.last_offset
    return max_ts, max_ts_offset


def check_follower_offsets(headers: Sequence[BatchHeader], expected: int) -> None:
    """A follower's batches continue the log: offsets that start at ``expected`` (the log end
    offset) or later and increase; CorruptRecordError otherwise."""
    for h in headers:
        if h.base_offset < expected:
            raise CorruptRecordError(
                "batch at offset %d is below the next offset %d: offsets must increase"
                % (h.base_offset, expected))
        expected = h.last_offset + 1


def check_sizes(config: LogConfig, headers: Sequence[BatchHeader], total: int, first_offset: Optional[int]) -> None:
    """Each batch within ``max.message.bytes``, the whole append within ``segment.bytes``."""
    limit = config.max_message_bytes
    for i, h in enumerate(headers):
        if h.size > limit + 12:
            raise MessageTooLargeError(
                "batch of %d bytes at offset %d exceeds max.message.bytes=%d"
                % (h.size, _offset_of(headers, i, first_offset), limit))
    if total > config.segment_bytes:
        raise RecordListTooLargeError(
            "append of %d bytes exceeds segment.bytes=%d" % (total, config.segment_bytes))


def check_records(config: LogConfig, topic: str, partition: int, buffer: Union[bytes, bytearray],
                  headers: Sequence[BatchHeader], keyless: int, now: Optional[int]) -> None:
    """Kafka's per-record checks (LogValidator.validateRecord): a key on a compacted topic, a
    CreateTime timestamp within ``message.timestamp.before.max.ms`` / ``after.max.ms`` of ``now``
    (None: the topic stamps LogAppendTime, nothing to check).

    Raises for the first batch with a bad record, listing every bad record of it with Kafka's
    message (its place in the batch, which Produce v8+ names, KIP-467): InvalidTimestampError
    when a timestamp is among them, else InvalidRecordError. The validation pass found the
    first keyless record (``keyless``, an offset delta from the first batch, -1 for none);
    the batches from its are read again for the others, so an append of keyed records on a
    compacted topic reads its records once. Timestamps are read only when a limit is set.
    """
    before, after = timestamp_limits(config)
    times = now is not None and (before < _LONG_MAX or after < _LONG_MAX)
    if keyless < 0 and not times:
        return
    assert now is not None or not times
    at = 0
    for h in headers:
        count = h.last_offset - h.base_offset + 1
        keys = 0 <= keyless < at + count
        at += count
        check_times = times and not h.attributes & records.TIMESTAMP_TYPE_MASK
        if h.attributes & records.CONTROL_MASK or not (keys or check_times):
            continue
        bad: Dict[int, str] = {}
        if keys:
            message = "Compacted topic cannot accept message without key in topic partition %s-%d." % (
                topic, partition)
            for i, record in enumerate(records.RecordBatch(buffer, h.position, check_crc=False)):
                if record.key is None:
                    bad[i] = message
        timestamps = False
        if check_times:
            assert now is not None
            for i, (offset, timestamp) in enumerate(iter_record_times(buffer, h.position)):
                if i in bad or timestamp == NO_TIMESTAMP:
                    continue
                if timestamp - now > after or now - timestamp > before:
                    bad[i] = ("Timestamp %d of message with offset %d is out of range. The timestamp should be "
                              "within [%d, %d]" % (timestamp, offset, now - before, now + after))
                    timestamps = True
        if bad:
            raise _rejected(sorted(bad.items()), timestamps)


def timestamp_limits(config: LogConfig) -> Tuple[int, int]:
    """(before, after) in ms: ``message.timestamp.before.max.ms`` and ``after.max.ms``, each
    ``message.timestamp.difference.max.ms`` while unset (Long.MAX_VALUE), as Kafka reads them."""
    difference = config.message_timestamp_difference_max_ms
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    return (before if before != _LONG_MAX else difference, after if after != _LONG_MAX else difference)
