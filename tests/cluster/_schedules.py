"""Randomized fault schedules against an in-process :class:`pylogq.Cluster`, and the checks after them.

A schedule is a seeded list of fault steps (:func:`make_schedule`, :data:`KINDS`): a
broker (the leader of a partition, the controller or a follower) killed and restarted at
once or after its session expired, restarted on an empty data directory, frozen past or
within its session timeout, cut from the store for a blip or past its session; the store
restarted (alone, or while a leader is dead); the link between a leader and a follower
cut; a clean restart; both followers of a partition down; the controller's connection
blipped, then a leader killed; the controller frozen while a leader is killed; a store
write of the controller or of a leader whose answer is lost (applied, yet failed with a
lost connection); a replica reassigned away from its partition and back (KIP-455, the
leader's too). :func:`run_schedule` starts a fresh three-broker cluster, runs a
:class:`Workload` (an idempotent acks=all producer per partition, a reader, and a group
committing the reader's positions), applies the steps one after the other, and checks:

- liveness: while a fault keeps brokers away past the session timeout, within two
  session timeouts the others have a controller and show a leader among them for every
  partition (the offsets topic's too); within two session timeouts of a step's end,
  every broker shows a live leader for every partition and a controller exists; while
  the store is down, writes go on; between steps every ISR becomes whole again and
  writes resume;
- safety at the end, once every replica caught up: every acknowledged record is in
  the log exactly once, at its acknowledged offset, and nothing else is; every record
  the reader read is still there; the replicas hold the same bytes below the high
  watermark; a committed offset never went backwards (each one read is at least the
  last commit acknowledged before the read, and at least every one read before it);
  nothing raised in a broker's thread; no broker thread outlived the cluster.

The steps are drawn from the seed; which broker a role names (the leader of a
partition, the controller) is decided when the step runs, from the cluster's state
then, with a number drawn from the seed too: a replay runs the same steps, not
necessarily on the same brokers.

Nothing sleeps to synchronize: waits poll a condition with a deadline. The sleeps
here are a fault's length (how long a broker stays down, frozen or cut off) and a
client's retry backoff.
"""

from __future__ import annotations

import collections
import logging
import random
import threading
import time
import traceback
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

from pylogq import errors, records
from pylogq.cluster.broker.broker import Broker
from pylogq.cluster.broker.local_cluster import Cluster

from .test_local_cluster import read_all

TOPIC = "faults"
PARTITIONS = 2
GROUP = "faults-readers"
OFFSETS_TOPIC = "__consumer_offsets"
SESSION_MS = 400
SESSION_S = SESSION_MS / 1000.0
LAG_MS = 1000
CONFIG = {
    "zookeeper.session.timeout.ms": SESSION_MS,
    "replica.lag.time.max.ms": LAG_MS,
    "replica.fetch.wait.max.ms": 50,
    "replica.fetch.backoff.ms": 50,
    "min.insync.replicas": 2,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 3,
    "offsets.commit.timeout.ms": 2000,
    "controlled.shutdown.retry.backoff.ms": 100,
    # Leaderships go back to their preferred replicas: a broker that returns, wiped or not,
    # is offered them again as soon as it is in sync.
    "leader.imbalance.check.interval.seconds": 1,
}
#: How long after a step's end the cluster has to show a leader for every partition.
LIVENESS_S = 2 * SESSION_S
#: Bounds of the waits for progress and recovery (a failure past them, not a hang).
PROGRESS_S = 20.0
RECOVERY_S = 40.0
#: The producer's pause between records (about a hundred a second per partition at most).
PRODUCE_PAUSE_S = 0.01
#: How long a produce may stay unacknowledged before the schedule reports it.
PRODUCE_STUCK_S = 60.0
N_BROKERS = 3

KINDS = ("kill-quick", "kill-down", "wipe", "freeze-past", "freeze-within", "blip", "store-cut", "store-restart",
         "link-cut", "clean-restart", "two-down", "blip-then-kill", "freeze-controller-kill-leader",
         "store-restart-while-down", "lost-answer-controller", "lost-answer-leader", "reassign-away-and-back")
ROLES = ("leader", "controller", "follower")


class Step(NamedTuple):
    """One fault: ``kind`` (:data:`KINDS`) on the broker playing ``role`` for ``partition`` (the
    ``pick``-th candidate when several play it), lasting ``hold`` seconds."""

    kind: str
    role: str
    partition: int
    pick: float
    hold: float

    def describe(self) -> str:
        if self.kind == "store-restart":
            role = ""
        elif self.kind == "two-down":
            role = " followers(p%d)" % self.partition
        elif self.kind in ("blip-then-kill", "freeze-controller-kill-leader", "lost-answer-controller"):
            role = " controller, leader(p%d)" % self.partition
        elif self.kind in ("store-restart-while-down", "lost-answer-leader"):
            role = " leader(p%d)" % self.partition
        else:
            role = " %s(p%d)" % (self.role, self.partition)
        return "%s%s for %.0f ms" % (self.kind, role, self.hold * 1000)


