"""Offset translation: the syncs a flow emits, the store that reads them, the checkpoints it yields.

Offsets of a source partition and of its copy on the target differ (records may be
skipped: aborted transactions, compaction, a retention gap), so a flow records now
and then that source offset ``u`` was copied to target offset ``d``: an offset sync.

**Emitting** (:class:`SyncEmitter`, Kafka's ``OffsetSyncWriter.PartitionState``): after a
copied record is acknowledged, a sync is due when it is the partition's first in this run,
when translation from the last sync would be ``offset.lag.max`` or more behind
(``downstream - (last_sync_downstream + 1) >= offset.lag.max``), when an upstream offset was
skipped, or when the downstream offset went back (the remote topic was recreated).
:class:`OffsetSyncQueue` is the rest of Kafka's ``OffsetSyncWriter`` without the producer:
a due sync is sent at once, the latest undue one per partition waits for the next commit
(so a quiet partition's end is synced too), and at most ``max_outstanding`` are in flight.

**Reading** (:class:`OffsetSyncStore`, Kafka's ``OffsetSyncStore``): per source partition a
fixed array of 64 syncs, the latest first, spaced exponentially further apart towards the
past (invariants below), so that a group far behind the end can still be translated,
coarsely, while one near the end is translated precisely. An offset ``o`` translates
through the latest kept sync ``s`` with ``s.upstream <= o``: to ``s.downstream`` when
equal, else to ``s.downstream + 1`` (records after the sync may or may not have been
copied, so going further could skip some); when every kept sync is newer than ``o``, or
the initial read of the topic has not reached its end, or the partition has no sync,
``o`` is not translated (None).

The array's invariants (Kafka's, checked by its tests and ours), for the syncs at
indexes ``i < j`` with upstream offsets ``u(i) >= u(j)``:

- A: ``syncs[0]`` is the latest sync read;
- B: ``u(i) <= u(j) + 2**j - 2**i`` (a sync is never much older than its index allows);
- C: ``u(i) >= u(j) + 2**max(i - 2, 0)`` (neighbours are far enough apart to be worth keeping);
- D: ``syncs[63]`` is the earliest sync kept since the last rewind (with
  ``initialization_must_read_to_end``, the last one of the initial read).

An upstream offset going back (the source topic was recreated) clears the array.

**Checkpointing** (Kafka's ``MirrorCheckpointTask``): :func:`checkpoints_for_group` turns a
group's committed offsets on the source into checkpoints of the remote partitions, through
the store, keeping them monotonic with a :class:`CheckpointStore` (the latest checkpoint of
each group and partition, loaded from the checkpoints topic at start);
:func:`offsets_to_sync` picks what ``sync.group.offsets.enabled`` commits on the target.
:func:`translate_offsets` is Kafka's ``RemoteClusterUtils.translateOffsets`` over the records
of a checkpoints topic: a group's latest checkpoint per partition, as offsets to commit on
the target.
"""

from __future__ import annotations

import threading
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Protocol, Tuple

from ..client.consumer import OffsetAndMetadata, TopicPartition
from ..errors import CorruptRecordError, InvalidArgumentError
from .records import Buffer, Checkpoint, OffsetSync

__all__ = ["SYNCS_PER_PARTITION", "CheckpointFlow", "CheckpointStore", "OffsetSyncQueue", "OffsetSyncStore",
           "SyncEmitter", "TranslatedOffsets", "checkpoint", "checkpoints_for_group", "offsets_to_sync",
           "translate_offsets"]

#: One sync per bit of a 64-bit offset: enough to span any offset at exponential spacing.
SYNCS_PER_PARTITION = 64

Partition = Tuple[str, int]


