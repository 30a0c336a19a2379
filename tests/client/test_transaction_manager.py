"""pylogq.client.transaction_manager: a transactional producer's states, errors and requests.

The producer, its batches and the partitions they go to are real (an in-process broker);
the transaction coordinator's answers are the test's (:class:`ScriptedCoordinator`), so
each error Kafka's client must handle (CONCURRENT_TRANSACTIONS, a coordinator moving or
loading, TRANSACTION_ABORTABLE, a fenced epoch, a timeout) is given exactly when wanted, as
Kafka's own TransactionManagerTest does with its mock client. The end-to-end behaviour
against the broker's coordinator is tests/client/test_transactions.py's.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

import pylogq
from pylogq import records
from pylogq.client.consumer_coordinator import ConsumerGroupMetadata, OffsetAndMetadata
from pylogq.client.producer import Producer
from pylogq.client.tcp_requests import ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT, TcpRequests
from pylogq.client.connection import CLIENT_VERSIONS
from pylogq.client.transaction_manager import TransactionState, group_metadata_of, offsets_of
from pylogq.cluster.contract import TopicPartition, TxnOffset
from pylogq.errors import (
    BrokerError,
    ClusterAuthorizationFailedError,
    CommitFailedError,
    ConcurrentTransactionsError,
    ConfigError,
    CoordinatorLoadInProgressError,
    IllegalStateError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRecordError,
    KafkaTimeoutError,
    NotCoordinatorError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionalIdAuthorizationFailedError,
    UnknownMemberIdError,
)
from pylogq.protocol.constants import ApiKey
from pylogq.protocol.messages import REQUESTS

TXN_ID = "txn-unit"


@pytest.fixture
def broker(tmp_path):
    with pylogq.Broker(str(tmp_path / "data"), group_initial_rebalance_delay_ms=0) as b:
        b.create_topic("t1", partitions=2)
        b.create_topic("t2", partitions=1)
        yield b


class ScriptedCoordinator:
    """A transport whose transaction-coordinator calls the test answers; everything else
    (Produce, Metadata) goes to a real in-process broker. ``script[name]`` holds the
    answers of that call in order, each an exception to raise, a dict of per-partition
    codes, or None for success; past them every call succeeds. ``calls`` records each call
    in order, Produce included, as (name, args)."""

    def __init__(self, broker: Any) -> None:
        self._transport = broker.transport()
        self.calls: List[Tuple[str, Tuple[Any, ...]]] = []
        self.script: Dict[str, List[Any]] = {}
        self.producer_id = self._transport.init_producer_id()[0]
        self.epoch = -1
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def names(self) -> List[str]:
        with self.lock:
            return [name for name, _ in self.calls]

    def _answer(self, name: str, args: Tuple[Any, ...]) -> Any:
        with self.lock:
            self.calls.append((name, args))
            answers = self.script.get(name)
            answer = answers.pop(0) if answers else None
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def init_producer_id(self, transactional_id: Optional[str] = None, transaction_timeout_ms: int = 60000,
                         producer_id: int = -1, producer_epoch: int = -1) -> Tuple[int, int]:
        self._answer("init_producer_id", (transactional_id, transaction_timeout_ms, producer_id, producer_epoch))
        self.epoch += 1
        return self.producer_id, self.epoch

    def produce(self, topic: str, partition: int, data: Any, acks: int, transactional_id: Optional[str] = None) -> Any:
        with self.lock:
            self.calls.append(("produce", (topic, partition, transactional_id)))
        return self._transport.produce(topic, partition, data, acks)

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Sequence[Tuple[str, int]]) -> Dict[Tuple[str, int], int]:
        codes = self._answer("add_partitions_to_txn", (transactional_id, producer_id, producer_epoch,
                                                       tuple(partitions)))
        return {tuple(tp): (codes or {}).get(tuple(tp), 0) for tp in partitions}

    def add_offsets_to_txn(self, *args: Any) -> None:
        self._answer("add_offsets_to_txn", args)

    def end_txn(self, *args: Any) -> None:
        self._answer("end_txn", args)

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                          generation_id: int, member_id: str, group_instance_id: Optional[str],
                          offsets: Any) -> Dict[Tuple[str, int], int]:
        codes = self._answer("txn_offset_commit", (transactional_id, group_id, producer_id, producer_epoch,
                                                   generation_id, member_id, group_instance_id, dict(offsets)))
        return {tp: (codes or {}).get(tp, 0) for tp in offsets}

    def close(self) -> None:
        self._transport.close()


@pytest.fixture
def coordinator(broker):
    return ScriptedCoordinator(broker)


def producer(coordinator: ScriptedCoordinator, **configs: Any) -> Producer:
    configs.setdefault("retry_backoff_ms", 1)
    return Producer(broker=coordinator, transactional_id=TXN_ID, **configs)


def batches_of(broker: Any, topic: str, partition: int) -> List[Any]:
    res = broker.fetch([(topic, partition, 0, 1 << 30)], max_wait_ms=0)[(topic, partition)]
    data = res.records.read()
    return [records.RecordBatch(data, info.position) for info in records.iter_batches(data)]


# -- configuration ----------------------------------------------------------------------------


def test_a_transactional_id_implies_idempotence_and_refuses_to_go_without(coordinator):
    with producer(coordinator) as p:
        assert p._idempotent
        assert p._transaction is not None and p._transaction.state is TransactionState.UNINITIALIZED
        assert coordinator.names() == []  # no producer id before init_transactions()
    with pytest.raises(ConfigError, match="idempotence"):
        Producer(broker=coordinator, transactional_id=TXN_ID, enable_idempotence=False)
    with pytest.raises(ConfigError, match="acks=1"):
        Producer(broker=coordinator, transactional_id=TXN_ID, acks=1)
    with pytest.raises(ConfigError, match="retries=0"):
        Producer(broker=coordinator, transactional_id=TXN_ID, retries=0)
    with pytest.raises(ConfigError, match="transactional_id"):
        Producer(broker=coordinator, transactional_id="")
    with pytest.raises(ConfigError, match="transaction_timeout_ms"):
        Producer(broker=coordinator, transactional_id=TXN_ID, transaction_timeout_ms=0)


def test_transactional_calls_on_a_producer_without_a_transactional_id_raise(broker):
    with Producer(broker=broker) as p:
        for call in (p.init_transactions, p.begin_transaction, p.commit_transaction, p.abort_transaction):
            with pytest.raises(IllegalStateError, match="no transactional_id"):
                call()
        with pytest.raises(IllegalStateError, match="no transactional_id"):
            p.send_offsets_to_transaction({("t1", 0): 1}, "g")


# -- states -----------------------------------------------------------------------------------


def test_a_transaction_goes_through_kafkas_states_and_adds_each_partition_before_its_first_batch(broker, coordinator):
    with producer(coordinator, transaction_timeout_ms=30000) as p:
        with pytest.raises(IllegalStateError, match="init_transactions"):
            p.send("t1", b"early", partition=0)
        with pytest.raises(IllegalStateError, match="init_transactions"):
            p.begin_transaction()
        p.init_transactions()
        txn = p._transaction
        assert txn.state is TransactionState.READY
        assert coordinator.calls == [("init_producer_id", (TXN_ID, 30000, -1, -1))]
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send("t1", b"outside", partition=0)
        with pytest.raises(IllegalStateError, match="state READY"):
            p.commit_transaction()

        p.begin_transaction()
        assert txn.state is TransactionState.IN_TRANSACTION
        with pytest.raises(IllegalStateError, match="IN_TRANSACTION"):
            p.begin_transaction()
        futures = [p.send("t1", b"a", partition=0), p.send("t1", b"b", partition=1), p.send("t2", b"c", partition=0)]
        p.flush()
        p.send("t1", b"d", partition=0)  # a partition already in the transaction: not added again
        p.commit_transaction()
        assert txn.state is TransactionState.READY
        assert all(f.get(1).offset >= 0 for f in futures)

    names = coordinator.names()
    adds = [args[3] for name, args in coordinator.calls if name == "add_partitions_to_txn"]
    assert sorted(tp for added in adds for tp in added) == [("t1", 0), ("t1", 1), ("t2", 0)]
    first_produce = {}
    for i, (name, args) in enumerate(coordinator.calls):
        if name == "produce":
            first_produce.setdefault(args[:2], i)
            assert args[2] == TXN_ID
    for tp, i in first_produce.items():
        added_at = next(j for j, (name, args) in enumerate(coordinator.calls)
                        if name == "add_partitions_to_txn" and tp in args[3])
        assert added_at < i
    assert names[-1] == "end_txn" and coordinator.calls[-1][1] == (TXN_ID, coordinator.producer_id, 0, True)
    for tp in (("t1", 0), ("t1", 1), ("t2", 0)):
        for batch in batches_of(broker, *tp):
            assert batch.is_transactional and batch.producer_id == coordinator.producer_id
            assert batch.producer_epoch == 0


def test_an_empty_transaction_ends_without_the_coordinator(coordinator):
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        p.commit_transaction()
        p.begin_transaction()
        p.abort_transaction()
        assert p._transaction.state is TransactionState.READY
    assert coordinator.names() == ["init_producer_id"]


def test_each_transaction_adds_its_partitions_again(coordinator):
    with producer(coordinator) as p:
        p.init_transactions()
        for value in (b"one", b"two"):
            p.begin_transaction()
            p.send("t2", value, partition=0)
            p.commit_transaction()
    assert [n for n in coordinator.names() if n != "produce"] == [
        "init_producer_id", "add_partitions_to_txn", "end_txn", "add_partitions_to_txn", "end_txn"]


# -- retriable answers ------------------------------------------------------------------------


def test_concurrent_transactions_and_coordinator_moves_are_retried(broker, coordinator):
    coordinator.script = {
        "init_producer_id": [CoordinatorLoadInProgressError("loading"), NotCoordinatorError("moved")],
        "add_partitions_to_txn": [{("t1", 0): ConcurrentTransactionsError.code},
                                  {("t1", 0): ConcurrentTransactionsError.code}],
        "end_txn": [ConcurrentTransactionsError("markers being written")],
    }
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        future = p.send("t1", b"v", partition=0)
        p.commit_transaction()
        assert future.get(1).offset == 0
    assert [n for n in coordinator.names() if n != "produce"] == [
        "init_producer_id"] * 3 + ["add_partitions_to_txn"] * 3 + ["end_txn"] * 2


def test_a_call_that_times_out_is_resumed_by_calling_it_again(coordinator):
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t2", b"v", partition=0)
        coordinator.script["end_txn"] = [ConcurrentTransactionsError("busy")] * 1000
        with pytest.raises(KafkaTimeoutError, match="EndTxn"):
            p.commit_transaction(timeout=0.05)
        assert p._transaction.state is TransactionState.COMMITTING
        with pytest.raises(IllegalStateError, match="commit_transaction did not complete"):
            p.abort_transaction()
        with pytest.raises(IllegalStateError, match="send"):
            p.send("t2", b"late", partition=0)
        coordinator.script["end_txn"] = []
        p.commit_transaction()
        assert p._transaction.state is TransactionState.READY
        p.begin_transaction()  # the producer goes on


def test_only_concurrent_transactions_on_a_transactions_first_partitions_is_retried_sooner(coordinator, caplog):
    """Kafka's client retries the first AddPartitionsToTxn of a transaction answered
    CONCURRENT_TRANSACTIONS after at most 20 ms (the previous transaction's markers take
    milliseconds), and any other retriable answer, or a later AddPartitionsToTxn, after
    retry_backoff_ms."""
    concurrent, loading = ConcurrentTransactionsError.code, CoordinatorLoadInProgressError.code
    coordinator.script["add_partitions_to_txn"] = [{("t2", 0): concurrent}, {("t2", 0): loading}, None,
                                                   {("t1", 0): concurrent}]
    caplog.set_level(logging.DEBUG, logger="pylogq.client.producer")
    with producer(coordinator, retry_backoff_ms=50) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t2", b"first", partition=0).get(5)
        p.send("t1", b"later", partition=0).get(5)
        p.commit_transaction()
    waits = [float(found.group(1)) for found in (re.match(r"AddPartitionsToTxn .* retrying in ([0-9.]+) s",
                                                          r.getMessage()) for r in caplog.records) if found]
    assert waits == [0.02, 0.05, 0.05]


def test_the_retry_loop_retries_only_retriable_answers_and_names_what_ran_out_of_time():
    from pylogq.client.transaction_manager import retry_retriable

    answers: List[Any] = [ConcurrentTransactionsError("busy"), NotCoordinatorError("moved"), "done"]

    def call() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    waited: List[BaseException] = []
    assert retry_retriable("Call", call, float("inf"), lambda exc: waited.append(exc) or 0.0) == "done"
    assert [type(e) for e in waited] == [ConcurrentTransactionsError, NotCoordinatorError]
    answers[:] = [ProducerFencedError("fenced"), "unreached"]
    with pytest.raises(ProducerFencedError):
        retry_retriable("Call", call, float("inf"), 0.0)
    answers[:] = [ConcurrentTransactionsError("still busy")]
    with pytest.raises(KafkaTimeoutError, match="EndTxn of x did not complete within max_block_ms: .*still busy") \
            as raised:
        retry_retriable("EndTxn of x", call, 0.0, 0.001)
    assert isinstance(raised.value.__cause__, ConcurrentTransactionsError)


# -- fatal errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [ProducerFencedError("fenced"), InvalidProducerEpochError("old epoch")])
def test_a_fenced_producer_raises_producer_fenced_on_every_later_call(coordinator, answer):
    coordinator.script["end_txn"] = [answer]
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t1", b"v", partition=0)
        with pytest.raises(ProducerFencedError):
            p.commit_transaction()
        assert p._transaction.state is TransactionState.FATAL_ERROR
        for call in (p.begin_transaction, p.abort_transaction, p.commit_transaction, p.init_transactions):
            with pytest.raises(ProducerFencedError, match="fenced by another producer"):
                call()
        with pytest.raises(ProducerFencedError):
            p.send("t1", b"after", partition=0)
        with pytest.raises(ProducerFencedError):
            p.send_offsets_to_transaction({("t1", 0): 1}, "g")


def test_a_fenced_init_is_fatal(coordinator):
    coordinator.script["init_producer_id"] = [ProducerFencedError("a newer epoch exists")]
    with producer(coordinator) as p:
        with pytest.raises(ProducerFencedError):
            p.init_transactions()
        with pytest.raises(ProducerFencedError):
            p.begin_transaction()


@pytest.mark.parametrize("error", [TransactionalIdAuthorizationFailedError, ClusterAuthorizationFailedError])
@pytest.mark.parametrize("when", ["init", "epoch bump"])
def test_an_unauthorized_init_producer_id_leaves_the_producer_to_initialize_again(broker, coordinator, error, when):
    """As Kafka's client does since 3.6 (KAFKA-13668): InitProducerId refused for want of a
    permission is not fatal; the producer is UNINITIALIZED, and init_transactions() may be
    called again once the permission is granted."""
    with producer(coordinator) as p:
        txn = p._transaction
        if when == "init":
            coordinator.script["init_producer_id"] = [error("not authorized")]
            with pytest.raises(error):
                p.init_transactions()
        else:
            broker.create_topic("small", partitions=1, config={"max.message.bytes": 200})
            p.init_transactions()
            p.begin_transaction()
            with pytest.raises(BrokerError):
                p.send("small", b"x" * 1000, partition=0).get(5)
            coordinator.script["init_producer_id"] = [error("not authorized")]
            with pytest.raises(error):
                p.abort_transaction()  # its epoch bump is refused
        assert (txn.state, txn.last_error) == (TransactionState.UNINITIALIZED, None)
        with pytest.raises(IllegalStateError, match="init_transactions"):
            p.begin_transaction()
        del coordinator.calls[:]
        p.init_transactions()
        assert coordinator.calls == [("init_producer_id", (TXN_ID, 60000, -1, -1))]
        assert txn.state is TransactionState.READY
        p.begin_transaction()
        ok = p.send("t2", b"v", partition=0)
        p.commit_transaction()
        assert ok.get(1).offset == 0
    [batch] = batches_of(broker, "t2", 0)
    assert batch.producer_epoch == txn.producer_epoch


def test_batches_queued_when_the_producer_is_fenced_fail_with_it(coordinator):
    coordinator.script["add_partitions_to_txn"] = [{("t1", 0): ProducerFencedError.code}]
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        future = p.send("t1", b"v", partition=0)
        with pytest.raises(ProducerFencedError):
            future.get(5)
        assert "produce" not in coordinator.names()
        with pytest.raises(ProducerFencedError):
            p.commit_transaction()


# -- abortable errors -------------------------------------------------------------------------


def test_an_abortable_error_fails_the_commit_and_abort_recovers(broker, coordinator):
    coordinator.script["add_partitions_to_txn"] = [{("t1", 0): TransactionAbortableError.code}]
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        future = p.send("t1", b"doomed", partition=0)
        with pytest.raises(TransactionAbortableError):
            future.get(5)
        assert p._transaction.state is TransactionState.ABORTABLE_ERROR
        with pytest.raises(TransactionAbortableError):
            p.commit_transaction()
        with pytest.raises(TransactionAbortableError):
            p.send("t1", b"more", partition=0)
        p.abort_transaction()
        assert p._transaction.state is TransactionState.READY
        p.begin_transaction()
        ok = p.send("t1", b"next", partition=0)
        p.commit_transaction()
        assert ok.get(1).offset == 0  # nothing of the aborted transaction reached the log
    assert coordinator.names().count("init_producer_id") == 1  # nothing was lost: no epoch bump


def test_abort_drops_the_unsent_batches_and_their_sequences_go_to_the_next_ones(broker, coordinator):
    with producer(coordinator, linger_ms=60000) as p:
        p.init_transactions()
        p.begin_transaction()
        sent = p.send("t2", b"sent", partition=0)
        p.flush()
        assert sent.get(1).offset == 0
        unsent = [p.send("t2", b"unsent-%d" % i, partition=0) for i in range(3)]
        p.abort_transaction()
        for future in unsent:
            with pytest.raises(TransactionAbortedError):
                future.get(1)
        p.begin_transaction()
        after = p.send("t2", b"after", partition=0)
        p.commit_transaction()
        assert after.get(1).offset == 1  # the broker took sequence 1 again: no gap, no refusal
    written = batches_of(broker, "t2", 0)
    assert [b.base_sequence for b in written] == [0, 1]
    assert [[r.value for r in b] for b in written] == [[b"sent"], [b"after"]]


def test_a_failed_batch_makes_the_abort_bump_the_epoch(broker, coordinator):
    broker.create_topic("small", partitions=1, config={"max.message.bytes": 200})
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        future = p.send("small", b"x" * 1000, partition=0)
        with pytest.raises(BrokerError):
            future.get(5)
        assert p._transaction.state is TransactionState.ABORTABLE_ERROR
        with pytest.raises(type(future.exception)):
            p.commit_transaction()
        p.abort_transaction()
        assert coordinator.calls[-1] == ("init_producer_id", (TXN_ID, 60000, coordinator.producer_id, 0))
        assert (p._transaction.producer_epoch, p._transaction.state) == (1, TransactionState.READY)
        p.begin_transaction()
        ok = p.send("small", b"fits", partition=0)
        p.commit_transaction()
        assert ok.get(1).offset == 0
    [batch] = batches_of(broker, "small", 0)
    assert (batch.producer_epoch, batch.base_sequence) == (1, 0)


def _start_and_fail_with_invalid_producer_id_mapping(p: Producer, coordinator: ScriptedCoordinator,
                                                    where: str) -> None:
    """A transaction the coordinator knows of (a partition added), then INVALID_PRODUCER_ID_MAPPING
    from ``where``: the coordinator no longer maps the transactional id to this producer id."""
    p.begin_transaction()
    p.send("t2", b"in", partition=0).get(5)
    mapping = InvalidProducerIdMappingError("the transactional id has no producer id")
    if where == "add_partitions_to_txn":
        coordinator.script[where] = [{("t1", 0): InvalidProducerIdMappingError.code}]
        with pytest.raises(InvalidProducerIdMappingError):
            p.send("t1", b"out", partition=0).get(5)
    elif where == "add_offsets_to_txn":
        coordinator.script[where] = [mapping]
        with pytest.raises(InvalidProducerIdMappingError):
            p.send_offsets_to_transaction({("t1", 0): 1}, "g")
    else:
        coordinator.script[where] = [mapping]
        with pytest.raises(InvalidProducerIdMappingError):
            p.commit_transaction()


@pytest.mark.parametrize("where", ["add_partitions_to_txn", "add_offsets_to_txn", "end_txn"])
def test_an_invalid_producer_id_mapping_is_aborted_by_a_new_epoch_without_end_txn(broker, coordinator, where):
    """The coordinator refuses every EndTxn of a producer id it does not map the transactional
    id to, so the abort goes straight to InitProducerId with the producer's id and epoch (as
    Kafka's TransactionManager does), which gives the id a producer again."""
    with producer(coordinator) as p:
        p.init_transactions()
        _start_and_fail_with_invalid_producer_id_mapping(p, coordinator, where)
        txn = p._transaction
        assert txn.state is TransactionState.ABORTABLE_ERROR
        ends = coordinator.names().count("end_txn")
        coordinator.script["end_txn"] = [InvalidProducerIdMappingError("no mapping")] * 5
        p.abort_transaction()
        assert coordinator.names().count("end_txn") == ends  # no EndTxn, which could only be refused
        assert coordinator.calls[-1] == ("init_producer_id", (TXN_ID, 60000, coordinator.producer_id, 0))
        assert (txn.state, txn.producer_epoch) == (TransactionState.READY, 1)
        coordinator.script["end_txn"] = []
        p.begin_transaction()
        p.send("t2", b"next", partition=0)
        p.commit_transaction()
        assert coordinator.calls[-1] == ("end_txn", (TXN_ID, coordinator.producer_id, 1, True))
        # The next abort is an ordinary one again: EndTxn, no new epoch.
        p.begin_transaction()
        p.send("t2", b"dropped", partition=0).get(5)
        p.abort_transaction()
        assert coordinator.calls[-1] == ("end_txn", (TXN_ID, coordinator.producer_id, 1, False))
    assert [b.producer_epoch for b in batches_of(broker, "t2", 0)] == [0, 1, 1]


