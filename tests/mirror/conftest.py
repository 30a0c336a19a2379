"""The mirror's tests' clusters: two in-process brokers (tests/mirror/_support.py), and the two
process clusters the acceptance test and its harness share (tests/mirror/_clusters.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from .._zookeeper import ZooKeeperServer
from ._clusters import TwoClusters, two_clusters
from ._support import Clusters, brokers


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[Clusters]:
    """Brokers A (the source) and B (the target) in this process, served on loopback."""
    yield from brokers(tmp_path)


@pytest.fixture(scope="package")
def mirror_clusters(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoClusters]:
    """A three-broker source and a one-broker target on the session's ZooKeeper, started once for
    the package's tests; each test names its own topics and cluster aliases, and leaves every
    broker running (a broker it killed, it starts again)."""
    with two_clusters(zookeeper, tmp_path_factory.mktemp("mirror-clusters")) as clusters:
        yield clusters
