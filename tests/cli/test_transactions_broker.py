"""``pylogq transactions`` against served brokers, as an operator runs it: a broker's own
transaction coordinator listing and describing librdkafka's transactions; a hanging
transaction (a transactional batch no coordinator added to a transaction) found beside a live
one its coordinator still runs, holding read_committed readers at it, then aborted (by its
start offset, or by producer id and epochs, a stale epoch refused) so that they move past it;
and the replica a partition's producer state is asked of (``describe-producers --broker-id``
on a follower)."""

from __future__ import annotations

import io
import time
import uuid
from typing import Any, Dict, List

import pytest

import pylogq
from pylogq import records
from pylogq.cli import transactions
from pylogq.cli.clients import Clients
from pylogq.cli.main import run
from pylogq.client.consumer import Consumer, TopicPartition
from pylogq.client.producer import Producer
from pylogq.testing import TEST_DEFAULTS

from .._cluster_ops import eventually, topic_with_records
from .conftest import Result

confluent_kafka = pytest.importorskip("confluent_kafka", reason="librdkafka's transactional producer is the client")

TIMEOUT_S = 30.0
#: A producer id the coordinator has not handed out (it counts up from 0).
HANGING_PID = 1 << 40


def _cli(bootstrap: str, *argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    status = run(["transactions", *argv], clients=Clients(bootstrap_servers=bootstrap), stdout=out, stderr=err)
    return Result(status, out.getvalue(), err.getvalue())


def test_describe_producers_on_a_follower(pylogq_cluster: pylogq.Cluster) -> None:
    ids = sorted(b.broker_id for b in pylogq_cluster.brokers)
    topic = topic_with_records(pylogq_cluster, {0: ids[:2]}, 0, prefix="producers")
    leader, follower = ids[0], ids[1]
    eventually(lambda: pylogq_cluster.leader(topic, 0) == leader, "%d to lead" % leader)
    with Producer(bootstrap_servers=pylogq_cluster.bootstrap_servers, enable_idempotence=True, acks="all") as p:
        for i in range(3):
            p.send(topic, b"v%d" % i, partition=0)
        p.flush()
    bootstrap = pylogq_cluster.bootstrap_servers

    def rows(*argv: str) -> List[List[str]]:
        found = _cli(bootstrap, "describe-producers", "--topic", topic, "--partition", "0", *argv)
        assert found.status == 0 and found.err == "", found
        return [[cell.strip() for cell in line.split("\t")[:-1]] for line in found.out.splitlines()[1:]]

    [on_leader] = rows()
    assert on_leader[1:4] + on_leader[5:6] == ["0", "-1", "2", "None"]
    # The follower's producer state is rebuilt from the records it copies.
    assert eventually(lambda: rows("--broker-id", str(follower)) == [on_leader], "the follower's state")
    missing = _cli(bootstrap, "describe-producers", "--topic", topic, "--partition", "0", "--broker-id", str(ids[2]))
    assert missing.status == 1 and missing.out == ""
    assert missing.err.startswith("Error: Failed to describe producers for partition %s-0 on broker %d: "
                                  "NOT_LEADER_OR_FOLLOWER" % (topic, ids[2]))


# -- a broker's own transaction coordinator, over TCP -----------------------------------------------------


def table_rows(out: str) -> List[List[str]]:
    """A Kafka table's rows (the header left out), each cell stripped of its padding."""
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in out.splitlines()[1:]]


def transactional(bootstrap: str, transactional_id: str) -> Any:
    """librdkafka's transactional producer, its transactions initialised."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                         "transaction.timeout.ms": 600000, "linger.ms": 0})
    producer.init_transactions(TIMEOUT_S)
    return producer


def committed_values(bootstrap: str, topic: str, count: int) -> List[bytes]:
    """What a read_committed consumer reads of ``topic``-0 from the start, until ``count`` records or
    TIMEOUT_S."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-%s" % uuid.uuid4().hex,
                                         "isolation.level": "read_committed", "enable.auto.commit": False,
                                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        values: List[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def hanging_batch(producer_id: int, epoch: int, timestamp: int) -> bytes:
    """A transactional batch whose producer's coordinator never added its partition to a
    transaction: what a lost AddPartitionsToTxn, or a coordinator's lost state, leaves behind."""
    return bytes(records.build_batch([b"hanging"], timestamps=timestamp, producer_id=producer_id,
                                     producer_epoch=epoch, base_sequence=0, is_transactional=True))


def last_stable_offset(bootstrap: str, topic: str) -> int:
    with Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed") as consumer:
        tp = TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp])


