"""The replication APIs' wire conversion, both directions in one place.

For each API brokers send one another (LeaderAndIsr, UpdateMetadata, StopReplica,
ControlledShutdown, OffsetForLeaderEpoch, a follower's Fetch and a transaction
coordinator's WriteTxnMarkers) this module turns the
contract's typed requests (:mod:`pylogq.cluster.contract`) into the protocol's message
classes (:mod:`pylogq.protocol.message_data`, the classes of the schema tables of
:mod:`pylogq.protocol.messages`) and back, and the same for the answers:
``encode_*`` builds a body at a version, ``decode_*`` reads one of any version the
handlers accept. :mod:`.inter_broker` (the sending side) encodes requests and decodes
responses; :mod:`.handlers_replication` and :mod:`.handlers_fetch` (the receiving side)
decode requests and encode responses. The one exception is the Fetch response, which the
receiving side frames itself around file regions (:func:`.fetch.frame_fetch_response`).

Not every contract object has a form at every version: an old version drops what it
has no field for (topic ids, offline replicas, racks, listener names, per-partition
epochs and delete flags), and the decoders fill in what Kafka fills in for them.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

from ..cluster.contract import (
    BrokerEndpoint,
    BrokerRegistration,
    EpochEndOffset,
    FetchResult,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    RecordBytes,
    ReplicaFetchPartition,
    StopReplicaRequest,
    TxnMarker,
    UpdateMetadataRequest,
)
from ..protocol import message_data as msg
from .fetch import FIRST_REPLICA_STATE, FIRST_TOPIC_ID, TopicKey, replica_id_of
from .handler_base import text_of, uuid_of
from .. import errors
from ..errors import InvalidArgumentError

__all__ = [
    "SECURITY_PROTOCOLS", "SECURITY_PROTOCOL_IDS", "ReplicaFetch", "Errors",
    "encode_leader_and_isr", "decode_leader_and_isr",
    "encode_leader_and_isr_response", "decode_leader_and_isr_response",
    "encode_update_metadata", "decode_update_metadata",
    "encode_update_metadata_response", "decode_update_metadata_response",
    "encode_stop_replica", "decode_stop_replica", "encode_stop_replica_response", "decode_stop_replica_response",
    "encode_controlled_shutdown", "decode_controlled_shutdown",
    "encode_controlled_shutdown_response", "decode_controlled_shutdown_response",
    "encode_offset_for_leader_epoch", "decode_offset_for_leader_epoch",
    "encode_offset_for_leader_epoch_response", "decode_offset_for_leader_epoch_response",
    "encode_replica_fetch", "decode_replica_fetch", "decode_replica_fetch_response", "replica_id_of",
    "encode_write_txn_markers", "decode_write_txn_markers",
    "encode_write_txn_markers_response", "decode_write_txn_markers_response",
]

#: A top-level error code and one per partition.
Errors = Tuple[int, Dict[Tuple[str, int], int]]

#: Kafka's SecurityProtocol ids, as UpdateMetadata v1+ carries them.
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
SECURITY_PROTOCOL_IDS = {name: i for i, name in SECURITY_PROTOCOLS.items()}
#: The id a topic without one is sent with (Kafka's Uuid.ZERO_UUID, as base64url text).
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"

# The first versions with a field the contract carries.
_LAIR_GROUPED, _LAIR_TOPIC_IDS = 2, 5  # LeaderAndIsr: partitions per topic; topic ids (and errors by id)
_UM_GROUPED, _UM_TOPIC_IDS = 5, 7  # UpdateMetadata: partitions per topic; topic ids
_SR_TOPICS, _SR_STATES = 1, 3  # StopReplica: partitions per topic; per-partition epoch and delete flag
#: The leader epoch of a partition in a StopReplica below v3, which sends none.
NO_EPOCH = -2

# The message classes' nested structs this module builds and reads.
_LairState = msg.LeaderAndIsrRequest.LeaderAndIsrPartitionState
_UmState = msg.UpdateMetadataRequest.UpdateMetadataPartitionState
_T = TypeVar("_T")


def _protocol_name(code: int) -> str:
    return SECURITY_PROTOCOLS.get(code, "PLAINTEXT")


def _grouped(items: Sequence[Tuple[str, _T]]) -> Dict[str, List[_T]]:
    """(topic, entry) pairs as topic -> its entries, topics in first-seen order."""
    by_topic: Dict[str, List[_T]] = {}
    for topic, entry in items:
        by_topic.setdefault(topic, []).append(entry)
    return by_topic


def _partition_of(topic: str, p: Union[_LairState, _UmState]) -> LeaderAndIsrPartition:
    """A partition's state of a LeaderAndIsr request (no offline replicas) or of an
    UpdateMetadata request (no is-new flag)."""
    if isinstance(p, _UmState):
        partition_epoch, offline, is_new = p.zk_version, list(p.offline_replicas), False
    else:
        partition_epoch, offline, is_new = p.partition_epoch, [], bool(p.is_new)
    return LeaderAndIsrPartition(
        topic, p.partition_index, p.controller_epoch, p.leader, p.leader_epoch, list(p.isr), partition_epoch,
        list(p.replicas), offline, is_new)


# -- LeaderAndIsr (4) ----------------------------------------------------------------------

def encode_leader_and_isr(request: LeaderAndIsrRequest, version: int) -> msg.LeaderAndIsrRequest:
    """The LeaderAndIsr request body of ``request`` at ``version`` (a topic without an id is sent
    with the zero id)."""
    states = [(p.topic, _LairState(
        topic_name=p.topic, partition_index=p.partition, controller_epoch=p.controller_epoch, leader=p.leader,
        leader_epoch=p.leader_epoch, isr=p.isr, partition_epoch=p.partition_epoch, replicas=p.replicas,
        adding_replicas=[], removing_replicas=[], is_new=p.is_new, leader_recovery_state=0))
        for p in request.partitions]
    leaders = []
    for b in request.live_leaders:
        e = b.endpoint()
        leaders.append(msg.LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
            broker_id=b.broker_id, host_name=e.host if e else "", port=e.port if e else -1))
    body = msg.LeaderAndIsrRequest(
        controller_id=request.controller_id, controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch, type=0, live_leaders=leaders)
    if version < _LAIR_GROUPED:
        body.ungrouped_partition_states = [state for _, state in states]
    else:
        body.topic_states = [
            msg.LeaderAndIsrRequest.LeaderAndIsrTopicState(
                topic_name=t, topic_id=uuid_of(request.topic_ids[t]) if t in request.topic_ids
                else uuid_of(ZERO_TOPIC_ID), partition_states=ps) for t, ps in _grouped(states).items()]
    return body


def decode_leader_and_isr(req: msg.LeaderAndIsrRequest, version: int) -> LeaderAndIsrRequest:
    """A LeaderAndIsr request of any version, as the contract's type."""
    partitions: List[LeaderAndIsrPartition] = []
    topic_ids: Dict[str, str] = {}
    if version < _LAIR_GROUPED:
        partitions = [_partition_of(p.topic_name, p) for p in req.ungrouped_partition_states]
    else:
        for t in req.topic_states:
            if version >= _LAIR_TOPIC_IDS:
                topic_ids[t.topic_name] = text_of(t.topic_id)
            partitions += [_partition_of(t.topic_name, p) for p in t.partition_states]
    leaders = [BrokerRegistration(b.broker_id, (BrokerEndpoint("PLAINTEXT", b.host_name, b.port),))
               for b in req.live_leaders]
    return LeaderAndIsrRequest(req.controller_id, req.controller_epoch, req.broker_epoch, partitions,
                               topic_ids, leaders)


