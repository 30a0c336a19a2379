"""Transactions end to end: pylogq's transactional Producer against the broker's transaction
coordinator, in process (``broker=``) and over TCP (``bootstrap_servers=``), read back by
pylogq's, kafka-python's and confluent-kafka's read_committed consumers.

Markers are written after EndTxn is answered, so a committed transaction becomes readable
a moment after ``commit_transaction()`` returns: the readers wait, with a deadline, for
what must appear, and an aborted transaction is shown invisible by a committed one
written after it, which a read_committed reader can only reach past the aborted records.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pytest

import pylogq
from pylogq.client.consumer_coordinator import OffsetAndMetadata
from pylogq.cluster.contract import TopicPartition
from pylogq.errors import IllegalStateError, InvalidProducerEpochError, ProducerFencedError

DEADLINE_S = 20.0

@pytest.fixture
def broker(tmp_path):
    # One __transaction_state partition, not Kafka's 50: made at the first transactional call.
    with pylogq.Broker(str(tmp_path / "data"), group_initial_rebalance_delay_ms=0,
                       transaction_state_log_num_partitions=1) as b:
        b.create_topic("out", partitions=2)
        b.create_topic("audit", partitions=1)
        yield b


@pytest.fixture(params=["embedded", "tcp"])
def clients(request, broker) -> Dict[str, Any]:
    """The keyword arguments that put a pylogq client on ``broker``: in process or over TCP."""
    if request.param == "embedded":
        return {"broker": broker}
    host, port = broker.serve()
    return {"bootstrap_servers": "%s:%d" % (host, port)}


def wait_for(condition: Callable[[], Any], what: str, timeout: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting for %s" % what
        time.sleep(0.01)


def read(clients: Dict[str, Any], partitions: Sequence[Tuple[str, int]], isolation_level: str,
         until: Callable[[Dict[Tuple[str, int], List[bytes]]], bool]) -> Dict[Tuple[str, int], List[bytes]]:
    """Each partition's values from the start, read by a pylogq consumer until ``until`` holds."""
    got: Dict[Tuple[str, int], List[bytes]] = {tp: [] for tp in partitions}
    with pylogq.Consumer(**clients, isolation_level=isolation_level, auto_offset_reset="earliest",
                         enable_auto_commit=False) as consumer:
        consumer.assign([TopicPartition(*tp) for tp in partitions])
        deadline = time.monotonic() + DEADLINE_S
        while not until(got):
            assert time.monotonic() < deadline, "timed out reading %s: got %r" % (isolation_level, got)
            for tp, recs in consumer.poll(timeout_ms=100).items():
                got[(tp.topic, tp.partition)].extend(r.value for r in recs)
    return got


def transactional(clients: Dict[str, Any], transactional_id: str, **configs: Any) -> pylogq.Producer:
    producer = pylogq.Producer(**clients, transactional_id=transactional_id, **configs)
    producer.init_transactions()
    return producer


def test_a_commit_is_read_whole_and_an_abort_never(clients):
    with transactional(clients, "commit-abort") as producer:
        producer.begin_transaction()
        aborted = [producer.send("out", b"aborted-%d" % i, partition=0) for i in range(3)]
        producer.flush()
        assert [f.get(5).offset for f in aborted] == [0, 1, 2]
        producer.abort_transaction()
        producer.begin_transaction()
        for i in range(3):
            producer.send("out", b"committed-%d" % i, partition=0)
        producer.commit_transaction()

    committed = [b"committed-%d" % i for i in range(3)]
    got = read(clients, [("out", 0)], "read_committed", lambda g: len(g[("out", 0)]) >= 3)
    assert got[("out", 0)] == committed
    everything = read(clients, [("out", 0)], "read_uncommitted", lambda g: len(g[("out", 0)]) >= 6)
    assert everything[("out", 0)] == [b"aborted-%d" % i for i in range(3)] + committed


def test_a_transaction_across_partitions_and_topics_commits_everywhere(clients):
    targets = [("out", 0), ("out", 1), ("audit", 0)]
    with transactional(clients, "spread") as producer:
        producer.begin_transaction()
        for topic, partition in targets:
            producer.send(topic, b"doomed", partition=partition)
        producer.abort_transaction()
        producer.begin_transaction()
        for n in range(2):
            for topic, partition in targets:
                producer.send(topic, b"%s-%d-%d" % (topic.encode(), partition, n), partition=partition)
        producer.commit_transaction()

    got = read(clients, targets, "read_committed", lambda g: all(len(v) >= 2 for v in g.values()))
    assert got == {(t, p): [b"%s-%d-%d" % (t.encode(), p, n) for n in range(2)] for t, p in targets}


