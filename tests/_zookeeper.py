"""A real ZooKeeper for tests: Debian's 3.8, standalone, in a directory of its own.

:class:`ZooKeeperServer` runs the server the way ``pylogq zookeeper-server-start``
does (the same Java, classpath and main class, :mod:`pylogq.cli.zookeeper_server`)
with a zoo.cfg of its own: a free port on 127.0.0.1, a tick of 100 ms so sessions
of 1-4 s work (and expire within a tick of their timeout), no admin server, no
fsync (nothing here survives a power cut), the four-letter words allowed (the
readiness check asks ``srvr``), and its log in the directory. It is ready when
it answers ``srvr`` as serving. ``stop`` is SIGTERM, ``kill`` SIGKILL; ``restart``
comes back on the same port with the same data, sessions included.

The suite's fixtures (``tests/conftest.py``) start one server per test session and
give each test a chroot of its own. Where Java or ZooKeeper is missing they skip
with the reason (a failure under ``PYLOGQ_REQUIRE_ALL=1``).
"""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, List, Optional, Set

import pytest

from pylogq.cli.zookeeper_server import ZooKeeperInstall, find_zookeeper, log4j_properties, server_command
from pylogq.errors import CommandError

from ._ports import free_port

TICK_MS = 100
_SESSION_ID = re.compile(r"\bsid=0x([0-9a-fA-F]+)")
# A JVM that starts fast and stays small: the suite shares two cores with other work.
JVM_OPTIONS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")


def zookeeper_install_or_skip() -> ZooKeeperInstall:
    """Java and ZooKeeper's jars, or the test skips saying what is missing."""
    try:
        return find_zookeeper()
    except CommandError as exc:
        pytest.skip(str(exc))
        raise  # unreachable: skip raises


def dies_with_test(command: List[str]) -> List[str]:
    """``command`` run so that it is killed (SIGKILL) if the test process dies first.

    A test process that crashes (a segfault in a client library, say) runs no cleanup; the
    servers it started would go on, taking CPU and ports from every later test. util-linux's
    ``setpriv --pdeathsig`` sets the parent-death signal and execs the command (the pid stays
    the command's); where it is missing, the command is run as it is. The signal comes when
    the thread that started the process ends, so start servers from the test's main thread.
    """
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] + list(command) if setpriv else list(command)


