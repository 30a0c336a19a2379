"""Up-conversion: a producer's v0/v1 message set as the one v2 batch Kafka 3.x stores.

Kept apart from :mod:`pylogq.records.legacy` because it builds with the v2
kernels in use (:mod:`pylogq.records._impl`, compiled or the pure twin), while
the legacy format itself sits below them: the pure twin reads legacy entries
in its columnar decode.
"""

from __future__ import annotations

from typing import Union

from ..errors import InvalidRecordError
from . import codecs
from ._impl import RecordBatchBuilder
from .legacy import INT32_MAX, LOG_APPEND_TIME, _bounded_inner_set, _iter_inner, iter_legacy_messages

__all__ = ["up_convert"]

Buffer = Union[bytes, bytearray, memoryview]


def up_convert(buffer: Buffer) -> bytearray:
    """A producer's v0/v1 message set as one v2 record batch, as Kafka 3.x writes every append.

    Kafka's LogValidator up-conversion: every record of the set, wrappers
    decompressed and flattened, in order, at offset deltas 0..n-1 (the append
    gives the batch its offsets and leader epoch as for any v2 batch); each
    record keeps its key, value and timestamp (a v0 message has none: -1,
    NO_TIMESTAMP; an inner record of a LogAppendTime wrapper takes the
    wrapper's), and no headers. The batch is compressed with the codec of the
    set's last compressed wrapper (the topic's ``compression.type`` is
    ``producer`` for every format here: Kafka keeps the source codec then),
    uncompressed when none was; it carries no producer id, and its CRC-32C is
    the v2 builder's. Every message is checked first (CRCs, framing, inner
    sets, as :func:`validate_legacy`): CorruptRecordError for bad bytes,
    InvalidRecordError for an empty set; a wrapper's inner set may
    decompress to at most ``codecs.DECOMPRESS_WINDOW`` bytes
    (MessageTooLargeError otherwise), as for :func:`assign_offsets_legacy`.
    """
    messages = list(iter_legacy_messages(buffer, True, False))
    if not messages:
        raise InvalidRecordError("produce message set holds no message")
    codec = codecs.NONE
    for msg in messages:
        if msg.is_wrapper:
            codec = msg.compression_type
    builder = RecordBatchBuilder(codec, batch_size=INT32_MAX)
    delta = 0
    for msg in messages:
        if not msg.is_wrapper:
            builder.append(delta, msg.timestamp, msg._key, msg._value)
            delta += 1
            continue
        log_append = msg.magic > 0 and msg.timestamp_type == LOG_APPEND_TIME
        for m in _iter_inner(msg, _bounded_inner_set(msg), True):
            builder.append(delta, msg.timestamp if log_append else m.timestamp, m._key, m._value)
            delta += 1
    return builder.build()
