"""Exactly once across failures: confluent-kafka's consume-transform-produce loop against three
broker processes and real ZooKeeper.

A loop reads ``in`` in a consumer group (read_committed), writes one ``out`` record per input
record in a transaction, and commits its input offsets in the same transaction
(``send_offsets_to_transaction``). Meanwhile, in turn: the leader of an ``out`` partition,
the loop's transaction coordinator and its group coordinator are killed with SIGKILL and
started again, and the transaction coordinator is frozen with SIGSTOP past its ZooKeeper
session and thawed. A failed transaction is aborted and the consumer rewound to its group's
committed offsets, as confluent-kafka's exactly-once example does. At the end, ``out`` read
with read_committed holds each input record's result exactly once, and the group's
committed offsets are the ends of ``in``.
"""

from __future__ import annotations

import collections
import logging
import sys
import threading
import time
import traceback
import uuid
from typing import Any, Callable, Iterator, List

import pytest

from pylogq.cluster.coordinator.group.offsets_schema import partition_for_group
from pylogq.cluster.coordinator.transaction.log_schema import partition_for_transactional_id

from .._txn import confluent_values
from .._zookeeper import ZooKeeperServer
from ._processes import ProcessCluster

#: Broker processes and ZooKeeper: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

N = 600
PARTITIONS = 2
DEADLINE_S = 240.0
TXN_ID = "ctp-loop"
GROUP = "ctp-group"
SESSION_MS = 2000


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    if not zookeeper.running:
        zookeeper.start()
    connect = zookeeper.fresh_chroot("pylogq-txn-%s" % uuid.uuid4().hex[:8])
    c = ProcessCluster(tmp_path_factory.mktemp("txn-cluster"), connect, 3,
                       {"min.insync.replicas": 2, "zookeeper.session.timeout.ms": SESSION_MS})
    try:
        c.start_all()
        yield c
    finally:
        try:
            c.close()
        finally:
            zookeeper.delete_chroot(connect)


def _create(cluster: ProcessCluster, *topics: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for name, future in admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in topics]).items():
        future.result(30)
    for t in topics:
        cluster.wait_until(lambda t=t: cluster.full_isr(t, PARTITIONS), "%s's ISRs" % t)


class _Lines(logging.Handler):
    """A logging handler that keeps the messages in a bounded deque."""

    def __init__(self, lines: "collections.deque[str]") -> None:
        super().__init__()
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _client_log(name: str, lines: "collections.deque[str]") -> logging.Logger:
    """A logger for a librdkafka client's debug lines, kept in ``lines`` only."""
    logger = logging.getLogger(name)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.handlers[:] = [_Lines(lines)]
    return logger