def make_schedule(seed: int, steps: int = 3) -> List[Step]:
    """The fault steps of schedule ``seed``."""
    rng = random.Random(seed)
    out = []
    for _ in range(steps):
        kind = rng.choice(KINDS)
        role = rng.choice(ROLES)
        if kind in ("freeze-within", "blip"):
            hold = rng.uniform(0.1, 0.5) * SESSION_S
        elif kind == "wipe" and rng.random() < 0.5:
            hold = 0.0  # restarted at once
        elif kind == "link-cut":
            hold = rng.uniform(0.3, 1.5) * LAG_MS / 1000.0
        elif kind == "lost-answer-leader":
            hold = rng.uniform(1.2, 2.0) * LAG_MS / 1000.0
        elif kind == "store-restart":
            hold = rng.uniform(0.1, 2.0) * SESSION_S
        elif kind in ("kill-quick", "clean-restart"):
            hold = 0.0
        else:
            hold = rng.uniform(1.3, 2.5) * SESSION_S
        out.append(Step(kind, role, rng.randrange(PARTITIONS), rng.random(), hold))
    return out


def describe(seed: int, schedule: List[Step]) -> str:
    return "seed %d: %s" % (seed, "; ".join(s.describe() for s in schedule))


class Workload:
    """Writes, reads and commits alongside the faults, recording what was acknowledged and read.

    One thread per partition produces numbered records (one per batch) with an
    idempotent producer id, acks=all, to whichever broker leads, retrying every
    retriable answer as a client does; once a batch was sent it is retried until
    acknowledged, so at the end the log holds exactly the acknowledged records. A reader
    follows each partition from its leader; a committer commits the reader's positions
    for a group, waiting for the commit to be replicated (as the server's OffsetCommit
    does), and reads them back. A frozen broker is treated as a client treats a process
    that does not answer: as unavailable.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.lock = threading.Lock()
        self.acked: Dict[int, List[Tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        self.read: Dict[int, List[Tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        self.position: Dict[int, int] = {p: 0 for p in range(PARTITIONS)}
        #: Acknowledged commits, in order: (offsets by partition).
        self.commits: List[Dict[int, int]] = []
        #: Committed offsets read back, in order: (the last acknowledged commit when the read
        #: started, what was read).
        self.observed: List[Tuple[Dict[int, int], Dict[int, int]]] = []
        self.failures: List[str] = []
        self.started = time.monotonic()
        self.stop = threading.Event()
        self.abandoned = False
        self._producers: Dict[int, Tuple[int, int]] = {}
        self._threads: List[threading.Thread] = []

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        for p in range(PARTITIONS):
            self._producers[p] = self.cluster.brokers[p % len(self.cluster.brokers)].init_producer_id()
        for p in range(PARTITIONS):
            self._threads.append(threading.Thread(target=self._guard, args=(self._produce, p),
                                                  name="fault-producer-%d" % p, daemon=True))
        self._threads.append(threading.Thread(target=self._guard, args=(self._read, None), name="fault-reader",
                                              daemon=True))
        self._threads.append(threading.Thread(target=self._guard, args=(self._commit, None), name="fault-committer",
                                              daemon=True))
        for t in self._threads:
            t.start()

    def abandon(self) -> None:
        """Stop at once (the cluster is going): nothing is retried any more."""
        self.abandoned = True
        self.stop.set()
        for t in self._threads:
            t.join(10.0)

    def finish(self, timeout: float = 2 * PRODUCE_STUCK_S) -> None:
        """Stop; the batches sent are retried until acknowledged first."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                self.fail("%s did not finish within %.0f s of the stop" % (t.name, timeout))

    def fail(self, what: str) -> None:
        self.failures.append("%.3f %s" % (time.monotonic() - self.started, what))

    def _guard(self, fn: Callable[[Optional[int]], None], arg: Optional[int]) -> None:
        try:
            fn(arg)
        except BaseException as exc:  # noqa: BLE001 - handed to the schedule's report
            logging.getLogger(__name__).exception("workload thread failed")
            self.fail("%s: %r" % (threading.current_thread().name, exc))

    def acked_count(self) -> Dict[int, int]:
        with self.lock:
            return {p: len(v) for p, v in self.acked.items()}

    def _available(self, broker_id: int) -> Optional[Broker]:
        """The broker a client reaches (None when it is stopped or frozen: no answer comes)."""
        if broker_id < 0 or self.cluster.frozen(broker_id):
            return None
        return self.cluster.running(broker_id)

    def _leader(self, topic: str, p: int) -> Optional[Broker]:
        """The partition's leader as a client finds it: from the metadata of the newest leader
        epoch any broker gives (a client ignores older epochs, KIP-320: a broker that was
        frozen or cut off answers with what it knew then)."""
        newest = None
        for b in self.cluster.thawed_brokers:
            state = b.cluster.metadata.partition(topic, p) if b.cluster is not None else None
            if state is not None and (newest is None or state.leader_epoch > newest.leader_epoch):
                newest = state
        return None if newest is None else self._available(newest.leader)

    # -- the producer -------------------------------------------------------------------

    def _produce(self, p: Optional[int]) -> None:
        assert p is not None
        seq = 0
        while not self.stop.is_set():
            value = b"p%d-%d" % (p, seq)
            offset = self._send(p, value, seq)
            if offset is None:
                return
            with self.lock:
                self.acked[p].append((offset, value))
            seq += 1
            time.sleep(PRODUCE_PAUSE_S)  # pacing: room for the brokers on two cores

    def _send(self, p: int, value: bytes, seq: int) -> Optional[int]:
        """Send one batch until it is acknowledged; -> its offset, None when stopped before it
        was first sent (or when the producer must give up: recorded as a failure)."""
        pid, epoch = self._producers[p]
        data = bytes(records.build_batch([value], producer_id=pid, producer_epoch=epoch, base_sequence=seq))
        started = time.monotonic()
        sent = False
        while (sent or not self.stop.is_set()) and not self.abandoned:
            if time.monotonic() - started > PRODUCE_STUCK_S:
                self.fail("partition %d: record %r not acknowledged within %.0f s" % (
                    p, value, PRODUCE_STUCK_S))
                return None
            broker = self._leader(TOPIC, p)
            if broker is None:
                time.sleep(0.01)  # a client's retry backoff
                continue
            sent = True  # from here the batch may be in a log: it is retried until acknowledged
            try:
                op = broker.produce_async(TOPIC, p, data, acks=-1, timeout_ms=1000)
            except errors.BrokerError as exc:
                if not exc.retriable:
                    self.fail("partition %d: record %r refused by broker %d: %r" % (
                        p, value, broker.broker_id, exc))
                    return None
                time.sleep(0.01)
                continue
            except errors.PylogqError:  # the broker is closing (stopped under the call)
                time.sleep(0.01)
                continue
            if not op.wait(30.0):
                self.fail("partition %d: broker %d never answered a produce of %r (30 s)" % (
                    p, broker.broker_id, value))
                continue
            result = op.answer()
            if result.error_code == 0:
                return int(result.base_offset)
            error = errors.error_for_code(result.error_code)
            if error is not None and not error.retriable:
                self.fail("partition %d: record %r answered %s by broker %d" % (
                    p, value, error.__name__, broker.broker_id))
                return None
            time.sleep(0.01)
        return None

    # -- the reader ---------------------------------------------------------------------

    def _read(self, _: Optional[int]) -> None:
        while not self.stop.is_set():
            for p in range(PARTITIONS):
                broker = self._leader(TOPIC, p)
                if broker is None:
                    continue
                try:
                    result = broker.fetch([(TOPIC, p, self.position[p], 1 << 20)], max_wait_ms=20)[(TOPIC, p)]
                except errors.PylogqError:
                    continue
                if result.error_code or result.records is None:
                    continue
                data = result.records.read()
                got = []
                for info in records.iter_batches(data):
                    for r in records.RecordBatch(data, info.position):
                        if r.offset >= self.position[p] + len(got):
                            got.append((r.offset, r.value))
                if got:
                    with self.lock:
                        self.read[p].extend(got)
                        self.position[p] = got[-1][0] + 1
            time.sleep(0.005)  # the reader's poll interval (fetches do not wait for every partition)

    # -- the committer ------------------------------------------------------------------

    def _coordinator(self) -> Optional[Broker]:
        """The group's coordinator: the leader of its offsets partition, found as :meth:`_leader`."""
        brokers = self.cluster.thawed_brokers
        if not brokers:
            return None
        return self._leader(OFFSETS_TOPIC, brokers[0].group_coordinator.partition_for(GROUP))

    def _commit(self, _: Optional[int]) -> None:
        last: Dict[int, int] = {}
        while not self.stop.is_set():
            with self.lock:
                offsets = dict(self.position)
            if offsets != last and any(offsets.values()):
                if self._commit_once(offsets):
                    last = offsets
            self._read_back()
            time.sleep(0.05)  # the consumer's auto-commit interval, scaled down

    def _commit_once(self, offsets: Dict[int, int]) -> bool:
        broker = self._coordinator()
        if broker is None:
            return False
        try:
            codes, complete = broker.group_coordinator.commit_offsets_pending(
                GROUP, -1, "", {(TOPIC, p): (o, "") for p, o in offsets.items()})
        except errors.PylogqError:
            return False
        if any(codes.values()):
            complete(next(c for c in codes.values() if c))
            return False
        try:
            op = broker.group_writes_replicated_async(GROUP, True, deliver=complete)
        except errors.PylogqError:
            complete(errors.NotCoordinatorError.code)
            return False
        if not op.wait(30.0):
            self.fail("broker %d never answered a commit's replication (30 s)" % broker.broker_id)
            return False
        if op.answer() != 0:
            return False
        with self.lock:
            self.commits.append(dict(offsets))
        return True

    def _read_back(self) -> None:
        with self.lock:
            acked = dict(self.commits[-1]) if self.commits else {}
        broker = self._coordinator()
        if broker is None:
            return
        try:
            found = broker.group_coordinator.fetch_offsets(GROUP, [(TOPIC, p) for p in range(PARTITIONS)])
        except errors.PylogqError:
            return
        seen = {tp[1]: o for tp, (o, _, code) in found.items() if code == 0 and o >= 0}
        if any(code for _, _, code in found.values()):
            return  # loading, moved: nothing read
        with self.lock:
            self.observed.append((acked, seen))


