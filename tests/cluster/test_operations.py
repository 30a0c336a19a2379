"""Cluster operations under load, on ``pylogq-broker`` processes and real ZooKeeper: expansion,
decommission, a replication factor raised, preferred elections and a reassignment that outlives
its controller, each done with the operator's tools while an idempotent acks=all producer and a
consumer group work (``_faults.Workload``).

The cluster is ``_faults.FaultCluster`` (brokers behind proxies, short sessions), on the
suite's ZooKeeper with a chroot of its own; ``FaultCluster(n=4)`` with broker 3 started later
is a cluster that grows. The tools are ``pylogq reassign-partitions`` and ``pylogq
leader-election``, run in this process as an operator runs them. Every test ends as
``_faults.verify`` checks a fault schedule: every acknowledged record exactly once at its
offset, everything the group read still there, committed offsets never backwards, no
delivery error (the producer retries what is retriable; the group's failed polls and commits
are retried and only counted), replicas byte-identical below the high watermark, no traceback
in a broker's log. Where the replicas of a partition are not every broker's (a fourth broker,
one emptied), :func:`_verify_as_placed` checks the same with each partition's replicas
compared among the brokers it is assigned to.

Every wait polls a condition with a deadline; a sleep here is a poll's pacing.
"""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from pylogq import records
from pylogq.cli.main import run as pylogq_cli
from pylogq.errors import KafkaStorageError
from pylogq.protocol import ApiKey
from pylogq.storage.checkpoint import REPLICATION_CHECKPOINT, OffsetCheckpoint
from pylogq.storage.log import Log

from .._filesystem import failing_disk
from .._zookeeper import ZooKeeperServer
from ._faults import (
    BOUND_S,
    OFFSETS_PARTITIONS,
    OFFSETS_TOPIC,
    PARTITIONS,
    TOPIC,
    FaultCluster,
    Workload,
    label,
    stored_twice,
    verify,
    wait_for,
)
from ._processes import _first_difference, read_back, read_back_failures

#: Replication across broker processes and ZooKeeper: the compiled pass only (tests/conftest.py).
pytestmark = [pytest.mark.compiled_pass, pytest.mark.slow]

TOPICS = ((TOPIC, PARTITIONS), (OFFSETS_TOPIC, OFFSETS_PARTITIONS))
#: How long an operation (a reassignment, an election, a broker joining) may take under the workload.
OPERATION_TIMEOUT_S = 60.0
#: The pacing of ``--verify`` while a reassignment runs (each run opens its own connections).
VERIFY_POLL_S = 0.5
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "leader.replication.throttled.replicas", "follower.replication.throttled.replicas")

#: The records written beside the workload to each partition of the topic before a reassignment
#: (about 2 MB: more than one fetch of a replica, ``replica.fetch.max.bytes`` 1 MB).
PRELOAD_RECORDS = 2000
PRELOAD_PADDING = b"p" * 1000

Placement = Dict[Tuple[str, int], List[int]]


@pytest.fixture(autouse=True)
def quiet_kafka_python() -> Iterator[None]:
    """kafka-python logs every connection a leader or coordinator move breaks at ERROR, with its
    traceback: none of it news. Its own logger only, for this module's tests."""
    logger = logging.getLogger("kafka")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


@pytest.fixture
def make_cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[Callable[..., FaultCluster]]:
    """Start a fault cluster of ``n`` brokers (``started``: those to start now, all by default)
    with extra broker config, on the suite's ZooKeeper; closed after the test."""
    for module in ("confluent_kafka", "confluent_kafka.admin", "kafka"):
        pytest.importorskip(module)  # in a fixture: under PYLOGQ_REQUIRE_ALL the skip is a failure
    made: List[FaultCluster] = []

    def make(n: int = 3, started: Optional[Sequence[int]] = None, config: Optional[Dict[str, Any]] = None,
             broker_config: Optional[Dict[int, Dict[str, Any]]] = None) -> FaultCluster:
        fc = FaultCluster(tmp_path, zookeeper, n=n, config=config, broker_config=broker_config)
        made.append(fc)
        if not zookeeper.running:  # a test that stopped the shared server
            zookeeper.start()
        for b in range(n) if started is None else started:
            fc.cluster.start(b)
        return fc

    yield make
    for fc in made:
        fc.close()


# -- the cluster's state ---------------------------------------------------------------------------------


def _bootstrap(fc: FaultCluster) -> str:
    """The live brokers' (advertised) addresses: a tool's --bootstrap-server."""
    return ",".join(fc.proxies[b].address for b in fc.live())


