"""The clients' ``metrics()``: kafka-python's groups and names, with the values the clients really saw.

Each client test runs twice, against a broker in this process and over TCP to
the same broker served on a loopback port, and checks the metrics against what
the broker's log holds (batch sizes, record sizes, compression) or what the
test measured itself (wall time around the requests). The sampled windows are
checked on their own, with explicit times, against Kafka's definitions.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import pylogq
from pylogq import Consumer, Producer
from pylogq.client.consumer import TopicPartition
from pylogq.client.metrics import Metric, MetricName, Metrics, NetworkSensors
from pylogq.cluster.broker.in_process import InProcessTransport
from pylogq.errors import BufferExhaustedError, NotLeaderOrFollowerError
from pylogq.records import HEADER_SIZE, build_batch, codecs, iter_batches

DEADLINE_S = 30.0
BIG = 1 << 24


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[pylogq.Broker]:
    with pylogq.Broker(str(tmp_path / "data"), group_initial_rebalance_delay_ms=0,
                       group_min_session_timeout_ms=100) as b:
        yield b


@pytest.fixture(params=["in_process", "tcp"])
def via(request: Any, broker: pylogq.Broker) -> Dict[str, Any]:
    """How a client reaches ``broker``: ``broker=`` itself, or ``bootstrap_servers=`` of it served."""
    if request.param == "tcp":
        host, port = broker.serve("127.0.0.1", 0)
        return {"bootstrap_servers": "%s:%d" % (host, port)}
    return {"broker": broker}


def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
    """A zigzag varint at ``pos``: -> (value, bytes it took)."""
    value = shift = n = 0
    while True:
        byte = buf[pos + n]
        n += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), n


def log_batches(broker: pylogq.Broker, topic: str, partition: int) -> List[bytes]:
    """The batches of a partition, as the broker stores them."""
    result = broker.fetch([(topic, partition, 0, BIG)], 0, 1, BIG, "read_uncommitted")[(topic, partition)]
    data = bytes(result.records.read()) if result.records is not None else b""
    return [data[h.position:h.position + h.size] for h in iter_batches(data)]


def record_sizes(batch: bytes) -> List[int]:
    """Each record's encoded size, its length varint included, in an uncompressed v2 batch."""
    sizes = []
    pos = HEADER_SIZE
    while pos < len(batch):
        length, n = _varint(batch, pos)
        sizes.append(n + length)
        pos += n + length
    return sizes


def close_to(value: float, expected: float) -> bool:
    return math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-9)


# -- the sampled windows -------------------------------------------------------------------


def test_a_sensor_reads_as_kafkas_stats() -> None:
    metrics = Metrics(samples=2, window_ms=10_000)
    sensor = metrics.sensor("s")
    assert (sensor.avg(0.0), sensor.max(0.0)) == (0.0, float("-inf"))
    assert sensor.rate(0.0) == 0.0
    sensor.record(4, now=100.0)
    sensor.record(8, now=103.0)
    # Less than one full window seen: the rate divides by the elapsed time plus one window.
    assert (sensor.avg(105.0), sensor.max(105.0)) == (6.0, 8.0)
    assert close_to(sensor.rate(105.0), 12 / (5.0 + 10.0))
    assert close_to(sensor.count_rate(105.0), 2 / 15.0)
    sensor.record(2, now=111.0)  # a new window: the second sample
    assert (sensor.avg(112.0), sensor.max(112.0)) == (14 / 3, 8.0)
    assert close_to(sensor.rate(112.0), 14 / 12.0)  # one full window passed: no padding
    sensor.record(1, now=122.0)  # the third window takes the first sample's place
    assert (sensor.avg(123.0), sensor.max(123.0)) == (1.5, 2.0)
    assert close_to(sensor.rate(123.0), 3 / 12.0)  # since the oldest kept sample began (111)
    # Totals count everything; samples older than both windows together are dropped when read.
    assert (sensor.total, sensor.count, sensor.last) == (15.0, 4, 1.0)
    assert (sensor.avg(150.0), sensor.max(150.0), sensor.rate(150.0)) == (0.0, float("-inf"), 0.0)


