"""pylogq-topics.json: read and written whole, refused with a clear error when damaged, rebuilt when missing."""

from __future__ import annotations

import json
import os

import pytest

from pylogq.cluster.broker.topic_store import TOPICS_FILE, FileTopicStore, TopicMetadata
from pylogq.errors import CorruptMetadataError
from pylogq.storage.partition_metadata import new_topic_id, parse_topic_id


def _without_ids(topics):
    """The topics with their ids checked and left out, to compare the rest."""
    for m in topics.values():
        parse_topic_id(m.topic_id)
    return {name: m._replace(topic_id="") for name, m in topics.items()}


def test_topics_round_trip(tmp_path):
    store = FileTopicStore(str(tmp_path))
    assert store.load() == {}
    a = TopicMetadata(3, {"retention.ms": "1000"}, new_topic_id())
    store.put("a", a)
    store.put("b", TopicMetadata(1, {}, new_topic_id()))
    store.remove("b")
    assert FileTopicStore(str(tmp_path)).load() == {"a": a}


def test_a_topic_without_an_id_is_not_stored(tmp_path):
    with pytest.raises(ValueError, match="topic id '' is not 22 base64url characters"):
        FileTopicStore(str(tmp_path)).put("a", TopicMetadata(1, {}))


DAMAGED = {
    "binary": b"\x00\xff\x80",
    "empty": b"",
    "not JSON": b'{"version": 1, "topics": {',
    "a list": b"[1, 2, 3]",
    "no topics": b'{"version": 1}',
    "partitions not a number": b'{"topics": {"a": {"partitions": "3"}}}',
    "no partitions": b'{"topics": {"a": {"config": {}}}}',
    "zero partitions": b'{"topics": {"a": {"partitions": 0}}}',
    "config not an object": b'{"topics": {"a": {"partitions": 1, "config": [1]}}}',
    "a nested config value": b'{"topics": {"a": {"partitions": 1, "config": {"k": {"x": 1}}}}}',
    "a topic id too short": b'{"topics": {"a": {"partitions": 1, "topic_id": "AAAA"}}}',
    "a topic id not base64url": b'{"topics": {"a": {"partitions": 1, "topic_id": "abcdefghijklmnopqrstu+"}}}',
    "a topic id not a string": b'{"topics": {"a": {"partitions": 1, "topic_id": 7}}}',
    "the zero topic id": b'{"topics": {"a": {"partitions": 1, "topic_id": "AAAAAAAAAAAAAAAAAAAAAA"}}}',
    "a topic id twice": (b'{"topics": {"a": {"partitions": 1, "topic_id": "MEKd3MFOQmqP8kr1dPCCTg"}, '
                         b'"b": {"partitions": 1, "topic_id": "MEKd3MFOQmqP8kr1dPCCTg"}}}'),
}


@pytest.mark.parametrize("kind", sorted(DAMAGED))
def test_a_damaged_file_is_refused_naming_it_and_the_way_out(tmp_path, kind):
    (tmp_path / TOPICS_FILE).write_bytes(DAMAGED[kind])
    with pytest.raises(CorruptMetadataError) as raised:
        FileTopicStore(str(tmp_path)).load([str(tmp_path)])
    message = str(raised.value)
    assert message.startswith("cannot read %s: " % (tmp_path / TOPICS_FILE)) and "\n" not in message
    assert "restore it from a backup, or move it away" in message
    assert (tmp_path / TOPICS_FILE).read_bytes() == DAMAGED[kind]  # never overwritten


def test_hand_edited_numbers_in_configs_are_taken_as_strings(tmp_path):
    (tmp_path / TOPICS_FILE).write_text(json.dumps(
        {"topics": {"a": {"partitions": 2, "config": {"retention.ms": 1000, "preallocate": True}}}}))
    assert _without_ids(FileTopicStore(str(tmp_path)).load()) == {
        "a": TopicMetadata(2, {"retention.ms": "1000", "preallocate": "true"})}


def test_a_missing_file_is_rebuilt_from_the_partition_directories(tmp_path, caplog):
    first, second = tmp_path / "d1", tmp_path / "d2"
    for d, names in ((first, ["events-0", "events-2", "__consumer_offsets-0", "lost+found", "x-1.abc-delete"]),
                     (second, ["events-1", "solo-0"])):
        for name in names:
            os.makedirs(d / name)
    (first / "stray-file-0").write_bytes(b"a file, not a partition directory")
    store = FileTopicStore(str(first))
    topics = store.load([str(first), str(second), str(tmp_path / "gone")],
                        {"__consumer_offsets": {"cleanup.policy": "compact"}})
    assert _without_ids(topics) == {"events": TopicMetadata(3, {}), "solo": TopicMetadata(1, {}),
                                    "__consumer_offsets": TopicMetadata(1, {"cleanup.policy": "compact"})}
    assert FileTopicStore(str(first)).load() == topics  # written back
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("%s is missing but 5 partition directories exist" % (first / TOPICS_FILE) in w
               and "events (3 partitions)" in w and "solo (1 partition)" in w for w in warnings), warnings


def test_a_missing_file_without_partition_directories_is_a_new_broker(tmp_path, caplog):
    assert FileTopicStore(str(tmp_path)).load([str(tmp_path)]) == {}
    assert not (tmp_path / TOPICS_FILE).exists()
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
