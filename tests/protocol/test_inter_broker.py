"""The inter-broker messages with the values brokers send one another.

``test_golden`` checks every version of these tables with generated samples; here each message
carries what a controller, a broker or a follower really sends (topic ids, several partitions,
listeners with racks, per-partition delete flags and epochs), built as its typed class
(:mod:`pylogq.protocol.message_data`, holding only the fields its version carries), encoded to
the bytes of the reference encoder in ``_kafka_json``, read back as the same object and
re-encoded. OffsetForLeaderEpoch is also checked against kafka-python's classes, the only peer
that has any of these messages. ControlledShutdown v0 is framed with request header v0, which
has no client id.
"""

from __future__ import annotations

import uuid
from typing import List, Optional, Sequence

import pytest
from kafka.protocol.consumer import OffsetForLeaderEpochRequest as KOffsetForLeaderEpochRequest
from kafka.protocol.consumer import OffsetForLeaderEpochResponse as KOffsetForLeaderEpochResponse
from kafka.protocol.old.offset_for_leader_epoch import OffsetForLeaderEpochRequest as KOldOffsetForLeaderEpochRequest

from pylogq import errors
from pylogq.errors import ProtocolError
from pylogq.protocol import (
    API_NAMES,
    CONTROLLED_SHUTDOWN_REQUEST,
    CONTROLLED_SHUTDOWN_RESPONSE,
    INTER_BROKER_APIS,
    LEADER_AND_ISR_REQUEST,
    LEADER_AND_ISR_RESPONSE,
    OFFSET_FOR_LEADER_EPOCH_REQUEST,
    OFFSET_FOR_LEADER_EPOCH_RESPONSE,
    REQUEST_HEADER,
    REQUESTS,
    RESPONSE_HEADER,
    RESPONSES,
    STOP_REPLICA_REQUEST,
    STOP_REPLICA_RESPONSE,
    SUPPORTED_VERSIONS,
    UPDATE_METADATA_REQUEST,
    UPDATE_METADATA_RESPONSE,
    ApiKey,
    Reader,
    Schema,
    Writer,
    header_versions,
)
from pylogq.protocol import message_data as msg
from pylogq.protocol.schema import Message

from . import _kafka_json as kj

#: The protocol layer has no pure-Python twin (records are opaque bytes to it): the compiled pass
#: only (tests/conftest.py).
pytestmark = [pytest.mark.compiled_pass,
              pytest.mark.skipif(not kj.MESSAGES.is_dir(), reason="Kafka's JSON schemas not beside the repository")]

ORDERS = uuid.UUID("6f1c2a4e-93b5-4d0c-8a71-2f3e4d5c6b7a")
CLICKS = uuid.UUID("0b9d8c7e-6f5a-4b3c-9d2e-1f0a9b8c7d6e")
# SecurityProtocol ids on the wire (Kafka's SecurityProtocol).
PLAINTEXT, SSL, SASL_PLAINTEXT = 0, 1, 2


def round_trip(schema: Schema, value: Message, version: int) -> bytes:
    """Encode ``value`` to the reference encoder's bytes, read it back as the same object, re-encode
    the same. ``value`` holds only what ``version`` carries: what it does not reads back as the
    defaults ``value`` was built with."""
    golden = kj.encode(kj.load(schema.name), value.as_dict(), version)
    encoded = schema.encode(value, version)
    assert encoded == golden
    decoded = schema.parse(encoded, version)
    assert type(decoded) is schema.cls is type(value)
    assert decoded == value
    assert schema.encode(decoded, version) == golden
    with pytest.raises(ProtocolError):
        schema.parse(encoded[:-1], version)
    return encoded


def test_inter_broker_keys_are_served_over_kafkas_ranges() -> None:
    assert INTER_BROKER_APIS == {4, 5, 6, 7, 23, 27}
    for key in INTER_BROKER_APIS:
        assert SUPPORTED_VERSIONS[key] == (REQUESTS[key].min_version, REQUESTS[key].max_version)
        assert REQUESTS[key].api_key == RESPONSES[key].api_key == key
        assert REQUESTS[key].name == API_NAMES[key] + "Request"


