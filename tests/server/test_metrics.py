"""Metrics: ``/metrics`` of a ``pylogq-broker`` process under a real client's load.

The broker serves Kafka's metric names (as the Prometheus JMX exporter renames them) on
``metrics.listener``; the values are checked against what the clients did and against
the broker's own files: the bytes in are the bytes its logs hold, the lag is the end
offset minus the committed offset, requests are counted per type.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

import pylogq
from pylogq import errors
from pylogq.metrics import BUCKETS_MS, DEFINITIONS, MetricsRegistry, parse_listener, sample_key

from .conftest import BrokerProcess
from .test_server import Wire

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")
parser = pytest.importorskip("prometheus_client.parser")

TOPIC = "metered"
PARTITIONS = 3
RECORDS = 6000
VALUE = b"v" * 100
API_VERSIONS, METADATA = 18, 3


def scrape(url: str) -> Dict[str, float]:
    """Every sample of the text format, keyed as ``Broker.metrics()`` keys them."""
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    out: Dict[str, float] = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            out[sample_key(s.name, s.labels)] = s.value
    return out


def total(samples: Dict[str, float], prefix: str) -> float:
    """The sum of the samples whose key starts with ``prefix`` (one metric over a label)."""
    return sum(v for k, v in samples.items() if k.startswith(prefix))


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", "metrics.listener=http://127.0.0.1:0")
    try:
        yield broker
    finally:
        status = broker.stop()
        assert status == 0, broker.log()
        assert "Traceback" not in broker.log(), broker.log()


def _metrics_url(broker: BrokerProcess) -> str:
    assert broker.proc.stdout is not None
    line = broker.proc.stdout.readline().decode().strip()
    prefix = "pylogq-broker 0 metrics on "
    assert line.startswith(prefix), line
    return line[len(prefix):]


def test_metrics_follow_a_real_client_s_load(metered: BrokerProcess) -> None:
    url = _metrics_url(metered)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
    admin = confluent_admin.AdminClient({"bootstrap.servers": metered.bootstrap})
    admin.create_topics([confluent_admin.NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)

    producer = confluent_kafka.Producer({"bootstrap.servers": metered.bootstrap, "linger.ms": 5,
                                         "compression.type": "none"})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=VALUE, partition=i % PARTITIONS)
    assert producer.flush(60) == 0

    m = scrape(url)
    topic = '{topic="%s"}' % TOPIC
    assert m["kafka_server_brokertopicmetrics_messagesin_total" + topic] == RECORDS
    bytes_in = m["kafka_server_brokertopicmetrics_bytesin_total" + topic]
    # What was appended is what the logs hold, the records' values plus the batching overhead.
    held = sum(m['kafka_log_log_size{partition="%d",topic="%s"}' % (p, TOPIC)] for p in range(PARTITIONS))
    assert bytes_in == held
    produces = total(m, 'kafka_network_requestmetrics_requests_total{request="Produce"')
    assert RECORDS * len(VALUE) < bytes_in < RECORDS * (len(VALUE) + 16) + 61 * m[
        "kafka_server_brokertopicmetrics_totalproducerequests_total" + topic]
    assert 1 <= produces <= m["kafka_server_brokertopicmetrics_totalproducerequests_total" + topic]
    assert m["kafka_server_brokertopicmetrics_failedproducerequests_total" + topic] == 0
    ends = {p: m['kafka_log_log_logendoffset{partition="%d",topic="%s"}' % (p, TOPIC)] for p in range(PARTITIONS)}
    assert sum(ends.values()) == RECORDS
    assert m["kafka_server_replicamanager_leadercount"] == m["kafka_server_replicamanager_partitioncount"]
    assert m["kafka_server_replicamanager_underreplicatedpartitions"] == 0

    # A group reads everything, then commits offsets of its choosing.
    consumer = confluent_kafka.Consumer({"bootstrap.servers": metered.bootstrap, "group.id": "metered-group",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    read = 0
    while read < RECORDS:
        msg = consumer.poll(10)
        assert msg is not None, "read %d of %d records" % (read, RECORDS)
        assert msg.error() is None, msg.error()
        read += 1
    committed = {0: 0, 1: 17, 2: int(ends[2])}
    consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, p, o) for p, o in committed.items()],
                    asynchronous=False)
    consumer.close()
    producer.flush(10)
    del producer

    m = scrape(url)
    for p, offset in committed.items():
        labels = '{consumergroup="metered-group",partition="%d",topic="%s"}' % (p, TOPIC)
        assert m["kafka_consumergroup_current_offset" + labels] == offset
        assert m["kafka_consumergroup_lag" + labels] == ends[p] - offset
    assert m['kafka_consumergroup_lag_sum{consumergroup="metered-group",topic="%s"}' % TOPIC] == sum(
        ends[p] - o for p, o in committed.items())
    assert m["kafka_server_brokertopicmetrics_bytesout_total" + topic] >= bytes_in
    assert m["kafka_coordinator_group_groupmetadatamanager_numgroups"] >= 1
    assert total(m, 'kafka_network_requestmetrics_requests_total{request="FetchConsumer"') >= 1
    assert total(m, 'kafka_network_requestmetrics_requests_total{request="OffsetCommit"') == 1

    # Requests are counted per type before their answer leaves: a client holding its
    # answers sees each one counted, and the times of all but the last one recorded.
    before = m
    with Wire(("127.0.0.1", metered.port), timeout=30) as wire:
        for _ in range(3):
            wire.request(API_VERSIONS, 3, {"client_software_name": "metrics-test",
                                           "client_software_version": "1"})
        for _ in range(2):
            wire.request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
        after = scrape(url)

    def delta(key: str) -> float:
        return after.get(key, 0) - before.get(key, 0)

    assert delta('kafka_network_requestmetrics_requests_total{request="ApiVersions",version="3"}') == 3
    assert delta('kafka_network_requestmetrics_requests_total{request="Metadata",version="12"}') == 2
    assert delta('kafka_network_requestmetrics_errors_total{error="NONE",request="ApiVersions"}') == 3
    assert delta('kafka_network_requestmetrics_totaltimems_count{request="ApiVersions"}') == 3
    assert delta('kafka_server_socket_server_metrics_connection_creation_total{listener="PLAINTEXT"}') == 1
    assert after['kafka_network_requestmetrics_totaltimems_bucket{le="+Inf",request="ApiVersions"}'] == \
        after['kafka_network_requestmetrics_totaltimems_count{request="ApiVersions"}']


def test_every_metric_served_is_defined_and_the_in_process_values_are_the_served_ones(tmp_path: Path) -> None:
    with pylogq.Broker(str(tmp_path), **{"metrics.listener": "http://127.0.0.1:0"}) as broker:
        host, port = broker.serve()
        broker.create_topic("t", 2)
        producer = pylogq.Producer(bootstrap_servers="%s:%d" % (host, port))
        for i in range(10):
            producer.send("t", b"x" * i, partition=i % 2)
        producer.flush()
        producer.close()
        assert broker.metrics_url is not None
        served = scrape(broker.metrics_url)
        in_process = broker.metrics()
        # Both read one registry; the samples whose values cannot move between the two
        # reads (no client is connected) are equal.
        for key in ("kafka_server_brokertopicmetrics_messagesin_total", 'kafka_log_log_size{partition="1",topic="t"}',
                    "kafka_server_replicamanager_partitioncount"):
            assert served[key] == in_process[key], key
        assert in_process["kafka_server_brokertopicmetrics_messagesin_total"] == 10
        families = {k.split("{")[0] for k in served}
        for name in families:
            base = name
            for suffix in ("_total", "_bucket", "_sum", "_count", "_created"):
                if name.endswith(suffix) and name[:-len(suffix)] in DEFINITIONS:
                    base = name[:-len(suffix)]
            assert base in DEFINITIONS, name


def test_a_deleted_topic_s_own_samples_go(tmp_path: Path) -> None:
    with pylogq.Broker(str(tmp_path)) as broker:
        broker.create_topic("gone", 1)
        broker.produce("gone", 0, bytes(pylogq.records.build_batch([b"a"])))
        assert broker.metrics()['kafka_server_brokertopicmetrics_messagesin_total{topic="gone"}'] == 1
        broker.delete_topic("gone")
        m = broker.metrics()
        assert not [k for k in m if 'topic="gone"' in k]
        assert m["kafka_server_brokertopicmetrics_messagesin_total"] == 1  # all topics keep their count


def test_produce_to_names_no_partition_has_adds_no_series(tmp_path: Path) -> None:
    with pylogq.Broker(str(tmp_path)) as broker:
        for i in range(50):
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                broker.produce("nope-%d" % i, 0, bytes(pylogq.records.build_batch([b"a"])), auto_create=False)
        m = broker.metrics()
        assert m["kafka_server_brokertopicmetrics_failedproducerequests_total"] == 50
        assert not [k for k in m if "nope-" in k]


def test_histograms_are_cumulative_with_their_sum_and_count() -> None:
    registry = MetricsRegistry()
    for ms in (0.1, 3, 3, 70, 100000):
        registry.observe("kafka_log_logflushstats_logflushrateandtimems", (), ms)
    m = registry.samples()
    name = "kafka_log_logflushstats_logflushrateandtimems"
    buckets: List[float] = [m['%s_bucket{le="%r"}' % (name, float(b))] for b in BUCKETS_MS]
    assert buckets == sorted(buckets)
    assert m['%s_bucket{le="0.5"}' % name] == 1
    assert m['%s_bucket{le="5.0"}' % name] == 3
    assert m['%s_bucket{le="100.0"}' % name] == 4
    assert m['%s_bucket{le="+Inf"}' % name] == m[name + "_count"] == 5
    assert m[name + "_sum"] == pytest.approx(100076.1)


@pytest.mark.parametrize("value", ["127.0.0.1:9404", "https://127.0.0.1:9404", "http://127.0.0.1",
                                   "http://127.0.0.1:9404/metrics", "http://:9404", "http://127.0.0.1:99999"])
def test_a_bad_metrics_listener_is_a_config_error(tmp_path: Path, value: str) -> None:
    with pytest.raises(errors.ConfigError, match="metrics.listener"):
        parse_listener(value)
    with pytest.raises(errors.ConfigError, match="metrics.listener"):
        pylogq.Broker(str(tmp_path), **{"metrics.listener": value})


def test_a_metrics_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with pylogq.Broker(str(tmp_path / "a"), **{"metrics.listener": "http://127.0.0.1:0"}) as first:
        _, port = parse_listener(first.metrics_url.rsplit("/", 1)[0])  # type: ignore[union-attr]
        with pytest.raises(errors.ConfigError, match="cannot listen"):
            pylogq.Broker(str(tmp_path / "b"), **{"metrics.listener": "http://127.0.0.1:%d" % port})


DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "pylogq-dashboard.json"


def _dashboard_names() -> Dict[str, List[str]]:
    """Each metric name the dashboard's queries use -> the panels using it."""
    import json
    import re

    dashboard = json.loads(DASHBOARD.read_text())
    queries = [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p["targets"]]
    queries += [("templating", v["query"]) for v in dashboard["templating"]["list"] if v["type"] == "query"]
    names: Dict[str, List[str]] = {}
    for title, expr in queries:
        for name in re.findall(r"\b(kafka_[a-z_]+)", expr):
            names.setdefault(name, []).append(title)
    return names


