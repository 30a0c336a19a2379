"""Three broker processes on real ZooKeeper whose inter-broker listener is SSL.

Each broker has two named listeners: ``CLIENT`` (PLAINTEXT) for the clients and
``INTERNAL`` (SSL, client certificates required) for the other brokers
(``inter.broker.listener.name=INTERNAL``): the followers' fetches, the controller's
requests and controlled shutdowns go over mutual TLS, each broker showing its key store
as its client certificate and checking the other's against the trust store and its host
name (``ssl.endpoint.identification.algorithm=https``). The registrations carry both
listeners with their protocols; clients on CLIENT are told the CLIENT endpoints; a topic
replicates, a killed leader's partitions get new leaders and its replica catches up again.

The authorizer is on, as Kafka's documentation sets up such a cluster: each broker is its
certificate's principal, named in ``super.users`` (with ``User:ANONYMOUS``, the clients of
the PLAINTEXT CLIENT listener). A client showing its own trusted certificate on INTERNAL
is its own principal there too: the brokers' requests (StopReplica) are refused it.
"""

from __future__ import annotations

import json
import re
import ssl
import uuid
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

import pylogq
from pylogq.client.admin import NewTopic
from pylogq.client.connection import BrokerConnection
from pylogq.protocol.constants import ApiKey

from .._certs import Certificates
from .._ports import free_port
from .._zookeeper import ZooKeeperServer
from ._processes import ProcessCluster

#: Replication across broker processes and ZooKeeper: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

PARTITIONS = 2
RECORDS = 200
TIMEOUT_S = 60.0
#: The brokers' certificate subject as their principal (tests/_certs.py).
BROKER_PRINCIPAL = "User:CN=localhost,OU=Brokers,O=pylogq,C=US"
CLUSTER_AUTHORIZATION_FAILED = 31


@pytest.fixture(scope="module")
def internal_ports() -> Dict[int, int]:
    """Each broker's INTERNAL port (its CLIENT port is its ProcessCluster port)."""
    return {b: free_port() for b in range(3)}


@pytest.fixture(scope="module")
def tls_cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory, certs: Certificates,
                internal_ports: Dict[int, int]) -> Iterator[ProcessCluster]:
    if not zookeeper.running:
        zookeeper.start()
    base = tmp_path_factory.mktemp("tls-cluster")
    connect = zookeeper.fresh_chroot("pylogq-tls-%s" % uuid.uuid4().hex[:8])
    client_ports = {b: free_port() for b in internal_ports}  # clients bootstrap from the CLIENT listener
    # INTERNAL first: clients must be told the endpoints of their own listener, not the first.
    per_broker = {b: {"listeners": "INTERNAL://127.0.0.1:%d,CLIENT://127.0.0.1:%d" % (internal_ports[b], port)}
                  for b, port in client_ports.items()}
    settings = dict(certs.broker_p12_settings(), **{
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.internal.ssl.client.auth": "required",
        "min.insync.replicas": 2,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "%s;User:ANONYMOUS" % BROKER_PRINCIPAL,
    })
    cluster = ProcessCluster(base, connect, len(client_ports), settings, ports=client_ports, broker_config=per_broker)
    try:
        cluster.start_all()
        yield cluster
    finally:
        try:
            cluster.close()
        finally:
            zookeeper.delete_chroot(connect)


def test_registrations_name_both_listeners(tls_cluster: ProcessCluster, internal_ports: Dict[int, int]) -> None:
    for b, broker in tls_cluster.brokers.items():
        data, _ = tls_cluster.zk.store.get("/brokers/ids/%d" % b)
        registration = json.loads(data)
        assert registration["listener_security_protocol_map"] == {"CLIENT": "PLAINTEXT", "INTERNAL": "SSL"}
        assert registration["endpoints"] == ["INTERNAL://127.0.0.1:%d" % internal_ports[b],
                                             "CLIENT://127.0.0.1:%d" % broker.port]
        # The top-level host and port: the first PLAINTEXT endpoint's, as Kafka writes them.
        assert (registration["host"], registration["port"]) == ("127.0.0.1", broker.port)