# -- close ------------------------------------------------------------------------------------


@pytest.mark.parametrize("abortable", [False, True])
def test_close_aborts_the_transaction_left_open(coordinator, abortable):
    """As Kafka's sender does on a graceful close: the records not yet sent are dropped and
    EndTxn(abort) ends the transaction, so read_committed readers do not wait for its timeout."""
    with producer(coordinator, linger_ms=60000) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t2", b"sent", partition=0)
        p.flush()
        if abortable:
            coordinator.script["add_partitions_to_txn"] = [{("t1", 0): TransactionAbortableError.code}]
            refused = p.send("t1", b"refused", partition=0)
            p.flush()
            with pytest.raises(TransactionAbortableError):
                refused.get(1)
            assert p._transaction.state is TransactionState.ABORTABLE_ERROR
        else:
            unsent = p.send("t2", b"unsent", partition=0)
    if not abortable:
        with pytest.raises(TransactionAbortedError):
            unsent.get(1)
    assert p._transaction.state is TransactionState.READY
    assert coordinator.calls[-1] == ("end_txn", (TXN_ID, coordinator.producer_id, 0, False))


def test_close_completes_a_commit_that_ran_out_of_time(coordinator):
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t2", b"v", partition=0)
        coordinator.script["end_txn"] = [ConcurrentTransactionsError("busy")] * 1000
        with pytest.raises(KafkaTimeoutError):
            p.commit_transaction(timeout=0.05)
        coordinator.script["end_txn"] = []
    assert p._transaction.state is TransactionState.READY
    assert coordinator.calls[-1] == ("end_txn", (TXN_ID, coordinator.producer_id, 0, True))


