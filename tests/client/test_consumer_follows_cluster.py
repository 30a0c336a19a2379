"""Consumers following a ``pylogq-broker`` process's topics: issue 30's acceptance, over real sockets.

The console consumer (``python -m pylogq consume``, a child process) and
``pylogq.Consumer`` (over TCP, in a thread of this process) start before their
topic exists; the topic is then created and written, and both must print the
records. A pattern subscription must pick up a second matching topic (by its
refresh every ``metadata_max_age_ms``, set short: Kafka's default of five
minutes would outlast the deadline); partitions added with CreatePartitions
must be consumed, with a group and without. Each test has a broker of its own
(a fresh data directory, so nothing else asks for its topics); the broker must
exit 0 on SIGTERM. Waits are polls of a condition with a generous deadline; no
assertion is on how long anything took.

That the console consumer has looked for the topic before it is created is
read from the broker's ``/metrics``: a Metadata request answered
UNKNOWN_TOPIC_OR_PARTITION, which only that consumer can have sent then.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from pylogq import AdminClient, Consumer, Producer
from pylogq.client.admin import NewPartitions, NewTopic
from pylogq.client.consumer import ConsumerRebalanceListener, ConsumerRecord

from ..server.conftest import BrokerProcess
from .test_consumer_metadata import assigned_within, poll_until, tps

DEADLINE_S = 60.0
_UNKNOWN_TOPIC_LOOKUPS = re.compile(
    r'^kafka_network_requestmetrics_errors_total\{error="UNKNOWN_TOPIC_OR_PARTITION",request="Metadata"\} (\S+)$',
    re.MULTILINE)


class _Broker(BrokerProcess):
    """A ``pylogq-broker`` process serving ``/metrics`` too."""

    def __init__(self, base: Path) -> None:
        super().__init__(base / "data", base / "broker.log", "metrics.listener=http://127.0.0.1:0")
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode().strip()
        prefix = "pylogq-broker 0 metrics on "
        assert line.startswith(prefix), line
        self.metrics_url = line[len(prefix):]

    def unknown_topic_lookups(self) -> float:
        """How many Metadata requests named a topic that does not exist."""
        with urllib.request.urlopen(self.metrics_url, timeout=30) as response:
            text = response.read().decode()
        return sum(float(v) for v in _UNKNOWN_TOPIC_LOOKUPS.findall(text))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[_Broker]:
    process = _Broker(tmp_path)
    try:
        yield process
    finally:
        status = process.stop()
        assert status == 0, "pylogq-broker exited with %s after SIGTERM; its log:\n%s" % (status, process.log())
        assert "Traceback" not in process.log(), process.log()


class _GroupConsumer(threading.Thread):
    """``pylogq.Consumer`` in a group, subscribed to ``topic`` and polling until it has ``count`` records."""

    def __init__(self, bootstrap: str, topic: str, count: int) -> None:
        super().__init__(name="group-consumer", daemon=True)
        self.cond = threading.Condition()
        self.joined = False  # a first assignment (of nothing: the topic does not exist) came
        self.records: List[ConsumerRecord] = []
        self.error: Any = None
        self.stop = False
        self.consumer = Consumer(bootstrap_servers=bootstrap, group_id="late-readers", auto_offset_reset="earliest",
                                 metadata_max_age_ms=500, enable_auto_commit=False)
        outer = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_assigned(self, assigned: Any) -> None:
                with outer.cond:
                    outer.joined = True
                    outer.cond.notify_all()

        self.consumer.subscribe([topic], listener=Listener())
        self.count = count

    def run(self) -> None:
        try:
            while True:
                with self.cond:
                    if self.stop or len(self.records) >= self.count:
                        return
                polled = self.consumer.poll(timeout_ms=100)
                with self.cond:
                    for records in polled.values():
                        self.records.extend(records)
                    self.cond.notify_all()
        except BaseException as exc:  # reported by the test's thread
            with self.cond:
                self.error = exc
                self.cond.notify_all()
        finally:
            self.consumer.close()


def test_console_and_group_consumers_started_before_the_topic_print_its_records(broker: _Broker) -> None:
    expected = sorted(b"record-%02d" % i for i in range(50))
    console = subprocess.Popen(
        [sys.executable, "-m", "pylogq", "consume", "--topic", "late", "--from-beginning", "--max-messages", "50",
         "--consumer-property", "metadata.max.age.ms=500", "--bootstrap-server", broker.bootstrap],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    group = None
    try:
        deadline = time.monotonic() + DEADLINE_S
        while broker.unknown_topic_lookups() < 1:
            assert console.poll() is None, console.communicate()
            assert time.monotonic() < deadline, "the console consumer never asked for its topic"
            time.sleep(0.05)  # a scrape interval, not a synchronization: the condition is re-read
        group = _GroupConsumer(broker.bootstrap, "late", 50)
        group.start()
        with group.cond:
            assert group.cond.wait_for(lambda: group.joined or group.error is not None, DEADLINE_S)
            assert group.error is None, group.error
            assert group.consumer.assignment() == set()

        with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("late", 2, 1)])
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            for i in range(50):
                producer.send("late", b"record-%02d" % i, partition=i % 2)
            producer.flush()

        out, err = console.communicate(timeout=DEADLINE_S)
        assert console.returncode == 0, err
        assert sorted(out.splitlines()) == expected
        assert b"Processed a total of 50 messages" in err
        with group.cond:
            assert group.cond.wait_for(lambda: len(group.records) >= 50 or group.error is not None, DEADLINE_S)
            assert group.error is None, group.error
            assert sorted(r.value for r in group.records) == expected
    finally:
        if console.poll() is None:
            console.kill()
            console.communicate()
        if group is not None:
            with group.cond:
                group.stop = True
            group.join(DEADLINE_S)


@pytest.mark.parametrize("group_id", [None, "pattern-readers"], ids=["no-group", "group"])
def test_pattern_subscription_picks_up_a_second_topic_at_a_metadata_refresh(broker: _Broker,
                                                                          group_id: Any) -> None:
    max_age_ms = 500
    with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("metrics-a", 1, 1), NewTopic("other", 1, 1)])
        with Consumer(bootstrap_servers=broker.bootstrap, group_id=group_id, auto_offset_reset="earliest",
                      metadata_max_age_ms=max_age_ms) as consumer:
            consumer.subscribe(pattern="metrics-.*")
            assert assigned_within(consumer, tps("metrics-a", 1)), consumer.assignment()
            admin.create_topics([NewTopic("metrics-b", 2, 1)])
            # Picked up by a metadata refresh (every max_age_ms): nothing else tells the consumer.
            assert assigned_within(consumer, tps("metrics-a", 1) | tps("metrics-b", 2), DEADLINE_S), \
                consumer.assignment()
            with Producer(bootstrap_servers=broker.bootstrap) as producer:
                producer.send("metrics-b", b"second", partition=1).get(timeout=DEADLINE_S)
            assert [r.value for r in poll_until(consumer, bool)] == [b"second"]


@pytest.mark.parametrize("group_id", [None, "growing-readers"], ids=["no-group", "group"])
def test_partitions_added_to_a_subscribed_topic_are_consumed(broker: _Broker, group_id: Any) -> None:
    with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("grows", 1, 1)])
        with Consumer("grows", bootstrap_servers=broker.bootstrap, group_id=group_id, auto_offset_reset="earliest",
                      metadata_max_age_ms=500) as consumer:
            assert assigned_within(consumer, tps("grows", 1))
            admin.create_partitions({"grows": NewPartitions(3)})
            with Producer(bootstrap_servers=broker.bootstrap) as producer:
                for p in range(3):
                    producer.send("grows", b"p%d" % p, partition=p)
                producer.flush()
            got = poll_until(consumer, lambda r: len(r) >= 3)
            assert sorted(r.value for r in got) == [b"p0", b"p1", b"p2"]
            assert consumer.assignment() == tps("grows", 3)


def test_console_consumer_of_an_illegal_topic_name_exits_with_the_reason(broker: _Broker) -> None:
    done = subprocess.run([sys.executable, "-m", "pylogq", "consume", "--topic", "bad/name",
                           "--bootstrap-server", broker.bootstrap],
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=DEADLINE_S)
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "bad/name" in err and "'/'" in err, err
    assert done.stdout == b""
