"""The transaction coordinator alone: its states and answers, its stored form, its markers.

The coordinator is given a list per ``__transaction_state`` partition to store in, a clock
the tests move, and a marker sender whose answers the tests choose (a partition's leader
moving, a fenced coordinator), so every transition is checked without a broker.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import pytest

from pylogq import errors
from pylogq.cluster.contract import TxnMarker
from pylogq.cluster.coordinator.transaction.coordinator import TransactionCoordinator
from pylogq.cluster.coordinator.transaction.log_schema import (
    TxnLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for_transactional_id,
)
from pylogq.cluster.coordinator.transaction.metadata import TxnState
from pylogq.records import decode_columns

TP = ("data", 0)
TP2 = ("other", 3)
NOT_LEADER = errors.NotLeaderOrFollowerError.code


class Storage:
    """``__transaction_state`` as lists of (key, value) per partition; a write can be made to fail."""

    def __init__(self) -> None:
        self.records: Dict[int, List[Tuple[Optional[bytes], Optional[bytes]]]] = {}
        self.fail: Optional[BaseException] = None

    def append(self, partition: int, batch: bytes) -> None:
        if self.fail is not None:
            raise self.fail
        columns = decode_columns(batch, start_offset=0)
        for i in range(len(columns)):
            self.records.setdefault(partition, []).append((columns.key(i), columns.value(i)))

    def read_all(self, partition: int) -> Iterator[Tuple[Optional[bytes], Optional[bytes]]]:
        return iter(list(self.records.get(partition, [])))

    def states(self, txn_id: str) -> List[Optional[TxnLogValue]]:
        out: List[Optional[TxnLogValue]] = []
        for records in self.records.values():
            for key, value in records:
                if key is not None and decode_key(key) == txn_id:
                    out.append(None if value is None else decode_value(value))
        return out


class Leaders:
    """The partitions' leaders and their answers to markers: every marker is recorded."""

    def __init__(self) -> None:
        self.leader: Dict[Tuple[str, int], Optional[int]] = {TP: 1, TP2: 2}
        self.answer: Dict[Tuple[str, int], int] = {}  # a code to answer instead of 0
        self.sent: List[Tuple[int, TxnMarker]] = []
        self.requests: List[Tuple[int, int]] = []  # (broker, markers in the request)
        self.written = threading.Condition()
        #: A broker whose answers wait for its event (a frozen leader).
        self.frozen: Dict[int, threading.Event] = {}

    def leader_of(self, topic: str, partition: int) -> Optional[int]:
        return self.leader.get((topic, partition))

    def send(self, broker_id: int, markers: Sequence[TxnMarker]) -> Mapping[int, Mapping[Tuple[str, int], int]]:
        with self.written:
            self.sent.extend((broker_id, m) for m in markers)
            self.requests.append((broker_id, len(markers)))
            self.written.notify_all()
        thaw = self.frozen.get(broker_id)
        if thaw is not None:
            assert thaw.wait(30), "the test never thawed broker %d" % broker_id
        return {m.producer_id: {tp: self.answer.get(tp, 0) for tp in m.partitions} for m in markers}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def parts() -> Iterator[Tuple[TransactionCoordinator, Storage, Leaders, Clock]]:
    storage, leaders, clock = Storage(), Leaders(), Clock()
    ids = iter(range(100, 1000))
    coordinator = TransactionCoordinator(storage.append, storage.read_all, lambda: next(ids), leaders.send,
                                         leaders.leader_of, num_partitions=4, max_timeout_ms=60000,
                                         id_expiration_ms=3_600_000, retry_backoff_ms=5, clock=clock)
    for p in range(4):
        coordinator.begin_loading(p)
        coordinator.load_partition(p, 7)
    yield coordinator, storage, leaders, clock
    coordinator.close()


def _state(coordinator: TransactionCoordinator, txn_id: str) -> str:
    return coordinator.describe(txn_id).state


def _wait_state(coordinator: TransactionCoordinator, txn_id: str, state: str, timeout: float = 10.0) -> None:
    reached = _poll(lambda: _state(coordinator, txn_id) == state, timeout)
    assert reached, "%s stayed %s, not %s" % (txn_id, _state(coordinator, txn_id), state)