class Loop:
    """The consume-transform-produce loop, in a thread: until every input record's result is
    committed, or :meth:`stop`."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.committed_txns = 0
        self.aborted_txns = 0
        self.errors: List[str] = []
        self.failure: List[BaseException] = []
        self._stop = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._guarded, name="ctp-loop", daemon=True)
        #: The consumer's group protocol and the producer's transactions and produce requests,
        #: as librdkafka logs them (the last lines of each, for a failure's message).
        self.consumer_lines: "collections.deque[str]" = collections.deque(maxlen=60)
        self.producer_lines: "collections.deque[str]" = collections.deque(maxlen=5000)
        self._consumer_log = _client_log("ctp-loop.consumer", self.consumer_lines)
        self._producer_log = _client_log("ctp-loop.producer", self.producer_lines)

    def start(self) -> "Loop":
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(60)

    def where(self) -> str:
        """The loop thread's stack now, and the consumer's last group protocol lines (for a
        failure's message)."""
        frame = sys._current_frames().get(self.thread.ident or -1)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(not running)"
        return "%s\n--- consumer ---\n%s\n--- producer ---\n%s" % (stack, "\n".join(self.consumer_lines),
                                                                 "\n".join(list(self.producer_lines)[-80:]))


    def _guarded(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.failure.append(exc)
        finally:
            self.done.set()

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                             "session.timeout.ms": 10000, "debug": "cgrp"}, logger=self._consumer_log)
        # connections.max.idle.ms: librdkafka (2.16 and before) asks a group coordinator it found
        # once again only when one of its broker connections goes up or down; after a broker left
        # the cluster's metadata (killed, or frozen past its session) it may still be the one
        # send_offsets_to_transaction waits for, past its timeout (librdkafka issues 5456 and
        # 5511; Kafka's brokers leave metadata the same way). Idle connections closing make it
        # ask again, as an application would configure it (docs/transactions.md).
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": TXN_ID,
                             "transaction.timeout.ms": 30000, "linger.ms": 5, "connections.max.idle.ms": 5000,
                             "debug": "eos,msg"}, logger=self._producer_log)
        try:
            producer.init_transactions(60)
            consumer.subscribe(["in"])
            while not self._stop.is_set():
                records = [m for m in consumer.consume(50, 0.5) if not m.error()]
                if not records:
                    if self._all_consumed(consumer, TopicPartition, KafkaException):
                        return
                    continue
                try:
                    producer.begin_transaction()
                    for m in records:
                        producer.produce("out", key=m.key(), value=b"out-" + m.value(), partition=m.partition())
                    positions = consumer.position(consumer.assignment())
                    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
                    producer.commit_transaction(60)
                    self.committed_txns += 1
                except KafkaException as exc:
                    error = exc.args[0]
                    self.errors.append(str(error))
                    if error.fatal():
                        raise
                    if error.retriable() and not error.txn_requires_abort():
                        self._retry_commit(producer, KafkaException)
                        continue
                    producer.abort_transaction(60)
                    self.aborted_txns += 1
                    self._rewind(consumer)
        finally:
            consumer.close()
            producer.flush(10)

    @staticmethod
    def _retry_commit(producer: Any, kafka_exception: type) -> None:
        """A retriable failure of the commit: the commit is called again until it is decided."""
        deadline = time.monotonic() + 60
        while True:
            try:
                producer.commit_transaction(60)
                return
            except kafka_exception as exc:  # type: ignore[misc]
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise

    @staticmethod
    def _rewind(consumer: Any) -> None:
        """Back to the group's committed offsets (what the aborted transaction did not commit)."""
        assignment = consumer.assignment()
        for tp in consumer.committed(assignment, 30):
            if tp.offset >= 0:
                consumer.seek(tp)
            else:
                tp.offset = 0
                consumer.seek(tp)

    @staticmethod
    def _all_consumed(consumer: Any, topic_partition: Callable[..., Any], kafka_exception: type) -> bool:
        """Whether the group committed the end of all N input records (written in chunks); not
        yet while its coordinator moves (a retriable error: asked again at the next idle poll)."""
        try:
            committed = consumer.committed([topic_partition("in", p) for p in range(PARTITIONS)], 30)
        except kafka_exception as exc:  # type: ignore[misc]
            if exc.args[0].retriable():
                return False
            raise
        return all(tp.offset == N // PARTITIONS for tp in committed)


def _fill(bootstrap: str, first: int, count: int) -> None:
    """Input records ``first`` .. ``first + count - 1``, spread over the partitions."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(first, first + count):
        p.produce("in", key=b"%d" % i, value=b"%d" % i, partition=i % PARTITIONS)
    assert p.flush(60) == 0


def _leader(cluster: ProcessCluster, topic: str, partition: int) -> int:
    state = cluster.state(topic, partition)
    assert state is not None, "%s-%d has no state" % (topic, partition)
    return state[0]


def _progress(cluster: ProcessCluster, loop: Loop, beyond: int, what: str) -> None:
    deadline = time.monotonic() + 90
    while loop.committed_txns <= beyond:
        assert not loop.failure, loop.failure
        if time.monotonic() >= deadline:
            cluster.dump_threads()  # into each broker's log: what a stuck broker waits for
            (cluster.base / "producer-debug.log").write_text("\n".join(loop.producer_lines))
            raise AssertionError("no transaction committed after %s: %d committed, %d aborted, errors %s; the loop "
                                 "is at\n%s\n%s" % (what, loop.committed_txns, loop.aborted_txns, loop.errors[-5:],
                                                    loop.where(), cluster.logs()))
        if loop.done.wait(0.05):
            return


def test_consume_transform_produce_is_exactly_once_through_kills_and_a_freeze(cluster: ProcessCluster) -> None:
    _create(cluster, "in", "out")
    chunk = N // 5  # the input grows after each fault: the loop cannot finish before the last
    _fill(cluster.bootstrap, 0, chunk)
    loop = Loop(cluster.bootstrap).start()
    try:
        _progress(cluster, loop, 0, "the start")
        txn_partition = partition_for_transactional_id(TXN_ID, 4)
        group_partition = partition_for_group(GROUP, 4)
        faults = [
            ("the leader of out-0", lambda: _leader(cluster, "out", 0), "kill"),
            ("the transaction coordinator", lambda: _leader(cluster, "__transaction_state", txn_partition), "kill"),
            ("the group coordinator", lambda: _leader(cluster, "__consumer_offsets", group_partition), "kill"),
            ("the transaction coordinator", lambda: _leader(cluster, "__transaction_state", txn_partition), "freeze"),
        ]
        for n, (what, broker_of, how) in enumerate(faults, 1):
            assert not loop.done.is_set() and not loop.failure, loop.failure
            victim = broker_of()
            if how == "kill":
                cluster.kill(victim)
                cluster.start(victim)
            else:
                cluster.freeze(victim)
                # past its session: its leaderships move
                cluster.wait_until(lambda: _leader(cluster, "__transaction_state", txn_partition) != victim,
                                   "a new transaction coordinator", 60)
                cluster.thaw(victim)
            before = loop.committed_txns
            _fill(cluster.bootstrap, n * chunk, chunk)
            _progress(cluster, loop, before, "%s was %s" % (what, "killed" if how == "kill" else "frozen"))
        assert loop.done.wait(DEADLINE_S), "the loop did not finish: %d committed, %d aborted, errors %s" % (
            loop.committed_txns, loop.aborted_txns, loop.errors[-5:])
        assert not loop.failure, loop.failure
    finally:
        loop.stop()
    out = confluent_values(cluster.bootstrap, "out", PARTITIONS, "read_committed", 60)
    print("committed %d transactions, aborted %d; errors: %s" % (loop.committed_txns, loop.aborted_txns,
                                                                 sorted(set(loop.errors))))
    expected = sorted(b"out-%d" % i for i in range(N))
    duplicates = len(out) - len(set(out))
    assert duplicates == 0, "%d duplicates in out" % duplicates
    assert sorted(out) == expected
    # The group's committed offsets are the ends of its input (they committed with the output).
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition("in", p) for p in range(PARTITIONS)], 30)
        assert sorted(tp.offset for tp in committed) == [N // PARTITIONS] * PARTITIONS
    finally:
        c.close()