def encode_leader_and_isr_response(code: int, per_partition: Mapping[Tuple[str, int], int],
                                   topic_ids: Mapping[str, str], version: int) -> msg.LeaderAndIsrResponse:
    """The answer to a LeaderAndIsr request; from v5 partitions are named by topic id
    (``topic_ids``: the request's), and a topic without one is left out."""
    error = msg.LeaderAndIsrResponse.LeaderAndIsrPartitionError
    if version < _LAIR_TOPIC_IDS:
        return msg.LeaderAndIsrResponse(error_code=code, partition_errors=[
            error(topic_name=t, partition_index=p, error_code=c) for (t, p), c in sorted(per_partition.items())])
    by_topic = _grouped([(t, error(partition_index=p, error_code=c)) for (t, p), c in sorted(per_partition.items())])
    topics = []
    for t, errors_of in by_topic.items():
        topic_id = topic_ids.get(t)
        if topic_id is not None:
            topics.append(msg.LeaderAndIsrResponse.LeaderAndIsrTopicError(
                topic_id=uuid_of(topic_id), partition_errors=errors_of))
    return msg.LeaderAndIsrResponse(error_code=code, topics=topics)


def decode_leader_and_isr_response(answer: msg.LeaderAndIsrResponse, topic_ids: Mapping[str, str],
                                   version: int) -> Errors:
    """A LeaderAndIsr answer -> (error code, per partition); from v5 topic ids are named
    through ``topic_ids`` (the request's), and an id it does not hold is left out."""
    out: Dict[Tuple[str, int], int] = {}
    if version < _LAIR_TOPIC_IDS:
        for p in answer.partition_errors:
            out[(p.topic_name, p.partition_index)] = p.error_code
        return answer.error_code, out
    names: Dict[uuid.UUID, str] = {uuid_of(i): t for t, i in topic_ids.items()}
    for t in answer.topics:
        name = names.get(t.topic_id)
        if name is not None:
            for p in t.partition_errors:
                out[(name, p.partition_index)] = p.error_code
    return answer.error_code, out


