"""The mirror's acceptance harness: two clusters, mirror processes, a load and a verifier.

- :func:`two_clusters`: the source, three ``pylogq-broker`` processes, and the target, one,
  each a :class:`~tests.cluster._processes.ProcessCluster` on a chroot of its own of the
  session's real ZooKeeper (ports fixed across restarts, kill -9 and start again, and a
  check at the end that every run ended as the test ended it).
- :class:`MirrorProcess`: ``pylogq mirror-maker CONFIG`` (or any command, such as the copy
  loop of tests/mirror/_copy_loop.py) as a child process writing to a log file: started,
  killed with SIGKILL, started again, stopped with SIGTERM (status 0 expected).
  :func:`mirror_properties` writes MirrorMaker 2's properties file for a flow between them.
- :class:`LoadGenerator`: numbered records at a fixed rate to every partition of a topic, from
  a thread, with pylogq's Producer. Partition ``p``'s ``n``-th record has the value
  ``b"p:n:"`` padded to a fixed size and a key of its own partition's (:func:`key_for`), so a
  record read anywhere says where it belongs, and which records were acknowledged is kept.
- :class:`TopicTail`: reads a topic from its start with pylogq's Consumer, as many times as
  asked, keeping per partition the sequence numbers and timestamps in offset order, and
  :func:`compare` checks a copy against its source: every source record there, first copies
  in the source's order, nothing that is not in the source, the same timestamps, duplicates
  counted (with the replays they came in).
- :class:`GroupReader`: a consumer group reading a topic and committing as it goes, for
  consumer failover.

Nothing here waits by sleeping: every wait is on a condition with a deadline, and a
failing wait says what it waited for and shows the processes' logs.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from array import array
from collections import deque
from pathlib import Path
from typing import IO, Any, Callable, Deque, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from pylogq.client.admin import AdminClient, NewTopic
from pylogq.client.consumer import Consumer, OffsetAndMetadata, TopicPartition
from pylogq.client.producer import FutureRecordMetadata, Producer
from pylogq.cluster.partitioner import partition_for_key
from pylogq.errors import PylogqError

from .._zookeeper import ZooKeeperServer, dies_with_test
from ..cluster._processes import ProcessCluster
from ._support import wait_for

__all__ = ["TwoClusters", "two_clusters", "MirrorProcess", "mirror_properties", "mirror_command",
           "copy_loop_command", "LoadGenerator", "Records", "TopicTail", "Comparison", "compare", "wait_mirrored",
           "GroupReader", "create_topic", "wait_for", "key_for", "value_for"]

HERE = Path(__file__).resolve().parent
#: Seconds a broker's ZooKeeper session outlives its process: how soon a killed one is noticed.
SESSION_MS = 2000


# -- the clusters ---------------------------------------------------------------------------------


class TwoClusters:
    """The source cluster (three brokers) and the target (one), their admin clients, and their logs."""

    def __init__(self, source: ProcessCluster, target: ProcessCluster) -> None:
        self.source = source
        self.target = target
        self._admins: Dict[str, AdminClient] = {}

    def admin(self, side: str) -> AdminClient:
        """pylogq's AdminClient on ``side`` ("source" or "target"), made once."""
        if side not in self._admins:
            self._admins[side] = AdminClient(bootstrap_servers=self.cluster(side).bootstrap)
        return self._admins[side]

    def cluster(self, side: str) -> ProcessCluster:
        return {"source": self.source, "target": self.target}[side]

    def logs(self) -> str:
        return "--- source ---\n%s\n--- target ---\n%s" % (self.source.logs(), self.target.logs())

    def close_admins(self) -> None:
        for admin in self._admins.values():
            admin.close()
        self._admins.clear()


