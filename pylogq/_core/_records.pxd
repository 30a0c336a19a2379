# cython: language_level=3
"""Fields of the v2 record kernels' classes (declared once, here, for cimport and review)."""

from libc.stdint cimport int32_t, int64_t, uint32_t


cdef class Record:
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly int timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef object _headers            # list, or None for "no headers" (built on first access)
    cdef readonly int attributes
    cdef readonly bint is_control


cdef class RecordBatch:
    cdef Py_buffer _view            # the exported buffer, held for the view's lifetime
    cdef bint _has_view
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t end
    cdef readonly int64_t base_offset
    cdef readonly int32_t batch_length
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int magic
    cdef readonly uint32_t crc
    cdef readonly int attributes
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t base_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t records_count
    cdef public bint check_crc

    cdef object _section(self)


cdef class RecordBatchBuilder:
    cdef bytearray _buf             # header space, then records; grown by doubling
    cdef Py_ssize_t _len            # bytes in use
    cdef Py_ssize_t _cap            # bytes allocated
    cdef readonly int compression_type
    cdef readonly int64_t base_offset
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int64_t producer_id
    cdef readonly int producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly bint is_transactional
    cdef readonly bint is_control
    cdef readonly int timestamp_type
    cdef public Py_ssize_t batch_size      # the producer raises it as its memory reservation grows
    cdef readonly Py_ssize_t max_record_size  # the largest record appended, encoded (Kafka's maxRecordSize)
    cdef int32_t _count
    cdef int64_t _last_delta
    cdef int64_t _first_ts
    cdef int64_t _max_ts
    cdef bint _has_first
    cdef bint _built

    cdef int _reserve(self, Py_ssize_t extra) except -1
    cdef Py_ssize_t _append(self, int64_t offset, object timestamp, object key, object value,
                            object headers) except -1


cdef class _SectionReader:
    cdef object stream              # the codecs.DecompressStream the section comes from
    cdef bytes buf                  # decompressed bytes; buf[pos:] not walked yet
    cdef Py_ssize_t pos
    cdef int64_t base               # section position of buf[0]
    cdef bytes rest                 # the chunk a gathered record ended in, from rest_pos
    cdef Py_ssize_t rest_pos
    cdef Py_ssize_t chunk           # bytes asked of the stream per step

    cdef int64_t at(self)
    cdef bytes _next(self, Py_ssize_t *start)
    cdef int ensure(self, Py_ssize_t n) except -1
    cdef int skip(self, int64_t n) except -1
    cdef int64_t remaining(self) except -1
