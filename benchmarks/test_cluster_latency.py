"""How long a cluster takes to notice a change: a group member gone, a new topic, the last broker stopping.

The speed targets that tests/ once asserted as timings (removed from the tests in
4c06e33, which now check only the outcome, with a generous wait), measured here.
Each round is one event, timed from the event to the outcome (items = 1 per round,
so the summary's ratio is the reference row's time over this row's).

Groups:
- "group takeover": a group of two ``pylogq.Consumer`` members (the client the
  original test, tests/client/test_consumer.py, used), over TCP, on one topic of
  4 partitions holding a record each. One member runs in a child process and is
  killed with SIGKILL: it dies without a LeaveGroup, so the coordinator learns of
  it only when its session expires. Timed from the kill until the survivor holds
  all 4 partitions and has read a record from each partition the dead member had.
  Rows: ``pylogq`` (``pylogq-broker``, single node, as it runs without a properties
  file) and the reference ``tansu`` (Tansu 0.6, benchmarks/peers.py), both with the
  same group settings: the original test's (``GROUP_CONFIG``: heartbeat 50 ms,
  ``max_poll_interval_ms`` 5000) but ``session_timeout_ms`` 6000 (the lowest a
  broker with Kafka's default ``group.min.session.timeout.ms`` accepts; the
  original's 1500 needed the in-process broker's lowered minimum) and no
  auto-commit (the survivor reads the dead member's partitions from the start).
  Target, for pylogq: within the session timeout of the member's death, plus one
  second: < session.timeout.ms + 1 s (7 s) from the kill. The original test timed a
  takeover after a LeaveGroup against one session timeout; a member that dies
  without leaving cannot be replaced before its session expires (6 s, less the
  time since its last heartbeat), so the second is for what follows the expiry:
  the survivor's next heartbeat learns of the rebalance, it rejoins and syncs, and
  fetches the partitions it took over (the same allowance as the pickup group's).
- "pattern subscription pickup": a ``pylogq.Consumer`` in a group of its own,
  subscribed to a pattern (``metadata_max_age_ms`` 2000, the original test's in
  tests/client/test_consumer_follows_cluster.py; ``session_timeout_ms`` 6000,
  heartbeat 100 ms, as tests/client/test_consumer_metadata.py's ``GROUP``) and
  assigned the one topic that matches. Timed: a second matching topic created
  (CreateTopics), a record written to it, until the consumer is assigned it and
  has read the record (it learns of the topic only from its metadata refresh
  every ``metadata_max_age_ms``, then rejoins its group). A round starts just after
  the consumer joined (and so read its metadata): it waits nearly a whole max age,
  the worst phase. Rows ``pylogq`` and the reference ``tansu``, same client and
  settings. Target: < metadata_max_age_ms + 1 s (3 s), for pylogq.
- "last broker SIGTERM": a cluster of three ``pylogq-broker`` processes on real
  ZooKeeper (tests/cluster/_processes.py; ``controlled.shutdown.retry.backoff.ms``
  5000, Kafka's default, as the original test in tests/cluster/test_faults.py)
  with a topic of 6 partitions, replication factor 3, holding records. Per round
  the two brokers that are not the controller are stopped (SIGTERM) first; timed,
  SIGTERM to the last one until it has exited. It leads every partition and has
  nobody to hand them to: its controlled shutdown must give up at once (its log
  says "no other broker is alive to take its leaderships") rather than wait out
  retries. The reference row: SIGTERM to a single ``pylogq-broker`` without
  ZooKeeper holding the same topic (6 partitions, replication factor 1, the
  same records). Target: < 2 s (the original test's bound). Every round checks
  exit status 0.

Rounds: the takeover and SIGTERM groups 3 timed rounds, the pickup group 5 after
one warm-up round; at the smoke sizes (``--benchmark-disable``, ``--quick``,
``PYLOGQ_NO_EXTENSIONS=1``: ``summary.smoke``) one round and no warm-up, for every
row. A target is asserted on the median only when ``summary.asserting`` (timing
on, not quick); every run asserts the outcomes. Tansu missing: its rows skip with
the reason (a failure under ``PYLOGQ_REQUIRE_ALL=1``), as in test_server.py. Tansu
0.6 holds a member's JoinGroup for half its session timeout (3 s here), in both
groups; its InitProducerId answers UNKNOWN_SERVER_ERROR, so the records are
written with ``acks=1`` (no idempotence) to both brokers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import pytest
from peers import BROKERS, PEER, BrokerProcess, pylogq_broker, running_brokers, skip_missing
from summary import asserting, info, smoke

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pylogq import AdminClient, Consumer, Producer  # noqa: E402
from pylogq.client.admin import NewTopic  # noqa: E402
from tests._zookeeper import ZooKeeperServer, dies_with_test  # noqa: E402 - the test suite's harness
from tests.client.test_consumer import GROUP_CONFIG  # noqa: E402
from tests.client.test_consumer_metadata import GROUP as METADATA_GROUP  # noqa: E402
from tests.client.test_consumer_metadata import assigned_within, tps  # noqa: E402
from tests.cluster._processes import ProcessCluster  # noqa: E402

TIMEOUT = 60.0
#: Every wait on an outcome gives up after this; a round that does is a failure.
CAP = 60.0

TAKEOVER_PARTITIONS = 4
#: The original test's group settings, with a session the brokers' default minimum (6000 ms) allows.
TAKEOVER_GROUP: Dict[str, Any] = dict(GROUP_CONFIG, session_timeout_ms=6000, enable_auto_commit=False)
del TAKEOVER_GROUP["group_id"]
TAKEOVER_TARGET_S = TAKEOVER_GROUP["session_timeout_ms"] / 1000.0 + 1.0

PICKUP_MAX_AGE_MS = 2000
PICKUP_GROUP: Dict[str, Any] = {k: v for k, v in METADATA_GROUP.items() if k != "group_id"}
PICKUP_TARGET_S = PICKUP_MAX_AGE_MS / 1000.0 + 1.0

SIGTERM_PARTITIONS = 6
SIGTERM_RECORDS = 100  # per partition
SIGTERM_TARGET_S = 2.0
LAST_ALONE = "no other broker is alive to take its leaderships"

#: One member of a takeover group, in a child process: prints its partitions whenever they change.
_MEMBER = """\
import json, sys
from pylogq import Consumer
bootstrap, topic, group, config = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
consumer = Consumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id="doomed", **config)
printed = None
while True:
    consumer.poll(timeout_ms=50)
    held = sorted(tp.partition for tp in consumer.assignment())
    if held != printed:
        print(json.dumps(held), flush=True)
        printed = held
