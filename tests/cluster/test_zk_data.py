"""Kafka's znodes and their JSON: read what Kafka writes, write what Kafka reads; the operations on
a metadata store (the in-memory one: the store's own semantics are tests/cluster/test_metadata_store.py)."""

from __future__ import annotations

import json
import threading

import pytest

from pylogq import errors
from pylogq.cluster.broker.metadata_cache import MetadataCache
from pylogq.cluster.contract import (
    LEADER_DURING_DELETE,
    BrokerEndpoint,
    BrokerRegistration,
    LeaderAndIsrPartition,
    UpdateMetadataRequest,
)
from pylogq.cluster.zk.client import KafkaZkClient
from pylogq.cluster.zk.data import (
    PartitionState,
    TopicAssignment,
    decode_broker,
    decode_cluster_id,
    decode_config_change,
    decode_controller,
    decode_isr_change,
    decode_partition_state,
    decode_producer_id_block,
    decode_topic_assignment,
    decode_topic_config,
    encode_broker,
    encode_partition_state,
    encode_topic_assignment,
)
from pylogq.cluster.zk.memory_store import InMemoryZooKeeper

# As a Kafka 3.x broker writes them (ZooKeeper mode).
KAFKA_BROKER = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},'
                b'"endpoints":["PLAINTEXT://kafka-1:9092","SSL://kafka-1:9093"],"jmx_port":-1,"port":9092,'
                b'"host":"kafka-1","version":5,"timestamp":"1700000000000","rack":"us-east-1a"}')
KAFKA_BROKER_V1 = b'{"jmx_port":-1,"timestamp":"1400000000000","host":"old","version":1,"port":9092}'
KAFKA_TOPIC = (b'{"partitions":{"0":[1,2,3],"1":[2,3,1]},"topic_id":"qOhL5ao7QRKxg3zGHZ4pVA",'
               b'"adding_replicas":{},"removing_replicas":{},"version":3}')
KAFKA_STATE = b'{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":4,"isr":[2,3]}'


def test_kafkas_broker_registration():
    reg = decode_broker(1, KAFKA_BROKER, epoch=42)
    assert reg == BrokerRegistration(1, (BrokerEndpoint("PLAINTEXT", "kafka-1", 9092, "PLAINTEXT"),
                                         BrokerEndpoint("SSL", "kafka-1", 9093, "SSL")), "us-east-1a", 42)
    assert decode_broker(3, KAFKA_BROKER_V1).endpoints == (BrokerEndpoint("PLAINTEXT", "old", 9092),)
    # What pylogq writes is Kafka's version 5, and reads back the same.
    written = json.loads(encode_broker(reg, now_ms=5))
    assert written == {"features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
                       "endpoints": ["PLAINTEXT://kafka-1:9092", "SSL://kafka-1:9093"], "jmx_port": -1,
                       "port": 9092, "host": "kafka-1", "version": 5, "timestamp": "5", "rack": "us-east-1a"}
    assert decode_broker(1, encode_broker(reg), 42) == reg


def test_kafkas_topic_and_partition_state():
    assignment = decode_topic_assignment("t", KAFKA_TOPIC)
    assert assignment == TopicAssignment({0: [1, 2, 3], 1: [2, 3, 1]}, "qOhL5ao7QRKxg3zGHZ4pVA")
    assert json.loads(encode_topic_assignment(assignment)) == json.loads(KAFKA_TOPIC)
    state = decode_partition_state("t", 0, KAFKA_STATE, version=9)
    assert state == PartitionState(2, 4, [2, 3], 7, 9)
    assert json.loads(encode_partition_state(state)) == json.loads(KAFKA_STATE)


