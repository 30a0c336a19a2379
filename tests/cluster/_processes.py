"""A cluster of ``pylogq-broker`` processes on one ZooKeeper, for the tests that need real processes.

Each broker has a fixed loopback port (chosen free once, kept across restarts, so a
client's bootstrap list stays good), its own data directory and log file, and its
``server.properties``. :meth:`ProcessCluster.kill` sends SIGKILL (its ZooKeeper session
then expires after ``zookeeper.session.timeout.ms``), :meth:`ProcessCluster.stop` SIGTERM
(a controlled shutdown), :meth:`ProcessCluster.start` starts it again on its data.
:meth:`ProcessCluster.freeze` sends SIGSTOP (the process keeps its sockets and its
session, and answers nothing until :meth:`ProcessCluster.thaw` sends SIGCONT); a frozen
broker is thawed before it is stopped or killed. :meth:`ProcessCluster.wipe` empties a
stopped broker's data directory, as a replaced disk would.

Every run of a broker must end the way the test ended it: status 0 after SIGTERM (the
broker's clean shutdown: ``pylogq-broker`` exits 1 when its shutdown did not finish),
-9 after :meth:`ProcessCluster.kill` (a SIGKILL the test sent on purpose). A run that
ended otherwise (a non-zero status after SIGTERM, a process that exited on its own, one
that had to be killed because it did not stop) is recorded, and
:meth:`ProcessCluster.close` raises with every such run once all the processes are gone.
If the test is already failing when ``close`` runs (it is called from a ``finally``),
the runs are added to the test's own error as a note instead, so that its failure is
the one reported.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from pylogq import records
from pylogq.cluster.zk.client import KafkaZkClient
from pylogq.cluster.zk.kazoo_store import ZooKeeperStore
from pylogq.storage.checkpoint import REPLICATION_CHECKPOINT, OffsetCheckpoint
from pylogq.storage.log import Log

from .._ports import free_port
from .._zookeeper import ZooKeeperServer, dies_with_test
from ..server.conftest import READY

START_TIMEOUT_S = 60.0
#: ``python -m pylogq.cli.broker``, with SIGUSR2 made to write every thread's stack to stderr
#: (the broker's log file): a broker that hangs can say where.
_BOOT = ("import faulthandler, runpy, signal\n"
         "faulthandler.register(signal.SIGUSR2, all_threads=True)\n"
         "runpy.run_module('pylogq.cli.broker', run_name='__main__', alter_sys=True)\n")


class BrokerProcess:
    """One ``pylogq-broker`` of the cluster."""

    def __init__(self, broker_id: int, properties: Path, log: Path, port: int) -> None:
        self.broker_id = broker_id
        self.properties = properties
        self.log_path = log
        self.port = port
        self.proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
        self.frozen = False
        #: Whether the end of the current process is accounted for (a stop or kill the test asked
        #: for, or a failed start): a process that ended with this still False exited on its own.
        self._ended = True
        #: Each run that did not end the way the test ended it, described.
        self.unclean: List[str] = []
        self._runs = 0

    def _exited_on_its_own(self) -> None:
        """Record the current process if it exited without being asked to."""
        if self.proc is not None and not self._ended and self.proc.poll() is not None:
            self._ended = True
            self.unclean.append("broker %d (run %d) exited on its own with status %s"
                                % (self.broker_id, self._runs, self.proc.returncode))

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> Optional[int]:
        """The process id while it runs (frozen or not)."""
        return self.proc.pid if self.running and self.proc is not None else None

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start it and wait for its ready line, at most ``timeout`` seconds (then it is killed)."""
        self._exited_on_its_own()
        assert not self.running, "broker %d is running" % self.broker_id
        self._runs += 1
        self._ended = False
        with open(self.log_path, "ab") as log:
            level = os.environ.get("PYLOGQ_TEST_BROKER_LOG_LEVEL", "info")
            self.proc = subprocess.Popen(dies_with_test([sys.executable, "-c", _BOOT,
                                                         str(self.properties), "--log-level", level]),
                                         stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
        self.frozen = False
        proc = self.proc
        assert proc.stdout is not None
        lines: List[str] = []
        # The ready line, or end of output if it died; read on a thread so that a broker that
        # neither prints nor dies (waiting for ZooKeeper, say) fails the start at the deadline.
        reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline().strip()),  # type: ignore[union-attr]
                                  name="broker-%d-ready" % self.broker_id, daemon=True)
        reader.start()
        reader.join(timeout)
        line = lines[0] if lines else None
        if line is None or not READY.match(line):
            proc.kill()
            proc.wait()
            self._ended = True  # the failed start is the report
            reader.join(10)
            raise AssertionError("broker %d printed no ready line (%s); its log:\n%s"
                                 % (self.broker_id, "%r" % line if line is not None
                                    else "nothing within %.0f s" % timeout, self.log_tail()))

    def kill(self) -> None:
        """SIGKILL, on purpose: its -9 is the expected end of this run."""
        self._exited_on_its_own()
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.thaw()  # a stopped process dies of SIGKILL too, but leaves nothing stopped behind
            self.proc.wait(30)
            self._ended = True
        self.frozen = False

    def dump_threads(self) -> None:
        """Have it write every thread's stack to its log (SIGUSR2: see ``_BOOT``)."""
        if self.running and not self.frozen and self.proc is not None:
            self.proc.send_signal(signal.SIGUSR2)

    def freeze(self) -> None:
        """SIGSTOP: the process stays, with its sockets and ZooKeeper session, and does nothing."""
        assert self.running and self.proc is not None, "broker %d is not running" % self.broker_id
        self.proc.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        """SIGCONT (harmless to a process that is not stopped)."""
        if self.running and self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
        self.frozen = False

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (a controlled shutdown) and wait; -> the exit status. A status other than 0 is
        also recorded as an unclean shutdown (see the module docstring)."""
        if self.proc is None:
            return 0
        self._exited_on_its_own()
        if self._ended:  # killed, or stopped already: nothing new to end
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        if self.frozen:
            self.thaw()  # SIGTERM waits for it: sent first, it is the first thing the process sees
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._ended = True
            message = "broker %d (run %d) did not stop within %.0f s of SIGTERM and was killed" % (
                self.broker_id, self._runs, timeout)
            self.unclean.append(message)
            raise AssertionError("%s; its log:\n%s" % (message, self.log_tail()))
        self._ended = True
        if status != 0:
            self.unclean.append("broker %d (run %d) exited with status %s after SIGTERM"
                                % (self.broker_id, self._runs, status))
        return status

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_path.read_text("utf-8", "replace").splitlines()[-lines:])


class ProcessCluster:
    """``n`` broker processes sharing ``zookeeper_connect`` (with its chroot)."""

    def __init__(self, base: Path, zookeeper_connect: str, n: int = 3, config: Optional[Mapping[str, Any]] = None,
                 ports: Optional[Mapping[int, int]] = None,
                 broker_config: Optional[Mapping[int, Mapping[str, Any]]] = None) -> None:
        """``broker_config`` adds keys per broker (``advertised.listeners``, a ``zookeeper.connect``
        through a proxy, ...)."""
        self.base = base
        self.zookeeper_connect = zookeeper_connect
        self.brokers: Dict[int, BrokerProcess] = {}
        settings: Dict[str, Any] = {
            "zookeeper.session.timeout.ms": 2000,
            "replica.fetch.wait.max.ms": 100,
            "replica.lag.time.max.ms": 4000,
            "offsets.topic.replication.factor": min(3, n),
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": min(3, n),
            "transaction.state.log.min.isr": min(2, n),
            "transaction.state.log.num.partitions": 4,
            "group.initial.rebalance.delay.ms": 0,
            "controlled.shutdown.retry.backoff.ms": 200,
        }
        settings.update(config or {})
        self.settings = settings
        for b in range(n):
            port = (ports or {}).get(b) or free_port()
            props = base / ("server-%d.properties" % b)
            lines = ["broker.id=%d" % b, "listeners=PLAINTEXT://127.0.0.1:%d" % port,
                     "log.dirs=%s" % (base / ("data-%d" % b)), "zookeeper.connect=%s" % zookeeper_connect]
            own = dict(settings)
            own.update((broker_config or {}).get(b, {}))
            lines = [line for line in lines if line.split("=", 1)[0] not in own]
            lines += ["%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v) for k, v in own.items()]
            props.write_text("\n".join(lines) + "\n")
            self.brokers[b] = BrokerProcess(b, props, base / ("broker-%d.log" % b), port)
        self._zk: Optional[KafkaZkClient] = None

    @property
    def bootstrap(self) -> str:
        return ",".join("127.0.0.1:%d" % b.port for b in self.brokers.values())

    def data_dir(self, broker_id: int) -> Path:
        return self.base / ("data-%d" % broker_id)

    def start_all(self) -> None:
        for b in self.brokers.values():
            b.start()

    def start(self, broker_id: int) -> None:
        self.brokers[broker_id].start()

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def stop(self, broker_id: int, timeout: float = 60.0) -> int:
        return self.brokers[broker_id].stop(timeout)

    def freeze(self, broker_id: int) -> None:
        self.brokers[broker_id].freeze()

    def thaw(self, broker_id: int) -> None:
        self.brokers[broker_id].thaw()

    def wipe(self, broker_id: int) -> None:
        """Empty a stopped broker's data directory (a new disk: no logs, checkpoints or meta.properties)."""
        assert not self.brokers[broker_id].running, "broker %d is running" % broker_id
        shutil.rmtree(self.data_dir(broker_id), ignore_errors=True)

    def dump_threads(self) -> None:
        """Every running broker writes its threads' stacks to its log."""
        for b in self.brokers.values():
            b.dump_threads()

    def stop_all(self) -> Dict[int, int]:
        return {b: p.stop() for b, p in self.brokers.items()}

    # -- the cluster's state, read from ZooKeeper ------------------------------------------

    @property
    def zk(self) -> KafkaZkClient:
        if self._zk is None:
            self._zk = KafkaZkClient(ZooKeeperStore(self.zookeeper_connect, session_timeout_ms=10000))
        return self._zk

    def state(self, topic: str, partition: int) -> Optional[Tuple[int, List[int], int]]:
        """(leader, ISR, leader epoch) of a partition as ZooKeeper holds it."""
        found = self.zk.get_partition_state(topic, partition)
        return None if found is None else (found.leader, list(found.isr), found.leader_epoch)

    def controller(self) -> Optional[int]:
        return self.zk.get_controller_id()

    def wait_until(self, condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError("%s did not happen within %.0f s;\n%s" % (what, timeout, self.logs()))
            time.sleep(0.05)

    def full_isr(self, topic: str, partitions: int) -> bool:
        n = len(self.brokers)
        for p in range(partitions):
            found = self.state(topic, p)
            if found is None or found[0] < 0 or len(found[1]) != min(n, 3):
                return False
        return True

    def logs(self) -> str:
        return "\n".join("--- broker %d ---\n%s" % (b, p.log_tail(25)) for b, p in self.brokers.items())

    def close(self, timeout: float = 60.0) -> None:
        """Stop every broker (thawing frozen ones first), killing one that does not stop within
        ``timeout``; then raise if any run of any broker ended uncleanly (see the module docstring).

        Every process is stopped whatever happens to the others. Called while the test's own
        exception propagates (from a ``finally``), it adds the unclean runs to that exception as
        a note and does not raise: the test's failure stays the one reported."""
        failing = sys.exc_info()[1]
        errors: List[str] = []
        try:
            for b in self.brokers.values():
                b.thaw()
            for b in self.brokers.values():
                try:
                    b.stop(timeout)
                except Exception as exc:  # noqa: BLE001 - every broker is stopped; reported below
                    if not isinstance(exc, AssertionError):
                        errors.append("broker %d: stopping it failed: %r" % (b.broker_id, exc))
                finally:
                    if b.running and b.proc is not None:  # stop() failed before it ended the process
                        b.proc.kill()
                        b.proc.wait()
        finally:
            if self._zk is not None:
                self._zk.store.close()
                self._zk = None
        unclean = [line for b in self.brokers.values() for line in b.unclean] + errors
        if not unclean:
            return
        report = "unclean broker shutdowns:\n  %s\n%s" % ("\n  ".join(unclean), self.logs())
        if failing is not None:
            note = getattr(failing, "add_note", None)
            if note is not None:
                note(report)
            else:
                print(report, file=sys.stderr)
            return
        raise AssertionError(report)


def replicas_identical(cluster: ProcessCluster, topic: str, partitions: int, allow_empty: bool = False) -> None:
    """After a clean stop: each partition's replicas hold the same batches below the high watermark
    (the smallest a broker checkpointed), offsets 0 up to it without a gap. ``allow_empty`` passes
    a partition that nothing was committed to (``__consumer_offsets``' unused ones)."""
    for p in range(partitions):
        marks = [OffsetCheckpoint(str(cluster.data_dir(b) / REPLICATION_CHECKPOINT)).read().get((topic, p), 0)
                 for b in cluster.brokers]
        hw = min(marks)
        if hw == 0 and allow_empty:
            continue
        copies = []
        for b in cluster.brokers:
            with Log.open(str(cluster.data_dir(b) / ("%s-%d" % (topic, p)))) as log:
                copies.append(log.read(log.log_start_offset, 1 << 30, max_offset=hw).read())
        assert hw > 0, "%s-%d: no high watermark checkpointed (%s)" % (topic, p, dict(zip(cluster.brokers, marks)))
        for b, copy in zip(cluster.brokers, copies):
            assert copy == copies[0], "%s-%d: broker %d's replica differs below the high watermark %d (%s)" % (
                topic, p, b, hw, _first_difference(copies[0], copy))
        assert [r.offset for info in records.iter_batches(copies[0])
                for r in records.RecordBatch(copies[0], info.position)] == list(range(hw))


def _first_difference(a: bytes, b: bytes) -> str:
    """Where two copies of a log part ways: the offset of the first batch that differs."""
    batches_a = [(info.base_offset, a[info.position:info.position + info.size]) for info in records.iter_batches(a)]
    batches_b = [(info.base_offset, b[info.position:info.position + info.size]) for info in records.iter_batches(b)]
    for (offset_a, x), (offset_b, y) in zip(batches_a, batches_b):
        if (offset_a, x) != (offset_b, y):
            return "first difference at batch offset %d vs %d" % (offset_a, offset_b)
    return "%d batches vs %d" % (len(batches_a), len(batches_b))


@contextlib.contextmanager
def cluster_on_own_zookeeper(base: Path, n: int, config: Mapping[str, Any]) -> Iterator[ProcessCluster]:
    """``n`` broker processes started on a ZooKeeper of their own (under ``base``), both stopped
    after the block (a module's cluster, as the benchmarks keep one)."""
    zookeeper = ZooKeeperServer(base / "zookeeper")
    zookeeper.start()
    try:
        cluster = ProcessCluster(base, zookeeper.connect_string, n, config)
        try:
            cluster.start_all()
            yield cluster
        finally:
            cluster.close()
    finally:
        zookeeper.stop()


Records = Dict[int, List[Tuple[int, bytes]]]  # per partition: (offset, value), in the order read


def read_back(bootstrap: str, topic: str, partitions: int, group_id: str) -> Records:
    """Every record of the topic up to each partition's high watermark, read by a fresh consumer."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group_id,
                                         "enable.auto.commit": False})
    out: Records = {p: [] for p in range(partitions)}
    try:
        ends = {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 120
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in range(partitions)):
            assert time.monotonic() < deadline, "could not read the topic back to %s" % ends
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                out[m.partition()].append((m.offset(), m.value()))  # type: ignore[index, arg-type]
    finally:
        consumer.close()
    return out


def read_back_failures(topic: str, final: Records, acked: Records, seen: Records,
                       duplicates: bool = True) -> List[str]:
    """What the records read back at the end break of the guarantees, per partition: every
    acknowledged record (``acked``, in acknowledgement order) exactly once at its offset (one
    acknowledged without an offset, exactly once anywhere), every record a consumer read
    (``seen``) still there at its offset. With ``duplicates=False`` a value stored twice is left
    to :func:`duplicate_failures`, which tells the broker's duplicates from the client's once the
    brokers have stopped."""
    failures: List[str] = []
    for p in sorted(final):
        by_offset: Dict[int, bytes] = {}
        for offset, value in final[p]:
            if offset in by_offset:
                failures.append("%s-%d: offset %d read twice" % (topic, p, offset))
            by_offset[offset] = value
        ours = acked.get(p, [])
        # A record acknowledged without its offset (librdkafka marks a request whose answer was
        # lost delivered once a later one of the same producer succeeds: its sequence proves the
        # earlier was appended) must be there too, at whatever offset.
        values = {v for o, v in final[p]}
        lost = [(v, o, by_offset.get(o)) for o, v in ours
                if (by_offset.get(o) != v if o is not None else v not in values)]
        if lost:
            failures.append("%s-%d: %d acknowledged records not at their offsets (end %d), first: %s" % (
                topic, p, len(lost), len(final[p]), ", ".join("%r acked at %s, read %r" % x for x in lost[:5])))
        offsets = [o for o, _ in ours if o is not None]
        if len(offsets) != len(set(offsets)):
            failures.append("%s-%d: two records acknowledged at one offset" % (topic, p))
        counts: Dict[bytes, int] = {}
        for _, v in final[p]:
            counts[v] = counts.get(v, 0) + 1
        twice = sorted(v for v, c in counts.items() if c > 1)
        if twice and duplicates:
            failures.append("%s-%d: %d values stored more than once, first: %s" % (topic, p, len(twice), twice[:5]))
        unseen = [(v, o, by_offset.get(o)) for o, v in seen.get(p, []) if by_offset.get(o) != v]
        if unseen:
            failures.append("%s-%d: a consumer read %d records that are not there at the end, first: %s" % (
                topic, p, len(unseen), ", ".join("%r at %d (now %r)" % x for x in unseen[:5])))
    return failures


#: What a copy of a record is stored with: (offset, producer id, producer epoch, sequence).
Copy = Tuple[int, int, int, int]

#: librdkafka's debug line (``debug=eos``) when its idempotent producer has bumped its epoch.
EPOCH_BUMPED = "All partitions drained, bumped epoch to "


def stored_copies(log_dir: Path) -> Dict[bytes, List[Copy]]:
    """value -> where each record holding it is stored in the log at ``log_dir`` (a stopped
    broker's), with the producer id, epoch and sequence of its batch."""
    out: Dict[bytes, List[Copy]] = {}
    with Log.open(str(log_dir)) as log:
        data = log.read(log.log_start_offset, 1 << 30).read()
    for info in records.iter_batches(data):
        for r in records.RecordBatch(data, info.position):
            seq = info.base_sequence + (r.offset - info.base_offset) if info.base_sequence >= 0 else -1
            out.setdefault(bytes(r.value or b""), []).append(
                (r.offset, info.producer_id, info.producer_epoch, seq))
    return out


def duplicate_failures(topic: str, final: Records, copies_of: Callable[[int], Dict[bytes, List[Copy]]],
                       producer_log: Optional[Path]) -> Tuple[List[str], List[str]]:
    """Values stored more than once, told apart once the brokers have stopped: -> (failures, notes).

    An idempotent producer's retry of a batch the partition holds must never be stored again:
    the broker finds it by its producer id, epoch and sequences. A copy stored under the same
    producer id and epoch as another is that failure. Copies each under a different epoch of
    the producer are not the broker's to find: librdkafka, on an OUT_OF_ORDER_SEQUENCE_NUMBER
    for a batch behind one that failed, bumps its epoch and renumbers every unacknowledged
    batch of every partition, including one whose answer was lost after the partition stored
    it (librdkafka issue 4953; Kafka's brokers store it again too). Those are noted, when the
    producer's log (``producer_log``, librdkafka's ``debug=eos``) shows the bump, and failures
    otherwise."""
    failures: List[str] = []
    notes: List[str] = []
    bumps = 0
    if producer_log is not None and producer_log.exists():
        bumps = producer_log.read_text("utf-8", "replace").count(EPOCH_BUMPED)
    for p in sorted(final):
        counts: Dict[bytes, int] = {}
        for _, v in final[p]:
            counts[v] = counts.get(v, 0) + 1
        twice = sorted(v for v, c in counts.items() if c > 1)
        if not twice:
            continue
        stored = copies_of(p)
        same_epoch = []
        across = []
        for v in twice:
            copies = stored.get(v, [])
            epochs = [(pid, epoch) for _, pid, epoch, _ in copies]
            if len(copies) > 1 and len(set(epochs)) == len(epochs) and len({pid for pid, _ in epochs}) == 1:
                across.append((v, copies))
            else:
                same_epoch.append((v, copies))
        if same_epoch:
            failures.append("%s-%d: %d values stored more than once within one producer epoch (the broker stored a "
                            "retry again), first: %s" % (topic, p, len(same_epoch), "; ".join(
                                "%r at %s" % (v, c) for v, c in same_epoch[:3])))
        if across and not bumps:
            failures.append("%s-%d: %d values stored again under a later producer epoch, and the producer never bumped "
                            "its epoch, first: %s" % (topic, p, len(across), "; ".join(
                                "%r at %s" % (v, c) for v, c in across[:3])))
        elif across:
            notes.append("%s-%d: %d values stored again after librdkafka bumped its epoch (%d bumps) and renumbered "
                         "a batch the partition held, first: %s" % (topic, p, len(across), bumps, "; ".join(
                             "%r at %s (offset, producer id, epoch, sequence)" % (v, c) for v, c in across[:3])))
    return failures, notes
