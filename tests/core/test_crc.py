"""CRC-32C and CRC-32: pylogq.records.crc, its pure twin and every compiled path.

Each test runs against the pure-Python twin, the compiled kernel and, on top,
every CPU-specific implementation in the compiled kernel that this machine can
run (the dispatcher picks one; the others would otherwise go untested here).
"""

from __future__ import annotations

import array
import mmap
import os
import platform
import random
import zlib
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Callable, Dict, List

import crc32c as crc32c_peer
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq import _speedups
from pylogq.errors import InvalidArgumentError, InvalidArgumentTypeError
from pylogq.records import crc as crc_module

from .._argument_errors import check_raised

if _speedups.NO_EXTENSIONS:
    _compiled = None
else:
    # A compiled module that fails to import fails the collection: never a skip.
    from pylogq._core import _crc as _compiled

REFERENCE: Dict[str, Callable[..., int]] = {"crc32c": crc32c_peer.crc32c, "crc32": zlib.crc32}

GOLDEN = {
    "crc32c": [
        (b"", 0),
        (b"123456789", 0xE3069283),
        (bytes(32), 0x8A9136AA),
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
    ],
    "crc32": [
        (b"", 0),
        (b"123456789", 0xCBF43926),
        (b"The quick brown fox jumps over the lazy dog", 0x414FA339),
    ],
}

HW_NAMES = {
    "crc32c": {"avx512-vpclmulqdq", "sse4.2-3way"},
    "crc32": {"avx512-vpclmulqdq", "pclmulqdq"},
}
ALL_NAMES = {algorithm: names | {"slicing-by-8"} for algorithm, names in HW_NAMES.items()}

# Lengths around every block boundary of the implementations: 16-byte chunks,
# the 64/256-byte folds, the 3 x 256 and 3 x 8192 streams of the 3-way path.
BOUNDARIES = sorted(
    {
        n + d
        for n in (64, 128, 256, 512, 768, 1024, 1536, 2304, 8192, 24576, 25344, 49152)
        for d in range(-17, 18)
    }
)


def _cases() -> List[object]:
    cases = []
    for algorithm in ("crc32c", "crc32"):
        cases.append(pytest.param((algorithm, "pure", getattr(crc_module.pure, algorithm)),
                                  id=f"{algorithm}-pure"))
        if _compiled is None:
            continue
        cases.append(pytest.param((algorithm, "compiled", getattr(_compiled, algorithm)),
                                  id=f"{algorithm}-compiled"))
        for variant in _compiled.variants(algorithm)[1:]:
            cases.append(pytest.param((algorithm, variant.name, variant),
                                      id=f"{algorithm}-compiled-{variant.name}"))
    return cases


@pytest.fixture(scope="module", params=_cases())
def crc(request: pytest.FixtureRequest) -> SimpleNamespace:
    """One implementation of one algorithm, with its reference and golden vectors."""
    algorithm, name, fn = request.param
    return SimpleNamespace(algorithm=algorithm, name=name, fn=fn, ref=REFERENCE[algorithm],
                           golden=GOLDEN[algorithm])


@pytest.fixture(scope="module", params=["pure"] if _compiled is None else ["pure", "compiled"])
def module(request: pytest.FixtureRequest) -> object:
    """The pure twin or the compiled kernel, as a whole (only the twin under PYLOGQ_NO_EXTENSIONS)."""
    if request.param == "pure":
        return crc_module.pure
    return _compiled


def _random(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def test_golden_vectors(crc: SimpleNamespace) -> None:
    for data, expected in crc.golden:
        assert crc.fn(data) == expected, data
        assert crc.fn(data, 0) == expected, data


def test_incremental_golden(crc: SimpleNamespace) -> None:
    data, expected = crc.golden[1]
    for split in range(len(data) + 1):
        assert crc.fn(data[split:], crc.fn(data[:split])) == expected


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=3000), init=st.integers(0, 2**32 - 1), split=st.integers(0, 3000))
def test_matches_reference(crc: SimpleNamespace, data: bytes, init: int, split: int) -> None:
    expected = crc.ref(data, init)
    assert crc.fn(data, init) == expected
    split = min(split, len(data))
    assert crc.fn(data[split:], crc.fn(data[:split], init)) == expected


def test_every_short_length_and_alignment(crc: SimpleNamespace) -> None:
    data = _random(600 + 16, seed=1)
    view = memoryview(data)
    for offset in range(16):
        for n in range(601):
            piece = view[offset:offset + n]
            assert crc.fn(piece, 0x5A5A5A5A) == crc.ref(piece, 0x5A5A5A5A), (offset, n)


