# cython: language_level=3
"""Binary search over Kafka's offset and time index files.

Byte layouts (every integer big-endian, entries sorted ascending by key)::

    offset index entry (8 bytes)    time index entry (12 bytes)
      int32  relative_offset  key     int64  timestamp        key
      int32  position                 int32  relative_offset

Offsets are strictly increasing; timestamps never decrease, so equal
timestamps repeat. An index file is a preallocated mmap larger than its used
part, so every function takes ``entries``, the count of entries in use, and
checks ``entries * entry_size`` against the buffer before reading.

Searches first look at the warm section, the entries in the last 8 KB of the
used part (Kafka's ``AbstractIndex.indexSlotRangeFor``): readers and appends
ask about recent offsets, so keeping their lookups on the warm tail pages
avoids page faults on cold parts of the mmap. The GIL is released for indexes
above ``NOGIL_ENTRIES`` entries because a lookup in a cold mmap can fault.
"""

from cpython.buffer cimport PyObject_CheckBuffer, PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.number cimport PyNumber_Index
from libc.stdint cimport int32_t, int64_t

from pylogq._core._args cimport int_arg

from pylogq.errors import InvalidArgumentError, InvalidArgumentTypeError

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object obj, int *overflow) except? -1

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>

    #if defined(__GNUC__) || defined(__clang__)
    #define PYLOGQ_BSWAP32(x) __builtin_bswap32(x)
    #define PYLOGQ_BSWAP64(x) __builtin_bswap64(x)
    #else
    static inline uint32_t PYLOGQ_BSWAP32(uint32_t x) {
        return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
    }
    static inline uint64_t PYLOGQ_BSWAP64(uint64_t x) {
        return ((uint64_t)PYLOGQ_BSWAP32((uint32_t)x) << 32) | PYLOGQ_BSWAP32((uint32_t)(x >> 32));
    }
    #endif

    static inline int32_t pylogq_be_i32(const unsigned char *p) {
        uint32_t v;
        memcpy(&v, p, 4);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        return (int32_t)v;
    #else
        return (int32_t)PYLOGQ_BSWAP32(v);
    #endif
    }

    static inline int64_t pylogq_be_i64(const unsigned char *p) {
        uint64_t v;
        memcpy(&v, p, 8);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        return (int64_t)v;
    #else
        return (int64_t)PYLOGQ_BSWAP64(v);
    #endif
    }

    /* The key of entry i: the first field, read as a signed 64-bit integer. */
    static inline int64_t pylogq_index_key(const unsigned char *base, Py_ssize_t i,
                                           Py_ssize_t size) {
        return size == 8 ? (int64_t)pylogq_be_i32(base + i * 8)
                         : pylogq_be_i64(base + i * size);
    }

    /* First i in [lo, hi) with key(i) > t, or hi. */
    static inline Py_ssize_t pylogq_index_first_gt(const unsigned char *base, Py_ssize_t size,
                                                   Py_ssize_t lo, Py_ssize_t hi, int64_t t) {
        while (lo < hi) {
            Py_ssize_t mid = lo + ((hi - lo) >> 1);
            if (pylogq_index_key(base, mid, size) > t) hi = mid; else lo = mid + 1;
        }
        return lo;
    }

    /* First i in [lo, hi) with key(i) >= t, or hi. */
    static inline Py_ssize_t pylogq_index_first_ge(const unsigned char *base, Py_ssize_t size,
                                                   Py_ssize_t lo, Py_ssize_t hi, int64_t t) {
        while (lo < hi) {
            Py_ssize_t mid = lo + ((hi - lo) >> 1);
            if (pylogq_index_key(base, mid, size) >= t) hi = mid; else lo = mid + 1;
        }
        return lo;
    }

    /* Slot of the last entry with key <= t, or -1; n > 0. The warm section
       starts at entry n - 1 - 8192 / size, as in Kafka. */
    static Py_ssize_t pylogq_index_floor(const unsigned char *base, Py_ssize_t size,
                                         Py_ssize_t n, int64_t t) {
        Py_ssize_t warm = n - 1 - 8192 / size;
        if (warm < 0) warm = 0;
        if (pylogq_index_key(base, warm, size) <= t)
            return pylogq_index_first_gt(base, size, warm + 1, n, t) - 1;
        return pylogq_index_first_gt(base, size, 0, warm, t) - 1;
    }

    /* Slot of the first entry with key >= t, or -1; n > 0. */
    static Py_ssize_t pylogq_index_ceil(const unsigned char *base, Py_ssize_t size,
                                        Py_ssize_t n, int64_t t) {
        Py_ssize_t warm = n - 1 - 8192 / size;
        Py_ssize_t i;
        if (warm < 0) warm = 0;
        if (pylogq_index_key(base, warm, size) < t)
            i = pylogq_index_first_ge(base, size, warm + 1, n, t);
        else
            i = pylogq_index_first_ge(base, size, 0, warm, t);
        return i == n ? -1 : i;
    }
    """
    int32_t pylogq_be_i32(const unsigned char *p) nogil
    int64_t pylogq_be_i64(const unsigned char *p) nogil
    Py_ssize_t pylogq_index_floor(const unsigned char *base, Py_ssize_t size,
                                  Py_ssize_t n, int64_t t) nogil
    Py_ssize_t pylogq_index_ceil(const unsigned char *base, Py_ssize_t size,
                                 Py_ssize_t n, int64_t t) nogil


cdef enum:
    OFFSET_ENTRY_SIZE = 8
    TIME_ENTRY_SIZE = 12
    # Above this many entries a search releases the GIL: it may fault in pages.
    NOGIL_ENTRIES = 4096

NOGIL_THRESHOLD = NOGIL_ENTRIES




cdef int _get_buffer(object buf, Py_buffer *view) except -1:
    """PyObject_GetBuffer(PyBUF_SIMPLE), with InvalidArgumentTypeError for a non-buffer (a
    non-contiguous one keeps the exporter's own error, as the twin's BufferError)."""
    if not PyObject_CheckBuffer(buf):
        raise InvalidArgumentTypeError("buf must be a bytes-like object, not %s" % type(buf).__name__)
    PyObject_GetBuffer(buf, view, PyBUF_SIMPLE)
    return 0


cdef Py_ssize_t _entries_arg(object entries) except -1:
    """``entries`` as a count >= 0, as the twin's _check_entries checks it before it looks at
    the buffer; a count too large for a Py_ssize_t comes back as the largest one (no buffer
    holds that many entries, so _check_fits refuses it)."""
    cdef int overflow = 0
    cdef long long n = PyLong_AsLongLongAndOverflow(int_arg(entries, "entries"), &overflow)
    if overflow > 0:
        return 0x7FFFFFFFFFFFFFFF
    if n < 0 or overflow < 0:
        raise InvalidArgumentError("entries must be an int >= 0, not %r" % (PyNumber_Index(entries),))
    return <Py_ssize_t>n


cdef int _check_fits(object entries, Py_ssize_t n, Py_ssize_t nbytes, Py_ssize_t size) except -1:
    """InvalidArgumentError if ``n`` entries (the argument ``entries``) do not fit in nbytes."""
    if n > nbytes // size:
        raise InvalidArgumentError(
            "entries must be at most %d (%d-byte entries in a buffer of %d bytes), not %r"
            % (nbytes // size, size, nbytes, PyNumber_Index(entries)))
    return 0


cdef Py_ssize_t _search(object buf, object entries_arg, object target,
                        Py_ssize_t size, bint floor, str what) except -2:
    cdef Py_buffer view
    cdef int overflow = 0
    cdef int64_t t = PyLong_AsLongLongAndOverflow(int_arg(target, what), &overflow)
    cdef Py_ssize_t slot
    cdef Py_ssize_t entries = _entries_arg(entries_arg)
    _get_buffer(buf, &view)
    try:
        _check_fits(entries_arg, entries, view.len, size)
        if entries == 0:
            return -1
        if overflow > 0:
            return entries - 1 if floor else -1
        if overflow < 0:
            return -1 if floor else 0
        # entries * size <= view.len was checked above, so every read is in range.
        if entries > NOGIL_ENTRIES:
            with nogil:
                if floor:
                    slot = pylogq_index_floor(<const unsigned char *>view.buf, size, entries, t)
                else:
                    slot = pylogq_index_ceil(<const unsigned char *>view.buf, size, entries, t)
        elif floor:
            slot = pylogq_index_floor(<const unsigned char *>view.buf, size, entries, t)
        else:
            slot = pylogq_index_ceil(<const unsigned char *>view.buf, size, entries, t)
        return slot
    finally:
        PyBuffer_Release(&view)


def offset_index_lookup(buf, entries, target):
    """Slot of the last offset index entry with relative offset <= target, or -1.

    -1 when the index is empty or target is below the first entry (Kafka's
    largest lower bound).
    """
    return _search(buf, entries, target, OFFSET_ENTRY_SIZE, True, "target")


def offset_index_upper(buf, entries, target):
    """Slot of the first offset index entry with relative offset >= target, or -1.

    -1 when the index is empty or every entry is below target (Kafka's
    smallest upper bound).
    """
    return _search(buf, entries, target, OFFSET_ENTRY_SIZE, False, "target")


def time_index_lookup(buf, entries, target_ts):
    """Slot of the last time index entry with timestamp <= target_ts, or -1.

    Of several entries with an equal timestamp, the last one.
    """
    return _search(buf, entries, target_ts, TIME_ENTRY_SIZE, True, "target_ts")


def time_index_upper(buf, entries, target_ts):
    """Slot of the first time index entry with timestamp >= target_ts, or -1.

    Of several entries with an equal timestamp, the first one.
    """
    return _search(buf, entries, target_ts, TIME_ENTRY_SIZE, False, "target_ts")


def offset_index_entry(buf, slot):
    """The ``(relative_offset, position)`` of offset index entry ``slot``."""
    cdef Py_buffer view
    cdef int32_t rel, pos
    cdef Py_ssize_t i
    slot = int_arg(slot, "slot")
    _get_buffer(buf, &view)
    try:
        if not 0 <= slot < view.len // OFFSET_ENTRY_SIZE:
            raise IndexError(
                "offset index slot %d out of range: the buffer holds %d entries"
                % (slot, view.len // OFFSET_ENTRY_SIZE))
        i = slot
        # slot was checked against the buffer just above.
        rel = pylogq_be_i32(<const unsigned char *>view.buf + i * OFFSET_ENTRY_SIZE)
        pos = pylogq_be_i32(<const unsigned char *>view.buf + i * OFFSET_ENTRY_SIZE + 4)
    finally:
        PyBuffer_Release(&view)
    return rel, pos


def time_index_entry(buf, slot):
    """The ``(timestamp, relative_offset)`` of time index entry ``slot``."""
    cdef Py_buffer view
    cdef int64_t ts
    cdef int32_t rel
    cdef Py_ssize_t i
    slot = int_arg(slot, "slot")
    _get_buffer(buf, &view)
    try:
        if not 0 <= slot < view.len // TIME_ENTRY_SIZE:
            raise IndexError(
                "time index slot %d out of range: the buffer holds %d entries"
                % (slot, view.len // TIME_ENTRY_SIZE))
        i = slot
        # slot was checked against the buffer just above.
        ts = pylogq_be_i64(<const unsigned char *>view.buf + i * TIME_ENTRY_SIZE)
        rel = pylogq_be_i32(<const unsigned char *>view.buf + i * TIME_ENTRY_SIZE + 8)
    finally:
        PyBuffer_Release(&view)
    return ts, rel


# What an index's full sanity check finds, as (problem, slot): problem 0 is none; the
# slot is the entry that breaks the rule (the later of two out of order). One numbering
# for both indexes, pylogq.storage.index_search's named constants.
cdef enum:
    INDEX_SOUND = 0
    OFFSET_FIRST_NEGATIVE = 1
    OFFSET_NOT_INCREASING = 2
    POSITION_FIRST_NEGATIVE = 3
    POSITION_DECREASING = 4
    TIMESTAMP_NOT_INCREASING = 5
    OFFSET_DECREASING = 6


cdef Py_ssize_t _entries_view(object buf, object entries, Py_ssize_t size, Py_buffer *view) except -1:
    """Acquire ``view`` of buf and return ``entries``, checked as the twin's _check_entries does."""
    cdef Py_ssize_t n = _entries_arg(entries)
    _get_buffer(buf, view)
    try:
        _check_fits(entries, n, view.len, size)
    except BaseException:
        PyBuffer_Release(view)
        raise
    return n


