"""One consumer group, two client libraries: kafka-python and confluent-kafka (librdkafka).

Both ask for the "range" assignor, so the group has a protocol in common and the
leader, whichever library it runs, assigns for both. They share the partitions of a
4-partition topic; when one leaves, the other gets all four and carries on from the
offsets the leaver committed (so nothing is read twice).

Each member polls in a thread of its own, as an application would run it.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

import pytest
from confluent_kafka import Consumer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.coordinator.assignors.range import RangePartitionAssignor

from ._support import HEARTBEAT_MS, SESSION_TIMEOUT_MS, unique, wait_for

PARTITIONS = frozenset(range(4))
TIMEOUT_S = 20.0

Seen = Tuple[int, int, bytes]  # partition, offset, key


class Member(threading.Thread):
    """A group member polling until told to stop; its assignment and records as it sees them."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.assignment: FrozenSet[int] = frozenset()
        self.records: List[Seen] = []
        self.failure: Optional[BaseException] = None
        self._stop_polling = threading.Event()

    def run(self) -> None:
        try:
            self.consume(self._stop_polling)
        except BaseException as exc:  # noqa: BLE001 - handed to the test by stop()
            self.failure = exc

    def consume(self, stop: threading.Event) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Stop polling, leave the group, and raise what the thread raised."""
        self._stop_polling.set()
        self.join(TIMEOUT_S)
        assert not self.is_alive(), "%s did not stop" % self.name
        if self.failure is not None:
            raise self.failure

    def check(self) -> None:
        if self.failure is not None:
            raise AssertionError("%s failed" % self.name) from self.failure


class KafkaPythonMember(Member):
    def consume(self, stop: threading.Event) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, client_id="kafka-python-member",
            partition_assignment_strategy=[RangePartitionAssignor], auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=10000, fetch_max_wait_ms=50)
        try:
            # Known partitions before joining and a long poll timeout: kafka-python 3.0.12
            # can lose a rebalance (see test_clients_kafka_python._subscribe).
            assert consumer.partitions_for_topic(self.topic) == PARTITIONS
            consumer.subscribe([self.topic])
            while not stop.is_set():
                batches = consumer.poll(500)
                for records in batches.values():
                    self.records.extend((r.partition, r.offset, r.key) for r in records)
                if batches:
                    consumer.commit()
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close(autocommit=False)


class ConfluentMember(Member):
    def consume(self, stop: threading.Event) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": "confluent-member",
            "partition.assignment.strategy": "range", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS, "fetch.wait.max.ms": 50})
        try:
            consumer.subscribe([self.topic])
            while not stop.is_set():
                message = consumer.poll(0.05)
                if message is not None:
                    assert message.error() is None, message.error()
                    partition, offset, key = message.partition(), message.offset(), message.key()
                    assert partition is not None and offset is not None and key is not None
                    self.records.append((partition, offset, key))
                    consumer.commit(message=message, asynchronous=False)
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()


@pytest.fixture
def members() -> Iterator[List[Member]]:
    started: List[Member] = []
    yield started
    for member in started:
        if member.is_alive():
            member.stop()


def _produce(producer: KafkaProducer, topic: str, tag: str, per_partition: int) -> Set[Seen]:
    """Send ``per_partition`` records to each partition; -> what a consumer should see."""
    keys = [(p, b"%s-%d-%d" % (tag.encode(), p, i)) for p in sorted(PARTITIONS) for i in range(per_partition)]
    futures = [(p, key, producer.send(topic, key=key, value=b"v", partition=p)) for p, key in keys]
    producer.flush(10)
    return {(p, future.get(10).offset, key) for p, key, future in futures}


@pytest.mark.parametrize("leaver", ["confluent-kafka", "kafka-python"])
def test_mixed_library_group_shares_partitions_and_rebalances_on_leave(
        bootstrap: str, members: List[Member], leaver: str) -> None:
    topic, group = unique("mixed"), unique("mixed")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        admin.create_topics({topic: {"num_partitions": len(PARTITIONS), "replication_factor": 1}})
        kp = KafkaPythonMember("kafka-python", bootstrap, group, topic)
        ck = ConfluentMember("confluent-kafka", bootstrap, group, topic)
        for member in (kp, ck):
            members.append(member)
            member.start()

        def shared() -> bool:
            kp.check()
            ck.check()
            a, b = kp.assignment, ck.assignment
            return bool(a) and bool(b) and not (a & b) and a | b == PARTITIONS

        wait_for(shared, TIMEOUT_S, "both members to share the 4 partitions")
        assert len(kp.assignment) == len(ck.assignment) == 2  # range: 4 partitions over 2 members

        description = admin.describe_groups([group])[group]
        assert description["group_state"] == "Stable" and description["protocol_data"] == "range"
        by_client: Dict[str, Any] = {m["client_id"]: m for m in description["members"]}
        assert set(by_client) == {"kafka-python-member", "confluent-member"}
        for client_id, member in (("kafka-python-member", kp), ("confluent-member", ck)):
            assigned = by_client[client_id]["member_assignment"]["assigned_partitions"]
            assert {p for t in assigned for p in t["partitions"]} == member.assignment

        first = _produce(producer, topic, "first", 2)
        wait_for(lambda: len(kp.records) + len(ck.records) >= len(first), TIMEOUT_S, "the first records")
        assert set(kp.records) | set(ck.records) == first
        assert len(kp.records) + len(ck.records) == len(first)
        assert {p for p, _, _ in kp.records} == kp.assignment
        assert {p for p, _, _ in ck.records} == ck.assignment

        going, staying = (ck, kp) if leaver == "confluent-kafka" else (kp, ck)
        going.stop()  # closes the consumer: LeaveGroup, the other member rejoins alone
        wait_for(lambda: staying.check() or staying.assignment == PARTITIONS, TIMEOUT_S,
                 "%s to own all 4 partitions" % staying.name)

        already = len(staying.records)
        second = _produce(producer, topic, "second", 1)
        wait_for(lambda: len(staying.records) >= already + len(second), TIMEOUT_S, "the second records")
        # only the new records: the leaver's partitions resume at its commits
        assert set(staying.records[already:]) == second and len(staying.records) == already + len(second)
        staying.stop()
    finally:
        producer.close()
        admin.close()
