"""Fault injection for replication: a cluster wired for faults, a workload under them, the checks after.

The wiring (``FaultCluster``)::

    clients   --> broker proxy b --> broker b's listener      every broker advertises its proxy,
    broker a  --> broker proxy b     (labelled "broker-a")     so brokers reach each other through them
    broker b  --> ZooKeeper proxy b --> ZooKeeper              one ZooKeeper proxy per broker

A broker proxy knows which broker opened each connection (:func:`tests._proxy.peer_process`),
so a cut can partition one broker from another and leave clients connected, or cut all
of them. ZooKeeper is the cluster's own (a restart of it disturbs no other test), named
twice in each broker's connect string so that a session survives its restart
(:attr:`ZooKeeperServer.restartable_connect_string`).

The workload (``Workload``): an idempotent acks=all producer (confluent-kafka) writing
numbered values round-robin to the topic's partitions and recording each acknowledgement
with its offset; a consumer group of kafka-python members (not librdkafka: see
``test_chaos.py`` for its deadlock) recording what they read and committing it; and a
poller of the group's committed offsets (FindCoordinator and OffsetFetch, asked directly).

A fault (``FAULTS``) takes a role (the leader of one of the topic's partitions, the
group coordinator, the controller, a follower), picks the broker that has it, injects,
holds, and undoes; a ``Step`` records what was done and how long the cluster took:
``failover_s``, from the fault's start until every broker still in the cluster shows a
live leader for every partition and a live controller (measured while a broker is out),
and ``recovery_s``, the same from the fault's end with every broker back. Both must stay
within ``BOUND_S`` (two session timeouts). After a step the cluster settles (every ISR full,
writes acknowledged on every partition) or, as the seed draws it, the next fault comes
while it recovers (a live leader everywhere is enough). It settles before an empty disk, so
that the wiped replica never holds the only copy of an acknowledged record, and a fault that
takes a broker out or ZooKeeper down begins once every partition has two live in-sync
replicas (``min.insync.replicas``): with one, nothing may lead it once that one is out (no
unclean election), and without ZooKeeper its ISR cannot grow, so acks=all writes wait, in
Kafka as here. Every schedule stays within what the design promises to survive.

While it runs, the poller checks that a committed offset never goes backwards: never below
one read before it, nor below one whose commit a member had acknowledged before it was
asked. While ZooKeeper is down, writes must go on (docs/replication.md). After a schedule,
:func:`verify` reads everything back and checks: every acknowledged record exactly once at
its acknowledged offset; everything the group read still there; replicas byte-identical
below the high watermark (after a clean stop of every broker); no traceback in a broker's log.

Sleeps here are a fault's length (how long a broker stays down, frozen or cut off) and
the pacing of the producer and the pollers; every wait for the cluster polls a condition
with a deadline.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from pylogq.cluster.coordinator.group.offsets_schema import partition_for_group

from .._proxy import TcpProxy, peer_process
from .._ports import free_port
from .._zookeeper import ZooKeeperServer
from ..server.test_server import Wire
from ._processes import (
    Copy,
    ProcessCluster,
    Records,
    duplicate_failures,
    read_back,
    read_back_failures,
    replicas_identical,
    stored_copies,
)

SESSION_MS = 3000
SESSION_S = SESSION_MS / 1000.0
#: How soon a live leader for every partition must be visible after a fault (the issue's bound).
BOUND_S = 2 * SESSION_S
LAG_MS = 4000  # replica.lag.time.max.ms
MIN_ISR = 2  # min.insync.replicas
TOPIC = "faults"
PARTITIONS = 3
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 4
GROUP = "faults-group"
MEMBERS = 2
#: How long the cluster may take to be whole again after a fault before the schedule gives up.
HEALTH_TIMEOUT_S = 60.0
POLL_S = 0.1

PRODUCE, METADATA, OFFSET_FETCH, FIND_COORDINATOR, DESCRIBE_CLUSTER = 0, 3, 9, 10, 60


#: The offsets partition that holds the group: its leader is the group's coordinator.
GROUP_PARTITION = partition_for_group(GROUP, OFFSETS_PARTITIONS)


class FaultCluster:
    """Three broker processes behind proxies, on a ZooKeeper of the caller's, with a chroot of their own.

    Not thread-safe: the test thread drives it. The workload's threads only use its addresses,
    :meth:`live` and :meth:`request` (a connection of their own each time).
    """

    def __init__(self, base: Path, zookeeper: ZooKeeperServer, n: int = 3,
                 config: Optional[Dict[str, Any]] = None,
                 broker_config: Optional[Dict[int, Dict[str, Any]]] = None) -> None:
        """``config`` is every broker's; ``broker_config`` adds keys per broker (``log.dirs``)."""
        self.base = base
        self.zookeeper = zookeeper
        self.chroot = "pylogq-faults-%s" % uuid.uuid4().hex[:10]
        self.listen = {b: free_port() for b in range(n)}
        self.proxies: Dict[int, TcpProxy] = {}
        self.zk_proxies: Dict[int, TcpProxy] = {}
        # cut off from the others and ZooKeeper (not part of the cluster now) -> the labels cut from it
        self.isolated: Dict[int, List[str]] = {}
        self.workloads: List["Workload"] = []  # stopped (without waiting) when the cluster closes
        for b in range(n):
            self.proxies[b] = TcpProxy(("127.0.0.1", self.listen[b]), classify=self._classifier(b))
            self.zk_proxies[b] = TcpProxy(("127.0.0.1", zookeeper.port))
        per_broker = {b: {
            "listeners": "PLAINTEXT://127.0.0.1:%d" % self.listen[b],
            "advertised.listeners": "PLAINTEXT://127.0.0.1:%d" % self.proxies[b].port,
            "zookeeper.connect": "%s,%s/%s" % (self.zk_proxies[b].address, self.zk_proxies[b].address, self.chroot),
        } for b in range(n)}
        for b, extra in (broker_config or {}).items():
            per_broker[b].update(extra)
        settings: Dict[str, Any] = {
            "zookeeper.session.timeout.ms": SESSION_MS,
            "min.insync.replicas": MIN_ISR,
            "default.replication.factor": 3,
            "offsets.topic.replication.factor": 3,
            "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
            "replica.lag.time.max.ms": LAG_MS,
            "auto.create.topics.enable": False,
        }
        settings.update(config or {})
        self.cluster = ProcessCluster(base, "%s/%s" % (zookeeper.restartable_connect_string, self.chroot), n,
                                      settings, ports=self.listen, broker_config=per_broker)

    # -- addresses and labels ---------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(p.address for p in self.proxies.values())

    @property
    def ids(self) -> List[int]:
        return sorted(self.cluster.brokers)

    def _classifier(self, broker: int) -> Callable[[Tuple[str, int]], Optional[str]]:
        """The label of a connection to ``broker``'s proxy: the broker that opened it, if one did."""
        return lambda peer: self._source(peer, self.proxies[broker].port)

    def _source(self, peer: Tuple[str, int], port: int) -> Optional[str]:
        pids = {p.pid: b for b, p in self.cluster.brokers.items() if p.pid is not None}
        pid = peer_process(peer, port, list(pids))
        return None if pid is None else label(pids[pid])

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        if not self.zookeeper.running:
            self.zookeeper.start()
        self.cluster.start_all()

    def create_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)

    def close(self) -> None:
        for w in self.workloads:
            w.abandon()
        for p in self.proxies.values():
            p.heal()
        for p in self.zk_proxies.values():
            p.heal()
        self.isolated.clear()
        try:
            if not self.zookeeper.running:
                self.zookeeper.start()
        finally:
            try:
                self.cluster.close(timeout=30)  # raises on an unclean shutdown, after stopping every broker
            finally:
                for p in list(self.proxies.values()) + list(self.zk_proxies.values()):
                    p.close()
                self.zookeeper.delete_chroot("%s/%s" % (self.zookeeper.connect_string, self.chroot))

    # -- who is what ------------------------------------------------------------------------------

    def live(self) -> List[int]:
        """Brokers in the cluster now: running, not frozen, not cut off."""
        return [b for b, p in self.cluster.brokers.items()
                if p.running and not p.frozen and b not in self.isolated]

    def leader(self, topic: str, partition: int) -> int:
        state = self.cluster.state(topic, partition)
        return -1 if state is None else state[0]

    def replicas(self, topic: str, partition: int) -> List[int]:
        found = self.cluster.zk.get_topic_assignment(topic)
        assert found is not None, "no assignment for %s" % topic
        return list(found[0].partitions[partition])

    def controller(self) -> Optional[int]:
        return self.cluster.controller()

    def cluster_id(self) -> str:
        from pylogq.cluster.zk.data import CLUSTER_ID_PATH, decode_cluster_id

        return decode_cluster_id(self.cluster.zk.store.get(CLUSTER_ID_PATH)[0])

    def registrations(self) -> Dict[int, int]:
        """Each registered broker's ZooKeeper session (the owner of /brokers/ids/<id>)."""
        out = {}
        for b in self.ids:
            stat = self.cluster.zk.store.exists("/brokers/ids/%d" % b)
            if stat is not None:
                out[b] = stat.ephemeral_owner
        return out

    # -- asking brokers directly ------------------------------------------------------------------

    def request(self, broker: int, api_key: int, version: int, body: Dict[str, Any],
                timeout: float = 2.0) -> Optional[Dict[str, Any]]:
        """A request to the broker's own listener (not its proxy); None if it does not answer in time."""
        try:
            with Wire(("127.0.0.1", self.listen[broker]), timeout=timeout) as wire:
                return wire.request(api_key, version, body)
        except (OSError, AssertionError):
            return None

    def metadata(self, broker: int) -> Optional[Dict[str, Any]]:
        return self.request(broker, METADATA, 9, {
            "topics": [{"name": TOPIC}, {"name": OFFSETS_TOPIC}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})

    def describe_cluster(self, broker: int) -> Optional[Dict[str, Any]]:
        return self.request(broker, DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})

    def committed(self) -> Optional[Tuple[str, Dict[int, int]]]:
        """The group's committed offsets (partition -> offset, -1 for none) as its coordinator
        answers, found and asked through brokers in the cluster now, as a client would, and who
        said so ("coordinator c, named by b"); None without an answer."""
        found = None
        for b in self.live():
            found = self.request(b, FIND_COORDINATOR, 3, {"key": GROUP, "key_type": 0})
            if found is not None and found["error_code"] == 0:
                break
        if found is None or found["error_code"] != 0 or found["node_id"] not in self.live():
            return None
        answer = self.request(found["node_id"], OFFSET_FETCH, 7, {
            "group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": list(range(PARTITIONS))}],
            "require_stable": False})
        if answer is None or answer["error_code"] != 0:
            return None
        return "coordinator %d, named by broker %d" % (found["node_id"], b), {
            p["partition_index"]: p["committed_offset"] for t in answer["topics"] for p in t["partitions"]
            if p["error_code"] == 0}

    def leadership_problems(self, brokers: Optional[Sequence[int]] = None, zk: bool = True) -> List[str]:
        """What keeps the cluster from having a live leader for every partition, visible in the
        Metadata of every broker in ``brokers`` (the live ones by default), and a live controller
        (in ZooKeeper, when ``zk``, and in each of those brokers' Metadata). Empty when it has."""
        live = self.live()
        asked = live if brokers is None else list(brokers)
        problems: List[str] = []
        if not asked:
            return ["no live broker"]
        if zk:
            try:
                controller = self.controller()
            except Exception as exc:  # noqa: BLE001 - ZooKeeper not answering is a problem to report
                return ["ZooKeeper did not answer: %r" % exc]
            if controller not in live:
                problems.append("the controller in ZooKeeper is %s (live: %s)" % (controller, live))
        for b in asked:
            md = self.metadata(b)
            if md is None:
                problems.append("broker %d did not answer Metadata" % b)
                continue
            if md["controller_id"] not in live:
                problems.append("broker %d names controller %d" % (b, md["controller_id"]))
            expected = {TOPIC: PARTITIONS, OFFSETS_TOPIC: OFFSETS_PARTITIONS}
            for t in md["topics"]:
                if t["name"] not in expected:
                    continue
                n = expected.pop(t["name"])
                if t["error_code"] != 0:
                    problems.append("broker %d: %s error %d" % (b, t["name"], t["error_code"]))
                    continue
                parts = {p["partition_index"]: p for p in t["partitions"]}
                for i in range(n):
                    p = parts.get(i)
                    if p is None:
                        problems.append("broker %d: no %s-%d" % (b, t["name"], i))
                    elif p["leader_id"] not in live:
                        problems.append("broker %d: %s-%d led by %d" % (b, t["name"], i, p["leader_id"]))
            for name in expected:
                problems.append("broker %d: no topic %s" % (b, name))
        return problems

    def survivable(self) -> List[str]:
        """What keeps the cluster from surviving a broker taken out, or ZooKeeper down: a partition
        led by no live broker, or with fewer than ``min.insync.replicas`` (2) in-sync replicas (its
        only one taken out, nothing may lead it without an unclean election; ZooKeeper down, its
        ISR cannot grow and acks=all writes wait). Empty when it can."""
        live = self.live()
        problems = []
        for topic, n in ((TOPIC, PARTITIONS), (OFFSETS_TOPIC, OFFSETS_PARTITIONS)):
            for p in range(n):
                state = self.cluster.state(topic, p)
                if state is None or state[0] not in live or len([b for b in state[1] if b in live]) < MIN_ISR:
                    problems.append("%s-%d: %s" % (topic, p, state))
        return problems

    def whole(self) -> List[str]:
        """What keeps the cluster from being whole: every broker running and in it, every ISR full."""
        problems = ["broker %d is not live" % b for b in self.ids if b not in self.live()]
        if problems:
            return problems
        for topic, n in ((TOPIC, PARTITIONS), (OFFSETS_TOPIC, OFFSETS_PARTITIONS)):
            for p in range(n):
                state = self.cluster.state(topic, p)
                if state is None or state[0] < 0 or len(state[1]) != 3:
                    problems.append("%s-%d: %s" % (topic, p, state))
        return problems

    def isolate(self, broker: int, clients: bool) -> None:
        """Cut ``broker`` off from the other brokers (both ways) and ZooKeeper, and from clients if asked."""
        others = [b for b in self.ids if b != broker]
        sources = [label(b) for b in others] + (["client"] if clients else [])
        self.proxies[broker].cut(sources)
        for b in others:
            self.proxies[b].cut([label(broker)])
        self.zk_proxies[broker].cut()
        self.isolated[broker] = sources

    def rejoin(self, broker: int) -> None:
        """Undo :meth:`isolate`: only the connections it cut are dropped (their peers reconnect)."""
        self.zk_proxies[broker].heal()
        for b in self.ids:
            if b != broker:
                self.proxies[b].heal([label(broker)])
        self.proxies[broker].heal(self.isolated.pop(broker))

    def sever(self, a: int, b: int) -> None:
        """Cut the link between two brokers, both ways."""
        self.proxies[a].cut([label(b)])
        self.proxies[b].cut([label(a)])

    def mend(self, a: int, b: int) -> None:
        self.proxies[a].heal([label(b)])
        self.proxies[b].heal([label(a)])

    def log_excerpts(self, lines: int = 15) -> str:
        """Each broker's last warnings and errors (the log files may be gone when the report is read:
        pytest keeps only its last few temporary directories)."""
        out = []
        for b, p in self.cluster.brokers.items():
            text = p.log_path.read_text("utf-8", "replace").splitlines() if p.log_path.exists() else []
            picked = [line for line in text if (" WARNING " in line or " ERROR " in line)
                      and "Connection dropped" not in line and "Transition to CONNECTING" not in line]
            out.append("--- broker %d: last warnings and errors of %d ---\n%s"
                       % (b, len(picked), "\n".join(line[:300] for line in picked[-lines:])))
        return "\n".join(out)

    def logs(self, lines: int = 40) -> str:
        return "\n".join("--- broker %d (%s) ---\n%s" % (b, p.log_path, p.log_tail(lines))
                         for b, p in self.cluster.brokers.items())


