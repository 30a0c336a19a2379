"""One topic partition as its broker sees it: the log, the high watermark, producer state, and
its replicas when it is replicated.

Kafka's Partition (with the leader's part of ReplicaManager.appendRecords).
The log end offset (LEO) is where the next append goes; the high watermark
(HW) is the offset below which records are committed, the end of what
consumers may read. With one replica a record is committed once it is in the
log, so an append moves the HW to the LEO.

Idempotent producers: once the log has validated an append's batches (one
pass over the buffer, which also reads each header), the producer id, epoch
and sequence of each v2 batch are checked by the
:class:`~pylogq.cluster.state.producer_state.ProducerStateManager` before anything
is written; a retried batch gets its original offsets back and is not
written again. The result is :class:`~pylogq.records.AppendResult`, the one
shape an append has from the log to the wire.

Transactions: the same producer state opens a producer's transaction at its
first transactional batch and ends it at the COMMIT or ABORT marker the broker
writes (origin ``"coordinator"``, whose markers it checks for a fenced
producer or coordinator epoch); an aborted one goes to the transaction index
of the segment holding its marker. The last stable offset (LSO) is the first
offset of the oldest transaction not yet decided, or decided with its marker
not yet below the high watermark, and never more than the high watermark:
read_committed consumers read below it. It moves when markers are appended
and when the high watermark moves; the log keeps the first unstable offset
beside its offsets (:meth:`Log.last_stable_offset`).

Replication: a partition is led by one of its replicas and followed by the
others. The leader appends producers' batches stamped with its leader epoch
and tracks each follower from its fetches (:class:`ReplicaState`). A follower
whose log reached the high watermark (and the start of the leader's epoch)
joins the in-sync replicas (ISR); one that has not caught up with the leader's
log end for ``replica.lag.time.max.ms`` leaves it (:meth:`Partition.maybe_shrink_isr`).
The high watermark is the smallest log end among the ISR and only moves
forward; until every follower of the ISR has fetched from a new leader it
does not move at all. An ISR change is written to the metadata store first
(``alter_isr``: a conditional write on the partition epoch) and applied here
only when the store took it, so the store's ISR always includes every replica
the leader counts on. A follower appends what it fetched as it is
(:meth:`Partition.append_as_follower`), producer state included, and takes
the leader's high watermark bounded by its own log end.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from ...errors import (
    IllegalStateError,
    InvalidArgumentError,
    InvalidRequiredAcksError,
    KafkaStorageError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from ...records import AppendResult
from ...storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
)
from ...storage.segment import FileRegion
from ...storage.transaction_index import AbortedTxn
from ..contract import LeaderAndIsrPartition, ProducerDescription
from .producer_state import ProducerStateManager

__all__ = ["AlterIsr", "ISOLATION_LEVELS", "NO_LEADER", "ORIGINS", "Partition", "ReplicaState", "UNKNOWN_OFFSET"]

log = logging.getLogger("pylogq.partition")

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
ORIGINS = ("client", "coordinator")
NO_LEADER = -1
#: A follower's log end before its first fetch from this leader.
UNKNOWN_OFFSET = -1

#: Asks for a new ISR of a partition this broker leads to be written to the metadata store,
#: conditionally on the partition epoch given: (partition, proposed ISR, partition epoch).
#: It must not block (the caller holds the partition's lock); whoever writes it answers
#: with :meth:`Partition.isr_change_done`.
AlterIsr = Callable[["Partition", List[int], int], None]


class ReplicaState:
    """The leader's view of one follower, from its fetches. Guarded by the partition's lock."""

    __slots__ = ("log_end_offset", "log_start_offset", "last_caught_up_ms", "last_fetch_leader_end", "last_fetch_ms")

    def __init__(self, last_caught_up_ms: int = 0) -> None:
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET
        self.last_caught_up_ms = last_caught_up_ms
        self.last_fetch_leader_end = UNKNOWN_OFFSET
        self.last_fetch_ms = 0

    def update(self, fetch_offset: int, log_start_offset: int, fetch_ms: int, leader_end: int) -> None:
        """A fetch from ``fetch_offset`` at ``fetch_ms`` while the leader's log ended at
        ``leader_end``. The follower was caught up now if it asks for the leader's end, and
        at its previous fetch if it asks for at least what the leader had then."""
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, fetch_ms)
        elif fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = fetch_ms

    def __repr__(self) -> str:
        return "ReplicaState(leo=%d, caught_up_ms=%d)" % (self.log_end_offset, self.last_caught_up_ms)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Partition:
    """A partition hosted by this broker: its log, its high watermark, and its replicas' state.

    Invariant: ``log_start_offset <= high_watermark <= log_end_offset``; a leader's
    ISR contains the leader; the ISR applied here is always one the metadata store
    holds (or the store's is a superset being shrunk).
    Thread-safe: appends, role and ISR changes, the high watermark and producer
    state are serialized by one lock; reads take no lock (the log's reads are
    lock-free snapshots and the high watermark is one attribute). Every change of
    the high watermark is given to the log too (:meth:`Log.update_high_watermark`):
    the log cleaner reads it there. The partition does not own its log: closing it
    leaves the log to whoever opened it (the LogManager).
    """

    def __init__(self, topic: str, index: int, log: Log, leader_epoch: int = 0, *,
                 high_watermark: Optional[int] = None, single_replica: bool = True,
                 broker_id: int = 0, alter_isr: Optional[AlterIsr] = None) -> None:
        """``high_watermark`` defaults to the log end (everything on disk is committed with
        one replica); ``single_replica=False`` leaves the HW to :meth:`update_high_watermark`.

        The partition starts as the leader of its only replica, ``broker_id``; a
        replicated partition takes its role from :meth:`make_leader` or
        :meth:`make_follower`. ``alter_isr`` writes ISR changes to the metadata store."""
        self.topic = topic
        self.index = index
        self.log = log
        self.broker_id = broker_id
        self._leader_epoch = leader_epoch
        #: Whether an append moves the high watermark to the log end (this broker leads and
        #: is the only in-sync replica).
        self.single_replica = single_replica
        self._lock = threading.RLock()
        self._leader_id = broker_id
        self._assignment: Tuple[int, ...] = (broker_id,)
        self._isr: Tuple[int, ...] = (broker_id,)
        self._partition_epoch = 0
        self._controller_epoch = -1
        self._remote: Dict[int, ReplicaState] = {}
        self._leader_epoch_start = 0  # where this leader's epoch begins in the log
        self.alter_isr = alter_isr
        #: An ISR change asked for and not yet answered (at most one at a time).
        self._pending_isr: Optional[Tuple[int, ...]] = None
        #: Called (outside the lock) when the high watermark moves forward: the broker checks
        #: the requests waiting on this partition (consumers' fetches, acks=all produces).
        self.on_high_watermark_advanced: Optional[Callable[[], None]] = None
        #: Called (outside the lock) after an append to a leader that has followers: their
        #: fetches parked at the old log end may complete.
        self.on_log_end_advanced: Optional[Callable[[], None]] = None
        self.closed = False
        #: Closed because its log directory failed: calls answer KAFKA_STORAGE_ERROR.
        self.offline = False
        #: The copy of this replica's log being made in another log directory
        #: (AlterReplicaLogDirs), truncated with the log, until it replaces it.
        self.future_log: Optional[Log] = None
        #: The producers and transactions of :attr:`future_log`, which writes its own transaction index.
        self._future_producers: Optional[ProducerStateManager] = None
        self._truncations = 0  # truncations of the log so far (a copy's read must not outlive one)
        self.producer_state = ProducerStateManager()
        #: The first unstable offset last given to the log (None: none).
        self._first_unstable: Optional[int] = None
        with log.lock:
            end = log.log_end_offset
            hw = end if high_watermark is None else high_watermark
            self._high_watermark = max(min(hw, end), log.log_start_offset)
            self.log.update_high_watermark(self._high_watermark)
            self.producer_state.load_from_log(log, high_watermark=self._high_watermark)
            self._set_first_unstable(self.producer_state.first_unstable_offset)

    # -- state -------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's last stable offset: the first unstable offset when below the high watermark,
        else the high watermark. Every offset below it is decided and replicated: the bound of a
        read_committed read."""
        return self.log.last_stable_offset(self._high_watermark)

    @property
    def first_unstable_offset(self) -> Optional[int]:
        """The first offset of the oldest transaction ongoing, or decided with its marker at or
        above the high watermark (never below the log start); None when there is none."""
        return self.log.first_unstable_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        with self._lock:
            if epoch < self._leader_epoch:
                raise IllegalStateError("leader epoch cannot go back from %d to %d" % (self._leader_epoch, epoch))
            self._leader_epoch = epoch

    @property
    def leader_id(self) -> int:
        """The broker that leads this partition (-1: none known)."""
        return self._leader_id

    @property
    def is_leader(self) -> bool:
        return self._leader_id == self.broker_id

    @property
    def assignment(self) -> Tuple[int, ...]:
        """The replicas, the preferred leader first."""
        return self._assignment

    @property
    def isr(self) -> Tuple[int, ...]:
        return self._isr

    @property
    def partition_epoch(self) -> int:
        """The version of this partition's state in the metadata store that this broker knows."""
        return self._partition_epoch

    @property
    def controller_epoch(self) -> int:
        return self._controller_epoch

    def replica_state(self, broker_id: int) -> Optional[ReplicaState]:
        """The leader's view of follower ``broker_id`` (None when it is not a follower here)."""
        return self._remote.get(broker_id)

    def update_high_watermark(self, offset: int) -> bool:
        """Set the high watermark (replication's commit point); -> whether it moved.

        It may move back (a new leader's HW can be lower) but never past the
        log end or below the log start. Waiters wake when it advances.
        """
        with self._lock:
            end = self.log.log_end_offset
            if not self.log.log_start_offset <= offset <= end:
                raise OffsetOutOfRangeError(
                    "high watermark %d of %s-%d must lie between the log start %d and the log end %d"
                    % (offset, self.topic, self.index, self.log.log_start_offset, end))
            old = self._high_watermark
            self._high_watermark = offset
            self.log.update_high_watermark(self._high_watermark)
            self._update_unstable()
        if offset > old and self.on_high_watermark_advanced is not None:
            self.on_high_watermark_advanced()
        return offset != old

    # -- roles ---------------------------------------------------------------------------

    def make_leader(self, state: LeaderAndIsrPartition, now_ms: Optional[int] = None) -> bool:
        """Lead this partition as the controller decided; -> whether this broker did not lead it
        before (Kafka's ``isNewLeader``: a new leader epoch of a leadership it kept is no new
        leadership, and what waits on one, such as loading a coordinator's state, does not
        start again).

        A new leader epoch starts at the log end (recorded in the log's leader epoch
        cache). A new leadership also forgets what it knew of the followers and counts
        the ISR's followers as caught up now: each has ``replica.lag.time.max.ms`` to
        fetch. A leadership that only moves to a new epoch (the controller took a replica
        out of the ISR, or a new controller restated it) keeps its followers' positions,
        so the high watermark goes on moving with their next fetches.
        """
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            new_leadership = not self.is_leader
            new_epoch = new_leadership or state.leader_epoch != self._leader_epoch
            self._set_state(state)
            self._pending_isr = None
            self._leader_id = self.broker_id
            if new_epoch:
                end = self.log.log_end_offset
                self.log.assign_epoch_start_offset(state.leader_epoch, end)
                self._leader_epoch_start = end
            if new_leadership:
                self._remote = {r: ReplicaState(now if r in state.isr else 0)
                                for r in state.replicas if r != self.broker_id}
            else:
                for r in state.replicas:
                    if r != self.broker_id and r not in self._remote:
                        self._remote[r] = ReplicaState()
                for r in list(self._remote):
                    if r not in state.replicas:
                        del self._remote[r]
            self._update_single_replica()
            advanced = self._maybe_increment_high_watermark()
        self._notify(advanced)
        return new_leadership

    def make_unassigned(self) -> None:
        """No role yet (a replica of a cluster opened before the controller's word): it takes
        neither appends nor fetched records until :meth:`make_leader` or :meth:`make_follower`."""
        with self._lock:
            self._leader_id = NO_LEADER
            self._assignment = ()
            self._isr = ()
            self._remote = {}
            self.single_replica = False

    def make_follower(self, state: LeaderAndIsrPartition) -> bool:
        """Follow ``state.leader``; -> whether the leader or its epoch changed (the follower must
        then check its log against the new leader's before fetching)."""
        with self._lock:
            self._check_open()
            changed = state.leader != self._leader_id or state.leader_epoch != self._leader_epoch
            self._set_state(state)
            self._pending_isr = None
            self._leader_id = state.leader
            self._remote = {}
            self.single_replica = False
            return changed

    def _set_state(self, state: LeaderAndIsrPartition) -> None:
        if state.leader_epoch < self._leader_epoch:
            raise IllegalStateError("leader epoch of %s-%d cannot go back from %d to %d"
                             % (self.topic, self.index, self._leader_epoch, state.leader_epoch))
        self._assignment = tuple(state.replicas)
        self._isr = tuple(state.isr)
        self._leader_epoch = state.leader_epoch
        self._partition_epoch = state.partition_epoch
        self._controller_epoch = state.controller_epoch

    def _update_single_replica(self) -> None:
        """An append commits at once only while this leader is the whole ISR and no change of
        the ISR is pending: an expansion being written already counts its new member (KIP-497's
        maximal ISR), whose copy an acknowledged record must then be on."""
        self.single_replica = self.is_leader and self._isr == (self.broker_id,) and self._pending_isr is None

    def _update_unstable(self) -> None:
        """After an append or a move of the high watermark (lock held): the producer state learns
        the high watermark (transactions decided below it are stable) and the log takes the first
        unstable offset. Two attribute checks and nothing else while no transaction is unstable,
        the case of every partition that sees no transactional producer."""
        producers = self.producer_state
        if producers.txns.empty and self._first_unstable is None:
            return
        producers.on_high_watermark(self._high_watermark)
        self._set_first_unstable(producers.first_unstable_offset)

    def _set_first_unstable(self, offset: Optional[int]) -> None:
        """Give the log the producer state's first unstable offset (lock held)."""
        self._first_unstable = offset
        self.log.update_first_unstable_offset(offset)

    def _notify(self, advanced: bool) -> None:
        if advanced and self.on_high_watermark_advanced is not None:
            self.on_high_watermark_advanced()

    # -- appending -----------------------------------------------------------------------

    def append(self, data: Union[bytes, bytearray, memoryview], required_acks: int = 1,
               origin: str = "client") -> AppendResult:
        """Append a producer's batches; -> their offsets (the original ones for a retried batch).

        Only the leader appends (else NotLeaderOrFollowerError). ``required_acks``
        is 0, 1 or -1 (all in-sync replicas); the append returns once the log has
        it (in the page cache; fsync follows ``flush.messages``/``flush.ms``): an
        acks=-1 caller then waits for :meth:`check_replicated`. With fewer in-sync
        replicas than ``min.insync.replicas`` an acks=-1 append is refused before
        anything is written (NotEnoughReplicasError). Other ``required_acks``
        raise InvalidRequiredAcksError. For ``origin="client"`` idempotent batches
        are checked (duplicate, OutOfOrderSequenceNumberError,
        InvalidProducerEpochError, UnknownProducerIdError, and
        InvalidTxnStateError for a non-transactional batch of a producer whose
        transaction is open) once the log has validated them and before
        anything is written. Only the broker's own writers (``"coordinator"``)
        may write control batches (a client's get InvalidRecordError); theirs
        are checked for epochs only: a batch or marker of a fenced producer
        epoch (InvalidProducerEpochError), a marker of a fenced coordinator
        (TransactionCoordinatorFencedError), a control batch that is no
        transaction marker (InvalidRecordError). Log.append's errors
        (CorruptRecordError, MessageTooLargeError, ...) pass through, with
        nothing written. A retry's result has ``duplicate`` set.
        """
        if required_acks not in (0, 1, -1) or isinstance(required_acks, bool):
            raise InvalidRequiredAcksError(
                "required_acks must be 0, 1 or -1 (all in-sync replicas), got %r" % (required_acks,))
        if origin not in ORIGINS:
            raise InvalidArgumentError("origin must be one of %s, got %r" % (", ".join(ORIGINS), origin))
        buffer = bytearray(data)  # Log.append patches offsets into it in place
        with self._lock:
            self._check_open()
            if not self.is_leader:
                raise NotLeaderOrFollowerError("broker %d does not lead %s-%d (leader: %d)"
                                               % (self.broker_id, self.topic, self.index, self._leader_id))
            if required_acks == -1 and len(self._isr) < self.log.config.min_insync_replicas:
                raise NotEnoughReplicasError(
                    "%s-%d has %d in-sync replicas %s, fewer than min.insync.replicas=%d"
                    % (self.topic, self.index, len(self._isr), list(self._isr),
                       self.log.config.min_insync_replicas))
            producers = self.producer_state
            client = origin == "client"
            result = self.log.append(buffer, self._leader_epoch,
                                     check_producers=producers.check_append if client
                                     else producers.check_coordinator_append,
                                     producers_appended=producers.appended, allow_control=not client)
            advanced = self.single_replica and not result.duplicate
            if advanced:
                self._high_watermark = self.log.log_end_offset
                self.log.update_high_watermark(self._high_watermark)
            if not producers.txns.empty or self._first_unstable is not None:
                self._update_unstable()
            followers = bool(self._remote) and not result.duplicate
        if advanced and self.on_high_watermark_advanced is not None:
            self.on_high_watermark_advanced()
        if followers and self.on_log_end_advanced is not None:
            self.on_log_end_advanced()
        return result

    def check_replicated(self, required_offset: int) -> Optional[int]:
        """For an acks=-1 append ending before ``required_offset``: None while the high
        watermark has not reached it, else the produce's error code: 0, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR has shrunk below
        ``min.insync.replicas`` meanwhile, or NOT_LEADER_OR_FOLLOWER when this broker
        no longer leads (the records may be lost with the leadership)."""
        if self.closed or not self.is_leader:
            return NotLeaderOrFollowerError.code
        if self._high_watermark < required_offset:
            return None
        if len(self._isr) < self.log.config.min_insync_replicas:
            return NotEnoughReplicasAfterAppendError.code
        return 0

    # -- the leader's view of its followers ------------------------------------------------

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, log_start_offset: int,
                                    leader_end: int, now_ms: Optional[int] = None) -> bool:
        """Record a follower's fetch (its log ends at ``fetch_offset``); it may join the ISR and
        move the high watermark. -> whether the high watermark advanced.

        ``leader_end`` is the leader's log end when the fetch was read. Raises
        NotLeaderOrFollowerError when this broker does not lead, or the replica is not
        one of the partition's.
        """
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            state = self._remote.get(replica_id) if self.is_leader else None
            if state is None:
                raise NotLeaderOrFollowerError(
                    "broker %d is not a follower of %s-%d led by broker %d (replicas %s)"
                    % (replica_id, self.topic, self.index, self._leader_id, list(self._assignment)))
            state.update(fetch_offset, log_start_offset, now, leader_end)
            self._maybe_expand_isr(replica_id, state)
            advanced = self._maybe_increment_high_watermark()
        self._notify(advanced)
        return advanced

    def _maybe_expand_isr(self, replica_id: int, state: ReplicaState) -> None:
        """A follower that has reached the high watermark and this leader's epoch joins the ISR."""
        if replica_id in self._isr or replica_id not in self._assignment or \
                state.log_end_offset < max(self._high_watermark, self._leader_epoch_start):
            return
        self._alter_isr(list(self._isr) + [replica_id], "%d caught up at offset %d" % (replica_id, state.log_end_offset))

    def followers_silent_ms(self, now_ms: Optional[int] = None) -> Optional[int]:
        """How long since an in-sync follower last fetched from this leader (the most recent
        of them); None when the ISR has no other replica. Takes no lock (a guess for
        :class:`~pylogq.cluster.zk.session_guard.SessionGuard`, read under other locks)."""
        now = _now_ms() if now_ms is None else now_ms
        followers = [r for r in tuple(self._isr) if r != self.broker_id]
        if not followers:
            return None
        remote = dict(self._remote)
        # A follower counts as heard from when this broker became its leader, too.
        last = max((max(remote[r].last_fetch_ms, remote[r].last_caught_up_ms) if r in remote else 0)
                   for r in followers)
        return now - last

    def maybe_shrink_isr(self, max_lag_ms: int, now_ms: Optional[int] = None) -> bool:
        """Drop from the ISR each follower that has not caught up with the leader's log end for
        ``max_lag_ms`` (Kafka's ``replica.lag.time.max.ms``); -> whether a change was asked for.
        When the store takes it, the high watermark may advance (a smaller ISR may have a
        larger minimum)."""
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            if self.closed or not self.is_leader:
                return False
            end = self.log.log_end_offset
            lagging = []
            for r in self._isr:
                state = self._remote.get(r)
                if state is not None and state.log_end_offset != end and now - state.last_caught_up_ms > max_lag_ms:
                    lagging.append(r)
            if not lagging:
                return False
            self._alter_isr([r for r in self._isr if r not in lagging],
                            "%s not caught up for %d ms" % (lagging, max_lag_ms))
            return True

    def _alter_isr(self, new_isr: List[int], why: str) -> None:
        """Ask for ``new_isr`` to be written to the metadata store (lock held); it applies when
        the store took it (:meth:`isr_change_done`)."""
        if self.alter_isr is None or self._pending_isr is not None:
            return
        log.info("ISR of %s-%d: asking %s -> %s (%s)", self.topic, self.index, list(self._isr), new_isr, why)
        self._pending_isr = tuple(new_isr)
        self._update_single_replica()
        self.alter_isr(self, list(new_isr), self._partition_epoch)

    def isr_change_pending(self, proposed: Sequence[int], expected_epoch: int) -> bool:
        """Whether the ISR change ``proposed`` at partition epoch ``expected_epoch`` still waits
        for its answer (no decision of the controller replaced it)."""
        with self._lock:
            return not self.closed and self._pending_isr == tuple(proposed) and \
                self._partition_epoch == expected_epoch

    def isr_change_done(self, proposed: Sequence[int], expected_epoch: int, new_epoch: Optional[int]) -> bool:
        """The metadata store's answer to an ISR change asked at partition epoch
        ``expected_epoch``: applied with its ``new_epoch``, or refused (None: the store holds
        a newer state; the controller's next decision will tell). -> whether the high
        watermark advanced."""
        with self._lock:
            if self._pending_isr != tuple(proposed) or self._partition_epoch != expected_epoch:
                return False  # the controller decided meanwhile (make_leader/make_follower)
            self._pending_isr = None
            if new_epoch is None:
                log.info("ISR of %s-%d stays %s: the metadata store holds a newer state than partition "
                         "epoch %d", self.topic, self.index, list(self._isr), expected_epoch)
            else:
                self._isr = tuple(proposed)
                self._partition_epoch = new_epoch
            self._update_single_replica()
            advanced = self._maybe_increment_high_watermark()
        self._notify(advanced)
        return advanced

    def _maybe_increment_high_watermark(self) -> bool:
        """Move the HW to the smallest log end among the ISR if that is further (lock held).

        While a change is pending the maximal ISR counts (KIP-497): a follower being added
        already (the controller may elect it as soon as the store has it, so it must hold
        every committed record), and one being removed still, until the store has taken
        its removal.
        """
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        members = self._isr if self._pending_isr is None else set(self._isr) | set(self._pending_isr)
        for r in members:
            if r == self.broker_id:
                continue
            state = self._remote.get(r)
            if state is None or state.log_end_offset == UNKNOWN_OFFSET:
                return False  # a follower of the ISR has not fetched from this leader yet
            new_hw = min(new_hw, state.log_end_offset)
        if new_hw > self._high_watermark:
            self._high_watermark = new_hw
            self.log.update_high_watermark(self._high_watermark)
            self._update_unstable()
            return True
        return False

    # -- following -----------------------------------------------------------------------

    def _check_follower(self, leader_epoch: Optional[int]) -> None:
        """A follower's operation: this broker must follow, in ``leader_epoch`` when given (lock held)."""
        self._check_open()
        if self.is_leader or (leader_epoch is not None and leader_epoch != self._leader_epoch):
            raise NotLeaderOrFollowerError(
                "broker %d no longer follows %s-%d in leader epoch %s (leader %d, epoch %d)"
                % (self.broker_id, self.topic, self.index, leader_epoch, self._leader_id, self._leader_epoch))

    def append_as_follower(self, data: Union[bytes, bytearray, memoryview],
                           leader_epoch: Optional[int] = None) -> AppendResult:
        """Append batches fetched from the leader as they are (their offsets and epochs), with
        the producers they carry; the caller then sets the high watermark. With
        ``leader_epoch``, only while this broker still follows in that epoch. The log
        checks only what keeps it whole (:meth:`Log.append_as_follower`) and hands the
        producer state the headers of that one pass."""
        with self._lock:
            self._check_follower(leader_epoch)
            result = self.log.append_as_follower(data, producers_appended=self.producer_state.appended)
            self._update_unstable()
            return result

    def update_follower_high_watermark(self, leader_high_watermark: int, leader_log_start: int,
                                       leader_epoch: Optional[int] = None) -> bool:
        """A follower takes the leader's high watermark and log start, bounded by its own log;
        -> whether its high watermark advanced."""
        with self._lock:
            self._check_follower(leader_epoch)
            end = self.log.log_end_offset
            start = min(leader_log_start, end)
            if start > self.log.log_start_offset:
                self.log.delete_records_before(start)
            hw = max(min(leader_high_watermark, end), self.log.log_start_offset)
            advanced = hw > self._high_watermark
            self._high_watermark = hw
            self.log.update_high_watermark(self._high_watermark)
            self._update_unstable()
        self._notify(advanced)
        return advanced

    def truncate_as_follower(self, offset: int, leader_epoch: int) -> bool:
        """:meth:`truncate_to`, only while this broker follows in ``leader_epoch``."""
        with self._lock:
            self._check_follower(leader_epoch)
            return self.truncate_to(offset)

    def truncate_fully_as_follower(self, offset: int, leader_epoch: int) -> None:
        """:meth:`truncate_fully_and_start_at`, only while this broker follows in ``leader_epoch``."""
        with self._lock:
            self._check_follower(leader_epoch)
            self.truncate_fully_and_start_at(offset)

    def end_offset_for_epoch(self, epoch: int) -> Tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch at or below ``epoch``, where it ends); the
        current epoch ends at the log end."""
        self._check_open()
        return self.log.end_offset_for_epoch(epoch)

    # -- reading ---------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, isolation_level: str = "read_uncommitted",
             min_one_batch: bool = True) -> FileRegion:
        """Whole batches from the one holding ``offset``, none at or past the high watermark
        (``read_uncommitted``) or the last stable offset (``read_committed``,
        :attr:`last_stable_offset`; without transactions it is the high watermark).

        An offset between that bound and the log end gives an empty region; below the log
        start or past the log end, OffsetOutOfRangeError. :meth:`read_committed` also gives
        the aborted transactions a read_committed consumer needs.
        """
        _check_isolation(isolation_level)
        self._check_open()
        bound = self._high_watermark if isolation_level == "read_uncommitted" else self.last_stable_offset
        return self.log.read(offset, max_bytes, max_offset=bound, min_one_batch=min_one_batch)

    def read_committed(self, offset: int, max_bytes: int,
                       min_one_batch: bool = True) -> Tuple[FileRegion, int, List[AbortedTxn]]:
        """A read_committed fetch, as Kafka's leader reads one: -> (whole batches from the one
        holding ``offset`` below the last stable offset, that last stable offset, the aborted
        transactions overlapping the batches read).

        The aborted transactions are those overlapping [``offset``, upper bound), the upper
        bound being the next segment's base offset (the log end for the active segment)
        capped by the last stable offset, as Kafka bounds them (it may take the first offset
        past the read from the offset index instead: either covers the batches read; a
        consumer only applies an aborted transaction to batches it receives). An empty read
        has none (an empty list). Costs nothing beyond :meth:`read` when the log has no
        aborted transaction indexed. Thread-safe: it takes no lock, the LSO being read once.
        """
        self._check_open()
        lso = self.last_stable_offset
        region = self.log.read(offset, max_bytes, max_offset=lso, min_one_batch=min_one_batch)
        if not region.length or not self.log.has_aborted_transactions:
            return region, lso, []
        upper = min(lso, self.log.segment_upper_bound(region.segment_base_offset))
        return region, lso, self.log.collect_aborted_transactions(offset, upper)

    def read_for_follower(self, offset: int, max_bytes: int, min_one_batch: bool = True) -> FileRegion:
        """Whole batches from ``offset`` up to the log end (a follower copies what is not yet
        committed too)."""
        self._check_open()
        return self.log.read(offset, max_bytes, min_one_batch=min_one_batch)

    def offset_for_timestamp(self, timestamp: int,
                             isolation_level: str = "read_uncommitted") -> Optional[Tuple[int, int]]:
        """Kafka's ListOffsets: -> (offset, timestamp), or None when no fetchable record is that late.

        A consumer may fetch below the high watermark (``read_uncommitted``) or the last
        stable offset (``read_committed``, ListOffsets v2+), as Kafka bounds it: -1
        (latest) answers that bound; -2 (earliest) and -4 (earliest local: there is no
        tiered storage) the log start; -3 the first record holding the largest timestamp
        below the bound (KIP-734); -5 (latest tiered) None, nothing being tiered. Another
        value finds the first batch whose max timestamp is at least ``timestamp``, among
        the batches below the bound.
        """
        _check_isolation(isolation_level)
        self._check_open()
        bound = self._high_watermark if isolation_level == "read_uncommitted" else self.last_stable_offset
        if timestamp == LATEST_TIMESTAMP:
            return bound, -1
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return self.log.log_start_offset, -1
        if timestamp == MAX_TIMESTAMP:
            return self.log.offset_of_max_timestamp(below=bound)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return None
        if timestamp < 0:
            raise InvalidArgumentError("timestamp must be -1 (latest), -2 (earliest), -3 (max timestamp), -4 (earliest "
                             "local), -5 (latest tiered) or a time in ms, got %d" % timestamp)
        found = self.log.offset_for_timestamp(timestamp)
        if found is None or found[0] >= bound:
            return None
        return found

    def legacy_offsets_before(self, timestamp: int, max_count: int) -> List[int]:
        """ListOffsets v0's offsets (:meth:`Log.legacy_offsets_before`), the high watermark
        standing for the log end."""
        self._check_open()
        return self.log.legacy_offsets_before(timestamp, max_count, int(time.time() * 1000),
                                              below=self._high_watermark)

    # -- deletion and lifecycle -------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """Kafka's DeleteRecords: make records below ``offset`` unreadable; -> the new log start.

        ``offset`` may not pass the high watermark (OffsetOutOfRangeError):
        uncommitted records are not the client's to delete. Followers take the new
        log start from the leader's fetch answers.
        """
        with self._lock:
            self._check_open()
            if not self.is_leader:
                raise NotLeaderOrFollowerError("broker %d does not lead %s-%d" % (self.broker_id, self.topic,
                                                                                  self.index))
            if offset < 0 or offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    "cannot delete records of %s-%d before offset %d: it must lie between 0 and the "
                    "high watermark %d" % (self.topic, self.index, offset, self._high_watermark))
            return self.log.delete_records_before(offset)

    def active_producers(self) -> List[ProducerDescription]:
        """Kafka's DescribeProducers for this partition: each producer's epoch, last sequence, last
        timestamp, the coordinator epoch of its last marker and where its open transaction
        started (-1 without), by producer id."""
        with self._lock:
            self._check_open()
            entries = self.producer_state.entries()
        return [ProducerDescription(e.producer_id, e.epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                                    e.current_txn_first_offset) for e in entries]

    def truncate_to(self, offset: int) -> bool:
        """Remove records at ``offset`` and beyond (a follower diverging from its leader);
        the high watermark, producer state and a copy under way follow. -> whether anything
        was removed."""
        with self._lock:
            self._check_open()
            self._truncations += 1
            removed = self.log.truncate_to(offset)
            if removed:
                self._high_watermark = min(self._high_watermark, self.log.log_end_offset)
                self.log.update_high_watermark(self._high_watermark)
                # The transactions (and transaction index entries) above the point went with it.
                self.producer_state.truncate_to(offset, self.log, self._high_watermark)
                self._set_first_unstable(self.producer_state.first_unstable_offset)
            future = self.future_log
            if future is not None and future.log_end_offset > self.log.log_end_offset:
                future.truncate_to(self.log.log_end_offset)
                if self._future_producers is not None:
                    self._future_producers.truncate_to(future.log_end_offset, future)
            return removed

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (a follower whose log is entirely behind
        the leader's log start)."""
        with self._lock:
            self._check_open()
            self._truncations += 1
            self.log.truncate_fully_and_start_at(offset)
            self.producer_state.clear()
            self._set_first_unstable(None)
            self._high_watermark = offset
            self.log.update_high_watermark(self._high_watermark)
            if self.future_log is not None:
                self.future_log.truncate_fully_and_start_at(offset)
                if self._future_producers is not None:
                    self._future_producers.clear()

    # -- moving to another log directory ---------------------------------------------------

    def copy_to_future(self, max_bytes: int) -> Optional[int]:
        """Copy the next records of the log (up to its end, ``max_bytes`` at most but a whole
        batch) into :attr:`future_log`; -> the bytes copied, None when no copy is under way.
        The read happens outside the lock; the append under it, and only if the copy still
        ends where the read began (a truncation meanwhile makes the next call read again)."""
        with self._lock:
            self._check_open()
            future = self.future_log
            if future is None:
                return None
            log_ = self.log
            if future.log_end_offset < log_.log_start_offset or (
                    future.log_end_offset == future.log_start_offset != log_.log_start_offset):
                future.truncate_fully_and_start_at(log_.log_start_offset)  # nothing copied is below the log start
                if self._future_producers is not None:
                    self._future_producers.clear()
            start, end, truncations = future.log_end_offset, log_.log_end_offset, self._truncations
        if start >= end:
            return 0
        try:
            data = log_.read(start, max_bytes, max_offset=end).read()
        except OffsetOutOfRangeError:
            return 0  # the log start moved past it meanwhile: the next call starts the copy there
        with self._lock:
            if self.future_log is not future or self.log is not log_ or future.log_end_offset != start \
                    or self._truncations != truncations:
                return 0  # moved on meanwhile: what was read may be gone
            producers = self._future_producers
            future.append_as_follower(data, producers_appended=None if producers is None else producers.appended)
        return len(data)

    def start_future(self, future: Log) -> None:
        """Copy this replica's log into ``future`` from now on (:meth:`copy_to_future`), its producer
        state rebuilt from what it holds already: the copy writes its own transaction index."""
        with self._lock:
            self._check_open()
            producers = ProducerStateManager()
            with future.lock:
                producers.load_from_log(future)
            self.future_log = future
            self._future_producers = producers

    def stop_future(self) -> Optional[Log]:
        """Stop the copy under way (after any step of it in progress); -> its log."""
        with self._lock:
            future, self.future_log = self.future_log, None
            self._future_producers = None
            return future

    def replace_with_future(self, replace: Callable[[], Log], tail_bytes: int = 0) -> Tuple[bool, int]:
        """Finish a move: when the copy has caught up with the log, ``replace()`` (the log
        manager's) makes it the log, under this partition's lock (no append or truncation
        meanwhile); -> (whether it did, the bytes copied here).

        With ``tail_bytes``, a copy behind by at most that much (a whole batch when one is
        larger) is brought up to the log's end under the lock first: appends wait for that
        copy, as they wait for the swap, so a log written without a pause still gets its move
        finished (outside the lock the copy may never find the log still)."""
        with self._lock:
            self._check_open()
            future = self.future_log
            if future is None:
                return False, 0
            log_ = self.log
            copied = 0
            start, end = future.log_end_offset, log_.log_end_offset
            if tail_bytes > 0 and log_.log_start_offset <= start < end:
                try:
                    data = log_.read(start, tail_bytes, max_offset=end).read()
                except OffsetOutOfRangeError:
                    data = b""
                if data:
                    producers = self._future_producers
                    future.append_as_follower(data, producers_appended=None if producers is None
                                              else producers.appended)
                    copied = len(data)
            if future.log_end_offset != log_.log_end_offset:
                return False, copied
            self.log = replace()
            self.log.update_high_watermark(self._high_watermark)
            self.future_log = None
            self._future_producers = None
            # The same records, so the same transactions: the new log takes the first unstable offset.
            self._set_first_unstable(self.producer_state.first_unstable_offset)
            return True, copied

    def _check_open(self) -> None:
        if self.offline:
            raise KafkaStorageError("the log of %s-%d is in an offline log directory on broker %d"
                                    % (self.topic, self.index, self.broker_id))
        if self.closed:
            raise NotLeaderOrFollowerError("partition %s-%d is closed on this broker" % (self.topic, self.index))

    def go_offline(self) -> None:
        """Its log directory failed (its log let go of its files): every later call raises
        KafkaStorageError, as Kafka answers for an offline replica."""
        with self._lock:
            self.closed = True
            self.offline = True

    def close(self) -> None:
        """Stop serving: later calls raise NotLeaderOrFollowerError. The log stays open."""
        with self._lock:
            self.closed = True

    def __repr__(self) -> str:
        return "Partition(%s-%d, start=%d, hw=%d, end=%d, leader=%d, leader_epoch=%d, isr=%s)" % (
            self.topic, self.index, self.log.log_start_offset, self._high_watermark,
            self.log.log_end_offset, self._leader_id, self._leader_epoch, list(self._isr))


def _check_isolation(level: str) -> None:
    if level not in ISOLATION_LEVELS:
        raise InvalidArgumentError("isolation_level must be 'read_uncommitted' or 'read_committed', got %r" % (level,))
