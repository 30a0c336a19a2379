"""Choosing a partition for a record: Kafka's default partitioner.

A record with a key goes to ``(murmur2(key) & 0x7fffffff) % num_partitions``:
the Java client's ``Utils.murmur2`` (MurmurHash2, seed 0x9747b28c, m
0x5bd1e995, r 24, little-endian 4-byte words, result a signed 32-bit int), so
pylogq, the Java client and kafka-python send a key to the same partition.
A record without a key goes to the topic's *sticky* partition (KIP-480):
every keyless record of a batch goes to one partition, and a new batch picks
another one at random among the available partitions, as the Java client's
``StickyPartitionCache`` does. Larger batches, fewer requests.

The other placement hash Kafka uses is here too: Java's ``String.hashCode``
(:func:`java_string_hash`), which places a group in ``__consumer_offsets`` and a
partition on a replica fetcher thread. This is the one module of the murmur2 hash:
the scalar one (the compiled kernel's, or its pure twin here) and the producer's
vectorised :func:`murmur2_many`.
"""

from __future__ import annotations

import random
import struct
import threading
import types
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:
    import numpy as np

from .._speedups import compiled
from ..errors import InvalidArgumentError

__all__ = [
    "StickyPartitioner", "gather", "java_string_hash", "murmur2", "murmur2_many", "partition_for_key", "pure",
    "to_positive",
]

Buffer = Union[bytes, bytearray, memoryview]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def _py_murmur2(data: Buffer) -> int:
    """MurmurHash2 of ``data`` exactly as Java's ``Utils.murmur2``: a signed 32-bit int.

    The pure-Python twin of the compiled ``murmur2`` in ``pylogq._core._offset_map``
    (the hashing kernel), which :data:`murmur2` is when it loads.
    """
    data = bytes(data)
    length = len(data)
    h = (_SEED ^ length) & _MASK
    words = length >> 2
    # The words are little-endian whatever the platform: Java assembles them byte by byte.
    for k in struct.unpack_from("<%dI" % words, data):
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    base = length & ~3
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


#: The pure-Python twin of the compiled kernel's murmur2 (the rest of that kernel's
#: twin, the compaction map's hashes, is pylogq.storage.offset_map's).
pure = types.SimpleNamespace(murmur2=_py_murmur2)

_kernel = compiled("_offset_map") or pure
murmur2: Callable[[Buffer], int] = _kernel.murmur2


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()``: 31-polynomial over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h >= 0x80000000 else h


def gather(seq: Sequence[Any], idx: Any) -> List[Any]:
    """``[seq[i] for i in idx]`` at C speed (``idx`` a sequence of positions or an int array):
    how :func:`murmur2_many` and the producer's bulk path pick records by partition."""
    positions = idx.tolist() if hasattr(idx, "tolist") else list(idx)
    if len(positions) == 1:
        return [seq[positions[0]]]
    if not positions:
        return []
    return list(itemgetter(*positions)(seq))


def murmur2_many(keys: Iterable[Any]) -> np.ndarray:
    """Java's ``Utils.murmur2`` of every key at once: -> int64 array of the signed 32-bit hashes.

    The same function as :func:`murmur2`, vectorised over keys of equal length with
    uint32 numpy arithmetic (which wraps modulo 2**32 as Java's int multiply does);
    keys are grouped by length first. The producer's bulk path partitions with it. numpy is
    imported here, at the first call: a broker that never partitions in bulk starts without it.
    """
    import numpy as np

    m32 = np.uint32(_M)
    keys = keys if isinstance(keys, (list, tuple)) else list(keys)
    n = len(keys)
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    first = int(lengths[0])
    groups: List[Tuple[int, Optional[np.ndarray]]]
    if (lengths == first).all():
        groups = [(first, None)]
    else:
        groups = [(int(length), np.flatnonzero(lengths == length)) for length in np.unique(lengths)]
    with np.errstate(over="ignore"):
        for length, idx in groups:
            chosen = keys if idx is None else gather(keys, idx)
            m = len(chosen)
            raw = np.frombuffer(b"".join(chosen), dtype=np.uint8).reshape(m, length) if length else \
                np.empty((m, 0), dtype=np.uint8)
            h = np.full(m, (_SEED ^ length) & _MASK, dtype=np.uint32)
            words = length >> 2
            if words:
                block = np.ascontiguousarray(raw[:, : words * 4]).view("<u4")
                for j in range(words):
                    k = block[:, j] * m32
                    k ^= k >> np.uint32(24)
                    k *= m32
                    h *= m32
                    h ^= k
            base = words * 4
            tail = length & 3
            if tail == 3:
                h ^= raw[:, base + 2].astype(np.uint32) << np.uint32(16)
            if tail >= 2:
                h ^= raw[:, base + 1].astype(np.uint32) << np.uint32(8)
            if tail >= 1:
                h ^= raw[:, base].astype(np.uint32)
                h *= m32
            h ^= h >> np.uint32(13)
            h *= m32
            h ^= h >> np.uint32(15)
            signed = h.view(np.int32).astype(np.int64)
            if idx is None:
                out[:] = signed
            else:
                out[idx] = signed
    return out


