"""The producer over the wire with its defaults, against confluent-kafka's, on one ``pylogq-broker``.

One broker subprocess (benchmarks/peers.py) serves the whole module; every
round sends N keyless records with the same 100-byte value into a fresh
one-partition topic (the previous round's deleted first), each client with
its own defaults, and ends when every record is acknowledged.

Group "network produce 100B defaults", the peer being confluent-kafka 2's
``Producer`` with librdkafka's defaults, in the loop its documentation
shows: ``produce()`` then ``poll(0)`` per record (which serves delivery
reports; no delivery callback is set), then ``flush()``. Rows:
- ``pylogq perf produce --num-records N --record-size 100 --throughput -1``,
  run in this process through ``pylogq.cli.main.run`` (its output parsed and
  checked; the round includes the producer's connection, a few ms).
  Target >= 500k records/s.
- ``pylogq.Producer(bootstrap_servers=...)``: ``send(topic, value)`` per
  record, then ``flush()``. Target >= 0.8x confluent-kafka.
- confluent-kafka's loop without ``poll(0)`` (``produce()`` alone, a
  ``poll`` only when its queue is full), for scale: its fastest Python loop.

Rounds alternate as in test_server.py: before each of a pylogq row's timed
rounds, one round of the peer runs in the untimed setup and is timed on its
own, so both meet the same drifts of this shared machine's speed; the summary's
"alt" ratio compares those. One untimed warm-up round comes first. Python's
garbage collector stays on: these are the loops a user writes.

N is 300,000 (the workload of the issue that asked for these figures);
in a smoke run (``--quick``, ``--benchmark-disable`` or ``PYLOGQ_NO_EXTENSIONS=1``) it is 20,000 and
each benchmark runs one round, so the smoke run stays quick.
"""

from __future__ import annotations

import io
import itertools
import os
import re
from typing import Any, List, Optional

from confluent_kafka import Producer as ConfluentProducer
from peers import BrokerProcess
from summary import alternate, info, smoke

from pylogq.cli.main import run as pylogq_cli
from pylogq.client.admin import AdminClient, NewTopic
from pylogq.client.consumer import Consumer, TopicPartition
from pylogq.client.producer import Producer

FULL = 300_000
SMOKE = 20_000
VALUE = os.urandom(100)
ROUNDS = 7
TIMEOUT = 60.0
GROUP = "network produce 100B defaults"
TOTAL_LINE = re.compile(r"(\d+) records sent, (\d+\.\d+) records/sec .*, (\d+\.\d\d) ms avg latency, "
                        r"(\d+\.\d\d) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.")

_names = itertools.count(1)


def _small(config: Any) -> bool:
    return smoke(config)


class Workload:
    """One client's rounds: ``prepare`` (untimed: a fresh topic, a connected client), ``run``
    (timed), ``finish`` (untimed: the client closed); ``check`` the last round after them all."""

    def __init__(self, server: BrokerProcess, admin: AdminClient, n: int) -> None:
        self.bootstrap = server.bootstrap
        self.admin = admin
        self.n = n
        self.topic: Optional[str] = None

    def prepare(self) -> None:
        self._drop_topic()
        self.topic = "produce-%d-%d" % (os.getpid(), next(_names))
        self.admin.create_topics([NewTopic(self.topic, 1, 1)])

    def run(self) -> Any:
        raise NotImplementedError

    def finish(self) -> None:
        """Release the round's client (its records were all acknowledged in ``run``)."""

    def check(self, result: Any) -> None:
        """The last round's topic holds exactly N records."""
        assert self.topic is not None
        tp = TopicPartition(self.topic, 0)
        with Consumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False) as consumer:
            assert consumer.end_offsets([tp])[tp] == self.n

    def close(self) -> None:
        self.finish()
        self._drop_topic()

    def _drop_topic(self) -> None:
        topic, self.topic = self.topic, None
        if topic is not None:
            self.admin.delete_topics([topic])


class PerfTool(Workload):
    """``pylogq perf produce`` with its defaults; -> the numbers of its total line."""

    def run(self) -> Any:
        assert self.topic is not None
        out, err = io.StringIO(), io.StringIO()
        status = pylogq_cli(["perf", "produce", "--bootstrap-server", self.bootstrap, "--topic", self.topic,
                             "--num-records", str(self.n), "--record-size", str(len(VALUE)), "--throughput", "-1"],
                            stdout=out, stderr=err, progress=False)
        assert status == 0, err.getvalue()
        match = TOTAL_LINE.fullmatch(out.getvalue().splitlines()[-1])
        assert match is not None, out.getvalue()
        return match.groups()

    def check(self, result: Any) -> None:
        count, rate, avg, peak, p50, p95, p99, p999 = result
        assert int(count) == self.n and float(rate) > 0
        assert int(p50) <= int(p95) <= int(p99) <= int(p999) <= float(peak)
        super().check(result)


