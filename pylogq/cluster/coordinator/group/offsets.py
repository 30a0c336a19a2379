"""Committed offsets of the groups a coordinator serves: OffsetCommit, TxnOffsetCommit,
OffsetFetch and OffsetDelete (Kafka's handleCommitOffsets, handleTxnCommitOffsets,
handleFetchOffsets and handleDeleteOffsets over its GroupMetadataManager's offset storage).

:class:`GroupOffsets` validates a commit against the group's membership (Kafka's
validateOffsetCommit), writes the offsets to the group's ``__consumer_offsets`` partition
through the :class:`~pylogq.cluster.coordinator.group.metadata_manager.GroupMetadataManager`,
and keeps them pending until the write's replication is known (Kafka's pending offset
commits). A transactional commit (KIP-98) is written as one transactional batch of its
producer and stays pending for that producer until the broker writes the producer's
COMMIT or ABORT marker to the partition (:meth:`GroupOffsets.complete_txn`). The group
coordinator hands these calls on, and gives the lock it guards every group with, its
closed state and how to keep a committing member's session alive.

Committed offsets never expire (no ``offsets.retention.minutes``: a commit's retention
time is accepted and ignored, and offsets stay until their group or the offsets are
deleted).
"""

from __future__ import annotations

import threading
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ....errors import (
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InvalidGroupIdError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnstableOffsetCommitError,
)
from ...contract import CommittedOffset, TxnOffset
from . import offsets_schema as schema
from .group import (
    COMPLETING_REBALANCE,
    CONSUMER_PROTOCOL_TYPE,
    DEAD,
    EMPTY,
    NONE,
    GroupMetadata,
    MemberMetadata,
    Partition,
    now_ms,
    subscribed_topics,
)
from .metadata_manager import GroupMetadataManager

__all__ = ["NO_OFFSET", "GroupOffsets"]

#: The offset OffsetFetch answers for a partition without a committed offset.
NO_OFFSET = -1