def test_group_offsets_sent_to_a_transaction_are_committed_only_with_it(clients, broker):
    broker.create_topic("in", partitions=1)
    with pylogq.Producer(**clients) as plain:
        for i in range(4):
            plain.send("in", b"in-%d" % i, partition=0)
    tp = TopicPartition("in", 0)
    with pylogq.Consumer("in", **clients, group_id="etl", isolation_level="read_committed",
                         auto_offset_reset="earliest", enable_auto_commit=False) as consumer, \
            transactional(clients, "etl-producer") as producer:
        consumed: List[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(consumed) < 4:
            assert time.monotonic() < deadline
            for recs in consumer.poll(timeout_ms=100).values():
                consumed.extend(recs)
        group = consumer.consumer_group_metadata()
        assert group.generation_id >= 1 and group.member_id

        producer.begin_transaction()
        producer.send("out", b"from-in-0-1", partition=0)
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(2, "", -1)}, group)
        producer.abort_transaction()

        producer.begin_transaction()
        producer.send("out", b"from-in-0-3", partition=0)
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(4, "done", -1)}, group)
        producer.commit_transaction()

        assert wait_for(lambda: consumer.committed(tp) == 4, "the transaction's offset")
        assert consumer.committed(tp, metadata=True).metadata == "done"
    got = read(clients, [("out", 0)], "read_committed", lambda g: len(g[("out", 0)]) >= 1)
    assert got[("out", 0)] == [b"from-in-0-3"]


def test_offsets_of_an_aborted_transaction_are_never_committed(clients, broker):
    broker.create_topic("in", partitions=1)
    tp = TopicPartition("in", 0)
    with transactional(clients, "offsets-abort") as producer:
        producer.begin_transaction()
        producer.send_offsets_to_transaction({tp: 7}, "lonely")
        producer.abort_transaction()
        # A committed transaction of the same producer after it: once its offset shows, the
        # aborted one's has been decided too.
        producer.begin_transaction()
        producer.send_offsets_to_transaction({("out", 0): 1}, "lonely")
        producer.commit_transaction()
    with pylogq.Consumer(**clients, group_id="lonely", enable_auto_commit=False) as consumer:
        wait_for(lambda: consumer.committed(TopicPartition("out", 0)) == 1, "the committed transaction's offset")
        assert consumer.committed(tp) is None


def test_a_zombie_is_fenced_and_nothing_it_wrote_commits(clients):
    zombie = transactional(clients, "fenced-id")
    try:
        zombie.begin_transaction()
        zombie_writes = [zombie.send("out", b"zombie-%d" % i, partition=1) for i in range(2)]
        zombie.flush()
        assert all(f.get(5).offset >= 0 for f in zombie_writes)

        with transactional(clients, "fenced-id") as successor:  # fences the zombie, aborts its transaction
            assert successor._transaction.producer_epoch > zombie._transaction.producer_epoch
            with pytest.raises(ProducerFencedError):
                zombie.commit_transaction()
            with pytest.raises(ProducerFencedError):
                zombie.send("out", b"zombie-late", partition=1)
            with pytest.raises(ProducerFencedError):
                zombie.begin_transaction()
            successor.begin_transaction()
            successor.send("out", b"successor", partition=1)
            successor.commit_transaction()
    finally:
        zombie.close()
    got = read(clients, [("out", 1)], "read_committed", lambda g: len(g[("out", 1)]) >= 1)
    assert got[("out", 1)] == [b"successor"]


def test_a_new_producer_aborts_the_transaction_its_predecessor_left_open(clients, broker):
    first = transactional(clients, "crashed")
    first.begin_transaction()
    first.send("audit", b"left-open", partition=0)
    first.flush()
    first.close(timeout=0)  # forced: gone without ending its transaction, as in a crash
    assert [d.state for d in broker.describe_transactions(["crashed"])] == ["Ongoing"]
    # Its successor's init_transactions() aborts it, so what comes next is readable.
    with transactional(clients, "crashed") as second:
        second.begin_transaction()
        second.send("audit", b"after", partition=0)
        second.commit_transaction()
    got = read(clients, [("audit", 0)], "read_committed", lambda g: len(g[("audit", 0)]) >= 1)
    assert got[("audit", 0)] == [b"after"]


