"""AdminClient's alter_partition_reassignments and list_partition_reassignments (KIP-455).

Against a served three-broker cluster, the same tests run over TCP (the requests go to
the controller, found through Metadata) and in-process (a client of the controller's
Broker): a reassignment moves a partition with its records and leaves the listing once
complete; one held back (its new replica cut off from the leader) is listed, and
cancelled; each partition is refused on its own with Kafka's errors. Then what only one
transport does: over TCP a stale or dead controller is found again, in-process a broker
that is not the controller says which one is; and a single node takes only itself.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List

import pytest

import pylogq
from pylogq import errors
from pylogq.client.admin import AdminClient, NewTopic, TopicPartition

from .._cluster_ops import await_replicas, eventually, roles, topic_with_records

TIMEOUT_S = 30.0
RECORDS = 300





def _size_on(cluster: pylogq.Cluster, broker_id: int, topic: str, partition: int) -> int:
    """The bytes of the partition's log on a broker; -1 when it holds none."""
    for directory in cluster.broker(broker_id).describe_log_dirs({topic: [partition]}):
        for replica in directory.replicas:
            if (replica.topic, replica.partition) == (topic, partition):
                return replica.size
    return -1




# -- both transports ---------------------------------------------------------------------------------


@pytest.fixture(params=["tcp", "in-process"])
def admin(request: Any, pylogq_cluster: pylogq.Cluster) -> Iterator[AdminClient]:
    """A client of the cluster: over TCP from its bootstrap servers, or of its controller's Broker."""
    if request.param == "tcp":
        client = AdminClient(bootstrap_servers=pylogq_cluster.bootstrap_servers)
    else:
        client = AdminClient(broker=pylogq_cluster.controller())
    try:
        yield client
    finally:
        client.close()


