"""The reassignment APIs' tables: AlterReplicaLogDirs (34), ElectLeaders (43),
AlterPartitionReassignments (45) and ListPartitionReassignments (46), over Kafka 3.9's ranges.

The broker does not serve them yet (not in ``SUPPORTED_VERSIONS``, so ApiVersions does not
advertise them), but their tables and typed classes exist: each API at each version encodes a
representative request and response built as its typed class (:mod:`pylogq.protocol.message_data`,
holding only the fields that version carries), reads back as the same object, nulls included
(a null Replicas cancels a reassignment, a null Topics lists every reassignment, a null
TopicPartitions elects every partition), and re-encodes to the same bytes. Golden bytes for
at least one version of each API are written here field by field with ``struct`` from Kafka's
JSON layout, independent of the codec; ``test_golden`` checks every version with generated
samples as well.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pylogq import errors
from pylogq.errors import ProtocolError
from pylogq.protocol import (
    ALTER_PARTITION_REASSIGNMENTS_REQUEST,
    ALTER_PARTITION_REASSIGNMENTS_RESPONSE,
    ALTER_REPLICA_LOG_DIRS_REQUEST,
    ALTER_REPLICA_LOG_DIRS_RESPONSE,
    API_NAMES,
    ELECT_LEADERS_REQUEST,
    ELECT_LEADERS_RESPONSE,
    INTER_BROKER_APIS,
    LIST_PARTITION_REASSIGNMENTS_REQUEST,
    LIST_PARTITION_REASSIGNMENTS_RESPONSE,
    REQUEST_HEADER,
    REQUESTS,
    RESPONSES,
    SUPPORTED_VERSIONS,
    Reader,
    Schema,
    Writer,
    header_versions,
)
from pylogq.protocol import message_data as msg
from pylogq.protocol.constants import ElectionType
from pylogq.protocol.schema import Message

from ._wire import NO_TAGS, array, carray, cstring, i8, i16, i32, string

#: The protocol layer has no pure-Python twin (records are opaque bytes to it): the compiled pass
#: only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

ARLD, ARLD_RESPONSE = msg.AlterReplicaLogDirsRequest, msg.AlterReplicaLogDirsResponse
EL, EL_RESPONSE = msg.ElectLeadersRequest, msg.ElectLeadersResponse
APR, APR_RESPONSE = msg.AlterPartitionReassignmentsRequest, msg.AlterPartitionReassignmentsResponse
LPR, LPR_RESPONSE = msg.ListPartitionReassignmentsRequest, msg.ListPartitionReassignmentsResponse

#: Kafka 3.9's range of each API (key, request table, response table, versions).
APIS = [
    (34, ALTER_REPLICA_LOG_DIRS_REQUEST, ALTER_REPLICA_LOG_DIRS_RESPONSE, (0, 2)),
    (43, ELECT_LEADERS_REQUEST, ELECT_LEADERS_RESPONSE, (0, 2)),
    (45, ALTER_PARTITION_REASSIGNMENTS_REQUEST, ALTER_PARTITION_REASSIGNMENTS_RESPONSE, (0, 0)),
    (46, LIST_PARTITION_REASSIGNMENTS_REQUEST, LIST_PARTITION_REASSIGNMENTS_RESPONSE, (0, 0)),
]
NAMES = {34: "AlterReplicaLogDirs", 43: "ElectLeaders", 45: "AlterPartitionReassignments",
         46: "ListPartitionReassignments"}


# -- the wire layout, written by hand ---------------------------------------------------------


def round_trip(schema: Schema, value: Message, version: int) -> bytes:
    """Encode ``value``, read it back as the same typed object, re-encode the same bytes; every
    truncation fails to decode. Returns the encoding."""
    encoded = schema.encode(value, version)
    decoded = schema.parse(encoded, version)
    assert type(decoded) is schema.cls is type(value)
    assert decoded == value
    assert schema.encode(decoded, version) == encoded
    # The dict codec reads the same values.
    assert schema.decode(encoded, version) == value.as_dict()
    for cut in range(len(encoded)):
        with pytest.raises(ProtocolError):
            schema.parse(encoded[:cut], version)
    return encoded


# -- the tables: keys, names, ranges, served --------------------------------------------------


@pytest.mark.parametrize("api_key, request_table, response_table, versions", APIS,
                         ids=[NAMES[a[0]] for a in APIS])
def test_tables_over_kafka_39s_range(api_key: int, request_table: Schema, response_table: Schema,
                                     versions: tuple) -> None:
    assert REQUESTS[api_key] is request_table and RESPONSES[api_key] is response_table
    assert API_NAMES[api_key] == NAMES[api_key]
    for table, kind in ((request_table, "request"), (response_table, "response")):
        assert table.api_key == api_key and table.type == kind
        assert table.name == NAMES[api_key] + kind.capitalize()
        assert (table.min_version, table.max_version) == versions
        assert table.cls is getattr(msg, table.name)
    # Served over Kafka 3.9's range.
    assert SUPPORTED_VERSIONS.get(api_key) == versions
    assert api_key not in INTER_BROKER_APIS


@pytest.mark.parametrize("api_key, version, flexible", [
    (34, 0, False), (34, 1, False), (34, 2, True), (43, 0, False), (43, 1, False), (43, 2, True),
    (45, 0, True), (46, 0, True)])
def test_flexible_versions_and_headers(api_key: int, version: int, flexible: bool) -> None:
    assert REQUESTS[api_key].is_flexible(version) == RESPONSES[api_key].is_flexible(version) == flexible
    assert header_versions(api_key, version) == ((2, 1) if flexible else (1, 0))


def test_election_type_wire_values() -> None:
    assert (ElectionType.PREFERRED, ElectionType.UNCLEAN) == (0, 1)
    value = EL(election_type=ElectionType.UNCLEAN, topic_partitions=None)
    assert ELECT_LEADERS_REQUEST.encode(value, 1)[:1] == b"\x01"
    assert ELECT_LEADERS_REQUEST.parse(ELECT_LEADERS_REQUEST.encode(value, 1), 1).election_type == ElectionType.UNCLEAN


def test_defaults() -> None:
    # Kafka's defaults: a 60 s timeout; a null Replicas (cancel) and a null Topics (list all).
    assert EL().timeout_ms == APR().timeout_ms == LPR().timeout_ms == 60000
    assert EL().topic_partitions == [] and EL().election_type == ElectionType.PREFERRED
    assert APR.ReassignablePartition(partition_index=3).replicas is None
    assert LPR().topics is None
    assert ELECT_LEADERS_REQUEST.parse(ELECT_LEADERS_REQUEST.encode({}, 0), 0).timeout_ms == 60000
    assert LIST_PARTITION_REASSIGNMENTS_REQUEST.encode({}, 0) == i32(60000) + b"\x00" + NO_TAGS


# -- AlterReplicaLogDirs (34) -----------------------------------------------------------------


def _alter_replica_log_dirs() -> msg.AlterReplicaLogDirsRequest:
    return ARLD(dirs=[
        ARLD.AlterReplicaLogDir(path="/data/d1", topics=[
            ARLD.AlterReplicaLogDirTopic(name="orders", partitions=[0, 2]),
            ARLD.AlterReplicaLogDirTopic(name="clicks", partitions=[1]),
        ]),
        ARLD.AlterReplicaLogDir(path="/data/d2", topics=[
            ARLD.AlterReplicaLogDirTopic(name="orders", partitions=[]),
        ]),
    ])


def _alter_replica_log_dirs_response() -> msg.AlterReplicaLogDirsResponse:
    P = ARLD_RESPONSE.AlterReplicaLogDirPartitionResult
    return ARLD_RESPONSE(throttle_time_ms=25, results=[
        ARLD_RESPONSE.AlterReplicaLogDirTopicResult(topic_name="orders", partitions=[
            P(partition_index=0, error_code=0),
            P(partition_index=2, error_code=errors.LogDirNotFoundError.code),
        ]),
        ARLD_RESPONSE.AlterReplicaLogDirTopicResult(topic_name="clicks", partitions=[
            P(partition_index=1, error_code=errors.KafkaStorageError.code),
        ]),
    ])


@pytest.mark.parametrize("version", range(3))
def test_alter_replica_log_dirs_round_trip(version: int) -> None:
    round_trip(ALTER_REPLICA_LOG_DIRS_REQUEST, _alter_replica_log_dirs(), version)
    round_trip(ALTER_REPLICA_LOG_DIRS_RESPONSE, _alter_replica_log_dirs_response(), version)
    round_trip(ALTER_REPLICA_LOG_DIRS_REQUEST, ARLD(), version)
    round_trip(ALTER_REPLICA_LOG_DIRS_RESPONSE, ARLD_RESPONSE(), version)


@pytest.mark.parametrize("version", [0, 1])
def test_alter_replica_log_dirs_golden_v0_v1(version: int) -> None:
    request = (
        array(2)
        + string("/data/d1") + array(2)
        + string("orders") + array(2) + i32(0) + i32(2)
        + string("clicks") + array(1) + i32(1)
        + string("/data/d2") + array(1)
        + string("orders") + array(0)
    )
    assert ALTER_REPLICA_LOG_DIRS_REQUEST.encode(_alter_replica_log_dirs(), version) == request
    assert ALTER_REPLICA_LOG_DIRS_REQUEST.parse(request, version) == _alter_replica_log_dirs()
    response = (
        i32(25) + array(2)
        + string("orders") + array(2) + i32(0) + i16(0) + i32(2) + i16(57)
        + string("clicks") + array(1) + i32(1) + i16(56)
    )
    assert ALTER_REPLICA_LOG_DIRS_RESPONSE.encode(_alter_replica_log_dirs_response(), version) == response
    assert ALTER_REPLICA_LOG_DIRS_RESPONSE.parse(response, version) == _alter_replica_log_dirs_response()


def test_alter_replica_log_dirs_golden_v2_flexible() -> None:
    request = (
        carray(2)
        + cstring("/data/d1") + carray(2)
        + cstring("orders") + carray(2) + i32(0) + i32(2) + NO_TAGS
        + cstring("clicks") + carray(1) + i32(1) + NO_TAGS
        + NO_TAGS
        + cstring("/data/d2") + carray(1)
        + cstring("orders") + carray(0) + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )
    assert ALTER_REPLICA_LOG_DIRS_REQUEST.encode(_alter_replica_log_dirs(), 2) == request
    assert ALTER_REPLICA_LOG_DIRS_REQUEST.parse(request, 2) == _alter_replica_log_dirs()
    response = (
        i32(25) + carray(2)
        + cstring("orders") + carray(2) + i32(0) + i16(0) + NO_TAGS + i32(2) + i16(57) + NO_TAGS + NO_TAGS
        + cstring("clicks") + carray(1) + i32(1) + i16(56) + NO_TAGS + NO_TAGS
        + NO_TAGS
    )
    assert ALTER_REPLICA_LOG_DIRS_RESPONSE.encode(_alter_replica_log_dirs_response(), 2) == response
    assert ALTER_REPLICA_LOG_DIRS_RESPONSE.parse(response, 2) == _alter_replica_log_dirs_response()


# -- ElectLeaders (43) ------------------------------------------------------------------------


def _elect_leaders(version: int, topic_partitions: Optional[List[msg.ElectLeadersRequest.TopicPartitions]]
                   ) -> msg.ElectLeadersRequest:
    # ElectionType is a v1+ field: v0 always elects the preferred replica.
    election = ElectionType.UNCLEAN if version >= 1 else ElectionType.PREFERRED
    return EL(election_type=election, topic_partitions=topic_partitions, timeout_ms=30000)


def _some_partitions() -> List[msg.ElectLeadersRequest.TopicPartitions]:
    return [EL.TopicPartitions(topic="orders", partitions=[0, 1]),
            EL.TopicPartitions(topic="clicks", partitions=[3])]


def _elect_leaders_response(version: int) -> msg.ElectLeadersResponse:
    R = EL_RESPONSE.PartitionResult
    return EL_RESPONSE(
        throttle_time_ms=5,
        # The top-level error code is a v1+ field.
        error_code=errors.ClusterAuthorizationFailedError.code if version >= 1 else 0,
        replica_election_results=[
            EL_RESPONSE.ReplicaElectionResult(topic="orders", partition_result=[
                R(partition_id=0, error_code=0, error_message=None),
                R(partition_id=1, error_code=errors.ElectionNotNeededError.code,
                  error_message="Leader is already the preferred replica"),
            ]),
            EL_RESPONSE.ReplicaElectionResult(topic="clicks", partition_result=[
                R(partition_id=3, error_code=errors.EligibleLeadersNotAvailableError.code,
                  error_message=None),
            ]),
        ])


@pytest.mark.parametrize("version", range(3))
def test_elect_leaders_round_trip(version: int) -> None:
    round_trip(ELECT_LEADERS_REQUEST, _elect_leaders(version, _some_partitions()), version)
    # A null TopicPartitions: elect leaders for every partition.
    everything = round_trip(ELECT_LEADERS_REQUEST, _elect_leaders(version, None), version)
    assert ELECT_LEADERS_REQUEST.parse(everything, version).topic_partitions is None
    round_trip(ELECT_LEADERS_REQUEST, _elect_leaders(version, []), version)
    round_trip(ELECT_LEADERS_RESPONSE, _elect_leaders_response(version), version)
    round_trip(ELECT_LEADERS_RESPONSE, EL_RESPONSE(), version)


def test_elect_leaders_v0_has_no_election_type_nor_top_level_error() -> None:
    assert not ELECT_LEADERS_REQUEST.has_field("election_type", 0)
    assert ELECT_LEADERS_REQUEST.has_field("election_type", 1)
    assert not ELECT_LEADERS_RESPONSE.has_field("error_code", 0)
    assert ELECT_LEADERS_RESPONSE.has_field("error_code", 1)
    # Left out at v0, they read back as their defaults.
    v0 = ELECT_LEADERS_REQUEST.encode(EL(election_type=ElectionType.UNCLEAN, topic_partitions=None), 0)
    assert v0 == array(None) + i32(60000)
    assert ELECT_LEADERS_REQUEST.parse(v0, 0).election_type == ElectionType.PREFERRED


def test_elect_leaders_golden_v0_and_v1() -> None:
    assert ELECT_LEADERS_REQUEST.encode(_elect_leaders(0, _some_partitions()), 0) == (
        array(2) + string("orders") + array(2) + i32(0) + i32(1)
        + string("clicks") + array(1) + i32(3)
        + i32(30000))
    v1 = i8(1) + array(None) + i32(30000)
    assert ELECT_LEADERS_REQUEST.encode(_elect_leaders(1, None), 1) == v1
    assert ELECT_LEADERS_REQUEST.parse(v1, 1) == _elect_leaders(1, None)
    response = (
        i32(5) + i16(31) + array(2)
        + string("orders") + array(2)
        + i32(0) + i16(0) + string(None)
        + i32(1) + i16(84) + string("Leader is already the preferred replica")
        + string("clicks") + array(1)
        + i32(3) + i16(83) + string(None)
    )
    assert ELECT_LEADERS_RESPONSE.encode(_elect_leaders_response(1), 1) == response
    assert ELECT_LEADERS_RESPONSE.parse(response, 1) == _elect_leaders_response(1)


def test_elect_leaders_golden_v2_flexible() -> None:
    request = (
        i8(1) + carray(2)
        + cstring("orders") + carray(2) + i32(0) + i32(1) + NO_TAGS
        + cstring("clicks") + carray(1) + i32(3) + NO_TAGS
        + i32(30000) + NO_TAGS)
    assert ELECT_LEADERS_REQUEST.encode(_elect_leaders(2, _some_partitions()), 2) == request
    assert ELECT_LEADERS_REQUEST.parse(request, 2) == _elect_leaders(2, _some_partitions())
    null = i8(1) + carray(None) + i32(30000) + NO_TAGS
    assert ELECT_LEADERS_REQUEST.encode(_elect_leaders(2, None), 2) == null
    assert ELECT_LEADERS_REQUEST.parse(null, 2).topic_partitions is None
    response = (
        i32(5) + i16(31) + carray(2)
        + cstring("orders") + carray(2)
        + i32(0) + i16(0) + cstring(None) + NO_TAGS
        + i32(1) + i16(84) + cstring("Leader is already the preferred replica") + NO_TAGS
        + NO_TAGS
        + cstring("clicks") + carray(1)
        + i32(3) + i16(83) + cstring(None) + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )
    assert ELECT_LEADERS_RESPONSE.encode(_elect_leaders_response(2), 2) == response
    assert ELECT_LEADERS_RESPONSE.parse(response, 2) == _elect_leaders_response(2)


# -- AlterPartitionReassignments (45) ---------------------------------------------------------


def _alter_partition_reassignments() -> msg.AlterPartitionReassignmentsRequest:
    P = APR.ReassignablePartition
    return APR(timeout_ms=45000, topics=[
        APR.ReassignableTopic(name="orders", partitions=[
            P(partition_index=0, replicas=[3, 1, 2]),
            P(partition_index=1, replicas=None),  # cancel the pending reassignment
        ]),
        APR.ReassignableTopic(name="clicks", partitions=[P(partition_index=4, replicas=[])]),
    ])


def _alter_partition_reassignments_response() -> msg.AlterPartitionReassignmentsResponse:
    P = APR_RESPONSE.ReassignablePartitionResponse
    return APR_RESPONSE(throttle_time_ms=0, error_code=0, error_message=None, responses=[
        APR_RESPONSE.ReassignableTopicResponse(name="orders", partitions=[
            P(partition_index=0, error_code=0, error_message=None),
            P(partition_index=1, error_code=errors.NoReassignmentInProgressError.code,
              error_message="No ongoing reassignment for orders-1"),
        ]),
    ])


def test_alter_partition_reassignments_round_trip() -> None:
    round_trip(ALTER_PARTITION_REASSIGNMENTS_REQUEST, _alter_partition_reassignments(), 0)
    round_trip(ALTER_PARTITION_REASSIGNMENTS_RESPONSE, _alter_partition_reassignments_response(), 0)
    round_trip(ALTER_PARTITION_REASSIGNMENTS_REQUEST, APR(), 0)
    round_trip(ALTER_PARTITION_REASSIGNMENTS_RESPONSE, APR_RESPONSE(
        error_code=errors.ClusterAuthorizationFailedError.code, error_message="not authorized"), 0)
    decoded = ALTER_PARTITION_REASSIGNMENTS_REQUEST.parse(
        ALTER_PARTITION_REASSIGNMENTS_REQUEST.encode(_alter_partition_reassignments(), 0), 0)
    # Null (cancel) and empty replicas stay apart.
    assert [p.replicas for t in decoded.topics for p in t.partitions] == [[3, 1, 2], None, []]


def test_alter_partition_reassignments_golden_v0() -> None:
    request = (
        i32(45000) + carray(2)
        + cstring("orders") + carray(2)
        + i32(0) + carray(3) + i32(3) + i32(1) + i32(2) + NO_TAGS
        + i32(1) + carray(None) + NO_TAGS
        + NO_TAGS
        + cstring("clicks") + carray(1)
        + i32(4) + carray(0) + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )
    assert ALTER_PARTITION_REASSIGNMENTS_REQUEST.encode(_alter_partition_reassignments(), 0) == request
    assert ALTER_PARTITION_REASSIGNMENTS_REQUEST.parse(request, 0) == _alter_partition_reassignments()
    response = (
        i32(0) + i16(0) + cstring(None) + carray(1)
        + cstring("orders") + carray(2)
        + i32(0) + i16(0) + cstring(None) + NO_TAGS
        + i32(1) + i16(85) + cstring("No ongoing reassignment for orders-1") + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )
    assert ALTER_PARTITION_REASSIGNMENTS_RESPONSE.encode(_alter_partition_reassignments_response(), 0) == response
    assert ALTER_PARTITION_REASSIGNMENTS_RESPONSE.parse(response, 0) == _alter_partition_reassignments_response()


# -- ListPartitionReassignments (46) ----------------------------------------------------------


def _list_partition_reassignments() -> msg.ListPartitionReassignmentsRequest:
    T = LPR.ListPartitionReassignmentsTopics
    return LPR(timeout_ms=10000, topics=[T(name="orders", partition_indexes=[0, 1]),
                                         T(name="clicks", partition_indexes=[])])


def _list_partition_reassignments_response() -> msg.ListPartitionReassignmentsResponse:
    P = LPR_RESPONSE.OngoingPartitionReassignment
    return LPR_RESPONSE(throttle_time_ms=7, error_code=0, error_message=None, topics=[
        LPR_RESPONSE.OngoingTopicReassignment(name="orders", partitions=[
            P(partition_index=0, replicas=[1, 2, 3, 4], adding_replicas=[4], removing_replicas=[1]),
        ]),
    ])


def test_list_partition_reassignments_round_trip() -> None:
    round_trip(LIST_PARTITION_REASSIGNMENTS_REQUEST, _list_partition_reassignments(), 0)
    # A null Topics: list every ongoing reassignment (the default).
    everything = round_trip(LIST_PARTITION_REASSIGNMENTS_REQUEST, LPR(timeout_ms=10000, topics=None), 0)
    assert LIST_PARTITION_REASSIGNMENTS_REQUEST.parse(everything, 0).topics is None
    assert LIST_PARTITION_REASSIGNMENTS_REQUEST.parse(
        LIST_PARTITION_REASSIGNMENTS_REQUEST.encode(LPR(topics=[]), 0), 0).topics == []
    round_trip(LIST_PARTITION_REASSIGNMENTS_RESPONSE, _list_partition_reassignments_response(), 0)
    round_trip(LIST_PARTITION_REASSIGNMENTS_RESPONSE, LPR_RESPONSE(
        error_code=errors.ClusterAuthorizationFailedError.code, error_message="not authorized"), 0)


def test_list_partition_reassignments_golden_v0() -> None:
    request = (
        i32(10000) + carray(2)
        + cstring("orders") + carray(2) + i32(0) + i32(1) + NO_TAGS
        + cstring("clicks") + carray(0) + NO_TAGS
        + NO_TAGS
    )
    assert LIST_PARTITION_REASSIGNMENTS_REQUEST.encode(_list_partition_reassignments(), 0) == request
    assert LIST_PARTITION_REASSIGNMENTS_REQUEST.parse(request, 0) == _list_partition_reassignments()
    every = i32(10000) + carray(None) + NO_TAGS
    assert LIST_PARTITION_REASSIGNMENTS_REQUEST.encode(LPR(timeout_ms=10000, topics=None), 0) == every
    response = (
        i32(7) + i16(0) + cstring(None) + carray(1)
        + cstring("orders") + carray(1)
        + i32(0) + carray(4) + i32(1) + i32(2) + i32(3) + i32(4)
        + carray(1) + i32(4) + carray(1) + i32(1) + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )
    assert LIST_PARTITION_REASSIGNMENTS_RESPONSE.encode(_list_partition_reassignments_response(), 0) == response
    assert LIST_PARTITION_REASSIGNMENTS_RESPONSE.parse(response, 0) == _list_partition_reassignments_response()


# -- framed as the broker reads them ----------------------------------------------------------


@pytest.mark.parametrize("api_key, version", [(34, 0), (34, 2), (43, 1), (43, 2), (45, 0), (46, 0)])
def test_a_framed_request_reads_back(api_key: int, version: int) -> None:
    """Header and body, as a client frames them and the server's decode reads them."""
    body = {34: _alter_replica_log_dirs(), 43: _elect_leaders(version, None),
            45: _alter_partition_reassignments(), 46: _list_partition_reassignments()}[api_key]
    w = Writer()
    header_version = header_versions(api_key, version)[0]
    REQUEST_HEADER.encode_into(w, {"request_api_key": api_key, "request_api_version": version,
                                   "correlation_id": 77, "client_id": "reassign"}, header_version)
    REQUESTS[api_key].encode_into(w, body, version)
    r = Reader(w.getvalue())
    header = REQUEST_HEADER.read(r, header_version)
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (api_key, version, 77)
    assert REQUESTS[api_key].read(r, version) == body
    assert r.remaining == 0