# -- LeaderAndIsr (4) ---------------------------------------------------------------------------

LAIR = msg.LeaderAndIsrRequest
LAIR_RESPONSE = msg.LeaderAndIsrResponse


def _partition_state(index: int, leader: int, replicas: List[int], *, topic_name: str = "", is_new: bool = False,
                     adding: Sequence[int] = (), removing: Sequence[int] = (),
                     recovery: int = 0) -> LAIR.LeaderAndIsrPartitionState:
    return LAIR.LeaderAndIsrPartitionState(
        topic_name=topic_name, partition_index=index, controller_epoch=12, leader=leader, leader_epoch=40 + index,
        isr=replicas[:2], partition_epoch=7 + index, replicas=replicas, adding_replicas=list(adding),
        removing_replicas=list(removing), is_new=is_new, leader_recovery_state=recovery)


def _live_leaders() -> List[LAIR.LeaderAndIsrLiveLeader]:
    return [LAIR.LeaderAndIsrLiveLeader(broker_id=1, host_name="b1", port=9092)]


def test_leader_and_isr_v7_topics_by_id_with_several_partitions() -> None:
    value = LAIR(
        controller_id=3000, is_k_raft_controller=True, controller_epoch=12,
        broker_epoch=4_294_967_301, type=2,  # a full request, during the migration
        topic_states=[
            LAIR.LeaderAndIsrTopicState(topic_name="orders", topic_id=ORDERS, partition_states=[
                _partition_state(0, 1, [1, 2, 3]),
                _partition_state(1, 2, [2, 3, 4], adding=[4], removing=[1]),
                _partition_state(2, 3, [3, 1, 2], is_new=True, recovery=1),
            ]),
            LAIR.LeaderAndIsrTopicState(topic_name="clicks", topic_id=CLICKS, partition_states=[
                _partition_state(0, 2, [2, 1], is_new=True),
            ]),
        ],
        live_leaders=[LAIR.LeaderAndIsrLiveLeader(broker_id=1, host_name="broker-1.internal", port=9092),
                      LAIR.LeaderAndIsrLiveLeader(broker_id=2, host_name="broker-2.internal", port=9092),
                      LAIR.LeaderAndIsrLiveLeader(broker_id=3, host_name="broker-3.internal", port=9093)],
    )
    encoded = round_trip(LEADER_AND_ISR_REQUEST, value, 7)
    assert encoded[:5] == b"\x00\x00\x0b\xb8\x01"  # controller 3000, then isKRaftController
    assert ORDERS.bytes in encoded and CLICKS.bytes in encoded
    decoded = LEADER_AND_ISR_REQUEST.parse(encoded, 7)
    assert decoded.ungrouped_partition_states == []
    # Fields the sender left out decode as their defaults; the v0-1 topic name is not on the wire.
    state = decoded.topic_states[1].partition_states[0]
    assert (state.topic_name, state.adding_replicas, state.leader_recovery_state) == ("", [], 0)


def test_leader_and_isr_shares_its_partition_state_between_layouts() -> None:
    """v0-1 list partitions with their topic name, v2+ group them by topic: one common struct."""
    old = LAIR(controller_id=1, controller_epoch=3, live_leaders=_live_leaders(), ungrouped_partition_states=[
        _partition_state(0, 1, [1, 2], topic_name="orders", is_new=True),
        _partition_state(1, 2, [2, 1], topic_name="orders")])
    v1 = round_trip(LEADER_AND_ISR_REQUEST, old, 1)
    assert v1.count(b"\x00\x06orders") == 2
    grouped = LAIR(controller_id=1, controller_epoch=3, broker_epoch=77, live_leaders=_live_leaders(), topic_states=[
        LAIR.LeaderAndIsrTopicState(topic_name="orders", partition_states=[
            _partition_state(0, 1, [1, 2], is_new=True), _partition_state(1, 2, [2, 1])])])
    v2 = round_trip(LEADER_AND_ISR_REQUEST, grouped, 2)
    assert v2.count(b"\x00\x06orders") == 1
    # Both layouts' partitions are the same compiled struct, and the same class.
    fields = {f.key: f for f in LEADER_AND_ISR_REQUEST._struct.fields}
    inner = {f.key: f for f in fields["topic_states"].struct.fields}
    assert fields["ungrouped_partition_states"].struct is inner["partition_states"].struct
    assert type(LEADER_AND_ISR_REQUEST.parse(v1, 1).ungrouped_partition_states[0]) is \
        type(LEADER_AND_ISR_REQUEST.parse(v2, 2).topic_states[0].partition_states[0])