def test_close_leaves_a_prepared_transaction_to_its_new_owner(coordinator):
    """pylogq.spark's tasks hand their open transactions to the driver and close: the close
    must not abort them. The next begin_transaction's transaction is the producer's own again."""
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t2", b"v", partition=0)
        assert p.prepare_transaction().started
        p.close()
    assert p._transaction.state is TransactionState.IN_TRANSACTION
    assert "end_txn" not in coordinator.names()

    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t2", b"v", partition=0)
        p.prepare_transaction()
        p.commit_transaction()
        p.begin_transaction()
        p.send("t2", b"w", partition=0).get(5)
    assert [c[1][-1] for c in coordinator.calls if c[0] == "end_txn"] == [True, False]


def test_a_forced_close_leaves_the_transaction_open(coordinator):
    """close(timeout=0) is Kafka's forced close: no abort, the coordinator's timeout ends it."""
    p = producer(coordinator)
    p.init_transactions()
    p.begin_transaction()
    p.send("t2", b"v", partition=0).get(5)
    p.close(timeout=0)
    assert "end_txn" not in coordinator.names()


# -- offsets ----------------------------------------------------------------------------------


def test_send_offsets_adds_the_group_then_commits_its_offsets(coordinator):
    group = ConsumerGroupMetadata("g", 3, "member-1", None)
    with producer(coordinator) as p:
        p.init_transactions()
        with pytest.raises(IllegalStateError, match="not in progress"):
            p.send_offsets_to_transaction({("t1", 0): 5}, group)
        p.begin_transaction()
        p.send_offsets_to_transaction({TopicPartition("t1", 0): OffsetAndMetadata(5, "m", 2), ("t1", 1): 7}, group)
        p.commit_transaction()
    pid = coordinator.producer_id
    assert [c for c in coordinator.calls if c[0] != "produce"] == [
        ("init_producer_id", (TXN_ID, 60000, -1, -1)),
        ("add_offsets_to_txn", (TXN_ID, pid, 0, "g")),
        ("txn_offset_commit", (TXN_ID, "g", pid, 0, 3, "member-1", None,
                               {("t1", 0): TxnOffset(5, 2, "m"), ("t1", 1): TxnOffset(7, -1, None)})),
        ("end_txn", (TXN_ID, pid, 0, True)),
    ]


