# cython: language_level=3, cdivision=True
"""Magic v2 record batches, compiled (the twin of ``pylogq.records.default_records``).

The classes' fields are declared in ``_records.pxd``.

The byte layout is documented once, in ``pylogq/records/default_records.py``;
the offsets below are the same chained constants. Every read from a buffer
goes through the checked helpers (``_varint`` and explicit ``end`` tests):
bounds checking is off module-wide because each index is compared against
the buffer's length right before it is used.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdint cimport INT64_MAX, INT64_MIN
from libc.string cimport memcpy

import sys
import time

from pylogq.errors import (CorruptRecordError, InvalidArgumentError, InvalidArgumentTypeError, InvalidRecordError,
                           IllegalStateError, RecordProblem)

# The kinds a failed check names, held in C variables, and the raise itself out of line: a
# check costs its function one call on the failure path instead of a module lookup, an
# attribute and a keyword call beside the loop it guards (the validation of a 1 MB batch
# ran 15 percent slower with them inline).
cdef object _BAD_CRC = RecordProblem.BAD_CRC
cdef object _BAD_LENGTH = RecordProblem.BAD_LENGTH
cdef object _BAD_MAGIC = RecordProblem.BAD_MAGIC
cdef object _BAD_RECORD = RecordProblem.BAD_RECORD
cdef object _BAD_RECORD_COUNT = RecordProblem.BAD_RECORD_COUNT
cdef object _UNKNOWN_CODEC = RecordProblem.UNKNOWN_CODEC


cdef int _corrupt(str message, object kind) except -1:
    """Raise CorruptRecordError(message, kind=kind)."""
    raise CorruptRecordError(message, kind=kind)


cdef int _invalid(str message, object kind) except -1:
    """Raise InvalidRecordError(message, kind=kind)."""
    raise InvalidRecordError(message, kind=kind)

cdef extern from "crc.h":
    uint32_t pylogq_crc32c(uint32_t crc, const void *buf, size_t len) nogil
    uint32_t pylogq_crc32(uint32_t crc, const void *buf, size_t len) nogil


cdef enum:
    BASE_OFFSET_OFFSET = 0
    LENGTH_OFFSET = BASE_OFFSET_OFFSET + 8
    PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + 4
    MAGIC_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + 4
    CRC_OFFSET = MAGIC_OFFSET + 1
    ATTRIBUTES_OFFSET = CRC_OFFSET + 4
    LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + 2
    BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + 4
    MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + 8
    PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + 8
    PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + 8
    BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + 2
    RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + 4
    RECORDS_OFFSET = RECORDS_COUNT_OFFSET + 4
    HEADER_SIZE = RECORDS_OFFSET
    LOG_OVERHEAD = LENGTH_OFFSET + 4
    LEGACY_CRC_OFFSET = 12
    MIN_RECORD_SIZE = 7
    MAGIC_V2 = 2
    COMPRESSION_MASK = 0x07
    TIMESTAMP_TYPE_MASK = 0x08
    TRANSACTIONAL_MASK = 0x10
    CONTROL_MASK = 0x20
    DELETE_HORIZON_MASK = 0x40
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1
    # CRC work above this many bytes runs without the GIL.
    NOGIL_THRESHOLD = 64 * 1024

# Parse results of _parse_record (0 is success).
cdef enum:
    ERR_VARINT = 1
    ERR_LENGTH = 2
    ERR_DELTA = 3
    ERR_KEY = 4
    ERR_VALUE = 5
    ERR_HEADERS = 6
    ERR_TRAILING = 7

cdef dict _ERRORS = {
    ERR_VARINT: "a malformed or truncated varint",
    ERR_LENGTH: "a record length that overruns the batch",
    ERR_DELTA: "an offset delta out of order or past the last offset delta",
    ERR_KEY: "a key length that overruns its record",
    ERR_VALUE: "a value length that overruns its record",
    ERR_HEADERS: "a malformed header",
    ERR_TRAILING: "bytes beyond its fields",
}

DEFAULT_BATCH_SIZE = 1048588
cdef int64_t INT32_MAX = 2147483647


# -- byte helpers -----------------------------------------------------------

cdef inline int64_t _i64(const uint8_t *p) noexcept nogil:
    return <int64_t>((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40)
                     | (<uint64_t>p[3] << 32) | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16)
                     | (<uint64_t>p[6] << 8) | <uint64_t>p[7])

cdef inline int32_t _i32(const uint8_t *p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])

cdef inline int16_t _i16(const uint8_t *p) noexcept nogil:
    return <int16_t>((<uint32_t>p[0] << 8) | <uint32_t>p[1])

cdef inline void _put64(uint8_t *p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    p[0] = <uint8_t>(u >> 56); p[1] = <uint8_t>(u >> 48); p[2] = <uint8_t>(u >> 40); p[3] = <uint8_t>(u >> 32)
    p[4] = <uint8_t>(u >> 24); p[5] = <uint8_t>(u >> 16); p[6] = <uint8_t>(u >> 8); p[7] = <uint8_t>u

cdef inline void _put32(uint8_t *p, int64_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = <uint8_t>(u >> 24); p[1] = <uint8_t>(u >> 16); p[2] = <uint8_t>(u >> 8); p[3] = <uint8_t>u

cdef inline void _put16(uint8_t *p, int64_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = <uint8_t>(u >> 8); p[1] = <uint8_t>u


cdef inline bint _varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out,
                         int max_bytes) noexcept nogil:
    """Decode the zigzag varint at pos[0] that must end before ``end``; False if it cannot."""
    cdef Py_ssize_t p = pos[0]
    cdef uint64_t result, b
    cdef int shift = 7
    if p >= end:
        return False
    b = buf[p]
    p += 1
    if b < 0x80:
        pos[0] = p
        out[0] = <int64_t>(b >> 1) ^ -<int64_t>(b & 1)
        return True
    if p < end and buf[p] < 0x80:
        # Two bytes: lengths of 64 to 8191 bytes, the common value size.
        result = (b & 0x7F) | (<uint64_t>buf[p] << 7)
        pos[0] = p + 1
        out[0] = <int64_t>(result >> 1) ^ -<int64_t>(result & 1)
        return True
    result = b & 0x7F
    while True:
        if p >= end or shift >= 7 * max_bytes:
            return False
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    if max_bytes == 5 and result > <uint64_t>0xFFFFFFFFu:
        return False
    pos[0] = p
    out[0] = <int64_t>(result >> 1) ^ -<int64_t>(result & 1)
    return True


cdef inline int _varint_size(int64_t value) noexcept nogil:
    cdef uint64_t v = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef int n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


cdef inline uint8_t *_write_varint(uint8_t *p, int64_t value) noexcept nogil:
    cdef uint64_t v = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    while v > 0x7F:
        p[0] = <uint8_t>((v & 0x7F) | 0x80)
        p += 1
        v >>= 7
    p[0] = <uint8_t>v
    return p + 1


cdef uint32_t _crc32c(const uint8_t *p, Py_ssize_t n) noexcept:
    cdef uint32_t crc
    if n >= NOGIL_THRESHOLD:
        with nogil:
            crc = pylogq_crc32c(0, p, <size_t>n)
        return crc
    return pylogq_crc32c(0, p, <size_t>n)


# -- one record -------------------------------------------------------------

cdef struct RecordFields:
    Py_ssize_t end
    int attributes
    int64_t timestamp_delta
    int64_t offset_delta
    Py_ssize_t key_pos
    int64_t key_len
    Py_ssize_t value_pos
    int64_t value_len
    Py_ssize_t headers_pos   # first header, after the count varint
    int64_t headers_count


cdef inline int _parse_record(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, int64_t prev_delta,
                       int64_t last_delta, RecordFields *f) noexcept nogil:
    """Parse and check the record at pos (its length varint first); 0 or an ERR_ code."""
    cdef int64_t length, n, i
    cdef Py_ssize_t rec_end
    if not _varint(buf, &pos, end, &length, 5):
        return ERR_VARINT
    if length < MIN_RECORD_SIZE - 1 or length > end - pos:
        return ERR_LENGTH
    rec_end = pos + length
    f.end = rec_end
    f.attributes = buf[pos]
    pos += 1
    if not _varint(buf, &pos, rec_end, &f.timestamp_delta, 10):
        return ERR_VARINT
    if not _varint(buf, &pos, rec_end, &f.offset_delta, 5):
        return ERR_VARINT
    if f.offset_delta <= prev_delta or f.offset_delta > last_delta:
        return ERR_DELTA
    if not _varint(buf, &pos, rec_end, &f.key_len, 5):
        return ERR_VARINT
    f.key_pos = pos
    if f.key_len >= 0:
        if f.key_len > rec_end - pos:
            return ERR_KEY
        pos += f.key_len
    elif f.key_len != -1:
        return ERR_KEY
    if not _varint(buf, &pos, rec_end, &f.value_len, 5):
        return ERR_VARINT
    f.value_pos = pos
    if f.value_len >= 0:
        if f.value_len > rec_end - pos:
            return ERR_VALUE
        pos += f.value_len
    elif f.value_len != -1:
        return ERR_VALUE
    if not _varint(buf, &pos, rec_end, &f.headers_count, 5):
        return ERR_VARINT
    f.headers_pos = pos
    if f.headers_count < 0 or f.headers_count > rec_end - pos:
        return ERR_HEADERS
    for i in range(f.headers_count):
        if not _varint(buf, &pos, rec_end, &n, 5) or n < 0 or n > rec_end - pos:
            return ERR_HEADERS
        pos += n
        if not _varint(buf, &pos, rec_end, &n, 5) or n < -1 or n > rec_end - pos:
            return ERR_HEADERS
        if n > 0:
            pos += n
    if pos != rec_end:
        return ERR_TRAILING
    return 0


cdef list _headers_list(const uint8_t *buf, Py_ssize_t pos, int64_t count):
    """The headers of an already checked record, as [(str, bytes | None)]."""
    cdef list out = []
    cdef int64_t klen, vlen
    cdef Py_ssize_t end = pos + (1 << 40)
    for _ in range(count):
        _varint(buf, &pos, end, &klen, 5)
        # Not UTF-8 is not corruption (Kafka decodes leniently): keep the bytes.
        hkey = (<char *>buf + pos)[:klen].decode("utf-8", "surrogateescape")
        pos += klen
        _varint(buf, &pos, end, &vlen, 5)
        if vlen < 0:
            out.append((hkey, None))
        else:
            out.append((hkey, PyBytes_FromStringAndSize(<char *>buf + pos, vlen)))
            pos += vlen
    return out


def decode_headers(data, Py_ssize_t position, Py_ssize_t count):
    """Decode ``count`` headers starting at ``position`` (the columnar headers column)."""
    cdef Py_buffer view
    cdef Py_ssize_t pos = position, end
    cdef int64_t n
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        end = view.len
        if pos < 0 or pos > end:
            raise InvalidArgumentError("position %d is outside the data of %d bytes" % (position, end))
        # Check the structure before building objects from it.
        for _ in range(count):
            if not _varint(<uint8_t *>view.buf, &pos, end, &n, 5) or n < 0 or n > end - pos:
                _corrupt("header key at byte %d overruns the data" % pos, _BAD_RECORD)
            pos += n
            if not _varint(<uint8_t *>view.buf, &pos, end, &n, 5) or n < -1 or n > end - pos:
                _corrupt("header value at byte %d overruns the data" % pos, _BAD_RECORD)
            if n > 0:
                pos += n
        return _headers_list(<uint8_t *>view.buf, position, count)
    finally:
        PyBuffer_Release(&view)


@cython.freelist(1024)
cdef class Record:
    """One record of a v2 batch, with its absolute offset and timestamp.

    ``headers`` is a list of ``(str, bytes | None)``; for a control record
    (``is_control``) ``control_type`` is 0 (abort) or 1 (commit).
    """

    def __init__(self, int64_t offset, int64_t timestamp, int timestamp_type, key, value, headers,
                 int attributes=0, bint is_control=False):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self._headers = list(headers) if headers else None
        self.attributes = attributes
        self.is_control = is_control

    @property
    def headers(self):
        if self._headers is None:
            self._headers = []
        return self._headers

    @property
    def control_type(self):
        """0 for an abort marker, 1 for a commit; -1 when not a control record."""
        if not self.is_control or self.key is None or len(self.key) < 4:
            return -1
        return _i16(<const uint8_t *>PyBytes_AS_STRING(self.key) + 2)

    def __eq__(self, other):
        if type(other).__name__ != "Record":
            return NotImplemented
        return (self.offset == other.offset and self.timestamp == other.timestamp
                and self.timestamp_type == other.timestamp_type and self.key == other.key
                and self.value == other.value and list(self.headers) == list(other.headers))

    __hash__ = None

    def __repr__(self):
        return "Record(offset=%r, timestamp=%r, timestamp_type=%r, key=%r, value=%r, headers=%r)" % (
            self.offset, self.timestamp, self.timestamp_type, self.key, self.value, self.headers)


# -- one batch --------------------------------------------------------------

cdef object _codecs_module = None

cdef object _codecs():
    # The codec glue (third-party compression libraries) is pure Python; it is
    # imported on first use so a batch without compression never needs it.
    global _codecs_module
    if _codecs_module is None:
        from pylogq.records import codecs
        _codecs_module = codecs
    return _codecs_module


cdef class RecordBatch:
    """A read-only view of one v2 batch in a buffer (header fields and records).

    The header is checked on construction (magic, length inside the buffer).
    Iterating checks the CRC first (unless ``check_crc=False``) and then every
    record's structure; a bad byte raises CorruptRecordError. The view keeps
    the buffer exported while it lives (a bytearray under it cannot resize).
    """

    def __cinit__(self, buffer, Py_ssize_t position=0, bint check_crc=True):
        PyObject_GetBuffer(buffer, &self._view, PyBUF_SIMPLE)
        self._has_view = True
        cdef const uint8_t *p = <const uint8_t *>self._view.buf
        cdef Py_ssize_t n = self._view.len
        if position < 0 or position > n:
            raise InvalidArgumentError("position %d is outside the buffer of %d bytes" % (position, n))
        if n - position < HEADER_SIZE:
            _corrupt("record batch at byte %d has %d bytes, fewer than the %d-byte header"
                     % (position, n - position, HEADER_SIZE), _BAD_LENGTH)
        p += position
        self.position = position
        self.batch_length = _i32(p + LENGTH_OFFSET)
        self.magic = p[MAGIC_OFFSET]
        if self.magic != MAGIC_V2:
            _corrupt("record batch at byte %d has magic %d, expected 2" % (position, self.magic), _BAD_MAGIC)
        if self.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            _corrupt("record batch at byte %d claims length %d, below the header size"
                     % (position, self.batch_length), _BAD_LENGTH)
        if self.batch_length > n - position - LOG_OVERHEAD:
            _corrupt("record batch at byte %d claims length %d but only %d bytes follow"
                     % (position, self.batch_length, n - position - LOG_OVERHEAD), _BAD_LENGTH)
        self.end = position + LOG_OVERHEAD + self.batch_length
        self.base_offset = _i64(p)
        self.partition_leader_epoch = _i32(p + PARTITION_LEADER_EPOCH_OFFSET)
        self.crc = <uint32_t>_i32(p + CRC_OFFSET)
        self.attributes = <uint16_t>_i16(p + ATTRIBUTES_OFFSET)
        self.last_offset_delta = _i32(p + LAST_OFFSET_DELTA_OFFSET)
        self.base_timestamp = _i64(p + BASE_TIMESTAMP_OFFSET)
        self.max_timestamp = _i64(p + MAX_TIMESTAMP_OFFSET)
        self.producer_id = _i64(p + PRODUCER_ID_OFFSET)
        self.producer_epoch = _i16(p + PRODUCER_EPOCH_OFFSET)
        self.base_sequence = _i32(p + BASE_SEQUENCE_OFFSET)
        self.records_count = _i32(p + RECORDS_COUNT_OFFSET)
        self.check_crc = check_crc

    def __dealloc__(self):
        if self._has_view:
            PyBuffer_Release(&self._view)

    @property
    def size_in_bytes(self):
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression_type(self):
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self):
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self):
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control_batch(self):
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self):
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_offset(self):
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self):
        return self.base_offset + self.last_offset_delta + 1

    @property
    def first_timestamp(self):
        return self.base_timestamp

    @property
    def last_sequence(self):
        if self.base_sequence == -1:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (INT32_MAX + 1)

    def validate_crc(self):
        """True when the stored CRC matches the bytes it covers."""
        cdef const uint8_t *p = <const uint8_t *>self._view.buf
        return _crc32c(p + self.position + ATTRIBUTES_OFFSET, self.end - self.position - ATTRIBUTES_OFFSET) == self.crc

    cdef object _section(self):
        """The records section: None when uncompressed (read in place), else decompressed bytes."""
        cdef int codec = self.attributes & COMPRESSION_MASK
        if codec == 0:
            return None
        if codec > 4:
            _corrupt("record batch at offset %d names compression codec %d, which does not exist"
                     % (self.base_offset, codec), _UNKNOWN_CODEC)
        raw = (<char *>self._view.buf + self.position + RECORDS_OFFSET)[:self.end - self.position - RECORDS_OFFSET]
        return _codecs().decompress(codec, raw)

    def __iter__(self):
        return iter(self.records())

    def records(self):
        """Every record of the batch, checked; raises CorruptRecordError on bad bytes."""
        if self.check_crc and not self.validate_crc():
            _corrupt("record batch at offset %d failed its CRC-32C check (stored 0x%08x)"
                     % (self.base_offset, self.crc), _BAD_CRC)
        section = self._section()
        cdef const uint8_t *buf
        cdef Py_ssize_t start, end
        if section is None:
            buf = <const uint8_t *>self._view.buf
            start = self.position + RECORDS_OFFSET
            end = self.end
        else:
            buf = <const uint8_t *>PyBytes_AS_STRING(section)
            start = 0
            end = PyBytes_GET_SIZE(section)
        return _decode_records(self, buf, start, end)

    def validate(self):
        """Check CRC, sizes, count and every record's structure; -> record count."""
        return len(self.records())

    def __repr__(self):
        return "RecordBatch(base_offset=%d, last_offset_delta=%d, records_count=%d, attributes=0x%x, size=%d)" % (
            self.base_offset, self.last_offset_delta, self.records_count, self.attributes, self.size_in_bytes)