class SyncEmitter:
    """Whether a copied record's offsets call for an offset sync (Kafka's ``PartitionState``).

    One per source partition, fed every acknowledged copy in offset order with
    :meth:`update`. Kafka's keeps a "sync due" flag until its writer resets it, which the
    writer does right after every update that set it; here :meth:`update` answers for
    itself, which gives the same answers in that use and cannot be left set by mistake.
    Not thread-safe: one task's thread owns it.
    """

    __slots__ = ("max_offset_lag", "previous_upstream_offset", "previous_downstream_offset",
                 "last_sync_downstream_offset")

    def __init__(self, max_offset_lag: int) -> None:
        #: ``offset.lag.max``: how far behind translation from the last sync may fall.
        self.max_offset_lag = max_offset_lag
        self.previous_upstream_offset = -1
        self.previous_downstream_offset = -1
        #: The downstream offset of the last sync due (-1: none yet in this run).
        self.last_sync_downstream_offset = -1

    def update(self, upstream: int, downstream: int) -> bool:
        """Record that source offset ``upstream`` was copied to target offset ``downstream``;
        True when a sync of this pair is due: the first of this run, translation from the last
        sync ``offset.lag.max`` or more behind, an upstream offset skipped, or the downstream
        offset gone back."""
        no_previous_sync = self.last_sync_downstream_offset == -1
        # Translation goes one past the last sync, hence the + 1.
        too_stale = downstream - (self.last_sync_downstream_offset + 1) >= self.max_offset_lag
        skipped_upstream = upstream - self.previous_upstream_offset != 1
        truncated_downstream = downstream < self.previous_downstream_offset
        due = no_previous_sync or too_stale or skipped_upstream or truncated_downstream
        if due:
            self.last_sync_downstream_offset = downstream
        self.previous_upstream_offset = upstream
        self.previous_downstream_offset = downstream
        return due

    def update_run(self, upstream: int, downstream: int, count: int) -> List[int]:
        """:meth:`update` of ``count`` copies in a row, upstream ``upstream + i`` to downstream
        ``downstream + i``, in one step; -> the indexes ``i`` whose updates were due, as ``count``
        calls would have answered. Past the first, such a run can only make a sync due by
        staleness (no offset is skipped, none goes back), every ``offset.lag.max`` records."""
        if count <= 0:
            return []
        due = [0] if self.update(upstream, downstream) else []
        index = 0
        while True:
            # The first index at which downstream + i - (last + 1) >= max_offset_lag.
            index = max(index + 1, self.last_sync_downstream_offset + 1 + self.max_offset_lag - downstream)
            if index >= count:
                break
            due.append(index)
            self.last_sync_downstream_offset = downstream + index
        self.previous_upstream_offset = upstream + count - 1
        self.previous_downstream_offset = downstream + count - 1
        return due

    def __repr__(self) -> str:
        return "SyncEmitter(%s)" % ", ".join("%s=%r" % (name, getattr(self, name)) for name in self.__slots__)


