"""Transactions across a three-broker cluster (in this process, served over the Kafka protocol,
the brokers talking to one another over it too): a transaction whose partitions are led by
every broker commits and aborts with its markers written through each leader; the transaction
coordinator's broker stopped abruptly, or frozen past its store session, hands its ids to the
next leader of their ``__transaction_state`` partition, which loads them and completes them,
and the markers of a coordinator that was replaced are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

import pytest

import pylogq
from pylogq import errors
from pylogq.cluster.contract import TxnMarker
from pylogq.cluster.coordinator.transaction.coordinator import TRANSACTION_STATE_TOPIC

from .._txn import confluent_values

#: The coordinator and its cluster are the same Python in both passes: the compiled pass only
#: (tests/conftest.py); the twins their records pass through are tested in both by the rest of the suite.
pytestmark = pytest.mark.compiled_pass

TIMEOUT_S = 30.0
SETTINGS = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1,
            "zookeeper.session.timeout.ms": 1500, "replica.lag.time.max.ms": 3000, "min.insync.replicas": 2,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Tuple[pylogq.Cluster, str]]:
    with pylogq.Cluster(3, str(tmp_path / "cluster"), network=True, **SETTINGS) as c:
        bootstrap = c.serve()
        c.create_topic("t", 3, 3)
        c.wait_for_topic("t")
        yield c, bootstrap


def _producer(bootstrap: str, txn_id: str) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                     "transaction.timeout.ms": 20000})


def _read(bootstrap: str, isolation: str, partitions: int = 3) -> List[bytes]:
    return sorted(confluent_values(bootstrap, "t", partitions, isolation, TIMEOUT_S))


def _coordinator(c: pylogq.Cluster) -> int:
    return c.leader(TRANSACTION_STATE_TOPIC, 0)


def _state(c: pylogq.Cluster, txn_id: str) -> Optional[str]:
    leader = _coordinator(c)
    broker = c.running(leader) if leader >= 0 else None
    if broker is None or c.frozen(leader):
        return None
    d = broker.describe_transactions([txn_id])[0]
    return d.state if d.error_code == 0 else None


def test_a_transaction_over_every_leader_commits_and_aborts(cluster: Tuple[pylogq.Cluster, str]) -> None:
    c, bootstrap = cluster
    assert len({c.leader("t", p) for p in range(3)}) == 3  # a leader per broker
    p = _producer(bootstrap, "spread")
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for i in range(9):
        p.produce("t", value=b"c%d" % i, partition=i % 3)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(6):
        p.produce("t", value=b"a%d" % i, partition=i % 3)
    p.flush(TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    committed = sorted(b"c%d" % i for i in range(9))
    assert _read(bootstrap, "read_committed") == committed
    assert _read(bootstrap, "read_uncommitted") == sorted(committed + [b"a%d" % i for i in range(6)])
    # Every replica holds the markers: the followers' last stable offsets are their high watermarks.
    for broker in c.brokers:
        for q in range(3):
            part = broker._partitions[("t", q)]
            c.wait_until(lambda part=part: part.last_stable_offset == part.high_watermark == part.log_end_offset,
                         TIMEOUT_S, "t-%d's markers on broker %d" % (q, broker.broker_id))


def test_the_coordinators_broker_stopped_its_successor_completes_the_transaction(
        cluster: Tuple[pylogq.Cluster, str]) -> None:
    """The producer's commit is retried at the next coordinator, which loaded the transaction
    as it was stored (Ongoing), and commits it."""
    c, bootstrap = cluster
    p = _producer(bootstrap, "moving")
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for i in range(6):
        p.produce("t", value=b"m%d" % i, partition=i % 3)
    p.flush(TIMEOUT_S)
    old = _coordinator(c)
    c.stop_broker(old, abrupt=True)
    c.wait_until(lambda: _coordinator(c) not in (-1, old), TIMEOUT_S, "a new transaction coordinator")
    c.wait_until(lambda: _state(c, "moving") == "Ongoing", TIMEOUT_S, "the transaction loaded")
    p.commit_transaction(TIMEOUT_S)
    c.wait_until(lambda: _state(c, "moving") == "CompleteCommit", TIMEOUT_S, "the commit completed")
    c.start_broker(old)
    c.wait_for_topic("t")
    assert _read(bootstrap, "read_committed") == sorted(b"m%d" % i for i in range(6))


def test_a_frozen_coordinator_is_replaced_and_its_stale_markers_are_refused(
        cluster: Tuple[pylogq.Cluster, str]) -> None:
    """The coordinator freezes with a transaction open; its successor, in a newer coordinator
    epoch, loads it and aborts it (the EndTxn a client would send it); thawed, the old one
    steps down, and a marker in its old coordinator epoch is refused by the partitions. (The
    in-process freeze stops a broker's store session and inter-broker calls, not its client
    listener: the producer is left alone meanwhile. tests/cluster/test_transactions_processes.py
    freezes broker processes with SIGSTOP.)"""
    c, bootstrap = cluster
    p = _producer(bootstrap, "frozen")
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for i in range(3):
        p.produce("t", value=b"f%d" % i, partition=i)
    p.flush(TIMEOUT_S)
    old = _coordinator(c)
    old_epoch = c.broker(old).txn_coordinator.owned_partitions()[0]
    opened = c.broker(old).describe_transactions(["frozen"])[0]
    c.freeze_broker(old)
    try:
        c.wait_until(lambda: _coordinator(c) not in (-1, old), TIMEOUT_S, "a new transaction coordinator")
        c.wait_until(lambda: _state(c, "frozen") == "Ongoing", TIMEOUT_S, "the transaction loaded")
        new = _coordinator(c)
        c.broker(new).end_txn("frozen", opened.producer_id, opened.producer_epoch, False)
        c.wait_until(lambda: _state(c, "frozen") == "CompleteAbort", TIMEOUT_S, "the abort completed")
    finally:
        c.thaw_broker(old)
    assert c.broker(new).txn_coordinator.owned_partitions()[0] > old_epoch
    c.wait_until(lambda: c.broker(old).txn_coordinator.owned_partitions() == {}, TIMEOUT_S,
                 "the old coordinator to step down")
    for q in range(3):
        leader = c.broker(c.leader("t", q))
        stale = TxnMarker(opened.producer_id, opened.producer_epoch, True, old_epoch, (("t", q),))
        codes = leader.write_txn_markers([stale])
        assert codes[opened.producer_id][("t", q)] == errors.TransactionCoordinatorFencedError.code
    successor = _producer(bootstrap, "frozen")
    successor.init_transactions(TIMEOUT_S)
    successor.begin_transaction()
    successor.produce("t", value=b"after", partition=0)
    successor.commit_transaction(TIMEOUT_S)
    assert _read(bootstrap, "read_committed") == [b"after"]
