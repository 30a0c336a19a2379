"""Offset syncs and translation, on Kafka's test cases (OffsetSyncStoreTest, OffsetSyncWriterTest,
MirrorSourceTaskTest's offset sync cases)."""

from __future__ import annotations

import random
import threading
from typing import Iterable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq.client.consumer import OffsetAndMetadata, TopicPartition
from pylogq.errors import CorruptRecordError
from pylogq.mirror.config import FlowConfig
from pylogq.mirror.offsets import (
    SYNCS_PER_PARTITION,
    CheckpointStore,
    OffsetSyncQueue,
    OffsetSyncStore,
    SyncEmitter,
    checkpoint,
    checkpoints_for_group,
    offsets_to_sync,
    translate_offsets,
)
from pylogq.mirror.records import Checkpoint, OffsetSync

pytestmark = pytest.mark.compiled_pass

TP = ("topic1", 2)


# -- the emitter rule (MirrorSourceTaskTest.testOffsetSync, testZeroOffsetSync) ---------------------


def test_offset_sync_rule() -> None:
    """Kafka's cases. Its PartitionState keeps "due" until reset(), which its writer calls after
    every True; SyncEmitter answers each update for itself: the same answers in that use."""
    state = SyncEmitter(50)
    assert state.update(0, 100), "always emit offset sync on first update"
    assert state.update(2, 102), "upstream offset skipped -> resync"
    assert not state.update(3, 152), "no sync"
    assert state.update(4, 153), "one past target offset"
    assert not state.update(5, 154), "no sync"
    assert not state.update(6, 203), "no sync"
    assert state.update(7, 204), "one past target offset"
    assert state.update(2, 206), "upstream reset"
    assert not state.update(3, 207), "no sync"
    assert state.update(4, 3), "downstream reset"
    assert not state.update(5, 4), "no sync"
    assert state.update(7, 6), "sync"
    assert state.update(7, 6), "sync: not one past the previous upstream offset"
    assert not state.update(8, 7), "Kafka's flag would still be set here: nothing reset it"
    assert state.update(10, 57), "sync"
    assert not state.update(11, 58), "no sync"
    assert state.last_sync_downstream_offset == 57


def test_zero_offset_lag_syncs_every_record() -> None:
    state = SyncEmitter(0)
    for upstream, downstream in ((0, 100), (2, 102), (3, 153), (4, 154), (5, 155), (6, 207), (2, 208), (3, 209),
                                 (4, 3), (5, 4), (7, 6), (7, 6), (8, 7), (10, 57), (11, 58)):
        assert state.update(upstream, downstream), (upstream, downstream)


# -- the writer's queue (OffsetSyncWriterTest) --------------------------------------------------------


def test_a_due_sync_is_pending_and_an_undue_one_waits() -> None:
    """OffsetSyncWriterTest.testMaybeQueueOffsetSyncs."""
    queue = OffsetSyncQueue(max_offset_lag=2, max_outstanding=1)
    tp = ("topic", 0)
    queue.maybe_queue(tp, 0, 1)
    assert tp not in queue.delayed and tp in queue.pending
    emitter = queue.emitter(tp)
    assert emitter is not None and emitter.last_sync_downstream_offset == 1
    queue.maybe_queue(tp, 1, 2)
    assert queue.delayed[tp] == OffsetSync("topic", 0, 1, 2)
    assert emitter.last_sync_downstream_offset == 1


def test_at_most_max_outstanding_syncs_are_in_flight() -> None:
    """OffsetSyncWriterTest.testFirePendingOffsetSyncs."""
    queue = OffsetSyncQueue(max_offset_lag=1, max_outstanding=1)
    tp = ("topic", 0)
    queue.maybe_queue(tp, 0, 100)
    emitter = queue.emitter(tp)
    assert emitter is not None and emitter.last_sync_downstream_offset == 100
    assert queue.take_pending() == [OffsetSync("topic", 0, 0, 100)]
    queue.maybe_queue(tp, 2, 102)
    assert emitter.last_sync_downstream_offset == 102
    assert queue.take_pending() == [], "one in flight already: the next waits"
    assert queue.pending == {tp: OffsetSync("topic", 0, 2, 102)}
    queue.sent()
    assert queue.take_pending() == [OffsetSync("topic", 0, 2, 102)]
    assert queue.outstanding == 1


