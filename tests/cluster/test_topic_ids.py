"""Topic ids: given at creation, kept in pylogq-topics.json and partition.metadata, kept across restarts."""

from __future__ import annotations

import base64
import json
import os
import uuid

import pytest

import pylogq
from pylogq.cluster.broker.topic_store import TOPICS_FILE
from pylogq.cluster.contract import TopicDescription
from pylogq.errors import CorruptMetadataError, InconsistentTopicIdError, UnknownTopicIdError
from pylogq.storage.partition_metadata import (
    PARTITION_METADATA_FILE,
    ZERO_TOPIC_ID,
    new_topic_id,
    parse_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)


def _uuid_of(topic_id: str) -> uuid.UUID:
    """The UUID a topic id encodes, checking it is Kafka's base64url form without padding."""
    assert len(topic_id) == 22 and "=" not in topic_id
    raw = base64.urlsafe_b64decode(topic_id + "==")
    assert len(raw) == 16
    return uuid.UUID(bytes=raw)


def _metadata_file(data_dir, topic: str, partition: int):
    return os.path.join(str(data_dir), "%s-%d" % (topic, partition), PARTITION_METADATA_FILE)


def test_new_ids_are_random_type_4_uuids_in_kafkas_text_form():
    ids = {new_topic_id() for _ in range(2000)}
    assert len(ids) == 2000
    for topic_id in ids:
        assert _uuid_of(topic_id).version == 4
        assert topic_id != ZERO_TOPIC_ID and not topic_id.startswith("-")
        assert parse_topic_id(topic_id) == topic_id


def test_kafkas_text_form_of_a_known_uuid():
    # Kafka's Uuid(0x30429ddcc14e426a, 0x8ff24af574f0824e).toString()
    raw = bytes.fromhex("30429ddcc14e426a8ff24af574f0824e")
    assert base64.urlsafe_b64encode(raw).decode().rstrip("=") == "MEKd3MFOQmqP8kr1dPCCTg"
    assert _uuid_of("MEKd3MFOQmqP8kr1dPCCTg").bytes == raw


@pytest.mark.parametrize("bad", ["", "AAAA", "MEKd3MFOQmqP8kr1dPCCTg==", "MEKd3MFOQmqP8kr1dPCCT+",
                                 "MEKd3MFOQmqP8kr1dPCCTh", ZERO_TOPIC_ID, None, 7])
def test_a_malformed_id_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="topic id %s" % repr(bad).replace("+", r"\+")):
        parse_topic_id(bad)


def test_partition_metadata_is_kafkas_format_byte_for_byte(tmp_path):
    write_partition_metadata(str(tmp_path), "MEKd3MFOQmqP8kr1dPCCTg")
    assert (tmp_path / PARTITION_METADATA_FILE).read_bytes() == b"version: 0\ntopic_id: MEKd3MFOQmqP8kr1dPCCTg\n"
    assert read_partition_metadata(str(tmp_path)) == "MEKd3MFOQmqP8kr1dPCCTg"
    assert sorted(os.listdir(tmp_path)) == [PARTITION_METADATA_FILE]  # no .tmp left


def test_a_missing_partition_metadata_reads_as_none(tmp_path):
    assert read_partition_metadata(str(tmp_path)) is None


@pytest.mark.parametrize("body", [b"", b"version: 0\n", b"version: 1\ntopic_id: MEKd3MFOQmqP8kr1dPCCTg\n",
                                  b"version: 0\ntopic_id: nope\n", b"\xff\xfe",
                                  b"topic_id: MEKd3MFOQmqP8kr1dPCCTg\nversion: 0\n"])
def test_a_damaged_partition_metadata_is_refused_naming_it(tmp_path, body):
    (tmp_path / PARTITION_METADATA_FILE).write_bytes(body)
    with pytest.raises(CorruptMetadataError) as raised:
        read_partition_metadata(str(tmp_path))
    message = str(raised.value)
    assert message.startswith("cannot read %s: " % (tmp_path / PARTITION_METADATA_FILE)) and "\n" not in message