def _placement(fc: FaultCluster) -> Placement:
    """Every partition's replicas, as the topics' znodes hold them."""
    out: Placement = {}
    for topic, _ in TOPICS:
        found = fc.cluster.zk.get_topic_assignment(topic)
        assert found is not None, "no assignment for %s" % topic
        out.update(((topic, p), list(r)) for p, r in found[0].partitions.items())
    return out


def _settled(fc: FaultCluster) -> List[str]:
    """What keeps the cluster from being settled: a reassignment under way, a replica on a broker
    that is not live, a partition whose leader is not live or whose ISR is not its replicas (in
    ZooKeeper), or a live broker's Metadata naming a leader or controller that is not live."""
    live = fc.live()
    problems = []
    for topic, n in TOPICS:
        found = fc.cluster.zk.get_topic_assignment(topic)
        if found is None:
            problems.append("no topic %s" % topic)
            continue
        assignment = found[0]
        if assignment.adding or assignment.removing:
            problems.append("%s: reassignments under way (adding %s, removing %s)"
                            % (topic, assignment.adding, assignment.removing))
        for p in range(n):
            replicas = assignment.partitions.get(p, [])
            state = fc.cluster.state(topic, p)
            if [r for r in replicas if r not in live] or state is None or state[0] not in live \
                    or sorted(state[1]) != sorted(replicas):
                problems.append("%s-%d: replicas %s, (leader, ISR, epoch) %s, live %s"
                                % (topic, p, replicas, state, live))
    return problems + fc.leadership_problems()


def _wait_settled(fc: FaultCluster, what: str, workload: Optional[Workload] = None) -> float:
    took, problems = wait_for(lambda: _settled(fc), OPERATION_TIMEOUT_S)
    assert took is not None, "%s: the cluster did not settle within %.0f s: %s\n%s%s" % (
        what, OPERATION_TIMEOUT_S, "; ".join(problems[:8]), fc.log_excerpts(),
        "" if workload is None else "\n" + workload.producer_state())
    return took


def _led_elsewhere(fc: FaultCluster) -> List[str]:
    """Partitions not led by their preferred replica (the first), in ZooKeeper or in a live
    broker's Metadata."""
    placement = _placement(fc)
    problems = ["%s-%d led by %d, not its preferred replica %d" % (t, p, fc.leader(t, p), r[0])
                for (t, p), r in sorted(placement.items()) if fc.leader(t, p) != r[0]]
    for b in fc.live():
        md = fc.metadata(b)
        if md is None:
            problems.append("broker %d did not answer Metadata" % b)
            continue
        for t in md["topics"]:
            for p in t["partitions"]:
                preferred = placement.get((t["name"], p["partition_index"]), [None])[0]
                if p["leader_id"] != preferred:
                    problems.append("broker %d's Metadata: %s-%d led by %d, not %s"
                                    % (b, t["name"], p["partition_index"], p["leader_id"], preferred))
    return problems


def _preferred_of(fc: FaultCluster, broker: int) -> List[Tuple[str, int]]:
    return sorted(tp for tp, r in _placement(fc).items() if r[0] == broker)


def _hosted(fc: FaultCluster, broker: int) -> List[Tuple[str, int]]:
    """The partitions whose log directory is in ``broker``'s data directory (``*-delete`` ones,
    deleted already, are not)."""
    directory = fc.cluster.data_dir(broker)
    names = {d.name for d in directory.iterdir() if d.is_dir()} if directory.exists() else set()
    return sorted((t, p) for t, n in TOPICS for p in range(n) if "%s-%d" % (t, p) in names)


def _adding(fc: FaultCluster) -> Dict[int, List[int]]:
    """The topic's partitions being reassigned -> the replicas being added (its znode's)."""
    found = fc.cluster.zk.get_topic_assignment(TOPIC)
    return {} if found is None else dict(found[0].adding)


def _throttles_left(fc: FaultCluster) -> List[str]:
    """Replication throttles still stored: the brokers' dynamic configs and the topics'."""
    sets = {"broker %d" % b: fc.cluster.zk.get_broker_config(str(b)) for b in fc.ids}
    sets["brokers' default"] = fc.cluster.zk.get_broker_config("<default>")
    sets.update(("topic %s" % t, fc.cluster.zk.get_topic_config(t)) for t, _ in TOPICS)
    return ["%s: %s=%s" % (where, key, value) for where, config in sets.items()
            for key, value in sorted(config.items()) if key in THROTTLE_KEYS]


# -- the workload --------------------------------------------------------------------------------------


