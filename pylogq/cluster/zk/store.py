"""The metadata store: ZooKeeper's data model, the one interface the controller and brokers use.

A cluster keeps its metadata (brokers, topics, partition states, the controller)
in a tree of znodes, as Kafka 0.8-2.x does in ZooKeeper. :class:`MetadataStore`
is that tree's API with ZooKeeper's semantics, implemented twice:
:class:`~pylogq.cluster.zk.memory_store.InMemoryZooKeeper` (one process, no server:
tests and embedded clusters) and :class:`~pylogq.cluster.zk.kazoo_store.ZooKeeperStore`
(a real ensemble, through kazoo). The same tests hold both to these rules:

- A znode has bytes of data, a version (0 at creation, +1 per set) and a stat.
  ``version=-1`` in a set, delete or check matches any version; another value
  makes the call conditional (:class:`~pylogq.errors.BadVersionError` when the
  znode has moved on).
- Every write gets the next zxid of the store; ``czxid`` (the zxid that created
  the znode) therefore grows with every creation, which is why Kafka uses a broker
  znode's czxid as the broker epoch. A :meth:`MetadataStore.multi` is one write:
  all of its operations or none.
- Ephemeral znodes belong to the session that created them and go when it ends:
  :meth:`MetadataStore.close`, an expiry, or a client that stopped answering for
  the session timeout. They have no children.
- A sequential create appends the parent's 10-digit counter to the name: the
  number of children created under the parent so far (deletions do not count).
- Watches are one-shot: a function passed to ``get``, ``exists`` or
  ``get_children`` is called once, with the first change that concerns it, then
  forgotten. ``get`` and ``exists`` on a znode watch its data (CHANGED, DELETED);
  ``exists`` on a missing znode watches for its creation (CREATED);
  ``get_children`` watches the set of children (CHILD) and the znode's deletion
  (DELETED). A function registered twice for the same znode and kind is called
  once. A read that raises leaves no watch.
- Watch functions are called on a thread the store owns, never inside the call
  that made the change and never under the store's lock, one at a time, in the
  order the changes happened; they may call the store. One that raises is logged.
- Session states go to the listeners: SUSPENDED when the connection is lost
  (the session may survive), EXPIRED when the session is gone (its ephemerals and
  its watches with it), CONNECTED when connected again (after EXPIRED, with a
  new session: :attr:`MetadataStore.session_id` changes). Watches do not survive
  a lost connection either: after SUSPENDED or EXPIRED, re-read and re-watch on
  the next CONNECTED. Listeners run on the store's thread too and must not block.
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Protocol, Sequence, Tuple, Union

from ...errors import InvalidArgumentTypeError, InvalidPathError

__all__ = [
    "CONNECTED", "SUSPENDED", "EXPIRED", "SESSION_STATES",
    "CREATED", "DELETED", "CHANGED", "CHILD", "EVENT_TYPES",
    "SEQUENCE_DIGITS", "DEFAULT_SESSION_TIMEOUT_MS",
    "ZnodeStat", "WatchedEvent", "Watcher", "Listener",
    "CheckOp", "CreateOp", "SetOp", "DeleteOp", "Op",
    "MetadataStore", "validate_path", "validate_data", "parent_of", "join_path",
]

#: Session states a listener receives.
CONNECTED = "connected"
SUSPENDED = "suspended"
EXPIRED = "expired"
SESSION_STATES = (CONNECTED, SUSPENDED, EXPIRED)

#: Watch event types, ZooKeeper's names.
CREATED = "CREATED"
DELETED = "DELETED"
CHANGED = "CHANGED"
CHILD = "CHILD"
EVENT_TYPES = (CREATED, DELETED, CHANGED, CHILD)

#: Width of the counter a sequential create appends ("%010d", as ZooKeeper formats it).
SEQUENCE_DIGITS = 10

#: Kafka's ``zookeeper.session.timeout.ms`` default (2.5 and later).
DEFAULT_SESSION_TIMEOUT_MS = 18000


class ZnodeStat(NamedTuple):
    """A znode's metadata, the fields of ZooKeeper's Stat that the cluster uses."""

    version: int
    """Data version: 0 at creation, +1 per set."""
    ephemeral_owner: int
    """The owning session's id for an ephemeral znode, 0 for a persistent one."""
    czxid: int
    """The zxid of the write that created the znode (grows with every creation in a store)."""
    mzxid: int
    """The zxid of the last write that set the znode's data (the creation's at first)."""
    ctime: int
    """Creation time, milliseconds since the epoch."""
    mtime: int
    """Time of the last set, milliseconds since the epoch."""
    num_children: int


class WatchedEvent(NamedTuple):
    """What a watch reports: the kind of change (CREATED, DELETED, CHANGED, CHILD) and the znode."""

    type: str
    path: str


Watcher = Callable[[WatchedEvent], None]
Listener = Callable[[str], None]


class CheckOp(NamedTuple):
    """In a multi: the znode must exist with this version (-1: any), or the multi fails."""

    path: str
    version: int


class CreateOp(NamedTuple):
    """In a multi: create a znode (its result is the created path)."""

    path: str
    data: bytes = b""
    ephemeral: bool = False


class SetOp(NamedTuple):
    """In a multi: set a znode's data if its version matches (-1: any); its result is the new stat."""

    path: str
    data: bytes
    version: int = -1


