"""Golden bytes and round trips for the __consumer_offsets key/value formats."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pylogq.cluster.coordinator.group import offsets_schema as s
from pylogq.cluster.partitioner import java_string_hash
from pylogq.errors import CorruptRecordError

# Layouts as Kafka's GroupMetadataManager writes them (big-endian; STRING = int16 length + UTF-8).
OFFSET_KEY = bytes.fromhex(
    "0001"  # key version 1
    "0005" "67726f7570"  # group "group"
    "0005" "746f706963"  # topic "topic"
    "00000005"  # partition 5
)
OFFSET_VALUE_V3 = bytes.fromhex(
    "0003"  # value version 3
    "0000000000000064"  # offset 100
    "ffffffff"  # leader epoch -1
    "0004" "6d657461"  # metadata "meta"
    "00000174876e8000"  # commit timestamp 1600000000000
)
GROUP_KEY = bytes.fromhex("0002" "0002" "6731")  # key version 2, group "g1"
GROUP_VALUE_V3 = bytes.fromhex(
    "0003"  # value version 3
    "0008" "636f6e73756d6572"  # protocol type "consumer"
    "00000007"  # generation 7
    "0005" "72616e6765"  # protocol "range"
    "0002" "6d31"  # leader "m1"
    "00000174876e8000"  # current state timestamp
    "00000001"  # one member
    "0002" "6d31"  # member id "m1"
    "ffff"  # group instance id null
    "0001" "63"  # client id "c"
    "0002" "2f68"  # client host "/h"
    "000493e0"  # rebalance timeout 300000
    "00002710"  # session timeout 10000
    "00000002" "0102"  # subscription
    "00000000"  # assignment (empty)
)
MEMBER = s.MemberMetadata("m1", None, "c", "/h", 300000, 10000, b"\x01\x02", b"")
GROUP_VALUE = s.GroupMetadataValue("consumer", 7, "range", "m1", 1600000000000, [MEMBER])


def test_offset_commit_key_golden() -> None:
    assert s.encode_offset_commit_key("group", "topic", 5) == OFFSET_KEY
    assert s.decode_key(OFFSET_KEY) == s.OffsetCommitKey("group", "topic", 5)


def test_offset_commit_value_golden() -> None:
    assert s.encode_offset_commit_value(100, "meta", 1600000000000) == OFFSET_VALUE_V3
    assert s.decode_offset_commit_value(OFFSET_VALUE_V3) == s.OffsetCommitValue(100, "meta", 1600000000000, -1)


def test_group_metadata_key_golden() -> None:
    assert s.encode_group_metadata_key("g1") == GROUP_KEY
    assert s.decode_key(GROUP_KEY) == s.GroupMetadataKey("g1")


def test_group_metadata_value_golden() -> None:
    assert s.encode_group_metadata_value(GROUP_VALUE) == GROUP_VALUE_V3
    assert s.decode_group_metadata_value(GROUP_VALUE_V3) == GROUP_VALUE


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    value = s.GroupMetadataValue("consumer", 3, None, None, -1, [])
    data = s.encode_group_metadata_value(value)
    assert data == bytes.fromhex("0003" "0008636f6e73756d6572" "00000003" "ffff" "ffff" "ffffffffffffffff" "00000000")
    assert s.decode_group_metadata_value(data) == value


def test_static_member_instance_id_is_stored() -> None:
    member = MEMBER._replace(group_instance_id="i-1")
    data = s.encode_group_metadata_value(GROUP_VALUE._replace(members=[member]))
    assert bytes.fromhex("0002" "6d31" "0003" "692d31") in data
    assert s.decode_group_metadata_value(data).members == [member]


def test_older_offset_value_versions_decode() -> None:
    v0 = bytes.fromhex("0000" "000000000000000a" "0001" "78" "0000000000000001")
    v1 = bytes.fromhex("0001" "000000000000000a" "0000" "0000000000000002" "0000000000000003")
    v2 = bytes.fromhex("0002" "000000000000000a" "0000" "0000000000000004")
    assert s.decode_offset_commit_value(v0) == s.OffsetCommitValue(10, "x", 1)
    assert s.decode_offset_commit_value(v1) == s.OffsetCommitValue(10, "", 2, -1, 3)
    assert s.decode_offset_commit_value(v2) == s.OffsetCommitValue(10, "", 4)


def test_older_group_value_versions_decode() -> None:
    member_v0 = "0002" "6d31" "0001" "63" "0002" "2f68" "00002710" "00000000" "00000000"
    v0 = bytes.fromhex("0000" "0008636f6e73756d6572" "00000001" "ffff" "ffff" "00000001" + member_v0)
    decoded = s.decode_group_metadata_value(v0)
    assert decoded.current_state_timestamp == -1
    assert decoded.members == [s.MemberMetadata("m1", None, "c", "/h", 10000, 10000, b"", b"")]
    member_v1 = "0002" "6d31" "0001" "63" "0002" "2f68" "000493e0" "00002710" "00000000" "00000000"
    v2 = bytes.fromhex("0002" "0008636f6e73756d6572" "00000001" "ffff" "ffff" "0000000000000009" "00000001" + member_v1)
    decoded = s.decode_group_metadata_value(v2)
    assert decoded.current_state_timestamp == 9
    assert decoded.members[0].rebalance_timeout == 300000


def test_key_version_0_is_an_offset_key_and_unknown_versions_are_skipped() -> None:
    assert s.decode_key(b"\x00\x00" + OFFSET_KEY[2:]) == s.OffsetCommitKey("group", "topic", 5)
    assert s.decode_key(b"\x00\x03" + GROUP_KEY[2:]) is None


def test_decode_record_tombstones_and_keyless_records() -> None:
    assert s.decode_record(OFFSET_KEY, None) == (s.OffsetCommitKey("group", "topic", 5), None)
    assert s.decode_record(GROUP_KEY, GROUP_VALUE_V3) == (s.GroupMetadataKey("g1"), GROUP_VALUE)
    assert s.decode_record(None, b"x") == (None, None)


@pytest.mark.parametrize(
    "decode, data",
    [
        (s.decode_key, OFFSET_KEY),
        (s.decode_key, GROUP_KEY),
        (s.decode_offset_commit_value, OFFSET_VALUE_V3),
        (s.decode_group_metadata_value, GROUP_VALUE_V3),
    ],
)
def test_every_truncation_and_extension_is_corrupt(decode, data) -> None:  # type: ignore[no-untyped-def]
    for n in range(len(data)):
        with pytest.raises(CorruptRecordError):
            decode(data[:n])
    with pytest.raises(CorruptRecordError, match="trailing"):
        decode(data + b"\x00")


def test_unknown_value_versions_and_bad_lengths_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="version 4"):
        s.decode_offset_commit_value(b"\x00\x04" + OFFSET_VALUE_V3[2:])
    with pytest.raises(CorruptRecordError, match="version 9"):
        s.decode_group_metadata_value(b"\x00\x09" + GROUP_VALUE_V3[2:])
    with pytest.raises(CorruptRecordError, match="array count"):
        s.decode_group_metadata_value(GROUP_VALUE_V3[:35] + b"\x7f\xff\xff\xff" + GROUP_VALUE_V3[39:])
    with pytest.raises(CorruptRecordError, match="null string"):
        s.decode_key(b"\x00\x02\xff\xff")
    with pytest.raises(CorruptRecordError, match="not UTF-8"):
        s.decode_key(b"\x00\x02\x00\x01\xff")


def test_string_longer_than_int16_is_refused() -> None:
    with pytest.raises(ValueError, match="group is 32768 bytes"):
        s.encode_group_metadata_key("x" * 32768)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),
        ("\U0001f600", 1772899),  # one code point, two UTF-16 units (D83D DE00)
        ("é", 233),
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_group_uses_kafka_abs() -> None:
    # Integer.MIN_VALUE has no absolute value: Kafka's Utils.abs maps it to 0.
    assert s.partition_for_group("polygenelubricants", 50) == 0
    assert s.partition_for_group("hello", 50) == 99162322 % 50
    assert s.partition_for_group("Aa", 7) == s.partition_for_group("BB", 7)
    # A negative hash takes its absolute value before the modulo.
    negative = "consumer-group-negative-hash"
    h = java_string_hash(negative)
    assert s.partition_for_group(negative, 50) == abs(h) % 50
    with pytest.raises(ValueError, match="num_partitions"):
        s.partition_for_group("g", 0)


def test_java_hash_matches_the_polynomial_definition() -> None:
    for text in ["consumer-group", "a" * 100, "日本語"]:
        h = 0
        for ch in text:
            h = (31 * h + ord(ch)) % 2**32
        assert java_string_hash(text) == (h - 2**32 if h >= 2**31 else h)


_text = st.text(max_size=40)
_member = st.builds(
    s.MemberMetadata,
    _text,
    st.none() | _text,
    _text,
    _text,
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=64),
    st.binary(max_size=64),
)


@given(
    st.builds(
        s.GroupMetadataValue,
        _text,
        st.integers(-(2**31), 2**31 - 1),
        st.none() | _text,
        st.none() | _text,
        st.integers(-(2**63), 2**63 - 1),
        st.lists(_member, max_size=5),
    )
)
def test_group_value_round_trip(value: s.GroupMetadataValue) -> None:
    assert s.decode_group_metadata_value(s.encode_group_metadata_value(value)) == value


@given(_text, _text, st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1))
def test_offset_round_trip(group: str, topic: str, partition: int, offset: int, epoch: int) -> None:
    key = s.encode_offset_commit_key(group, topic, partition)
    assert s.decode_key(key) == s.OffsetCommitKey(group, topic, partition)
    value = s.encode_offset_commit_value(offset, topic, 123, epoch)
    assert s.decode_offset_commit_value(value) == s.OffsetCommitValue(offset, topic, 123, epoch)
