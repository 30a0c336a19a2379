"""A flow's source tasks against two real brokers over TCP: what is copied, where, in what order, and
where a task resumes; at least once and exactly once."""

from __future__ import annotations

import collections
import time
from types import SimpleNamespace
from typing import Any, List

import pytest

import pylogq
from pylogq.client.admin import AdminClient, ConfigResource, ConfigResourceType, NewPartitions
from pylogq.client.consumer import ConsumerRecord, OffsetAndMetadata, TopicPartition
from pylogq.errors import KafkaTimeoutError, UnstableOffsetCommitError
from pylogq.mirror.clients import FlowClients
from pylogq.mirror.config import parse_config
from pylogq.mirror.metrics import MirrorMetrics
from pylogq.mirror.task import SourceTask, _Sent, flow_group, task_of, transactional_id
from pylogq.mirror.worker import MirrorMaker

from ._support import DEADLINE_S, Clusters, count, end_offsets, read_topic, wait_for

#: The mirror and the clients are the same Python in both passes; the kernels its records pass
#: through are run in the pure pass by the client and broker tests (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass


def _values(got, partition):
    return [r.value for r in got.get(partition, [])]


def test_task_of_is_murmur2_of_topic_dash_partition() -> None:
    # Kafka's Utils.murmur2 of b"orders-0", made positive: the producer's partitioner's hash.
    from pylogq.cluster.partitioner import murmur2, to_positive

    assert task_of("orders", 0, 7) == to_positive(murmur2(b"orders-0")) % 7
    assert {task_of("orders", p, 1) for p in range(10)} == {0}
    spread = [task_of("t", p, 4) for p in range(64)]
    assert set(spread) == {0, 1, 2, 3}  # every task gets some of 64 partitions


@pytest.mark.parametrize("eos", ["disabled", "enabled"])
def test_records_copied_with_partitions_keys_values_headers_timestamps_in_order(clusters: Clusters, eos: str) -> None:
    clusters.a.create_topic("orders", partitions=3)
    with pylogq.Producer(bootstrap_servers=clusters.a_bootstrap) as producer:
        for i in range(90):
            headers = [("seq", b"%d" % i), ("empty", None)] if i % 3 == 0 else None
            producer.send("orders", b"v%d" % i if i % 10 else None, b"k%d" % i if i % 7 else None,
                          headers=headers, partition=i % 3, timestamp_ms=1_600_000_000_000 + i)
        producer.flush()
    config = clusters.config(tasks_max=2, **{"B.exactly.once.source.support": eos})
    with MirrorMaker(config):
        isolation = "read_committed" if eos == "enabled" else "read_uncommitted"
        got = read_topic(clusters.b_bootstrap, "A.orders", lambda g: count(g) >= 90, isolation)
    source = read_topic(clusters.a_bootstrap, "orders", lambda g: count(g) >= 90)
    assert count(got) == 90
    for partition in range(3):
        copies = [(r.key, r.value, list(r.headers), r.timestamp, r.timestamp_type) for r in got[partition]]
        originals = [(r.key, r.value, list(r.headers), r.timestamp, r.timestamp_type) for r in source[partition]]
        assert copies == originals
    assert (None, None) in [(r.key, r.value) for r in got[0]]  # i = 0: neither key nor value
    assert ("empty", None) in got[0][0].headers
    with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
        positions = admin.list_consumer_group_offsets("mm2-A->B")
    assert {tp: o.offset for tp, o in positions.items() if tp.topic == "A.orders"} == {
        TopicPartition("A.orders", p): 30 for p in range(3)}


def test_log_append_time_source_keeps_its_times(clusters: Clusters) -> None:
    clusters.a.create_topic("stamped", partitions=1, config={"message.timestamp.type": "LogAppendTime"})
    clusters.produce("stamped", [(0, None, b"x%d" % i) for i in range(5)])
    source = read_topic(clusters.a_bootstrap, "stamped", lambda g: count(g) >= 5)
    with MirrorMaker(clusters.config()):
        got = read_topic(clusters.b_bootstrap, "A.stamped", lambda g: count(g) >= 5)
    assert [r.timestamp for r in got[0]] == [r.timestamp for r in source[0]]
    assert {r.timestamp_type for r in got[0]} == {0}  # copied as CreateTime: the target stamps nothing
    assert {r.timestamp_type for r in source[0]} == {1}