# -- the cluster's state ----------------------------------------------------------------------


def _partitions(cluster: Cluster) -> List[Tuple[str, int]]:
    tps = [(TOPIC, p) for p in range(PARTITIONS)]
    if any(b.cluster is not None and b.cluster.metadata.has_topic(OFFSETS_TOPIC) for b in cluster.thawed_brokers):
        tps.append((OFFSETS_TOPIC, 0))
    return tps


def leaders_visible(cluster: Cluster) -> Optional[str]:
    """None when a controller exists and every live broker's metadata names a live leader for
    every partition; else what is missing."""
    live = {b.broker_id for b in cluster.thawed_brokers}
    if cluster.controller() is None:
        return "no controller"
    for b in cluster.thawed_brokers:
        if b.cluster is None:
            return "broker %d has no cluster" % b.broker_id
        for topic, p in _partitions(cluster):
            state = b.cluster.metadata.partition(topic, p)
            if state is None:
                return "broker %d does not know %s-%d" % (b.broker_id, topic, p)
            if state.leader not in live:
                return "broker %d sees leader %d for %s-%d (live: %s)" % (b.broker_id, state.leader, topic, p,
                                                                         sorted(live))
    return None


def healthy(cluster: Cluster, in_step: bool = False) -> Optional[str]:
    """None when every broker runs and every partition's leader has every replica in its ISR
    (and, ``in_step``, every replica has the same log end and high watermark: once nothing is
    written); else what is not so."""
    if len(cluster.thawed_brokers) != N_BROKERS:
        return "not every broker runs"
    problem = leaders_visible(cluster)
    if problem is not None:
        return problem
    for topic, p in _partitions(cluster):
        leader = cluster.running(cluster.leader(topic, p))
        part = leader.hosted((topic, p)) if leader is not None else None
        if part is None or not part.is_leader:
            return "%s-%d: its leader is not leading yet" % (topic, p)
        if sorted(part.isr) != list(range(N_BROKERS)):
            return "%s-%d: ISR %s" % (topic, p, sorted(part.isr))
        ends = set()
        for b in cluster.brokers if in_step else ():
            replica = b.hosted((topic, p))
            if replica is None:
                return "%s-%d: no replica on broker %d" % (topic, p, b.broker_id)
            ends.add((replica.log_end_offset, replica.high_watermark))
        if len(ends) > 1:
            return "%s-%d: replicas at (log end, high watermark) %s" % (topic, p, sorted(ends))
    return None


