"""Randomized fault schedules against an in-process cluster (issue 29: replication under faults).

Each test runs one seeded schedule of faults (:mod:`tests.cluster._schedules`) on a fresh
three-broker :class:`pylogq.Cluster` under an idempotent acks=all producer, a reader and
a committing group, then checks that nothing acknowledged, read or committed was lost
and that the cluster elected leaders in time. The seed is in the test's id and in the
failure's message.

``PYLOGQ_FAULT_SCHEDULES=N`` runs N schedules (default 30), from a random first seed
(``PYLOGQ_FAULT_SEED_BASE`` fixes it); ``PYLOGQ_FAULT_SEED=S`` runs schedule S alone.
``PYLOGQ_FAULT_STEPS`` sets the faults per schedule (default 3).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from pylogq import records
from pylogq.cluster.broker.local_cluster import Cluster

from ._schedules import (
    CONFIG,
    N_BROKERS,
    PARTITIONS,
    TOPIC,
    Workload,
    check_logs,
    healthy,
    run_schedule,
    wait_for,
    writes_go_on,
)

COUNT = int(os.environ.get("PYLOGQ_FAULT_SCHEDULES", "30"))
STEPS = int(os.environ.get("PYLOGQ_FAULT_STEPS", "3"))
if os.environ.get("PYLOGQ_FAULT_SEED"):
    SEEDS = [int(os.environ["PYLOGQ_FAULT_SEED"])]
else:
    _BASE = int(os.environ.get("PYLOGQ_FAULT_SEED_BASE", random.randrange(1 << 30)))
    SEEDS = [_BASE + i for i in range(COUNT)]


@pytest.mark.parametrize("seed", SEEDS, ids=["seed-%d" % s for s in SEEDS])
def test_fault_schedule(seed: int, tmp_path: Path) -> None:
    run_schedule(seed, tmp_path, STEPS)


def test_the_checks_see_what_they_are_for(tmp_path: Path) -> None:
    """The safety checks fail on a lost acknowledged record, a lost read, a record stored
    twice, replicas that differ and a committed offset that went backwards (a check that
    cannot fail would let every schedule pass)."""
    with Cluster(N_BROKERS, str(tmp_path), **CONFIG) as cluster:
        cluster.create_topic(TOPIC, PARTITIONS, N_BROKERS)
        cluster.wait_until(lambda: cluster.brokers[0].ensure_offsets_topic() == 0, 30, "the offsets topic")
        workload = Workload(cluster)
        workload.start()
        try:
            ok, problem, _ = wait_for(writes_go_on(workload, 5), 30)
            assert ok, problem
            ok, problem, _ = wait_for(lambda: None if workload.commits and workload.observed else "no commit", 30)
            assert ok, problem
        finally:
            workload.finish()
        assert not workload.failures
        ok, problem, _ = wait_for(lambda: healthy(cluster, in_step=True), 30)
        assert ok, problem
        assert check_logs(cluster, workload) == []
        end = workload.acked[0][-1][0] + 1
        workload.acked[0].append((end, b"never written"))
        workload.read[1].append((0, b"not what was read"))
        leader = cluster.broker(cluster.leader(TOPIC, 1))
        leader.produce(TOPIC, 1, bytes(records.build_batch([workload.acked[1][0][1]])), acks=-1)  # not idempotent
        workload.observed.append(({}, {0: -1, 1: -1}))
        found = "\n".join(check_logs(cluster, workload))
        assert "partition 0: 1 acknowledged records not at their offsets" in found
        assert "partition 1: 1 records read were later lost" in found
        assert "partition 1: records stored twice: [%r]" % workload.acked[1][0][1] in found
        assert "committed offset went backwards" in found
        # A replica that lost its tail: the replicas differ below the high watermark.
        follower = next(b for b in cluster.brokers if not b.hosted((TOPIC, 0)).is_leader)
        follower.hosted((TOPIC, 0)).log.truncate_to(end - 1)
        assert "replicas on brokers" in "\n".join(check_logs(cluster, workload))
