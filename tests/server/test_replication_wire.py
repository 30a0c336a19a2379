"""The replication APIs' wire conversion round-trips through the schema tables' bytes.

For each API brokers send one another, a contract object is turned into a body by
:mod:`pylogq.server.replication_wire` (as :mod:`pylogq.server.inter_broker` sends it, or
as the handlers answer), encoded to bytes with the schema tables, decoded back and
turned back into the contract's type (as the handlers, or the inter-broker client, read
it): it must equal the original. Each version is tested from the oldest one the handlers
accept to the one :data:`~pylogq.server.inter_broker.VERSIONS` sends; the objects drawn
for a version hold only what it carries (what an older version drops, its decoder fills
in with Kafka's defaults, which the strategies draw instead).
"""

from __future__ import annotations

import uuid
from typing import Dict, List, Tuple, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq.cluster.contract import (
    BrokerEndpoint,
    BrokerRegistration,
    EpochEndOffset,
    FetchResult,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    RecordBytes,
    ReplicaFetchPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from pylogq.protocol import REQUESTS, RESPONSE_HEADER, RESPONSES, ApiKey, Reader, Writer, header_versions
from pylogq.protocol import message_data as msg
from pylogq.protocol.schema import Message
from pylogq.server import replication_wire as wire
from pylogq.server.fetch import frame_fetch_response
from pylogq.server.handler_base import text_of
from pylogq.server.inter_broker import VERSIONS

#: The replication APIs' wire conversion: records are opaque bytes to it, and it has no pure-Python
#: twin: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

int16 = st.integers(-(1 << 15), (1 << 15) - 1)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)
int64 = st.integers(-(1 << 63), (1 << 63) - 1)
names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
topic_ids = st.binary(min_size=16, max_size=16).map(lambda b: text_of(uuid.UUID(bytes=b)))
replica_lists = st.lists(int32, max_size=4)
settings_ = settings(max_examples=60, deadline=None)
M = TypeVar("M", bound=Message)


def versions(api_key: int) -> List[int]:
    """From the oldest version the handlers accept to the one inter_broker sends."""
    return list(range(REQUESTS[api_key].min_version, VERSIONS[api_key] + 1))


def request_wire(api_key: int, body: M, version: int) -> M:
    """``body`` encoded to bytes with the request table and read back as its class."""
    w = Writer()
    REQUESTS[api_key].encode_into(w, body, version)
    r = Reader(w.getvalue())
    out = REQUESTS[api_key].read(r, version)
    assert r.remaining == 0 and isinstance(out, type(body))
    return out


def response_wire(api_key: int, body: M, version: int) -> M:
    """``body`` encoded to bytes with the response table and read back as its class."""
    w = Writer()
    RESPONSES[api_key].encode_into(w, body, version)
    r = Reader(w.getvalue())
    out = RESPONSES[api_key].read(r, version)
    assert r.remaining == 0 and isinstance(out, type(body))
    return out


@st.composite
def grouped_partitions(draw: st.DrawFn, offline: bool, is_new: bool) -> List[LeaderAndIsrPartition]:
    """Partitions of a few topics, each topic's together (as a request per topic groups them)."""
    out: List[LeaderAndIsrPartition] = []
    for topic in draw(st.lists(names, max_size=3, unique=True)):
        for index in draw(st.lists(int32, min_size=1, max_size=3, unique=True)):
            out.append(LeaderAndIsrPartition(
                topic, index, draw(int32), draw(int32), draw(int32), draw(replica_lists), draw(int32),
                draw(replica_lists), draw(replica_lists) if offline else [], draw(st.booleans()) if is_new else False))
    return out


def ids_of(draw: st.DrawFn, partitions: List[LeaderAndIsrPartition], with_ids: bool) -> Dict[str, str]:
    """A distinct id for each topic of ``partitions``, or none."""
    if not with_ids:
        return {}
    topics = list(dict.fromkeys(p.topic for p in partitions))
    return dict(zip(topics, draw(st.lists(topic_ids, min_size=len(topics), max_size=len(topics), unique=True))))


# -- LeaderAndIsr ----------------------------------------------------------------------------

@st.composite
def leader_and_isr_requests(draw: st.DrawFn, version: int) -> LeaderAndIsrRequest:
    partitions = draw(grouped_partitions(offline=False, is_new=version >= 1))
    leaders = [BrokerRegistration(b, (BrokerEndpoint("PLAINTEXT", draw(names), draw(int32)),))
               for b in draw(st.lists(int32, max_size=3))]
    return LeaderAndIsrRequest(draw(int32), draw(int32), draw(int64) if version >= 2 else -1, partitions,
                               ids_of(draw, partitions, version >= 5), leaders)