def test_close_aborts_the_transaction_left_open(clients, broker):
    """A graceful close ends the producer's open transaction (as Kafka's does): read_committed
    readers move past it at once rather than after the transaction's timeout."""
    with transactional(clients, "closed-open") as producer:
        producer.begin_transaction()
        producer.send("audit", b"left-open", partition=0)
        producer.flush()
    wait_for(lambda: [(d.error_code, d.state) for d in broker.describe_transactions(["closed-open"])]
             == [(0, "CompleteAbort")], "the abort's markers")
    audit = broker.partition("audit", 0)
    assert audit.last_stable_offset == audit.high_watermark == 2  # the record and its ABORT marker
    got = read(clients, [("audit", 0)], "read_uncommitted", lambda g: len(g[("audit", 0)]) >= 1)
    assert got[("audit", 0)] == [b"left-open"]


def test_a_prepared_transaction_is_committed_by_another_client(clients):
    """prepare_transaction() flushes and hands out the open transaction; its producer closes without
    ending it, and EndTxn from another client with the handed-out id and epoch commits it."""
    from pylogq.client.transport import connect

    with transactional(clients, "prepared") as producer:
        producer.begin_transaction()
        for i in range(3):
            producer.send("out", b"prepared-%d" % i, partition=1)
        prepared = producer.prepare_transaction()
    assert (prepared.transactional_id, prepared.started) == ("prepared", True) and prepared.producer_id >= 0
    transport = connect(**clients)
    try:
        transport.end_txn(prepared.transactional_id, prepared.producer_id, prepared.producer_epoch, True)
    finally:
        transport.close()
    got = read(clients, [("out", 1)], "read_committed", lambda g: len(g[("out", 1)]) >= 3)
    assert got[("out", 1)] == [b"prepared-%d" % i for i in range(3)]
    with transactional(clients, "prepared-nothing") as producer:
        with pytest.raises(IllegalStateError, match="not in a transaction"):
            producer.prepare_transaction()
        producer.begin_transaction()
        assert not producer.prepare_transaction().started  # nothing sent: no transaction to end


# -- other clients read what pylogq's transactional producer wrote --------------------------------


def _write_mixed(clients: Dict[str, Any], topic: str) -> List[bytes]:
    """An aborted transaction, a committed one, another aborted one and a committed one:
    -> the committed values, in order."""
    committed: List[bytes] = []
    with transactional(clients, "interop-" + topic) as producer:
        for n in range(4):
            producer.begin_transaction()
            values = [b"%s-%d-%d" % (b"commit" if n % 2 else b"abort", n, i) for i in range(3)]
            for value in values:
                producer.send(topic, value, partition=0)
            if n % 2:
                producer.commit_transaction()
                committed.extend(values)
            else:
                producer.flush()
                producer.abort_transaction()
    return committed


@pytest.fixture
def bootstrap(broker) -> str:
    host, port = broker.serve()
    return "%s:%d" % (host, port)


def test_kafka_pythons_read_committed_consumer_sees_exactly_the_committed_records(broker, bootstrap):
    kafka = pytest.importorskip("kafka", reason="kafka-python is not installed")
    broker.create_topic("kp", partitions=1)
    committed = _write_mixed({"bootstrap_servers": bootstrap}, "kp")
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                   auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consumer.assign([kafka.TopicPartition("kp", 0)])
        got: List[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < len(committed):
            assert time.monotonic() < deadline, got
            for recs in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in recs)
        assert got == committed
        uncommitted = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_uncommitted",
                                          auto_offset_reset="earliest", enable_auto_commit=False)
        try:
            uncommitted.assign([kafka.TopicPartition("kp", 0)])
            seen: List[bytes] = []
            while len(seen) < 12:
                assert time.monotonic() < deadline, seen
                for recs in uncommitted.poll(timeout_ms=200).values():
                    seen.extend(r.value for r in recs)
            assert len(seen) == 12 and [v for v in seen if v.startswith(b"commit")] == committed
        finally:
            uncommitted.close()
    finally:
        consumer.close()


