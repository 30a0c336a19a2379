"""Where groups are kept: which ``__consumer_offsets`` partitions this coordinator serves,
the groups of those partitions, and their stored form (Kafka's GroupMetadataManager).

:class:`GroupMetadataManager` holds the groups by id and the partitions whose groups are
served or being loaded; it reads a partition back into groups (the last record of a
key wins, a tombstone deletes it) and writes a group's metadata or offsets to its
partition in Kafka's formats (:mod:`.offsets_schema`), through two callables the broker
hands over: ``append(partition, batch)`` writes one v2 record batch and
``read_all(partition)`` yields every batch of a partition in offset order
(:class:`StoredBatch`: its records, and the producer and transaction marker it carries).

Transactional offset commits (KIP-98): a TxnOffsetCommit is written as one transactional
batch of its producer, and its offsets stay pending for that producer, unseen by
OffsetFetch, until the producer's COMMIT marker makes them the committed ones (unless a
later write of the same partition already is) or its ABORT marker drops them: live, when
the broker tells :meth:`GroupMetadataManager.complete_txn` that it wrote a marker; on
load, as the partition's batches are replayed in log order (a transaction still open at
the log end stays pending). The order of writes is kept as a sequence number per write,
which the load numbers in log order: a later write of a partition's offset wins.

Not thread-safe by itself: every call is made under the coordinator's lock (a
storage call too, which keeps the order of the log equal to the order of the
in-memory changes), except :meth:`read_partitions`, which reads a whole partition and
touches no group.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from ....errors import (
    BrokerError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidArgumentError,
    InvalidCommitOffsetSizeError,
    InvalidFetchSizeError,
    KafkaStorageError,
    MessageTooLargeError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordListTooLargeError,
    RequestTimedOutError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from ....records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, build_batch
from ....records.control import ABORT, COMMIT
from . import offsets_schema as schema
from .group import NONE, STABLE, GroupMetadata, MemberMetadata, Partition
from .offsets_schema import partition_for_group

__all__ = ["GroupMetadataManager", "Loaded", "StorageRecord", "StoredBatch", "StoredGroup", "storage_error_code"]

log = logging.getLogger(__name__)

#: One record of ``__consumer_offsets``: (key, value), None for a tombstone.
StorageRecord = Tuple[Optional[bytes], Optional[bytes]]
#: Offsets of one group by partition, each with the sequence number (or load position) of its write.
_Written = Dict[Partition, Tuple[int, schema.OffsetCommitValue]]


class StoredBatch(NamedTuple):
    """One batch of ``__consumer_offsets`` as ``read_all`` yields it.

    ``records`` are a data batch's; a control batch has none, and its ``control_type`` is the
    transaction marker it carries (:data:`~pylogq.records.control.COMMIT` or ``ABORT``; -1 for
    a data batch, or a control batch the cleaner emptied, which marks nothing).
    ``transactional`` with ``producer_id`` make a data batch's offsets a transaction's."""

    records: Sequence[StorageRecord]
    producer_id: int = NO_PRODUCER_ID
    transactional: bool = False
    control_type: int = -1


class StoredGroup(NamedTuple):
    """One group as stored: its committed offsets, its metadata (None when only offsets are
    stored), the load position of each committed offset's write, and the offsets of
    transactions not yet decided (by producer id: partition -> (load position, value))."""

    offsets: Dict[Partition, schema.OffsetCommitValue]
    metadata: Optional[schema.GroupMetadataValue]
    positions: Dict[Partition, int]
    pending_txn: Dict[int, _Written]


#: Groups read back from storage, by group id.
Loaded = Mapping[str, StoredGroup]


def storage_error_code(exc: BaseException, for_commit: bool) -> int:
    """Map a failed append to the code Kafka's coordinator answers with.

    An exception without a Kafka code (an OSError, a closed log) is the
    coordinator's storage being unavailable: COORDINATOR_NOT_AVAILABLE.
    """
    if not isinstance(exc, BrokerError):
        return CoordinatorNotAvailableError.code
    code = exc.code
    if code in (
        UnknownTopicOrPartitionError.code,
        NotEnoughReplicasError.code,
        NotEnoughReplicasAfterAppendError.code,
        RequestTimedOutError.code,
    ):
        return CoordinatorNotAvailableError.code
    if code in (NotLeaderOrFollowerError.code, KafkaStorageError.code):  # a full disk too, as in Kafka
        return NotCoordinatorError.code
    if code in (MessageTooLargeError.code, RecordListTooLargeError.code, InvalidFetchSizeError.code):
        return InvalidCommitOffsetSizeError.code if for_commit else UnknownServerError.code
    return code


class GroupMetadataManager:
    """The groups of the ``__consumer_offsets`` partitions served here, and their storage."""

    def __init__(self, append: Callable[[int, bytes], None], read_all: Callable[[int], Iterable[StoredBatch]],
                 num_partitions: int) -> None:
        if num_partitions <= 0:
            raise InvalidArgumentError("num_partitions must be positive, got %r" % (num_partitions,))
        self._append = append
        self._read_all = read_all
        self.num_partitions = num_partitions
        #: Every group served, by id.
        self.groups: Dict[str, GroupMetadata] = {}
        #: The partitions whose groups are served (None: all of them, a single node), and
        #: those being loaded (their groups answer COORDINATOR_LOAD_IN_PROGRESS, others'
        #: NOT_COORDINATOR).
        self.owned: Optional[Set[int]] = None
        self.loading: Set[int] = set()
        #: Set by a broker of a cluster: whether its leadership of a ``__consumer_offsets``
        #: partition is in doubt (its store session may have ended); its groups then answer
        #: NOT_COORDINATOR rather than from a cache a new coordinator may have overtaken.
        self.partition_in_doubt: Optional[Callable[[int], bool]] = None
        #: Numbers the offset writes in the order written (a load numbers those it read past it).
        self.write_seq = 0
        # The groups with offsets pending in a transaction, by producer id (Kafka's
        # openGroupsForProducer); may name groups gone since, which completing skips.
        self._txn_groups: Dict[int, Set[str]] = {}
        # Transactions decided while their partition was loading, applied once it is loaded:
        # partition -> [(producer id, committed)].
        self._decided_while_loading: Dict[int, List[Tuple[int, bool]]] = {}

    def next_write_seq(self) -> int:
        """The sequence number of the next offset write (a later write of an offset wins)."""
        self.write_seq += 1
        return self.write_seq

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of ``group_id``."""
        return partition_for_group(group_id, self.num_partitions)

    # -- which partitions are served ---------------------------------------------------------

    def owner_error(self, group_id: str) -> int:
        """NOT_COORDINATOR for a group whose partition is not served here,
        COORDINATOR_LOAD_IN_PROGRESS while it is loading, else NONE."""
        if self.owned is None:
            return NONE
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return CoordinatorLoadInProgressError.code
        if partition not in self.owned:
            return NotCoordinatorError.code
        if self.partition_in_doubt is not None and self.partition_in_doubt(partition):
            return NotCoordinatorError.code
        return NONE

    def serves(self, partition: int) -> bool:
        """Whether the groups of this partition are served (loaded)."""
        return self.owned is None or (partition in self.owned and partition not in self.loading)

    def begin_loading(self, partition: int) -> None:
        """Its groups answer COORDINATOR_LOAD_IN_PROGRESS until :meth:`finish_loading`."""
        if self.owned is None:
            self.owned = set()
        if partition not in self.loading:  # a load starts: what an earlier one kept is stale
            self._decided_while_loading.pop(partition, None)
        self.loading.add(partition)

    def finish_loading(self, partition: int, loaded: Loaded, now: float) -> bool:
        """Serve a partition read while it was loading: its groups replaced by ``loaded``.
        -> False (nothing changed) when it was unloaded meanwhile."""
        if partition not in self.loading:
            return False
        self.loading.discard(partition)
        assert self.owned is not None  # begin_loading made it a set
        self.owned.add(partition)
        for group_id in self.groups_of(partition):
            del self.groups[group_id]
        self.install(loaded, now)
        for producer_id, committed in self._decided_while_loading.pop(partition, []):
            self.complete_txn(partition, producer_id, committed)
        return True

    def serve_only(self, partitions: Iterable[int]) -> Set[int]:
        """Serve only these partitions' groups from now on; -> the partitions dropped (their
        groups are still here: :meth:`unload` each)."""
        current = set(range(self.num_partitions)) if self.owned is None else set(self.owned)
        self.owned = current & set(partitions)
        return current - self.owned

    def serve_all(self) -> None:
        """Serve the groups of every partition (a single node)."""
        self.owned = None
        self.loading.clear()

    def unload(self, partition: int) -> Dict[str, GroupMetadata]:
        """Stop serving a partition; -> its groups, removed (by id)."""
        if self.owned is None:
            self.owned = set(range(self.num_partitions))
        self.owned.discard(partition)
        self.loading.discard(partition)
        self._decided_while_loading.pop(partition, None)
        gone = {group_id: self.groups.pop(group_id) for group_id in self.groups_of(partition)}
        for producer_id in list(self._txn_groups):
            groups = self._txn_groups[producer_id]
            groups.difference_update(gone)
            if not groups:
                del self._txn_groups[producer_id]
        return gone

    def clear(self) -> None:
        """Forget every group (before a whole load)."""
        self.groups.clear()
        self._txn_groups.clear()
        self._decided_while_loading.clear()

    def groups_of(self, partition: int) -> Sequence[str]:
        """The ids of the groups held here whose partition is ``partition``."""
        return [g for g in self.groups if self.partition_for(g) == partition]

    # -- reading back ----------------------------------------------------------------------------

    def read_partitions(self, partitions: Iterable[int]) -> Dict[str, StoredGroup]:
        """Each group's committed offsets, metadata and undecided transactional offsets in these
        partitions, replayed batch by batch in log order (Kafka's doLoadGroupsAndOffsets).

        The last record of a key wins and a tombstone deletes it (an offset's tombstone the
        undecided transactional writes of that offset too). A transactional batch's offsets
        are its producer's until that producer's COMMIT marker commits them (each unless a
        later write of its partition is committed already) or its ABORT marker drops them;
        those of a transaction still open at the log end stay pending. Groups with nothing
        are left out."""
        offsets: Dict[str, _Written] = {}
        metadata: Dict[str, schema.GroupMetadataValue] = {}
        pending: Dict[int, Dict[str, _Written]] = {}  # producer id -> group id -> its offsets
        position = 0
        for partition in partitions:
            for batch in self._read_all(partition):
                position += 1
                if batch.control_type in (COMMIT, ABORT):
                    decided = pending.pop(batch.producer_id, {})
                    if batch.control_type == COMMIT:
                        for group_id, written in decided.items():
                            _commit_into(offsets.setdefault(group_id, {}), written)
                    continue
                txn = batch.transactional and batch.producer_id != NO_PRODUCER_ID
                for key_bytes, value_bytes in batch.records:
                    key, value = schema.decode_record(key_bytes, value_bytes)
                    if isinstance(key, schema.OffsetCommitKey):
                        tp = (key.topic, key.partition)
                        if txn:
                            group_pending = pending.setdefault(batch.producer_id, {}).setdefault(key.group, {})
                            if value is None:
                                group_pending.pop(tp, None)
                            else:
                                assert isinstance(value, schema.OffsetCommitValue)
                                group_pending[tp] = (position, value)
                        elif value is None:
                            offsets.setdefault(key.group, {}).pop(tp, None)
                            for by_group in pending.values():
                                by_group.get(key.group, {}).pop(tp, None)
                        else:
                            assert isinstance(value, schema.OffsetCommitValue)
                            offsets.setdefault(key.group, {})[tp] = (position, value)
                    elif isinstance(key, schema.GroupMetadataKey):
                        if value is None:
                            metadata.pop(key.group, None)
                        else:
                            assert isinstance(value, schema.GroupMetadataValue)
                            metadata[key.group] = value
        pending_by_group: Dict[str, Dict[int, _Written]] = {}
        for producer_id, by_group in pending.items():
            for group_id, written in by_group.items():
                if written:
                    pending_by_group.setdefault(group_id, {})[producer_id] = written
        out: Dict[str, StoredGroup] = {}
        for group_id in set(offsets) | set(metadata) | set(pending_by_group):
            group_offsets = offsets.get(group_id, {})
            meta = metadata.get(group_id)
            open_txns = pending_by_group.get(group_id, {})
            if meta is not None or group_offsets or open_txns:
                out[group_id] = StoredGroup({tp: v for tp, (_, v) in group_offsets.items()}, meta,
                                            {tp: pos for tp, (pos, _) in group_offsets.items()}, open_txns)
        return out

    def install(self, loaded: Loaded, now: float) -> None:
        """Put loaded groups in place: a group with stored members comes back Stable (its
        members must heartbeat within their session timeouts, from ``now`` on the
        coordinator's clock); one with no members, or with offsets only, Empty. Their writes'
        load positions become write sequence numbers past every one given so far."""
        base = self.write_seq
        for group_id, stored in loaded.items():
            group = GroupMetadata(group_id)
            group.offsets = dict(stored.offsets)
            group.offset_writes = {tp: base + pos for tp, pos in stored.positions.items()}
            for producer_id, written in stored.pending_txn.items():
                group.pending_txn_offsets[producer_id] = {tp: (base + pos, v) for tp, (pos, v) in written.items()}
                self._txn_groups.setdefault(producer_id, set()).add(group_id)
            self.write_seq = max([self.write_seq] + list(group.offset_writes.values())
                                 + [seq for w in group.pending_txn_offsets.values() for seq, _ in w.values()])
            meta = stored.metadata
            if meta is not None:
                group.protocol_type = meta.protocol_type or None
                group.generation_id = meta.generation
                group.protocol_name = meta.protocol
                group.leader_id = meta.leader
                if meta.current_state_timestamp >= 0:
                    group.state_timestamp = meta.current_state_timestamp
                for mm in meta.members:
                    member = MemberMetadata(
                        mm.member_id,
                        mm.group_instance_id,
                        mm.client_id,
                        mm.client_host,
                        mm.rebalance_timeout,
                        mm.session_timeout,
                        meta.protocol_type,
                        [(meta.protocol or "", mm.subscription)],
                    )
                    member.assignment = mm.assignment
                    member.heartbeat_deadline = now + mm.session_timeout / 1000.0
                    group.members[mm.member_id] = member
                if group.members:
                    group.state = STABLE
                    if group.leader_id not in group.members:
                        group.leader_id = next(iter(group.members))
            self.groups[group_id] = group

    # -- transactions ----------------------------------------------------------------------------

    def add_pending_txn(self, group: GroupMetadata, producer_id: int, written: _Written) -> None:
        """Hold a transaction's offsets of a group, written to its partition, until the
        producer's marker (:meth:`complete_txn`)."""
        group.pending_txn_offsets.setdefault(producer_id, {}).update(written)
        self._txn_groups.setdefault(producer_id, set()).add(group.group_id)

    def complete_txn(self, partition: int, producer_id: int, committed: bool) -> List[GroupMetadata]:
        """A COMMIT (``committed``) or ABORT marker of ``producer_id`` is in ``partition``: its
        pending offsets of that partition's groups become committed (each unless a later write
        of its offset is committed already; Kafka's completePendingTxnOffsetCommit) or are
        dropped. -> the groups changed. While the partition loads the decision waits for the
        load's end; a partition not served here is left to its coordinator's load."""
        if partition in self.loading:
            self._decided_while_loading.setdefault(partition, []).append((producer_id, committed))
            return []
        if not self.serves(partition):
            return []
        group_ids = self._txn_groups.get(producer_id)
        if not group_ids:
            return []
        changed = []
        for group_id in [g for g in group_ids if self.partition_for(g) == partition]:
            group_ids.discard(group_id)
            group = self.groups.get(group_id)
            written = None if group is None else group.pending_txn_offsets.pop(producer_id, None)
            if group is None or written is None:
                continue
            if committed:
                for tp, (seq, value) in written.items():
                    if group.offset_writes.get(tp, -1) < seq:
                        group.offsets[tp] = value
                        group.offset_writes[tp] = seq
            changed.append(group)
        if not group_ids:
            del self._txn_groups[producer_id]
        return changed

    def drop_if_unused(self, group: GroupMetadata) -> None:
        """Forget a group nothing is left of (:meth:`GroupMetadata.unused`)."""
        if group.unused():
            self.groups.pop(group.group_id, None)

    # -- writing -------------------------------------------------------------------------------

    def store(self, group_id: str, keys: Sequence[bytes], values: Sequence[Optional[bytes]], for_commit: bool,
              producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> int:
        """Append records of ``group_id`` to its partition as one batch; -> the error code Kafka
        answers with. With a ``producer_id`` the batch is that producer's, transactional (a
        TxnOffsetCommit, built as Kafka's storeOffsets builds it: base sequence 0), and the
        partition checks its epoch (a fenced one fails with INVALID_PRODUCER_EPOCH)."""
        if producer_id == NO_PRODUCER_ID:
            batch = build_batch(values, keys=keys)
        else:
            batch = build_batch(values, keys=keys, producer_id=producer_id, producer_epoch=producer_epoch,
                                base_sequence=0, is_transactional=True)
        try:
            self._append(self.partition_for(group_id), bytes(batch))
        except Exception as exc:  # the storage layer's failure becomes the wire's error code
            log.warning("writing group %s to __consumer_offsets failed: %s", group_id, exc)
            return storage_error_code(exc, for_commit)
        return NONE

    def store_group(self, group: GroupMetadata, assignments: Dict[str, bytes]) -> int:
        """Write a group's metadata with these assignments (member id -> assignment)."""
        value = schema.GroupMetadataValue(
            group.protocol_type or "",
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            group.state_timestamp,
            [
                schema.MemberMetadata(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(group.protocol_name),
                    assignments.get(m.member_id, b""),
                )
                for m in group.members.values()
            ],
        )
        return self.store(
            group.group_id,
            [schema.encode_group_metadata_key(group.group_id)],
            [schema.encode_group_metadata_value(value)],
            for_commit=False,
        )


def _commit_into(offsets: _Written, written: _Written) -> None:
    """A committed transaction's offsets into a group's: each unless a later write is there."""
    for tp, (position, value) in written.items():
        found = offsets.get(tp)
        if found is None or found[0] < position:
            offsets[tp] = (position, value)