@contextlib.contextmanager
def two_clusters(zookeeper: ZooKeeperServer, base: Path, source_brokers: int = 3) -> Iterator[TwoClusters]:
    """The source and target clusters, started, each on a fresh chroot of ``zookeeper``; both
    closed after the block (raising, as ProcessCluster.close does, if a broker run ended
    uncleanly), and the chroots deleted."""
    if not zookeeper.running:
        zookeeper.start()
    tag = uuid.uuid4().hex[:8]
    source_connect = zookeeper.fresh_chroot("pylogq-mirror-source-%s" % tag)
    target_connect = zookeeper.fresh_chroot("pylogq-mirror-target-%s" % tag)
    (base / "source").mkdir(parents=True, exist_ok=True)
    (base / "target").mkdir(parents=True, exist_ok=True)
    # The source: replicated, so that a broker killed loses nothing acknowledged with acks=all;
    # topics created with the broker's default factor (the mirror's internal topics there) get 3.
    source = ProcessCluster(base / "source", source_connect, source_brokers,
                            {"zookeeper.session.timeout.ms": SESSION_MS, "min.insync.replicas": 2,
                             "default.replication.factor": min(3, source_brokers)})
    target = ProcessCluster(base / "target", target_connect, 1, {"zookeeper.session.timeout.ms": SESSION_MS})
    clusters = TwoClusters(source, target)
    try:
        source.start_all()
        target.start_all()
        yield clusters
    finally:
        clusters.close_admins()
        try:
            try:
                source.close()
            finally:
                target.close()
        finally:
            zookeeper.delete_chroot(source_connect)
            zookeeper.delete_chroot(target_connect)


def create_topic(clusters: TwoClusters, side: str, name: str, partitions: int,
                 configs: Optional[Mapping[str, str]] = None) -> None:
    """Create a topic (replicated three times on the source) and wait for every replica of
    every partition to be in sync."""
    cluster = clusters.cluster(side)
    factor = min(3, len(cluster.brokers))
    clusters.admin(side).create_topics([NewTopic(name, partitions, factor, topic_configs=dict(configs or {}))])
    cluster.wait_until(lambda: cluster.full_isr(name, partitions), "%s's replicas in sync" % name)


def partition_count(admin: AdminClient, topic: str) -> int:
    """The topic's partitions as the cluster's metadata has them (0: no such topic)."""
    try:
        described = admin.describe_topics([topic])
    except PylogqError:
        return 0
    return len(described[0]["partitions"]) if described and not described[0]["error_code"] else 0


# -- mirror processes -----------------------------------------------------------------------------

#: ``python -m pylogq.cli.main``, with SIGUSR2 made to write every thread's stack to stderr (the
#: process's log), as the broker processes of tests/cluster/_processes.py: a mirror that hangs can
#: say where.
_BOOT = ("import faulthandler, runpy, signal, sys\n"
         "faulthandler.register(signal.SIGUSR2, all_threads=True)\n"
         "sys.argv[0] = 'pylogq'\n"
         "runpy.run_module('pylogq.cli.main', run_name='__main__', alter_sys=True)\n")


def mirror_command(config: Path, *arguments: str) -> List[str]:
    """``pylogq mirror-maker CONFIG ...`` as the child's command line, logging at the level
    ``PYLOGQ_TEST_MIRROR_LOG_LEVEL`` names (INFO by default), as the broker processes take
    ``PYLOGQ_TEST_BROKER_LOG_LEVEL``."""
    level = os.environ.get("PYLOGQ_TEST_MIRROR_LOG_LEVEL", "INFO").upper()
    return [sys.executable, "-c", _BOOT, "mirror-maker", str(config), "--log-level", level, *arguments]


def copy_loop_command(source: str, target: str, topic: str, remote: str, group: str,
                      settings: Optional[Mapping[str, Any]] = None) -> List[str]:
    """tests/mirror/_copy_loop.py's command line (``settings``: ``consumer.KEY`` / ``producer.KEY``)."""
    return [sys.executable, str(HERE / "_copy_loop.py"), source, target, topic, remote, group,
            *("%s=%s" % item for item in sorted((settings or {}).items()))]


