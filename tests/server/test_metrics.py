"""Metrics: ``/metrics`` of a ``pylogq-broker`` process under a real client's load.

The broker serves Kafka's metric names (as the Prometheus JMX exporter renames them) on
``metrics.listener``; the values are checked against what the clients did and against
the broker's own files: the bytes in are the bytes its logs hold, the lag is the end
offset minus the committed offset, requests are counted per type.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import pylogq
from pylogq import errors
from pylogq.metrics import BUCKETS_MS, DEFINITIONS, Definition, MetricsRegistry, parse_listener, sample_key

from ._support import wait_for
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
FLUSH = "kafka_log_logflushstats_logflushrateandtimems"
SELECTOR = re.compile(r"\b(kafka_[a-z0-9_]+)\b(?:\{([^}]*)\})?")  # a metric and its label matchers
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
SCRAPE_LABELS = {"job", "instance"}  # added by Prometheus to every series it scrapes


def _dashboard_queries() -> List[Tuple[str, str]]:
    """(where, PromQL) of every query of the dashboard: each target of each panel (a row's
    panels too), each query variable and annotation. A panel target without a query fails
    here instead of going unchecked."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries: List[Tuple[str, str]] = []

    def walk(panels: List[Dict[str, Any]]) -> None:
        for panel in panels:
            walk(panel.get("panels", []))  # a collapsed row holds its panels
            if panel.get("type") in ("row", "text"):
                continue
            assert panel.get("targets"), "panel %r has no query" % panel.get("title")
            for target in panel["targets"]:
                assert target.get("expr"), "panel %r has a target without a PromQL expr: %r" % (
                    panel.get("title"), target)
                queries.append((panel["title"], target["expr"]))

    walk(dashboard["panels"])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            query = query.get("query", "") if isinstance(query, dict) else query
            assert query, "variable %r has no query" % variable["name"]
            queries.append(("variable $%s" % variable["name"], query))
    for annotation in dashboard.get("annotations", {}).get("list", []):
        if annotation.get("expr"):
            queries.append(("annotation %r" % annotation.get("name"), annotation["expr"]))
    return queries


def _definition(sample: str) -> Tuple[str, Definition]:
    """The family of a sample name (``..._total``, ``..._bucket``: the metric's own name)."""
    for suffix in ("", "_total", "_bucket", "_sum", "_count"):
        if sample.endswith(suffix) and sample[:len(sample) - len(suffix)] in DEFINITIONS:
            base = sample[:len(sample) - len(suffix)]
            return base, DEFINITIONS[base]
    raise KeyError(sample)


def _series(url: str) -> Dict[str, List[Dict[str, str]]]:
    """The labels of every served series, by sample name."""
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    out: Dict[str, List[Dict[str, str]]] = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(dict(s.labels))
    return out


def _query_problems(where: str, expr: str, served: Dict[str, List[Dict[str, str]]]) -> List[str]:
    """What in one query asks for series the broker does not serve: a metric name, a label
    the metric does not have (in a matcher or a grouping), a label value no series has."""
    problems: List[str] = []
    labels_in_query = set(SCRAPE_LABELS)
    for name, selector in SELECTOR.findall(expr):
        series = served.get(name)
        if not series:
            problems.append("%s: %s is not served" % (where, name))
            continue
        _, definition = _definition(name)
        known = set(definition.labels) | SCRAPE_LABELS | ({"le"} if name.endswith("_bucket") else set())
        labels_in_query |= known
        for label, op, value in MATCHER.findall(selector):
            if label not in known:
                problems.append("%s: %s has no label %r" % (where, name, label))
            elif op == "=" and "$" not in value and not any(s.get(label, "") == value for s in series):
                problems.append("%s: no series of %s has %s=%r" % (where, name, label, value))
    for grouping in GROUPING.findall(expr):
        for label in filter(None, (label.strip() for label in grouping.split(","))):
            if label not in labels_in_query:
                problems.append("%s: grouped by %r, which its metrics do not have" % (where, label))
    return problems