def test_list_and_describe_a_producers_transaction(pylogq_broker: pylogq.Broker, pylogq_bootstrap: str) -> None:
    broker_id = str(pylogq_broker.broker_id)
    pylogq_broker.create_topic("orders", 2)
    producer = transactional(pylogq_bootstrap, "tx-orders")
    producer.begin_transaction()
    producer.produce("orders", b"a", partition=0)
    producer.produce("orders", b"b", partition=1)
    producer.flush(TIMEOUT_S)
    [state] = table_rows(_cli(pylogq_bootstrap, "describe-producers", "--topic", "orders", "--partition", "0").out)
    pid, epoch = state[0], state[1]

    listed = _cli(pylogq_bootstrap, "list")
    assert listed.status == 0 and listed.err == "", listed
    assert listed.out.split("\n")[0] == "\t".join(transactions.LIST_HEADERS) + "\t"
    assert table_rows(listed.out) == [["tx-orders", broker_id, pid, "Ongoing"]]
    assert table_rows(_cli(pylogq_bootstrap, "list", "--duration-filter", "3600000").out) == []

    described = _cli(pylogq_bootstrap, "describe", "--transactional-id", "tx-orders")
    assert described.status == 0 and described.err == "", described
    [row] = table_rows(described.out)
    assert row[:6] + row[8:] == [broker_id, "tx-orders", pid, epoch, "Ongoing", "600000", "orders-0,orders-1"]
    assert 0 <= int(row[7]) and int(row[6]) + int(row[7]) <= int(time.time() * 1000) + 1

    producer.commit_transaction(TIMEOUT_S)
    assert eventually(lambda: table_rows(_cli(pylogq_bootstrap, "describe", "--transactional-id",
                                              "tx-orders").out)[0][4:] == ["CompleteCommit", "600000", "None",
                                                                          "None", ""], "the commit to complete")
    missing = _cli(pylogq_bootstrap, "describe", "--transactional-id", "nobody")
    assert missing.status == 1 and missing.out == ""
    assert missing.err.startswith("Error: Failed to describe transaction state of transactional-id `nobody`: "
                                  "TRANSACTIONAL_ID_NOT_FOUND: "), missing


def test_find_hanging_and_abort(pylogq_broker: pylogq.Broker, pylogq_bootstrap: str) -> None:
    broker_id = str(pylogq_broker.broker_id)
    pylogq_broker.create_topic("payments", 1)
    # A transaction its coordinator runs is not hanging, however long it has been open.
    live = transactional(pylogq_bootstrap, "tx-live")
    live.begin_transaction()
    live.produce("payments", b"live", partition=0)
    live.flush(TIMEOUT_S)
    part = pylogq_broker.partition("payments", 0)
    start = part.log_end_offset
    written = int(time.time() * 1000) - 150000
    part.append(hanging_batch(HANGING_PID, 0, written))
    with Producer(bootstrap_servers=pylogq_bootstrap) as plain:
        plain.send("payments", b"after", partition=0).get(TIMEOUT_S)
    assert last_stable_offset(pylogq_bootstrap, "payments") == 0  # the live transaction's first offset

    search = ("find-hanging", "--broker-id", broker_id, "--max-transaction-timeout", "0")
    found = eventually(lambda: _cli(pylogq_bootstrap, *search), "the live transaction's producer to be older than 0 ms")
    assert found.status == 0 and found.err == "", found
    assert table_rows(found.out) == [["payments", "0", str(HANGING_PID), "0", "-1", str(start), str(written), "2"]]
    by_topic = _cli(pylogq_bootstrap, "find-hanging", "--topic", "payments", "--partition", "0",
                    "--max-transaction-timeout", "1")
    assert table_rows(by_topic.out) == table_rows(found.out)
    assert table_rows(_cli(pylogq_bootstrap, "find-hanging", "--topic", "payments").out) == []  # 15 minutes

    # The live transaction commits, and read_committed readers still stop at the hanging one.
    live.commit_transaction(TIMEOUT_S)
    assert eventually(lambda: last_stable_offset(pylogq_bootstrap, "payments") == start, "the LSO at the hang")
    aborted = _cli(pylogq_bootstrap, "abort", "--topic", "payments", "--partition", "0", "--start-offset", str(start))
    assert aborted == Result(0, "", "")
    assert last_stable_offset(pylogq_bootstrap, "payments") == part.log_end_offset
    assert committed_values(pylogq_bootstrap, "payments", 2) == [b"live", b"after"]
    assert table_rows(_cli(pylogq_bootstrap, *search).out) == []
    states = table_rows(_cli(pylogq_bootstrap, "describe-producers", "--topic", "payments", "--partition", "0").out)
    assert [s[5] for s in states if s[0] == str(HANGING_PID)] == ["None"]
    again = _cli(pylogq_bootstrap, "abort", "--topic", "payments", "--partition", "0", "--start-offset", str(start))
    assert again == Result(1, "", "Error: Could not find any open transactions starting at offset %d on partition "
                                  "payments-0\n" % start)


