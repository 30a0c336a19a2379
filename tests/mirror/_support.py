"""Two clusters for the mirror's tests: in-process brokers served on loopback, A the source and B
the target, the properties of a flow A->B between them with short intervals, and readers of
what the target holds.

The brokers are :class:`pylogq.Broker` in the test's process (the plugin's way): each test
gets its own pair, so the mirror's internal topics and groups start empty. The mirror reaches
them over TCP, in the test's process (:class:`pylogq.mirror.worker.MirrorMaker`) or in a
``pylogq mirror-maker`` process of its own (:class:`MirrorProcess`).
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import pylogq
from pylogq.client.consumer import ConsumerRecord, TopicPartition
from pylogq.mirror.config import MirrorConfig, parse_config

from .._zookeeper import interruptible

DEADLINE_S = 20.0

#: What the test brokers are opened with: no rebalance delay, short group sessions allowed, one
#: partition for the offsets and transaction state topics (made at the first group or
#: transactional call).
BROKER_SETTINGS: Dict[str, Any] = {
    "group_initial_rebalance_delay_ms": 0,
    "group_min_session_timeout_ms": 500,  # a killed mirror's group membership may expire within a second
    "offsets_topic_num_partitions": 1,
    "transaction_state_log_num_partitions": 1,
}


class Clusters:
    """Broker ``a`` (the source, alias A) and broker ``b`` (the target, alias B), served on loopback."""

    def __init__(self, a: pylogq.Broker, b: pylogq.Broker, b_port: int = 0) -> None:
        self.a = a
        self.b = b
        self.a_bootstrap = "%s:%d" % a.serve("127.0.0.1", 0)
        self.b_bootstrap = "%s:%d" % b.serve("127.0.0.1", b_port)

    def restart_target(self, data_dir: Path, down_s: float = 0.0) -> None:
        """Close broker B and open it again on the same port (given at the start: ``b_port``),
        ``down_s`` seconds later."""
        port = int(self.b_bootstrap.rpartition(":")[2])
        self.b.close()
        time.sleep(down_s)  # the outage the mirror rides out
        self.b = pylogq.Broker(str(data_dir), **BROKER_SETTINGS)
        self.b.serve("127.0.0.1", port)

    def properties(self, **overrides: Any) -> Dict[str, str]:
        """A flow A->B's properties, with the intervals of a test (a second) and replication factor 1;
        ``overrides`` by Kafka name with ``_`` for ``.`` (``tasks_max=2``) or as ``{"A->B.x": v}``."""
        props = {
            "clusters": "A, B",
            "A.bootstrap.servers": self.a_bootstrap,
            "B.bootstrap.servers": self.b_bootstrap,
            "A->B.enabled": "true",
            "replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "consumer.poll.timeout.ms": "100",
            "refresh.topics.interval.seconds": "1",
            "refresh.groups.interval.seconds": "1",
            "sync.topic.configs.interval.seconds": "1",
            "emit.checkpoints.interval.seconds": "1",
            "sync.group.offsets.interval.seconds": "1",
            # The workers' group notices a member joining or leaving within a tenth of a second.
            "B.consumer.heartbeat.interval.ms": "100",
        }
        for key, value in overrides.items():
            props[key if "." in key or "->" in key else key.replace("_", ".")] = str(value)
        return props

    def config(self, **overrides: Any) -> MirrorConfig:
        return parse_config(self.properties(**overrides))

    def write_properties(self, path: Path, **overrides: Any) -> Path:
        path.write_text("".join("%s = %s\n" % item for item in self.properties(**overrides).items()))
        return path

    def produce(self, topic: str, records: Sequence[Tuple[int, Optional[bytes], Optional[bytes]]],
                **configs: Any) -> None:
        """Write ``(partition, key, value)`` records to the source, acknowledged."""
        with pylogq.Producer(bootstrap_servers=self.a_bootstrap, **configs) as producer:
            for partition, key, value in records:
                producer.send(topic, value, key, partition=partition)
            producer.flush(DEADLINE_S)


class Load:
    """Writes ``total`` records to ``partitions`` partitions of ``topic`` on the source, in the
    background, each value its partition's sequence number."""

    def __init__(self, clusters: Clusters, topic: str, partitions: int, total: int) -> None:
        self.sent: Dict[int, List[bytes]] = {p: [] for p in range(partitions)}
        self.error: List[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(clusters, topic, partitions, total), daemon=True)
        self._thread.start()

    def _run(self, clusters: Clusters, topic: str, partitions: int, total: int) -> None:
        try:
            with pylogq.Producer(bootstrap_servers=clusters.a_bootstrap, linger_ms=2) as producer:
                for i in range(total):
                    partition = i % partitions
                    value = b"%d" % len(self.sent[partition])
                    producer.send(topic, value, partition=partition)
                    self.sent[partition].append(value)
                    if i % 50 == 49:
                        producer.flush()
                        time.sleep(0.01)  # a steady stream over a second or so, for the kill to land in
                producer.flush()
        except BaseException as exc:
            self.error.append(exc)

    def join(self) -> None:
        self._thread.join(60)
        assert not self._thread.is_alive() and not self.error, self.error


