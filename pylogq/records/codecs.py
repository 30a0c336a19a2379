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
"""

from __future__ import annotations

import gzip as _gzip
import struct
import threading
import zlib
from typing import Callable, Dict, Union

from ..errors import CorruptRecordError, UnsupportedCodecError

__all__ = [
    "NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD", "CODEC_MASK", "NAMES", "BY_NAME", "MAX_DECOMPRESSED",
    "codec_id", "gzip_encode", "gzip_decode", "snappy_encode", "snappy_decode", "lz4_encode",
    "lz4_decode", "lz4_encode_v0", "lz4_decode_v0", "zstd_encode", "zstd_decode", "compress",
    "decompress"
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
# about 1 MB, and producers rarely compress more than 100:1).
MAX_DECOMPRESSED = 1 << 30


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
    # mtime=0 keeps the output deterministic, as the Java client's GZIPOutputStream.
    return _gzip.compress(bytes(data), compresslevel=6, mtime=0)


def _too_large(codec: str, limit: int) -> CorruptRecordError:
    return CorruptRecordError("%s payload decompresses to more than %d bytes" % (codec, limit))


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
            raise CorruptRecordError("gzip payload is truncated")
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
    raise CorruptRecordError("snappy block has a malformed length preamble")


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
                raise CorruptRecordError("xerial snappy block length is truncated")
            (n,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            if n < 0 or pos + n > len(buf):
                raise CorruptRecordError(
                    "xerial snappy block of %d bytes overruns the payload" % n
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
        raise CorruptRecordError("lz4 frame of %d bytes is shorter than its header" % len(frame))
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
        raise CorruptRecordError("lz4 frame does not decode: %s" % exc) from None
    if len(out) > max_size:
        raise _too_large("lz4", max_size)
    if not decompressor.eof:
        raise CorruptRecordError("lz4 frame is truncated")
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
                raise CorruptRecordError("zstd frame is truncated")
            buf = memoryview(frame.unused_data + bytes(buf[pos:]))
    except zstandard.ZstdError as exc:
        raise CorruptRecordError("zstd frame does not decode: %s" % exc) from None
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
            "attributes name compression codec %d, which does not exist" % codec
        ) from None
    try:
        return decoder(data, max_size)
    except CorruptRecordError:
        raise
    except UnsupportedCodecError:
        raise
    except Exception as exc:  # each library has its own error types
        raise CorruptRecordError(
            "%s payload does not decompress: %s" % (NAMES[codec], exc)
        ) from None
