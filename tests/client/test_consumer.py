"""``pylogq.client.consumer.Consumer`` against a real in-process broker.

Group tests run each consumer in its own thread (a consumer is not
thread-safe) and wait for conditions with deadlines; nothing sleeps to
synchronize. The suite runs once per records implementation (compiled, then
``PYLOGQ_NO_EXTENSIONS=1``), which is what decodes the fetched regions.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set

import pytest

import pylogq
from pylogq.client.consumer import (
    Consumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)
from pylogq.cluster.broker.in_process import InProcessTransport
from pylogq.errors import (
    CommitFailedError,
    ConfigError,
    IllegalStateError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from pylogq.records import build_batch

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
DEADLINE_S = 30.0


@pytest.fixture
def broker(tmp_path: Any) -> Any:
    with pylogq.Broker(str(tmp_path / "data"), group_initial_rebalance_delay_ms=0,
                       group_min_session_timeout_ms=100) as b:
        yield b


def produce(broker: Any, topic: str, partition: int, values: List[Optional[bytes]], **kwargs: Any) -> int:
    return broker.produce(topic, partition, build_batch(values, **kwargs)).base_offset


def poll_all(consumer: Consumer, count: int, timeout_s: float = DEADLINE_S) -> List[ConsumerRecord]:
    """Poll until ``count`` records arrived (or the deadline passed)."""
    out: List[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            out.extend(records)
    return out


def values_of(records: List[ConsumerRecord]) -> List[Any]:
    return [r.value for r in records]


def wait_for(predicate: Callable[[], bool], cond: threading.Condition, timeout_s: float = DEADLINE_S) -> bool:
    deadline = time.monotonic() + timeout_s
    with cond:
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            cond.wait(remaining)
        return True


# -- configuration ----------------------------------------------------------------------------


def test_unknown_keyword_is_a_config_error_naming_it(broker: Any) -> None:
    with pytest.raises(ConfigError, match="fetch_max_wait"):
        Consumer(broker=broker, fetch_max_wait=5)


def test_bad_values_are_config_errors(broker: Any) -> None:
    with pytest.raises(ConfigError, match="auto_offset_reset"):
        Consumer(broker=broker, auto_offset_reset="first")
    with pytest.raises(ConfigError, match="isolation_level"):
        Consumer(broker=broker, isolation_level="serializable")
    with pytest.raises(ConfigError, match="max_poll_records"):
        Consumer(broker=broker, max_poll_records=0)
    with pytest.raises(ConfigError, match="heartbeat_interval_ms"):
        Consumer(broker=broker, session_timeout_ms=1000, heartbeat_interval_ms=1000)
    with pytest.raises(ConfigError, match="partition_assignment_strategy"):
        Consumer(broker=broker, partition_assignment_strategy=[object()])
    with pytest.raises(ConfigError, match="client_rack"):
        Consumer(broker=broker, client_rack=["rack-a"])


def test_client_rack_is_taken_as_a_string(broker: Any) -> None:
    """A properties file's ``client.rack=1`` reaches the keyword as an int (the tools type digits)."""
    for given, taken in (("us-east-1a", "us-east-1a"), (1, "1"), (None, None)):
        consumer = Consumer(broker=broker, client_rack=given)
        try:
            assert consumer.client_rack == taken
        finally:
            consumer.close()


def test_malformed_bootstrap_servers_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="bootstrap_servers"):
        Consumer(bootstrap_servers="localhost")  # no port


# -- assign, seek, poll -----------------------------------------------------------------------------


