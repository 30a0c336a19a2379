"""Codecs: round trips, the framing quirks real clients write, and bad payloads."""

from __future__ import annotations

import gzip
import os
import struct
import threading
import time
import zlib

import kafka.codec as kp_codec
import lz4.frame
import pytest
import snappy
import xxhash
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq.errors import CorruptRecordError, MessageTooLargeError, UnsupportedCodecError
from pylogq.records import codecs

ALL = [codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=100_000), codec=st.sampled_from([codecs.NONE] + ALL), magic=st.sampled_from([0, 1, 2]))
def test_round_trip(data, codec, magic):
    assert codecs.decompress(codec, codecs.compress(codec, data, magic), magic) == data


def test_codec_ids_and_names():
    assert [codecs.codec_id(n) for n in ("none", "gzip", "snappy", "lz4", "zstd", "uncompressed")] == [0, 1, 2, 3, 4, 0]
    assert codecs.codec_id(None) == 0 and codecs.codec_id("LZ4") == 3
    with pytest.raises(UnsupportedCodecError, match="'brotli'"):
        codecs.codec_id("brotli")
    with pytest.raises(UnsupportedCodecError, match="5"):
        codecs.codec_id(5)
    with pytest.raises(UnsupportedCodecError):
        codecs.compress(6, b"x")


def test_gzip_is_deterministic_and_reads_concatenated_members():
    data = os.urandom(1000)
    assert codecs.gzip_encode(data) == codecs.gzip_encode(data)
    assert codecs.gzip_decode(gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"
    assert codecs.gzip_decode(zlib.compress(b"zlib-framed")) == b"zlib-framed"


def test_snappy_writes_xerial_framing_like_the_java_client():
    data = os.urandom(50) * 2000  # 100 KB: several 32 KB xerial blocks
    framed = codecs.snappy_encode(data)
    assert framed[:8] == b"\x82SNAPPY\x00" and struct.unpack(">ii", framed[8:16]) == (1, 1)
    assert kp_codec.snappy_decode(framed) == data
    assert codecs.snappy_decode(kp_codec.snappy_encode(data, xerial_compatible=True)) == data
    assert codecs.snappy_decode(snappy.compress(data)) == data  # raw, as librdkafka writes
    assert codecs.snappy_encode(data, xerial=False) == snappy.compress(data)


def test_lz4_frame_as_clients_write_it():
    data = os.urandom(30) * 5000
    assert lz4.frame.decompress(codecs.lz4_encode(data)) == data
    assert codecs.lz4_decode(kp_codec.lz4_encode(data)) == data


def test_lz4_v0_uses_kafka_08_header_checksum():
    data = b"kafka 0.8 lz4" * 100
    frame = codecs.lz4_encode_v0(data)
    # Kafka 0.8 hashed the magic number with the descriptor: byte 6 is that checksum.
    assert frame[6] == (xxhash.xxh32(frame[0:6]).intdigest() >> 8) & 0xFF
    assert kp_codec.lz4_decode_old_kafka(frame) == data
    assert codecs.decompress(codecs.LZ4, kp_codec.lz4_encode_old_kafka(data), magic=0) == data
    # A v0 frame with a correct checksum (a fixed client) decodes too.
    assert codecs.decompress(codecs.LZ4, codecs.lz4_encode(data), magic=0) == data


def test_zstd_frames_without_content_size():
    data = os.urandom(20) * 3000
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert codecs.zstd_decode(no_size) == data
    small = zstandard.ZstdCompressor().compress(b"second frame")
    assert codecs.zstd_decode(no_size + small + no_size) == data + b"second frame" + data
    assert codecs.zstd_decode(kp_codec.zstd_encode(data)) == data


@pytest.mark.parametrize("codec", ALL, ids=[codecs.NAMES[c] for c in ALL])
def test_garbage_and_truncation_are_corruption(codec):
    data = os.urandom(64) * 200
    good = codecs.compress(codec, data)
    with pytest.raises(CorruptRecordError):
        codecs.decompress(codec, b"\x00garbage that is not a frame at all")
    for cut in (1, len(good) // 2, len(good) - 1):
        with pytest.raises(CorruptRecordError):
            codecs.decompress(codec, good[:cut])


@pytest.mark.parametrize("codec", ALL, ids=[codecs.NAMES[c] for c in ALL])
def test_decompression_is_bounded(codec):
    bomb = codecs.compress(codec, bytes(5_000_000))
    assert len(bomb) < 300_000
    with pytest.raises(CorruptRecordError, match="more than 1000000 bytes"):
        codecs.decompress(codec, bomb, max_size=1_000_000)
    assert len(codecs.decompress(codec, bomb, max_size=5_000_000)) == 5_000_000


def test_unknown_codec_in_attributes_is_corruption():
    with pytest.raises(CorruptRecordError, match="codec 5"):
        codecs.decompress(5, b"x")


@pytest.mark.parametrize("codec", ALL, ids=[codecs.NAMES[c] for c in ALL])
def test_codecs_are_safe_to_share_between_threads(codec):
    from concurrent.futures import ThreadPoolExecutor

    payloads = [os.urandom(64) * (50 + i) for i in range(16)]

    def round_trip(data):
        for _ in range(20):
            assert codecs.decompress(codec, codecs.compress(codec, data)) == data
        return True

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(round_trip, payloads))


# -- DecompressStream: what validation reads ----------------------------------------------


def _read_all(stream, step):
    parts = []
    while True:
        chunk = stream.read(step)
        assert len(chunk) <= step
        if not chunk:
            return b"".join(parts)
        assert len(chunk) == step or stream.at_end()  # short only at the end
        parts.append(chunk)


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=60_000), codec=st.sampled_from(ALL), magic=st.sampled_from([0, 1, 2]),
       step=st.integers(1, 70_000))
