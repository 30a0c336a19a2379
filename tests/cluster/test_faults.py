"""Process-level fault injection for replication: kills, empty disks, frozen processes, ZooKeeper
restarts and outages, network partitions and clean restarts, under a producer and a consumer group.

Real ZooKeeper (this module's own, since some faults restart it), three ``pylogq-broker``
processes behind fault-injecting proxies, a topic with replication factor 3 and
``min.insync.replicas=2``, and ``__consumer_offsets``; the harness is ``_faults.py``.
Each randomized schedule starts a fresh cluster and runs a few faults drawn from its seed;
after them every acknowledged record must be there exactly once at its offset, everything
the group read must still be there, committed offsets must never have gone backwards, the
replicas must be byte-identical below the high watermark, and every fault must have left
every partition with a live leader, visible in every live broker's Metadata, within two
session timeouts. The named tests are the issue's acceptance points.

Five randomized schedules run by default, from a base seed drawn anew each run;
``PYLOGQ_FAULT_SCHEDULES=200`` runs 200 of them instead (the soak: seeds from the base seed
up), ``PYLOGQ_FAULT_SEED`` replays one (the failure message names its seed) or sets the base
seed of a soak, ``PYLOGQ_FAULT_STEPS`` sets the faults per schedule. The named tests run
always.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from pylogq import records

from .._zookeeper import ZooKeeperServer
from . import _faults
from ._faults import (
    BOUND_S,
    PARTITIONS,
    PRODUCE,
    SESSION_S,
    TOPIC,
    FaultCluster,
    Run,
    Step,
    Workload,
    verify,
    wait_for,
)
from . import _processes
from ._processes import duplicate_failures, read_back_failures, replicas_identical

#: Replication across broker processes and ZooKeeper: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

BASE_SEED = _faults.base_seed()
SCHEDULES = _faults.schedule_count()
STEPS = int(os.environ.get("PYLOGQ_FAULT_STEPS", "5"))
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture(scope="module")
def fault_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """This module's own ZooKeeper: its faults stop and restart it."""
    for module in ("confluent_kafka", "confluent_kafka.admin", "kafka"):
        pytest.importorskip(module)  # in a fixture: under PYLOGQ_REQUIRE_ALL the skip is a failure
    server = ZooKeeperServer(tmp_path_factory.mktemp("faults-zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def quiet_kafka_python() -> Iterator[None]:
    """kafka-python logs every connection the faults break at ERROR, with its traceback: pages of
    it in a failure's report, none of it news. Its own logger only, for this module's tests."""
    logger = logging.getLogger("kafka")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


@pytest.fixture
def make_cluster(tmp_path: Path, fault_zookeeper: ZooKeeperServer) -> Iterator[Callable[..., FaultCluster]]:
    """Start a fault cluster (with extra broker config) and its topic; closed after the test."""
    made: List[FaultCluster] = []

    def make(config: Optional[Dict[str, Any]] = None) -> FaultCluster:
        fc = FaultCluster(tmp_path, fault_zookeeper, config=config)
        made.append(fc)
        fc.start()
        fc.create_topic()
        return fc

    yield make
    for fc in made:
        fc.close()


def _start_workload(fc: FaultCluster) -> Workload:
    """The producer and the group at work, the offsets topic created, the cluster whole."""
    workload = Workload(fc)
    workload.start()
    took, problems = wait_for(lambda: ([] if workload.acked_count() > 100 and workload.seen else
                                       ["%d acknowledged, %d read" % (workload.acked_count(), len(workload.seen))])
                              + (workload.failures[:1]), 60)
    assert took is not None, "the workload did not start: %s\n%s" % (problems, fc.logs())
    took, problems = wait_for(lambda: fc.whole() + fc.leadership_problems(), 60)
    assert took is not None, "the cluster was not whole at the start: %s\n%s" % (problems, fc.logs())
    return workload


def _finish(run: Run, workload: Workload, extra: List[str], extra_acked: Sequence[Tuple[int, int, bytes]] = (),
            after: Callable[[], List[str]] = list) -> None:
    """Verify (``after`` checks more once the cluster is stopped), print the report (``-rP`` shows
    it for a test that passed) and fail with it if anything failed."""
    failures = verify(run.fc, workload, extra_acked)
    failures += after()
    report = run.report(extra + failures)
    print(report)
    assert not (run.failures or extra or failures), report


def _stored(fc: FaultCluster, broker: int, partition: int) -> Dict[int, bytes]:
    """offset -> value of a stopped broker's replica of a partition, read from its files."""
    from pylogq.storage.log import Log

    with Log.open(str(fc.cluster.data_dir(broker) / ("%s-%d" % (TOPIC, partition)))) as log:
        data = log.read(log.log_start_offset, 1 << 30).read()
    return {r.offset: r.value for info in records.iter_batches(data) for r in records.RecordBatch(data, info.position)}


def _direct_produce(fc: FaultCluster, broker: int, partition: int, value: bytes) -> Optional[int]:
    """An acks=all Produce sent straight to a broker's own listener; -> its offset if acknowledged."""
    batch = bytes(records.build_batch([value]))
    answer = fc.request(broker, PRODUCE, 7, {"transactional_id": None, "acks": -1, "timeout_ms": 2000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}]}, timeout=10)
    if answer is None:
        return None
    p = answer["responses"][0]["partition_responses"][0]
    return p["base_offset"] if p["error_code"] == 0 else None