def _poll(condition: Callable[[], bool], timeout: float) -> bool:
    """Wait for ``condition`` (the marker thread's progress), checked every few milliseconds,
    until a deadline."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not condition():
        if time.monotonic() >= deadline:
            return False
        pause.wait(0.005)
    return True


# -- the stored form ----------------------------------------------------------------------------


def test_the_key_and_value_are_kafkas_bytes() -> None:
    """Golden bytes of TransactionLogKey v0 and TransactionLogValue v0, field by field."""
    assert encode_key("tx") == b"\x00\x00" + b"\x00\x02tx"
    value = TxnLogValue(producer_id=5, producer_epoch=2, timeout_ms=60000, state=1,
                        partitions=frozenset({("b", 1), ("a", 0), ("a", 2)}), last_update_ms=9, start_ms=8)
    expected = (b"\x00\x00" + (5).to_bytes(8, "big") + (2).to_bytes(2, "big") + (60000).to_bytes(4, "big") + b"\x01"
                + (2).to_bytes(4, "big")
                + b"\x00\x01a" + (2).to_bytes(4, "big") + (0).to_bytes(4, "big") + (2).to_bytes(4, "big")
                + b"\x00\x01b" + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
                + (9).to_bytes(8, "big") + (8).to_bytes(8, "big"))
    assert encode_value(value) == expected
    assert decode_value(expected) == value
    # No partitions: a null array, as Kafka writes for Empty and the Complete states.
    empty = value._replace(partitions=frozenset(), state=4)
    assert encode_value(empty)[17:21] == b"\xff\xff\xff\xff"
    assert decode_value(encode_value(empty)) == empty


def test_version_1_values_are_read() -> None:
    """Version 1 (flexible): compact forms and tagged fields (the previous producer id)."""
    body = ((5).to_bytes(8, "big") + (2).to_bytes(2, "big") + (100).to_bytes(4, "big") + b"\x02"
            + b"\x02" + b"\x02a" + b"\x02" + (3).to_bytes(4, "big") + b"\x00"  # one topic "a", partition 3
            + (9).to_bytes(8, "big") + (8).to_bytes(8, "big")
            + b"\x01" + b"\x00\x08" + (4).to_bytes(8, "big"))  # tag 0: previous producer id 4
    value = decode_value(b"\x00\x01" + body)
    assert value == TxnLogValue(5, 2, 100, 2, frozenset({("a", 3)}), 9, 8, last_producer_id=4)


@pytest.mark.parametrize("data", [b"", b"\x00\x09" + b"\x00" * 40, b"\x00\x00\x00", b"\x00\x00" + b"\x00" * 15
                                  + b"\x7f\xff\xff\xff"])
def test_corrupt_values_are_refused_cleanly(data: bytes) -> None:
    with pytest.raises(errors.CorruptRecordError):
        decode_value(data)


def test_ids_land_on_the_partition_kafka_chooses() -> None:
    """Kafka's Utils.abs(transactionalId.hashCode) % partitions, with Java's String.hashCode."""
    for txn_id in ("my-txn", "tx", "a" * 40, "\u00e9t\u00e9"):
        assert partition_for_transactional_id(txn_id, 50) == abs(_java_hash(txn_id)) % 50


def _java_hash(s: str) -> int:
    h = 0
    for c in s:
        h = (31 * h + ord(c)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


# -- InitProducerId ------------------------------------------------------------------------------


def test_init_gives_an_id_then_bumps_its_epoch(parts) -> None:
    coordinator, storage, _, _ = parts
    assert coordinator.init_producer_id("tx", 30000) == (100, 0)
    assert coordinator.init_producer_id("tx", 30000) == (100, 1)
    assert [s.producer_epoch for s in storage.states("tx")] == [0, 1]
    assert all(s.state == TxnState.EMPTY for s in storage.states("tx"))


@pytest.mark.parametrize("txn_id, timeout, error", [
    ("", 1000, errors.InvalidRequestError),
    ("tx", 0, errors.InvalidTransactionTimeoutError),
    ("tx", 60001, errors.InvalidTransactionTimeoutError),
])
def test_init_refuses_bad_requests(parts, txn_id: str, timeout: int, error: type) -> None:
    coordinator, storage, _, _ = parts
    with pytest.raises(error):
        coordinator.init_producer_id(txn_id, timeout)
    assert storage.records == {}


def test_an_id_not_served_here_answers_not_coordinator_or_loading(parts) -> None:
    coordinator, _, _, _ = parts
    p = coordinator.partition_for("tx")
    coordinator.unload_partition(p)
    with pytest.raises(errors.NotCoordinatorError):
        coordinator.init_producer_id("tx", 1000)
    coordinator.begin_loading(p)
    with pytest.raises(errors.CoordinatorLoadInProgressError):
        coordinator.init_producer_id("tx", 1000)


def test_kip_360_a_producer_naming_its_epoch_continues_and_a_retry_is_answered_again(parts) -> None:
    coordinator, _, _, _ = parts
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    assert coordinator.init_producer_id("tx", 30000, pid, epoch) == (pid, 1)
    # A retry of that call (its answer lost): the same epoch again, no bump.
    assert coordinator.init_producer_id("tx", 30000, pid, epoch) == (pid, 1)
    # Another producer took the id over: the old one is fenced.
    coordinator.init_producer_id("tx", 30000)
    with pytest.raises(errors.ProducerFencedError):
        coordinator.init_producer_id("tx", 30000, pid, 1)


def test_exhausted_epochs_move_the_id_to_a_new_producer_id(parts) -> None:
    coordinator, _, _, _ = parts
    pid, _ = coordinator.init_producer_id("tx", 30000)
    meta = coordinator._txns["tx"]
    meta.producer_epoch = 0x7FFE  # the last usable epoch
    new_pid, epoch = coordinator.init_producer_id("tx", 30000)
    assert new_pid != pid and epoch == 0


# -- a transaction's life -------------------------------------------------------------------------


def test_commit_writes_markers_then_completes(parts) -> None:
    coordinator, storage, leaders, _ = parts
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    coordinator.add_partitions("tx", pid, epoch, [TP])
    coordinator.add_partitions("tx", pid, epoch, [TP, TP2])
    assert coordinator.describe("tx").partitions == (TP, TP2)
    assert _state(coordinator, "tx") == "Ongoing"
    coordinator.end_transaction("tx", pid, epoch, True)
    _wait_state(coordinator, "tx", "CompleteCommit")
    sent = {(broker, m.partitions, m.committed, m.coordinator_epoch, m.producer_epoch) for broker, m in leaders.sent}
    assert sent == {(1, (TP,), True, 7, epoch), (2, (TP2,), True, 7, epoch)}
    states = [s.state for s in storage.states("tx")]
    assert states == [TxnState.EMPTY, TxnState.ONGOING, TxnState.ONGOING, TxnState.PREPARE_COMMIT,
                      TxnState.COMPLETE_COMMIT]
    assert storage.states("tx")[-1].partitions == frozenset()
    # A retried EndTxn of the same decision succeeds; the other decision is refused.
    coordinator.end_transaction("tx", pid, epoch, True)
    with pytest.raises(errors.InvalidTxnStateError):
        coordinator.end_transaction("tx", pid, epoch, False)


def test_adding_what_is_already_added_writes_nothing(parts) -> None:
    coordinator, storage, _, _ = parts
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    coordinator.add_partitions("tx", pid, epoch, [TP])
    before = len(storage.states("tx"))
    coordinator.add_partitions("tx", pid, epoch, [TP])
    assert len(storage.states("tx")) == before
    assert coordinator.verify_partitions("tx", pid, epoch, [TP, TP2]) == {
        TP: 0, TP2: errors.InvalidTxnStateError.code}


def test_requests_of_a_stale_producer_are_fenced(parts) -> None:
    coordinator, _, _, _ = parts
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    coordinator.init_producer_id("tx", 30000)  # a new producer of the id
    with pytest.raises(errors.ProducerFencedError):
        coordinator.add_partitions("tx", pid, epoch, [TP])
    with pytest.raises(errors.ProducerFencedError):
        coordinator.end_transaction("tx", pid, epoch, True)
    with pytest.raises(errors.InvalidProducerIdMappingError):
        coordinator.add_partitions("tx", pid + 1, epoch + 1, [TP])


def test_ending_without_a_transaction_is_invalid(parts) -> None:
    coordinator, _, _, _ = parts
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    with pytest.raises(errors.InvalidTxnStateError):
        coordinator.end_transaction("tx", pid, epoch, True)


def test_a_new_producer_aborts_the_old_ones_transaction_first(parts) -> None:
    """InitProducerId during an ongoing transaction bumps the epoch, aborts with it, and answers
    CONCURRENT_TRANSACTIONS until the abort is complete; the retry then gets the next epoch."""
    coordinator, _, leaders, _ = parts
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    coordinator.add_partitions("tx", pid, epoch, [TP])
    with pytest.raises(errors.ConcurrentTransactionsError):
        coordinator.init_producer_id("tx", 30000)
    _wait_state(coordinator, "tx", "CompleteAbort")
    assert [(m.committed, m.producer_epoch) for _, m in leaders.sent] == [(False, epoch + 1)]
    assert coordinator.init_producer_id("tx", 30000) == (pid, epoch + 2)
    with pytest.raises(errors.ProducerFencedError):
        coordinator.end_transaction("tx", pid, epoch, True)


def test_markers_are_retried_until_the_leader_takes_them(parts) -> None:
    coordinator, _, leaders, _ = parts
    leaders.answer[TP] = NOT_LEADER
    leaders.leader[TP2] = -1  # no leader now
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    coordinator.add_partitions("tx", pid, epoch, [TP, TP2])
    coordinator.end_transaction("tx", pid, epoch, False)
    with leaders.written:
        leaders.written.wait_for(lambda: len(leaders.sent) >= 3, 10)
    assert _state(coordinator, "tx") == "PrepareAbort"
    assert coordinator.markers.pending("tx") == {TP, TP2}
    leaders.leader[TP] = 3
    leaders.answer.clear()
    leaders.leader[TP2] = 2
    _wait_state(coordinator, "tx", "CompleteAbort")
    assert {b for b, m in leaders.sent if m.partitions == (TP,)} >= {1, 3}


def test_a_frozen_leader_holds_back_only_the_markers_it_owes(parts) -> None:
    """A leader that does not answer delays its own partitions' markers; another
    transaction's markers, owed by another leader, are written and completed meanwhile, and
    the first completes once the leader answers."""
    coordinator, _, leaders, _ = parts
    leaders.frozen[1] = thaw = threading.Event()
    try:
        first = coordinator.init_producer_id("tx", 30000)
        coordinator.add_partitions("tx", *first, [TP])  # led by 1
        second = coordinator.init_producer_id("other-tx", 30000)
        coordinator.add_partitions("other-tx", *second, [TP2])  # led by 2
        coordinator.end_transaction("tx", *first, True)
        with leaders.written:
            assert leaders.written.wait_for(lambda: leaders.sent, 10)
        coordinator.end_transaction("other-tx", *second, True)
        _wait_state(coordinator, "other-tx", "CompleteCommit")
        assert _state(coordinator, "tx") == "PrepareCommit"
        assert coordinator.markers.pending("tx") == {TP}
    finally:
        thaw.set()
    _wait_state(coordinator, "tx", "CompleteCommit")
    assert [b for b, _ in leaders.sent] == [1, 2]


def test_markers_wait_for_their_leaders_answer_then_go_in_one_request(parts) -> None:
    """While a leader has a request in flight, the markers it is owed next wait for its
    answer (one request at a time per broker), then go together."""
    coordinator, _, leaders, _ = parts
    leaders.frozen[1] = thaw = threading.Event()
    try:
        ids = ["tx-%d" % i for i in range(3)]
        producers = {t: coordinator.init_producer_id(t, 30000) for t in ids}
        for t in ids:
            coordinator.add_partitions(t, *producers[t], [TP])
        coordinator.end_transaction(ids[0], *producers[ids[0]], False)
        with leaders.written:
            assert leaders.written.wait_for(lambda: leaders.sent, 10)
        for t in ids[1:]:
            coordinator.end_transaction(t, *producers[t], False)
        # the dispatcher has seen them, and parked them on the busy leader
        assert _poll(lambda: len(coordinator.markers._busy.get(1, ())) == 2, 10)
        assert all(coordinator.markers.pending(t) == {TP} for t in ids)
        assert len(leaders.sent) == 1
    finally:
        thaw.set()
    for t in ids:
        _wait_state(coordinator, t, "CompleteAbort")
    assert leaders.requests == [(1, 1), (1, 2)]
    assert [m.producer_id for _, m in leaders.sent][0] == producers[ids[0]][0]
    assert {m.producer_id for _, m in leaders.sent} == {p for p, _ in producers.values()}


def test_a_retried_request_in_flight_costs_no_cpu(parts) -> None:
    """A marker answered NOT_LEADER is sent again after the backoff; while that second
    request waits for its answer, the dispatcher waits too (it once spun on the backoff's
    past deadline for as long as the request was in flight)."""
    coordinator, _, leaders, _ = parts
    leaders.answer[TP] = NOT_LEADER
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    coordinator.add_partitions("tx", pid, epoch, [TP])
    coordinator.end_transaction("tx", pid, epoch, True)
    with leaders.written:
        assert leaders.written.wait_for(lambda: leaders.sent, 10)
        leaders.frozen[1] = thaw = threading.Event()
        leaders.answer.clear()
        assert leaders.written.wait_for(lambda: len(leaders.sent) >= 2, 10)
    try:
        window = 0.5
        cpu = time.process_time()
        threading.Event().wait(window)  # a window to measure the process's CPU in, not a synchronisation
        spent = time.process_time() - cpu
        assert spent < window / 4, "%.2f s of CPU in %.1f s with one request in flight" % (spent, window)
    finally:
        thaw.set()
    _wait_state(coordinator, "tx", "CompleteCommit")


def test_an_unexpected_answer_is_tried_again_not_taken_as_written(parts) -> None:
    """A marker answered with a code Kafka does not expect (UNKNOWN_SERVER_ERROR, or a
    partition missing from the answer) is sent again: the transaction completes only
    once the marker is really written."""
    coordinator, _, leaders, _ = parts
    leaders.answer[TP] = errors.UnknownServerError.code
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    coordinator.add_partitions("tx", pid, epoch, [TP])
    coordinator.end_transaction("tx", pid, epoch, True)
    with leaders.written:
        assert leaders.written.wait_for(lambda: len(leaders.sent) >= 2, 10)
    assert _state(coordinator, "tx") == "PrepareCommit"
    leaders.answer.clear()
    _wait_state(coordinator, "tx", "CompleteCommit")


def test_a_completion_that_fails_is_tried_again_without_holding_a_thread(parts) -> None:
    """CompleteCommit's write failing (too few in-sync replicas) is tried again after the
    backoff, by the writer, until it succeeds."""
    coordinator, storage, leaders, _ = parts
    leaders.frozen[1] = thaw = threading.Event()
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    coordinator.add_partitions("tx", pid, epoch, [TP])
    coordinator.end_transaction("tx", pid, epoch, True)  # PrepareCommit stored
    with leaders.written:
        assert leaders.written.wait_for(lambda: leaders.sent, 10)
    storage.fail = errors.NotEnoughReplicasError("too few")
    thaw.set()  # the marker is written; its completion's write fails
    assert _poll(lambda: "tx" in coordinator.markers._completions, 10)
    assert _state(coordinator, "tx") == "PrepareCommit"
    storage.fail = None
    _wait_state(coordinator, "tx", "CompleteCommit")


def test_a_deleted_topics_partition_owes_no_marker(parts) -> None:
    coordinator, _, leaders, _ = parts
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    coordinator.add_partitions("tx", pid, epoch, [TP, TP2])
    leaders.leader[TP2] = None
    coordinator.end_transaction("tx", pid, epoch, True)
    _wait_state(coordinator, "tx", "CompleteCommit")
    assert [m.partitions for _, m in leaders.sent] == [(TP,)]


def test_a_fenced_coordinator_gives_the_transaction_up(parts) -> None:
    coordinator, _, leaders, _ = parts
    leaders.answer[TP] = errors.TransactionCoordinatorFencedError.code
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    coordinator.add_partitions("tx", pid, epoch, [TP])
    coordinator.end_transaction("tx", pid, epoch, True)
    with leaders.written:
        leaders.written.wait_for(lambda: leaders.sent, 10)
    assert _poll(lambda: coordinator.markers.pending("tx") is None, 10)
    assert _state(coordinator, "tx") == "PrepareCommit"  # its next coordinator completes it


def test_a_failed_write_changes_nothing(parts) -> None:
    coordinator, storage, _, _ = parts
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    storage.fail = errors.NotEnoughReplicasError("too few")
    with pytest.raises(errors.CoordinatorNotAvailableError):
        coordinator.add_partitions("tx", pid, epoch, [TP])
    storage.fail = errors.NotLeaderOrFollowerError("moved")
    with pytest.raises(errors.NotCoordinatorError):
        coordinator.add_partitions("tx", pid, epoch, [TP])
    assert _state(coordinator, "tx") == "Empty" and coordinator._txns["tx"].pending is None
    storage.fail = None
    coordinator.add_partitions("tx", pid, epoch, [TP])
    assert _state(coordinator, "tx") == "Ongoing"


# -- timeouts, expiration, loading ------------------------------------------------------------------


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(parts) -> None:
    coordinator, _, leaders, clock = parts
    pid, epoch = coordinator.init_producer_id("tx", 5000)
    coordinator.add_partitions("tx", pid, epoch, [TP])
    clock.now += 5000
    assert coordinator.abort_timed_out_transactions() == 0  # not past it yet
    clock.now += 1
    assert coordinator.abort_timed_out_transactions() == 1
    _wait_state(coordinator, "tx", "CompleteAbort")
    assert [(m.committed, m.producer_epoch) for _, m in leaders.sent] == [(False, epoch + 1)]
    with pytest.raises(errors.ProducerFencedError):
        coordinator.add_partitions("tx", pid, epoch, [TP])


def test_idle_ids_expire_with_a_tombstone(parts) -> None:
    coordinator, storage, _, clock = parts
    coordinator.init_producer_id("idle", 30000)
    pid, epoch = coordinator.init_producer_id("busy", 30000)
    coordinator.add_partitions("busy", pid, epoch, [TP])
    clock.now += 3_600_000
    assert coordinator.remove_expired_transactional_ids() == 1
    assert storage.states("idle")[-1] is None
    assert coordinator.describe("idle").error_code == errors.TransactionalIdNotFoundError.code
    assert _state(coordinator, "busy") == "Ongoing"


def test_loading_restores_ids_and_completes_decided_transactions(parts) -> None:
    coordinator, storage, leaders, _ = parts
    pid, epoch = coordinator.init_producer_id("tx", 30000)
    coordinator.add_partitions("tx", pid, epoch, [TP])
    leaders.leader[TP] = -1  # the markers cannot be written before the move
    coordinator.end_transaction("tx", pid, epoch, True)
    coordinator.init_producer_id("gone", 30000)
    coordinator.remove_expired_transactional_ids()
    p = coordinator.partition_for("tx")
    coordinator.unload_partition(p)
    coordinator.close()
    # A new coordinator (the partition's next leader) reads it back, in a newer epoch.
    ids = iter(range(500, 600))
    again = TransactionCoordinator(storage.append, storage.read_all, lambda: next(ids), leaders.send,
                                   leaders.leader_of, num_partitions=4, retry_backoff_ms=5)
    try:
        for q in range(4):
            again.begin_loading(q)
            again.load_partition(q, 8)
        assert again.describe("tx").state == "PrepareCommit"
        leaders.leader[TP] = 1
        _wait_state(again, "tx", "CompleteCommit")
        assert leaders.sent[-1][1].coordinator_epoch == 8
        assert again.init_producer_id("tx", 30000) == (pid, epoch + 1)
        unknown, listed = again.list_transactions()
        assert unknown == [] and {t.transactional_id for t in listed} >= {"tx"}
    finally:
        again.close()


def test_list_filters_by_state_producer_and_duration(parts) -> None:
    coordinator, _, _, clock = parts
    pid, epoch = coordinator.init_producer_id("open", 30000)
    coordinator.add_partitions("open", pid, epoch, [TP])
    other, _ = coordinator.init_producer_id("idle", 30000)
    clock.now += 1000
    assert {t.transactional_id for t in coordinator.list_transactions(["Ongoing"])[1]} == {"open"}
    assert {t.transactional_id for t in coordinator.list_transactions(producer_ids=[other])[1]} == {"idle"}
    assert coordinator.list_transactions(["Bogus"])[0] == ["Bogus"]
    assert {t.transactional_id for t in coordinator.list_transactions(duration_ms=1000)[1]} == {"open"}
    assert coordinator.list_transactions(duration_ms=1001)[1] == []


def test_a_fence_whose_abort_was_not_stored_bumps_the_epoch_once(parts) -> None:
    """Kafka's hasFailedEpochFence: the next fence keeps the epoch the failed one bumped."""
    coordinator, storage, leaders, clock = parts
    pid, epoch = coordinator.init_producer_id("tx", 5000)
    coordinator.add_partitions("tx", pid, epoch, [TP])
    clock.now += 5001
    storage.fail = errors.NotEnoughReplicasError("too few")
    assert coordinator.abort_timed_out_transactions() == 0
    assert coordinator.abort_timed_out_transactions() == 0
    storage.fail = None
    assert coordinator.abort_timed_out_transactions() == 1
    _wait_state(coordinator, "tx", "CompleteAbort")
    assert [m.producer_epoch for _, m in leaders.sent] == [epoch + 1]
    assert storage.states("tx")[-1].producer_epoch == epoch + 1