cdef int _offset_disorder(const unsigned char *p, Py_ssize_t n, Py_ssize_t *slot) noexcept nogil:
    cdef Py_ssize_t i
    if pylogq_be_i32(p) < 0:
        return OFFSET_FIRST_NEGATIVE
    for i in range(1, n):
        if pylogq_be_i32(p + i * 8) <= pylogq_be_i32(p + (i - 1) * 8):
            slot[0] = i
            return OFFSET_NOT_INCREASING
    if pylogq_be_i32(p + 4) < 0:
        return POSITION_FIRST_NEGATIVE
    for i in range(1, n):
        if pylogq_be_i32(p + i * 8 + 4) < pylogq_be_i32(p + (i - 1) * 8 + 4):
            slot[0] = i
            return POSITION_DECREASING
    return INDEX_SOUND


cdef int _time_disorder(const unsigned char *p, Py_ssize_t n, Py_ssize_t *slot) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(1, n):
        if pylogq_be_i64(p + i * 12) <= pylogq_be_i64(p + (i - 1) * 12):
            slot[0] = i
            return TIMESTAMP_NOT_INCREASING
    if pylogq_be_i32(p + 8) < 0:
        return OFFSET_FIRST_NEGATIVE
    for i in range(1, n):
        if pylogq_be_i32(p + i * 12 + 8) < pylogq_be_i32(p + (i - 1) * 12 + 8):
            slot[0] = i
            return OFFSET_DECREASING
    return INDEX_SOUND