def wait_for(condition: Callable[[], Any], what: str, timeout: float = DEADLINE_S,
             logs: Callable[[], str] = lambda: "", interval: float = 0.02) -> Any:
    """``condition()``'s first true value, looked at every ``interval`` seconds; past ``timeout``
    an AssertionError saying what did not happen, with ``logs()``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %g s waiting for %s\n%s" % (timeout, what, logs()))
        time.sleep(interval)  # a polling interval between checks of the condition, bounded by the deadline


def read_topic(bootstrap: str, topic: str, until: Callable[[Dict[int, List[ConsumerRecord]]], bool],
               isolation_level: str = "read_uncommitted", timeout: float = DEADLINE_S
               ) -> Dict[int, List[ConsumerRecord]]:
    """Every record of ``topic`` from its start, by partition, read until ``until`` holds of them
    (the topic waited for, and its partitions followed as they grow)."""
    got: Dict[int, List[ConsumerRecord]] = {}
    deadline = time.monotonic() + timeout
    with pylogq.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                         isolation_level=isolation_level) as consumer:
        while True:
            partitions = consumer.partitions_for_topic(topic) or set()
            wanted = {TopicPartition(topic, p) for p in partitions}
            if wanted != consumer.assignment():
                consumer.assign(sorted(wanted))
            if wanted:
                for tp, records in consumer.poll(timeout_ms=100).items():
                    got.setdefault(tp.partition, []).extend(records)
            if until(got):
                return got
            assert time.monotonic() < deadline, "timed out reading %s: %s" % (
                topic, {p: len(r) for p, r in sorted(got.items())})
            if not wanted:
                time.sleep(0.05)


def read_to_end(bootstrap: str, topic: str, isolation_level: str = "read_uncommitted",
                timeout: float = DEADLINE_S) -> Dict[int, List[ConsumerRecord]]:
    """Every record of ``topic`` up to its end offsets as they are now (for read_committed, the
    last stable offsets), by partition."""
    got: Dict[int, List[ConsumerRecord]] = {}
    deadline = time.monotonic() + timeout
    with pylogq.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                         isolation_level=isolation_level) as consumer:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, "timed out reading %s to its end" % topic
            for tp, records in consumer.poll(timeout_ms=100).items():
                got.setdefault(tp.partition, []).extend(records)
    return got


def end_offsets(bootstrap: str, topic: str, partitions: int) -> Dict[int, int]:
    """The end offset of each partition of ``topic``."""
    with pylogq.Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as consumer:
        found = consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    return {tp.partition: offset for tp, offset in found.items()}


def count(got: Mapping[int, Sequence[Any]]) -> int:
    return sum(len(records) for records in got.values())


READY = re.compile(r"^pylogq mirror-maker ready: (.*)$")
METRICS = re.compile(r"^pylogq mirror-maker metrics on (\S+)$")


class MirrorProcess:
    """``pylogq mirror-maker ARGS`` as a child process; stdout read line by line, stderr to a file."""

    def __init__(self, args: Sequence[str], log_path: Path, env: Optional[Mapping[str, str]] = None) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")
        environment = dict(os.environ)
        environment.update(env or {})
        self.proc = subprocess.Popen([sys.executable, "-m", "pylogq.cli.main", "mirror-maker", *args],
                                     stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL,
                                     preexec_fn=interruptible, env=environment)
        self.lines: List[str] = []
        self._selector = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)

    def wait_line(self, pattern: "re.Pattern[str]", timeout: float = DEADLINE_S) -> "re.Match[str]":
        """The first line of stdout from now on that ``pattern`` matches."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._selector.select(max(0.0, deadline - time.monotonic())):
                continue
            line = self.proc.stdout.readline().decode("utf-8", "replace").rstrip("\n")
            if not line and self.proc.poll() is not None:
                break
            self.lines.append(line)
            match = pattern.match(line)
            if match:
                return match
        raise AssertionError("no line matching %r within %g s (exit %s); stdout:\n%s\nlog:\n%s"
                             % (pattern.pattern, timeout, self.proc.poll(), "\n".join(self.lines), self.log()))

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text("utf-8", "replace")

    def stop(self, timeout: float = DEADLINE_S) -> int:
        """SIGTERM; -> the exit status. The rest of stdout is kept in ``lines``."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self._end(timeout)

    def kill(self) -> int:
        """kill -9."""
        if self.proc.poll() is None:
            self.proc.kill()
        return self._end(DEADLINE_S)

    def _end(self, timeout: float) -> int:
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("pylogq mirror-maker did not stop within %g s; log:\n%s" % (timeout, self.log()))
        assert self.proc.stdout is not None
        self.lines.extend(self.proc.stdout.read().decode("utf-8", "replace").splitlines())
        self.proc.stdout.close()
        self._selector.close()
        self._log.close()
        return status


def brokers(tmp_path: Path, b_port: int = 0) -> Iterator[Clusters]:
    """The fixture's body: two brokers (data in ``tmp_path/a`` and ``tmp_path/b``), closed after the test."""
    with pylogq.Broker(str(tmp_path / "a"), **BROKER_SETTINGS) as a:
        clusters = Clusters(a, pylogq.Broker(str(tmp_path / "b"), **BROKER_SETTINGS), b_port)
        try:
            yield clusters
        finally:
            clusters.b.close()