def test_kafkas_other_znodes():
    assert decode_controller(b'{"version":2,"brokerid":3,"timestamp":"1","kraftControllerEpoch":-1}') == 3
    assert decode_controller(b'{"version":1,"brokerid":0,"timestamp":"1"}') == 0
    assert decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    assert decode_topic_config("t", b'{"version":1,"config":{"retention.ms":"1000"}}') == {"retention.ms": "1000"}
    assert decode_config_change("/c", b'{"version":2,"entity_path":"topics/t"}') == "topics/t"
    assert decode_config_change("/c", b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "topics/t"
    assert decode_isr_change("/i", b'{"version":1,"partitions":[{"topic":"t","partition":1}]}') == [("t", 1)]
    assert decode_producer_id_block(b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}') == (
        2, 1000, 1999)


@pytest.mark.parametrize("data", [b"", b"not json", b"[]", b'{"version":1}', b'{"leader":"x","leader_epoch":0,'
                                  b'"controller_epoch":0,"isr":[]}', b'{"leader":1,"leader_epoch":0,'
                                  b'"controller_epoch":0,"isr":["a"]}'])
def test_a_damaged_znode_is_refused_naming_it(data):
    with pytest.raises(errors.CorruptMetadataError, match="/brokers/topics/t/partitions/0/state"):
        decode_partition_state("t", 0, data)


def test_producer_id_blocks_are_unique_across_brokers():
    ensemble = InMemoryZooKeeper()
    clients = [KafkaZkClient(ensemble.connect()) for _ in range(4)]
    blocks = []
    lock = threading.Lock()

    def take(zk: KafkaZkClient, b: int) -> None:
        for _ in range(25):
            block = zk.allocate_producer_id_block(b, 10)
            with lock:
                blocks.append(block)

    threads = [threading.Thread(target=take, args=(zk, b)) for b, zk in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [i for first, last in blocks for i in range(first, last + 1)]
    assert len(ids) == len(set(ids)) == 1000
    ensemble.close()


def test_the_controller_epoch_fences_a_stale_controller():
    ensemble = InMemoryZooKeeper()
    first, second = KafkaZkClient(ensemble.connect()), KafkaZkClient(ensemble.connect())
    first.ensure_layout()
    epoch1 = first.try_become_controller(1)
    assert epoch1 is not None and second.try_become_controller(2) is None
    first.create_partition_states({("t", 0): PartitionState(1, 0, [1, 2], epoch1[0])}, epoch1)
    ensemble.expire_session(first.store.session_id)  # it loses /controller without noticing
    epoch2 = second.try_become_controller(2)
    assert epoch2 is not None and epoch2[0] == epoch1[0] + 1
    stale = first.get_partition_state("t", 0)
    assert stale is not None
    with pytest.raises(errors.ControllerMovedError):
        first.update_partition_state("t", 0, stale._replace(leader=2, leader_epoch=1), epoch1)
    assert second.update_partition_state("t", 0, stale._replace(leader=2, leader_epoch=1), epoch2) is not None
    ensemble.close()


def test_metadata_cache_applies_updates_and_deletions():
    cache = MetadataCache()
    brokers = [BrokerRegistration(b, (BrokerEndpoint("PLAINTEXT", "h", 9000 + b),)) for b in range(2)]

    def state(p: int, leader: int) -> LeaderAndIsrPartition:
        return LeaderAndIsrPartition("t", p, 1, leader, 0, [0, 1], 0, [0, 1])

    cache.update(UpdateMetadataRequest(0, 1, -1, [state(0, 0), state(1, 1)], brokers, {"t": "id"}))
    assert cache.leader_of("t", 1) == 1 and cache.topic_id("t") == "id" and cache.controller_id == 0
    snapshot = cache.snapshot
    cache.update(UpdateMetadataRequest(1, 2, -1, [state(1, 0)], brokers[:1], {}))
    assert cache.leader_of("t", 1) == 0 and sorted(cache.live_brokers()) == [0]
    assert snapshot.partitions["t"][1].leader == 1  # a snapshot never changes
    deleted = cache.update(UpdateMetadataRequest(1, 2, -1, [state(0, LEADER_DURING_DELETE),
                                                            state(1, LEADER_DURING_DELETE)], brokers, {}))
    assert sorted(deleted) == [("t", 0), ("t", 1)] and not cache.has_topic("t") and cache.topic_id("t") is None