cdef _check_count(int64_t base_offset, int64_t count, Py_ssize_t section_bytes):
    if count < 0 or count * MIN_RECORD_SIZE > section_bytes:
        _corrupt("record batch at offset %d claims %d records in %d bytes"
                 % (base_offset, count, section_bytes), _BAD_RECORD_COUNT)


cdef _record_error(int code, int64_t base_offset, Py_ssize_t pos):
    _corrupt("record at byte %d of the batch at offset %d has %s"
             % (pos, base_offset, _ERRORS.get(code, "a structural error")), _BAD_RECORD)


cdef list _decode_records(RecordBatch batch, const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end):
    cdef int64_t count = batch.records_count
    cdef int64_t base_offset = batch.base_offset
    cdef int64_t base_ts = batch.base_timestamp
    cdef int64_t prev = -1
    cdef int ts_type = LOG_APPEND_TIME if batch.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME
    cdef bint is_control = batch.attributes & CONTROL_MASK
    cdef RecordFields f
    cdef int rc
    cdef Record rec
    cdef list out
    _check_count(base_offset, count, end - pos)
    out = [None] * count
    for i in range(count):
        rc = _parse_record(buf, pos, end, prev, batch.last_offset_delta, &f)
        if rc:
            _record_error(rc, base_offset, pos)
        prev = f.offset_delta
        rec = Record.__new__(Record)
        rec.offset = base_offset + f.offset_delta
        rec.timestamp = batch.max_timestamp if ts_type == LOG_APPEND_TIME else base_ts + f.timestamp_delta
        rec.timestamp_type = ts_type
        rec.attributes = f.attributes
        rec.is_control = is_control
        if f.key_len >= 0:
            rec.key = PyBytes_FromStringAndSize(<char *>buf + f.key_pos, f.key_len)
        else:
            rec.key = None
        if f.value_len >= 0:
            rec.value = PyBytes_FromStringAndSize(<char *>buf + f.value_pos, f.value_len)
        else:
            rec.value = None
        if f.headers_count:
            rec._headers = _headers_list(buf, f.headers_pos, f.headers_count)
        out[i] = rec
        pos = f.end
    if pos != end:
        _corrupt("record batch at offset %d has %d bytes after its %d records"
                 % (base_offset, end - pos, count), _BAD_RECORD_COUNT)
    return out


