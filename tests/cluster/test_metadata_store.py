"""The metadata store's contract, held by both implementations: in memory and on a real ZooKeeper.

The tests are written once (:class:`StoreContract`) and bound to each store by a
backend (uvloop's way): :class:`TestInMemoryStore` and :class:`TestZooKeeperStore`
(Debian's ZooKeeper, one server for the test session, a chroot per test). Each
backend also knows how to make the store's session end the hard ways: an expiry
(ZooKeeper's own, forced by taking the session over) and an owner that stops
answering (an abandoned in-memory client; a killed process on ZooKeeper).

Nothing here sleeps to synchronize: a test waits for the event it expects, with a
deadline. That a watch did not fire is shown by a barrier: the store delivers its
watch events in order, so once a later change's event has arrived, an earlier one
would have too.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from pylogq import errors
from pylogq.cluster.zk.kazoo_store import ZooKeeperStore, split_connect_string
from pylogq.cluster.zk.memory_store import InMemoryStoreClient, InMemoryZooKeeper
from pylogq.cluster.zk.store import (
    CHANGED,
    CHILD,
    CONNECTED,
    CREATED,
    DELETED,
    EXPIRED,
    SUSPENDED,
    CheckOp,
    CreateOp,
    DeleteOp,
    MetadataStore,
    SetOp,
    WatchedEvent,
    ZnodeStat,
    validate_path,
)

from .._proxy import TcpProxy
from .._zookeeper import ZooKeeperServer

#: The metadata store (in memory and on ZooKeeper) holds no records and has no pure-Python twin:
#: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

DEADLINE = 30.0  # seconds any expected event may take on a loaded machine
STORE_TIMEOUT_MS = 4000  # the tests' sessions: long enough that a busy machine loses none by accident
#: Sessions that must outlive a cut connection: kazoo tries again at most a second apart.
BLIP_SESSION_MS = 8000
#: Sessions that must outlive a restart of ZooKeeper (its JVM starts in a few seconds).
RESTART_SESSION_MS = 20000


class Recorder:
    """A watcher or listener that records what it is called with, and on which thread."""

    def __init__(self) -> None:
        self.items: List[Any] = []
        self.threads: List[int] = []
        self._cond = threading.Condition()

    def __call__(self, item: Any) -> None:
        with self._cond:
            self.items.append(item)
            self.threads.append(threading.get_ident())
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[List[Any]], bool], timeout: float = DEADLINE) -> List[Any]:
        with self._cond:
            assert self._cond.wait_for(lambda: predicate(self.items), timeout), "waited in vain; got %r" % self.items
            return list(self.items)

    def wait_count(self, n: int, timeout: float = DEADLINE) -> List[Any]:
        return self.wait_for(lambda items: len(items) >= n, timeout)


def heard(states: Recorder) -> List[Any]:
    """The session states a listener got, without the first CONNECTED (kazoo may report the
    connection a store was made with after a listener was added)."""
    items = list(states.items)
    return items[1:] if items[:1] == [CONNECTED] else items


def barrier(observer: MetadataStore, writer: Optional[MetadataStore] = None) -> None:
    """Return once ``observer`` has been handed every watch event of the changes made before
    (by itself or ``writer``): it delivers in order, and this waits for a later change's event."""
    writer = observer if writer is None else writer
    path = "/barrier-%s" % uuid.uuid4().hex
    seen = threading.Event()
    observer.exists(path, watch=lambda event: seen.set())
    writer.create(path)
    assert seen.wait(DEADLINE), "the barrier's watch did not fire"
    writer.delete(path)


class DoomedOwner:
    """The owner of an ephemeral znode that will stop answering without closing its session."""

    def __init__(self, session_id: int, kill: Callable[[], None]) -> None:
        self.session_id = session_id
        self.kill = kill


class Backend:
    """How the contract's tests get stores of one implementation and end their sessions."""

    #: Whether the session ends exactly at the timeout (in memory) or within ZooKeeper's
    #: tolerance (the server counts from the client's last ping, up to a third before).
    exact_timeout = False

    def __init__(self) -> None:
        self.stores: List[Any] = []

    def connect(self, session_timeout_ms: int = STORE_TIMEOUT_MS) -> Any:
        raise NotImplementedError

    def expire(self, store: Any) -> None:
        """End ``store``'s session as the ensemble does for a client it lost; returns once done."""
        raise NotImplementedError

    def doomed_owner(self, path: str, session_timeout_ms: int) -> DoomedOwner:
        """A session, elsewhere, that created ``path`` as an ephemeral znode and will be killed."""
        raise NotImplementedError

    def connect_cuttable(self, session_timeout_ms: int, connection_timeout_ms: Optional[int] = None) -> Any:
        """A store whose connection :meth:`disconnect` can cut (and that survives a restart of the ensemble)."""
        raise NotImplementedError

    def disconnect(self, store: Any) -> None:
        """Cut ``store``'s connection (it is told at once, as by a reset) and keep it from connecting again."""
        raise NotImplementedError

    def reconnect(self, store: Any) -> None:
        """Let ``store`` connect again after :meth:`disconnect`."""
        raise NotImplementedError

    def restart_ensemble(self, while_down: Callable[[], None]) -> None:
        """Stop the ensemble (every server, abruptly), call ``while_down``, start it on the same data."""
        raise NotImplementedError

    def close(self) -> None:
        for store in self.stores:
            store.close()


class MemoryBackend(Backend):
    exact_timeout = True

    def __init__(self) -> None:
        super().__init__()
        self.ensemble = InMemoryZooKeeper()

    def connect(self, session_timeout_ms: int = STORE_TIMEOUT_MS) -> InMemoryStoreClient:
        store = self.ensemble.connect(session_timeout_ms)
        self.stores.append(store)
        return store

    def expire(self, store: Any) -> None:
        assert self.ensemble.expire_session(store.session_id)

    def doomed_owner(self, path: str, session_timeout_ms: int) -> DoomedOwner:
        owner = self.connect(session_timeout_ms)
        owner.create(path, b"owner", ephemeral=True)
        return DoomedOwner(owner.session_id, owner.abandon)

    def connect_cuttable(self, session_timeout_ms: int, connection_timeout_ms: Optional[int] = None) -> Any:
        store = self.ensemble.connect(session_timeout_ms, connection_timeout_ms)
        self.stores.append(store)
        return store

    def disconnect(self, store: Any) -> None:
        store.disconnect()

    def reconnect(self, store: Any) -> None:
        store.reconnect()

    def restart_ensemble(self, while_down: Callable[[], None]) -> None:
        self.ensemble.stop()
        try:
            while_down()
        finally:
            self.ensemble.start()

    def close(self) -> None:
        super().close()
        self.ensemble.close()


