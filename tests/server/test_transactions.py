"""Transactions end to end on a served broker, with the real clients' transactional producers:
confluent-kafka (librdkafka), kafka-python and aiokafka begin, commit and abort against
pylogq's transaction coordinator; read_committed consumers see the committed records and
never the aborted ones, read_uncommitted consumers see both; a second producer of one
transactional id fences the first, whose open transaction is aborted; a producer killed
mid-transaction has it aborted after its timeout, and a read_committed consumer stuck at its
last stable offset moves on; the coordinator's state outlives a restart."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

import pylogq
from pylogq.client.consumer import Consumer, TopicPartition

from .._txn import confluent_values
from ._support import wait_for

#: The coordinator is the same Python in both passes: the compiled pass only (tests/conftest.py);
#: the twins the records pass through are tested in both by the rest of the suite.
pytestmark = pytest.mark.compiled_pass

TIMEOUT_S = 20.0
FAST_ABORTS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 100}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[pylogq.Broker, str]]:
    with pylogq.Broker(str(tmp_path / "data"), **FAST_ABORTS) as broker:
        host, port = broker.serve()
        broker.create_topic("t", 2)
        yield broker, "%s:%d" % (host, port)


def _confluent_values(bootstrap: str, isolation: str, topic: str = "t", partitions: int = 2) -> List[bytes]:
    return sorted(confluent_values(bootstrap, topic, partitions, isolation, TIMEOUT_S))


def _read_to_ends(consumer: Any, tps: List[Any]) -> List[bytes]:
    """Poll a kafka-python-shaped consumer (pylogq's or kafka-python's), assigned ``tps`` from
    their start, until its position reaches each partition's end; -> the values, sorted."""
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    values: List[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            values.extend(r.value for r in batch)
    return sorted(values)


def _pylogq_values(bootstrap: str, isolation: str, topic: str = "t", partitions: int = 2) -> List[bytes]:
    consumer = Consumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    try:
        return _read_to_ends(consumer, [TopicPartition(topic, p) for p in range(partitions)])
    finally:
        consumer.close()


def _kafka_python_values(bootstrap: str, isolation: str, topic: str = "t", partitions: int = 2) -> List[bytes]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    try:
        return _read_to_ends(consumer, [KTopicPartition(topic, p) for p in range(partitions)])
    finally:
        consumer.close()


def _aiokafka_values(bootstrap: str, isolation: str, topic: str = "t", partitions: int = 2) -> List[bytes]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATopicPartition

    async def read() -> List[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            tps = [ATopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            ends = await consumer.end_offsets(tps)
            values: List[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            while any([await consumer.position(tp) < ends[tp] for tp in tps]) and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    values.extend(r.value for r in batch)
            return sorted(values)
        finally:
            await consumer.stop()

    return asyncio.run(read())


READERS = {"confluent": _confluent_values, "pylogq": _pylogq_values, "kafka-python": _kafka_python_values,
           "aiokafka": _aiokafka_values}


def _confluent_producer(bootstrap: str, txn_id: str, **extra: object):  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    config = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    config.update(extra)
    return Producer(config)


def _committed_and_aborted(bootstrap: str) -> Tuple[List[bytes], List[bytes]]:
    """A confluent producer commits c0-c9, aborts a0-a4 (sent before the abort), commits last."""
    p = _confluent_producer(bootstrap, "writer")
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    committed = [b"c%d" % i for i in range(10)]
    for i, v in enumerate(committed):
        p.produce("t", value=v, partition=i % 2)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    aborted = [b"a%d" % i for i in range(5)]
    for i, v in enumerate(aborted):
        p.produce("t", value=v, partition=i % 2)
    p.flush(TIMEOUT_S)  # written to the partitions, then aborted
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce("t", value=b"last", partition=0)
    p.commit_transaction(TIMEOUT_S)
    return committed + [b"last"], aborted


@pytest.mark.parametrize("reader", sorted(READERS))
def test_aborted_transactions_are_never_visible_to_read_committed(served: Tuple[pylogq.Broker, str],
                                                                  reader: str) -> None:
    broker, bootstrap = served
    committed, aborted = _committed_and_aborted(bootstrap)
    read = READERS[reader]
    assert read(bootstrap, "read_committed") == sorted(committed)
    assert read(bootstrap, "read_uncommitted") == sorted(committed + aborted)
    described = broker.describe_transactions(["writer"])[0]
    assert (described.error_code, described.state) == (0, "CompleteCommit")


def test_kafka_python_and_aiokafka_transactional_producers(served: Tuple[pylogq.Broker, str]) -> None:
    """Two more clients' TransactionManagers against the coordinator: commit and abort."""
    from kafka import KafkaProducer

    _, bootstrap = served
    kp = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp")
    try:
        kp.init_transactions()
        kp.begin_transaction()
        kp.send("t", b"kp-commit", partition=0)
        kp.commit_transaction()
        kp.begin_transaction()
        kp.send("t", b"kp-abort", partition=1)
        kp.flush()
        kp.abort_transaction()
    finally:
        kp.close()

    async def aiokafka_txns() -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="ak")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait("t", b"ak-commit", partition=1)
            await producer.begin_transaction()
            await producer.send_and_wait("t", b"ak-abort", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(aiokafka_txns())
    assert _confluent_values(bootstrap, "read_committed") == [b"ak-commit", b"kp-commit"]
    assert _confluent_values(bootstrap, "read_uncommitted") == [b"ak-abort", b"ak-commit", b"kp-abort", b"kp-commit"]


def test_a_new_producer_fences_the_zombie_whose_transaction_never_commits(served: Tuple[pylogq.Broker, str]
                                                                          ) -> None:
    from confluent_kafka import KafkaException

    broker, bootstrap = served
    zombie = _confluent_producer(bootstrap, "shared")
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    zombie.produce("t", value=b"zombie", partition=0)
    zombie.flush(TIMEOUT_S)
    successor = _confluent_producer(bootstrap, "shared")
    successor.init_transactions(TIMEOUT_S)  # aborts the zombie's transaction, with a newer epoch
    successor.begin_transaction()
    successor.produce("t", value=b"successor", partition=0)
    successor.commit_transaction(TIMEOUT_S)
    zombie.produce("t", value=b"zombie-late", partition=1)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT_S)
    assert raised.value.args[0].fatal() or raised.value.args[0].txn_requires_abort()
    assert _confluent_values(bootstrap, "read_committed") == [b"successor"]
    # The zombie's epoch is the one fenced: the partition holds the successor's epoch now.
    producers = broker.describe_producers("t", 0)
    assert max(p.producer_epoch for p in producers) >= 1


CHILD = textwrap.dedent("""
    import sys
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "doomed",
                  "transaction.timeout.ms": 1500})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce("t", value=b"hanging", partition=0)
    p.flush(20)
    print("written", flush=True)
    sys.stdin.read()  # killed here, its transaction open
""")


def test_a_killed_producers_transaction_is_aborted_after_its_timeout(served: Tuple[pylogq.Broker, str]) -> None:
    """The hanging transaction holds the last stable offset back: a read_committed consumer
    waits at it; once the coordinator aborts it (transaction.timeout.ms), the consumer moves on."""
    broker, bootstrap = served
    child = subprocess.Popen([sys.executable, "-c", CHILD, bootstrap], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"written"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(TIMEOUT_S)
        part = broker.leader_partition("t", 0)
        broker.produce("t", 0, pylogq.records.build_batch([b"after"]))
        assert part.last_stable_offset == 0  # stuck at the open transaction
        assert wait_for(lambda: broker.describe_transactions(["doomed"])[0].state == "CompleteAbort", TIMEOUT_S)
        assert wait_for(lambda: part.last_stable_offset == part.high_watermark, TIMEOUT_S)
        assert _confluent_values(bootstrap, "read_committed") == [b"after"]
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def test_transactions_outlive_a_restart(tmp_path: Path) -> None:
    """The coordinator's state is read back from __transaction_state: an id keeps its producer
    id, and a transaction left open is aborted by the next producer of the id."""
    path = str(tmp_path / "data")
    with pylogq.Broker(path, **FAST_ABORTS) as broker:
        host, port = broker.serve()
        broker.create_topic("t", 2)
        bootstrap = "%s:%d" % (host, port)
        p = _confluent_producer(bootstrap, "lasting")
        p.init_transactions(TIMEOUT_S)
        p.begin_transaction()
        p.produce("t", value=b"done", partition=0)
        p.commit_transaction(TIMEOUT_S)
        p.begin_transaction()
        p.produce("t", value=b"left-open", partition=1)
        p.flush(TIMEOUT_S)
        before = broker.describe_transactions(["lasting"])[0]
        assert before.state == "Ongoing"
        del p
    with pylogq.Broker(path, **FAST_ABORTS) as broker:
        host, port = broker.serve()
        bootstrap = "%s:%d" % (host, port)
        after = broker.describe_transactions(["lasting"])[0]
        assert (after.state, after.producer_id, after.partitions) == ("Ongoing", before.producer_id, (("t", 1),))
        p = _confluent_producer(bootstrap, "lasting")
        p.init_transactions(TIMEOUT_S)
        p.begin_transaction()
        p.produce("t", value=b"next", partition=1)
        p.commit_transaction(TIMEOUT_S)
        assert _confluent_values(bootstrap, "read_committed") == [b"done", b"next"]
        assert broker.describe_transactions(["lasting"])[0].producer_epoch == before.producer_epoch + 2
