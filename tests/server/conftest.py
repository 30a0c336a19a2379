"""Brokers for the real-client tests: ``pylogq-broker`` as a subprocess and the in-process fixture.

Every client test takes ``bootstrap`` and so runs twice: against one
``pylogq-broker`` process shared by the whole session (started once: a process
start costs far more than a test), and against the ``pylogq_bootstrap`` fixture of
the :mod:`pylogq.testing` plugin (a fresh in-process broker per test, as any
project using the plugin gets). Tests share the subprocess broker, so each names
its topics and groups with ``_support.unique``.

The subprocess broker must print its ready line, serve, and exit with status 0 on
SIGTERM; its stderr (the structured log) is kept in a file and shown when it fails.
"""

from __future__ import annotations

import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence, Tuple

import pytest

from .._zookeeper import interruptible

READY = re.compile(r"^pylogq-broker (\d+) ready on ([^\s,]+):(\d+)(?:, \S+)*$")  # the first listener's address
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


class BrokerProcess:
    """A ``pylogq-broker`` child process with its data directory and log file."""

    def __init__(self, data_dir: Path, log_path: Path, *overrides: str,
                 command: Sequence[str] = (sys.executable, "-m", "pylogq.cli.broker"),
                 start_timeout_s: float = START_TIMEOUT_S, stop_timeout_s: float = STOP_TIMEOUT_S) -> None:
        """``command`` starts ``pylogq-broker`` (its arguments follow); the log file is
        appended to, so a restarted broker's log follows the first one's."""
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        args = [*command, "--data-dir", str(data_dir),
                "--listeners", "PLAINTEXT://127.0.0.1:0",
                "--override", "group.initial.rebalance.delay.ms=0",
                "--override", "offsets.topic.num.partitions=4"]
        for item in overrides:
            args += ["--override", item]
        self.data_dir = data_dir
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL,
                                     preexec_fn=interruptible)
        self.host, self.port = self._wait_ready()
        self.bootstrap = "%s:%d" % (self.host, self.port)

    def _wait_ready(self) -> Tuple[str, int]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout_s
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            while time.monotonic() < deadline:
                if not selector.select(deadline - time.monotonic()):
                    continue
                line = self.proc.stdout.readline().decode("utf-8", "replace").strip()
                if not line and self.proc.poll() is not None:
                    break
                match = READY.match(line)
                if match:
                    return match.group(2), int(match.group(3))
        finally:
            selector.close()
        self.proc.kill()
        self.proc.wait()
        raise AssertionError("pylogq-broker printed no ready line within %.0f s; its log:\n%s"
                             % (self.start_timeout_s, self.log()))

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text("utf-8", "replace")

    def stop(self) -> int:
        """SIGTERM, wait for the exit; -> the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("pylogq-broker did not stop within %.0f s of SIGTERM; its log:\n%s"
                                 % (self.stop_timeout_s, self.log()))
        finally:
            assert self.proc.stdout is not None
            self.proc.stdout.close()
            self._log.close()


@pytest.fixture(scope="session")
def broker_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One ``pylogq-broker`` process for the session; it must exit 0 on SIGTERM."""
    base = tmp_path_factory.mktemp("pylogq-broker")
    broker = BrokerProcess(base / "data", base / "broker.log")
    yield broker
    status = broker.stop()
    assert status == 0, "pylogq-broker exited with %s after SIGTERM; its log:\n%s" % (status, broker.log())
    text = broker.log()
    assert "stopped cleanly" in text, text
    assert "Traceback" not in text, text


DATA_DIR = pytest.StashKey[Path]()


@pytest.fixture(params=["subprocess", "in-process"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    """``host:port`` of a broker: the shared ``pylogq-broker`` process, or the plugin's fixture."""
    if request.param == "subprocess":
        process = request.getfixturevalue("broker_process")
        request.node.stash[DATA_DIR] = process.data_dir
        return str(process.bootstrap)
    address = str(request.getfixturevalue("pylogq_bootstrap"))
    request.node.stash[DATA_DIR] = Path(request.getfixturevalue("pylogq_broker").data_dir)
    return address


@pytest.fixture
def broker_data_dir(bootstrap: str, request: pytest.FixtureRequest) -> Path:
    """The data directory of the broker behind ``bootstrap`` (to look at what it stored)."""
    return request.node.stash[DATA_DIR]


@pytest.fixture
def kcat() -> str:
    """The kcat binary (Debian's package; CI installs it)."""
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.skip("kcat is not installed (apt-get install kcat); CI installs it")
    return path