# -- randomized schedules -------------------------------------------------------------------------------


if SCHEDULES:  # PYLOGQ_FAULT_SCHEDULES=0 runs none: no test at all, rather than a skip
    @pytest.mark.slow
    @pytest.mark.parametrize("seed", [BASE_SEED + i for i in range(SCHEDULES)], ids=lambda s: "seed%d" % s)
    def test_random_schedule_keeps_every_guarantee(seed: int, make_cluster: Callable[..., FaultCluster]) -> None:
        fc = make_cluster()
        workload = _start_workload(fc)
        run = Run(seed, fc, workload)
        run.run(STEPS)
        _finish(run, workload, [])


# -- the acceptance points ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_leader_back_at_once_with_an_empty_disk_gets_every_record_back(
        make_cluster: Callable[..., FaultCluster]) -> None:
    fc = make_cluster()
    workload = _start_workload(fc)
    run = Run(BASE_SEED, fc, workload)
    cluster_id = fc.cluster_id()
    leader = fc.leader(TOPIC, 0)
    step = Step("kill-empty-disk", "leader")
    run.steps.append(step)
    step.detail = "kill -9 broker %d (the leader of %s-0; %s), data directory emptied, started again at once" % (
        leader, TOPIC, run.roles_of(leader))
    step.begin()
    fc.cluster.kill(leader)
    fc.cluster.wipe(leader)
    fc.cluster.start(leader)
    run.recovered(step)
    run.judge(step, settle=True)
    extra: List[str] = []
    for b in fc.ids:
        md, described = fc.metadata(b), fc.describe_cluster(b)
        ids = (md or {}).get("cluster_id"), (described or {}).get("cluster_id")
        if ids != (cluster_id, cluster_id):
            extra.append("broker %d reports cluster id %s in Metadata and %s in DescribeCluster, not the "
                         "cluster's %s" % ((b,) + ids + (cluster_id,)))
    meta = (fc.cluster.data_dir(leader) / "meta.properties").read_text()
    if "cluster.id=%s\n" % cluster_id not in meta:
        extra.append("broker %d's new meta.properties: %r (the cluster's id is %s)" % (leader, meta, cluster_id))

    def refilled() -> List[str]:
        """The emptied replica has every acknowledged record back."""
        out = []
        for p in range(PARTITIONS):
            stored = _stored(fc, leader, p)
            missing = [(o, v) for o, v, _ in workload.acked[p] if stored.get(o) != v]
            if missing:
                out.append("broker %d's replica of %s-%d lacks %d acknowledged records, first %s" % (
                    leader, TOPIC, p, len(missing), missing[:3]))
        return out

    _finish(run, workload, extra, after=refilled)


