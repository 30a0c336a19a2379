"""The metadata store in one process: a ZooKeeper ensemble's tree, zxids and sessions, in memory.

:class:`InMemoryZooKeeper` plays the ensemble: one tree of znodes, one zxid
counter, the sessions. :meth:`InMemoryZooKeeper.connect` opens a session and
returns its client, an :class:`InMemoryStoreClient` that implements
:class:`~pylogq.cluster.zk.store.MetadataStore` with ZooKeeper's semantics
(see that module), so a replicated cluster runs in one process, in tests and
embedded, on the same controller code as on ZooKeeper.

Faults a cluster must survive are driven from here, each as ZooKeeper and kazoo
(:mod:`~pylogq.cluster.zk.kazoo_store`) behave:

- :meth:`InMemoryZooKeeper.expire_session`: the ensemble ends a session (its
  ephemerals go); a connected client hears EXPIRED and starts a new session at once.
- :meth:`InMemoryStoreClient.disconnect` (a network blip): the client hears
  SUSPENDED and loses every watch it holds (kazoo drops them with the connection
  and does not set them again); its calls wait for the connection, at most the
  session timeout plus the connection timeout, then raise
  :class:`~pylogq.errors.StoreConnectionError`. Its session no longer heartbeats:
  back within the session timeout (:meth:`InMemoryStoreClient.reconnect`), it hears
  CONNECTED with the same session; later, the ensemble has expired the session (its
  ephemerals went at the timeout) and the client hears EXPIRED, then CONNECTED with
  a new session, only once it is connected again (a client learns of an expiry from
  the server), and calls that waited raise SessionExpiredError. With
  ``after_next_write`` the connection goes right after the client's next write is
  applied, and that call raises StoreConnectionError: a write of unknown outcome.
- :meth:`InMemoryStoreClient.freeze` (a stopped process, a GC pause): the client
  notices nothing, but its calls and its callbacks wait until
  :meth:`InMemoryStoreClient.thaw`, and its session does not heartbeat. Thawed
  after the session timeout, it finds its connection closed by the server:
  SUSPENDED, EXPIRED, CONNECTED with a new session.
- :meth:`InMemoryZooKeeper.stop` and :meth:`InMemoryZooKeeper.start` (an ensemble
  restart): every client is disconnected while it is down and no session expires;
  at the start each session's timeout counts again from zero, as a restarted
  ZooKeeper does, and the clients reconnect with their sessions.
- :meth:`InMemoryStoreClient.abandon` (a process killed mid-flight): nothing more
  from it, and the ensemble expires its session once the session timeout has passed
  since it last heartbeat. A client closed while it cannot reach the ensemble
  cannot end its session either: it is left to expire the same way.

A write holds the ensemble's lock while it changes the tree and queues the watch
events it triggers on each client's queue, so every client sees the changes in
zxid order; each client's own thread delivers them, outside the lock.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from typing import Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple, Union

from ...errors import (
    BadVersionError,
    ConfigError,
    InvalidArgumentTypeError,
    InvalidPathError,
    NoChildrenForEphemeralsError,
    NoNodeError,
    NodeExistsError,
    NotEmptyError,
    SessionExpiredError,
    StoreConnectionError,
)
from ..delayed import TimedTask, Timer
from .store import (
    CHANGED,
    CHILD,
    CONNECTED,
    CREATED,
    DEFAULT_SESSION_TIMEOUT_MS,
    DELETED,
    EXPIRED,
    SUSPENDED,
    CheckOp,
    CreateOp,
    DeleteOp,
    Listener,
    Op,
    SetOp,
    WatchedEvent,
    Watcher,
    ZnodeStat,
    join_path,
    parent_of,
    validate_data,
    validate_path,
)

__all__ = ["InMemoryZooKeeper", "InMemoryStoreClient"]

log = logging.getLogger(__name__)

# ZooKeeper puts the server id in a session id's top byte; one server, id 1.
_SESSION_ID_BASE = 1 << 56

_Undo = List[Callable[[], None]]
_Events = List[Tuple[str, str]]
_Delivery = Tuple[Callable[..., None], object]


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Node:
    """One znode. Guarded by the ensemble's lock."""

    __slots__ = ("data", "version", "cversion", "ephemeral_owner", "czxid", "mzxid", "ctime", "mtime", "children")

    def __init__(self, data: bytes, ephemeral_owner: int, zxid: int, now: int) -> None:
        self.data = data
        self.version = 0
        #: Child creations so far: the next sequential child's number (ZooKeeper's cversion as
        #: the sequence counter; a deletion does not move it back or forward).
        self.cversion = 0
        self.ephemeral_owner = ephemeral_owner
        self.czxid = zxid
        self.mzxid = zxid
        self.ctime = now
        self.mtime = now
        self.children: Set[str] = set()

    def stat(self) -> ZnodeStat:
        return ZnodeStat(self.version, self.ephemeral_owner, self.czxid, self.mzxid, self.ctime, self.mtime,
                         len(self.children))