def test_every_dashboard_query_names_a_metric_the_broker_serves(tmp_path: Path) -> None:
    names = _dashboard_names()
    assert len(names) >= 40
    # A broker that has done a little of everything: produce, consume, commit, flush, compact.
    with pylogq.Broker(str(tmp_path), **{"metrics.listener": "http://127.0.0.1:0", "log.flush.interval.messages": 1,
                                         "log.cleaner.backoff.ms": 50}) as broker:
        host, port = broker.serve()
        bootstrap = "%s:%d" % (host, port)
        broker.create_topic("compacted", 1, config={"cleanup.policy": "compact", "segment.bytes": 2048,
                                                    "min.cleanable.dirty.ratio": 0.01})
        producer = pylogq.Producer(bootstrap_servers=bootstrap, batch_size=512)  # batches below a segment
        for i in range(200):
            producer.send("compacted", b"v%d" % i, key=b"k%d" % (i % 3))
        producer.flush()
        producer.close()
        consumer = pylogq.Consumer("compacted", bootstrap_servers=bootstrap, group_id="dash",
                                   auto_offset_reset="earliest", enable_auto_commit=False)
        got = 0
        for _ in range(20):
            got += sum(len(batch) for batch in consumer.poll(timeout_ms=1000).values())
            if got:
                break
        assert got, "the consumer read nothing"
        consumer.commit()
        consumer.close()
        assert broker.logs.cleaner is not None
        broker.logs.cleaner.clean_once()
        assert broker.metrics_url is not None
        served = {key.split("{")[0] for key in scrape(broker.metrics_url)}
    missing = {name: panels for name, panels in names.items() if name not in served}
    assert not missing, "queries name metrics the broker does not serve: %s" % missing
