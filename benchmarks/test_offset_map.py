"""Building the compaction offset map: pylogq against a dict of MD5 digests.

Group "offset map build": 1M distinct keys ``b"key-%010d"`` with increasing
offsets, in a map sized so the keys exactly fill its capacity (as a cleaner
fills its map), cleared before every round. Compared: the compiled
``put_columns`` over columnar arrays, the compiled per-key ``put`` loop, the
pure twin (20k keys into a proportionally smaller map) and the peer, a Python
dict of ``hashlib.md5(key).digest() -> offset`` built in a loop (what Kafka's
map stores, the Python way). ``extra_info`` holds keys/s and memory per slot
and per key of capacity. Target: compiled bulk >= 5x the dict peer, with at
most 24 bytes per slot.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import sys
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

from pylogq import _speedups
from pylogq.storage import offset_map

_compiled = (
    None if _speedups.NO_EXTENSIONS else importlib.import_module("pylogq._core._offset_map")
)

KEYS = 1_000_000
PURE_KEYS = 20_000


def _columns(n: int) -> Tuple[List[bytes], bytes, np.ndarray, np.ndarray, np.ndarray]:
    keys = [b"key-%010d" % i for i in range(n)]
    lengths = np.fromiter((len(k) for k in keys), dtype=np.int32, count=n)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    offsets = np.arange(n, dtype=np.int64) * 2 + 100
    return keys, b"".join(keys), starts, lengths, offsets


def _memory_for(n: int) -> int:
    """The smallest map memory whose capacity holds n keys."""
    slots = math.ceil(n / offset_map.LOAD_FACTOR)
    while int(slots * offset_map.LOAD_FACTOR) < n:
        slots += 1
    return slots * offset_map.SLOT_SIZE


@pytest.fixture(scope="module")
def big() -> Tuple[List[bytes], bytes, np.ndarray, np.ndarray, np.ndarray]:
    return _columns(KEYS)


@pytest.fixture(scope="module")
def small() -> Tuple[List[bytes], bytes, np.ndarray, np.ndarray, np.ndarray]:
    return _columns(PURE_KEYS)


def _put_loop(m: Any, keys: List[bytes], offsets: List[int]) -> int:
    put = m.put
    for key, offset in zip(keys, offsets):
        put(key, offset)
    return len(m)


def _md5_dict(keys: List[bytes], offsets: List[int]) -> Dict[bytes, int]:
    md5 = hashlib.md5
    d: Dict[bytes, int] = {}
    for key, offset in zip(keys, offsets):
        d[md5(key).digest()] = offset
    return d


def _dict_bytes(d: Dict[bytes, int]) -> int:
    """Memory of the dict, its digest bytes objects and its int offsets."""
    some_key, some_value = next(iter(d.items()))
    return sys.getsizeof(d) + len(d) * (sys.getsizeof(some_key) + sys.getsizeof(some_value))


CASES = ([] if _compiled is None else ["pylogq-compiled-put_columns", "pylogq-compiled-put"]) + [
    "pylogq-pure-put_columns",
    "dict-md5",
]


@pytest.mark.parametrize("name", CASES)
def test_offset_map_build(benchmark, name: str, big, small) -> None:
    benchmark.group = "offset map build"
    keys, data, starts, lengths, offsets = small if "pure" in name else big
    n = len(keys)
    benchmark.extra_info["implementation"] = name
    benchmark.extra_info["keys"] = n
    benchmark.extra_info.update(items=n, unit="keys", target=">= 5x dict of MD5 digests; <= 24 B/entry")
    if name == "dict-md5":
        benchmark.extra_info["peer"] = True
    if name == "dict-md5":
        offset_list = offsets.tolist()
        d = benchmark(_md5_dict, keys, offset_list)
        assert len(d) == n and d[hashlib.md5(keys[-1]).digest()] == offset_list[-1]
        benchmark.extra_info["bytes/key"] = round(_dict_bytes(d) / n, 1)
    else:
        cls = _compiled.OffsetMap if "compiled" in name else offset_map._PyOffsetMap
        m = cls(_memory_for(n))
        assert m.capacity == n
        if name.endswith("put_columns"):
            args: Tuple[Any, ...] = (data, starts, lengths, offsets)
            run = m.put_columns
        else:
            args = (m, keys, offsets.tolist())
            run = _put_loop
        result = benchmark.pedantic(
            run, args=args, setup=m.clear, rounds=3 if "pure" in name else 5, iterations=1
        )
        assert result == n
        assert len(m) == n and m.get(keys[-1]) == int(offsets[-1])
        benchmark.extra_info["memory/slots"] = m.memory / m.slots
        benchmark.extra_info["memory/capacity"] = round(m.memory / m.capacity, 2)
        benchmark.extra_info["collision_rate"] = round(m.collision_rate, 2)
    if benchmark.stats is not None:
        benchmark.extra_info["keys/s"] = round(n / benchmark.stats.stats.mean)