def test_leader_and_isr_response_v4_by_name_and_v5_by_topic_id() -> None:
    storage = errors.KafkaStorageError.code
    error = LAIR_RESPONSE.LeaderAndIsrPartitionError
    round_trip(LEADER_AND_ISR_RESPONSE, LAIR_RESPONSE(error_code=0, partition_errors=[
        error(topic_name="orders", partition_index=0, error_code=0),
        error(topic_name="orders", partition_index=1, error_code=storage)]), 4)
    round_trip(LEADER_AND_ISR_RESPONSE, LAIR_RESPONSE(error_code=0, topics=[
        LAIR_RESPONSE.LeaderAndIsrTopicError(topic_id=ORDERS, partition_errors=[
            error(partition_index=0, error_code=0),
            error(partition_index=1, error_code=storage)]),
        LAIR_RESPONSE.LeaderAndIsrTopicError(topic_id=CLICKS, partition_errors=[
            error(partition_index=0, error_code=0)])]), 5)
    stale = LAIR_RESPONSE(error_code=errors.StaleControllerEpochError.code, topics=[])
    assert round_trip(LEADER_AND_ISR_RESPONSE, stale, 7) == b"\x00\x0b\x01\x00"


# -- StopReplica (5) ----------------------------------------------------------------------------

SR = msg.StopReplicaRequest


@pytest.mark.parametrize("version", [3, 4])
def test_stop_replica_v3_plus_delete_flags_and_leader_epochs(version: int) -> None:
    state = SR.StopReplicaPartitionState
    value = SR(
        controller_id=1, controller_epoch=12, broker_epoch=8_589_934_593,
        topic_states=[
            SR.StopReplicaTopicState(topic_name="orders", partition_states=[
                state(partition_index=0, leader_epoch=41, delete_partition=True),
                # -2: the topic is being deleted (Kafka's EpochDuringDelete)
                state(partition_index=2, leader_epoch=-2, delete_partition=False),
            ]),
            SR.StopReplicaTopicState(topic_name="clicks", partition_states=[
                # -1: no epoch to fence with (Kafka's NoEpoch)
                state(partition_index=5, leader_epoch=-1, delete_partition=True),
            ]),
        ],
    )
    if version >= 4:
        value.is_k_raft_controller = True
    encoded = round_trip(STOP_REPLICA_REQUEST, value, version)
    decoded = STOP_REPLICA_REQUEST.parse(encoded, version)
    flags = [(p.partition_index, p.leader_epoch, p.delete_partition)
             for t in decoded.topic_states for p in t.partition_states]
    assert flags == [(0, 41, True), (2, -2, False), (5, -1, True)]
    assert decoded.delete_partitions is False  # the request-wide flag ended with v2


def test_stop_replica_v0_to_v2_layouts() -> None:
    round_trip(STOP_REPLICA_REQUEST, SR(
        controller_id=1, controller_epoch=12, delete_partitions=True,
        ungrouped_partitions=[SR.StopReplicaPartitionV0(topic_name="orders", partition_index=0),
                              SR.StopReplicaPartitionV0(topic_name="orders", partition_index=1)]), 0)
    for version in (1, 2):
        round_trip(STOP_REPLICA_REQUEST, SR(
            controller_id=1, controller_epoch=12, broker_epoch=99, delete_partitions=False,
            topics=[SR.StopReplicaTopicV1(name="orders", partition_indexes=[0, 1, 2]),
                    SR.StopReplicaTopicV1(name="clicks", partition_indexes=[3])]), version)