def test_stale_group_metadata_fails_the_offsets_and_makes_the_transaction_abortable(coordinator):
    coordinator.script["txn_offset_commit"] = [{("t1", 0): UnknownMemberIdError.code}]
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        with pytest.raises(CommitFailedError, match="stale"):
            p.send_offsets_to_transaction({("t1", 0): 5}, ConsumerGroupMetadata("g", 1, "gone"))
        assert p._transaction.state is TransactionState.ABORTABLE_ERROR
        p.abort_transaction()
    assert coordinator.names()[-1] == "end_txn" and coordinator.calls[-1][1][-1] is False


def _offset_calls(coordinator: ScriptedCoordinator) -> List[Tuple[str, Tuple[Any, ...]]]:
    return [c for c in coordinator.calls if c[0] in ("add_offsets_to_txn", "txn_offset_commit", "end_txn")]


def test_offsets_whose_add_offsets_to_txn_timed_out_are_sent_before_the_commit(coordinator):
    """Kafka's client keeps the offsets of a send that ran out of time and sends them before
    EndTxn: a commit without them would commit the output but not the input's offsets."""
    group = ConsumerGroupMetadata("g", 3, "member-1", None)
    coordinator.script["add_offsets_to_txn"] = [ConcurrentTransactionsError("busy")] * 1000
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        with pytest.raises(KafkaTimeoutError, match="AddOffsetsToTxn"):
            p.send_offsets_to_transaction({("t1", 0): 5}, group, timeout=0.05)
        assert p._transaction.state is TransactionState.IN_TRANSACTION
        coordinator.script["add_offsets_to_txn"] = []
        del coordinator.calls[:]
        p.commit_transaction()
    pid = coordinator.producer_id
    assert _offset_calls(coordinator) == [
        ("add_offsets_to_txn", (TXN_ID, pid, 0, "g")),
        ("txn_offset_commit", (TXN_ID, "g", pid, 0, 3, "member-1", None, {("t1", 0): TxnOffset(5, -1, None)})),
        ("end_txn", (TXN_ID, pid, 0, True)),
    ]