# -- UpdateMetadata (6) --------------------------------------------------------------------

def encode_update_metadata(request: UpdateMetadataRequest, version: int) -> msg.UpdateMetadataRequest:
    """The UpdateMetadata request body of ``request`` at ``version``."""
    states = [(p.topic, _UmState(
        topic_name=p.topic, partition_index=p.partition, controller_epoch=p.controller_epoch, leader=p.leader,
        leader_epoch=p.leader_epoch, isr=p.isr, zk_version=p.partition_epoch, replicas=p.replicas,
        offline_replicas=p.offline_replicas)) for p in request.partitions]
    brokers = []
    for b in request.live_brokers:
        broker = msg.UpdateMetadataRequest.UpdateMetadataBroker(id=b.broker_id, rack=b.rack, endpoints=[
            msg.UpdateMetadataRequest.UpdateMetadataEndpoint(
                port=e.port, host=e.host, listener=e.listener,
                security_protocol=SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)) for e in b.endpoints])
        if version == 0:
            first = b.endpoint()
            broker.v0_host, broker.v0_port = (first.host, first.port) if first else ("", -1)
        brokers.append(broker)
    body = msg.UpdateMetadataRequest(
        controller_id=request.controller_id, controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch, type=0, live_brokers=brokers)
    if version < _UM_GROUPED:
        body.ungrouped_partition_states = [state for _, state in states]
    else:
        body.topic_states = [msg.UpdateMetadataRequest.UpdateMetadataTopicState(
            topic_name=t, topic_id=uuid_of(request.topic_ids.get(t, ZERO_TOPIC_ID)), partition_states=ps)
            for t, ps in _grouped(states).items()]
    return body


def decode_update_metadata(req: msg.UpdateMetadataRequest, version: int) -> UpdateMetadataRequest:
    """An UpdateMetadata request of any version, as the contract's type."""
    partitions: List[LeaderAndIsrPartition] = []
    topic_ids: Dict[str, str] = {}
    if version < _UM_GROUPED:
        partitions = [_partition_of(p.topic_name, p) for p in req.ungrouped_partition_states]
    else:
        for t in req.topic_states:
            if version >= _UM_TOPIC_IDS:
                topic_ids[t.topic_name] = text_of(t.topic_id)
            partitions += [_partition_of(t.topic_name, p) for p in t.partition_states]
    brokers = []
    for b in req.live_brokers:
        if version == 0:
            endpoints: Tuple[BrokerEndpoint, ...] = (BrokerEndpoint("PLAINTEXT", b.v0_host, b.v0_port),)
        else:
            endpoints = tuple(BrokerEndpoint(e.listener or _protocol_name(e.security_protocol), e.host,
                                             e.port, _protocol_name(e.security_protocol))
                              for e in b.endpoints)
        brokers.append(BrokerRegistration(b.id, endpoints, b.rack))
    return UpdateMetadataRequest(req.controller_id, req.controller_epoch, req.broker_epoch, partitions,
                                 brokers, topic_ids)


