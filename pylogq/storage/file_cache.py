"""The open files and maps of every segment in the process: a bounded cache, the least recently used out.

Kafka keeps every segment's ``.log`` file open and maps its indexes on first
use (``LazyIndex``), so a broker needs a few descriptors per segment: with
Debian's default ``ulimit -n 1024`` that caps it near 300 segments, and a
broker past its limit can neither accept clients nor restart (EMFILE).
pylogq holds no descriptor for a segment that nobody uses: a segment's
``.log`` file and its two index maps are each a :class:`LazyFile`, opened on
demand, and one :class:`FileCache` per process (:func:`open_files`) keeps at
most ``capacity`` of them open. A map counts as one descriptor: CPython's
``mmap`` keeps a duplicate of the file's descriptor for as long as it maps.

The capacity is ``log.open.files.max`` (:class:`~pylogq.storage.config.LogManagerConfig`)
or, unset, a quarter of the process's open-file limit (``RLIMIT_NOFILE``),
between 16 and 16384: the rest stays for client connections, regions being
sent and the files the broker writes.

Eviction only drops the cache's reference. Whoever got the object from
:meth:`LazyFile.get` (a :class:`~pylogq.storage.segment.FileRegion` waiting to
be sent with ``sendfile``, a :class:`~pylogq.storage.segment.SegmentReader`, an
index search) holds a reference of its own, and CPython closes a file, or
unmaps a map, only when its last reference goes. So a descriptor is never
closed, nor its number reused, under a reader, and a map is never unmapped
under a buffer that numpy or a memoryview still exports. A file evicted while
in use costs one descriptor more than the capacity until its users finish.

Eviction is Kafka's and the kernel's second-chance clock: a hit only sets a
flag (no lock, no reordering on the hot path), and the cache, when full, drops
the oldest entry whose flag is clear, clearing flags as it passes them.
"""

from __future__ import annotations

import errno
import io
import resource
import threading
from collections import OrderedDict
from typing import Any, Callable, Generic, List, Optional, TypeVar

from ..errors import InvalidArgumentError

__all__ = ["FileCache", "LazyFile", "SharedFile", "MIN_CAPACITY", "MAX_DEFAULT_CAPACITY", "default_capacity",
           "open_files", "configure"]

#: The smallest capacity (explicit or derived): below it one log's own reads and writes would evict each other.
MIN_CAPACITY = 16
#: The largest derived capacity: also well below the kernel's default limit of maps (vm.max_map_count 65530).
MAX_DEFAULT_CAPACITY = 16384

# An open or a map refused because the process or the system is out of descriptors or maps:
# the cache lets go of what it holds and tries once more.
_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)

T = TypeVar("T")


class SharedFile(io.FileIO):
    """A file object that closes itself when its last user drops it, without a ResourceWarning.

    The file cache and the readers it hands the file to share it; whichever lets
    go last closes it. That is the intended end of such a file, not a leak.
    """

    def __del__(self) -> None:
        self.close()