def test_offsets_whose_txn_offset_commit_timed_out_are_sent_again_before_the_commit(coordinator):
    group = ConsumerGroupMetadata("g", 3, "member-1", None)
    loading = CoordinatorLoadInProgressError.code
    coordinator.script["txn_offset_commit"] = [{("t1", 1): loading}] + [{("t1", 1): loading}] * 1000
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        with pytest.raises(KafkaTimeoutError, match="TxnOffsetCommit"):
            p.send_offsets_to_transaction({("t1", 0): 5, ("t1", 1): 7}, group, timeout=0.05)
        assert p._transaction.state is TransactionState.IN_TRANSACTION
        # The commit itself runs out of time on them: resumed, it sends them again.
        del coordinator.calls[:]
        with pytest.raises(KafkaTimeoutError, match="TxnOffsetCommit"):
            p.commit_transaction(timeout=0.05)
        assert "end_txn" not in coordinator.names()
        assert p._transaction.state is TransactionState.COMMITTING
        coordinator.script["txn_offset_commit"] = []
        del coordinator.calls[:]
        p.commit_transaction()
    pid = coordinator.producer_id
    assert _offset_calls(coordinator) == [  # t1-0's offset was committed by the first call
        ("txn_offset_commit", (TXN_ID, "g", pid, 0, 3, "member-1", None, {("t1", 1): TxnOffset(7, -1, None)})),
        ("end_txn", (TXN_ID, pid, 0, True)),
    ]