def interruptible() -> None:
    """``preexec_fn`` for a child the test stops with SIGINT (Ctrl-C): SIGINT's default action,
    whatever the test process inherited. A suite started in the background by a shell without
    job control (``cmd &`` in a script) runs with SIGINT ignored, every child inherits that,
    and Python then installs no KeyboardInterrupt handler: the child would never stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def four_letter_word(port: int, word: str, timeout: float = 2.0) -> str:
    """ZooKeeper's answer to a four-letter word ("" when nothing answers)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode("ascii"))
            chunks = []
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One standalone ZooKeeper process over ``directory`` (its config, data and log).

    Not thread-safe: one test drives it.
    """

    def __init__(self, directory: Path, install: Optional[ZooKeeperInstall] = None) -> None:
        self.directory = directory
        self.install = install if install is not None else zookeeper_install_or_skip()
        self.port = 0
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        (directory / "data").mkdir(parents=True, exist_ok=True)

    @property
    def connect_string(self) -> str:
        return "127.0.0.1:%d" % self.port

    @property
    def restartable_connect_string(self) -> str:
        """The connect string for a client that must keep its session through a restart of the server.

        ZooKeeper 3.8 leaves a connection accepted in the first milliseconds of its
        start (listening, its database not loaded yet) open and unanswered. kazoo (as
        ZooKeeper's own client) waits for the answer the session timeout divided by the
        number of hosts: with one host the whole timeout, and the session, counted
        again from the server's start, is lost. Naming the server twice halves the
        wait, as an ensemble of several servers does, so the session survives.
        """
        return "%s,%s" % (self.connect_string, self.connect_string)

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    def _write_config(self) -> Path:
        config = self.directory / "zoo.cfg"
        config.write_text(
            "tickTime=%d\n" % TICK_MS
            + "dataDir=%s\n" % (self.directory / "data")
            + "clientPort=%d\n" % self.port
            + "clientPortAddress=127.0.0.1\n"
            + "maxClientCnxns=0\n"
            + "minSessionTimeout=%d\n" % (2 * TICK_MS)
            + "maxSessionTimeout=60000\n"
            + "admin.enableServer=false\n"
            + "4lw.commands.whitelist=*\n"
            + "forceSync=no\n"
        )
        (self.directory / "log4j.properties").write_text(log4j_properties(str(self.log_path)))
        return config

    def start(self, timeout: float = 60.0) -> None:
        """Start and wait until it serves; a first start takes a free port, a restart its old one."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        first = self.port == 0
        for _ in range(5 if first else 1):
            if first:
                self.port = free_port()
            config = self._write_config()
            command = server_command(self.install, str(config), str(self.directory / "log4j.properties"),
                                     JVM_OPTIONS)
            with open(self.directory / "zookeeper.out", "ab") as out:
                self.proc = subprocess.Popen(dies_with_test(command), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                             cwd=str(self.directory))
            if self._wait_serving(timeout):
                return
            self.kill()
            if "Address already in use" not in self.log_tail():
                break  # not a port taken meanwhile: another try would fail the same way
        raise RuntimeError("ZooKeeper did not start on port %d within %.0f s:\n%s" % (self.port, timeout,
                                                                                   self.log_tail()))

    def _wait_serving(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if "Mode: standalone" in four_letter_word(self.port, "srvr"):
                return True
            time.sleep(0.05)  # a port that opens gives no event to wait on: poll it, up to the deadline
        return False

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, and wait for the process to end."""
        self._signal(signal.SIGTERM, timeout)

    def kill(self, timeout: float = 30.0) -> None:
        """SIGKILL, and wait for the process to end."""
        self._signal(signal.SIGKILL, timeout)

    def _signal(self, signum: int, timeout: float) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signum)
        self.proc.wait(timeout)

    def restart(self, timeout: float = 60.0) -> None:
        """Stop (if running) and start again on the same port and data."""
        self.stop()
        self.start(timeout)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        text = ""
        for name in ("zookeeper.out", "zookeeper.log"):
            path = self.directory / name
            if path.exists():
                text += path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def expire_session(self, store: Any, timeout: float = 30.0) -> None:
        """Make ZooKeeper expire ``store``'s session (a ZooKeeperStore), as it does for a client
        it lost touch with, and wait until the store has heard EXPIRED.

        A second connection presents the session's id and password, which moves the
        session to it, and closes it, which ends the session on the server. The store
        may win its session back in between (it reconnects at once), so this repeats
        until the store reports the expiry.
        """
        from kazoo.client import KazooClient

        expired = threading.Event()

        def listener(state: str) -> None:
            if state == "expired":
                expired.set()

        store.add_listener(listener)
        deadline = time.monotonic() + timeout
        try:
            while not expired.is_set():
                assert time.monotonic() < deadline, "ZooKeeper did not expire session %x" % store.session_id
                client_id = store.client_id
                if client_id is not None:
                    thief = KazooClient(self.connect_string, client_id=client_id,
                                        timeout=store.session_timeout_ms / 1000.0)
                    try:
                        thief.start(timeout=10)
                    except Exception:  # noqa: BLE001 - the session was gone already: the store will hear it
                        pass
                    finally:
                        thief.stop()
                        thief.close()
                expired.wait(min(2.0, max(0.0, deadline - time.monotonic())))
        finally:
            store.remove_listener(listener)

    def connected_sessions(self) -> Set[int]:
        """The ids of the sessions that have a connection to the server now (``cons``); empty
        when the server does not answer."""
        return {int(sid, 16) for sid in _SESSION_ID.findall(four_letter_word(self.port, "cons"))}

    def fresh_chroot(self, name: str) -> str:
        """A connect string with a chroot no other test uses (the store creates it)."""
        return "%s/%s" % (self.connect_string, name)

    def delete_chroot(self, connect: str) -> None:
        """Delete a test's chroot and everything under it."""
        from pylogq.cluster.zk.kazoo_store import ZooKeeperStore, split_connect_string

        _, chroot = split_connect_string(connect)
        if chroot is None or not self.running:
            return
        with ZooKeeperStore(self.connect_string, session_timeout_ms=4000, connection_timeout_ms=10000) as store:
            if store.exists(chroot) is not None:
                store.delete(chroot, recursive=True)


__all__ = ["ZooKeeperServer", "zookeeper_install_or_skip", "four_letter_word", "dies_with_test", "TICK_MS"]
