"""``pylogq perf produce|consume``: Kafka's producer and consumer performance tests.

``perf produce`` sends ``--num-records`` records of ``--record-size`` random
capital letters (or lines of ``--payload-file``), at most ``--throughput``
records/s (-1: as fast as possible), and prints what
``kafka-producer-perf-test.sh`` prints: every ``--reporting-interval`` ms a
window line ``N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms
max latency.``, and at the end the total::

    100000 records sent, 52192.066806 records/sec (4.98 MB/sec), 2.11 ms avg latency, 220.00 ms max latency,
    1 ms 50th, 8 ms 95th, 21 ms 99th, 219 ms 99.9th.

(one line). A record's latency runs from ``send`` to its acknowledgement; the
percentiles come from at most 500,000 evenly spaced samples, as in Kafka.
The producer acknowledges a batch's records together, so the test notes each
record's send time and, when its batch completes, the latency of each record
of the batch: one callback per batch rather than one per record, which would
cost more than the send itself.

``perf consume`` reads ``--messages`` records from the beginning of the topic
(``--from-latest``: from its end) and prints ``kafka-consumer-perf-test.sh``'s
summary, a header and one line::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec
    2024-01-01 12:00:00:000, 2024-01-01 12:00:01:250, 95.3674, 76.2939, 1000000, 800000.0000

where data is key plus value bytes and MB is 2**20 bytes (``--show-detailed-stats``
prints instead, every ``--reporting-interval`` ms, ``time, threadId,
data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec`` lines whose rates
cover the interval, as the 0.10 tool does). Without ``--group``
the test reads every partition directly and commits nothing; with one it joins
that group. ``--timeout`` (ms) ends a test that waits that long for a record.

On a terminal, both show a progress bar on stderr (``tqdm``, when installed);
the lines above go to stdout either way.
"""

from __future__ import annotations

import argparse
import importlib
import random
import threading
import time
from typing import Any, Callable, List, Optional, TextIO

from .. import errors
from ..client.consumer import TopicPartition
from ..client.producer import ProducerBatch
from ..errors import CommandError
from . import _interrupts
from ._errors import report_error
from .clients import Clients, add_bootstrap_argument, int_argument, read_properties
from .command_config import add_client_config_argument, client_settings

__all__ = ["SUMMARY", "Progress", "ProducerStats", "add_arguments", "bootstrap_override", "run"]

SUMMARY = "measure producer or consumer throughput and latency, as kafka-*-perf-test.sh do"

MB = 1024 * 1024
_MAX_SAMPLES = 500_000
_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


_positive = int_argument(1)

def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a number" % (text,)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="perf_command", required=True, metavar="{produce,consume}")
    produce = sub.add_parser("produce", help="producer throughput and latency (kafka-producer-perf-test.sh)",
                             description="producer throughput and latency, as kafka-producer-perf-test.sh")
    add_bootstrap_argument(produce)
    produce.add_argument("--topic", required=True, help="the topic to send to")
    produce.add_argument("--num-records", type=_positive, required=True, help="how many records to send")
    size = produce.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=_positive, help="the size of each record's value, in bytes")
    size.add_argument("--payload-file", help="values to send, picked at random: the file split at the delimiter")
    produce.add_argument("--payload-delimiter", default="\\n",
                         help="what separates the values of --payload-file (default: a newline)")
    produce.add_argument("--throughput", type=_number, default=-1.0,
                         help="at most this many records/s; -1 (the default): no limit")
    produce.add_argument("--producer-props", "--command-property", dest="producer_props", nargs="+",
                         action="extend", metavar="KEY=VALUE",
                         help="producer settings in Kafka's spelling (acks=1 linger.ms=5 "
                              "compression.type=lz4 bootstrap.servers=HOST:PORT)")
    add_client_config_argument(produce, "producer")
    produce.add_argument("--reporting-interval", type=_positive, default=5000, metavar="MS",
                         help="print a window line every this many ms (default: 5000)")

    consume = sub.add_parser("consume", help="consumer throughput (kafka-consumer-perf-test.sh)",
                             description="consumer throughput, as kafka-consumer-perf-test.sh")
    add_bootstrap_argument(consume)
    consume.add_argument("--topic", required=True, help="the topic to read")
    consume.add_argument("--messages", type=_positive, required=True, help="how many records to read")
    consume.add_argument("--group", help="read as a member of this consumer group (default: no group)")
    consume.add_argument("--from-latest", action="store_true", help="start at the end of the log, not its beginning")
    consume.add_argument("--fetch-size", type=_positive, help="bytes fetched per partition and request")
    consume.add_argument("--timeout", type=_positive, default=10000, metavar="MS",
                         help="give up after this many ms without a record (default: 10000)")
    consume.add_argument("--hide-header", action="store_true", help="print the result line only")
    consume.add_argument("--show-detailed-stats", action="store_true",
                         help="print a line per --reporting-interval too")
    consume.add_argument("--reporting-interval", type=_positive, default=5000, metavar="MS",
                         help="the interval of --show-detailed-stats lines (default: 5000)")
    consume.add_argument("--consumer-property", "--command-property", dest="consumer_property", action="append",
                         metavar="KEY=VALUE",
                         help="a consumer setting in Kafka's spelling; repeatable")
    add_client_config_argument(consume, "consumer")


