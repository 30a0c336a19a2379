"""The group coordinator's APIs over every version Kafka 3.9 serves, sent raw: FindCoordinator
0-6, JoinGroup 0-9, SyncGroup 0-5, Heartbeat 0-4, LeaveGroup 0-5, OffsetCommit 0-9, OffsetFetch
0-9, DescribeGroups 0-5, ListGroups 0-5 and DeleteGroups 0-2, with the behaviour each version
changes (MEMBER_ID_REQUIRED from JoinGroup v4, static members from v5, batched FindCoordinator,
several groups per OffsetFetch, state and type filters...); and kafka-python's old protocol
versions in a consumer group."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import pylogq
from pylogq import errors
from pylogq.client.connection import BrokerConnection
from pylogq.protocol import SUPPORTED_VERSIONS, ApiKey

from ._support import consumer_settings, unique, wait_for

SESSION_MS = 10000
TOPIC = "t"
META = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"  # consumer protocol v0: subscribes to "t"
READ, DELETE, DESCRIBE = 3, 6, 8
NOT_COMPUTED = -2147483648

Connect = Callable[[], BrokerConnection]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[pylogq.Broker, Connect]]:
    """A served broker with topic ``t`` (2 partitions), and a way to open connections to it."""
    conns: List[BrokerConnection] = []
    names = itertools.count()
    with pylogq.Broker(str(tmp_path / "data"), **{"group.initial.rebalance.delay.ms": 0,
                                                   "offsets.topic.num.partitions": 4}) as broker:
        host, port = broker.serve("127.0.0.1", 0)
        broker.create_topic(TOPIC, partitions=2)

        def connect() -> BrokerConnection:
            conn = BrokerConnection(host, port, "group-versions-%d" % next(names), 10.0)
            conns.append(conn)
            return conn

        try:
            yield broker, connect
        finally:
            for conn in conns:
                conn.close()


def _join(conn: BrokerConnection, version: int, group: str, member_id: str = "",
          instance: Optional[str] = None, protocols: Optional[List[Dict[str, Any]]] = None,
          send_only: bool = False) -> Any:
    body = {"group_id": group, "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": SESSION_MS,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": protocols or [{"name": "range", "metadata": META}], "reason": "testing"}
    if send_only:
        return conn.send(ApiKey.JOIN_GROUP, body, version)
    return conn.request(ApiKey.JOIN_GROUP, body, version=version)


def _join_new(conn: BrokerConnection, version: int, group: str, instance: Optional[str] = None) -> Dict[str, Any]:
    """A new member's join, with the second join KIP-394 asks for at v4+ (dynamic members)."""
    r = _join(conn, version, group, instance=instance)
    if r["error_code"] == errors.MemberIdRequiredError.code:
        r = _join(conn, version, group, member_id=r["member_id"], instance=instance)
    assert r["error_code"] == 0, r
    return r


def _sync(conn: BrokerConnection, version: int, group: str, generation: int, member_id: str,
          assignments: Optional[Dict[str, bytes]] = None, instance: Optional[str] = None,
          protocol_type: Optional[str] = None, protocol_name: Optional[str] = None) -> Dict[str, Any]:
    return conn.request(ApiKey.SYNC_GROUP, {
        "group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": instance,
        "protocol_type": protocol_type, "protocol_name": protocol_name,
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]},
        version=version)


def _heartbeat(conn: BrokerConnection, version: int, group: str, generation: int, member_id: str,
               instance: Optional[str] = None) -> int:
    r = conn.request(ApiKey.HEARTBEAT, {"group_id": group, "generation_id": generation, "member_id": member_id,
                                        "group_instance_id": instance}, version=version)
    return int(r["error_code"])


def _leave(conn: BrokerConnection, version: int, group: str, *members: Tuple[str, Optional[str]]) -> Dict[str, Any]:
    return conn.request(ApiKey.LEAVE_GROUP, {
        "group_id": group, "member_id": members[0][0],
        "members": [{"member_id": m, "group_instance_id": i, "reason": "done"} for m, i in members]},
        version=version)


