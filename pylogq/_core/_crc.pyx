# cython: language_level=3
"""CRC-32C and CRC-32 over any contiguous buffer, in C (src/crc.c).

CRC-32C (Castagnoli) guards magic v2 record batches: it covers the bytes from
the attributes field to the end of the batch. CRC-32 (zlib/IEEE) guards each
legacy v0/v1 message from its magic byte on. Both functions behave as
``crc32c.crc32c(data, value)`` and ``zlib.crc32(data, value)``: the value is
the CRC of the bytes so far (0 to start), masked to 32 bits, so
``crc32c(b, crc32c(a)) == crc32c(a + b)``.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_CheckBuffer, PyObject_GetBuffer
from cpython.long cimport PyLong_AsUnsignedLongMask
from libc.stdint cimport uint32_t

from pylogq._core._args cimport int_arg

from pylogq.errors import InvalidArgumentError, InvalidArgumentTypeError


cdef extern from "crc.h" nogil:
    uint32_t pylogq_crc32c(uint32_t crc, const void *buf, size_t len)
    uint32_t pylogq_crc32(uint32_t crc, const void *buf, size_t len)
    const char *pylogq_crc32c_impl()
    const char *pylogq_crc32_impl()
    uint32_t pylogq_crc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2)
    uint32_t pylogq_crc32_combine(uint32_t crc1, uint32_t crc2, size_t len2)
    const char *pylogq_crc32c_variant(size_t i, pylogq_crc_fn *fn)
    const char *pylogq_crc32_variant(size_t i, pylogq_crc_fn *fn)


cdef enum:
    # Below this many bytes the work takes less time than handing the GIL over.
    NOGIL_BYTES = 32 * 1024


IMPLEMENTATION = {
    "crc32c": pylogq_crc32c_impl().decode("ascii"),
    "crc32": pylogq_crc32_impl().decode("ascii"),
}




cdef inline uint32_t _run(pylogq_crc_fn fn, data, crc) except? 0xFFFFFFFF:
    """The CRC of data's bytes continuing from crc; the GIL is released for long inputs."""
    cdef uint32_t value = <uint32_t>PyLong_AsUnsignedLongMask(int_arg(crc, "crc"))
    cdef Py_buffer view
    # PyBUF_SIMPLE: any C-contiguous buffer whatever its item format (as zlib); a
    # non-buffer raises InvalidArgumentTypeError, a non-contiguous one the exporter's
    # error (BufferError for a memoryview, as the twin's).
    if not PyObject_CheckBuffer(data):
        raise InvalidArgumentTypeError("data must be a bytes-like object, not %s" % type(data).__name__)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    if view.len >= NOGIL_BYTES:
        with nogil:
            value = fn(value, view.buf, <size_t>view.len)
    else:
        value = fn(value, view.buf, <size_t>view.len)
    PyBuffer_Release(&view)
    return value


def crc32c(data, crc=0):
    """CRC-32C of data (any contiguous buffer), continuing from crc."""
    return _run(pylogq_crc32c, data, crc)


def crc32(data, crc=0):
    """CRC-32 (zlib) of data (any contiguous buffer), continuing from crc."""
    return _run(pylogq_crc32, data, crc)


cdef Py_ssize_t _len2_arg(object len2) except -1:
    """len2, checked to be in [0, 2**63-1] as the twin checks it."""
    len2 = int_arg(len2, "len2")
    if not 0 <= len2 <= 0x7FFFFFFFFFFFFFFF:
        raise InvalidArgumentError("len2 must be an int in [0, 2**63-1], not %r" % (len2,))
    return len2


def crc32c_combine(crc1, crc2, len2):
    """CRC-32C of a + b from crc1 = crc32c(a), crc2 = crc32c(b) and len2 = len(b)."""
    # In the twin's order: len2, then crc1, then crc2.
    cdef size_t n = <size_t>_len2_arg(len2)
    cdef uint32_t c1 = <uint32_t>PyLong_AsUnsignedLongMask(int_arg(crc1, "crc1"))
    cdef uint32_t c2 = <uint32_t>PyLong_AsUnsignedLongMask(int_arg(crc2, "crc2"))
    return pylogq_crc32c_combine(c1, c2, n)


def crc32_combine(crc1, crc2, len2):
    """CRC-32 of a + b from crc1 = crc32(a), crc2 = crc32(b) and len2 = len(b)."""
    # In the twin's order: len2, then crc1, then crc2.
    cdef size_t n = <size_t>_len2_arg(len2)
    cdef uint32_t c1 = <uint32_t>PyLong_AsUnsignedLongMask(int_arg(crc1, "crc1"))
    cdef uint32_t c2 = <uint32_t>PyLong_AsUnsignedLongMask(int_arg(crc2, "crc2"))
    return pylogq_crc32_combine(c1, c2, n)


cdef class Variant:
    """One implementation of one algorithm, callable as ``fn(data, crc=0)``.

    For tests and benchmarks: each CPU-specific path this machine can run is
    reachable even when a faster one is in use.
    """

    def __call__(self, data, crc=0):
        # Only variants() sets fn: a Variant made any other way has none to call.
        if self.fn == NULL:
            raise TypeError("a Variant comes from variants(); this one has no function")
        return _run(self.fn, data, crc)

    def __repr__(self):
        return f"<Variant {self.algorithm} {self.name}>"


def variants(algorithm):
    """The implementations of algorithm ("crc32c" or "crc32") this CPU can run, fastest first."""
    cdef const char *(*lookup)(size_t, pylogq_crc_fn *)
    cdef pylogq_crc_fn fn = NULL
    cdef const char *name
    cdef size_t i = 0
    cdef Variant v
    if algorithm == "crc32c":
        lookup = pylogq_crc32c_variant
    elif algorithm == "crc32":
        lookup = pylogq_crc32_variant
    else:
        raise InvalidArgumentError("algorithm must be 'crc32c' or 'crc32', not %r" % (algorithm,))
    found = []
    while True:
        name = lookup(i, &fn)
        if name == NULL:
            return tuple(found)
        v = Variant.__new__(Variant)
        v.fn = fn
        v.algorithm = algorithm
        v.name = name.decode("ascii")
        found.append(v)
        i += 1
