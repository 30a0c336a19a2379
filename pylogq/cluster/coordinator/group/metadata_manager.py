"""Where groups are kept: which ``__consumer_offsets`` partitions this coordinator serves,
the groups of those partitions, and their stored form (Kafka's GroupMetadataManager).

:class:`GroupMetadataManager` holds the groups by id and the partitions whose groups are
served or being loaded; it reads a partition back into groups (the last record of a
key wins, a tombstone deletes it) and writes a group's metadata or offsets to its
partition in Kafka's formats (:mod:`.offsets_schema`), through two callables the broker
hands over: ``append(partition, batch)`` writes one v2 record batch and
``read_all(partition)`` yields every ``(key, value)`` of a partition in offset order.

Not thread-safe by itself: every call is made under the coordinator's lock (a
storage call too, which keeps the order of the log equal to the order of the
in-memory changes), except :meth:`read_partitions`, which reads a whole partition and
touches no group.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, Iterable, Mapping, Optional, Sequence, Set, Tuple

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
from ....records import build_batch
from . import offsets_schema as schema
from .group import NONE, STABLE, GroupMetadata, MemberMetadata, Partition
from .offsets_schema import partition_for_group

__all__ = ["GroupMetadataManager", "Loaded", "StorageRecord", "StoredGroup", "storage_error_code"]

log = logging.getLogger(__name__)

#: One record of ``__consumer_offsets`` as ``read_all`` yields it: (key, value), None for a tombstone.
StorageRecord = Tuple[Optional[bytes], Optional[bytes]]
#: One group as stored: its committed offsets and its metadata (None when only offsets are stored).
StoredGroup = Tuple[Dict[Partition, schema.OffsetCommitValue], Optional[schema.GroupMetadataValue]]
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

    def __init__(self, append: Callable[[int, bytes], None], read_all: Callable[[int], Iterable[StorageRecord]],
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
        return {group_id: self.groups.pop(group_id) for group_id in self.groups_of(partition)}

    def groups_of(self, partition: int) -> Sequence[str]:
        """The ids of the groups held here whose partition is ``partition``."""
        return [g for g in self.groups if self.partition_for(g) == partition]

    # -- reading back ----------------------------------------------------------------------------

    def read_partitions(self, partitions: Iterable[int]) -> Dict[str, StoredGroup]:
        """Each group's committed offsets and metadata in these partitions (the last record of a
        key wins, a tombstone deletes it); groups with neither are left out."""
        offsets: Dict[str, Dict[Partition, schema.OffsetCommitValue]] = {}
        metadata: Dict[str, schema.GroupMetadataValue] = {}
        for partition in partitions:
            for key_bytes, value_bytes in self._read_all(partition):
                key, value = schema.decode_record(key_bytes, value_bytes)
                if isinstance(key, schema.OffsetCommitKey):
                    group_offsets = offsets.setdefault(key.group, {})
                    tp = (key.topic, key.partition)
                    if value is None:
                        group_offsets.pop(tp, None)
                    else:
                        assert isinstance(value, schema.OffsetCommitValue)
                        group_offsets[tp] = value
                elif isinstance(key, schema.GroupMetadataKey):
                    if value is None:
                        metadata.pop(key.group, None)
                    else:
                        assert isinstance(value, schema.GroupMetadataValue)
                        metadata[key.group] = value
        out: Dict[str, StoredGroup] = {}
        for group_id in set(offsets) | set(metadata):
            group_offsets = offsets.get(group_id, {})
            meta = metadata.get(group_id)
            if meta is not None or group_offsets:
                out[group_id] = (group_offsets, meta)
        return out

    def install(self, loaded: Loaded, now: float) -> None:
        """Put loaded groups in place: a group with stored members comes back Stable (its
        members must heartbeat within their session timeouts, from ``now`` on the
        coordinator's clock); one with no members, or with offsets only, Empty."""
        for group_id, (group_offsets, meta) in loaded.items():
            group = GroupMetadata(group_id)
            group.offsets = dict(group_offsets)
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

    # -- writing -------------------------------------------------------------------------------

    def store(self, group_id: str, keys: Sequence[bytes], values: Sequence[Optional[bytes]], for_commit: bool) -> int:
        """Append records of ``group_id`` to its partition; -> the error code Kafka answers with."""
        batch = build_batch(values, keys=keys)
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
