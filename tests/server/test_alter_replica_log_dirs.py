"""AlterReplicaLogDirs (34) over the wire, v0 to v2: a broker with two log directories moves a
replica to the one named, and DescribeLogDirs then lists it there; each partition answers its
own error (LOG_DIR_NOT_FOUND, REPLICA_NOT_AVAILABLE, INVALID_REQUEST for one named twice).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import pylogq
from pylogq import errors
from pylogq.client.connection import BrokerConnection
from pylogq.protocol import ApiKey
from pylogq.records import build_batch


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[pylogq.Broker, BrokerConnection, List[str]]]:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with pylogq.Broker(dirs[0], log_dirs=",".join(dirs)) as broker:
        host, port = broker.serve()
        broker.create_topic("t", partitions=2)
        for p in range(2):
            broker.produce("t", p, bytes(build_batch([b"v%d" % i for i in range(20)])))
        conn = BrokerConnection(host, port, "alter-log-dirs-test", 10.0)
        try:
            yield broker, conn, dirs
        finally:
            conn.close()


def _results(response: Dict[str, Any]) -> Dict[Tuple[str, int], int]:
    return {(t["topic_name"], p["partition_index"]): p["error_code"]
            for t in response["results"] for p in t["partitions"]}


def _dir_of(conn: BrokerConnection, topic: str, partition: int) -> Dict[str, bool]:
    """DescribeLogDirs over the wire: directory -> is_future_key, for the partition's entries."""
    response = conn.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": [{"topic": topic, "partitions": [partition]}]},
                            version=4)
    return {r["log_dir"]: p["is_future_key"] for r in response["results"] for t in r["topics"]
            for p in t["partitions"] if t["name"] == topic and p["partition_index"] == partition}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_replica_moves_to_the_directory_named(served: Tuple[pylogq.Broker, BrokerConnection, List[str]],
                                                version: int) -> None:
    broker, conn, dirs = served
    here = broker.logs.dir_of("t", 0)
    there = dirs[1] if here == dirs[0] else dirs[0]
    response = conn.request(ApiKey.ALTER_REPLICA_LOG_DIRS, {"dirs": [
        {"path": there, "topics": [{"name": "t", "partitions": [0]}]},
        {"path": "/no/such/dir", "topics": [{"name": "t", "partitions": [1]}]},
        {"path": there, "topics": [{"name": "unknown", "partitions": [0]}]},
    ]}, version=version)
    assert _results(response) == {("t", 0): 0, ("t", 1): errors.LogDirNotFoundError.code,
                                  ("unknown", 0): errors.ReplicaNotAvailableError.code}
    deadline = time.monotonic() + 30
    while _dir_of(conn, "t", 0) != {there: False}:
        assert time.monotonic() < deadline, _dir_of(conn, "t", 0)
        time.sleep(0.02)  # a poll's pacing
    fetched = broker.fetch([("t", 0, 0, 1 << 20)], max_wait_ms=0)
    [result] = fetched.values()
    assert result.error_code == 0 and result.high_watermark == 20


def test_a_partition_named_twice_is_an_invalid_request(served: Tuple[pylogq.Broker, BrokerConnection, List[str]]) -> None:
    broker, conn, dirs = served
    response = conn.request(ApiKey.ALTER_REPLICA_LOG_DIRS, {"dirs": [
        {"path": dirs[0], "topics": [{"name": "t", "partitions": [0]}]},
        {"path": dirs[1], "topics": [{"name": "t", "partitions": [0, 1]}]},
    ]}, version=2)
    assert _results(response) == {("t", 0): errors.InvalidRequestError.code, ("t", 1): 0}
