"""TxnOffsetCommit (28) over real sockets, each version 0-4, against a served broker.

The offsets a transactional producer commits for a group are not seen by OffsetFetch until the
transaction's COMMIT marker is in the group's ``__consumer_offsets`` partition (written here through
the partition and reported with ``Broker.txn_markers_appended``, as WriteTxnMarkers does); OffsetFetch
v7+ with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT meanwhile (KIP-447). Kafka's per-partition
errors: unknown topics and partitions, a fenced producer epoch, the member checks of v3+, and v0-1's
COORDINATOR_NOT_AVAILABLE for a loading coordinator. Authorization is in ``test_authorization``'s
matrix (WRITE on the transactional id, READ on the group and on the topic).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from pylogq import Broker
from pylogq.client.connection import BrokerConnection
from pylogq.cluster.coordinator.group.offsets_topic import OFFSETS_TOPIC
from pylogq.protocol import SUPPORTED_VERSIONS, ApiKey
from pylogq.records.control import ABORT, COMMIT, build_end_txn_marker

NONE, UNKNOWN_TOPIC_OR_PARTITION, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE = 0, 3, 14, 15
UNKNOWN_MEMBER_ID, INVALID_GROUP_ID, INVALID_PRODUCER_EPOCH, UNSTABLE_OFFSET_COMMIT = 25, 24, 47, 88
TIMEOUT_S = 10.0


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[Broker, BrokerConnection]]:
    broker = Broker(str(tmp_path / "broker"), group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=2)
    conn: Optional[BrokerConnection] = None
    try:
        broker.create_topic("data", partitions=2)
        host, port = broker.serve("127.0.0.1", 0)
        conn = BrokerConnection(host, port, "txn-offset-commit-test", TIMEOUT_S)
        yield broker, conn
    finally:
        if conn is not None:
            conn.close()
        broker.close()


def _commit(conn: BrokerConnection, version: int, group: str, producer_id: int, offsets: Dict[Tuple[str, int], int],
            epoch: int = 0, generation: int = -1, member: str = "", leader_epoch: int = -1,
            metadata: Optional[str] = "m") -> Dict[Tuple[str, int], int]:
    """A raw TxnOffsetCommit; -> each partition's error code as answered (in the request's order)."""
    topics: Dict[str, List[Dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_leader_epoch": leader_epoch, "committed_metadata": metadata})
    response = conn.request(ApiKey.TXN_OFFSET_COMMIT, {
        "transactional_id": "tx-%d" % producer_id, "group_id": group, "producer_id": producer_id,
        "producer_epoch": epoch, "generation_id": generation, "member_id": member, "group_instance_id": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, version=version)
    assert response["throttle_time_ms"] == 0
    answered = [((t["name"], p["partition_index"]), p["error_code"]) for t in response["topics"]
                for p in t["partitions"]]
    assert [tp for tp, _ in answered] == list(offsets)
    return dict(answered)


def _fetch(conn: BrokerConnection, group: str, version: int = 7, stable: bool = True
           ) -> Dict[Tuple[str, int], Tuple[int, int, str, int]]:
    """OffsetFetch of data-0 and data-1: partition -> (offset, leader epoch, metadata, error code)."""
    wanted = [{"name": "data", "partition_indexes": [0, 1]}]
    if version >= 8:
        response = conn.request(ApiKey.OFFSET_FETCH, {"groups": [{"group_id": group, "topics": wanted}],
                                                      "require_stable": stable}, version=version)
        [found] = response["groups"]
        assert found["error_code"] == 0
    else:
        found = conn.request(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": wanted, "require_stable": stable},
                             version=version)
        assert found["error_code"] == 0
    return {(t["name"], p["partition_index"]): (p["committed_offset"], p["committed_leader_epoch"], p["metadata"],
                                                p["error_code"]) for t in found["topics"] for p in t["partitions"]}


def _marker(broker: Broker, group: str, producer_id: int, committed: bool, epoch: int = 0) -> None:
    p = broker.group_coordinator.partition_for(group)
    broker.partition(OFFSETS_TOPIC, p).append(
        build_end_txn_marker(producer_id, epoch, COMMIT if committed else ABORT, 0, int(time.time() * 1000)),
        required_acks=-1, origin="coordinator")
    broker.txn_markers_appended(OFFSETS_TOPIC, p, producer_id, committed)


def test_advertised() -> None:
    assert SUPPORTED_VERSIONS[ApiKey.TXN_OFFSET_COMMIT] == (0, 4)


@pytest.mark.parametrize("version", range(5))
def test_committed_with_the_transaction(served: Tuple[Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    group = "g-v%d" % version
    assert _commit(conn, version, group, 40 + version, {("data", 0): 5, ("data", 1): 6}, leader_epoch=2) == \
        {("data", 0): NONE, ("data", 1): NONE}
    assert _fetch(conn, group) == {("data", 0): (-1, -1, "", UNSTABLE_OFFSET_COMMIT),
                                   ("data", 1): (-1, -1, "", UNSTABLE_OFFSET_COMMIT)}
    assert _fetch(conn, group, version=8) == _fetch(conn, group)
    assert _fetch(conn, group, stable=False) == {("data", 0): (-1, -1, "", NONE), ("data", 1): (-1, -1, "", NONE)}
    _marker(broker, group, 40 + version, True)
    epoch = 2 if version >= 2 else -1  # v0-1 carry no leader epoch
    assert _fetch(conn, group) == {("data", 0): (5, epoch, "m", NONE), ("data", 1): (6, epoch, "m", NONE)}
    # The next transaction of the producer aborts: the committed offsets stay.
    assert _commit(conn, version, group, 40 + version, {("data", 0): 9}) == {("data", 0): NONE}
    _marker(broker, group, 40 + version, False)
    assert _fetch(conn, group)[("data", 0)] == (5, epoch, "m", NONE)


def test_kafkas_partition_errors(served: Tuple[Broker, BrokerConnection]) -> None:
    broker, conn = served
    assert _commit(conn, 4, "g", 50, {("data", 0): 1, ("data", 7): 1, ("missing", 0): 1}) == {
        ("data", 0): NONE, ("data", 7): UNKNOWN_TOPIC_OR_PARTITION, ("missing", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert _commit(conn, 4, "", 50, {("data", 0): 1}) == {("data", 0): INVALID_GROUP_ID}
    assert _commit(conn, 3, "g", 50, {("data", 1): 1}, generation=1, member="stranger") == \
        {("data", 1): UNKNOWN_MEMBER_ID}
    assert _commit(conn, 4, "g", 50, {("data", 1): 1}, epoch=1) == {("data", 1): NONE}
    assert _commit(conn, 4, "g", 50, {("data", 1): 2}, epoch=0) == {("data", 1): INVALID_PRODUCER_EPOCH}
    _marker(broker, "g", 50, True, epoch=1)
    assert _fetch(conn, "g") == {("data", 0): (1, -1, "m", NONE), ("data", 1): (1, -1, "m", NONE)}


@pytest.mark.parametrize("version, code", [(0, COORDINATOR_NOT_AVAILABLE), (1, COORDINATOR_NOT_AVAILABLE),
                                           (2, COORDINATOR_LOAD_IN_PROGRESS), (4, COORDINATOR_LOAD_IN_PROGRESS)])
def test_a_loading_coordinator(served: Tuple[Broker, BrokerConnection], version: int, code: int) -> None:
    """v0-1 clients (before Kafka 2.0) took COORDINATOR_LOAD_IN_PROGRESS as fatal: Kafka answers
    them COORDINATOR_NOT_AVAILABLE, which they retry."""
    broker, conn = served
    assert broker.ensure_offsets_topic() == 0
    broker.group_coordinator.begin_loading(broker.group_coordinator.partition_for("g"))
    assert _commit(conn, version, "g", 60, {("data", 0): 1}) == {("data", 0): code}
