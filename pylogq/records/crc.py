"""CRC-32C and CRC-32, the checksums of Kafka's record formats.

* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) guards a magic v2
  record batch: the ``crc`` field (offset 17, 4 bytes, unsigned big-endian)
  covers the batch from its ``attributes`` field (offset 21) to its end.
* CRC-32 (zlib/IEEE, reflected polynomial 0xEDB88320) guards a legacy v0/v1
  message: the ``crc`` field (its first 4 bytes) covers the message from its
  ``magic`` byte to its end.

``crc32c(data, crc=0)`` and ``crc32(data, crc=0)`` take any contiguous buffer
and behave as ``crc32c.crc32c`` and ``zlib.crc32``: ``crc`` is the CRC of the
bytes before ``data`` (masked to 32 bits), so ``crc32c(b, crc32c(a)) ==
crc32c(a + b)``; a non-buffer or a non-int ``crc`` raises InvalidArgumentTypeError (a
TypeError). ``crc32c_combine`` and
``crc32_combine`` join the CRCs of two pieces without reading them again.

The compiled kernel (``pylogq._core._crc``) is used when it loads; :data:`pure`
is the pure-Python twin with the same names (CRC-32 from :mod:`zlib`, CRC-32C
from crcmod's C extension, else a table loop). :data:`IMPLEMENTATION` names the
code behind each function.
"""

from __future__ import annotations

import operator
import sys
import types
import zlib
from typing import Callable, Dict, List, Optional

from .._speedups import compiled
from ..errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = ["IMPLEMENTATION", "crc32", "crc32_combine", "crc32c", "crc32c_combine", "pure"]

_MASK = 0xFFFFFFFF
_LEN2_MAX = 2**63 - 1  # the kernel's size_t bound on a 64-bit build, for both
_POLY_32C = 0x82F63B78
_POLY_32 = 0xEDB88320


def _table(poly: int) -> List[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (poly if c & 1 else 0)
        table.append(c)
    return table


def _table_crc32c(data: memoryview, crc: int) -> int:
    """CRC-32C one byte at a time: the last resort when crcmod is missing."""
    global _TABLE_32C
    table = _TABLE_32C
    if table is None:
        table = _TABLE_32C = _table(_POLY_32C)
    c = crc ^ _MASK
    for byte in data.tobytes():
        c = (c >> 8) ^ table[(c ^ byte) & 0xFF]
    return c ^ _MASK


_TABLE_32C: Optional[List[int]] = None
# crcmod's CRC-32C function, once the twin is built (None: crcmod is missing).
_crcmod_32c: Optional[Callable[..., int]] = None


def _int_arg(value: object, what: str) -> int:
    """``value`` as an int (``operator.index``); InvalidArgumentTypeError naming ``what`` otherwise."""
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidArgumentTypeError("%s must be an int, not %r" % (what, value)) from None


def _not_a_buffer(data: object) -> InvalidArgumentTypeError:
    return InvalidArgumentTypeError("data must be a bytes-like object, not %s" % type(data).__name__)


def _buffer(data: object) -> memoryview:
    """A contiguous byte view of data; InvalidArgumentTypeError for a non-buffer, BufferError
    (the buffer protocol's own, as the kernel's) if not contiguous."""
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise _not_a_buffer(data) from None
    if not view.c_contiguous:
        raise BufferError("memoryview: underlying buffer is not C-contiguous")
    return view


def _py_crc32c(data: object, crc: int = 0) -> int:
    """CRC-32C of data (any contiguous buffer), continuing from crc."""
    crc = (crc if type(crc) is int else _int_arg(crc, "crc")) & _MASK
    if _crcmod_32c is None:
        return _table_crc32c(_buffer(data), crc)
    if type(data) is bytes or type(data) is bytearray:
        return _crcmod_32c(data, crc)
    return _crcmod_32c(_buffer(data), crc)


def _py_crc32(data: object, crc: int = 0) -> int:
    """CRC-32 (zlib) of data (any contiguous buffer), continuing from crc."""
    crc = (crc if type(crc) is int else _int_arg(crc, "crc")) & _MASK
    try:
        return zlib.crc32(data, crc)  # type: ignore[arg-type]
    except TypeError:  # crc is an int: data is not a buffer
        raise _not_a_buffer(data) from None


def _multmodp(a: int, b: int, poly: int) -> int:
    """a * b modulo the polynomial, in the reflected representation (bit 31 is x^0)."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ poly if b & 1 else b >> 1


def _make_combine(poly: int, doc: str) -> Callable[[int, int, int], int]:
    x2n = [1 << 30]  # x^(2^n) mod P, n = 0..31
    for _ in range(31):
        x2n.append(_multmodp(x2n[-1], x2n[-1], poly))

    def combine(crc1: int, crc2: int, len2: int) -> int:
        len2 = _int_arg(len2, "len2")
        if not 0 <= len2 <= _LEN2_MAX:
            raise InvalidArgumentError("len2 must be an int in [0, 2**63-1], not %r" % (len2,))
        crc1 = _int_arg(crc1, "crc1") & _MASK
        crc2 = _int_arg(crc2, "crc2") & _MASK
        op = 1 << 31  # x^0; becomes x^(8 len2), the shift through len2 zero bytes
        k = 3
        while len2:
            if len2 & 1:
                op = _multmodp(x2n[k & 31], op, poly)
            len2 >>= 1
            k += 1
        return _multmodp(op, crc1, poly) ^ crc2

    combine.__doc__ = doc
    return combine


def _pure() -> types.SimpleNamespace:
    """The pure-Python twin of the compiled kernel: the same names, the same behaviour.
    Built when first asked for (as :data:`pure`, or because the kernel did not load), so
    a process on the kernel never imports crcmod or fills the twin's tables."""
    global _crcmod_32c
    twin = globals().get("pure")
    if twin is not None:
        return twin
    try:
        import crcmod.predefined

        name = "crcmod" if sys.modules["crcmod.crcmod"]._usingExtension else "crcmod-python"
        # crcmod's function takes and returns the finished (post-inverted) value, so
        # its second argument chains exactly as crc32c.crc32c's does.
        _crcmod_32c = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
    except ImportError:
        name, _crcmod_32c = "python-table", None
    twin = types.SimpleNamespace(
        crc32c=_py_crc32c,
        crc32=_py_crc32,
        crc32c_combine=_make_combine(
            _POLY_32C, "CRC-32C of a + b from crc1 = crc32c(a), crc2 = crc32c(b) and len2 = len(b)."),
        crc32_combine=_make_combine(
            _POLY_32, "CRC-32 of a + b from crc1 = crc32(a), crc2 = crc32(b) and len2 = len(b)."),
        IMPLEMENTATION={"crc32c": name, "crc32": "zlib"},
    )
    globals()["pure"] = twin
    return twin


def __getattr__(name: str) -> types.SimpleNamespace:
    if name == "pure":  # the twin, built on first use (see _pure)
        return _pure()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


_kernel = compiled("_crc") or _pure()
crc32c = _kernel.crc32c
crc32 = _kernel.crc32
crc32c_combine = _kernel.crc32c_combine
crc32_combine = _kernel.crc32_combine
IMPLEMENTATION: Dict[str, str] = dict(_kernel.IMPLEMENTATION)