def encode_update_metadata_response(code: int) -> msg.UpdateMetadataResponse:
    return msg.UpdateMetadataResponse(error_code=code)


def decode_update_metadata_response(answer: msg.UpdateMetadataResponse) -> int:
    return answer.error_code


# -- StopReplica (5) -----------------------------------------------------------------------

def encode_stop_replica(request: StopReplicaRequest, version: int) -> msg.StopReplicaRequest:
    """The StopReplica request body of ``request`` at ``version``, partitions sorted. Below v3
    there is one delete flag for all (set when any partition is deleted) and no epochs."""
    items = sorted(request.partitions.items())
    body = msg.StopReplicaRequest(
        controller_id=request.controller_id, controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch)
    if version >= _SR_STATES:
        by_topic = _grouped([(t, msg.StopReplicaRequest.StopReplicaPartitionState(
            partition_index=p, leader_epoch=epoch, delete_partition=delete))
            for (t, p), (epoch, delete) in items])
        body.topic_states = [msg.StopReplicaRequest.StopReplicaTopicState(topic_name=t, partition_states=ps)
                             for t, ps in by_topic.items()]
        return body
    body.delete_partitions = any(delete for _, (_, delete) in items)
    if version >= _SR_TOPICS:
        indexes: Dict[str, List[int]] = {}
        for (t, p), _ in items:
            indexes.setdefault(t, []).append(p)
        body.topics = [msg.StopReplicaRequest.StopReplicaTopicV1(name=t, partition_indexes=ps)
                       for t, ps in indexes.items()]
    else:
        body.ungrouped_partitions = [msg.StopReplicaRequest.StopReplicaPartitionV0(topic_name=t, partition_index=p)
                                     for (t, p), _ in items]
    return body


def decode_stop_replica(req: msg.StopReplicaRequest, version: int) -> StopReplicaRequest:
    """A StopReplica request of any version, as the contract's type."""
    partitions: Dict[Tuple[str, int], Tuple[int, bool]] = {}
    if version < _SR_TOPICS:
        for p in req.ungrouped_partitions:
            partitions[(p.topic_name, p.partition_index)] = (NO_EPOCH, bool(req.delete_partitions))
    elif version < _SR_STATES:
        for t in req.topics:
            for index in t.partition_indexes:
                partitions[(t.name, index)] = (NO_EPOCH, bool(req.delete_partitions))
    else:
        for ts in req.topic_states:
            for s in ts.partition_states:
                partitions[(ts.topic_name, s.partition_index)] = (s.leader_epoch, bool(s.delete_partition))
    return StopReplicaRequest(req.controller_id, req.controller_epoch, req.broker_epoch, partitions)


def encode_stop_replica_response(code: int, per_partition: Mapping[Tuple[str, int], int]) -> msg.StopReplicaResponse:
    return msg.StopReplicaResponse(error_code=code, partition_errors=[
        msg.StopReplicaResponse.StopReplicaPartitionError(topic_name=t, partition_index=p, error_code=c)
        for (t, p), c in sorted(per_partition.items())])


def decode_stop_replica_response(answer: msg.StopReplicaResponse) -> Errors:
    return answer.error_code, {(p.topic_name, p.partition_index): p.error_code for p in answer.partition_errors}


# -- ControlledShutdown (7) ----------------------------------------------------------------

def encode_controlled_shutdown(broker_id: int, broker_epoch: int) -> msg.ControlledShutdownRequest:
    return msg.ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch)


def decode_controlled_shutdown(req: msg.ControlledShutdownRequest) -> Tuple[int, int]:
    """-> (broker id, broker epoch); the epoch is -1 below v2."""
    return req.broker_id, req.broker_epoch


