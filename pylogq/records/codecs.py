"""Compression codecs of Kafka record batches and message sets.

Attribute bits 0-2 of a batch (v2) or wrapper message (v0/v1) name the codec:
0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. The libraries are the well-kept
bindings (``zlib``/``gzip``, ``python-snappy``, ``lz4``, ``zstandard``); this
module adds the framing quirks that real Kafka clients put on the wire:

* snappy: the Java client wraps blocks in xerial's stream framing
  (``\\x82SNAPPY\\x00`` magic, two big-endian int32 versions, then
  ``[int32 length][raw snappy block]`` repeated). Both raw and xerial-framed
  payloads are read; payloads are written xerial-framed, as the Java client does.
* lz4: the LZ4 frame format. Kafka 0.8-0.9 computed the frame header checksum
  over the magic number as well as the descriptor (KAFKA-3160); magic v0
  messages carry that broken checksum, so it is repaired before decoding and
  reproduced when writing v0.
* zstd: a standard zstd frame; the decoder does not require the content size
  in the header (librdkafka streams frames without it).

Two ways to decompress. :func:`decompress` returns a payload whole (readers: a
consumer, the columnar decoder, a tool). :class:`DecompressStream` hands it
out in bounded steps, for the broker's validation of what producers send: a
payload can stand for up to about 1,000 times its size (gzip) or far more
(zstd), so the broker never holds more than :data:`DECOMPRESS_WINDOW` of one
at once, and at most :data:`MAX_LARGE_STREAMS` streams go past that window at
the same time (docs/operations.md, "Compressed batches").
"""

from __future__ import annotations

import struct
import threading
import zlib
from typing import Any, Callable, Dict, Optional, Union

from ..errors import CorruptRecordError, MessageTooLargeError, RecordProblem, UnsupportedCodecError

__all__ = [
    "NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD", "CODEC_MASK", "NAMES", "BY_NAME", "MAX_DECOMPRESSED",
    "DECOMPRESS_WINDOW", "STREAM_CHUNK", "MAX_LARGE_STREAMS", "ZSTD_MAX_WINDOW",
    "codec_id", "gzip_encode", "gzip_decode", "snappy_encode", "snappy_decode", "lz4_encode",
    "lz4_decode", "lz4_encode_v0", "lz4_decode_v0", "zstd_encode", "zstd_decode", "compress",
    "decompress", "DecompressStream"
]

Buffer = Union[bytes, bytearray, memoryview]

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_MASK = 0x07

NAMES: Dict[int, str] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME: Dict[str, int] = {v: k for k, v in NAMES.items()}
BY_NAME["uncompressed"] = NONE

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024  # the xerial library's default block size

# The most bytes one payload may decompress to: a guard against a small
# payload that inflates to exhaust memory (a "decompression bomb"). Record
# sections are far smaller in practice (Kafka's default max.message.bytes is
# about 1 MB, and producers rarely compress more than 100:1). For a stream it
# bounds the work (CPU) one batch may cost; its memory is bounded by the window.
MAX_DECOMPRESSED = 1 << 30

#: The most decompressed bytes of one payload validation holds at once. A
#: records section is walked as it decompresses, STREAM_CHUNK at a time: a
#: record up to this size that crosses a chunk's end is gathered whole, a
#: longer one is checked field by field with its key, value and header bytes
#: skipped instead of kept. One snappy block, and the inner message set of one
#: v0/v1 wrapper, must fit in it (neither can be read in parts). A stream that
#: produces more than this in all needs one of MAX_LARGE_STREAMS turns.
DECOMPRESS_WINDOW = 8 << 20
#: Bytes a stream decompresses per step. A section up to this size is
#: decompressed whole and walked in place. Kept below the sizes the allocator
#: serves with fresh pages (each a page fault), chunks reuse warm memory:
#: walking a 1 MB section in chunks is faster than decompressing it whole.
STREAM_CHUNK = 256 << 10
#: Streams past the window at once in this process; more wait for a turn. Each
#: holds up to a window, a chunk and its codec's state (a zstd frame's window,
#: up to ZSTD_MAX_WINDOW), so this bounds the memory and the CPU that
#: decompression bombs can take, however many arrive.
MAX_LARGE_STREAMS = 2
#: The largest window a zstd frame may ask for: zstd's own default limit (and Kafka's).
ZSTD_MAX_WINDOW = 1 << 27


