"""Fetching from the closest replica (KIP-392) on a three-broker cluster in this process.

Brokers 0, 1 and 2 sit in racks a, b and c and set Kafka's RackAwareReplicaSelector; a
topic's one partition is led by broker 0 and followed by 1 and 2. At the protocol level
(BrokerConnection, raw Fetch requests): the leader names the follower in a v11+ consumer's
rack as its preferred read replica, with no records, and serves everyone else; a follower
refuses consumers below v11 and serves v11+ up to its own high watermark, fenced by leader
epoch as the leader is. With clients: pylogq's Consumer given ``client_rack`` reads every
record exactly once, in order, from the follower of its rack (the brokers' byte counters
show who served), goes back to the leader when that follower stops, when its metadata max
age passes, and when the follower answers OFFSET_OUT_OF_RANGE (without resetting its
position); confluent-kafka's consumer with ``client.rack`` reads everything from it too.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import pylogq
import pylogq.server  # noqa: F401 - the listeners the cluster serves
from pylogq import errors, records
from pylogq.client.connection import BrokerConnection
from pylogq.cluster.broker.local_cluster import Cluster
from pylogq.protocol import ApiKey

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
RACKS = {0: "rack-a", 1: "rack-b", 2: "rack-c"}
LEADER, FOLLOWER, OTHER = 0, 1, 2
SETTINGS: Dict[str, Any] = {
    "replica.selector.class": SELECTOR,
    "zookeeper.session.timeout.ms": 1000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 50,
    "replica.lag.time.max.ms": 30000,
    "auto.leader.rebalance.enable": False,
    "offsets.topic.num.partitions": 2,
    "group.initial.rebalance.delay.ms": 0,
}
TIMEOUT_S = 30.0
NOT_LEADER_OR_FOLLOWER = errors.NotLeaderOrFollowerError.code
OFFSET_OUT_OF_RANGE = errors.OffsetOutOfRangeError.code


def make_cluster(tmp_path: Any, selector: Tuple[int, ...] = (0, 1, 2), **extra: Any) -> Cluster:
    """Three served brokers in racks a, b, c; those in ``selector`` set replica.selector.class."""
    settings = {k: v for k, v in SETTINGS.items() if k != "replica.selector.class"}
    settings.update(extra)
    per_broker = {b: dict({"broker.rack": RACKS[b]}, **({"replica.selector.class": SELECTOR} if b in selector else {}))
                  for b in RACKS}
    c = Cluster(3, str(tmp_path / "cluster"), broker_config=per_broker, **settings)
    try:
        c.serve()
    except BaseException:
        c.close()
        raise
    return c


@pytest.fixture
def cluster(tmp_path: Any) -> Iterator[Cluster]:
    c = make_cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


def create(c: Cluster, name: str, replicas: Tuple[int, ...] = (LEADER, FOLLOWER, OTHER)) -> None:
    """One partition on ``replicas``, the first its leader."""
    c.brokers[0].create_topic(name, replica_assignment={0: list(replicas)})
    c.wait_for_topic(name)
    assert c.leader(name, 0) == replicas[0]


def produce(c: Cluster, topic: str, first: int, count: int, acks: int = -1) -> None:
    """Records ``v<first>`` .. ``v<first+count-1>`` to the leader, one batch each."""
    leader = c.broker(c.leader(topic, 0))
    for i in range(first, first + count):
        result = leader.produce(topic, 0, bytes(records.build_batch([b"v%d" % i])), acks=acks)
        assert result.error_code == 0 and result.base_offset == i


def replicated(c: Cluster, topic: str, end: int) -> None:
    """Wait until every running replica's high watermark is ``end``."""
    c.wait_until(lambda: all(b.hosted((topic, 0)).high_watermark == end for b in c.brokers), TIMEOUT_S,
                 "every replica of %s at high watermark %d" % (topic, end))


def connect(c: Cluster, broker_id: int) -> BrokerConnection:
    host, port = c.broker(broker_id).listener_addresses[0]
    return BrokerConnection(host, port, "fetch-from-follower-test", 10.0)