class _Session:
    """A session as the ensemble keeps it: its ephemerals and its watches. Guarded by the ensemble's lock."""

    __slots__ = ("id", "timeout_ms", "client", "ephemerals", "data_watches", "child_watches", "expiry")

    def __init__(self, session_id: int, timeout_ms: int, client: "InMemoryStoreClient") -> None:
        self.id = session_id
        self.timeout_ms = timeout_ms
        self.client = client
        self.ephemerals: Set[str] = set()
        # path -> watchers, a dict as an ordered set: one call per function, in registration order.
        self.data_watches: Dict[str, Dict[Watcher, None]] = {}
        self.child_watches: Dict[str, Dict[Watcher, None]] = {}
        #: Its expiry on the ensemble's timer while it does not heartbeat (None while it does).
        self.expiry: Optional[TimedTask] = None

    def cancel_expiry(self) -> None:
        """It heartbeats again (or the ensemble stopped counting): no expiry."""
        task, self.expiry = self.expiry, None
        if task is not None:
            task.force_complete()

    def drop_watches(self) -> None:
        """Forget every watch (a lost connection drops them, as kazoo does)."""
        self.data_watches.clear()
        self.child_watches.clear()


class InMemoryZooKeeper:
    """A ZooKeeper ensemble in memory: one tree, one zxid sequence, the sessions of its clients.

    Invariants: every znode's parent exists and is persistent; a znode's
    ``czxid`` is larger than that of every znode created before it; an ephemeral
    znode's owner is a live session; a session that does not heartbeat (its client
    disconnected, frozen, abandoned, or closed while away) has an expiry on the timer
    while the ensemble serves, and only then. Thread-safe: one lock guards the tree,
    the sessions and every client's connection; no callback runs under it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Notified (under the lock) whenever a client's connection or session changes: calls
        #: waiting for a connection wait on it.
        self._changed = threading.Condition(self._lock)
        self._nodes: Dict[str, _Node] = {"/": _Node(b"", 0, 0, _now_ms())}
        self._zxid = 0
        self._sessions: Dict[int, _Session] = {}
        self._clients: Dict["InMemoryStoreClient", None] = {}
        self._session_numbers = itertools.count(1)
        self._timer: Optional[Timer] = None
        self._serving = True
        self._closed = False

    # ------------------------------------------------------------------ sessions

    def connect(self, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                connection_timeout_ms: Optional[int] = None) -> "InMemoryStoreClient":
        """Open a session; -> its client, connected.

        ``connection_timeout_ms`` (default: the session timeout, as
        :class:`~pylogq.cluster.zk.kazoo_store.ZooKeeperStore`'s) bounds the wait for a
        stopped ensemble here, and with the session timeout a call's wait for a lost
        connection. StoreConnectionError when the ensemble is not serving within it.
        """
        if session_timeout_ms <= 0:
            raise ConfigError("session_timeout_ms must be positive, not %r" % (session_timeout_ms,))
        if connection_timeout_ms is None:
            connection_timeout_ms = session_timeout_ms
        if connection_timeout_ms <= 0:
            raise ConfigError("connection_timeout_ms must be positive, not %r" % (connection_timeout_ms,))
        return InMemoryStoreClient(self, session_timeout_ms, connection_timeout_ms)

    def expire_session(self, session_id: int) -> bool:
        """Expire a session as ZooKeeper does when it loses touch with the client; False if it was not live.

        Its ephemeral znodes are deleted (others' watches fire) and its watches
        dropped. A connected client hears EXPIRED, gets a new session at once and
        hears CONNECTED (kazoo reconnects so): calls on it go on working, as the new
        session. A client that cannot reach the ensemble now (disconnected, frozen)
        hears it when it can again.
        """
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return False
            self._end_session_locked(session)
            session.client._settle_locked()
            return True

    def live_sessions(self) -> List[int]:
        """The ids of the sessions not ended yet (an abandoned one until its timeout), sorted."""
        with self._lock:
            return sorted(self._sessions)

    @property
    def serving(self) -> bool:
        """False between :meth:`stop` and :meth:`start`."""
        return self._serving

    def stop(self) -> None:
        """Stop serving, as every server of the ensemble going down: each client is disconnected
        (SUSPENDED, its watches dropped, its calls waiting) and no session expires until
        :meth:`start`. Nothing if stopped already."""
        with self._lock:
            if not self._serving or self._closed:
                return
            self._serving = False
            for session in self._sessions.values():
                session.cancel_expiry()
            for client in list(self._clients):
                client._settle_locked()
            self._changed.notify_all()

    def start(self) -> None:
        """Serve again after :meth:`stop`, on the same tree and sessions: every session's
        timeout counts from now (a restarted ZooKeeper restores its sessions so), and every
        client that is not disconnected or frozen of its own reconnects with its session
        (CONNECTED). Nothing if serving."""
        with self._lock:
            if self._serving or self._closed:
                return
            self._serving = True
            clients = dict.fromkeys(list(self._clients) + [s.client for s in self._sessions.values()])
            for client in clients:
                client._settle_locked()
            self._changed.notify_all()

    def restart(self, down_s: float = 0.0) -> None:
        """:meth:`stop`, stay down for ``down_s`` seconds (the fault's length), :meth:`start`."""
        self.stop()
        try:
            if down_s > 0:
                time.sleep(down_s)  # how long the ensemble is down, not a wait for anything
        finally:
            self.start()

    def close(self) -> None:
        """Close every client and stop the session timer; the tree stays readable by no one."""
        with self._lock:
            self._closed = True
            clients = list(self._clients)
            timer, self._timer = self._timer, None
            self._changed.notify_all()
        for client in clients:
            client.close()
        if timer is not None:
            timer.close()

    def __enter__(self) -> "InMemoryZooKeeper":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _open_session_locked(self, client: "InMemoryStoreClient", timeout_ms: int) -> _Session:
        if self._closed:
            raise SessionExpiredError("", "the in-memory ensemble is closed")
        session = _Session(_SESSION_ID_BASE + next(self._session_numbers), timeout_ms, client)
        self._sessions[session.id] = session
        return session

    def _end_session_locked(self, session: _Session) -> None:
        """Drop the session, its watches, then its ephemerals (one write, as ZooKeeper's closeSession)."""
        del self._sessions[session.id]
        session.cancel_expiry()
        session.data_watches.clear()
        session.child_watches.clear()
        if session.ephemerals:
            zxid = self._next_zxid_locked()
            events: _Events = []
            for path in sorted(session.ephemerals, reverse=True):
                self._delete_locked(path, -1, zxid, None, events)
            self._fire_locked(events)
        self._changed.notify_all()

    def _timer_locked(self) -> Timer:
        if self._timer is None:
            self._timer = Timer("pylogq-metadata-sessions")
        return self._timer

    def _arm_expiry_locked(self, session: _Session) -> None:
        """The session stopped heartbeating: expire it ``timeout_ms`` from now (from when it
        stopped, if armed already), unless it heartbeats again first. Only while serving:
        a stopped ensemble expires nothing."""
        if self._closed or not self._serving or session.expiry is not None or session.id not in self._sessions:
            return
        task: Optional[TimedTask] = None

        def expire() -> None:
            with self._lock:
                if session.expiry is not task or session.id not in self._sessions:
                    return  # it heartbeat again (or ended) in the meantime
                session.expiry = None
                self._end_session_locked(session)
                session.client._settle_locked()

        task = TimedTask(time.monotonic() + session.timeout_ms / 1000.0, expire)
        session.expiry = task
        self._timer_locked().add(task)

    # ------------------------------------------------------------------ the tree, under the lock

    def _next_zxid_locked(self) -> int:
        self._zxid += 1
        return self._zxid

    def _node_locked(self, path: str) -> _Node:
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node

    def _create_locked(self, session: _Session, path: str, data: bytes, ephemeral: bool, sequential: bool,
                       zxid: int, undo: Optional[_Undo], events: _Events) -> str:
        parent_path = parent_of(path)
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(path, "its parent %s does not exist" % parent_path)
        full = path + "%010d" % parent.cversion if sequential else path
        if full in self._nodes:
            raise NodeExistsError(full)
        if parent.ephemeral_owner:
            raise NoChildrenForEphemeralsError(full, "its parent %s is ephemeral" % parent_path)
        name = full[len(parent_path):].lstrip("/")
        self._nodes[full] = _Node(bytes(data), session.id if ephemeral else 0, zxid, _now_ms())
        parent.children.add(name)
        parent.cversion += 1
        if ephemeral:
            session.ephemerals.add(full)
        if undo is not None:
            def undo_create() -> None:
                del self._nodes[full]
                parent.children.discard(name)
                parent.cversion -= 1
                session.ephemerals.discard(full)
            undo.append(undo_create)
        events.append((CREATED, full))
        return full

    def _make_parents_locked(self, session: _Session, path: str, events: _Events) -> None:
        """Create the missing ancestors of ``path``, each a write of its own (as a client's makepath is)."""
        missing: List[str] = []
        parent = parent_of(path)
        while parent not in self._nodes:
            missing.append(parent)
            parent = parent_of(parent)
        for ancestor in reversed(missing):
            self._create_locked(session, ancestor, b"", False, False, self._next_zxid_locked(), None, events)

    def _set_locked(self, path: str, data: bytes, version: int, zxid: int, undo: Optional[_Undo],
                    events: _Events) -> ZnodeStat:
        node = self._node_locked(path)
        if version != -1 and node.version != version:
            raise BadVersionError(path, "expected version %d, the znode is at %d" % (version, node.version))
        before = (node.data, node.version, node.mzxid, node.mtime)
        node.data = bytes(data)
        node.version += 1
        node.mzxid = zxid
        node.mtime = _now_ms()
        if undo is not None:
            def undo_set() -> None:
                node.data, node.version, node.mzxid, node.mtime = before
            undo.append(undo_set)
        events.append((CHANGED, path))
        return node.stat()

    def _check_locked(self, path: str, version: int) -> None:
        node = self._node_locked(path)
        if version != -1 and node.version != version:
            raise BadVersionError(path, "expected version %d, the znode is at %d" % (version, node.version))

    def _delete_locked(self, path: str, version: int, zxid: int, undo: Optional[_Undo], events: _Events) -> None:
        if path == "/":
            raise InvalidPathError(path, "the root cannot be deleted")
        node = self._node_locked(path)
        if version != -1 and node.version != version:
            raise BadVersionError(path, "expected version %d, the znode is at %d" % (version, node.version))
        if node.children:
            raise NotEmptyError(path, "%d children" % len(node.children))
        parent_path = parent_of(path)
        parent = self._nodes[parent_path]
        name = path[len(parent_path):].lstrip("/")
        del self._nodes[path]
        parent.children.discard(name)
        owner = self._sessions.get(node.ephemeral_owner) if node.ephemeral_owner else None
        if owner is not None:
            owner.ephemerals.discard(path)
        if undo is not None:
            def undo_delete() -> None:
                self._nodes[path] = node
                parent.children.add(name)
                if owner is not None:
                    owner.ephemerals.add(path)
            undo.append(undo_delete)
        events.append((DELETED, path))

    def _subtree_locked(self, path: str) -> List[str]:
        """``path``'s descendants, each after its own descendants (the order they can be deleted in)."""
        order: List[str] = []

        def walk(at: str) -> None:
            for name in sorted(self._node_locked(at).children):
                child = join_path(at, name)
                walk(child)
                order.append(child)

        walk(path)
        return order

    # ------------------------------------------------------------------ watches, under the lock

    def _fire_locked(self, events: _Events) -> None:
        """Hand each change's watchers (one-shot: taken off their tables) to their clients' queues."""
        for kind, path in events:
            parent = parent_of(path) if path != "/" else None
            for session in self._sessions.values():
                due: List[_Delivery] = []
                if kind in (CREATED, CHANGED, DELETED):
                    for watcher in session.data_watches.pop(path, ()):
                        due.append((watcher, WatchedEvent(kind, path)))
                if kind == DELETED:
                    for watcher in session.child_watches.pop(path, ()):
                        due.append((watcher, WatchedEvent(DELETED, path)))
                if kind in (CREATED, DELETED) and parent is not None:
                    for watcher in session.child_watches.pop(parent, ()):
                        due.append((watcher, WatchedEvent(CHILD, parent)))
                if due:
                    session.client._enqueue_locked(due)


class InMemoryStoreClient:
    """A client session of an :class:`InMemoryZooKeeper`, a :class:`~pylogq.cluster.zk.store.MetadataStore`.

    Thread-safe. Watch events and session states are delivered by the client's
    own thread (``pylogq-metadata-events``), one at a time, in the order the
    ensemble produced them. After :meth:`close` or :meth:`abandon` every call
    raises :class:`~pylogq.errors.SessionExpiredError`. While the client cannot
    reach the ensemble (:meth:`disconnect`, the ensemble stopped) a call waits for
    the connection, at most the session timeout plus the connection timeout (then
    StoreConnectionError); while it is frozen (:meth:`freeze`) its calls and its
    callbacks wait for :meth:`thaw`, however long.
    """

    def __init__(self, ensemble: InMemoryZooKeeper, session_timeout_ms: int, connection_timeout_ms: int) -> None:
        self._ensemble = ensemble
        self._timeout_ms = session_timeout_ms
        self._connection_timeout_ms = connection_timeout_ms
        # As ZooKeeperStore: a call waits through a reconnection, not past the point where the
        # ensemble has expired the session anyway.
        self._call_timeout_s = (session_timeout_ms + connection_timeout_ms) / 1000.0
        self._stopped = False
        self._state = CONNECTED
        # The connection, guarded by the ensemble's lock: cut by disconnect() (a generation per
        # cut, so that a scheduled reconnection does not end a later cut); frozen by freeze();
        # broken (the ensemble stopped, or expired the session) while frozen, to be noticed at thaw.
        self._disconnected = False
        self._link_generation = 0
        self._lose_next_answer = False
        self._lose_for_s: Optional[float] = None
        self._frozen = False
        self._broken = False
        self._thawed = threading.Event()
        self._thawed.set()
        self._cond = threading.Condition(threading.Lock())
        self._queue: Deque[Optional[_Delivery]] = collections.deque()
        self._listeners: Dict[Listener, None] = {}
        with ensemble._lock:
            deadline = time.monotonic() + connection_timeout_ms / 1000.0
            while not ensemble._serving and not ensemble._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreConnectionError("in-memory ensemble", "it did not serve within %d ms"
                                               % connection_timeout_ms)
                ensemble._changed.wait(left)
            self._session = ensemble._open_session_locked(self, session_timeout_ms)
            ensemble._clients[self] = None
        self._thread = threading.Thread(target=self._deliver, name="pylogq-metadata-events-%x" % self._session.id,
                                        daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ session

    @property
    def session_id(self) -> int:
        return self._session.id

    @property
    def session_timeout_ms(self) -> int:
        return self._timeout_ms

    @property
    def state(self) -> str:
        return EXPIRED if self._stopped else self._state

    @property
    def disconnected(self) -> bool:
        """Whether :meth:`disconnect` cut the connection (and no :meth:`reconnect` came yet)."""
        return self._disconnected

    @property
    def frozen(self) -> bool:
        return self._frozen

    @property
    def losing_next_answer(self) -> bool:
        """Whether a disconnection armed for after the next write (:meth:`disconnect`) waits for it."""
        return self._lose_next_answer

    def add_listener(self, listener: Listener) -> None:
        with self._cond:
            self._listeners[listener] = None

    def remove_listener(self, listener: Listener) -> None:
        with self._cond:
            self._listeners.pop(listener, None)

    def close(self) -> None:
        """End the session now (ephemerals deleted); a callback running finishes, none starts after.

        A client that cannot reach the ensemble (disconnected, frozen, the ensemble
        stopped) cannot tell it: its session is left to expire at its timeout.
        """
        ensemble = self._ensemble
        with ensemble._lock:
            if not self._stopped:
                self._stopped = True
                ensemble._clients.pop(self, None)
                if self._session.id in ensemble._sessions:
                    if ensemble._closed or (self._reachable_locked() and not self._frozen):
                        ensemble._end_session_locked(self._session)
                    else:
                        ensemble._arm_expiry_locked(self._session)
                ensemble._changed.notify_all()
        self._stop_thread()

    def abandon(self) -> None:
        """Stop as a killed process does: no more calls or callbacks, and the session lives on
        until the ensemble expires it, ``session_timeout_ms`` after it last heartbeat (now,
        or when the client lost the connection or froze)."""
        ensemble = self._ensemble
        with ensemble._lock:
            if self._stopped:
                return
            self._stopped = True
            ensemble._clients.pop(self, None)
            ensemble._arm_expiry_locked(self._session)
            ensemble._changed.notify_all()
        self._stop_thread()

    def __enter__(self) -> "InMemoryStoreClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ faults

    def disconnect(self, for_s: Optional[float] = None, after_next_write: bool = False) -> None:
        """Lose the connection to the ensemble (a network blip, a partition from ZooKeeper).

        The client hears SUSPENDED and its watches are dropped; its calls wait for
        the connection (see the class); its session no longer heartbeats and the
        ensemble expires it ``session_timeout_ms`` from now unless :meth:`reconnect`
        comes first. ``for_s``: reconnect by itself after that many seconds.

        ``after_next_write``: not now, but right after the client's next write that
        the ensemble applies: that call raises StoreConnectionError all the same (the
        connection went before its answer came, kazoo's ConnectionLoss), so the
        client cannot tell whether it was applied. :meth:`reconnect` disarms it.
        """
        with self._ensemble._lock:
            if self._stopped:
                return
            if after_next_write:
                self._lose_next_answer = True
                self._lose_for_s = for_s
                return
            self._disconnect_locked(for_s)

    def _disconnect_locked(self, for_s: Optional[float]) -> None:
        ensemble = self._ensemble
        self._link_generation += 1
        generation = self._link_generation
        self._disconnected = True
        self._settle_locked()
        if for_s is not None:
            def back() -> None:
                with ensemble._lock:
                    if self._link_generation == generation:
                        self._reconnect_locked()

            ensemble._timer_locked().add(TimedTask(time.monotonic() + for_s, back))

    def _answered_locked(self, path: str) -> None:
        """A write was applied: its answer is lost if :meth:`disconnect` asked for it."""
        if self._lose_next_answer and not self._stopped:
            self._lose_next_answer = False
            self._disconnect_locked(self._lose_for_s)
            raise StoreConnectionError(path, "the connection was lost before the answer came (the write was applied)")

    def reconnect(self) -> None:
        """Connect again after :meth:`disconnect`: CONNECTED with the same session if the ensemble
        has not expired it, else EXPIRED then CONNECTED with a new one (calls that waited
        raise SessionExpiredError). Connected, it calls off a disconnection armed for after
        the next write; one armed while disconnected applies to the first write once connected."""
        with self._ensemble._lock:
            if not self._disconnected:
                self._lose_next_answer = False
            self._reconnect_locked()

    def _reconnect_locked(self) -> None:
        if self._stopped or not self._disconnected:
            return
        self._link_generation += 1
        self._disconnected = False
        self._settle_locked()

    def freeze(self) -> None:
        """Stop as a stopped process (SIGSTOP, a long GC pause) does: the client notices nothing,
        but no call returns and no callback runs until :meth:`thaw`, and the session does not
        heartbeat (the ensemble expires it ``session_timeout_ms`` from now)."""
        with self._ensemble._lock:
            if self._stopped or self._frozen:
                return
            self._frozen = True
            self._thawed.clear()
            self._settle_locked()

    def thaw(self) -> None:
        """Resume after :meth:`freeze`: what was queued is delivered, then what the client finds
        (a session expired meanwhile: SUSPENDED, EXPIRED, CONNECTED with a new session)."""
        with self._ensemble._lock:
            if not self._frozen:
                return
            self._frozen = False
            self._settle_locked()
            self._ensemble._changed.notify_all()
        self._thawed.set()

    def _reachable_locked(self) -> bool:
        ensemble = self._ensemble
        return ensemble._serving and not ensemble._closed and not self._disconnected

    def _settle_locked(self) -> None:
        """Bring the session and the states the client hears in line with its connection (the
        ensemble's lock is held): a session heartbeats only while its client reaches the
        ensemble and is not frozen; a client hears what it can notice, when it can."""
        ensemble = self._ensemble
        session = self._session
        live = session.id in ensemble._sessions
        if self._stopped:
            if live:
                ensemble._arm_expiry_locked(session)
            return
        if not self._reachable_locked():
            session.drop_watches()  # the ensemble's side of the connection is gone, and its watches
            if live:
                ensemble._arm_expiry_locked(session)
            if self._frozen:
                self._broken = True
            elif self._state == CONNECTED:
                self._post_states_locked((SUSPENDED,))
            ensemble._changed.notify_all()
            return
        if self._frozen:
            if live:
                ensemble._arm_expiry_locked(session)
            else:
                self._broken = True  # the ensemble closed the connection when it expired the session
            return
        if self._broken:  # thawed: it finds its connection gone
            self._broken = False
            session.drop_watches()
            if self._state == CONNECTED:
                self._post_states_locked((SUSPENDED,))
        if live:
            session.cancel_expiry()
            if self._state != CONNECTED:
                self._post_states_locked((CONNECTED,))
        else:
            self._session = ensemble._open_session_locked(self, self._timeout_ms)
            self._post_states_locked((EXPIRED, CONNECTED))
        ensemble._changed.notify_all()

    # ------------------------------------------------------------------ reads

    def get(self, path: str, watch: Optional[Watcher] = None) -> Tuple[bytes, ZnodeStat]:
        validate_path(path)
        with self._ensemble._lock:
            session = self._live_locked(path)
            node = self._ensemble._node_locked(path)
            if watch is not None:
                session.data_watches.setdefault(path, {})[watch] = None
            return node.data, node.stat()

    def exists(self, path: str, watch: Optional[Watcher] = None) -> Optional[ZnodeStat]:
        validate_path(path)
        with self._ensemble._lock:
            session = self._live_locked(path)
            node = self._ensemble._nodes.get(path)
            if watch is not None:
                session.data_watches.setdefault(path, {})[watch] = None
            return None if node is None else node.stat()

    def get_children(self, path: str, watch: Optional[Watcher] = None) -> List[str]:
        validate_path(path)
        with self._ensemble._lock:
            session = self._live_locked(path)
            node = self._ensemble._node_locked(path)
            if watch is not None:
                session.child_watches.setdefault(path, {})[watch] = None
            return sorted(node.children)

    # ------------------------------------------------------------------ writes

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False,
               makepath: bool = False) -> str:
        validate_path(path, sequential)
        validate_data(data)
        ensemble = self._ensemble
        events: _Events = []
        with ensemble._lock:
            session = self._live_locked(path)
            try:
                if makepath:
                    ensemble._make_parents_locked(session, path, events)
                created = ensemble._create_locked(session, path, data, ephemeral, sequential,
                                                  ensemble._next_zxid_locked(), None, events)
            finally:
                ensemble._fire_locked(events)  # the parents made before a failure stay, as on ZooKeeper
            self._answered_locked(created)
            return created

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        validate_path(path)
        validate_data(data)
        ensemble = self._ensemble
        events: _Events = []
        with ensemble._lock:
            self._live_locked(path)
            stat = ensemble._set_locked(path, data, version, ensemble._next_zxid_locked(), None, events)
            ensemble._fire_locked(events)
            self._answered_locked(path)
            return stat

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        validate_path(path)
        if path == "/":
            raise InvalidPathError(path, "the root cannot be deleted")
        ensemble = self._ensemble
        events: _Events = []
        with ensemble._lock:
            self._live_locked(path)
            if recursive:
                ensemble._check_locked(path, version)  # before any descendant goes
                zxid = ensemble._next_zxid_locked()
                for descendant in ensemble._subtree_locked(path):
                    ensemble._delete_locked(descendant, -1, zxid, None, events)
                ensemble._delete_locked(path, version, zxid, None, events)
            else:
                ensemble._delete_locked(path, version, ensemble._next_zxid_locked(), None, events)
            ensemble._fire_locked(events)
            self._answered_locked(path)

    def ensure_path(self, path: str) -> None:
        validate_path(path)
        ensemble = self._ensemble
        events: _Events = []
        with ensemble._lock:
            session = self._live_locked(path)
            try:
                if path not in ensemble._nodes:
                    ensemble._make_parents_locked(session, path, events)
                    ensemble._create_locked(session, path, b"", False, False, ensemble._next_zxid_locked(), None,
                                            events)
            finally:
                ensemble._fire_locked(events)
            if events:
                self._answered_locked(path)

    def multi(self, ops: Sequence[Op]) -> List[object]:
        for op in ops:
            if not isinstance(op, (CheckOp, CreateOp, SetOp, DeleteOp)):
                raise InvalidArgumentTypeError("not a multi operation: %r" % (op,))
            validate_path(op.path)
            if isinstance(op, (CreateOp, SetOp)):
                validate_data(op.data)
        ensemble = self._ensemble
        events: _Events = []
        undo: _Undo = []
        results: List[object] = []
        with ensemble._lock:
            session = self._live_locked(ops[0].path if ops else "")
            zxid = ensemble._next_zxid_locked()
            try:
                for op in ops:
                    results.append(self._apply_locked(session, op, zxid, undo, events))
            except BaseException:
                for step in reversed(undo):
                    step()
                raise
            ensemble._fire_locked(events)
            self._answered_locked(ops[0].path if ops else "")
        return results

    def _apply_locked(self, session: _Session, op: Op, zxid: int, undo: _Undo, events: _Events) -> Union[bool, str,
                                                                                                         ZnodeStat]:
        ensemble = self._ensemble
        if isinstance(op, CheckOp):
            ensemble._check_locked(op.path, op.version)
            return True
        if isinstance(op, CreateOp):
            return ensemble._create_locked(session, op.path, op.data, op.ephemeral, False, zxid, undo, events)
        if isinstance(op, SetOp):
            return ensemble._set_locked(op.path, op.data, op.version, zxid, undo, events)
        ensemble._delete_locked(op.path, op.version, zxid, undo, events)
        return True

    # ------------------------------------------------------------------ delivery

    def _live_locked(self, path: str) -> _Session:
        """The session to make a call in, once the client reaches the ensemble (the lock is held;
        waiting releases it). A frozen client waits for its thaw; a disconnected one for the
        connection, up to the call timeout (StoreConnectionError); a session that expired
        meanwhile fails the call (SessionExpiredError), as kazoo fails its pending calls."""
        ensemble = self._ensemble
        session = self._session
        deadline: Optional[float] = None
        while True:
            if self._stopped:
                raise SessionExpiredError(path, "the client is closed")
            if self._frozen:
                ensemble._changed.wait()
                continue
            if not self._reachable_locked():
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self._call_timeout_s
                if now >= deadline:
                    raise StoreConnectionError(path, "no connection to the in-memory ensemble within %d ms" % (
                        self._call_timeout_s * 1000))
                ensemble._changed.wait(deadline - now)
                continue
            if self._session is not session:
                raise SessionExpiredError(path, "the session expired while the call waited for the connection")
            return session

    def _enqueue_locked(self, deliveries: List[_Delivery]) -> None:
        """Queue callbacks for the client's thread (the ensemble's lock is held: only append here)."""
        if self._stopped:  # closed or abandoned: nothing more is called
            return
        with self._cond:
            self._queue.extend(deliveries)
            self._cond.notify()

    def _post_states_locked(self, states: Sequence[str]) -> None:
        with self._cond:
            listeners = list(self._listeners)
        self._state = states[-1]
        self._enqueue_locked([(listener, state) for state in states for listener in listeners])

    def _stop_thread(self) -> None:
        """Drop what is queued and end the delivery thread (waiting for it, unless it is this one).
        Idempotent."""
        self._thawed.set()  # a thread waiting at the gate goes, to find it stopped
        if not self._thread.is_alive():
            return
        with self._cond:
            self._queue.clear()
            self._queue.append(None)
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _deliver(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                item = self._queue.popleft()
            if item is None:
                return
            self._thawed.wait()  # a frozen process runs no callback
            if self._stopped:
                return
            callback, argument = item
            try:
                callback(argument)
            except Exception:  # noqa: BLE001 - a watcher's failure must not stop the delivery of the others
                log.exception("metadata store callback %r failed on %r", callback, argument)
