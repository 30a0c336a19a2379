"""Transactional offset commits (KIP-98) in the group coordinator, as Kafka's GroupMetadataManager keeps
them: a TxnOffsetCommit's offsets are written as one transactional batch of the producer and stay
pending, unseen by OffsetFetch, until the producer's COMMIT marker commits them (unless a later write
of the same partition is committed) or its ABORT marker drops them; a load replays the batches and the
markers in log order.

The coordinator stores through :class:`MemoryStore` here (real v2 batches, real markers); the same
calls over a broker's real ``__consumer_offsets`` partition (epoch fencing, restart, a new leader of a
replicated partition) are in ``test_group_txn_offsets_broker``.
"""

from __future__ import annotations

import time
from typing import Dict, Iterator, Optional, Tuple

import pytest

from pylogq.cluster.contract import TxnOffset
from pylogq.cluster.coordinator.group import offsets_schema as schema
from pylogq.cluster.coordinator.group.coordinator import GroupCoordinator
from pylogq.cluster.coordinator.group.metadata_manager import StoredBatch
from pylogq.errors import (
    CoordinatorLoadInProgressError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InvalidGroupIdError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    UnknownMemberIdError,
    UnstableOffsetCommitError,
)
from pylogq.records import RecordBatch
from pylogq.records.control import ABORT, COMMIT, build_end_txn_marker

from .test_group_coordinator import FakeClock, MemoryStore

TP0, TP1 = ("t", 0), ("t", 1)
UNSTABLE = UnstableOffsetCommitError.code


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def coord(store: MemoryStore) -> Iterator[GroupCoordinator]:
    c = GroupCoordinator(store.append, store.read_all, initial_rebalance_delay_ms=0, clock=FakeClock(),
                         group_min_session_timeout_ms=1, start_timer=False)
    yield c
    c.close()


def txn_commit(c: GroupCoordinator, producer_id: int, offsets: Dict[Tuple[str, int], int], group: str = "g",
               epoch: int = 0, generation: int = -1, member: str = "", instance: Optional[str] = None,
               metadata: Optional[str] = None) -> Dict[Tuple[str, int], int]:
    return c.txn_offset_commit(group, producer_id, epoch, generation, member, instance,
                               {tp: TxnOffset(o, 3, metadata) for tp, o in offsets.items()})


def marker(store: MemoryStore, c: GroupCoordinator, producer_id: int, committed: bool, group: str = "g",
           epoch: int = 0) -> None:
    """What the broker does for WriteTxnMarkers: append the marker, then tell the coordinator."""
    partition = c.partition_for(group)
    store.append(partition, bytes(build_end_txn_marker(producer_id, epoch, COMMIT if committed else ABORT, 0,
                                                       int(time.time() * 1000))))
    c.complete_txn(partition, producer_id, committed)


def committed(c: GroupCoordinator, group: str = "g", stable: bool = False) -> Dict[Tuple[str, int], Tuple[int, int]]:
    """partition -> (offset, error code) as OffsetFetch answers for TP0 and TP1."""
    code, found = c.fetch_committed(group, [TP0, TP1], require_stable=stable)
    assert code == 0
    return {tp: (o.offset, o.error_code) for tp, o in found.items()}


def test_pending_until_the_commit_marker(coord: GroupCoordinator, store: MemoryStore) -> None:
    coord.commit_offsets("g", -1, "", {TP0: (1, "")})
    assert txn_commit(coord, 7, {TP0: 5, TP1: 6}, metadata="m") == {TP0: 0, TP1: 0}
    # Written as one transactional batch of the producer, in Kafka's record format.
    batch = RecordBatch(store.raw[coord.partition_for("g")][-1])
    assert (batch.producer_id, batch.producer_epoch, batch.is_transactional, batch.base_sequence) == (7, 0, True, 0)
    assert [schema.decode_key(r.key) for r in batch] == [schema.OffsetCommitKey("g", *TP0),
                                                        schema.OffsetCommitKey("g", *TP1)]
    assert schema.decode_offset_commit_value(batch.records()[0].value)[:2] == (5, "m")
    assert committed(coord) == {TP0: (1, 0), TP1: (-1, 0)}
    assert committed(coord, stable=True) == {TP0: (-1, UNSTABLE), TP1: (-1, UNSTABLE)}
    marker(store, coord, 7, True)
    assert committed(coord) == committed(coord, stable=True) == {TP0: (5, 0), TP1: (6, 0)}
    _, found = coord.fetch_committed("g", [TP0])
    assert (found[TP0].leader_epoch, found[TP0].metadata) == (3, "m")