def test_block_boundaries(crc: SimpleNamespace) -> None:
    data = _random(BOUNDARIES[-1] + 16, seed=2)
    view = memoryview(data)
    for n in BOUNDARIES:
        for offset in (0, 1, 8, 15):
            piece = view[offset:offset + n]
            assert crc.fn(piece) == crc.ref(piece), (offset, n)


def test_large_input_unaligned_and_split(crc: SimpleNamespace) -> None:
    data = _random((1 << 20) + 7 + 15, seed=3)
    view = memoryview(data)
    for offset in (0, 3, 15):
        piece = view[offset:offset + (1 << 20) + 7]
        expected = crc.ref(piece)
        assert crc.fn(piece) == expected, offset
        split = 3 * 8192 + 5
        assert crc.fn(piece[split:], crc.fn(piece[:split])) == expected


def test_initial_value_is_masked_to_32_bits(crc: SimpleNamespace) -> None:
    for init in (-1, 2**32, 2**32 + 5, 2**40 + 0x1234):
        assert crc.fn(b"abc", init) == crc.ref(b"abc", init & 0xFFFFFFFF)


def _buffers(data: bytes) -> Dict[str, object]:
    anon = mmap.mmap(-1, len(data))
    anon.write(data)
    return {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "mmap": anon,
        "numpy-uint8": np.frombuffer(data, dtype=np.uint8).copy(),
        "numpy-int32-2d": np.frombuffer(data, dtype=np.int32).reshape(4, -1).copy(),
        "array-I": array.array("I", data),
    }


def test_every_buffer_type(crc: SimpleNamespace) -> None:
    data = _random(4096, seed=4)
    expected = crc.ref(data)
    for kind, buf in _buffers(data).items():
        assert crc.fn(buf) == expected, kind
        assert crc.fn(buf, 7) == crc.ref(data, 7), kind


@pytest.mark.parametrize("bad", ["text", 12, None, [1, 2, 3], 1.5])
def test_non_buffer_raises_type_error(crc: SimpleNamespace, bad: object) -> None:
    with pytest.raises(TypeError):
        crc.fn(bad)


def test_non_integer_initial_value_raises_type_error(crc: SimpleNamespace) -> None:
    with pytest.raises(TypeError):
        crc.fn(b"abc", 1.0)
    with pytest.raises(TypeError):
        crc.fn(b"abc", "0")


def test_non_contiguous_buffer_raises_buffer_error(crc: SimpleNamespace) -> None:
    with pytest.raises(BufferError):
        crc.fn(memoryview(b"abcdef")[::2])


def test_threads_share_nothing(crc: SimpleNamespace) -> None:
    inputs = [_random(100_000 + i, seed=10 + i) for i in range(8)]
    expected = [crc.ref(d) for d in inputs]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(crc.fn, inputs * 4)) == expected * 4


@settings(max_examples=200, deadline=None)
@given(a=st.binary(max_size=600), b=st.binary(max_size=600))
def test_combine(module: object, a: bytes, b: bytes) -> None:
    assert module.crc32c_combine(crc32c_peer.crc32c(a), crc32c_peer.crc32c(b), len(b)) == (
        crc32c_peer.crc32c(a + b)
    )
    assert module.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_combine_long_lengths(module: object) -> None:
    a, b = _random(1000, seed=5), _random((1 << 20) + 3, seed=6)
    assert module.crc32c_combine(crc32c_peer.crc32c(a), crc32c_peer.crc32c(b), len(b)) == (
        crc32c_peer.crc32c(a + b)
    )
    assert module.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_combine_rejects_negative_length(module: object) -> None:
    with pytest.raises(ValueError, match="-1"):
        module.crc32c_combine(0, 0, -1)
    with pytest.raises(ValueError, match="-1"):
        module.crc32_combine(0, 0, -1)




@pytest.mark.parametrize("bad, shown", [("text", "str"), (12, "int"), (None, "NoneType"), ([1, 2, 3], "list")])
def test_non_buffer_error_class(crc: SimpleNamespace, bad: object, shown: str) -> None:
    with pytest.raises(TypeError) as raised:
        crc.fn(bad)
    check_raised(raised, InvalidArgumentTypeError, TypeError, "data must be a bytes-like object, not %s" % shown)
    with pytest.raises(TypeError) as raised:
        crc.fn(bad, 5)
    check_raised(raised, InvalidArgumentTypeError, TypeError, "data", shown)


@pytest.mark.parametrize("bad, shown", [(1.0, "1.0"), ("0", "'0'"), (None, "None")])
def test_non_integer_initial_value_error_class(crc: SimpleNamespace, bad: object, shown: str) -> None:
    with pytest.raises(TypeError) as raised:
        crc.fn(b"abc", bad)
    check_raised(raised, InvalidArgumentTypeError, TypeError, "crc must be an int, not %s" % shown)
    assert crc.fn(b"abc", np.int64(7)) == crc.fn(b"abc", 7) == crc.ref(b"abc", 7)


