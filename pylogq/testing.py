"""pytest fixtures for testing Kafka code against pylogq (registered as a pytest11 plugin).

Installing pylogq makes these available in any project's tests:

- ``pylogq_broker``: a :class:`pylogq.Broker` in a temporary directory, serving the
  Kafka protocol on a free loopback port; closed after the test.
- ``pylogq_bootstrap``: that broker's ``"127.0.0.1:PORT"``, for ``bootstrap_servers``
  of kafka-python, aiokafka, confluent-kafka or pylogq's own clients.

Broker settings come from the ``pylogq_broker_config`` fixture (a dict of Kafka keys),
which a test module can override. The defaults suit tests: no initial rebalance delay,
so a group consumer gets its partitions at once.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator

import pytest

from . import server as _server  # noqa: F401 - registers the listener for Broker.serve
from .cluster.broker import Broker

__all__ = ["pylogq_broker", "pylogq_bootstrap", "pylogq_broker_config", "TEST_DEFAULTS"]

TEST_DEFAULTS: Dict[str, Any] = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 4,
}


@pytest.fixture
def pylogq_broker_config() -> Dict[str, Any]:
    """Settings for the ``pylogq_broker`` fixture; override it to change them."""
    return dict(TEST_DEFAULTS)


@pytest.fixture
def pylogq_broker(tmp_path_factory: pytest.TempPathFactory,
                  pylogq_broker_config: Dict[str, Any]) -> Iterator[Broker]:
    """A broker serving on a free loopback port (``broker.bootstrap_servers``)."""
    broker = Broker(str(tmp_path_factory.mktemp("pylogq")), **pylogq_broker_config)
    try:
        host, port = broker.serve("127.0.0.1", 0)
        broker.bootstrap_servers = "%s:%d" % (host, port)  # type: ignore[attr-defined]
        yield broker
    finally:
        broker.close()


@pytest.fixture
def pylogq_bootstrap(pylogq_broker: Broker) -> str:
    """``"127.0.0.1:PORT"`` of the ``pylogq_broker`` fixture."""
    return str(pylogq_broker.bootstrap_servers)  # type: ignore[attr-defined]