def wall_clock() -> str:
    """The time of day as the brokers' logs write it, to find a moment in them."""
    now = time.time()
    return "%s,%03d" % (time.strftime("%H:%M:%S", time.localtime(now)), int(now * 1000) % 1000)


def label(broker: int) -> str:
    return "broker-%d" % broker


def wait_for(condition: Callable[[], List[str]], timeout: float, since: Optional[float] = None
             ) -> Tuple[Optional[float], List[str]]:
    """Poll ``condition`` (a list of problems, empty when it holds) until it holds or ``timeout``
    passes; -> (seconds from ``since`` (default: now) until it held, or None; the last problems)."""
    start = time.monotonic() if since is None else since
    deadline = time.monotonic() + timeout
    while True:
        problems = condition()
        if not problems:
            return time.monotonic() - start, []
        if time.monotonic() >= deadline:
            return None, problems
        time.sleep(POLL_S)


def hold(seconds: float, until: Optional[Callable[[], bool]] = None) -> None:
    """Keep a fault in place for ``seconds`` (its duration is part of the fault, not a wait for
    something); ``until``, checked meanwhile, may end it early when it reports something fatal."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if until is not None and until():
            return
        time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))


# -- the workload -----------------------------------------------------------------------------------


class Workload:
    """An idempotent acks=all producer, a consumer group and a committed-offsets poller, on threads.

    What they saw is kept for :func:`verify`; exceptions that end a thread go to ``failures``.
    """

    def __init__(self, fc: FaultCluster, members: int = MEMBERS, pace_s: float = 0.003) -> None:
        self.fc = fc
        self.members = members
        self.pace_s = pace_s
        self.lock = threading.Lock()
        self.acked: Dict[int, List[Tuple[int, bytes, float]]] = {p: [] for p in range(PARTITIONS)}
        self.delivery_errors: List[str] = []
        self.failures: List[str] = []
        self.seen: List[Tuple[int, int, bytes, int]] = []  # (partition, offset, value, member)
        self.commits: Dict[int, List[Tuple[float, int]]] = {p: [] for p in range(PARTITIONS)}  # read back
        self.commit_acks: Dict[int, List[Tuple[float, int]]] = {p: [] for p in range(PARTITIONS)}  # acknowledged
        self.backwards: List[str] = []
        self.commit_errors = 0
        self.poll_errors = 0
        self.producer_stats = ""
        self.stop_event = threading.Event()
        self.consumers_stop = threading.Event()
        self.threads: List[threading.Thread] = []
        fc.workloads.append(self)

    def start(self) -> None:
        targets: List[Tuple[str, Callable[[], None]]] = [("producer", self._produce)]
        targets += [("member-%d" % m, lambda m=m: self._consume(m)) for m in range(self.members)]  # type: ignore[misc]
        targets.append(("committed-poller", self._poll_committed))
        for name, target in targets:
            # Daemons: one stuck in a client's close fails the run below instead of hanging the process.
            t = threading.Thread(target=self._guard(name, target), name="faults-" + name, daemon=True)
            self.threads.append(t)
            t.start()

    def _guard(self, name: str, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException:  # noqa: BLE001 - reported by verify
                self.failures.append("%s: %s" % (name, traceback.format_exc()))
        return run

    def acked_count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.acked.values())

    def stalled_partitions(self, since: float) -> List[str]:
        """Partitions with no acknowledgement after ``since`` (a problem list for wait_for)."""
        with self.lock:
            return ["no acknowledgement on %s-%d since the fault" % (TOPIC, p) for p in range(PARTITIONS)
                    if not any(t > since for _, _, t in self.acked[p][-20:])]

    def stalled_between(self, start: float, end: float) -> List[str]:
        """Partitions with no acknowledgement between ``start`` and ``end``."""
        with self.lock:
            return ["%s-%d" % (TOPIC, p) for p in range(PARTITIONS)
                    if not any(start <= t <= end for _, _, t in self.acked[p])]

    def on_delivery(self, err: Any, msg: Any) -> None:
        with self.lock:
            if err is not None:
                self.delivery_errors.append("%r: %s" % (msg.value(), err))
            else:
                self.acked[msg.partition()].append((msg.offset(), msg.value(), time.monotonic()))

    def _produce(self) -> None:
        import confluent_kafka

        # librdkafka's own account of the run, for a failure's diagnosis: its idempotence state
        # machine, connections and metadata in producer.log, its statistics every two seconds.
        logger = logging.getLogger("faults.producer.%s" % self.fc.chroot)
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        handler = logging.FileHandler(self.fc.base / "producer.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        producer = confluent_kafka.Producer({
            "bootstrap.servers": self.fc.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": 300000, "request.timeout.ms": 10000, "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "logger": logger, "debug": "eos,broker,topic",
            "statistics.interval.ms": 2000, "stats_cb": self._on_stats, "error_cb": self._on_error})
        try:
            self._produce_with(producer)
        finally:
            logger.removeHandler(handler)
            handler.close()

    def _on_error(self, error: Any) -> None:
        if error.fatal():  # the producer is done for; the reason is librdkafka's, with the broker's error
            self.failures.append("producer: fatal error: %s" % error.str())

    def _on_stats(self, text: str) -> None:
        self.producer_stats = text

    def producer_state(self) -> str:
        """The producer's last statistics, in short: its idempotence state, what waits where."""
        if not self.producer_stats:
            return "no producer statistics yet"
        stats = json.loads(self.producer_stats)
        eos = stats.get("eos", {})
        brokers = ["%s %s (out %s, waiting %s)" % (b.get("nodeid"), b.get("state"), b.get("outbuf_cnt"),
                                                    b.get("waitresp_cnt"))
                   for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0]
        parts = ["%s: leader %s, queued %s, in flight %s, next ack seq %s" % (
            p, q.get("leader"), q.get("msgq_cnt", 0) + q.get("xmit_msgq_cnt", 0), q.get("msgs_inflight"),
            q.get("next_ack_seq")) for p, q in sorted(stats.get("topics", {}).get(TOPIC, {}).get("partitions", {})
                                                          .items()) if p != "-1"]
        return "producer: idempotence %s for %s ms (id %s, epoch %s); brokers %s; partitions %s" % (
            eos.get("idemp_state"), eos.get("idemp_stateage", 0) // 1000, eos.get("producer_id"),
            eos.get("producer_epoch"), "; ".join(brokers), "; ".join(parts))

    def _produce_with(self, producer: Any) -> None:
        n = 0
        while not self.stop_event.is_set():
            try:
                producer.produce(TOPIC, value=b"v-%d" % n, partition=n % PARTITIONS, on_delivery=self.on_delivery)
                n += 1
            except BufferError:
                producer.poll(0.05)
                continue
            producer.poll(0)
            time.sleep(self.pace_s)  # pacing, so three brokers keep most of two cores
        left = producer.flush(60)
        if left:
            self.failures.append("producer: %d records still unacknowledged 60 s after the run; %s"
                                 % (left, self.producer_state()))

    def _consume(self, member: int) -> None:
        import kafka
        from kafka.structs import OffsetAndMetadata

        positions: Dict[Any, int] = {}  # partition -> the offset after the last record read, this assignment

        class Forget(kafka.ConsumerRebalanceListener):
            """A partition taken away is read from its committed offset when it comes back: what
            this member read of it before says nothing about where it stands then."""

            def on_partitions_revoked(self, revoked: Any) -> None:
                for tp in revoked:
                    positions.pop(tp, None)

            def on_partitions_assigned(self, assigned: Any) -> None:
                pass

        consumer = kafka.KafkaConsumer(
            bootstrap_servers=self.fc.bootstrap, group_id=GROUP, client_id="faults-member-%d" % member,
            enable_auto_commit=False, auto_offset_reset="earliest", metadata_max_age_ms=1000,
            request_timeout_ms=10000, session_timeout_ms=6000, heartbeat_interval_ms=1000,
            retry_backoff_ms=100, reconnect_backoff_max_ms=500)
        consumer.subscribe([TOPIC], listener=Forget())
        try:
            last_commit = 0.0
            while not self.consumers_stop.is_set():
                try:
                    batch = consumer.poll(timeout_ms=200)
                except kafka.errors.KafkaError:  # kafka-python 3 raises a connection refused or reset
                    self.poll_errors += 1         # by a broker that is down; the next poll tries again
                    continue
                for tp, recs in batch.items():
                    self.seen.extend((tp.partition, r.offset, r.value, member) for r in recs)
                    if recs:
                        positions[tp] = recs[-1].offset + 1
                if time.monotonic() - last_commit > 0.3 and positions:
                    last_commit = time.monotonic()
                    offsets = {tp: OffsetAndMetadata(o, "", -1) for tp, o in positions.items()}
                    try:
                        consumer.commit(offsets, timeout_ms=5000)
                    except Exception:  # noqa: BLE001 - a commit across a failover may fail; the next one counts
                        self.commit_errors += 1
                        continue
                    now = time.monotonic()
                    with self.lock:
                        for tp, o in offsets.items():
                            self.commit_acks[tp.partition].append((now, o.offset))
        finally:
            consumer.close(autocommit=False, timeout_ms=10000)

    def _poll_committed(self) -> None:
        # Asked with the protocol directly: librdkafka's ListConsumerGroupOffsets crashes the
        # process (a NULL consumer group in rd_kafka_cgrp_op, librdkafka issue 5040, in 2.16
        # too) when the answer is NOT_COORDINATOR, which every coordinator failover gives.
        highest: Dict[int, int] = {}
        while not self.consumers_stop.wait(0.25):
            asked = time.monotonic()
            found = self.fc.committed()
            if found is None:
                continue  # no coordinator during a failover: ask again
            source, answer = found
            now = time.monotonic()
            for p, offset in sorted(answer.items()):
                shown = offset if offset >= 0 else "none"  # negative: nothing committed
                with self.lock:
                    if offset >= 0:
                        self.commits[p].append((now, offset))
                    if p in highest and offset < highest[p]:
                        self.backwards.append("%s-%d: committed offset %s read after %d (%s; at %s)"
                                              % (TOPIC, p, shown, highest[p], source, wall_clock()))
                    acked = max((o for t, o in self.commit_acks[p] if t < asked), default=-1)
                    if offset < acked:
                        self.backwards.append("%s-%d: committed offset %s read after a commit of %d was "
                                              "acknowledged (%s; at %s)"
                                              % (TOPIC, p, shown, acked, source, wall_clock()))
                    if offset >= 0:
                        highest[p] = max(highest.get(p, -1), offset)

    def abandon(self) -> None:
        """Stop every thread without waiting for the group to catch up (a test that failed)."""
        self.stop_event.set()
        self.consumers_stop.set()
        for t in self.threads:
            t.join(30)

    def stop(self, timeout: float = 180.0) -> None:
        """Stop producing (flushing what is in flight), then stop the group and the poller."""
        self.stop_event.set()
        producer = self.threads[0] if self.threads else None
        if producer is not None:
            producer.join(timeout)
            if producer.is_alive():
                self.failures.append("producer: still running %.0f s after the stop" % timeout)
        # The group reads on until it has caught up with what was acknowledged, so that the
        # committed offsets and what was read cover the whole run.
        total = self.acked_count()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len({(p, o) for p, o, _, _ in self.seen}) < total:
            time.sleep(POLL_S)
        self.consumers_stop.set()
        for t in self.threads[1:]:
            t.join(60)
            if t.is_alive():
                self.failures.append("%s: still running 60 s after the stop" % t.name)