def wait_for(condition: Callable[[], Optional[str]], timeout: float, interval: float = 0.01) -> Tuple[bool, str, float]:
    """Poll ``condition`` (None: holds) until it holds or ``timeout`` passes; -> (held, the last
    problem, seconds taken)."""
    started = time.monotonic()
    problem: Optional[str] = "not checked"
    while True:
        problem = condition()
        elapsed = time.monotonic() - started
        if problem is None:
            return True, "", elapsed
        if elapsed > timeout:
            return False, problem, elapsed
        time.sleep(interval)  # the state is spread over brokers and threads with nothing to wake a waiter


# -- the faults -------------------------------------------------------------------------------


def _pick(candidates: List[int], pick: float) -> Optional[int]:
    return sorted(candidates)[int(pick * len(candidates))] if candidates else None


def _resolve(cluster: Cluster, step: Step) -> Optional[int]:
    """The broker playing ``step.role`` now (None if none does)."""
    running = [b.broker_id for b in cluster.thawed_brokers]
    if step.role == "controller":
        c = cluster.controller()
        return c.broker_id if c is not None else _pick(running, step.pick)
    leader = cluster.leader(TOPIC, step.partition)
    if step.role == "leader":
        return leader if leader in running else _pick(running, step.pick)
    return _pick([b for b in running if b != leader], step.pick)


def leaders_elsewhere(cluster: Cluster, away: List[int]) -> Optional[str]:
    """None when, among the brokers not ``away``, a controller is active and every one's
    metadata names a leader for every partition that is one of them; else what is missing."""
    others = [b for b in cluster.thawed_brokers if b.broker_id not in away]
    live = {b.broker_id for b in others}
    if not any(b.cluster is not None and b.cluster.controller.active for b in others):
        return "no controller among brokers %s" % sorted(live)
    for b in others:
        assert b.cluster is not None
        for topic, p in _partitions(cluster):
            state = b.cluster.metadata.partition(topic, p)
            if state is None or state.leader not in live:
                return "broker %d sees leader %s for %s-%d (brokers away: %s)" % (
                    b.broker_id, None if state is None else state.leader, topic, p, sorted(away))
    return None


class _Away:
    """Brokers kept away past the session timeout: checks that the others elect leaders in time,
    then holds the fault for the rest of its length."""

    def __init__(self, cluster: Cluster, away: List[int], hold: float, problems: List[str]) -> None:
        self.cluster = cluster
        self.away = away
        self.hold = hold
        self.problems = problems
        self.started = time.monotonic()  # the fault's last event: the others' deadline counts from it

    def check_and_hold(self) -> str:
        ok, problem, took = wait_for(lambda: leaders_elsewhere(self.cluster, self.away), LIVENESS_S)
        if not ok:
            self.problems.append("brokers %s away: no leader elsewhere within %.0f ms: %s" % (
                self.away, LIVENESS_S * 1000, problem))
        left = self.started + self.hold - time.monotonic()
        if left > 0:
            time.sleep(left)  # away this long
        return "leaders elsewhere after %s" % ("%.0f ms" % (took * 1000) if ok else "never")


