"""SCRAM credentials in a cluster: written to ``/config/users`` by whichever broker is asked,
announced with a config change notification, and used by every broker to authenticate.

Three brokers (the ``pylogq_cluster`` fixture) each open a SASL_PLAINTEXT listener beside
the plain one the fixture serves; credentials are changed over the plain listeners.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from pylogq import Broker, Cluster
from pylogq.client.connection import BrokerConnection
from pylogq.errors import SaslAuthenticationFailedError
from pylogq.protocol.constants import ApiKey
from pylogq.protocol.scram import parse_credential, salted_password
from pylogq.testing import TEST_DEFAULTS

#: SCRAM credentials through the metadata store, no records moved: the compiled pass only
#: (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism %s"
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE = 91, 92
DEADLINE_S = 30.0

Address = Tuple[str, int]


@pytest.fixture
def pylogq_broker_config() -> Dict[str, Any]:
    return dict(TEST_DEFAULTS, **{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"})


@pytest.fixture
def sasl_addresses(pylogq_cluster: Cluster) -> Dict[int, Address]:
    """Broker id -> the address of a SASL_PLAINTEXT listener it opened."""
    return {broker.broker_id: _serve_sasl(broker) for broker in pylogq_cluster.brokers}


def _serve_sasl(broker: Broker) -> Address:
    return broker.serve("127.0.0.1", 0, sasl_users={"admin": "admin-secret"})


def _plain(cluster: Cluster, broker_id: int) -> BrokerConnection:
    host, port = cluster.broker(broker_id).listener_addresses[0]
    return BrokerConnection(host, port, "scram-cluster-test", 10.0)


def _alter(conn: BrokerConnection, upsertions: List[Tuple[str, int, str, int]],
           deletions: List[Tuple[str, int]]) -> Dict[str, Tuple[int, Optional[str]]]:
    ups = []
    for user, mechanism, password, iterations in upsertions:
        salt = os.urandom(16)
        ups.append({"name": user, "mechanism": mechanism, "iterations": iterations, "salt": salt,
                    "salted_password": salted_password(MECHANISMS[mechanism - 1], password, salt, iterations)})
    response = conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {
        "deletions": [{"name": u, "mechanism": m} for u, m in deletions], "upsertions": ups})
    return {r["user"]: (r["error_code"], r["error_message"]) for r in response["results"]}


def _authenticates(address: Address, mechanism: str, user: str, password: str) -> bool:
    try:
        conn = BrokerConnection(address[0], address[1], "scram-cluster-test", 10.0, (mechanism, user, password))
    except SaslAuthenticationFailedError as exc:
        assert FAILED % mechanism in str(exc)
        return False
    conn.close()
    return True


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)


def test_a_user_created_on_one_broker_authenticates_on_every_broker(
        pylogq_cluster: Cluster, sasl_addresses: Dict[int, Address]) -> None:
    conn = _plain(pylogq_cluster, 0)
    try:
        assert _alter(conn, [("alice", 1, "alice-secret", 8192), ("alice", 2, "alice-secret", 4096)], []) == {
            "alice": (0, None)}
    finally:
        conn.close()
    for broker_id, address in sorted(sasl_addresses.items()):
        for mechanism in MECHANISMS:
            _wait(lambda: _authenticates(address, mechanism, "alice", "alice-secret"),
                  "broker %d to accept alice over %s" % (broker_id, mechanism))
        assert not _authenticates(address, "SCRAM-SHA-256", "alice", "wrong")

    # Stored as Kafka stores it, with a notification naming the user.
    store = pylogq_cluster.broker(1).cluster.store  # type: ignore[union-attr]
    data, _ = store.get("/config/users/alice")
    stored = json.loads(data)
    assert stored["version"] == 1 and sorted(stored["config"]) == list(MECHANISMS)
    assert parse_credential(stored["config"]["SCRAM-SHA-256"]).iterations == 8192
    assert stored["config"]["SCRAM-SHA-256"].startswith("salt=")
    changes = [json.loads(store.get("/config/changes/" + name)[0])
               for name in store.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "users/alice"} in changes

    # Deleted through another broker: refused everywhere.
    conn = _plain(pylogq_cluster, 2)
    try:
        assert _alter(conn, [], [("alice", 1)]) == {"alice": (0, None)}
        assert _alter(conn, [], [("alice", 1)]) == {
            "alice": (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}
    finally:
        conn.close()
    for broker_id, address in sorted(sasl_addresses.items()):
        _wait(lambda: not _authenticates(address, "SCRAM-SHA-256", "alice", "alice-secret"),
              "broker %d to refuse alice's deleted credential" % broker_id)
        assert _authenticates(address, "SCRAM-SHA-512", "alice", "alice-secret")


def test_any_broker_describes_and_names_are_url_encoded(pylogq_cluster: Cluster,
                                                        sasl_addresses: Dict[int, Address]) -> None:
    user = "ali ce/*~"
    conn = _plain(pylogq_cluster, 1)
    try:
        assert _alter(conn, [(user, 1, "pw", 4096), ("bob", 2, "pw", 4096), ("bob", 2, "pw", 4096)], []) == {
            user: (0, None), "bob": (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")}
    finally:
        conn.close()
    store = pylogq_cluster.broker(0).cluster.store  # type: ignore[union-attr]
    assert store.get_children("/config/users") == ["ali%20ce%2F%2A%7E"]
    for broker_id in (0, 1, 2):
        conn = _plain(pylogq_cluster, broker_id)
        try:
            described = conn.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})["results"]
            assert [(r["user"], r["credential_infos"]) for r in described] == [
                (user, [{"mechanism": 1, "iterations": 4096}])]
        finally:
            conn.close()
        _wait(lambda: _authenticates(sasl_addresses[broker_id], "SCRAM-SHA-256", user, "pw"),
              "broker %d to accept %r" % (broker_id, user))


def test_a_restarted_broker_loads_the_credentials(pylogq_cluster: Cluster,
                                                  sasl_addresses: Dict[int, Address]) -> None:
    conn = _plain(pylogq_cluster, 0)
    try:
        assert _alter(conn, [("carol", 2, "carol-secret", 4096)], []) == {"carol": (0, None)}
    finally:
        conn.close()
    restarted = pylogq_cluster.restart_broker(2)
    address = _serve_sasl(restarted)
    assert _authenticates(address, "SCRAM-SHA-512", "carol", "carol-secret")  # read at start, not notified


def test_confluent_admin_client_on_the_cluster(pylogq_cluster: Cluster,
                                               sasl_addresses: Dict[int, Address]) -> None:
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    from confluent_kafka import KafkaException

    admin = admin_mod.AdminClient({"bootstrap.servers": pylogq_cluster.bootstrap_servers})
    sha512 = admin_mod.ScramMechanism.SCRAM_SHA_512
    futures = admin.alter_user_scram_credentials([
        admin_mod.UserScramCredentialUpsertion("dave", admin_mod.ScramCredentialInfo(sha512, 10000), b"dave-secret"),
        admin_mod.UserScramCredentialUpsertion("erin", admin_mod.ScramCredentialInfo(sha512, 20000), b"x")])
    assert futures["dave"].result(DEADLINE_S) is None
    with pytest.raises(KafkaException, match="Too many iterations"):
        futures["erin"].result(DEADLINE_S)
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(DEADLINE_S)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [(sha512, 10000)]
    for broker_id, address in sorted(sasl_addresses.items()):
        _wait(lambda: _authenticates(address, "SCRAM-SHA-512", "dave", "dave-secret"),
              "broker %d to accept dave" % broker_id)
    futures = admin.alter_user_scram_credentials([admin_mod.UserScramCredentialDeletion("dave", sha512)])
    assert futures["dave"].result(DEADLINE_S) is None
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials(["dave"])["dave"].result(DEADLINE_S)