def test_every_dashboard_query_asks_for_series_the_broker_serves(tmp_path: Path) -> None:
    queries = _dashboard_queries()
    names = {name for _, expr in queries for name, _ in SELECTOR.findall(expr)}
    assert len(names) >= 40 and len(queries) >= len(names)
    # A broker with Kafka's defaults that has done a little of everything: produce, consume,
    # commit, roll segments (each flushed as it rolls), compact.
    with pylogq.Broker(str(tmp_path), **{"metrics.listener": "http://127.0.0.1:0",
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
        served = _series(broker.metrics_url)
    problems = [problem for where, expr in queries for problem in _query_problems(where, expr, served)]
    assert not problems, "queries of %s ask for what the broker does not serve:\n%s" % (
        DASHBOARD.name, "\n".join(problems))


def test_the_query_check_finds_what_is_not_served() -> None:
    served = {"kafka_network_requestmetrics_totaltimems_bucket": [{"request": "Produce", "le": "1.0"}],
              "kafka_server_brokertopicmetrics_bytesin_total": [{}, {"topic": "t"}]}
    good = ('histogram_quantile(0.99, sum by (le) (rate(kafka_network_requestmetrics_totaltimems_bucket'
            '{job=~"$job",request="Produce"}[5m])))', 'sum(rate(kafka_server_brokertopicmetrics_bytesin_total'
            '{topic=""}[5m]))')
    for expr in good:
        assert _query_problems("q", expr, served) == []
    bad = {'sum(kafka_log_logflushstats_logflushrateandtimems_count)': "is not served",
           'kafka_network_requestmetrics_totaltimems_bucket{request="Fetch"}': "no series",
           'kafka_network_requestmetrics_totaltimems_bucket{topic="t"}': "has no label 'topic'",
           'sum by (partition) (kafka_server_brokertopicmetrics_bytesin_total)': "grouped by 'partition'"}
    for expr, problem in bad.items():
        found = _query_problems("q", expr, served)
        assert len(found) == 1 and problem in found[0], (expr, found)


def test_a_fresh_broker_serves_every_broker_wide_metric_the_dashboard_names(tmp_path: Path) -> None:
    # Kafka's defaults: nothing produced and nothing flushed yet (a log is flushed when a
    # segment rolls). A broker-wide series is there from the start, so its panel shows 0,
    # not "No data".
    queried = {_definition(name)[0] for _, expr in _dashboard_queries() for name, _ in SELECTOR.findall(expr)}
    wide = sorted(name for name in queried if not DEFINITIONS[name].labels)
    assert FLUSH in wide
    with pylogq.Broker(str(tmp_path)) as broker:
        broker.serve()  # as pylogq-broker starts it
        served = {key.split("{")[0] for key in broker.metrics()}
    missing = [name for name in wide if not any(key == name or key.startswith(name + "_") for key in served)]
    assert not missing, "not served by a fresh broker: %s" % ", ".join(missing)


def test_log_flush_times_are_measured_when_a_segment_rolls(tmp_path: Path) -> None:
    with pylogq.Broker(str(tmp_path)) as broker:
        before = broker.metrics()
        assert before[FLUSH + "_count"] == 0 and before[FLUSH + '_bucket{le="+Inf"}'] == 0
        broker.create_topic("rolled", 1, config={"segment.bytes": 2048})
        producer = pylogq.Producer(broker=broker, batch_size=512)
        for i in range(100):
            producer.send("rolled", b"v" * 40, partition=0)
        producer.flush()
        producer.close()
        log = broker.logs.get_log("rolled", 0)
        assert log is not None and log.num_segments > 1
        # Each rolled segment is flushed by a background task.
        wait_for(lambda: broker.metrics()[FLUSH + "_count"] >= 1, what="a flush of a rolled segment")
        after = broker.metrics()
    assert after[FLUSH + "_count"] >= 1
    assert after[FLUSH + '_bucket{le="+Inf"}'] == after[FLUSH + "_count"]
    assert 0 < after[FLUSH + "_sum"] < 10000 * after[FLUSH + "_count"]  # the fsyncs' own time, in ms