# -- building ---------------------------------------------------------------

cdef inline bint _bytes_like(object obj, const uint8_t **data, Py_ssize_t *size, Py_buffer *view,
                             bint *release, str what) except -1:
    """Point data/size at a bytes-like object's contents; -1 length for None."""
    if obj is None:
        size[0] = -1
        return True
    if type(obj) is bytes:
        data[0] = <const uint8_t *>PyBytes_AS_STRING(obj)
        size[0] = PyBytes_GET_SIZE(obj)
        return True
    if isinstance(obj, (bytearray, memoryview)):
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
        release[0] = True
        data[0] = <const uint8_t *>view.buf
        size[0] = view.len
        return True
    raise InvalidArgumentTypeError("%s must be bytes, bytearray or memoryview, not %s" % (what, type(obj).__name__))


cdef class RecordBatchBuilder:
    """Builds one v2 record batch, record by record.

    ``append`` takes the offset delta (0, 1, ... for a producer), the timestamp
    in ms (None: now), key, value and headers, and returns the record's encoded
    size, or 0 when the record would take the batch past ``batch_size`` (the
    first record always fits). ``build()`` compresses, writes the header and
    CRC, and returns the batch as a bytearray; the builder is then spent.
    Not thread-safe.
    """

    def __init__(self, compression_type=0, *, int64_t base_offset=0, int32_t partition_leader_epoch=0,
                 int64_t producer_id=-1, int producer_epoch=-1, int32_t base_sequence=-1,
                 bint is_transactional=False, bint is_control=False, int timestamp_type=CREATE_TIME,
                 Py_ssize_t batch_size=DEFAULT_BATCH_SIZE):
        self.compression_type = _codecs().codec_id(compression_type)
        if timestamp_type != CREATE_TIME and timestamp_type != LOG_APPEND_TIME:
            raise InvalidArgumentError("timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), not %r" % (timestamp_type,))
        if batch_size <= 0:
            raise InvalidArgumentError("batch_size must be positive, not %r" % (batch_size,))
        self.base_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.timestamp_type = timestamp_type
        self.batch_size = batch_size
        self._cap = min(batch_size + 64, 16384) if batch_size < (1 << 30) else 16384
        if self._cap < HEADER_SIZE + 64:
            self._cap = HEADER_SIZE + 64
        self._buf = PyByteArray_FromStringAndSize(NULL, self._cap)
        self._len = HEADER_SIZE
        self._count = 0
        self._last_delta = -1
        self._has_first = False
        self._max_ts = -1
        self.max_record_size = 0
        self._built = False

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t need = self._len + extra
        if need <= self._cap:
            return 0
        cdef Py_ssize_t cap = self._cap * 2
        if cap < need:
            cap = need
        PyByteArray_Resize(self._buf, cap)
        self._cap = cap
        return 0

    cdef Py_ssize_t _append(self, int64_t offset, object timestamp, object key, object value,
                            object headers) except -1:
        cdef int64_t ts, ts_delta
        cdef const uint8_t *kp = NULL
        cdef const uint8_t *vp = NULL
        cdef Py_ssize_t klen, vlen, body, total, hsize = 0
        cdef Py_buffer kview, vview
        cdef bint krel = False, vrel = False
        cdef uint8_t *p
        cdef list hparts = None
        if self._built:
            raise IllegalStateError("this batch was already built")
        if offset <= self._last_delta or offset > INT32_MAX:
            raise InvalidArgumentError("offset delta %d must be above the previous one (%d) and fit 32 bits"
                             % (offset, self._last_delta))
        if timestamp is None:
            ts = <int64_t>(time.time() * 1000)
        elif type(timestamp) is int:
            ts = timestamp
        else:
            raise InvalidArgumentTypeError("timestamp must be int milliseconds or None, not %s" % type(timestamp).__name__)
        try:
            _bytes_like(key, &kp, &klen, &kview, &krel, "key")
            _bytes_like(value, &vp, &vlen, &vview, &vrel, "value")
            if headers:
                hparts = _encode_headers(headers)
                hsize = len(<bytes>hparts[0])
            ts_delta = ts - (self._first_ts if self._has_first else ts)
            body = (1 + _varint_size(ts_delta) + _varint_size(offset)
                    + _varint_size(klen) + (klen if klen > 0 else 0)
                    + _varint_size(vlen) + (vlen if vlen > 0 else 0)
                    + (hsize if hparts is not None else 1))
            total = body + _varint_size(body)
            if self._count and self._len + total > self.batch_size:
                return 0
            self._reserve(total)
            p = <uint8_t *>PyByteArray_AS_STRING(self._buf) + self._len
            p = _write_varint(p, body)
            p[0] = 0
            p = _write_varint(p + 1, ts_delta)
            p = _write_varint(p, offset)
            p = _write_varint(p, klen)
            if klen > 0:
                memcpy(p, kp, klen)
                p += klen
            p = _write_varint(p, vlen)
            if vlen > 0:
                memcpy(p, vp, vlen)
                p += vlen
            if hparts is not None:
                memcpy(p, PyBytes_AS_STRING(hparts[0]), hsize)
            else:
                p[0] = 0
        finally:
            if krel:
                PyBuffer_Release(&kview)
            if vrel:
                PyBuffer_Release(&vview)
        self._len += total
        if total > self.max_record_size:
            self.max_record_size = total
        if not self._has_first:
            self._has_first = True
            self._first_ts = ts
        if ts > self._max_ts:
            self._max_ts = ts
        self._count += 1
        self._last_delta = offset
        return total

    def append(self, int64_t offset, timestamp, key, value, headers=None):
        return self._append(offset, timestamp, key, value, headers)

    def append_next(self, timestamp, key, value, headers=None):
        """Append at the next offset delta; -> that delta, or -1 when the record would pass ``batch_size``.

        The producer's append (Kafka's ``MemoryRecordsBuilder.append``): the
        delta is the record's index in the batch when every record came this way.
        """
        cdef int64_t delta = self._last_delta + 1
        if self._append(delta, timestamp, key, value, headers):
            return delta
        return -1

    def size(self):
        """Bytes written so far, header included (before compression)."""
        return self._len

    @property
    def record_count(self):
        return self._count

    def build(self):
        if self._built:
            raise IllegalStateError("this batch was already built")
        self._built = True
        cdef int attributes = self.compression_type
        cdef uint8_t *p
        cdef bytes compressed
        if self.timestamp_type == LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if self.is_control:
            attributes |= CONTROL_MASK
        if self.compression_type:
            compressed = _codecs().compress(
                self.compression_type, memoryview(self._buf)[HEADER_SIZE:self._len])
            self._len = HEADER_SIZE + len(compressed)
            PyByteArray_Resize(self._buf, self._len)
            memcpy(PyByteArray_AS_STRING(self._buf) + HEADER_SIZE, PyBytes_AS_STRING(compressed),
                   len(compressed))
        else:
            PyByteArray_Resize(self._buf, self._len)
        self._cap = self._len
        p = <uint8_t *>PyByteArray_AS_STRING(self._buf)
        _put64(p, self.base_offset)
        _put32(p + LENGTH_OFFSET, self._len - LOG_OVERHEAD)
        _put32(p + PARTITION_LEADER_EPOCH_OFFSET, self.partition_leader_epoch)
        p[MAGIC_OFFSET] = MAGIC_V2
        _put16(p + ATTRIBUTES_OFFSET, attributes)
        _put32(p + LAST_OFFSET_DELTA_OFFSET, self._last_delta if self._last_delta > 0 else 0)
        _put64(p + BASE_TIMESTAMP_OFFSET, self._first_ts if self._has_first else -1)
        _put64(p + MAX_TIMESTAMP_OFFSET, self._max_ts)
        _put64(p + PRODUCER_ID_OFFSET, self.producer_id)
        _put16(p + PRODUCER_EPOCH_OFFSET, self.producer_epoch)
        _put32(p + BASE_SEQUENCE_OFFSET, self.base_sequence)
        _put32(p + RECORDS_COUNT_OFFSET, self._count)
        _put32(p + CRC_OFFSET, _crc32c(p + ATTRIBUTES_OFFSET, self._len - ATTRIBUTES_OFFSET))
        return self._buf