class OffsetSyncQueue:
    """The offset syncs of one task waiting to be sent (Kafka's ``OffsetSyncWriter`` without its producer).

    :meth:`maybe_queue` after each acknowledged copy; :meth:`take_pending` hands out the
    syncs to send now, at most ``max_outstanding`` in flight, each handed back with
    :meth:`sent` when its send completes (either way: a lost sync costs precision, not
    correctness); :meth:`promote_delayed` at each commit of the task's positions makes the
    latest undue sync of every partition pending. Thread-safe: the producer's callbacks may
    call :meth:`sent` from their own thread.
    """

    def __init__(self, max_offset_lag: int, max_outstanding: int = 10) -> None:
        if max_outstanding < 1:
            raise InvalidArgumentError("max_outstanding must be at least 1, not %r" % (max_outstanding,))
        self.max_offset_lag = max_offset_lag
        self.max_outstanding = max_outstanding
        self._lock = threading.Lock()
        self._states: Dict[Partition, SyncEmitter] = {}
        self._delayed: Dict[Partition, OffsetSync] = {}  # insertion order: Kafka's LinkedHashMap
        self._pending: Dict[Partition, OffsetSync] = {}
        self._outstanding = 0

    def maybe_queue(self, topic_partition: Partition, upstream_offset: int, downstream_offset: int) -> bool:
        """Source ``topic_partition``'s offset ``upstream_offset`` was copied to ``downstream_offset``:
        its sync becomes pending if due, else it waits (replacing the partition's waiting one);
        -> whether it became pending (the caller sends the pending syncs then, as Kafka's task
        fires them after every record, so that a due sync is not replaced by the next one)."""
        tp = (topic_partition[0], topic_partition[1])
        sync = OffsetSync(tp[0], tp[1], upstream_offset, downstream_offset)
        with self._lock:
            state = self._states.get(tp)
            if state is None:
                state = self._states[tp] = SyncEmitter(self.max_offset_lag)
            if state.update(upstream_offset, downstream_offset):
                self._delayed.pop(tp, None)
                self._pending[tp] = sync  # a partition already pending keeps its place, as in a LinkedHashMap
                return True
            self._delayed[tp] = sync
            return False

    def maybe_queue_run(self, topic_partition: Partition, upstream_offset: int, downstream_offset: int, count: int,
                        on_due: Callable[[], None]) -> None:
        """:meth:`maybe_queue` of ``count`` copies in a row (upstream ``upstream_offset + i`` to
        downstream ``downstream_offset + i``), calling ``on_due()`` (without the lock) each time a
        sync became pending, as ``count`` calls followed each by a send of the pending syncs
        would; the work is per due sync, not per copy."""
        if count <= 0:
            return
        tp = (topic_partition[0], topic_partition[1])
        with self._lock:
            state = self._states.get(tp)
            if state is None:
                state = self._states[tp] = SyncEmitter(self.max_offset_lag)
            due = state.update_run(upstream_offset, downstream_offset, count)
        for index in due:
            with self._lock:
                if self._states.get(tp) is not state:
                    return  # forgotten meanwhile
                self._delayed.pop(tp, None)
                self._pending[tp] = OffsetSync(tp[0], tp[1], upstream_offset + index, downstream_offset + index)
            on_due()
        last = count - 1
        if not due or due[-1] != last:
            with self._lock:
                if self._states.get(tp) is state:
                    self._delayed[tp] = OffsetSync(tp[0], tp[1], upstream_offset + last, downstream_offset + last)

    def promote_delayed(self) -> None:
        """Make every waiting sync pending (at a commit: the end of a quiet partition gets synced)."""
        with self._lock:
            self._pending.update(self._delayed)
            self._delayed.clear()

    def take_pending(self) -> List[OffsetSync]:
        """The pending syncs to send now, oldest first, as many as the in-flight limit allows;
        each counts as in flight until :meth:`sent`."""
        taken: List[OffsetSync] = []
        with self._lock:
            while self._pending and self._outstanding < self.max_outstanding:
                tp = next(iter(self._pending))
                taken.append(self._pending.pop(tp))
                self._outstanding += 1
        return taken

    def sent(self) -> None:
        """A sync handed out by :meth:`take_pending` finished sending (delivered or failed)."""
        with self._lock:
            if self._outstanding > 0:
                self._outstanding -= 1

    def forget(self, topic_partitions: Iterable[Partition]) -> None:
        """Drop the state and queued syncs of partitions this task no longer copies."""
        with self._lock:
            for topic_partition in topic_partitions:
                tp = (topic_partition[0], topic_partition[1])
                self._states.pop(tp, None)
                self._delayed.pop(tp, None)
                self._pending.pop(tp, None)

    def emitter(self, topic_partition: Partition) -> Optional[SyncEmitter]:
        """The emitter state of a source partition (None before its first copy)."""
        with self._lock:
            return self._states.get((topic_partition[0], topic_partition[1]))

    @property
    def pending(self) -> Dict[Partition, OffsetSync]:
        """A copy of the syncs to send now, by source partition."""
        with self._lock:
            return dict(self._pending)

    @property
    def delayed(self) -> Dict[Partition, OffsetSync]:
        """A copy of the syncs waiting for the next commit, by source partition."""
        with self._lock:
            return dict(self._delayed)

    @property
    def outstanding(self) -> int:
        """How many syncs are in flight."""
        with self._lock:
            return self._outstanding


