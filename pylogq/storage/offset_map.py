"""The compaction offset map: key digest -> latest offset, in one fixed block of memory.

The log cleaner builds it over the dirty part of a log, then copies each record
whose offset is still the latest for its key. Table layout: ``slots = memory //
24`` slots of 24 bytes in one preallocated block::

    uint64  h1       digest bytes 0-7   (MurmurHash3_x64_128 h1)
    uint64  h2       digest bytes 8-15  (MurmurHash3_x64_128 h2)
    int64   offset   the latest offset put for the key

A digest of all zeros marks an empty slot. A key whose real digest is all zeros
(the empty key hashes so) gets its lowest bit set: digest byte 0 |= 1. Open
addressing with linear probing from ``h1 % slots``; the map holds at most
``capacity = int(slots * 0.9)`` keys, so a probe always ends at an empty slot.

The compiled kernel ``pylogq._core._offset_map`` is used when it loads;
:data:`pure` (``_PyOffsetMap``, ``_py_key_digest`` and ``_py_murmur3_x64_128``)
is its pure-Python twin: the same digests, table, probe order and statistics.
"""

from __future__ import annotations

import struct
import types
from operator import index
from typing import TYPE_CHECKING, Any, Optional, Tuple

if TYPE_CHECKING:
    import numpy as np

from .._speedups import compiled
from ..records.columnar import decode_columns
from ..errors import InvalidArgumentError, InvalidArgumentTypeError, OffsetMapFullError

__all__ = ["OffsetMap", "key_digest", "murmur3_x64_128", "put_batches", "SLOT_SIZE", "LOAD_FACTOR", "pure"]

SLOT_SIZE = 24
LOAD_FACTOR = 0.9

_M64 = 0xFFFFFFFFFFFFFFFF
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
_SLOT = struct.Struct("<QQq")
_DIGEST = struct.Struct("<QQ")
_OFFSET = struct.Struct("<q")
_INT64_MAX = 2**63 - 1
_INT_FORMATS = frozenset("qli")


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    k ^= k >> 33
    return k


def _int_arg(value: Any, what: str) -> int:
    """``value`` as an int (``operator.index``); InvalidArgumentTypeError naming ``what`` otherwise."""
    try:
        return index(value)
    except TypeError:
        raise InvalidArgumentTypeError("%s must be an int, not %r" % (what, value)) from None


def _contiguous_bytes(data: Any, what: str) -> bytes:
    """The bytes of a C-contiguous buffer; as the kernel, InvalidArgumentTypeError for a
    non-buffer and BufferError (the buffer protocol's own) for a non-contiguous one."""
    if isinstance(data, bytes):
        return data
    try:
        view = memoryview(data)
    except TypeError:
        raise InvalidArgumentTypeError(
            "%s must be a bytes-like object, not %s" % (what, type(data).__name__)
        ) from None
    with view:
        if not view.c_contiguous:
            raise BufferError("%s is not C-contiguous" % what)
        return view.tobytes()


def _murmur3(data: Any, seed: int = 0, what: str = "key") -> Tuple[int, int]:
    """MurmurHash3_x64_128 of a C-contiguous buffer as (h1, h2)."""
    key = _contiguous_bytes(data, what)
    n = len(key)
    nblocks = n // 16
    h1 = h2 = seed
    words = struct.unpack_from("<%dQ" % (2 * nblocks), key)
    for i in range(0, 2 * nblocks, 2):
        k1 = _rotl((words[i] * _C1) & _M64, 31) * _C2 & _M64
        h1 ^= k1
        h1 = (_rotl(h1, 27) + h2) & _M64
        h1 = (h1 * 5 + 0x52DCE729) & _M64
        k2 = _rotl((words[i + 1] * _C2) & _M64, 33) * _C1 & _M64
        h2 ^= k2
        h2 = (_rotl(h2, 31) + h1) & _M64
        h2 = (h2 * 5 + 0x38495AB5) & _M64
    tail = key[nblocks * 16 :]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= _rotl((k2 * _C2) & _M64, 33) * _C1 & _M64
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= _rotl((k1 * _C1) & _M64, 31) * _C2 & _M64
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1, h2


def _digest(key: Any) -> Tuple[int, int]:
    h1, h2 = _murmur3(key)
    if h1 == 0 and h2 == 0:
        h1 = 1
    return h1, h2