class GroupOffsets:
    """The committed (and pending) offsets of the groups a coordinator serves.

    Thread-safe: every call takes the coordinator's lock (``lock``), the one that guards
    every group, and a storage call runs under it, which keeps the order of the log equal
    to the order of the in-memory changes. Not usable once the coordinator is closed
    (``closed()``): calls answer COORDINATOR_NOT_AVAILABLE.
    """

    def __init__(self, metadata: GroupMetadataManager, lock: threading.Condition, closed: Callable[[], bool],
                 touch: Callable[[MemberMetadata], None], offset_metadata_max_bytes: int) -> None:
        self.metadata = metadata
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self._groups = metadata.groups  # the manager's map, by group id
        self._lock = lock
        self._closed = closed
        self._touch = touch  # a committing member's session starts again

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Dict[Partition, Tuple[int, Optional[str]]],
        leader_epochs: Optional[Dict[Partition, int]] = None,
        *,
        group_instance_id: Optional[str] = None,
        commit_timestamps: Optional[Dict[Partition, int]] = None,
        unknown_group_not_found: bool = False,
    ) -> Dict[Partition, int]:
        """Commit offsets for a group member, or (generation -1, member "") for a group without members.

        The commit is written to ``__consumer_offsets`` before this returns; a
        failed write answers every partition with the mapped error code. A
        partition's commit timestamp is ``commit_timestamps``' (OffsetCommit v1)
        unless missing or -1, then now. A member commit to an unknown group is
        ILLEGAL_GENERATION, or GROUP_ID_NOT_FOUND with ``unknown_group_not_found``
        (OffsetCommit v9+). The commit is visible at once: see
        :meth:`commit_offsets_pending` for a write that must be replicated first.
        """
        codes, complete = self.commit_offsets_pending(
            group_id, generation_id, member_id, offsets, leader_epochs, group_instance_id=group_instance_id,
            commit_timestamps=commit_timestamps, unknown_group_not_found=unknown_group_not_found)
        complete(NONE)
        return codes

    def commit_offsets_pending(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Dict[Partition, Tuple[int, Optional[str]]],
        leader_epochs: Optional[Dict[Partition, int]] = None,
        *,
        group_instance_id: Optional[str] = None,
        commit_timestamps: Optional[Dict[Partition, int]] = None,
        unknown_group_not_found: bool = False,
    ) -> Tuple[Dict[Partition, int], Callable[[int], None]]:
        """:meth:`commit_offsets`, the written offsets kept pending: OffsetFetch goes on seeing
        the previous commit until the returned function is called with the outcome of the
        write's replication (Kafka's pending offset commits). 0 makes them the committed
        offsets (unless a later write already is), an error code drops them."""
        with self._lock:
            codes, written = self._commit_locked(group_id, generation_id, member_id, offsets, leader_epochs,
                                                 group_instance_id, commit_timestamps, unknown_group_not_found)
        done: List[int] = []

        def complete(code: int) -> None:
            if not done:
                done.append(code)
                self._complete_commit(group_id, written, code)

        return codes, complete

    def _complete_commit(self, group_id: str, written: Dict[Partition, Tuple[int, schema.OffsetCommitValue]],
                         code: int) -> None:
        if not written:
            return
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                return  # deleted or unloaded meanwhile: what the log holds is loaded again
            for tp, (seq, value) in written.items():
                pending = group.pending_offsets.get(tp)
                if pending is not None and pending[0] == seq:
                    del group.pending_offsets[tp]
                if code == NONE and group.offset_writes.get(tp, -1) < seq:
                    group.offsets[tp] = value
                    group.offset_writes[tp] = seq
            self._maybe_forget(group)

    def _maybe_forget(self, group: "GroupMetadata") -> None:
        self.metadata.drop_if_unused(group)

    def _commit_locked(self, group_id: str, generation_id: int, member_id: str,
                       offsets: Dict[Partition, Tuple[int, Optional[str]]],
                       leader_epochs: Optional[Dict[Partition, int]], group_instance_id: Optional[str],
                       commit_timestamps: Optional[Dict[Partition, int]], unknown_group_not_found: bool
                       ) -> Tuple[Dict[Partition, int], Dict[Partition, Tuple[int, schema.OffsetCommitValue]]]:
        error = self._validate_commit(group_id, generation_id, member_id, group_instance_id,
                                      unknown_group_not_found)
        if error != NONE:
            return {tp: error for tp in offsets}, {}
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = GroupMetadata(group_id)
        member = group.members.get(member_id)
        if member is not None:
            self._touch(member)
        commit_ms = now_ms()
        result: Dict[Partition, int] = {}
        written: Dict[Partition, Tuple[int, schema.OffsetCommitValue]] = {}
        to_write: Dict[Partition, schema.OffsetCommitValue] = {}
        for tp, (offset, metadata) in offsets.items():
            metadata = metadata or ""
            if len(metadata.encode("utf-8")) > self.offset_metadata_max_bytes:
                result[tp] = OffsetMetadataTooLargeError.code
                continue
            epoch = -1 if leader_epochs is None else leader_epochs.get(tp, -1)
            timestamp = -1 if commit_timestamps is None else commit_timestamps.get(tp, -1)
            to_write[tp] = schema.OffsetCommitValue(offset, metadata, commit_ms if timestamp == -1 else timestamp,
                                                    epoch)
        if to_write:
            keys = [schema.encode_offset_commit_key(group_id, t, p) for t, p in to_write]
            values = [
                schema.encode_offset_commit_value(v.offset, v.metadata, v.commit_timestamp, v.leader_epoch)
                for v in to_write.values()
            ]
            code = self.metadata.store(group_id, keys, values, for_commit=True)
            seq = self.metadata.next_write_seq()
            for tp, value in to_write.items():
                result[tp] = code
                if code == NONE:
                    group.pending_offsets[tp] = (seq, value)
                    written[tp] = (seq, value)
        self._maybe_forget(group)
        return result, written

    # -- transactional offset commits (KIP-98) -----------------------------------------------

    def txn_offset_commit(self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
                          member_id: str, group_instance_id: Optional[str],
                          offsets: Mapping[Partition, TxnOffset]) -> Dict[Partition, int]:
        """TxnOffsetCommit, its write taken as replicated at once (a single node): see
        :meth:`txn_offset_commit_pending`."""
        codes, complete = self.txn_offset_commit_pending(group_id, producer_id, producer_epoch, generation_id,
                                                         member_id, group_instance_id, offsets)
        complete(NONE)
        return codes

    def txn_offset_commit_pending(self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
                                  member_id: str, group_instance_id: Optional[str],
                                  offsets: Mapping[Partition, TxnOffset]
                                  ) -> Tuple[Dict[Partition, int], Callable[[int], None]]:
        """Kafka's handleTxnCommitOffsets: -> (each partition's code, the call that takes the
        outcome of the write's replication).

        The checks are Kafka's: an empty group id is INVALID_GROUP_ID; a group served
        elsewhere or loading NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS; only when a
        generation, member id or group instance id is given (TxnOffsetCommit v3+, KIP-447)
        must the member be the group's (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) in its
        generation (ILLEGAL_GENERATION); a partition whose metadata is too long is
        OFFSET_METADATA_TOO_LARGE. The others are written to the group's partition as one
        transactional batch of ``producer_id`` and ``producer_epoch``, which the partition
        refuses when the epoch is fenced (INVALID_PRODUCER_EPOCH). They stay pending for the
        producer, unseen by OffsetFetch, until its marker (:meth:`complete_txn`); an error
        code given to the returned call (the write was not replicated) drops them.
        """
        with self._lock:
            error = self._validate_txn_commit(group_id, generation_id, member_id, group_instance_id)
            if error != NONE:
                return {tp: error for tp in offsets}, lambda code: None
            result: Dict[Partition, int] = {}
            to_write: Dict[Partition, schema.OffsetCommitValue] = {}
            commit_ms = now_ms()
            for tp, o in offsets.items():
                metadata = o.metadata or ""
                if len(metadata.encode("utf-8")) > self.offset_metadata_max_bytes:
                    result[tp] = OffsetMetadataTooLargeError.code
                    continue
                to_write[tp] = schema.OffsetCommitValue(o.offset, metadata, commit_ms, o.leader_epoch)
            if not to_write:
                return result, lambda code: None
            keys = [schema.encode_offset_commit_key(group_id, t, p) for t, p in to_write]
            values = [schema.encode_offset_commit_value(v.offset, v.metadata, v.commit_timestamp, v.leader_epoch)
                      for v in to_write.values()]
            code = self.metadata.store(group_id, keys, values, for_commit=True, producer_id=producer_id,
                                       producer_epoch=producer_epoch)
            for tp in to_write:
                result[tp] = code
            if code != NONE:
                return result, lambda code: None
            seq = self.metadata.next_write_seq()
            group = self._groups.get(group_id)
            if group is None:
                group = self._groups[group_id] = GroupMetadata(group_id)
            written = {tp: (seq, value) for tp, value in to_write.items()}
            self.metadata.add_pending_txn(group, producer_id, written)
        done: List[int] = []

        def complete(code: int) -> None:
            if not done:
                done.append(code)
                if code != NONE:
                    self._fail_txn_commit(group_id, producer_id, written)

        return result, complete

    def _fail_txn_commit(self, group_id: str, producer_id: int,
                         written: Dict[Partition, Tuple[int, schema.OffsetCommitValue]]) -> None:
        """A transactional commit whose write was not replicated: drop what it holds pending
        (Kafka's failPendingTxnOffsetCommit; the client retries it)."""
        with self._lock:
            group = self._groups.get(group_id)
            pending = None if group is None else group.pending_txn_offsets.get(producer_id)
            if group is None or pending is None:
                return
            for tp, (seq, _) in written.items():
                if pending.get(tp, (None,))[0] == seq:
                    del pending[tp]
            if not pending:
                del group.pending_txn_offsets[producer_id]
            self._maybe_forget(group)

    def complete_txn(self, offsets_partition: int, producer_id: int, committed: bool) -> None:
        """The broker wrote ``producer_id``'s COMMIT (``committed``) or ABORT marker to
        ``__consumer_offsets`` partition ``offsets_partition``: the producer's pending offsets
        of that partition's groups become their committed offsets (each unless a later write
        of its offset already is, as Kafka orders them by their place in the log) or are
        dropped. Does nothing for a partition served elsewhere (its coordinator's load
        replays the marker); one loading applies it once loaded."""
        with self._lock:
            for group in self.metadata.complete_txn(offsets_partition, producer_id, committed):
                self._maybe_forget(group)

    def _validate_txn_commit(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: Optional[str]) -> int:
        """Kafka's validateGroupStatus and validateOffsetCommit of a transactional commit (lock
        held): the member is checked only when the commit names one or a generation."""
        status = self._group_status(group_id)
        if status != NONE:
            return status
        group = self._groups.get(group_id)
        if group is not None and group.state == DEAD:
            return CoordinatorNotAvailableError.code
        if generation_id < 0 and not member_id and group_instance_id is None and (group is None or
                                                                                 group.state == EMPTY):
            return NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if group is None:
                return UnknownMemberIdError.code
            code = group.validate_member(member_id, group_instance_id)
            if code != NONE:
                return code
            if generation_id != group.generation_id:
                return IllegalGenerationError.code
        return NONE

    def fetch_offsets(
        self, group_id: str, partitions: Optional[Iterable[Partition]] = None, require_stable: bool = False
    ) -> Dict[Partition, Tuple[int, str, int]]:
        """Committed ``(offset, metadata, error_code)`` per partition; offset -1 when none.

        ``partitions=None`` returns every committed partition of the group; ``require_stable``
        as :meth:`fetch_committed`.
        """
        wanted = None if partitions is None else list(partitions)
        code, found = self.fetch_committed(group_id, wanted, require_stable)
        if code != NONE:
            return {tp: (NO_OFFSET, "", code) for tp in wanted or ()}
        return {tp: (c.offset, c.metadata, c.error_code) for tp, c in found.items()}

    def fetch_committed(
        self, group_id: str, partitions: Optional[Iterable[Partition]] = None, require_stable: bool = False
    ) -> Tuple[int, Dict[Partition, CommittedOffset]]:
        """OffsetFetch: (group error, committed offset and leader epoch per partition).

        A partition without a committed offset reports offset -1, epoch -1 and "";
        ``partitions=None`` returns every committed partition of the group. An
        unknown group has no offsets (not an error, as in Kafka). With ``require_stable``
        (OffsetFetch v7+, KIP-447) a partition a transaction not yet decided holds an
        offset of answers UNSTABLE_OFFSET_COMMIT (offset -1), which the consumer retries.
        """
        with self._lock:
            if self._closed():
                return CoordinatorNotAvailableError.code, {}
            owner = self.metadata.owner_error(group_id)
            if owner != NONE:
                return owner, {}
            group = self._groups.get(group_id)
            stored = group.offsets if group is not None else {}
            wanted = list(stored) if partitions is None else list(partitions)
            out: Dict[Partition, CommittedOffset] = {}
            for tp in wanted:
                if require_stable and group is not None and group.has_pending_txn_offset(tp):
                    out[tp] = CommittedOffset(NO_OFFSET, error_code=UnstableOffsetCommitError.code)
                    continue
                v = stored.get(tp)
                out[tp] = CommittedOffset(NO_OFFSET) if v is None else CommittedOffset(v.offset, v.leader_epoch,
                                                                                      v.metadata)
            return NONE, out

    def delete_offsets(self, group_id: str, partitions: Iterable[Partition]) -> Tuple[int, Dict[Partition, int]]:
        """Kafka's OffsetDelete: tombstone a group's committed offsets; -> (group error, per-partition codes).

        As Kafka's handleDeleteOffsets: an unknown group answers GROUP_ID_NOT_FOUND; an
        Empty group may delete any offset; a consumer group with members only those of
        topics none of them subscribes to (the others GROUP_SUBSCRIBED_TO_TOPIC); any
        other group with members NON_EMPTY_GROUP. A group left Empty without offsets
        is removed (Dead), its metadata tombstoned in the same batch.
        """
        wanted = list(dict.fromkeys(partitions))
        with self._lock:
            if not group_id:
                return InvalidGroupIdError.code, {}
            owner = self.metadata.owner_error(group_id)
            if owner != NONE:
                return owner, {}
            group = self._groups.get(group_id)
            if group is None or group.state == DEAD:
                return GroupIdNotFoundError.code, {}
            codes: Dict[Partition, int] = {}
            if group.state == EMPTY:
                eligible = wanted
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                subscribed: Set[str] = set()
                for m in group.members.values():
                    subscribed |= subscribed_topics(m.metadata(group.protocol_name))
                eligible = [tp for tp in wanted if tp[0] not in subscribed]
                codes = {tp: GroupSubscribedToTopicError.code for tp in wanted if tp[0] in subscribed}
            else:
                return NonEmptyGroupError.code, {}
            # As Kafka's: a partition's offset held by an undecided transaction is tombstoned
            # too, and its later COMMIT marker does not bring it back.
            removed = [tp for tp in eligible if tp in group.offsets or group.has_pending_txn_offset(tp)]
            left = set(group.offsets) | {tp for w in group.pending_txn_offsets.values() for tp in w}
            dead = group.state == EMPTY and not group.members and left <= set(removed)
            keys = [schema.encode_offset_commit_key(group_id, t, p) for t, p in removed]
            if dead and removed:
                keys.append(schema.encode_group_metadata_key(group_id))
            code = self.metadata.store(group_id, keys, [None] * len(keys), for_commit=False) if keys else NONE
            if code != NONE:
                return code, {}
            for tp in removed:
                group.offsets.pop(tp, None)
            group.drop_pending_txn_offsets(removed)
            if dead and removed:
                group.transition(DEAD)
                del self._groups[group_id]
            for tp in eligible:
                codes[tp] = NONE
            return NONE, codes

    def _group_status(self, group_id: str) -> int:
        """Kafka's validateGroupStatus (lock held): the coordinator open, the id valid, its
        partition served here and loaded."""
        if self._closed():
            return CoordinatorNotAvailableError.code
        if not group_id:
            return InvalidGroupIdError.code
        return self.metadata.owner_error(group_id)

    def _validate_commit(self, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: Optional[str] = None, unknown_group_not_found: bool = False) -> int:
        """Kafka's validateOffsetCommit for a classic group (lock held)."""
        status = self._group_status(group_id)
        if status != NONE:
            return status
        group = self._groups.get(group_id)
        if group is None:
            # Only a consumer that manages its own partitions may create a group by committing.
            if generation_id < 0:
                return NONE
            return GroupIdNotFoundError.code if unknown_group_not_found else IllegalGenerationError.code
        if group.state == DEAD:
            return CoordinatorNotAvailableError.code
        if generation_id < 0 and group.state == EMPTY:
            return NONE  # a simple commit: the admin client, or a consumer without group management
        if generation_id >= 0 or member_id or group_instance_id is not None:
            code = group.validate_member(member_id, group_instance_id)
            if code != NONE:
                return code
            if generation_id != group.generation_id:
                return IllegalGenerationError.code
        elif group.state != EMPTY:
            # A commit without member and generation (OffsetCommit v0) needs an Empty group.
            return UnknownMemberIdError.code
        if group.state == COMPLETING_REBALANCE:
            return RebalanceInProgressError.code
        return NONE