def default_capacity() -> int:
    """A quarter of the soft ``RLIMIT_NOFILE``, within [MIN_CAPACITY, MAX_DEFAULT_CAPACITY]."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return MAX_DEFAULT_CAPACITY
    return max(MIN_CAPACITY, min(soft // 4, MAX_DEFAULT_CAPACITY))


class LazyFile(Generic[T]):
    """One open file or map of a segment, opened on demand; the :class:`FileCache` decides how long it stays open.

    Invariant: ``value`` is the open object while the cache holds it, else
    None; once ``close()`` was called it stays None and ``get()`` raises. The
    owner calls ``get()`` each time it needs the object and keeps the result
    only for the operation in hand (or hands it to a reader, which keeps it
    open). Thread-safe: ``get()`` takes no lock when the object is open; two
    threads opening it at once install one object and close the other.
    """

    __slots__ = ("_cache", "_opener", "_closed_error", "value", "referenced", "closed", "__weakref__")

    def __init__(self, cache: "FileCache", opener: Callable[[], T], closed_error: Callable[[], Exception]) -> None:
        self._cache = cache
        self._opener = opener
        self._closed_error = closed_error
        self.value: Optional[T] = None
        self.referenced = False  # used since the clock hand last passed (second chance)
        self.closed = False

    def get(self) -> T:
        """The open object: the cached one, or opened now (ValueError, from ``closed_error``, once closed)."""
        value = self.value
        if value is None:
            return self._cache._load(self)
        self.referenced = True
        return value

    def peek(self) -> Optional[T]:
        """The object if it is open now, without opening it."""
        return self.value

    def put(self, value: T) -> T:
        """Hand the cache an object the owner has just opened itself (a new segment's file)."""
        return self._cache._install(self, value)

    def forget(self) -> Optional[T]:
        """Take the object out of the cache (its size or path changed); -> the object it held, if any.

        The caller may close the returned object only if nobody else can hold it.
        """
        return self._cache._remove(self, close=False)

    def close(self) -> Optional[T]:
        """Forget the object for good: later ``get()`` calls raise; -> the object it held, if any."""
        return self._cache._remove(self, close=True)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open" if self.value is not None else "not open"
        return "LazyFile(%s)" % state


class FileCache:
    """At most ``capacity`` open files and maps, shared by every segment it serves.

    Invariant: the objects held are exactly the ``value`` of the LazyFiles in
    ``_held``, and there are at most ``capacity`` of them. Eviction and removal
    only drop references (see the module docstring). Thread-safe: one lock
    guards the table; nothing is opened, and no other lock taken, under it.
    """

    def __init__(self, capacity: Optional[int] = None) -> None:
        self._lock = threading.Lock()
        self._held: "OrderedDict[LazyFile[Any], None]" = OrderedDict()
        self._capacity = self._checked(capacity)
        self.evictions = 0  # files and maps dropped to make room (for tests and metrics)

    @staticmethod
    def _checked(capacity: Optional[int]) -> int:
        if capacity is None:
            return default_capacity()
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < MIN_CAPACITY:
            raise InvalidArgumentError("file cache capacity must be an int >= %d, not %r" % (MIN_CAPACITY, capacity))
        return capacity

    @property
    def capacity(self) -> int:
        return self._capacity

    def set_capacity(self, capacity: Optional[int]) -> None:
        """Hold at most ``capacity`` open files and maps from now on (None: derived from RLIMIT_NOFILE)."""
        capacity = self._checked(capacity)
        with self._lock:
            self._capacity = capacity
            dropped = self._evict_locked(len(self._held) - capacity, second_chance=True)
        del dropped  # closed here, outside the lock, unless someone still uses them

    def __len__(self) -> int:
        return len(self._held)

    def handle(self, opener: Callable[[], T], closed_error: Callable[[], Exception]) -> LazyFile[T]:
        """A new LazyFile of this cache, not open yet: ``opener()`` opens it, ``closed_error()`` is raised once closed."""
        return LazyFile(self, opener, closed_error)

    def clear(self) -> None:
        """Drop every reference the cache holds (objects in use stay open with their users)."""
        with self._lock:
            dropped = self._evict_locked(len(self._held), second_chance=False)
        del dropped

    # -- the LazyFile side --------------------------------------------------------------

    def _load(self, handle: LazyFile[T]) -> T:
        if handle.closed:
            raise handle._closed_error()
        try:
            value = handle._opener()
        except OSError as exc:
            if exc.errno not in _OUT_OF_FILES:
                raise
            # Out of descriptors (or maps): what the cache holds is the first thing to give back.
            self._shed()
            value = handle._opener()
        return self._install(handle, value)

    def _install(self, handle: LazyFile[T], value: T) -> T:
        spare: Optional[T] = None
        dropped: List[Any] = []
        with self._lock:
            if handle.closed:
                spare, installed = value, None
            elif handle.value is not None:  # another thread opened it first: use that one
                spare, installed = value, handle.value
            else:
                handle.value = installed = value
                self._held[handle] = None
                dropped = self._evict_locked(len(self._held) - self._capacity, second_chance=True)
        del dropped  # released here, outside the lock
        if spare is not None:
            _close(spare)  # opened by this call and never handed out
        if installed is None:
            raise handle._closed_error()
        handle.referenced = True
        return installed

    def _remove(self, handle: LazyFile[T], close: bool) -> Optional[T]:
        with self._lock:
            if close:
                handle.closed = True
            value, handle.value = handle.value, None
            self._held.pop(handle, None)
        return value

    def _evict_locked(self, count: int, second_chance: bool) -> List[Any]:
        """Drop ``count`` entries, oldest first (skipping, once, those used since the hand passed);
        -> the dropped objects, for the caller to release outside the lock."""
        held = self._held
        dropped: List[Any] = []
        while count > 0 and held:
            handle, _ = held.popitem(last=False)
            if second_chance and handle.referenced:
                handle.referenced = False
                held[handle] = None  # to the back of the clock
                continue
            dropped.append(handle.value)
            handle.value = None
            count -= 1
        self.evictions += len(dropped)
        return dropped

    def _shed(self) -> None:
        """Out of descriptors: drop the older half of what the cache holds."""
        with self._lock:
            dropped = self._evict_locked(max(len(self._held) // 2, 1), second_chance=False)
        del dropped

    def __repr__(self) -> str:
        return "FileCache(%d of %d open)" % (len(self._held), self._capacity)


def _close(value: Any) -> None:
    try:
        value.close()
    except (BufferError, OSError, ValueError):  # exported or already gone: dropping it is enough
        pass


_shared: Optional[FileCache] = None
_shared_lock = threading.Lock()


def open_files() -> FileCache:
    """The process's file cache, made on first use with :func:`default_capacity`."""
    global _shared
    cache = _shared
    if cache is None:
        with _shared_lock:
            if _shared is None:
                _shared = FileCache()
            cache = _shared
    return cache


def configure(capacity: Optional[int]) -> None:
    """Set the process's cache capacity (``log.open.files.max``; None derives it from RLIMIT_NOFILE now).

    A process has one cache, as it has one descriptor limit: the last log
    manager started sets it.
    """
    open_files().set_capacity(capacity)