def test_parents_and_the_snapshot_shapes() -> None:
    metrics = Metrics()
    network = NetworkSensors(metrics, "producer")
    node = network.node("3")
    assert node is not None and network.node("3") is node
    started = time.monotonic()
    node.request_sent(100, started)
    node.response_read(0, 40, started, 7)
    m = metrics.snapshot()
    for group in ("producer-metrics", "producer-node-metrics.node-3"):
        assert m[group]["request-total"] == 1 and m[group]["outgoing-byte-total"] == 100
        assert m[group]["incoming-byte-total"] == 40 and m[group]["throttle-time-max"] == 7
    raw = metrics.snapshot(raw=True)
    key = MetricName("request-size-max", "producer-node-metrics.node-3")
    metric = raw[key]
    assert isinstance(metric, Metric) and metric.value() == 100.0
    assert metric.metric_name.description  # kafka-python's description


def test_metrics_disabled_keep_nothing(broker: pylogq.Broker) -> None:
    broker.create_topic("t", 1)
    with Producer(broker=broker, metrics_enabled=False) as p:
        p.send("t", b"v").get(timeout=DEADLINE_S)
        assert p.metrics() == {}
    with Consumer("t", broker=broker, metrics_enabled=False, auto_offset_reset="earliest") as c:
        assert len(c.poll(timeout_ms=DEADLINE_S * 1000)) == 1
        assert c.metrics() == {}


# -- the producer --------------------------------------------------------------------------------


def test_producer_counts_batches_records_and_requests(broker: pylogq.Broker, via: Dict[str, Any]) -> None:
    broker.create_topic("a", 2)
    broker.create_topic("b", 1)
    sizes = [20 + (i * 37) % 300 for i in range(1500)]
    started = time.monotonic()
    with Producer(batch_size=8192, linger_ms=1000, **via) as p:
        futures = [p.send("a", b"x" * n) for n in sizes]
        futures += [p.send("b", b"y" * 50, key=b"k%d" % i) for i in range(200)]
        p.flush()
        wall_ms = (time.monotonic() - started) * 1000.0
        for f in futures:
            f.get(timeout=DEADLINE_S)
        m = p.metrics()
    batches = log_batches(broker, "a", 0) + log_batches(broker, "a", 1) + log_batches(broker, "b", 0)
    a_bytes = sum(len(b) for b in batches[:-len(log_batches(broker, "b", 0))])
    lengths = [len(b) for b in batches]
    assert len(batches) > 3  # batch_size split them
    g = m["producer-metrics"]
    assert g["record-send-total"] == 1700
    assert g["byte-total"] == sum(lengths)
    assert close_to(g["batch-size-avg"], sum(lengths) / len(lengths))
    assert g["batch-size-max"] == max(lengths)
    assert close_to(g["records-per-request-avg"], 1700 / len(batches))
    assert g["record-size-max"] == max(max(record_sizes(b)) for b in batches)
    assert close_to(g["record-size-avg"], sum(max(record_sizes(b)) for b in batches) / len(batches))
    assert g["compression-rate-avg"] == 1.0
    assert 0 < g["record-send-rate"] <= 1700 / 30.0  # per second, over at least one 30 s window
    assert 0 <= g["record-queue-time-avg"] <= g["record-queue-time-max"] <= wall_ms
    assert g["record-error-total"] == 0 and g["record-retry-total"] == 0
    assert g["buffer-total-bytes"] == 33554432 and g["buffer-available-bytes"] == 33554432
    # The requests: at least one produce per batch, each answered within the time measured around them.
    assert g["request-total"] >= len(batches) and g["response-total"] >= len(batches)
    assert 0 < g["request-latency-avg"] <= g["request-latency-max"] <= wall_ms
    topic_a, topic_b = m["producer-topic-metrics.a"], m["producer-topic-metrics.b"]
    assert (topic_a["record-send-total"], topic_b["record-send-total"]) == (1500, 200)
    assert topic_a["byte-total"] == a_bytes and topic_a["compression-rate"] == 1.0
    nodes = {k: v for k, v in m.items() if k.startswith("producer-node-metrics.")}
    if "bootstrap_servers" in via:
        assert set(nodes) == {"producer-node-metrics.node-bootstrap-0",
                              "producer-node-metrics.node-%d" % broker.broker_id}
        # Each request counts once for its broker and once in all.
        for name in ("request-total", "response-total", "outgoing-byte-total", "incoming-byte-total"):
            assert sum(n[name] for n in nodes.values()) == g[name]
        assert g["outgoing-byte-total"] > sum(lengths)  # the batches, framed in Produce requests
        assert max(n["request-latency-max"] for n in nodes.values()) == g["request-latency-max"]
        assert g["produce-throttle-time-max"] == 0.0  # the broker answered, with no throttling
    else:
        assert nodes == {} and g["outgoing-byte-total"] == 0  # no wire in process
        assert g["produce-throttle-time-max"] == float("-inf")