@pytest.mark.slow
def test_a_frozen_leader_is_replaced_within_two_sessions_and_acknowledges_nothing_it_loses(
        make_cluster: Callable[..., FaultCluster]) -> None:
    fc = make_cluster()
    workload = _start_workload(fc)
    run = Run(BASE_SEED, fc, workload)
    leader = fc.leader(TOPIC, 0)
    led = [p for p in range(PARTITIONS) if fc.leader(TOPIC, p) == leader]
    step = Step("freeze", "leader")
    run.steps.append(step)
    step.detail = "SIGSTOP broker %d (the leader of %s-0; %s)" % (leader, TOPIC, run.roles_of(leader))
    step.out = leader
    step.begin()
    fc.cluster.freeze(leader)
    try:
        run.hold_out(step, BOUND_S + 1.0)  # past the bound: the zombie wakes to a new leader
    finally:
        fc.cluster.thaw(leader)
    # The zombie, awake: what it acknowledges now must survive.
    zombie_acked = []
    for i, p in enumerate(led):
        offset = _direct_produce(fc, leader, p, b"zombie-%d" % i)
        if offset is not None:
            zombie_acked.append((p, offset, b"zombie-%d" % i))
    step.notes.append("the zombie acknowledged %s" % (zombie_acked or "nothing sent to it directly"))
    run.recovered(step)
    run.judge(step, settle=True)
    extra = []
    if step.failover_s is None or step.failover_s > BOUND_S:
        extra.append("no new leader in the others' Metadata within %.1f s of the SIGSTOP" % BOUND_S)
    _finish(run, workload, extra, zombie_acked)


@pytest.mark.slow
def test_zookeeper_restarted_then_the_leader_killed_gets_a_new_leader_within_two_sessions(
        make_cluster: Callable[..., FaultCluster]) -> None:
    fc = make_cluster()
    workload = _start_workload(fc)
    run = Run(BASE_SEED, fc, workload)
    zk = fc.zookeeper
    sessions = fc.registrations()
    bounce = Step("zookeeper-bounce", "-")
    run.steps.append(bounce)
    bounce.begin()
    zk.stop()
    zk.start()
    took = time.monotonic() - bounce.start
    # However long the restart takes (a loaded machine's JVM may take more than a session to
    # start), ZooKeeper restores the sessions with their timeouts counted from its start.
    bounce.detail = "ZooKeeper SIGTERM and started again after %.2f s" % took
    back, problems = wait_for(lambda: [] if set(sessions.values()) <= zk.connected_sessions() else
                              ["sessions %s not all connected: %s" % (_faults._hex(sessions),
                                                                      sorted(zk.connected_sessions()))], 2 * SESSION_S)
    extra = []
    if back is None:
        extra.append("the brokers' sessions did not come back to ZooKeeper after its restart: %s" % problems)
    bounce.notes.append("brokers reconnected %s" % ("after %.2f s" % back if back is not None else "never"))
    run.recovered(bounce)
    run.judge(bounce, settle=False)
    if fc.registrations() != sessions:
        extra.append("the restart did not keep the brokers' sessions: %s -> %s"
                     % (_faults._hex(sessions), _faults._hex(fc.registrations())))
    leader = fc.leader(TOPIC, 0)
    kill = Step("kill-kept-down", "leader")
    run.steps.append(kill)
    kill.detail = "kill -9 broker %d (the leader of %s-0; %s)" % (leader, TOPIC, run.roles_of(leader))
    kill.out = leader
    kill.begin()
    fc.cluster.kill(leader)
    run.hold_out(kill, BOUND_S + 1.0)
    fc.cluster.start(leader)
    run.recovered(kill)
    run.judge(kill, settle=True)
    if kill.failover_s is None or kill.failover_s > BOUND_S:
        extra.append("no new leader within %.1f s of the kill after ZooKeeper's restart" % BOUND_S)
    _finish(run, workload, extra)