def test_stream_gives_what_decompress_gives_in_any_steps(data, codec, magic, step):
    payload = codecs.compress(codec, data, magic)
    with codecs.DecompressStream(codec, payload, magic) as stream:
        assert _read_all(stream, step) == codecs.decompress(codec, payload, magic) == data
        assert stream.at_end() and stream.total == len(data)


def test_stream_reads_what_clients_write():
    data = os.urandom(100) * 5000
    gz = gzip.compress(data[:1000]) + gzip.compress(data[1000:])  # concatenated members
    members = codecs.DecompressStream(codecs.GZIP, gz)
    assert _read_all(members, 7777) == data
    no_size = zstandard.ZstdCompressor().compressobj()
    frames = no_size.compress(data) + no_size.flush() + zstandard.ZstdCompressor().compress(b"second frame")
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"abc"
    assert _read_all(codecs.DecompressStream(codecs.ZSTD, skippable + frames), 4096) == data + b"second frame"
    raw = snappy.compress(data[:60_000])
    assert _read_all(codecs.DecompressStream(codecs.SNAPPY, raw), 999) == data[:60_000]
    assert _read_all(codecs.DecompressStream(codecs.LZ4, codecs.lz4_encode_v0(data), 0), 1 << 16) == data


@pytest.mark.parametrize("codec", ALL, ids=[codecs.NAMES[c] for c in ALL])
def test_stream_garbage_and_truncation_are_corruption_naming_the_batch(codec):
    good = codecs.compress(codec, os.urandom(64) * 2000)
    cases = [b"\x00garbage that is not a frame at all"] + [good[:cut] for cut in (1, len(good) // 2, len(good) - 1)]
    for bad in cases:
        with pytest.raises(CorruptRecordError, match="CORRUPT_MESSAGE: record batch at byte 7: "):
            with codecs.DecompressStream(codec, bad, what="record batch at byte 7") as stream:
                _read_all(stream, 1 << 20)


@pytest.mark.parametrize("codec", ALL, ids=[codecs.NAMES[c] for c in ALL])
def test_stream_past_max_size_is_too_large_and_bounded_per_step(codec):
    bomb = codecs.compress(codec, bytes(5_000_000))
    with codecs.DecompressStream(codec, bomb, max_size=5_000_000) as stream:
        sizes = []
        while True:
            chunk = stream.read(100_000)
            if not chunk:
                break
            sizes.append(len(chunk))
        assert max(sizes) == 100_000 and sum(sizes) == 5_000_000
    with pytest.raises(MessageTooLargeError, match="decompresses to more than 1000000 bytes, the most one batch"):
        with codecs.DecompressStream(codec, bomb, max_size=1_000_000) as stream:
            _read_all(stream, 300_000)


def test_a_snappy_block_larger_than_the_window_is_refused(monkeypatch):
    monkeypatch.setattr(codecs, "DECOMPRESS_WINDOW", 100_000)
    with pytest.raises(MessageTooLargeError, match="snappy block decompresses to 200000 bytes"):
        codecs.DecompressStream(codecs.SNAPPY, snappy.compress(bytes(200_000))).read(10)
    # The Java client's xerial blocks (32 KB) fit any window.
    framed = codecs.snappy_encode(bytes(200_000))
    assert _read_all(codecs.DecompressStream(codecs.SNAPPY, framed), 50_000) == bytes(200_000)


def test_streams_past_the_window_take_turns(monkeypatch):
    """At most MAX_LARGE_STREAMS streams hold more than the window at once; a turn is given back
    at the end of the stream or when it is closed."""
    monkeypatch.setattr(codecs, "DECOMPRESS_WINDOW", 1000)
    bomb = codecs.compress(codecs.ZSTD, bytes(50_000))
    free = codecs._large_streams._value
    small = codecs.DecompressStream(codecs.ZSTD, codecs.compress(codecs.ZSTD, bytes(1000)))
    assert len(small.read(1000)) == 1000 and small.at_end()  # exactly the window: no turn taken
    assert codecs._large_streams._value == free
    held = [codecs.DecompressStream(codecs.ZSTD, bomb) for _ in range(codecs.MAX_LARGE_STREAMS)]
    for stream in held:
        stream.read(2000)
    assert codecs._large_streams._value == 0
    waiting = codecs.DecompressStream(codecs.ZSTD, bomb)
    waiting.read(1000)  # within the window
    got = []
    thread = threading.Thread(target=lambda: got.append(len(_read_all(waiting, 4096))))
    thread.start()
    deadline = time.monotonic() + 30
    while not codecs._large_streams._cond._waiters:  # it waits for a turn
        assert time.monotonic() < deadline, "the third stream never waited for a turn"
        time.sleep(0.001)
    assert not got
    held[0].close()
    thread.join(30)
    assert got == [49_000]
    _read_all(held[1], 10_000)  # read to the end: its turn is given back
    for stream in held:
        stream.close()
    assert codecs._large_streams._value == free