def test_a_reassignment_moves_the_partition_with_its_records(admin: AdminClient,
                                                               pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = roles(pylogq_cluster)
    topic = topic_with_records(pylogq_cluster, {0: [a, b], 1: [b, c]}, RECORDS)
    # Each partition's own size: the producer batches each partition as its linger allows.
    size, size1 = _size_on(pylogq_cluster, a, topic, 0), _size_on(pylogq_cluster, b, topic, 1)
    assert size > 0 and size1 > 0
    moves = {TopicPartition(topic, 0): [c, b], (topic, 1): [a, c]}  # a pair is taken for a TopicPartition
    assert admin.alter_partition_reassignments(moves) == {TopicPartition(topic, 0): None,
                                                           TopicPartition(topic, 1): None}
    eventually(lambda: admin.list_partition_reassignments() == {}, "the reassignments to complete")
    await_replicas(pylogq_cluster, topic, [[c, b], [a, c]])
    # The brokers added hold every record; those removed delete their copies.
    assert eventually(lambda: _size_on(pylogq_cluster, c, topic, 0) == size, "broker %d's copy of p0" % c)
    assert eventually(lambda: _size_on(pylogq_cluster, a, topic, 1) == size1, "broker %d's copy of p1" % a)
    eventually(lambda: _size_on(pylogq_cluster, a, topic, 0) == -1, "broker %d to delete p0" % a)
    eventually(lambda: _size_on(pylogq_cluster, b, topic, 1) == -1, "broker %d to delete p1" % b)
    consumer = pylogq.Consumer(bootstrap_servers=pylogq_cluster.bootstrap_servers, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, 0)])
        values: List[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values += [r.value for r in records]
        assert values == [b"record-%d" % i for i in range(RECORDS)]
    finally:
        consumer.close()


def test_a_reassignment_under_way_is_listed_and_cancelled(admin: AdminClient,
                                                           pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = roles(pylogq_cluster)
    topic = topic_with_records(pylogq_cluster, {0: [a, b], 1: [a, b]}, RECORDS)
    tp = TopicPartition(topic, 0)
    pylogq_cluster.cut(a, c)  # c, added, cannot fetch from the leader a: the move stays under way
    try:
        assert admin.alter_partition_reassignments({tp: [a, c]}) == {tp: None}
        moving = {"replicas": [a, c, b], "adding_replicas": [c], "removing_replicas": [b]}
        assert admin.list_partition_reassignments() == {tp: moving}
        assert admin.list_partition_reassignments([tp, (topic, 1)]) == {tp: moving}
        assert admin.list_partition_reassignments({topic: [0, 1, 7]}) == {tp: moving}
        assert admin.list_partition_reassignments([(topic, 1)]) == {}
        assert admin.list_partition_reassignments([]) == {}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        assert admin.list_partition_reassignments() == {}
    finally:
        pylogq_cluster.heal()
    await_replicas(pylogq_cluster, topic, [[a, b], [a, b]])
    eventually(lambda: _size_on(pylogq_cluster, c, topic, 0) == -1, "broker %d to delete what it was given" % c)


def test_each_partition_is_refused_on_its_own(admin: AdminClient, pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = roles(pylogq_cluster)
    topic = topic_with_records(pylogq_cluster, {0: [a, b], 1: [a, b], 2: [a, b], 3: [a, b]}, records=0)
    asked: Dict[Any, Any] = {
        (topic, 0): [a, 99],  # no broker 99
        (topic, 1): [c, c],  # a broker twice
        (topic, 2): None,  # nothing to cancel
        (topic, 9): [a],  # no such partition
        ("no-such-topic", 0): [a],
        (topic, 3): [b, a],  # accepted: the leader moves to b
    }
    results = admin.alter_partition_reassignments(asked, raise_errors=False)
    assert list(results) == [TopicPartition(*tp) for tp in asked]
    assert {tp: type(e) for tp, e in results.items()} == {
        (topic, 0): errors.InvalidReplicationAssignmentError,
        (topic, 1): errors.InvalidReplicationAssignmentError,
        (topic, 2): errors.NoReassignmentInProgressError,
        (topic, 9): errors.UnknownTopicOrPartitionError,
        ("no-such-topic", 0): errors.UnknownTopicOrPartitionError,
        (topic, 3): type(None),
    }
    assert "[99]" in str(results[(topic, 0)]) and "%s-0" % topic in str(results[(topic, 0)])
    await_replicas(pylogq_cluster, topic, [[a, b], [a, b], [a, b], [b, a]])
    # raise_errors (the default): the first refusal is raised, once every partition was answered.
    with pytest.raises(errors.InvalidReplicationAssignmentError, match="99"):
        admin.alter_partition_reassignments({(topic, 0): [a, 99], (topic, 2): None})
    with pytest.raises(errors.NoReassignmentInProgressError, match="%s-2" % topic):
        admin.alter_partition_reassignments({(topic, 2): None})


def test_a_broker_that_is_down_cannot_be_a_target(admin: AdminClient, pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = roles(pylogq_cluster)
    topic = topic_with_records(pylogq_cluster, {0: [a, b]}, records=0)
    pylogq_cluster.stop_broker(c, abrupt=True)
    eventually(lambda: c not in [x.broker_id for x in _live(pylogq_cluster)], "broker %d's session to expire" % c)
    with pytest.raises(errors.InvalidReplicationAssignmentError, match="not alive: \\[%d\\]" % c):
        admin.alter_partition_reassignments({(topic, 0): [a, c]})
    assert admin.list_partition_reassignments() == {}


def _live(cluster: pylogq.Cluster) -> List[Any]:
    """The brokers the controller's cluster view counts alive."""
    controller = cluster.controller()
    view = controller.cluster_view() if controller is not None else None
    return [] if view is None else list(view[1])


def test_arguments_are_checked_before_anything_is_sent(admin: AdminClient) -> None:
    with pytest.raises(errors.InvalidArgumentError, match=r"t-0 must name at least one broker"):
        admin.alter_partition_reassignments({("t", 0): []})
    with pytest.raises(errors.InvalidArgumentTypeError, match="t-0 must be a list of broker ids"):
        admin.alter_partition_reassignments({("t", 0): ["1"]})
    with pytest.raises(errors.InvalidArgumentTypeError, match="t-0 must be a list of broker ids"):
        admin.alter_partition_reassignments({("t", 0): "1,2"})
    with pytest.raises(errors.InvalidArgumentTypeError, match="must be a dict"):
        admin.alter_partition_reassignments([(("t", 0), [1])])
    with pytest.raises(errors.InvalidArgumentTypeError, match="TopicPartition"):
        admin.alter_partition_reassignments({"t": [1]})
    with pytest.raises(errors.InvalidArgumentTypeError, match="TopicPartition"):
        admin.list_partition_reassignments(TopicPartition("t", 0))
    with pytest.raises(errors.ConfigError, match="timeout_ms"):
        admin.list_partition_reassignments(timeout_ms=-1)
    assert admin.alter_partition_reassignments({}) == {}


# -- over TCP: finding the controller ---------------------------------------------------------------


def _address(cluster: pylogq.Cluster, broker_id: int) -> str:
    host, port = cluster.broker(broker_id).listener_addresses[0]
    return "%s:%d" % (host, port)


def test_a_client_of_another_broker_reaches_the_controller(pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = roles(pylogq_cluster)
    topic = topic_with_records(pylogq_cluster, {0: [a, b]}, records=0)
    with AdminClient(bootstrap_servers=_address(pylogq_cluster, a)) as admin:
        assert admin.list_partition_reassignments() == {}
        # A stale controller (a, which answers NOT_CONTROLLER) is looked up again in Metadata.
        admin._transport._controller = a  # type: ignore[attr-defined]
        assert admin.alter_partition_reassignments({(topic, 0): [b, a]}) == {TopicPartition(topic, 0): None}
        admin._transport._controller = c  # type: ignore[attr-defined]
        eventually(lambda: admin.list_partition_reassignments() == {}, "the reassignment to complete")
        assert admin._transport._controller == b  # type: ignore[attr-defined]


def test_a_controller_that_went_down_is_found_again(pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = roles(pylogq_cluster)
    topic = topic_with_records(pylogq_cluster, {0: [a, c]}, records=0)
    with AdminClient(bootstrap_servers=",".join(_address(pylogq_cluster, x) for x in (a, c))) as admin:
        assert admin.list_partition_reassignments() == {}  # the client now knows b as the controller
        pylogq_cluster.stop_broker(b, abrupt=True)
        # Its listener is gone: the client finds the controller elected after b's session expires.
        assert admin.alter_partition_reassignments({(topic, 0): [c, a]}) == {TopicPartition(topic, 0): None}
        eventually(lambda: admin.list_partition_reassignments() == {}, "the reassignment to complete")
        new = pylogq_cluster.controller()
        assert new is not None and new.broker_id in (a, c)
    await_replicas(pylogq_cluster, topic, [[c, a]])


def test_no_controller_within_the_timeout_is_not_controller(pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = roles(pylogq_cluster)
    with AdminClient(bootstrap_servers=_address(pylogq_cluster, a)) as admin:
        transport = admin._transport
        # Metadata that keeps naming a broker that is not the controller: every answer is NOT_CONTROLLER.
        real = transport._metadata  # type: ignore[attr-defined]

        def stale(*args: Any, **kwargs: Any) -> Any:
            response = real(*args, **kwargs)
            transport._controller = a  # type: ignore[attr-defined]
            return response

        transport._metadata = stale  # type: ignore[attr-defined]
        transport._controller = a  # type: ignore[attr-defined]
        started = time.monotonic()
        with pytest.raises(errors.NotControllerError):
            admin.list_partition_reassignments(timeout_ms=300)
        assert time.monotonic() - started < 10.0


# -- in-process ----------------------------------------------------------------------------------------


def test_an_in_process_client_of_another_broker_is_told_the_controller(pylogq_cluster: pylogq.Cluster) -> None:
    a, b, c = roles(pylogq_cluster)
    with AdminClient(broker=pylogq_cluster.broker(a)) as admin:
        with pytest.raises(errors.NotControllerError, match="broker %d is not the controller .*broker %d is" % (a, b)):
            admin.list_partition_reassignments()
        with pytest.raises(errors.NotControllerError, match="broker %d is not the controller" % a):
            admin.alter_partition_reassignments({("t", 0): [a]})


# -- a single node --------------------------------------------------------------------------------------


@pytest.fixture(params=["tcp", "in-process"])
def single(request: Any, pylogq_broker: pylogq.Broker) -> Iterator[AdminClient]:
    if request.param == "tcp":
        client = AdminClient(bootstrap_servers=pylogq_broker.bootstrap_servers)  # type: ignore[attr-defined]
    else:
        client = AdminClient(broker=pylogq_broker)
    try:
        yield client
    finally:
        client.close()


def test_a_single_node_takes_only_itself(single: AdminClient, pylogq_broker: pylogq.Broker) -> None:
    single.create_topics([NewTopic("t", 2)])
    me = pylogq_broker.broker_id
    assert single.alter_partition_reassignments({("t", 0): [me]}) == {TopicPartition("t", 0): None}
    assert single.list_partition_reassignments() == {}
    results = single.alter_partition_reassignments({("t", 1): [me, me + 1], ("t", 0): None, ("t", 2): [me]},
                                                   raise_errors=False)
    assert {tp: type(e) for tp, e in results.items()} == {
        ("t", 1): errors.InvalidReplicationAssignmentError,
        ("t", 0): errors.NoReassignmentInProgressError,
        ("t", 2): errors.UnknownTopicOrPartitionError,
    }