def offset_index_disorder(buf, entries):
    """``(problem, slot)``: the first rule the offset index's entries break, 0 for none.

    1: the first relative offset is negative; 2: entry ``slot``'s relative offset is
    not above the one before; 3: the first position is negative; 4: entry ``slot``'s
    position is below the one before. Rules are checked in that order.
    """
    cdef Py_buffer view
    cdef Py_ssize_t n = _entries_view(buf, entries, OFFSET_ENTRY_SIZE, &view)
    cdef Py_ssize_t slot = 0
    cdef int problem = INDEX_SOUND
    try:
        if n:
            with nogil:
                problem = _offset_disorder(<const unsigned char *>view.buf, n, &slot)
    finally:
        PyBuffer_Release(&view)
    return problem, slot


def time_index_disorder(buf, entries):
    """``(problem, slot)``: the first rule the time index's entries break, 0 for none.

    5: entry ``slot``'s timestamp is not above the one before; 1: the first relative
    offset is negative; 6: entry ``slot``'s relative offset is below the one before.
    Rules are checked in that order.
    """
    cdef Py_buffer view
    cdef Py_ssize_t n = _entries_view(buf, entries, TIME_ENTRY_SIZE, &view)
    cdef Py_ssize_t slot = 0
    cdef int problem = INDEX_SOUND
    try:
        if n:
            with nogil:
                problem = _time_disorder(<const unsigned char *>view.buf, n, &slot)
    finally:
        PyBuffer_Release(&view)
    return problem, slot