def _start_workload(fc: FaultCluster) -> Workload:
    """The producer and the group at work (the offsets topic created), the cluster settled."""
    workload = Workload(fc)
    workload.start()
    took, problems = wait_for(lambda: ([] if workload.acked_count() > 100 and workload.seen else
                                       ["%d acknowledged, %d read" % (workload.acked_count(), len(workload.seen))])
                              + workload.failures[:1], OPERATION_TIMEOUT_S)
    assert took is not None, "the workload did not start: %s\n%s" % (problems, fc.logs())
    _wait_settled(fc, "at the start", workload)
    return workload


def _preload(fc: FaultCluster, workload: Workload, per_partition: int = PRELOAD_RECORDS) -> None:
    """Beside the workload's producer, ``per_partition`` records of about 1 KB written to each
    partition of the topic (idempotent, acks=all), so that a replica added later copies more
    than one fetch holds while the workload goes on writing. Their acknowledgements are the
    workload's (:meth:`Workload.on_delivery`): checked at the end as its own, and read by the
    group before it stops."""
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": fc.bootstrap, "enable.idempotence": True,
                                        "acks": "all", "linger.ms": 20, "message.timeout.ms": 60000})
    for i in range(per_partition):
        for p in range(PARTITIONS):
            producer.produce(TOPIC, value=b"preload-%d-%d-" % (p, i) + PRELOAD_PADDING, partition=p,
                             on_delivery=workload.on_delivery)
            producer.poll(0)
    left = producer.flush(OPERATION_TIMEOUT_S)
    assert not left and not workload.delivery_errors, "preload: %d records unacknowledged, errors %s" % (
        left, workload.delivery_errors[:5])


def _goes_on(fc: FaultCluster, workload: Workload, since: float, what: str) -> None:
    """Writes acknowledged on every partition, and records read by the group, after ``since``."""
    read = len(workload.seen)
    took, problems = wait_for(lambda: workload.stalled_partitions(since) + workload.failures[:1]
                              + ([] if len(workload.seen) > read else ["the group read nothing new"]),
                              OPERATION_TIMEOUT_S)
    assert took is not None, "%s: the workload did not go on: %s; %s\n%s" % (
        what, "; ".join(problems), workload.producer_state(), fc.log_excerpts())


def _finish(fc: FaultCluster, failures: List[str], workload: Workload) -> None:
    """Fail with the checks' failures and what the workload did."""
    w = workload
    summary = ("workload: %d records acknowledged, %d read by the group (%d reads in all, %d polls failed), %d offset "
               "commits acknowledged (%d failed)" % (w.acked_count(), len({(p, o) for p, o, _, _ in w.seen}),
                                                     len(w.seen), w.poll_errors,
                                                     sum(len(c) for c in w.commit_acks.values()), w.commit_errors))
    print(summary)
    assert not failures, "%s\n  - %s\n%s" % (summary, "\n  - ".join(failures), fc.log_excerpts())


def _verify_as_placed(fc: FaultCluster, workload: Workload, placement: Optional[Placement] = None) -> List[str]:
    """:func:`_faults.verify`'s checks for a cluster whose brokers do not each hold every
    partition: each partition's replicas are compared among the brokers its znode assigns it
    to (``verify`` compares every broker's, and would open, so create, the logs of brokers
    that have none), or among those ``placement`` names. The cluster must be settled (no
    reassignment under way)."""
    placement = _placement(fc) if placement is None else placement
    failures: List[str] = []
    workload.stop()
    failures += workload.failures
    failures += ["delivery error: %s" % e for e in workload.delivery_errors[:5]]
    failures += workload.backwards[:10]
    final = read_back(fc.bootstrap, TOPIC, PARTITIONS, "operations-check-%s" % uuid.uuid4().hex[:6])
    acked = {p: [(o, v) for o, v, _ in workload.acked[p]] for p in range(PARTITIONS)}
    seen = {p: [(o, v) for q, o, v, _ in workload.seen if q == p] for p in range(PARTITIONS)}
    failures += read_back_failures(TOPIC, final, acked, seen, duplicates=False)
    statuses: Dict[int, Optional[int]] = {}
    for b in fc.ids:
        try:
            statuses[b] = fc.cluster.stop(b, timeout=60)
        except AssertionError as exc:
            statuses[b] = None
            failures.append("broker %d: %s" % (b, str(exc).splitlines()[0]))
    bad = {b: s for b, s in statuses.items() if s != 0}
    if bad:
        failures.append("clean stop at the end: exit statuses %s" % bad)
    failures += stored_twice(fc, final, {p: placement[(TOPIC, p)] for p in range(PARTITIONS)})
    failures += _replicas_differ(fc, placement)
    for b, proc in fc.cluster.brokers.items():
        text = proc.log_path.read_text("utf-8", "replace") if proc.log_path.exists() else ""
        if "Traceback" in text:
            at = text.index("Traceback")
            failures.append("broker %d logged a traceback:\n%s" % (b, "\n".join(
                text[max(0, text.rfind("\n", 0, at - 1)):].splitlines()[:25])))
    return failures


