"""Requests that wait park no thread: a thousand joins and a thousand long polls stall nobody.

Every waiting request (a JoinGroup waiting for the rest of its group, a long-poll
Fetch waiting for bytes) is a delayed operation of the broker (pylogq.cluster.delayed),
answered by the event that completes it. These tests park them by the thousand over
raw sockets and check that other clients' requests are answered while they wait,
that the broker runs no more threads than before, and that the parked requests are
answered when their event comes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from pylogq import Broker

from .test_server import (
    CREATE_TOPICS,
    DEADLINE_S,
    FETCH,
    PRODUCE,
    Address,
    ServeFn,
    Wire,
    fetch_body,
    no_server_errors,
    produce_body,
    serve,
    wait_for,
)

__all__ = ["no_server_errors", "serve"]  # fixtures shared with test_server

JOIN_GROUP = 11
MEMBER_ID_REQUIRED = 79
PARKED = 1000
# The first member of a new group waits this long for others (Kafka's initial rebalance
# delay): long enough that every join of the test stays parked until it ends.
PARK_MS = 120000


def join_body(group: str) -> Dict[str, Any]:
    return {"group_id": group, "session_timeout_ms": 6000, "rebalance_timeout_ms": PARK_MS, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}]}


def create_topics_body(name: str) -> Dict[str, Any]:
    return {"topics": [{"name": name, "num_partitions": 2, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 5000, "validate_only": False}


@contextlib.contextmanager
def wires(address: Address, count: int) -> Iterator[List[Wire]]:
    opened: List[Wire] = []
    try:
        for _ in range(count):
            opened.append(Wire(address))
        yield opened
    finally:
        for wire in opened:
            wire.close()


@pytest.fixture
def parking_broker(serve: ServeFn) -> Tuple[Broker, Address]:
    broker, address = serve(config={"group.initial.rebalance.delay.ms": PARK_MS})
    broker.create_topic("waiting", 1)
    broker.create_topic("other", 1)
    # Warm every path once (a created topic, a produce, a fetch that waits and one that
    # does not), so the thread count below is the broker's steady one.
    with Wire(address) as wire:
        assert wire.request(CREATE_TOPICS, 3, create_topics_body("warm"))["topics"][0]["error_code"] == 0
        assert wire.request(PRODUCE, 7, produce_body("other", [b"x"]))["responses"][0][
            "partition_responses"][0]["error_code"] == 0
        assert wire.request(FETCH, 11, fetch_body("other", 0, max_wait_ms=1))["error_code"] == 0
        assert wire.request(FETCH, 11, fetch_body("other", 1, max_wait_ms=1))["error_code"] == 0
    return broker, address


def test_parked_joins_and_fetches_take_no_threads_and_stall_no_one(parking_broker: Tuple[Broker, Address]) -> None:
    broker, address = parking_broker
    threads_before = threading.active_count()
    with wires(address, PARKED) as joiners, wires(address, PARKED) as fetchers:
        for i, wire in enumerate(joiners):
            # JoinGroup v4+ (KIP-394): the first join gets a member id, the second waits with it.
            body = join_body("parked-group-%d" % i)
            first = wire.request(JOIN_GROUP, 5, body)
            assert first["error_code"] == MEMBER_ID_REQUIRED and first["member_id"], first
            wire.send(JOIN_GROUP, 5, dict(body, member_id=first["member_id"]))
        for wire in fetchers:
            wire.send(FETCH, 11, fetch_body("waiting", 0, max_wait_ms=PARK_MS))
        wait_for(lambda: broker.group_coordinator._waits.watched() == PARKED, "every join to park")
        wait_for(lambda: broker.fetch_purgatory.watched() == PARKED, "every fetch to park")
        assert threading.active_count() == threads_before, "parked requests took threads"

        # Another client's CreateTopics and Produce are answered while all of them wait.
        with Wire(address, timeout=DEADLINE_S) as other:
            created = other.request(CREATE_TOPICS, 3, create_topics_body("made-while-parked"))
            assert created["topics"][0]["error_code"] == 0
            produced = other.request(PRODUCE, 7, produce_body("other", [b"while parked"]))
            assert produced["responses"][0]["partition_responses"][0]["error_code"] == 0
        assert broker.describe_topic("made-while-parked").partitions[1].partition == 1
        assert broker.group_coordinator._waits.watched() == PARKED
        assert broker.fetch_purgatory.watched() == PARKED
        assert threading.active_count() == threads_before

        # The event the fetches wait for answers every one of them, with the record.
        with Wire(address) as producer:
            produced = producer.request(PRODUCE, 7, produce_body("waiting", [b"wake"]))
            assert produced["responses"][0]["partition_responses"][0]["error_code"] == 0
        for wire in fetchers:
            response = wire.receive(FETCH, 11)[1]
            partition = response["responses"][0]["partitions"][0]
            assert partition["error_code"] == 0 and partition["high_watermark"] == 1
        assert broker.fetch_purgatory.watched() == 0
        assert broker.group_coordinator._waits.watched() == PARKED


def test_a_parked_fetch_whose_answer_fails_closes_its_connection(parking_broker: Tuple[Broker, Address],
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """A bug while making a parked request's answer closes that client's connection (with
    the error logged) instead of leaving it waiting for an answer that never comes."""
    broker, address = parking_broker
    read = broker._fetch_once
    broken: Dict[str, Any] = {"on": False}

    def fetch_once(*args: Any) -> Any:
        if broken["on"]:
            raise ZeroDivisionError("a bug while reading")
        return read(*args)

    monkeypatch.setattr(broker, "_fetch_once", fetch_once)
    with Wire(address) as parked, Wire(address) as other:
        parked.send(FETCH, 11, fetch_body("waiting", 0, max_wait_ms=300))
        wait_for(lambda: broker.fetch_purgatory.watched() == 1, "the fetch to park")
        broken["on"] = True  # its answer at the deadline raises
        assert parked.read_frame() is None, "the connection stayed open without an answer"
        broken["on"] = False
        # Nobody else is affected: the broker answers the next client at once.
        produced = other.request(PRODUCE, 7, produce_body("waiting", [b"after"]))
        assert produced["responses"][0]["partition_responses"][0]["error_code"] == 0
        response = other.request(FETCH, 11, fetch_body("waiting", 0, max_wait_ms=0))
        assert response["responses"][0]["partitions"][0]["high_watermark"] == 1
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("a bug while reading" in str(r.exc_info and r.exc_info[1]) for r in logged), logged
    caplog.clear()  # the errors this test caused on purpose
