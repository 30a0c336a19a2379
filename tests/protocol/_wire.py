"""Kafka's wire layout written by hand, for golden bytes built from a JSON schema's field
order rather than by the encoder under test: fixed-width integers, (compact) strings and
array heads, unsigned varints and tagged-field sections."""

from __future__ import annotations

import struct
from typing import Optional, Tuple

__all__ = ["NO_TAGS", "array", "boolean", "carray", "cstring", "i8", "i16", "i32", "i64", "string", "tags",
           "uvarint"]

#: An empty tagged-field section, ending every struct of a flexible version.
NO_TAGS = b"\x00"


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def string(s: Optional[str]) -> bytes:
    """A (nullable) string of a non-flexible version: int16 length, -1 for null."""
    if s is None:
        return i16(-1)
    raw = s.encode()
    return i16(len(raw)) + raw


def array(n: Optional[int]) -> bytes:
    """An array's head in a non-flexible version: int32 count, -1 for null."""
    return i32(-1 if n is None else n)


def uvarint(v: int) -> bytes:
    """An unsigned varint (7 bits a byte, low first)."""
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def cstring(s: Optional[str]) -> bytes:
    """A compact (nullable) string: unsigned varint length + 1, 0 for null."""
    if s is None:
        return b"\x00"
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def carray(n: Optional[int]) -> bytes:
    """A compact array's head: unsigned varint count + 1, 0 for null."""
    return b"\x00" if n is None else uvarint(n + 1)


def tags(*fields: Tuple[int, bytes]) -> bytes:
    """A tagged-field section holding ``(tag, body)`` fields, as a newer peer might send."""
    return uvarint(len(fields)) + b"".join(uvarint(tag) + uvarint(len(body)) + body for tag, body in fields)