cdef list _encode_headers(object headers):
    """[encoded bytes] of a record's headers section (count varint first)."""
    cdef bytearray out = bytearray()
    cdef uint8_t tmp[10]
    cdef uint8_t *end
    items = list(headers)
    end = _write_varint(tmp, len(items))
    out += (<char *>tmp)[:end - tmp]
    for h_key, h_value in items:
        if isinstance(h_key, str):
            h_key = h_key.encode("utf-8", "surrogateescape")
        elif not isinstance(h_key, (bytes, bytearray)):
            raise InvalidArgumentTypeError("header key must be str or bytes, not %s" % type(h_key).__name__)
        end = _write_varint(tmp, len(h_key))
        out += (<char *>tmp)[:end - tmp]
        out += h_key
        if h_value is None:
            out.append(1)
        else:
            if not isinstance(h_value, (bytes, bytearray, memoryview)):
                raise InvalidArgumentTypeError("header value must be bytes, bytearray or memoryview, not %s"
                                % type(h_value).__name__)
            end = _write_varint(tmp, len(h_value))
            out += (<char *>tmp)[:end - tmp]
            out += h_value
    return [bytes(out)]


def _is_ndarray(obj):
    """Whether ``obj`` is a numpy array, without loading numpy (an array means it is loaded)."""
    # (numpy half imported by another thread has no ndarray yet, and so no arrays)
    return isinstance(obj, getattr(sys.modules.get("numpy"), "ndarray", ()))


def build_batch(values, keys=None, timestamps=None, headers=None, compression_type=0, **kwargs):
    """Build one batch from sequences in one call (the bulk producer path).

    ``keys`` and ``headers`` are None or as long as ``values``; ``timestamps`` is
    None (now), one int for every record, or a sequence. The other keyword
    arguments are :class:`RecordBatchBuilder`'s; ``batch_size`` does not apply.
    """
    cdef Py_ssize_t n = len(values), i
    cdef RecordBatchBuilder builder
    cdef bint ts_seq = False
    if keys is not None and len(keys) != n:
        raise InvalidArgumentError("keys has %d items, values %d" % (len(keys), n))
    if headers is not None and len(headers) != n:
        raise InvalidArgumentError("headers has %d items, values %d" % (len(headers), n))
    if isinstance(timestamps, (list, tuple)) or _is_ndarray(timestamps):
        if len(timestamps) != n:
            raise InvalidArgumentError("timestamps has %d items, values %d" % (len(timestamps), n))
        ts_seq = True
    elif timestamps is None:
        timestamps = int(time.time() * 1000)
    kwargs["batch_size"] = INT32_MAX
    builder = RecordBatchBuilder(compression_type, **kwargs)
    values = list(values) if not isinstance(values, (list, tuple)) else values
    for i in range(n):
        builder._append(i, int(timestamps[i]) if ts_seq else timestamps,
                        None if keys is None else keys[i], values[i],
                        None if headers is None else headers[i])
    return builder.build()


# -- buffers of entries -----------------------------------------------------

cdef enum:
    FRAME_PARTIAL = 0

cdef Py_ssize_t _min_entry(int magic) noexcept nogil:
    if magic == 0:
        return 12 + 14
    if magic == 1:
        return 12 + 22
    return HEADER_SIZE