# -- a schedule's steps ------------------------------------------------------------------------------


class Step:
    """One fault as it was done: what, on which broker, and what was measured."""

    def __init__(self, fault: str, role: str) -> None:
        self.fault = fault
        self.role = role
        self.detail = ""
        self.start = 0.0
        self.started_at = wall_clock()  # replaced when the fault is injected
        self.end = 0.0
        self.out: Optional[int] = None  # the broker out of the cluster during the fault, if one is
        self.hold_s = 0.0
        self.failover_s: Optional[float] = None
        self.failover_problems: List[str] = []
        self.recovery_s: Optional[float] = None
        self.recovery_problems: List[str] = []
        self.notes: List[str] = []

    def begin(self) -> None:
        """The fault is being injected now."""
        self.start = time.monotonic()
        self.started_at = wall_clock()

    def describe(self) -> str:
        parts = ["at %s %s (%s): %s" % (self.started_at, self.fault, self.role, self.detail)]
        if self.out is not None:
            parts.append("failover %s" % ("%.2f s" % self.failover_s if self.failover_s is not None
                                          else "not seen in the %.1f s held" % self.hold_s))
        parts.append("recovery %s" % ("%.2f s" % self.recovery_s if self.recovery_s is not None else "never"))
        return "; ".join(parts + self.notes)


