"""A TCP proxy that can cut a link the way a network partition does.

:class:`TcpProxy` listens on a loopback port and forwards each connection to a target.
:meth:`TcpProxy.cut` turns it into a black hole: bytes stop flowing both ways and new
connections are accepted but go nowhere, with no reset and no close, so the peers
find out only by their own timeouts, as across a real partition. :meth:`TcpProxy.heal`
drops the held connections (their peers reconnect) and forwards again.
"""

from __future__ import annotations

import selectors
import socket
import threading
from typing import List, Optional, Tuple

__all__ = ["TcpProxy"]


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; one thread runs every connection."""

    def __init__(self, target: Tuple[str, int], port: int = 0) -> None:
        self.target = target
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
        self._held: List[socket.socket] = []  # accepted while cut: kept open, never served
        self._cut = False
        self._stopped = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._run, name="tcp-proxy-%d" % self.port, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return "127.0.0.1:%d" % self.port

    def cut(self) -> None:
        """Stop every byte both ways, for connections open now and new ones."""
        with self._lock:
            self._cut = True
        self._wake()

    def heal(self) -> None:
        """Close what was held during the cut and forward new connections again."""
        with self._lock:
            self._cut = False
            held, self._held = self._held, []
            pairs, self._pairs = self._pairs, []
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
                cut = self._cut
            for key, _ in self._selector.select(0.5):
                if key.data == "wake":
                    try:
                        key.fileobj.recv(4096)  # type: ignore[union-attr]
                    except OSError:
                        pass
                elif key.data is None:
                    self._accept(cut)
                elif not cut:
                    self._forward(key.fileobj, key.data)  # type: ignore[arg-type]
            if cut:
                with self._lock:
                    pairs = list(self._pairs)
                for a, b in pairs:  # held open, not read: nothing flows
                    for sock in (a, b):
                        try:
                            self._selector.unregister(sock)
                        except (KeyError, ValueError):
                            pass
            else:
                with self._lock:
                    pairs = list(self._pairs)
                for a, b in pairs:
                    for sock, other in ((a, b), (b, a)):
                        try:
                            self._selector.get_key(sock)
                        except KeyError:
                            try:
                                self._selector.register(sock, selectors.EVENT_READ, other)
                            except (ValueError, OSError):
                                pass

    def _accept(self, cut: bool) -> None:
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        if cut:
            with self._lock:
                self._held.append(client)
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
        if found is not None:
            self._drop(*found)


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
