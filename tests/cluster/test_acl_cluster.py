"""ACLs in a cluster: kept in the metadata store in Kafka's layout and applied by every broker.

Three brokers on real ZooKeeper (each its own session, as separate processes would have):
an ACL created through one broker's CreateAcls is in ``/kafka-acl`` as Kafka's JSON, with
a change notification, and every broker decides with it within moments (the time is
measured and printed); ACLs written by two brokers at once on one resource are all kept
(conditional writes); a removal reaches every broker too; a broker started later loads
them. The brokers' own requests to each other (LeaderAndIsr, UpdateMetadata, the
followers' fetches) keep a replicated topic working with the authorizer on. The
in-process :class:`pylogq.Cluster` (the in-memory store) serves the same.

On the in-memory store, the notifications' edge cases: a change whose ACLs could not be
read (the connection lost) is applied once the store is back, and a notification that
cannot be decoded is logged and passed over without holding back the ones after it, and
notifications are purged by their age in the store; a closed authorizer's applier thread
has stopped and the store no longer calls it; an ACL znode naming an operation from a newer
Kafka loads.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from pylogq import Broker, Cluster, errors
from pylogq.cluster.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from pylogq.cluster.broker.authorizer import AclAuthorizer, ZkAclAuthorizer
from pylogq.cluster.contract import BrokerEndpoint
from pylogq.cluster.zk import acls as zk_acls
from pylogq.cluster.zk.acls import ACL_CHANGE_PREFIX, LITERAL_CHANGES_PATH, AclZkStore, acl_path
from pylogq.cluster.zk.kazoo_store import ZooKeeperStore, split_connect_string
from pylogq.cluster.zk.memory_store import InMemoryStoreClient, InMemoryZooKeeper
from pylogq.records import build_batch
from pylogq.testing import CLUSTER_TEST_DEFAULTS, TEST_DEFAULTS

from .._cluster_ops import eventually
from .._zookeeper import ZooKeeperServer

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}
DEADLINE_S = 10.0


def _binding(name: str, principal: str = "User:alice", op: AclOperation = AclOperation.READ,
             pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.TOPIC, name, pattern),
                      AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW))


def _can_read(broker: Broker, topic: str, principal: str = "User:alice") -> bool:
    assert broker.authorizer is not None
    return _allows(broker.authorizer, topic, principal)


def _allows(authorizer: AclAuthorizer, topic: str, principal: str = "User:alice") -> bool:
    return authorizer.authorize(principal, "127.0.0.1", AclOperation.READ, ResourceType.TOPIC, topic)


@pytest.fixture
def zk_brokers(zookeeper_connect: str, tmp_path: Path) -> Iterator[List[Broker]]:
    brokers: List[Broker] = []
    try:
        for broker_id in (1, 2, 3):
            broker = Broker(str(tmp_path / ("b%d" % broker_id)), **dict(
                TEST_DEFAULTS, **CLUSTER_TEST_DEFAULTS, **AUTHORIZER, **{
                    "broker.id": broker_id, "zookeeper.connect": zookeeper_connect}))
            brokers.append(broker)
            host, port = broker.serve("127.0.0.1", 0)
            broker.join_cluster([BrokerEndpoint("PLAINTEXT", host, port)])
        yield brokers
    finally:
        for broker in reversed(brokers):
            broker.close()


def test_an_acl_reaches_every_broker(zk_brokers: List[Broker], zookeeper_connect: str,
                                     zookeeper: ZooKeeperServer) -> None:
    first, second, third = zk_brokers
    assert first.authorizer is not None
    assert not any(_can_read(b, "orders") for b in zk_brokers)
    binding = _binding("orders")
    assert first.authorizer.create_acls([binding]) == [None]
    start = time.monotonic()
    for b in (second, third):
        eventually(lambda b=b: _can_read(b, "orders"), "broker %d to apply the ACL" % b.broker_id, DEADLINE_S)
    print("an ACL reached every broker in %.3f s" % (time.monotonic() - start))
    # Kafka's znodes: the resource's JSON, and a literal change notification.
    _, chroot = split_connect_string(zookeeper_connect)
    assert chroot is not None
    store = ZooKeeperStore(zookeeper.connect_string)
    try:
        data, _ = store.get("/%s/kafka-acl/Topic/orders" % chroot.strip("/"))
        assert json.loads(data) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
        changes = store.get_children("/%s/kafka-acl-changes" % chroot.strip("/"))
        assert [c for c in changes if c.startswith("acl_changes_")]
    finally:
        store.close()
    # A prefixed ACL, and a removal through another broker.
    assert second.authorizer is not None
    assert second.authorizer.create_acls([_binding("pay", pattern=PatternType.PREFIXED)]) == [None]
    eventually(lambda: _can_read(first, "payments") and _can_read(third, "payments"), "the prefixed ACL", DEADLINE_S)
    assert third.authorizer is not None
    removed = third.authorizer.delete_acls([AclBindingFilter(
        ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL), binding.entry.to_filter())])
    assert removed == [[(binding, None)]]
    start = time.monotonic()
    for b in (first, second):
        eventually(lambda b=b: not _can_read(b, "orders"), "the removal on broker %d" % b.broker_id, DEADLINE_S)
    print("a removal reached every broker in %.3f s" % (time.monotonic() - start))


def test_concurrent_changes_on_one_resource_are_all_kept(zk_brokers: List[Broker]) -> None:
    """Each broker adds its principals to the same topic at once: every entry survives,
    and every broker ends with all of them."""
    failures: List[Any] = []

    def add(broker: Broker) -> None:
        assert broker.authorizer is not None
        for i in range(5):
            outcome = broker.authorizer.create_acls([_binding("shared", "User:u%d-%d" % (broker.broker_id, i))])
            if outcome != [None]:
                failures.append(outcome)

    threads = [threading.Thread(target=add, args=(b,)) for b in zk_brokers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a broker's ACL changes did not finish within 60 s"
    assert not failures
    expected = {"User:u%d-%d" % (b, i) for b in (1, 2, 3) for i in range(5)}
    for broker in zk_brokers:
        assert broker.authorizer is not None
        eventually(lambda broker=broker: {b.entry.principal for b in broker.authorizer.acls(  # type: ignore[union-attr]
            AclBindingFilter.any())} == expected, "broker %d to have every entry" % broker.broker_id, DEADLINE_S)


def test_replication_and_a_late_broker_with_the_authorizer_on(zk_brokers: List[Broker], zookeeper_connect: str,
                                                              tmp_path: Path) -> None:
    """The brokers' requests to each other are theirs to make (CLUSTER_ACTION on their listener):
    a topic replicated three times takes records on every replica; a broker started after an
    ACL was made loads it."""
    first = zk_brokers[0]
    created = first.create_topic("replicated", partitions=1, replication_factor=3)
    leader = next(b for b in zk_brokers if b.broker_id == created.partitions[0].leader)
    leader.produce("replicated", 0, bytes(build_batch([b"a", b"b"])))
    # The high watermark moves once both followers have fetched the records (as replicas).
    eventually(lambda: leader.list_offsets("replicated", 0, -1)[0] == 2, "replication to the followers", DEADLINE_S)
    assert len(leader.describe_topic("replicated").partitions[0].isr) == 3  # no follower was left behind
    assert first.authorizer is not None
    first.authorizer.create_acls([_binding("late")])
    late = Broker(str(tmp_path / "b4"), **dict(TEST_DEFAULTS, **CLUSTER_TEST_DEFAULTS, **AUTHORIZER, **{
        "broker.id": 4, "zookeeper.connect": zookeeper_connect}))
    try:
        assert _can_read(late, "late")
    finally:
        late.close()


@pytest.fixture
def pylogq_broker_config() -> Dict[str, Any]:
    return dict(TEST_DEFAULTS, **AUTHORIZER)


def test_the_in_process_cluster_shares_its_acls(pylogq_cluster: Cluster) -> None:
    brokers = pylogq_cluster.brokers
    first = brokers[0]
    assert first.authorizer is not None
    assert first.authorizer.create_acls([_binding("t")]) == [None]
    for broker in brokers:
        eventually(lambda broker=broker: _can_read(broker, "t"), "broker %d" % broker.broker_id, DEADLINE_S)


# -- the change notifications, on the in-memory store ---------------------------------------------


class _LosingRead(AclZkStore):
    """A broker's ACL store whose next read of an ACL znode, once armed, finds the connection
    to the metadata store lost (the read raises as a lost connection does)."""

    def __init__(self, client: InMemoryStoreClient) -> None:
        super().__init__(client)
        self.client = client
        self.armed = threading.Event()
        self.lost = threading.Event()

    def read(self, pattern: ResourcePattern) -> Any:
        if self.armed.is_set():
            self.armed.clear()
            self.client.disconnect()
            self.lost.set()
            raise errors.StoreConnectionError(acl_path(pattern), "the connection was lost before the answer came")
        return super().read(pattern)


@pytest.fixture
def ensemble() -> Iterator[InMemoryZooKeeper]:
    with InMemoryZooKeeper() as zk:
        yield zk


def _authorizer(store: AclZkStore, broker_id: int) -> ZkAclAuthorizer:
    authorizer = ZkAclAuthorizer(store, broker_id)
    authorizer.start()
    return authorizer


def test_a_change_whose_read_failed_is_applied_once_the_store_is_back(ensemble: InMemoryZooKeeper) -> None:
    """The notification is not taken as seen until its ACLs are read: the pass after the
    reconnection applies it (a revoked or granted ACL is never left out)."""
    reader_store = _LosingRead(ensemble.connect())
    writer = _authorizer(AclZkStore(ensemble.connect()), 1)
    reader = _authorizer(reader_store, 2)
    try:
        reader_store.armed.set()
        assert writer.create_acls([_binding("orders")]) == [None]
        assert reader_store.lost.wait(DEADLINE_S), "the reader never read the changed ACL"
        assert not _allows(reader, "orders")
        reader_store.client.reconnect()
        eventually(lambda: _allows(reader, "orders"), "the change applied after the reconnection", DEADLINE_S)
    finally:
        reader.close()
        writer.close()


def test_a_corrupt_notification_does_not_hold_back_the_next(ensemble: InMemoryZooKeeper,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """A notification that cannot be decoded is logged and passed over, as Kafka does; the
    changes after it are applied."""
    writer_client = ensemble.connect()
    writer = _authorizer(AclZkStore(writer_client), 1)
    reader = _authorizer(AclZkStore(ensemble.connect()), 2)
    caplog.set_level("ERROR", logger="pylogq.authorizer")
    try:
        corrupt = writer_client.create(LITERAL_CHANGES_PATH + "/" + ACL_CHANGE_PREFIX, b"not a change",
                                       sequential=True)
        assert writer.create_acls([_binding("orders")]) == [None]
        eventually(lambda: _allows(reader, "orders"), "the change after the corrupt one", DEADLINE_S)

        def skipped() -> List[str]:  # by the reader's applier (the writer's passes it over too)
            return [r.getMessage() for r in caplog.records
                    if r.threadName == "pylogq-acl-changes-2" and "skipped ACL change notification" in r.getMessage()]

        assert len(skipped()) == 1 and corrupt.rsplit("/", 1)[1] in skipped()[0], skipped()
        # Passed over once: later changes are applied without it coming up again.
        assert writer.create_acls([_binding("more")]) == [None]
        eventually(lambda: _allows(reader, "more"), "a later change", DEADLINE_S)
        assert len(skipped()) == 1
    finally:
        reader.close()
        writer.close()


def test_notifications_are_purged_by_their_age(ensemble: InMemoryZooKeeper, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass deletes every notification older than the expiration (15 minutes in Kafka) by
    its creation time in the store, those it did not read itself included (here one that
    was pending when the broker started, which it takes as seen without reading it)."""
    writer = AclZkStore(ensemble.connect())
    writer.ensure_paths()

    def change(name: str) -> None:
        pattern = _binding(name).pattern
        assert writer.write(pattern, frozenset({_binding(name).entry}), -1) == 0
        writer.notify(pattern)

    def notifications() -> List[str]:
        return [c for c in writer.store.get_children(LITERAL_CHANGES_PATH) if c.startswith(ACL_CHANGE_PREFIX)]

    change("first")
    earlier = notifications()
    assert len(earlier) == 1
    authorizer = _authorizer(AclZkStore(ensemble.connect()), 1)
    try:
        assert _allows(authorizer, "first")  # loaded at the start
        monkeypatch.setattr(zk_acls, "CHANGE_EXPIRATION_MS", 0)
        created = writer.store.exists(LITERAL_CHANGES_PATH + "/" + earlier[0])
        assert created is not None
        eventually(lambda: int(time.time() * 1000) > created.ctime, "a millisecond past its creation", DEADLINE_S)
        change("second")
        eventually(lambda: _allows(authorizer, "second"), "the second change applied", DEADLINE_S)
        eventually(lambda: earlier[0] not in notifications(), "the earlier notification purged", DEADLINE_S)
    finally:
        authorizer.close()