class Run:
    """One schedule's run: the cluster, the workload, the random source, the steps and failures."""

    def __init__(self, seed: int, fc: FaultCluster, workload: Workload) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.fc = fc
        self.workload = workload
        self.steps: List[Step] = []
        self.failures: List[str] = []

    # -- roles ------------------------------------------------------------------------------------

    def _pick(self, role: str) -> Tuple[int, str]:
        fc = self.fc
        if role == "controller":
            c = fc.controller()
            assert c is not None and c >= 0, "no controller to pick"
            return c, "the controller"
        if role == "coordinator":
            b = fc.leader(OFFSETS_TOPIC, GROUP_PARTITION)
            return b, "the group coordinator (leader of %s-%d)" % (OFFSETS_TOPIC, GROUP_PARTITION)
        p = self.rng.randrange(PARTITIONS)
        leader = fc.leader(TOPIC, p)
        if role == "leader":
            return leader, "the leader of %s-%d" % (TOPIC, p)
        follower = self.rng.choice([b for b in fc.replicas(TOPIC, p) if b != leader])
        return follower, "a follower of %s-%d (led by %d)" % (TOPIC, p, leader)

    def pick(self, role: str) -> Tuple[int, str]:
        """The broker that has ``role`` now, and a description of it; a random live broker when the
        role names none (a partition without a leader while the cluster recovers)."""
        b, what = self._pick(role)
        if b not in self.fc.live():
            b, what = self.rng.choice(self.fc.live()), "%s is %d: a random live broker instead" % (what, b)
        return b, what

    def roles_of(self, broker: int) -> str:
        fc = self.fc
        led = ["%s-%d" % (TOPIC, p) for p in range(PARTITIONS) if fc.leader(TOPIC, p) == broker]
        if fc.leader(OFFSETS_TOPIC, GROUP_PARTITION) == broker:
            led.append("the group's %s-%d" % (OFFSETS_TOPIC, GROUP_PARTITION))
        text = "leads %s" % (", ".join(led) or "nothing")
        return text + (", controller" if fc.controller() == broker else "")

    # -- measuring --------------------------------------------------------------------------------

    def hold_out(self, step: Step, seconds: float) -> None:
        """Hold a fault that keeps ``step.out`` out of the cluster, measuring the failover meanwhile."""
        step.hold_s = seconds
        deadline = step.start + seconds
        took, problems = wait_for(lambda: self.fc.leadership_problems(), max(0.0, deadline - time.monotonic()),
                                  since=step.start)
        step.failover_s, step.failover_problems = took, problems
        hold(max(0.0, deadline - time.monotonic()))

    def recovered(self, step: Step) -> None:
        """After the fault's end: measure the recovery, then wait until the cluster is whole and
        writes are acknowledged on every partition again."""
        step.end = time.monotonic()
        step.recovery_s, step.recovery_problems = wait_for(lambda: self.fc.leadership_problems(), 60.0,
                                                           since=step.end)

    def judge(self, step: Step, settle: bool) -> bool:
        """Record the step's failures; -> whether the schedule can go on. ``settle``: wait until the
        cluster is whole again (every ISR full) and writes are acknowledged on every partition;
        otherwise the next fault comes while it recovers (a live leader everywhere is enough)."""
        where = "step %d (%s)" % (len(self.steps), step.fault)
        if step.out is not None:
            if step.failover_s is not None and step.failover_s > BOUND_S:
                self.failures.append("%s: failover took %.2f s, more than %.1f s" % (where, step.failover_s, BOUND_S))
            elif step.failover_s is None and step.hold_s >= BOUND_S:
                self.failures.append("%s: no failover within the %.1f s the fault was held: %s"
                                     % (where, step.hold_s, "; ".join(step.failover_problems[:6])))
        if step.recovery_s is None:
            self.fc.cluster.dump_threads()
            self.failures.append("%s: no live leader everywhere 60 s after the fault ended (thread dumps in the "
                                 "broker logs): %s" % (where, "; ".join(step.recovery_problems[:6])))
            return False
        if step.recovery_s > BOUND_S:
            self.failures.append("%s: recovery took %.2f s after the fault ended, more than %.1f s"
                                 % (where, step.recovery_s, BOUND_S))
        if not settle:
            step.notes.append("the next fault at once")
            return True
        took, problems = wait_for(lambda: self.fc.whole() + self.workload.stalled_partitions(step.end),
                                  HEALTH_TIMEOUT_S)
        if took is None:
            self.fc.cluster.dump_threads()
            self.failures.append("%s: the cluster was not whole (or writes did not resume) %.0f s after the "
                                 "fault (thread dumps in the broker logs, librdkafka's in producer.log): %s; %s"
                                 % (where, HEALTH_TIMEOUT_S, "; ".join(problems[:8]), self.workload.producer_state()))
            return False
        return True

    def ready(self, step: Step) -> bool:
        """Before a fault that takes a broker out or ZooKeeper down, after a step that did not
        settle: wait until the cluster can survive it (:meth:`FaultCluster.survivable`), so the
        schedule stays within what the design promises (no partition left with one in-sync
        replica to lose). -> whether it could."""
        took, problems = wait_for(self.fc.survivable, HEALTH_TIMEOUT_S)
        if took is None:
            self.failures.append("step %d (%s): %.0f s after the last fault, partitions still had fewer than %d "
                                 "live in-sync replicas: %s" % (len(self.steps), step.fault, HEALTH_TIMEOUT_S,
                                                                MIN_ISR, "; ".join(problems[:8])))
            return False
        if took > 2 * POLL_S:
            step.notes.append("began once every partition had %d live in-sync replicas (%.2f s)" % (MIN_ISR, took))
        return True

    def plan(self, steps: int) -> List[Tuple[str, str, bool]]:
        """The schedule's faults, roles and whether the cluster settles after each, drawn first from
        the seed (which broker a role names is decided when the step runs, from the cluster then).

        The cluster settles (every ISR full again) before an empty disk, so that a wiped replica
        is never the only one of an acknowledged record, and after the last step."""
        drawn = [(self.rng.choice(sorted(FAULTS)), self.rng.choice(ROLES), self.rng.random() < 0.6)
                 for _ in range(steps)]
        return [(fault, role, settle or i == steps - 1 or drawn[i + 1][0] == "kill-empty-disk")
                for i, (fault, role, settle) in enumerate(drawn)]

    def run(self, steps: int) -> None:
        """Run ``steps`` faults of the plan, stopping at the first the cluster does not come back from."""
        for fault, role, settle in self.plan(steps):
            step = Step(fault, role)
            self.steps.append(step)
            if fault in NEEDS_SURVIVABLE and not self.ready(step):
                return
            try:
                FAULTS[fault](self, step)
            except Exception:  # noqa: BLE001 - a fault that could not be done: the harness's or a broker's
                self.failures.append("step %d (%s): %s" % (len(self.steps), fault, traceback.format_exc()))
                return
            if not self.judge(step, settle):
                return

    def report(self, extra: Sequence[str] = ()) -> str:
        lines = ["fault schedule seed %d (replay: PYLOGQ_FAULT_SEED=%d)" % (self.seed, self.seed), "steps:"]
        lines += ["  %d. %s" % (i + 1, s.describe()) for i, s in enumerate(self.steps)]
        w = self.workload
        lines.append("workload: %d records acknowledged, %d read by the group (%d polls failed), %d offset commits "
                     "acknowledged (%d failed), %d committed offsets read back"
                     % (w.acked_count(), len(w.seen), w.poll_errors, sum(len(c) for c in w.commit_acks.values()),
                        w.commit_errors, sum(len(c) for c in w.commits.values())))
        lines.append("failures:" if self.failures or extra else "failures: none")
        lines += ["  - %s" % f for f in list(self.failures) + list(extra)]
        lines.append("broker logs: %s" % ", ".join(str(p.log_path) for p in self.fc.cluster.brokers.values()))
        lines.append("ZooKeeper log: %s; librdkafka's producer log: %s" % (self.fc.zookeeper.log_path,
                                                                            self.fc.base / "producer.log"))
        if self.failures or extra:
            lines.append(self.fc.log_excerpts())
        return "\n".join(lines)


