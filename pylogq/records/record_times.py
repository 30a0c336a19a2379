"""The (offset, timestamp) of each record of a stored v2 batch, in bounded memory.

What rebuilding a time index and searching by timestamp need. Above the v2
kernels in use: a section that fits one chunk goes through the columnar decoder
(compiled when built), a larger one is streamed by the pure reader.
"""

from __future__ import annotations

from typing import Iterator, Tuple

from . import codecs
from .columnar import decode_columns
from .default_records import (
    LOG_APPEND_TIME,
    RECORDS_OFFSET,
    Buffer,
    RecordBatch,
    _SectionReader,
    _stream_record_times,
)

__all__ = ["iter_record_times"]


def iter_record_times(buffer: Buffer, position: int = 0) -> Iterator[Tuple[int, int]]:
    """(offset, timestamp) of each record of the v2 batch at ``position``, in bounded memory.

    What a search by timestamp needs of a batch and no more: a compressed
    section is read as it decompresses (:class:`codecs.DecompressStream`) and
    each record's key, value and headers are skipped, so a batch of extreme
    ratio costs a chunk of memory, not its decompressed size. A section that
    fits one chunk is read by the columnar decoder instead (compiled). Control
    batches have no records here. The batch must have passed validation (it is
    read from the log); bad bytes still raise CorruptRecordError.
    """
    batch = RecordBatch(buffer, position, check_crc=False)
    if batch.is_control_batch:
        return
    log_append = batch.timestamp_type == LOG_APPEND_TIME
    codec = batch.compression_type
    if codec != 0:
        raw = memoryview(batch._buf)[position + RECORDS_OFFSET : batch.end]
        with codecs.DecompressStream(codec, raw, 2, codecs.MAX_DECOMPRESSED,
                                     "record batch at offset %d" % batch.base_offset) as stream:
            first = stream.read(codecs.STREAM_CHUNK)
            if not stream.at_end():
                yield from _stream_record_times(batch, _SectionReader(stream, first), log_append)
                return
    columns = decode_columns(memoryview(batch._buf)[position : batch.end])
    yield from zip(columns.offsets.tolist(), columns.timestamps.tolist())
