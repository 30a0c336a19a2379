"""Columnar decode: a buffer of batches into numpy arrays, for Spark and bulk consumers.

One row per record; the columns are int64 ``offsets`` and ``timestamps``, int8
``timestamp_types``, and positions into one contiguous ``data`` buffer:
``key_start``/``key_length``, ``value_start``/``value_length`` (length -1 for
null) and ``headers_start``/``headers_count`` (the headers' raw encoding, read
with :meth:`RecordColumns.headers`). When every batch is uncompressed v2,
``data`` is the input buffer itself: nothing is copied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple, Union

from . import _impl
from .default_records import Header

if TYPE_CHECKING:
    import numpy as np

__all__ = ["RecordColumns", "decode_columns"]

Buffer = Union[bytes, bytearray, memoryview]


class RecordColumns:
    """The records of a buffer of batches as parallel numpy arrays over one data buffer.

    Immutable by convention; it keeps ``data`` (and so the input buffer) alive.
    """

    __slots__ = ("data", "count") + _impl.COLUMN_NAMES

    offsets: np.ndarray
    timestamps: np.ndarray
    timestamp_types: np.ndarray
    key_start: np.ndarray
    key_length: np.ndarray
    value_start: np.ndarray
    value_length: np.ndarray
    headers_start: np.ndarray
    headers_count: np.ndarray

    def __init__(self, data: Buffer, count: int, *columns: np.ndarray) -> None:
        self.data = data
        self.count = count
        for name, column in zip(_impl.COLUMN_NAMES, columns):
            setattr(self, name, column)

    def __len__(self) -> int:
        return self.count

    @property
    def key_null(self) -> np.ndarray:
        return self.key_length < 0

    @property
    def value_null(self) -> np.ndarray:
        return self.value_length < 0

    def data_array(self) -> np.ndarray:
        """``data`` as a uint8 numpy array (a view, no copy)."""
        import numpy as np  # loaded with the first decode (the kernel's columns are arrays)

        return np.frombuffer(self.data, dtype=np.uint8)

    def key(self, i: int) -> Optional[bytes]:
        n = int(self.key_length[i])
        if n < 0:
            return None
        s = int(self.key_start[i])
        return bytes(self.data[s : s + n])

    def value(self, i: int) -> Optional[bytes]:
        n = int(self.value_length[i])
        if n < 0:
            return None
        s = int(self.value_start[i])
        return bytes(self.data[s : s + n])

    def headers(self, i: int) -> List[Header]:
        n = int(self.headers_count[i])
        if n == 0:
            return []
        return _impl.decode_headers(self.data, int(self.headers_start[i]), n)

    def rows(self) -> Iterator[Tuple[int, int, int, Optional[bytes], Optional[bytes], List[Header]]]:
        """(offset, timestamp, timestamp_type, key, value, headers) per record."""
        for i in range(self.count):
            yield (
                int(self.offsets[i]),
                int(self.timestamps[i]),
                int(self.timestamp_types[i]),
                self.key(i),
                self.value(i),
                self.headers(i),
            )


def decode_columns(
    buffer: Buffer,
    check_crc: bool = True,
    skip_control: bool = True,
    start_offset: Optional[int] = None,
    end_offset: Optional[int] = None,
) -> RecordColumns:
    """Decode every whole batch of ``buffer`` (v0, v1, v2; any codec) into columns.

    Keeps records with ``start_offset <= offset < end_offset``; skips control
    batches unless ``skip_control=False``; a partial batch at the end is
    ignored (fetch responses end with one). Bad bytes raise CorruptRecordError.
    """
    return RecordColumns(*_impl.decode_columns(buffer, check_crc, skip_control, start_offset, end_offset))