# -- properties -------------------------------------------------------------------------------

NAME = st.text(min_size=0, max_size=12)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
BROKERS = st.lists(st.integers(0, 1 << 20), max_size=5)


@st.composite
def _reassignments(draw: st.DrawFn) -> msg.AlterPartitionReassignmentsRequest:
    topics = draw(st.lists(st.tuples(NAME, st.lists(st.tuples(INT32, st.none() | BROKERS), max_size=4)),
                           max_size=4))
    return APR(timeout_ms=draw(INT32), topics=[
        APR.ReassignableTopic(name=name, partitions=[
            APR.ReassignablePartition(partition_index=i, replicas=r) for i, r in parts])
        for name, parts in topics])


@given(_reassignments())
def test_alter_partition_reassignments_property(value: msg.AlterPartitionReassignmentsRequest) -> None:
    encoded = ALTER_PARTITION_REASSIGNMENTS_REQUEST.encode(value, 0)
    assert ALTER_PARTITION_REASSIGNMENTS_REQUEST.parse(encoded, 0) == value


@given(st.integers(0, 2), st.sampled_from(list(ElectionType)), INT32,
       st.none() | st.lists(st.tuples(NAME, st.lists(INT32, max_size=4)), max_size=4))
def test_elect_leaders_property(version: int, election: ElectionType, timeout: int,
                                topics: Optional[Sequence[tuple]]) -> None:
    value = EL(election_type=election if version >= 1 else 0, timeout_ms=timeout,
               topic_partitions=None if topics is None else [
                   EL.TopicPartitions(topic=t, partitions=p) for t, p in topics])
    encoded = ELECT_LEADERS_REQUEST.encode(value, version)
    assert ELECT_LEADERS_REQUEST.parse(encoded, version) == value
    assert ELECT_LEADERS_REQUEST.encode(ELECT_LEADERS_REQUEST.parse(encoded, version), version) == encoded