@pytest.mark.parametrize("version", versions(ApiKey.LEADER_AND_ISR))
@settings_
@given(data=st.data())
def test_leader_and_isr_round_trips(version: int, data: st.DataObject) -> None:
    request = data.draw(leader_and_isr_requests(version))
    body = request_wire(ApiKey.LEADER_AND_ISR, wire.encode_leader_and_isr(request, version), version)
    assert wire.decode_leader_and_isr(body, version) == request
    errors_of = data.draw(st.dictionaries(st.tuples(st.sampled_from(sorted(request.topic_ids) or ["t"]), int32),
                                          int16, max_size=5)) if request.topic_ids or version < 5 else {}
    code = data.draw(int16)
    answer = response_wire(ApiKey.LEADER_AND_ISR,
                           wire.encode_leader_and_isr_response(code, errors_of, request.topic_ids, version), version)
    assert wire.decode_leader_and_isr_response(answer, request.topic_ids, version) == (code, errors_of)


# -- UpdateMetadata --------------------------------------------------------------------------

@st.composite
def endpoints(draw: st.DrawFn, version: int) -> Tuple[BrokerEndpoint, ...]:
    if version == 0:
        return (BrokerEndpoint("PLAINTEXT", draw(names), draw(int32)),)
    out = []
    for _ in range(draw(st.integers(0, 3))):
        protocol = draw(st.sampled_from(sorted(wire.SECURITY_PROTOCOL_IDS)))
        listener = draw(names) if version >= 3 else protocol  # no listener names before v3
        out.append(BrokerEndpoint(listener, draw(names), draw(int32), protocol))
    return tuple(out)


@st.composite
def update_metadata_requests(draw: st.DrawFn, version: int) -> UpdateMetadataRequest:
    partitions = draw(grouped_partitions(offline=version >= 4, is_new=False))
    # No rack before v2: the table's default, "", reads back.
    brokers = [BrokerRegistration(b, draw(endpoints(version)), draw(st.none() | names) if version >= 2 else "")
               for b in draw(st.lists(int32, max_size=3))]
    return UpdateMetadataRequest(draw(int32), draw(int32), draw(int64) if version >= 5 else -1, partitions,
                                 brokers, ids_of(draw, partitions, version >= 7))


@pytest.mark.parametrize("version", versions(ApiKey.UPDATE_METADATA))
@settings_
@given(data=st.data())
def test_update_metadata_round_trips(version: int, data: st.DataObject) -> None:
    request = data.draw(update_metadata_requests(version))
    body = request_wire(ApiKey.UPDATE_METADATA, wire.encode_update_metadata(request, version), version)
    assert wire.decode_update_metadata(body, version) == request
    code = data.draw(int16)
    answer = response_wire(ApiKey.UPDATE_METADATA, wire.encode_update_metadata_response(code), version)
    assert wire.decode_update_metadata_response(answer) == code


# -- StopReplica -----------------------------------------------------------------------------

@st.composite
def stop_replica_requests(draw: st.DrawFn, version: int) -> StopReplicaRequest:
    keys = draw(st.lists(st.tuples(names, int32), max_size=6, unique=True))
    if version >= 3:
        partitions = {k: (draw(int32), draw(st.booleans())) for k in keys}
    else:  # one delete flag for all, no epochs
        delete = draw(st.booleans())
        partitions = {k: (wire.NO_EPOCH, delete) for k in keys}
    return StopReplicaRequest(draw(int32), draw(int32), draw(int64) if version >= 1 else -1, partitions)


@pytest.mark.parametrize("version", versions(ApiKey.STOP_REPLICA))
@settings_
@given(data=st.data())
def test_stop_replica_round_trips(version: int, data: st.DataObject) -> None:
    request = data.draw(stop_replica_requests(version))
    body = request_wire(ApiKey.STOP_REPLICA, wire.encode_stop_replica(request, version), version)
    assert wire.decode_stop_replica(body, version) == request
    code = data.draw(int16)
    errors_of = data.draw(st.dictionaries(st.tuples(names, int32), int16, max_size=5))
    answer = response_wire(ApiKey.STOP_REPLICA, wire.encode_stop_replica_response(code, errors_of), version)
    assert wire.decode_stop_replica_response(answer) == (code, errors_of)


# -- ControlledShutdown ----------------------------------------------------------------------