def encode_controlled_shutdown_response(code: int, remaining: Sequence[Tuple[str, int]]
                                        ) -> msg.ControlledShutdownResponse:
    return msg.ControlledShutdownResponse(error_code=code, remaining_partitions=[
        msg.ControlledShutdownResponse.RemainingPartition(topic_name=t, partition_index=p) for t, p in remaining])


def decode_controlled_shutdown_response(answer: msg.ControlledShutdownResponse) -> Tuple[int, List[Tuple[str, int]]]:
    return answer.error_code, [(p.topic_name, p.partition_index) for p in answer.remaining_partitions]


# -- OffsetForLeaderEpoch (23) -------------------------------------------------------------

def encode_offset_for_leader_epoch(replica_id: int, partitions: Mapping[Tuple[str, int], Tuple[int, int]]
                                   ) -> msg.OffsetForLeaderEpochRequest:
    """``partitions``: (topic, partition) -> (current leader epoch, the epoch asked about)."""
    by_topic = _grouped([(t, msg.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
        partition=p, current_leader_epoch=current, leader_epoch=epoch))
        for (t, p), (current, epoch) in partitions.items()])
    return msg.OffsetForLeaderEpochRequest(replica_id=replica_id, topics=[
        msg.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])


def decode_offset_for_leader_epoch(req: msg.OffsetForLeaderEpochRequest
                                   ) -> Tuple[int, Dict[Tuple[str, int], Tuple[int, int]]]:
    """-> (replica id: -2 below v3 and for consumers, (topic, partition) -> (current leader epoch,
    the epoch asked about))."""
    asks: Dict[Tuple[str, int], Tuple[int, int]] = {}
    for t in req.topics:
        for p in t.partitions:
            asks[(t.topic, p.partition)] = (p.current_leader_epoch, p.leader_epoch)
    return req.replica_id, asks


