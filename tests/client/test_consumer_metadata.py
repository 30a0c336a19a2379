"""``pylogq.Consumer`` following the cluster: topics created, deleted and grown after it subscribed.

Each body runs twice, as the uvloop suites bind one body to each backend: with
``broker=`` (the in-process transport) and with ``bootstrap_servers=`` of the
same broker served on a free loopback port (the TCP transport). A consumer
polls in the test's thread; every wait is a poll loop on a condition with a
deadline, and no assertion is on how long anything took (a new topic is picked
up by the refresh every ``metadata_max_age_ms``: with Kafka's default of five
minutes it would not be within the deadline). The same behaviour against
``pylogq-broker`` processes and the console consumer is in
``test_consumer_follows_cluster.py``.
"""

from __future__ import annotations

import io
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Set

import pytest

import pylogq
from pylogq.cli.clients import Clients
from pylogq.cli.main import run
from pylogq.client.consumer import Consumer, ConsumerRecord, TopicPartition
from pylogq.cluster.broker.in_process import InProcessTransport
from pylogq.errors import ConfigError, InvalidTopicError, LeaderNotAvailableError
from pylogq.records import build_batch

DEADLINE_S = 30.0
GROUP: Dict[str, Any] = dict(group_id="g", session_timeout_ms=6000, heartbeat_interval_ms=100)


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[pylogq.Broker]:
    with pylogq.Broker(str(tmp_path / "data"), group_initial_rebalance_delay_ms=0,
                       group_min_session_timeout_ms=100) as b:
        yield b


@pytest.fixture(params=["in-process", "tcp"])
def where(request: pytest.FixtureRequest, broker: pylogq.Broker) -> Dict[str, Any]:
    """The keyword that points a client at ``broker``: ``broker=`` or ``bootstrap_servers=``."""
    if request.param == "in-process":
        return {"broker": broker}
    host, port = broker.serve("127.0.0.1", 0)
    return {"bootstrap_servers": "%s:%d" % (host, port)}


def produce(broker: pylogq.Broker, topic: str, partition: int, values: List[bytes]) -> None:
    broker.produce(topic, partition, build_batch(values))


def poll_until(consumer: Consumer, done: Callable[[List[ConsumerRecord]], bool],
               timeout_s: float = DEADLINE_S) -> List[ConsumerRecord]:
    """Poll, collecting records, until ``done(records)`` or the deadline."""
    out: List[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while not done(out) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=100).values():
            out.extend(records)
    return out


def assigned_within(consumer: Consumer, wanted: Set[TopicPartition], timeout_s: float = DEADLINE_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while consumer.assignment() != wanted:
        if time.monotonic() >= deadline:
            return False
        consumer.poll(timeout_ms=50)
    return True


def tps(topic: str, count: int) -> Set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(count)}


@pytest.mark.parametrize("group", [False, True], ids=["no-group", "group"])
def test_topic_created_after_subscribing_is_consumed(broker: pylogq.Broker, where: Dict[str, Any],
                                                     group: bool) -> None:
    # metadata_max_age_ms stays Kafka's 300000: a subscribed topic that is missing is asked for
    # again after retry_backoff_ms, doubling up to a second, as Kafka's consumer does.
    with Consumer("late", auto_offset_reset="earliest", **(GROUP if group else {}), **where) as c:
        assert c.poll(timeout_ms=200) == {}
        assert c.assignment() == set()
        broker.create_topic("late", 2)
        for p in range(2):
            produce(broker, "late", p, [b"%d-%d" % (p, i) for i in range(25)])
        got = poll_until(c, lambda r: len(r) >= 50)
        assert sorted(r.value for r in got) == sorted(b"%d-%d" % (p, i) for p in range(2) for i in range(25))
        assert c.assignment() == tps("late", 2)


