"""Moving replicas between a broker's log directories (Kafka's ReplicaAlterLogDirsManager and its
ReplicaAlterLogDirsThread), asked for with AlterReplicaLogDirs.

A move copies the replica's log into a *future log* in the destination directory
(``<topic>-<partition>.<id>-future``, :meth:`LogManager.create_future_log`) while the replica
goes on serving from its current log: one thread copies the records past the copy's end, up to
the log end (records not yet committed too, as a follower fetches them), a chunk at a time,
and the partition truncates the copy whenever it truncates its log. Once the copy has caught
up, under the partition's lock (no append in between; what was appended since the copy last
reached the log's end, up to 64 KiB, is copied there first, so a log written without a pause
still gets its move finished), it takes the current log's leader epochs and log start, is renamed ``<topic>-<partition>`` and becomes the partition's log; the
old log is retired after ``file.delete.delay.ms``. The log cleaner leaves the partition alone
while it moves.

The dynamic broker config ``replica.alter.log.dirs.io.max.bytes.per.second`` bounds the copy
(``kafka-reassign-partitions --replica-alter-log-dirs-throttle``), measured as the replication
throttles are (:class:`~.replication_quota.ReplicationQuota`). A move stops when its partition
stops being hosted, goes offline or is closed; a move to another directory replaces it.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Dict, List, Optional, Tuple

from ... import errors
from ...storage.manager import LogManager
from ..state.partition import Partition
from .replication_quota import ReplicationQuota

__all__ = ["LogDirMover", "MOVE_CHUNK_BYTES", "MOVE_TAIL_BYTES"]

log = logging.getLogger("pylogq.broker")

TopicPartition = Tuple[str, int]

#: What one step of a move copies at most (a whole batch when one is larger).
MOVE_CHUNK_BYTES = 1 << 20
#: What a move copies at most under its partition's lock to finish (appends wait for it): the
#: records appended since the copy last reached the log's end.
MOVE_TAIL_BYTES = 64 * 1024
#: The pause of the mover thread when no move has anything to copy (a caught-up copy waits
#: for the partition to be still, appends keep it behind) or the bound is reached.
IDLE_WAIT_S = 0.05


class LogDirMover:
    """The moves of this broker's replicas between its log directories, on one thread.

    Thread-safe: moves are started and stopped from request threads; the copying runs on
    the mover's thread, started with the first move.
    """

    def __init__(self, broker_id: int, logs: LogManager, partition_of: Callable[[TopicPartition], Optional[Partition]],
                 quota: Optional[ReplicationQuota] = None) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self._partition_of = partition_of
        #: ``replica.alter.log.dirs.io.max.bytes.per.second``: what the moves copy, per second.
        self.quota = quota or ReplicationQuota("alter-log-dirs")
        self._moves: Dict[TopicPartition, str] = {}  # partition -> destination directory
        self._cond = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        #: Bytes copied by every move so far (the metric).
        self.copied_bytes = 0

    def move(self, tp: TopicPartition, path: str) -> None:
        """Move the replica of ``tp`` to the log directory ``path``; nothing to do when it is
        there already (a move elsewhere under way is abandoned). Errors as
        :meth:`LogManager.create_future_log` (ReplicaNotAvailableError without a replica,
        KafkaStorageError for an offline one)."""
        partition = self._partition_of(tp)
        if partition is None:
            raise errors.ReplicaNotAvailableError("broker %d has no replica of %s-%d" % ((self.broker_id,) + tp))
        with self._cond:
            if self._closed:
                raise errors.KafkaStorageError("broker %d is closing" % self.broker_id)
            destination = self.logs.check_online_dir(path)
            if self.logs.future_dir(*tp) not in (None, destination):
                self._stop_locked(tp, partition)  # a move elsewhere stops first
            future = self.logs.create_future_log(tp[0], tp[1], destination)
            if future is None:  # there already
                self._stop_locked(tp, partition)
                return
            if partition.future_log is not future:
                partition.start_future(future)
                self.logs.cleaning.abort(partition.log, pause=True)
            self._moves[tp] = future.directory
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pylogq-log-dir-mover-%d" % self.broker_id,
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def cancel(self, tp: TopicPartition) -> None:
        """Stop the move of ``tp``, if one is under way (its copy is removed)."""
        with self._cond:
            self._stop_locked(tp, self._partition_of(tp))

    def _stop_locked(self, tp: TopicPartition, partition: Optional[Partition]) -> None:
        self._moves.pop(tp, None)
        if partition is not None and partition.stop_future() is not None:
            self.logs.cleaning.resume(partition.log)
        self.logs.abandon_future_log(*tp)

    def moving(self) -> Dict[TopicPartition, str]:
        """The moves under way: partition -> destination directory."""
        with self._cond:
            return {tp: self.logs.future_dir(*tp) or "" for tp in self._moves}

    def set_bound(self, bytes_per_s: Optional[int]) -> None:
        self.quota.set_bound(None if bytes_per_s is None or bytes_per_s <= 0 else float(bytes_per_s))

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(30)

    # -- the mover's thread ---------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                moves = list(self._moves)
                if not moves:
                    self._cond.wait()
                    continue
            progressed = False
            for tp in moves:
                if self.quota.exceeded():
                    break
                try:
                    progressed |= self._step(tp)
                except Exception as exc:  # noqa: BLE001 - one failing move must not stop the others
                    log.error("the move of %s-%d stops: %s", tp[0], tp[1], exc)
                    with self._cond:
                        self._stop_locked(tp, self._partition_of(tp))
            if not progressed:
                with self._cond:
                    if not self._closed:
                        self._cond.wait(max(IDLE_WAIT_S, min(self.quota.wait_s(), 1.0)))

    def _step(self, tp: TopicPartition) -> bool:
        """One step of a move: copy a chunk, or finish it once caught up; -> whether it copied
        or finished."""
        partition = self._partition_of(tp)
        if partition is None or partition.closed or partition.future_log is None:
            with self._cond:
                self._stop_locked(tp, partition)
            return False
        copied = partition.copy_to_future(MOVE_CHUNK_BYTES) or 0
        if copied:
            self.quota.record(copied)
            self.copied_bytes += copied
        if copied >= MOVE_CHUNK_BYTES:
            return True  # more to copy
        # The copy reached the log's end as it was read: finish, copying under the partition's
        # lock what was appended since (at most MOVE_TAIL_BYTES; appends wait meanwhile).
        old = partition.log
        done, tail = partition.replace_with_future(lambda: self.logs.replace_current_with_future(*tp),
                                                   MOVE_TAIL_BYTES)
        if tail:
            self.quota.record(tail)
            self.copied_bytes += tail
        if done:
            with self._cond:
                self._moves.pop(tp, None)
            self.logs.cleaning.resume(old)
        return done or bool(copied or tail)


def describe_moves(mover: Optional[LogDirMover], logs: LogManager) -> List[Tuple[TopicPartition, str, int, int]]:
    """Each move under way: (partition, destination, the copy's size in bytes, its lag in offsets)."""
    out = []
    for tp, path in sorted((mover.moving() if mover is not None else {}).items()):
        future, current = logs.future_log(*tp), logs.get_log(*tp)
        if future is None or current is None:
            continue
        out.append((tp, path, future.size_in_bytes, max(0, current.log_end_offset - future.log_end_offset)))
    return out