def test_compression_rate_is_bytes_sent_over_bytes_built(broker: pylogq.Broker, via: Dict[str, Any]) -> None:
    broker.create_topic("z", 1)
    with Producer(compression_type="gzip", batch_size=4096, linger_ms=1000, **via) as p:
        for i in range(600):
            p.send("z", b"%06d" % i * 10)
        p.flush()
        m = p.metrics()
    ratios = []
    for batch in log_batches(broker, "z", 0):
        built = HEADER_SIZE + len(codecs.decompress(codecs.GZIP, batch[HEADER_SIZE:]))
        ratios.append(len(batch) / built)
    assert len(ratios) > 1 and max(ratios) < 0.5
    assert close_to(m["producer-metrics"]["compression-rate-avg"], sum(ratios) / len(ratios))
    assert close_to(m["producer-topic-metrics.z"]["compression-rate"], sum(ratios) / len(ratios))


def test_a_refused_batch_counts_as_errors(broker: pylogq.Broker, via: Dict[str, Any]) -> None:
    broker.create_topic("small", 1, config={"max.message.bytes": 200})
    broker.create_topic("fine", 1)
    with Producer(acks=1, linger_ms=1000, **via) as p:
        refused = [p.send("small", b"x" * 100) for _ in range(5)]  # one batch of ~600 bytes
        accepted = p.send("fine", b"y")
        p.flush()
        for f in refused:
            assert f.failed()
        assert accepted.succeeded()
        m = p.metrics()
    assert m["producer-metrics"]["record-error-total"] == 5
    assert m["producer-metrics"]["record-send-total"] == 6  # the refused batch was sent, once
    assert m["producer-topic-metrics.small"]["record-error-total"] == 5
    assert m["producer-topic-metrics.small"]["record-error-rate"] > 0
    assert m["producer-topic-metrics.fine"]["record-error-total"] == 0


class _FailingOnce(InProcessTransport):
    """Refuses the first produce, retriably, before appending."""

    def __init__(self, broker: pylogq.Broker) -> None:
        super().__init__(broker)
        self.failed = False

    def produce(self, topic: str, partition: int, records: Any, acks: int) -> Any:
        if not self.failed:
            self.failed = True
            raise NotLeaderOrFollowerError("not yet")
        return super().produce(topic, partition, records, acks)


def test_a_retried_batch_counts_as_retries_and_is_sent_twice(broker: pylogq.Broker) -> None:
    broker.create_topic("r", 1)
    with Producer(broker=_FailingOnce(broker), retry_backoff_ms=1, linger_ms=1000) as p:
        futures = [p.send("r", b"%d" % i) for i in range(10)]
        p.flush()
        assert [f.get(timeout=DEADLINE_S).offset for f in futures] == list(range(10))
        m = p.metrics()
    assert m["producer-metrics"]["record-retry-total"] == 10
    assert m["producer-topic-metrics.r"]["record-retry-total"] == 10
    assert m["producer-metrics"]["record-send-total"] == 20  # each send counts, as in Kafka
    assert m["producer-metrics"]["record-error-total"] == 0