def test_delayed_syncs_are_promoted_at_a_commit() -> None:
    """OffsetSyncWriterTest.testPromoteDelayedOffsetSyncs."""
    queue = OffsetSyncQueue(max_offset_lag=50, max_outstanding=1)
    tp = ("topic", 0)
    queue.maybe_queue(tp, 0, 100)
    queue.maybe_queue(tp, 1, 101)
    queue.promote_delayed()
    assert queue.delayed == {}
    assert queue.pending == {tp: OffsetSync("topic", 0, 1, 101)}, "the latest sync replaces the pending one"


def test_pending_syncs_go_out_in_the_order_their_partitions_became_pending() -> None:
    queue = OffsetSyncQueue(max_offset_lag=100, max_outstanding=10)
    queue.maybe_queue(("a", 0), 0, 0)
    queue.maybe_queue(("b", 0), 0, 0)
    queue.maybe_queue(("a", 0), 5, 5)  # skipped upstream: due again, keeps a's place
    assert [(s.topic, s.upstream_offset) for s in queue.take_pending()] == [("a", 5), ("b", 0)]
    queue.maybe_queue(("a", 0), 6, 6)
    queue.forget([("a", 0)])
    queue.promote_delayed()
    assert queue.take_pending() == [] and queue.emitter(("a", 0)) is None


def test_sent_is_safe_from_other_threads() -> None:
    queue = OffsetSyncQueue(max_offset_lag=0, max_outstanding=4)
    for upstream in range(400):
        queue.maybe_queue(("t", upstream % 7), upstream, upstream)
    taken = []
    while len(taken) < 7:
        batch = queue.take_pending()
        taken += batch
        threads = [threading.Thread(target=queue.sent) for _ in batch]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert queue.outstanding == 0 and len(taken) == 7


# -- runs of copies at once (the task's shortcut for contiguous offsets) ---------------------------------


@settings(max_examples=200, deadline=None)
@given(lag=st.integers(min_value=0, max_value=12),
       runs=st.lists(st.tuples(st.integers(min_value=0, max_value=3), st.integers(min_value=-2, max_value=3),
                               st.integers(min_value=0, max_value=40)), min_size=1, max_size=8))
def test_a_run_of_copies_is_its_copies_one_by_one(lag: int, runs: list) -> None:
    """update_run and maybe_queue_run answer what as many single calls answer (with the pending syncs
    sent after each due one): the same syncs sent in the same order, the same one left waiting."""
    one_by_one = OffsetSyncQueue(lag, max_outstanding=1000)
    at_once = OffsetSyncQueue(lag, max_outstanding=1000)
    emitter, run_emitter = SyncEmitter(lag), SyncEmitter(lag)
    sent_single: list = []
    sent_run: list = []
    upstream, downstream = 0, 0
    for up_gap, down_gap, count in runs:
        upstream += up_gap
        downstream = max(0, downstream + down_gap)
        expected = [i for i in range(count) if emitter.update(upstream + i, downstream + i)]
        assert run_emitter.update_run(upstream, downstream, count) == expected
        for i in range(count):
            if one_by_one.maybe_queue(TP, upstream + i, downstream + i):
                sent_single.extend(one_by_one.take_pending())
        at_once.maybe_queue_run(TP, upstream, downstream, count, lambda: sent_run.extend(at_once.take_pending()))
        assert sent_run == sent_single
        assert at_once.delayed == one_by_one.delayed and at_once.pending == one_by_one.pending
        upstream += count
        downstream += count
    assert [getattr(run_emitter, n) for n in SyncEmitter.__slots__] == [getattr(emitter, n) for n in SyncEmitter.__slots__]


# -- the store (OffsetSyncStoreTest) ------------------------------------------------------------------


class Store(OffsetSyncStore):
    """The store fed as its reader feeds it: records of the offset-syncs topic."""

    def feed(self, upstream: int, downstream: int, tp: tuple = TP) -> None:
        sync = OffsetSync(tp[0], tp[1], upstream, downstream)
        assert self.handle_record(sync.encode_key(), sync.encode_value()) == sync