@given(INT32, st.none() | st.lists(st.tuples(NAME, st.lists(INT32, max_size=4)), max_size=4))
def test_list_partition_reassignments_property(timeout: int, topics: Optional[Sequence[tuple]]) -> None:
    value = LPR(timeout_ms=timeout, topics=None if topics is None else [
        LPR.ListPartitionReassignmentsTopics(name=n, partition_indexes=p) for n, p in topics])
    encoded = LIST_PARTITION_REASSIGNMENTS_REQUEST.encode(value, 0)
    assert LIST_PARTITION_REASSIGNMENTS_REQUEST.parse(encoded, 0) == value


@given(st.integers(0, 2), st.lists(st.tuples(st.text(max_size=20), st.lists(
    st.tuples(NAME, st.lists(INT32, max_size=4)), max_size=3)), max_size=3))
def test_alter_replica_log_dirs_property(version: int, dirs: Sequence[tuple]) -> None:
    value = ARLD(dirs=[ARLD.AlterReplicaLogDir(path=path, topics=[
        ARLD.AlterReplicaLogDirTopic(name=n, partitions=p) for n, p in topics]) for path, topics in dirs])
    encoded = ALTER_REPLICA_LOG_DIRS_REQUEST.encode(value, version)
    assert ALTER_REPLICA_LOG_DIRS_REQUEST.parse(encoded, version) == value