def test_buffer_wait_is_measured(broker: pylogq.Broker) -> None:
    """A send that has to wait for buffer memory shows in bufferpool-wait-ratio."""
    broker.create_topic("w", 1)
    gate = threading.Event()

    class Held(InProcessTransport):
        def produce(self, topic: str, partition: int, records: Any, acks: int) -> Any:
            assert gate.wait(DEADLINE_S)
            return super().produce(topic, partition, records, acks)

    with Producer(broker=Held(broker), buffer_memory=20000, batch_size=16384, linger_ms=0, max_block_ms=50) as p:
        first = p.send("w", b"x" * 15000)
        assert p.metrics()["producer-metrics"]["buffer-available-bytes"] == 20000 - 16384
        assert p.metrics()["producer-metrics"]["bufferpool-wait-ratio"] == 0
        with pytest.raises(BufferExhaustedError):
            p.send("w", b"y" * 15000)  # the first batch holds 16 KiB until the broker answers
        gate.set()
        first.get(timeout=DEADLINE_S)
        m = p.metrics()["producer-metrics"]
    assert 0.05 / (DEADLINE_S + 30) < m["bufferpool-wait-ratio"] < 1
    assert m["buffer-available-bytes"] == 20000


# -- the consumer ---------------------------------------------------------------------------------