def test_each_topic_gets_its_own_id_at_creation(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        a = broker.create_topic("a", 2)
        b = broker.create_topic("b", 1)
        assert a.topic_id == broker.topic_id("a") and b.topic_id == broker.topic_id("b")
        assert a.topic_id != b.topic_id
        assert _uuid_of(a.topic_id).version == 4
        assert broker.describe_topic("a").topic_id == a.topic_id
        broker.ensure_offsets_topic()  # (made by the first group lookup)
        internal = broker.topic_id("__consumer_offsets")
        assert len({a.topic_id, b.topic_id, internal}) == 3
        for p in range(2):
            assert open(_metadata_file(tmp_path, "a", p), "rb").read() == (
                b"version: 0\ntopic_id: %s\n" % a.topic_id.encode())
        stored = json.loads((tmp_path / TOPICS_FILE).read_text())["topics"]
        assert stored["a"]["topic_id"] == a.topic_id and stored["b"]["topic_id"] == b.topic_id


def test_validate_only_gives_no_id(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        assert broker.create_topic("a", 1, validate_only=True).topic_id == ZERO_TOPIC_ID


def test_added_partitions_get_the_topics_id(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        topic_id = broker.create_topic("a", 1).topic_id
        broker.create_partitions("a", 3)
        assert broker.topic_id("a") == topic_id
        assert [read_partition_metadata(os.path.dirname(_metadata_file(tmp_path, "a", p))) for p in range(3)] == [
            topic_id] * 3


def test_ids_are_kept_across_restarts(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        broker.create_topic("a", 2)
        ids = {t: broker.topic_id(t) for t in broker.list_topics(include_internal=True)}
    with pylogq.Broker(str(tmp_path)) as broker:
        assert {t: broker.topic_id(t) for t in broker.list_topics(include_internal=True)} == ids
        assert broker.topic_name(ids["a"]) == "a"


def test_topic_name_round_trip_and_unknown_ids(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        for name in ("a", "b.c"):
            broker.create_topic(name, 1)
            assert broker.topic_name(broker.topic_id(name)) == name
        with pytest.raises(UnknownTopicIdError) as raised:
            broker.topic_name("MEKd3MFOQmqP8kr1dPCCTg")
        assert raised.value.code == 100 and "MEKd3MFOQmqP8kr1dPCCTg" in str(raised.value)
        with pytest.raises(pylogq.errors.UnknownTopicOrPartitionError):
            broker.topic_id("missing")


def test_a_deleted_and_recreated_topic_gets_a_new_id(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        old = broker.create_topic("a", 2).topic_id
        broker.delete_topic("a")
        with pytest.raises(UnknownTopicIdError):
            broker.topic_name(old)
        new = broker.create_topic("a", 2).topic_id
        assert new != old
        assert broker.topic_name(new) == "a"
        with pytest.raises(UnknownTopicIdError):
            broker.topic_name(old)
        assert read_partition_metadata(os.path.dirname(_metadata_file(tmp_path, "a", 1))) == new
    with pylogq.Broker(str(tmp_path)) as broker:
        assert broker.topic_id("a") == new


def test_topics_of_an_earlier_pylogq_get_ids_at_first_start(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        broker.create_topic("a", 2)
    # As an earlier pylogq left them: no topic ids, no partition.metadata files.
    path = tmp_path / TOPICS_FILE
    data = json.loads(path.read_text())
    for entry in data["topics"].values():
        del entry["topic_id"]
    path.write_text(json.dumps(data))
    for p in range(2):
        os.unlink(_metadata_file(tmp_path, "a", p))
    with pylogq.Broker(str(tmp_path)) as broker:
        topic_id = broker.topic_id("a")
        parse_topic_id(topic_id)
        assert broker.topic_name(topic_id) == "a"
    assert json.loads(path.read_text())["topics"]["a"]["topic_id"] == topic_id  # written back
    for p in range(2):
        assert open(_metadata_file(tmp_path, "a", p), "rb").read() == b"version: 0\ntopic_id: %s\n" % (
            topic_id.encode())
    with pylogq.Broker(str(tmp_path)) as broker:
        assert broker.topic_id("a") == topic_id


def test_a_topic_rebuilt_from_its_directories_keeps_its_id(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        topic_id = broker.create_topic("a", 3).topic_id
        broker.produce("a", 1, pylogq.records.build_batch([b"kept"]))
    os.unlink(tmp_path / TOPICS_FILE)
    with pylogq.Broker(str(tmp_path)) as broker:
        assert broker.topic_id("a") == topic_id
        assert broker.describe_topic("a").topic_id == topic_id
    assert json.loads((tmp_path / TOPICS_FILE).read_text())["topics"]["a"]["topic_id"] == topic_id


def test_a_rebuilt_topic_whose_partition_metadata_files_disagree_is_refused(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        broker.create_topic("a", 2)
    os.unlink(tmp_path / TOPICS_FILE)
    other = new_topic_id()
    write_partition_metadata(os.path.dirname(_metadata_file(tmp_path, "a", 1)), other)
    with pytest.raises(InconsistentTopicIdError) as raised:
        pylogq.Broker(str(tmp_path))
    message = str(raised.value)
    assert "\n" not in message and _metadata_file(tmp_path, "a", 1) in message and other in message


def test_a_partition_metadata_of_another_id_refuses_the_partition(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        topic_id = broker.create_topic("a", 2).topic_id
    other = new_topic_id()
    path = _metadata_file(tmp_path, "a", 1)
    write_partition_metadata(os.path.dirname(path), other)
    with pytest.raises(InconsistentTopicIdError) as raised:
        pylogq.Broker(str(tmp_path))
    message = str(raised.value)
    assert raised.value.code == 103 and "\n" not in message
    assert path in message and other in message and topic_id in message
    assert open(path, "rb").read() == b"version: 0\ntopic_id: %s\n" % other.encode()  # left for the operator
    os.unlink(path)  # the operator's way out when the data is the topic's
    with pylogq.Broker(str(tmp_path)) as broker:
        assert broker.topic_id("a") == topic_id
    assert read_partition_metadata(os.path.dirname(path)) == topic_id


def test_a_damaged_id_in_the_topics_file_stops_the_broker_naming_it(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        broker.create_topic("a", 1)
    path = tmp_path / TOPICS_FILE
    data = json.loads(path.read_text())
    data["topics"]["a"]["topic_id"] = "not-an-id"
    path.write_text(json.dumps(data))
    with pytest.raises(CorruptMetadataError) as raised:
        pylogq.Broker(str(tmp_path))
    assert str(raised.value).startswith("cannot read %s: topic a: topic id 'not-an-id'" % path)


def test_topic_description_stays_positionally_compatible():
    described = TopicDescription("a", [], {}, False)
    assert described.topic_id == ZERO_TOPIC_ID
    assert TopicDescription("a", [], {}, False, "MEKd3MFOQmqP8kr1dPCCTg").topic_id == "MEKd3MFOQmqP8kr1dPCCTg"


def test_an_old_topic_whose_partition_metadata_holds_another_topics_id_is_refused(tmp_path):
    with pylogq.Broker(str(tmp_path)) as broker:
        a = broker.create_topic("a", 1).topic_id
        broker.create_topic("b", 1)
    path = tmp_path / TOPICS_FILE
    data = json.loads(path.read_text())
    del data["topics"]["b"]["topic_id"]
    path.write_text(json.dumps(data))
    write_partition_metadata(os.path.dirname(_metadata_file(tmp_path, "b", 0)), a)
    with pytest.raises(InconsistentTopicIdError) as raised:
        pylogq.Broker(str(tmp_path))
    assert _metadata_file(tmp_path, "b", 0) in str(raised.value) and a in str(raised.value)