def writes_go_on(workload: Workload, count: int = 3) -> Callable[[], Optional[str]]:
    """A condition: every partition had ``count`` more records acknowledged than now."""
    before = workload.acked_count()

    def grown() -> Optional[str]:
        now = workload.acked_count()
        return None if all(now[p] >= before[p] + count for p in now) else "acknowledged %s, then %s" % (before, now)

    return grown


def apply_step(cluster: Cluster, workload: Workload, step: Step, problems: List[str]) -> str:
    """Run one fault to its end (the brokers back, thawed, reconnected, the link healed); ->
    what was done, to which brokers. What the checks during the fault found goes to ``problems``."""
    victim = _resolve(cluster, step)
    if step.kind == "store-restart":
        # While the store is down the leaders keep serving: writes go on (docs/replication.md).
        cluster.stop_store()
        started = time.monotonic()
        ok, problem, took = wait_for(writes_go_on(workload), max(step.hold, PROGRESS_S))
        if not ok:
            problems.append("writes stopped while the store was down: %s" % problem)
        left = started + step.hold - time.monotonic()
        if left > 0:
            time.sleep(left)  # down this long
        cluster.start_store()
        return "store down for %.0f ms; writes went on (%s)" % (
            (time.monotonic() - started) * 1000, "after %.0f ms" % (took * 1000) if ok else "no")
    if victim is None:
        return "no broker for %s" % step.describe()
    seen = ""
    if step.kind == "kill-quick":
        cluster.stop_broker(victim, abrupt=True)
        cluster.start_broker(victim)
    elif step.kind == "kill-down":
        cluster.stop_broker(victim, abrupt=True)
        seen = _Away(cluster, [victim], step.hold, problems).check_and_hold()
        cluster.start_broker(victim)
    elif step.kind == "wipe":
        cluster.stop_broker(victim, abrupt=True)
        if step.hold:
            seen = _Away(cluster, [victim], step.hold, problems).check_and_hold()
        cluster.start_broker(victim, wipe=True)
    elif step.kind == "freeze-past":
        cluster.freeze_broker(victim)
        seen = _Away(cluster, [victim], step.hold, problems).check_and_hold()
        cluster.thaw_broker(victim)
    elif step.kind == "freeze-within":
        cluster.freeze_broker(victim)
        time.sleep(step.hold)  # frozen this long
        cluster.thaw_broker(victim)
    elif step.kind == "blip":
        cluster.disconnect_store(victim)
        time.sleep(step.hold)  # cut off this long
        cluster.reconnect_store(victim)
    elif step.kind == "store-cut":
        cluster.disconnect_store(victim)
        seen = _Away(cluster, [victim], step.hold, problems).check_and_hold()
        cluster.reconnect_store(victim)
    elif step.kind == "link-cut":
        leader = cluster.leader(TOPIC, step.partition)
        other = victim if victim != leader else _pick([b for b in range(N_BROKERS) if b != leader], step.pick)
        if leader < 0 or other is None:
            return "no link for %s" % step.describe()
        cluster.cut(leader, other)
        time.sleep(step.hold)  # cut this long
        cluster.heal(leader, other)
        return "link %d-%d cut for %.0f ms" % (leader, other, step.hold * 1000)
    elif step.kind == "clean-restart":
        cluster.stop_broker(victim, abrupt=False)
        cluster.start_broker(victim)
    elif step.kind == "two-down":
        leader = cluster.leader(TOPIC, step.partition)
        followers = [b.broker_id for b in cluster.thawed_brokers if b.broker_id != leader]
        for b in followers:
            cluster.stop_broker(b, abrupt=True)
        seen = _Away(cluster, followers, step.hold, problems).check_and_hold()
        for b in followers:
            cluster.start_broker(b)
        return "brokers %s stopped for %.0f ms (the leader %d alone); %s" % (followers, step.hold * 1000, leader,
                                                                           seen)
    elif step.kind in ("freeze-controller-kill-leader", "lost-answer-controller", "store-restart-while-down",
                       "lost-answer-leader"):
        return _compound(cluster, step, problems)
    elif step.kind == "reassign-away-and-back":
        return _reassign_away_and_back(cluster, step.partition, victim, problems)
    elif step.kind == "blip-then-kill":
        controller = cluster.controller()
        leader = cluster.leader(TOPIC, step.partition)
        if controller is None or leader < 0:
            return "no controller or leader for %s" % step.describe()
        victim = leader if leader != controller.broker_id else _pick(
            [b for b in range(N_BROKERS) if b != leader], step.pick)
        assert victim is not None
        cluster.disconnect_store(controller.broker_id)
        session = cluster.store_session(controller.broker_id)
        assert session is not None
        cluster.wait_until(lambda: session.state == "suspended", 10, "the controller to hear of the blip")
        cluster.reconnect_store(controller.broker_id)
        cluster.stop_broker(victim, abrupt=True)
        seen = _Away(cluster, [victim], step.hold, problems).check_and_hold()
        cluster.start_broker(victim)
        return "controller %d blipped, then broker %d stopped for %.0f ms; %s" % (
            controller.broker_id, victim, step.hold * 1000, seen)
    else:
        raise ValueError("unknown fault %r" % step.kind)
    return "%s of broker %d%s" % (step.describe(), victim, "; " + seen if seen else "")