class DeleteOp(NamedTuple):
    """In a multi: delete a childless znode if its version matches (-1: any)."""

    path: str
    version: int = -1


Op = Union[CheckOp, CreateOp, SetOp, DeleteOp]


class MetadataStore(Protocol):
    """A client session on a tree of znodes with ZooKeeper's semantics (see the module docstring).

    Thread-safe: any thread may call any method. Calls made by one thread are
    applied in the order made. Paths are absolute (``/brokers/ids/0``); a bad one
    raises :class:`~pylogq.errors.InvalidPathError`. Every error is a
    :class:`~pylogq.errors.MetadataStoreError` naming the path: ``NoNodeError``,
    ``NodeExistsError``, ``BadVersionError``, ``NotEmptyError``,
    ``NoChildrenForEphemeralsError``, ``SessionExpiredError`` (also for calls after
    :meth:`close`), ``StoreConnectionError``.
    """

    @property
    def session_id(self) -> int:
        """The current session's id (the ``ephemeral_owner`` of its ephemeral znodes)."""
        ...

    @property
    def session_timeout_ms(self) -> int:
        """How long the session outlives a client that stopped answering."""
        ...

    @property
    def state(self) -> str:
        """The session's state now: CONNECTED, SUSPENDED or EXPIRED."""
        ...

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False,
               makepath: bool = False) -> str:
        """Create a znode; -> its path (with the sequence number when ``sequential``).

        ``makepath`` creates missing parents (persistent, empty) first;
        without it a missing parent raises ``NoNodeError``.
        """
        ...

    def get(self, path: str, watch: Optional[Watcher] = None) -> Tuple[bytes, ZnodeStat]:
        """The znode's data and stat; ``watch`` is called at its next set or its deletion."""
        ...

    def exists(self, path: str, watch: Optional[Watcher] = None) -> Optional[ZnodeStat]:
        """The znode's stat, None if it does not exist; ``watch`` as for :meth:`get`, or at its creation."""
        ...

    def get_children(self, path: str, watch: Optional[Watcher] = None) -> List[str]:
        """The names of the znode's children, sorted; ``watch`` is called when one comes or goes
        (CHILD) or the znode is deleted (DELETED)."""
        ...

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        """Replace the znode's data if its version matches (-1: any); -> the new stat."""
        ...

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """Delete the znode if its version matches (-1: any); ``recursive`` deletes its
        descendants first (the version applies to ``path`` only)."""
        ...

    def ensure_path(self, path: str) -> None:
        """Create ``path`` and its missing parents (persistent, empty); nothing if it exists."""
        ...

    def multi(self, ops: Sequence[Op]) -> List[object]:
        """Apply the operations as one write, all or none; -> a result per operation.

        Results: ``True`` for a check or a delete, the created path for a create,
        the new stat for a set. The first operation that fails raises its error
        (naming its path) and nothing is applied.
        """
        ...

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(state)`` at each change of the session's state."""
        ...

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener`` (nothing if it was not added)."""
        ...

    def close(self) -> None:
        """End the session now: its ephemeral znodes are deleted (others' watches fire);
        no watch or listener of this store is called afterwards. Idempotent."""
        ...


# ZooKeeper's PathUtils.validatePath refuses these code points.
_BAD_CHARS = frozenset(
    [chr(c) for c in range(0x00, 0x20)] + [chr(c) for c in range(0x7F, 0xA0)]
)


def _bad_char(ch: str) -> bool:
    return ch in _BAD_CHARS or "\ud800" <= ch <= "\uf8ff" or "\ufff0" <= ch <= "\uffff"


def validate_path(path: str, sequential: bool = False) -> None:
    """Raise :class:`~pylogq.errors.InvalidPathError` unless ZooKeeper would accept ``path``.

    ZooKeeper's rules (``PathUtils.validatePath``): absolute, no empty, ``.`` or
    ``..`` component, no trailing ``/`` except for the root or a sequential create
    (whose name is then only the counter), no control or private-use characters.
    """
    if not isinstance(path, str):
        raise InvalidPathError(repr(path), "a path is a str")
    if not path.startswith("/"):
        raise InvalidPathError(path, "a path starts with /")
    if path == "/":
        return
    body = path[1:-1] if sequential and path.endswith("/") else path[1:]
    if path.endswith("/") and not sequential:
        raise InvalidPathError(path, "a path does not end with /")
    for name in body.split("/"):
        if name == "":
            raise InvalidPathError(path, "empty name")
        if name in (".", ".."):
            raise InvalidPathError(path, "relative name %r" % name)
    for ch in path:
        if _bad_char(ch):
            raise InvalidPathError(path, "invalid character %r" % ch)


def validate_data(data: bytes) -> None:
    """Raise TypeError unless ``data`` is bytes (a znode holds bytes; encoding is the caller's)."""
    if not isinstance(data, bytes):
        raise InvalidArgumentTypeError("znode data must be bytes, not %s" % type(data).__name__)


def parent_of(path: str) -> str:
    """The parent's path ("/" for a top-level znode)."""
    parent = path.rsplit("/", 1)[0]
    return parent or "/"


def join_path(parent: str, name: str) -> str:
    """``parent/name``, without a doubled ``/`` under the root."""
    return parent + name if parent.endswith("/") else parent + "/" + name