def _py_murmur3_x64_128(data: Any, seed: int = 0) -> bytes:
    """MurmurHash3_x64_128 of ``data``: h1 then h2, each little-endian (16 bytes)."""
    seed = _int_arg(seed, "seed")
    if not 0 <= seed <= 0xFFFFFFFF:
        raise InvalidArgumentError("seed must be an int in [0, 2**32-1], not %r" % (seed,))
    return _DIGEST.pack(*_murmur3(data, seed, "data"))


def _py_key_digest(key: Any) -> bytes:
    """The 16-byte digest an :class:`OffsetMap` stores for ``key``.

    MurmurHash3_x64_128 (seed 0) of the key, except that an all-zero digest,
    which marks an empty slot, gets its lowest bit set.
    """
    return _DIGEST.pack(*_digest(key))


def _column_error(name: str, dtype: str, array: Any, detail: object) -> InvalidArgumentTypeError:
    """The error for a column that is not a contiguous 1-D array of ``dtype`` (as the kernel's)."""
    return InvalidArgumentTypeError(
        "%s must be a contiguous 1-D %s array, not %s (%s)" % (name, dtype, type(array).__name__, detail)
    )


def _int_column(array: Any, name: str, itemsize: int) -> memoryview:
    """A 1-D native signed-integer view of a column, or InvalidArgumentTypeError naming it."""
    dtype = "int%d" % (8 * itemsize)
    try:
        view = memoryview(array)
    except TypeError as exc:
        raise _column_error(name, dtype, array, exc) from None
    fmt = view.format.lstrip("@")
    shape_ok = view.ndim == 1 and view.c_contiguous
    if not shape_ok or view.itemsize != itemsize or fmt not in _INT_FORMATS:
        raise _column_error(
            name, dtype, array, "format %r, itemsize %d, %d dimension(s)%s"
            % (view.format, view.itemsize, view.ndim, "" if view.c_contiguous else ", not contiguous")
        )
    return view