def _reassign(cluster: Cluster, partition: int, target: List[int]) -> Optional[str]:
    """Reassign the topic's ``partition`` to ``target`` through the controller (KIP-455) and wait
    until it is done: the topic's znode lists exactly ``target``, adding and removing none.
    -> None, or what kept it from being done."""
    def moved() -> Optional[str]:
        controller = cluster.controller()
        if controller is None or controller.cluster is None:
            return "no controller"
        found = controller.cluster.zk.get_topic_assignment(TOPIC)
        if found is None:
            return "no assignment of %s" % TOPIC
        assignment = found[0]
        now = list(assignment.partitions.get(partition, []))
        adding, removing = assignment.adding.get(partition), assignment.removing.get(partition)
        if now != target or adding or removing:
            return "%s-%d: replicas %s, adding %s, removing %s, not %s" % (TOPIC, partition, now, adding, removing,
                                                                         target)
        return None

    ok, problem, _ = wait_for(lambda: None if cluster.controller() is not None else "no controller", RECOVERY_S)
    controller = cluster.controller()
    if not ok or controller is None:
        return "no controller to reassign %s-%d: %s" % (TOPIC, partition, problem)
    outcome = controller.alter_partition_reassignments({(TOPIC, partition): list(target)})
    code, message = outcome[(TOPIC, partition)]
    if code:
        return "the reassignment of %s-%d to %s was refused: %d %s" % (TOPIC, partition, target, code, message)
    ok, problem, _ = wait_for(moved, RECOVERY_S)
    return None if ok else "the reassignment of %s-%d to %s did not complete within %.0f s: %s" % (
        TOPIC, partition, target, RECOVERY_S, problem)


def _reassign_away_and_back(cluster: Cluster, partition: int, victim: int, problems: List[str]) -> str:
    """A replica moved away and back by reassignment, under the workload: the partition goes
    from its three replicas to the two others (its leader moving when it is the one removed,
    its log deleted), then back to the three, the returning replica copying the log anew."""
    controller = cluster.controller()
    found = controller.cluster.zk.get_topic_assignment(TOPIC) if controller is not None and \
        controller.cluster is not None else None
    if found is None:
        return "no controller or assignment to reassign %s-%d" % (TOPIC, partition)
    replicas = list(found[0].partitions[partition])
    away = [r for r in replicas if r != victim]
    for target in (away, replicas):
        problem = _reassign(cluster, partition, target)
        if problem is not None:
            problems.append(problem)
            return "reassign %s-%d away from broker %d and back: %s" % (TOPIC, partition, victim, problem)
    return "%s-%d reassigned from %s to %s and back" % (TOPIC, partition, replicas, away)


def _compound(cluster: Cluster, step: Step, problems: List[str]) -> str:
    """The faults made of two at once."""
    controller = cluster.controller()
    leader = cluster.leader(TOPIC, step.partition)
    if controller is None or leader < 0:
        return "no controller or leader for %s" % step.describe()
    c = controller.broker_id
    # A leader other than the controller (another partition's, or a follower, when it leads them all).
    victim = leader if leader != c else _pick([b for b in range(N_BROKERS) if b != c], step.pick)
    assert victim is not None
    if step.kind == "freeze-controller-kill-leader":
        cluster.freeze_broker(c)
        cluster.stop_broker(victim, abrupt=True)
        seen = _Away(cluster, [c, victim], step.hold, problems).check_and_hold()
        cluster.thaw_broker(c)
        cluster.start_broker(victim)
        return "controller %d frozen and broker %d stopped for %.0f ms; %s" % (c, victim, step.hold * 1000, seen)
    if step.kind == "store-restart-while-down":
        cluster.stop_broker(leader, abrupt=True)
        cluster.restart_store(0.5 * SESSION_S)
        seen = _Away(cluster, [leader], step.hold, problems).check_and_hold()
        cluster.start_broker(leader)
        return "leader %d stopped, the store restarted, %.0f ms down; %s" % (leader, step.hold * 1000, seen)
    if step.kind == "lost-answer-controller":
        cluster.disconnect_store(c, for_s=0.2 * SESSION_S, after_next_write=True)
        cluster.stop_broker(victim, abrupt=True)
        seen = _Away(cluster, [victim], step.hold, problems).check_and_hold()
        session = cluster.store_session(c)
        lost = session is not None and not session.losing_next_answer
        cluster.reconnect_store(c)
        cluster.start_broker(victim)
        return "controller %d to lose an answer (%s), broker %d stopped for %.0f ms; %s" % (
            c, "lost" if lost else "no write came", victim, step.hold * 1000, seen)
    assert step.kind == "lost-answer-leader"
    follower = _pick([b for b in range(N_BROKERS) if b != leader], step.pick)
    assert follower is not None
    cluster.disconnect_store(leader, for_s=0.2 * SESSION_S, after_next_write=True)
    cluster.cut(leader, follower)
    time.sleep(step.hold)  # cut this long: longer than replica.lag.time.max.ms, the ISR shrinks
    session = cluster.store_session(leader)
    lost = session is not None and not session.losing_next_answer
    cluster.heal(leader, follower)
    cluster.reconnect_store(leader)
    return "leader %d to lose an answer (%s), its link to %d cut for %.0f ms" % (
        leader, "lost" if lost else "no write came", follower, step.hold * 1000)