def codec_id(codec: Union[int, str, None]) -> int:
    """The attribute value for a codec given by id or Kafka's name ('lz4', ...)."""
    if codec is None:
        return NONE
    if isinstance(codec, str):
        try:
            return BY_NAME[codec.lower()]
        except KeyError:
            raise UnsupportedCodecError(
                "unknown compression type %r (expected one of %s)"
                % (codec, ", ".join(sorted(BY_NAME)))
            ) from None
    if codec not in NAMES:
        raise UnsupportedCodecError("unknown compression codec id %r" % (codec,))
    return codec


# -- gzip ------------------------------------------------------------------


def gzip_encode(data: Buffer) -> bytes:
    import gzip  # at the first gzip batch: a broker that never sees one never loads it

    # mtime=0 keeps the output deterministic, as the Java client's GZIPOutputStream.
    return gzip.compress(bytes(data), compresslevel=6, mtime=0)


def _too_large(codec: str, limit: int) -> CorruptRecordError:
    return CorruptRecordError("%s payload decompresses to more than %d bytes" % (codec, limit),
    kind=RecordProblem.TOO_LARGE_DECOMPRESSED)


def gzip_decode(data: Buffer, max_size: int = MAX_DECOMPRESSED) -> bytes:
    # wbits 47 accepts gzip or zlib headers; concatenated members are read whole.
    out = []
    total = 0
    buf = bytes(data)
    while buf:
        d = zlib.decompressobj(47)
        chunk = d.decompress(buf, max_size - total + 1)
        total += len(chunk)
        out.append(chunk)
        if total > max_size or d.unconsumed_tail:
            raise _too_large("gzip", max_size)
        if not d.eof:
            raise CorruptRecordError("gzip payload is truncated", kind=RecordProblem.BAD_COMPRESSED_DATA)
        buf = d.unused_data
    return b"".join(out)


# -- snappy ----------------------------------------------------------------


def _snappy():
    try:
        import snappy
    except ImportError:  # pragma: no cover - a declared dependency
        raise UnsupportedCodecError("snappy needs the python-snappy package") from None
    return snappy


def snappy_encode(data: Buffer, xerial: bool = True) -> bytes:
    """Snappy-compress; xerial-framed (as Java clients write) unless xerial=False."""
    snappy = _snappy()
    if not xerial:
        return snappy.compress(bytes(data))
    out = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = snappy.compress(bytes(view[start : start + _XERIAL_BLOCK]))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_raw_length(block: bytes) -> int:
    """The uncompressed length a raw snappy block declares (its varint preamble)."""
    result = shift = 0
    for b in block[:5]:
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result
        shift += 7
    raise CorruptRecordError("snappy block has a malformed length preamble", kind=RecordProblem.BAD_COMPRESSED_DATA)