class ResettingProxy(TcpProxy):
    """A proxy whose :meth:`disconnect` closes the connections it carries (their client is told
    at once, as by a connection reset or a server's restart) and holds new ones until
    :meth:`~TcpProxy.heal`, so the client cannot connect again before it is let."""

    def disconnect(self) -> None:
        self.cut()
        with self._lock:
            pairs, self._pairs = self._pairs, []
            labels = getattr(self, "_labels", {})
            for a, b in pairs:
                labels.pop(a, None)
                labels.pop(b, None)
        for a, b in pairs:
            self._drop(a, b)


# An ephemeral znode's owner in a process of its own, to be killed: the server hears nothing more.
_OWNER = """
import sys
from pylogq.cluster.zk.kazoo_store import ZooKeeperStore
store = ZooKeeperStore(sys.argv[1], session_timeout_ms=int(sys.argv[2]))
store.create(sys.argv[3], b"owner", ephemeral=True)
print(store.session_id, flush=True)
sys.stdin.read()
"""


class ZooKeeperBackend(Backend):
    def __init__(self, server: ZooKeeperServer, connect: str) -> None:
        super().__init__()
        self.server = server
        self.connect_string = connect
        self.owners: List["subprocess.Popen[str]"] = []
        self.proxies: List[ResettingProxy] = []
        self.proxy_of: Dict[int, ResettingProxy] = {}

    def connect(self, session_timeout_ms: int = STORE_TIMEOUT_MS) -> ZooKeeperStore:
        store = ZooKeeperStore(self.connect_string, session_timeout_ms=session_timeout_ms,
                               connection_timeout_ms=20000)
        self.stores.append(store)
        return store

    def expire(self, store: Any) -> None:
        self.server.expire_session(store)

    def doomed_owner(self, path: str, session_timeout_ms: int) -> DoomedOwner:
        proc = subprocess.Popen([sys.executable, "-c", _OWNER, self.connect_string, str(session_timeout_ms), path],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.owners.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip().isdigit(), "the owner process failed (status %r)" % proc.poll()

        def kill() -> None:
            proc.kill()
            proc.wait(DEADLINE)

        return DoomedOwner(int(line), kill)

    def connect_cuttable(self, session_timeout_ms: int, connection_timeout_ms: Optional[int] = None) -> Any:
        """Through a proxy of its own, named twice: a client waits for an unanswered connection
        half the session timeout rather than all of it (see ``restartable_connect_string``)."""
        proxy = ResettingProxy(("127.0.0.1", self.server.port))
        self.proxies.append(proxy)
        _, chroot = split_connect_string(self.connect_string)
        connect = "%s,%s%s" % (proxy.address, proxy.address, chroot or "")
        store = ZooKeeperStore(connect, session_timeout_ms=session_timeout_ms,
                               connection_timeout_ms=connection_timeout_ms or 20000)
        self.stores.append(store)
        self.proxy_of[id(store)] = proxy
        return store

    def disconnect(self, store: Any) -> None:
        self.proxy_of[id(store)].disconnect()

    def reconnect(self, store: Any) -> None:
        self.proxy_of[id(store)].heal()

    def restart_ensemble(self, while_down: Callable[[], None]) -> None:
        self.server.kill()
        try:
            while_down()
        finally:
            self.server.start()

    def close(self) -> None:
        for proxy in self.proxies:
            proxy.heal()  # a store closes through a live connection
        super().close()
        for proxy in self.proxies:
            proxy.close()
        for proc in self.owners:
            if proc.poll() is None:
                proc.kill()
            proc.wait(DEADLINE)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


class StoreContract:
    """The tests every MetadataStore passes; a subclass provides the ``backend`` fixture."""

    @pytest.fixture
    def backend(self) -> Iterator[Backend]:
        raise NotImplementedError

    @pytest.fixture
    def store(self, backend: Backend) -> Any:
        return backend.connect()

    # ------------------------------------------------------------------ data and versions

    def test_create_get_and_stat(self, store: MetadataStore) -> None:
        before = int(time.time() * 1000)
        assert store.create("/node", b"hello") == "/node"
        data, stat = store.get("/node")
        assert data == b"hello"
        assert isinstance(stat, ZnodeStat)
        assert (stat.version, stat.ephemeral_owner, stat.num_children) == (0, 0, 0)
        assert stat.mzxid == stat.czxid > 0
        assert before - 5000 <= stat.ctime == stat.mtime <= int(time.time() * 1000) + 5000
        assert store.create("/empty") == "/empty"
        assert store.get("/empty")[0] == b""

    def test_set_moves_the_version_and_a_conditional_set_checks_it(self, store: MetadataStore) -> None:
        store.create("/n", b"0")
        _, created = store.get("/n")
        stat = store.set("/n", b"1")
        assert stat.version == 1 and stat.czxid == created.czxid and stat.mzxid > created.mzxid
        assert stat.mtime >= created.mtime
        assert store.set("/n", b"2", version=1).version == 2
        with pytest.raises(errors.BadVersionError, match="/n") as caught:
            store.set("/n", b"stale", version=1)
        assert caught.value.path == "/n"
        assert store.get("/n") == (b"2", store.exists("/n"))
        assert store.set("/n", b"any", version=-1).version == 3
        with pytest.raises(errors.NoNodeError, match="/missing"):
            store.set("/missing", b"x")

    def test_czxid_grows_with_every_creation(self, store: MetadataStore) -> None:
        czxids = []
        for i in range(5):
            store.create("/c%d" % i)
            store.set("/c%d" % i, b"x")  # writes between creations take zxids too
            stat = store.exists("/c%d" % i)
            assert stat is not None
            czxids.append(stat.czxid)
        assert czxids == sorted(czxids) and len(set(czxids)) == 5

    def test_create_errors(self, store: MetadataStore) -> None:
        store.create("/a")
        with pytest.raises(errors.NodeExistsError, match="/a"):
            store.create("/a")
        with pytest.raises(errors.NoNodeError, match="/x/y") as caught:
            store.create("/x/y")
        assert caught.value.path == "/x/y" and "/x" in str(caught.value)
        with pytest.raises(TypeError):
            store.create("/text", "not bytes")  # type: ignore[arg-type]
        assert store.exists("/text") is None

    def test_makepath_and_ensure_path(self, store: MetadataStore) -> None:
        assert store.create("/p/q/r", b"leaf", makepath=True) == "/p/q/r"
        assert store.get("/p/q")[0] == b"" and store.get_children("/p") == ["q"]
        store.ensure_path("/p/q/r")  # exists: left as it is
        assert store.get("/p/q/r")[0] == b"leaf"
        store.ensure_path("/e/f/g")
        assert store.exists("/e/f/g") is not None and store.get_children("/e/f") == ["g"]
        store.ensure_path("/")

    @pytest.mark.parametrize("path", ["relative", "/trailing/", "//double", "/a//b", "/a/./b", "/a/../b",
                                      "/nul\x00", "/tab\tname", ""])
    def test_invalid_paths(self, store: MetadataStore, path: str) -> None:
        with pytest.raises(errors.InvalidPathError):
            store.create(path)
        with pytest.raises(errors.InvalidPathError):
            store.get(path)
        with pytest.raises(ValueError):  # an InvalidPathError is a ValueError too
            validate_path(path)

    def test_exists_and_sorted_children(self, store: MetadataStore) -> None:
        assert store.exists("/parent") is None
        store.create("/parent")
        for name in ["b", "c", "a", "10", "2"]:
            store.create("/parent/" + name)
        assert store.get_children("/parent") == ["10", "2", "a", "b", "c"]
        stat = store.exists("/parent")
        assert stat is not None and stat.num_children == 5
        assert "parent" in store.get_children("/")
        with pytest.raises(errors.NoNodeError, match="/nowhere"):
            store.get_children("/nowhere")
        with pytest.raises(errors.NoNodeError, match="/nowhere"):
            store.get("/nowhere")

    def test_delete(self, store: MetadataStore) -> None:
        store.create("/d", b"x")
        store.set("/d", b"y")
        with pytest.raises(errors.BadVersionError, match="/d"):
            store.delete("/d", version=0)
        store.delete("/d", version=1)
        assert store.exists("/d") is None
        with pytest.raises(errors.NoNodeError, match="/d"):
            store.delete("/d")
        store.create("/t/u/v", makepath=True)
        with pytest.raises(errors.NotEmptyError, match="/t"):
            store.delete("/t")
        with pytest.raises(errors.InvalidPathError):
            store.delete("/")

    def test_recursive_delete(self, store: MetadataStore) -> None:
        for path in ["/tree/a/x", "/tree/a/y", "/tree/b"]:
            store.create(path, makepath=True)
        store.set("/tree", b"v1")
        with pytest.raises(errors.BadVersionError):
            store.delete("/tree", version=0, recursive=True)
        assert store.get_children("/tree/a") == ["x", "y"]  # a wrong version deletes nothing
        store.delete("/tree", version=1, recursive=True)
        assert store.exists("/tree") is None
        store.create("/leaf")
        store.delete("/leaf", recursive=True)
        assert store.exists("/leaf") is None
        with pytest.raises(errors.NoNodeError):
            store.delete("/tree", recursive=True)

    # ------------------------------------------------------------------ sequential and ephemeral

    def test_sequential_names_count_the_children_created(self, store: MetadataStore) -> None:
        store.create("/seq")
        assert store.create("/seq/item-", b"a", sequential=True) == "/seq/item-0000000000"
        assert store.create("/seq/item-", b"b", sequential=True) == "/seq/item-0000000001"
        store.create("/seq/plain")
        store.delete("/seq/plain")
        # ZooKeeper's counter: every child created under the parent so far, sequential or not.
        assert store.create("/seq/item-", sequential=True) == "/seq/item-0000000003"
        assert store.create("/seq/", sequential=True) == "/seq/0000000004"
        assert store.get("/seq/item-0000000001")[0] == b"b"
        assert store.create("/other/n-", sequential=True, makepath=True) == "/other/n-0000000000"
        assert store.get_children("/seq") == ["0000000004", "item-0000000000", "item-0000000001",
                                              "item-0000000003"]

    def test_ephemeral_belongs_to_its_session(self, backend: Backend) -> None:
        owner, other = backend.connect(), backend.connect()
        assert owner.session_id != other.session_id and owner.session_id > 0
        owner.create("/brokers/ids", makepath=True)
        assert owner.create("/brokers/ids/1", b"{}", ephemeral=True) == "/brokers/ids/1"
        stat = other.exists("/brokers/ids/1")
        assert stat is not None and stat.ephemeral_owner == owner.session_id
        with pytest.raises(errors.NoChildrenForEphemeralsError, match="/brokers/ids/1/x"):
            owner.create("/brokers/ids/1/x")
        with pytest.raises(errors.NoChildrenForEphemeralsError):
            owner.create("/brokers/ids/1/x/y", makepath=True)
        seq = owner.create("/brokers/ids/e-", ephemeral=True, sequential=True)
        assert seq == "/brokers/ids/e-0000000001"

    def test_close_deletes_the_ephemerals_and_fires_the_others_watches(self, backend: Backend) -> None:
        owner, observer = backend.connect(), backend.connect()
        owner.create("/eph", ephemeral=True)
        owner.create("/kept", b"persistent")
        owner_watch, observer_watch, children = Recorder(), Recorder(), Recorder()
        owner.exists("/eph", watch=owner_watch)
        observer.exists("/eph", watch=observer_watch)
        observer.get_children("/", watch=children)
        owner.close()
        assert observer_watch.wait_count(1) == [WatchedEvent(DELETED, "/eph")]
        assert children.wait_count(1) == [WatchedEvent(CHILD, "/")]
        assert observer.exists("/eph") is None and observer.get("/kept")[0] == b"persistent"
        barrier(observer)
        assert owner_watch.items == []  # a closed store calls nothing
        owner.close()  # idempotent
        with pytest.raises(errors.SessionExpiredError, match="/kept"):
            owner.get("/kept")
        with pytest.raises(errors.SessionExpiredError):
            owner.create("/after")
        assert owner.state == EXPIRED

    def test_a_watcher_may_close_its_own_store(self, backend: Backend) -> None:
        store, writer = backend.connect(), backend.connect()
        store.create("/mine", ephemeral=True)
        writer.create("/trigger")
        outcome: List[Any] = []
        closed = threading.Event()

        def watcher(event: WatchedEvent) -> None:
            try:
                store.close()
                outcome.append("closed")
            except Exception as exc:  # noqa: BLE001 - recorded for the assertion
                outcome.append(exc)
            closed.set()

        later = Recorder()
        store.get("/trigger", watch=watcher)
        store.exists("/later", watch=later)
        gone = Recorder()
        writer.exists("/mine", watch=gone)
        writer.set("/trigger", b"x")
        assert closed.wait(DEADLINE) and outcome == ["closed"]
        assert gone.wait_count(1) == [WatchedEvent(DELETED, "/mine")]
        writer.create("/later")
        barrier(writer)
        assert later.items == []

    def test_an_owner_that_stops_answering_keeps_its_ephemerals_for_the_session_timeout(
            self, backend: Backend) -> None:
        timeout_ms = 1000  # the session that ends: short, as it is waited out (the others keep STORE_TIMEOUT_MS)
        observer = backend.connect()
        owner = backend.doomed_owner("/doomed", timeout_ms)
        stat = observer.exists("/doomed")
        assert stat is not None and stat.ephemeral_owner == owner.session_id
        gone = Recorder()
        assert observer.exists("/doomed", watch=gone) is not None
        owner.kill()
        killed = time.monotonic()
        # Not before the timeout: ZooKeeper counts it from the last ping, sent a third of it at most earlier.
        early = self._nothing_within(gone, 0.4 * timeout_ms / 1000.0)
        assert early == [] and observer.exists("/doomed") is not None
        assert gone.wait_count(1) == [WatchedEvent(DELETED, "/doomed")]
        elapsed = time.monotonic() - killed
        if backend.exact_timeout:
            assert elapsed >= timeout_ms / 1000.0 * 0.99
        assert observer.exists("/doomed") is None

    @staticmethod
    def _nothing_within(recorder: Recorder, seconds: float) -> List[Any]:
        """What ``recorder`` got within ``seconds`` (the test asserts it is nothing: a wait is the
        only way to see that something did not happen before a time)."""
        with recorder._cond:
            recorder._cond.wait_for(lambda: bool(recorder.items), seconds)
            return list(recorder.items)

    # ------------------------------------------------------------------ multi

    def test_multi_applies_everything(self, store: MetadataStore) -> None:
        store.create("/epoch", b"1")
        store.create("/old")
        results = store.multi([
            CheckOp("/epoch", 0),
            CreateOp("/new", b"n"),
            CreateOp("/new-eph", b"e", ephemeral=True),
            SetOp("/epoch", b"2", 0),
            DeleteOp("/old"),
        ])
        assert results[0] is True and results[1] == "/new" and results[2] == "/new-eph" and results[4] is True
        assert isinstance(results[3], ZnodeStat) and results[3].version == 1
        assert store.get("/epoch")[0] == b"2" and store.get("/new")[0] == b"n" and store.exists("/old") is None
        eph = store.exists("/new-eph")
        assert eph is not None and eph.ephemeral_owner == store.session_id
        new, epoch = store.exists("/new"), store.exists("/epoch")
        assert new is not None and epoch is not None
        assert new.czxid == epoch.mzxid  # one write: one zxid
        assert store.multi([]) == []

    @pytest.mark.parametrize("failing,error", [
        (CheckOp("/epoch", 7), errors.BadVersionError),
        (SetOp("/epoch", b"x", 7), errors.BadVersionError),
        (CreateOp("/exists"), errors.NodeExistsError),
        (CreateOp("/missing/child"), errors.NoNodeError),
        (DeleteOp("/missing"), errors.NoNodeError),
        (DeleteOp("/exists", 3), errors.BadVersionError),
        (DeleteOp("/full"), errors.NotEmptyError),
        (CheckOp("/missing", -1), errors.NoNodeError),
    ])
    def test_multi_is_all_or_nothing(self, store: MetadataStore, failing: Any, error: type) -> None:
        store.create("/epoch", b"1")
        store.create("/exists")
        store.create("/other")
        store.create("/full/child", makepath=True)
        watch = Recorder()
        store.exists("/created", watch=watch)
        with pytest.raises(error, match=failing.path) as caught:
            store.multi([CreateOp("/created", b"c"), SetOp("/epoch", b"2"), DeleteOp("/other"), failing,
                         CreateOp("/after")])
        assert caught.value.path == failing.path
        assert store.exists("/created") is None and store.exists("/after") is None
        assert store.get("/epoch") == (b"1", store.exists("/epoch"))
        epoch = store.exists("/epoch")
        assert epoch is not None and epoch.version == 0
        assert store.exists("/other") is not None
        barrier(store)
        assert watch.items == []  # nothing applied: nothing fired
        store.create("/created")
        assert watch.wait_count(1) == [WatchedEvent(CREATED, "/created")]

    def test_multi_sees_its_own_earlier_operations(self, store: MetadataStore) -> None:
        results = store.multi([CreateOp("/m", b"a"), SetOp("/m", b"b", 0), CheckOp("/m", 1), CreateOp("/m/c"),
                               DeleteOp("/m/c"), SetOp("/m", b"c", 1)])
        assert [r if not isinstance(r, ZnodeStat) else r.version for r in results] == ["/m", 1, True, "/m/c", True,
                                                                                        2]
        assert store.get("/m")[0] == b"c"

    # ------------------------------------------------------------------ watches

    def test_a_data_watch_fires_once(self, backend: Backend) -> None:
        store, writer = backend.connect(), backend.connect()
        store.create("/w", b"0")
        watch = Recorder()
        store.get("/w", watch=watch)
        writer.set("/w", b"1")
        assert watch.wait_count(1) == [WatchedEvent(CHANGED, "/w")]
        writer.set("/w", b"2")
        writer.delete("/w")
        barrier(store, writer)
        assert watch.items == [WatchedEvent(CHANGED, "/w")]

    def test_exists_watches_creation_and_then_data(self, store: MetadataStore) -> None:
        created, deleted = Recorder(), Recorder()
        assert store.exists("/later", watch=created) is None
        store.create("/later")
        assert created.wait_count(1) == [WatchedEvent(CREATED, "/later")]
        assert store.exists("/later", watch=deleted) is not None
        store.delete("/later")
        assert deleted.wait_count(1) == [WatchedEvent(DELETED, "/later")]
        changed = Recorder()
        store.create("/later")
        store.exists("/later", watch=changed)
        store.set("/later", b"x")
        assert changed.wait_count(1) == [WatchedEvent(CHANGED, "/later")]

    def test_child_watches(self, store: MetadataStore) -> None:
        store.create("/kids")
        on_create, on_data, on_gone = Recorder(), Recorder(), Recorder()
        store.get_children("/kids", watch=on_create)
        store.create("/kids/a")
        assert on_create.wait_count(1) == [WatchedEvent(CHILD, "/kids")]
        store.get_children("/kids", watch=on_data)
        store.set("/kids/a", b"data")  # a child's data is not the set of children
        store.set("/kids", b"own data")
        barrier(store)
        assert on_data.items == []
        store.delete("/kids/a")
        assert on_data.wait_count(1) == [WatchedEvent(CHILD, "/kids")]
        store.get_children("/kids", watch=on_gone)
        store.delete("/kids")
        assert on_gone.wait_count(1) == [WatchedEvent(DELETED, "/kids")]

    def test_one_function_registered_twice_is_called_once(self, store: MetadataStore) -> None:
        store.create("/twice")
        watch = Recorder()
        store.get("/twice", watch=watch)
        store.get("/twice", watch=watch)
        store.exists("/twice", watch=watch)
        store.set("/twice", b"x")
        barrier(store)
        assert watch.items == [WatchedEvent(CHANGED, "/twice")]

    def test_a_read_that_fails_leaves_no_watch(self, store: MetadataStore) -> None:
        data_watch, child_watch = Recorder(), Recorder()
        with pytest.raises(errors.NoNodeError):
            store.get("/absent", watch=data_watch)
        with pytest.raises(errors.NoNodeError):
            store.get_children("/absent", watch=child_watch)
        store.create("/absent")
        store.create("/absent/child")
        barrier(store)
        assert data_watch.items == [] and child_watch.items == []

    def test_watch_events_come_in_the_order_of_the_changes(self, backend: Backend) -> None:
        store, writer = backend.connect(), backend.connect()
        events = Recorder()
        names = ["/o%02d" % i for i in range(20)]
        for name in names:
            writer.create(name)
            store.get(name, watch=events)
        store.get_children("/", watch=events)
        order = list(reversed(names))  # not the order the watches were set in
        for name in order[:10]:
            writer.set(name, b"x")
        writer.create("/o-new")
        for name in order[10:]:
            writer.delete(name)
        expected = [WatchedEvent(CHANGED, n) for n in order[:10]] + [WatchedEvent(CHILD, "/")] + \
            [WatchedEvent(DELETED, n) for n in order[10:]]
        assert events.wait_count(len(expected)) == expected

    def test_watchers_run_on_the_stores_thread_outside_the_call_and_its_lock(self, backend: Backend) -> None:
        store, writer = backend.connect(), backend.connect()
        store.create("/t", b"0")
        released = threading.Event()
        seen: List[Any] = []
        done = threading.Event()

        def watcher(event: WatchedEvent) -> None:
            # Blocks until the writer's call has returned: a watcher run inside the call would
            # wait in vain. Then reads the store: a watcher run under the store's lock would deadlock.
            seen.append(released.wait(DEADLINE))
            seen.append(store.get(event.path)[0])
            seen.append(threading.get_ident())
            done.set()

        store.get("/t", watch=watcher)
        writer.set("/t", b"1")
        released.set()
        assert done.wait(DEADLINE)
        assert seen[:2] == [True, b"1"] and seen[2] != threading.get_ident()
        own = Recorder()
        store.get("/t", watch=own)
        store.set("/t", b"2")  # the store's own change: delivered the same way
        own.wait_count(1)
        assert own.threads[0] != threading.get_ident()

    def test_a_watcher_that_raises_is_logged_and_the_others_still_run(self, store: MetadataStore,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
        store.create("/boom")

        def explode(event: WatchedEvent) -> None:
            raise RuntimeError("watcher failure")

        after = Recorder()
        store.get("/boom", watch=explode)
        store.exists("/boom", watch=after)
        with caplog.at_level(logging.ERROR, logger="pylogq"):
            store.set("/boom", b"x")
            assert after.wait_count(1) == [WatchedEvent(CHANGED, "/boom")]
            barrier(store)
        assert any(r.exc_info and "watcher failure" in str(r.exc_info[1]) for r in caplog.records)
        later = Recorder()
        store.get("/boom", watch=later)
        store.set("/boom", b"y")
        assert later.wait_count(1) == [WatchedEvent(CHANGED, "/boom")]

    # ------------------------------------------------------------------ sessions

    def test_session_properties(self, backend: Backend) -> None:
        store = backend.connect(session_timeout_ms=3000)
        assert store.session_timeout_ms == 3000
        assert store.state == CONNECTED
        assert isinstance(store.session_id, int) and store.session_id > 0

    def test_expiry_ends_the_session_and_a_new_one_starts(self, backend: Backend) -> None:
        store, observer = backend.connect(), backend.connect()
        store.create("/persistent", b"p")
        store.create("/ephemeral", ephemeral=True)
        states, stale_watch, gone = Recorder(), Recorder(), Recorder()
        store.add_listener(states)
        store.get("/persistent", watch=stale_watch)
        observer.exists("/ephemeral", watch=gone)
        old = store.session_id
        backend.expire(store)
        got = states.wait_for(lambda items: EXPIRED in items and CONNECTED in items[items.index(EXPIRED):])
        before = got[:got.index(EXPIRED)]
        # On ZooKeeper the connection drops first (and may come back once before the session ends).
        assert set(before) <= ({SUSPENDED, CONNECTED} if isinstance(store, ZooKeeperStore) else set()), got
        assert gone.wait_count(1) == [WatchedEvent(DELETED, "/ephemeral")]
        assert store.session_id not in (0, old)
        assert store.state == CONNECTED
        # The new session works; the old one's ephemerals are gone, its watches too.
        assert store.exists("/ephemeral") is None
        assert store.create("/ephemeral", ephemeral=True) == "/ephemeral"
        stat = store.exists("/ephemeral")
        assert stat is not None and stat.ephemeral_owner == store.session_id
        observer.set("/persistent", b"changed")
        barrier(store, observer)
        assert stale_watch.items == []
        assert len(set(states.threads)) == 1 and states.threads[0] != threading.get_ident()

    def test_a_listener_may_call_the_store(self, backend: Backend) -> None:
        """The broker's way back from an expiry: on CONNECTED, register again (a call from the listener)."""
        store, observer = backend.connect(), backend.connect()
        store.create("/brokers/ids/0", b"v1", ephemeral=True, makepath=True)
        registered = Recorder()

        def listener(state: str) -> None:
            if state == CONNECTED:
                registered(store.create("/brokers/ids/0", b"v2", ephemeral=True))

        store.add_listener(listener)
        backend.expire(store)
        assert registered.wait_count(1) == ["/brokers/ids/0"]
        data, stat = observer.get("/brokers/ids/0")
        assert data == b"v2" and stat.ephemeral_owner == store.session_id

    def test_remove_listener(self, backend: Backend) -> None:
        store = backend.connect()
        removed, kept = Recorder(), Recorder()
        store.add_listener(removed)
        store.add_listener(kept)
        store.remove_listener(removed)
        store.remove_listener(removed)  # not there: nothing
        backend.expire(store)
        kept.wait_for(lambda items: CONNECTED in items[items.index(EXPIRED):] if EXPIRED in items else False)
        assert removed.items == []

    # ------------------------------------------------------------------ lost connections

    def test_a_blip_within_the_session_timeout_keeps_the_session_and_drops_the_watches(
            self, backend: Backend) -> None:
        store = backend.connect_cuttable(session_timeout_ms=BLIP_SESSION_MS)
        observer = backend.connect()
        store.create("/eph", b"e", ephemeral=True)
        store.create("/data", b"0")
        states, data_watch, child_watch, absent_watch = Recorder(), Recorder(), Recorder(), Recorder()
        store.add_listener(states)
        store.get("/data", watch=data_watch)
        store.get_children("/data", watch=child_watch)
        store.exists("/absent", watch=absent_watch)
        session = store.session_id
        backend.disconnect(store)
        states.wait_for(lambda items: SUSPENDED in items)
        # Changes while it is away would have fired every one of its watches.
        observer.set("/data", b"1")
        observer.create("/data/child")
        observer.create("/absent")
        backend.reconnect(store)
        states.wait_for(lambda items: items[-1:] == [CONNECTED])
        assert heard(states) == [SUSPENDED, CONNECTED]
        assert store.session_id == session and store.state == CONNECTED
        stat = observer.exists("/eph")
        assert stat is not None and stat.ephemeral_owner == session
        observer.set("/data", b"2")
        observer.delete("/absent")
        barrier(store, observer)
        assert data_watch.items == [] and child_watch.items == [] and absent_watch.items == []
        # Set again, they work.
        again = Recorder()
        store.get("/data", watch=again)
        observer.set("/data", b"3")
        assert again.wait_count(1) == [WatchedEvent(CHANGED, "/data")]

    def test_a_disconnection_past_the_session_timeout_expires_the_session(self, backend: Backend) -> None:
        timeout_ms = 1000  # the session that ends: short, as it is waited out (the others keep STORE_TIMEOUT_MS)
        store = backend.connect_cuttable(session_timeout_ms=timeout_ms)
        observer = backend.connect()
        store.create("/eph", ephemeral=True)
        gone = Recorder()
        observer.exists("/eph", watch=gone)
        states = Recorder()
        store.add_listener(states)
        old = store.session_id
        backend.disconnect(store)
        cut = time.monotonic()
        states.wait_for(lambda items: SUSPENDED in items)
        # The ensemble expires the session at its timeout, the client away or not.
        assert gone.wait_count(1) == [WatchedEvent(DELETED, "/eph")]
        if backend.exact_timeout:
            assert time.monotonic() - cut >= timeout_ms / 1000.0 * 0.99
        assert heard(states) == [SUSPENDED]  # the client learns it from the ensemble, once connected
        backend.reconnect(store)
        states.wait_for(lambda items: items[-1:] == [CONNECTED])
        assert heard(states) == [SUSPENDED, EXPIRED, CONNECTED]
        assert store.session_id not in (0, old)
        assert store.create("/eph", ephemeral=True) == "/eph"
        stat = observer.exists("/eph")
        assert stat is not None and stat.ephemeral_owner == store.session_id

    def test_a_call_while_disconnected_waits_for_the_connection(self, backend: Backend) -> None:
        store = backend.connect_cuttable(session_timeout_ms=BLIP_SESSION_MS)
        store.create("/n", b"before")
        states = Recorder()
        store.add_listener(states)
        backend.disconnect(store)
        states.wait_for(lambda items: SUSPENDED in items)
        answer: List[Any] = []

        def call() -> None:
            try:
                answer.append(store.set("/n", b"during"))
            except Exception as exc:  # noqa: BLE001 - recorded for the assertion
                answer.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        backend.reconnect(store)
        caller.join(DEADLINE)
        assert not caller.is_alive()
        assert isinstance(answer[0], ZnodeStat) and answer[0].version == 1, answer
        assert store.get("/n")[0] == b"during"

    def test_a_call_while_disconnected_gives_up_after_the_session_and_connection_timeouts(
            self, backend: Backend) -> None:
        store = backend.connect_cuttable(session_timeout_ms=1000, connection_timeout_ms=1000)
        states = Recorder()
        store.add_listener(states)
        backend.disconnect(store)
        states.wait_for(lambda items: SUSPENDED in items)
        started = time.monotonic()
        with pytest.raises(errors.StoreConnectionError, match="/"):
            store.get("/")
        waited = time.monotonic() - started
        assert 2.0 * 0.95 <= waited < DEADLINE
        backend.reconnect(store)
        states.wait_for(lambda items: items[-1:] == [CONNECTED])
        assert heard(states) == [SUSPENDED, EXPIRED, CONNECTED]
        assert store.get("/")[1].num_children >= 0

    def test_an_ensemble_restart_keeps_every_session(self, backend: Backend) -> None:
        store = backend.connect_cuttable(session_timeout_ms=RESTART_SESSION_MS)
        observer = backend.connect_cuttable(session_timeout_ms=RESTART_SESSION_MS)
        store.create("/eph", b"e", ephemeral=True)
        sessions = (store.session_id, observer.session_id)
        states, observer_states, dropped = Recorder(), Recorder(), Recorder()
        store.add_listener(states)
        observer.add_listener(observer_states)
        store.get("/eph", watch=dropped)

        def while_down() -> None:
            states.wait_for(lambda items: SUSPENDED in items)
            observer_states.wait_for(lambda items: SUSPENDED in items)

        backend.restart_ensemble(while_down)
        states.wait_for(lambda items: items[-1:] == [CONNECTED])
        observer_states.wait_for(lambda items: items[-1:] == [CONNECTED])
        assert heard(states) == [SUSPENDED, CONNECTED] and heard(observer_states) == [SUSPENDED, CONNECTED]
        assert (store.session_id, observer.session_id) == sessions
        data, stat = observer.get("/eph")
        assert data == b"e" and stat.ephemeral_owner == sessions[0]
        observer.set("/eph", b"f")
        barrier(store, observer)
        assert dropped.items == []


class TestInMemoryStore(StoreContract):
    @pytest.fixture
    def backend(self) -> Iterator[Backend]:
        backend = MemoryBackend()
        yield backend
        backend.close()

    def test_an_abandoned_client_is_silent_and_its_session_lives_until_the_timeout(self) -> None:
        with InMemoryZooKeeper() as ensemble:
            client = ensemble.connect(session_timeout_ms=600)
            observer = ensemble.connect()
            client.create("/e", ephemeral=True)
            calls = Recorder()
            client.add_listener(calls)
            client.exists("/watched", watch=calls)
            client.abandon()
            assert client.session_id in ensemble.live_sessions()
            with pytest.raises(errors.SessionExpiredError):
                client.get("/e")
            observer.create("/watched")  # the abandoned client's watch: nobody to call
            gone = Recorder()
            observer.exists("/e", watch=gone)
            gone.wait_count(1)
            assert client.session_id not in ensemble.live_sessions()
            barrier(observer)
            assert calls.items == []
            client.abandon()
            client.close()  # both idempotent, nothing more happens

    def test_expire_session_of_an_unknown_session(self) -> None:
        with InMemoryZooKeeper() as ensemble:
            assert ensemble.expire_session(12345) is False
            client = ensemble.connect()
            client.close()
            assert ensemble.expire_session(client.session_id) is False

    def test_two_ensembles_share_nothing(self) -> None:
        with InMemoryZooKeeper() as one, InMemoryZooKeeper() as two:
            one.connect().create("/only-in-one")
            assert two.connect().exists("/only-in-one") is None

    def test_closing_the_ensemble_closes_its_clients(self) -> None:
        ensemble = InMemoryZooKeeper()
        client = ensemble.connect()
        client.create("/e", ephemeral=True)
        ensemble.close()
        with pytest.raises(errors.SessionExpiredError):
            client.get("/")
        with pytest.raises(errors.SessionExpiredError):
            ensemble.connect()

    def test_many_threads_writing_at_once(self) -> None:
        with InMemoryZooKeeper() as ensemble:
            clients = [ensemble.connect() for _ in range(4)]
            clients[0].create("/counter", b"0")
            seq = Recorder()

            def work(client: InMemoryStoreClient) -> None:
                for _ in range(50):
                    while True:  # a compare-and-set loop, as the controller's epoch bump does
                        data, stat = client.get("/counter")
                        try:
                            client.set("/counter", str(int(data) + 1).encode(), version=stat.version)
                            break
                        except errors.BadVersionError:
                            continue
                    seq(client.create("/seq-", sequential=True))

            threads = [threading.Thread(target=work, args=(c,)) for c in clients]
            for t in threads:
                t.start()
            for t in threads:
                t.join(DEADLINE)
            assert clients[0].get("/counter")[0] == b"200"
            assert len(set(seq.items)) == 200

    def test_a_frozen_client_waits_and_keeps_its_session_within_the_timeout(self) -> None:
        with InMemoryZooKeeper() as ensemble:
            client = ensemble.connect(session_timeout_ms=STORE_TIMEOUT_MS)
            observer = ensemble.connect()
            client.create("/eph", ephemeral=True)
            client.create("/n", b"0")
            states, watch = Recorder(), Recorder()
            client.add_listener(states)
            client.get("/n", watch=watch)
            client.freeze()
            assert client.frozen
            answer: List[Any] = []
            caller = threading.Thread(target=lambda: answer.append(client.get("/n")[0]))
            caller.start()
            observer.set("/n", b"1")  # its watch fires into the frozen client's queue
            barrier(observer)
            assert watch.items == [] and answer == [] and caller.is_alive()
            client.thaw()
            caller.join(DEADLINE)
            assert answer == [b"1"]
            assert watch.wait_count(1) == [WatchedEvent(CHANGED, "/n")]
            barrier(client, observer)
            assert states.items == [] and client.session_id in ensemble.live_sessions()
            stat = observer.exists("/eph")
            assert stat is not None and stat.ephemeral_owner == client.session_id

    def test_a_client_frozen_past_the_timeout_finds_its_session_expired(self) -> None:
        with InMemoryZooKeeper() as ensemble:
            client = ensemble.connect(session_timeout_ms=500)
            observer = ensemble.connect()
            client.create("/eph", ephemeral=True)
            client.create("/n", b"0")
            states, watch, gone = Recorder(), Recorder(), Recorder()
            client.add_listener(states)
            client.get("/n", watch=watch)
            observer.exists("/eph", watch=gone)
            old = client.session_id
            observer.set("/n", b"1")  # delivered before what the thawed client finds
            client.freeze()
            frozen = time.monotonic()
            failed: List[Any] = []

            def call() -> None:
                try:
                    client.get("/n")
                except errors.SessionExpiredError as exc:
                    failed.append(exc)

            caller = threading.Thread(target=call)
            caller.start()
            assert gone.wait_count(1) == [WatchedEvent(DELETED, "/eph")]
            assert time.monotonic() - frozen >= 0.5 * 0.99
            assert old not in ensemble.live_sessions() and states.items == []
            client.thaw()
            caller.join(DEADLINE)
            assert len(failed) == 1  # a call made in the old session fails with it
            states.wait_count(3)
            assert states.items == [SUSPENDED, EXPIRED, CONNECTED]
            assert watch.items == [WatchedEvent(CHANGED, "/n")]
            assert client.session_id not in (old, 0) and client.get("/n")[0] == b"1"

    def test_a_disconnection_for_a_while_reconnects_by_itself(self) -> None:
        with InMemoryZooKeeper() as ensemble:
            client = ensemble.connect(session_timeout_ms=STORE_TIMEOUT_MS)
            states = Recorder()
            client.add_listener(states)
            session = client.session_id
            client.disconnect(for_s=0.2)
            assert client.disconnected
            assert states.wait_count(2) == [SUSPENDED, CONNECTED]
            assert client.session_id == session and not client.disconnected
            # A scheduled reconnection does not end a later disconnection.
            client.disconnect(for_s=0.05)
            client.reconnect()
            client.disconnect()
            # Another client's reconnection, due later on the same timer: once it is done, the
            # first one's was due too.
            other, other_states = ensemble.connect(), Recorder()
            other.add_listener(other_states)
            other.disconnect(for_s=0.1)
            assert other_states.wait_count(2) == [SUSPENDED, CONNECTED]
            assert states.items == [SUSPENDED, CONNECTED, SUSPENDED, CONNECTED, SUSPENDED] and client.disconnected
            client.reconnect()
            assert states.wait_count(6)[-1] == CONNECTED

    def test_a_stopped_ensemble_expires_no_session_and_counts_again_from_its_start(self) -> None:
        with InMemoryZooKeeper() as ensemble:
            client = ensemble.connect(session_timeout_ms=1000)
            away = ensemble.connect(session_timeout_ms=1000)
            away.create("/away", ephemeral=True)
            states = Recorder()
            client.add_listener(states)
            away.disconnect()  # on its own: it stays away after the restart
            ensemble.stop()
            assert not ensemble.serving
            states.wait_count(1)
            with pytest.raises(errors.StoreConnectionError):
                ensemble.connect(session_timeout_ms=1000)  # waits for the ensemble, 1 s
            # Down for longer than the timeout: no session expired meanwhile.
            assert sorted(ensemble.live_sessions()) == sorted([client.session_id, away.session_id])
            ensemble.start()
            started = time.monotonic()
            assert states.wait_count(2) == [SUSPENDED, CONNECTED]
            observer = ensemble.connect()
            gone = Recorder()
            assert observer.exists("/away", watch=gone) is not None
            gone.wait_count(1)  # the client that is still away: its timeout counts from the start
            assert time.monotonic() - started >= 1.0 * 0.99
            assert away.session_id not in ensemble.live_sessions()
            assert client.session_id in ensemble.live_sessions()

    def test_a_client_closed_while_away_leaves_its_session_to_expire(self) -> None:
        with InMemoryZooKeeper() as ensemble:
            client = ensemble.connect(session_timeout_ms=300)
            observer = ensemble.connect()
            client.create("/eph", ephemeral=True)
            gone = Recorder()
            observer.exists("/eph", watch=gone)
            client.disconnect()
            client.close()  # it cannot tell the ensemble
            assert client.session_id in ensemble.live_sessions()
            assert gone.wait_count(1) == [WatchedEvent(DELETED, "/eph")]
            assert client.session_id not in ensemble.live_sessions()


    def test_a_write_whose_answer_is_lost_is_applied_all_the_same(self) -> None:
        with InMemoryZooKeeper() as ensemble:
            client = ensemble.connect(session_timeout_ms=STORE_TIMEOUT_MS)
            observer = ensemble.connect()
            client.create("/n", b"0")
            states = Recorder()
            client.add_listener(states)
            session = client.session_id
            client.disconnect(for_s=0.1, after_next_write=True)
            assert client.get("/n")[0] == b"0"  # reads are answered
            with pytest.raises(errors.BadVersionError):
                client.set("/n", b"x", version=7)  # a refused write is answered too
            with pytest.raises(errors.StoreConnectionError, match="/n"):
                client.set("/n", b"1", version=0)
            assert observer.get("/n")[0] == b"1"  # applied
            assert states.wait_count(2) == [SUSPENDED, CONNECTED]
            assert client.session_id == session
            assert client.set("/n", b"2", version=1).version == 2  # the next write is answered
            # A multi's answer, and reconnect() calling off an armed loss.
            client.disconnect(after_next_write=True)
            with pytest.raises(errors.StoreConnectionError):
                client.multi([SetOp("/n", b"3", 2), CreateOp("/m")])
            assert observer.get("/n")[0] == b"3" and observer.exists("/m") is not None
            client.reconnect()
            client.disconnect(after_next_write=True)
            client.reconnect()
            assert client.create("/after") == "/after"
            assert states.wait_count(4) == [SUSPENDED, CONNECTED, SUSPENDED, CONNECTED]

class TestZooKeeperStore(StoreContract):
    @pytest.fixture
    def backend(self, zookeeper: ZooKeeperServer, zookeeper_connect: str) -> Iterator[Backend]:
        backend = ZooKeeperBackend(zookeeper, zookeeper_connect)
        yield backend
        backend.close()

    def test_a_missing_chroot_is_created_and_paths_are_inside_it(self, zookeeper: ZooKeeperServer,
                                                                  zookeeper_connect: str) -> None:
        nested = zookeeper_connect + "/deeper/still"
        with ZooKeeperStore(nested, session_timeout_ms=STORE_TIMEOUT_MS) as inner, \
                ZooKeeperStore(zookeeper.connect_string, session_timeout_ms=STORE_TIMEOUT_MS) as root:
            assert inner.get_children("/") == []
            assert inner.create("/x", b"inside") == "/x"
            _, chroot = split_connect_string(nested)
            assert root.get(chroot + "/x")[0] == b"inside"
            watch = Recorder()
            inner.exists("/y", watch=watch)
            root.create(chroot + "/y")
            assert watch.wait_count(1) == [WatchedEvent(CREATED, "/y")]  # events name paths inside the chroot
            assert inner.multi([CreateOp("/z")]) == ["/z"]
            assert inner.create("/s-", sequential=True).startswith("/s-")

    def test_no_server_within_the_connection_timeout(self) -> None:
        from .._ports import free_port

        connect = "127.0.0.1:%d/kafka" % free_port()
        started = time.monotonic()
        with pytest.raises(errors.StoreConnectionError, match=connect) as caught:
            ZooKeeperStore(connect, connection_timeout_ms=500)
        assert caught.value.path == connect
        assert time.monotonic() - started < DEADLINE

    def test_connect_strings(self) -> None:
        assert split_connect_string("h1:2181,h2:2181/kafka/a") == ("h1:2181,h2:2181", "/kafka/a")
        assert split_connect_string("localhost:2181") == ("localhost:2181", None)
        assert split_connect_string("localhost:2181/") == ("localhost:2181", None)
        with pytest.raises(errors.ConfigError):
            split_connect_string("/chroot-only")
        with pytest.raises(errors.ConfigError):
            split_connect_string("h1:2181,,h2:2181")
        with pytest.raises(errors.InvalidPathError):
            split_connect_string("h:1/bad/")

    def test_a_server_restart_within_the_session_timeout_keeps_the_session(self, tmp_path: Path) -> None:
        server = ZooKeeperServer(tmp_path / "zk")
        server.start()
        try:
            with ZooKeeperStore(server.restartable_connect_string + "/restart", session_timeout_ms=12000) as store:
                store.create("/eph", b"e", ephemeral=True)
                session = store.session_id
                states, dropped = Recorder(), Recorder()
                store.add_listener(states)
                store.get("/eph", watch=dropped)
                server.kill()
                states.wait_for(lambda items: SUSPENDED in items)
                server.start()  # the same port and data
                states.wait_for(lambda items: items[-1:] == [CONNECTED])
                assert states.items == [SUSPENDED, CONNECTED]
                assert store.session_id == session
                stat = store.exists("/eph")
                assert stat is not None and stat.ephemeral_owner == session
                # Watches did not survive the lost connection (kazoo drops them): set again, they work.
                again = Recorder()
                store.get("/eph", watch=again)
                store.set("/eph", b"f")
                assert again.wait_count(1) == [WatchedEvent(CHANGED, "/eph")]
                assert dropped.items == []
                server.restart()
                states.wait_for(lambda items: items[-2:] == [SUSPENDED, CONNECTED])
                assert store.get("/eph")[0] == b"f"
        finally:
            server.stop()

    def test_a_call_while_the_server_is_down_waits_for_it(self, tmp_path: Path) -> None:
        server = ZooKeeperServer(tmp_path / "zk")
        server.start()
        try:
            with ZooKeeperStore(server.restartable_connect_string, session_timeout_ms=12000) as store:
                store.create("/n", b"before")
                states = Recorder()
                store.add_listener(states)
                server.stop()
                states.wait_for(lambda items: SUSPENDED in items)
                answer: List[Any] = []
                call = threading.Thread(target=lambda: answer.append(store.set("/n", b"during")))
                call.start()
                server.start()
                call.join(DEADLINE)
                assert answer and answer[0].version == 1
                assert store.get("/n")[0] == b"during"
        finally:
            server.stop()


def test_only_the_zookeeper_store_loads_kazoo() -> None:
    code = (
        "import sys\n"
        "import pylogq.cluster.zk.store, pylogq.cluster.zk.memory_store, pylogq.cluster.zk.kazoo_store\n"
        "from pylogq.cluster.zk.memory_store import InMemoryZooKeeper\n"
        "InMemoryZooKeeper().connect().create('/x')\n"
        "from pylogq import Producer\n"
        "print('kazoo' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