# -- a schedule -------------------------------------------------------------------------------


class _Log(logging.Handler):
    """What pylogq logs during a schedule: the exceptions (an unexpected error in a broker's
    thread), and the last lines at INFO and above (the story a failure is told with)."""

    def __init__(self, keep: int = 300) -> None:
        super().__init__(logging.INFO)
        self.errors: List[str] = []
        self.lines: "collections.deque[str]" = collections.deque(maxlen=keep)
        self.started = time.monotonic()

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith("pylogq") or record.name.startswith("pylogq.storage"):
            return
        message = record.getMessage()
        if record.exc_info and record.levelno >= logging.ERROR:
            self.errors.append("%s: %s: %r" % (record.threadName, message, record.exc_info[1]))
        self.lines.append("%7.3f %s %s" % (time.monotonic() - self.started, record.threadName, message))

    def attach(self) -> None:
        logger = logging.getLogger("pylogq")
        self._level = logger.level
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        logger.addHandler(self)

    def detach(self) -> None:
        logger = logging.getLogger("pylogq")
        logger.removeHandler(self)
        logger.setLevel(self._level)


def state_of(cluster: Cluster) -> List[str]:
    """Each replica's role, epoch, ends and producers, for a failure's report."""
    out = []
    for b in cluster.brokers:
        for topic, p in _partitions(cluster):
            part = b.hosted((topic, p))
            if part is None:
                out.append("broker %d %s-%d: not hosted" % (b.broker_id, topic, p))
                continue
            try:
                producers = [(d.producer_id, d.last_sequence) for d in part.active_producers()]
            except Exception as exc:  # noqa: BLE001 - a report, not a check
                producers = [repr(exc)]  # type: ignore[list-item]
            out.append("broker %d %s-%d: %s epoch %d, ISR %s, log [%d, %d), high watermark %d, producers %s" % (
                b.broker_id, topic, p, "leader" if part.is_leader else "follower of %d" % part.leader_id,
                part.leader_epoch, sorted(part.isr), part.log_start_offset, part.log_end_offset,
                part.high_watermark, producers))
    return out


def run_schedule(seed: int, data_dir: Path, steps: int = 3) -> None:
    """Run schedule ``seed`` on a fresh cluster under ``data_dir``; raise AssertionError naming
    the seed, the steps and every check that failed (an error of the harness included)."""
    schedule = make_schedule(seed, steps)
    report: List[str] = []
    failures: List[str] = []
    state: List[str] = []
    logged = _Log()
    logged.attach()
    threads_before = {t.ident for t in threading.enumerate()}
    cluster: Optional[Cluster] = None
    workload: Optional[Workload] = None
    try:
        cluster = Cluster(N_BROKERS, str(data_dir), **CONFIG)
        workload = Workload(cluster)
        workload.started = logged.started
        _run(cluster, workload, schedule, report, failures, logged)
        if failures:
            state = state_of(cluster)
    except Exception:  # noqa: BLE001 - reported with the seed, below
        failures.append("the schedule raised:\n%s" % traceback.format_exc())
    finally:
        if workload is not None:
            workload.abandon()
        if cluster is not None:
            cluster.close()
        logged.detach()
    ok, problem, _ = wait_for(lambda: _leaked_threads(threads_before), 30.0, 0.05)
    if not ok:
        failures.append("threads left after the cluster closed: %s" % problem)
    failures.extend("logged: %s" % r for r in logged.errors)
    print("fault schedule %s\n  %s" % (describe(seed, schedule), "\n  ".join(report)))  # shown with -s
    if failures:
        raise AssertionError("fault schedule %s\n  %s\nfailed:\n  %s\nthe replicas then:\n  %s\n"
                             "the log's last lines:\n  %s" % (
                                 describe(seed, schedule), "\n  ".join(report), "\n  ".join(failures),
                                 "\n  ".join(state), "\n  ".join(logged.lines)))