def bootstrap_override(args: argparse.Namespace) -> Optional[str]:
    """``bootstrap.servers`` from ``--producer-props``, or else from the ``--producer.config``
    file, which Kafka's producer test takes its broker from."""
    for item in getattr(args, "producer_props", None) or ():
        key, sep, value = item.partition("=")
        if sep and key.strip() == "bootstrap.servers":
            return value.strip()
    path = getattr(args, "producer_config", None)
    if path:
        servers = read_properties(path).get("bootstrap.servers", "").strip()
        return servers or None
    return None


def run(args: argparse.Namespace, clients: Clients, out: TextIO, err: TextIO,
        progress: Optional[bool] = None) -> int:
    """Run one performance test; ``progress`` None: a bar when ``err`` is a terminal. -> the exit status."""
    show = _isatty(err) if progress is None else progress
    try:
        if args.perf_command == "produce":
            return _produce(args, clients, out, err, show)
        return _consume(args, clients, out, err, show)
    except KeyboardInterrupt:
        return 130
    except (errors.PylogqError, OSError, ValueError, TypeError) as exc:
        return report_error(err, exc)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """A progress bar on a stream, or nothing when asked not to or when tqdm is not installed.

    ``write`` prints a line to another stream without tearing the bar.
    Used from one thread.
    """

    def __init__(self, total: int, unit: str, stream: TextIO, enabled: bool) -> None:
        self._bar: Any = None
        if enabled:
            try:
                tqdm = importlib.import_module("tqdm").tqdm
            except ImportError:
                tqdm = None  # an optional dependency: no bar, the same lines
            if tqdm is not None:
                self._bar = tqdm(total=total, unit=unit, unit_scale=True, file=stream, dynamic_ncols=True,
                                 mininterval=0.2, leave=True)
        self._done = 0

    @property
    def enabled(self) -> bool:
        return self._bar is not None

    def update_to(self, done: int) -> None:
        if self._bar is not None and done > self._done:
            self._bar.update(done - self._done)
            self._done = done

    def write(self, line: str, stream: TextIO) -> None:
        if self._bar is not None:
            self._bar.write(line, file=stream)
        else:
            stream.write(line + "\n")
        stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


# -- produce ---------------------------------------------------------------------------------------