class _PyOffsetMap:
    """A fixed-memory map from key digest to the key's latest offset (Kafka's SkimpyOffsetMap).

    Invariant: ``size <= capacity = int(slots * 0.9) < slots`` with
    ``slots = memory // 24``, so at least one slot is always empty and every
    probe ends. Inserting a new key when ``size == capacity`` raises
    OffsetMapFullError; updating a key already present is always allowed, and
    the later offset wins. Keys are never deleted, only all at once by clear().
    Each slot is 24 bytes in one preallocated block: no per-entry objects.

    Keys are stored as their MurmurHash3_x64_128 digest (seed 0), chosen over
    Kafka's MD5 for speed. Two distinct keys collide with probability about
    ``n**2 / 2**129`` for n keys (about 1.5e-21 for 1e9 keys), for keys nobody
    chose to collide. It is not a cryptographic hash: a producer crafting
    colliding keys could make compaction drop a record, the same class of risk
    Kafka accepts with MD5. An all-zero digest marks an empty slot, so a key
    whose digest is all zeros is stored with its lowest bit set.

    Not thread-safe.
    """

    __slots__ = ("_table", "_slots", "_capacity", "_size", "_latest", "_lookups", "_probes")

    def __init__(self, memory: int) -> None:
        if not isinstance(memory, int) or isinstance(memory, bool):
            raise InvalidArgumentTypeError("memory must be an int, not %r" % (memory,))
        if not SLOT_SIZE <= memory <= 2**62:
            raise InvalidArgumentError(
                "memory must be an int in [%d, 2**62] (bytes), not %r" % (SLOT_SIZE, memory)
            )
        self._slots = memory // SLOT_SIZE
        self._capacity = int(self._slots * LOAD_FACTOR)
        self._table = bytearray(self._slots * SLOT_SIZE)
        self._size = 0
        self._latest = -1
        self._lookups = 0
        self._probes = 0

    def _find(self, h1: int, h2: int) -> Tuple[int, int, int]:
        """(slot, stored h1, stored h2) of digest (h1, h2), or of the empty slot for it."""
        table, slots = self._table, self._slots
        pos = h1 % slots
        self._lookups += 1
        while True:
            self._probes += 1
            s1, s2 = _DIGEST.unpack_from(table, pos * SLOT_SIZE)
            if (s1 == h1 and s2 == h2) or (s1 == 0 and s2 == 0):
                return pos, s1, s2
            pos += 1
            if pos == slots:
                pos = 0

    def _insert(self, h1: int, h2: int, offset: int) -> bool:
        pos, s1, s2 = self._find(h1, h2)
        if s1 == 0 and s2 == 0:
            if self._size >= self._capacity:
                return False
            self._size += 1
        _SLOT.pack_into(self._table, pos * SLOT_SIZE, h1, h2, offset)
        if offset > self._latest:
            self._latest = offset
        return True

    def put(self, key: Any, offset: int) -> None:
        """Record ``offset`` as the latest offset of ``key`` (OffsetMapFullError if no room)."""
        offset = _int_arg(offset, "offset")
        if not 0 <= offset <= _INT64_MAX:
            raise InvalidArgumentError("offset must be an int in [0, 2**63-1], not %r" % (offset,))
        h1, h2 = _digest(key)
        if not self._insert(h1, h2, offset):
            raise OffsetMapFullError(
                "offset map is full: %d keys in %d slots (capacity %d); cannot add key %r"
                % (self._size, self._slots, self._capacity, bytes(memoryview(key)[:32]))
            )

    def get(self, key: Any) -> int:
        """The latest offset put for ``key``, or -1 if it was never put."""
        h1, h2 = _digest(key)
        pos, s1, s2 = self._find(h1, h2)
        if s1 == 0 and s2 == 0:
            return -1
        return _OFFSET.unpack_from(self._table, pos * SLOT_SIZE + 16)[0]

    def clear(self) -> None:
        """Forget every key and reset the statistics; the memory stays allocated."""
        self._table[:] = bytes(len(self._table))
        self._size = 0
        self._latest = -1
        self._lookups = 0
        self._probes = 0

    def digest(self, key: Any) -> bytes:
        """The 16-byte digest this map stores for ``key`` (see :func:`key_digest`)."""
        return _py_key_digest(key)

    def put_columns(
        self,
        data: Any,
        key_start: Any,
        key_length: Any,
        offsets: Any,
        start: int = 0,
        stop: Optional[int] = None,
    ) -> int:
        """Put the keys of rows ``start:stop`` of a columnar batch; the number of rows consumed.

        Row i's key is ``data[key_start[i]:key_start[i] + key_length[i]]``
        (``key_length[i] == -1``: a null key, skipped) and its offset
        ``offsets[i]``; later rows overwrite earlier ones. Every row is checked
        before any is put, so a bad row (InvalidArgumentError naming it) changes nothing.
        Stops before the first row whose new key does not fit and returns the
        count of rows consumed up to there (``stop - start`` when all fit): it
        never raises for a full map, so a cleaner knows where to resume.
        """
        ks = _int_column(key_start, "key_start", 8)
        kl = _int_column(key_length, "key_length", 4)
        offs = _int_column(offsets, "offsets", 8)
        n = len(ks)
        if len(kl) != n or len(offs) != n:
            raise InvalidArgumentError(
                "columns differ in length: key_start %d, key_length %d, offsets %d"
                % (n, len(kl), len(offs))
            )
        start = _int_arg(start, "start")
        end = n if stop is None else _int_arg(stop, "stop")
        if not 0 <= start <= end <= n:
            raise InvalidArgumentError(
                "start and stop must satisfy 0 <= start <= stop <= %d (the rows), not %r and %r" % (n, start, stop)
            )
        raw = _contiguous_bytes(data, "data")
        data_len = len(raw)
        starts, lengths = ks[start:end].tolist(), kl[start:end].tolist()
        rows = list(zip(range(start, end), starts, lengths, offs[start:end].tolist()))
        for row, s, length, offset in rows:
            if length == -1:
                continue
            if length < -1:
                raise InvalidArgumentError(
                    "row %d: key_length %d is invalid (-1 marks a null key)" % (row, length)
                )
            if s < 0 or s > data_len or length > data_len - s:
                raise InvalidArgumentError(
                    "row %d: key bytes [%d, %d) lie outside data of %d bytes"
                    % (row, s, s + length, data_len)
                )
            if offset < 0:
                raise InvalidArgumentError("row %d: offset %d is negative" % (row, offset))
        for row, s, length, offset in rows:
            if length == -1:
                continue
            h1, h2 = _digest(raw[s : s + length])
            if not self._insert(h1, h2, offset):
                return row - start
        return end - start

    def get_columns(self, data: Any, key_start: Any, key_length: Any) -> np.ndarray:
        """The latest offset of every row's key, as an int64 numpy array (-1: never put).

        Row i's key is ``data[key_start[i]:key_start[i] + key_length[i]]``; a
        null key (``key_length[i] == -1``) also gives -1. The bulk form of
        get(), for a cleaner deciding which records of a segment to keep: a
        record is the latest for its key when its offset is >= the result.
        Every row is checked first (InvalidArgumentError naming a bad one).
        """
        ks = _int_column(key_start, "key_start", 8)
        kl = _int_column(key_length, "key_length", 4)
        n = len(ks)
        if len(kl) != n:
            raise InvalidArgumentError("columns differ in length: key_start %d, key_length %d" % (n, len(kl)))
        raw = _contiguous_bytes(data, "data")
        data_len = len(raw)
        rows = list(zip(ks.tolist(), kl.tolist()))
        for row, (s, length) in enumerate(rows):
            if length == -1:
                continue
            if length < -1:
                raise InvalidArgumentError("row %d: key_length %d is invalid (-1 marks a null key)" % (row, length))
            if s < 0 or s > data_len or length > data_len - s:
                raise InvalidArgumentError(
                    "row %d: key bytes [%d, %d) lie outside data of %d bytes" % (row, s, s + length, data_len)
                )
        import numpy as np  # not at import: a broker starting up needs none of it

        out = np.empty(n, dtype=np.int64)
        table = self._table
        for row, (s, length) in enumerate(rows):
            if length == -1:
                out[row] = -1
                continue
            h1, h2 = _digest(raw[s : s + length])
            pos, s1, s2 = self._find(h1, h2)
            out[row] = -1 if (s1 == 0 and s2 == 0) else _OFFSET.unpack_from(table, pos * SLOT_SIZE + 16)[0]
        return out

    def __len__(self) -> int:
        return self._size

    @property
    def size(self) -> int:
        """Keys in the map."""
        return self._size

    @property
    def slots(self) -> int:
        """Slots in the table: memory // 24."""
        return self._slots

    @property
    def capacity(self) -> int:
        """Most keys the map holds: int(slots * 0.9)."""
        return self._capacity

    @property
    def memory(self) -> int:
        """Bytes the table uses: slots * 24."""
        return self._slots * SLOT_SIZE

    @property
    def utilization(self) -> float:
        """size / slots."""
        return self._size / self._slots

    @property
    def latest_offset(self) -> int:
        """The largest offset put since the last clear, or -1."""
        return self._latest

    @property
    def lookups(self) -> int:
        """Puts and gets (one per key) since the last clear."""
        return self._lookups

    @property
    def probes(self) -> int:
        """Slots examined by those lookups."""
        return self._probes

    @property
    def collision_rate(self) -> float:
        """Extra probes per lookup: (probes - lookups) / lookups, 0.0 before any."""
        if self._lookups == 0:
            return 0.0
        return (self._probes - self._lookups) / self._lookups

    def __repr__(self) -> str:
        return "OffsetMap(memory=%d, size=%d, capacity=%d)" % (
            self.memory,
            self._size,
            self._capacity,
        )