def test_assign_seek_poll_round_trip(broker: Any) -> None:
    broker.create_topic("t", 2)
    values: List[Optional[bytes]] = [b"v%d" % i for i in range(20)]
    values[3] = None
    keys: List[Optional[bytes]] = [b"k%d" % i for i in range(20)]
    keys[5] = None
    headers = [[("h", b"x%d" % i), ("n", None)] if i % 4 == 0 else [] for i in range(20)]
    timestamps = [1_600_000_000_000 + i for i in range(20)]
    produce(broker, "t", 0, values, keys=keys, headers=headers, timestamps=timestamps)
    with Consumer(broker=broker, auto_offset_reset="earliest") as c:
        c.assign([TP0, TP1])
        assert c.assignment() == {TP0, TP1}
        got = poll_all(c, 20)
        assert [r.offset for r in got] == list(range(20))
        assert values_of(got) == values
        assert [r.key for r in got] == keys
        assert [list(r.headers) for r in got] == headers
        assert got[0].headers == [("h", b"x0"), ("n", None)] and got[1].headers == ()  # shared, immutable
        assert [r.timestamp for r in got] == timestamps
        assert all(r.topic == "t" and r.partition == 0 and r.timestamp_type == 0 for r in got)
        assert got[3].serialized_value_size == -1 and got[5].serialized_key_size == -1
        assert got[0].serialized_key_size == 2 and got[0].serialized_value_size == 2
        assert got[0].serialized_header_size == len("h") + 2 + len("n") and got[1].serialized_header_size == -1
        assert c.position(TP0) == 20 and c.position(TP1) == 0
        c.seek(TP0, 7)
        again = poll_all(c, 13)
        assert [r.offset for r in again] == list(range(7, 20))
        assert c.poll(timeout_ms=0) == {}


def test_max_poll_records_keeps_the_rest_buffered(broker: Any) -> None:
    broker.create_topic("t", 2)
    produce(broker, "t", 0, [b"a%d" % i for i in range(30)])
    produce(broker, "t", 1, [b"b%d" % i for i in range(30)])
    with Consumer(broker=broker, auto_offset_reset="earliest", max_poll_records=7) as c:
        c.assign([TP0, TP1])
        seen: Dict[TopicPartition, List[int]] = {TP0: [], TP1: []}
        deadline = time.monotonic() + DEADLINE_S
        while sum(map(len, seen.values())) < 60 and time.monotonic() < deadline:
            polled = c.poll(timeout_ms=200)
            assert sum(map(len, polled.values())) <= 7
            for tp, records in polled.items():
                seen[tp].extend(r.offset for r in records)
                assert c.position(tp) == records[-1].offset + 1
        assert seen == {TP0: list(range(30)), TP1: list(range(30))}
        assert len(c.poll(timeout_ms=50, max_records=3)) == 0


def test_poll_returns_records_produced_while_waiting(broker: Any) -> None:
    broker.create_topic("t", 1)
    with Consumer(broker=broker, auto_offset_reset="earliest") as c:
        c.assign([TP0])
        assert c.position(TP0) == 0
        producer = threading.Thread(target=produce, args=(broker, "t", 0, [b"late"]))
        producer.start()
        got = poll_all(c, 1)
        producer.join()
        assert values_of(got) == [b"late"]


def test_deserializers(broker: Any) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"1", b"2", None], keys=[b"a", None, b"c"])
    with Consumer(broker=broker, auto_offset_reset="earliest", key_deserializer=bytes.decode,
                  value_deserializer=int) as c:
        c.assign([TP0])
        got = poll_all(c, 3)
        assert [(r.key, r.value) for r in got] == [("a", 1), (None, 2), ("c", None)]
        assert got[0].serialized_value_size == 1


def test_seek_to_beginning_end_and_offset_queries(broker: Any) -> None:
    broker.create_topic("t", 2)
    produce(broker, "t", 0, [b"x"] * 10)
    broker.delete_records("t", 0, 4)
    with Consumer(broker=broker) as c:
        c.assign([TP0, TP1])
        assert c.beginning_offsets([TP0, TP1]) == {TP0: 4, TP1: 0}
        assert c.end_offsets([TP0, TP1]) == {TP0: 10, TP1: 0}
        c.seek_to_beginning(TP0)
        assert c.position(TP0) == 4
        c.seek_to_end()
        assert c.position(TP0) == 10
        c.seek_to_beginning()
        assert [r.offset for r in poll_all(c, 6)] == list(range(4, 10))
        assert c.topics() == {"t"}
        assert c.partitions_for_topic("t") == {0, 1}
        assert c.partitions_for_topic("missing") is None
        assert "consumer-fetch-manager-metrics" in c.metrics()  # see tests/client/test_client_metrics.py
        with pytest.raises(IllegalStateError):
            c.seek(TopicPartition("t", 5), 0)
        with pytest.raises(ValueError):
            c.seek(TP0, -1)