"""


def _rounds(config: Any, full: int) -> int:
    return 1 if smoke(config) else full


def _warmup(config: Any, full: int) -> int:
    return 0 if smoke(config) else full


def _fresh(prefix: str) -> str:
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def _median(benchmark: Any) -> Optional[float]:
    return benchmark.stats.stats.median if benchmark.stats is not None else None


@pytest.fixture(scope="module")
def running(tmp_path_factory: Any) -> Iterator[Dict[str, BrokerProcess]]:
    """Both single-node brokers, started once for the module (pylogq with its defaults)."""
    with running_brokers(tmp_path_factory, "data") as started:
        yield started
    statuses = {name: process.stop() for name, process in started.items()}  # stopped: their exit statuses
    assert statuses.get("pylogq") in (None, 0), "pylogq-broker exited %s after SIGTERM" % statuses["pylogq"]


@pytest.fixture(params=BROKERS)
def server(request: Any, running: Dict[str, BrokerProcess]) -> BrokerProcess:
    """One of the running brokers: each workload runs against both."""
    skip_missing(request.param)
    return running[request.param]


def _create(bootstrap: str, topic: str, partitions: int, records: int = 0) -> None:
    """A topic (CreateTopics), then ``records`` records written to each partition and acknowledged."""
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    if records:
        with Producer(bootstrap_servers=bootstrap, acks=1) as producer:
            futures = [producer.send(topic, b"%d-%d" % (p, i), partition=p)
                       for p in range(partitions) for i in range(records)]
            for future in futures:
                future.get(timeout=TIMEOUT)


# -- group takeover ---------------------------------------------------------------------------------


class DoomedMember:
    """The takeover group's member in a child process; ``held`` is its latest printed assignment."""

    def __init__(self, bootstrap: str, topic: str, group: str, log: Path) -> None:
        self.log = log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                dies_with_test([sys.executable, "-c", _MEMBER, bootstrap, topic, group, json.dumps(TAKEOVER_GROUP)]),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True)
        self.cond = threading.Condition()
        self.held: Set[int] = set()
        self.reader = threading.Thread(target=self._read, name="doomed-member", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cond:
                self.held = set(json.loads(line))

    def assignment(self) -> Set[int]:
        with self.cond:
            return set(self.held)

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError("the group member's process exited with %s; its stderr:\n%s"
                                 % (self.proc.returncode, self.log.read_text("utf-8", "replace")[-3000:]))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(TIMEOUT)

    def close(self) -> None:
        self.kill()
        self.reader.join(TIMEOUT)


def test_group_takeover(benchmark: Any, request: Any, server: BrokerProcess, tmp_path: Any) -> None:
    info(benchmark, "group takeover", 1, "takeovers", peer=server.name == PEER,
         target="pylogq: < session.timeout.ms + 1 s (%.0f s) from the member's SIGKILL" % TAKEOVER_TARGET_S)
    topic = _fresh("takeover")
    _create(server.bootstrap, topic, TAKEOVER_PARTITIONS, records=1)
    everything = tps(topic, TAKEOVER_PARTITIONS)
    live: Dict[str, Any] = {}
    results: List[Tuple[Set[Any], Set[int], Set[int], float]] = []
    rounds = [0]  # numbers each round's member log

    def close_round() -> None:
        survivor, member = live.pop("survivor", None), live.pop("member", None)
        if member is not None:
            member.close()
        if survivor is not None:
            survivor.close()

    def setup() -> Any:
        close_round()
        rounds[0] += 1
        group = _fresh("takeover")
        live["member"] = member = DoomedMember(server.bootstrap, topic, group,
                                               tmp_path / ("member-%d.log" % rounds[0]))
        live["survivor"] = survivor = Consumer(topic, bootstrap_servers=server.bootstrap, group_id=group,
                                               client_id="survivor", **TAKEOVER_GROUP)
        deadline = time.monotonic() + CAP
        while True:  # the survivor's membership runs from its polls
            survivor.poll(timeout_ms=50)
            mine = {tp.partition for tp in survivor.assignment()}
            theirs = member.assignment()
            if mine and theirs and not mine & theirs and {tp.partition for tp in everything} == mine | theirs:
                return (survivor, member, theirs), {}
            member.check_alive()
            assert time.monotonic() < deadline, "%s: the group of two not balanced within %.0f s: %s and %s" % (
                server.name, CAP, sorted(mine), sorted(theirs))

    def takeover(survivor: Consumer, member: DoomedMember, theirs: Set[int]) -> None:
        started = time.monotonic()
        member.kill()
        read: Set[int] = set()
        deadline = started + CAP
        while time.monotonic() < deadline:
            for tp, records in survivor.poll(timeout_ms=50).items():
                if records:
                    read.add(tp.partition)
            if survivor.assignment() == everything and theirs <= read:
                break
        results.append((survivor.assignment(), theirs, read, time.monotonic() - started))

    try:
        benchmark.pedantic(takeover, setup=setup, rounds=_rounds(request.config, 3), iterations=1,
                           warmup_rounds=_warmup(request.config, 0))
    finally:
        close_round()
    for assignment, theirs, read, seconds in results:
        assert assignment == everything and theirs and theirs <= read, (
            "%s: %.1f s after the kill the survivor held %s and had read partitions %s of the dead member's %s"
            % (server.name, seconds, sorted(tp.partition for tp in assignment), sorted(read), sorted(theirs)))
    benchmark.extra_info["session_timeout_ms"] = TAKEOVER_GROUP["session_timeout_ms"]
    median = _median(benchmark)
    if server.name != PEER and median is not None and asserting(request.config):
        assert median < TAKEOVER_TARGET_S, (
            "%s: group takeover %.2f s (median) from a member's SIGKILL, target < %.0f s (session.timeout.ms + 1 s)"
            % (server.name, median, TAKEOVER_TARGET_S))


# -- pattern subscription pickup --------------------------------------------------------------------


def test_pattern_subscription_pickup(benchmark: Any, request: Any, server: BrokerProcess) -> None:
    info(benchmark, "pattern subscription pickup", 1, "topics picked up", peer=server.name == PEER,
         target="pylogq: < metadata_max_age_ms + 1 s (%.0f s)" % PICKUP_TARGET_S)
    live: Dict[str, Any] = {}
    results: List[Tuple[Set[Any], List[Any], str, float]] = []

    def close_round() -> None:
        for name in ("consumer", "producer"):
            client = live.pop(name, None)
            if client is not None:
                client.close()

    def setup() -> Any:
        close_round()
        prefix = _fresh("pattern")
        first, second = prefix + "-a", prefix + "-b"
        _create(server.bootstrap, first, 1)
        live["producer"] = producer = Producer(bootstrap_servers=server.bootstrap, acks=1)
        producer.partitions_for(first)  # connected before the clock starts
        live["consumer"] = consumer = Consumer(bootstrap_servers=server.bootstrap, group_id=_fresh("pattern"),
                                               auto_offset_reset="earliest", metadata_max_age_ms=PICKUP_MAX_AGE_MS,
                                               **PICKUP_GROUP)
        consumer.subscribe(pattern=prefix + "-.*")
        assert assigned_within(consumer, tps(first, 1), CAP), "%s: %s" % (server.name, consumer.assignment())
        return (consumer, producer, first, second), {}

    def pickup(consumer: Consumer, producer: Producer, first: str, second: str) -> None:
        started = time.monotonic()
        with AdminClient(bootstrap_servers=server.bootstrap) as admin:
            admin.create_topics([NewTopic(second, 1, 1)])
        producer.send(second, b"picked up", partition=0).get(timeout=TIMEOUT)
        got: List[Any] = []
        deadline = started + CAP
        while time.monotonic() < deadline and not got:
            got = [r for rs in consumer.poll(timeout_ms=50).values() for r in rs if r.topic == second]
        results.append((consumer.assignment(), got, second, time.monotonic() - started))

    try:
        benchmark.pedantic(pickup, setup=setup, rounds=_rounds(request.config, 5), iterations=1,
                           warmup_rounds=_warmup(request.config, 1))
    finally:
        close_round()
    for assignment, got, second, seconds in results:
        assert [r.value for r in got] == [b"picked up"], "%s: %.1f s after creating %s the consumer read %s" % (
            server.name, seconds, second, got)
        assert tps(second, 1) <= assignment, "%s: assigned %s" % (server.name, assignment)
    benchmark.extra_info["metadata_max_age_ms"] = PICKUP_MAX_AGE_MS
    median = _median(benchmark)
    if server.name != PEER and median is not None and asserting(request.config):
        assert median < PICKUP_TARGET_S, (
            "%s: a new matching topic read %.2f s (median) after its creation, target < %.1f s "
            "(metadata_max_age_ms + 1 s)" % (server.name, median, PICKUP_TARGET_S))


# -- last broker SIGTERM ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    """Three brokers on a ZooKeeper of their own, with Kafka's controlled-shutdown retry backoff."""
    base = tmp_path_factory.mktemp("last-sigterm")
    zookeeper = ZooKeeperServer(base / "zookeeper")
    zookeeper.start()
    c = ProcessCluster(base, zookeeper.connect_string, 3, {"controlled.shutdown.retry.backoff.ms": 5000})
    try:
        c.start_all()
        yield c
    finally:
        try:
            c.close()  # raises on an unclean shutdown of any run
        finally:
            zookeeper.stop()


def _controlled_shutdowns(c: ProcessCluster, broker_id: int) -> List[str]:
    """The lines of the broker's log (all its runs) that say how its controlled shutdown went."""
    return [line for line in c.brokers[broker_id].log_path.read_text("utf-8", "replace").splitlines()
            if "controlled shutdown of broker %d:" % broker_id in line]


def _controller(c: ProcessCluster) -> int:
    """The controller's id, once there is one (broker 0 too: a wait's condition must be truthy)."""
    found: List[int] = []

    def elected() -> bool:
        controller = c.controller()
        if controller is None or controller < 0:
            return False
        found.append(controller)
        return True

    c.wait_until(elected, "a controller")
    return found[-1]


def test_last_broker_sigterm(benchmark: Any, request: Any, cluster: ProcessCluster) -> None:
    info(benchmark, "last broker SIGTERM", 1, "stops", target="< %.0f s" % SIGTERM_TARGET_S)
    topic = "sigterm"
    admin = AdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, SIGTERM_PARTITIONS, 3)])
    finally:
        admin.close()
    cluster.wait_until(lambda: cluster.full_isr(topic, SIGTERM_PARTITIONS), "the topic's ISR")
    _fill(cluster.bootstrap, topic)
    results: List[Tuple[int, int, List[str]]] = []
    last: List[int] = []

    def setup() -> Any:
        for b, process in cluster.brokers.items():
            if not process.running:
                cluster.start(b)
        cluster.wait_until(lambda: cluster.full_isr(topic, SIGTERM_PARTITIONS), "the ISR whole again")
        controller = _controller(cluster)
        for b in cluster.brokers:
            if b != controller:
                status = cluster.stop(b)
                assert status == 0, "broker %d exited %s after SIGTERM:\n%s" % (
                    b, status, cluster.brokers[b].log_tail())
        last.append(controller)
        return (controller, len(_controlled_shutdowns(cluster, controller))), {}

    def stop_last(broker_id: int, before: int) -> None:
        status = cluster.stop(broker_id)
        results.append((broker_id, status, _controlled_shutdowns(cluster, broker_id)[before:]))

    benchmark.pedantic(stop_last, setup=setup, rounds=_rounds(request.config, 3), iterations=1,
                       warmup_rounds=_warmup(request.config, 0))
    for broker_id, status, shutdown in results:
        assert status == 0, "the last broker %d exited %s after SIGTERM:\n%s" % (
            broker_id, status, cluster.brokers[broker_id].log_tail())
        assert len(shutdown) == 1 and LAST_ALONE in shutdown[0], (
            "the last live broker %d's controlled shutdown: %s\n%s"
            % (broker_id, shutdown, cluster.brokers[broker_id].log_tail()))
    benchmark.extra_info["last_brokers"] = last
    median = _median(benchmark)
    if median is not None and asserting(request.config):
        assert median < SIGTERM_TARGET_S, (
            "SIGTERM to the last live broker: %.2f s (median) until it exited, target < %.0f s"
            % (median, SIGTERM_TARGET_S))