@pytest.mark.parametrize("version", versions(ApiKey.CONTROLLED_SHUTDOWN))
@settings_
@given(broker_id=int32, broker_epoch=int64, code=int16, remaining=st.lists(st.tuples(names, int32), max_size=5))
def test_controlled_shutdown_round_trips(version: int, broker_id: int, broker_epoch: int, code: int,
                                         remaining: List[Tuple[str, int]]) -> None:
    if version < 2:
        broker_epoch = -1  # no broker epoch before v2
    body = request_wire(ApiKey.CONTROLLED_SHUTDOWN, wire.encode_controlled_shutdown(broker_id, broker_epoch), version)
    assert wire.decode_controlled_shutdown(body) == (broker_id, broker_epoch)
    answer = response_wire(ApiKey.CONTROLLED_SHUTDOWN, wire.encode_controlled_shutdown_response(code, remaining),
                           version)
    assert wire.decode_controlled_shutdown_response(answer) == (code, remaining)


# -- OffsetForLeaderEpoch --------------------------------------------------------------------

@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FOR_LEADER_EPOCH))
@settings_
@given(data=st.data())
def test_offset_for_leader_epoch_round_trips(version: int, data: st.DataObject) -> None:
    replica_id = data.draw(int32) if version >= 3 else -2  # -2 (a consumer) before v3
    keys = data.draw(st.lists(st.tuples(names, int32), max_size=6, unique=True))
    asks = {k: (data.draw(int32) if version >= 2 else -1, data.draw(int32)) for k in keys}
    body = request_wire(ApiKey.OFFSET_FOR_LEADER_EPOCH, wire.encode_offset_for_leader_epoch(replica_id, asks),
                        version)
    assert wire.decode_offset_for_leader_epoch(body) == (replica_id, asks)
    answers = {k: EpochEndOffset(data.draw(int16), data.draw(int32) if version >= 1 else -1, data.draw(int64))
               for k in keys}
    answer = response_wire(ApiKey.OFFSET_FOR_LEADER_EPOCH, wire.encode_offset_for_leader_epoch_response(body, answers),
                           version)
    assert wire.decode_offset_for_leader_epoch_response(answer) == answers


# -- a follower's Fetch ----------------------------------------------------------------------

@st.composite
def replica_fetches(draw: st.DrawFn, version: int) -> wire.ReplicaFetch:
    partitions = []
    for topic in draw(st.lists(names, max_size=3, unique=True)):
        for index in draw(st.lists(int32, min_size=1, max_size=3, unique=True)):
            partitions.append(ReplicaFetchPartition(
                topic, index, draw(int64), draw(int64) if version >= 5 else -1, draw(int32),
                draw(int32) if version >= 9 else -1))
    return wire.ReplicaFetch(draw(st.integers(0, (1 << 31) - 1)), -1, partitions, draw(int32), draw(int32),
                             draw(st.integers(1, (1 << 31) - 1)) if version >= 3 else 0x7FFFFFFF)


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
@settings_
@given(data=st.data())
def test_replica_fetch_round_trips(version: int, data: st.DataObject) -> None:
    fetch = data.draw(replica_fetches(version))
    body = request_wire(ApiKey.FETCH, wire.encode_replica_fetch(fetch, version), version)
    assert wire.replica_id_of(body, version) == fetch.replica_id
    decoded, order = wire.decode_replica_fetch(body, version, lambda topic, _: topic.topic)
    assert decoded == fetch
    assert [(name, indexes) for _, name, indexes in order] == [
        (t, [p.partition for p in fetch.partitions if p.topic == t])
        for t in dict.fromkeys(p.topic for p in fetch.partitions)]

    # The answer, framed as the Fetch handler frames it, read as the inter-broker client reads it.
    results = {(p.topic, p.partition): FetchResult(
        data.draw(int16), data.draw(int64), data.draw(int64) if version >= 5 else -1,
        data.draw(st.none() | st.binary(max_size=64).map(RecordBytes))) for p in fetch.partitions}
    topics = [(key, [(i, results[(name or "", i)]) for i in indexes]) for key, name, indexes in order]
    parts, size = frame_fetch_response(7, version, 0, 0, 0, topics)
    frame = b"".join(part if isinstance(part, bytes) else part.read() for part in parts)
    assert len(frame) == size
    r = Reader(frame[4:])
    assert RESPONSE_HEADER.decode_from(r, header_versions(ApiKey.FETCH, version)[1])["correlation_id"] == 7
    answer = RESPONSES[ApiKey.FETCH].read(r, version)
    assert r.remaining == 0 and isinstance(answer, msg.FetchResponse)
    # An error partition's records (None) go out as empty records, as Kafka sends them.
    assert {k: (v.error_code, v.high_watermark, v.log_start_offset, v.records.read() if v.records is not None else None)
            for k, v in wire.decode_replica_fetch_response(answer).items()} == {
        k: (v.error_code, v.high_watermark, v.log_start_offset, v.records.read() if v.records is not None else b"")
        for k, v in results.items()}


def test_a_follower_fetch_names_topics() -> None:
    with pytest.raises(ValueError):
        wire.encode_replica_fetch(wire.ReplicaFetch(1, -1, [], 0, 1, 1), 13)