def test_offsets_for_times(broker: Any) -> None:
    broker.create_topic("t", 2)
    for value, ts in ((b"a", 1000), (b"b", 2000), (b"c", 3000), (b"d", 4000)):
        produce(broker, "t", 0, [value], timestamps=[ts])
    with Consumer(broker=broker) as c:
        found = c.offsets_for_times({TP0: 2500, TP1: 0})
        assert found == {TP0: OffsetAndTimestamp(2, 3000, -1), TP1: None}
        assert c.offsets_for_times({TP0: 0})[TP0] == OffsetAndTimestamp(0, 1000, -1)
        assert c.offsets_for_times({TP0: 4001})[TP0] is None
        with pytest.raises(ValueError):
            c.offsets_for_times({TP0: -5})


# -- offset reset ----------------------------------------------------------------------------------


@pytest.mark.parametrize("reset, first", [("earliest", 0), ("latest", 5)])
def test_auto_offset_reset(broker: Any, reset: str, first: int) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"old%d" % i for i in range(5)])
    with Consumer(broker=broker, auto_offset_reset=reset) as c:
        c.assign([TP0])
        assert c.position(TP0) == first
        produce(broker, "t", 0, [b"new"])
        got = poll_all(c, 6 - first)
        assert [r.offset for r in got] == list(range(first, 6))


def test_auto_offset_reset_none_raises(broker: Any) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"x"])
    with Consumer(broker=broker, group_id="g", auto_offset_reset="none") as c:
        c.assign([TP0])
        with pytest.raises(NoOffsetForPartitionError, match="t-0"):
            c.poll(timeout_ms=100)
        assert issubclass(NoOffsetForPartitionError, OffsetOutOfRangeError)
        c.seek(TP0, 0)
        assert values_of(poll_all(c, 1)) == [b"x"]


@pytest.mark.parametrize("reset, expected", [("earliest", [6, 7, 8, 9, 10]), ("latest", [10])])
def test_position_deleted_by_retention_is_reset(broker: Any, reset: str, expected: List[int]) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"r%d" % i for i in range(10)])
    with Consumer(broker=broker, auto_offset_reset=reset) as c:
        c.assign([TP0])
        c.seek(TP0, 2)
        broker.delete_records("t", 0, 6)
        got = poll_all(c, 4, timeout_s=0.5)
        assert c.position(TP0) == 10
        produce(broker, "t", 0, [b"after"])
        got += poll_all(c, 1)
        assert [r.offset for r in got] == expected


def test_position_deleted_by_retention_with_reset_none_raises(broker: Any) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"r%d" % i for i in range(10)])
    with Consumer(broker=broker, auto_offset_reset="none") as c:
        c.assign([TP0])
        c.seek(TP0, 2)
        broker.delete_records("t", 0, 6)
        with pytest.raises(OffsetOutOfRangeError, match="out of range"):
            c.poll(timeout_ms=1000)


class _ControlBatchTransport(InProcessTransport):
    """Appends a control batch (a transaction marker) to every non-empty fetched region."""

    marker = build_batch([b"\x00\x00\x00\x00\x00\x00"], keys=[b"\x00\x00\x00\x01"], is_control=True,
                         is_transactional=True, producer_id=7, producer_epoch=0)

    def fetch(self, requests: Any, *args: Any) -> Any:
        out = {}
        for tp, result in super().fetch(requests, *args).items():
            if result.records is not None and len(result.records):
                data = bytearray(result.records.read())
                marker = bytearray(self.marker)
                last = int.from_bytes(data[-len(data):][:8], "big")
                for info in __import__("pylogq").records.iter_batches(bytes(data)):
                    last = info.last_offset
                marker[0:8] = (last + 1).to_bytes(8, "big")
                region = _Region(bytes(data + marker))
                result = result._replace(records=region, high_watermark=result.high_watermark + 1)
            out[tp] = result
        return out


class _Region:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def read(self) -> bytes:
        return self.data


def test_control_batches_are_skipped_and_passed(broker: Any) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"a", b"b"])
    with Consumer(broker=_ControlBatchTransport(broker), auto_offset_reset="earliest") as c:
        c.assign([TP0])
        got = poll_all(c, 2)
        assert values_of(got) == [b"a", b"b"]
        assert c.position(TP0) == 3  # past the marker at offset 2


# -- commits -----------------------------------------------------------------------------------------


