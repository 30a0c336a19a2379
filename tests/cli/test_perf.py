"""``pylogq perf``: kafka-producer-perf-test / kafka-consumer-perf-test output, on an in-process broker."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import time
import types
from typing import Any, Dict, List

import pytest

from pylogq import Consumer, records
from pylogq.cli import perf
from pylogq.cli.clients import Clients
from pylogq.cli.main import build_parser
from pylogq.client.admin import AdminClient
from pylogq.client.consumer import TopicPartition
from pylogq.cluster.broker.in_process import InProcessTransport
from pylogq.errors import NotEnoughReplicasError
from pylogq.records import codecs

from .conftest import Cli, run_process

TOTAL_LINE = re.compile(
    r"(\d+) records sent, (\d+\.\d{6}) records/sec \((\d+\.\d\d) MB/sec\), (\d+\.\d\d) ms avg latency, "
    r"(\d+\.\d\d) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.")
TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
WINDOW_LINE = re.compile(r"(\d+) records sent, (\d+\.\d) records/sec \((\d+\.\d\d) MB/sec\), "
                         r"(\d+\.\d) ms avg latency, (\d+\.\d) ms max latency\.")
CONSUMER_HEADER = "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
CONSUMER_LINE = re.compile(r"(%s), (%s), (\d+\.\d{4}), (\d+\.\d{4}), (\d+), (\d+\.\d{4})" % (TIME, TIME))


def all_records(broker: Any, topic: str) -> List[Any]:
    with Consumer(broker=broker, enable_auto_commit=False) as consumer:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        total = sum(consumer.end_offsets(tps).values())
        out: List[Any] = []
        while len(out) < total:
            for batch in consumer.poll(timeout_ms=1000).values():
                out.extend(batch)
        return out


def test_produce_prints_the_total_line(cli: Cli, broker: Any) -> None:
    cli("topics", "--create", "--topic", "perf", "--partitions", "2")
    done = cli("perf", "produce", "--topic", "perf", "--num-records", "3000", "--record-size", "100")
    assert done.status == 0 and done.err == ""
    match = TOTAL_LINE.fullmatch(done.out.rstrip("\n").splitlines()[-1])
    assert match is not None, done.out
    count, rate, mb_rate, avg, peak, p50, p95, p99, p999 = match.groups()
    assert int(count) == 3000 and float(rate) > 0 and float(mb_rate) >= 0
    assert float(avg) <= float(peak) and int(p50) <= int(p95) <= int(p99) <= int(p999) <= float(peak)
    values = [r.value for r in all_records(broker, "perf")]
    assert len(values) == 3000
    assert all(re.fullmatch(rb"[A-Z]{100}", v) for v in values)


def test_producer_props_and_broker_from_them(cli: Cli, broker: Any) -> None:
    cli("topics", "--create", "--topic", "perf")
    done = cli("perf", "produce", "--topic", "perf", "--num-records", "50", "--record-size", "10",
               "--producer-props", "acks=1", "compression.type=lz4", "linger.ms=5")
    assert done.status == 0
    region = broker.fetch([("perf", 0, 0, 1 << 20)], 0, 1, 1 << 20, "read_uncommitted")[("perf", 0)].records
    data = region.read()
    assert {records.RecordBatch(data[i.position:i.position + i.size]).compression_type
            for i in records.iter_batches(data)} == {codecs.LZ4}
    bad = cli("perf", "produce", "--topic", "perf", "--num-records", "1", "--record-size", "1",
              "--producer-props", "no.such.setting=1")
    assert bad.status == 1 and "configuration: no.such.setting" in bad.err
    args = build_parser().parse_args(["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
                                      "--producer-props", "acks=1", "bootstrap.servers=10.0.0.1:9093"])
    assert perf.bootstrap_override(args) == "10.0.0.1:9093"


def test_the_producer_tests_broker_from_its_config_file(tmp_path: Any) -> None:
    """As Kafka's producer test: ``--producer-props`` (or ``--command-property``) first, then
    the ``--producer.config`` (or ``--command-config``) file."""
    config = tmp_path / "producer.properties"
    config.write_text("bootstrap.servers=10.0.0.2:9094\nacks=1\n")
    base = ["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1"]
    args = build_parser().parse_args(base + ["--command-config", str(config)])
    assert perf.bootstrap_override(args) == "10.0.0.2:9094"
    args = build_parser().parse_args(base + ["--producer.config", str(config), "--command-property",
                                             "bootstrap.servers=10.0.0.1:9093"])
    assert perf.bootstrap_override(args) == "10.0.0.1:9093"
    config.write_text("acks=1\n")
    assert perf.bootstrap_override(build_parser().parse_args(base + ["--command-config", str(config)])) is None


def test_payload_file(cli: Cli, broker: Any, tmp_path: Any) -> None:
    payloads = tmp_path / "payloads.txt"
    payloads.write_bytes(b"alpha\nbeta\n\ngamma\n")
    done = cli("perf", "produce", "--topic", "perf", "--num-records", "200", "--payload-file", str(payloads))
    assert done.status == 0
    assert {r.value for r in all_records(broker, "perf")} <= {b"alpha", b"beta", b"gamma"}
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"\n\n")
    refused = cli("perf", "produce", "--topic", "perf", "--num-records", "1", "--payload-file", str(empty))
    assert refused.status == 1 and "holds no payloads" in refused.err


def test_throughput_limit_paces_the_sends(cli: Cli) -> None:
    started = time.monotonic()
    done = cli("perf", "produce", "--topic", "perf", "--num-records", "50", "--record-size", "10",
               "--throughput", "500")
    assert done.status == 0
    assert time.monotonic() - started >= 50 / 500 * 0.95  # 50 records at 500/s cannot finish sooner


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_stats_window_and_total_lines() -> None:
    clock = Clock()
    stats = perf.ProducerStats(1_000_000, 5000, clock=clock)
    assert stats.sampling == 2  # at most 500,000 latency samples
    for i in range(1000):
        stats.record(i, latency_ms=float(i % 10), size=1024)
    clock.now += 1.0
    assert stats.window_line() is None  # the window lasts 5 s
    clock.now += 4.0
    assert stats.window_line() == ("1000 records sent, 200.0 records/sec (0.20 MB/sec), 4.5 ms avg latency, "
                                   "9.0 ms max latency.")
    assert stats.window_line() is None  # a new, empty window
    clock.now += 5.0
    assert stats.total_line() == ("1000 records sent, 100.000000 records/sec (0.10 MB/sec), 4.50 ms avg latency, "
                                  "9.00 ms max latency, 4 ms 50th, 8 ms 95th, 8 ms 99th, 8 ms 99.9th.")


def test_stats_of_a_run_are_those_of_its_records_one_by_one() -> None:
    """``record_run`` (one call per batch) keeps the figures ``record`` (one per record) would."""
    clock = Clock()
    sent_at = [100.0 + i * 0.001 for i in range(1200)]
    one_by_one = perf.ProducerStats(1_500_000, 5000, clock=clock)  # sampling: every 3rd record
    by_run = perf.ProducerStats(1_500_000, 5000, clock=clock)
    clock.now = 102.0
    for first, end in ((0, 500), (500, 501), (501, 1200)):
        for i in range(first, end):
            one_by_one.record(i, (clock.now - sent_at[i]) * 1000.0, 100)
        by_run.record_run(first, sent_at[first:end], 100 * (end - first))
    assert by_run.latencies == one_by_one.latencies and len(by_run.latencies) == 400
    assert (by_run.count, by_run.bytes, by_run.max_latency) == (one_by_one.count, one_by_one.bytes,
                                                                 one_by_one.max_latency)
    assert by_run.total_latency == pytest.approx(one_by_one.total_latency)
    assert by_run.total_line() == one_by_one.total_line()
    clock.now += 5.0
    assert by_run.window_line() == one_by_one.window_line()


class DelayedTransport(InProcessTransport):
    """Acknowledges every produce ``delay`` seconds late (the records are written at once)."""

    def __init__(self, broker: Any, delay: float) -> None:
        super().__init__(broker)
        self.delay = delay

    def produce(self, topic: str, partition: int, records: Any, acks: int) -> Any:
        result = super().produce(topic, partition, records, acks)
        time.sleep(self.delay)  # the slow acknowledgement under test
        return result


def run_perf(transport: Any, *argv: str) -> Any:
    args = build_parser().parse_args(["perf", "produce", *argv])
    out, err = io.StringIO(), io.StringIO()
    with Clients(broker=transport) as clients:
        status = perf.run(args, clients, out, err, progress=False)
    return types.SimpleNamespace(status=status, out=out.getvalue(), err=err.getvalue())


def test_latency_runs_from_each_send_to_its_acknowledgement(broker: Any) -> None:
    """Every latency includes the broker's 50 ms; records that waited longer in their batch show more.

    At 1,000 records/s with linger.ms=200, a batch holds the records of about
    200 ms: its first record waits the whole linger, its last hardly at all, so
    the figures are per record, not per batch.
    """
    AdminClient(broker=broker).create_topics(["perf"])
    done = run_perf(DelayedTransport(broker, 0.05), "--topic", "perf", "--num-records", "600", "--record-size", "100",
                    "--throughput", "1000", "--reporting-interval", "200",
                    "--producer-props", "acks=1", "linger.ms=200")
    assert done.status == 0 and done.err == ""
    *windows, total = done.out.splitlines()
    match = TOTAL_LINE.fullmatch(total)
    assert match is not None, done.out
    count, rate, mb_rate, avg, peak, p50, p95, p99, p999 = match.groups()
    assert int(count) == 600 and float(rate) <= 1000 * 1.05
    assert 50 <= int(p50) <= int(p95) <= int(p99) <= int(p999) <= float(peak) and float(avg) >= 50
    assert float(peak) >= 50 + 200 * 0.9  # a batch's first record waited for linger.ms
    assert int(p50) < float(peak) - 40  # ... and later ones less
    assert windows and all(WINDOW_LINE.fullmatch(line) for line in windows), windows
    assert sum(int(WINDOW_LINE.fullmatch(line).group(1)) for line in windows) <= 600  # type: ignore[union-attr]
    assert all(float(WINDOW_LINE.fullmatch(line).group(4)) >= 50 for line in windows)  # type: ignore[union-attr]


class RefusingTransport(InProcessTransport):
    """Fails every produce with a non-retriable error."""

    def produce(self, topic: str, partition: int, records: Any, acks: int) -> Any:
        raise NotEnoughReplicasError("refused for the test")


def test_failed_records_are_counted(broker: Any) -> None:
    AdminClient(broker=broker).create_topics(["perf"])
    done = run_perf(RefusingTransport(broker), "--topic", "perf", "--num-records", "300", "--record-size", "10",
                    "--producer-props", "acks=1", "retries=0")
    assert done.status == 1
    assert done.err.startswith("300 records failed; the first error: ") and "refused for the test" in done.err
    assert TOTAL_LINE.fullmatch(done.out.strip()).group(1) == "0"  # type: ignore[union-attr]


def fill(broker: Any, topic: str, count: int, size: int) -> None:
    AdminClient(broker=broker).create_topics([topic])
    for start in range(0, count, 1000):
        n = min(1000, count - start)
        broker.produce(topic, 0, records.build_batch([b"x" * size] * n, keys=[b"k"] * n))


def test_consume_prints_the_summary(cli: Cli, broker: Any) -> None:
    fill(broker, "perf", 2500, 100)
    done = cli("perf", "consume", "--topic", "perf", "--messages", "2500")
    assert done.status == 0 and done.err == ""
    header, line = done.out.splitlines()
    assert header == CONSUMER_HEADER
    match = CONSUMER_LINE.fullmatch(line)
    assert match is not None, line
    start, end, mb, mb_rate, count, rate = match.groups()
    assert start <= end
    assert mb == "%.4f" % (2500 * 101 / 1024 / 1024)  # key and value bytes
    assert int(count) == 2500 and float(rate) > 0 and float(mb_rate) > 0


def test_consume_stops_at_the_count_and_commits_with_a_group(cli: Cli, broker: Any) -> None:
    fill(broker, "perf", 3000, 10)
    done = cli("perf", "consume", "--topic", "perf", "--messages", "1200", "--group", "perf-group",
               "--hide-header")
    match = CONSUMER_LINE.fullmatch(done.out.strip())
    assert match is not None and match.group(5) == "1200"
    with AdminClient(broker=broker) as admin:
        assert admin.list_consumer_group_offsets("perf-group")[TopicPartition("perf", 0)].offset == 1200


def test_consume_timeout_warns(cli: Cli, broker: Any) -> None:
    fill(broker, "perf", 10, 10)
    done = cli("perf", "consume", "--topic", "perf", "--messages", "11", "--timeout", "100")
    assert done.status == 0
    assert done.err.startswith("WARNING: Exiting before consuming the expected number of messages: "
                               "timeout (100 ms) exceeded.")
    assert CONSUMER_LINE.fullmatch(done.out.splitlines()[1]).group(5) == "10"  # type: ignore[union-attr]
    latest = cli("perf", "consume", "--topic", "perf", "--messages", "1", "--timeout", "100", "--from-latest",
                 "--hide-header")
    assert CONSUMER_LINE.fullmatch(latest.out.strip()).group(5) == "0"  # type: ignore[union-attr]


def test_consume_detailed_stats_header(cli: Cli, broker: Any) -> None:
    fill(broker, "perf", 10, 10)
    done = cli("perf", "consume", "--topic", "perf", "--messages", "10", "--show-detailed-stats")
    assert done.out.splitlines()[0] == "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
    assert all(re.fullmatch(r"%s, 0, \d+\.\d{4}, \d+\.\d{4}, \d+, \d+\.\d{4}" % TIME, line)
               for line in done.out.splitlines()[1:])


def test_consume_a_missing_topic(cli: Cli) -> None:
    missing = cli("perf", "consume", "--topic", "ghost", "--messages", "1")
    assert missing.status == 1 and "Topic 'ghost' does not exist" in missing.err


class FakeBar:
    """Stands in for tqdm.tqdm: records what the tool asks of its bar."""

    made: List["FakeBar"] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs: Dict[str, Any] = kwargs
        self.n = 0
        self.closed = False
        FakeBar.made.append(self)

    def update(self, n: int) -> None:
        self.n += n

    def write(self, line: str, file: Any) -> None:
        file.write(line + "\n")

    def close(self) -> None:
        self.closed = True


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def fake_tqdm(monkeypatch: Any) -> Any:
    FakeBar.made = []
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeBar))
    return FakeBar


@pytest.mark.parametrize("argv", [
    ["perf", "produce", "--topic", "perf", "--num-records", "2500", "--record-size", "10"],
    ["perf", "consume", "--topic", "perf", "--messages", "2500"],
])
def test_progress_bar_on_a_terminal(broker: Any, fake_tqdm: Any, argv: List[str]) -> None:
    from pylogq.cli.clients import Clients

    fill(broker, "perf", 2500, 10)
    err = Terminal()
    args = build_parser().parse_args(argv)
    with Clients(broker=broker) as clients:
        assert perf.run(args, clients, io.StringIO(), err) == 0
    (bar,) = fake_tqdm.made
    assert bar.kwargs["total"] == 2500 and bar.kwargs["file"] is err
    assert bar.n == 2500 and bar.closed


def test_no_progress_bar_off_a_terminal_or_without_tqdm(broker: Any, fake_tqdm: Any, monkeypatch: Any) -> None:
    from pylogq.cli.clients import Clients

    fill(broker, "perf", 10, 10)
    args = build_parser().parse_args(["perf", "consume", "--topic", "perf", "--messages", "10"])
    with Clients(broker=broker) as clients:
        assert perf.run(args, clients, io.StringIO(), io.StringIO()) == 0
    assert fake_tqdm.made == []
    monkeypatch.setitem(sys.modules, "tqdm", None)  # not installed: import fails
    err = Terminal()
    with Clients(broker=broker) as clients:
        assert perf.run(args, clients, io.StringIO(), err, progress=True) == 0
    assert err.getvalue() == ""


# -- over TCP, as a user runs it --------------------------------------------------------------------


def test_perf_produce_then_consume_processes(pylogq_bootstrap: str) -> None:
    produced = run_process(pylogq_bootstrap, "perf", "produce", "--topic", "perf", "--num-records", "5000",
                           "--record-size", "100", "--producer-props", "acks=1")
    assert produced.status == 0 and produced.err == ""
    assert TOTAL_LINE.fullmatch(produced.out.strip()).group(1) == "5000"  # type: ignore[union-attr]
    consumed = run_process(pylogq_bootstrap, "perf", "consume", "--topic", "perf", "--messages", "5000")
    assert consumed.status == 0 and consumed.err == ""
    header, line = consumed.out.splitlines()
    assert header == CONSUMER_HEADER
    match = CONSUMER_LINE.fullmatch(line)
    assert match is not None, line
    assert (match.group(3), match.group(5)) == ("%.4f" % (5000 * 100 / 1024 / 1024), "5000")


def test_perf_produce_takes_the_broker_from_producer_props(pylogq_bootstrap: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pylogq", "perf", "produce", "--topic", "perf", "--num-records",
                           "10", "--record-size", "10", "--producer-props", "bootstrap.servers=" + pylogq_bootstrap],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert TOTAL_LINE.fullmatch(proc.stdout.decode().strip()).group(1) == "10"  # type: ignore[union-attr]
