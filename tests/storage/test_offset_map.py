"""The compaction offset map and its MurmurHash3 digests, on both implementations."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq import _speedups
from pylogq.errors import IllegalStateError, InvalidArgumentError, InvalidArgumentTypeError, OffsetMapFullError
from pylogq.storage import offset_map

from .._argument_errors import check_raised

try:
    import mmh3
except ImportError:
    mmh3 = None

IMPLS = ["pure"] if _speedups.NO_EXTENSIONS else ["compiled", "pure"]


def _pure():
    return SimpleNamespace(
        OffsetMap=offset_map._PyOffsetMap,
        key_digest=offset_map._py_key_digest,
        murmur3_x64_128=offset_map._py_murmur3_x64_128,
    )


def _compiled():
    # A compiled module that does not import is a failure here, not a skip.
    return importlib.import_module("pylogq._core._offset_map")


@pytest.fixture(scope="module", params=IMPLS)
def impl(request):
    return _pure() if request.param == "pure" else _compiled()


def test_public_module_uses_the_compiled_kernel_unless_disabled():
    expected = _pure() if _speedups.NO_EXTENSIONS else _compiled()
    assert offset_map.OffsetMap is expected.OffsetMap
    assert offset_map.key_digest is expected.key_digest
    assert offset_map.murmur3_x64_128 is expected.murmur3_x64_128


# mmh3.hash_bytes(bytes(range(n))) for n = 0..40: every tail length, one and two blocks.
GOLDEN_PREFIXES = [
    "00000000000000000000000000000000",
    "b55cff6ee5ab10468335f878aa2d6251",
    "4c26ab8dc5f5b37c44e0c26e32013cf0",
    "bee653ef2fa172b8b696b352c25562fb",
    "10afdf0dae94c5e1e2fdc213bd05d6d3",
    "3640f9a6d48cee41f6230c635e15d0f8",
    "3c04f5a4bb3a9866a02c51160b24e057",
    "680d4bca87694cbd87c725bdd4dd3a61",
    "c82f8ed6bde1a747c7dc31ec02eee660",
    "322d816e0fcbb4fbb9ff00021d75de78",
    "63e4589ee825cacf7620ad72c4134325",
    "884f56c7474f7bc5b01b71208dea6569",
    "caa51292e6a75db34653f7ec46f17580",
    "c2415fc5f2d9524bfcd8a6af9e86ff84",
    "646d9035ee33a95fdfc90f387325780d",
    "e92549fd98152347e97dc688ee6d84cd",
    "303f9091b524494445e82f76566490ab",
    "0ec2e79f0ff4765c24a8da9e6b025fc1",
    "7bc4e9bad1e448165febb90b188426ce",
    "6301a36455a465a6dc1faebf60794f95",
    "4b9536577053d2a37a9c7b6c25061f5a",
    "0312d428a03dd1cdcbe7a22dfc0ec56b",
    "712ac127bff3f84562561e6073a33017",
    "db8135156f37a1b941492ab4931c4526",
    "dedfb27562844e73529efbbbab7e7094",
    "cb82e92eb57cbe3bfc9fefbe3354d3a2",
    "726f2202fedc15a5787dc4fcdc680c2e",
    "ed2e594d8802161119b51ddc48197428",
    "3c8105ee62ff14dc8bcb6745bb502066",
    "1acf1815b194e4aa76e1cf8cf7129e64",
    "e301a2380d0869f0196bd2e37f68f322",
    "94d02ca3e1d33d05905400b4ef9ae59e",
    "0f502fb622906dc65111c3346e0a051c",
    "1246bafa1b28417d0ba3d6a77380ac55",
    "c37dba8a273f51b0c2ea8703f617bed9",
    "cea7543bc072117910403edae512d8bc",
    "303656299a05332052bfd5bd6a3ec2d9",
    "20d802dd5ead7451b0cd03c799538480",
    "14cb167d5b641b681a1fa0bf98bf121e",
    "c0a0ad8bf4cc60196735a175955a2f1b",
    "64808c41d854a0c3ad124c9730ca01a0",
]

GOLDEN_KEYS = {
    b"a": "897859f6655555855a890e51483ab5e6",
    b"hello": "029bbd41b3a7d8cb191dae486a901e5b",
    b"key-0000000042": "700df5f104d70336ecbc2ac075379de7",
    b"The quick brown fox jumps over the lazy dog": "6c1b07bc7bbc4be347939ac4a93c437a",
    bytes(i % 251 for i in range(1024)): "47db36fd76caf30a593eedf2ed69b8e4",
}


@pytest.mark.parametrize("n", range(len(GOLDEN_PREFIXES)))
def test_murmur3_golden_every_tail_length(impl, n):
    key = bytes(range(n))
    assert impl.murmur3_x64_128(key).hex() == GOLDEN_PREFIXES[n]
    if n:
        assert impl.key_digest(key).hex() == GOLDEN_PREFIXES[n]


@pytest.mark.parametrize("key", list(GOLDEN_KEYS), ids=lambda k: "len%d" % len(k))
def test_murmur3_golden_keys(impl, key):
    assert impl.murmur3_x64_128(key).hex() == GOLDEN_KEYS[key]
    assert impl.key_digest(key).hex() == GOLDEN_KEYS[key]
    assert impl.OffsetMap(240).digest(key).hex() == GOLDEN_KEYS[key]
    for kind in (bytearray, memoryview, lambda k: np.frombuffer(k, dtype=np.uint8)):
        assert impl.key_digest(kind(key)).hex() == GOLDEN_KEYS[key]


if mmh3 is not None:
    # mmh3 is an optional test-only reference; the golden vectors above always run.

    @settings(max_examples=300, deadline=None)
    @given(key=st.binary(max_size=80), seed=st.integers(0, 2**32 - 1))
    def test_murmur3_matches_mmh3(impl, key, seed):
        assert impl.murmur3_x64_128(key, seed) == mmh3.hash_bytes(key, seed)
        assert impl.murmur3_x64_128(key) == mmh3.hash_bytes(key)


def test_all_zero_digest_gets_its_lowest_bit_set(impl):
    assert impl.murmur3_x64_128(b"") == bytes(16)
    assert impl.key_digest(b"") == b"\x01" + bytes(15)
    m = impl.OffsetMap(24 * 10)
    assert m.get(b"") == -1
    m.put(b"", 7)
    assert m.get(b"") == 7
    assert len(m) == 1
    m.put(b"", 9)
    assert (m.get(b""), len(m)) == (9, 1)


def test_geometry(impl):
    m = impl.OffsetMap(1000)
    assert (m.slots, m.capacity, m.memory) == (41, 36, 984)
    assert (len(m), m.size, m.utilization, m.latest_offset) == (0, 0, 0.0, -1)
    assert impl.OffsetMap(24).capacity == 0
    assert impl.OffsetMap(24 * 10).capacity == 9
    big = impl.OffsetMap(24 * 1_000_000)
    assert (big.slots, big.capacity, big.memory) == (1_000_000, 900_000, 24_000_000)


def test_bad_memory(impl):
    with pytest.raises(ValueError, match="not 23$"):
        impl.OffsetMap(23)
    with pytest.raises(ValueError, match="not -5$"):
        impl.OffsetMap(-5)
    with pytest.raises(TypeError):
        impl.OffsetMap(1000.0)


def test_put_get_update_and_stats(impl):
    m = impl.OffsetMap(24 * 100)
    for i in range(50):
        m.put(b"key-%d" % i, 1000 + i)
    assert len(m) == 50 and m.size == 50
    assert m.utilization == 0.5
    assert m.latest_offset == 1049
    assert m.get(b"key-7") == 1007
    assert m.get(b"absent") == -1
    m.put(b"key-7", 5)
    assert m.get(b"key-7") == 5
    assert m.latest_offset == 1049
    assert len(m) == 50
    assert m.lookups == 54
    assert m.probes >= m.lookups
    assert m.collision_rate == (m.probes - m.lookups) / m.lookups
    m.clear()
    assert (len(m), m.latest_offset, m.lookups, m.probes, m.collision_rate) == (0, -1, 0, 0, 0.0)
    assert m.get(b"key-7") == -1


def test_bad_put_arguments(impl):
    m = impl.OffsetMap(240)
    with pytest.raises(ValueError, match=r"offset must be an int in \[0, 2\*\*63-1\], not -1"):
        m.put(b"k", -1)
    with pytest.raises(ValueError, match="not %d" % 2**63):
        m.put(b"k", 2**63)
    with pytest.raises(TypeError):
        m.put("text", 1)
    with pytest.raises(TypeError):
        m.put(None, 1)
    with pytest.raises(TypeError):
        m.put(b"k", 1.0)
    with pytest.raises(TypeError):
        m.get(None)
    assert len(m) == 0


def test_non_contiguous_buffers_are_rejected(impl):
    # The kernel takes buffers as PyBUF_SIMPLE; the exporter names the error
    # (numpy ValueError, memoryview BufferError).
    strided = np.arange(10, dtype=np.uint8)[::2]
    m = impl.OffsetMap(240)
    for call in (impl.key_digest, impl.murmur3_x64_128, m.get, lambda k: m.put(k, 1)):
        with pytest.raises((BufferError, ValueError)):
            call(strided)
        with pytest.raises(BufferError):
            call(memoryview(bytes(10))[::2])
    ks, kl, offs = np.zeros(1, np.int64), np.ones(1, np.int32), np.zeros(1, np.int64)
    with pytest.raises(BufferError):
        m.put_columns(memoryview(bytes(10))[::2], ks, kl, offs)
    assert len(m) == 0


def test_full_map(impl):
    m = impl.OffsetMap(24 * 20)
    keys = [b"k%03d" % i for i in range(m.capacity)]
    for i, k in enumerate(keys):
        m.put(k, i)
    assert len(m) == m.capacity == 18
    with pytest.raises(OffsetMapFullError, match="18 keys in 20 slots"):
        m.put(b"one-too-many", 99)
    assert m.get(b"one-too-many") == -1
    assert len(m) == 18 and m.latest_offset == 17
    m.put(keys[3], 500)
    assert m.get(keys[3]) == 500 and m.latest_offset == 500
    for i in range(100):
        assert m.get(b"absent-%d" % i) == -1
    m.clear()
    m.put(b"one-too-many", 1)
    assert m.get(b"one-too-many") == 1


def test_zero_capacity_map(impl):
    m = impl.OffsetMap(24)
    with pytest.raises(OffsetMapFullError):
        m.put(b"a", 1)
    assert m.get(b"a") == -1


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.binary(max_size=3), st.integers(0, 2**63 - 1)),
        st.tuples(st.just("get"), st.binary(max_size=3), st.just(0)),
        st.tuples(st.just("clear"), st.just(b""), st.just(0)),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(slots=st.integers(1, 24), ops=OPS)
def test_model_against_a_dict(impl, slots, ops):
    m = impl.OffsetMap(24 * slots)
    capacity = int(slots * 0.9)
    model = {}
    latest = -1
    for op, key, offset in ops:
        if op == "put":
            if key in model or len(model) < capacity:
                m.put(key, offset)
                model[key] = offset
                latest = max(latest, offset)
            else:
                with pytest.raises(OffsetMapFullError):
                    m.put(key, offset)
        elif op == "get":
            assert m.get(key) == model.get(key, -1)
        else:
            m.clear()
            model.clear()
            latest = -1
        assert len(m) == len(model)
        assert m.latest_offset == latest
    for key, offset in model.items():
        assert m.get(key) == offset


def columns(keys, offsets):
    """(data, key_start, key_length, offsets) for a list of keys (None for a null key)."""
    data = b"".join(k for k in keys if k is not None)
    starts, lengths, pos = [], [], 0
    for k in keys:
        if k is None:
            starts.append(0)
            lengths.append(-1)
        else:
            starts.append(pos)
            lengths.append(len(k))
            pos += len(k)
    return (
        data,
        np.array(starts, dtype=np.int64),
        np.array(lengths, dtype=np.int32),
        np.array(offsets, dtype=np.int64),
    )


def put_loop(m, keys, offsets, start, stop):
    """Put rows start:stop one by one as put_columns should; the rows consumed."""
    for row in range(start, stop):
        if keys[row] is None:
            continue
        try:
            m.put(keys[row], offsets[row])
        except OffsetMapFullError:
            return row - start
    return stop - start


def state(m, keys):
    return (
        len(m),
        m.latest_offset,
        m.lookups,
        m.probes,
        [m.get(k) for k in keys if k is not None],
    )


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.one_of(st.none(), st.binary(max_size=20)), max_size=80),
    slots=st.integers(1, 120),
    data=st.data(),
)
def test_put_columns_equals_a_loop_of_put(impl, keys, slots, data):
    offsets = data.draw(st.lists(st.integers(0, 2**40), min_size=len(keys), max_size=len(keys)))
    start = data.draw(st.integers(0, len(keys)))
    stop = data.draw(st.one_of(st.none(), st.integers(start, len(keys))))
    bulk, loop = impl.OffsetMap(24 * slots), impl.OffsetMap(24 * slots)
    end = len(keys) if stop is None else stop
    consumed = bulk.put_columns(*columns(keys, offsets), start=start, stop=stop)
    assert consumed == put_loop(loop, keys, offsets, start, end)
    assert state(bulk, keys) == state(loop, keys)


def test_put_columns_large_batch_and_resume(impl):
    # Above the no-GIL threshold, with duplicates, null keys and a map that fills.
    n = 6000
    keys = [None if i % 17 == 0 else b"key-%06d" % (i % 4000) for i in range(n)]
    offsets = list(range(n))
    cols = columns(keys, offsets)
    m = impl.OffsetMap(24 * 3000)
    consumed = m.put_columns(*cols)
    assert len(m) == m.capacity == 2700
    assert 0 < consumed < n
    loop = impl.OffsetMap(24 * 3000)
    assert put_loop(loop, keys, offsets, 0, n) == consumed
    assert state(m, keys) == state(loop, keys)
    # A cleaner resumes from where the map filled, with an emptied map.
    m.clear()
    rest = m.put_columns(*cols, start=consumed)
    assert 0 < rest < n - consumed
    loop.clear()
    assert put_loop(loop, keys, offsets, consumed, n) == rest
    assert state(m, keys) == state(loop, keys)
    assert m.get(keys[consumed]) == consumed


def test_put_columns_all_null_and_empty(impl):
    m = impl.OffsetMap(240)
    assert m.put_columns(*columns([None, None], [1, 2])) == 2
    assert len(m) == 0 and m.latest_offset == -1
    assert m.put_columns(*columns([], [])) == 0
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64))
    assert m.put_columns(b"", *empty) == 0


def test_put_columns_accepts_any_data_buffer(impl):
    keys = [b"alpha", b"beta", b"gamma"]
    data, ks, kl, offs = columns(keys, [1, 2, 3])
    for buf in (bytearray(data), memoryview(data), np.frombuffer(data, dtype=np.uint8)):
        m = impl.OffsetMap(240)
        assert m.put_columns(buf, ks, kl, offs) == 3
        assert [m.get(k) for k in keys] == [1, 2, 3]


def test_put_columns_bad_arrays(impl):
    data, ks, kl, offs = columns([b"ab", b"cd", b"ef"], [1, 2, 3])
    m = impl.OffsetMap(240)
    with pytest.raises(ValueError, match="key_start"):
        m.put_columns(data, ks.astype(np.int32), kl, offs)
    with pytest.raises(ValueError, match="key_start"):
        m.put_columns(data, ks.astype(np.uint64), kl, offs)
    with pytest.raises(ValueError, match="key_length"):
        m.put_columns(data, ks, kl.astype(np.int64), offs)
    with pytest.raises(ValueError, match="offsets"):
        m.put_columns(data, ks, kl, offs.astype(np.float64))
    with pytest.raises(ValueError, match="offsets"):
        m.put_columns(data, ks, kl, [1, 2, 3])
    with pytest.raises(ValueError, match="key_start"):
        m.put_columns(data, np.zeros((3, 1), np.int64), kl, offs)
    with pytest.raises(ValueError, match="key_start"):
        m.put_columns(data, np.zeros(6, np.int64)[::2], kl, offs)
    with pytest.raises(ValueError, match="key_start 3, key_length 2, offsets 3"):
        m.put_columns(data, ks, kl[:2], offs)
    with pytest.raises(ValueError, match="stop <= 3 .*, not 2 and 1"):
        m.put_columns(data, ks, kl, offs, start=2, stop=1)
    with pytest.raises(ValueError, match="stop <= 3 .*, not 0 and 4"):
        m.put_columns(data, ks, kl, offs, stop=4)
    with pytest.raises(ValueError, match="stop <= 3 .*, not -1 and None"):
        m.put_columns(data, ks, kl, offs, start=-1)
    with pytest.raises(TypeError):
        m.put_columns(None, ks, kl, offs)
    assert len(m) == 0 and m.lookups == 0


@pytest.mark.parametrize(
    "row, field, value, message",
    [
        (2, "kl", 3, r"row 2: key bytes \[4, 7\) lie outside data of 6 bytes"),
        (1, "ks", 5, r"row 1: key bytes \[5, 7\) lie outside data of 6 bytes"),
        (1, "ks", -1, r"row 1: key bytes \[-1, 1\) lie outside"),
        (0, "ks", 2**62, r"row 0: key bytes \[%d, " % 2**62),
        (2, "kl", -2, r"row 2: key_length -2 is invalid"),
        (1, "offs", -4, r"row 1: offset -4 is negative"),
    ],
)
def test_put_columns_bad_row_changes_nothing(impl, row, field, value, message):
    data, ks, kl, offs = columns([b"ab", b"cd", b"ef"], [1, 2, 3])
    {"ks": ks, "kl": kl, "offs": offs}[field][row] = value
    m = impl.OffsetMap(240)
    with pytest.raises(ValueError, match=message):
        m.put_columns(data, ks, kl, offs)
    assert (len(m), m.lookups, m.latest_offset) == (0, 0, -1)
    # rows outside start:stop are not checked
    assert m.put_columns(data, ks, kl, offs, start=0, stop=row) == row


if not _speedups.NO_EXTENSIONS:
    # Only with the compiled kernel: it is compared with its twin.

    @settings(max_examples=100, deadline=None)
    @given(keys=st.lists(st.binary(max_size=40), max_size=60), slots=st.integers(1, 80))
    def test_compiled_and_pure_agree_on_digests_and_probes(keys, slots):
        pure, comp = _pure(), _compiled()
        a, b = pure.OffsetMap(24 * slots), comp.OffsetMap(24 * slots)
        for i, k in enumerate(keys):
            assert pure.key_digest(k) == comp.key_digest(k)
            for m in (a, b):
                try:
                    m.put(k, i)
                except OffsetMapFullError:
                    pass
        assert state(a, keys) == state(b, keys)


def test_put_batches_maps_every_keyed_record_of_a_buffer(impl):
    from pylogq import records
    from pylogq.storage.offset_map import put_batches

    keys = [b"user-%d" % (i % 50) for i in range(300)]
    keys[7] = None  # records without a key are not mapped
    buf = b""
    for start, codec in ((0, "none"), (100, "zstd"), (200, "lz4")):
        batch = records.build_batch([b"v"] * 100, keys=keys[start : start + 100], timestamps=0,
                                    compression_type=codec, base_offset=start)
        buf += bytes(batch)
    m = impl.OffsetMap(24 * 100)
    assert put_batches(m, buf) == 300
    assert len(m) == 50
    for k in range(50):
        assert m.get(b"user-%d" % k) == max(i for i in range(300) if keys[i] == b"user-%d" % k)
    assert m.latest_offset == 299


def test_put_batches_reports_where_a_full_map_stopped(impl):
    from pylogq import records
    from pylogq.storage.offset_map import put_batches

    batch = bytes(records.build_batch([b"v"] * 20, keys=[b"k%d" % i for i in range(20)], timestamps=0, base_offset=40))
    m = impl.OffsetMap(24 * 10)  # capacity 9
    assert put_batches(m, batch) == 49
    assert len(m) == 9 and m.get(b"k8") == 48 and m.get(b"k9") == -1
    assert put_batches(impl.OffsetMap(240), batch, start_offset=100) == 100


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.one_of(st.none(), st.binary(max_size=20)), max_size=60),
    probe=st.lists(st.one_of(st.none(), st.binary(max_size=20)), max_size=60),
    slots=st.integers(1, 80),
)
def test_get_columns_equals_a_loop_of_get(impl, keys, probe, slots):
    m = impl.OffsetMap(24 * slots)
    for i, k in enumerate(keys):
        if k is not None and (len(m) < m.capacity or m.get(k) != -1):
            m.put(k, i * 3)
    data = b"".join(k for k in probe if k is not None)
    starts, lengths, pos = [], [], 0
    for k in probe:
        starts.append(pos)
        lengths.append(-1 if k is None else len(k))
        pos += 0 if k is None else len(k)
    got = m.get_columns(data, np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int32))
    assert got.dtype == np.int64
    assert got.tolist() == [-1 if k is None else m.get(k) for k in probe]


def test_get_columns_large_batch(impl):
    n = 3000 if impl.OffsetMap is offset_map._PyOffsetMap else 20000
    keys = [b"key-%08d" % i for i in range(n)]
    data = b"".join(keys)
    lengths = np.full(n, 12, dtype=np.int32)
    starts = np.arange(n, dtype=np.int64) * 12
    m = impl.OffsetMap(24 * 2 * n)
    assert m.put_columns(data, starts[::2].copy(), lengths[::2].copy(), np.arange(0, n, 2, dtype=np.int64)) == (n + 1) // 2
    got = m.get_columns(memoryview(data), starts, lengths)
    expected = np.where(np.arange(n) % 2 == 0, np.arange(n), -1)
    assert np.array_equal(got, expected)


@pytest.mark.parametrize(
    "starts, lengths, message",
    [
        ([0, 5], [3, -2], "row 1: key_length -2 is invalid"),
        ([0, 8], [3, 4], r"row 1: key bytes \[8, 12\) lie outside data of 10 bytes"),
        ([0], [3, 4], "columns differ in length"),
    ],
)
def test_get_columns_bad_rows(impl, starts, lengths, message):
    m = impl.OffsetMap(240)
    with pytest.raises(ValueError, match=message):
        m.get_columns(b"0123456789", np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int32))
    with pytest.raises(ValueError, match="key_start must be a contiguous 1-D int64 array"):
        m.get_columns(b"0123456789", np.array(starts, dtype=np.int32), np.array(lengths, dtype=np.int32))


# ------------------------------------------------------------------ error classes




@pytest.mark.parametrize(
    "memory, cls, builtin, shown",
    [
        (23, InvalidArgumentError, ValueError, ("memory", "not 23")),
        (-5, InvalidArgumentError, ValueError, ("memory", "not -5")),
        (2**62 + 1, InvalidArgumentError, ValueError, ("memory", "not %d" % (2**62 + 1))),
        (1000.0, InvalidArgumentTypeError, TypeError, ("memory", "not 1000.0")),
        (True, InvalidArgumentTypeError, TypeError, ("memory", "not True")),
        ("1000", InvalidArgumentTypeError, TypeError, ("memory", "not '1000'")),
    ],
)
def test_bad_memory_error_class(impl, memory, cls, builtin, shown):
    with pytest.raises(builtin) as raised:
        impl.OffsetMap(memory)
    check_raised(raised, cls, builtin, *shown)


def test_bad_put_get_error_classes(impl):
    m = impl.OffsetMap(240)
    for offset in (-1, 2**63, -(2**63) - 1):
        with pytest.raises(ValueError) as raised:
            m.put(b"k", offset)
        check_raised(raised, InvalidArgumentError, ValueError, "offset", "not %d" % offset)
    for offset, shown in ((1.0, "not 1.0"), ("1", "not '1'"), (None, "not None")):
        with pytest.raises(TypeError) as raised:
            m.put(b"k", offset)
        check_raised(raised, InvalidArgumentTypeError, TypeError, "offset", shown)
    for key, shown in (("text", "not str"), (None, "not NoneType"), (7, "not int")):
        with pytest.raises(TypeError) as raised:
            m.put(key, 1)
        check_raised(raised, InvalidArgumentTypeError, TypeError, "key", shown)
        with pytest.raises(TypeError) as raised:
            m.get(key)
        check_raised(raised, InvalidArgumentTypeError, TypeError, "key", shown)
        with pytest.raises(TypeError) as raised:
            m.digest(key)
        check_raised(raised, InvalidArgumentTypeError, TypeError, "key", shown)
        with pytest.raises(TypeError) as raised:
            impl.key_digest(key)
        check_raised(raised, InvalidArgumentTypeError, TypeError, "key", shown)
    assert len(m) == 0 and m.latest_offset == -1


def test_bad_murmur3_arguments_error_classes(impl):
    for seed in (-1, 2**32):
        with pytest.raises(ValueError) as raised:
            impl.murmur3_x64_128(b"k", seed)
        check_raised(raised, InvalidArgumentError, ValueError, "seed", "not %d" % seed)
    with pytest.raises(TypeError) as raised:
        impl.murmur3_x64_128(b"k", 1.5)
    check_raised(raised, InvalidArgumentTypeError, TypeError, "seed", "not 1.5")
    with pytest.raises(TypeError) as raised:
        impl.murmur3_x64_128("text")
    check_raised(raised, InvalidArgumentTypeError, TypeError, "data", "not str")
    assert impl.murmur3_x64_128(b"k", 2**32 - 1) == impl.murmur3_x64_128(b"k", np.uint32(2**32 - 1))


def test_bad_columns_error_classes(impl):
    data, ks, kl, offs = columns([b"ab", b"cd", b"ef"], [1, 2, 3])
    m = impl.OffsetMap(240)
    bad_columns = [
        ((data, ks.astype(np.int32), kl, offs), "key_start", "int64", "ndarray"),
        ((data, ks, kl.astype(np.int64), offs), "key_length", "int32", "ndarray"),
        ((data, ks, kl, [1, 2, 3]), "offsets", "int64", "list"),
        ((data, ks, kl, None), "offsets", "int64", "NoneType"),
        ((data, np.zeros((3, 1), np.int64), kl, offs), "key_start", "int64", "ndarray"),
        ((data, np.zeros(6, np.int64)[::2], kl, offs), "key_start", "int64", "ndarray"),
    ]
    for args, name, dtype, shown in bad_columns:
        with pytest.raises(TypeError) as raised:
            m.put_columns(*args)
        check_raised(raised, InvalidArgumentTypeError, ValueError, "%s must be a contiguous 1-D %s array, not %s" % (name, dtype, shown))
        if name != "offsets":
            with pytest.raises(ValueError) as raised:
                m.get_columns(*args[:3])
            check_raised(raised, InvalidArgumentTypeError, TypeError, name, shown)
    with pytest.raises(ValueError) as raised:
        m.put_columns(data, ks, kl[:2], offs)
    check_raised(raised, InvalidArgumentError, ValueError, "key_start 3, key_length 2, offsets 3")
    with pytest.raises(ValueError) as raised:
        m.get_columns(data, ks, kl[:2])
    check_raised(raised, InvalidArgumentError, ValueError, "key_start 3, key_length 2")
    for start, stop in ((2, 1), (0, 4), (-1, None), (2**64, None), (0, -(2**64))):
        with pytest.raises(ValueError) as raised:
            m.put_columns(data, ks, kl, offs, start=start, stop=stop)
        check_raised(raised, InvalidArgumentError, ValueError, "start", "stop", "not %r and %r" % (start, stop))
    for kwargs, name, shown in (({"start": 1.0}, "start", "not 1.0"), ({"stop": "3"}, "stop", "not '3'")):
        with pytest.raises(TypeError) as raised:
            m.put_columns(data, ks, kl, offs, **kwargs)
        check_raised(raised, InvalidArgumentTypeError, TypeError, name, shown)
    for call in (lambda d: m.put_columns(d, ks, kl, offs), lambda d: m.get_columns(d, ks, kl)):
        with pytest.raises(TypeError) as raised:
            call("abcdef")
        check_raised(raised, InvalidArgumentTypeError, TypeError, "data", "not str")
    assert len(m) == 0 and m.lookups == 0


@pytest.mark.parametrize(
    "row, field, value, shown",
    [
        (2, "kl", 3, "row 2: key bytes [4, 7)"),
        (1, "ks", -1, "row 1: key bytes [-1, 1)"),
        (2, "kl", -2, "row 2: key_length -2"),
        (1, "offs", -4, "row 1: offset -4"),
    ],
)
def test_bad_rows_error_class(impl, row, field, value, shown):
    data, ks, kl, offs = columns([b"ab", b"cd", b"ef"], [1, 2, 3])
    {"ks": ks, "kl": kl, "offs": offs}[field][row] = value
    m = impl.OffsetMap(240)
    with pytest.raises(ValueError) as raised:
        m.put_columns(data, ks, kl, offs)
    check_raised(raised, InvalidArgumentError, ValueError, shown)
    if field != "offs":
        with pytest.raises(ValueError) as raised:
            m.get_columns(data, ks, kl)
        check_raised(raised, InvalidArgumentError, ValueError, shown)


def test_full_map_keeps_its_class(impl):
    m = impl.OffsetMap(24)
    with pytest.raises(OffsetMapFullError) as raised:
        m.put(b"a", 1)
    assert not isinstance(raised.value, (ValueError, TypeError))


if not _speedups.NO_EXTENSIONS:
    # Only the compiled map releases the GIL, so only it can be called while busy.

    def test_busy_map_raises_illegal_state():
        import threading

        n = 400_000
        data = b"k" * (8 * n)
        ks = np.arange(n, dtype=np.int64) * 8
        kl = np.full(n, 8, dtype=np.int32)
        offs = np.arange(n, dtype=np.int64)
        m = _compiled().OffsetMap(24 * 2 * n)
        seen = []
        done = threading.Event()

        def poke():
            while not done.is_set():
                try:
                    m.get(b"x")
                except RuntimeError as exc:
                    seen.append(exc)
                    return

        t = threading.Thread(target=poke)
        t.start()
        try:
            for _ in range(200):  # the poking thread runs while put_columns has let the GIL go
                m.put_columns(data, ks, kl, offs)
                if seen:
                    break
        finally:
            done.set()
            t.join()
        assert seen, "the map was never seen busy"
        assert type(seen[0]) is IllegalStateError and isinstance(seen[0], RuntimeError)
        assert "in use by put_columns" in str(seen[0])
