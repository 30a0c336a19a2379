"""A broker that closes ends the waits of the requests in flight on it.

Its listeners answer those requests before the broker closes, so a request waiting for the
broker's metadata (a new topic's leaders, a deleted topic's absence) must not wait out its
timeout for a controller that can no longer reach it: the pytest cluster fixture's teardown
once took 30 s, a FindCoordinator creating ``__consumer_offsets`` waiting for leaders that
the controller could not deliver to a broker already taken out of the cluster's routing.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List

import pytest

from pylogq import errors
from pylogq.client.connection import BrokerConnection
from pylogq.cluster.broker.cluster_node import ADMIN_TIMEOUT_S
from pylogq.cluster.broker.local_cluster import Cluster
from pylogq.protocol import ApiKey

SETTINGS = {"zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 2000}
#: The request is answered when its broker closes, not when its wait for metadata runs out
#: (ADMIN_TIMEOUT_S): half that is the bound, far above the time closing takes.
JOIN_S = ADMIN_TIMEOUT_S / 2


def _request(conn: BrokerConnection, operation: str) -> Dict[str, Any]:
    if operation == "create":
        spec = {"name": "t", "num_partitions": 1, "replication_factor": 1, "configs": [], "assignments": []}
        [result] = conn.request(ApiKey.CREATE_TOPICS, {"topics": [spec], "timeout_ms": 600000,
                                                       "validate_only": False}, version=5)["topics"]
    else:
        [result] = conn.request(ApiKey.DELETE_TOPICS, {"topic_names": ["t"], "timeout_ms": 600000},
                                version=5)["responses"]
    return dict(result)


@pytest.mark.parametrize("operation", ["create", "delete"])
def test_closing_a_broker_answers_its_requests_waiting_for_metadata(tmp_path, operation: str) -> None:
    with Cluster(2, str(tmp_path), **SETTINGS) as cluster:
        cluster.serve()
        if operation == "delete":
            cluster.create_topic("t", 1, 1)
        controller = cluster.controller()
        assert controller is not None and controller.cluster is not None
        broker = next(b for b in cluster.brokers if b is not controller)
        host, port = broker.listener_addresses[0]
        conn = BrokerConnection(host, port, "shutdown-waits-test", JOIN_S)
        # The controller cannot reach the broker: the broker's metadata never learns of the change.
        cluster.cut(controller.broker_id, broker.broker_id)
        answers: List[Dict[str, Any]] = []
        waiter = threading.Thread(target=lambda: answers.append(_request(conn, operation)))
        closer = threading.Thread(target=broker.close)
        waiter.start()
        try:
            # The change is in the store, the controller has it; the request waits for the broker's metadata.
            cluster.wait_until(lambda: controller.cluster.metadata.has_topic("t") == (operation == "create"),
                               30.0, "the controller to apply the change")
            assert waiter.is_alive() and not answers
            closer.start()
        finally:
            waiter.join(JOIN_S)
            closer.join(JOIN_S)
            conn.close()
            cluster.heal()
        assert not closer.is_alive(), "closing the broker waits for its request's admin timeout"
        [answer] = answers
        # Answered at once with a retriable error, not after the request's timeout.
        assert answer["error_code"] == errors.BrokerNotAvailableError.code, answer
        assert "shutting down" in answer["error_message"]
