"""Key hashing against the Java client's vectors and kafka-python; the sticky partitioner."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from pylogq.cluster.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

# org.apache.kafka.common.utils.UtilsTest.testMurmur2: values of the original C++ implementation.
JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


def signed32(value):
    return value - (1 << 32) if value & 0x80000000 else value


def random_keys(n, seed):
    rng = random.Random(seed)
    return [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 100))) for _ in range(n)]


@pytest.mark.parametrize("key, expected", JAVA_VECTORS)
def test_java_vectors(key, expected):
    assert murmur2(key) == expected
    assert murmur2(bytearray(key)) == expected
    assert murmur2(memoryview(key)) == expected


def test_result_is_a_signed_32_bit_int():
    values = [murmur2(k) for k in random_keys(2000, 1)]
    assert all(-(1 << 31) <= v < (1 << 31) for v in values)
    assert any(v < 0 for v in values) and any(v > 0 for v in values)


def test_equals_kafka_python_for_10000_random_keys():
    # kafka-python 3 returns the same 32 bits unsigned; Java's int is their signed reading.
    for key in random_keys(10_000, 2):
        assert murmur2(key) == signed32(kafka_python_murmur2(key)), key


@given(st.binary(max_size=300))
def test_equals_kafka_python_property(key):
    assert murmur2(key) == signed32(kafka_python_murmur2(key))


class _Cluster:
    """The part of kafka-python's ClusterMetadata its partitioners use."""

    def __init__(self, topic, n):
        self.topic, self.n = topic, n

    def topics(self):
        return {self.topic}

    def partitions_for_topic(self, topic):
        return set(range(self.n))

    def available_partitions_for_topic(self, topic):
        return set(range(self.n))


@pytest.mark.parametrize("num_partitions", [1, 3, 7, 12, 100])
def test_partition_for_key_equals_kafka_pythons_default_partitioner(num_partitions):
    theirs = DefaultPartitioner()
    cluster = _Cluster("t", num_partitions)
    for key in random_keys(2000, num_partitions):
        expected = theirs.partition("t", key, key, None, None, cluster)
        assert partition_for_key(key, num_partitions) == expected


def test_partition_for_key_10000_keys_against_kafka_python():
    theirs = DefaultPartitioner()
    rng = random.Random(3)
    for key in random_keys(10_000, 4):
        n = rng.randint(1, 64)
        assert partition_for_key(key, n) == theirs.partition("t", key, key, None, None, _Cluster("t", n))


def test_to_positive_clears_the_sign_bit():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(5) == 5
    # A key whose hash is negative still maps into range.
    key = b"foobar"
    assert murmur2(key) < 0
    assert partition_for_key(key, 10) == (murmur2(key) & 0x7FFFFFFF) % 10


def test_partition_for_key_rejects_no_partitions():
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for_key(b"k", 0)


def test_sticky_partition_stays_until_a_new_batch():
    sp = StickyPartitioner(random.Random(5))
    first = sp.partition("t", 8)
    assert all(sp.partition("t", 8) == first for _ in range(100))
    nxt = sp.new_batch("t", 8, first)
    assert nxt != first and 0 <= nxt < 8
    assert sp.partition("t", 8) == nxt


def test_sticky_is_per_topic_and_spreads_over_partitions():
    sp = StickyPartitioner(random.Random(6))
    seen = Counter()
    current = sp.partition("t", 4)
    for _ in range(4000):
        seen[current] += 1
        current = sp.new_batch("t", 4, current)
    assert set(seen) == {0, 1, 2, 3}
    assert min(seen.values()) > 800  # uniform among the three others each time
    other = sp.partition("u", 4)
    assert sp.partition("t", 4) == current and sp.partition("u", 4) == other


def test_new_batch_with_one_partition_keeps_it():
    sp = StickyPartitioner()
    assert sp.partition("t", 1) == 0
    assert sp.new_batch("t", 1, 0) == 0


def test_available_partitions_are_respected():
    sp = StickyPartitioner(random.Random(7))
    for _ in range(200):
        p = sp.new_batch("t", 10, sp.partition("t", 10, [2, 5]), available=[2, 5])
        assert p in (2, 5)
    assert sp.new_batch("t", 10, 2, available=[2, 5]) in (2, 5)
    # The sticky partition lost its leader: the next call moves to an available one.
    sp2 = StickyPartitioner(random.Random(8))
    current = sp2.partition("t", 10, [3])
    assert current == 3
    assert sp2.partition("t", 10, [4, 6]) in (4, 6)
    # No partition available: any partition, as the Java client does.
    assert 0 <= sp2.new_batch("t", 10, 4, available=[]) < 10


def test_topic_shrink_or_growth_is_handled():
    sp = StickyPartitioner(random.Random(9))
    sp._sticky["t"] = 9
    assert 0 <= sp.partition("t", 4) < 4


def test_stale_new_batch_does_not_move_again():
    sp = StickyPartitioner(random.Random(10))
    first = sp.partition("t", 6)
    moved = sp.new_batch("t", 6, first)
    # A second report about the old partition (another thread's batch) keeps the new choice.
    assert sp.new_batch("t", 6, first) == moved


def test_choose_hashes_keys_and_sticks_null_keys():
    sp = StickyPartitioner(random.Random(11))
    assert sp.choose("t", b"foobar", 10) == partition_for_key(b"foobar", 10)
    sticky = sp.choose("t", None, 10)
    assert sp.choose("t", None, 10) == sticky


def test_thread_safety_under_concurrent_new_batches():
    sp = StickyPartitioner()
    errors = []
    start = threading.Barrier(4)

    def worker():
        start.wait()
        try:
            for _ in range(2000):
                p = sp.partition("t", 5)
                q = sp.new_batch("t", 5, p)
                assert 0 <= q < 5
        except Exception as exc:  # collected for the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive()
    assert errors == []
    assert 0 <= sp.partition("t", 5) < 5


def test_bad_partition_counts():
    sp = StickyPartitioner()
    with pytest.raises(ValueError):
        sp.partition("t", 0)
    with pytest.raises(ValueError):
        sp.new_batch("t", 0, 0)


def test_the_compiled_murmur2_is_in_use_and_equals_the_twin():
    import os

    from pylogq import _speedups
    from pylogq.cluster import partitioner

    if _speedups.NO_EXTENSIONS:
        assert partitioner.murmur2 is partitioner._py_murmur2
        return
    from pylogq._core import _offset_map

    assert partitioner.murmur2 is _offset_map.murmur2
    for n in range(0, 64):
        for _ in range(10):
            data = os.urandom(n)
            assert _offset_map.murmur2(data) == partitioner._py_murmur2(data)
    assert _offset_map.murmur2(bytearray(b"abc")) == partitioner._py_murmur2(b"abc")