cdef Py_ssize_t _frame(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, bint check_crc,
                       int *magic_out) except -1:
    """Size of the whole entry at pos, 0 when partial; raises on a malformed entry."""
    cdef int64_t length
    cdef int magic
    cdef Py_ssize_t size
    cdef uint32_t stored, actual
    magic_out[0] = -1
    if end - pos < LOG_OVERHEAD + 5:
        return FRAME_PARTIAL
    length = _i32(buf + pos + LENGTH_OFFSET)
    magic = buf[pos + MAGIC_OFFSET]
    magic_out[0] = magic
    if magic > MAGIC_V2:
        _corrupt("entry at byte %d has unknown magic %d" % (pos, magic), _BAD_MAGIC)
    size = LOG_OVERHEAD + length
    if length < 0 or size < _min_entry(magic):
        _corrupt("entry at byte %d claims length %d, too small for magic %d" % (pos, length, magic), _BAD_LENGTH)
    if size > end - pos:
        return FRAME_PARTIAL
    if check_crc:
        if magic == MAGIC_V2:
            stored = <uint32_t>_i32(buf + pos + CRC_OFFSET)
            actual = _crc32c(buf + pos + ATTRIBUTES_OFFSET, size - ATTRIBUTES_OFFSET)
            if actual != stored:
                _corrupt("record batch at byte %d (offset %d) failed its CRC-32C check"
                         % (pos, _i64(buf + pos)), _BAD_CRC)
        else:
            stored = <uint32_t>_i32(buf + pos + LEGACY_CRC_OFFSET)
            with nogil:
                actual = pylogq_crc32(0, buf + pos + MAGIC_OFFSET, <size_t>(size - MAGIC_OFFSET))
            if actual != stored:
                _corrupt("message at byte %d (offset %d) failed its CRC-32 check"
                         % (pos, _i64(buf + pos)), _BAD_CRC)
    return size


def scan_entries(buffer, Py_ssize_t position=0, bint check_crc=True):
    """Walk whole entries from position: -> (valid bytes, entries, error or None, its kind or None).

    The walk stops at the end of the buffer, before a partial entry (error
    None), or before the first malformed entry (error names it, kind is its
    RecordProblem).
    """
    cdef Py_buffer view
    cdef Py_ssize_t pos = position, end, size
    cdef Py_ssize_t n = 0
    cdef int magic
    cdef const uint8_t *buf
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        buf = <const uint8_t *>view.buf
        end = view.len
        if position < 0 or position > end:
            raise InvalidArgumentError("position %d is outside the buffer of %d bytes" % (position, end))
        while pos < end:
            try:
                size = _frame(buf, pos, end, check_crc, &magic)
            except CorruptRecordError as exc:
                return pos - position, n, str(exc), exc.kind
            if size == FRAME_PARTIAL:
                break
            pos += size
            n += 1
        return pos - position, n, None, None
    finally:
        PyBuffer_Release(&view)


cdef int64_t _validate_v2(const uint8_t *buf, Py_ssize_t pos, bint producer, bint require_keys,
                          int64_t *keyless) except -1:
    """Check one whole v2 batch at pos (CRC, count, every record); -> its record count.

    With ``require_keys`` the offset delta of its first record without a key
    goes to ``keyless[0]`` (left alone when every record has one; control
    batches carry no application records and are not looked at).
    """
    cdef Py_ssize_t size = LOG_OVERHEAD + _i32(buf + pos + LENGTH_OFFSET)
    cdef int32_t count = _i32(buf + pos + RECORDS_COUNT_OFFSET)
    cdef int32_t last_delta = _i32(buf + pos + LAST_OFFSET_DELTA_OFFSET)
    cdef int attributes = _i16(buf + pos + ATTRIBUTES_OFFSET)
    cdef int codec = attributes & COMPRESSION_MASK
    cdef int64_t missing = -1
    cdef bint keys = require_keys and not attributes & CONTROL_MASK
    if producer and (count <= 0 or last_delta != count - 1):
        _invalid("record batch at byte %d has %d records but last offset delta %d"
                 % (pos, count, last_delta), _BAD_RECORD_COUNT)
    # With count == last delta + 1 (checked above for producers) and deltas
    # strictly increasing up to the last delta (checked by the parser), a
    # producer's deltas are exactly 0..count-1.
    if codec:
        if codec > 4:
            _corrupt("record batch at byte %d names compression codec %d, which does not exist"
                     % (pos, codec), _UNKNOWN_CODEC)
        _validate_compressed(buf, pos, size, codec, keys, &missing)
    else:
        _walk_section(buf, pos + RECORDS_OFFSET, pos + size, pos, _i64(buf + pos), count, last_delta, keys,
                      &missing)
    if missing >= 0:
        keyless[0] = missing
    return count


cdef int _walk_section(const uint8_t *sec, Py_ssize_t spos, Py_ssize_t send, Py_ssize_t pos, int64_t base_offset,
                       int32_t count, int32_t last_delta, bint keys, int64_t *missing) except -1:
    """Check every record of a records section held whole, ``sec[spos:send]`` (the batch is at byte ``pos``)."""
    cdef int64_t prev = -1
    cdef Py_ssize_t i
    cdef RecordFields f
    cdef int rc = 0
    _check_count(base_offset, count, send - spos)
    with nogil:
        for i in range(count):
            rc = _parse_record(sec, spos, send, prev, last_delta, &f)
            if rc:
                break
            if keys and f.key_len < 0 and missing[0] < 0:
                missing[0] = f.offset_delta
            prev = f.offset_delta
            spos = f.end
    if rc:
        _record_error(rc, base_offset, spos)
    if spos != send:
        _corrupt("record batch at byte %d has %d bytes after its %d records"
                 % (pos, send - spos, count), _BAD_RECORD_COUNT)
    return 0


cdef int _validate_compressed(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t size, int codec, bint keys,
                              int64_t *missing) except -1:
    """Check a compressed batch's records as they decompress (see the twin's ``_validate_compressed``).

    A section of up to ``codecs.STREAM_CHUNK`` bytes is decompressed whole
    and walked in place; a larger one is walked a chunk at a time as it
    decompresses (:func:`_walk_stream`), never held whole.
    """
    codecs = _codecs()
    cdef Py_ssize_t chunk = codecs.STREAM_CHUNK
    cdef bytes first
    cdef int64_t base_offset = _i64(buf + pos)
    cdef int32_t count = _i32(buf + pos + RECORDS_COUNT_OFFSET)
    cdef int32_t last_delta = _i32(buf + pos + LAST_OFFSET_DELTA_OFFSET)
    raw = (<char *>buf + pos + RECORDS_OFFSET)[:size - RECORDS_OFFSET]
    stream = codecs.DecompressStream(codec, raw, 2, codecs.MAX_DECOMPRESSED, "record batch at byte %d" % pos)
    try:
        first = stream.read(chunk)
        if PyBytes_GET_SIZE(first) < chunk or stream.at_end():
            return _walk_section(<const uint8_t *>PyBytes_AS_STRING(first), 0, PyBytes_GET_SIZE(first), pos,
                                 base_offset, count, last_delta, keys, missing)
        return _walk_stream(_SectionReader(stream, first, chunk), pos, base_offset, count, last_delta, keys,
                            codecs.DECOMPRESS_WINDOW, missing)
    finally:
        stream.close()