def _replicas_differ(fc: FaultCluster, placement: Placement) -> List[str]:
    """After a clean stop: where a partition's assigned replicas differ below the high watermark
    (the smallest they checkpointed), or hold a gap; an offsets partition nothing was committed
    to is passed."""
    failures = []
    for (topic, p), replicas in sorted(placement.items()):
        marks = {b: OffsetCheckpoint(str(fc.cluster.data_dir(b) / REPLICATION_CHECKPOINT)).read().get((topic, p), 0)
                 for b in replicas}
        hw = min(marks.values())
        if hw == 0:
            if topic != OFFSETS_TOPIC:
                failures.append("%s-%d: no high watermark checkpointed by every replica (%s)" % (topic, p, marks))
            continue
        copies: Dict[int, bytes] = {}
        for b in replicas:
            path = fc.cluster.data_dir(b) / ("%s-%d" % (topic, p))
            if not path.is_dir():
                failures.append("%s-%d: broker %d, a replica, has no log (%s)" % (topic, p, b, path))
                continue
            with Log.open(str(path)) as log:
                copies[b] = log.read(log.log_start_offset, 1 << 30, max_offset=hw).read()
        if len(copies) != len(replicas):
            continue
        first = copies[replicas[0]]
        for b in replicas[1:]:
            if copies[b] != first:
                failures.append("%s-%d: broker %d's replica differs from broker %d's below the high watermark %d "
                                "(%s)" % (topic, p, b, replicas[0], hw, _first_difference(first, copies[b])))
        offsets = [r.offset for info in records.iter_batches(first) for r in records.RecordBatch(first, info.position)]
        if offsets != list(range(hw)):
            failures.append("%s-%d: the replicas hold offsets %s..%s (%d of them), not 0..%d"
                            % (topic, p, offsets[:1], offsets[-1:], len(offsets), hw - 1))
    return failures


# -- the tools ----------------------------------------------------------------------------------------


def _cli(fc: FaultCluster, *argv: str) -> str:
    """``pylogq ARGV --bootstrap-server <the live brokers>`` in this process; -> its output
    (a failure unless it exits 0)."""
    out, err = io.StringIO(), io.StringIO()
    command = list(argv) + ["--bootstrap-server", _bootstrap(fc)]
    status = pylogq_cli(command, stdout=out, stderr=err)
    assert status == 0, "pylogq %s: exit %d\n%s%s" % (" ".join(command), status, out.getvalue(), err.getvalue())
    return out.getvalue()


def _json_file(directory: Path, content: Any) -> str:
    path = directory / ("%s.json" % uuid.uuid4().hex[:8])
    path.write_text(json.dumps(content))
    return str(path)


def _plan(moves: Placement) -> Dict[str, Any]:
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                         for (t, p), r in sorted(moves.items())]}


def _execute(fc: FaultCluster, plan: str, *extra: str) -> str:
    out = _cli(fc, "reassign-partitions", "--execute", "--reassignment-json-file", plan, *extra)
    assert "Successfully started partition reassignment" in out, out
    return out


def _verify_until_complete(fc: FaultCluster, plan: str, moves: Placement, workload: Workload) -> Tuple[str, float]:
    """``--verify`` run until it reports every partition of ``moves`` complete; -> its last
    output and how long it took."""
    start = time.monotonic()
    deadline = start + OPERATION_TIMEOUT_S
    wanted = {"Reassignment of partition %s-%d is completed." % tp for tp in moves}
    while True:
        out = _cli(fc, "reassign-partitions", "--verify", "--reassignment-json-file", plan)
        if wanted <= set(out.splitlines()):
            return out, time.monotonic() - start
        assert time.monotonic() < deadline, "--verify did not report the reassignment complete within %.0f s:\n%s" \
            "\n--list:\n%s\n%s\n%s" % (OPERATION_TIMEOUT_S, out, _cli(fc, "reassign-partitions", "--list"),
                                      workload.producer_state(), fc.log_excerpts())
        time.sleep(VERIFY_POLL_S)