def test_a_restarted_mirror_resumes_at_its_positions(clusters: Clusters) -> None:
    clusters.a.create_topic("t", partitions=2)
    clusters.produce("t", [(i % 2, None, b"first-%d" % i) for i in range(40)])
    config = clusters.config(tasks_max=2)
    with MirrorMaker(config):
        read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 40)
    clusters.produce("t", [(i % 2, None, b"second-%d" % i) for i in range(40)])
    with MirrorMaker(config):
        read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 80)
    # Stopped: whatever it copied is on the target, and a clean stop committed every acknowledged
    # copy, so the second run copied only the new records.
    assert sum(end_offsets(clusters.b_bootstrap, "A.t", 2).values()) == 80
    got = read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 80)
    for partition in range(2):
        assert _values(got, partition) == [b"first-%d" % i for i in range(partition, 40, 2)] + [
            b"second-%d" % i for i in range(partition, 40, 2)]


def test_a_new_topic_appears_with_its_configs_and_grows(clusters: Clusters) -> None:
    config = clusters.config()
    with MirrorMaker(config) as mirror:
        mirror.wait_joined(10)
        clusters.a.create_topic("later", partitions=2, config={"retention.ms": "3600000",
                                                               "cleanup.policy": "compact",
                                                               "min.insync.replicas": "1"})
        clusters.produce("later", [(0, b"k", b"v0"), (1, b"k", b"v1")])
        got = read_topic(clusters.b_bootstrap, "A.later", lambda g: count(g) >= 2)
        assert sorted(r.value for rs in got.values() for r in rs) == [b"v0", b"v1"]
        with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
            remote = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "A.later")])["topic"]["A.later"]
            assert remote["retention.ms"]["value"] == "3600000"
            assert remote["cleanup.policy"]["value"] == "compact"
            assert "min.insync.replicas" not in remote  # config.properties.exclude's default list
            # A config changed on the source follows (sync.topic.configs.interval.seconds).
            with AdminClient(bootstrap_servers=clusters.a_bootstrap) as source_admin:
                source_admin.incremental_alter_configs([ConfigResource(ConfigResourceType.TOPIC, "later",
                                                                       {"retention.ms": "7200000"})])
                wait_for(lambda: admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "A.later")])
                         ["topic"]["A.later"]["retention.ms"]["value"] == "7200000", "the config to follow")
                # New partitions on the source: the remote topic grows and they are copied.
                source_admin.create_partitions({"later": NewPartitions(4)})
            clusters.produce("later", [(3, b"k", b"v3")])
            got = read_topic(clusters.b_bootstrap, "A.later", lambda g: 3 in g)
            assert _values(got, 3) == [b"v3"]
            assert len(admin.describe_topics(["A.later"])[0]["partitions"]) == 4


def test_topic_filters_internal_topics_and_cycles_are_not_copied(clusters: Clusters) -> None:
    for topic in ("keep-1", "skip-1", "B.came-from-b", "x.internal", "__private"):
        clusters.a.create_topic(topic, partitions=1)
        clusters.produce(topic, [(0, None, topic.encode())])
    config = clusters.config(**{"A->B.topics": "keep-.*, B\\..*, x.*, __.*"})
    with MirrorMaker(config) as mirror:
        read_topic(clusters.b_bootstrap, "A.keep-1", lambda g: count(g) >= 1)
        wait_for(lambda: mirror.flows[0].leader is not None and mirror.flows[0].leader.runs.get("topics", 0) >= 2,
                 "a second look at the topics")
        with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
            names = admin.list_topics()
    assert "A.keep-1" in names
    assert not {"A.skip-1", "A.B.came-from-b", "B.came-from-b", "A.x.internal", "A.__private"} & set(names)


def test_heartbeats_are_written_to_the_source_and_mirrored(clusters: Clusters) -> None:
    from pylogq.mirror.records import Heartbeat

    with MirrorMaker(clusters.config()):
        got = read_topic(clusters.b_bootstrap, "A.heartbeats", lambda g: count(g) >= 1)
    beat = Heartbeat.decode(got[0][0].key, got[0][0].value)
    assert (beat.source_cluster_alias, beat.target_cluster_alias) == ("A", "B")
    assert abs(beat.timestamp - time.time() * 1000) < 60_000