# -- the faults ---------------------------------------------------------------------------------------


def _out_for(run: Run) -> float:
    """How long a broker stays out: past its session, with a margin drawn from the schedule."""
    return SESSION_S + run.rng.uniform(0.5, 3.5)


def kill_kept_down(run: Run, step: Step) -> None:
    """kill -9, kept down past its session, started again."""
    b, what = run.pick(step.role)
    seconds = _out_for(run)
    step.detail = "kill -9 broker %d (%s; %s), down %.1f s" % (b, what, run.roles_of(b), seconds)
    step.out = b
    step.begin()
    run.fc.cluster.kill(b)
    run.hold_out(step, seconds)
    run.fc.cluster.start(b)
    run.recovered(step)


def kill_bounce(run: Run, step: Step) -> None:
    """kill -9 and started again at once (its old session still registered)."""
    b, what = run.pick(step.role)
    step.detail = "kill -9 broker %d (%s; %s), started again at once" % (b, what, run.roles_of(b))
    step.begin()
    run.fc.cluster.kill(b)
    run.fc.cluster.start(b)
    run.recovered(step)


def kill_empty_disk(run: Run, step: Step) -> None:
    """kill -9, its data directory emptied, started again with the same broker.id."""
    b, what = run.pick(step.role)
    down = run.rng.random() < 0.5
    seconds = _out_for(run) if down else 0.0
    step.detail = "kill -9 broker %d (%s; %s), data directory emptied, %s" % (
        b, what, run.roles_of(b), "down %.1f s" % seconds if down else "started again at once")
    step.begin()
    run.fc.cluster.kill(b)
    run.fc.cluster.wipe(b)
    if down:
        step.out = b
        run.hold_out(step, seconds)
    run.fc.cluster.start(b)
    run.recovered(step)