class PylogqSend(Workload):
    """``pylogq.Producer`` with its defaults, ``send`` per record, then ``flush``."""

    producer: Optional[Producer] = None

    def prepare(self) -> None:
        super().prepare()
        assert self.topic is not None
        self.producer = Producer(bootstrap_servers=self.bootstrap)
        self.producer.partitions_for(self.topic)  # connected, metadata known

    def run(self) -> Any:
        producer, topic = self.producer, self.topic
        assert producer is not None and topic is not None
        send = producer.send
        future = None
        for _ in range(self.n):
            future = send(topic, VALUE)
        producer.flush(TIMEOUT)
        assert future is not None
        return future.get(0)

    def check(self, result: Any) -> None:
        assert result.offset == self.n - 1
        super().check(result)

    def finish(self) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            producer.close()


class Confluent(Workload):
    """confluent-kafka's ``Producer`` with librdkafka's defaults; ``poll(0)`` after each ``produce`` or not."""

    producer: Optional[ConfluentProducer] = None

    def __init__(self, server: BrokerProcess, admin: AdminClient, n: int, poll_each: bool) -> None:
        super().__init__(server, admin, n)
        self.poll_each = poll_each
        self.errors: List[Any] = []

    def prepare(self) -> None:
        super().prepare()

        def on_error(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(err)

        self.producer = ConfluentProducer({"bootstrap.servers": self.bootstrap, "on_delivery": on_error})
        self.producer.list_topics(self.topic, timeout=TIMEOUT)  # connected, metadata known

    def run(self) -> Any:
        producer, topic = self.producer, self.topic
        assert producer is not None and topic is not None
        produce, poll = producer.produce, producer.poll
        poll_each = self.poll_each
        for _ in range(self.n):
            while True:
                try:
                    produce(topic, VALUE)
                    break
                except BufferError:  # the queue (100,000 records by default) is full
                    poll(0.001)
            if poll_each:
                poll(0)
        left = producer.flush(TIMEOUT)
        assert left == 0, "%d records unacknowledged after %.0f s" % (left, TIMEOUT)
        return None

    def check(self, result: Any) -> None:
        assert not self.errors, self.errors[:3]
        super().check(result)

    def finish(self) -> None:
        self.producer = None


def measure(benchmark: Any, request: Any, own: Workload, peer: Optional[Workload]) -> None:
    """Time ``own``'s rounds, alternating with the ``peer``'s (summary.alternate; the module docstring)."""
    small = _small(request.config)
    try:
        result, peer_result = alternate(benchmark, own, peer, 1 if small else ROUNDS, 0 if small else 1)
        own.check(result)
        if isinstance(own, PerfTool):
            benchmark.extra_info["perf_total_line"] = dict(zip(
                ("records", "records_per_sec", "avg_ms", "max_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms"), result))
        if peer is not None:
            peer.check(peer_result)
    finally:
        own.close()
        if peer is not None:
            peer.close()


def _n(request: Any) -> int:
    return SMOKE if _small(request.config) else FULL


def test_perf_tool(benchmark: Any, request: Any, server: BrokerProcess, admin: AdminClient) -> None:
    n = _n(request)
    info(benchmark, GROUP, n, "records",
         target="perf produce >= 500k records/s; send() with defaults >= 0.8x confluent-kafka")
    measure(benchmark, request, PerfTool(server, admin, n), Confluent(server, admin, n, poll_each=True))


def test_send_defaults(benchmark: Any, request: Any, server: BrokerProcess, admin: AdminClient) -> None:
    n = _n(request)
    info(benchmark, GROUP, n, "records")
    measure(benchmark, request, PylogqSend(server, admin, n), Confluent(server, admin, n, poll_each=True))


def test_confluent_kafka(benchmark: Any, request: Any, server: BrokerProcess, admin: AdminClient) -> None:
    n = _n(request)
    info(benchmark, GROUP, n, "records", peer=True)
    measure(benchmark, request, Confluent(server, admin, n, poll_each=True), None)


def test_confluent_kafka_without_poll(benchmark: Any, request: Any, server: BrokerProcess,
                                      admin: AdminClient) -> None:
    n = _n(request)
    info(benchmark, GROUP, n, "records")
    measure(benchmark, request, Confluent(server, admin, n, poll_each=False), None)