def test_positions_and_transactional_ids_are_named_after_the_flow() -> None:
    flow = parse_config({"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
                         "A->B.enabled": "true", "tasks.max": "3"}).flows[0]
    assert flow_group(flow) == "mm2-A->B"
    assert [transactional_id(flow, i) for i in range(3)] == ["mm2-A->B-task-0", "mm2-A->B-task-1",
                                                             "mm2-A->B-task-2"]


def test_a_committed_position_is_where_a_partition_starts(clusters: Clusters) -> None:
    clusters.a.create_topic("t", partitions=1)
    clusters.produce("t", [(0, None, b"%d" % i) for i in range(10)])
    clusters.b.create_topic("A.t", partitions=1)
    with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
        admin.alter_consumer_group_offsets("mm2-A->B", {TopicPartition("A.t", 0): OffsetAndMetadata(7, "", -1)})
    with MirrorMaker(clusters.config()):
        got = read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 3)
    assert _values(got, 0) == [b"7", b"8", b"9"]


@pytest.mark.parametrize("eos", ["disabled", "enabled"])
def test_a_partition_starts_only_once_its_position_was_read(clusters: Clusters, monkeypatch: pytest.MonkeyPatch,
                                                            eos: str) -> None:
    """The committed positions are read before a partition is assigned: when the read fails (here
    UNSTABLE_OFFSET_COMMIT, a transaction holding the position, which exactly once reads as stable)
    nothing is assigned, and the next look starts the partition at its position, not at
    auto.offset.reset's earliest (which would copy offsets 0-6 again)."""
    clusters.a.create_topic("t", partitions=1)
    clusters.produce("t", [(0, None, b"%d" % i) for i in range(10)])
    clusters.b.create_topic("A.t", partitions=1)
    with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
        admin.alter_consumer_group_offsets("mm2-A->B", {TopicPartition("A.t", 0): OffsetAndMetadata(7, "", -1)})
    stable: List[bool] = []
    read = AdminClient.list_consumer_group_offsets

    def unstable_once(self: AdminClient, group_id: str, *args: Any, **kwargs: Any) -> Any:
        stable.append(kwargs.get("require_stable", False))
        if len(stable) == 1:
            raise UnstableOffsetCommitError("the test's: a transaction holds the position")
        return read(self, group_id, *args, **kwargs)

    monkeypatch.setattr(AdminClient, "list_consumer_group_offsets", unstable_once)
    flow = clusters.config(**{"B.exactly.once.source.support": eos}).flows[0]
    task = SourceTask(flow, 0, FlowClients(flow), MirrorMetrics())
    task.start()
    try:
        wait_for(lambda: task.copied >= 3, "the copies of offsets 7-9")
    finally:
        assert task.stop(DEADLINE_S)
    assert task.error is None
    assert stable == [eos == "enabled"] * 2
    isolation = "read_committed" if eos == "enabled" else "read_uncommitted"
    got = read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 3, isolation)
    assert _values(got, 0) == [b"7", b"8", b"9"]
    assert task.copied == 3


def test_a_failed_copy_stays_first_in_its_queue_and_fails_every_completion() -> None:
    """A copy the target never acknowledged fails the task wherever its failure is seen (the loop,
    a look for partitions, the stop), and the position stays before it: it is not taken off its
    queue by the first look, which a caller that carries on past the error would lose."""
    flow = parse_config({"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
                         "A->B.enabled": "true"}).flows[0]
    task = SourceTask(flow, 0, FlowClients(flow), MirrorMetrics())
    tp = TopicPartition("t", 0)
    record = ConsumerRecord("t", 0, -1, 5, 1_600_000_000_000, 0, None, b"v", (), None, -1, 1, -1)
    failed = SimpleNamespace(is_done=True, value=None, exception=KafkaTimeoutError("the test's: never acknowledged"),
                             batch=object())
    task._producer = SimpleNamespace(flush=lambda timeout=None: None)  # type: ignore[assignment]
    task._acked[tp] = 5
    task._inflight[tp] = collections.deque([_Sent([record], [failed], record.timestamp, record.timestamp,  # type: ignore[list-item]
                                                  record.timestamp)])
    for wait in (False, True):
        with pytest.raises(KafkaTimeoutError, match="never acknowledged"):
            task._complete(wait=wait)
        assert len(task._inflight[tp]) == 1 and task._acked[tp] == 5 and task.copied == 0