cdef class _SectionReader:
    """A batch's records section as it decompresses: the chunk being walked, the rest to come.

    ``buf[pos:]`` is decompressed and not walked; ``base`` is the section
    position of ``buf[0]`` (errors name section positions, as for a section
    held whole). A record crossing a chunk's end is gathered into a ``buf``
    of its own; the rest of the chunk it ends in waits in ``rest`` (from
    ``rest_pos``). The twin's ``_SectionReader``; not thread-safe.
    """

    def __cinit__(self, stream, bytes first, Py_ssize_t chunk):
        self.stream = stream
        self.buf = first
        self.pos = 0
        self.base = 0
        self.rest = b""
        self.rest_pos = 0
        self.chunk = chunk

    cdef int64_t at(self):
        return self.base + self.pos

    cdef bytes _next(self, Py_ssize_t *start):
        """The decompressed bytes that follow ``buf`` (from ``start[0]``); b"" at the end of the section."""
        cdef bytes chunk
        if self.rest_pos < PyBytes_GET_SIZE(self.rest):
            chunk = self.rest
            start[0] = self.rest_pos
            self.rest = b""
            self.rest_pos = 0
            return chunk
        start[0] = 0
        return self.stream.read1(self.chunk)

    cdef int ensure(self, Py_ssize_t n) except -1:
        """At least ``n`` bytes at ``buf[pos:]``: 1, or 0 when the section ends first."""
        cdef Py_ssize_t have = PyBytes_GET_SIZE(self.buf) - self.pos, start, take
        cdef int64_t at
        cdef bytes chunk
        if have >= n:
            return 1
        at = self.base + self.pos
        if have == 0:  # the next chunk, walked where it lies
            chunk = self._next(&start)
            self.buf = chunk
            self.pos = start
            self.base = at - start
            have = PyBytes_GET_SIZE(chunk) - start
            if have >= n or PyBytes_GET_SIZE(chunk) == 0:
                return 1 if have >= n else 0
        parts = [self.buf[self.pos:]]
        while have < n:
            chunk = self._next(&start)
            if PyBytes_GET_SIZE(chunk) == 0:
                break
            take = PyBytes_GET_SIZE(chunk) - start
            if take > n - have:
                take = n - have
            parts.append(chunk[start:start + take])
            have += take
            if start + take < PyBytes_GET_SIZE(chunk):
                self.rest = chunk
                self.rest_pos = start + take
        self.buf = b"".join(parts)
        self.pos = 0
        self.base = at
        return 1 if have >= n else 0

    cdef int skip(self, int64_t n) except -1:
        """Pass over ``n`` bytes without keeping them: 1, or 0 when the section ends first."""
        cdef Py_ssize_t have = PyBytes_GET_SIZE(self.buf) - self.pos, start
        cdef int64_t target
        cdef bytes chunk
        if have >= n:
            self.pos += n
            return 1
        target = self.base + self.pos + n
        n -= have
        while True:
            chunk = self._next(&start)
            if PyBytes_GET_SIZE(chunk) == 0:
                self.buf = b""
                self.pos = 0
                self.base = target - n
                return 0
            if PyBytes_GET_SIZE(chunk) - start >= n:
                self.buf = chunk
                self.pos = start + n
                self.base = target - self.pos
                return 1
            n -= PyBytes_GET_SIZE(chunk) - start

    cdef int64_t remaining(self) except -1:
        """Bytes from ``at`` to the end of the section (decompressed and dropped)."""
        cdef int64_t n = PyBytes_GET_SIZE(self.buf) - self.pos + PyBytes_GET_SIZE(self.rest) - self.rest_pos
        cdef bytes chunk
        self.rest = b""
        self.rest_pos = 0
        while True:
            chunk = self.stream.read1(self.chunk)
            if PyBytes_GET_SIZE(chunk) == 0:
                return n
            n += PyBytes_GET_SIZE(chunk)


cdef int _walk_stream(_SectionReader r, Py_ssize_t batch_pos, int64_t base_offset, int32_t count,
                      int32_t last_delta, bint keys, Py_ssize_t window, int64_t *missing) except -1:
    """:func:`_parse_record`'s checks over a section read as it decompresses (the twin's ``_walk_stream``).

    The records whole in memory are parsed in one run without the GIL; one
    that is not (it crosses the end of what was decompressed) is gathered
    whole when it is up to ``window`` bytes and parsed the same way, and a
    larger one goes field by field (:func:`_parse_large`).
    """
    cdef int64_t prev = -1, length = 0, start, rest
    cdef int32_t i = 0
    cdef const uint8_t *p
    cdef Py_ssize_t pos, end, after, size
    cdef RecordFields f
    cdef int rc = 0
    while i < count:
        p = <const uint8_t *>PyBytes_AS_STRING(r.buf)
        pos = r.pos
        end = PyBytes_GET_SIZE(r.buf)
        with nogil:
            while i < count:
                rc = _parse_record(p, pos, end, prev, last_delta, &f)
                if rc:
                    break
                if keys and f.key_len < 0 and missing[0] < 0:
                    missing[0] = f.offset_delta
                prev = f.offset_delta
                pos = f.end
                i += 1
        r.pos = pos
        if i == count:
            break
        # The record at pos is not whole in memory, or it is bad: gather it and look again.
        start = r.at()
        r.ensure(5)
        p = <const uint8_t *>PyBytes_AS_STRING(r.buf)
        pos = r.pos
        after = pos
        if not _varint(p, &after, PyBytes_GET_SIZE(r.buf), &length, 5):
            _record_error(ERR_VARINT, base_offset, start)
        if length < MIN_RECORD_SIZE - 1:
            _record_error(ERR_LENGTH, base_offset, start)
        size = after - pos + length
        if size <= window:
            if not r.ensure(size):
                _record_error(ERR_LENGTH, base_offset, start)
            p = <const uint8_t *>PyBytes_AS_STRING(r.buf)
            rc = _parse_record(p, r.pos, r.pos + size, prev, last_delta, &f)
            if rc:
                _record_error(rc, base_offset, start)
            r.pos += size
        else:
            rc = _parse_large(r, after - pos, length, prev, last_delta, &f)
            if rc:
                _record_error(rc, base_offset, start)
        if keys and f.key_len < 0 and missing[0] < 0:
            missing[0] = f.offset_delta
        prev = f.offset_delta
        i += 1
    rest = r.remaining()
    if rest:
        _corrupt("record batch at byte %d has %d bytes after its %d records"
                 % (batch_pos, rest, count), _BAD_RECORD_COUNT)
    return 0


cdef int _large_varint(_SectionReader r, int64_t rec_end, int max_bytes, int64_t *out, int malformed) except -1:
    """The varint at the reader inside a record ending at ``rec_end``: 0, ``malformed``, or ERR_LENGTH
    when the section ends first."""
    cdef int64_t left = rec_end - r.at()
    cdef Py_ssize_t pos, end
    if not r.ensure(max_bytes if max_bytes < left else left):
        return ERR_LENGTH
    pos = r.pos
    end = PyBytes_GET_SIZE(r.buf)
    if end - pos > left:
        end = pos + left
    if not _varint(<const uint8_t *>PyBytes_AS_STRING(r.buf), &pos, end, out, max_bytes):
        return malformed
    r.pos = pos
    return 0


cdef int _parse_large(_SectionReader r, Py_ssize_t header, int64_t length, int64_t prev_delta, int64_t last_delta,
                      RecordFields *f) except -1:
    """:func:`_parse_record` for a record longer than the window, field by field, its key, value and
    header bytes skipped; 0 or an ERR_ code (ERR_LENGTH too where the section ends inside the record)."""
    cdef int64_t rec_end = r.at() + header + length
    cdef int64_t n, i
    cdef int rc
    r.pos += header
    if not r.ensure(1):
        return ERR_LENGTH
    f.attributes = (<const uint8_t *>PyBytes_AS_STRING(r.buf))[r.pos]
    r.pos += 1
    rc = _large_varint(r, rec_end, 10, &f.timestamp_delta, ERR_VARINT)
    if rc:
        return rc
    rc = _large_varint(r, rec_end, 5, &f.offset_delta, ERR_VARINT)
    if rc:
        return rc
    if f.offset_delta <= prev_delta or f.offset_delta > last_delta:
        return ERR_DELTA
    rc = _large_varint(r, rec_end, 5, &f.key_len, ERR_VARINT)
    if rc:
        return rc
    if f.key_len >= 0:
        if f.key_len > rec_end - r.at():
            return ERR_KEY
        if not r.skip(f.key_len):
            return ERR_LENGTH
    elif f.key_len != -1:
        return ERR_KEY
    rc = _large_varint(r, rec_end, 5, &f.value_len, ERR_VARINT)
    if rc:
        return rc
    if f.value_len >= 0:
        if f.value_len > rec_end - r.at():
            return ERR_VALUE
        if not r.skip(f.value_len):
            return ERR_LENGTH
    elif f.value_len != -1:
        return ERR_VALUE
    rc = _large_varint(r, rec_end, 5, &f.headers_count, ERR_VARINT)
    if rc:
        return rc
    if f.headers_count < 0 or f.headers_count > rec_end - r.at():
        return ERR_HEADERS
    for i in range(f.headers_count):
        rc = _large_varint(r, rec_end, 5, &n, ERR_HEADERS)
        if rc:
            return rc
        if n < 0 or n > rec_end - r.at():
            return ERR_HEADERS
        if not r.skip(n):
            return ERR_LENGTH
        rc = _large_varint(r, rec_end, 5, &n, ERR_HEADERS)
        if rc:
            return rc
        if n < -1 or n > rec_end - r.at():
            return ERR_HEADERS
        if n > 0 and not r.skip(n):
            return ERR_LENGTH
    if r.at() != rec_end:
        return ERR_TRAILING
    return 0


