"""Offset index lookups: pylogq's compiled search and its twin against ``bisect``.

Group "offset index 10MB": a full 10 MB offset index (1,310,720 entries) and
random targets, one Python-level call per lookup, as a segment read does. The
peer is ``bisect.bisect_right`` over a Python list of the relative offsets,
the natural pure-Python index. ``extra_info`` holds lookups/s; within the group
pytest-benchmark's relative columns give the ratios (per call: the pure twin
runs fewer targets, so compare lookups/s). Target: compiled >= 2M lookups/s.
"""

from __future__ import annotations

import bisect
import importlib
import mmap
import random
import tempfile
from typing import Callable, Iterator, List

import numpy as np
import pytest

from pylogq import _speedups
from pylogq.storage import index_search

_compiled = None if _speedups.NO_EXTENSIONS else importlib.import_module("pylogq._core._index")

ENTRIES = 10 * 1024 * 1024 // 8  # 1,310,720
TARGETS = 20_000
PURE_TARGETS = 2_000


def _build_index() -> bytes:
    table = np.empty((ENTRIES, 2), dtype=">i4")
    table[:, 0] = np.arange(ENTRIES, dtype=np.int64) * 3  # relative offsets, gaps of 3
    table[:, 1] = np.arange(ENTRIES, dtype=np.int64) * 4096  # file positions
    return table.tobytes()


INDEX = _build_index()
KEYS: List[int] = list(range(0, 3 * ENTRIES, 3))
_rng = random.Random(20240601)
RANDOM_TARGETS = [_rng.randrange(-5, 3 * ENTRIES + 5) for _ in range(TARGETS)]


@pytest.fixture(scope="module")
def index_mmap() -> Iterator[mmap.mmap]:
    with tempfile.TemporaryFile() as f:
        f.write(INDEX)
        f.flush()
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            yield mm


def _lookups(fn: Callable[[object, int, int], int], buf: object, targets: List[int]) -> int:
    total = 0
    for t in targets:
        total += fn(buf, ENTRIES, t)
    return total


def _bisect_lookups(keys: List[int], targets: List[int]) -> int:
    total = 0
    for t in targets:
        total += bisect.bisect_right(keys, t) - 1
    return total


EXPECTED = _bisect_lookups(KEYS, RANDOM_TARGETS)
EXPECTED_PURE = _bisect_lookups(KEYS, RANDOM_TARGETS[:PURE_TARGETS])

CASES = ([] if _compiled is None else ["pylogq-compiled", "pylogq-compiled-mmap"]) + [
    "pylogq-pure",
    "bisect-list",
]


@pytest.mark.parametrize("name", CASES)
def test_offset_index_lookup(benchmark, name: str, index_mmap: mmap.mmap) -> None:
    benchmark.group = "offset index 10MB"
    targets = RANDOM_TARGETS
    if name.startswith("pylogq-compiled"):
        buf = index_mmap if name.endswith("mmap") else INDEX
        result = benchmark(_lookups, _compiled.offset_index_lookup, buf, targets)
    elif name == "pylogq-pure":
        targets = RANDOM_TARGETS[:PURE_TARGETS]
        result = benchmark(_lookups, index_search._py_offset_index_lookup, INDEX, targets)
    else:
        result = benchmark(_bisect_lookups, KEYS, targets)
    assert result == (EXPECTED_PURE if len(targets) == PURE_TARGETS else EXPECTED)
    benchmark.extra_info.update(items=len(targets), unit="lookups", target=">= 2M lookups/s")
    if name == "bisect-list":
        benchmark.extra_info["peer"] = True
    benchmark.extra_info["implementation"] = name
    benchmark.extra_info["entries"] = ENTRIES
    if benchmark.stats is not None:
        benchmark.extra_info["lookups/s"] = round(len(targets) / benchmark.stats.stats.mean)