def test_commit_committed_and_restart_resumes(broker: Any) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"m%d" % i for i in range(10)])
    with Consumer(broker=broker, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([TP0])
        assert c.committed(TP0) is None
        first = c.poll(timeout_ms=5000, max_records=4)[TP0]
        assert [r.offset for r in first] == [0, 1, 2, 3]
        c.commit()
        assert c.committed(TP0) == 4
        second = c.poll(timeout_ms=5000, max_records=3)[TP0]
        assert [r.offset for r in second] == [4, 5, 6]  # not committed: the restart repeats these
        c.commit({TP0: OffsetAndMetadata(4, "meta", -1)})
        assert c.committed(TP0, metadata=True) == OffsetAndMetadata(4, "meta", -1)
    with Consumer(broker=broker, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([TP0])
        assert [r.offset for r in poll_all(c, 6)] == list(range(4, 10))


def test_auto_commit_on_close_and_on_poll(broker: Any) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"m%d" % i for i in range(5)])
    with Consumer("t", broker=broker, group_id="g", auto_offset_reset="earliest",
                  session_timeout_ms=6000) as c:
        assert len(poll_all(c, 5)) == 5
    with Consumer(broker=broker, group_id="g") as c:
        assert c.committed(TP0) == 5
        c.assign([TP0])
        produce(broker, "t", 0, [b"later"])
        assert values_of(poll_all(c, 1)) == [b"later"]
    with Consumer(broker=broker, group_id="g2", auto_offset_reset="earliest", auto_commit_interval_ms=0) as c:
        c.assign([TP0])
        poll_all(c, 6)
        c.poll(timeout_ms=0)
        assert c.committed(TP0) == 6
        c.close(autocommit=False)


def test_commit_async_calls_back(broker: Any) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"x", b"y"])
    calls: List[Any] = []
    with Consumer(broker=broker, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([TP0])
        poll_all(c, 2)
        future = c.commit_async(callback=lambda offsets, error: calls.append((offsets, error)))
        assert future.result(timeout=DEADLINE_S) is None
        assert calls == [({TP0: OffsetAndMetadata(2, "", -1)}, None)]
        assert c.committed(TP0) == 2


def test_commit_without_group_is_illegal(broker: Any) -> None:
    with Consumer(broker=broker) as c:
        with pytest.raises(IllegalStateError, match="group_id"):
            c.commit()
        with pytest.raises(IllegalStateError):
            c.committed(TP0)


# -- pause, iteration, idle polls ----------------------------------------------------------------------


def test_pause_and_resume(broker: Any) -> None:
    broker.create_topic("t", 2)
    produce(broker, "t", 0, [b"a0", b"a1"])
    produce(broker, "t", 1, [b"b0"])
    with Consumer(broker=broker, auto_offset_reset="earliest") as c:
        c.assign([TP0, TP1])
        c.pause(TP0)
        assert c.paused() == {TP0}
        got = poll_all(c, 1)
        assert values_of(got) == [b"b0"]
        assert c.poll(timeout_ms=100) == {}
        c.resume(TP0)
        assert c.paused() == set()
        assert values_of(poll_all(c, 2)) == [b"a0", b"a1"]


def test_paused_partition_keeps_its_buffered_records(broker: Any) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"r%d" % i for i in range(10)])
    with Consumer(broker=broker, auto_offset_reset="earliest", max_poll_records=3) as c:
        c.assign([TP0])
        assert len(poll_all(c, 3)) == 3
        c.pause(TP0)
        assert c.poll(timeout_ms=50) == {}
        c.resume(TP0)
        assert [r.offset for r in poll_all(c, 7)] == list(range(3, 10))


def test_iteration_stops_after_consumer_timeout(broker: Any) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"i%d" % i for i in range(25)])
    with Consumer(broker=broker, auto_offset_reset="earliest", consumer_timeout_ms=300, max_poll_records=10) as c:
        c.assign([TP0])
        got: List[ConsumerRecord] = []
        iterating = threading.Thread(target=lambda: got.extend(c), daemon=True)
        started = time.monotonic()
        iterating.start()
        iterating.join(DEADLINE_S)
        waited = time.monotonic() - started
        assert not iterating.is_alive(), "iteration did not stop once nothing came for consumer_timeout_ms"
        assert values_of(got) == [b"i%d" % i for i in range(25)]
        assert waited >= 0.3, "iteration ended %.3f s after it began, before consumer_timeout_ms" % waited
        assert c.position(TP0) == 25