def _run(cluster: Cluster, workload: Workload, schedule: List[Step], report: List[str], failures: List[str],
         logged: _Log) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, N_BROKERS)
    cluster.wait_until(lambda: cluster.brokers[0].ensure_offsets_topic() == 0, 30, "the offsets topic")
    cluster.wait_until(lambda: healthy(cluster) is None, 30, "a healthy cluster")
    workload.start()
    for i, step in enumerate(schedule):
        ok, problem, took = wait_for(lambda: healthy(cluster), RECOVERY_S)
        if i:
            report.append("every ISR whole after %.0f ms" % (took * 1000))
        if not ok:
            failures.append("step %d: the cluster did not recover from the step before within %.0f s: %s" % (
                i + 1, RECOVERY_S, problem))
        ok, problem, _ = wait_for(writes_go_on(workload), PROGRESS_S)
        if not ok:
            failures.append("step %d: writes did not go on before it: %s" % (i + 1, problem))
        report.append("%.3f step %d begins" % (time.monotonic() - logged.started, i + 1))
        during: List[str] = []
        done = apply_step(cluster, workload, step, during)
        failures.extend("step %d: %s" % (i + 1, problem) for problem in during)
        ok, problem, took = wait_for(lambda: leaders_visible(cluster), max(LIVENESS_S, RECOVERY_S))
        report.append("step %d: %s; leaders visible after %.0f ms" % (i + 1, done, took * 1000))
        if not ok:
            failures.append("step %d (%s): no leader everywhere within %.0f s: %s" % (i + 1, done, RECOVERY_S,
                                                                                   problem))
        elif took > LIVENESS_S:
            failures.append("step %d (%s): leaders visible only after %.0f ms (> 2 session timeouts, %.0f ms)"
                            % (i + 1, done, took * 1000, LIVENESS_S * 1000))
    ok, problem, _ = wait_for(writes_go_on(workload), PROGRESS_S)
    if not ok:
        failures.append("writes did not go on after the last step: %s" % problem)
    ok, problem, took = wait_for(lambda: healthy(cluster), RECOVERY_S)
    report.append("every ISR whole after %.0f ms" % (took * 1000))
    if not ok:
        failures.append("the cluster did not recover within %.0f s: %s" % (RECOVERY_S, problem))
    workload.finish()
    failures.extend(workload.failures)
    ok, problem, _ = wait_for(lambda: healthy(cluster, in_step=True), RECOVERY_S)
    if not ok:
        failures.append("the replicas did not catch up after the workload: %s" % problem)
    else:
        failures.extend(check_logs(cluster, workload))


def _leaked_threads(before: set) -> Optional[str]:  # type: ignore[type-arg]
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()
            and (t.name.startswith("pylogq") or t.name.startswith("fault-"))]
    return ", ".join(sorted(left)) if left else None


# -- the checks -------------------------------------------------------------------------------


def replica_bytes(broker: Broker, topic: str, partition: int, upto: int) -> bytes:
    part = broker.hosted((topic, partition))
    assert part is not None
    return part.log.read(part.log_start_offset, 1 << 30, max_offset=upto).read()


def check_logs(cluster: Cluster, workload: Workload) -> List[str]:
    """The safety checks, on a cluster whose replicas are all in step."""
    failures: List[str] = []
    for p in range(PARTITIONS):
        leader = cluster.broker(cluster.leader(TOPIC, p))
        hw = leader.hosted((TOPIC, p)).high_watermark
        log_records = read_all(leader, TOPIC, p, hw)
        by_offset = dict(log_records)
        values = [v for _, v in log_records]
        dupes = sorted({v for v in values if values.count(v) > 1}) if len(set(values)) != len(values) else []
        if dupes:
            failures.append("partition %d: records stored twice: %s" % (p, dupes[:5]))
        acked = workload.acked[p]
        wrong = [(o, v, by_offset.get(o)) for o, v in acked if by_offset.get(o) != v]
        if wrong:
            failures.append("partition %d: %d acknowledged records not at their offsets, first %s" % (
                p, len(wrong), wrong[:3]))
        unacked = sorted(set(values) - {v for _, v in acked})
        if unacked:
            failures.append("partition %d: records in the log never acknowledged: %s" % (p, unacked[:5]))
        lost = [(o, v, by_offset.get(o)) for o, v in workload.read[p] if by_offset.get(o) != v]
        if lost:
            failures.append("partition %d: %d records read were later lost or changed, first %s" % (
                p, len(lost), lost[:3]))
        if not acked:
            failures.append("partition %d: nothing was acknowledged" % p)
    for topic, p in _partitions(cluster):
        hw = min(b.hosted((topic, p)).high_watermark for b in cluster.brokers)
        copies = {b.broker_id: replica_bytes(b, topic, p, hw) for b in cluster.brokers}
        first = copies[0]
        differ = [b for b, data in copies.items() if data != first]
        if differ:
            failures.append("%s-%d: replicas on brokers %s differ from broker 0's below the high watermark %d" % (
                topic, p, differ, hw))
    highest: Dict[int, int] = {}
    for acked, seen in workload.observed:
        back = {p: (seen.get(p, -1), o) for p, o in acked.items() if seen.get(p, -1) < o}
        if back:
            failures.append("a committed offset went backwards: read %s after the commit of %s was acknowledged"
                            % (seen, acked))
            break
        if any(seen.get(p, -1) < o for p, o in highest.items()):
            failures.append("a committed offset went backwards: read %s after %s was read" % (seen, highest))
            break
        for p, o in seen.items():
            highest[p] = max(o, highest.get(p, -1))
    if not workload.commits:
        failures.append("no commit was acknowledged")
    return failures