#: The pure-Python twin of the compiled kernel's map and hashes (its murmur2's twin
#: is the partitioner's, in pylogq.cluster.partitioner).
pure = types.SimpleNamespace(
    OffsetMap=_PyOffsetMap,
    key_digest=_py_key_digest,
    murmur3_x64_128=_py_murmur3_x64_128,
)

_kernel = compiled("_offset_map") or pure
OffsetMap = _kernel.OffsetMap
key_digest = _kernel.key_digest
murmur3_x64_128 = _kernel.murmur3_x64_128


def put_batches(
    offset_map: Any,
    buffer: Any,
    start_offset: Optional[int] = None,
    end_offset: Optional[int] = None,
) -> int:
    """Put the key of every record in a buffer of batches; -> the next offset to map.

    The records are decoded into columns and their keys hashed and inserted in
    C (both without the GIL for large inputs); records without a key and
    control batches are skipped, as a log cleaner skips them. When the map
    fills up, the returned offset is that of the first record that did not
    fit, so a cleaner knows where its map ends; otherwise it is one past the
    last record (``start_offset`` or 0 for a buffer with no records).
    """
    columns = decode_columns(buffer, start_offset=start_offset, end_offset=end_offset)
    if len(columns) == 0:
        return 0 if start_offset is None else start_offset
    consumed = offset_map.put_columns(columns.data, columns.key_start, columns.key_length, columns.offsets)
    if consumed < len(columns):
        return int(columns.offsets[consumed])
    return int(columns.offsets[-1]) + 1
