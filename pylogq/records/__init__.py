"""Kafka's record formats: magic v2 record batches and the legacy v0/v1 message sets.

Builders, readers, the walker over buffers of batches, offset assignment and the
columnar decoder. The v2 kernels are compiled (``pylogq._core._records``) with a
pure-Python twin (:mod:`pylogq.records.default_records`), chosen once at import.
"""

from . import codecs
from ._impl import Record, RecordBatch, RecordBatchBuilder, build_batch, decode_headers
from .columnar import RecordColumns, decode_columns
from .default_records import (
    CONTROL_MASK,
    CREATE_TIME,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from .memory_records import (
    AppendResult,
    BatchHeader,
    ScanResult,
    assign_offsets,
    iter_batches,
    parse_header,
    patch_offsets,
    scan,
    uncompressed_v2,
    valid_prefix_length,
    validate_batches,
)

__all__ = [
    "AppendResult",
    "BatchHeader",
    "CONTROL_MASK",
    "CREATE_TIME",
    "HEADER_SIZE",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "RecordColumns",
    "ScanResult",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "assign_offsets",
    "build_batch",
    "codecs",
    "decode_columns",
    "decode_headers",
    "iter_batches",
    "parse_header",
    "patch_offsets",
    "scan",
    "uncompressed_v2",
    "valid_prefix_length",
    "validate_batches",
]