def test_iteration_advances_positions_record_by_record(broker: Any) -> None:
    broker.create_topic("t", 1)
    produce(broker, "t", 0, [b"i%d" % i for i in range(10)])
    with Consumer(broker=broker, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False,
                  consumer_timeout_ms=5000) as c:
        c.assign([TP0])
        it = iter(c)
        assert next(it).offset == 0
        assert next(it).offset == 1
        assert c.position(TP0) == 2
        c.commit()
        assert c.committed(TP0) == 2
        c.seek(TP0, 8)
        assert [next(it).offset, next(it).offset] == [8, 9]


@pytest.mark.parametrize("setup", ["unassigned", "assigned", "group"])
def test_idle_poll_sleeps_for_its_timeout(broker: Any, setup: str) -> None:
    broker.create_topic("t", 2)
    kwargs: Dict[str, Any] = {}
    if setup == "group":
        kwargs = {"group_id": "g", "session_timeout_ms": 6000}
    with Consumer(broker=broker, **kwargs) as c:
        if setup == "assigned":
            c.assign([TP0, TP1])
        elif setup == "group":
            c.subscribe(["t"])
        c.poll(timeout_ms=100)  # joins the group, resolves positions
        # The collector off while measuring: a full collection of a large test process (thousands
        # of collected tests) can take more CPU than the 70 ms allowed, and it is not the poll's.
        gc.collect()
        gc.disable()
        try:
            wall, cpu = time.monotonic(), time.thread_time()
            assert c.poll(timeout_ms=700) == {}
            wall, cpu = time.monotonic() - wall, time.thread_time() - cpu
        finally:
            gc.enable()
        assert wall >= 0.69
        assert cpu < 0.1 * wall, "an idle poll spun: %.3fs CPU in %.3fs" % (cpu, wall)


def test_closed_consumer_refuses_to_poll(broker: Any) -> None:
    c = Consumer(broker=broker)
    c.close()
    c.close()
    with pytest.raises(IllegalStateError, match="closed"):
        c.poll()


# -- groups -----------------------------------------------------------------------------------------


class GroupMember:
    """A consumer polling in its own thread; its assignment is published under ``cond``."""

    def __init__(self, broker: Any, cond: threading.Condition, name: str, **config: Any) -> None:
        self.broker = broker
        self.cond = cond
        self.name = name
        self.config = config
        self.assignment: Set[TopicPartition] = set()
        self.records: List[ConsumerRecord] = []
        self.stop = False
        self.closed = False
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self.run, name=name)

    def run(self) -> None:
        try:
            consumer = Consumer("t", broker=self.broker, client_id=self.name, **self.config)
            try:
                while True:
                    with self.cond:
                        if self.stop:
                            break
                    polled = consumer.poll(timeout_ms=50)
                    with self.cond:
                        for records in polled.values():
                            self.records.extend(records)
                        if consumer.assignment() != self.assignment or polled:
                            self.assignment = consumer.assignment()
                            self.cond.notify_all()
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc
        finally:
            with self.cond:
                self.closed = True
                self.assignment = set()
                self.cond.notify_all()


GROUP_CONFIG = dict(group_id="g", auto_offset_reset="earliest", session_timeout_ms=1500,
                    heartbeat_interval_ms=50, max_poll_interval_ms=5000, auto_commit_interval_ms=100)


def test_group_of_three_shares_six_partitions_and_takes_over_on_close(broker: Any) -> None:
    broker.create_topic("t", 6)
    all_tps = {TopicPartition("t", p) for p in range(6)}
    for p in range(6):
        produce(broker, "t", p, [b"%d-%d" % (p, i) for i in range(5)])
    cond = threading.Condition()
    # A session outlasting every wait below: only a LeaveGroup can rebalance the group in time.
    config = dict(GROUP_CONFIG, session_timeout_ms=int(DEADLINE_S * 1000) * 4)
    members = [GroupMember(broker, cond, "c%d" % i, **config) for i in range(3)]
    for m in members:
        m.thread.start()
    try:
        def balanced(group: List[GroupMember], each: int) -> bool:
            sets = [m.assignment for m in group]
            return all(len(s) == each for s in sets) and set().union(*sets) == all_tps

        assert wait_for(lambda: balanced(members, 2), cond), [m.assignment for m in members]
        assert wait_for(lambda: sum(len(m.records) for m in members) >= 30, cond)
        with cond:
            consumed = sorted(r.value for m in members for r in m.records)
        assert consumed == sorted(b"%d-%d" % (p, i) for p in range(6) for i in range(5))

        leaving, staying = members[0], members[1:]
        with cond:
            leaving.stop = True
        assert wait_for(lambda: leaving.closed, cond)
        # Taken over because the closed member left the group (LeaveGroup), not because its
        # session expired: that timeout is longer than this whole wait.
        assert wait_for(lambda: balanced(staying, 3), cond), [m.assignment for m in staying]

        for p in range(6):
            produce(broker, "t", p, [b"after-%d" % p])
        assert wait_for(lambda: sum(1 for m in staying for r in m.records if r.value.startswith(b"after"))
                        >= 6, cond)
        with cond:
            after = sorted(r.value for m in staying for r in m.records if r.value.startswith(b"after"))
        assert after == sorted(b"after-%d" % p for p in range(6))  # nothing repeated, nothing lost
    finally:
        with cond:
            for m in members:
                m.stop = True
        for m in members:
            m.thread.join(DEADLINE_S)
    assert all(m.error is None for m in members), [m.error for m in members]


