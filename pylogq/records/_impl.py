"""The v2 record kernels in use: compiled ``pylogq._core._records`` or its twin.

The twin is :mod:`pylogq.records.default_records`, a module of its own (it also
holds the byte layout), so the choice is made here rather than in it.
"""

from .._speedups import compiled
from . import default_records as pure

__all__ = [
    "COLUMN_NAMES", "DEFAULT_BATCH_SIZE", "Record", "RecordBatch", "RecordBatchBuilder", "assign_offsets",
    "build_batch", "decode_columns", "decode_headers", "patch_offsets", "scan_entries", "validate_batches",
]

_kernel = compiled("_records") or pure
COLUMN_NAMES = _kernel.COLUMN_NAMES
DEFAULT_BATCH_SIZE = _kernel.DEFAULT_BATCH_SIZE
Record = _kernel.Record
RecordBatch = _kernel.RecordBatch
RecordBatchBuilder = _kernel.RecordBatchBuilder
assign_offsets = _kernel.assign_offsets
build_batch = _kernel.build_batch
decode_columns = _kernel.decode_columns
decode_headers = _kernel.decode_headers
patch_offsets = _kernel.patch_offsets
scan_entries = _kernel.scan_entries
validate_batches = _kernel.validate_batches