def freeze(run: Run, step: Step) -> None:
    """SIGSTOP past its session, then SIGCONT."""
    b, what = run.pick(step.role)
    seconds = _out_for(run)
    step.detail = "SIGSTOP broker %d (%s; %s) for %.1f s" % (b, what, run.roles_of(b), seconds)
    step.out = b
    step.begin()
    run.fc.cluster.freeze(b)
    try:
        run.hold_out(step, seconds)
    finally:
        run.fc.cluster.thaw(b)
    run.recovered(step)


def clean_restart(run: Run, step: Step) -> None:
    """SIGTERM (a controlled shutdown), started again at once or after its session."""
    b, what = run.pick(step.role)
    down = run.rng.random() < 0.5
    seconds = _out_for(run) if down else 0.0
    roles = run.roles_of(b)
    step.begin()
    status = run.fc.cluster.stop(b)
    took = time.monotonic() - step.start
    step.detail = "SIGTERM broker %d (%s; %s): exit %s after %.2f s, %s" % (
        b, what, roles, status, took, "down %.1f s" % seconds if down else "started again at once")
    if status != 0:
        run.failures.append("step %d: broker %d exited %s after SIGTERM" % (len(run.steps), b, status))
    if down:
        step.out = b
        run.hold_out(step, seconds)
    run.fc.cluster.start(b)
    run.recovered(step)