def fetch(conn: BrokerConnection, version: int, topic: str, offset: int, rack: str = "",
          epoch: int = -1) -> Dict[str, Any]:
    """One consumer Fetch of partition 0 at ``version`` (names, so at most v12); -> its partition answer."""
    assert version <= 12
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": rack,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}]}
    response = conn.request(ApiKey.FETCH, body, version=version)
    [answer] = response["responses"]
    assert answer["topic"] == topic
    [partition] = answer["partitions"]
    return partition


def offsets_in(data: Optional[bytes]) -> List[int]:
    out: List[int] = []
    for info in records.iter_batches(data or b""):
        out.extend(r.offset for r in records.RecordBatch(data, info.position))
    return out


def counter(broker: pylogq.Broker, name: str, labels: str) -> float:
    return broker.metrics().get("kafka_%s_total{%s}" % (name, labels), 0.0)


def bytes_out(broker: pylogq.Broker, topic: str) -> float:
    """Record bytes ``broker`` sent to consumers of ``topic``."""
    return counter(broker, "server_brokertopicmetrics_bytesout", 'topic="%s"' % topic)


def consumer_fetches(broker: pylogq.Broker, topic: str) -> float:
    """Partition fetches of consumers ``broker`` answered for ``topic``."""
    return counter(broker, "server_brokertopicmetrics_totalfetchrequests", 'topic="%s"' % topic)


