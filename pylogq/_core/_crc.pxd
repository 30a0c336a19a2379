# cython: language_level=3
# Variant's fields, declared here so other kernels can cimport them; the CRC
# functions themselves are described in _crc.pyx and src/crc.h.

from libc.stdint cimport uint32_t


cdef extern from "crc.h" nogil:
    ctypedef uint32_t (*pylogq_crc_fn)(uint32_t crc, const void *buf, size_t len)


cdef class Variant:
    cdef pylogq_crc_fn fn
    cdef readonly str algorithm
    cdef readonly str name
