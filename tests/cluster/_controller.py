"""The controller's test harness against the in-memory store (tests/cluster/conftest.py holds its
fixtures): broker registrations each in a session of their own, topics written as an earlier
controller or an operator left them, and what the recording connector delivered.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from pylogq.cluster.contract import (
    BrokerEndpoint,
    BrokerRegistration,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from pylogq.cluster.zk.client import KafkaZkClient
from pylogq.cluster.zk.data import (
    PartitionState,
    TopicAssignment,
    encode_partition_state,
    partition_state_path,
)
from pylogq.cluster.zk.memory_store import InMemoryStoreClient, InMemoryZooKeeper

from .test_controller_channel import CueConnector

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
SESSION_MS = 60000


class Brokers:
    """Broker registrations in the ensemble, each in its own session."""

    def __init__(self, ensemble: InMemoryZooKeeper) -> None:
        self.ensemble = ensemble
        self.sessions: Dict[int, KafkaZkClient] = {}
        self._clients: Dict[int, InMemoryStoreClient] = {}

    def register(self, broker_id: int, session_ms: int = SESSION_MS) -> KafkaZkClient:
        client = self.ensemble.connect(session_timeout_ms=session_ms)
        self._clients[broker_id] = client
        zk = KafkaZkClient(client)
        zk.ensure_layout()
        zk.register_broker(BrokerRegistration(broker_id, (BrokerEndpoint("PLAINTEXT", "127.0.0.1",
                                                                         9000 + broker_id),)), wait_s=5)
        self.sessions[broker_id] = zk
        return zk

    def epoch(self, broker_id: int) -> int:
        reg = self.sessions[broker_id].get_broker(broker_id)
        assert reg is not None
        return reg.epoch

    def stop(self, broker_id: int) -> None:
        """The process stops and closes its session: its registration goes at once."""
        del self.sessions[broker_id]
        self._clients.pop(broker_id).close()

    def kill(self, broker_id: int) -> None:
        """The process dies: its session lives on until the ensemble expires it."""
        del self.sessions[broker_id]
        self._clients.pop(broker_id).abandon()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()


def write_topic(zk: KafkaZkClient, name: str, replicas: Dict[int, List[int]],
                states: Optional[Dict[int, PartitionState]] = None) -> None:
    """A new topic's assignment; with ``states``, a topic as an earlier controller left it (the
    controller must not be running yet: it would elect leaders of its own)."""
    zk.create_topic(name, TopicAssignment(replicas, TOPIC_ID), {})
    for p, state in (states or {}).items():
        zk.store.create(partition_state_path(name, p), encode_partition_state(state), makepath=True)


def stored(zk: KafkaZkClient, topic: str, p: int = 0) -> Tuple[int, List[int], int]:
    """(leader, ISR, leader epoch) of a partition in the store."""
    state = zk.get_partition_state(topic, p)
    assert state is not None, "%s-%d has no state" % (topic, p)
    return state.leader, state.isr, state.leader_epoch


def leader_and_isr(connector: CueConnector, broker_id: int) -> List[LeaderAndIsrPartition]:
    """Every partition state the LeaderAndIsr requests delivered to ``broker_id`` carried, in order."""
    return [p for r in connector.of(broker_id) if isinstance(r, LeaderAndIsrRequest) for p in r.partitions]


def update_metadata(connector: CueConnector, broker_id: int) -> List[UpdateMetadataRequest]:
    return [r for r in connector.of(broker_id) if isinstance(r, UpdateMetadataRequest)]


def stop_replica(connector: CueConnector, broker_id: int) -> List[StopReplicaRequest]:
    return [r for r in connector.of(broker_id) if isinstance(r, StopReplicaRequest)]


def told(connector: CueConnector, broker_id: int, topic: str, p: int, leader: int, epoch: int) -> bool:
    return any((s.topic, s.partition, s.leader, s.leader_epoch) == (topic, p, leader, epoch)
               for s in leader_and_isr(connector, broker_id))


def described(connector: CueConnector, broker_id: int, topic: str, p: int, leader: int, epoch: int,
              live: List[int]) -> bool:
    """Whether an UpdateMetadata delivered to ``broker_id`` described the partition so, with
    exactly ``live`` as the live brokers."""
    for r in update_metadata(connector, broker_id):
        if sorted(b.broker_id for b in r.live_brokers) != sorted(live):
            continue
        if any((s.topic, s.partition, s.leader, s.leader_epoch) == (topic, p, leader, epoch) for s in r.partitions):
            return True
    return False
