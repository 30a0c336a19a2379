"""The log manager: every partition log in one or more log directories.

Kafka's LogManager. Each log directory (``log.dirs``) holds partition
directories and four files the manager owns, all written atomically:

    .lock                              held (flock) while a process uses the dir
    .kafka_cleanshutdown               present only after a clean shutdown
    recovery-point-offset-checkpoint   per partition: offsets below are fsynced
    log-start-offset-checkpoint        per partition: the first readable offset
    cleaner-offset-checkpoint          per partition: where compaction stopped

On start the manager takes each directory's lock (a second process gets a
clear error, never a shared directory), reads and removes the clean-shutdown
marker, and opens the logs with their recovery points: after a crash each log
checks the segments past its recovery point. Background tasks on one thread:
flush (``flush.ms``), retention, checkpoints and delayed file deletion; the
cleaner runs on its own threads. ``close()`` flushes every log, writes the
checkpoints and the marker, so the next start skips recovery.

A failed directory (JBOD): a write that fails with an I/O error other than a
full disk (a read-only or failing file system), in a log or a checkpoint, or a
directory that cannot be opened at start, takes that directory offline, as
Kafka's LogDirFailureChannel does. Its logs leave the manager, their files let
go without a write; the other directories go on. Listeners (the broker) are
told which partitions went with it. A log known to be in an offline directory,
or any existing log not loaded while a directory is offline, cannot be opened
(KafkaStorageError): a new empty log elsewhere would hide the records. With
every directory offline there is nothing left to serve.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from ..errors import (
    ConfigError,
    CorruptCheckpointError,
    IllegalStateError,
    KafkaStorageError,
    LogClosedError,
    LogDirInUseError,
    LogDirNotFoundError,
    ReplicaNotAvailableError,
)
from .checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    LOCK_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    OffsetCheckpoint,
    write_atomically,
)
from . import file_cache, reservation
from .cleaner_manager import CleaningRegistry
from ..config import LogConfig
from .config import LogManagerConfig
from .log import Log, is_resource_exhausted, parse_dir_name
from .scheduler import Scheduler

if TYPE_CHECKING:
    from .cleaner import LogCleaner

__all__ = ["DirFailureListener", "LogManager", "delete_dir_name"]

log = logging.getLogger("pylogq.storage")

#: Told (on the manager's scheduler thread) that a log directory went offline: its path,
#: the partitions whose logs were in it, and how many directories are still online.
DirFailureListener = Callable[[str, List[Tuple[str, int]], int], None]

DELETE_SUFFIX = "-delete"
#: A replica being moved to another log directory is copied into ``<topic>-<partition>.<id>-future``.
FUTURE_SUFFIX = "-future"
# The longest file name Linux file systems take (NAME_MAX).
_NAME_MAX = 255


def delete_dir_name(topic: str, partition: int) -> str:
    """The name a deleted partition's directory takes: ``<topic>-<partition>.<id>-delete``,
    the topic shortened when the whole would not fit a file name (Kafka's
    ``logDeleteDirName``: a topic name may be 249 characters)."""
    return _suffixed_dir_name(topic, partition, DELETE_SUFFIX)


def future_dir_name(topic: str, partition: int) -> str:
    """The directory a replica being moved is copied into: ``<topic>-<partition>.<id>-future``
    (Kafka's ``logFutureDirName``; the topic is never shortened: the log reads its name)."""
    return "%s-%d.%s%s" % (topic, partition, uuid.uuid4().hex, FUTURE_SUFFIX)


def _suffixed_dir_name(topic: str, partition: int, suffix: str) -> str:
    unique = uuid.uuid4().hex
    room = _NAME_MAX - (len(suffix) + len(unique) + 1 + len(str(partition)) + 1)
    return "%s-%d.%s%s" % (topic[:max(room, 0)], partition, unique, suffix)


def _remove_tree(path: str) -> None:
    """Remove a directory and everything in it, errors ignored (shutil is imported on the
    first removal: it is not needed to open the logs)."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)


class _LogDir:
    """One log directory: its lock and its checkpoint files."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        os.makedirs(self.path, exist_ok=True)
        self._lock_fd = os.open(os.path.join(self.path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise LogDirInUseError(
                "log directory %s is in use by another process (or another LogManager in this one): "
                "its .lock file is held" % self.path) from None
        marker = os.path.join(self.path, CLEAN_SHUTDOWN_FILE)
        self.clean_shutdown = os.path.exists(marker)
        if self.clean_shutdown:
            os.unlink(marker)  # from now on a crash must not look clean
        self.recovery_points = OffsetCheckpoint(os.path.join(self.path, RECOVERY_POINT_CHECKPOINT))
        self.log_start_offsets = OffsetCheckpoint(os.path.join(self.path, LOG_START_OFFSET_CHECKPOINT))
        self.recovery = _read_or_ignore(self.recovery_points, "every log is recovered as after a crash"
                                        if not self.clean_shutdown else "no log needs it after a clean shutdown")
        self.starts = _read_or_ignore(self.log_start_offsets, "each log starts at its first segment")
        # What a log's cleaner may take as committed until its partition gives the high watermark.
        self.high_watermarks = _read_or_ignore(OffsetCheckpoint(os.path.join(self.path, REPLICATION_CHECKPOINT)),
                                               "logs are compacted up to their log end until their partitions open")

    def partition_dirs(self) -> List[str]:
        """The ``<topic>-<partition>`` directories; a deleted topic's leftovers are removed,
        anything else is warned about and left alone."""
        out = []
        for name in sorted(os.listdir(self.path)):
            full = os.path.join(self.path, name)
            if not os.path.isdir(full):
                continue
            if name.endswith(DELETE_SUFFIX):
                _remove_tree(full)  # a deleted topic's leftovers
                continue
            if name.endswith(FUTURE_SUFFIX):
                # A move to this directory that had not finished: the replica is whole where it
                # was; the move starts again when asked again.
                log.warning("%s: removing %s, the copy of an unfinished move of a replica to this directory",
                            self.path, name)
                _remove_tree(full)
                continue
            try:
                parse_dir_name(full)
            except ValueError:
                log.warning("%s: the directory %s is not a partition (<topic>-<partition>); left alone",
                            self.path, name)
                continue
            out.append(full)
        return out

    def mark_clean(self) -> None:
        write_atomically(os.path.join(self.path, CLEAN_SHUTDOWN_FILE), b"")

    def release(self) -> None:
        if self._lock_fd >= 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1


class LogManager:
    """The logs of a set of log directories, with their background work. Thread-safe.

    ``cleaning`` is the registry every cleaner of these logs claims them in, so
    two cleaners never clean one log at once.
    """

    _standalone: Dict[str, Tuple["LogManager", int]] = {}
    _standalone_lock = threading.Lock()

    def __init__(
        self,
        log_dirs: Any = None,
        config: Optional[LogManagerConfig] = None,
        *,
        topic_config: Optional[Callable[[str], Optional[LogConfig]]] = None,
        load_all: bool = True,
        background: bool = True,
        clock: Callable[[], float] = time.time,
        on_flush: Optional[Callable[[float], None]] = None,
    ) -> None:
        """``on_flush`` is told the duration (ms) of every flush of a managed log (the
        broker's flush metric)."""
        if config is None:
            config = LogManagerConfig(log_dirs=list(_as_list(log_dirs))) if log_dirs is not None else LogManagerConfig()
        elif log_dirs is not None:
            raise ConfigError("give log dirs either as log_dirs or in the config, not both")
        self.config = config
        # One file cache and one reservation budget per process: the last manager started sets them.
        file_cache.configure(config.log_open_files_max)
        reservation.configure(config.log_reserve_bytes_max)
        self.default_log_config = config.default_log_config()
        self._topic_config = topic_config
        self._clock = clock
        self._on_flush = on_flush
        self._lock = threading.RLock()
        self._logs: Dict[Tuple[str, int], Log] = {}
        self._log_dir_of: Dict[Tuple[str, int], _LogDir] = {}
        self.scheduler = Scheduler("pylogq-log-manager")
        self.cleaning = CleaningRegistry()
        self.closed = False
        self._dirs: List[_LogDir] = []  # the online ones, in log.dirs order
        #: Offline directories (absolute path -> why), and where each of their logs was.
        self._offline: Dict[str, str] = {}
        self._offline_logs: Dict[Tuple[str, int], str] = {}
        self._failing: Dict[str, str] = {}  # reported, not yet taken offline
        self._dir_listeners: List[DirFailureListener] = []
        #: Replicas being moved: their future logs, in the destination directory.
        self._future: Dict[Tuple[str, int], Tuple[Log, _LogDir]] = {}
        #: Where a replica not created yet is to be created (AlterReplicaLogDirs ahead of it).
        self._preferred: Dict[Tuple[str, int], str] = {}
        first_error: Optional[OSError] = None
        try:
            for path in config.log_dirs:
                try:
                    self._dirs.append(_LogDir(path))
                except LogDirInUseError:
                    raise
                except OSError as exc:  # Kafka starts without a directory it cannot use
                    log.error("log directory %s is offline: it cannot be opened: %s", path, exc)
                    self._offline[os.path.abspath(path)] = str(exc)
                    first_error = first_error or exc
            if not self._dirs and first_error is not None:
                raise first_error
        except BaseException:
            for d in self._dirs:
                d.release()
            raise
        if load_all:
            for d in list(self._dirs):
                try:
                    for path in d.partition_dirs():
                        self._load_log(d, path)
                except OSError as exc:
                    if is_resource_exhausted(exc):
                        raise
                    log.error("log directory %s is offline: its logs cannot be loaded: %s", d.path, exc)
                    self._take_offline(d, str(exc))
            if not self._dirs:
                raise KafkaStorageError("every log directory is offline: %s" % self._offline)
        self.cleaner: Optional["LogCleaner"] = None
        if background:
            self._start_background()

    # -- opening logs -------------------------------------------------------------

    def _config_for(self, topic: str, overrides: Optional[LogConfig] = None) -> LogConfig:
        if overrides is not None:
            return overrides
        if self._topic_config is not None:
            found = self._topic_config(topic)
            if found is not None:
                return found
        return self.default_log_config

    def _open_log(self, d: _LogDir, path: str, config: Optional[LogConfig], recovery_point: int,
                  log_start_offset: Optional[int], clean: bool) -> Log:
        tp = parse_dir_name(path)
        log_ = Log(
            path,
            self._config_for(tp[0], config),
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean,
            scheduler=self.scheduler,
            clock=self._clock,
            on_flush=self._on_flush,
        )
        log_.on_io_error = functools.partial(self.report_io_error, d.path)
        return log_

    def _load_log(self, d: _LogDir, path: str, config: Optional[LogConfig] = None) -> Log:
        tp = parse_dir_name(path)
        started = time.monotonic()
        log_ = self._open_log(d, path, config, d.recovery.get(tp, 0), d.starts.get(tp), d.clean_shutdown)
        other = self._logs.get(tp)
        if other is not None:
            log_ = self._keep_one(tp, other, self._log_dir_of[tp], log_, d)
            if log_ is other:
                return other
        hw = d.high_watermarks.get(tp)
        if hw is not None and log_.high_watermark is None:
            log_.update_high_watermark(hw)
        self._logs[tp] = log_
        self._log_dir_of[tp] = d
        log.info("loaded log %s-%d (%d segments, offsets %d..%d) in %.3f s%s", tp[0], tp[1], log_.num_segments,
                 log_.log_start_offset, log_.log_end_offset, time.monotonic() - started,
                 "" if d.clean_shutdown else " with recovery")
        return log_

    def _keep_one(self, tp: Tuple[str, int], first: Log, first_dir: "_LogDir", second: Log,
                  second_dir: "_LogDir") -> Log:
        """A partition found in two directories at start: a broker stopped while a moved
        replica took the place of the one it copied (both whole at that moment, the old one
        retired later). The one that ends later is kept; the other is renamed for deletion.
        -> the one kept."""
        keep, drop, drop_dir = (second, first, first_dir) if second.log_end_offset > first.log_end_offset \
            else (first, second, second_dir)
        log.warning("%s-%d is in two log directories (a move that had not retired the old copy): keeping %s "
                    "(log end %d), removing %s (log end %d)", tp[0], tp[1], keep.directory, keep.log_end_offset,
                    drop.directory, drop.log_end_offset)
        drop.close(flush=False)
        doomed = os.path.join(drop_dir.path, delete_dir_name(*tp))
        os.rename(drop.directory, doomed)
        self.scheduler.schedule(functools.partial(_remove_tree, doomed), name="delete-log")
        return keep

    def get_log(self, topic: str, partition: int) -> Optional[Log]:
        return self._find_log(topic, partition, None)

    def _find_log(self, topic: str, partition: int, config: Optional[LogConfig]) -> Optional[Log]:
        """A loaded log, or one on disk loaded now with ``config`` (else its topic's config)."""
        with self._lock:
            found = self._logs.get((topic, partition))
            if found is not None or self.closed:
                return found
            for d in self._dirs:  # a log not loaded yet (load_all=False)
                path = os.path.join(d.path, "%s-%d" % (topic, partition))
                if os.path.isdir(path):
                    return self._load_log(d, path, config)
            return None

    def get_or_create_log(self, topic: str, partition: int, config: Optional[LogConfig] = None,
                          is_new: bool = True) -> Log:
        """The log of a partition, created in the log dir holding the fewest partitions.

        A log on disk that is not loaded yet is loaded with ``config``, as a new one
        is created with it; a log already loaded keeps the config it was loaded with
        (Kafka's getOrCreateLog), which for logs loaded at start is the topic's.

        KafkaStorageError when the log was in an offline directory, or when it is not
        ``is_new`` (a replica the controller counts as existing) and is not loaded while
        a directory is offline: it may be there, and an empty log would lose its records.
        """
        with self._lock:
            self._check_open()
            existing = self._find_log(topic, partition, config)
            if existing is not None:
                return existing
            where = self._offline_logs.get((topic, partition))
            if where is not None:
                raise KafkaStorageError("the log of %s-%d is in the offline log directory %s"
                                        % (topic, partition, where))
            if not is_new and self._offline:
                raise KafkaStorageError("cannot create the log of %s-%d: it may be in an offline log directory (%s)"
                                        % (topic, partition, ", ".join(sorted(self._offline))))
            if not self._dirs:
                raise KafkaStorageError("every log directory is offline")
            preferred = self._preferred.pop((topic, partition), None)
            chosen = next((d for d in self._dirs if d.path == preferred), None)
            if chosen is not None:
                d = chosen
            elif len(self._dirs) == 1:
                d = self._dirs[0]
            else:
                counts = {id(d): 0 for d in self._dirs}
                for tp, d in self._log_dir_of.items():
                    counts[id(d)] += 1
                d = min(self._dirs, key=lambda d: (counts[id(d)], self._dirs.index(d)))
            path = os.path.join(d.path, "%s-%d" % (topic, partition))
            parse_dir_name(path)  # the topic's characters must make a valid directory name
            return self._load_log(d, path, config)

    def all_logs(self) -> List[Log]:
        with self._lock:
            return list(self._logs.values())

    # -- moving a replica between log directories (AlterReplicaLogDirs) ---------------

    def dir_of(self, topic: str, partition: int) -> Optional[str]:
        """The log directory holding the partition's log (None when it is not loaded)."""
        with self._lock:
            d = self._log_dir_of.get((topic, partition))
            return None if d is None else d.path

    def check_online_dir(self, path: str) -> str:
        """``path`` as the absolute path of an online log directory: LogDirNotFoundError when it
        is none of ``log.dirs``, KafkaStorageError when it is offline."""
        wanted = os.path.abspath(path)
        with self._lock:
            if any(d.path == wanted for d in self._dirs):
                return wanted
            if wanted in self._offline:
                raise KafkaStorageError("log directory %s is offline" % wanted)
        raise LogDirNotFoundError("%s is not one of this broker's log directories (%s)" % (
            path, ", ".join(self.config.log_dirs)))

    def prefer_dir(self, topic: str, partition: int, path: str) -> None:
        """Create the partition's log in ``path`` (an online log directory) when it is created
        (Kafka's maybeUpdatePreferredLogDir: an AlterReplicaLogDirs ahead of the replica)."""
        wanted = self.check_online_dir(path)
        with self._lock:
            self._preferred[(topic, partition)] = wanted

    def future_log(self, topic: str, partition: int) -> Optional[Log]:
        """The copy of a replica being moved to another log directory, if one is."""
        with self._lock:
            found = self._future.get((topic, partition))
            return None if found is None else found[0]

    def future_dir(self, topic: str, partition: int) -> Optional[str]:
        with self._lock:
            found = self._future.get((topic, partition))
            return None if found is None else found[1].path

    def create_future_log(self, topic: str, partition: int, path: str) -> Optional[Log]:
        """Start the copy of a replica in the log directory ``path``: an empty log in
        ``<topic>-<partition>.<id>-future`` there, with the current log's config; -> it, the
        one already under way to ``path``, or None when the log is in ``path`` already.

        LogDirNotFoundError or KafkaStorageError for ``path`` as :meth:`check_online_dir`;
        KafkaStorageError while any directory is offline (the log of the replica could be in
        it: Kafka creates no future log then); ReplicaNotAvailableError when the partition
        has no log here. A move under way to another directory is abandoned first."""
        wanted = self.check_online_dir(path)
        with self._lock:
            self._check_open()
            tp = (topic, partition)
            if self._offline:
                raise KafkaStorageError("cannot move %s-%d while log directories are offline (%s)"
                                        % (topic, partition, ", ".join(sorted(self._offline))))
            current = self._logs.get(tp)
            if current is None:
                raise ReplicaNotAvailableError("%s-%d has no log on this broker" % tp)
            if self._log_dir_of[tp].path == wanted:
                self._abandon_future_locked(tp)
                return None
            found = self._future.get(tp)
            if found is not None and found[1].path == wanted:
                return found[0]
            self._abandon_future_locked(tp)
            d = next(d for d in self._dirs if d.path == wanted)
            future = self._open_log(d, os.path.join(d.path, future_dir_name(topic, partition)), current.config,
                                    0, None, True)
            self._future[tp] = (future, d)
            log.info("moving %s-%d from %s to %s", topic, partition, self._log_dir_of[tp].path, wanted)
            return future

    def abandon_future_log(self, topic: str, partition: int) -> None:
        """Stop a move under way: its copy is closed and removed (the replica stays where it is)."""
        with self._lock:
            self._abandon_future_locked((topic, partition))

    def _abandon_future_locked(self, tp: Tuple[str, int]) -> None:
        found = self._future.pop(tp, None)
        if found is None:
            return
        future, _ = found
        try:
            future.close(flush=False)
        except OSError as exc:
            log.warning("%s: closing an abandoned copy: %s", future.directory, exc)
        self.scheduler.schedule(functools.partial(_remove_tree, future.directory), name="delete-log")
        log.info("the move of %s-%d to %s is abandoned", tp[0], tp[1], found[1].path)

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """Finish a move (Kafka's replaceCurrentWithFutureLog): the future log, caught up with
        the current one (the caller holds the partition still: nothing is appended or truncated
        meanwhile), takes its epochs and log start, is flushed and renamed
        ``<topic>-<partition>`` in its directory, and becomes the partition's log; -> it.

        The current log is retired after ``file.delete.delay.ms`` (readers holding it finish
        their reads): closed, renamed ``*-delete`` and removed. Should the broker stop before,
        the partition is in both directories at the next start, both whole, and the one that
        ends later is kept."""
        tp = (topic, partition)
        with self._lock:
            self._check_open()
            current, current_dir = self._logs[tp], self._log_dir_of[tp]
            future, future_dir = self._future[tp]
            if future.log_end_offset != current.log_end_offset:
                raise IllegalStateError("the copy of %s-%d ends at %d, the log at %d" % (
                    topic, partition, future.log_end_offset, current.log_end_offset))
            future.copy_epochs_from(current)
            if current.log_start_offset > future.log_start_offset:
                future.delete_records_before(current.log_start_offset)
            end = future.log_end_offset
            future.close()  # flushed: the renamed log opens without recovery
            target = os.path.join(future_dir.path, "%s-%d" % tp)
            os.rename(future.directory, target)
            moved = self._open_log(future_dir, target, current.config, end, future.log_start_offset, True)
            del self._future[tp]
            self._logs[tp] = moved
            self._log_dir_of[tp] = future_dir
            current_dir.recovery.pop(tp, None)
            current_dir.starts.pop(tp, None)
        delay = current.config.file_delete_delay_ms / 1000.0
        self.scheduler.schedule(functools.partial(self._retire, current, current_dir), delay=delay,
                                name="retire-moved-log")
        log.info("moved %s-%d from %s to %s (log end %d)", topic, partition, current_dir.path, future_dir.path, end)
        return moved

    def _retire(self, old: Log, d: "_LogDir") -> None:
        """The log a move replaced: closed, renamed for deletion and removed."""
        self.cleaning.abort(old, pause=True)
        try:
            old.close(flush=False)
        finally:
            self.cleaning.resume(old)
        doomed = os.path.join(d.path, delete_dir_name(old.topic, old.partition))
        try:
            os.rename(old.directory, doomed)
        except OSError as exc:
            log.warning("%s: could not rename the moved replica's old copy for deletion: %s", old.directory, exc)
            return
        _remove_tree(doomed)

    def offline_dirs(self) -> Dict[str, str]:
        """The offline log directories: absolute path -> why it went offline."""
        with self._lock:
            return dict(self._offline)

    def offline_partitions(self) -> List[Tuple[str, int]]:
        """The partitions whose logs were in an offline directory."""
        with self._lock:
            return sorted(self._offline_logs)

    def add_dir_failure_listener(self, listener: DirFailureListener) -> None:
        """Tell ``listener`` of every directory going offline from now on."""
        with self._lock:
            self._dir_listeners.append(listener)

    def report_io_error(self, path: str, exc: OSError) -> None:
        """A write in the directory ``path`` failed: unless the disk is only full, the directory
        goes offline, on the manager's scheduler thread (the caller may hold a log's lock)."""
        if is_resource_exhausted(exc):
            return
        with self._lock:
            d = next((d for d in self._dirs if d.path == path), None)
            if d is None or path in self._failing:
                return
            self._failing[path] = "%s: %s" % (type(exc).__name__, exc)
            reason = self._failing[path]
        try:
            self.scheduler.schedule(functools.partial(self._dir_failed, d, reason), name="log-dir-failure")
        except IllegalStateError:  # closing: the directory is let go of with the rest
            pass

    def _dir_failed(self, d: "_LogDir", reason: str) -> None:
        gone = self._take_offline(d, reason)
        if gone is None:
            return
        with self._lock:
            listeners, online = list(self._dir_listeners), len(self._dirs)
        if online:
            log.error("log directory %s is offline (%s); %d partitions went with it: %s; %d directories stay online",
                      d.path, reason, len(gone), ", ".join("%s-%d" % tp for tp in gone), online)
        else:
            log.critical("log directory %s is offline (%s): every log directory is offline", d.path, reason)
        for listener in listeners:
            try:
                listener(d.path, gone, online)
            except Exception:  # one listener's failure must not hide the directory from the others
                log.exception("a listener of log directory failures failed")

    def _take_offline(self, d: "_LogDir", reason: str) -> Optional[List[Tuple[str, int]]]:
        """Take ``d`` offline: its logs leave the manager and let go of their files without a
        write; -> their partitions (None when it was offline already)."""
        with self._lock:
            if d not in self._dirs:
                return None
            self._dirs.remove(d)
            self._offline[d.path] = reason
            self._failing.pop(d.path, None)
            taken = [(tp, lg) for tp, lg in self._logs.items() if self._log_dir_of.get(tp) is d]
            for tp in [tp for tp, (_, fd) in self._future.items() if fd is d or self._log_dir_of.get(tp) is d]:
                future, _ = self._future.pop(tp)  # a move to or from the failed directory stops
                try:
                    future.close_handlers()
                except OSError:
                    pass
            for tp, _ in taken:
                del self._logs[tp]
                del self._log_dir_of[tp]
                self._offline_logs[tp] = d.path
                d.recovery.pop(tp, None)
                d.starts.pop(tp, None)
        for _, lg in taken:
            self.cleaning.abort(lg, pause=True)
            try:
                lg.close_handlers()
            except OSError as exc:
                log.warning("%s: letting go of its files: %s", lg.directory, exc)
            finally:
                self.cleaning.resume(lg)
        try:
            d.release()
        except OSError as exc:
            log.warning("%s: releasing its lock: %s", d.path, exc)
        return sorted(tp for tp, _ in taken)

    def logs_by_dir(self) -> List[Tuple[str, List[Log]]]:
        """Each log directory (absolute path, in ``log.dirs`` order) with the logs it holds
        (Kafka's DescribeLogDirs walks the live dirs the same way)."""
        with self._lock:
            return [(d.path, [log_ for tp, log_ in sorted(self._logs.items()) if self._log_dir_of.get(tp) is d])
                    for d in self._dirs]

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove a partition's log: renamed ``*-delete`` at once, its files removed in the
        background; -> False when there is no such log."""
        with self._lock:
            if (topic, partition) not in self._logs and self.get_log(topic, partition) is None:
                return False
        self.delete_logs(topic, [partition])
        return True

    def delete_logs(self, topic: str, partitions: Iterable[int]) -> None:
        """Remove several logs of a topic, all or none (a topic's delete).

        Each log leaves the manager, its cleaning stops and it closes; then each
        directory is renamed ``<topic>-<partition>.<id>-delete`` (the topic shortened
        so the name fits a file name, as Kafka does) and removed in the background.
        When a rename fails, the ones done are renamed back and every log is loaded
        again, then the error is raised. Nothing that waits (a clean stopping, a
        close's flush) runs under the manager's lock.
        """
        taken: List[Tuple[Tuple[str, int], Log, _LogDir]] = []
        with self._lock:
            self._check_open()
            for p in partitions:
                tp = (topic, p)
                log_ = self._logs.get(tp) or self.get_log(topic, p)
                d = self._log_dir_of.get(tp)
                if log_ is None or d is None:
                    continue
                del self._logs[tp]
                del self._log_dir_of[tp]
                self._abandon_future_locked(tp)
                taken.append((tp, log_, d))
        for tp, log_, d in taken:
            # Every cleaner's clean of it stops, and none starts (paused) until it is closed;
            # after that a closed log is never claimed.
            self.cleaning.abort(log_, pause=True)
            try:
                log_.close(flush=False)  # deleted: no fsync of data nobody will read
            finally:
                self.cleaning.resume(log_)
        renamed: List[Tuple[str, str]] = []
        current = ""
        try:
            for tp, log_, d in taken:
                current = log_.directory
                doomed = os.path.join(d.path, delete_dir_name(*tp))
                os.rename(current, doomed)
                renamed.append((current, doomed))
        except OSError as exc:
            log.error("could not rename %s for deletion: %s; the topic's logs are kept", current, exc)
            for original, doomed in reversed(renamed):
                try:
                    os.rename(doomed, original)
                except OSError:
                    log.exception("could not rename %s back to %s", doomed, original)
            with self._lock:
                for tp, log_, d in taken:
                    if os.path.isdir(log_.directory):
                        self._load_log(d, log_.directory, log_.config)
            raise
        for _, doomed in renamed:
            self.scheduler.schedule(functools.partial(_remove_tree, doomed), name="delete-log")
        with self._lock:
            for tp, _, d in taken:
                d.recovery.pop(tp, None)
                d.starts.pop(tp, None)
            if not self.closed:
                self.checkpoint()

    # -- background work -------------------------------------------------------------

    def _start_background(self) -> None:
        c = self.config
        self.scheduler.schedule(self._flush_due, delay=_s(c.log_flush_scheduler_interval_ms),
                                period=_s(c.log_flush_scheduler_interval_ms), name="flush")
        self.scheduler.schedule(self._retention, delay=_s(c.log_retention_check_interval_ms),
                                period=_s(c.log_retention_check_interval_ms), name="retention")
        self.scheduler.schedule(self.checkpoint, delay=_s(c.log_flush_offset_checkpoint_interval_ms),
                                period=_s(c.log_flush_offset_checkpoint_interval_ms), name="checkpoint")
        if c.log_cleaner_enable:
            from .cleaner import LogCleaner

            self.cleaner = LogCleaner(self)
            self.cleaner.start()

    def _flush_due(self) -> None:
        for log_ in self.all_logs():
            if not log_.closed:
                try:
                    log_.flush_if_due()
                except OSError as exc:
                    self._write_failed(log_, exc)

    def _write_failed(self, log_: Log, exc: OSError) -> None:
        """A background write of a log failed: reported for its directory, raised on for a full
        disk (the scheduler logs it; the task runs again)."""
        with self._lock:
            d = self._log_dir_of.get((log_.topic, log_.partition))
        if d is not None:
            self.report_io_error(d.path, exc)
        if is_resource_exhausted(exc):
            raise exc
        log.error("%s: could not flush: %s", log_.directory, exc)

    def _retention(self) -> None:
        self.cleanup_logs()

    def cleanup_logs(self) -> int:
        """Apply retention to every log with a delete policy; -> segments deleted."""
        deleted = 0
        for log_ in self.all_logs():
            if not log_.closed:
                deleted += log_.delete_old_segments()
        return deleted

    def checkpoint(self) -> None:
        """Write every online dir's recovery-point and log-start-offset checkpoints (atomically).

        A dir whose write fails with an I/O error other than a full disk goes offline and the
        others are written; a full disk raises (after the other dirs are written)."""
        def write(d: _LogDir) -> None:
            logs = {tp: lg for tp, lg in self._logs.items() if self._log_dir_of.get(tp) is d}
            d.recovery.update({tp: lg.recovery_point for tp, lg in logs.items()})
            d.starts.update({tp: lg.log_start_offset for tp, lg in logs.items()})
            d.recovery_points.write(d.recovery)
            d.log_start_offsets.write(d.starts)

        self._write_each_dir(write)

    def _write_each_dir(self, write: Callable[["_LogDir"], None]) -> None:
        """``write(d)`` for each online directory, under the lock: one whose write fails with
        an I/O error goes offline (unless a resource ran out) and the others are written; a
        resource running out (a full disk) is raised once every directory was tried."""
        full: Optional[OSError] = None
        with self._lock:
            for d in list(self._dirs):
                try:
                    write(d)
                except OSError as exc:
                    self.report_io_error(d.path, exc)
                    if is_resource_exhausted(exc):
                        full = full or exc
        if full is not None:
            raise full

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[Tuple[str, int], int]) -> None:
        """Write each dir's ``replication-offset-checkpoint`` (Kafka's high watermark checkpoint)
        for the partitions it holds: what readers of the files alone may treat as committed."""
        def write(d: _LogDir) -> None:
            entries = {tp: hw for tp, hw in high_watermarks.items() if self._log_dir_of.get(tp) is d}
            OffsetCheckpoint(os.path.join(d.path, REPLICATION_CHECKPOINT)).write(entries)

        self._write_each_dir(write)

    def high_watermark_checkpoint(self) -> Dict[Tuple[str, int], int]:
        """Every dir's ``replication-offset-checkpoint``: the high watermarks written last. A
        file that does not parse is reported and read as empty (a replica then learns its
        high watermark again from its leader)."""
        out: Dict[Tuple[str, int], int] = {}
        with self._lock:
            for d in self._dirs:
                path = os.path.join(d.path, REPLICATION_CHECKPOINT)
                try:
                    out.update(OffsetCheckpoint(path).read())
                except (CorruptCheckpointError, OSError) as exc:
                    log.warning("ignoring %s: %s", path, exc)
        return out

    # -- lifecycle -----------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise LogClosedError("log manager for %s is closed" % ", ".join(d.path for d in self._dirs))

    def close(self) -> None:
        """Stop background work, flush and close every log, write checkpoints and the
        clean-shutdown marker, release the directory locks."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        # Background work stops outside the lock: a running task may be waiting for it.
        if self.cleaner is not None:
            self.cleaner.shutdown()
        self.scheduler.shutdown(run_pending=True)
        with self._lock:
            # A full disk or an I/O error fails a flush or a checkpoint: without the marker
            # the next start recovers the logs from their segments, as after a crash.
            clean = True
            for future, _ in self._future.values():  # a move under way starts again when asked again
                try:
                    future.close(flush=False)
                except OSError:
                    pass
            self._future.clear()
            for log_ in self._logs.values():
                try:
                    log_.close()
                except OSError as exc:
                    clean = False
                    log.error("could not flush and close %s: %s; the next start recovers it", log_.directory, exc)
            try:
                self.checkpoint()
            except OSError as exc:
                clean = False
                log.error("could not write the checkpoints: %s; the next start recovers every log", exc)
            for d in self._dirs:
                try:
                    if clean:
                        d.mark_clean()
                finally:
                    d.release()

    def __enter__(self) -> "LogManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- standalone logs (Log.open) ----------------------------------------------------

    @classmethod
    def standalone_log(cls, path: str, config: Mapping[str, object]) -> Log:
        """A log opened on its own: one manager per parent directory, shared and counted."""
        path = os.path.abspath(path)
        parent = os.path.dirname(path)
        topic, partition = parse_dir_name(path)
        if "config" in config:
            log_config = config["config"]
            if len(config) > 1:
                raise ConfigError("give either config= or config keywords, not both")
            assert isinstance(log_config, LogConfig)
        else:
            log_config = LogConfig.from_dict(dict(config))
        with cls._standalone_lock:
            manager, count = cls._standalone.get(parent, (None, 0))
            if manager is None or manager.closed:
                manager, count = cls(config=LogManagerConfig(log_dirs=[parent]), load_all=False), 0
            loaded = manager._logs.get((topic, partition))
            if loaded is not None and not loaded.closed:
                raise IllegalStateError("log %s is already open in this process" % path)
            if loaded is not None:  # closed earlier while the manager served other logs
                manager._logs.pop((topic, partition))
                manager._log_dir_of.pop((topic, partition), None)
            log_ = manager.get_or_create_log(topic, partition, log_config)
            cls._standalone[parent] = (manager, count + 1)
        log_._close_hook = lambda lg: cls._standalone_closed(parent, lg)
        return log_

    @classmethod
    def _standalone_closed(cls, parent: str, log_: Log) -> None:
        with cls._standalone_lock:
            manager, count = cls._standalone.get(parent, (None, 0))
            if manager is None:
                return
            manager.checkpoint()
            if count <= 1:
                del cls._standalone[parent]
                manager.close()
            else:
                cls._standalone[parent] = (manager, count - 1)


def _read_or_ignore(checkpoint: OffsetCheckpoint, consequence: str) -> Dict[Tuple[str, int], int]:
    """A checkpoint's entries; an unreadable one is reported and read as empty: it only
    spares work (recovery) or hides records (the log start), so without it nothing is lost."""
    try:
        return checkpoint.read()
    except (CorruptCheckpointError, OSError) as exc:
        log.warning("%s; ignored: %s (the next checkpoint rewrites it)", exc, consequence)
        return {}


def _as_list(value: Any) -> List[str]:
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    return [os.fspath(v) for v in value]


def _s(ms: int) -> float:
    """Milliseconds to seconds for the scheduler; Kafka's Long.MAX means 'practically never'."""
    return min(ms, 10 * 365 * 86400 * 1000) / 1000.0