def zookeeper_bounce(run: Run, step: Step) -> None:
    """ZooKeeper stopped (or killed) and started again within the session timeout: sessions kept."""
    zk = run.fc.zookeeper
    how = run.rng.choice(["SIGTERM", "SIGKILL"])
    pause = run.rng.uniform(0.0, SESSION_S / 3)
    before = run.fc.registrations()
    step.begin()
    zk.stop() if how == "SIGTERM" else zk.kill()
    stopped = time.monotonic()
    hold(pause)
    starting = time.monotonic()
    zk.start()
    took = time.monotonic() - step.start
    step.detail = "ZooKeeper %s, serving again after %.2f s (%.2f s to stop, %.2f s down, %.2f s to start)" % (
        how, took, stopped - step.start, starting - stopped, time.monotonic() - starting)
    if took >= SESSION_S:
        step.notes.append("harness: ZooKeeper took longer than a session to come back")
    run.recovered(step)
    after = run.fc.registrations()
    # A broker registering anew meanwhile (one the last fault took out) changes nothing here.
    lost = {b: s for b, s in before.items() if after.get(b) != s}
    if lost:
        message = "registrations' sessions %s -> %s" % (_hex(before), _hex(after))
        if took < SESSION_S:  # ZooKeeper kept them: a broker gave its own up
            run.failures.append("step %d (%s): ZooKeeper came back within a session, yet brokers %s lost their "
                                "sessions: %s" % (len(run.steps), step.fault, sorted(lost), message))
        step.notes.append(message)


def zookeeper_down(run: Run, step: Step) -> None:
    """ZooKeeper down for longer than the session timeout."""
    zk = run.fc.zookeeper
    how = run.rng.choice(["SIGTERM", "SIGKILL"])
    seconds = _out_for(run)
    step.begin()
    zk.stop() if how == "SIGTERM" else zk.kill()
    hold(seconds)
    back = time.monotonic()
    zk.start()
    step.detail = "ZooKeeper %s, down %.1f s" % (how, time.monotonic() - step.start)
    # Leaders keep serving without ZooKeeper, and with every follower keeping up, acks=all
    # writes go on (docs/replication.md); a second's grace for the producer's own retries.
    stalled = run.workload.stalled_between(step.start + 1.0, back)
    if stalled:
        run.failures.append("step %d (%s): no write acknowledged on %s while ZooKeeper was down (%.1f s)"
                            % (len(run.steps), step.fault, ", ".join(stalled), back - step.start))
    run.recovered(step)