class OffsetSyncStore:
    """The offset syncs of every source partition, read from an offset-syncs topic (Kafka's ``OffsetSyncStore``).

    Feed it the topic's records in order (:meth:`handle_record`, or :meth:`sync` with a
    decoded one), call :meth:`mark_read_to_end` once the reader first reached the topic's
    end, then translate with :meth:`translate_downstream`. With
    ``initialization_must_read_to_end``, the syncs read before that keep only the latest
    per partition: an older one could have been superseded by a rewind the reader has not
    met yet. Kafka's checkpoint task asks for it only when it could not load its previous
    checkpoints (a :class:`CheckpointStore`, which keeps what it emits from going back).

    One thread feeds it; any number translate at the same time: each partition's array is
    replaced whole on every sync (copy on write), so a reader sees the old array or the new
    one, never a half-updated one.
    """

    def __init__(self, initialization_must_read_to_end: bool = True) -> None:
        self.initialization_must_read_to_end = initialization_must_read_to_end
        self._read_to_end = False
        self._syncs: Dict[Partition, Tuple[OffsetSync, ...]] = {}

    @property
    def read_to_end(self) -> bool:
        """Whether :meth:`mark_read_to_end` was called: translation has started."""
        return self._read_to_end

    def mark_read_to_end(self) -> None:
        """The reader has reached the end of the offset-syncs topic once: translate from now on."""
        self._read_to_end = True

    def handle_record(self, key: Optional[Buffer], value: Optional[Buffer]) -> OffsetSync:
        """Add the offset sync of one record of the topic, and return it. Bad bytes raise
        CorruptRecordError and leave the store as it was (the reader logs and skips them)."""
        offset_sync = OffsetSync.decode(key, value)
        self.sync(offset_sync)
        return offset_sync

    def sync(self, offset_sync: OffsetSync) -> None:
        """Add one offset sync (in the topic's order)."""
        tp = (offset_sync.topic, offset_sync.partition)
        current = self._syncs.get(tp)
        if current is None:
            self._syncs[tp] = (offset_sync,) * SYNCS_PER_PARTITION
            return
        syncs = list(current)
        self._update(syncs, current, offset_sync)
        self._syncs[tp] = tuple(syncs)

    def partitions(self) -> List[TopicPartition]:
        """The source partitions that have syncs."""
        return [TopicPartition(*tp) for tp in self._syncs]

    def sync_for(self, topic_partition: Partition, index: int) -> OffsetSync:
        """The sync kept at ``index`` (0: the latest, 63: the earliest) for a source partition."""
        syncs = self._syncs.get((topic_partition[0], topic_partition[1]))
        if syncs is None:
            raise InvalidArgumentError("no syncs for %s-%d" % (topic_partition[0], topic_partition[1]))
        if not 0 <= index < SYNCS_PER_PARTITION:
            raise InvalidArgumentError("index must be in [0, %d), not %r" % (SYNCS_PER_PARTITION, index))
        return syncs[index]

    def translate_downstream(self, group: Optional[str], topic_partition: Partition,
                             upstream_offset: int) -> Optional[int]:
        """Source ``topic_partition``'s offset ``upstream_offset`` (a committed offset of
        ``group``, named for the logs' sake) as an offset of the remote partition; None when it
        cannot be translated: before :meth:`mark_read_to_end`, without a sync for the
        partition, or older than every sync kept (where Kafka answers -1: a checkpoint is
        skipped all the same)."""
        if not self._read_to_end:
            return None
        syncs = self._syncs.get((topic_partition[0], topic_partition[1]))
        if syncs is None:
            return None
        found = syncs[-1]
        for candidate in syncs:  # latest first: the most precise sync at or before the offset
            if candidate.upstream_offset <= upstream_offset:
                found = candidate
                break
        if found.upstream_offset > upstream_offset:
            return None
        # Past the sync, records may or may not have been copied: one past it is as far as is safe.
        step = 0 if upstream_offset == found.upstream_offset else 1
        return found.downstream_offset + step

    # -- the sparse array (Kafka's updateSyncArray) ------------------------------------------

    def _update(self, syncs: List[OffsetSync], original: Tuple[OffsetSync, ...], offset_sync: OffsetSync) -> None:
        upstream = offset_sync.upstream_offset
        only_load_last = not self._read_to_end and self.initialization_must_read_to_end
        upstream_rewind = upstream < syncs[0].upstream_offset
        if only_load_last or upstream_rewind:
            syncs[:] = [offset_sync] * SYNCS_PER_PARTITION
            return
        replacement = offset_sync
        replacement_index = 0  # the next value of the original array to consider keeping
        syncs[0] = replacement  # invariant A
        for current in range(1, SYNCS_PER_PARTITION):
            previous = current - 1
            while True:
                old = original[replacement_index]
                # An old value not recent enough here may still fit a later, coarser index.
                is_recent = _invariant_b(syncs[previous], old, previous, current)
                # Too close to the previous value: never valid at a later index either.
                separated_from_previous = _invariant_c(syncs[previous], old, previous)
                nxt = current + 1
                separated_from_next = nxt >= SYNCS_PER_PARTITION or _invariant_c(old, syncs[nxt], current)
                following = replacement_index + 1
                duplicate = following < SYNCS_PER_PARTITION and old is original[following]
                promote = is_recent and separated_from_previous and separated_from_next
                if promote:
                    replacement = old
                skip = duplicate or not separated_from_previous
                if promote or skip:
                    replacement_index += 1
                if not (replacement_index < current and skip):
                    break
            if _invariant_b(syncs[previous], syncs[current], previous, current):
                break  # it holds here, so it holds for every later index too
            syncs[current] = replacement  # repair invariant B