def _fill(bootstrap: str, topic: str) -> None:
    """SIGTERM_RECORDS records written to each partition and acknowledged."""
    with Producer(bootstrap_servers=bootstrap, acks="all") as producer:
        futures = [producer.send(topic, b"%d-%d" % (p, i), partition=p)
                   for p in range(SIGTERM_PARTITIONS) for i in range(SIGTERM_RECORDS)]
        for future in futures:
            future.get(timeout=TIMEOUT)


def test_single_broker_sigterm(benchmark: Any, request: Any, tmp_path: Any) -> None:
    """The reference: SIGTERM to a single pylogq-broker without ZooKeeper, holding the same topic."""
    info(benchmark, "last broker SIGTERM", 1, "stops", peer=True)
    data_dir = str(tmp_path / "data")
    first = pylogq_broker(data_dir)
    try:
        first.start()
        with AdminClient(bootstrap_servers=first.bootstrap) as admin:
            admin.create_topics([NewTopic("sigterm", SIGTERM_PARTITIONS, 1)])
        _fill(first.bootstrap, "sigterm")
    finally:
        assert first.stop() == 0, "\n".join(first.tail)
    statuses: List[Optional[int]] = []
    started: List[BrokerProcess] = []

    def setup() -> Any:
        process = pylogq_broker(data_dir)  # again on the same data: a clean restart
        started.append(process)
        process.start()
        return (process,), {}

    def stop(process: BrokerProcess) -> None:
        statuses.append(process.stop())

    try:
        benchmark.pedantic(stop, setup=setup, rounds=_rounds(request.config, 3), iterations=1,
                           warmup_rounds=_warmup(request.config, 0))
    finally:
        for process in started:
            process.stop()
    assert statuses and all(s == 0 for s in statuses), "pylogq-broker exited %s after SIGTERM:\n%s" % (
        statuses, "\n".join(started[-1].tail))