def partition_leader(run: Run, step: Step) -> None:
    """A broker cut off from the other brokers (both ways) and from ZooKeeper; from clients too, or not."""
    role = step.role if step.role != "follower" else "leader"
    b, what = run.pick(role)
    clients = run.rng.random() < 0.5
    seconds = SESSION_S + run.rng.uniform(1.0, 4.0)
    step.detail = "broker %d (%s; %s) cut off from the others and ZooKeeper%s for %.1f s" % (
        b, what, run.roles_of(b), " and clients" if clients else " (clients still reach it)", seconds)
    step.out = b
    step.begin()
    run.fc.isolate(b, clients)
    try:
        run.hold_out(step, seconds)
    finally:
        run.fc.rejoin(b)
    run.recovered(step)


def partition_follower(run: Run, step: Step) -> None:
    """A follower cut off from its leader (both ways); both still reach ZooKeeper and clients."""
    fc = run.fc
    p = run.rng.randrange(PARTITIONS)
    leader = fc.leader(TOPIC, p)
    if leader not in fc.live():  # recovering from the last fault: any live leader's
        p = run.rng.choice([q for q in range(PARTITIONS) if fc.leader(TOPIC, q) in fc.live()])
        leader = fc.leader(TOPIC, p)
    follower = run.rng.choice([b for b in fc.replicas(TOPIC, p) if b != leader])
    seconds = run.rng.uniform(1.0, 2.5 * LAG_MS / 1000.0)
    step.detail = "broker %d (a follower of %s-%d) cut off from its leader %d for %.1f s" % (
        follower, TOPIC, p, leader, seconds)
    step.begin()
    fc.sever(follower, leader)
    try:
        hold(seconds)
    finally:
        fc.mend(follower, leader)
    run.recovered(step)


def _hex(sessions: Dict[int, int]) -> str:
    return "{%s}" % ", ".join("%d: %x" % kv for kv in sorted(sessions.items()))


FAULTS: Dict[str, Callable[[Run, Step], None]] = {
    "kill-kept-down": kill_kept_down,
    "kill-bounce": kill_bounce,
    "kill-empty-disk": kill_empty_disk,
    "freeze": freeze,
    "clean-restart": clean_restart,
    "zookeeper-bounce": zookeeper_bounce,
    "zookeeper-down": zookeeper_down,
    "partition-leader": partition_leader,
    "partition-follower": partition_follower,
}
ROLES = ["leader", "controller", "follower", "coordinator"]
#: The faults a partition must have a second live in-sync replica for: they take a broker out
#: past its session, or ZooKeeper down (see Run.ready).
NEEDS_SURVIVABLE = frozenset({"kill-kept-down", "kill-empty-disk", "freeze", "clean-restart", "zookeeper-down",
                              "partition-leader"})


# -- after a schedule ------------------------------------------------------------------------------------


def verify(fc: FaultCluster, workload: Workload, extra_acked: Sequence[Tuple[int, int, bytes]] = ()) -> List[str]:
    """Stop the workload, read everything back, stop the cluster cleanly and check it; -> failures.

    ``extra_acked``: (partition, offset, value) acknowledged outside the workload (direct produces).
    """
    failures: List[str] = []
    workload.stop()
    failures += workload.failures
    failures += ["delivery error: %s" % e for e in workload.delivery_errors[:5]]
    failures += workload.backwards[:10]
    try:
        final = read_back(fc.bootstrap, TOPIC, PARTITIONS, "faults-check-%s" % uuid.uuid4().hex[:6])
    except Exception:  # noqa: BLE001 - reported with the rest
        failures.append("read back: %s" % traceback.format_exc())
        final = None
    if final is not None:
        acked = {p: [(o, v) for o, v, _ in workload.acked[p]] + [(o, v) for q, o, v in extra_acked if q == p]
                 for p in range(PARTITIONS)}
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
    if final is not None:
        failures += stored_twice(fc, final)
    for topic, n in ((TOPIC, PARTITIONS), (OFFSETS_TOPIC, OFFSETS_PARTITIONS)):
        try:
            replicas_identical(fc.cluster, topic, n, allow_empty=(topic == OFFSETS_TOPIC))
        except Exception as exc:  # noqa: BLE001 - AssertionError, or a log that does not open
            failures.append("replicas: %s" % exc)
    for b, proc in fc.cluster.brokers.items():
        text = proc.log_path.read_text("utf-8", "replace")
        if "Traceback" in text:
            at = text.index("Traceback")
            failures.append("broker %d logged a traceback:\n%s" % (b, "\n".join(
                text[max(0, text.rfind("\n", 0, at - 1)):].splitlines()[:25])))
    return failures


def stored_twice(fc: FaultCluster, final: Records, placement: Optional[Mapping[int, Sequence[int]]] = None
                 ) -> List[str]:
    """After the brokers stopped: the workload's values stored more than once that are the
    broker's failures (:func:`_processes.duplicate_failures`), read from a replica's files (of
    the brokers ``placement`` gives a partition, every broker by default); the producer's own
    duplicates are printed."""
    def copies_of(p: int) -> Dict[bytes, List[Copy]]:
        for b in (placement or {}).get(p, fc.ids):
            path = fc.cluster.data_dir(b) / ("%s-%d" % (TOPIC, p))
            if path.is_dir():
                return stored_copies(path)
        return {}

    failures, notes = duplicate_failures(TOPIC, final, copies_of, fc.base / "producer.log")
    for note in notes:
        print("note:", note)
    return failures


def base_seed() -> int:
    seed = os.environ.get("PYLOGQ_FAULT_SEED")
    return int(seed) if seed else random.SystemRandom().randrange(1 << 31)


def schedule_count() -> int:
    default = "1" if os.environ.get("PYLOGQ_FAULT_SEED") else "5"
    return int(os.environ.get("PYLOGQ_FAULT_SCHEDULES", default))