def _elected(out: str) -> List[Tuple[str, int]]:
    """The partitions ``pylogq leader-election`` reports elected."""
    prefix = "Successfully completed leader election (PREFERRED) for partitions "
    lines = [line[len(prefix):] for line in out.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, out
    return sorted((name.rsplit("-", 1)[0], int(name.rsplit("-", 1)[1])) for name in lines[0].split(", "))


# -- the operations -------------------------------------------------------------------------------------


def test_a_fourth_broker_takes_half_the_partitions_proposed_by_generate(
        make_cluster: Callable[..., FaultCluster], tmp_path: Path) -> None:
    fc = make_cluster(n=4, started=[0, 1, 2])
    fc.create_topic()  # placed on the three brokers running
    workload = _start_workload(fc)
    _preload(fc, workload)
    new = 3
    fc.cluster.start(new)
    took, problems = wait_for(lambda: ["broker %d's Metadata lacks broker %d" % (b, new) for b in fc.live()
                                       if new not in [x["node_id"] for x in (fc.metadata(b) or {"brokers": []})
                                                      ["brokers"]]], OPERATION_TIMEOUT_S)
    assert took is not None, "broker %d did not join: %s\n%s" % (new, problems, fc.logs())
    before = _placement(fc)
    assert not [tp for tp, r in before.items() if new in r], before

    topics = _json_file(tmp_path, {"version": 1, "topics": [{"topic": t} for t, _ in TOPICS]})
    out = _cli(fc, "reassign-partitions", "--generate", "--topics-to-move-json-file", topics,
               "--broker-list", ",".join(map(str, fc.ids)))
    proposal = json.loads(out.split("Proposed partition reassignment configuration\n", 1)[1])
    # Half of each topic's partitions (rounded up), among those the proposal gives the new broker.
    # Kafka's placement (three replicas of each partition on four brokers) leaves each broker out
    # of one partition in every four consecutive ones: the new broker has at least 2 of 3 and 3 of 4.
    moves: Placement = {}
    for topic, n in TOPICS:
        offered = [(e["partition"], e["replicas"]) for e in proposal["partitions"]
                   if e["topic"] == topic and new in e["replicas"]]
        assert len(offered) >= (n + 1) // 2, "the proposal gives broker %d fewer than half of %s's partitions:\n%s" % (
            new, topic, out)
        moves.update(((topic, p), r) for p, r in sorted(offered)[:(n + 1) // 2])
    plan = _json_file(tmp_path, _plan(moves))
    execute = _execute(fc, plan, "--throttle", "50000000")
    assert "The inter-broker throttle limit was set to 50000000 B/s" in execute, execute
    report, took = _verify_until_complete(fc, plan, moves, workload)
    print("%d partitions moved in %.1f s" % (len(moves), took))
    assert "Clearing broker-level throttles" in report, report
    _wait_settled(fc, "after the reassignment", workload)
    _goes_on(fc, workload, time.monotonic(), "after the reassignment")

    after = _placement(fc)
    assert after == {**before, **moves}, "placement after the reassignment: %s (planned %s, before %s)" % (
        after, moves, before)
    assert sorted(tp for tp, r in after.items() if new in r) == sorted(moves)
    assert not _throttles_left(fc), _throttles_left(fc)
    # The new broker holds the logs of what moved to it, and each broker that left a partition
    # deleted its log.
    expected = {b: sorted(tp for tp, r in after.items() if b in r) for b in fc.ids}
    took, problems = wait_for(lambda: ["broker %d holds the logs of %s, not %s" % (b, _hosted(fc, b), expected[b])
                                       for b in fc.ids if _hosted(fc, b) != expected[b]], OPERATION_TIMEOUT_S)
    assert took is not None, "; ".join(problems)
    assert [b for (t, p), r in moves.items() for b in before[(t, p)] if b not in r], "nothing left a broker"
    _finish(fc, _verify_as_placed(fc, workload), workload)


def test_a_broker_emptied_by_reassignment_stops_and_the_cluster_stays_whole(
        make_cluster: Callable[..., FaultCluster], tmp_path: Path) -> None:
    fc = make_cluster(n=4)
    fc.create_topic()  # replication factor 3 over four brokers
    workload = _start_workload(fc)
    _preload(fc, workload)
    gone = fc.leader(TOPIC, 0)
    before = _placement(fc)
    # Each of its replicas goes to the one broker the partition does not have.
    moves: Placement = {}
    for tp, replicas in before.items():
        if gone in replicas:
            spare, = [b for b in fc.ids if b not in replicas]
            moves[tp] = [spare if r == gone else r for r in replicas]
    assert moves, before
    plan = _json_file(tmp_path, _plan(moves))
    _execute(fc, plan)
    _verify_until_complete(fc, plan, moves, workload)
    _wait_settled(fc, "after the reassignment", workload)
    assert _placement(fc) == {**before, **moves}
    took, problems = wait_for(lambda: ["broker %d still holds %s" % (gone, _hosted(fc, gone))] if _hosted(fc, gone)
                              else [], OPERATION_TIMEOUT_S)
    assert took is not None, problems

    stopped = time.monotonic()
    status = fc.cluster.stop(gone)
    assert status == 0, "broker %d exited %s after SIGTERM:\n%s" % (gone, status, fc.cluster.brokers[gone].log_tail())
    # Nothing was on it: no partition lost its leader or a member of its ISR.
    remaining = fc.live()
    assert gone not in remaining
    states = {(t, p): fc.cluster.state(t, p) for t, n in TOPICS for p in range(n)}
    assert all(s is not None and s[0] in remaining and gone not in s[1] and len(s[1]) == 3
               for s in states.values()), states
    _wait_settled(fc, "after broker %d stopped" % gone, workload)
    _goes_on(fc, workload, stopped, "after broker %d stopped" % gone)
    _finish(fc, _verify_as_placed(fc, workload), workload)


def test_a_topic_under_load_goes_from_one_replica_to_three(
        make_cluster: Callable[..., FaultCluster], tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    fc = make_cluster(n=3)
    admin = AdminClient({"bootstrap.servers": fc.bootstrap})
    # One replica: acks=all needs only the leader (the cluster's min.insync.replicas is 2).
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config={"min.insync.replicas": "1"})])[TOPIC].result(30)
    workload = _start_workload(fc)
    _preload(fc, workload)
    moves: Placement = {}
    for p in range(PARTITIONS):
        only, = fc.replicas(TOPIC, p)
        moves[(TOPIC, p)] = [only] + [b for b in fc.ids if b != only]
    plan = _json_file(tmp_path, _plan(moves))
    _execute(fc, plan)
    _, took = _verify_until_complete(fc, plan, moves, workload)
    print("replication factor 1 -> 3 in %.1f s" % took)
    _wait_settled(fc, "after the reassignment", workload)
    for (t, p), target in moves.items():
        state = fc.cluster.state(t, p)
        assert fc.replicas(t, p) == target and state is not None and sorted(state[1]) == sorted(target), (
            t, p, fc.replicas(t, p), state)
    _goes_on(fc, workload, time.monotonic(), "after the reassignment")
    _finish(fc, verify(fc, workload), workload)


