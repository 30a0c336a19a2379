"""The seeds' multi-broker quick start, with pylogq's commands alone.

ZooKeeper from ``pylogq zookeeper-server-start``, three ``pylogq-broker`` processes each
with its own ``server-N.properties``, a topic with replication factor 3 made and
described with ``pylogq topics``, two messages sent with ``pylogq produce``, the
leader killed with SIGKILL, the topic described again (a new leader, the ISR without
the dead broker), every message read with ``pylogq consume``, and the dead broker
started again until it is back in the ISR.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from .._zookeeper import four_letter_word, free_port, zookeeper_install_or_skip
from ..server.conftest import READY

#: Replication across broker processes and ZooKeeper: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

TOPIC = "my-replicated-topic"
DEADLINE_S = 60.0
SESSION_MS = 2000
LINE = re.compile(r"Topic: (\S+)\s+Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]*)\s+Isr: ([\d,]*)")


def _pylogq(*args: str, stdin: Optional[str] = None, timeout: float = 60.0) -> str:
    done = subprocess.run([sys.executable, "-m", "pylogq.cli.main", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, "pylogq %s failed (%d):\n%s\n%s" % (" ".join(args), done.returncode,
                                                                   done.stdout, done.stderr)
    return done.stdout


class Broker:
    """``pylogq-broker server-N.properties`` as a child process."""

    def __init__(self, properties: Path, log: Path) -> None:
        self.properties = properties
        self.log_path = log
        self.proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]

    def start(self) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "pylogq.cli.broker", str(self.properties)],
                                     stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
        log.close()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()  # blocks until ready or exit (the child's own deadline)
        assert READY.match(line), "no ready line (%r); log:\n%s" % (line, self.log_path.read_text())

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else 0
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


def _describe(bootstrap: str) -> Tuple[int, List[int], List[int]]:
    """(leader, replicas, ISR) of the topic's partition 0, from ``pylogq topics --describe``."""
    out = _pylogq("topics", "--describe", "--bootstrap-server", bootstrap, "--topic", TOPIC)
    for line in out.splitlines():
        match = LINE.search(line)
        if match and match.group(1) == TOPIC and match.group(2) == "0":
            ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
            return int(match.group(3)), ints(match.group(4)), ints(match.group(5))
    raise AssertionError("no partition line in:\n" + out)


def _until(what: str, check, timeout: float = DEADLINE_S):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("%s did not happen within %.0f s" % (what, timeout))
        time.sleep(0.2)


@pytest.mark.slow
def test_the_multi_broker_quick_start(tmp_path: Path) -> None:
    zookeeper_install_or_skip()
    zk_port = free_port()
    (tmp_path / "zookeeper.properties").write_text(
        "dataDir=%s\nclientPort=%d\nmaxClientCnxns=0\nadmin.enableServer=false\ntickTime=250\n"
        "4lw.commands.whitelist=*\n" % (tmp_path / "zookeeper", zk_port))
    zk_log = open(tmp_path / "zookeeper.out", "wb")
    zk = subprocess.Popen([sys.executable, "-m", "pylogq.cli.main", "zookeeper-server-start",
                           str(tmp_path / "zookeeper.properties")], stdout=zk_log, stderr=subprocess.STDOUT)
    brokers: Dict[int, Broker] = {}
    try:
        _until("ZooKeeper to serve", lambda: "Mode:" in four_letter_word(zk_port, "srvr"))
        ports = {}
        for n in range(3):
            ports[n] = free_port()
            props = tmp_path / ("server-%d.properties" % n)
            props.write_text("\n".join([
                "broker.id=%d" % n,
                "listeners=PLAINTEXT://127.0.0.1:%d" % ports[n],
                "log.dirs=%s" % (tmp_path / ("kafka-logs-%d" % n)),
                "zookeeper.connect=127.0.0.1:%d" % zk_port,
                "zookeeper.session.timeout.ms=%d" % SESSION_MS,
                "offsets.topic.replication.factor=3",
                "offsets.topic.num.partitions=4",
                "group.initial.rebalance.delay.ms=0",
                "replica.fetch.wait.max.ms=100",
            ]) + "\n")
            brokers[n] = Broker(props, tmp_path / ("broker-%d.log" % n))
            brokers[n].start()
        bootstrap = ",".join("127.0.0.1:%d" % ports[n] for n in range(3))

        _pylogq("topics", "--create", "--bootstrap-server", bootstrap, "--replication-factor", "3",
                "--partitions", "1", "--topic", TOPIC)
        leader, replicas, isr = _until("every replica in the ISR", lambda: (
            lambda d: d if len(d[2]) == 3 else None)(_describe(bootstrap)))
        assert sorted(replicas) == [0, 1, 2] and sorted(isr) == [0, 1, 2] and leader in replicas

        _pylogq("produce", "--bootstrap-server", bootstrap, "--topic", TOPIC, "--acks", "all",
                stdin="my test message 1\nmy test message 2\n")

        brokers[leader].kill()
        others = ",".join("127.0.0.1:%d" % ports[n] for n in range(3) if n != leader)
        new_leader, replicas, isr = _until("a new leader and a shrunk ISR", lambda: (
            lambda d: d if d[0] not in (leader, -1) and leader not in d[2] else None)(_describe(others)))
        assert sorted(replicas) == [0, 1, 2] and sorted(isr) == sorted(set(range(3)) - {leader})

        out = _pylogq("consume", "--bootstrap-server", others, "--topic", TOPIC, "--from-beginning",
                      "--max-messages", "2", "--timeout-ms", "30000")
        assert out.splitlines() == ["my test message 1", "my test message 2"]

        brokers[leader].start()
        _until("the restarted broker back in the ISR", lambda: len(_describe(bootstrap)[2]) == 3)
        out = _pylogq("topics", "--describe", "--bootstrap-server", bootstrap, "--under-replicated-partitions")
        assert TOPIC not in out
    finally:
        for b in brokers.values():
            status = b.stop()
            assert status in (0, -signal.SIGKILL), "broker exited with %s; log:\n%s" % (status, b.log_path.read_text())
        zk.send_signal(signal.SIGTERM)
        zk.wait(30)
        zk_log.close()
    for b in brokers.values():
        text = b.log_path.read_text()
        assert "Traceback" not in text, text