def _started(initialization_must_read_to_end: bool = True, backlog: Iterable[tuple] = ()) -> Store:
    store = Store(initialization_must_read_to_end)
    for upstream, downstream in backlog:
        store.feed(upstream, downstream)
        _assert_sparse_sync_invariant(store, TP)
    store.mark_read_to_end()
    return store


def test_offset_translation() -> None:
    store = _started()
    store.feed(100, 200)
    assert store.translate_downstream(None, TP, 150) == 201, "no dead reckoning past one"
    store.feed(150, 251)
    assert store.translate_downstream(None, TP, 150) == 251, "exact"
    assert store.translate_downstream(None, TP, 5) is None, "older than every sync (Kafka: -1)"
    store.feed(200, 10)
    assert store.translate_downstream(None, TP, 200) == 10, "downstream offsets reset"
    store.feed(20, 20)
    assert store.translate_downstream(None, TP, 20) == 20, "upstream offsets reset"


def test_no_translation_before_the_initial_read_ends() -> None:
    store = Store()
    store.feed(100, 200)
    for offset in (0, 100, 200):
        assert store.translate_downstream(None, TP, offset) is None
    assert not store.read_to_end
    store.mark_read_to_end()
    assert store.translate_downstream(None, TP, 0) is None
    assert store.translate_downstream(None, TP, 100) == 200
    assert store.translate_downstream(None, TP, 200) == 201


def test_no_translation_without_a_sync() -> None:
    store = _started()
    assert store.translate_downstream(None, TP, 0) is None
    store.feed(0, 0, tp=("other", 0))
    assert store.translate_downstream(None, TP, 0) is None
    assert store.partitions() == [TopicPartition("other", 0)]


def _assert_sparse_sync(store: OffsetSyncStore, sync_offset: int, previous_offset: int) -> None:
    """OffsetSyncStoreTest.assertSparseSync: the offsets around a kept sync translate through it."""
    before = None if previous_offset == -1 else previous_offset + 1
    assert store.translate_downstream(None, TP, sync_offset - 1) == before
    assert store.translate_downstream(None, TP, sync_offset) == sync_offset
    assert store.translate_downstream(None, TP, sync_offset + 1) == sync_offset + 1
    assert store.translate_downstream(None, TP, sync_offset + 2) == sync_offset + 1


def test_past_offset_translation() -> None:
    lag = 10
    store = _started(backlog=[(offset, offset) for offset in range(0, 1001, lag)])
    # Only the latest sync of the initial read is kept.
    _assert_sparse_sync(store, 1000, -1)
    for offset in range(1000 + lag, 10001, lag):
        store.feed(offset, offset)
        _assert_sparse_sync_invariant(store, TP)
    # Invariant D: the last sync from the initial read is still kept.
    _assert_sparse_sync(store, 1000, -1)
    # Older offsets are translated less precisely.
    for sync_offset, previous in ((4840, 1000), (6760, 4840), (8680, 6760), (9160, 8680), (9640, 9160),
                                  (9880, 9640), (9940, 9880), (9970, 9940), (9990, 9970), (10000, 9990)):
        _assert_sparse_sync(store, sync_offset, previous)
    # Rewinding upstream offsets clears every historical sync.
    store.feed(1500, 11000)
    _assert_sparse_sync_invariant(store, TP)
    assert store.translate_downstream(None, TP, 1499) is None
    assert store.translate_downstream(None, TP, 1500) == 11000
    assert store.translate_downstream(None, TP, 2000) == 11001


def test_past_offset_translation_without_initialization_read_to_end() -> None:
    lag = 10
    store = _started(False, backlog=[(offset, offset) for offset in range(0, 1001, lag)])
    _assert_sparse_sync(store, 480, 0)
    _assert_sparse_sync(store, 720, 480)
    _assert_sparse_sync(store, 1000, 990)
    for offset in range(1000, 10001, lag):
        store.feed(offset, offset)
        _assert_sparse_sync_invariant(store, TP)
    # 1000 was pushed out: before 3840 only 0 is left to translate through.
    for sync_offset, previous in ((3840, 0), (7680, 3840), (8640, 7680), (9120, 8640), (9600, 9120), (9840, 9600),
                                  (9900, 9840), (9960, 9900), (9990, 9960), (10000, 9990)):
        _assert_sparse_sync(store, sync_offset, previous)
    store.feed(1500, 11000)
    _assert_sparse_sync_invariant(store, TP)
    assert store.translate_downstream(None, TP, 1499) is None
    assert store.translate_downstream(None, TP, 1500) == 11000
    assert store.translate_downstream(None, TP, 2000) == 11001


