"""What the tests of cluster operations (reassignment, elections, throttles) share, on an
in-process :class:`pylogq.Cluster`: waiting for a condition, the brokers by role, a topic
placed as asked and holding records, and a topic whose leadership moved off its preferred
replica."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Dict, List, Tuple

import pylogq
from pylogq.client.admin import AdminClient, NewTopic

TIMEOUT_S = 30.0


def eventually(check: Callable[[], Any], what: str, timeout_s: float = TIMEOUT_S) -> Any:
    """``check()``'s first truthy value, polled until ``timeout_s`` passes (then the test fails)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting for %s" % what
        time.sleep(0.02)


def roles(cluster: pylogq.Cluster) -> Tuple[int, int, int]:
    """(a, b, c): b the controller, a and c two other brokers."""
    controller = cluster.controller()
    assert controller is not None
    b = controller.broker_id
    a, c = sorted(x.broker_id for x in cluster.brokers if x.broker_id != b)
    return a, b, c


def topic_with_records(cluster: pylogq.Cluster, assignment: Dict[int, List[int]], records: int,
                       prefix: str = "moving", value: Callable[[int], bytes] = lambda i: b"record-%d" % i) -> str:
    """A new topic placed as ``assignment``, each partition holding ``records`` records
    (``value(i)`` each, written with acks=all)."""
    name = "%s-%s" % (prefix, uuid.uuid4().hex[:8])
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, replica_assignments=assignment)])
    if records:
        producer = pylogq.Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5)
        try:
            for partition in assignment:
                for i in range(records):
                    producer.send(name, value=value(i), partition=partition)
            producer.flush()
        finally:
            producer.close()
    return name


def led_elsewhere(cluster: pylogq.Cluster, partitions: int = 1) -> str:
    """A topic on (a, b), the two lowest broker ids, for each partition, each led by b once a
    restarted, with a back in every ISR."""
    a, b = sorted(x.broker_id for x in cluster.brokers)[:2]
    topic = topic_with_records(cluster, {p: [a, b] for p in range(partitions)}, 0, prefix="elect")
    eventually(lambda: all(cluster.leader(topic, p) == a for p in range(partitions)), "%d to lead" % a)
    cluster.restart_broker(a)
    eventually(lambda: all(cluster.leader(topic, p) == b for p in range(partitions)), "%d to lead" % b)
    eventually(lambda: all(sorted(cluster.broker(b).describe_topic(topic).partitions[p].isr) == [a, b]
                           for p in range(partitions)), "%d back in the ISRs" % a)
    return topic


def replicas_of(cluster: pylogq.Cluster, topic: str) -> List[List[int]]:
    """Each partition's replicas, in partition order, as Metadata shows them."""
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
        return [p["replicas"] for p in sorted(admin.describe_topics([topic])[0]["partitions"],
                                              key=lambda p: p["partition"])]


def await_replicas(cluster: pylogq.Cluster, topic: str, expected: List[List[int]]) -> None:
    """Wait until Metadata shows the topic's replicas as ``expected``: the brokers hear of a
    reassignment's end (UpdateMetadata) just after the controller stops listing it."""
    eventually(lambda: replicas_of(cluster, topic) == expected, "replicas %s" % expected)