def test_send_offsets_again_after_a_timeout_sends_the_kept_offsets_with_the_new(coordinator):
    coordinator.script["txn_offset_commit"] = [{("t1", 0): CoordinatorLoadInProgressError.code}] * 1000
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        with pytest.raises(KafkaTimeoutError):
            p.send_offsets_to_transaction({("t1", 0): 5, ("t1", 1): 7}, "g", timeout=0.05)
        coordinator.script["txn_offset_commit"] = []
        del coordinator.calls[:]
        p.send_offsets_to_transaction({("t1", 1): 9, ("t2", 0): 1}, "g")
        assert _offset_calls(coordinator) == [("txn_offset_commit", (
            TXN_ID, "g", coordinator.producer_id, 0, -1, "", None,
            {("t1", 0): TxnOffset(5, -1, None), ("t1", 1): TxnOffset(9, -1, None),
             ("t2", 0): TxnOffset(1, -1, None)}))]
        p.commit_transaction()
    assert coordinator.names()[-1] == "end_txn"


def _add_offsets_timed_out(p: Producer, coordinator: ScriptedCoordinator) -> None:
    """A transaction begun, and a send_offsets_to_transaction that ran out of time in
    AddOffsetsToTxn; the coordinator answers again afterwards, and its calls are forgotten."""
    coordinator.script["add_offsets_to_txn"] = [ConcurrentTransactionsError("busy")] * 1000
    p.init_transactions()
    p.begin_transaction()
    with pytest.raises(KafkaTimeoutError):
        p.send_offsets_to_transaction({("t1", 0): 5}, "g", timeout=0.05)
    coordinator.script["add_offsets_to_txn"] = []
    del coordinator.calls[:]