def _distinct(store: OffsetSyncStore, tp: tuple) -> int:
    return 1 + sum(store.sync_for(tp, i - 1) is not store.sync_for(tp, i) for i in range(1, SYNCS_PER_PARTITION))


def _assert_bounded_expirations(first: int, steps: Iterator[int], maximum: int) -> None:
    """OffsetSyncStoreTest.assertSyncSpacingHasBoundedExpirations: each new sync expires at most
    ``maximum`` distinct kept syncs, the latest is at index 0 (A) and the first at 63 (D)."""
    store = _started()
    store.sync(OffsetSync(TP[0], TP[1], first, first))
    offset, last_count = first, 1
    for step in steps:
        offset += step
        assert offset < 2**63, "the test overflowed"
        store.sync(OffsetSync(TP[0], TP[1], offset, offset))
        assert store.sync_for(TP, 0).upstream_offset == offset
        assert store.sync_for(TP, 63).upstream_offset == first
        count = _distinct(store, TP)
        expired = last_count - count + 1
        assert expired <= maximum, "expired %d > %d after offset %d" % (expired, maximum, offset)
        last_count = count


def test_consistently_spaced_syncs_expire_at_most_one() -> None:
    """OffsetSyncStoreTest.testConsistentlySpacedSyncs (Kafka's first offsets 0..29, sampled)."""
    iterations = 100
    max_step = (2**63 - 1) // iterations
    step = 1
    while step < max_step:
        for first in (0, 1, 17, 29):
            _assert_bounded_expirations(first, iter([step] * iterations), 1)
        step = step * 2 + 1


def test_randomly_spaced_syncs_expire_few() -> None:
    """OffsetSyncStoreTest.testRandomlySpacedSyncs: steps with n bits of spread expire at most n + 2."""
    rng = random.Random(0)
    iteration_bits = 10
    iterations = 1 << iteration_bits
    for n in range(1, 64 - iteration_bits, 6):
        spread = 1 << n
        _assert_bounded_expirations(0, iter([rng.randrange(spread) for _ in range(iterations)]), n + 2)
        lag = 1 << 16
        _assert_bounded_expirations(0, iter([rng.randrange(lag, lag + spread) for _ in range(iterations)]), n + 2)


def test_dropped_syncs_expire_at_most_two() -> None:
    """OffsetSyncStoreTest.testDroppedSyncsSpacing: gaps of one or two offset.lag.max."""
    rng = random.Random(0)
    lag = 100
    _assert_bounded_expirations(0, iter([(2 if rng.random() < 0.5 else 1) * lag for _ in range(3000)]), 2)


def _assert_sparse_sync_invariant(store: OffsetSyncStore, tp: tuple) -> None:
    """Invariants B and C between every pair of kept syncs (OffsetSyncStoreTest.assertSparseSyncInvariant)."""
    ups = [store.sync_for(tp, i).upstream_offset for i in range(SYNCS_PER_PARTITION)]
    for j in range(SYNCS_PER_PARTITION):
        for i in range(j):
            if ups[i] == ups[j]:
                continue
            lower = ups[j] + (1 << max(i - 2, 0))
            if lower < 2**63:
                assert ups[i] >= lower, "C(%d,%d): %d < %d" % (i, j, ups[i], lower)
            upper = ups[j] + (1 << j) - (1 << i)
            if upper < 2**63:
                assert ups[i] <= upper, "B(%d,%d): %d > %d" % (i, j, ups[i], upper)


def test_bad_records_leave_the_store_as_it_was() -> None:
    store = _started()
    store.feed(10, 20)
    with pytest.raises(CorruptRecordError):
        store.handle_record(OffsetSync(TP[0], TP[1], 0, 0).encode_key(), b"\x00" * 7)
    with pytest.raises(CorruptRecordError):
        store.handle_record(None, b"\x00" * 16)
    assert store.translate_downstream("g", TP, 10) == 20
    assert [store.sync_for(TP, i).upstream_offset for i in (0, 63)] == [10, 10]


