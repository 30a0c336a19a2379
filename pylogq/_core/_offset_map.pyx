# cython: language_level=3
"""The compaction offset map: key digest -> latest offset, in one fixed block of memory.

Table layout: ``slots = memory // 24`` slots of 24 bytes, one malloc'd block::

    uint64  h1       digest bytes 0-7   (MurmurHash3_x64_128 h1)
    uint64  h2       digest bytes 8-15  (MurmurHash3_x64_128 h2)
    int64   offset   the latest offset put for the key

A digest of all zeros marks an empty slot. A key whose real digest is all zeros
(the empty key hashes so) gets its lowest bit set: digest byte 0 |= 1, so it
shares a digest with no key except one whose digest is exactly that value.
Open addressing with linear probing from ``h1 % slots``; the map holds at most
``capacity = int(slots * 0.9)`` keys, so a probe always ends at an empty slot.
The pure-Python twin in ``pylogq.storage.offset_map`` uses the same table and
probe order, so both agree on every result and statistic.
"""

cimport cython
from cpython.buffer cimport PyObject_CheckBuffer, PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.number cimport PyNumber_Index
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memset

from pylogq._core._args cimport int_arg

from pylogq.errors import IllegalStateError, InvalidArgumentError, InvalidArgumentTypeError, OffsetMapFullError