@pytest.mark.parametrize("group", [False, True], ids=["no-group", "group"])
def test_pattern_follows_created_and_deleted_topics(broker: pylogq.Broker, where: Dict[str, Any],
                                                    group: bool) -> None:
    max_age_ms = 500
    broker.create_topic("logs-a", 1)
    broker.create_topic("other", 1)
    with Consumer(auto_offset_reset="earliest", metadata_max_age_ms=max_age_ms, **(GROUP if group else {}),
                  **where) as c:
        c.subscribe(pattern="logs-.*")
        assert assigned_within(c, tps("logs-a", 1))
        broker.create_topic("logs-b", 2)
        # Picked up by a metadata refresh (every max_age_ms): nothing else tells the consumer.
        assert assigned_within(c, tps("logs-a", 1) | tps("logs-b", 2))
        assert c.subscription() == {"logs-a", "logs-b"}
        produce(broker, "logs-b", 1, [b"b"])
        assert [r.value for r in poll_until(c, bool)] == [b"b"]
        broker.delete_topic("logs-a")
        assert assigned_within(c, tps("logs-b", 2))
        assert c.subscription() == {"logs-b"}


@pytest.mark.parametrize("group", [False, True], ids=["no-group", "group"])
def test_added_partitions_are_consumed(broker: pylogq.Broker, where: Dict[str, Any], group: bool) -> None:
    broker.create_topic("grows", 1)
    with Consumer("grows", auto_offset_reset="earliest", metadata_max_age_ms=200, **(GROUP if group else {}),
                  **where) as c:
        assert assigned_within(c, tps("grows", 1))
        broker.create_partitions("grows", 3)
        for p in range(3):
            produce(broker, "grows", p, [b"p%d" % p])
        got = poll_until(c, lambda r: len(r) >= 3)
        assert sorted(r.value for r in got) == [b"p0", b"p1", b"p2"]
        assert c.assignment() == tps("grows", 3)


