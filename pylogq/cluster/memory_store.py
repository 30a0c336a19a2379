"""The metadata store in one process: a ZooKeeper ensemble's tree, zxids and sessions, in memory.

:class:`InMemoryZooKeeper` plays the ensemble: one tree of znodes, one zxid
counter, the sessions. :meth:`InMemoryZooKeeper.connect` opens a session and
returns its client, an :class:`InMemoryStoreClient` that implements
:class:`~pylogq.cluster.metadata_store.MetadataStore` with ZooKeeper's semantics
(see that module), so a replicated cluster runs in one process, in tests and
embedded, on the same controller code as on ZooKeeper.

Faults a cluster must survive are driven from here:
:meth:`InMemoryZooKeeper.expire_session` (what ZooKeeper does to a client it lost
touch with: the session's ephemerals go and the client starts a new session, as
kazoo does) and :meth:`InMemoryStoreClient.abandon` (a process killed mid-flight:
nothing more from it, and the ensemble expires its session only once the session
timeout has passed).

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

from ..errors import (
    BadVersionError,
    ConfigError,
    InvalidPathError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from .delayed import TimedTask, Timer
from .metadata_store import (
    CHANGED,
    CHILD,
    CONNECTED,
    CREATED,
    DEFAULT_SESSION_TIMEOUT_MS,
    DELETED,
    EXPIRED,
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

    __slots__ = ("id", "timeout_ms", "client", "ephemerals", "data_watches", "child_watches")

    def __init__(self, session_id: int, timeout_ms: int, client: "InMemoryStoreClient") -> None:
        self.id = session_id
        self.timeout_ms = timeout_ms
        self.client = client
        self.ephemerals: Set[str] = set()
        # path -> watchers, a dict as an ordered set: one call per function, in registration order.
        self.data_watches: Dict[str, Dict[Watcher, None]] = {}
        self.child_watches: Dict[str, Dict[Watcher, None]] = {}


class InMemoryZooKeeper:
    """A ZooKeeper ensemble in memory: one tree, one zxid sequence, the sessions of its clients.

    Invariants: every znode's parent exists and is persistent; a znode's
    ``czxid`` is larger than that of every znode created before it; an ephemeral
    znode's owner is a live session. Thread-safe: one lock guards the tree and the
    sessions; no callback runs under it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: Dict[str, _Node] = {"/": _Node(b"", 0, 0, _now_ms())}
        self._zxid = 0
        self._sessions: Dict[int, _Session] = {}
        self._session_numbers = itertools.count(1)
        self._timer: Optional[Timer] = None
        self._closed = False

    # ------------------------------------------------------------------ sessions

    def connect(self, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS) -> "InMemoryStoreClient":
        """Open a session; -> its client, connected."""
        if session_timeout_ms <= 0:
            raise ConfigError("session_timeout_ms must be positive, not %r" % (session_timeout_ms,))
        return InMemoryStoreClient(self, session_timeout_ms)

    def expire_session(self, session_id: int) -> bool:
        """Expire a session as ZooKeeper does when it loses touch with the client; False if it was not live.

        Its ephemeral znodes are deleted (others' watches fire) and its watches
        dropped. A client still running hears EXPIRED, gets a new session at once
        and hears CONNECTED (kazoo reconnects so): calls on it go on working, as the new session.
        """
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return False
            self._end_session_locked(session)
            client = session.client
            if client._stopped:
                pass  # closed or abandoned: nobody to reconnect
            elif self._closed:
                client._stopped = True  # no ensemble to reconnect to; close() ends its thread
            else:
                client._session = self._open_session_locked(client, session.timeout_ms)
                client._post_states_locked((EXPIRED, CONNECTED))
            return True

    def live_sessions(self) -> List[int]:
        """The ids of the sessions not ended yet (an abandoned one until its timeout), sorted."""
        with self._lock:
            return sorted(self._sessions)

    def close(self) -> None:
        """Close every client and stop the session timer; the tree stays readable by no one."""
        with self._lock:
            self._closed = True
            clients = [session.client for session in self._sessions.values()]
            timer, self._timer = self._timer, None
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
        session.data_watches.clear()
        session.child_watches.clear()
        if session.ephemerals:
            zxid = self._next_zxid_locked()
            events: _Events = []
            for path in sorted(session.ephemerals, reverse=True):
                self._delete_locked(path, -1, zxid, None, events)
            self._fire_locked(events)

    def _abandon_locked(self, session: _Session) -> None:
        if self._closed:
            return  # the ensemble and its sessions are gone already
        if self._timer is None:
            self._timer = Timer("pylogq-metadata-sessions")
        deadline = time.monotonic() + session.timeout_ms / 1000.0

        def expire() -> None:
            self.expire_session(session.id)

        self._timer.add(TimedTask(deadline, expire))

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
    """A client session of an :class:`InMemoryZooKeeper`, a :class:`~pylogq.cluster.metadata_store.MetadataStore`.

    Thread-safe. Watch events and session states are delivered by the client's
    own thread (``pylogq-metadata-events``), one at a time, in the order the
    ensemble produced them. After :meth:`close` or :meth:`abandon` every call
    raises :class:`~pylogq.errors.SessionExpiredError`.
    """

    def __init__(self, ensemble: InMemoryZooKeeper, session_timeout_ms: int) -> None:
        self._ensemble = ensemble
        self._timeout_ms = session_timeout_ms
        self._stopped = False
        self._state = CONNECTED
        self._cond = threading.Condition(threading.Lock())
        self._queue: Deque[Optional[_Delivery]] = collections.deque()
        self._listeners: Dict[Listener, None] = {}
        with ensemble._lock:
            self._session = ensemble._open_session_locked(self, session_timeout_ms)
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

    def add_listener(self, listener: Listener) -> None:
        with self._cond:
            self._listeners[listener] = None

    def remove_listener(self, listener: Listener) -> None:
        with self._cond:
            self._listeners.pop(listener, None)

    def close(self) -> None:
        """End the session now (ephemerals deleted); a callback running finishes, none starts after."""
        with self._ensemble._lock:
            stopped, self._stopped = self._stopped, True
            if not stopped and self._session.id in self._ensemble._sessions:
                self._ensemble._end_session_locked(self._session)
        self._stop_thread()

    def abandon(self) -> None:
        """Stop as a killed process does: no more calls or callbacks, and the session lives on
        until the ensemble expires it, ``session_timeout_ms`` from now."""
        with self._ensemble._lock:
            if self._stopped:
                return
            self._stopped = True
            if self._session.id in self._ensemble._sessions:
                self._ensemble._abandon_locked(self._session)
        self._stop_thread()

    def __enter__(self) -> "InMemoryStoreClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
                return ensemble._create_locked(session, path, data, ephemeral, sequential,
                                               ensemble._next_zxid_locked(), None, events)
            finally:
                ensemble._fire_locked(events)  # the parents made before a failure stay, as on ZooKeeper

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        validate_path(path)
        validate_data(data)
        ensemble = self._ensemble
        events: _Events = []
        with ensemble._lock:
            self._live_locked(path)
            stat = ensemble._set_locked(path, data, version, ensemble._next_zxid_locked(), None, events)
            ensemble._fire_locked(events)
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

    def multi(self, ops: Sequence[Op]) -> List[object]:
        for op in ops:
            if not isinstance(op, (CheckOp, CreateOp, SetOp, DeleteOp)):
                raise TypeError("not a multi operation: %r" % (op,))
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
        if self._stopped:
            raise SessionExpiredError(path, "the client is closed")
        return self._session

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
            callback, argument = item
            try:
                callback(argument)
            except Exception:  # noqa: BLE001 - a watcher's failure must not stop the delivery of the others
                log.exception("metadata store callback %r failed on %r", callback, argument)
