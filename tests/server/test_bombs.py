"""Decompression bombs against a ``pylogq-broker`` process: bounded memory, other clients unstalled.

Each bomb is a batch of at most ``max.message.bytes`` (1 MB) that decompresses to
hundreds of megabytes or a gigabyte, in two shapes: one huge record, and many
1 MiB records; every codec (gzip, snappy with the Java client's xerial framing,
lz4, zstd) as v2 batches, and v0/v1 compressed wrappers. Four connections send
every bomb at once (each in its own order) while a probe client produces and
fetches; then:

- every bomb got the right answer: a valid one is accepted and reads back byte
  for byte, one past the decompression bound gets MESSAGE_TOO_LARGE, a broken
  one CORRUPT_MESSAGE, and a v0/v1 wrapper whose inner set is larger than the
  decompression window (it is decompressed whole) MESSAGE_TOO_LARGE;
- the broker's peak resident memory (``VmHWM`` of ``/proc/<pid>/status``, reset
  after the warm-up; ``VmRSS`` sampled as well) stayed under 400 MB above its
  warmed-up baseline;
- the probe was answered throughout (each answer within a generous socket timeout);
- the decompression runs off the event loop: while one gigabyte bomb is validated
  on a connection of its own, the probe completes round after round. A broker that
  decompressed on its loop would hold the probe's next answer until the bomb's.

How quickly the probe is answered under such load is a speed target, for the
benchmarks; here only what happens is asserted, never how long it took.

The gzip bombs are built fast: a piece compressed with a full flush does not
depend on what came before it, so a repeated piece is compressed once.
"""

from __future__ import annotations

import struct
import threading
import time
import zlib
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import crc32c as crc32c_peer
import lz4.frame
import pytest
import zstandard

from pylogq.records import RecordBatch, build_batch, codecs, iter_batches
from pylogq.records.default_records import encode_varint
from pylogq.records.legacy import LegacyRecordBatchBuilder, iter_legacy_records

from .conftest import BrokerProcess
from .test_server import Wire, fetch_body

MiB = 1 << 20
TS = 1_700_000_000_000
PEAK_ABOVE_BASELINE = 400 * MiB
PROBE_TIMEOUT_S = 60.0  # a probe answer that never comes fails the probe; its latency is not asserted
#: The probe's pause between rounds: it shows whether the broker answers, and flat out it took a core
#: (of two) from the decompression it watches. The lone bomb takes seconds, so a loop that is
#: not blocked still gives it far more than ROUNDS_DURING_A_BOMB rounds.
PROBE_PAUSE_S = 0.01
#: Probe rounds (a produce and a fetch each) completed while one lone bomb was being validated.
#: A loop blocked by the decompression completes at most the round in flight and one more.
ROUNDS_DURING_A_BOMB = 10
LONE_BOMB = "gzip one 1000 MiB record"  # the slowest to decompress
BOMB_CONNECTIONS = 4
BOMB_TIMEOUT_S = 300.0  # a bomb may queue behind the others: its answer is not what is timed
MESSAGE_TOO_LARGE = 10
CORRUPT_MESSAGE = 2
TOPIC = "bombs"
PROBE_TOPIC = "probe"


class Bomb(NamedTuple):
    name: str
    batch: bytes
    produce_version: int  # 7 for v2 batches, 2 for magic 1, 1 for magic 0
    expected: int  # the partition's error code


# -- building bombs --------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    encode_varint(value, out)
    return bytes(out)