@pytest.mark.parametrize("version", range(0, 5))
def test_stop_replica_response(version: int) -> None:
    error = msg.StopReplicaResponse.StopReplicaPartitionError
    round_trip(STOP_REPLICA_RESPONSE, msg.StopReplicaResponse(error_code=0, partition_errors=[
        error(topic_name="orders", partition_index=0, error_code=0),
        error(topic_name="orders", partition_index=2, error_code=errors.FencedLeaderEpochError.code)]), version)


# -- UpdateMetadata (6) -------------------------------------------------------------------------

UM = msg.UpdateMetadataRequest


def _broker(broker_id: int, rack: Optional[str]) -> UM.UpdateMetadataBroker:
    host = "broker-%d.internal" % broker_id
    return UM.UpdateMetadataBroker(id=broker_id, rack=rack, endpoints=[
        UM.UpdateMetadataEndpoint(port=9092, host=host, listener="PLAINTEXT", security_protocol=PLAINTEXT),
        UM.UpdateMetadataEndpoint(port=9093, host=host, listener="REPLICATION", security_protocol=SSL),
        UM.UpdateMetadataEndpoint(port=9094, host=host, listener="CLIENTS", security_protocol=SASL_PLAINTEXT),
    ])


def _metadata_partition(index: int, leader: int, offline: List[int],
                        topic_name: str = "") -> UM.UpdateMetadataPartitionState:
    return UM.UpdateMetadataPartitionState(
        topic_name=topic_name, partition_index=index, controller_epoch=12, leader=leader, leader_epoch=40 + index,
        isr=[leader], zk_version=17 + index, replicas=[leader] + offline, offline_replicas=offline)


def _update_metadata_v8(type_: int) -> UM:
    return UM(
        controller_id=3000, is_k_raft_controller=True, type=type_,
        controller_epoch=12, broker_epoch=4_294_967_301,
        topic_states=[
            UM.UpdateMetadataTopicState(topic_name="orders", topic_id=ORDERS, partition_states=[
                _metadata_partition(0, 1, []), _metadata_partition(1, 2, [3])]),
            UM.UpdateMetadataTopicState(topic_name="clicks", topic_id=CLICKS, partition_states=[
                _metadata_partition(0, 3, [])]),
        ],
        live_brokers=[_broker(1, "eu-west-1a"), _broker(2, "eu-west-1b"), _broker(3, None)],
    )


def test_update_metadata_v8_live_brokers_endpoints_and_racks() -> None:
    encoded = round_trip(UPDATE_METADATA_REQUEST, _update_metadata_v8(2), 8)
    # Type is tagged (tag 0): one tagged field of one byte closes the message.
    assert encoded.endswith(b"\x01\x00\x01\x02")
    decoded = UPDATE_METADATA_REQUEST.parse(encoded, 8)
    assert [b.rack for b in decoded.live_brokers] == ["eu-west-1a", "eu-west-1b", None]
    assert [e.listener for e in decoded.live_brokers[0].endpoints] == ["PLAINTEXT", "REPLICATION", "CLIENTS"]
    assert decoded.type == 2 and decoded.topic_states[0].topic_id == ORDERS
    # The default type (0, unknown) is left out of the tagged fields.
    incremental = UPDATE_METADATA_REQUEST.encode(_update_metadata_v8(0), 8)
    assert incremental.endswith(b"\x00") and len(incremental) == len(encoded) - 3
    assert UPDATE_METADATA_REQUEST.parse(incremental, 8).type == 0