cdef extern from "murmur3.h":
    void pylogq_murmur3_x64_128(const void *key, size_t len, uint32_t seed,
                                uint64_t *out) nogil

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define pylogq_prefetch_w(p) __builtin_prefetch((p), 1, 1)
    #else
    #define pylogq_prefetch_w(p) ((void)(p))
    #endif
    """
    void pylogq_prefetch_w(const void *p) nogil

cdef enum:
    SLOT_BYTES = 24
    # put_columns releases the GIL above this many rows.
    NOGIL_ROWS = 512
    # put_columns hashes this many rows and prefetches their home slots before
    # inserting them, so the cache misses of a large table overlap.
    BATCH = 16
    # Row validation failures, reported after the nogil pass.
    ROW_OK = 0
    ROW_BAD_LENGTH = 1
    ROW_OUTSIDE = 2
    ROW_BAD_OFFSET = 3

LOAD_FACTOR = 0.9
SLOT_SIZE = SLOT_BYTES
NOGIL_THRESHOLD = NOGIL_ROWS


cdef inline void _digest(const unsigned char *key, size_t n, uint64_t *out) noexcept nogil:
    pylogq_murmur3_x64_128(key, n, 0, out)
    if out[0] == 0 and out[1] == 0:
        out[0] = 1


cdef bytes _digest_bytes(uint64_t h1, uint64_t h2):
    cdef unsigned char raw[16]
    cdef int i
    for i in range(8):
        raw[i] = <unsigned char>(h1 >> (8 * i))
        raw[8 + i] = <unsigned char>(h2 >> (8 * i))
    return PyBytes_FromStringAndSize(<char *>raw, 16)




cdef int _get_buffer(object obj, Py_buffer *view, str what) except -1:
    """PyObject_GetBuffer(PyBUF_SIMPLE), with InvalidArgumentTypeError naming ``what`` for a
    non-buffer (a non-contiguous one keeps the exporter's own error, as the twin's BufferError)."""
    if not PyObject_CheckBuffer(obj):
        raise InvalidArgumentTypeError("%s must be a bytes-like object, not %s" % (what, type(obj).__name__))
    PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    return 0


def murmur3_x64_128(data, seed=0):
    """MurmurHash3_x64_128 of ``data``: h1 then h2, each little-endian (16 bytes)."""
    cdef Py_buffer view
    cdef uint64_t out[2]
    cdef uint32_t s
    seed = int_arg(seed, "seed")
    if not 0 <= seed <= 0xFFFFFFFF:
        raise InvalidArgumentError("seed must be an int in [0, 2**32-1], not %r" % (seed,))
    s = seed
    _get_buffer(data, &view, "data")
    try:
        pylogq_murmur3_x64_128(view.buf, <size_t>view.len, s, out)
    finally:
        PyBuffer_Release(&view)
    return _digest_bytes(out[0], out[1])


def key_digest(key):
    """The 16-byte digest an :class:`OffsetMap` stores for ``key``.

    MurmurHash3_x64_128 (seed 0) of the key, except that an all-zero digest,
    which marks an empty slot, gets its lowest bit set.
    """
    cdef Py_buffer view
    cdef uint64_t out[2]
    _get_buffer(key, &view, "key")
    try:
        _digest(<const unsigned char *>view.buf, <size_t>view.len, out)
    finally:
        PyBuffer_Release(&view)
    return _digest_bytes(out[0], out[1])


cdef object _column_error(str name, str dtype, object column, exc):
    """The error for a column that is not a contiguous 1-D array of ``dtype`` (as the twin's)."""
    return InvalidArgumentTypeError("%s must be a contiguous 1-D %s array, not %s (%s)"
                                    % (name, dtype, type(column).__name__, exc))




cdef inline int _key_row_check(Py_ssize_t data_len, int64_t start, int32_t length) noexcept nogil:
    """ROW_OK, or why a key of ``length`` bytes at ``start`` is not inside the data (-1: null key)."""
    if length == -1:
        return ROW_OK
    if length < -1:
        return ROW_BAD_LENGTH
    if start < 0 or start > data_len or length > data_len - start:
        return ROW_OUTSIDE
    return ROW_OK

cdef const int64_t[::1] _int64_column(object column, str name):
    """``column`` as a contiguous int64 view; InvalidArgumentTypeError naming the column otherwise."""
    cdef const int64_t[::1] view
    if column is None:  # a typed memoryview takes None as an empty view; the twin refuses it
        raise _column_error(name, "int64", column, "not a buffer")
    try:
        view = column
    except (ValueError, TypeError, BufferError) as exc:
        raise _column_error(name, "int64", column, exc) from None
    return view


cdef const int32_t[::1] _int32_column(object column, str name):
    """``column`` as a contiguous int32 view; InvalidArgumentTypeError naming the column otherwise."""
    cdef const int32_t[::1] view
    if column is None:  # a typed memoryview takes None as an empty view; the twin refuses it
        raise _column_error(name, "int32", column, "not a buffer")
    try:
        view = column
    except (ValueError, TypeError, BufferError) as exc:
        raise _column_error(name, "int32", column, exc) from None
    return view

cdef class OffsetMap:
    """A fixed-memory map from key digest to the key's latest offset (Kafka's SkimpyOffsetMap).

    Invariant: ``size <= capacity = int(slots * 0.9) < slots`` with
    ``slots = memory // 24``, so at least one slot is always empty and every
    probe ends. Inserting a new key when ``size == capacity`` raises
    OffsetMapFullError; updating a key already present is always allowed, and
    the later offset wins. Keys are never deleted, only all at once by clear().
    Each slot is 24 bytes in one preallocated block: no per-entry objects.

    Keys are stored as their MurmurHash3_x64_128 digest (seed 0), chosen over
    Kafka's MD5 for speed. Two distinct keys collide with probability about
    n**2 / 2**129 for n keys (about 1.5e-21 for 1e9 keys), for keys nobody
    chose to collide. It is not a cryptographic hash: a producer crafting
    colliding keys could make compaction drop a record, the same class of risk
    Kafka accepts with MD5. An all-zero digest marks an empty slot, so a key
    whose digest is all zeros is stored with its lowest bit set.

    Not thread-safe. put_columns releases the GIL; while it runs, every other
    call on the same map raises IllegalStateError (a RuntimeError) instead of racing it.
    """

    def __cinit__(self, memory):
        cdef Py_ssize_t mem
        if not isinstance(memory, int) or isinstance(memory, bool):
            raise InvalidArgumentTypeError("memory must be an int, not %r" % (memory,))
        if not SLOT_BYTES <= memory <= 2**62:
            raise InvalidArgumentError("memory must be an int in [%d, 2**62] (bytes), not %r"
                                       % (SLOT_BYTES, memory))
        mem = memory
        self._slots = mem // SLOT_BYTES
        self._capacity = <Py_ssize_t>(<double>self._slots * 0.9)
        self._table = <Slot *>calloc(<size_t>self._slots, sizeof(Slot))
        if self._table == NULL:
            raise MemoryError("cannot allocate %d bytes for an offset map"
                              % (self._slots * SLOT_BYTES))
        self._size = 0
        self._latest = -1
        self._lookups = 0
        self._probes = 0
        self._busy = False

    def __dealloc__(self):
        free(self._table)

    cdef inline int _check_idle(self) except -1:
        if self._busy:
            raise IllegalStateError("offset map is in use by put_columns in another thread")
        return 0

    cdef inline Py_ssize_t _find(self, uint64_t h1, uint64_t h2) noexcept nogil:
        """The slot holding digest (h1, h2), or the empty slot where it would go."""
        cdef Py_ssize_t pos = <Py_ssize_t>(h1 % <uint64_t>self._slots)
        cdef Slot *s
        self._lookups += 1
        while True:
            self._probes += 1
            s = &self._table[pos]
            if (s.h1 == h1 and s.h2 == h2) or (s.h1 == 0 and s.h2 == 0):
                return pos
            pos += 1
            if pos == self._slots:
                pos = 0

    cdef inline bint _insert(self, uint64_t h1, uint64_t h2, int64_t offset) noexcept nogil:
        """Put (h1, h2) -> offset; False, changing nothing, if the key is new and the map full."""
        cdef Slot *s = &self._table[self._find(h1, h2)]
        if s.h1 == 0 and s.h2 == 0:
            if self._size >= self._capacity:
                return False
            s.h1 = h1
            s.h2 = h2
            self._size += 1
        s.offset = offset
        if offset > self._latest:
            self._latest = offset
        return True

    def put(self, key, offset):
        """Record ``offset`` as the latest offset of ``key`` (OffsetMapFullError if no room)."""
        cdef Py_buffer view
        cdef uint64_t h[2]
        cdef int64_t off
        offset = int_arg(offset, "offset")
        if not 0 <= offset <= 0x7FFFFFFFFFFFFFFF:
            raise InvalidArgumentError("offset must be an int in [0, 2**63-1], not %r" % (offset,))
        off = offset
        self._check_idle()
        _get_buffer(key, &view, "key")
        try:
            _digest(<const unsigned char *>view.buf, <size_t>view.len, h)
        finally:
            PyBuffer_Release(&view)
        if not self._insert(h[0], h[1], off):
            raise OffsetMapFullError(
                "offset map is full: %d keys in %d slots (capacity %d); cannot add key %r"
                % (self._size, self._slots, self._capacity, bytes(memoryview(key)[:32])))

    def get(self, key):
        """The latest offset put for ``key``, or -1 if it was never put."""
        cdef Py_buffer view
        cdef uint64_t h[2]
        cdef Slot *s
        self._check_idle()
        _get_buffer(key, &view, "key")
        try:
            _digest(<const unsigned char *>view.buf, <size_t>view.len, h)
        finally:
            PyBuffer_Release(&view)
        s = &self._table[self._find(h[0], h[1])]
        if s.h1 == 0 and s.h2 == 0:
            return -1
        return s.offset

    def clear(self):
        """Forget every key and reset the statistics; the memory stays allocated."""
        self._check_idle()
        memset(self._table, 0, <size_t>self._slots * SLOT_BYTES)
        self._size = 0
        self._latest = -1
        self._lookups = 0
        self._probes = 0

    def digest(self, key):
        """The 16-byte digest this map stores for ``key`` (see :func:`key_digest`)."""
        return key_digest(key)

    def put_columns(self, data, key_start, key_length, offsets, start=0, stop=None):
        """Put the keys of rows ``start:stop`` of a columnar batch; the number of rows consumed.

        Row i's key is ``data[key_start[i]:key_start[i] + key_length[i]]``
        (``key_length[i] == -1``: a null key, skipped) and its offset
        ``offsets[i]``; later rows overwrite earlier ones. Every row is checked
        before any is put, so a bad row (InvalidArgumentError naming it) changes nothing.
        Stops before the first row whose new key does not fit and returns the
        count of rows consumed up to there (``stop - start`` when all fit): it
        never raises for a full map, so a cleaner knows where to resume.
        """
        cdef const int64_t[::1] ks
        cdef const int32_t[::1] kl
        cdef const int64_t[::1] offs
        cdef Py_ssize_t first, n, end, data_len, bad_row = -1, done
        cdef int bad = ROW_OK
        cdef Py_buffer view
        self._check_idle()
        ks = _int64_column(key_start, "key_start")
        kl = _int32_column(key_length, "key_length")
        offs = _int64_column(offsets, "offsets")
        n = ks.shape[0]
        if kl.shape[0] != n or offs.shape[0] != n:
            raise InvalidArgumentError("columns differ in length: key_start %d, key_length %d, offsets %d"
                                       % (n, kl.shape[0], offs.shape[0]))
        first_obj = int_arg(start, "start")
        end_obj = n if stop is None else int_arg(stop, "stop")
        if not 0 <= first_obj <= end_obj <= n:
            raise InvalidArgumentError(
                "start and stop must satisfy 0 <= start <= stop <= %d (the rows), not %r and %r"
                % (n, first_obj, stop))
        first = first_obj
        end = end_obj
        done = first
        _get_buffer(data, &view, "data")
        data_len = view.len
        self._busy = True
        try:
            if end - first > NOGIL_ROWS:
                with nogil:
                    bad_row = self._validate(data_len, ks, kl, offs, first, end, &bad)
                    if bad == ROW_OK:
                        done = self._put_rows(<const unsigned char *>view.buf, ks, kl, offs,
                                              first, end)
            else:
                bad_row = self._validate(data_len, ks, kl, offs, first, end, &bad)
                if bad == ROW_OK:
                    done = self._put_rows(<const unsigned char *>view.buf, ks, kl, offs,
                                          first, end)
        finally:
            self._busy = False
            PyBuffer_Release(&view)
        if bad == ROW_BAD_LENGTH:
            raise InvalidArgumentError("row %d: key_length %d is invalid (-1 marks a null key)"
                                       % (bad_row, kl[bad_row]))
        if bad == ROW_OUTSIDE:
            raise InvalidArgumentError("row %d: key bytes [%d, %d) lie outside data of %d bytes"
                                       % (bad_row, ks[bad_row], ks[bad_row] + kl[bad_row], data_len))
        if bad == ROW_BAD_OFFSET:
            raise InvalidArgumentError("row %d: offset %d is negative" % (bad_row, offs[bad_row]))
        return done - first

    # start <= end <= the length of every column, checked by put_columns.
    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef Py_ssize_t _validate(self, Py_ssize_t data_len, const int64_t[::1] ks,
                              const int32_t[::1] kl, const int64_t[::1] offs,
                              Py_ssize_t start, Py_ssize_t end, int *bad) noexcept nogil:
        """The first row in start:end whose key range or offset is invalid, with its reason."""
        cdef Py_ssize_t row
        for row in range(start, end):
            bad[0] = _key_row_check(data_len, ks[row], kl[row])
            if bad[0] == ROW_OK and kl[row] != -1 and offs[row] < 0:
                bad[0] = ROW_BAD_OFFSET
            if bad[0] != ROW_OK:
                return row
        return -1

    # Rows start:end were checked by put_columns and _validate: every index is
    # inside its column and every non-null key range inside data.
    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef Py_ssize_t _put_rows(self, const unsigned char *data, const int64_t[::1] ks,
                              const int32_t[::1] kl, const int64_t[::1] offs,
                              Py_ssize_t start, Py_ssize_t end) noexcept nogil:
        """Insert rows start:end (already validated); the first row not consumed."""
        cdef uint64_t h1s[BATCH]
        cdef uint64_t h2s[BATCH]
        cdef Py_ssize_t rows[BATCH]
        cdef uint64_t h[2]
        cdef Py_ssize_t row = start, count, j
        while row < end:
            # Hash a batch of non-null keys and prefetch their home slots.
            count = 0
            while row < end and count < BATCH:
                if kl[row] != -1:
                    _digest(data + ks[row], <size_t>kl[row], h)
                    h1s[count] = h[0]
                    h2s[count] = h[1]
                    rows[count] = row
                    pylogq_prefetch_w(&self._table[h[0] % <uint64_t>self._slots])
                    count += 1
                row += 1
            for j in range(count):
                if not self._insert(h1s[j], h2s[j], offs[rows[j]]):
                    return rows[j]
        return end

    def get_columns(self, data, key_start, key_length):
        """The latest offset of every row's key, as an int64 numpy array (-1: never put).

        Row i's key is ``data[key_start[i]:key_start[i] + key_length[i]]``; a
        null key (``key_length[i] == -1``) also gives -1. The bulk form of
        get(), for a cleaner deciding which records of a segment to keep: a
        record is the latest for its key when its offset is >= the result.
        Every row is checked first (InvalidArgumentError naming a bad one).
        """
        cdef const int64_t[::1] ks
        cdef const int32_t[::1] kl
        cdef int64_t[::1] out_view
        cdef Py_ssize_t n, data_len, bad_row = -1
        cdef int bad = ROW_OK
        cdef Py_buffer view
        self._check_idle()
        ks = _int64_column(key_start, "key_start")
        kl = _int32_column(key_length, "key_length")
        n = ks.shape[0]
        if kl.shape[0] != n:
            raise InvalidArgumentError("columns differ in length: key_start %d, key_length %d"
                                       % (n, kl.shape[0]))
        import numpy as np  # not at import: a broker starting up needs none of it

        out = np.empty(n, dtype=np.int64)
        out_view = out
        _get_buffer(data, &view, "data")
        data_len = view.len
        self._busy = True
        try:
            if n > NOGIL_ROWS:
                with nogil:
                    bad_row = self._validate_keys(data_len, ks, kl, n, &bad)
                    if bad == ROW_OK:
                        self._get_rows(<const unsigned char *>view.buf, ks, kl, out_view, n)
            else:
                bad_row = self._validate_keys(data_len, ks, kl, n, &bad)
                if bad == ROW_OK:
                    self._get_rows(<const unsigned char *>view.buf, ks, kl, out_view, n)
        finally:
            self._busy = False
            PyBuffer_Release(&view)
        if bad == ROW_BAD_LENGTH:
            raise InvalidArgumentError("row %d: key_length %d is invalid (-1 marks a null key)"
                                       % (bad_row, kl[bad_row]))
        if bad == ROW_OUTSIDE:
            raise InvalidArgumentError("row %d: key bytes [%d, %d) lie outside data of %d bytes"
                                       % (bad_row, ks[bad_row], ks[bad_row] + kl[bad_row], data_len))
        return out

    # n is the length of both columns, checked by get_columns.
    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef Py_ssize_t _validate_keys(self, Py_ssize_t data_len, const int64_t[::1] ks,
                                   const int32_t[::1] kl, Py_ssize_t n, int *bad) noexcept nogil:
        """The first row whose key range is invalid, with its reason."""
        cdef Py_ssize_t row
        for row in range(n):
            bad[0] = _key_row_check(data_len, ks[row], kl[row])
            if bad[0] != ROW_OK:
                return row
        return -1

    # Rows 0:n were checked by _validate_keys; out has n rows.
    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef void _get_rows(self, const unsigned char *data, const int64_t[::1] ks,
                        const int32_t[::1] kl, int64_t[::1] out, Py_ssize_t n) noexcept nogil:
        """out[i] = the offset of row i's key, or -1; hashes and prefetches BATCH rows at a time."""
        cdef uint64_t h1s[BATCH]
        cdef uint64_t h2s[BATCH]
        cdef Py_ssize_t rows[BATCH]
        cdef uint64_t h[2]
        cdef Py_ssize_t row = 0, count, j
        cdef Slot *s
        while row < n:
            count = 0
            while row < n and count < BATCH:
                if kl[row] == -1:
                    out[row] = -1
                else:
                    _digest(data + ks[row], <size_t>kl[row], h)
                    h1s[count] = h[0]
                    h2s[count] = h[1]
                    rows[count] = row
                    pylogq_prefetch_w(&self._table[h[0] % <uint64_t>self._slots])
                    count += 1
                row += 1
            for j in range(count):
                s = &self._table[self._find(h1s[j], h2s[j])]
                out[rows[j]] = -1 if (s.h1 == 0 and s.h2 == 0) else s.offset

    def __len__(self):
        return self._size

    @property
    def size(self):
        """Keys in the map."""
        return self._size

    @property
    def slots(self):
        """Slots in the table: memory // 24."""
        return self._slots

    @property
    def capacity(self):
        """Most keys the map holds: int(slots * 0.9)."""
        return self._capacity

    @property
    def memory(self):
        """Bytes the table uses: slots * 24."""
        return self._slots * SLOT_BYTES

    @property
    def utilization(self):
        """size / slots."""
        return self._size / self._slots

    @property
    def latest_offset(self):
        """The largest offset put since the last clear, or -1."""
        return self._latest

    @property
    def lookups(self):
        """Puts and gets (one per key) since the last clear."""
        return self._lookups

    @property
    def probes(self):
        """Slots examined by those lookups."""
        return self._probes

    @property
    def collision_rate(self):
        """Extra probes per lookup: (probes - lookups) / lookups, 0.0 before any."""
        if self._lookups == 0:
            return 0.0
        return (self._probes - self._lookups) / <double>self._lookups

    def __repr__(self):
        return "OffsetMap(memory=%d, size=%d, capacity=%d)" % (
            self._slots * SLOT_BYTES, self._size, self._capacity)


# -- Kafka's partitioner hash -------------------------------------------------

cdef inline uint32_t _murmur2(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """Java's Utils.murmur2 (MurmurHash2, seed 0x9747b28c), as an unsigned 32-bit value."""
    cdef uint32_t m = <uint32_t>0x5BD1E995u
    cdef uint32_t h = (<uint32_t>0x9747B28Cu) ^ <uint32_t>n
    cdef uint32_t k
    cdef Py_ssize_t i = 0
    # Words are little-endian whatever the platform: Java assembles them byte by byte.
    while i + 4 <= n:
        k = (<uint32_t>p[i]) | (<uint32_t>p[i + 1] << 8) | (<uint32_t>p[i + 2] << 16) | (<uint32_t>p[i + 3] << 24)
        k *= m
        k ^= k >> 24
        k *= m
        h = (h * m) ^ k
        i += 4
    cdef Py_ssize_t tail = n & 3
    if tail == 3:
        h ^= <uint32_t>p[i + 2] << 16
    if tail >= 2:
        h ^= <uint32_t>p[i + 1] << 8
    if tail >= 1:
        h ^= <uint32_t>p[i]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return h


def murmur2(data):
    """Kafka's partitioner hash of ``data``: Java's Utils.murmur2, a signed 32-bit int."""
    cdef Py_buffer view
    cdef uint32_t h
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        h = _murmur2(<const unsigned char *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return <int32_t>h