def test_a_prepared_transaction_holds_the_offsets_whose_send_timed_out(coordinator):
    """prepare_transaction hands the transaction to another process's EndTxn: the kept offsets
    are sent first, and the transaction is one the coordinator knows of."""
    with producer(coordinator) as p:
        _add_offsets_timed_out(p, coordinator)
        prepared = p.prepare_transaction()
        assert prepared.started and coordinator.names() == ["add_offsets_to_txn", "txn_offset_commit"]


def test_an_abort_after_add_offsets_to_txn_timed_out_bumps_the_epoch(coordinator):
    """Whether the coordinator added the group, and so began a transaction, is unknown: the
    new epoch ends one it may hold, which no EndTxn this side knows to send would."""
    with producer(coordinator) as p:
        _add_offsets_timed_out(p, coordinator)
        p.abort_transaction()
        assert coordinator.calls == [("init_producer_id", (TXN_ID, 60000, coordinator.producer_id, 0))]
        assert (p._transaction.state, p._transaction.producer_epoch) == (TransactionState.READY, 1)
        # The offsets went with the aborted transaction: the next commits none of them.
        p.begin_transaction()
        p.send("t2", b"v", partition=0)
        p.commit_transaction()
    assert "txn_offset_commit" not in coordinator.names()


def test_offsets_and_group_metadata_in_each_clients_form():
    assert offsets_of({("t", 0): 3, TopicPartition("t", 1): OffsetAndMetadata(4, "meta", 7)}) == {
        ("t", 0): TxnOffset(3, -1, None), ("t", 1): TxnOffset(4, 7, "meta")}
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    positions = [confluent_kafka.TopicPartition("t", 2, 9), confluent_kafka.TopicPartition("u", 0, 1)]
    assert offsets_of(positions) == {("t", 2): TxnOffset(9, -1, None), ("u", 0): TxnOffset(1, -1, None)}
    kafka = pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka.structs import OffsetAndMetadata as KafkaOffsetAndMetadata

    assert offsets_of({kafka.TopicPartition("t", 0): KafkaOffsetAndMetadata(5, "", -1)}) == {
        ("t", 0): TxnOffset(5, -1, "")}
    for bad in ({("t", 0): -1}, {("t", -1): 1}, {("t", 0): "1"}):
        with pytest.raises((InvalidArgumentError, InvalidArgumentTypeError)):
            offsets_of(bad)
    with pytest.raises(InvalidArgumentTypeError):
        offsets_of(5)
    assert group_metadata_of("g") == ConsumerGroupMetadata("g", -1, "", None)
    meta = ConsumerGroupMetadata("g", 2, "m", "i")
    assert group_metadata_of(meta) is meta
    with pytest.raises(InvalidArgumentTypeError):
        group_metadata_of(None)
    with pytest.raises(InvalidArgumentError):
        group_metadata_of("")


def test_kafka_pythons_consumer_group_id_keyword(coordinator):
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send_offsets_to_transaction({("t1", 0): 1}, consumer_group_id="kg")
        with pytest.raises(InvalidArgumentError, match="not both"):
            p.send_offsets_to_transaction({("t1", 0): 1}, "kg", consumer_group_id="kg")
        p.abort_transaction()
    assert ("add_offsets_to_txn", (TXN_ID, coordinator.producer_id, 0, "kg")) in coordinator.calls


def test_a_consumers_group_metadata(broker):
    with pylogq.Producer(broker=broker) as p:
        p.send("t2", b"v", partition=0).get(5)
    with pylogq.Consumer("t2", broker=broker, group_id="cg", auto_offset_reset="earliest") as c:
        assert c.consumer_group_metadata() == ConsumerGroupMetadata("cg", -1, "", None)
        deadline_polls = 50
        while not c.assignment() and deadline_polls:
            c.poll(timeout_ms=200)
            deadline_polls -= 1
        meta = c.consumer_group_metadata()
        assert meta.group_id == "cg" and meta.generation_id >= 1 and meta.member_id == c._member_id != ""
    with pylogq.Consumer(broker=broker) as c:
        with pytest.raises(IllegalStateError, match="group_id"):
            c.consumer_group_metadata()


