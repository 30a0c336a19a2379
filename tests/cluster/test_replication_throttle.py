"""Replication throttles (cluster/broker/replication_quota.py): the rate measured as Kafka's
``SimpleRate`` measures it, on a clock the test moves, and which replicas a broker throttles; then
a reassignment on a three-broker cluster copying a partition under each side's bound, which
it never copies faster than (less the burst the first samples allow), while in-sync followers
are never held back. How close the copy comes to the bound is measured in
benchmarks/test_reassignment.py, not asserted here."""

from __future__ import annotations

import time
from typing import Any, List

import pytest

import pylogq
from pylogq.cluster.broker.replication_quota import ReplicationQuota, is_throttled_replica

from .._cluster_ops import eventually, topic_with_records

MB = 1 << 20
VALUE = b"x" * 1000


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_counts_a_burst_whole_over_one_window() -> None:
    clock = Clock()
    quota = ReplicationQuota("leader", samples=11, window_s=1.0, clock=clock)
    assert quota.rate() == 0 and not quota.exceeded() and quota.wait_s() == 0
    quota.record(50 * MB)
    # One burst: measured over one window (Kafka's SimpleRate), so 50 MB/s; a client
    # quota's Rate would spread it over ten windows.
    assert quota.rate() == pytest.approx(50 * MB)
    clock.now += 0.5
    assert quota.rate() == pytest.approx(50 * MB)
    quota.set_bound(10 * MB)
    assert quota.exceeded()
    quota.record(60 * MB)
    assert quota.rate() == pytest.approx(110 * MB) and quota.exceeded()
    # 110 MB at 10 MB/s: back at the bound 11 s after the first sample, without more bytes.
    assert quota.wait_s() == pytest.approx(10.5)
    clock.now += 5.0
    assert quota.rate() == pytest.approx(110 * MB / 5.5)
    clock.now += 5.0
    assert quota.exceeded() and quota.wait_s() == pytest.approx(0.5)
    clock.now += 0.5
    assert not quota.exceeded() and quota.wait_s() == 0
    clock.now += 20.0  # every sample expired
    assert quota.rate() == 0 and quota.wait_s() == 0


def test_a_sample_expires_samples_windows_after_its_last_record() -> None:
    clock = Clock()
    quota = ReplicationQuota("follower", samples=3, window_s=1.0, clock=clock)
    quota.set_bound(MB)
    quota.record(2 * MB)
    clock.now += 0.9
    quota.record(2 * MB)  # the same sample: started at 100, last record at 100.9
    # 4 MB over max(since 100, 1 s): at the bound at 104; the sample expires at 103.9 first.
    assert quota.wait_s() == pytest.approx(3.0)
    clock.now += 2.9
    assert quota.exceeded()
    clock.now += 0.1
    assert quota.rate() == 0 and not quota.exceeded()


def test_the_rate_is_the_bytes_over_the_elapsed_time_once_the_window_has_passed() -> None:
    clock = Clock()
    quota = ReplicationQuota("follower", samples=3, window_s=1.0, clock=clock)
    for _ in range(3):
        quota.record(MB)
        clock.now += 1.0
    # Samples at 100, 101, 102; now 103: the first expired at 103 (ends at 101, horizon 100).
    assert quota.rate() == pytest.approx(2 * MB / 2.0)
    assert quota.throttled_bytes == 3 * MB


def test_the_wait_counts_the_samples_that_expire_meanwhile() -> None:
    clock = Clock()
    quota = ReplicationQuota("follower", samples=2, window_s=1.0, clock=clock)
    quota.set_bound(3 * MB)
    quota.record(4 * MB)
    clock.now += 1.5
    quota.record(4 * MB)
    assert quota.rate() == pytest.approx(8 * MB / 1.5) and quota.exceeded()
    # Both samples would be at the bound 8/3 s after the first started (at 102.67); but the
    # first expires at 102, two windows after its record, and the second alone (4 MB since
    # 101.5) is at the bound 4/3 s after it started.
    assert quota.wait_s() == pytest.approx(4 / 3)
    clock.now += 4 / 3 - 0.01
    assert quota.exceeded()
    clock.now += 0.01
    assert not quota.exceeded() and quota.rate() == pytest.approx(3 * MB)


def test_an_unbounded_quota_is_never_exceeded() -> None:
    clock = Clock()
    quota = ReplicationQuota("leader", clock=clock)
    quota.record(10 ** 12)
    assert not quota.exceeded()
    quota.set_bound(1000)
    assert quota.exceeded()
    quota.set_bound(2 ** 63 - 1)  # Kafka's "no bound"
    assert quota.bound is None and not quota.exceeded()