def test_update_metadata_old_layouts() -> None:
    def states() -> List[UM.UpdateMetadataPartitionState]:
        """Two partitions without offline replicas (not on the wire before v4)."""
        return [_metadata_partition(0, 1, [], topic_name="orders"), _metadata_partition(1, 2, [], topic_name="orders")]

    # v0: one host and port per broker, no rack on the wire (it decodes as the schema's
    # default, "", as in Kafka: the field is nullable but its default is not null).
    v0 = round_trip(UPDATE_METADATA_REQUEST, UM(
        controller_id=1, controller_epoch=12, ungrouped_partition_states=states(),
        live_brokers=[UM.UpdateMetadataBroker(id=1, v0_host="broker-1.internal", v0_port=9092),
                      UM.UpdateMetadataBroker(id=2, v0_host="broker-2.internal", v0_port=9092)]), 0)
    assert UPDATE_METADATA_REQUEST.parse(v0, 0).live_brokers[0].rack == ""
    # v2: endpoints without listener names, and the rack.
    round_trip(UPDATE_METADATA_REQUEST, UM(
        controller_id=1, controller_epoch=12, ungrouped_partition_states=states(),
        live_brokers=[UM.UpdateMetadataBroker(id=1, rack="eu-west-1a", endpoints=[
            UM.UpdateMetadataEndpoint(port=9092, host="broker-1.internal", security_protocol=PLAINTEXT)])]), 2)
    # v4: offline replicas, still ungrouped.
    round_trip(UPDATE_METADATA_REQUEST, UM(
        controller_id=1, controller_epoch=12,
        ungrouped_partition_states=[_metadata_partition(0, 1, [2], topic_name="orders")],
        live_brokers=[_broker(1, None)]), 4)


@pytest.mark.parametrize("version", range(0, 9))
def test_update_metadata_response(version: int) -> None:
    encoded = round_trip(UPDATE_METADATA_RESPONSE,
                         msg.UpdateMetadataResponse(error_code=errors.StaleBrokerEpochError.code), version)
    assert encoded == b"\x00\x4d" + (b"\x00" if version >= 6 else b"")


# -- ControlledShutdown (7) ---------------------------------------------------------------------


def test_controlled_shutdown_v0_frame_has_no_client_id() -> None:
    assert header_versions(ApiKey.CONTROLLED_SHUTDOWN, 0) == (0, 0)
    w = Writer()
    REQUEST_HEADER.encode_into(w, msg.RequestHeader(request_api_key=7, request_api_version=0,
                                                    correlation_id=42, client_id="broker-2"), 0)
    CONTROLLED_SHUTDOWN_REQUEST.encode_into(w, msg.ControlledShutdownRequest(broker_id=2), 0)
    frame = w.getvalue()
    assert frame == b"\x00\x07\x00\x00\x00\x00\x00\x2a" + b"\x00\x00\x00\x02"
    r = Reader(frame)
    header = REQUEST_HEADER.read(r, header_versions(7, 0)[0])
    assert (header.correlation_id, header.client_id) == (42, "")
    request = CONTROLLED_SHUTDOWN_REQUEST.read(r, 0)
    assert request == msg.ControlledShutdownRequest(broker_id=2) and not r.remaining


@pytest.mark.parametrize("version", range(0, 4))
def test_controlled_shutdown_request_and_remaining_partitions(version: int) -> None:
    request = msg.ControlledShutdownRequest(broker_id=2)
    if version >= 2:
        request.broker_epoch = 4_294_967_301
    round_trip(CONTROLLED_SHUTDOWN_REQUEST, request, version)
    remaining = msg.ControlledShutdownResponse.RemainingPartition
    round_trip(CONTROLLED_SHUTDOWN_RESPONSE, msg.ControlledShutdownResponse(error_code=0, remaining_partitions=[
        remaining(topic_name="orders", partition_index=1),
        remaining(topic_name="clicks", partition_index=0)]), version)
    assert header_versions(7, version) == ((0, 0), (1, 0), (1, 0), (2, 1))[version]
    response_header = RESPONSE_HEADER.encode(msg.ResponseHeader(correlation_id=42), header_versions(7, version)[1])
    assert response_header == b"\x00\x00\x00\x2a" + (b"\x00" if version >= 3 else b"")