def test_group_of_two_rebalances_over_added_partitions(broker: pylogq.Broker, where: Dict[str, Any]) -> None:
    """Only the leader compares the metadata with its assignment (Kafka's rule); the other member
    learns of the rebalance from its heartbeat and rejoins: four partitions end up two and two."""
    broker.create_topic("grows", 2)
    cond = threading.Condition()
    assignments: Dict[str, Set[TopicPartition]] = {}
    stop = threading.Event()
    errors: List[BaseException] = []

    def member(name: str) -> None:
        try:
            with Consumer("grows", client_id=name, metadata_max_age_ms=200, **GROUP, **where) as c:
                while not stop.is_set():
                    c.poll(timeout_ms=50)
                    with cond:
                        if assignments.get(name) != c.assignment():
                            assignments[name] = c.assignment()
                            cond.notify_all()
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    def split(total: int) -> bool:
        sets = list(assignments.values())
        return (len(sets) == 2 and all(len(s) == total // 2 for s in sets)
                and set().union(*sets) == tps("grows", total))

    threads = [threading.Thread(target=member, args=("m%d" % i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        with cond:
            assert cond.wait_for(lambda: split(2), DEADLINE_S), assignments
        broker.create_partitions("grows", 4)
        with cond:
            assert cond.wait_for(lambda: split(4), DEADLINE_S), assignments
    finally:
        stop.set()
        for t in threads:
            t.join(DEADLINE_S)
    assert not errors, errors


def test_deleted_topic_leaves_the_assignment_on_the_fetch_error(broker: pylogq.Broker,
                                                                where: Dict[str, Any]) -> None:
    # With Kafka's 300 s metadata age, only the fetch's UNKNOWN_TOPIC_OR_PARTITION can prompt the refresh.
    broker.create_topic("a", 1)
    broker.create_topic("b", 1)
    with Consumer("a", "b", auto_offset_reset="earliest", **where) as c:
        assert assigned_within(c, tps("a", 1) | tps("b", 1))
        broker.delete_topic("a")
        assert assigned_within(c, tps("b", 1))
        produce(broker, "b", 0, [b"still"])
        assert [r.value for r in poll_until(c, bool)] == [b"still"]


class _CountingTransport(InProcessTransport):
    """Counts the metadata lookups of each topic."""

    def __init__(self, broker: pylogq.Broker) -> None:
        super().__init__(broker)
        self.lookups: Dict[str, int] = {}

    def partitions_for(self, topic: str, create: bool = False) -> Optional[int]:
        self.lookups[topic] = self.lookups.get(topic, 0) + 1
        return super().partitions_for(topic, create)


@pytest.mark.parametrize("group", [False, True], ids=["no-group", "group"])
def test_metadata_is_read_again_every_max_age(broker: pylogq.Broker, group: bool) -> None:
    broker.create_topic("t", 1)
    often = _CountingTransport(broker)
    with Consumer("t", broker=often, metadata_max_age_ms=100, **(GROUP if group else {})) as c:
        deadline = time.monotonic() + DEADLINE_S
        while often.lookups.get("t", 0) < 4 and time.monotonic() < deadline:
            c.poll(timeout_ms=100)
        assert often.lookups.get("t", 0) >= 4
    rarely = _CountingTransport(broker)
    with Consumer("t", broker=rarely, **(GROUP if group else {})) as c:  # Kafka's 300000 ms
        assert assigned_within(c, tps("t", 1))
        for _ in range(5):
            c.poll(timeout_ms=100)
        assert rarely.lookups["t"] == 1  # the first poll's (the assignment's) lookup only


class _LeaderNotYetKnown(InProcessTransport):
    """Answers the first offset lookups of each partition LEADER_NOT_AVAILABLE, as a broker does
    for a topic whose creation has not reached it yet."""

    def __init__(self, broker: pylogq.Broker, failures: int) -> None:
        super().__init__(broker)
        self.failures = failures

    def list_offsets(self, topic: str, partition: int, timestamp: int,
                     isolation_level: str = "read_uncommitted") -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise LeaderNotAvailableError("%s-%d has no leader yet" % (topic, partition))
        return super().list_offsets(topic, partition, timestamp, isolation_level)


def test_offset_reset_retries_a_retriable_failure(broker: pylogq.Broker) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"x"])
    transport = _LeaderNotYetKnown(broker, failures=3)
    with Consumer("t", broker=transport, auto_offset_reset="earliest", retry_backoff_ms=10) as c:
        assert [r.value for r in poll_until(c, bool)] == [b"x"]
    assert transport.failures == 0


# -- configuration and illegal names -------------------------------------------------------------


def test_metadata_max_age_ms_is_checked(broker: pylogq.Broker) -> None:
    with pytest.raises(ConfigError, match="metadata_max_age_ms"):
        Consumer(broker=broker, metadata_max_age_ms=-1)
    with Consumer(broker=broker, metadata_max_age_ms=1000) as c:
        assert c.metadata_max_age_ms == 1000
    with Consumer(broker=broker) as c:
        assert c.metadata_max_age_ms == 300000  # Kafka's default


@pytest.mark.parametrize("name, reason", [
    ("bad/name", "contains '/'"),
    ("", "cannot be empty"),
    ("..", "cannot be '.' or '..'"),
    ("x" * 250, "the limit is 249"),
])
def test_an_illegal_topic_name_fails_at_once_with_the_reason(broker: pylogq.Broker, where: Dict[str, Any],
                                                             name: str, reason: str) -> None:
    with pytest.raises(InvalidTopicError, match=reason) as raised:
        Consumer(name, **where)
    assert name[:20] in str(raised.value)
    with Consumer(**where) as c:
        with pytest.raises(InvalidTopicError, match=reason):
            c.subscribe([name])
        with pytest.raises(InvalidTopicError, match=reason):
            c.assign([TopicPartition(name, 0)])
        with pytest.raises(InvalidTopicError, match=reason):
            c.partitions_for_topic(name)
        assert c.subscription() is None and c.assignment() == set()


def test_console_consumer_of_an_illegal_topic_exits_with_the_reason(broker: pylogq.Broker) -> None:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    err = io.StringIO()
    # --timeout-ms only bounds a regression: the consumer that waited for ever would end after it, status 0.
    status = run(["consume", "--topic", "bad/name", "--timeout-ms", "30000"], clients=Clients(broker=broker),
                 stdin=io.BytesIO(), stdout=out, stderr=err)
    assert status == 1
    assert "bad/name" in err.getvalue() and "'/'" in err.getvalue(), err.getvalue()
    assert raw.getvalue() == b""