@pytest.mark.parametrize("value, partition, broker, throttled", [
    ((), 0, 1, False),
    (("*",), 7, 3, True),
    (("0:1", "0:2", "1:2"), 0, 1, True),
    (("0:1", "0:2", "1:2"), 1, 1, False),
    (("0:1", "0:2", "1:2"), 1, 2, True),
    (("10:1",), 0, 1, False),
])
def test_a_broker_throttles_the_replicas_listed_with_its_id(value: Any, partition: int, broker: int,
                                                            throttled: bool) -> None:
    assert is_throttled_replica(value, partition, broker) is throttled


# -- a throttled reassignment -------------------------------------------------------------------

RATE = 4 * MB
DATA = 16 * MB
SAMPLES, WINDOW_S = 2, 1
#: What may go before the bound bites: the first window's allowance (the rate is measured
#: over at least one window) and one fetch's records past it.
BURST = RATE * WINDOW_S + MB


@pytest.fixture
def cluster(tmp_path: Any) -> Any:
    c = pylogq.Cluster(3, str(tmp_path), **{"replication.quota.window.num": SAMPLES,
                                           "replication.quota.window.size.seconds": WINDOW_S,
                                           "replica.fetch.max.bytes": MB})
    try:
        c.serve()
        yield c
    finally:
        c.close()




def _throttle(cluster: Any, topic: str, key: str, rate: int, replicas: str) -> None:
    """Set one side's throttle, and wait until every broker runs with it: the configs reach
    the other brokers by the store's change notifications (a replica added later reads the
    topic's config when it opens)."""
    controller = cluster.controller()
    controller.alter_broker_configs("", [("SET", "%s.replication.throttled.rate" % key, str(rate))], incremental=True)
    controller.alter_configs(topic, {"%s.replication.throttled.replicas" % key: replicas}, incremental=True)
    listed = tuple(replicas.split(","))

    def applied() -> bool:
        for broker in cluster.brokers:
            replicas_of = broker.cluster.replicas
            if getattr(replicas_of, "%s_quota" % key).bound != rate:
                return False
            hosted = replicas_of.host.hosted((topic, 0))
            if hosted is not None and \
                    getattr(hosted.log.config, "%s_replication_throttled_replicas" % key) != listed:
                return False
        return True

    eventually(applied, "every broker to run with the %s throttle" % key)


def _copy_time(cluster: Any, topic: str, target: List[int]) -> float:
    controller = cluster.controller()
    start = time.monotonic()
    assert controller.alter_partition_reassignments({(topic, 0): target}) == {(topic, 0): (0, None)}
    eventually(lambda: controller.list_partition_reassignments() == {}, "the reassignment to complete")
    return time.monotonic() - start


def _log_end(cluster: Any, broker_id: int, topic: str) -> int:
    partition = cluster.broker(broker_id).cluster.replicas.host.hosted((topic, 0))
    return -1 if partition is None else int(partition.log_end_offset)


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_throttled_reassignment_never_copies_faster_than_the_bound(cluster: Any, side: str) -> None:
    a, b, c = sorted(x.broker_id for x in cluster.brokers)
    topic = topic_with_records(cluster, {0: [a, b]}, DATA // len(VALUE), prefix="throttled", value=lambda i: VALUE)
    # As the tool sets them: the leader side lists the replicas that send (the original
    # ones), the follower side the one being added.
    _throttle(cluster, topic, side, RATE, "0:%d,0:%d" % (a, b) if side == "leader" else "0:%d" % c)
    took = _copy_time(cluster, topic, [a, b, c])
    assert took >= (DATA - BURST) / RATE, "%.2f s to copy %d bytes under %d bytes/s" % (took, DATA, RATE)
    assert _log_end(cluster, c, topic) == _log_end(cluster, a, topic)
    replicas = cluster.broker(c if side == "follower" else a).cluster.replicas
    quota = replicas.follower_quota if side == "follower" else replicas.leader_quota
    assert quota.throttled_bytes >= DATA - MB


def test_an_in_sync_follower_is_never_throttled(cluster: Any) -> None:
    a, b, _ = sorted(x.broker_id for x in cluster.brokers)
    topic = topic_with_records(cluster, {0: [a, b]}, DATA // len(VALUE), prefix="throttled", value=lambda i: VALUE)
    # Throttle everything on both sides, as low as it goes: b is in sync, so it keeps up.
    _throttle(cluster, topic, "leader", 1, "*")
    _throttle(cluster, topic, "follower", 1, "*")
    producer = pylogq.Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    try:
        for i in range(200):
            producer.send(topic, value=b"after-%d" % i, partition=0)
        producer.flush()  # acks=all: answered only once b has every record
    finally:
        producer.close()
    eventually(lambda: _log_end(cluster, b, topic) == _log_end(cluster, a, topic), "b to keep up")
    for broker in (a, b):
        replicas = cluster.broker(broker).cluster.replicas
        assert replicas.leader_quota.throttled_bytes == 0 and replicas.follower_quota.throttled_bytes == 0