def _restarted_leads_nothing(fc: FaultCluster) -> Tuple[int, List[Tuple[str, int]]]:
    """Restart (SIGTERM, start) the preferred leader of the topic's partition 0; -> it and the
    partitions it is the preferred leader of (led by others, seen while it was down)."""
    took, problems = wait_for(lambda: _led_elsewhere(fc), OPERATION_TIMEOUT_S)
    assert took is not None, "not every partition led by its preferred replica at the start: %s" % problems
    broker = fc.replicas(TOPIC, 0)[0]
    preferred = _preferred_of(fc, broker)
    status = fc.cluster.stop(broker)
    assert status == 0, "broker %d exited %s after SIGTERM" % (broker, status)
    took, problems = wait_for(lambda: ["%s-%d led by %d" % (tp + (fc.leader(*tp),)) for tp in preferred
                                       if fc.leader(*tp) not in fc.live()], OPERATION_TIMEOUT_S)
    assert took is not None, "while broker %d was down: %s" % (broker, problems)
    fc.cluster.start(broker)
    return broker, preferred


def test_a_preferred_election_gives_a_restarted_broker_its_leadership_back(
        make_cluster: Callable[..., FaultCluster]) -> None:
    fc = make_cluster(n=3, config={"auto.leader.rebalance.enable": False})
    fc.create_topic()
    workload = _start_workload(fc)
    broker, preferred = _restarted_leads_nothing(fc)
    _wait_settled(fc, "after broker %d restarted" % broker, workload)
    elsewhere = {tp: fc.leader(*tp) for tp in preferred}
    assert all(b != broker for b in elsewhere.values()), "back in the ISR, broker %d leads again with no " \
        "election: %s" % (broker, elsewhere)

    out = _cli(fc, "leader-election", "--election-type", "PREFERRED", "--all-topic-partitions")
    assert _elected(out) == preferred, out
    took, problems = wait_for(lambda: _led_elsewhere(fc), OPERATION_TIMEOUT_S)
    assert took is not None, "after the election: %s" % problems
    _goes_on(fc, workload, time.monotonic(), "after the election")
    _finish(fc, verify(fc, workload), workload)