def test_group_restart_resumes_from_committed_offsets(broker: Any) -> None:
    broker.create_topic("t", 2)
    for p in range(2):
        produce(broker, "t", p, [b"first-%d-%d" % (p, i) for i in range(4)])
    config = dict(GROUP_CONFIG, session_timeout_ms=6000)
    with Consumer("t", broker=broker, **config) as c:
        assert len(poll_all(c, 8)) == 8
    for p in range(2):
        produce(broker, "t", p, [b"second-%d" % p])
    with Consumer("t", broker=broker, **config) as c:
        got = poll_all(c, 2)
        assert sorted(values_of(got)) == [b"second-0", b"second-1"]
        assert c.poll(timeout_ms=100) == {}


class RecordingListener(ConsumerRebalanceListener):
    """Records each rebalance callback as ``(what, sorted partitions)`` in :attr:`events`."""

    def __init__(self) -> None:
        self.events: List[Any] = []

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append(("revoked", sorted(revoked)))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append(("assigned", sorted(assigned)))

    def on_partitions_lost(self, lost: Any) -> None:
        self.events.append(("lost", sorted(lost)))


def test_rebalance_listener_sees_revoke_and_assign(broker: Any) -> None:
    broker.create_topic("t", 2)
    listener = RecordingListener()
    events = listener.events

    with Consumer(broker=broker, **dict(GROUP_CONFIG, session_timeout_ms=6000)) as c:
        c.subscribe(["t"], listener=listener)
        deadline = time.monotonic() + DEADLINE_S
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(timeout_ms=100)
        assert events == [("assigned", [TP0, TP1])]
        assert c.subscription() == {"t"}
        c.unsubscribe()
        assert events[-1] == ("revoked", [TP0, TP1])
        assert c.assignment() == set() and c.subscription() is None