def test_abort_by_producer_and_a_stale_epoch(pylogq_broker: pylogq.Broker, pylogq_bootstrap: str) -> None:
    pylogq_broker.create_topic("ledger", 1)
    part = pylogq_broker.partition("ledger", 0)
    part.append(hanging_batch(HANGING_PID, 5, int(time.time() * 1000)))
    spec = ("abort", "--topic", "ledger", "--partition", "0", "--producer-id", str(HANGING_PID),
            "--coordinator-epoch", "-1")
    stale = _cli(pylogq_bootstrap, *spec, "--producer-epoch", "4")
    assert stale.status == 1 and stale.out == ""
    assert stale.err.startswith(
        "Error: Failed to abort transaction AbortTransactionSpec(topicPartition=ledger-0, producerId=%d, "
        "producerEpoch=4, coordinatorEpoch=0): INVALID_PRODUCER_EPOCH: " % HANGING_PID), stale
    assert last_stable_offset(pylogq_bootstrap, "ledger") == 0
    assert _cli(pylogq_bootstrap, *spec, "--producer-epoch", "5") == Result(0, "", "")
    assert last_stable_offset(pylogq_bootstrap, "ledger") == 2  # the batch and its marker


@pytest.fixture
def pylogq_broker_config() -> Dict[str, Any]:
    return dict(TEST_DEFAULTS, **{"transaction.state.log.num.partitions": 4})


def test_a_cluster_lists_each_id_at_its_coordinator(pylogq_cluster: pylogq.Cluster) -> None:
    bootstrap = pylogq_cluster.bootstrap_servers
    ids = sorted(b.broker_id for b in pylogq_cluster.brokers)
    topic = topic_with_records(pylogq_cluster, {0: ids}, 0, prefix="txn")
    producers = []
    for name in ("tx-a", "tx-b", "tx-c", "tx-d"):
        producer = transactional(bootstrap, name)
        producer.begin_transaction()
        producer.produce(topic, name.encode(), partition=0)
        producer.flush(TIMEOUT_S)
        producers.append(producer)
    listed = _cli(bootstrap, "list")
    assert listed.status == 0 and listed.err == "", listed
    rows = table_rows(listed.out)
    assert sorted(r[0] for r in rows) == ["tx-a", "tx-b", "tx-c", "tx-d"]
    assert [r[3] for r in rows] == ["Ongoing"] * 4
    for transactional_id, coordinator, pid, _state in rows:
        [described] = table_rows(_cli(bootstrap, "describe", "--transactional-id", transactional_id).out)
        assert described[:3] == [coordinator, transactional_id, pid]
        assert described[8] == "%s-0" % topic
    # Every replica's open transactions are known to their coordinators: none hang.
    for broker_id in ids:
        found = _cli(bootstrap, "find-hanging", "--broker-id", str(broker_id), "--max-transaction-timeout", "0")
        assert found == Result(0, "\t".join(transactions.HANGING_HEADERS) + "\t\n", ""), found
    for producer in producers:
        producer.abort_transaction(TIMEOUT_S)