def test_consumer_fetch_metrics_and_lag(broker: pylogq.Broker, via: Dict[str, Any]) -> None:
    broker.create_topic("t", 2)
    for start in range(0, 60, 20):
        broker.produce("t", 0, build_batch([b"v%03d" % i for i in range(start, start + 20)]))
    broker.produce("t", 1, build_batch([b"w"] * 5))
    region = sum(len(b) for b in log_batches(broker, "t", 0))
    tp0 = TopicPartition("t", 0)
    started = time.monotonic()
    with Consumer(auto_offset_reset="earliest", max_poll_records=7, **via) as c:
        c.assign([tp0])
        got: List[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while not got and time.monotonic() < deadline:
            got = c.poll(timeout_ms=1000).get(tp0, [])
        assert len(got) == 7
        # One fetch took all 60 records; 7 are returned, 53 are left behind the high watermark.
        m = c.metrics()["consumer-fetch-manager-metrics"]
        assert c.highwater(tp0) == 60 and c.position(tp0) == 7
        assert m["t-0.records-lag"] == 60 - 7 == m["records-lag-max"]
        assert m["records-consumed-total"] == 7
        assert m["fetch-total"] == 1 and m["fetch-rate"] > 0
        assert m["fetch-size-max"] == region and m["records-per-request-avg"] == 60
        while len(got) < 60 and time.monotonic() < deadline:
            got += c.poll(timeout_ms=1000).get(tp0, [])
        wall_ms = (time.monotonic() - started) * 1000.0
        assert [r.value for r in got] == [b"v%03d" % i for i in range(60)]
        all_metrics = c.metrics()
    m = all_metrics["consumer-fetch-manager-metrics"]
    assert m["records-consumed-total"] == 60
    assert m["bytes-consumed-total"] == region  # the fetch's bytes, shared out among the polls
    assert m["t-0.records-lag"] == 0 and m["records-lag-max"] == 53
    assert m["t-0.records-lag-max"] == 53
    assert close_to(m["t-0.records-lag-avg"], sum(53 - 7 * i if 53 - 7 * i > 0 else 0 for i in range(9)) / 9)
    assert m["fetch-total"] == 1  # buffered records are returned without fetching again
    assert 0 < m["fetch-latency-avg"] <= m["fetch-latency-max"] <= wall_ms
    assert 0 < m["records-consumed-rate"] <= 60 / 30.0
    per_topic = all_metrics["consumer-fetch-manager-metrics.t"]
    assert per_topic["records-consumed-total"] == 60 and per_topic["fetch-size-max"] == region
    network = all_metrics["consumer-metrics"]
    assert network["request-total"] >= 2 and 0 < network["request-latency-max"] <= wall_ms
    nodes = [k for k in all_metrics if k.startswith("consumer-node-metrics.")]
    if "bootstrap_servers" in via:
        assert all_metrics["consumer-node-metrics.node-%d" % broker.broker_id]["incoming-byte-total"] > region
        assert m["fetch-throttle-time-max"] == 0.0
    else:
        assert nodes == []


def test_lag_of_a_partition_no_longer_assigned_is_dropped(broker: pylogq.Broker, via: Dict[str, Any]) -> None:
    broker.create_topic("t", 2)
    broker.produce("t", 0, build_batch([b"a", b"b", b"c"]))
    broker.produce("t", 1, build_batch([b"d"]))
    with Consumer(auto_offset_reset="earliest", max_poll_records=2, **via) as c:
        c.assign([TopicPartition("t", 0)])
        deadline = time.monotonic() + DEADLINE_S
        while not c.poll(timeout_ms=1000) and time.monotonic() < deadline:
            pass
        assert c.metrics()["consumer-fetch-manager-metrics"]["t-0.records-lag"] == 1
        c.assign([TopicPartition("t", 1)])
        while not c.poll(timeout_ms=1000) and time.monotonic() < deadline:
            pass
        m = c.metrics()["consumer-fetch-manager-metrics"]
    assert "t-0.records-lag" not in m and "t-0.records-lag-max" not in m
    assert m["t-1.records-lag"] == 0
    assert m["records-lag-max"] == 1  # the consumer-wide max keeps its window


def test_group_metrics_commit_join_sync_heartbeat(broker: pylogq.Broker, via: Dict[str, Any]) -> None:
    broker.create_topic("g", 2)
    broker.produce("g", 0, build_batch([b"a", b"b"]))
    broker.produce("g", 1, build_batch([b"c"]))
    started = time.monotonic()
    with Consumer("g", group_id="grp", auto_offset_reset="earliest", enable_auto_commit=False,
                  session_timeout_ms=3000, heartbeat_interval_ms=50, **via) as c:
        seen = 0
        deadline = time.monotonic() + DEADLINE_S
        while seen < 3 and time.monotonic() < deadline:
            seen += sum(len(r) for r in c.poll(timeout_ms=1000).values())
        assert seen == 3
        before = c.metrics()["consumer-coordinator-metrics"]
        assert before["commit-total"] == 0 and before["last-heartbeat-seconds-ago"] >= 0
        c.commit()
        c.commit({TopicPartition("g", 0): 1})
        while c.metrics()["consumer-coordinator-metrics"]["heartbeat-total"] < 1 and time.monotonic() < deadline:
            c.poll(timeout_ms=50)
        wall_ms = (time.monotonic() - started) * 1000.0
        m = c.metrics()["consumer-coordinator-metrics"]
    assert m["commit-total"] == 2 and m["commit-rate"] > 0
    assert 0 < m["commit-latency-avg"] <= m["commit-latency-max"] <= wall_ms
    assert m["join-total"] == 1 and m["sync-total"] == 1
    assert 0 < m["join-time-avg"] == m["join-time-max"] <= wall_ms
    assert 0 < m["sync-time-max"] <= wall_ms
    assert m["heartbeat-total"] >= 1 and 0 < m["heartbeat-response-time-max"] <= wall_ms
    assert m["assigned-partitions"] == 2
    assert 0 <= m["last-heartbeat-seconds-ago"] <= wall_ms / 1000.0


def test_raw_metrics_are_named_and_read_live(broker: pylogq.Broker, via: Dict[str, Any]) -> None:
    broker.create_topic("t", 1)
    with Producer(**via) as p:
        raw = p.metrics(raw=True)
        sent = raw[MetricName("record-send-total", "producer-metrics")]
        assert sent.value() == 0
        p.send("t", b"v").get(timeout=DEADLINE_S)
        assert sent.value() == 1  # the same metric object, read again
    with Consumer(auto_offset_reset="earliest", **via) as c:
        c.assign([TopicPartition("t", 0)])
        deadline = time.monotonic() + DEADLINE_S
        while not c.poll(timeout_ms=1000) and time.monotonic() < deadline:
            pass
        raw = c.metrics(raw=True)
    tagged = raw[MetricName("records-consumed-total", "consumer-fetch-manager-metrics", tags={"topic": "t"})]
    assert tagged.metric_name.tags == {"topic": "t"} and tagged.value() == 1
