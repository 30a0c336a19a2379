"""Kafka protocol primitive types: one checked reader, one growing writer.

Byte layouts (all integers big-endian, as in Kafka's protocol guide):

    int8/int16/int32/int64   1/2/4/8 bytes, two's complement
    uint16/uint32            2/4 bytes, unsigned
    float64                  8 bytes, IEEE 754 binary64
    bool                     1 byte, 0 is false, anything else true
    uuid                     16 bytes
    unsigned_varint          7 bits per byte, low group first, high bit = more (at most 5 bytes)
    varint/varlong           zig-zag encoded into an unsigned varint (5 / 10 bytes at most)
    string                   int16 length N then N bytes UTF-8; nullable: length -1 is null
    compact_string           unsigned_varint N+1 then N bytes; nullable: 0 is null
    bytes                    int32 length N then N bytes; nullable: length -1 is null
    compact_bytes            unsigned_varint N+1 then N bytes; nullable: 0 is null
    array                    int32 count then the elements; nullable: -1 is null
    compact_array            unsigned_varint count+1 then the elements; nullable: 0 is null
    tagged_fields            unsigned_varint count, then per field: unsigned_varint tag,
                             unsigned_varint size, size bytes

Every read goes through :meth:`Reader._take`, which checks the remaining length first, so a
truncated or malformed buffer raises :class:`ProtocolError` and nothing else.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from typing import Optional, Union

from ..errors import InvalidArgumentError, ProtocolError

__all__ = ["Reader", "Writer"]

Buffer = Union[bytes, bytearray, memoryview]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")


class Reader:
    """Reads primitives from a buffer, checking each length before reading.

    Not thread-safe: it carries a read position.
    """

    __slots__ = ("_buf", "pos", "end")

    def __init__(self, data: Buffer, pos: int = 0, end: Optional[int] = None) -> None:
        self._buf = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.pos = pos
        self.end = len(self._buf) if end is None else end

    @property
    def buffer(self) -> Buffer:
        """The underlying buffer."""
        return self._buf

    @property
    def remaining(self) -> int:
        """Bytes left between the position and the end."""
        return self.end - self.pos

    def _take(self, n: int) -> int:
        """Reserve ``n`` bytes and return their start; the one place lengths are checked."""
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise ProtocolError(
                f"insufficient data: needed {n} bytes at position {pos}, have {self.end - pos}"
            )
        self.pos = pos + n
        return pos

    def int8(self) -> int:
        return int(_I8.unpack_from(self._buf, self._take(1))[0])

    def int16(self) -> int:
        return int(_I16.unpack_from(self._buf, self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack_from(self._buf, self._take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack_from(self._buf, self._take(8))[0])

    def uint16(self) -> int:
        return int(_U16.unpack_from(self._buf, self._take(2))[0])

    def uint32(self) -> int:
        return int(_U32.unpack_from(self._buf, self._take(4))[0])

    def float64(self) -> float:
        return float(_F64.unpack_from(self._buf, self._take(8))[0])

    def boolean(self) -> bool:
        return self._buf[self._take(1)] != 0

    def uuid(self) -> _uuid.UUID:
        start = self._take(16)
        return _uuid.UUID(bytes=bytes(self._buf[start:start + 16]))

    def raw(self, n: int) -> bytes:
        """Return the next ``n`` bytes."""
        start = self._take(n)
        return bytes(self._buf[start:start + n])

    def skip(self, n: int) -> None:
        """Move past ``n`` bytes."""
        self._take(n)

    def unsigned_varint(self, max_bytes: int = 5) -> int:
        """Read an unsigned varint of at most ``max_bytes`` bytes."""
        value = 0
        shift = 0
        for _ in range(max_bytes):
            b = self._buf[self._take(1)]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise ProtocolError(f"varint longer than {max_bytes} bytes at position {self.pos - max_bytes}")

    def varint(self) -> int:
        """Read a zig-zag int32 varint."""
        v = self.unsigned_varint(5)
        if v > 0xFFFFFFFF:
            raise ProtocolError(f"varint {v} out of int32 range at position {self.pos}")
        return (v >> 1) ^ -(v & 1)

    def varlong(self) -> int:
        """Read a zig-zag int64 varint."""
        v = self.unsigned_varint(10)
        if v > 0xFFFFFFFFFFFFFFFF:
            raise ProtocolError(f"varlong {v} out of int64 range at position {self.pos}")
        return (v >> 1) ^ -(v & 1)

    def length(self, compact: bool, wide: bool) -> int:
        """Read a length prefix; -1 means null. ``wide`` selects int32 over int16 (bytes/arrays)."""
        if compact:
            n = self.unsigned_varint() - 1
        elif wide:
            n = self.int32()
        else:
            n = self.int16()
        if n < -1:
            raise ProtocolError(f"negative length {n} at position {self.pos}")
        return n

    def string(self, compact: bool = False) -> Optional[str]:
        """Read a (compact) nullable string; None for null."""
        n = self.length(compact, False)
        if n == -1:
            return None
        start = self._take(n)
        try:
            return str(bytes(self._buf[start:start + n]), "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"invalid UTF-8 in string at position {start}: {exc}") from None

    def blob(self, compact: bool = False) -> Optional[bytes]:
        """Read (compact) nullable bytes; None for null."""
        n = self.length(compact, True)
        if n == -1:
            return None
        return self.raw(n)


class Writer:
    """Appends primitives to a bytearray. Not thread-safe."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: _uuid.UUID) -> None:
        self.buf += v.bytes

    def raw(self, v: Buffer) -> None:
        self.buf += v

    def unsigned_varint(self, v: int) -> None:
        if v < 0:
            raise InvalidArgumentError(f"unsigned varint must not be negative: {v}")
        while v > 0x7F:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def varint(self, v: int) -> None:
        if not -(1 << 31) <= v < (1 << 31):
            raise InvalidArgumentError(f"varint out of int32 range: {v}")
        self.unsigned_varint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        if not -(1 << 63) <= v < (1 << 63):
            raise InvalidArgumentError(f"varlong out of int64 range: {v}")
        self.unsigned_varint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def length(self, n: int, compact: bool, wide: bool) -> None:
        """Write a length prefix; ``n`` = -1 writes null."""
        if compact:
            self.unsigned_varint(n + 1)
        elif wide:
            self.int32(n)
        else:
            if n > 0x7FFF:
                raise InvalidArgumentError(f"string of {n} bytes is longer than 32767")
            self.int16(n)

    def string(self, v: Optional[str], compact: bool = False) -> None:
        if v is None:
            self.length(-1, compact, False)
            return
        data = v.encode("utf-8")
        self.length(len(data), compact, False)
        self.buf += data

    def blob(self, v: Optional[Buffer], compact: bool = False) -> None:
        if v is None:
            self.length(-1, compact, True)
            return
        self.length(len(v), compact, True)
        self.buf += v