def test_replication_and_elections_over_tls(tls_cluster: ProcessCluster) -> None:
    topic = "tls-%s" % uuid.uuid4().hex[:8]
    with pylogq.AdminClient(bootstrap_servers=tls_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)])
        described = admin.describe_cluster()
    # A client on CLIENT is told every broker at its CLIENT endpoint.
    assert sorted(n["port"] for n in described["brokers"]) == sorted(b.port for b in tls_cluster.brokers.values())
    tls_cluster.wait_until(lambda: tls_cluster.full_isr(topic, PARTITIONS), "the ISRs, replicated over TLS",
                           TIMEOUT_S)
    sent = [b"before-%d" % i for i in range(RECORDS)]
    with pylogq.Producer(bootstrap_servers=tls_cluster.bootstrap, acks="all") as producer:
        for value in sent:
            producer.send(topic, value)
        producer.flush(TIMEOUT_S)
    victim = tls_cluster.state(topic, 0)[0]  # type: ignore[index]
    tls_cluster.kill(victim)
    tls_cluster.wait_until(lambda: tls_cluster.state(topic, 0)[0] not in (victim, -1),  # type: ignore[index]
                           "a new leader elected by the controller", TIMEOUT_S)
    more = [b"after-%d" % i for i in range(RECORDS)]
    with pylogq.Producer(bootstrap_servers=tls_cluster.bootstrap, acks="all") as producer:
        for value in more:
            producer.send(topic, value)
        producer.flush(TIMEOUT_S)
    tls_cluster.start(victim)
    tls_cluster.wait_until(lambda: tls_cluster.full_isr(topic, PARTITIONS), "the restarted replica back in the ISR",
                           TIMEOUT_S)
    got: List[bytes] = []
    with pylogq.Consumer(topic, bootstrap_servers=tls_cluster.bootstrap, group_id=topic,
                         auto_offset_reset="earliest") as consumer:
        tls_cluster.wait_until(lambda: got.extend(
            r.value for rs in consumer.poll(200).values() for r in rs) or len(got) >= 2 * RECORDS,
            "every record", TIMEOUT_S)
    assert sorted(got) == sorted(sent + more)
    # The brokers' own connections were TLS, each broker authenticated by its certificate.
    logs = "".join(_log(b.log_path) for b in tls_cluster.brokers.values())
    assert re.search(r"TLS handshake done .* listener=INTERNAL .*principal=" + re.escape(BROKER_PRINCIPAL),
                     logs), "no inter-broker TLS handshake in the logs"
    assert "TLS handshake failed" not in logs
    # Authorized as their certificates' principal (a super user), never refused.
    assert not re.search(r"refused id=\d+ .*principal=" + re.escape(BROKER_PRINCIPAL), logs)


def test_a_client_certificate_on_the_inter_broker_listener_is_not_a_broker(
        tls_cluster: ProcessCluster, certs: Certificates, internal_ports: Dict[int, int]) -> None:
    """A client with its own trusted certificate reaches INTERNAL, but it is User:CN=alice,...
    and not a super user: a StopReplica deleting a topic's partitions is refused, and the
    topic keeps its records."""
    topic = "guarded-%s" % uuid.uuid4().hex[:8]
    with pylogq.AdminClient(bootstrap_servers=tls_cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3)])
    tls_cluster.wait_until(lambda: tls_cluster.full_isr(topic, 1), "the topic's ISR", TIMEOUT_S)
    with pylogq.Producer(bootstrap_servers=tls_cluster.bootstrap, acks="all") as producer:
        producer.send(topic, b"kept")
        producer.flush(TIMEOUT_S)
    context = ssl.create_default_context(cafile=certs.path("ca.pem"))
    context.load_cert_chain(certs.path("client.pem"), certs.path("client-key.pem"))
    for b in tls_cluster.brokers:
        conn = BrokerConnection("127.0.0.1", internal_ports[b], "mtls-client", 10.0, ssl_context=context)
        try:
            answer = conn.request(ApiKey.STOP_REPLICA, {
                "controller_id": b, "controller_epoch": 0, "broker_epoch": -1, "delete_partitions": True,
                "topics": [{"name": topic, "partition_indexes": [0]}]}, version=2)
        finally:
            conn.close()
        assert answer["error_code"] == CLUSTER_AUTHORIZATION_FAILED, answer
    assert tls_cluster.full_isr(topic, 1)
    with pylogq.Consumer(topic, bootstrap_servers=tls_cluster.bootstrap, group_id=topic,
                         auto_offset_reset="earliest") as consumer:
        got: List[bytes] = []
        tls_cluster.wait_until(lambda: got.extend(
            r.value for rs in consumer.poll(200).values() for r in rs) or got == [b"kept"], "the record", TIMEOUT_S)


def _log(path: Path) -> str:
    return path.read_text("utf-8", "replace")