cdef tuple _header(const uint8_t *p, Py_ssize_t position, Py_ssize_t size):
    """The BatchHeader fields of the v2 batch whose first byte is ``p`` (61 bytes checked by the caller)."""
    cdef int64_t base = _i64(p)
    return (position, size, MAGIC_V2, base, base + _i32(p + LAST_OFFSET_DELTA_OFFSET),
            _i64(p + MAX_TIMESTAMP_OFFSET), _i32(p + RECORDS_COUNT_OFFSET), <uint16_t>_i16(p + ATTRIBUTES_OFFSET),
            _i64(p + PRODUCER_ID_OFFSET), _i16(p + PRODUCER_EPOCH_OFFSET), _i32(p + BASE_SEQUENCE_OFFSET))


cdef tuple _validate_batches(const uint8_t *buf, Py_ssize_t end, bint require_keys):
    """The one pass over a producer's buffer: see :func:`validate_batches`."""
    cdef Py_ssize_t pos = 0, size
    cdef int64_t records = 0, offsets = 0, keyless = -1, missing
    cdef int magic
    cdef list headers = []
    if end == 0:
        raise InvalidRecordError("produce buffer holds no record batch")
    while pos < end:
        if end - pos < HEADER_SIZE:
            _corrupt("produce buffer ends with %d bytes at byte %d, fewer than a batch header"
                     % (end - pos, pos), _BAD_LENGTH)
        size = _frame(buf, pos, end, True, &magic)
        if magic != MAGIC_V2:
            _corrupt("record batch at byte %d has magic %d, expected 2" % (pos, magic), _BAD_MAGIC)
        if size == FRAME_PARTIAL:
            _corrupt("record batch at byte %d claims length %d but only %d bytes follow"
                     % (pos, _i32(buf + pos + LENGTH_OFFSET), end - pos - LOG_OVERHEAD), _BAD_LENGTH)
        missing = -1
        records += _validate_v2(buf, pos, True, require_keys and keyless < 0, &missing)
        if missing >= 0:
            keyless = offsets + missing
        headers.append(_header(buf + pos, pos, size))
        offsets += _i32(buf + pos + LAST_OFFSET_DELTA_OFFSET) + 1
        pos += size
    return headers, records, keyless


def validate_batches(buffer, bint require_keys=False):
    """Check a producer's v2 batches whole, in one pass; -> (headers, records, keyless).

    See :func:`pylogq.records.validate_batches`. ``headers`` are BatchHeader
    fields (tuples) as the buffer says; ``keyless`` is the offset delta, from
    the buffer's first offset, of the first record without a key (-1: none,
    or not asked).
    """
    cdef Py_buffer view
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        return _validate_batches(<const uint8_t *>view.buf, view.len, require_keys)
    finally:
        PyBuffer_Release(&view)