class ProducerStats:
    """Kafka's ProducerPerformance.Stats: totals, sampled latencies and the current window.

    ``record`` and ``record_run`` run on the producer's sender thread and
    ``window_line`` / ``total_line`` on the tool's, so all go through one lock.
    """

    def __init__(self, num_records: int, reporting_interval_ms: int, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._clock = self.clock = clock
        self._lock = threading.Lock()
        self.start = clock()
        self.sampling = max(1, num_records // min(num_records, _MAX_SAMPLES))
        self.latencies: List[int] = []
        self.count = 0
        self.bytes = 0
        self.max_latency = 0.0
        self.total_latency = 0.0
        self.interval = reporting_interval_ms / 1000.0
        self._reset_window(self.start)

    def _reset_window(self, now: float) -> None:
        self.window_start = now
        self.window_count = 0
        self.window_bytes = 0
        self.window_max = 0.0
        self.window_total = 0.0

    def record(self, index: int, latency_ms: float, size: int) -> None:
        """One acknowledged record: the ``index``-th sent, ``latency_ms`` after its send."""
        with self._lock:
            self.count += 1
            self.bytes += size
            self.total_latency += latency_ms
            if latency_ms > self.max_latency:
                self.max_latency = latency_ms
            self.window_count += 1
            self.window_bytes += size
            self.window_total += latency_ms
            if latency_ms > self.window_max:
                self.window_max = latency_ms
            if index % self.sampling == 0:
                self.latencies.append(int(latency_ms))

    def record_run(self, first: int, sent_at: List[float], size: int) -> None:
        """Records ``first``, ``first + 1``, ... acknowledged now, sent at the (ascending) times ``sent_at``.

        Each record's latency is now minus its send time, as if recorded one by
        one; ``size`` is their bytes in all.
        """
        count = len(sent_at)
        if not count:
            return
        now = self._clock()
        total = (now * count - sum(sent_at)) * 1000.0
        peak = (now - sent_at[0]) * 1000.0
        sampling = self.sampling
        start = -first % sampling  # the run's first record whose index is a multiple of sampling
        samples = [int((now - t) * 1000.0) for t in sent_at[start::sampling]]
        with self._lock:
            self.count += count
            self.bytes += size
            self.total_latency += total
            if peak > self.max_latency:
                self.max_latency = peak
            self.window_count += count
            self.window_bytes += size
            self.window_total += total
            if peak > self.window_max:
                self.window_max = peak
            self.latencies.extend(samples)

    def window_line(self) -> Optional[str]:
        """The window line once ``interval`` has passed since the window began (then a new one begins)."""
        now = self._clock()
        with self._lock:
            if now - self.window_start < self.interval or not self.window_count:
                return None
            elapsed = now - self.window_start
            line = "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency." % (
                self.window_count, self.window_count / elapsed, self.window_bytes / MB / elapsed,
                self.window_total / self.window_count, self.window_max)
            self._reset_window(now)
            return line

    def total_line(self) -> str:
        now = self._clock()
        with self._lock:
            elapsed = max(now - self.start, 1e-9)
            samples = sorted(self.latencies)

            def percentile(p: float) -> int:
                return samples[min(len(samples) - 1, int(p * len(samples)))] if samples else 0

            avg = self.total_latency / self.count if self.count else 0.0
            return ("%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, "
                    "%d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th." % (
                        self.count, self.count / elapsed, self.bytes / MB / elapsed, avg, self.max_latency,
                        percentile(0.5), percentile(0.95), percentile(0.99), percentile(0.999)))


def _payloads(args: argparse.Namespace) -> List[bytes]:
    if args.record_size is not None:
        rng = random.Random()
        return [bytes(rng.randrange(65, 91) for _ in range(args.record_size))]
    try:
        with open(args.payload_file, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise CommandError("cannot read --payload-file %s: %s" % (args.payload_file, exc.strerror or exc)) from None
    delimiter = args.payload_delimiter.replace("\\n", "\n").replace("\\t", "\t").encode("utf-8")
    if not delimiter:
        raise CommandError("--payload-delimiter must not be empty")
    payloads = [p for p in data.split(delimiter) if p]
    if not payloads:
        raise CommandError("--payload-file %s holds no payloads" % args.payload_file)
    return payloads


class _Runs:
    """The records sent, in runs that share a producer batch: one batch callback per run.

    Used from the sending thread; each run's callback hands it to the stats
    (on the producer's sender thread) or counts it failed.
    """

    def __init__(self, stats: ProducerStats) -> None:
        self.stats = stats
        self.failures: List[BaseException] = []
        self.failed = 0
        self.batch: Optional[ProducerBatch] = None
        self.first = 0
        self.sent_at: List[float] = []

    def switch(self, batch: ProducerBatch, index: int, size: int) -> List[float]:
        """End the current run, whose records hold ``size`` bytes, and begin one at record ``index``
        in ``batch``; -> the list for the new run's send times."""
        self.end(size)
        self.batch = batch
        self.first = index
        self.sent_at = []
        return self.sent_at

    def end(self, size: int) -> None:
        """End the current run, whose records hold ``size`` bytes: its batch's callback takes it."""
        batch = self.batch
        if batch is None:
            return
        self.batch = None
        first, sent_at = self.first, self.sent_at
        stats, failures = self.stats, self.failures

        def done(finished: ProducerBatch) -> None:
            if finished.error is None:
                stats.record_run(first, sent_at, size)
            else:
                if not failures:
                    failures.append(finished.error)
                self.failed += len(sent_at)

        batch.add_done_callback(done)


def _produce(args: argparse.Namespace, clients: Clients, out: TextIO, err: TextIO, show: bool) -> int:
    payloads = _payloads(args)
    producer = clients.producer(**client_settings(args.producer_config, args.producer_props, "--producer-props", err))
    total = args.num_records
    stats = ProducerStats(total, args.reporting_interval)
    bar = Progress(total, "records", err, show)
    runs = _Runs(stats)
    rng = random.Random()
    single = payloads[0] if len(payloads) == 1 else None
    throughput = args.throughput
    clock = stats.clock
    sleep = time.sleep
    send = producer.send
    topic = args.topic
    try:
        # A stop request is taken between sends, never inside one (see _interrupts).
        with _interrupts.deferred():
            start = stats.start = clock()
            stats._reset_window(start)
            sent_at = runs.sent_at
            run_bytes = 0
            current = None
            for i in range(total):
                value = single if single is not None else payloads[rng.randrange(len(payloads))]
                now = clock()
                batch = send(topic, value).batch
                if batch is not current:
                    sent_at = runs.switch(batch, i, run_bytes)
                    current, run_bytes = batch, 0
                    check = True
                else:
                    check = i & 1023 == 1023
                sent_at.append(now)
                run_bytes += len(value)
                if check:  # every 1024 records and at every new batch (which a throttled test reaches sooner)
                    bar.update_to(i + 1)
                    line = stats.window_line()
                    if line is not None:
                        bar.write(line, out)
                    _interrupts.check()
                if throughput > 0:
                    ahead = start + (i + 1) / throughput - clock()
                    if ahead > 0:
                        sleep(ahead)  # throttling to the requested rate, as Kafka's ThroughputThrottler
            runs.end(run_bytes)
            _interrupts.flush(producer)
            bar.update_to(total)
    finally:
        bar.close()
    out.write(stats.total_line() + "\n")
    out.flush()
    if runs.failures:
        err.write("%d records failed; the first error: %s\n" % (runs.failed, runs.failures[0]))
        return 1
    return 0


# -- consume ---------------------------------------------------------------------------------------


def _timestamp(epoch_s: float) -> str:
    """Kafka's ``yyyy-MM-dd HH:mm:ss:SSS`` in local time."""
    return time.strftime(_DATE_FORMAT, time.localtime(epoch_s)) + ":%03d" % int((epoch_s % 1) * 1000)


def _consume(args: argparse.Namespace, clients: Clients, out: TextIO, err: TextIO, show: bool) -> int:
    configs = client_settings(args.consumer_config, args.consumer_property, "--consumer-property", err)
    configs.setdefault("enable_auto_commit", args.group is not None)
    configs.setdefault("auto_offset_reset", "latest" if args.from_latest else "earliest")
    if args.fetch_size is not None:
        configs.setdefault("max_partition_fetch_bytes", args.fetch_size)
    if args.group is not None:
        configs["group_id"] = args.group
    wanted = args.messages
    configs.setdefault("max_poll_records", min(wanted, 10000))
    consumer = clients.consumer(**configs)
    partitions = consumer.partitions_for_topic(args.topic)
    if partitions is None:
        raise CommandError("Topic '%s' does not exist" % args.topic)
    if args.group is not None:
        consumer.subscribe([args.topic])
    else:
        tps = [TopicPartition(args.topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        if args.from_latest:
            consumer.seek_to_end()
        else:
            consumer.seek_to_beginning()
    if not args.hide_header:
        out.write("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec\n"
                  if args.show_detailed_stats else
                  "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec\n")
        out.flush()
    bar = Progress(wanted, "msg", err, show)
    count = 0
    nbytes = 0
    timeout_s = args.timeout / 1000.0
    interval_s = args.reporting_interval / 1000.0
    start_wall = time.time()
    start = last_record = window_start = time.monotonic()
    window_count = window_bytes = 0
    try:
        while count < wanted:
            now = time.monotonic()
            left = last_record + timeout_s - now
            if left <= 0:
                break
            with _interrupts.deferred():
                batch = consumer.poll(timeout_ms=max(1, int(min(left, 0.5) * 1000)),
                                      max_records=min(wanted - count, 10000))
            if batch:
                for records in batch.values():
                    count += len(records)
                    for r in records:
                        nbytes += max(0, r.serialized_key_size) + max(0, r.serialized_value_size)
                last_record = time.monotonic()
                bar.update_to(count)
            if args.show_detailed_stats and time.monotonic() - window_start >= interval_s:
                now = time.monotonic()
                elapsed = now - window_start
                bar.write("%s, %d, %.4f, %.4f, %d, %.4f" % (
                    _timestamp(time.time()), 0, nbytes / MB, (nbytes - window_bytes) / MB / elapsed, count,
                    (count - window_count) / elapsed), out)
                window_start, window_count, window_bytes = now, count, nbytes
    finally:
        bar.close()
    elapsed = max(time.monotonic() - start, 1e-9)
    end_wall = start_wall + elapsed
    if count < wanted:
        err.write("WARNING: Exiting before consuming the expected number of messages: timeout (%d ms) exceeded. "
                  "You can use the --timeout option to increase the timeout.\n" % args.timeout)
    if not args.show_detailed_stats:
        out.write("%s, %s, %.4f, %.4f, %d, %.4f\n" % (
            _timestamp(start_wall), _timestamp(end_wall), nbytes / MB, nbytes / MB / elapsed, count, count / elapsed))
    out.flush()
    return 0
