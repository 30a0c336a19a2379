"""pytest fixtures for testing Kafka code against pylogq (registered as a pytest11 plugin).

Installing pylogq makes these available in any project's tests:

- ``pylogq_broker``: a :class:`pylogq.Broker` in a temporary directory, serving the
  Kafka protocol on a free loopback port; closed after the test.
- ``pylogq_bootstrap``: that broker's ``"127.0.0.1:PORT"``, for ``bootstrap_servers``
  of kafka-python, aiokafka, confluent-kafka or pylogq's own clients.
- ``pylogq_cluster``: a :class:`pylogq.Cluster` of three replicating brokers in this
  process (no ZooKeeper: the in-memory store), each serving on a free loopback port;
  ``pylogq_cluster.bootstrap_servers`` lists them. Stop one with
  ``pylogq_cluster.stop_broker(id, abrupt=True)`` to see how your code takes a failover.

Broker settings come from the ``pylogq_broker_config`` fixture (a dict of Kafka keys),
which a test module can override, for both. The defaults suit tests: no initial
rebalance delay, so a group consumer gets its partitions at once; in the cluster, a
session timeout of 2 s, so a stopped broker's partitions move quickly.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator

import pytest

from . import server as _server  # noqa: F401 - registers the listener for Broker.serve
from .cluster.broker.broker import Broker
from .cluster.broker.local_cluster import Cluster

__all__ = ["pylogq_broker", "pylogq_bootstrap", "pylogq_broker_config", "pylogq_cluster", "TEST_DEFAULTS"]

#: What the ``pylogq_cluster`` fixture adds to the broker settings: failover within seconds.
CLUSTER_TEST_DEFAULTS: Dict[str, Any] = {
    "zookeeper.session.timeout.ms": 2000,
    "replica.fetch.wait.max.ms": 100,
    "replica.lag.time.max.ms": 5000,
}

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


@pytest.fixture
def pylogq_cluster(tmp_path_factory: pytest.TempPathFactory,
                   pylogq_broker_config: Dict[str, Any]) -> Iterator[Cluster]:
    """Three replicating brokers in this process, serving on free loopback ports."""
    config = dict(CLUSTER_TEST_DEFAULTS)
    config.update(pylogq_broker_config)
    cluster = Cluster(3, str(tmp_path_factory.mktemp("pylogq-cluster")), **config)
    try:
        cluster.serve()
        yield cluster
    finally:
        cluster.close()