@pytest.mark.slow
def test_a_frozen_controller_is_replaced_with_new_leaders_within_two_sessions(
        make_cluster: Callable[..., FaultCluster]) -> None:
    fc = make_cluster()
    workload = _start_workload(fc)
    run = Run(BASE_SEED, fc, workload)
    controller = fc.controller()
    assert controller is not None
    step = Step("freeze", "controller")
    run.steps.append(step)
    step.detail = "SIGSTOP broker %d (the controller; %s)" % (controller, run.roles_of(controller))
    step.out = controller
    step.begin()
    fc.cluster.freeze(controller)
    try:
        run.hold_out(step, BOUND_S + 1.0)
        new = fc.controller()
        step.notes.append("controller while frozen: %s" % new)
    finally:
        fc.cluster.thaw(controller)
    run.recovered(step)
    run.judge(step, settle=True)
    extra = []
    if step.failover_s is None or step.failover_s > BOUND_S:
        extra.append("no new controller and leaders within %.1f s of the SIGSTOP" % BOUND_S)
    _finish(run, workload, extra)


@pytest.mark.slow
def test_sigterm_to_the_last_live_broker_does_not_wait_out_retries(
        make_cluster: Callable[..., FaultCluster]) -> None:
    # Kafka's default retry backoff of a controlled shutdown, not the suite's shortened one: the
    # last broker has nobody to move its leaderships to, and must not wait out retries for it.
    # Its log says which way its controlled shutdown went; how long the stop takes is a speed
    # target for the benchmarks.
    fc = make_cluster({"controlled.shutdown.retry.backoff.ms": 5000})
    workload = _start_workload(fc)
    workload.stop()
    assert not workload.failures and not workload.delivery_errors, workload.failures + workload.delivery_errors
    last = fc.controller()
    assert last is not None
    for b in [b for b in fc.ids if b != last] + [last]:
        status = fc.cluster.stop(b, timeout=60)
        assert status == 0, "broker %d exited %s after SIGTERM:\n%s" % (b, status, fc.cluster.brokers[b].log_tail())
    shutdown = [line for line in fc.cluster.brokers[last].log_path.read_text("utf-8", "replace").splitlines()
                if "controlled shutdown of broker %d:" % last in line]
    assert len(shutdown) == 1 and "no other broker is alive to take its leaderships" in shutdown[0], (
        "the last live broker %d's controlled shutdown: %s\n%s" % (last, shutdown, fc.cluster.brokers[last].log_tail()))
    replicas_identical(fc.cluster, TOPIC, PARTITIONS)