# -- checkpoints (MirrorCheckpointTaskTest) ----------------------------------------------------------

FLOW = FlowConfig("source1", "target2")


def _committed(offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, "", -1)


def test_downstream_topic_renaming() -> None:
    assert FLOW.checkpoint_topic("topic3") == "source1.topic3"
    assert FLOW.checkpoint_topic("target2.topic3") == "topic3"
    assert FLOW.checkpoint_topic("source6.topic7") == "source1.source6.topic7"


def test_checkpoint() -> None:
    store = _started()
    store.sync(OffsetSync("topic1", 2, 3, 4))
    store.sync(OffsetSync("target2.topic5", 6, 7, 8))
    assert checkpoint(FLOW, store, "group9", ("topic1", 2), OffsetAndMetadata(10, "m", -1)) == \
        Checkpoint("group9", "source1.topic1", 2, 10, 5, "m")
    assert checkpoint(FLOW, store, "group11", ("target2.topic5", 6), _committed(12)) == \
        Checkpoint("group11", "topic5", 6, 12, 9, "")
    assert checkpoint(FLOW, store, "group13", ("target2.topic5", 6), _committed(7)) == \
        Checkpoint("group13", "topic5", 6, 7, 8, "")


def test_no_checkpoint_without_a_sync_or_a_committed_offset() -> None:
    store = _started()
    store.sync(OffsetSync("topic1", 0, 3, 4))
    assert checkpoint(FLOW, store, "group9", ("topic1", 1), _committed(10)) is None
    assert checkpoint(FLOW, store, "group9", ("topic1", 0), _committed(10)) is not None
    assert checkpoint(FLOW, store, "g1", ("topic1", 0), None) is None
    assert checkpoint(FLOW, store, "g1", ("topic1", 0), _committed(-1)) is None  # listed, never committed


def test_checkpoints_stay_monotonic_when_the_store_translates_more_coarsely() -> None:
    """MirrorCheckpointTaskTest.testCheckpointRecordsMonotonicIfStoreRewinds."""
    store = _started()
    checkpoints = CheckpointStore()
    tp, remote = ("topic1", 0), TopicPartition("source1.topic1", 0)
    upstream, downstream = 11, 4
    for _ in range(2):
        store.sync(OffsetSync(tp[0], tp[1], upstream, downstream))
        upstream += 1
        downstream += 1
    group_offset, expected = upstream, downstream
    assert store.translate_downstream("g1", tp, group_offset) == expected
    emitted = checkpoints_for_group(FLOW, store, checkpoints, "g1", {tp: _committed(group_offset)})
    assert remote in emitted
    checkpoints.update("g1", emitted)
    for _ in range(5):  # sync 1 drops out: translation falls back to sync 0
        store.sync(OffsetSync(tp[0], tp[1], upstream, downstream))
        upstream += 1
        downstream += 1
    assert store.translate_downstream("g1", tp, group_offset) != expected
    assert checkpoints_for_group(FLOW, store, checkpoints, "g1", {tp: _committed(group_offset)}) == {}
    # The group rewinding upstream is checkpointed, downstream rewinding with it.
    assert remote in checkpoints_for_group(FLOW, store, checkpoints, "g1", {tp: _committed(group_offset - 1)})


