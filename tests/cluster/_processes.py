"""A cluster of ``pylogq-broker`` processes on one ZooKeeper, for the tests that need real processes.

Each broker has a fixed loopback port (chosen free once, kept across restarts, so a
client's bootstrap list stays good), its own data directory and log file, and its
``server.properties``. :meth:`ProcessCluster.kill` sends SIGKILL (its ZooKeeper session
then expires after ``zookeeper.session.timeout.ms``), :meth:`ProcessCluster.stop` SIGTERM
(a controlled shutdown), :meth:`ProcessCluster.start` starts it again on its data.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from pylogq import records
from pylogq.cluster.zk_client import KafkaZkClient
from pylogq.storage.checkpoint import REPLICATION_CHECKPOINT, OffsetCheckpoint
from pylogq.storage.log import Log
from pylogq.cluster.zk_store import ZooKeeperStore

from .._zookeeper import free_port
from ..server.conftest import READY

START_TIMEOUT_S = 60.0


class BrokerProcess:
    """One ``pylogq-broker`` of the cluster."""

    def __init__(self, broker_id: int, properties: Path, log: Path, port: int) -> None:
        self.broker_id = broker_id
        self.properties = properties
        self.log_path = log
        self.port = port
        self.proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            level = os.environ.get("PYLOGQ_TEST_BROKER_LOG_LEVEL", "info")
            self.proc = subprocess.Popen([sys.executable, "-m", "pylogq.cli.broker", str(self.properties),
                                          "--log-level", level],
                                         stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()  # the ready line, or end of output if it died
        if not READY.match(line):
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("broker %d printed no ready line (%r); its log:\n%s"
                                 % (self.broker_id, line, self.log_tail()))

    def kill(self) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (a controlled shutdown) and wait; -> the exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("broker %d did not stop within %.0f s; its log:\n%s"
                                 % (self.broker_id, timeout, self.log_tail()))

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

    def stop(self, broker_id: int) -> int:
        return self.brokers[broker_id].stop()

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

    def close(self) -> None:
        for b in self.brokers.values():
            try:
                b.stop()
            except AssertionError:
                pass
        if self._zk is not None:
            self._zk.store.close()
            self._zk = None


def replicas_identical(cluster: ProcessCluster, topic: str, partitions: int) -> None:
    """After a clean stop: each partition's replicas hold the same batches below the high watermark
    (the smallest a broker checkpointed), offsets 0 up to it without a gap."""
    for p in range(partitions):
        marks = [OffsetCheckpoint(str(cluster.data_dir(b) / REPLICATION_CHECKPOINT)).read().get((topic, p), 0)
                 for b in cluster.brokers]
        hw = min(marks)
        copies = []
        for b in cluster.brokers:
            with Log.open(str(cluster.data_dir(b) / ("%s-%d" % (topic, p)))) as log:
                copies.append(log.read(log.log_start_offset, 1 << 30, max_offset=hw).read())
        assert hw > 0
        for b, copy in zip(cluster.brokers, copies):
            assert copy == copies[0], "%s-%d: broker %d's replica differs below the high watermark %d" % (
                topic, p, b, hw)
        assert [r.offset for info in records.iter_batches(copies[0])
                for r in records.RecordBatch(copies[0], info.position)] == list(range(hw))