@pytest.mark.slow
def test_a_broker_started_again_at_once_tells_clients_nothing_false_while_it_rejoins(
        make_cluster: Callable[..., FaultCluster]) -> None:
    """Killed and started again at once, a broker waits up to a session timeout for its old
    registration to expire, its listener already bound. What it answers meanwhile must not be
    false: a Metadata answer listing no broker, or calling the topic unknown, makes librdkafka
    (2.10 and later) drop every broker the answer does not list; with none left, the producer
    stops until it bootstraps again (``metadata.recovery.rebootstrap.trigger.ms``, 5 minutes).
    Seen in the randomized schedules as writes that never resume after a kill -9 and restart."""
    fc = make_cluster()
    workload = _start_workload(fc)
    victim = fc.leader(TOPIC, 0)
    fc.cluster.kill(victim)
    false: List[str] = []
    answers = [0]
    probe_failures: List[BaseException] = []
    started = threading.Event()
    began = time.monotonic()

    def probe() -> None:
        try:
            while not started.is_set():
                md = fc.metadata(victim)
                if md is not None:
                    answers[0] += 1
                    topic = next((t for t in md["topics"] if t["name"] == TOPIC), None)
                    if not md["brokers"] or topic is None or topic["error_code"] == UNKNOWN_TOPIC_OR_PARTITION:
                        false.append("%.2f s: brokers %s, controller %d, %s error %s" % (
                            time.monotonic() - began, [b["node_id"] for b in md["brokers"]], md["controller_id"],
                            TOPIC, None if topic is None else topic["error_code"]))
                time.sleep(0.02)  # a probe's pacing: the restart's end is the condition
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            probe_failures.append(exc)

    # The broker is started from this thread, the probe runs on another: a process started
    # from a thread gets its parent-death SIGKILL when that thread ends (see dies_with_test).
    prober = threading.Thread(target=probe, name="metadata-probe-%d" % victim, daemon=True)
    prober.start()
    try:
        fc.cluster.start(victim)
    finally:
        started.set()
        prober.join(60)
    ready = time.monotonic() - began
    workload.abandon()
    assert not prober.is_alive(), "the Metadata probe did not end"
    assert not probe_failures, probe_failures[0]
    assert not false, "broker %d, started again at once (ready after %.2f s), answered Metadata falsely %d times " \
        "of %d, first: %s" % (victim, ready, len(false), answers[0], false[:3])


def test_a_record_acknowledged_without_its_offset_must_be_there_once_anywhere() -> None:
    """librdkafka marks a request whose answer was lost delivered, offset unknown, once a later
    request of the producer succeeds; the read-back finds such a record by its value."""
    final = {0: [(0, b"a"), (1, b"b"), (2, b"c")]}
    assert read_back_failures("t", final, {0: [(0, b"a"), (None, b"b"), (2, b"c")]}, {}) == []
    missing = read_back_failures("t", final, {0: [(0, b"a"), (None, b"x")]}, {})
    assert len(missing) == 1 and "b'x' acked at None, read None" in missing[0]
    twice = read_back_failures("t", {0: [(0, b"a"), (1, b"a")]}, {0: [(None, b"a")]}, {})
    assert any("stored more than once" in f for f in twice)
    assert read_back_failures("t", final, {0: [(None, b"a"), (None, b"b")]}, {}) == []


def test_a_value_stored_twice_is_the_broker_s_failure_unless_the_producer_renumbered_it(tmp_path: Path) -> None:
    """Two copies under one producer epoch: the broker stored a retry again. Copies under two
    epochs of the producer, after librdkafka logged an epoch bump: its renumbering, which no
    broker can tell from a new batch (noted, not failed); without the bump in its log, failed."""
    final = {0: [(0, b"a"), (1, b"b"), (2, b"a")]}
    log = tmp_path / "producer.log"
    log.write_text("%s PID{Id:7,Epoch:1}\n" % _processes.EPOCH_BUMPED)
    same = {b"a": [(0, 7, 0, 10), (2, 7, 0, 10)], b"b": [(1, 7, 0, 11)]}
    failures, notes = duplicate_failures("t", final, lambda p: same, log)
    assert len(failures) == 1 and "within one producer epoch" in failures[0] and notes == []
    renumbered = {b"a": [(0, 7, 0, 10), (2, 7, 1, 0)], b"b": [(1, 7, 0, 11)]}
    failures, notes = duplicate_failures("t", final, lambda p: renumbered, log)
    assert failures == [] and len(notes) == 1 and "bumped its epoch" in notes[0]
    failures, notes = duplicate_failures("t", final, lambda p: renumbered, tmp_path / "no-such.log")
    assert len(failures) == 1 and "never bumped" in failures[0]
    assert duplicate_failures("t", {0: [(0, b"a")]}, lambda p: {}, log) == ([], [])
