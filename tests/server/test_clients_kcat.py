"""kcat (Debian's package, librdkafka 2.0.2) against pylogq-broker and the in-process fixture.

kcat has no admin commands: topics here are auto-created by a kcat produce or created
with confluent-kafka's admin client. Output is read with ``-f`` formats whose fields
are tab-separated; the records sent contain no tabs or newlines.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ._support import CODECS, HEARTBEAT_MS, SESSION_TIMEOUT_MS, stored_batches, unique

ACKS = ("0", "1", "all")
TIMEOUT_S = 30.0
# partition, offset, key, value, CreateTime, headers
FORMAT = r"%p\t%o\t%k\t%s\t%T\t%h\n"
FAST = ("-X", "fetch.wait.max.ms=20", "-m", "10")
GROUP = ("-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=%d" % SESSION_TIMEOUT_MS,
         "-X", "heartbeat.interval.ms=%d" % HEARTBEAT_MS)

Row = Tuple[int, int, str, str, int, str]  # as FORMAT prints it


def _kcat(kcat: str, bootstrap: str, *args: str, stdin: str = "") -> str:
    """Run kcat to completion; -> its stdout. A non-zero exit fails with its stderr."""
    done = subprocess.run([kcat, "-b", bootstrap, *args], input=stdin.encode(), capture_output=True,
                          timeout=TIMEOUT_S)
    assert done.returncode == 0, "kcat %s exited %d: %s" % (" ".join(args), done.returncode, done.stderr.decode())
    return done.stdout.decode()


def _rows(output: str) -> List[Row]:
    rows = []
    for line in output.splitlines():
        p, o, k, v, t, h = line.split("\t")
        rows.append((int(p), int(o), k, v, int(t), h))
    return rows


def _now_ms() -> int:
    return int(time.time() * 1000)


def _lines(tag: str, count: int) -> List[Tuple[str, str]]:
    # Compressible, so that librdkafka compresses even a batch of one record: it sends
    # a batch uncompressed when compression would not make it smaller.
    return [("%s-key-%d" % (tag, i), "%s-value-%d %s" % (tag, i, "x" * (100 + i * 13))) for i in range(count)]


def _produce(kcat: str, bootstrap: str, topic: str, pairs: Sequence[Tuple[str, str]], *args: str) -> None:
    _kcat(kcat, bootstrap, "-P", "-t", topic, "-K", ":", *args, stdin="".join("%s:%s\n" % kv for kv in pairs))


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(TIMEOUT_S)


def test_produce_every_codec_and_acks_then_consume(kcat: str, bootstrap: str, broker_data_dir: Path) -> None:
    topic = unique("kcat-codecs")
    _create(bootstrap, topic, len(ACKS) * len(CODECS))
    expected: Dict[int, Tuple[List[Tuple[str, str]], str]] = {}
    before = _now_ms()
    for i, (acks, codec) in enumerate((a, c) for a in ACKS for c in CODECS):
        pairs = _lines("%s-%s" % (acks, codec), 4)
        _produce(kcat, bootstrap, topic, pairs, "-p", str(i), "-z", codec, "-X", "acks=%s" % acks,
                 "-H", "acks=%s" % acks, "-H", "codec=%s" % codec)
        expected[i] = (pairs, "acks=%s,codec=%s" % (acks, codec))
    after = _now_ms()

    rows = _rows(_kcat(kcat, bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", FORMAT, *FAST))
    assert len(rows) == 4 * len(expected)
    for partition, (pairs, headers) in expected.items():
        got = sorted(r for r in rows if r[0] == partition)
        assert [(o, k, v, h) for _, o, k, v, _, h in got] == [(o, k, v, headers) for o, (k, v) in enumerate(pairs)]
        assert all(before <= t <= after for *_, t, _ in got), (before, after, got)
        codec = CODECS[partition % len(CODECS)]
        stored = stored_batches(broker_data_dir, topic, partition)
        assert {b.codec for b in stored} == {codec}, stored  # compressed by librdkafka 2.0.2 as asked

    # consume one partition from an absolute offset and from the end
    rows = _rows(_kcat(kcat, bootstrap, "-C", "-t", topic, "-p", "3", "-o", "2", "-e", "-f", FORMAT, *FAST))
    assert [(o, k) for _, o, k, *_ in rows] == [(2, expected[3][0][2][0]), (3, expected[3][0][3][0])]
    rows = _rows(_kcat(kcat, bootstrap, "-C", "-t", topic, "-p", "3", "-o", "-1", "-e", "-f", FORMAT, *FAST))
    assert [(o, k) for _, o, k, *_ in rows] == [(3, expected[3][0][3][0])]


def test_auto_create_metadata_and_offsets_by_time(kcat: str, bootstrap: str) -> None:
    topic = unique("kcat-auto")
    first, second = _lines("first", 3), _lines("second", 2)
    _produce(kcat, bootstrap, topic, first)  # auto-creates the topic
    rows = _rows(_kcat(kcat, bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", FORMAT, *FAST))
    assert [(p, o, k, v, h) for p, o, k, v, _, h in rows] == [(0, i, k, v, "") for i, (k, v) in enumerate(first)]
    first_time = rows[-1][4]
    # a CreateTime strictly after the first batch's, so lookups by time can tell them apart
    deadline = time.monotonic() + 5
    while _now_ms() <= first_time:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    _produce(kcat, bootstrap, topic, second, "-z", "gzip")
    rows = _rows(_kcat(kcat, bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", FORMAT, *FAST))
    assert [(o, k, v) for _, o, k, v, _, _ in rows] == [(i, k, v) for i, (k, v) in enumerate(first + second)]
    times = [t for _, _, _, _, t, _ in rows]
    second_time = rows[3][4]
    assert second_time > first_time

    metadata = json.loads(_kcat(kcat, bootstrap, "-L", "-J", "-t", topic))
    assert metadata["controllerid"] == 0
    assert [b["id"] for b in metadata["brokers"]] == [0]
    assert metadata["brokers"][0]["name"] == bootstrap
    [described] = metadata["topics"]
    assert described["topic"] == topic and "error" not in described
    assert [(p["partition"], p["leader"]) for p in described["partitions"]] == [(0, 0)]

    def query(timestamp: int) -> int:
        out = _kcat(kcat, bootstrap, "-Q", "-t", "%s:0:%d" % (topic, timestamp)).strip()
        assert out.startswith("%s [0] offset " % topic), out
        return int(out.rsplit(" ", 1)[1])

    assert query(-2) == 0  # earliest
    assert query(-1) == 5  # latest
    # The earliest offset whose timestamp is at or after the one asked. Each record has its
    # producer's CreateTime: the first three may span milliseconds, so the last one's time
    # finds the first record stamped at or after it.
    assert query(times[0]) == 0
    assert query(first_time) == min(o for o, t in enumerate(times) if t >= first_time)
    assert query(second_time) == 3
    rows = _rows(_kcat(kcat, bootstrap, "-C", "-t", topic, "-o", "s@%d" % second_time, "-e", "-f", FORMAT, *FAST))
    assert [o for _, o, *_ in rows] == [3, 4]


def test_group_consumer_commits_and_resumes(kcat: str, bootstrap: str) -> None:
    topic, group = unique("kcat-group"), unique("kcat-group")
    _create(bootstrap, topic, 2)
    sent = {0: _lines("g0", 3), 1: _lines("g1", 2)}
    for partition, pairs in sent.items():
        _produce(kcat, bootstrap, topic, pairs, "-p", str(partition))

    # -G joins the group, gets both partitions, commits what it consumed on exit
    rows = _rows(_kcat(kcat, bootstrap, "-G", group, "-c", "5", "-f", FORMAT, *GROUP, *FAST, topic))
    assert sorted((p, o, k, v) for p, o, k, v, _, _ in rows) == [
        (p, o, k, v) for p in sorted(sent) for o, (k, v) in enumerate(sent[p])]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])
    committed = admin.list_consumer_group_offsets([request])[group].result(TIMEOUT_S)
    assert sorted((tp.partition, tp.offset) for tp in committed.topic_partitions) == [(0, 3), (1, 2)]

    more = {0: _lines("more0", 1), 1: _lines("more1", 2)}
    for partition, pairs in more.items():
        _produce(kcat, bootstrap, topic, pairs, "-p", str(partition))
    rows = _rows(_kcat(kcat, bootstrap, "-G", group, "-c", "3", "-f", FORMAT, *GROUP, *FAST, topic))
    assert sorted((p, o, k) for p, o, k, *_ in rows) == [(0, 3, more[0][0][0]), (1, 2, more[1][0][0]),
                                                         (1, 3, more[1][1][0])]