# -- OffsetForLeaderEpoch (23) ------------------------------------------------------------------

OFLE = msg.OffsetForLeaderEpochRequest
OFLE_RESPONSE = msg.OffsetForLeaderEpochResponse
_KRequest = KOffsetForLeaderEpochRequest
_KTopic = _KRequest.OffsetForLeaderTopic
_KPartition = _KTopic.OffsetForLeaderPartition
_KResponse = KOffsetForLeaderEpochResponse
_KTopicResult = _KResponse.OffsetForLeaderTopicResult
_KEpochEndOffset = _KTopicResult.EpochEndOffset


@pytest.mark.parametrize("version", [3, 4])
def test_offset_for_leader_epoch_follower_request_matches_kafka_python(version: int) -> None:
    """A follower (broker 2) asks its leader where its last fetched epochs end."""
    partition = OFLE.OffsetForLeaderPartition
    value = OFLE(replica_id=2, topics=[
        OFLE.OffsetForLeaderTopic(topic="orders", partitions=[
            partition(partition=0, current_leader_epoch=41, leader_epoch=40),
            partition(partition=1, current_leader_epoch=42, leader_epoch=42)]),
        OFLE.OffsetForLeaderTopic(topic="clicks", partitions=[
            partition(partition=0, current_leader_epoch=7, leader_epoch=5)])])
    encoded = round_trip(OFFSET_FOR_LEADER_EPOCH_REQUEST, value, version)
    peer = _KRequest[version](replica_id=2, topics=[
        _KTopic(topic=t.topic, partitions=[_KPartition(**p.as_dict()) for p in t.partitions]) for t in value.topics])
    assert bytes(peer.encode()) == encoded


def test_offset_for_leader_epoch_consumer_defaults() -> None:
    """Before v3 there is no replica id: it decodes as -2, the debug consumer's."""
    value = OFLE(topics=[OFLE.OffsetForLeaderTopic(topic="orders", partitions=[
        OFLE.OffsetForLeaderPartition(partition=0, leader_epoch=40)])])
    for version in (0, 1):
        encoded = round_trip(OFFSET_FOR_LEADER_EPOCH_REQUEST, value, version)
        peer = KOldOffsetForLeaderEpochRequest[version]([("orders", [(0, 40)])])
        assert bytes(peer.encode()) == encoded
        decoded = OFFSET_FOR_LEADER_EPOCH_REQUEST.parse(encoded, version)
        assert decoded.replica_id == -2
        assert decoded.topics[0].partitions[0].current_leader_epoch == -1


@pytest.mark.parametrize("version", range(2, 5))
def test_offset_for_leader_epoch_response_matches_kafka_python(version: int) -> None:
    fenced, unknown = errors.FencedLeaderEpochError.code, errors.UnknownLeaderEpochError.code
    end = OFLE_RESPONSE.EpochEndOffset
    value = OFLE_RESPONSE(throttle_time_ms=0, topics=[
        OFLE_RESPONSE.OffsetForLeaderTopicResult(topic="orders", partitions=[
            end(error_code=0, partition=0, leader_epoch=40, end_offset=123_456_789_012),
            end(error_code=fenced, partition=1, leader_epoch=-1, end_offset=-1)]),
        OFLE_RESPONSE.OffsetForLeaderTopicResult(topic="clicks", partitions=[
            end(error_code=unknown, partition=0, leader_epoch=-1, end_offset=-1)])])
    encoded = round_trip(OFFSET_FOR_LEADER_EPOCH_RESPONSE, value, version)
    peer = _KResponse[version](throttle_time_ms=0, topics=[
        _KTopicResult(topic=t.topic, partitions=[_KEpochEndOffset(**p.as_dict()) for p in t.partitions])
        for t in value.topics])
    assert bytes(peer.encode()) == encoded
