"""Client quotas in a cluster: three ``pylogq-broker`` processes on a real ZooKeeper.

A quota altered through any broker is written where Kafka writes it (``/config/clients/<id>``,
``/config/users/<user>`` beside the user's SCRAM credentials, ``/config/users/<user>/clients/<id>``)
with a config change notification, and every broker then throttles by it; a broker restarted
reads it back from ZooKeeper. The in-process ``pylogq.Cluster`` keeps them in its in-memory
store the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, List

import pytest

from pylogq import AdminClient, Cluster
from pylogq.client.admin import ClientQuotaAlteration, UserScramCredentialUpsertion
from pylogq.cluster.broker.client_quotas import QuotaValues, ZkClientQuotas
from pylogq.cluster.zk.client import KafkaZkClient
from pylogq.cluster.zk.data import decode_entity_config
from pylogq.cluster.zk.memory_store import InMemoryZooKeeper
from pylogq.protocol.constants import ApiKey

from .._cluster_ops import eventually
from .._zookeeper import zookeeper_install_or_skip
from ..server.test_server import Wire
from ._processes import ProcessCluster, cluster_on_own_zookeeper

#: Quota configs across broker processes and ZooKeeper, no records moved: the compiled pass only
#: (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    zookeeper_install_or_skip()
    with cluster_on_own_zookeeper(tmp_path_factory.mktemp("quotas"), 3, {}) as cluster:
        yield cluster


def _throttles(port: int, client_id: str) -> int:
    """The throttle time a broker answers an ApiVersions of ``client_id`` with."""
    with Wire(("127.0.0.1", port), client_id=client_id) as conn:
        answer = conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "quota-test",
                                                        "client_software_version": "1"})
    return int(answer["throttle_time_ms"])


def _without_quotas(admin: AdminClient) -> None:
    """Remove every quota the cluster holds: each test starts from none (the cluster is shared)."""
    found = admin.describe_client_quotas([])
    if found:
        admin.alter_client_quotas([ClientQuotaAlteration(dict(entity), [(key, None) for key in values])
                                   for entity, values in found.items()])
    assert admin.describe_client_quotas([]) == {}


def test_a_quota_set_through_one_broker_is_applied_by_every_broker(processes: ProcessCluster) -> None:
    admin = AdminClient(bootstrap_servers="127.0.0.1:%d" % processes.brokers[1].port)
    try:
        _without_quotas(admin)
        # Any request of this client id is over a request_percentage this small.
        admin.alter_client_quotas([ClientQuotaAlteration({"client-id": "limited"}, [("request_percentage", 1e-9)])])
    finally:
        admin.close()
    assert decode_entity_config("/config/clients/limited", processes.zk.store.get("/config/clients/limited")[0]) \
        == {"request_percentage": "1.0E-9"}
    for broker in processes.brokers.values():
        eventually(lambda: _throttles(broker.port, "limited") > 0, "broker %d to throttle" % broker.broker_id,
                   DEADLINE_S)
        assert _throttles(broker.port, "unlimited") == 0
    # A broker started again reads the quota from ZooKeeper.
    processes.stop(2)
    processes.start(2)
    eventually(lambda: _throttles(processes.brokers[2].port, "limited") > 0, "the restarted broker to throttle",
               DEADLINE_S)


def test_user_quotas_keep_the_users_scram_credentials(processes: ProcessCluster) -> None:
    admin = AdminClient(bootstrap_servers=processes.bootstrap)
    store = processes.zk.store
    try:
        _without_quotas(admin)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion("alice", "SCRAM-SHA-256", "secret", 8192)])
        admin.alter_client_quotas([
            ClientQuotaAlteration({"user": "alice"}, [("consumer_byte_rate", 2097152)]),
            ClientQuotaAlteration({"user": "bob", "client-id": "app"}, [("producer_byte_rate", 1048576)]),
            ClientQuotaAlteration({"user": None, "client-id": None}, [("producer_byte_rate", 4194304)]),
        ])
        alice = decode_entity_config("/config/users/alice", store.get("/config/users/alice")[0])
        assert alice["consumer_byte_rate"] == "2097152" and alice["SCRAM-SHA-256"].startswith("salt=")
        assert decode_entity_config("", store.get("/config/users/bob/clients/app")[0]) == {
            "producer_byte_rate": "1048576"}
        assert decode_entity_config("", store.get("/config/users/<default>/clients/<default>")[0]) == {
            "producer_byte_rate": "4194304"}
        # Bob's user znode exists only as the parent of his client's: his SCRAM description still works.
        assert admin.describe_user_scram_credentials() == {"alice": [("SCRAM-SHA-256", 8192)]}
        admin.alter_client_quotas([ClientQuotaAlteration({"user": "alice"}, [("consumer_byte_rate", None)])])
        alice = decode_entity_config("/config/users/alice", store.get("/config/users/alice")[0])
        assert "consumer_byte_rate" not in alice and "SCRAM-SHA-256" in alice
        assert admin.describe_client_quotas([]) == {
            (("client-id", "app"), ("user", "bob")): {"producer_byte_rate": 1048576.0},
            (("client-id", None), ("user", None)): {"producer_byte_rate": 4194304.0}}
    finally:
        admin.close()
    changes = [processes.zk.read_config_change(name) for name in processes.zk.get_config_changes()]
    assert {"users/alice", "users/bob/clients/app", "users/<default>/clients/<default>"} <= set(changes)


def test_the_in_process_cluster_keeps_them_too(tmp_path: Path) -> None:
    with Cluster(3, str(tmp_path / "cluster"), **{"zookeeper.session.timeout.ms": 2000}) as cluster:
        admin = AdminClient(broker=cluster.broker(0))
        try:
            admin.alter_client_quotas([ClientQuotaAlteration({"client-id": "c"}, [("producer_byte_rate", 10)])])
        finally:
            admin.close()
        for broker in cluster.brokers:
            eventually(lambda: broker.client_quota_configs() == {(("client-id", "c"),): {"producer_byte_rate": 10.0}},
                   "broker %d's cache" % broker.broker_id, DEADLINE_S)


def test_a_broker_loads_every_quota_and_tells_its_watchers_once() -> None:
    zk = KafkaZkClient(InMemoryZooKeeper().connect())
    zk.ensure_layout()
    written = ZkClientQuotas(zk)
    expected: QuotaValues = {}
    entities = [(("client-id", "c%d" % i),) for i in range(200)] + [
        (("user", "alice"),), (("client-id", None), ("user", "bob")), (("ip", "10.0.0.1"),)]
    for i, entity in enumerate(entities):
        key = "connection_creation_rate" if entity[0][0] == "ip" else "producer_byte_rate"
        written.write(entity, {key: str(1000 + i)})
        expected[entity] = {key: 1000.0 + i}
    zk.set_entity_config("users/carol", {"SCRAM-SHA-256": "salt=x"})  # a user without quotas
    loading = ZkClientQuotas(zk)
    told: List[QuotaValues] = []
    loading.watch(told.append)
    loading.load()
    # Built whole and told once (each entity's own cache copy and call made loading quadratic).
    assert told == [{}, expected] and loading.cached() == expected