def _record_pieces(delta: int, value_len: int, zeros: bytes) -> List[Tuple[bytes, int]]:
    """A v2 record with a 1-byte key and ``value_len`` zero bytes of value, as (piece, repeat) pairs."""
    assert value_len % len(zeros) == 0
    body_len = (1 + 1 + len(_varint(delta)) + len(_varint(1)) + 1 + len(_varint(value_len)) + value_len + 1)
    head = _varint(body_len) + b"\x00" + _varint(0) + _varint(delta) + _varint(1) + b"k" + _varint(value_len)
    return [(head, 1), (zeros, value_len // len(zeros)), (b"\x00", 1)]


def _gzip(pieces: Sequence[Tuple[bytes, int]]) -> bytes:
    """One gzip member of the pieces, each repeated; a piece is deflated once (full flush)."""
    cache: Dict[bytes, bytes] = {}
    out = [b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"]
    crc = size = 0
    for piece, repeat in pieces:
        deflated = cache.get(piece)
        if deflated is None:
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            deflated = cache[piece] = c.compress(piece) + c.flush(zlib.Z_FULL_FLUSH)
        out.append(deflated * repeat)
        for _ in range(repeat):
            crc = zlib.crc32(piece, crc)
        size += len(piece) * repeat
    out.append(zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH))
    out.append(struct.pack("<II", crc, size & 0xFFFFFFFF))
    return b"".join(out)


def _streamed(codec: int, pieces: Sequence[Tuple[bytes, int]]) -> bytes:
    """The pieces compressed as a client's compressor would stream them (snappy: xerial blocks)."""
    if codec == codecs.GZIP:
        return _gzip(pieces)
    if codec == codecs.SNAPPY:
        return codecs.snappy_encode(b"".join(piece * repeat for piece, repeat in pieces))
    if codec == codecs.LZ4:
        c: Any = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
        out = [c.begin()]
    else:
        c = zstandard.ZstdCompressor(level=3).compressobj()
        out = []
    for piece, repeat in pieces:
        for _ in range(repeat):
            out.append(c.compress(piece))
    out.append(c.flush())
    return b"".join(out)


def v2_bomb(codec: int, count: int, value_len: int, claimed: Optional[int] = None) -> bytes:
    """A v2 batch of ``count`` records of ``value_len`` zero bytes; ``claimed`` overrides its count."""
    zeros = bytes(MiB if value_len % MiB == 0 else 1_000_000)
    pieces: List[Tuple[bytes, int]] = []
    for i in range(count):
        pieces += _record_pieces(i, value_len, zeros)
    section = _streamed(codec, pieces)
    n = count if claimed is None else claimed
    head = struct.pack(">qiibIhiqqqhii", 0, 49 + len(section), 0, 2, 0, codec, n - 1, TS, TS, -1, -1, -1, n)
    batch = bytearray(head + section)
    struct.pack_into(">I", batch, 17, crc32c_peer.crc32c(bytes(batch[21:])))
    return bytes(batch)


def _legacy_inner_pieces(magic: int, count: int, value_len: int) -> List[Tuple[bytes, int]]:
    """Inner v0/v1 messages of ``value_len`` zero bytes (their CRCs left 0: the broker refuses the set
    for its size before it reads them)."""
    zeros = bytes(MiB)
    pieces: List[Tuple[bytes, int]] = []
    for i in range(count):
        fields = struct.pack(">bb", magic, 0) + (struct.pack(">q", TS) if magic else b"")
        body = fields + struct.pack(">ii", -1, value_len)
        pieces.append((struct.pack(">qiI", i, 4 + len(body) + value_len, 0) + body, 1))
        pieces.append((zeros, value_len // MiB))
    return pieces


def legacy_bomb(magic: int, codec: int, count: int, value_len: int) -> bytes:
    """A v0/v1 wrapper whose inner message set is ``count`` messages of ``value_len`` zero bytes."""
    value = _streamed(codec, _legacy_inner_pieces(magic, count, value_len))
    if codec == codecs.LZ4 and magic == 0:
        frame = bytearray(value)  # Kafka 0.8's header checksum, as codecs.lz4_encode_v0 writes it
        hs = codecs._lz4_header_size(bytes(frame[:15]))
        frame[hs - 1] = (codecs._xxh32_short(bytes(frame[: hs - 1])) >> 8) & 0xFF
        value = bytes(frame)
    fields = struct.pack(">bb", magic, codec) + (struct.pack(">q", TS) if magic else b"")
    message = fields + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    entry = struct.pack(">qiI", count - 1, 4 + len(message), zlib.crc32(message)) + message
    return entry


def bombs() -> List[Bomb]:
    out = [
        Bomb("gzip one 1000 MiB record", v2_bomb(codecs.GZIP, 1, 1000 * MiB), 7, 0),
        Bomb("gzip 980 records of 1 MiB", v2_bomb(codecs.GZIP, 980, MiB), 7, 0),
        Bomb("snappy one 20 MiB record", v2_bomb(codecs.SNAPPY, 1, 20 * MiB), 7, 0),
        Bomb("snappy 20 records of 1 MiB", v2_bomb(codecs.SNAPPY, 20, MiB), 7, 0),
        Bomb("lz4 one 250 MB record", v2_bomb(codecs.LZ4, 1, 250_000_000), 7, 0),
        Bomb("lz4 250 records of 1 MB", v2_bomb(codecs.LZ4, 250, 1_000_000), 7, 0),
        Bomb("zstd one 1000 MiB record", v2_bomb(codecs.ZSTD, 1, 1000 * MiB), 7, 0),
        Bomb("zstd 1000 records of 1 MiB", v2_bomb(codecs.ZSTD, 1000, MiB), 7, 0),
        # Past the bound on decompressed bytes per batch (codecs.MAX_DECOMPRESSED, 1 GiB).
        Bomb("zstd 1100 records of 1 MiB", v2_bomb(codecs.ZSTD, 1100, MiB), 7, MESSAGE_TOO_LARGE),
        Bomb("zstd one 1100 MiB record", v2_bomb(codecs.ZSTD, 1, 1100 * MiB), 7, MESSAGE_TOO_LARGE),
        # Claims one record more than it holds: found broken at the end of its gigabyte.
        Bomb("zstd 1000 records of 1 MiB claiming 1001", v2_bomb(codecs.ZSTD, 1000, MiB, claimed=1001), 7,
             CORRUPT_MESSAGE),
        # v0/v1 wrappers are decompressed whole: beyond the window they are refused.
        Bomb("v1 gzip wrapper of one 1000 MiB message", legacy_bomb(1, codecs.GZIP, 1, 1000 * MiB), 2,
             MESSAGE_TOO_LARGE),
        Bomb("v1 gzip wrapper of 980 messages of 1 MiB", legacy_bomb(1, codecs.GZIP, 980, MiB), 2,
             MESSAGE_TOO_LARGE),
        Bomb("v1 snappy wrapper of 20 messages of 1 MiB", legacy_bomb(1, codecs.SNAPPY, 20, MiB), 2,
             MESSAGE_TOO_LARGE),
        Bomb("v0 lz4 wrapper of one 200 MiB message", legacy_bomb(0, codecs.LZ4, 1, 200 * MiB), 1,
             MESSAGE_TOO_LARGE),
    ]
    legacy = LegacyRecordBatchBuilder(1, codecs.GZIP)
    for i in range(3):
        legacy.append(i, TS + i, b"k%d" % i, b"a small v1 wrapper %d" % i)
    out.append(Bomb("v1 gzip wrapper of 3 small messages", bytes(legacy.build()), 2, 0))
    for bomb in out:
        assert len(bomb.batch) <= 1_048_588, "%s is %d bytes, over max.message.bytes" % (bomb.name, len(bomb.batch))
    return out


# -- the broker and its memory ---------------------------------------------------------


def _status(pid: int) -> Dict[str, int]:
    """VmRSS and VmHWM of a process, in bytes."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                out[name] = int(value.split()[0]) * 1024
    return out


class MemoryWatch:
    """The peak resident memory of a process from now on: VmHWM reset (``clear_refs``) and VmRSS
    sampled, whichever is higher (a sample can miss a short peak, a kernel may refuse the reset)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            with open("/proc/%d/clear_refs" % pid, "w") as f:
                f.write("5")
            self.hwm_reset = True
        except OSError:
            self.hwm_reset = False
        self.sampled = _status(pid)["VmRSS"]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.sampled = max(self.sampled, _status(self.pid)["VmRSS"])

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        peak = self.sampled
        if self.hwm_reset:
            peak = max(peak, _status(self.pid)["VmHWM"])
        return peak


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("bombs")
    process = BrokerProcess(base / "data", base / "broker.log")
    yield process
    status = process.stop()
    text = process.log()
    assert status == 0, "pylogq-broker exited with %s; its log:\n%s" % (status, text)
    assert "Traceback" not in text, text


def _create_topics(address: Tuple[str, int], *names: str) -> None:
    with Wire(address) as wire:
        response = wire.request(19, 2, {"topics": [{"name": n, "num_partitions": 1, "replication_factor": 1,
                                                    "assignments": [], "configs": []} for n in names],
                                        "timeout_ms": 10000, "validate_only": False})
    assert [t["error_code"] for t in response["topics"]] == [0] * len(names), response


def _produce(wire: Wire, version: int, topic: str, batch: bytes) -> Dict[str, Any]:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    return wire.request(0, version, body)["responses"][0]["partition_responses"][0]


def _fetch(wire: Wire, topic: str, offset: int) -> bytes:
    response = wire.request(1, 11, fetch_body(topic, offset, 0))
    partition = response["responses"][0]["partitions"][0]
    assert partition["error_code"] == 0, partition
    return bytes(partition["records"] or b"")


def _warm_up(address: Tuple[str, int]) -> None:
    """Load every codec library and code path once, so the baseline is a working broker's."""
    with Wire(address) as wire:
        for codec in ("gzip", "snappy", "lz4", "zstd", 0):
            batch = bytes(build_batch([b"warm-up %s" % str(codec).encode()] * 10, compression_type=codec))
            assert _produce(wire, 7, PROBE_TOPIC, batch)["error_code"] == 0
        assert _fetch(wire, PROBE_TOPIC, 0)


class Probe:
    """A client producing one record and fetching it back, over and over, counting its rounds."""

    def __init__(self, address: Tuple[str, int]) -> None:
        self.wire = Wire(address, timeout=PROBE_TIMEOUT_S)
        self.rounds = 0
        self.failures: List[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batch = bytes(build_batch([b"probe %d" % self.rounds], timestamps=int(time.time() * 1000)))
                out = _produce(self.wire, 7, PROBE_TOPIC, batch)
                assert out["error_code"] == 0, out
                data = _fetch(self.wire, PROBE_TOPIC, out["base_offset"])
                assert [h.base_offset for h in iter_batches(data)][:1] == [out["base_offset"]]
                self.rounds += 1
                self._stop.wait(PROBE_PAUSE_S)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.failures.append(exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.wire.close()


def _send_all(address: Tuple[str, int], order: Sequence[Bomb], results: Dict[str, List[Dict[str, Any]]],
              failures: List[BaseException]) -> None:
    try:
        with Wire(address, timeout=BOMB_TIMEOUT_S) as wire:
            for bomb in order:
                results.setdefault(bomb.name, []).append(_produce(wire, bomb.produce_version, TOPIC, bomb.batch))
    except BaseException as exc:  # noqa: BLE001 - handed to the test thread
        failures.append(exc)


def test_bombs_of_every_codec_keep_memory_bounded_and_other_clients_answered(broker: BrokerProcess) -> None:
    address = (broker.host, broker.port)
    made = bombs()
    _create_topics(address, TOPIC, PROBE_TOPIC)
    _warm_up(address)
    baseline = _status(broker.proc.pid)["VmRSS"]
    watch = MemoryWatch(broker.proc.pid)
    probe = Probe(address)
    results: Dict[str, List[Dict[str, Any]]] = {}
    failures: List[BaseException] = []
    senders = [threading.Thread(target=_send_all, args=(address, made[i:] + made[:i], results, failures))
               for i in range(0, len(made), len(made) // BOMB_CONNECTIONS)][:BOMB_CONNECTIONS]
    lone = next(bomb for bomb in made if bomb.name == LONE_BOMB)
    try:
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(BOMB_TIMEOUT_S * 2)
        assert not any(s.is_alive() for s in senders), "bomb senders still running"
        # One bomb alone: the probe's rounds while it is validated show the loop never waits on it.
        with Wire(address, timeout=BOMB_TIMEOUT_S) as wire:
            before = probe.rounds
            lone_answer = _produce(wire, lone.produce_version, TOPIC, lone.batch)
            rounds_during = probe.rounds - before
    finally:
        probe.stop()
        peak = watch.stop()
    if failures:
        raise failures[0]
    if probe.failures:
        raise probe.failures[0]

    for bomb in made:
        codes = [r["error_code"] for r in results[bomb.name]]
        assert codes == [bomb.expected] * BOMB_CONNECTIONS, (bomb.name, results[bomb.name])
    assert lone_answer["error_code"] == lone.expected, (lone.name, lone_answer)
    print("bombs: baseline RSS %.0f MB, peak %.0f MB (HWM reset: %s); probe: %d rounds, %d during the lone bomb"
          % (baseline / MiB, peak / MiB, watch.hwm_reset, probe.rounds, rounds_during))
    assert peak - baseline < PEAK_ABOVE_BASELINE, (
        "peak RSS %.0f MB is %.0f MB above the baseline %.0f MB"
        % (peak / MiB, (peak - baseline) / MiB, baseline / MiB))
    assert probe.rounds > 0
    assert rounds_during >= ROUNDS_DURING_A_BOMB, (
        "the probe completed %d rounds while %s was validated: the broker's loop waited on the decompression"
        % (rounds_during, lone.name))

    # Accepted batches read back as sent (all but the base offset and leader epoch, which the broker
    # sets); a v0/v1 message set is stored as the one v2 batch Kafka converts it to, with its records.
    with Wire(address) as wire:
        for bomb in made:
            if bomb.expected:
                continue
            for result in results[bomb.name]:
                stored = _fetch(wire, TOPIC, result["base_offset"])
                first = next(iter_batches(stored, check_crc=True))
                assert first.base_offset == result["base_offset"], bomb.name
                entry = stored[first.position : first.position + first.size]
                if bomb.batch[16] >= 2:
                    assert entry[16:] == bomb.batch[16:] and len(entry) == len(bomb.batch), bomb.name
                    continue
                assert first.magic == 2, bomb.name
                sent = [(r.key, r.value, r.timestamp) for r in iter_legacy_records(bomb.batch)]
                assert [(r.key, r.value, r.timestamp) for r in RecordBatch(stored, first.position)] == sent, bomb.name


def test_a_client_control_batch_gets_invalid_record(broker: BrokerProcess) -> None:
    address = (broker.host, broker.port)
    _create_topics(address, "control")
    marker = bytes(build_batch([b"\x00\x00\x00\x00\x00\x00"], keys=[struct.pack(">hh", 0, 1)], is_control=True,
                               is_transactional=True, producer_id=5, producer_epoch=0))
    with Wire(address) as wire:
        out = _produce(wire, 7, "control", marker)
        assert out["error_code"] == 87, out  # INVALID_RECORD
        assert _produce(wire, 7, "control", bytes(build_batch([b"after"])))["base_offset"] == 0


def test_pipelined_produces_append_in_request_order(broker: BrokerProcess) -> None:
    """An idempotent producer pipelines up to five produces on one connection; compressed ones
    are appended off the loop, uncompressed ones inline: the offsets still follow the requests."""
    address = (broker.host, broker.port)
    topic = "ordered"
    _create_topics(address, topic)
    kinds: List[Any] = ["zstd", 0, "gzip", 0, "lz4", "snappy", 0, 0, "gzip", 0] * 3
    with Wire(address, timeout=60.0) as wire:
        ids = []
        for i, codec in enumerate(kinds):
            records = [b"request %d record %d" % (i, j) for j in range(3 + i % 4)]
            batch = bytes(build_batch(records, compression_type=codec))
            body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                    "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
            ids.append((wire.send(0, 7, body), len(records)))
        offsets = []
        for cid, _ in ids:
            got, response = wire.receive(0, 7)
            assert got == cid
            part = response["responses"][0]["partition_responses"][0]
            assert part["error_code"] == 0, part
            offsets.append(part["base_offset"])
    expected = [sum(n for _, n in ids[:i]) for i in range(len(ids))]
    assert offsets == expected