def snappy_decode(data: Buffer, max_size: int = MAX_DECOMPRESSED) -> bytes:
    """Decompress raw snappy or a xerial-framed stream of snappy blocks."""
    snappy = _snappy()
    buf = bytes(data)
    total = 0
    if len(buf) >= 16 and buf[:8] == _XERIAL_MAGIC:
        out = []
        pos = 16
        while pos < len(buf):
            if pos + 4 > len(buf):
                raise CorruptRecordError("xerial snappy block length is truncated",
                                         kind=RecordProblem.BAD_COMPRESSED_DATA)
            (n,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            if n < 0 or pos + n > len(buf):
                raise CorruptRecordError(
                    "xerial snappy block of %d bytes overruns the payload" % n, kind=RecordProblem.BAD_COMPRESSED_DATA
                )
            block = buf[pos : pos + n]
            total += _snappy_raw_length(block)
            if total > max_size:
                raise _too_large("snappy", max_size)
            out.append(snappy.decompress(block))
            pos += n
        return b"".join(out)
    if _snappy_raw_length(buf) > max_size:
        raise _too_large("snappy", max_size)
    return snappy.decompress(buf)


# -- lz4 -------------------------------------------------------------------

_PRIME32_1 = 2654435761
_PRIME32_2 = 2246822519
_PRIME32_3 = 3266489917
_PRIME32_4 = 668265263
_PRIME32_5 = 374761393
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32_short(data: bytes) -> int:
    """xxHash32 with seed 0 of fewer than 16 bytes (an LZ4 frame descriptor)."""
    assert len(data) < 16
    h = (_PRIME32_5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        (k,) = struct.unpack_from("<I", data, pos)
        h = (_rotl32((h + k * _PRIME32_3) & _M32, 17) * _PRIME32_4) & _M32
        pos += 4
    while pos < len(data):
        h = (_rotl32((h + data[pos] * _PRIME32_5) & _M32, 11) * _PRIME32_1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _PRIME32_2) & _M32
    h ^= h >> 13
    h = (h * _PRIME32_3) & _M32
    h ^= h >> 16
    return h


def _lz4_header_size(frame: bytes) -> int:
    if len(frame) < 7:
        raise CorruptRecordError("lz4 frame of %d bytes is shorter than its header" % len(frame),
                                 kind=RecordProblem.BAD_COMPRESSED_DATA)
    return 15 if frame[4] & 0x08 else 7


def _lz4_frame():
    try:
        import lz4.frame
    except ImportError:  # pragma: no cover - a declared dependency
        raise UnsupportedCodecError("lz4 needs the lz4 package") from None
    return lz4.frame


def lz4_encode(data: Buffer) -> bytes:
    # 64 KB independent blocks with no content size, as the Java client writes.
    return _lz4_frame().compress(
        bytes(data),
        block_size=_lz4_frame().BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )


def lz4_decode(data: Buffer, max_size: int = MAX_DECOMPRESSED) -> bytes:
    decompressor = _lz4_frame().LZ4FrameDecompressor()
    try:
        out = decompressor.decompress(bytes(data), max_length=max_size + 1)
    except RuntimeError as exc:
        raise CorruptRecordError("lz4 frame does not decode: %s" % exc,
                                 kind=RecordProblem.BAD_COMPRESSED_DATA) from None
    if len(out) > max_size:
        raise _too_large("lz4", max_size)
    if not decompressor.eof:
        raise CorruptRecordError("lz4 frame is truncated", kind=RecordProblem.BAD_COMPRESSED_DATA)
    return out


def lz4_encode_v0(data: Buffer) -> bytes:
    """An LZ4 frame with Kafka 0.8's header checksum (hashed over the magic too)."""
    frame = bytearray(lz4_encode(data))
    hs = _lz4_header_size(bytes(frame[:15]))
    frame[hs - 1] = (_xxh32_short(bytes(frame[: hs - 1])) >> 8) & 0xFF
    return bytes(frame)


def lz4_decode_v0(data: Buffer, max_size: int = MAX_DECOMPRESSED) -> bytes:
    """Decode a v0 message's LZ4 frame, whose header checksum may be Kafka 0.8's."""
    frame = bytearray(data)
    hs = _lz4_header_size(bytes(frame[:15]))
    frame[hs - 1] = (_xxh32_short(bytes(frame[4 : hs - 1])) >> 8) & 0xFF
    return lz4_decode(frame, max_size)


# -- zstd ------------------------------------------------------------------


def _zstd():
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a declared dependency
        raise UnsupportedCodecError("zstd needs the zstandard package") from None
    return zstandard


# zstandard's (de)compressor objects must not be used by two threads at once
# (their contexts are not thread-safe): each thread gets its own, reused.
_zstd_local = threading.local()


def zstd_encode(data: Buffer) -> bytes:
    compressor = getattr(_zstd_local, "compressor", None)
    if compressor is None:
        compressor = _zstd_local.compressor = _zstd().ZstdCompressor(level=3)
    return compressor.compress(bytes(data))


def zstd_decode(data: Buffer, max_size: int = MAX_DECOMPRESSED) -> bytes:
    """Decode one or more zstd frames, with or without a declared content size."""
    zstandard = _zstd()
    decompressor = getattr(_zstd_local, "decompressor", None)
    if decompressor is None:
        decompressor = _zstd_local.decompressor = zstandard.ZstdDecompressor()
    buf = memoryview(bytes(data))
    parts = []
    total = 0
    try:
        while buf:
            frame = decompressor.decompressobj()
            pos = 0
            while pos < len(buf) and not frame.eof:
                # One zstd byte can stand for at most ~32 KB of output, so feeding
                # remaining/32K bytes at a time keeps a bomb within the limit.
                step = max(4096, (max_size - total) >> 15)
                chunk = frame.decompress(buf[pos : pos + step])
                pos += step
                total += len(chunk)
                parts.append(chunk)
                if total > max_size:
                    raise _too_large("zstd", max_size)
            if not frame.eof:
                raise CorruptRecordError("zstd frame is truncated", kind=RecordProblem.BAD_COMPRESSED_DATA)
            buf = memoryview(frame.unused_data + bytes(buf[pos:]))
    except zstandard.ZstdError as exc:
        raise CorruptRecordError("zstd frame does not decode: %s" % exc,
                                 kind=RecordProblem.BAD_COMPRESSED_DATA) from None
    return b"".join(parts)


# -- dispatch --------------------------------------------------------------

_ENCODERS: Dict[int, Callable[[Buffer], bytes]] = {
    GZIP: gzip_encode,
    SNAPPY: snappy_encode,
    LZ4: lz4_encode,
    ZSTD: zstd_encode,
}
_DECODERS: Dict[int, Callable[[Buffer, int], bytes]] = {
    GZIP: gzip_decode,
    SNAPPY: snappy_decode,
    LZ4: lz4_decode,
    ZSTD: zstd_decode,
}


def compress(codec: int, data: Buffer, magic: int = 2) -> bytes:
    """Compress a record section with the codec named by attribute bits 0-2."""
    if codec == NONE:
        return bytes(data)
    if codec == LZ4 and magic == 0:
        return lz4_encode_v0(data)
    try:
        return _ENCODERS[codec](data)
    except KeyError:
        raise UnsupportedCodecError("unknown compression codec id %r" % (codec,)) from None


def decompress(codec: int, data: Buffer, magic: int = 2, max_size: int = MAX_DECOMPRESSED) -> bytes:
    """Decompress a record section; any codec failure, or more than ``max_size``
    bytes of output, is a CorruptRecordError."""
    if codec == NONE:
        return bytes(data)
    if codec == LZ4 and magic == 0:
        return lz4_decode_v0(data, max_size)
    try:
        decoder = _DECODERS[codec]
    except KeyError:
        raise CorruptRecordError(
            "attributes name compression codec %d, which does not exist" % codec, kind=RecordProblem.UNKNOWN_CODEC
        ) from None
    try:
        return decoder(data, max_size)
    except CorruptRecordError:
        raise
    except UnsupportedCodecError:
        raise
    except Exception as exc:  # each library has its own error types
        raise CorruptRecordError(
            "%s payload does not decompress: %s" % (NAMES[codec], exc), kind=RecordProblem.BAD_COMPRESSED_DATA
        ) from None


# -- streaming: bounded steps, for validation ----------------------------------

def _detail(exc: BaseException) -> str:
    """An exception's own words (a BrokerError's str() adds its code and name)."""
    text = str(exc.args[0]) if exc.args else ""
    return text or type(exc).__name__


_IN_STEP = 256 << 10  # compressed bytes handed to zlib per call: its unconsumed tail stays this small
_large_streams = threading.BoundedSemaphore(MAX_LARGE_STREAMS)


class _GzipSource:
    """gzip (or zlib) members one after another, as :func:`gzip_decode` reads them."""

    def __init__(self, data: Buffer) -> None:
        self._input = memoryview(data).cast("B")
        self._pos = 0
        self._d = zlib.decompressobj(47)

    def produce(self, n: int) -> bytes:
        while True:
            d = self._d
            if d.unconsumed_tail:
                chunk = d.decompress(d.unconsumed_tail, n)
            elif d.eof:
                # The bytes fed past this member's end are the next member's: step back to them.
                self._pos -= len(d.unused_data)
                if self._pos >= len(self._input):
                    return b""
                self._d = zlib.decompressobj(47)
                continue
            else:
                if self._pos >= len(self._input):
                    if self._pos == 0:
                        return b""  # an empty payload, as gzip_decode reads it
                    raise CorruptRecordError("gzip payload is truncated", kind=RecordProblem.BAD_COMPRESSED_DATA)
                piece = self._input[self._pos : self._pos + _IN_STEP]
                self._pos += len(piece)
                chunk = d.decompress(piece, n)
            if chunk:
                return chunk


class _SnappySource:
    """Raw snappy, or xerial-framed blocks; a block is decompressed whole, so it must fit the window."""

    def __init__(self, data: Buffer) -> None:
        self._snappy = _snappy()
        self._buf = bytes(data)
        self._xerial = len(self._buf) >= 16 and self._buf[:8] == _XERIAL_MAGIC
        self._pos = 16 if self._xerial else 0
        self._raw_read = False
        self._block = b""
        self._block_pos = 0

    def _next_block(self) -> bytes:
        buf = self._buf
        if self._xerial:
            if self._pos >= len(buf):
                return b""
            if self._pos + 4 > len(buf):
                raise CorruptRecordError("xerial snappy block length is truncated",
                                         kind=RecordProblem.BAD_COMPRESSED_DATA)
            (n,) = struct.unpack_from(">i", buf, self._pos)
            self._pos += 4
            if n < 0 or self._pos + n > len(buf):
                raise CorruptRecordError("xerial snappy block of %d bytes overruns the payload" % n,
                                         kind=RecordProblem.BAD_COMPRESSED_DATA)
            block = buf[self._pos : self._pos + n]
            self._pos += n
        else:
            if self._raw_read:
                return b""
            self._raw_read = True
            block = buf
        declared = _snappy_raw_length(block)
        if declared > DECOMPRESS_WINDOW:
            raise MessageTooLargeError(
                "a snappy block decompresses to %d bytes, more than the %d one block may (a block is "
                "decompressed whole)" % (declared, DECOMPRESS_WINDOW))
        out = self._snappy.decompress(block)
        return bytes(out)

    def produce(self, n: int) -> bytes:
        while self._block_pos >= len(self._block):
            self._block = self._next_block()
            self._block_pos = 0
            if not self._block and (self._raw_read or self._pos >= len(self._buf)):
                return b""
        start = self._block_pos
        self._block_pos = min(len(self._block), start + n)
        if start == 0 and self._block_pos == len(self._block):
            return self._block
        return self._block[start : self._block_pos]


class _Lz4Source:
    """One LZ4 frame (a v0 message's with Kafka 0.8's header checksum repaired first)."""

    def __init__(self, data: Buffer, magic: int) -> None:
        if magic == 0:
            frame = bytearray(data)
            hs = _lz4_header_size(bytes(frame[:15]))
            frame[hs - 1] = (_xxh32_short(bytes(frame[4 : hs - 1])) >> 8) & 0xFF
            data = frame
        self._data: Buffer = data
        self._d = _lz4_frame().LZ4FrameDecompressor()
        self._fed = False

    def produce(self, n: int) -> bytes:
        d = self._d
        for _ in range(64):  # a frame header or an empty block gives no output: ask again
            if d.eof:
                return b""
            if self._fed:
                chunk = d.decompress(b"", max_length=n)
            else:
                self._fed = True
                chunk = d.decompress(self._data, max_length=n)
            if chunk:
                return chunk
            if d.needs_input and not d.eof:
                raise CorruptRecordError("lz4 frame is truncated", kind=RecordProblem.BAD_COMPRESSED_DATA)
        raise CorruptRecordError("lz4 frame gives no output", kind=RecordProblem.BAD_COMPRESSED_DATA)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_DICT_ID_BYTES = (0, 1, 2, 4)


def _zstd_check_frames(buf: memoryview) -> None:
    """Walk the frames' and blocks' headers (no decompression): truncation and stray bytes are
    found here, since a zstd stream reader ends quietly at the end of its input."""
    n = len(buf)
    pos = 0
    while pos < n:
        if n - pos < 8:
            raise CorruptRecordError("zstd frame at byte %d is truncated" % pos, kind=RecordProblem.BAD_COMPRESSED_DATA)
        magic = int.from_bytes(buf[pos : pos + 4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame
            pos += 8 + int.from_bytes(buf[pos + 4 : pos + 8], "little")
            if pos > n:
                raise CorruptRecordError("zstd skippable frame overruns the payload",
                                         kind=RecordProblem.BAD_COMPRESSED_DATA)
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError("zstd payload has no frame at byte %d" % pos,
                                     kind=RecordProblem.BAD_COMPRESSED_DATA)
        descriptor = buf[pos + 4]
        single_segment = descriptor >> 5 & 1
        content_size_bytes = (single_segment, 2, 4, 8)[descriptor >> 6]
        pos += 5 + (1 - single_segment) + _ZSTD_DICT_ID_BYTES[descriptor & 3] + content_size_bytes
        while True:
            if n - pos < 3:
                raise CorruptRecordError("zstd frame is truncated", kind=RecordProblem.BAD_COMPRESSED_DATA)
            header = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
            block_type = header >> 1 & 3
            if block_type == 3:
                raise CorruptRecordError("zstd block at byte %d has the reserved type" % pos,
                                         kind=RecordProblem.BAD_COMPRESSED_DATA)
            pos += 3 + (1 if block_type == 1 else header >> 3)
            if pos > n:
                raise CorruptRecordError("zstd frame is truncated", kind=RecordProblem.BAD_COMPRESSED_DATA)
            if header & 1:
                break
        if descriptor & 0x04:
            pos += 4
            if pos > n:
                raise CorruptRecordError("zstd frame is truncated", kind=RecordProblem.BAD_COMPRESSED_DATA)


class _ZstdSource:
    """zstd frames one after another; a decoder of its own, so a large frame window is freed after."""

    def __init__(self, data: Buffer) -> None:
        view = memoryview(data).cast("B")
        _zstd_check_frames(view)
        decompressor = _zstd().ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
        self._reader = decompressor.stream_reader(view, read_size=_IN_STEP, read_across_frames=True)

    def produce(self, n: int) -> bytes:
        return self._reader.read(n)


class DecompressStream:
    """A compressed payload read as it decompresses, in bounded steps: what validation reads.

    ``read(n)`` returns the next ``n`` decompressed bytes, fewer only at the
    end of the payload (``b""`` after it); ``at_end()`` says whether any
    remain. Bad or truncated data raise CorruptRecordError, more than
    ``max_size`` bytes in all MessageTooLargeError (its message says ``why``
    that is the limit); messages start with ``what`` (say "record batch at
    byte 0"). Past :data:`DECOMPRESS_WINDOW`
    bytes a stream waits for one of :data:`MAX_LARGE_STREAMS` turns and keeps
    it until it ends or is closed: use it as a context manager. Not
    thread-safe (one reader).
    """

    def __init__(self, codec: int, data: Buffer, magic: int = 2, max_size: int = MAX_DECOMPRESSED,
                 what: str = "payload", why: str = "the most one batch may (a bound on the work of decompressing it)"
                 ) -> None:
        self.codec = codec
        self.what = what
        self.why = why
        self.max_size = max_size
        self.total = 0  # bytes the codec has produced, read or not
        self._pending = b""  # produced by at_end, not read yet
        self._large = False
        self._ended = False
        self._source: Optional[Any] = None
        if codec not in _DECODERS:
            raise CorruptRecordError("%s names compression codec %d, which does not exist" % (what, codec),
                                     kind=RecordProblem.UNKNOWN_CODEC)
        self._source = self._guarded(lambda: _SOURCES[codec](data, magic))

    def _guarded(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except UnsupportedCodecError:
            raise
        except MessageTooLargeError as exc:
            raise MessageTooLargeError("%s: %s" % (self.what, _detail(exc))) from None
        except CorruptRecordError as exc:
            raise CorruptRecordError("%s: %s" % (self.what, _detail(exc)), kind=exc.kind) from None
        except Exception as exc:  # each library has its own error types
            raise CorruptRecordError(
                "%s: %s payload does not decompress: %s" % (self.what, NAMES[self.codec], _detail(exc)),
                kind=RecordProblem.BAD_COMPRESSED_DATA) from None

    def _produce(self, n: int) -> bytes:
        """The codec's next 1..n bytes; b"" at the end."""
        if self._ended or self._source is None:
            return b""
        # A stream bounded by the window itself never holds more: it needs no turn.
        if not self._large and self.total + n > DECOMPRESS_WINDOW and self.max_size > DECOMPRESS_WINDOW:
            _large_streams.acquire()
            self._large = True
        source = self._source
        chunk = self._guarded(lambda: source.produce(min(n, self.max_size - self.total + 1)))
        if not chunk:
            self.close()
            self._ended = True
            return b""
        self.total += len(chunk)
        if self.total > self.max_size:
            raise MessageTooLargeError("%s: %s payload decompresses to more than %d bytes, %s"
                                       % (self.what, NAMES[self.codec], self.max_size, self.why))
        return chunk

    def read(self, n: int) -> bytes:
        """The next ``n`` decompressed bytes, fewer only at the end of the payload."""
        parts = []
        have = 0
        if self._pending:
            chunk, self._pending = self._pending, b""
            if len(chunk) > n:
                chunk, self._pending = chunk[:n], chunk[n:]
            parts.append(chunk)
            have = len(chunk)
        while have < n:
            chunk = self._produce(n - have)
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)

    def read1(self, n: int) -> bytes:
        """The next 1..n decompressed bytes, as many as one step of the codec gives (no joining);
        ``b""`` only at the end."""
        if self._pending:
            chunk, self._pending = self._pending, b""
            if len(chunk) > n:
                chunk, self._pending = chunk[:n], chunk[n:]
            return chunk
        return self._produce(n)

    def at_end(self) -> bool:
        """True when every byte has been read (this may decompress the next step to find out)."""
        if self._pending:
            return False
        self._pending = self._produce(STREAM_CHUNK)
        return not self._pending

    def close(self) -> None:
        """Give the large-stream turn back and drop the codec's state (its buffers)."""
        self._source = None
        self._pending = b""
        if self._large:
            self._large = False
            _large_streams.release()

    def __enter__(self) -> "DecompressStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SOURCES: Dict[int, Callable[[Buffer, int], Any]] = {
    GZIP: lambda data, magic: _GzipSource(data),
    SNAPPY: lambda data, magic: _SnappySource(data),
    LZ4: _Lz4Source,
    ZSTD: lambda data, magic: _ZstdSource(data),
}
