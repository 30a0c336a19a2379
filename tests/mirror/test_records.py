"""The internal topics' records: Kafka's bytes field by field, round trips, and refused bad bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pylogq.errors import CorruptRecordError, InvalidArgumentError
from pylogq.mirror.records import Checkpoint, Heartbeat, OffsetSync

pytestmark = pytest.mark.compiled_pass

# The layouts of Kafka's OffsetSync, Checkpoint and Heartbeat schemas, with the values of
# Kafka's own serde tests (OffsetSyncTest, CheckpointTest, HeartbeatTest). Big-endian;
# STRING is an int16 length, then UTF-8.
OFFSET_SYNC_KEY = bytes.fromhex(
    "0007" "746f7069632d31"  # topic "topic-1"
    "00000002"  # partition 2
)
OFFSET_SYNC_VALUE = bytes.fromhex(
    "0000000000000003"  # upstreamOffset 3
    "0000000000000004"  # offset 4
)
CHECKPOINT_KEY = bytes.fromhex(
    "0007" "67726f75702d31"  # group "group-1"
    "0007" "746f7069632d32"  # topic "topic-2"
    "00000003"  # partition 3
)
CHECKPOINT_VALUE = bytes.fromhex(
    "0000"  # version 0 (the header schema)
    "0000000000000004"  # upstreamOffset 4
    "0000000000000005"  # offset 5
    "000a" "6d657461646174612d36"  # metadata "metadata-6"
)
HEARTBEAT_KEY = bytes.fromhex(
    "0008" "736f757263652d31"  # sourceClusterAlias "source-1"
    "0008" "7461726765742d32"  # targetClusterAlias "target-2"
)
HEARTBEAT_VALUE = bytes.fromhex(
    "0000"  # version 0
    "00000000499602d2"  # timestamp 1234567890
)


def test_offset_sync_bytes_are_kafkas() -> None:
    sync = OffsetSync("topic-1", 2, 3, 4)
    assert sync.encode_key() == OFFSET_SYNC_KEY
    assert sync.encode_value() == OFFSET_SYNC_VALUE
    assert OffsetSync.decode(OFFSET_SYNC_KEY, OFFSET_SYNC_VALUE) == sync


def test_checkpoint_bytes_are_kafkas() -> None:
    checkpoint = Checkpoint("group-1", "topic-2", 3, 4, 5, "metadata-6")
    assert checkpoint.encode_key() == CHECKPOINT_KEY
    assert checkpoint.encode_value() == CHECKPOINT_VALUE
    assert Checkpoint.decode(CHECKPOINT_KEY, CHECKPOINT_VALUE) == checkpoint


def test_heartbeat_bytes_are_kafkas() -> None:
    heartbeat = Heartbeat("source-1", "target-2", 1234567890)
    assert heartbeat.encode_key() == HEARTBEAT_KEY
    assert heartbeat.encode_value() == HEARTBEAT_VALUE
    assert Heartbeat.decode(HEARTBEAT_KEY, HEARTBEAT_VALUE) == heartbeat


def test_strings_are_utf8_with_their_byte_length_and_longs_are_twos_complement() -> None:
    """A name outside ASCII counts its UTF-8 bytes, not its characters; -1 is eight 0xff bytes."""
    checkpoint = Checkpoint("gr\u00fcn", "\u00e9t\u00e9", 0, -1, -1, "")
    assert checkpoint.encode_key() == bytes.fromhex("0005" "6772c3bc6e" "0005" "c3a974c3a9" "00000000")
    assert checkpoint.encode_value() == bytes.fromhex("0000" "ffffffffffffffff" "ffffffffffffffff" "0000")
    assert Checkpoint.decode(checkpoint.encode_key(), checkpoint.encode_value()) == checkpoint


def test_decode_takes_any_buffer() -> None:
    assert OffsetSync.decode(bytearray(OFFSET_SYNC_KEY), memoryview(OFFSET_SYNC_VALUE)) == OffsetSync("topic-1", 2, 3, 4)


_names = st.text(max_size=40)
_longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@given(_names, _ints, _longs, _longs)
def test_offset_sync_round_trips(topic: str, partition: int, upstream: int, downstream: int) -> None:
    sync = OffsetSync(topic, partition, upstream, downstream)
    assert OffsetSync.decode(sync.encode_key(), sync.encode_value()) == sync


@given(_names, _names, _ints, _longs, _longs, _names)
def test_checkpoint_round_trips(group: str, topic: str, partition: int, upstream: int, downstream: int,
                                metadata: str) -> None:
    checkpoint = Checkpoint(group, topic, partition, upstream, downstream, metadata)
    assert Checkpoint.decode(checkpoint.encode_key(), checkpoint.encode_value()) == checkpoint


@given(_names, _names, _longs)
def test_heartbeat_round_trips(source: str, target: str, timestamp: int) -> None:
    heartbeat = Heartbeat(source, target, timestamp)
    assert Heartbeat.decode(heartbeat.encode_key(), heartbeat.encode_value()) == heartbeat


@pytest.mark.parametrize("decode, key, value", [
    (OffsetSync.decode, OFFSET_SYNC_KEY, OFFSET_SYNC_VALUE),
    (Checkpoint.decode, CHECKPOINT_KEY, CHECKPOINT_VALUE),
    (Heartbeat.decode, HEARTBEAT_KEY, HEARTBEAT_VALUE),
])
def test_every_truncation_is_refused_with_where_it_stopped(decode, key: bytes, value: bytes) -> None:
    for cut in range(len(key)):
        with pytest.raises(CorruptRecordError, match="key: truncated at .*position"):
            decode(key[:cut], value)
    for cut in range(len(value)):
        with pytest.raises(CorruptRecordError, match="value: truncated at .*position"):
            decode(key, value[:cut])
    with pytest.raises(CorruptRecordError, match="value: 1 bytes after the last field"):
        decode(key, value + b"\x00")
    with pytest.raises(CorruptRecordError, match="key: missing"):
        decode(None, value)
    with pytest.raises(CorruptRecordError, match="value: missing"):
        decode(key, None)


def test_unknown_versions_are_refused() -> None:
    with pytest.raises(CorruptRecordError, match="checkpoint value: version 1 is unknown"):
        Checkpoint.decode(CHECKPOINT_KEY, b"\x00\x01" + CHECKPOINT_VALUE[2:])
    with pytest.raises(CorruptRecordError, match="heartbeat value: version -1 is unknown"):
        Heartbeat.decode(HEARTBEAT_KEY, b"\xff\xff" + HEARTBEAT_VALUE[2:])


def test_bad_strings_are_refused() -> None:
    with pytest.raises(CorruptRecordError, match="topic has length -1 .*never null"):
        OffsetSync.decode(b"\xff\xff" + b"\x00" * 4, OFFSET_SYNC_VALUE)
    with pytest.raises(CorruptRecordError, match="need 32767 bytes"):
        OffsetSync.decode(b"\x7f\xff" + b"a" * 10, OFFSET_SYNC_VALUE)
    with pytest.raises(CorruptRecordError, match="not UTF-8"):
        Heartbeat.decode(b"\x00\x01\xff" + HEARTBEAT_KEY[10:], HEARTBEAT_VALUE)


@pytest.mark.parametrize("record, field", [
    (OffsetSync("t", 2**31, 0, 0), "partition must be a 32-bit"),
    (OffsetSync("t", 0, 2**63, 0), "upstream offset must be a 64-bit"),
    (OffsetSync("t", 0, 0, True), "downstream offset must be an int"),
    (Checkpoint("g" * 40000, "t", 0, 0, 0), "group is 40000 bytes long"),
    (Checkpoint("g", "t", 0, 0, 0, "\ud800"), "metadata cannot be written as UTF-8"),
    (Heartbeat("a", None, 0), "target cluster alias must be a str"),  # type: ignore[arg-type]
])
def test_values_a_field_cannot_hold_are_refused_naming_it(record, field: str) -> None:
    with pytest.raises(InvalidArgumentError, match=field):
        record.encode_key()
        record.encode_value()