def encode_offset_for_leader_epoch_response(req: msg.OffsetForLeaderEpochRequest,
                                            answers: Mapping[Tuple[str, int], EpochEndOffset]
                                            ) -> msg.OffsetForLeaderEpochResponse:
    """The answer to request ``req`` (its decoded body: the answer keeps its order)."""
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            a = answers[(t.topic, p.partition)]
            parts.append(msg.OffsetForLeaderEpochResponse.EpochEndOffset(
                error_code=a.error_code, partition=p.partition, leader_epoch=a.leader_epoch, end_offset=a.end_offset))
        topics.append(msg.OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return msg.OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def decode_offset_for_leader_epoch_response(answer: msg.OffsetForLeaderEpochResponse
                                            ) -> Dict[Tuple[str, int], EpochEndOffset]:
    return {(t.topic, p.partition): EpochEndOffset(p.error_code, p.leader_epoch, p.end_offset)
            for t in answer.topics for p in t.partitions}


# -- a follower's Fetch (1) ----------------------------------------------------------------

class ReplicaFetch(NamedTuple):
    """A follower's Fetch request (``max_bytes`` 0x7FFFFFFF when the request set none)."""

    replica_id: int
    broker_epoch: int
    partitions: List[ReplicaFetchPartition]
    max_wait_ms: int
    min_bytes: int
    max_bytes: int


#: Per topic of a Fetch: how the response names it, its name (None for an unknown id), and its
#: partitions in request order.
Order = List[Tuple[TopicKey, Optional[str], List[int]]]


def encode_replica_fetch(fetch: ReplicaFetch, version: int) -> msg.FetchRequest:
    """A follower's Fetch request body: a full fetch (no session), topics by name (below v13)."""
    if version >= FIRST_TOPIC_ID:
        raise InvalidArgumentError("a follower's Fetch names topics, before v%d" % FIRST_TOPIC_ID)
    by_topic = _grouped([(p.topic, msg.FetchRequest.FetchPartition(
        partition=p.partition, current_leader_epoch=p.current_leader_epoch, fetch_offset=p.fetch_offset,
        last_fetched_epoch=-1, log_start_offset=p.log_start_offset, partition_max_bytes=p.max_bytes))
        for p in fetch.partitions])
    return msg.FetchRequest(
        cluster_id=None, replica_id=fetch.replica_id, max_wait_ms=fetch.max_wait_ms, min_bytes=fetch.min_bytes,
        max_bytes=fetch.max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
        topics=[msg.FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        forgotten_topics_data=[], rack_id="")


def decode_replica_fetch(req: msg.FetchRequest, version: int,
                         topic_of: Callable[[msg.FetchRequest.FetchTopic, int], Optional[str]]
                         ) -> Tuple[ReplicaFetch, Order]:
    """A follower's Fetch request of any version -> (the request, its topics in request order).
    ``topic_of(topic, version)``: a requested topic's name (None: an unknown id, left out of the
    request's partitions)."""
    broker_epoch = req.replica_state.replica_epoch if version >= FIRST_REPLICA_STATE else -1
    asks: List[ReplicaFetchPartition] = []
    order: Order = []
    for topic in req.topics:
        name = topic_of(topic, version)
        indexes = [p.partition for p in topic.partitions]
        order.append((topic.topic_id if version >= FIRST_TOPIC_ID else name or "", name, indexes))
        if name is None:
            continue
        for p in topic.partitions:
            asks.append(ReplicaFetchPartition(name, p.partition, p.fetch_offset, p.log_start_offset,
                                              p.partition_max_bytes, p.current_leader_epoch))
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    return ReplicaFetch(replica_id_of(req, version), broker_epoch, asks, req.max_wait_ms, req.min_bytes,
                        max_bytes), order


def decode_replica_fetch_response(answer: msg.FetchResponse) -> Dict[Tuple[str, int], FetchResult]:
    """A Fetch answer with topics by name (below v13) -> each partition's result."""
    out: Dict[Tuple[str, int], FetchResult] = {}
    for t in answer.responses:
        for p in t.partitions:
            records = p.records
            out[(t.topic, p.partition_index)] = FetchResult(
                p.error_code, p.high_watermark, p.log_start_offset,
                RecordBytes(bytes(records)) if records is not None else None)
    return out


# -- WriteTxnMarkers (a transaction coordinator to a partitions' leader) -------------------


def encode_write_txn_markers_response(markers: Sequence[TxnMarker],
                                      answers: Mapping[int, Mapping[Tuple[str, int], int]]
                                      ) -> msg.WriteTxnMarkersResponse:
    """The answer, in the order of the request's markers and partitions."""
    R = msg.WriteTxnMarkersResponse
    out = []
    for m in markers:
        codes = answers.get(m.producer_id, {})
        by_topic: Dict[str, List[msg.WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult]] = defaultdict(list)
        for tp in m.partitions:
            by_topic[tp[0]].append(R.WritableTxnMarkerPartitionResult(
                partition_index=tp[1], error_code=codes.get(tp, errors.UnknownServerError.code)))
        out.append(R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            R.WritableTxnMarkerTopicResult(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return R(markers=out)


def decode_write_txn_markers(req: msg.WriteTxnMarkersRequest) -> List[TxnMarker]:
    return [TxnMarker(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
                      tuple((t.name, p) for t in m.topics for p in t.partition_indexes)) for m in req.markers]


def decode_write_txn_markers_response(answer: msg.WriteTxnMarkersResponse) -> Dict[int, Dict[Tuple[str, int], int]]:
    out: Dict[int, Dict[Tuple[str, int], int]] = {}
    for m in answer.markers:
        codes = out.setdefault(m.producer_id, {})
        for t in m.topics:
            for p in t.partitions:
                codes[(t.name, p.partition_index)] = p.error_code
    return out


def encode_write_txn_markers(markers: Sequence[TxnMarker]) -> msg.WriteTxnMarkersRequest:
    Q = msg.WriteTxnMarkersRequest
    out = []
    for m in markers:
        by_topic: Dict[str, List[int]] = defaultdict(list)
        for topic, p in m.partitions:
            by_topic[topic].append(p)
        out.append(Q.WritableTxnMarker(producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                                       transaction_result=m.committed, coordinator_epoch=m.coordinator_epoch,
                                       topics=[Q.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                                               for t, ps in by_topic.items()]))
    return Q(markers=out)

