"""Loopback ports for test servers that must be told their port before they start.

A server a test starts once binds port 0 and reports what it got. A broker or ZooKeeper that a
test kills and starts again cannot: it must come back on the same port, which is written in the
other servers' configs, in ZooKeeper and behind the test proxies. Such a server is given a port
before its first start, and the port is free between its runs.

A port that the OS chose for a bind to port 0 comes from the ephemeral range
(``net.ipv4.ip_local_port_range``). That is also where the kernel takes the local port of every
outgoing connection. Once the test has let go of such a port, any ``connect()`` on the machine may
take it: a ZooKeeper client reconnecting, a proxy's upstream connection, or a connection to that
very port, which on loopback can connect to itself. The server's bind then fails with
EADDRINUSE. A fault schedule in CI failed that way: a broker could not listen on the port it had
been given at its first start.

So the ports here come from outside the ephemeral range, where the kernel never picks one for a
connection. Nothing holds them between the servers' runs. Two test processes on one machine (the
suite and a soak beside it) must not pick the same port, so each claim is a file in a directory
of claims, taken under a lock; a dead process's claims are taken back. A bind check skips a port
another program is using.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path
from typing import Set, Tuple

CLAIMS = Path(tempfile.gettempdir()) / "pylogq-test-ports"
_claimed: Set[int] = set()  # this process's claims, never handed out twice
_random = random.Random()  # not seeded by a test: a schedule's seed must not decide the ports


def ephemeral_range() -> Tuple[int, int]:
    """The kernel's range for the local ports of connections (Linux's default if unreadable)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _candidates() -> Tuple[range, ...]:
    low, high = ephemeral_range()
    return tuple(r for r in (range(10000, min(low, 65536)), range(max(high + 1, 10000), 65536)) if len(r) > 0)


def _bindable(port: int) -> bool:
    """Nothing bound to it on loopback, as a server binding it with SO_REUSEADDR would find."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def _claim(port: int) -> bool:
    """Claims ``port`` for this process if no live process has; the caller holds the lock."""
    path = CLAIMS / str(port)
    try:
        owner = int(path.read_text() or "0")
    except FileNotFoundError:
        owner = 0
    except (OSError, ValueError):
        return False
    if owner and owner != os.getpid() and _alive(owner):
        return False
    path.write_text(str(os.getpid()))
    return True


def free_port() -> int:
    """A loopback port outside the ephemeral range that nothing holds and no other test process
    has claimed; this process keeps its claim until it exits."""
    ranges = _candidates()
    CLAIMS.mkdir(parents=True, exist_ok=True)
    with open(CLAIMS / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for _ in range(200):
            chosen = _random.choice(ranges)
            port = _random.choice(chosen)
            if port in _claimed or not _bindable(port):
                continue
            if _claim(port):
                _claimed.add(port)
                return port
    raise RuntimeError("no free loopback port outside the ephemeral range %d-%d after 200 tries"
                       % ephemeral_range())


@atexit.register
def _release() -> None:
    for port in _claimed:
        path = CLAIMS / str(port)
        try:
            if path.read_text() == str(os.getpid()):
                path.unlink()
        except OSError:
            pass


__all__ = ["free_port", "ephemeral_range"]