def test_a_member_revoking_longer_than_its_session_stays_in_the_group(broker: Any) -> None:
    """Heartbeats go on while the listener revokes (until JoinGroup is sent), as Kafka's do: a
    member whose on_partitions_revoked takes four sessions is not expired, so the member that
    joined is never handed the partitions the first still works on."""
    broker.create_topic("t", 2)
    config = dict(GROUP_CONFIG, session_timeout_ms=500, heartbeat_interval_ms=100)
    revoking: List[float] = []

    class SlowRevoke(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            if revoked:
                revoking.append(time.monotonic())
                time.sleep(2.0)  # the work of a revocation: four sessions long

        def on_partitions_assigned(self, assigned: Any) -> None:
            pass

    stop = threading.Event()
    with Consumer(broker=broker, **config) as first, Consumer(broker=broker, **config) as second:
        first.subscribe(["t"], listener=SlowRevoke())
        deadline = time.monotonic() + DEADLINE_S
        while len(first.assignment()) < 2 and time.monotonic() < deadline:
            first.poll(timeout_ms=100)
        assert first.assignment() == {TP0, TP1}

        def keep_polling() -> None:
            while not stop.is_set():
                first.poll(timeout_ms=100)

        poller = threading.Thread(target=keep_polling)
        poller.start()
        try:
            second.subscribe(["t"])
            while not second.assignment() and time.monotonic() < deadline:
                second.poll(timeout_ms=100)
            handed = set(second.assignment())
            while not first.assignment() and time.monotonic() < deadline:
                time.sleep(0.05)  # the first member's poll thread takes its new assignment
        finally:
            stop.set()
            poller.join(DEADLINE_S)
        assert revoking, "the first member never revoked"
        assert len(handed) == 1, "the new member was handed %s while the first still revoked" % sorted(handed)
        assert len(first.assignment()) == 1 and not first.assignment() & handed


def test_a_member_whose_session_expired_loses_its_partitions_and_commits_nothing(broker: Any) -> None:
    """Kafka's onPartitionsLost (KIP-429): a member that finds its generation over (its heartbeats
    stalled past the session, and the group moved on) is told its partitions are lost, not
    revoked, and auto-commits nothing for them: another member owns them already."""
    broker.create_topic("t", 2)
    produce(broker, "t", 0, [b"a", b"b"])
    listener = RecordingListener()
    events = listener.events

    config = dict(GROUP_CONFIG, session_timeout_ms=500, heartbeat_interval_ms=100, enable_auto_commit=True)
    with Consumer(broker=broker, **config) as first, Consumer(broker=broker, **config) as second:
        first.subscribe(["t"], listener=listener)
        assert values_of(poll_all(first, 2)) == [b"a", b"b"]  # consumed, not yet committed
        stalled = threading.Event()
        heartbeat = first._coordinator._transport.heartbeat

        def stalled_heartbeat(*args: Any) -> int:
            stalled.wait(DEADLINE_S)  # the heartbeats stall (a network that stopped answering)
            return heartbeat(*args)

        first._coordinator._transport.heartbeat = stalled_heartbeat  # type: ignore[method-assign]
        second.subscribe(["t"])
        deadline = time.monotonic() + DEADLINE_S
        while len(second.assignment()) < 2 and time.monotonic() < deadline:
            second.poll(timeout_ms=100)  # the group moves on without the first member
        assert second.assignment() == {TP0, TP1}
        first._coordinator._transport.heartbeat = heartbeat  # type: ignore[method-assign]
        stalled.set()
        while ("assigned", [TP0, TP1]) == events[-1] and time.monotonic() < deadline:
            first.poll(timeout_ms=100)
        assert events[:2] == [("assigned", [TP0, TP1]), ("lost", [TP0, TP1])]
        assert first.committed(TP0) is None  # nothing auto-committed for the lost partitions


def test_pattern_subscription_without_group_takes_every_partition(broker: Any) -> None:
    broker.create_topic("orders-a", 2)
    broker.create_topic("orders-b", 1)
    broker.create_topic("other", 1)
    produce(broker, "orders-b", 0, [b"b"])
    with Consumer(broker=broker, auto_offset_reset="earliest") as c:
        c.subscribe(pattern="orders-.*")
        assert values_of(poll_all(c, 1)) == [b"b"]
        assert c.assignment() == {TopicPartition("orders-a", 0), TopicPartition("orders-a", 1),
                                   TopicPartition("orders-b", 0)}
        assert c.subscription() == {"orders-a", "orders-b"}


def test_subscribe_and_assign_are_exclusive(broker: Any) -> None:
    with Consumer(broker=broker) as c:
        c.assign([TP0])
        with pytest.raises(IllegalStateError):
            c.subscribe(["t"])
    with Consumer("t", broker=broker) as c:
        with pytest.raises(IllegalStateError):
            c.assign([TP0])
        with pytest.raises(IllegalStateError):
            c.subscribe(["t"], pattern="t.*")


def test_commit_after_being_rebalanced_out_fails_with_commit_failed(broker: Any) -> None:
    broker.create_topic("t", 2)
    config = dict(GROUP_CONFIG, session_timeout_ms=6000, max_poll_interval_ms=300, enable_auto_commit=False)
    with Consumer("t", broker=broker, **config) as c:
        deadline = time.monotonic() + DEADLINE_S
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(timeout_ms=100)
        assert c.assignment() == {TP0, TP1}
        # c stops polling: it misses the rebalance a new member starts and the group drops it.
        cond = threading.Condition()
        other = GroupMember(broker, cond, "other", **config)
        other.thread.start()
        try:
            assert wait_for(lambda: other.assignment == {TP0, TP1}, cond)
            with pytest.raises(CommitFailedError, match="rebalanced"):
                c.commit({TP0: 1})
            assert c.committed(TP0) is None
        finally:
            with cond:
                other.stop = True
            other.thread.join(DEADLINE_S)
        assert other.error is None