def test_confluent_kafkas_read_committed_consumer_sees_exactly_the_committed_records(broker, bootstrap):
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    broker.create_topic("ck", partitions=1)
    committed = _write_mixed({"bootstrap_servers": bootstrap}, "ck")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-reader",
                                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([confluent_kafka.TopicPartition("ck", 0, 0)])
        got: List[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        at_end = False
        while not (at_end and len(got) >= len(committed)):
            assert time.monotonic() < deadline, got
            message: Optional[Any] = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                at_end = message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF
                continue
            got.append(message.value())
        assert got == committed
    finally:
        consumer.close()


def test_bulk_and_concurrent_sends_join_the_transaction(clients):
    """send_batch's whole batches and several threads' sends belong to the transaction too."""
    per_thread = 300
    with transactional(clients, "bulk", linger_ms=1) as producer:
        producer.begin_transaction()
        results = producer.send_batch("out", [b"bulk-%d" % i for i in range(500)], partition=0)
        assert sum(r.record_count for r in results) == 500

        def send(n: int) -> None:
            for i in range(per_thread):
                producer.send("out", b"thread-%d-%d" % (n, i), partition=1)

        threads = [threading.Thread(target=send, args=(n,)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send_batch("out", [b"aborted-bulk"] * 100, partition=0)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send("out", b"last", partition=0)
        producer.commit_transaction()

    got = read(clients, [("out", 0), ("out", 1)], "read_committed",
               lambda g: len(g[("out", 0)]) >= 501 and len(g[("out", 1)]) >= 3 * per_thread)
    assert got[("out", 0)] == [b"bulk-%d" % i for i in range(500)] + [b"last"]
    assert sorted(got[("out", 1)]) == sorted(b"thread-%d-%d" % (n, i) for n in range(3) for i in range(per_thread))
    for n in range(3):  # each thread's records in its order
        mine = [v for v in got[("out", 1)] if v.startswith(b"thread-%d-" % n)]
        assert mine == [b"thread-%d-%d" % (n, i) for i in range(per_thread)]


def test_a_zombie_with_records_still_to_send_is_fenced_too(clients):
    zombie = transactional(clients, "fenced-late", linger_ms=60000)
    try:
        zombie.begin_transaction()
        zombie.send("out", b"early", partition=0)
        zombie.flush()
        late = zombie.send("out", b"late", partition=0)  # waits for its linger
        with transactional(clients, "fenced-late") as successor:
            # Its Produce carries the old epoch: Kafka's client calls that abortable, and the
            # abort's EndTxn is the coordinator's word that the producer is fenced.
            with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
                zombie.commit_transaction()
            assert late.failed()
            with pytest.raises(ProducerFencedError):
                zombie.abort_transaction()
            with pytest.raises(ProducerFencedError):
                zombie.send("out", b"later", partition=0)
            successor.begin_transaction()
            successor.send("out", b"successor", partition=0)
            successor.commit_transaction()
    finally:
        zombie.close()
    got = read(clients, [("out", 0)], "read_committed", lambda g: len(g[("out", 0)]) >= 1)
    assert got[("out", 0)] == [b"successor"]


def test_over_tcp_a_transaction_finds_its_coordinator_in_a_cluster(tmp_path):
    """Three brokers: the producer looks its transaction coordinator up (FindCoordinator, key
    type 1) and writes to partitions led by every broker in one transaction."""
    settings = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1,
                "min.insync.replicas": 2}
    with pylogq.Cluster(3, str(tmp_path / "cluster"), network=True, **settings) as cluster:
        bootstrap = cluster.serve()
        cluster.create_topic("t", 3, 3)
        cluster.wait_for_topic("t")
        clients = {"bootstrap_servers": bootstrap}
        with transactional(clients, "clustered") as producer:
            producer.begin_transaction()
            for p in range(3):
                producer.send("t", b"aborted-%d" % p, partition=p)
            producer.abort_transaction()
            producer.begin_transaction()
            for p in range(3):
                producer.send("t", b"committed-%d" % p, partition=p)
            producer.commit_transaction()
            transport = producer._transport
            coordinator = transport._coordinators[(1, "clustered")]
            assert coordinator == cluster.leader("__transaction_state", 0)
        assert len({cluster.leader("t", p) for p in range(3)}) == 3  # every broker led a partition of it
        got = read(clients, [("t", p) for p in range(3)], "read_committed",
                   lambda g: all(len(v) >= 1 for v in g.values()))
        assert got == {("t", p): [b"committed-%d" % p] for p in range(3)}