def test_the_controller_gives_a_restarted_broker_its_leadership_back_by_itself(
        make_cluster: Callable[..., FaultCluster]) -> None:
    fc = make_cluster(n=3, config={"auto.leader.rebalance.enable": True, "leader.imbalance.check.interval.seconds": 1})
    fc.create_topic()
    workload = _start_workload(fc)
    broker, _ = _restarted_leads_nothing(fc)
    started = time.monotonic()
    took, problems = wait_for(lambda: _led_elsewhere(fc), OPERATION_TIMEOUT_S)
    assert took is not None, "broker %d did not get its leadership back by itself: %s" % (broker, problems)
    print("preferred leaders back %.1f s after broker %d started" % (time.monotonic() - started, broker))
    _wait_settled(fc, "after the rebalance", workload)
    _goes_on(fc, workload, time.monotonic(), "after the rebalance")
    _finish(fc, verify(fc, workload), workload)


def test_a_reassignment_under_way_outlives_its_controller(
        make_cluster: Callable[..., FaultCluster], tmp_path: Path) -> None:
    fc = make_cluster(n=4, started=[0, 1, 2])
    fc.create_topic()
    workload = _start_workload(fc)
    _preload(fc, workload)
    new = 3
    fc.cluster.start(new)
    controller = fc.controller()
    assert controller is not None and controller != new, controller
    # The topic's replicas on the controller move to the new broker.
    moves: Placement = {(TOPIC, p): [new if r == controller else r for r in fc.replicas(TOPIC, p)]
                        for p in range(PARTITIONS)}
    plan = _json_file(tmp_path, _plan(moves))
    # Held open: the new broker cannot reach the leaders, so it cannot catch up. Then it is
    # frozen (so that it cannot become the controller, cut off from the others as it is), and the
    # controller killed.
    others = [b for b in fc.ids if b != new]
    for b in others:
        fc.proxies[b].cut([label(new)])
    try:
        _execute(fc, plan)
        took, problems = wait_for(lambda: [] if _adding(fc) == {p: [new] for p in range(PARTITIONS)} else
                                  ["adding %s" % _adding(fc)], OPERATION_TIMEOUT_S)
        assert took is not None, "the reassignment did not start: %s" % problems
        listed = _cli(fc, "reassign-partitions", "--list")
        assert all("%s-%d: replicas:" % tp in listed for tp in moves), listed
        fc.cluster.freeze(new)
    finally:
        for b in others:
            fc.proxies[b].heal([label(new)])
    try:
        killed = time.monotonic()
        fc.cluster.kill(controller)
        took, problems = wait_for(lambda: [] if fc.controller() not in (None, -1, controller, new) else
                                  ["the controller is %s" % fc.controller()], OPERATION_TIMEOUT_S)
        assert took is not None, "no new controller after broker %d was killed: %s" % (controller, problems)
        successor = fc.controller()
        assert successor is not None
    finally:
        fc.cluster.thaw(new)
    print("controller %d killed; %d took over after %.1f s" % (controller, successor, time.monotonic() - killed))
    _, took = _verify_until_complete(fc, plan, moves, workload)
    print("the reassignment completed %.1f s after the new broker was thawed" % took)
    log = fc.cluster.brokers[successor].log_path.read_text("utf-8", "replace")
    carried = [tp for tp in moves if "carrying on the reassignment of %s-%d" % tp in log]
    assert carried == sorted(moves), "controller %d carried on %s of %s" % (successor, carried, sorted(moves))
    found = fc.cluster.zk.get_topic_assignment(TOPIC)
    assert found is not None and {(TOPIC, p): r for p, r in found[0].partitions.items()} == moves, found

    # The killed broker, started again, deletes the replicas it lost while it was down.
    fc.cluster.start(controller)
    _wait_settled(fc, "after broker %d started again" % controller, workload)
    took, problems = wait_for(lambda: ["broker %d still holds %s" % (controller, [tp for tp in _hosted(fc, controller)
                                                                                  if tp in moves])]
                              if [tp for tp in _hosted(fc, controller) if tp in moves] else [], OPERATION_TIMEOUT_S)
    assert took is not None, problems
    assert _hosted(fc, new) == sorted(moves), _hosted(fc, new)
    _goes_on(fc, workload, time.monotonic(), "after the reassignment")
    _finish(fc, _verify_as_placed(fc, workload), workload)


# -- a failed log directory -------------------------------------------------------------------------------