def to_positive(value: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not abs(), which fails for MIN_VALUE)."""
    return value & 0x7FFFFFFF


def partition_for_key(key: Buffer, num_partitions: int) -> int:
    """The partition Kafka's default partitioner gives a keyed record."""
    if num_partitions < 1:
        raise InvalidArgumentError("num_partitions must be an int >= 1, not %r" % (num_partitions,))
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """KIP-480's partitioner for keyless records: one partition per topic until a batch completes.

    ``partition`` returns the topic's current sticky partition (choosing one
    the first time); ``new_batch`` is called when the batch for ``previous``
    is complete and moves the topic to a different partition, unless another
    thread already moved it (then it returns that choice). ``available`` lists
    the partitions whose leader is known; None means all of them. When none
    is available (an empty list) any partition is drawn, as in the Java
    client. Thread-safe: one lock guards the topic -> partition map.
    """

    def __init__(self, rng: Optional[random.Random] = None) -> None:
        self._sticky: Dict[str, int] = {}
        self._lock = threading.Lock()
        self._random = rng or random.Random()

    def partition(self, topic: str, num_partitions: int, available: Optional[Sequence[int]] = None) -> int:
        """The sticky partition for ``topic``; a new one if none is set or it is no longer usable."""
        _check_count(num_partitions)
        with self._lock:
            current = self._sticky.get(topic)
            if current is not None and self._usable(current, num_partitions, available):
                return current
            return self._pick(topic, num_partitions, available, None)

    def new_batch(self, topic: str, num_partitions: int, previous: int,
                  available: Optional[Sequence[int]] = None) -> int:
        """Move ``topic`` off ``previous`` (its batch is complete); -> the new sticky partition."""
        _check_count(num_partitions)
        with self._lock:
            current = self._sticky.get(topic)
            if current is not None and current != previous and self._usable(current, num_partitions, available):
                return current  # another caller already moved on from ``previous``
            return self._pick(topic, num_partitions, available, previous)

    def choose(self, topic: str, key: Optional[Buffer], num_partitions: int,
               available: Optional[Sequence[int]] = None) -> int:
        """The default partitioner: the key's hash for a keyed record, the sticky partition otherwise."""
        if key is not None:
            return partition_for_key(key, num_partitions)
        return self.partition(topic, num_partitions, available)

    @staticmethod
    def _usable(partition: int, num_partitions: int, available: Optional[Sequence[int]]) -> bool:
        if not 0 <= partition < num_partitions:
            return False
        return not available or partition in available

    def _pick(self, topic: str, num_partitions: int, available: Optional[Sequence[int]],
              avoid: Optional[int]) -> int:
        if available is None:
            pool = list(range(num_partitions))
        else:
            pool = [p for p in available if 0 <= p < num_partitions]
        if not pool:
            chosen = self._random.randrange(num_partitions)
        elif len(pool) == 1:
            chosen = pool[0]
        else:
            # StickyPartitionCache draws until the choice differs from the old partition.
            candidates = [p for p in pool if p != avoid] or pool
            chosen = candidates[self._random.randrange(len(candidates))]
        self._sticky[topic] = chosen
        return chosen


def _check_count(num_partitions: int) -> None:
    if num_partitions < 1:
        raise InvalidArgumentError("num_partitions must be an int >= 1, not %r" % (num_partitions,))
