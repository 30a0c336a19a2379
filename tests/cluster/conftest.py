"""Fixtures of the controller's tests (the harness is ``_controller.py``): an in-memory
ZooKeeper ensemble, broker registrations in it, a recording connector, and a controller started
on a registered broker."""

from __future__ import annotations

from typing import Any, Callable, Iterator, List

import pytest

from pylogq.cluster.controller.controller import KafkaController
from pylogq.cluster.zk.memory_store import InMemoryZooKeeper

from ._controller import Brokers
from .test_controller_channel import CueConnector, wait_for


@pytest.fixture
def ensemble() -> Iterator[InMemoryZooKeeper]:
    e = InMemoryZooKeeper()
    yield e
    e.close()


@pytest.fixture
def brokers(ensemble: InMemoryZooKeeper) -> Iterator[Brokers]:
    b = Brokers(ensemble)
    yield b
    b.close()


@pytest.fixture
def connector() -> CueConnector:
    return CueConnector()


@pytest.fixture
def start(brokers: Brokers, connector: CueConnector) -> Iterator[Callable[..., KafkaController]]:
    """Start the controller of a registered broker (0 by default) and wait for its election."""
    started: List[KafkaController] = []

    def run(broker_id: int = 0, unclean: Callable[[str], bool] = lambda topic: False,
            wait_active: bool = True, **options: Any) -> KafkaController:
        controller = KafkaController(broker_id, brokers.sessions[broker_id], connector, unclean, **options)
        started.append(controller)
        controller.startup()
        if wait_active:
            wait_for(lambda: controller.active, "broker %d's controller to be elected" % broker_id)
            controller.wait_idle()
        return controller

    yield run
    for c in reversed(started):
        c.shutdown()