cdef list _patch_offsets(uint8_t *buf, Py_ssize_t end, list headers, int64_t base_offset,
                         int32_t partition_leader_epoch, bint use_lat, int64_t lat):
    """Patch validated batches in place from their headers; -> the headers as written.

    Reads no record: each header's place is checked against the buffer (the
    batches lie end to end from byte 0 and fill it, each a whole v2 batch),
    so a stale or foreign header list raises instead of writing astray.
    """
    cdef Py_ssize_t pos = 0, size, i, n = len(headers)
    cdef int64_t next_offset = base_offset
    cdef list out = [None] * n
    # The checked sizes are kept here: the writes below go by them alone, whatever
    # happens to the list (or to the buffer's length fields) meanwhile.
    cdef Py_ssize_t *sizes = <Py_ssize_t *>PyMem_Malloc((n if n > 0 else 1) * sizeof(Py_ssize_t))
    if sizes == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            header = headers[i]
            if <Py_ssize_t>header[0] != pos:
                raise InvalidArgumentError("header %d is at byte %d, the batches lie end to end from 0 (expected %d)"
                                 % (i, header[0], pos))
            size = header[1]
            if (size < HEADER_SIZE or size > end - pos or buf[pos + MAGIC_OFFSET] != MAGIC_V2
                    or LOG_OVERHEAD + <Py_ssize_t>_i32(buf + pos + LENGTH_OFFSET) != size):
                raise InvalidArgumentError("header %d does not describe the v2 batch at byte %d of this buffer" % (i, pos))
            sizes[i] = size
            pos += size
        if pos != end:
            raise InvalidArgumentError("the headers cover %d of the buffer's %d bytes" % (pos, end))
        pos = 0
        for i in range(n):
            size = sizes[i]
            _put64(buf + pos, next_offset)
            _put32(buf + pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
            if use_lat:
                _put16(buf + pos + ATTRIBUTES_OFFSET, _i16(buf + pos + ATTRIBUTES_OFFSET) | TIMESTAMP_TYPE_MASK)
                _put64(buf + pos + MAX_TIMESTAMP_OFFSET, lat)
                _put32(buf + pos + CRC_OFFSET, _crc32c(buf + pos + ATTRIBUTES_OFFSET, size - ATTRIBUTES_OFFSET))
            out[i] = _header(buf + pos, pos, size)
            next_offset += _i32(buf + pos + LAST_OFFSET_DELTA_OFFSET) + 1
            pos += size
        return out
    finally:
        PyMem_Free(sizes)


cdef uint8_t *_writable(object buffer, Py_buffer *view, str caller) except NULL:
    try:
        PyObject_GetBuffer(buffer, view, PyBUF_WRITABLE)
    except BufferError:
        raise InvalidArgumentTypeError("%s needs a writable buffer (bytearray or writable memoryview)" % caller) from None
    return <uint8_t *>view.buf


def patch_offsets(buffer, headers, int64_t base_offset, int32_t partition_leader_epoch=0,
                  log_append_time=None):
    """Give batches that :func:`validate_batches` accepted their offsets, in place; -> headers as written.

    See :func:`pylogq.records.patch_offsets`.
    """
    cdef Py_buffer view
    cdef list checked = headers if type(headers) is list else list(headers)
    cdef uint8_t *buf = _writable(buffer, &view, "patch_offsets")
    try:
        return _patch_offsets(buf, view.len, checked, base_offset, partition_leader_epoch,
                              log_append_time is not None, log_append_time or 0)
    finally:
        PyBuffer_Release(&view)


def assign_offsets(buffer, int64_t base_offset, int32_t partition_leader_epoch=0, log_append_time=None):
    """Validate a producer's v2 batches and give them offsets; -> AppendResult's offset fields.

    Returns (first offset, last offset, records, batches, max timestamp,
    offset of max timestamp): :func:`validate_batches` then
    :func:`patch_offsets`. See :func:`pylogq.records.assign_offsets`.
    """
    cdef Py_buffer view
    cdef uint8_t *buf = _writable(buffer, &view, "assign_offsets")
    cdef int64_t max_ts = -1, max_ts_offset = -1, last = base_offset - 1
    try:
        headers, records, _ = _validate_batches(buf, view.len, False)
        for header in _patch_offsets(buf, view.len, headers, base_offset, partition_leader_epoch,
                                     log_append_time is not None, log_append_time or 0):
            last = header[4]
            if header[5] > max_ts:
                max_ts = header[5]
                max_ts_offset = last
        return base_offset, last, records, len(headers), max_ts, max_ts_offset
    finally:
        PyBuffer_Release(&view)


# -- columnar decode --------------------------------------------------------

COLUMN_NAMES = (
    "offsets", "timestamps", "timestamp_types", "key_start", "key_length",
    "value_start", "value_length", "headers_start", "headers_count",
)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _columns_of_section(
        const uint8_t *sec, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t shift,
        int64_t base_offset, int32_t count, int32_t last_delta, int64_t base_ts, int64_t max_ts,
        int ts_type, int64_t lo, int64_t hi, Py_ssize_t row,
        int64_t[::1] offsets, int64_t[::1] timestamps, int8_t[::1] ts_types,
        int64_t[::1] key_start, int32_t[::1] key_length, int64_t[::1] value_start,
        int32_t[::1] value_length, int64_t[::1] headers_start, int32_t[::1] headers_count) except -1:
    """Parse the records of one section into the columns from ``row``; -> the next row.

    ``shift`` maps a position in ``sec`` to a position in the output data
    buffer. The arrays were sized from the checked record counts, so ``row``
    stays in range (bounds checking is off).
    """
    cdef int64_t prev = -1, offset
    cdef RecordFields f
    cdef int rc = 0
    cdef Py_ssize_t i
    with nogil:
        for i in range(count):
            rc = _parse_record(sec, pos, end, prev, last_delta, &f)
            if rc:
                break
            prev = f.offset_delta
            pos = f.end
            offset = base_offset + f.offset_delta
            if offset < lo or offset >= hi:
                continue
            offsets[row] = offset
            timestamps[row] = max_ts if ts_type == LOG_APPEND_TIME else base_ts + f.timestamp_delta
            ts_types[row] = <int8_t>ts_type
            key_start[row] = f.key_pos + shift
            key_length[row] = <int32_t>f.key_len
            value_start[row] = f.value_pos + shift
            value_length[row] = <int32_t>f.value_len
            headers_start[row] = f.headers_pos + shift
            headers_count[row] = <int32_t>f.headers_count
            row += 1
    if rc:
        _record_error(rc, base_offset, pos)
    if pos != end:
        _corrupt("record batch at offset %d has %d bytes after its %d records"
                 % (base_offset, end - pos, count), _BAD_RECORD_COUNT)
    return row


def _new_columns(Py_ssize_t n):
    """The nine column arrays of n rows, carved from one allocation.

    One block instead of nine arrays: a large block is backed by huge pages
    (numpy advises the kernel to), so filling it costs a handful of page
    faults instead of one per 4 KB page, which dominated the decode.
    """
    cdef Py_ssize_t a = 8 * n, b = 4 * n
    import numpy as np  # loaded by the first decode: a broker starting up needs none of it

    block = np.empty(5 * a + 3 * b + n, np.uint8)
    return (block[0:a].view(np.int64), block[a:2 * a].view(np.int64), block[5 * a + 3 * b:].view(np.int8),
            block[2 * a:3 * a].view(np.int64), block[5 * a:5 * a + b].view(np.int32),
            block[3 * a:4 * a].view(np.int64), block[5 * a + b:5 * a + 2 * b].view(np.int32),
            block[4 * a:5 * a].view(np.int64), block[5 * a + 2 * b:5 * a + 3 * b].view(np.int32))


@cython.boundscheck(False)
@cython.wraparound(False)
def decode_columns(buffer, bint check_crc=True, bint skip_control=True, start_offset=None, end_offset=None):
    """Decode a buffer of batches into columns: -> (data, n, *columns in COLUMN_NAMES order).

    See :func:`pylogq.records.decode_columns`. ``data`` is the input buffer
    itself when every entry is an uncompressed v2 batch (no copy); otherwise a
    new buffer holding, entry after entry, each v2 batch's (decompressed)
    records section, or each v0/v1 record's key then value bytes.
    """
    cdef Py_buffer view
    cdef const uint8_t *buf
    cdef Py_ssize_t pos = 0, end, size, total = 0, row = 0, section_bytes
    cdef int magic, attributes
    cdef int32_t count
    cdef bint copy = False
    cdef list entries = []
    cdef list sections = []
    cdef Py_ssize_t shift
    cdef int64_t lo = INT64_MIN if start_offset is None else start_offset
    cdef int64_t hi = INT64_MAX if end_offset is None else end_offset
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        buf = <const uint8_t *>view.buf
        end = view.len
        # Pass 1: frame and check every entry, size the output.
        while pos < end:
            size = _frame(buf, pos, end, check_crc, &magic)
            if size == FRAME_PARTIAL:
                break
            if magic == MAGIC_V2:
                attributes = _i16(buf + pos + ATTRIBUTES_OFFSET)
                count = _i32(buf + pos + RECORDS_COUNT_OFFSET)
                if skip_control and attributes & CONTROL_MASK:
                    pass  # excluded: control batches carry no application records
                elif (_i64(buf + pos) + _i32(buf + pos + LAST_OFFSET_DELTA_OFFSET) < lo
                        or _i64(buf + pos) >= hi):
                    pass  # excluded: no offset in range
                elif attributes & COMPRESSION_MASK:
                    copy = True
                    if attributes & COMPRESSION_MASK > 4:
                        _corrupt("record batch at byte %d names compression codec %d, which does not exist"
                                 % (pos, attributes & COMPRESSION_MASK), _UNKNOWN_CODEC)
                    section = _codecs().decompress(attributes & COMPRESSION_MASK,
                                                   (<char *>buf + pos + RECORDS_OFFSET)[:size - RECORDS_OFFSET])
                    _check_count(_i64(buf + pos), count, len(section))
                    entries.append((pos, magic, section, count))
                    total += count
                else:
                    _check_count(_i64(buf + pos), count, size - RECORDS_OFFSET)
                    entries.append((pos, magic, None, count))
                    total += count
            else:
                copy = True
                from pylogq.records.legacy import iter_legacy_records
                recs = [r for r in iter_legacy_records((<char *>buf + pos)[:size], validate_crc=check_crc)
                        if lo <= r.offset < hi]
                entries.append((pos, magic, recs, len(recs)))
                total += len(recs)
            pos += size

        offsets, timestamps, ts_types, key_start, key_length, value_start, value_length, \
            headers_start, headers_count = _new_columns(total)
        cols = (offsets, timestamps, ts_types, key_start, key_length, value_start, value_length,
                headers_start, headers_count)

        if copy:
            data = bytearray()
        else:
            data = buffer
        # Pass 2: parse records into the columns.
        for pos, magic, section, count in entries:
            if magic == MAGIC_V2:
                size = LOG_OVERHEAD + _i32(buf + pos + LENGTH_OFFSET)
                if section is None:
                    if copy:
                        shift = len(data) - (pos + RECORDS_OFFSET)
                        data += (<char *>buf + pos + RECORDS_OFFSET)[:size - RECORDS_OFFSET]
                    else:
                        shift = 0
                    row = _columns_of_section(
                        buf, pos + RECORDS_OFFSET, pos + size, shift,
                        _i64(buf + pos), count, _i32(buf + pos + LAST_OFFSET_DELTA_OFFSET),
                        _i64(buf + pos + BASE_TIMESTAMP_OFFSET), _i64(buf + pos + MAX_TIMESTAMP_OFFSET),
                        LOG_APPEND_TIME if _i16(buf + pos + ATTRIBUTES_OFFSET) & TIMESTAMP_TYPE_MASK else CREATE_TIME,
                        lo, hi, row, offsets, timestamps, ts_types, key_start, key_length,
                        value_start, value_length, headers_start, headers_count)
                else:
                    shift = len(data)
                    data += section
                    row = _columns_of_section(
                        <const uint8_t *>PyBytes_AS_STRING(section), 0, len(section), shift,
                        _i64(buf + pos), count, _i32(buf + pos + LAST_OFFSET_DELTA_OFFSET),
                        _i64(buf + pos + BASE_TIMESTAMP_OFFSET), _i64(buf + pos + MAX_TIMESTAMP_OFFSET),
                        LOG_APPEND_TIME if _i16(buf + pos + ATTRIBUTES_OFFSET) & TIMESTAMP_TYPE_MASK else CREATE_TIME,
                        lo, hi, row, offsets, timestamps, ts_types, key_start, key_length,
                        value_start, value_length, headers_start, headers_count)
            else:
                for rec in section:
                    offsets[row] = rec.offset
                    timestamps[row] = rec.timestamp
                    ts_types[row] = rec.timestamp_type
                    key_start[row] = len(data)
                    if rec.key is None:
                        key_length[row] = -1
                    else:
                        data += rec.key
                        key_length[row] = len(rec.key)
                    value_start[row] = len(data)
                    if rec.value is None:
                        value_length[row] = -1
                    else:
                        data += rec.value
                        value_length[row] = len(rec.value)
                    headers_start[row] = len(data)
                    headers_count[row] = 0
                    row += 1
        if row != total:
            cols = tuple([c[:row] for c in cols])
        return (data, row) + cols
    finally:
        PyBuffer_Release(&view)
