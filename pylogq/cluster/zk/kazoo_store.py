"""The metadata store on a ZooKeeper ensemble, through kazoo.

:class:`ZooKeeperStore` implements
:class:`~pylogq.cluster.zk.store.MetadataStore` over one kazoo session.
The connect string is Kafka's ``zookeeper.connect``
(``host:port[,host:port...][/chroot]``); a chroot that does not exist yet is
created first, over a session of its own, as Kafka does. kazoo is imported here
only, when a store is made: nothing else in pylogq loads it.

What kazoo does that the store builds on (and the replication code must know):

- kazoo reconnects by itself. A lost connection is SUSPENDED; if the session
  survived, CONNECTED follows with the same session id. If it expired, kazoo
  reports it (EXPIRED here) and connects again with a new session (CONNECTED,
  a new :attr:`ZooKeeperStore.session_id`). Calls made while disconnected wait
  for the reconnection, at most the session timeout plus the connection timeout,
  then raise :class:`~pylogq.errors.StoreConnectionError`.
- kazoo drops every watch when the connection is lost, not only when the session
  ends (it calls them with an event of type NONE, which the store does not pass
  on). After SUSPENDED or EXPIRED, re-read and re-watch on CONNECTED.
- kazoo calls its state listeners on its connection thread, where a blocking
  call would deadlock the client; the store hands the states to kazoo's callback
  thread instead, the one that runs the watches, so listeners may call the store
  and see states in order with watch events.
- The session timeout asked for is what the server grants only within its
  ``minSessionTimeout``..``maxSessionTimeout`` (2 to 20 ticks by default);
  :attr:`ZooKeeperStore.session_timeout_ms` is the one asked for.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ...errors import (
    BadVersionError,
    ConfigError,
    InvalidArgumentTypeError,
    InvalidPathError,
    MetadataStoreError,
    NoChildrenForEphemeralsError,
    NoNodeError,
    NodeExistsError,
    NotEmptyError,
    SessionExpiredError,
    StoreConnectionError,
)
from .store import (
    CONNECTED,
    DEFAULT_SESSION_TIMEOUT_MS,
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

__all__ = ["ZooKeeperStore", "split_connect_string"]

log = logging.getLogger(__name__)

# kazoo's KazooState values -> the listener's states.
_STATES = {"CONNECTED": CONNECTED, "SUSPENDED": SUSPENDED, "LOST": EXPIRED}


def split_connect_string(connect: str) -> Tuple[str, Optional[str]]:
    """``host:port[,host:port...][/chroot]`` -> (the hosts, the chroot or None).

    A chroot of ``/`` is none. Raises ConfigError when no host is named and
    InvalidPathError for a chroot ZooKeeper would refuse.
    """
    hosts, slash, chroot = connect.strip().partition("/")
    if not hosts or any(not host.strip() for host in hosts.split(",")):
        raise ConfigError("zookeeper.connect %r: expected host:port[,host:port...][/chroot]" % connect)
    if not slash:
        return hosts, None
    chroot = "/" + chroot
    if chroot == "/":
        return hosts, None
    validate_path(chroot)
    return hosts, chroot


def _stat(stat: Any) -> ZnodeStat:
    return ZnodeStat(int(stat.version), int(stat.ephemeralOwner), int(stat.czxid), int(stat.mzxid),
                     int(stat.ctime), int(stat.mtime), int(stat.numChildren))


class _Watch:
    """A watcher as kazoo holds it: equal to another for the same function, so kazoo's set of
    watchers per znode calls a function registered twice once, as ZooKeeper does."""

    __slots__ = ("_store", "_watcher")

    def __init__(self, store: "ZooKeeperStore", watcher: Watcher) -> None:
        self._store = store
        self._watcher = watcher

    def __call__(self, event: Any) -> None:
        # kazoo calls every watch with a NONE event when the connection or the session is
        # lost and forgets it: that is no change of the znode, the listener reports it.
        self._store._callback_thread = threading.get_ident()
        if event.type == "NONE" or self._store._closed:
            return
        try:
            self._watcher(WatchedEvent(str(event.type), str(event.path)))
        except Exception:  # noqa: BLE001 - one watcher's failure must not stop the others
            log.exception("metadata store watcher %r failed on %s %s", self._watcher, event.type, event.path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Watch) and other._store is self._store and other._watcher == self._watcher

    def __hash__(self) -> int:
        return hash(self._watcher)


class ZooKeeperStore:
    """A session on a ZooKeeper ensemble; implements :class:`~pylogq.cluster.zk.store.MetadataStore`.

    Connects in the constructor: raises :class:`~pylogq.errors.StoreConnectionError`
    naming the connect string when no server answers within ``connection_timeout_ms``
    (default: the session timeout, as Kafka's ``zookeeper.connection.timeout.ms``).
    Thread-safe (kazoo's client is); watches and listeners run on kazoo's callback thread.
    """

    def __init__(self, connect: str, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                 connection_timeout_ms: Optional[int] = None) -> None:
        if session_timeout_ms <= 0:
            raise ConfigError("session_timeout_ms must be positive, not %r" % (session_timeout_ms,))
        connection_timeout_ms = session_timeout_ms if connection_timeout_ms is None else connection_timeout_ms
        if connection_timeout_ms <= 0:
            raise ConfigError("connection_timeout_ms must be positive, not %r" % (connection_timeout_ms,))
        hosts, chroot = split_connect_string(connect)
        self.connect_string = connect
        self._session_timeout_ms = session_timeout_ms
        self._connection_timeout_ms = connection_timeout_ms
        # A call waits for its answer through a reconnection, but not past the point where the
        # server has expired the session anyway.
        self._call_timeout_s = (session_timeout_ms + connection_timeout_ms) / 1000.0
        self._lock = threading.Lock()
        self._listeners: Dict[Listener, None] = {}
        self._closed = False
        #: The thread kazoo runs watches and (through the store) listeners on, once one has run.
        self._callback_thread: Optional[int] = None
        if chroot is not None:
            bootstrap = self._start(hosts, listen=False)
            try:
                self._kazoo_call(chroot, lambda: bootstrap.ensure_path_async(chroot))
            finally:
                self._stop(bootstrap)
        self._client = self._start(hosts + (chroot or ""), listen=True)

    def _start(self, hosts: str, listen: bool) -> Any:
        from kazoo.client import KazooClient  # type: ignore[import-untyped]
        from kazoo.retry import KazooRetry  # type: ignore[import-untyped]

        # Reconnect within a second of the server coming back (kazoo's default backoff grows
        # to an hour), as ZooKeeper's own client does.
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0)
        client = KazooClient(hosts=hosts, timeout=self._session_timeout_ms / 1000.0, connection_retry=retry)
        if listen:
            client.add_listener(lambda state: self._on_kazoo_state(client, state))
        # start_async rather than start: start() warns about a missing chroot, made above.
        live = client.start_async()
        live.wait(self._connection_timeout_ms / 1000.0)
        if not client.connected:
            self._stop(client)
            raise StoreConnectionError(self.connect_string, "no ZooKeeper server answered within %d ms"
                                       % self._connection_timeout_ms)
        return client

    @staticmethod
    def _stop(client: Any) -> None:
        try:
            client.stop()
        finally:
            client.close()

    # ------------------------------------------------------------------ session

    @property
    def session_id(self) -> int:
        client_id = self._client.client_id
        return int(client_id[0]) if client_id else 0

    @property
    def client_id(self) -> Optional[Tuple[int, bytes]]:
        """The session's id and password while connected (a connection that presents them
        takes the session over, which is how tests make ZooKeeper expire a session)."""
        client_id = self._client.client_id
        return (int(client_id[0]), bytes(client_id[1])) if client_id else None

    @property
    def session_timeout_ms(self) -> int:
        return self._session_timeout_ms

    @property
    def state(self) -> str:
        return EXPIRED if self._closed else _STATES.get(str(self._client.state), SUSPENDED)

    def add_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners[listener] = None

    def remove_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.pop(listener, None)

    def _on_kazoo_state(self, client: Any, kazoo_state: Any) -> None:
        """kazoo's listener, on its connection thread: pass the state to the callback thread."""
        state = _STATES.get(str(kazoo_state))
        if state is None or self._closed:
            return
        from kazoo.protocol.states import Callback  # type: ignore[import-untyped]

        client.handler.dispatch_callback(Callback("session", self._notify, (state,)))

    def _notify(self, state: str) -> None:
        self._callback_thread = threading.get_ident()
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            if self._closed:
                return
            try:
                listener(state)
            except Exception:  # noqa: BLE001 - one listener's failure must not stop the others
                log.exception("metadata store listener %r failed on %s", listener, state)

    def close(self) -> None:
        """End the session (kazoo's stop); from a watcher or listener, the stop is finished by a
        thread of its own, since kazoo's stop waits for the very thread that runs them."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if threading.get_ident() == self._callback_thread:
            threading.Thread(target=self._stop, args=(self._client,), name="pylogq-metadata-close",
                             daemon=True).start()
        else:
            self._stop(self._client)

    def __enter__(self) -> "ZooKeeperStore":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ calls

    def _kazoo_call(self, path: str, start: Callable[[], Any], creating: bool = False) -> Any:
        """Start a kazoo call, wait for its answer, and raise pylogq's error for kazoo's."""
        if self._closed:
            raise SessionExpiredError(path, "the store is closed")
        try:
            return start().get(timeout=self._call_timeout_s)
        except Exception as exc:  # noqa: BLE001 - kazoo's errors are translated, others go on as they are
            error = self._translate(exc, path, creating)
            if error is None:
                raise
            raise error from None

    def _translate(self, exc: BaseException, path: str, creating: bool = False) -> Optional[MetadataStoreError]:
        """pylogq's error for a kazoo error about ``path``; None for an error that is not kazoo's."""
        from kazoo import exceptions as kz  # type: ignore[import-untyped]
        from kazoo.handlers.threading import KazooTimeoutError  # type: ignore[import-untyped]

        if isinstance(exc, kz.NoNodeError):
            return NoNodeError(path, "its parent %s does not exist" % parent_of(path) if creating else "")
        if isinstance(exc, kz.NodeExistsError):
            return NodeExistsError(path)
        if isinstance(exc, kz.BadVersionError):
            return BadVersionError(path)
        if isinstance(exc, kz.NotEmptyError):
            return NotEmptyError(path)
        if isinstance(exc, kz.NoChildrenForEphemeralsError):
            return NoChildrenForEphemeralsError(path, "its parent %s is ephemeral" % parent_of(path))
        if isinstance(exc, kz.ConnectionClosedError):
            return SessionExpiredError(path, "the store is closed")
        if isinstance(exc, kz.SessionExpiredError):
            return SessionExpiredError(path)
        if isinstance(exc, (kz.ConnectionLoss, kz.ConnectionDropped, kz.OperationTimeoutError)):
            return StoreConnectionError(path, "connection to %s lost (%s)" % (self.connect_string,
                                                                             type(exc).__name__))
        if isinstance(exc, KazooTimeoutError):
            return StoreConnectionError(path, "no answer from %s within %d ms" % (
                self.connect_string, self._call_timeout_s * 1000))
        if isinstance(exc, kz.BadArgumentsError):
            return InvalidPathError(path)
        if isinstance(exc, kz.KazooException):
            return MetadataStoreError(path, "%s: %s" % (type(exc).__name__, exc))
        return None

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False,
               makepath: bool = False) -> str:
        validate_path(path, sequential)
        validate_data(data)
        created = self._kazoo_call(path, lambda: self._client.create_async(
            path, data, ephemeral=ephemeral, sequence=sequential, makepath=makepath), creating=True)
        return str(created)

    def get(self, path: str, watch: Optional[Watcher] = None) -> Tuple[bytes, ZnodeStat]:
        validate_path(path)
        kazoo_watch = None if watch is None else _Watch(self, watch)
        data, stat = self._kazoo_call(path, lambda: self._client.get_async(path, watch=kazoo_watch))
        return bytes(data or b""), _stat(stat)

    def exists(self, path: str, watch: Optional[Watcher] = None) -> Optional[ZnodeStat]:
        validate_path(path)
        kazoo_watch = None if watch is None else _Watch(self, watch)
        stat = self._kazoo_call(path, lambda: self._client.exists_async(path, watch=kazoo_watch))
        return None if stat is None else _stat(stat)

    def get_children(self, path: str, watch: Optional[Watcher] = None) -> List[str]:
        validate_path(path)
        kazoo_watch = None if watch is None else _Watch(self, watch)
        children = self._kazoo_call(path, lambda: self._client.get_children_async(path, watch=kazoo_watch))
        return sorted(str(child) for child in children)

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        validate_path(path)
        validate_data(data)
        return _stat(self._kazoo_call(path, lambda: self._client.set_async(path, data, version)))

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        validate_path(path)
        if path == "/":
            raise InvalidPathError(path, "the root cannot be deleted")
        if recursive:
            self._delete_tree(path, version)
        else:
            self._kazoo_call(path, lambda: self._client.delete_async(path, version))

    def _delete_tree(self, path: str, version: int) -> None:
        """Descendants first, then ``path``: single deletes, as Kafka's deleteRecursive (not one write).

        A version that does not match fails before any descendant goes; a child
        created meanwhile is found on the next pass.
        """
        if version != -1:
            stat = self.exists(path)
            if stat is None:
                raise NoNodeError(path)
            if stat.version != version:
                raise BadVersionError(path, "expected version %d, the znode is at %d" % (version, stat.version))
        while True:
            for name in self.get_children(path):
                try:
                    self._delete_tree(join_path(path, name), -1)
                except NoNodeError:
                    pass  # deleted by someone else meanwhile
            try:
                self._kazoo_call(path, lambda: self._client.delete_async(path, version))
                return
            except NotEmptyError:
                continue

    def ensure_path(self, path: str) -> None:
        validate_path(path)
        self._kazoo_call(path, lambda: self._client.ensure_path_async(path))

    def multi(self, ops: Sequence[Op]) -> List[object]:
        if not ops:
            return []
        transaction = self._client.transaction()
        for op in ops:
            if not isinstance(op, (CheckOp, CreateOp, SetOp, DeleteOp)):
                raise InvalidArgumentTypeError("not a multi operation: %r" % (op,))
            validate_path(op.path)
            if isinstance(op, CheckOp):
                transaction.check(op.path, op.version)
            elif isinstance(op, CreateOp):
                validate_data(op.data)
                transaction.create(op.path, op.data, ephemeral=op.ephemeral)
            elif isinstance(op, SetOp):
                validate_data(op.data)
                transaction.set_data(op.path, op.data, op.version)
            else:
                transaction.delete(op.path, op.version)
        results = self._kazoo_call(ops[0].path, transaction.commit_async)
        from kazoo.exceptions import RolledBackError, RuntimeInconsistency  # type: ignore[import-untyped]

        # kazoo answers a failed multi with an exception per operation: the failing one's
        # own, "rolled back" for those before it, "runtime inconsistency" for those after.
        for op, result in zip(ops, results):
            if isinstance(result, Exception) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
                error = self._translate(result, op.path, creating=isinstance(op, CreateOp))
                raise error if error is not None else result
        for op, result in zip(ops, results):
            if isinstance(result, Exception):
                raise MetadataStoreError(op.path, "multi failed: %s" % type(result).__name__)
        answers: List[object] = []
        for op, result in zip(ops, results):
            if isinstance(op, SetOp):
                answers.append(_stat(result))
            elif isinstance(op, CreateOp):
                answers.append(str(result))
            else:
                answers.append(True)
        return answers