# -- the TCP transport's requests ----------------------------------------------------------------


class RecordingRouting(TcpRequests):
    """TcpRequests whose routing records each request and answers from ``answers``."""

    timeout_s = 1.0
    _timeout_ms = 1000

    def __init__(self, answers: Dict[int, Dict[str, Any]]) -> None:
        self.answers = answers
        self.sent: List[Tuple[int, Dict[str, Any], int]] = []

    def _group_call(self, group_id, api_key, body, code_of, key_type=0):  # type: ignore[override]
        self.sent.append((api_key, dict(body), key_type))
        return self.answers[api_key]


def _round_trip(api_key: int, body: Dict[str, Any]) -> None:
    """The body encodes at every version the client speaks, and decodes to the same values
    (at the highest, whole; below it, the top-level fields that version has)."""
    low, high = CLIENT_VERSIONS[api_key]
    schema = REQUESTS[api_key]
    for version in range(low, high + 1):
        decoded = schema.decode(schema.encode(body, version), version)
        for key, value in body.items():
            if schema.has_field(key, version) and (version == high or not isinstance(value, list)):
                assert decoded[key] == value, (api_key, version, key)


def test_the_tcp_transport_builds_each_transaction_request():
    routing = RecordingRouting({
        ApiKey.INIT_PRODUCER_ID: {"error_code": 0, "producer_id": 42, "producer_epoch": 3},
        ADD_PARTITIONS_TO_TXN: {"results_by_topic_v3_and_below": [
            {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 0},
                                                   {"partition_index": 1, "partition_error_code": 51}]}]},
        ADD_OFFSETS_TO_TXN: {"error_code": 0},
        END_TXN: {"error_code": 0},
        TXN_OFFSET_COMMIT: {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 0}]}]},
    })
    assert routing.init_producer_id("tx", 9000, 42, 2) == (42, 3)
    assert routing.add_partitions_to_txn("tx", 42, 3, [("t", 0), ("t", 1)]) == {("t", 0): 0, ("t", 1): 51}
    routing.add_offsets_to_txn("tx", 42, 3, "g")
    routing.end_txn("tx", 42, 3, False)
    assert routing.txn_offset_commit("tx", "g", 42, 3, 5, "m", None, {("t", 0): TxnOffset(10, 1, "x")}) == {
        ("t", 0): 0}
    assert [(key, key_type) for key, _, key_type in routing.sent] == [
        (ApiKey.INIT_PRODUCER_ID, 1), (ADD_PARTITIONS_TO_TXN, 1), (ADD_OFFSETS_TO_TXN, 1), (END_TXN, 1),
        (TXN_OFFSET_COMMIT, 0)]  # the transactional id's coordinator, the offsets to the group's
    bodies = {key: body for key, body, _ in routing.sent}
    assert bodies[ADD_PARTITIONS_TO_TXN] == {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 42, "v3_and_below_producer_epoch": 3,
        "v3_and_below_topics": [{"name": "t", "partitions": [0, 1]}]}
    assert bodies[END_TXN] == {"transactional_id": "tx", "producer_id": 42, "producer_epoch": 3, "committed": False}
    assert bodies[TXN_OFFSET_COMMIT]["topics"] == [{"name": "t", "partitions": [
        {"partition_index": 0, "committed_offset": 10, "committed_leader_epoch": 1, "committed_metadata": "x"}]}]
    assert (bodies[TXN_OFFSET_COMMIT]["generation_id"], bodies[TXN_OFFSET_COMMIT]["member_id"]) == (5, "m")
    for key, body in bodies.items():
        _round_trip(key, body)


def test_the_tcp_transport_raises_a_coordinators_error():
    routing = RecordingRouting({END_TXN: {"error_code": ProducerFencedError.code},
                                ApiKey.INIT_PRODUCER_ID: {"error_code": ConcurrentTransactionsError.code,
                                                          "producer_id": -1, "producer_epoch": -1}})
    with pytest.raises(ProducerFencedError, match="EndTxn of transactional id 'tx'"):
        routing.end_txn("tx", 1, 0, True)
    with pytest.raises(ConcurrentTransactionsError):
        routing.init_producer_id("tx")


def test_an_unexpected_partition_error_of_add_partitions_leaves_the_transaction_abortable(broker, coordinator):
    """AddPartitionsToTxn answering a partition with a code it has no rule for (here
    INVALID_RECORD) fails that send and leaves the transaction abortable, as Kafka's client
    does (it was fatal): the abort ends it and the producer goes on."""
    with producer(coordinator) as p:
        p.init_transactions()
        p.begin_transaction()
        coordinator.script["add_partitions_to_txn"] = [{("t1", 0): InvalidRecordError.code}]
        with pytest.raises(InvalidRecordError):
            p.send("t1", b"out", partition=0).get(5)
        assert p._transaction.state is TransactionState.ABORTABLE_ERROR
        p.abort_transaction()
        assert p._transaction.state is TransactionState.READY
        p.begin_transaction()
        p.send("t2", b"next", partition=0)
        p.commit_transaction()
    assert [b.producer_epoch for b in batches_of(broker, "t2", 0)] == [0]
