"""A TCP proxy that can cut a link the way a network partition does.

:class:`TcpProxy` listens on a loopback port and forwards each connection to a target.
:meth:`TcpProxy.cut` turns it into a black hole: bytes stop flowing both ways and new
connections are accepted but go nowhere, with no reset and no close, so the peers
find out only by their own timeouts, as across a real partition. :meth:`TcpProxy.heal`
drops the held connections (their peers reconnect) and forwards again.

A proxy given ``classify`` labels each connection when it accepts it (with the name of
the process that opened it, say), and can then cut only the connections of some labels:
``cut({"broker-1"})`` partitions broker 1 from the proxy's target and leaves everyone
else connected. :func:`peer_process` finds which of some processes opened a loopback
connection, from ``/proc``.
"""

from __future__ import annotations

import os
import selectors
import socket
import threading
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

__all__ = ["TcpProxy", "peer_process"]

#: The label of a connection the proxy has no ``classify`` for, or that ``classify`` did not recognise.
UNLABELLED = "client"

Address = Tuple[str, int]


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; one thread runs every connection.

    ``classify(peer)`` (called on the proxy's thread for each accepted connection, with the
    connecting side's address) names the connection's source; a connection is cut when the
    whole proxy is cut or its label is. Thread-safe: cut and heal from any thread.
    """

    def __init__(self, target: Address, port: int = 0,
                 classify: Optional[Callable[[Address], Optional[str]]] = None) -> None:
        self.target = target
        self._classify = classify
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self.port = int(self._listener.getsockname()[1])
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._pairs: List[Tuple[socket.socket, socket.socket]] = []
        self._labels: Dict[socket.socket, str] = {}  # both sockets of a pair, and held ones
        self._held: List[socket.socket] = []  # accepted while cut: kept open, never served
        self._cut = False
        self._cut_labels: Set[str] = set()
        self._stopped = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._run, name="tcp-proxy-%d" % self.port, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return "127.0.0.1:%d" % self.port

    @property
    def is_cut(self) -> bool:
        """Whether any connection is cut now (the whole proxy or some labels)."""
        with self._lock:
            return self._cut or bool(self._cut_labels)

    def cut(self, sources: Optional[Iterable[str]] = None) -> None:
        """Stop every byte both ways, for connections open now and new ones: all of them, or
        those whose label is in ``sources``."""
        with self._lock:
            if sources is None:
                self._cut = True
            else:
                self._cut_labels.update(sources)
        self._wake()

    def heal(self, sources: Optional[Iterable[str]] = None) -> None:
        """Close what was held during the cut and forward new connections again: every
        connection (the whole proxy's cut and every label's), or those of ``sources``."""
        with self._lock:
            if sources is None:
                self._cut = False
                self._cut_labels.clear()
                held, self._held = self._held, []
                pairs, self._pairs = self._pairs, []
            else:
                labels = set(sources)
                self._cut_labels -= labels
                held = [s for s in self._held if self._labels.get(s) in labels]
                self._held = [s for s in self._held if s not in held]
                pairs = [p for p in self._pairs if self._labels.get(p[0]) in labels]
                self._pairs = [p for p in self._pairs if p not in pairs]
            for sock in held:
                self._labels.pop(sock, None)
            for a, b in pairs:
                self._labels.pop(a, None)
                self._labels.pop(b, None)
        for sock in held:
            _close(sock)
        for a, b in pairs:
            self._drop(a, b)
        self._wake()

    def close(self) -> None:
        with self._lock:
            self._stopped = True
        self._wake()
        self._thread.join(10)
        self.heal()
        _close(self._listener)
        _close(self._wake_r)
        _close(self._wake_w)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _blocked(self, label: Optional[str]) -> bool:
        """Under the lock."""
        return self._cut or label in self._cut_labels

    def _drop(self, a: socket.socket, b: socket.socket) -> None:
        for sock in (a, b):
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            _close(sock)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
            for key, _ in self._selector.select(0.5):
                if key.data == "wake":
                    try:
                        key.fileobj.recv(4096)  # type: ignore[union-attr]
                    except OSError:
                        pass
                elif key.data is None:
                    self._accept()
                else:
                    with self._lock:
                        blocked = self._blocked(self._labels.get(key.fileobj))  # type: ignore[call-overload]
                    if not blocked:
                        self._forward(key.fileobj, key.data)  # type: ignore[arg-type]
            with self._lock:
                pairs = [(a, b, self._blocked(self._labels.get(a))) for a, b in self._pairs]
            for a, b, blocked in pairs:
                for sock, other in ((a, b), (b, a)):
                    if blocked:  # held open, not read: nothing flows
                        try:
                            self._selector.unregister(sock)
                        except (KeyError, ValueError):
                            pass
                        continue
                    try:
                        self._selector.get_key(sock)
                    except KeyError:
                        try:
                            self._selector.register(sock, selectors.EVENT_READ, other)
                        except (ValueError, OSError):
                            pass

    def _accept(self) -> None:
        try:
            client, peer = self._listener.accept()
        except OSError:
            return
        label = UNLABELLED
        if self._classify is not None:
            try:
                label = self._classify(peer) or UNLABELLED
            except Exception:  # noqa: BLE001 - a source that cannot be told is a client's
                label = UNLABELLED
        with self._lock:
            if self._blocked(label):
                self._held.append(client)
                self._labels[client] = label
                return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            _close(client)
            return
        for sock in (client, upstream):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._pairs.append((client, upstream))
            self._labels[client] = self._labels[upstream] = label
            blocked = self._blocked(label)  # cut while it connected: held from the start
        if not blocked:
            self._selector.register(client, selectors.EVENT_READ, upstream)
            self._selector.register(upstream, selectors.EVENT_READ, client)

    def _forward(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            data = source.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close_pair(source)
            return
        try:
            sink.setblocking(True)
            sink.sendall(data)
            sink.setblocking(False)
        except OSError:
            self._close_pair(source)

    def _close_pair(self, sock: socket.socket) -> None:
        with self._lock:
            found: Optional[Tuple[socket.socket, socket.socket]] = next(
                (p for p in self._pairs if sock in p), None)
            if found is not None:
                self._pairs.remove(found)
                for s in found:
                    self._labels.pop(s, None)
        if found is not None:
            self._drop(*found)


def peer_process(peer: Address, port: int, pids: Iterable[int]) -> Optional[int]:
    """Which of ``pids`` holds the loopback socket ``peer`` that is connected to ``port``
    (None if none does, or the connection is gone). Linux only: it reads ``/proc``."""
    inode = _socket_inode(peer[1], port)
    if inode is None:
        return None
    link = "socket:[%s]" % inode
    for pid in pids:
        fd_dir = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) == link:
                    return pid
            except OSError:
                continue
    return None


def _socket_inode(local_port: int, remote_port: int) -> Optional[str]:
    """The inode of the IPv4 TCP socket from ``local_port`` to ``remote_port`` (/proc/net/tcp)."""
    want = (":%04X" % local_port, ":%04X" % remote_port)
    try:
        with open("/proc/net/tcp") as table:
            next(table)
            for line in table:
                fields = line.split()
                if fields[1].endswith(want[0]) and fields[2].endswith(want[1]):
                    return fields[9]
    except (OSError, StopIteration):
        return None
    return None


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