def consume(consumer: pylogq.Consumer, count: int, timeout_s: float = TIMEOUT_S) -> List[Tuple[int, bytes]]:
    """Poll until ``count`` records came; -> their (offset, value)."""
    got: List[Tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        assert time.monotonic() < deadline, "consumed %d of %d records" % (len(got), count)
        for batch in consumer.poll(timeout_ms=200).values():
            got.extend((r.offset, r.value) for r in batch)
    return got


def expected(first: int, count: int) -> List[Tuple[int, bytes]]:
    return [(i, b"v%d" % i) for i in range(first, first + count)]


# -- the protocol --------------------------------------------------------------------------------


def test_the_leader_names_the_follower_in_a_v11_consumer_s_rack_and_serves_the_others(tmp_path: Any) -> None:
    # Broker 2 sets no replica.selector.class: as leader it serves every consumer itself.
    c = make_cluster(tmp_path, selector=(0, 1))
    try:
        create(c, "t")
        create(c, "u", replicas=(OTHER, FOLLOWER, LEADER))
        for topic in ("t", "u"):
            produce(c, topic, 0, 10)
            replicated(c, topic, 10)
        conn = connect(c, LEADER)
        try:
            for version in (11, 12):
                for offset in (0, 4, 10):
                    answer = fetch(conn, version, "t", offset, rack=RACKS[FOLLOWER])
                    assert answer["error_code"] == 0 and answer["preferred_read_replica"] == FOLLOWER
                    assert offsets_in(answer["records"]) == []
                    assert (answer["high_watermark"], answer["last_stable_offset"], answer["log_start_offset"]) \
                        == (10, 10, 0)
                # The leader's own rack, no rack, a rack no replica is in: the leader serves.
                for rack in (RACKS[LEADER], "", "rack-z"):
                    answer = fetch(conn, version, "t", 0, rack=rack)
                    assert answer["preferred_read_replica"] == -1, rack
                    assert offsets_in(answer["records"]) == list(range(10)), rack
            # Below v11 a consumer has no rack: the leader serves it.
            answer = fetch(conn, 10, "t", 0)
            assert answer["error_code"] == 0 and offsets_in(answer["records"]) == list(range(10))
        finally:
            conn.close()
        conn = connect(c, OTHER)
        try:
            answer = fetch(conn, 11, "u", 0, rack=RACKS[FOLLOWER])
            assert answer["preferred_read_replica"] == -1
            assert offsets_in(answer["records"]) == list(range(10))
        finally:
            conn.close()
    finally:
        c.close()


def test_a_follower_serves_v11_consumers_up_to_its_own_high_watermark_and_refuses_older_ones(
        cluster: Cluster) -> None:
    c = cluster
    create(c, "t")
    produce(c, "t", 0, 10)
    replicated(c, "t", 10)
    # Cut off from broker 2 (still in the ISR), the leader cannot move its high watermark past 10;
    # broker 1 copies 5 more records without learning that they are committed.
    c.cut(LEADER, OTHER)
    produce(c, "t", 10, 5, acks=1)
    follower = c.broker(FOLLOWER).hosted(("t", 0))
    assert follower is not None
    c.wait_until(lambda: follower.log_end_offset == 15, TIMEOUT_S, "the follower's copy of 15 records")
    assert follower.high_watermark == 10 and c.broker(LEADER).hosted(("t", 0)).high_watermark == 10
    conn = connect(c, FOLLOWER)
    try:
        for version in (4, 10):
            answer = fetch(conn, version, "t", 0)
            assert answer["error_code"] == NOT_LEADER_OR_FOLLOWER, version
        for version in (11, 12):
            for rack in ("", RACKS[FOLLOWER]):
                answer = fetch(conn, version, "t", 0, rack=rack)
                assert answer["error_code"] == 0 and answer["preferred_read_replica"] == -1
                assert offsets_in(answer["records"]) == list(range(10))  # not the uncommitted 10-14
                assert (answer["high_watermark"], answer["last_stable_offset"], answer["log_start_offset"]) \
                    == (10, 10, 0)
            # Past the high watermark, up to the log end: nothing yet; past the log end: out of range.
            for offset in (10, 12, 15):
                answer = fetch(conn, version, "t", offset)
                assert answer["error_code"] == 0 and offsets_in(answer["records"]) == [], offset
            assert fetch(conn, version, "t", 16)["error_code"] == OFFSET_OUT_OF_RANGE
        epoch = follower.leader_epoch
        assert fetch(conn, 11, "t", 0, epoch=epoch)["error_code"] == 0
        assert fetch(conn, 11, "t", 0, epoch=epoch + 1)["error_code"] == errors.UnknownLeaderEpochError.code
    finally:
        conn.close()
    # Once broker 2 is back the high watermark moves on, and the follower serves up to it.
    c.heal()
    replicated(c, "t", 15)
    conn = connect(c, FOLLOWER)
    try:
        assert offsets_in(fetch(conn, 11, "t", 10)["records"]) == list(range(10, 15))
    finally:
        conn.close()
    # A newer leader epoch (broker 0 stops cleanly, broker 1 leads): the old epoch is fenced on
    # the follower left, broker 2, and the new one served.
    c.stop_broker(LEADER)
    other = c.broker(OTHER).hosted(("t", 0))
    assert other is not None
    c.wait_until(lambda: c.leader("t", 0) == FOLLOWER and other.leader_id == FOLLOWER
                 and other.leader_epoch > epoch and other.high_watermark == 15, TIMEOUT_S,
                 "broker 1 leading, and broker 2 following it")
    conn = connect(c, OTHER)
    try:
        assert fetch(conn, 11, "t", 0, epoch=epoch)["error_code"] == errors.FencedLeaderEpochError.code
        assert offsets_in(fetch(conn, 11, "t", 0, epoch=other.leader_epoch)["records"]) == list(range(15))
    finally:
        conn.close()


# -- pylogq's Consumer -------------------------------------------------------------------------------


@pytest.mark.parametrize("abrupt", [False, True], ids=["stopped cleanly", "killed"])
def test_a_consumer_reads_from_the_follower_of_its_rack_and_from_the_leader_once_it_stops(
        cluster: Cluster, abrupt: bool) -> None:
    c = cluster
    create(c, "t")
    produce(c, "t", 0, 200)
    replicated(c, "t", 200)
    consumer = pylogq.Consumer(bootstrap_servers=c.bootstrap_servers, client_rack=RACKS[FOLLOWER],
                               auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consumer.assign([("t", 0)])
        assert consume(consumer, 200) == expected(0, 200)
        # The leader answered the first fetch with the follower's id and no records; the
        # follower sent every record; broker 2 (another rack) was never asked.
        assert bytes_out(c.broker(LEADER), "t") == 0 and consumer_fetches(c.broker(LEADER), "t") >= 1
        assert bytes_out(c.broker(FOLLOWER), "t") > 0
        assert consumer_fetches(c.broker(OTHER), "t") == 0
        c.stop_broker(FOLLOWER, abrupt=abrupt)
        produce(c, "t", 200, 100)
        assert consume(consumer, 100) == expected(200, 100)
        assert bytes_out(c.broker(LEADER), "t") > 0  # no replica left in rack b: the leader serves
        assert consumer_fetches(c.broker(OTHER), "t") == 0
        assert consumer.poll(timeout_ms=100) == {}  # nothing twice
    finally:
        consumer.close()


def test_a_consumer_asks_the_leader_again_once_its_metadata_max_age_passes(cluster: Cluster) -> None:
    c = cluster
    create(c, "t")
    produce(c, "t", 0, 20)
    replicated(c, "t", 20)
    consumer = pylogq.Consumer(bootstrap_servers=c.bootstrap_servers, client_rack=RACKS[FOLLOWER],
                               auto_offset_reset="earliest", metadata_max_age_ms=300, fetch_max_wait_ms=100)
    try:
        consumer.assign([("t", 0)])
        assert consume(consumer, 20) == expected(0, 20)
        asked = consumer_fetches(c.broker(LEADER), "t")
        # Each time the preference expires the leader is asked, and names the follower again.
        deadline = time.monotonic() + TIMEOUT_S
        while consumer_fetches(c.broker(LEADER), "t") < asked + 2:
            assert time.monotonic() < deadline, "the consumer never went back to the leader"
            assert consumer.poll(timeout_ms=100) == {}
        produce(c, "t", 20, 10)
        assert consume(consumer, 10) == expected(20, 10)
        assert bytes_out(c.broker(LEADER), "t") == 0
    finally:
        consumer.close()


def test_a_follower_s_offset_out_of_range_sends_the_consumer_to_the_leader_without_a_reset(tmp_path: Any) -> None:
    c = make_cluster(tmp_path, **{"replica.lag.time.max.ms": 1000})
    try:
        create(c, "t")
        produce(c, "t", 0, 10)
        replicated(c, "t", 10)
        consumer = pylogq.Consumer(bootstrap_servers=c.bootstrap_servers, client_rack=RACKS[FOLLOWER],
                                   auto_offset_reset="earliest", metadata_max_age_ms=600000)
        try:
            consumer.assign([("t", 0)])
            assert consume(consumer, 10) == expected(0, 10)
            assert bytes_out(c.broker(FOLLOWER), "t") > 0
            # The follower stops copying, falls behind and leaves the ISR; the leader commits 10
            # more without it.
            c.cut(LEADER, FOLLOWER)
            produce(c, "t", 10, 10, acks=1)
            leader = c.broker(LEADER).hosted(("t", 0))
            c.wait_until(lambda: FOLLOWER not in leader.isr and leader.high_watermark == 20, TIMEOUT_S,
                         "the ISR without broker 1, and the high watermark at 20")
            served = bytes_out(c.broker(FOLLOWER), "t")
            # The follower has only up to 10: it answers OFFSET_OUT_OF_RANGE, and the consumer,
            # still sent there, asks the leader rather than resetting to the earliest offset.
            consumer.seek(("t", 0), 15)
            assert consume(consumer, 5) == expected(15, 5)
            assert counter(c.broker(FOLLOWER), "network_requestmetrics_errors",
                           'error="OFFSET_OUT_OF_RANGE",request="FetchConsumer"') >= 1
            assert bytes_out(c.broker(FOLLOWER), "t") == served
            assert bytes_out(c.broker(LEADER), "t") > 0
        finally:
            consumer.close()
    finally:
        c.close()


# -- confluent-kafka (librdkafka, which fetches from followers as KIP-392 has it) ------------------


def test_confluent_kafka_with_client_rack_reads_everything_from_the_follower(cluster: Cluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    c = cluster
    create(c, "t")
    produce(c, "t", 0, 300)
    replicated(c, "t", 300)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": c.bootstrap_servers, "group.id": "kip-392", "client.rack": RACKS[FOLLOWER],
        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([confluent_kafka.TopicPartition("t", 0, 0)])
        got: List[Tuple[int, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 300:
            assert time.monotonic() < deadline, "librdkafka consumed %d of 300 records" % len(got)
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.offset(), message.value()))
    finally:
        consumer.close()
    assert got == expected(0, 300)
    assert bytes_out(c.broker(FOLLOWER), "t") > 0
    assert consumer_fetches(c.broker(OTHER), "t") == 0