class MirrorProcess:
    """One mirror process (``command``), its output appended to ``log``.

    Every run must end the way the test ended it: -9 after :meth:`kill`, 0 after :meth:`stop`
    (SIGTERM). A run that ended otherwise (exited on its own, a non-zero status after SIGTERM,
    one that had to be killed because it did not stop) is recorded in :attr:`unclean`, which
    the test checks. Not thread-safe: the test's thread drives it.
    """

    def __init__(self, name: str, command: Sequence[str], log: Path) -> None:
        self.name = name
        self.command = list(command)
        self.log_path = log
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        self.unclean: List[str] = []
        self.runs = 0
        self._ended = True
        self._log: Optional[IO[bytes]] = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _check_exit(self) -> None:
        """Record the current run if it exited without being asked to."""
        if self.proc is not None and not self._ended and self.proc.poll() is not None:
            self._ended = True
            self.unclean.append("%s (run %d) exited on its own with status %s"
                                % (self.name, self.runs, self.proc.returncode))

    def start(self) -> "MirrorProcess":
        self._check_exit()
        assert not self.running, "%s is running" % self.name
        self.runs += 1
        self._ended = False
        if self._log is not None:
            self._log.close()
        self._log = open(self.log_path, "ab")
        self._log.write(("=== %s run %d: %s\n" % (self.name, self.runs, " ".join(self.command))).encode())
        self._log.flush()
        self.proc = subprocess.Popen(dies_with_test(self.command), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        return self

    def wait_output(self, pattern: str, timeout: float = 60.0) -> "re.Match[str]":
        """Wait until the current run's output has a line matching ``pattern``; -> the match."""
        expression = re.compile(pattern, re.MULTILINE)
        marker = "=== %s run %d:" % (self.name, self.runs)

        def found() -> Optional["re.Match[str]"]:
            text = self.log_path.read_text("utf-8", "replace")
            match = expression.search(text, text.rfind(marker))
            if match is None and not self.running:
                raise AssertionError("%s exited (status %s) before printing %r:\n%s"
                                     % (self.name, self.proc and self.proc.returncode, pattern, self.log_tail()))
            return match

        match: "re.Match[str]" = wait_for(found, "%s printing %r" % (self.name, pattern), timeout, self.log_tail)
        return match

    def kill(self) -> None:
        """SIGKILL, on purpose: its -9 is the expected end of this run."""
        self._check_exit()
        if self.proc is not None and self.running:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.send_signal(signal.SIGCONT)  # a frozen one dies too
            self.proc.wait(30)
            self._ended = True

    def freeze(self) -> None:
        """SIGSTOP: the process keeps its sockets and does nothing until :meth:`thaw`."""
        assert self.proc is not None and self.running, "%s is not running" % self.name
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        if self.proc is not None and self.running:
            self.proc.send_signal(signal.SIGCONT)

    def dump_threads(self, timeout: float = 5.0) -> None:
        """Have it write every thread's stack to its log (SIGUSR2, see ``_BOOT``), and wait (up
        to ``timeout`` seconds) until the log has it."""
        if self.proc is None or not self.running:
            return
        marker = "most recent call first"
        before = self.log_path.read_text("utf-8", "replace").count(marker)
        self.proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + timeout
        while self.log_path.read_text("utf-8", "replace").count(marker) <= before and time.monotonic() < deadline:
            time.sleep(0.05)  # the process writes the stacks from its signal handler

    def stop(self, timeout: float = 30.0) -> Optional[int]:
        """SIGTERM and wait; -> the exit status (None if it never ran). A status other than 0
        is recorded in :attr:`unclean`; one that does not stop is dumped, killed and recorded."""
        if self.proc is None:
            return None
        self._check_exit()
        if self._ended:
            return self.proc.returncode
        self.thaw()
        self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.dump_threads()
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
            self.proc.kill()
            self.proc.wait()
            self._ended = True
            self.unclean.append("%s (run %d) did not stop within %.0f s of SIGTERM and was killed; its last lines:\n%s"
                                % (self.name, self.runs, timeout, self.log_tail(40)))
            return self.proc.returncode
        self._ended = True
        if status != 0:
            self.unclean.append("%s (run %d) exited with status %s after SIGTERM; its last lines:\n%s"
                                % (self.name, self.runs, status, self.log_tail(40)))
        return status

    def close(self) -> None:
        self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text("utf-8", "replace")
        except OSError:
            return "(no log)"
        return "--- %s ---\n%s" % (self.name, "\n".join(text.splitlines()[-lines:]))


def mirror_properties(source_alias: str, source_bootstrap: str, target_alias: str, target_bootstrap: str,
                      exactly_once: bool = False, **settings: Any) -> str:
    """MirrorMaker 2's properties for the one flow ``source->target``; ``settings`` are more
    keys, with ``_`` for ``.`` and ``__`` for ``-`` in their names (``offset_lag_max=10``,
    ``offset__syncs_topic_location="target"``), or give a dict under ``extra`` for any key."""
    extra = dict(settings.pop("extra", {}))
    lines = [
        "# written by tests/mirror/_clusters.py",
        "clusters = %s, %s" % (source_alias, target_alias),
        "%s.bootstrap.servers = %s" % (source_alias, source_bootstrap),
        "%s.bootstrap.servers = %s" % (target_alias, target_bootstrap),
        "%s->%s.enabled = true" % (source_alias, target_alias),
    ]
    if exactly_once:
        lines.append("%s.exactly.once.source.support = enabled" % target_alias)
    for key, value in settings.items():
        lines.append("%s = %s" % (key.replace("__", "-").replace("_", "."), _property(value)))
    for key, value in extra.items():
        lines.append("%s = %s" % (key, _property(value)))
    return "\n".join(lines) + "\n"


def _property(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# -- the load ---------------------------------------------------------------------------------------


def keys_by_partition(partitions: int, per_partition: int) -> List[List[bytes]]:
    """``per_partition`` keys for each partition that Kafka's default partitioner sends there."""
    keys: List[List[bytes]] = [[] for _ in range(partitions)]
    for i in itertools.count():
        key = b"key-%d" % i
        own = keys[partition_for_key(key, partitions)]
        if len(own) < per_partition:
            own.append(key)
        if all(len(k) == per_partition for k in keys):
            return keys
    raise AssertionError("unreachable")


KEYS_PER_PARTITION = 8
_KEYS: Dict[int, List[List[bytes]]] = {}


def key_for(partitions: int, partition: int, seq: int) -> bytes:
    """The key of partition ``partition``'s record number ``seq`` (one of the partition's keys)."""
    keys = _KEYS.get(partitions)
    if keys is None:
        keys = _KEYS[partitions] = keys_by_partition(partitions, KEYS_PER_PARTITION)
    return keys[partition][seq % KEYS_PER_PARTITION]


def value_for(partition: int, seq: int, size: int) -> bytes:
    """The value of partition ``partition``'s record number ``seq``: ``b"p:seq:"``, padded with
    dots to ``size`` bytes."""
    head = b"%d:%d:" % (partition, seq)
    return head + b"." * (size - len(head)) if size > len(head) else head


def parse_value(value: bytes) -> Tuple[int, int]:
    """(partition, seq) of a value made by :func:`value_for`; ValueError for anything else."""
    partition, seq, _ = bytes(value).split(b":", 2)
    return int(partition), int(seq)


PENDING, ACKED, FAILED = 0, 1, 2


class LoadGenerator:
    """Numbered records to every partition of ``topic`` at ``rate`` records a second, from a thread.

    Record ``i`` goes to partition ``i % partitions`` with the next sequence number of that
    partition; its key (:func:`key_for`) is one Kafka's default partitioner sends to that
    partition, so the producer's keyed fast path picks it (and where it did not, the check at
    acknowledgement says so). The pace is kept against the clock from the start: a producer
    that fell behind (a broker killed) catches up. :attr:`status` keeps, per partition and
    sequence number, whether the record was acknowledged (ACKED), failed (FAILED: a send that
    raised, or a delivery that failed) or is still PENDING. The producer is pylogq's, with
    its defaults (idempotent, acks=all) unless ``producer_settings`` say otherwise.

    The thread owns the producer; :meth:`stop` joins it. Counters are read by the test's thread
    once the generator stopped, or as figures in flight (a GIL-atomic read of an int).
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float, value_size: int = 64,
                 **producer_settings: Any) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.value_size = value_size
        self.producer_settings = producer_settings
        self.sent = [0] * partitions
        self.status = [bytearray() for _ in range(partitions)]
        self.errors: List[str] = []
        self.error_count = 0
        self.failure: Optional[BaseException] = None
        self.started = 0.0
        self.ended = 0.0
        self._stop = threading.Event()
        self._pending: List[Deque[Tuple[int, FutureRecordMetadata]]] = []
        self._thread = threading.Thread(target=self._guarded, name="load-%s" % topic, daemon=True)
        self._limits: Optional[List[int]] = None

    @property
    def total_sent(self) -> int:
        return sum(self.sent)

    def start(self) -> "LoadGenerator":
        self._thread.start()
        return self

    def stop(self, timeout: float = 120.0) -> None:
        """Stop sending, wait for every record's outcome, close the producer; raise what the
        thread raised."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the load generator of %s did not stop within %.0f s" % (
            self.topic, timeout)
        if self.failure is not None:
            raise AssertionError("the load generator of %s failed: %r" % (self.topic, self.failure)) from self.failure

    def stop_at(self, counts: Sequence[int]) -> None:
        """Send no record of partition ``p`` numbered ``counts[p]`` or more (the generator goes
        on pacing its other partitions)."""
        self._limits = list(counts)

    def acked(self, partition: int) -> List[int]:
        """The sequence numbers acknowledged on ``partition``."""
        return [seq for seq, s in enumerate(self.status[partition]) if s == ACKED]

    def count(self, state: int) -> int:
        return sum(s.count(state) for s in self.status)

    def achieved_rate(self) -> float:
        end = self.ended or time.monotonic()
        return self.total_sent / (end - self.started) if end > self.started else 0.0

    def _error(self, what: str) -> None:
        self.error_count += 1
        if len(self.errors) < 10:
            self.errors.append(what)

    def _guarded(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread by stop()
            self.failure = exc

    def _run(self) -> None:
        partitions, topic, size = self.partitions, self.topic, self.value_size
        self._pending = [deque() for _ in range(partitions)]
        producer = Producer(bootstrap_servers=self.bootstrap, **self.producer_settings)
        try:
            self.started = time.monotonic()
            total = 0
            while not self._stop.is_set():
                due = int((time.monotonic() - self.started) * self.rate) - total
                for _ in range(max(0, due)):
                    p = total % partitions
                    total += 1
                    limits = self._limits
                    if limits is not None and self.sent[p] >= limits[p]:
                        continue
                    self._send(producer, topic, p, size)
                self._settle(False)
                # The pace: the next few records' worth of time, or a stop.
                self._stop.wait(min(0.01, max(0.001, 1.0 / self.rate)))
            self.ended = time.monotonic()
            producer.flush(timeout=90)
            self._settle(True)
        finally:
            producer.close(timeout=10)

    def _send(self, producer: Producer, topic: str, p: int, size: int) -> None:
        seq = self.sent[p]
        self.sent[p] = seq + 1
        self.status[p].append(PENDING)
        try:
            future = producer.send(topic, value_for(p, seq, size), key=key_for(self.partitions, p, seq))
        except PylogqError as exc:
            self.status[p][seq] = FAILED
            self._error("send of %s-%d #%d raised %r" % (topic, p, seq, exc))
            return
        self._pending[p].append((seq, future))

    def _settle(self, final: bool) -> None:
        """Record the outcome of every record whose outcome is known (all of them when ``final``)."""
        for p, pending in enumerate(self._pending):
            status = self.status[p]
            while pending and (final or pending[0][1].is_done):
                seq, future = pending.popleft()
                if not future.is_done:
                    status[seq] = FAILED
                    self._error("%s-%d #%d: no outcome after the final flush" % (self.topic, p, seq))
                elif future.failed():
                    status[seq] = FAILED
                    self._error("%s-%d #%d failed: %r" % (self.topic, p, seq, future.exception))
                elif future.batch.partition != p:
                    status[seq] = FAILED
                    self._error("%s #%d of partition %d was written to partition %d" % (
                        self.topic, seq, p, future.batch.partition))
                else:
                    status[seq] = ACKED


# -- reading and comparing --------------------------------------------------------------------------


class Records:
    """Numbered records of a topic as read, per partition in offset order: :attr:`seqs` (sequence
    numbers) and :attr:`timestamps`; :attr:`seen` counts, per partition and sequence number, the
    copies read (up to 255); :attr:`malformed` the records whose value is not a numbered record of
    their partition or whose key is not its own (the first few; :attr:`malformed_count` all).
    ``key_partitions``: the partition count the keys were chosen for (the source topic's).
    Not thread-safe."""

    def __init__(self, topic: str, partitions: int, key_partitions: Optional[int] = None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.key_partitions = key_partitions or partitions
        self.seqs = [array("q") for _ in range(partitions)]
        self.timestamps = [array("q") for _ in range(partitions)]
        self.seen = [bytearray() for _ in range(partitions)]
        self.malformed: List[str] = []
        self.malformed_count = 0

    def __len__(self) -> int:
        return sum(len(s) for s in self.seqs)

    def add(self, p: int, offset: int, key: Optional[bytes], value: Optional[bytes], timestamp: int) -> None:
        """Keep one record read from partition ``p``."""
        try:
            partition, seq = parse_value(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            self._bad(p, offset, value, "not a numbered record")
            return
        if partition != p:
            self._bad(p, offset, value, "a record of partition %d" % partition)
            return
        if key != key_for(self.key_partitions, p, seq):
            self._bad(p, offset, value, "key %r, not %r" % (key, key_for(self.key_partitions, p, seq)))
        self.seqs[p].append(seq)
        self.timestamps[p].append(timestamp)
        seen = self.seen[p]
        if seq >= len(seen):
            seen.extend(bytes(seq + 1 - len(seen)))
        if seen[seq] < 255:
            seen[seq] += 1

    def has(self, p: int, seq: int) -> bool:
        seen = self.seen[p] if p < self.partitions else bytearray()
        return seq < len(seen) and seen[seq] > 0

    def _bad(self, p: int, offset: int, value: Optional[bytes], why: str) -> None:
        self.malformed_count += 1
        if len(self.malformed) < 10:
            self.malformed.append("%s-%d@%d: %s (value %r)" % (self.topic, p, offset, why, bytes(value or b"")[:40]))


class TopicTail(Records):
    """:class:`Records` of a topic read from its start with pylogq's Consumer (assigned every
    partition, no group), up to the end offsets of each :meth:`catch_up`.
    ``isolation_level`` is the consumer's (read_committed: committed transactions only)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, isolation_level: str = "read_uncommitted",
                 key_partitions: Optional[int] = None) -> None:
        super().__init__(topic, partitions, key_partitions)
        self.bootstrap = bootstrap
        self.consumer = Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                 auto_offset_reset="earliest", isolation_level=isolation_level,
                                 max_poll_records=5000)
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.consumer.assign(self.tps)
        for tp in self.tps:
            self.consumer.seek(tp, 0)

    def catch_up(self, timeout: float = 60.0) -> int:
        """Read up to the end offsets as they are now (retrying through broker outages until
        ``timeout``); -> the records read."""
        deadline = time.monotonic() + timeout
        read = 0
        ends: Optional[Dict[TopicPartition, int]] = None
        while True:
            try:
                if ends is None:
                    ends = self.consumer.end_offsets(self.tps)
                if all(self.consumer.position(tp) >= ends[tp] for tp in self.tps):
                    return read
                for tp, records in self.consumer.poll(timeout_ms=200).items():
                    read += len(records)
                    for r in records:
                        self.add(tp.partition, r.offset, r.key, r.value, r.timestamp)
            except PylogqError as exc:
                if time.monotonic() > deadline:
                    raise AssertionError("reading %s at %s failed until the deadline: %r"
                                         % (self.topic, self.bootstrap, exc)) from exc
                time.sleep(0.1)  # a pause before retrying a failed read (a broker restarting)
                continue
            if time.monotonic() > deadline:
                raise AssertionError("reading %s at %s did not reach %s within %.0f s (at %s)" % (
                    self.topic, self.bootstrap, ends, timeout,
                    {tp.partition: self.consumer.position(tp) for tp in self.tps}))

    def close(self) -> None:
        self.consumer.close(autocommit=False)


class Comparison(NamedTuple):
    """What a copy holds of its source: figures and the guarantees it breaks."""

    source_records: int
    copies: int
    duplicates: int
    #: Runs of records copied again (a copy going back to an earlier sequence number).
    replays: int
    missing: int
    failures: List[str]

    def summary(self) -> str:
        return ("%d source records, %d copies on the target: %d missing, %d duplicates in %d replays"
                % (self.source_records, self.copies, self.missing, self.duplicates, self.replays))


def compare(source: Records, target: Records, load: Optional[LoadGenerator] = None) -> Comparison:
    """Check the copy ``target`` against ``source``, per partition:

    - the source holds each record once, in the order it was numbered, and (with ``load``) every
      record the producer got acknowledged;
    - every source record is on the target, and the first copies of the records are in the
      source's order (a record copied again, as at-least-once may, counts as a duplicate);
    - the target holds no record the source does not, nothing malformed, and each copy has its
      source record's timestamp."""
    failures: List[str] = []
    copies = duplicates = replays = missing = 0
    for name, tail in (("source", source), ("target", target)):
        if tail.malformed_count:
            failures.append("%d malformed records on the %s, first: %s" % (tail.malformed_count, name,
                                                                            "; ".join(tail.malformed[:5])))
    for p in range(source.partitions):
        src = source.seqs[p]
        label = "%s-%d" % (target.topic, p)
        if any(src[i] >= src[i + 1] for i in range(len(src) - 1)):
            first = next(i for i in range(len(src) - 1) if src[i] >= src[i + 1])
            failures.append("source %s-%d is not in numbered order once: %d then %d at index %d"
                            % (source.topic, p, src[first], src[first + 1], first))
        stamp_of: Dict[int, int] = dict(zip(src, source.timestamps[p]))
        if load is not None:
            lost = [seq for seq in load.acked(p) if not source.has(p, seq)]
            if lost:
                failures.append("source %s-%d lost %d acknowledged records, first: %s"
                                % (source.topic, p, len(lost), lost[:10]))
        dst = target.seqs[p] if p < target.partitions else array("q")
        stamps = target.timestamps[p] if p < target.partitions else array("q")
        copies += len(dst)
        first_copies: List[int] = []
        seen: set = set()  # type: ignore[type-arg]
        previous = -1
        phantoms: List[int] = []
        wrong_stamps: List[Tuple[int, int, int]] = []
        for seq, stamp in zip(dst, stamps):
            if seq < previous:
                replays += 1
            previous = seq
            if seq not in stamp_of:
                phantoms.append(seq)
                continue
            if stamp != stamp_of[seq]:
                wrong_stamps.append((seq, stamp_of[seq], stamp))
            if seq in seen:
                duplicates += 1
            else:
                seen.add(seq)
                first_copies.append(seq)
        absent = [seq for seq in src if seq not in seen]
        missing += len(absent)
        if absent:
            failures.append("%s: %d source records missing, first: %s" % (label, len(absent), absent[:10]))
        if phantoms:
            failures.append("%s: %d records not in the source, first: %s" % (label, len(phantoms), phantoms[:10]))
        if wrong_stamps:
            failures.append("%s: %d copies with another timestamp than their source record's, first "
                            "(seq, source, copy): %s" % (label, len(wrong_stamps), wrong_stamps[:5]))
        in_source = [seq for seq in src if seq in seen]
        if first_copies != in_source:
            at = next((i for i, (a, b) in enumerate(zip(first_copies, in_source)) if a != b),
                      min(len(first_copies), len(in_source)))
            failures.append("%s: the records' first copies are not in the source's order: from index %d, "
                            "copies %s, source %s" % (label, at, first_copies[at:at + 5], in_source[at:at + 5]))
    return Comparison(len(source), copies, duplicates, replays, missing, failures)


def mirrored(source: Records, target: Records) -> bool:
    """Whether every record read from the source has been read from the target too."""
    return all(target.has(p, seq) for p in range(source.partitions) for seq in source.seqs[p])


def wait_mirrored(source: TopicTail, target: TopicTail, timeout: float, logs: Callable[[], str] = lambda: "") -> float:
    """Read the source to its end, then the target until it holds every source record (or
    ``timeout`` seconds pass); -> the seconds it took."""
    start = time.monotonic()
    source.catch_up(timeout)

    def done() -> bool:
        target.catch_up(max(1.0, timeout - (time.monotonic() - start)))
        return mirrored(source, target)

    wait_for(done, "the copy of %s (%d records) complete on the target (%d read there)"
             % (source.topic, len(source), len(target)), max(1.0, timeout - (time.monotonic() - start)),
             lambda: "%s\n%s" % (_progress(source, target), logs()), interval=0.2)
    return time.monotonic() - start


def _progress(source: Records, target: Records) -> str:
    lines = []
    for p in range(source.partitions):
        absent = [seq for seq in source.seqs[p] if not target.has(p, seq)]
        lines.append("  partition %d: %d source records, %d copies, %d missing%s" % (
            p, len(source.seqs[p]), len(target.seqs[p]) if p < target.partitions else 0, len(absent),
            " (first %s)" % absent[:5] if absent else ""))
    return "\n".join(lines)


# -- consumer failover ------------------------------------------------------------------------------


class GroupReader:
    """A consumer group reading a topic of numbered records and committing after each poll,
    from a thread, ``lag`` records behind each partition's end: it processes a record only
    once ``lag`` more were written after it (a consumer a little behind, as a live one is).

    :meth:`finish` (once the topic's writers have stopped) has it process up to ``lag``
    records before the end of each partition, commit that and close: the group's committed
    offsets are then those ends minus ``lag`` exactly. :attr:`last` is, per partition, the
    sequence number of the last record processed.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, group: str, lag: int,
                 isolation_level: str = "read_uncommitted") -> None:
        self.topic = topic
        self.partitions = partitions
        self.group = group
        self.lag = lag
        self.last = [-1] * partitions
        #: Per partition, the offset after the last record processed (what is committed).
        self.processed = [0] * partitions
        self.read = 0
        self.failure: Optional[BaseException] = None
        self._ends: Optional[List[int]] = None
        self._done = threading.Event()
        self._stopped = threading.Event()
        self._consumer = Consumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                  auto_offset_reset="earliest", isolation_level=isolation_level,
                                  session_timeout_ms=6000, heartbeat_interval_ms=1000)
        self._thread = threading.Thread(target=self._guarded, name="group-%s" % group, daemon=True)

    def start(self) -> "GroupReader":
        self._thread.start()
        return self

    def _guarded(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            self.failure = exc
        finally:
            self._done.set()

    def _run(self) -> None:
        consumer = self._consumer
        try:
            while True:
                ends = self._ends
                if ends is not None and all(self.processed[p] >= ends[p] - self.lag for p in range(self.partitions)):
                    return
                try:
                    batch = consumer.poll(timeout_ms=100)
                    progress = self._process(batch, ends)
                except PylogqError:
                    progress = False  # a broker of the source restarting: the consumer finds the new leaders
                if not progress:
                    self._stopped.wait(0.05)  # nothing processable yet: poll again shortly
        finally:
            consumer.close(autocommit=False)

    def _process(self, batch: Mapping[TopicPartition, Sequence[Any]], ends: Optional[List[int]]) -> bool:
        consumer = self._consumer
        offsets: Dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, records in batch.items():
            p = tp.partition
            if ends is not None:
                limit = ends[p] - self.lag
            else:
                hw = consumer.highwater(tp)
                limit = -1 if hw is None else hw - self.lag
            for r in records:
                if r.offset >= limit:
                    break
                self.last[p] = parse_value(r.value)[1]
                self.read += 1
                self.processed[p] = r.offset + 1
                offsets[tp] = OffsetAndMetadata(r.offset + 1, "", -1)
            if records and self.processed[p] <= records[-1].offset:
                consumer.seek(tp, max(self.processed[p], records[0].offset))  # the rest, again later
        if offsets:
            self._commit(offsets)
        return bool(offsets)

    def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                self._consumer.commit(offsets)
                return
            except PylogqError:
                if time.monotonic() > deadline:
                    raise
                self._stopped.wait(0.1)  # a pause before committing again (the coordinator moving)

    def finish(self, ends: Sequence[int], timeout: float = 60.0) -> List[int]:
        """Process and commit up to ``lag`` records before ``ends`` (the partitions' end offsets,
        no longer growing), then close; -> the committed offsets, per partition."""
        self._ends = list(ends)
        if not self._done.wait(timeout):
            self._stopped.set()
            raise AssertionError("group %s did not reach %s within %.0f s (at %s)" % (
                self.group, [e - self.lag for e in ends], timeout, self.processed))
        self._thread.join(10)
        if self.failure is not None:
            raise AssertionError("group %s's reader failed: %r" % (self.group, self.failure)) from self.failure
        return list(self.processed)

    def close(self) -> None:
        """Stop it where it is (a test that failed before :meth:`finish`)."""
        if not self._done.is_set():
            self._ends = [0] * self.partitions
            self._stopped.set()
            self._thread.join(10)
