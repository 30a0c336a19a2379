# cython: language_level=3
# The offset map's table slot and OffsetMap's fields and C methods, declared here
# so other kernels can cimport them; the layout is described in _offset_map.pyx.

from libc.stdint cimport int32_t, int64_t, uint64_t


ctypedef struct Slot:
    uint64_t h1
    uint64_t h2
    int64_t offset


cdef class OffsetMap:
    cdef Slot *_table
    cdef Py_ssize_t _slots
    cdef Py_ssize_t _capacity
    cdef Py_ssize_t _size
    cdef int64_t _latest
    cdef uint64_t _lookups
    cdef uint64_t _probes
    cdef bint _busy

    cdef inline int _check_idle(self) except -1
    cdef inline Py_ssize_t _find(self, uint64_t h1, uint64_t h2) noexcept nogil
    cdef inline bint _insert(self, uint64_t h1, uint64_t h2, int64_t offset) noexcept nogil
    cdef Py_ssize_t _validate(self, Py_ssize_t data_len, const int64_t[::1] ks,
                              const int32_t[::1] kl, const int64_t[::1] offs,
                              Py_ssize_t start, Py_ssize_t end, int *bad) noexcept nogil
    cdef Py_ssize_t _put_rows(self, const unsigned char *data, const int64_t[::1] ks,
                              const int32_t[::1] kl, const int64_t[::1] offs,
                              Py_ssize_t start, Py_ssize_t end) noexcept nogil
    cdef Py_ssize_t _validate_keys(self, Py_ssize_t data_len, const int64_t[::1] ks,
                                   const int32_t[::1] kl, Py_ssize_t n, int *bad) noexcept nogil
    cdef void _get_rows(self, const unsigned char *data, const int64_t[::1] ks,
                        const int32_t[::1] kl, int64_t[::1] out, Py_ssize_t n) noexcept nogil
