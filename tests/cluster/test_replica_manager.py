"""The replica manager's ISR announcements around close, against the in-memory store.

A leader writes an ISR change to the store, then tells the controller through a
sequential ``/isr_change_notification`` node, at a period. Closing the broker must
announce what is pending while the session is still open, and a period that fires
after close must not touch the (by then closed) store.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Iterator, List, Optional, Tuple

import pytest

from pylogq.cluster.broker.replica_manager import ReplicaManager, ReplicationSettings
from pylogq.cluster.delayed import Timer
from pylogq.cluster.state.partition import Partition
from pylogq.cluster.zk.client import KafkaZkClient
from pylogq.cluster.zk.data import PartitionState, encode_partition_state, partition_state_path
from pylogq.cluster.zk.memory_store import InMemoryZooKeeper


class _Host:
    def hosted(self, tp: Tuple[str, int]) -> Optional[Partition]:
        return None

    def host_partition(self, topic: str, index: int, topic_id: Optional[str]) -> Partition:
        raise AssertionError("not used")

    def unhost_partition(self, topic: str, index: int, delete: bool) -> None:
        raise AssertionError("not used")

    def hosted_partitions(self) -> List[Partition]:
        return []


class _Partition:
    """What the ISR writer asks of a partition: its name, epochs, and the store's answer."""

    def __init__(self, topic: str, index: int) -> None:
        self.topic, self.index = topic, index
        self.leader_epoch = 3
        self.isr = (1, 2)
        self.controller_epoch = 1
        self.answered = threading.Event()
        self.written: Optional[int] = None

    def isr_change_done(self, proposed: List[int], expected: int, written: Optional[int]) -> bool:
        self.written = written
        self.answered.set()
        return False


@pytest.fixture
def store() -> Iterator[KafkaZkClient]:
    ensemble = InMemoryZooKeeper()
    client = ensemble.connect()
    zk = KafkaZkClient(client)
    zk.ensure_layout()
    client.create(partition_state_path("t", 0), encode_partition_state(PartitionState(1, 3, [1, 2], 1)),
                  makepath=True)
    yield zk
    ensemble.close()


def _manager(zk: KafkaZkClient, timer: Timer) -> Tuple[ReplicaManager, List[Callable[[], None]]]:
    tasks: List[Callable[[], None]] = []

    def schedule(fn: Callable[[], None], delay: float, period: Optional[float], name: str) -> None:
        tasks.append(fn)  # run by the test, when it chooses

    manager = ReplicaManager(1, _Host(), zk, ReplicationSettings(), None, timer, schedule,  # type: ignore[arg-type]
                             lambda: 1)
    return manager, tasks


def test_close_announces_the_isr_changes_written_since_the_last_period(store: KafkaZkClient) -> None:
    timer = Timer()
    try:
        manager, _ = _manager(store, timer)
        partition = _Partition("t", 0)
        manager._ask_isr_change(partition, [1], 0)  # type: ignore[arg-type]
        assert partition.answered.wait(10) and partition.written == 1
        assert store.get_isr_changes() == []  # the period has not come
        manager.close()
        names = store.get_isr_changes()
        assert [store.read_isr_change(n) for n in names] == [[("t", 0)]]
    finally:
        timer.close()


def test_a_period_after_close_leaves_the_closed_store_alone(store: KafkaZkClient,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    timer = Timer()
    try:
        manager, tasks = _manager(store, timer)
        partition = _Partition("t", 0)
        manager._ask_isr_change(partition, [1], 0)  # type: ignore[arg-type]
        assert partition.answered.wait(10)
        manager.close()
        store.store.close()  # the broker closes its session after the replica manager
        with caplog.at_level(logging.DEBUG, logger="pylogq.replica_manager"):
            for task in tasks:
                task()
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    finally:
        timer.close()