def _commit(conn: BrokerConnection, version: int, group: str, offsets: Dict[Tuple[str, int], int],
            generation: int = -1, member_id: str = "", instance: Optional[str] = None, epoch: int = -1,
            timestamp: int = -1, retention_ms: int = -1) -> Dict[Tuple[str, int], int]:
    by_topic: Dict[str, List[Dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append({
            "partition_index": partition, "committed_offset": offset, "committed_leader_epoch": epoch,
            "commit_timestamp": timestamp, "committed_metadata": "m-%d" % offset})
    r = conn.request(ApiKey.OFFSET_COMMIT, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": instance, "retention_time_ms": retention_ms,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}, version=version)
    return {(t["name"], p["partition_index"]): p["error_code"] for t in r["topics"] for p in t["partitions"]}


def _fetch(conn: BrokerConnection, version: int, group: str,
           partitions: Optional[List[Tuple[str, int]]]) -> Tuple[int, Dict[Tuple[str, int], Dict[str, Any]]]:
    """OffsetFetch of one group at any version: -> (group error, partition entries)."""
    topics = None
    if partitions is not None:
        by_topic: Dict[str, List[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    if version >= 8:
        r = conn.request(ApiKey.OFFSET_FETCH, {"groups": [{"group_id": group, "topics": topics}],
                                               "require_stable": True}, version=version)
        [g] = r["groups"]
        assert g["group_id"] == group
        return g["error_code"], {(t["name"], p["partition_index"]): p for t in g["topics"] for p in t["partitions"]}
    r = conn.request(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": topics, "require_stable": True},
                     version=version)
    assert r["groups"] == []
    return r["error_code"], {(t["name"], p["partition_index"]): p for t in r["topics"] for p in t["partitions"]}


def _describe(conn: BrokerConnection, version: int, *groups: str, operations: bool = False) -> List[Dict[str, Any]]:
    r = conn.request(ApiKey.DESCRIBE_GROUPS, {"groups": list(groups), "include_authorized_operations": operations},
                     version=version)
    return list(r["groups"])


def _list(conn: BrokerConnection, version: int, states: Optional[List[str]] = None,
          types: Optional[List[str]] = None) -> Dict[str, Dict[str, Any]]:
    r = conn.request(ApiKey.LIST_GROUPS, {"states_filter": states or [], "types_filter": types or []},
                     version=version)
    assert r["error_code"] == 0
    return {g["group_id"]: g for g in r["groups"]}


def test_every_kafka_version_is_served() -> None:
    assert SUPPORTED_VERSIONS[ApiKey.OFFSET_COMMIT] == (0, 9)
    assert SUPPORTED_VERSIONS[ApiKey.OFFSET_FETCH] == (0, 9)
    assert SUPPORTED_VERSIONS[ApiKey.FIND_COORDINATOR] == (0, 6)
    assert SUPPORTED_VERSIONS[ApiKey.JOIN_GROUP] == (0, 9)
    assert SUPPORTED_VERSIONS[ApiKey.HEARTBEAT] == (0, 4)
    assert SUPPORTED_VERSIONS[ApiKey.LEAVE_GROUP] == (0, 5)
    assert SUPPORTED_VERSIONS[ApiKey.SYNC_GROUP] == (0, 5)
    assert SUPPORTED_VERSIONS[ApiKey.DESCRIBE_GROUPS] == (0, 5)
    assert SUPPORTED_VERSIONS[ApiKey.LIST_GROUPS] == (0, 5)
    assert SUPPORTED_VERSIONS[ApiKey.DELETE_GROUPS] == (0, 2)


# -- FindCoordinator ---------------------------------------------------------------------------


def test_the_first_coordinator_lookup_creates_the_offsets_topic(served: Tuple[pylogq.Broker, Connect]) -> None:
    broker, connect = served
    conn = connect()
    assert "__consumer_offsets" not in broker.list_topics(include_internal=True)  # none at start
    # Topic metadata does not create it; the first FindCoordinator does, as on Kafka.
    listed = conn.request(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": True}, version=1)
    assert [t["name"] for t in listed["topics"]] == [TOPIC]
    r = conn.request(ApiKey.FIND_COORDINATOR, {"key": "g", "key_type": 0}, version=1)
    assert r["error_code"] == 0 and r["node_id"] == broker.broker_id
    assert broker.describe_topic("__consumer_offsets").internal
    assert broker.partitions_for("__consumer_offsets") == 4  # offsets.topic.num.partitions


@pytest.mark.parametrize("api", ["join", "commit"])
def test_a_group_request_without_a_lookup_creates_the_offsets_topic_too(
        served: Tuple[pylogq.Broker, Connect], api: str) -> None:
    """A client that skips FindCoordinator on a single node is served, not NOT_COORDINATOR:
    its request waits (off the loop) for __consumer_offsets to be made."""
    broker, connect = served
    conn = connect()
    if api == "join":
        assert _join_new(conn, 5, "g")["generation_id"] == 1
    else:
        r = conn.request(ApiKey.OFFSET_COMMIT, {
            "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 7}]}]}, version=2)
        assert r["topics"][0]["partitions"][0]["error_code"] == 0
    assert "__consumer_offsets" in broker.list_topics(include_internal=True)


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator(served: Tuple[pylogq.Broker, Connect], version: int) -> None:
    broker, connect = served
    conn = connect()

    def find(key_type: int, *keys: str) -> List[Dict[str, Any]]:
        r = conn.request(ApiKey.FIND_COORDINATOR, {"key": keys[0], "key_type": key_type,
                                                   "coordinator_keys": list(keys)}, version=version)
        if version < 4:
            assert r["coordinators"] == []
            return [r]
        assert [c["key"] for c in r["coordinators"]] == list(keys)
        return list(r["coordinators"])

    found = find(0, "g1", "g2") if version >= 4 else find(0, "g1")
    for c in found:
        assert (c["error_code"], c["node_id"], c["host"], c["port"]) == (0, broker.broker_id, conn.host, conn.port)
    if version == 0:
        return  # no key type before v1
    # A transactional id's coordinator: this broker (its __transaction_state made on the way);
    # an empty id is an invalid request.
    [txn] = find(1, "txn-a")
    assert (txn["error_code"], txn["node_id"], txn["host"], txn["port"]) == (0, broker.broker_id, conn.host, conn.port)
    assert broker.transaction_state_topic_ready()
    [empty] = find(1, "")
    assert empty["error_code"] == errors.InvalidRequestError.code and empty["node_id"] == -1
    for key_type in (2, 9):  # share groups (KIP-932) are not served here; 9 is no key type
        [bad] = find(key_type, "x")
        assert bad["error_code"] == errors.InvalidRequestError.code and bad["node_id"] == -1


# -- the membership APIs at each version --------------------------------------------------------


@pytest.mark.parametrize("version", range(10))
def test_a_group_lifecycle_at_each_join_version(served: Tuple[pylogq.Broker, Connect], version: int) -> None:
    """JoinGroup v``version`` with SyncGroup, Heartbeat, DescribeGroups, ListGroups and LeaveGroup
    at the same version or their highest below it."""
    broker, connect = served
    conn, group = connect(), unique("life")
    sync_v, heartbeat_v, leave_v, describe_v, list_v = (min(version, n) for n in (5, 4, 5, 5, 5))

    first = _join(conn, version, group)
    if version >= 4:  # KIP-394: a second join with the id handed out
        assert first["error_code"] == errors.MemberIdRequiredError.code
        assert first["member_id"].startswith(conn.client_id + "-") and first["generation_id"] == -1
        assert first["protocol_name"] == ("" if version < 7 else None)
        assert _describe(conn, 0, group)[0]["members"] == []  # pending, not yet a member
        joined = _join(conn, version, group, member_id=first["member_id"])
        assert joined["member_id"] == first["member_id"]
    else:
        joined = first
    member = joined["member_id"]
    assert joined["error_code"] == 0 and member.startswith(conn.client_id + "-")
    assert (joined["generation_id"], joined["protocol_name"], joined["leader"]) == (1, "range", member)
    assert joined["members"] == [{"member_id": member, "group_instance_id": None, "metadata": META}]
    assert joined["protocol_type"] == ("consumer" if version >= 7 else None)
    assert joined["skip_assignment"] is False

    synced = _sync(conn, sync_v, group, 1, member, {member: b"assigned"},
                   protocol_type="consumer" if sync_v >= 5 else None, protocol_name="range" if sync_v >= 5 else None)
    assert (synced["error_code"], synced["assignment"]) == (0, b"assigned")
    expected = ("consumer", "range") if sync_v >= 5 else (None, None)
    assert (synced["protocol_type"], synced["protocol_name"]) == expected

    assert _heartbeat(conn, heartbeat_v, group, 1, member) == 0
    assert _heartbeat(conn, heartbeat_v, group, 2, member) == errors.IllegalGenerationError.code
    assert _heartbeat(conn, heartbeat_v, group, 1, "nobody") == errors.UnknownMemberIdError.code

    [described] = _describe(conn, describe_v, group)
    assert (described["error_code"], described["group_state"], described["protocol_type"],
            described["protocol_data"]) == (0, "Stable", "consumer", "range")
    [m] = described["members"]
    assert (m["member_id"], m["client_id"], m["member_metadata"], m["member_assignment"]) == (
        member, conn.client_id, META, b"assigned")
    assert m["client_host"] == "/127.0.0.1"
    assert described["authorized_operations"] == NOT_COMPUTED

    listed = _list(conn, list_v)[group]
    assert listed["protocol_type"] == "consumer"
    assert listed["group_state"] == ("Stable" if list_v >= 4 else "")
    assert listed["group_type"] == ("classic" if list_v >= 5 else "")

    left = _leave(conn, leave_v, group, (member, None))
    assert left["error_code"] == 0
    assert left["members"] == ([{"member_id": member, "group_instance_id": None, "error_code": 0}]
                               if leave_v >= 3 else [])
    assert _describe(conn, describe_v, group)[0]["group_state"] == "Empty"
    again = _leave(conn, leave_v, group, (member, None))
    if leave_v >= 3:  # the member's error, not the group's
        assert again["error_code"] == 0 and again["members"][0]["error_code"] == errors.UnknownMemberIdError.code
    else:
        assert again["error_code"] == errors.UnknownMemberIdError.code


def test_a_pending_member_may_leave_and_its_id_is_then_unknown(served: Tuple[pylogq.Broker, Connect]) -> None:
    _, connect = served
    conn, group = connect(), unique("pending")
    first = _join(conn, 4, group)
    assert first["error_code"] == errors.MemberIdRequiredError.code
    left = _leave(conn, 3, group, (first["member_id"], None))
    assert left["error_code"] == 0 and left["members"][0]["error_code"] == 0
    again = _join(conn, 4, group, member_id=first["member_id"])
    assert again["error_code"] == errors.UnknownMemberIdError.code


def test_a_two_member_rebalance_and_a_batched_leave(served: Tuple[pylogq.Broker, Connect]) -> None:
    broker, connect = served
    a_conn, b_conn, group = connect(), connect(), unique("two")
    a = _join_new(a_conn, 9, group)
    a_id = a["member_id"]
    assert _sync(a_conn, 5, group, 1, a_id, {a_id: b"all"})["error_code"] == 0
    b_first = _join(b_conn, 9, group)
    assert b_first["error_code"] == errors.MemberIdRequiredError.code
    b_future = _join(b_conn, 9, group, member_id=b_first["member_id"], send_only=True)
    wait_for(lambda: broker.group_coordinator.describe_group(group).state == "PreparingRebalance",
             what="the rebalance b's join starts")
    assert _heartbeat(a_conn, 4, group, 1, a_id) == errors.RebalanceInProgressError.code
    a2 = _join(a_conn, 9, group, member_id=a_id)
    b2 = b_conn.wait(b_future, ApiKey.JOIN_GROUP, 10.0)
    assert a2["generation_id"] == b2["generation_id"] == 2 and a2["leader"] == b2["leader"] == a_id
    assert sorted(m["member_id"] for m in a2["members"]) == sorted([a_id, b2["member_id"]])
    assert b2["members"] == []
    # A protocol other than the group's fails the sync (KIP-559).
    wrong = _sync(a_conn, 5, group, 2, a_id, {}, protocol_type="consumer", protocol_name="roundrobin")
    assert wrong["error_code"] == errors.InconsistentGroupProtocolError.code
    wrong = _sync(a_conn, 5, group, 2, a_id, {}, protocol_type="connect")
    assert wrong["error_code"] == errors.InconsistentGroupProtocolError.code
    assert _sync(a_conn, 5, group, 2, a_id, {a_id: b"x", b2["member_id"]: b"y"})["error_code"] == 0
    assert _sync(b_conn, 5, group, 2, b2["member_id"])["assignment"] == b"y"
    left = _leave(a_conn, 5, group, (a_id, None), ("ghost", None), (b2["member_id"], None))
    assert left["error_code"] == 0
    assert [m["error_code"] for m in left["members"]] == [0, errors.UnknownMemberIdError.code, 0]
    assert _describe(a_conn, 5, group)[0]["group_state"] == "Empty"
    unknown = _leave(a_conn, 5, unique("nothing"), (a_id, None))
    assert (unknown["error_code"], unknown["members"]) == (errors.UnknownMemberIdError.code, [])


# -- static membership (KIP-345) -----------------------------------------------------------------


@pytest.mark.parametrize("version", [5, 8, 9])
def test_a_static_member_that_rejoins_fences_its_old_id(served: Tuple[pylogq.Broker, Connect], version: int) -> None:
    _, connect = served
    old_conn, new_conn, group = connect(), connect(), unique("static")
    first = _join(old_conn, version, group, instance="instance-1")  # a static member needs no second join
    assert first["error_code"] == 0 and first["member_id"].startswith("instance-1-")
    old_id = first["member_id"]
    assert first["members"] == [{"member_id": old_id, "group_instance_id": "instance-1", "metadata": META}]
    assert _sync(old_conn, 3, group, 1, old_id, {old_id: b"mine"}, instance="instance-1")["error_code"] == 0
    [described] = _describe(old_conn, 4, group)
    assert described["members"][0]["group_instance_id"] == "instance-1"
    assert _describe(old_conn, 3, group)[0]["members"][0]["group_instance_id"] is None  # not in v3

    # The same instance restarts: a new member id, no rebalance.
    again = _join(new_conn, version, group, instance="instance-1")
    new_id = again["member_id"]
    assert again["error_code"] == 0 and new_id != old_id and again["generation_id"] == 1
    if version >= 9:  # KIP-814: the leader is told it leads, and to keep the assignment
        assert (again["leader"], again["skip_assignment"]) == (new_id, True)
        assert again["members"] == [{"member_id": new_id, "group_instance_id": "instance-1", "metadata": META}]
    else:  # the old leader id keeps it from computing an assignment
        assert (again["leader"], again["skip_assignment"], again["members"]) == (old_id, False, [])
    assert _sync(new_conn, 5, group, 1, new_id, instance="instance-1")["assignment"] == b"mine"
    assert _describe(new_conn, 0, group)[0]["group_state"] == "Stable"

    fenced = errors.FencedInstanceIdError.code
    assert _heartbeat(old_conn, 3, group, 1, old_id, "instance-1") == fenced
    assert _heartbeat(old_conn, 2, group, 1, old_id) == errors.UnknownMemberIdError.code
    assert _heartbeat(new_conn, 4, group, 1, new_id, "instance-1") == 0
    assert _sync(old_conn, 3, group, 1, old_id, instance="instance-1")["error_code"] == fenced
    assert _commit(old_conn, 7, group, {(TOPIC, 0): 5}, 1, old_id, "instance-1") == {(TOPIC, 0): fenced}
    assert _commit(new_conn, 7, group, {(TOPIC, 0): 5}, 1, new_id, "instance-1") == {(TOPIC, 0): 0}
    assert _join(old_conn, version, group, old_id, "instance-1")["error_code"] == fenced
    assert _leave(old_conn, 3, group, (old_id, "instance-1"))["members"][0]["error_code"] == fenced

    # An administrator removes the static member by its instance id alone.
    left = _leave(old_conn, 3, group, ("", "instance-1"), ("", "instance-2"))
    assert [m["error_code"] for m in left["members"]] == [0, errors.UnknownMemberIdError.code]
    assert _describe(old_conn, 5, group)[0]["group_state"] == "Empty"


# -- offsets -----------------------------------------------------------------------------------


@pytest.mark.parametrize("commit_version", range(10))
def test_a_commit_at_each_version_reads_back_at_every_version(
        served: Tuple[pylogq.Broker, Connect], commit_version: int) -> None:
    _, connect = served
    conn, group = connect(), unique("commit-v%d" % commit_version)
    offset = 100 + commit_version
    codes = _commit(conn, commit_version, group, {(TOPIC, 0): offset, ("no-such-topic", 0): 1}, epoch=7,
                    timestamp=1_700_000_000_000, retention_ms=60_000)
    assert codes == {(TOPIC, 0): 0, ("no-such-topic", 0): errors.UnknownTopicOrPartitionError.code}
    for fetch_version in range(10):
        code, found = _fetch(conn, fetch_version, group, [(TOPIC, 0), (TOPIC, 1)])
        assert code == 0
        assert [found[(TOPIC, p)]["error_code"] for p in (0, 1)] == [0, 0]
        assert found[(TOPIC, 0)]["committed_offset"] == offset and found[(TOPIC, 0)]["metadata"] == "m-%d" % offset
        assert (found[(TOPIC, 1)]["committed_offset"], found[(TOPIC, 1)]["metadata"]) == (-1, "")
        epoch = 7 if commit_version >= 6 and fetch_version >= 5 else -1
        assert found[(TOPIC, 0)]["committed_leader_epoch"] == epoch
        assert found[(TOPIC, 1)]["committed_leader_epoch"] == -1
        if fetch_version >= 2:  # null topics: every committed partition
            code, every = _fetch(conn, fetch_version, group, None)
            assert code == 0 and list(every) == [(TOPIC, 0)]


def test_several_groups_in_one_offset_fetch(served: Tuple[pylogq.Broker, Connect]) -> None:
    _, connect = served
    conn, g1, g2, none = connect(), unique("multi"), unique("multi"), unique("none")
    assert _commit(conn, 8, g1, {(TOPIC, 0): 3, (TOPIC, 1): 4}) == {(TOPIC, 0): 0, (TOPIC, 1): 0}
    assert _commit(conn, 8, g2, {(TOPIC, 1): 9}, epoch=2) == {(TOPIC, 1): 0}
    for version in (8, 9):
        r = conn.request(ApiKey.OFFSET_FETCH, {"groups": [
            {"group_id": g1, "topics": None},
            {"group_id": g2, "member_id": "someone", "member_epoch": 5,
             "topics": [{"name": TOPIC, "partition_indexes": [0, 1]}]},
            {"group_id": none, "topics": None}], "require_stable": True}, version=version)
        assert r["topics"] == [] and r["error_code"] == 0
        by_group = {g["group_id"]: g for g in r["groups"]}
        assert list(by_group) == [g1, g2, none] and all(g["error_code"] == 0 for g in r["groups"])
        [t1] = by_group[g1]["topics"]
        assert [(p["partition_index"], p["committed_offset"]) for p in t1["partitions"]] == [(0, 3), (1, 4)]
        [t2] = by_group[g2]["topics"]
        assert [(p["partition_index"], p["committed_offset"], p["committed_leader_epoch"])
                for p in t2["partitions"]] == [(0, -1, -1), (1, 9, 2)]
        assert by_group[none]["topics"] == []


def test_member_commits_follow_kafka_validation(served: Tuple[pylogq.Broker, Connect]) -> None:
    _, connect = served
    conn, group = connect(), unique("member-commit")
    joined = _join_new(conn, 9, group)
    member = joined["member_id"]
    # Before the sync the group completes its rebalance.
    assert _commit(conn, 9, group, {(TOPIC, 0): 1}, 1, member) == {(TOPIC, 0): errors.RebalanceInProgressError.code}
    assert _sync(conn, 5, group, 1, member, {member: b""})["error_code"] == 0
    for version in range(1, 10):
        assert _commit(conn, version, group, {(TOPIC, 0): version}, 1, member) == {(TOPIC, 0): 0}
        assert _commit(conn, version, group, {(TOPIC, 0): version}, 2, member) == {
            (TOPIC, 0): errors.IllegalGenerationError.code}
        assert _commit(conn, version, group, {(TOPIC, 0): version}, 1, "stranger") == {
            (TOPIC, 0): errors.UnknownMemberIdError.code}
    # v0 has neither generation nor member: a commit only an Empty group accepts.
    assert _commit(conn, 0, group, {(TOPIC, 0): 50}) == {(TOPIC, 0): errors.UnknownMemberIdError.code}
    assert _fetch(conn, 1, group, [(TOPIC, 0)])[1][(TOPIC, 0)]["committed_offset"] == 9
    # A member commit to a group that does not exist: ILLEGAL_GENERATION, GROUP_ID_NOT_FOUND from v9.
    ghost = unique("ghost")
    assert _commit(conn, 8, ghost, {(TOPIC, 0): 1}, 1, "m") == {(TOPIC, 0): errors.IllegalGenerationError.code}
    assert _commit(conn, 9, ghost, {(TOPIC, 0): 1}, 1, "m") == {(TOPIC, 0): errors.GroupIdNotFoundError.code}


# -- administration ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(6))
def test_describe_groups_authorized_operations(served: Tuple[pylogq.Broker, Connect], version: int) -> None:
    _, connect = served
    conn, group = connect(), unique("ops")
    assert _commit(conn, 2, group, {(TOPIC, 0): 1}) == {(TOPIC, 0): 0}
    asked = _describe(conn, version, group, "never-seen", operations=True)
    assert [(g["group_id"], g["group_state"], g["error_code"]) for g in asked] == [
        (group, "Empty", 0), ("never-seen", "Dead", 0)]
    expected = (1 << READ) | (1 << DELETE) | (1 << DESCRIBE) if version >= 3 else NOT_COMPUTED
    assert [g["authorized_operations"] for g in asked] == [expected, expected]
    assert _describe(conn, version, group)[0]["authorized_operations"] == NOT_COMPUTED


@pytest.mark.parametrize("version", range(6))
def test_list_groups_filters(served: Tuple[pylogq.Broker, Connect], version: int) -> None:
    _, connect = served
    conn, stable, empty = connect(), unique("stable"), unique("empty")
    member = _join_new(conn, 9, stable)["member_id"]
    assert _sync(conn, 5, stable, 1, member, {member: b""})["error_code"] == 0
    assert _commit(conn, 2, empty, {(TOPIC, 0): 1}) == {(TOPIC, 0): 0}
    every = _list(conn, version)
    assert every[stable]["protocol_type"] == "consumer" and every[empty]["protocol_type"] == ""
    if version < 4:  # no filters before v4: they are ignored
        assert set(_list(conn, version, ["Stable"])) >= {stable, empty}
        return
    assert (every[stable]["group_state"], every[empty]["group_state"]) == ("Stable", "Empty")
    assert set(_list(conn, version, ["Stable"])) == {stable}
    assert set(_list(conn, version, ["empty", "Dead"])) == {empty}  # states match case-insensitively
    assert set(_list(conn, version, ["PreparingRebalance"])) == set()
    if version >= 5:
        assert every[stable]["group_type"] == every[empty]["group_type"] == "classic"
        assert set(_list(conn, version, types=["Classic"])) == {stable, empty}
        assert set(_list(conn, version, types=["consumer"])) == set()
        assert set(_list(conn, version, ["Stable"], ["classic", "share"])) == {stable}


@pytest.mark.parametrize("version", range(3))
def test_delete_groups(served: Tuple[pylogq.Broker, Connect], version: int) -> None:
    _, connect = served
    conn, empty, busy = connect(), unique("del"), unique("busy")
    assert _commit(conn, 2, empty, {(TOPIC, 0): 1}) == {(TOPIC, 0): 0}
    _join_new(conn, 9, busy)
    r = conn.request(ApiKey.DELETE_GROUPS, {"groups_names": [empty, busy, "unknown"]}, version=version)
    assert [(x["group_id"], x["error_code"]) for x in r["results"]] == [
        (empty, 0), (busy, errors.NonEmptyGroupError.code), ("unknown", errors.GroupIdNotFoundError.code)]
    assert _fetch(conn, 1, empty, [(TOPIC, 0)])[1][(TOPIC, 0)]["committed_offset"] == -1


# -- kafka-python's old protocol versions ---------------------------------------------------------


@pytest.mark.parametrize("api_version", [(0, 9), (0, 10, 1)])
def test_kafka_python_old_versions_commit_in_a_group(served: Tuple[pylogq.Broker, Connect],
                                                     api_version: Tuple[int, ...]) -> None:
    """kafka-python pinned to 0.9 / 0.10.1 speaks GroupCoordinator (FindCoordinator v0), JoinGroup
    v0 / v1, OffsetCommit v2 and OffsetFetch v1."""
    kafka = pytest.importorskip("kafka")
    from kafka.structs import OffsetAndMetadata, TopicPartition

    broker, connect = served
    group = unique("kp-old")
    bootstrap = "%s:%d" % (connect().host, connect().port)
    settings = consumer_settings(bootstrap, group_id=group, api_version=api_version)
    if api_version < (0, 10, 1):  # before KIP-62 the poll interval is the session timeout
        settings["max_poll_interval_ms"] = settings["session_timeout_ms"]
    consumer = kafka.KafkaConsumer(TOPIC, **settings)
    try:
        wait_for(lambda: consumer.assignment(), what="an assignment", step=lambda: consumer.poll(100))
        assert consumer.assignment() == {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)}
        consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(42, "kept", -1)})
        assert consumer.committed(TopicPartition(TOPIC, 0)) == 42
    finally:
        consumer.close()
    code, found = _fetch(connect(), 1, group, [(TOPIC, 0)])
    assert (code, found[(TOPIC, 0)]["committed_offset"], found[(TOPIC, 0)]["metadata"]) == (0, 42, "kept")
    assert broker.group_coordinator.describe_group(group).state == "Empty"  # the consumer left
