"""Processes sharing a flow's tasks through the workers' group on the target, and the flow's leader:
checkpoints, offset translation, group offsets synced, status and metrics."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Dict, List

import pytest

import pylogq
from pylogq.client.admin import AdminClient
from pylogq.client.consumer import OffsetAndMetadata, TopicPartition
from pylogq.errors import ConfigError
from pylogq.mirror.metrics import CHECKPOINT_PREFIX, SOURCE_PREFIX
from pylogq.mirror.status import flow_status, translate_group
from pylogq.mirror.worker import MirrorMaker

from .._ports import free_port
from ._support import DEADLINE_S, Clusters, Load, brokers, count, read_topic, wait_for

#: The mirror and the clients are the same Python in both passes; the kernels its records pass
#: through are run in the pure pass by the client and broker tests (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass


def _owned(mirror: MirrorMaker) -> List[int]:
    return mirror.flows[0].owned


def test_two_workers_share_the_tasks_and_one_leaving_hands_them_over(clusters: Clusters) -> None:
    clusters.a.create_topic("t", partitions=8)
    config = clusters.config(tasks_max=2)
    first = MirrorMaker(config)
    second = MirrorMaker(config)
    first.start()
    try:
        wait_for(lambda: _owned(first) == [0, 1], "the first worker to run both tasks")
        second.start()
        # The group rebalances: one task each, and only the owner of task 0 leads.
        wait_for(lambda: sorted(_owned(first) + _owned(second)) == [0, 1] and _owned(first) and _owned(second),
                 "one task each")
        leaders = wait_for(lambda: [m for m in (first, second) if m.flows[0].leader is not None], "a leader")
        assert len(leaders) == 1 and 0 in _owned(leaders[0])
        clusters.produce("t", [(i % 8, None, b"%d" % i) for i in range(160)])
        read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 160)
        wait_for(lambda: all(sum(t.copied for t in m.flows[0].tasks.values()) for m in (first, second)),
                 "both workers to have copied part of the flow")
        with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
            [workers] = admin.describe_consumer_groups(["mm2-A->B-workers"])
        assert workers.state == "Stable" and len(workers.members) == 2
        # The second leaves cleanly: the first takes its task at once, where it left off.
        second.stop()
        wait_for(lambda: _owned(first) == [0, 1], "the first worker to take both tasks back")
        clusters.produce("t", [(i % 8, None, b"%d" % i) for i in range(160, 320)])
        got = read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 320)
    finally:
        second.stop()
        first.stop()
    for partition, records in got.items():
        # A clean hand-over copies nothing twice.
        assert [r.value for r in records] == [b"%d" % i for i in range(partition, 320, 8)]


def test_a_failed_task_is_started_again(clusters: Clusters) -> None:
    clusters.a.create_topic("t", partitions=1)
    clusters.produce("t", [(0, None, b"a")])
    with MirrorMaker(clusters.config()) as mirror:
        read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 1)
        [task] = mirror.flows[0].tasks.values()
        # The remote topic deleted under the task: its next copy fails (the producer may not create it).
        with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
            admin.delete_topics(["A.t"])
        clusters.produce("t", [(0, None, b"b")])
        wait_for(lambda: task.error is not None or mirror.flows[0].restarts, "the task to fail")
        # The leader makes the remote topic again; the restarted task copies from its last position.
        wait_for(lambda: mirror.flows[0].restarts >= 1, "the task to start again", timeout=15)
        got = read_topic(clusters.b_bootstrap, "A.t", lambda g: b"b" in [r.value for r in g.get(0, [])])
    assert [r.value for r in got[0]][-1] == b"b"


@pytest.mark.parametrize("eos", ["disabled", "enabled"])
def test_the_target_broker_restarting_under_load(tmp_path: Path, eos: str) -> None:
    for clusters in brokers(tmp_path, b_port=free_port()):
        clusters.a.create_topic("load", partitions=3)
        load = Load(clusters, "load", 3, 4000)
        isolation = "read_committed" if eos == "enabled" else "read_uncommitted"
        with MirrorMaker(clusters.config(tasks_max=2, **{"B.exactly.once.source.support": eos})) as mirror:
            read_topic(clusters.b_bootstrap, "A.load", lambda g: count(g) >= 300, isolation)
            clusters.restart_target(tmp_path / "b", down_s=1.0)
            load.join()
            got = read_topic(clusters.b_bootstrap, "A.load", lambda g: all(
                set(r.value for r in g.get(p, [])) >= set(load.sent[p]) for p in range(3)), isolation, timeout=30)
            assert mirror.flows[0].error is None
        for partition in range(3):
            values = [r.value for r in got[partition]]
            # Every record, in order; at least once may copy again what was unacknowledged at the restart.
            assert list(dict.fromkeys(values)) == load.sent[partition]
            if eos == "enabled":
                assert len(values) == len(load.sent[partition])


def _commit(bootstrap: str, group: str, offsets: Dict[TopicPartition, int]) -> None:
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.alter_consumer_group_offsets(group, {tp: OffsetAndMetadata(o, "meta-%d" % o, -1)
                                                   for tp, o in offsets.items()})


def test_checkpoints_translate_a_groups_offsets_and_sync_them(clusters: Clusters) -> None:
    clusters.a.create_topic("orders", partitions=2)
    clusters.produce("orders", [(i % 2, None, b"%d" % i) for i in range(200)])
    # Offsets on the source: what a consumer group has read.
    _commit(clusters.a_bootstrap, "billing", {TopicPartition("orders", 0): 60, TopicPartition("orders", 1): 100})
    _commit(clusters.a_bootstrap, "console-consumer-1", {TopicPartition("orders", 0): 5})  # groups.exclude
    config = clusters.config(offset_lag_max=10, **{"sync.group.offsets.enabled": "true"})

    def translated():
        return {tp: o.offset for tp, o in translate_group(config, "A", "B", "billing").items()}

    with MirrorMaker(config) as mirror:
        read_topic(clusters.b_bootstrap, "A.orders", lambda g: count(g) >= 200)
        # Translated through the latest offset sync kept at or before each offset: exact at a sync
        # (the end, 100), else one past it; never past the offset, so a consumer moving over skips
        # nothing. (The syncs of offsets far behind the latest are kept sparsely, Kafka's store.)
        found = wait_for(lambda: (lambda t: t if len(t) == 2 else None)(translated()), "the group's checkpoints")
        assert 0 < found[TopicPartition("A.orders", 0)] <= 60
        assert found[TopicPartition("A.orders", 1)] == 100
        assert not translate_group(config, "A", "B", "console-consumer-1")
        # sync.group.offsets: the group has no member on the target, so its offsets are committed there.
        with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
            wait_for(lambda: {tp: o.offset for tp, o in admin.list_consumer_group_offsets("billing").items()}
                     == found, "the group's offsets on the target")
            metadata = admin.list_consumer_group_offsets("billing")[TopicPartition("A.orders", 1)].metadata
            assert metadata == "meta-100"
            # Only forward: a consumer on the target that read further keeps its offsets.
            admin.alter_consumer_group_offsets("billing", {TopicPartition("A.orders", 0): 90})
            _commit(clusters.a_bootstrap, "billing", {TopicPartition("orders", 0): 80, TopicPartition("orders", 1): 100})
            wait_for(lambda: translated()[TopicPartition("A.orders", 0)] > found[TopicPartition("A.orders", 0)],
                     "the next checkpoint")
            leader = mirror.flows[0].leader
            assert leader is not None
            synced = leader.runs["group offsets"]
            wait_for(lambda: leader.runs["group offsets"] >= synced + 2, "the group offsets to be synced again")
            assert admin.list_consumer_group_offsets("billing")[TopicPartition("A.orders", 0)].offset == 90


def test_a_failed_over_consumer_reads_on_from_the_translated_offsets(clusters: Clusters) -> None:
    clusters.a.create_topic("events", partitions=1)
    config = clusters.config(offset_lag_max=5)
    with MirrorMaker(config):
        clusters.produce("events", [(0, None, b"%d" % i) for i in range(37)])
        with pylogq.Consumer("events", bootstrap_servers=clusters.a_bootstrap, group_id="app",
                             auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
            seen: List[bytes] = []
            while len(seen) < 37:
                for records in consumer.poll(timeout_ms=200).values():
                    seen.extend(r.value for r in records)
            consumer.commit()
        offsets = wait_for(lambda: translate_group(config, "A", "B", "app"), "the group's checkpoint")
        # The source goes on; the consumer fails over to B, where the mirror copied everything.
        clusters.produce("events", [(0, None, b"%d" % i) for i in range(37, 100)])
        read_topic(clusters.b_bootstrap, "A.events", lambda g: count(g) >= 100)
    with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
        admin.alter_consumer_group_offsets("app", dict(offsets))
    with pylogq.Consumer("A.events", bootstrap_servers=clusters.b_bootstrap, group_id="app",
                         auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        rest: List[bytes] = []
        while not rest or rest[-1] != b"99":
            for records in consumer.poll(timeout_ms=200).values():
                rest.extend(r.value for r in records)
    # It reads on from where it was, re-reading at most offset.lag.max records, skipping none.
    first = int(rest[0])
    assert 37 - 5 <= first <= 37
    assert rest == [b"%d" % i for i in range(first, 100)]


def test_status_shows_positions_lag_and_workers(clusters: Clusters) -> None:
    clusters.a.create_topic("t", partitions=2)
    clusters.produce("t", [(i % 2, None, b"%d" % i) for i in range(20)])
    config = clusters.config(tasks_max=2)
    flow = config.flows[0]
    before = flow_status(flow)
    assert [(p.topic, p.partition, p.position, p.lag) for p in before.partitions if p.topic == "t"] == [
        ("t", 0, None, 10), ("t", 1, None, 10)]
    assert before.workers == [] and before.workers_state == "Dead"
    with MirrorMaker(config) as mirror:
        read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 20)
        wait_for(lambda: all(p.position == 10 for p in flow_status(flow).partitions if p.topic == "t"),
                 "the positions to be committed")
        found = flow_status(flow)
        assert [(p.topic, p.partition, p.remote_topic, p.end_offset, p.position, p.lag)
                for p in found.partitions if p.topic == "t"] == [("t", 0, "A.t", 10, 10, 0), ("t", 1, "A.t", 10, 10, 0)]
        assert found.workers_state == "Stable"
        [worker] = found.workers
        assert worker.tasks == (0, 1) and worker.client_id == "mm2-A->B-worker"
        assert mirror.flows[0].owned == [0, 1]


def test_metrics_in_mirrormaker_2s_names(clusters: Clusters) -> None:
    clusters.a.create_topic("t", partitions=1)
    clusters.produce("t", [(0, None, b"0123456789")] * 5)
    _commit(clusters.a_bootstrap, "g", {TopicPartition("t", 0): 5})
    with MirrorMaker(clusters.config(offset_lag_max=1)) as mirror:
        read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 5)
        labels = '{partition="0",source="A",target="B",topic="A.t"}'
        registry = mirror.metrics.registry()
        checkpoint = CHECKPOINT_PREFIX + 'checkpoint_latency_ms{group="g",partition="0",source="A",target="B",topic="A.t"}'

        def counted():
            samples = registry.samples()
            done = (samples.get(SOURCE_PREFIX + "record_count" + labels) == 5 and checkpoint in samples
                    and SOURCE_PREFIX + "records_lag" + labels in samples)
            return samples if done else None

        samples = wait_for(counted, "the copies, their lag and the checkpoint to be counted")
        assert samples[SOURCE_PREFIX + "byte_count" + labels] == 50
        for name in ("record_age_ms", "record_age_ms_max", "record_age_ms_min", "record_age_ms_avg",
                     "replication_latency_ms", "replication_latency_ms_max", "replication_latency_ms_min",
                     "replication_latency_ms_avg", "record_rate", "byte_rate"):
            assert samples[SOURCE_PREFIX + name + labels] >= 0, name
        assert samples[SOURCE_PREFIX + "records_lag" + labels] == 0
        text = registry.exposition().decode()
        assert "# TYPE kafka_connect_mirror_mirrorsourceconnector_record_count gauge" in text
        totals = mirror.metrics.flow_totals("A", "B")
        assert totals.records >= 5 and totals.bytes >= 50


def test_stop_while_tasks_copy_leaves_nothing_running(clusters: Clusters) -> None:
    clusters.a.create_topic("t", partitions=4)
    before = {t.name for t in threading.enumerate()}
    mirror = MirrorMaker(clusters.config(tasks_max=3))
    mirror.start()
    clusters.produce("t", [(i % 4, None, b"%d" % i) for i in range(400)])
    assert mirror.stop(30)
    left = {t.name for t in threading.enumerate()} - before
    assert not [name for name in left if name.startswith("mirror-")], left


def test_processes_with_different_tasks_max_never_run_two_splits(clusters: Clusters) -> None:
    """A process started with a larger tasks.max grows the tasks topic, and the process running
    the smaller one stops its flow at its next assignment, before running a task of the old
    split (one source partition would otherwise be copied by two tasks, exactly once by two
    transactional ids that cannot fence each other). A smaller tasks.max is refused at start."""
    clusters.a.create_topic("t", partitions=4)
    first = MirrorMaker(clusters.config(tasks_max=2))
    second = MirrorMaker(clusters.config(tasks_max=3))
    with first:
        assert first.wait_joined(DEADLINE_S) and first.flows[0].owned == [0, 1]
        with second:
            wait_for(lambda: first.flows[0].error is not None, "the first process to stop its flow")
            assert "has 3 partitions, but this process runs flow A->B with tasks.max = 2" in str(first.flows[0].error)
            assert first.flows[0].join(DEADLINE_S) and first.flows[0].tasks == {}
            wait_for(lambda: second.flows[0].owned == [0, 1, 2], "the second process to run the three tasks")
            assert second.flows[0].error is None
    with pytest.raises(ConfigError, match="mm2-tasks.A.internal on cluster B has 3 partitions, but this process "
                                          r"runs flow A->B with tasks.max = 2: .*stop every process of the flow"):
        MirrorMaker(clusters.config(tasks_max=2)).start()