def _long(value: int) -> int:
    """``value`` wrapped to a signed 64-bit integer, as Java's long arithmetic leaves it: the
    invariants' bounds are Kafka's, overflow and all (``1L << 63`` is negative there)."""
    return ((value + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def _invariant_b(i_sync: OffsetSync, j_sync: OffsetSync, i: int, j: int) -> bool:
    bound = _long(j_sync.upstream_offset + _long(1 << j) - (1 << i))
    return i_sync is j_sync or bound < 0 or i_sync.upstream_offset <= bound


def _invariant_c(i_sync: OffsetSync, j_sync: OffsetSync, i: int) -> bool:
    bound = _long(j_sync.upstream_offset + (1 << max(i - 2, 0)))
    return i_sync is j_sync or (bound >= 0 and i_sync.upstream_offset >= bound)


class CheckpointFlow(Protocol):
    """What checkpointing asks of a flow (:class:`~pylogq.mirror.config.FlowConfig` answers it)."""

    def should_checkpoint_topic(self, topic: str) -> bool: ...

    def checkpoint_topic(self, upstream_topic: str) -> str: ...


class CheckpointStore:
    """The latest checkpoint of each consumer group and remote partition (Kafka's ``CheckpointStore``).

    Loaded from the checkpoints topic when a flow's checkpointing starts (:meth:`handle_record`
    for each record, in order), then kept up to date with what is emitted (:meth:`update`),
    so that checkpoints never move a group backwards (:meth:`is_more_recent`) across
    restarts, and :meth:`converted_offsets` gives what to commit to the target's groups.
    ``groups``: the groups whose records are kept (None: every group). Not thread-safe: one
    thread checkpoints a flow.
    """

    def __init__(self, groups: Optional[Iterable[str]] = None) -> None:
        self.groups = None if groups is None else frozenset(groups)
        self._checkpoints: Dict[str, Dict[TopicPartition, Checkpoint]] = {}
        #: Records of the checkpoints topic that did not decode (ignored, as Kafka ignores them).
        self.skipped = 0

    def handle_record(self, key: Optional[Buffer], value: Optional[Buffer]) -> Optional[Checkpoint]:
        """Keep the checkpoint of one record of the checkpoints topic, and return it; None for a
        record that does not decode (counted in :attr:`skipped`) or of a group not kept."""
        try:
            checkpoint = Checkpoint.decode(key, value)
        except CorruptRecordError:
            self.skipped += 1
            return None
        if self.groups is not None and checkpoint.group not in self.groups:
            return None
        tp = TopicPartition(checkpoint.topic, checkpoint.partition)
        self._checkpoints.setdefault(checkpoint.group, {})[tp] = checkpoint
        return checkpoint

    def update(self, group: str, checkpoints: Mapping[TopicPartition, Checkpoint]) -> None:
        """Record the checkpoints just emitted for ``group`` (by remote partition)."""
        self._checkpoints.setdefault(group, {}).update(checkpoints)

    def get(self, group: str) -> Optional[Dict[TopicPartition, Checkpoint]]:
        """A copy of ``group``'s latest checkpoints by remote partition; None if it has none."""
        found = self._checkpoints.get(group)
        return None if found is None else dict(found)

    def is_more_recent(self, checkpoint: Checkpoint) -> bool:
        """Whether ``checkpoint`` is worth emitting (Kafka's ``checkpointIsMoreRecent``): the first
        for its group and partition, or the group rewound upstream, or it moves the downstream
        offset forward. A checkpoint that would move it back (the sync store translating more
        coarsely after its syncs expired) or repeat it is not."""
        last = self._checkpoints.get(checkpoint.group, {}).get(TopicPartition(checkpoint.topic, checkpoint.partition))
        if last is None:
            return True
        if checkpoint.upstream_offset < last.upstream_offset:
            return True
        return checkpoint.downstream_offset > last.downstream_offset

    def converted_offsets(self) -> Dict[str, Dict[TopicPartition, OffsetAndMetadata]]:
        """Every group's latest checkpoints as offsets to commit on the target."""
        return {group: {tp: OffsetAndMetadata(c.downstream_offset, c.metadata, -1) for tp, c in checkpoints.items()}
                for group, checkpoints in self._checkpoints.items()}


def checkpoint(flow: CheckpointFlow, sync_store: OffsetSyncStore, group: str, topic_partition: Partition,
               committed: Optional[OffsetAndMetadata]) -> Optional[Checkpoint]:
    """``group``'s committed offset of source partition ``topic_partition`` as a checkpoint of the
    remote partition (Kafka's ``MirrorCheckpointTask.checkpoint``); None when nothing is
    committed or the offset cannot be translated."""
    if committed is None or committed.offset < 0:
        return None
    downstream = sync_store.translate_downstream(group, topic_partition, committed.offset)
    if downstream is None:
        return None
    return Checkpoint(group, flow.checkpoint_topic(topic_partition[0]), topic_partition[1], committed.offset,
                      downstream, committed.metadata or "")


def checkpoints_for_group(flow: CheckpointFlow, sync_store: OffsetSyncStore, checkpoint_store: CheckpointStore,
                          group: str, upstream_offsets: Mapping[Partition, Optional[OffsetAndMetadata]]
                          ) -> Dict[TopicPartition, Checkpoint]:
    """The checkpoints to emit for ``group`` from its committed offsets on the source (by source
    partition), by remote partition (Kafka's ``checkpointsForGroup``): of the topics the flow's
    topic filter lets through, translated, and more recent than the last ones emitted. The
    caller emits them, then records them with ``checkpoint_store.update``."""
    result: Dict[TopicPartition, Checkpoint] = {}
    for tp, committed in upstream_offsets.items():
        if not flow.should_checkpoint_topic(tp[0]):
            continue
        found = checkpoint(flow, sync_store, group, tp, committed)
        if found is not None and found.downstream_offset >= 0 and checkpoint_store.is_more_recent(found):
            result[TopicPartition(found.topic, found.partition)] = found
    return result


def offsets_to_sync(converted: Mapping[TopicPartition, OffsetAndMetadata],
                    target_offsets: Optional[Mapping[TopicPartition, Optional[OffsetAndMetadata]]]
                    ) -> Dict[TopicPartition, OffsetAndMetadata]:
    """Which of a group's checkpointed offsets to commit to the group on the target (Kafka's
    ``syncGroupOffset``), given the group's committed offsets there (``target_offsets``; None
    for a group the target does not have). Only for a group with no active member on the
    target (the caller checks that it is empty or absent), and only forward: a partition
    whose target offset is already at or past the checkpoint is left alone; one with none, or
    a negative one (reset by a client such as sarama), gets the checkpoint's."""
    if target_offsets is None:
        return dict(converted)
    result: Dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, offset in converted.items():
        current = target_offsets.get(tp)
        if current is not None and current.offset >= offset.offset:
            continue
        result[tp] = offset
    return result


class TranslatedOffsets(Dict[TopicPartition, OffsetAndMetadata]):
    """A group's offsets on the target, by remote topic partition (what a consumer moving to the
    target commits), and ``skipped``: how many records of the checkpoints topic did not decode."""

    skipped: int = 0


def translate_offsets(checkpoints: Iterable[Tuple[Optional[Buffer], Optional[Buffer]]],
                      group: str) -> TranslatedOffsets:
    """``group``'s offsets on the target from the (key, value) records of the checkpoints topic
    of its source cluster (``<source>.checkpoints.internal`` on the target), read in order from
    the start: the latest checkpoint of each partition, as Kafka's
    ``RemoteClusterUtils.translateOffsets`` answers (offset and metadata, no leader epoch).
    Records that do not decode are skipped and counted, as Kafka logs and skips them."""
    result = TranslatedOffsets()
    for key, value in checkpoints:
        try:
            checkpoint = Checkpoint.decode(key, value)
        except CorruptRecordError:
            result.skipped += 1
            continue
        if checkpoint.group == group:
            result[TopicPartition(checkpoint.topic, checkpoint.partition)] = OffsetAndMetadata(
                checkpoint.downstream_offset, checkpoint.metadata, -1)
    return result
