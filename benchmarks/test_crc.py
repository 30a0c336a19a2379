"""CRC-32C and CRC-32 throughput: pylogq against crc32c, zlib and crcmod.

Groups are "<algorithm> <size>": 1 MB of random bytes for bulk throughput and
200 bytes (a small record batch) for per-call overhead. ``extra_info`` holds
GB/s and the implementation name; within a group, pytest-benchmark's relative
columns give the ratios. The compiled kernel's slower paths that this CPU can
also run (``pylogq-<name>``) are measured too.
"""

from __future__ import annotations

import importlib
import random
import zlib
from typing import Callable, List, Tuple

import crc32c as crc32c_peer
import crcmod.predefined
import pytest

from pylogq import _speedups
from pylogq.records import crc as crc_module

_compiled = None if _speedups.NO_EXTENSIONS else importlib.import_module("pylogq._core._crc")

SIZES = {"1MB": 1 << 20, "200B": 200}
DATA = {label: random.Random(label).randbytes(n) for label, n in SIZES.items()}


def _candidates() -> List[Tuple[str, str, Callable[..., int]]]:
    peers = {
        "crc32c": [
            ("crc32c-package", crc32c_peer.crc32c),
            ("crcmod", crcmod.predefined.mkPredefinedCrcFun("crc-32c")),
        ],
        "crc32": [
            ("zlib", zlib.crc32),
            ("crcmod", crcmod.predefined.mkPredefinedCrcFun("crc-32")),
        ],
    }
    found = []
    for algorithm in ("crc32c", "crc32"):
        if _compiled is not None:
            found.append((algorithm, "pylogq-compiled", getattr(_compiled, algorithm)))
            for variant in _compiled.variants(algorithm)[1:]:
                found.append((algorithm, "pylogq-" + variant.name, variant))
        found.append((algorithm, "pylogq-pure", getattr(crc_module.pure, algorithm)))
        found.extend((algorithm, name, fn) for name, fn in peers[algorithm])
    return found


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize(
    "algorithm,name,fn",
    [pytest.param(a, n, f, id=f"{a}-{n}") for a, n, f in _candidates()],
)
def test_crc(benchmark, algorithm: str, name: str, fn: Callable[..., int], size: str) -> None:
    data = DATA[size]
    expected = {"crc32c": crc32c_peer.crc32c, "crc32": zlib.crc32}[algorithm](data)
    benchmark.group = f"{algorithm} {size}"
    benchmark.extra_info.update(items=len(data), unit="B")
    if name == {"crc32c": "crc32c-package", "crc32": "zlib"}[algorithm]:
        benchmark.extra_info["peer"] = True
    if size == "1MB":
        benchmark.extra_info["target"] = {"crc32c": ">= 0.8x crc32c package", "crc32": ">= 1.0x zlib.crc32"}[algorithm]
    result = benchmark(fn, data)
    assert result == expected
    benchmark.extra_info["implementation"] = name
    if benchmark.stats is not None:
        mean = benchmark.stats.stats.mean
        benchmark.extra_info["GB/s"] = round(len(data) / mean / 1e9, 3)