def test_a_failed_log_directory_loses_its_leaderships_and_the_broker_serves_the_other(
        make_cluster: Callable[..., FaultCluster], tmp_path: Path) -> None:
    """Broker 1 keeps its logs in two directories, the second on a disk that dies mid-run (an ext4
    file system on a loop device, shut down): the replicas there go offline, the controller hears
    of it and the partitions broker 1 led there get other leaders within two session timeouts;
    broker 1 goes on leading and replicating the partitions of its other directory, and nothing
    acknowledged is lost."""
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = 1
    with failing_disk(tmp_path / "second-disk", 256 * 1024 * 1024) as disk:
        first = tmp_path / ("data-%d" % broker)
        fc = make_cluster(n=3, config={"auto.leader.rebalance.enable": False},
                          broker_config={broker: {"log.dirs": "%s,%s" % (first, disk.path)}})
        # Broker 1 leads every partition of the topic: its first partitions alternate between
        # its directories (each new log goes to the one holding fewer), so it leads on both.
        admin = AdminClient({"bootstrap.servers": fc.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, replica_assignment=[[broker, 0, 2], [broker, 2, 0],
                                                                 [broker, 0, 2]])])[TOPIC].result(30)
        workload = _start_workload(fc)
        placement = _placement(fc)
        on_disk = sorted(tp for tp in placement if (disk.path / ("%s-%d" % tp)).is_dir())
        on_first = sorted(tp for tp in placement if (first / ("%s-%d" % tp)).is_dir())
        led_on_disk = [tp for tp in on_disk if tp[0] == TOPIC]
        led_on_first = [tp for tp in on_first if tp[0] == TOPIC]
        assert led_on_disk and led_on_first, "broker %d's partitions: %s on the second disk, %s on the first" % (
            broker, on_disk, on_first)
        assert all(fc.leader(*tp) == broker for tp in led_on_disk + led_on_first)

        disk.fail()
        failed = time.monotonic()

        def moved() -> List[str]:
            """The failed directory's partitions still led by broker 1 (or by none), or with it in
            their ISR, in ZooKeeper or in a live broker's Metadata."""
            problems = []
            for tp in on_disk:
                state = fc.cluster.state(*tp)
                if state is None or state[0] in (broker, -1) or broker in state[1]:
                    problems.append("%s-%d: (leader, ISR) %s" % (tp[0], tp[1], None if state is None else state[:2]))
            for b in fc.live():
                md = fc.metadata(b)
                problems += ["broker %d did not answer Metadata" % b] if md is None else [
                    "broker %d's Metadata: %s-%d led by %d" % (b, t["name"], p["partition_index"], p["leader_id"])
                    for t in md["topics"] for p in t["partitions"]
                    if (t["name"], p["partition_index"]) in on_disk and p["leader_id"] in (broker, -1)]
            return problems

        took, problems = wait_for(moved, BOUND_S)
        assert took is not None, "the partitions of the failed directory still led by broker %d %.1f s after the " \
            "failure: %s\n%s" % (broker, BOUND_S, "; ".join(problems[:6]), fc.log_excerpts())
        print("the failed directory's %d partitions moved in %.1f s" % (len(on_disk), time.monotonic() - failed))
        # Broker 1 still leads its other directory's partitions, which every broker keeps in sync,
        # and the producer and the group go on with every partition.
        assert [fc.leader(*tp) for tp in led_on_first] == [broker] * len(led_on_first)
        _goes_on(fc, workload, time.monotonic(), "after the directory failed")
        def out_of_sync() -> List[str]:
            states = {tp: fc.cluster.state(*tp) for tp in on_first}
            return ["%s-%d: (leader, ISR) %s, replicas %s" % (tp[0], tp[1], None if s is None else s[:2], placement[tp])
                    for tp, s in states.items() if s is None or sorted(s[1]) != sorted(placement[tp])]

        took, problems = wait_for(out_of_sync, OPERATION_TIMEOUT_S)
        assert took is not None, "the other directory's replicas out of sync: %s" % problems
        described = fc.request(broker, ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None})
        assert described is not None
        errors_by_dir = {r["log_dir"]: r["error_code"] for r in described["results"]}
        assert errors_by_dir == {str(first): 0, str(disk.path): KafkaStorageError.code}, errors_by_dir
        # The end: every acknowledged record once, the group's reads there, the online replicas
        # identical (broker 1's copies on the dead disk are out of it).
        online = {tp: [r for r in replicas if not (r == broker and tp in on_disk)] for tp, replicas in placement.items()}
        _finish(fc, _verify_as_placed(fc, workload, online), workload)