def test_a_restart_keeps_the_checkpoints_read_back() -> None:
    """MirrorCheckpointTaskTest.testCheckpointsTaskRestartUsesExistingCheckpoints."""
    tp, remote = ("t1", 0), TopicPartition("source1.t1", 0)
    store = Store(initialization_must_read_to_end=False)
    for offset in (100, 200, 300):
        store.sync(OffsetSync(tp[0], tp[1], offset, offset))
    store.mark_read_to_end()
    first = checkpoints_for_group(FLOW, store, CheckpointStore(), "group1", {tp: _committed(250)})
    assert first == {remote: Checkpoint("group1", "source1.t1", 0, 250, 201, "")}
    # Restarted: more syncs were written meanwhile, and the checkpoints topic is read back.
    store2 = Store(initialization_must_read_to_end=False)
    for offset in (175, 275, 375, 475):
        store2.sync(OffsetSync(tp[0], tp[1], offset, offset))
    store2.mark_read_to_end()
    reloaded = CheckpointStore({"group1"})
    for record in first.values():
        reloaded.handle_record(record.encode_key(), record.encode_value())
    reloaded.handle_record(Checkpoint("other", "source1.t1", 0, 1, 1).encode_key(), b"\x00\x00")
    assert reloaded.skipped == 1 and reloaded.get("other") is None
    assert store2.translate_downstream(None, tp, 250) == 176 and store2.translate_downstream(None, tp, 370) == 176
    assert checkpoints_for_group(FLOW, store2, reloaded, "group1", {tp: _committed(250)}) == {}
    assert checkpoints_for_group(FLOW, store2, reloaded, "group1", {tp: _committed(370)}) == {}
    assert checkpoints_for_group(FLOW, store2, reloaded, "group1", {tp: _committed(400)}) == {
        remote: Checkpoint("group1", "source1.t1", 0, 400, 376, "")}


def test_only_topics_the_filter_lets_through_are_checkpointed() -> None:
    flow = FlowConfig("source1", "target2", topics="orders")
    store = _started()
    store.sync(OffsetSync("orders", 0, 5, 5))
    store.sync(OffsetSync("audit", 0, 5, 5))
    emitted = checkpoints_for_group(flow, store, CheckpointStore(), "g", {("orders", 0): _committed(5),
                                                                          ("audit", 0): _committed(5)})
    assert list(emitted) == [TopicPartition("source1.orders", 0)]


def test_group_offsets_are_synced_forward_only() -> None:
    """MirrorCheckpointTaskTest.testSyncOffset and ...ForTargetGroupWithNullOffsetAndMetadata."""
    store = CheckpointStore()
    store.update("consumer1", {TopicPartition("topic1", 0): Checkpoint("consumer1", "topic1", 0, 200, 101, "metadata")})
    store.update("consumer2", {TopicPartition("topic2", 0): Checkpoint("consumer2", "topic2", 0, 100, 51, "metadata")})
    converted = store.converted_offsets()
    t1p0, t2p0 = TopicPartition("topic1", 0), TopicPartition("topic2", 0)
    assert offsets_to_sync(converted["consumer1"], {t1p0: _committed(100)}) == {
        t1p0: OffsetAndMetadata(101, "metadata", -1)}
    assert offsets_to_sync(converted["consumer2"], {t2p0: _committed(50)})[t2p0].offset == 51
    assert offsets_to_sync(converted["consumer1"], {t1p0: _committed(101)}) == {}, "never backwards"
    assert offsets_to_sync(converted["consumer1"], {t1p0: None})[t1p0].offset == 101, "reset to -1 by another client"
    assert offsets_to_sync(converted["consumer1"], {t1p0: _committed(-1)})[t1p0].offset == 101
    assert offsets_to_sync(converted["consumer1"], {})[t1p0].offset == 101, "a partition new to the group"
    assert offsets_to_sync(converted["consumer1"], None) == converted["consumer1"], "a group new to the target"


# -- translate_offsets (RemoteClusterUtils.translateOffsets) ----------------------------------------------


def _record(checkpoint: Checkpoint) -> tuple:
    return checkpoint.encode_key(), checkpoint.encode_value()


def test_a_groups_latest_checkpoint_per_partition() -> None:
    records = [
        _record(Checkpoint("g", "A.orders", 0, 100, 90, "m1")),
        _record(Checkpoint("other", "A.orders", 0, 500, 490, "")),
        _record(Checkpoint("g", "A.orders", 1, 7, 7, "")),
        (b"\x00", b"junk"),  # skipped, as Kafka skips what does not decode
        _record(Checkpoint("g", "A.orders", 0, 150, 141, "m2")),
    ]
    offsets = translate_offsets(records, "g")
    assert offsets == {TopicPartition("A.orders", 0): OffsetAndMetadata(141, "m2", -1),
                       TopicPartition("A.orders", 1): OffsetAndMetadata(7, "", -1)}
    assert offsets.skipped == 1
    assert translate_offsets(records, "nobody") == {}