def test_abort_drops_them_and_the_previous_commit_stays(coord: GroupCoordinator, store: MemoryStore) -> None:
    coord.commit_offsets("g", -1, "", {TP0: (1, "")})
    txn_commit(coord, 7, {TP0: 5, TP1: 6})
    marker(store, coord, 7, False)
    assert committed(coord, stable=True) == {TP0: (1, 0), TP1: (-1, 0)}
    marker(store, coord, 7, True)  # a later marker of the producer finds nothing pending
    assert committed(coord) == {TP0: (1, 0), TP1: (-1, 0)}


def test_markers_apply_to_their_producer_and_partition_only(coord: GroupCoordinator, store: MemoryStore) -> None:
    txn_commit(coord, 7, {TP0: 5})
    txn_commit(coord, 8, {TP1: 9})
    other = (coord.partition_for("g") + 1) % coord.num_partitions
    coord.complete_txn(other, 7, True)
    assert committed(coord, stable=True) == {TP0: (-1, UNSTABLE), TP1: (-1, UNSTABLE)}
    marker(store, coord, 8, True)
    assert committed(coord, stable=True) == {TP0: (-1, UNSTABLE), TP1: (9, 0)}
    marker(store, coord, 7, True)
    assert committed(coord, stable=True) == {TP0: (5, 0), TP1: (9, 0)}


def test_the_later_write_of_a_partition_wins(coord: GroupCoordinator, store: MemoryStore) -> None:
    """As Kafka orders them by their place in the log: a plain commit written after the
    transactional one keeps its offset when the transaction commits; one written before does not."""
    txn_commit(coord, 7, {TP0: 5})
    coord.commit_offsets("g", -1, "", {TP0: (9, "")})
    coord.commit_offsets("g", -1, "", {TP1: (2, "")})
    txn_commit(coord, 7, {TP1: 4})
    marker(store, coord, 7, True)
    assert committed(coord) == {TP0: (9, 0), TP1: (4, 0)}
    reloaded = GroupCoordinator(store.append, store.read_all, start_timer=False)
    try:
        reloaded.load()
        assert committed(reloaded, stable=True) == {TP0: (9, 0), TP1: (4, 0)}
    finally:
        reloaded.close()


def test_kafkas_checks(coord: GroupCoordinator) -> None:
    """The member is checked only when the commit names one or a generation (KIP-447)."""
    assert txn_commit(coord, 7, {TP0: 1}, group="") == {TP0: InvalidGroupIdError.code}
    assert txn_commit(coord, 7, {TP0: 1}, group="nobody", generation=1, member="m") == \
        {TP0: UnknownMemberIdError.code}
    result = coord.join_group("members", "", "client", 10000, 5000, "consumer", [("range", b"")],
                              group_instance_id="static-1")
    coord.sync_group("members", result.generation_id, result.member_id, {result.member_id: b""})
    member, generation = result.member_id, result.generation_id
    # Without member and generation a transactional commit is taken even by a group with members.
    assert txn_commit(coord, 7, {TP0: 1}, group="members") == {TP0: 0}
    assert txn_commit(coord, 7, {TP0: 1}, group="members", generation=generation + 1, member=member) == \
        {TP0: IllegalGenerationError.code}
    assert txn_commit(coord, 7, {TP0: 1}, group="members", generation=generation, member="other") == \
        {TP0: UnknownMemberIdError.code}
    assert txn_commit(coord, 7, {TP0: 1}, group="members", generation=generation, member="other",
                      instance="static-1") == {TP0: FencedInstanceIdError.code}
    assert txn_commit(coord, 7, {TP0: 1}, group="members", generation=generation, member=member,
                      instance="static-1") == {TP0: 0}
    too_long = "x" * (coord.offset_metadata_max_bytes + 1)
    assert coord.txn_offset_commit("members", 7, 0, -1, "", None, {TP0: TxnOffset(2, -1, too_long),
                                                                   TP1: TxnOffset(3)}) == \
        {TP0: OffsetMetadataTooLargeError.code, TP1: 0}


def test_not_coordinator_and_loading(coord: GroupCoordinator) -> None:
    p = coord.partition_for("g")
    coord.serve_partitions([])
    assert txn_commit(coord, 7, {TP0: 1}) == {TP0: NotCoordinatorError.code}
    coord.begin_loading(p)
    assert txn_commit(coord, 7, {TP0: 1}) == {TP0: CoordinatorLoadInProgressError.code}


def test_a_failed_replication_drops_the_pending_offsets(coord: GroupCoordinator) -> None:
    codes, complete = coord.txn_offset_commit_pending("g", 7, 0, -1, "", None, {TP0: TxnOffset(5)})
    assert codes == {TP0: 0}
    assert committed(coord, stable=True)[TP0] == (-1, UNSTABLE)
    complete(NotCoordinatorError.code)
    assert committed(coord, stable=True)[TP0] == (-1, 0)
    assert "g" not in coord.metadata.groups  # nothing is left of it