def test_closing_stops_the_applier_and_leaves_the_store(ensemble: InMemoryZooKeeper) -> None:
    """A closed authorizer's thread has ended and the store (which outlives it: the broker's
    session) no longer calls it."""
    client = ensemble.connect()
    listening = dict(client._listeners)

    def applier_running() -> bool:
        return any(t.name == "pylogq-acl-changes-7" for t in threading.enumerate())

    authorizer = _authorizer(AclZkStore(client), 7)
    assert applier_running() and len(client._listeners) == len(listening) + 1
    authorizer.close()
    assert not applier_running()
    assert client._listeners == listening


def test_an_acl_znode_from_a_newer_kafka_does_not_stop_a_broker(ensemble: InMemoryZooKeeper) -> None:
    """An entry whose operation this broker does not know is loaded as UNKNOWN (as Kafka loads
    it), and the resource's other entries apply."""
    client = ensemble.connect()
    client.create(acl_path(_binding("orders").pattern), json.dumps({"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Frobnicate", "host": "*"}]}).encode(),
        makepath=True)
    authorizer = _authorizer(AclZkStore(client), 1)
    try:
        assert _allows(authorizer, "orders")
        assert sorted(b.entry.operation for b in authorizer.acls(AclBindingFilter.any())) == [
            AclOperation.UNKNOWN, AclOperation.READ]
    finally:
        authorizer.close()