def test_table_fallback_error_classes() -> None:
    with pytest.raises(TypeError) as raised:
        crc_module._table_crc32c(crc_module._buffer("text"), 0)
    check_raised(raised, InvalidArgumentTypeError, TypeError, "data", "str")


@pytest.mark.parametrize("name", ["crc32c_combine", "crc32_combine"])
def test_combine_error_classes(module: object, name: str) -> None:
    combine = getattr(module, name)
    for len2 in (-1, -(2**70), 2**63):
        with pytest.raises(ValueError) as raised:
            combine(0, 0, len2)
        check_raised(raised, InvalidArgumentError, ValueError, "len2", "not %d" % len2)
    for args, what, shown in (((0, 0, 1.0), "len2", "1.0"), ((0.5, 0, 1), "crc1", "0.5"), ((0, "1", 1), "crc2", "'1'")):
        with pytest.raises(TypeError) as raised:
            combine(*args)
        check_raised(raised, InvalidArgumentTypeError, TypeError, "%s must be an int, not %s" % (what, shown))
    # the largest length both accept, and numpy integers
    assert combine(0, 0, 2**63 - 1) == getattr(crc_module.pure, name)(0, 0, 2**63 - 1)
    assert combine(np.uint32(1), np.uint32(2), np.int64(3)) == combine(1, 2, 3)


def test_public_module_uses_the_expected_implementation() -> None:
    if _compiled is None:
        assert crc_module.crc32c is crc_module.pure.crc32c
        assert crc_module.crc32 is crc_module.pure.crc32
        assert crc_module.IMPLEMENTATION == crc_module.pure.IMPLEMENTATION
        assert _speedups.loaded["_crc"] is False
    else:
        assert crc_module.crc32c is _compiled.crc32c
        assert crc_module.crc32 is _compiled.crc32
        assert crc_module.IMPLEMENTATION == _compiled.IMPLEMENTATION
        assert _speedups.loaded["_crc"] is True


def test_pure_implementation_names() -> None:
    assert crc_module.pure.IMPLEMENTATION["crc32c"] in {"crcmod", "crcmod-python"}
    assert crc_module.pure.IMPLEMENTATION["crc32"] == "zlib"


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=300), init=st.integers(0, 2**32 - 1))
def test_table_fallback_without_crcmod(data: bytes, init: int) -> None:
    assert crc_module._table_crc32c(memoryview(data), init) == crc32c_peer.crc32c(data, init)


def _cpu_flags() -> set:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


# Compiled-only checks are defined only when the compiled kernel is in use, so a
# pure-Python run (where PYLOGQ_REQUIRE_ALL turns skips into failures) has none to skip.
if _compiled is not None:

    def test_compiled_implementation_names() -> None:
        for algorithm in ("crc32c", "crc32"):
            names = [v.name for v in _compiled.variants(algorithm)]
            assert _compiled.IMPLEMENTATION[algorithm] == names[0]
            assert set(names) <= ALL_NAMES[algorithm]
            assert names[-1] == "slicing-by-8"
            assert len(set(names)) == len(names)
        with pytest.raises(ValueError, match="crc64"):
            _compiled.variants("crc64")
        for bad in ("crc64", None, 32):
            with pytest.raises(ValueError) as raised:
                _compiled.variants(bad)
            check_raised(raised, InvalidArgumentError, ValueError, "algorithm", "not %r" % (bad,))

    def test_variant_not_from_variants_raises_instead_of_crashing() -> None:
        with pytest.raises(TypeError, match="variants"):
            _compiled.Variant()(b"abc")


if _compiled is not None and platform.machine() in ("x86_64", "AMD64") and os.path.exists("/proc/cpuinfo"):
    # The hardware paths are x86-64; the CPU flags come from /proc/cpuinfo.

    def test_hardware_path_chosen_when_the_cpu_has_it() -> None:
        flags = _cpu_flags()
        chosen = _compiled.IMPLEMENTATION
        if {"avx512f", "avx512vl", "vpclmulqdq", "pclmulqdq", "sse4_2"} <= flags:
            assert chosen == {"crc32c": "avx512-vpclmulqdq", "crc32": "avx512-vpclmulqdq"}
        if "sse4_2" in flags:
            assert chosen["crc32c"] in HW_NAMES["crc32c"]
            assert "sse4.2-3way" in [v.name for v in _compiled.variants("crc32c")]
        if {"sse4_2", "pclmulqdq"} <= flags:
            assert chosen["crc32"] in HW_NAMES["crc32"]
            assert "pclmulqdq" in [v.name for v in _compiled.variants("crc32")]