def test_a_failed_write_answers_the_coordinators_code(coord: GroupCoordinator, store: MemoryStore) -> None:
    store.fail = OSError("disk gone")
    assert txn_commit(coord, 7, {TP0: 5}) == {TP0: 15}  # COORDINATOR_NOT_AVAILABLE
    store.fail = None
    assert committed(coord, stable=True)[TP0] == (-1, 0)


def test_a_load_replays_transactions_and_markers(store: MemoryStore, coord: GroupCoordinator) -> None:
    """Committed, aborted and open transactions and plain commits, mixed in one partition's log:
    a new coordinator sees what the live one saw, and completes the open one with its marker."""
    coord.commit_offsets("g", -1, "", {TP0: (1, "")})
    txn_commit(coord, 1, {TP0: 10})
    txn_commit(coord, 2, {TP1: 20})
    txn_commit(coord, 3, {TP1: 30})
    marker(store, coord, 1, True)
    marker(store, coord, 2, False)
    txn_commit(coord, 4, {TP0: 40}, group="other-group")
    coord.commit_offsets("solo", -1, "", {TP0: (7, "")})
    txn_commit(coord, 5, {TP0: 50}, group="solo")
    coord.delete_groups(["solo"])  # its pending offset is tombstoned too: the marker finds nothing
    marker(store, coord, 5, True, group="solo")
    live = {g: (committed(coord, g), committed(coord, g, stable=True)) for g in ("g", "other-group", "solo")}
    assert live["g"] == ({TP0: (10, 0), TP1: (-1, 0)}, {TP0: (10, 0), TP1: (-1, UNSTABLE)})
    assert live["other-group"][1] == {TP0: (-1, UNSTABLE), TP1: (-1, 0)}
    assert live["solo"] == ({TP0: (-1, 0), TP1: (-1, 0)},) * 2

    reloaded = GroupCoordinator(store.append, store.read_all, start_timer=False)
    try:
        reloaded.load()
        assert {g: (committed(reloaded, g), committed(reloaded, g, stable=True)) for g in live} == live
        assert sorted(g for g, _ in reloaded.list_groups()) == ["g", "other-group"]  # kept for their pending
        marker(store, reloaded, 3, True)
        marker(store, reloaded, 4, False, group="other-group")
        assert committed(reloaded, stable=True) == {TP0: (10, 0), TP1: (30, 0)}
        assert committed(reloaded, "other-group", stable=True) == {TP0: (-1, 0), TP1: (-1, 0)}
        assert "other-group" not in reloaded.metadata.groups  # nothing left of it after the abort
    finally:
        reloaded.close()


def test_a_marker_while_the_partition_loads_is_applied_once_loaded(store: MemoryStore,
                                                                   coord: GroupCoordinator) -> None:
    """The marker lands after the load read the log end: the coordinator applies it when the load ends."""
    txn_commit(coord, 7, {TP0: 5})
    p = coord.partition_for("g")
    loading: Dict[str, GroupCoordinator] = {}

    def read_then_marker(partition: int) -> Iterator[StoredBatch]:
        yield from store.read_all(partition)
        marker(store, loading["c"], 7, True)  # while the partition still loads

    c = loading["c"] = GroupCoordinator(store.append, read_then_marker, start_timer=False)
    try:
        c.serve_partitions([])
        c.begin_loading(p)  # as a broker does when it comes to lead the partition, before its loader reads it
        c.load_partition(p)
        assert committed(c, stable=True)[TP0] == (5, 0)
    finally:
        c.close()


def test_offset_delete_tombstones_pending_offsets(coord: GroupCoordinator, store: MemoryStore) -> None:
    coord.commit_offsets("g", -1, "", {TP1: (1, "")})
    txn_commit(coord, 7, {TP0: 5, TP1: 6})
    assert coord.delete_offsets("g", [TP0]) == (0, {TP0: 0})
    assert committed(coord, stable=True) == {TP0: (-1, 0), TP1: (-1, UNSTABLE)}
    marker(store, coord, 7, True)
    assert committed(coord) == {TP0: (-1, 0), TP1: (6, 0)}
    reloaded = GroupCoordinator(store.append, store.read_all, start_timer=False)
    try:
        reloaded.load()
        assert committed(reloaded) == {TP0: (-1, 0), TP1: (6, 0)}
    finally:
        reloaded.close()


def test_a_group_with_only_pending_offsets_is_kept_until_decided(coord: GroupCoordinator,
                                                                 store: MemoryStore) -> None:
    txn_commit(coord, 7, {TP0: 5})
    assert [g for g, _ in coord.list_groups()] == ["g"]
    coord.commit_offsets("g", -1, "", {TP1: (1, "")})
    assert coord.delete_offsets("g", [TP1]) == (0, {TP1: 0})
    assert "g" in coord.metadata.groups  # the transaction still holds an offset of it
    marker(store, coord, 7, False)
    assert "g" not in coord.metadata.groups

