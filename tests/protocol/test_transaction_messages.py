"""The transaction APIs' tables (KIP-98): AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
WriteTxnMarkers (27), TxnOffsetCommit (28), DescribeTransactions (65), ListTransactions (66), and
InitProducerId (22) with a transactional id, over their Kafka 3.9 schemas' versions.

The broker does not serve the seven yet (not in ``SUPPORTED_VERSIONS`` nor in ``ApiKey``, so
ApiVersions does not advertise them and a broker closes a connection that sends one), but their
tables and typed classes exist. Each API at each version encodes a representative request and
response built as its typed class (holding only the fields that version carries), reads back as
the same object, and re-encodes to the same bytes. Golden bytes for at least one version of each,
flexible and not, are written here field by field with ``struct`` in the order of Kafka's JSON
schemas, independent of the codec, and kafka-python's classes (its own JSON-driven encoder and
decoder) agree with them. Flexible versions end every struct with a tagged-field section: the
encoder writes it empty (these schemas declare no tagged field) and the decoder skips the
unknown tags a newer peer may send. Whatever bytes arrive, decoding either gives a message
that re-encodes to bytes decoding to the same message, or raises ProtocolError.
``test_golden`` checks every version with generated samples against the JSON as well.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol import admin as k_admin
from kafka.protocol import producer as k_producer

from pylogq import errors
from pylogq.errors import ProtocolError
from pylogq.protocol import (
    ADD_OFFSETS_TO_TXN_REQUEST,
    ADD_OFFSETS_TO_TXN_RESPONSE,
    ADD_PARTITIONS_TO_TXN_REQUEST,
    ADD_PARTITIONS_TO_TXN_RESPONSE,
    API_NAMES,
    DESCRIBE_TRANSACTIONS_REQUEST,
    DESCRIBE_TRANSACTIONS_RESPONSE,
    END_TXN_REQUEST,
    END_TXN_RESPONSE,
    INIT_PRODUCER_ID_REQUEST,
    INIT_PRODUCER_ID_RESPONSE,
    INTER_BROKER_APIS,
    LIST_TRANSACTIONS_REQUEST,
    LIST_TRANSACTIONS_RESPONSE,
    REQUESTS,
    RESPONSES,
    SUPPORTED_VERSIONS,
    TXN_OFFSET_COMMIT_REQUEST,
    TXN_OFFSET_COMMIT_RESPONSE,
    WRITE_TXN_MARKERS_REQUEST,
    WRITE_TXN_MARKERS_RESPONSE,
    ApiKey,
    Schema,
    header_versions,
)
from pylogq.protocol import message_data as msg
from pylogq.protocol.schema import Message

from ._wire import NO_TAGS, array, boolean, carray, cstring, i16, i32, i64, string, tags, uvarint

#: The protocol layer has no pure-Python twin (records are opaque bytes to it): the compiled pass
#: only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

APT, APT_RESPONSE = msg.AddPartitionsToTxnRequest, msg.AddPartitionsToTxnResponse
AOT, AOT_RESPONSE = msg.AddOffsetsToTxnRequest, msg.AddOffsetsToTxnResponse
ET, ET_RESPONSE = msg.EndTxnRequest, msg.EndTxnResponse
WTM, WTM_RESPONSE = msg.WriteTxnMarkersRequest, msg.WriteTxnMarkersResponse
TOC, TOC_RESPONSE = msg.TxnOffsetCommitRequest, msg.TxnOffsetCommitResponse
DT, DT_RESPONSE = msg.DescribeTransactionsRequest, msg.DescribeTransactionsResponse
LT, LT_RESPONSE = msg.ListTransactionsRequest, msg.ListTransactionsResponse
IPI, IPI_RESPONSE = msg.InitProducerIdRequest, msg.InitProducerIdResponse

#: (key, name, request table, response table, the schema's validVersions, first flexible version).
APIS = [
    (24, "AddPartitionsToTxn", ADD_PARTITIONS_TO_TXN_REQUEST, ADD_PARTITIONS_TO_TXN_RESPONSE, (0, 5), 3),
    (25, "AddOffsetsToTxn", ADD_OFFSETS_TO_TXN_REQUEST, ADD_OFFSETS_TO_TXN_RESPONSE, (0, 4), 3),
    (26, "EndTxn", END_TXN_REQUEST, END_TXN_RESPONSE, (0, 5), 3),
    (27, "WriteTxnMarkers", WRITE_TXN_MARKERS_REQUEST, WRITE_TXN_MARKERS_RESPONSE, (0, 1), 1),
    (28, "TxnOffsetCommit", TXN_OFFSET_COMMIT_REQUEST, TXN_OFFSET_COMMIT_RESPONSE, (0, 4), 3),
    (65, "DescribeTransactions", DESCRIBE_TRANSACTIONS_REQUEST, DESCRIBE_TRANSACTIONS_RESPONSE, (0, 0), 0),
    (66, "ListTransactions", LIST_TRANSACTIONS_REQUEST, LIST_TRANSACTIONS_RESPONSE, (0, 1), 0),
]
TXN_KEYS = [a[0] for a in APIS]
#: Every (table, version) of the seven APIs, and InitProducerId's.
PAIRS: List[Tuple[Schema, int]] = [
    (table, version) for _, _, request, response, (lo, hi), _ in APIS + [
        (22, "InitProducerId", INIT_PRODUCER_ID_REQUEST, INIT_PRODUCER_ID_RESPONSE, (0, 5), 2)]
    for table in (request, response) for version in range(lo, hi + 1)]

#: kafka-python's JSON-driven classes for these messages (it has every one of them).
PEERS: Dict[str, Any] = {
    name: cls for module in (k_admin, k_producer) for name, cls in vars(module).items()
    if name.endswith(("Request", "Response")) and isinstance(getattr(cls, "json", None), dict)}


# -- the wire layout, written by hand ---------------------------------------------------------


# -- helpers ----------------------------------------------------------------------------------


def round_trip(schema: Schema, value: Message, version: int) -> bytes:
    """Encode ``value``, read it back as the same typed object, re-encode the same bytes; every
    truncation fails to decode. Returns the encoding."""
    encoded = schema.encode(value, version)
    decoded = schema.parse(encoded, version)
    assert type(decoded) is schema.cls is type(value)
    assert decoded == value
    assert schema.encode(decoded, version) == encoded
    assert schema.decode(encoded, version) == value.as_dict()
    for cut in range(len(encoded)):
        with pytest.raises(ProtocolError):
            schema.parse(encoded[:cut], version)
    return encoded


def _present(struct_: Any, value: Dict[str, Any], version: int) -> Dict[str, Any]:
    """``value`` (the dict form) with only the fields ``version`` carries, as kafka-python's
    ``to_dict`` gives them."""
    out: Dict[str, Any] = {}
    for f in struct_.fields:
        if f.versions is None or not f.versions[0] <= version <= f.versions[1]:
            continue
        item = value[f.key]
        if f.struct is not None and item is not None:
            item = [_present(f.struct, x, version) for x in item] if f.elem is not None \
                else _present(f.struct, item, version)
        out[f.key] = item
    return out


def _peer_kwargs(peer_fields: Dict[str, Any], value: Dict[str, Any], version: int) -> Dict[str, Any]:
    """kafka-python's constructor arguments for one of our values (it names fields as we do)."""
    kwargs: Dict[str, Any] = {}
    for name, p in peer_fields.items():
        if not p.for_version_q(version):
            continue
        item = value[name]
        if item is not None and p.is_struct_array():
            item = [p.data_class(**_peer_kwargs(p.fields, x, version)) for x in item]
        elif item is not None and p.is_struct():
            item = p.data_class(**_peer_kwargs(p.fields, item, version))
        kwargs[name] = item
    return kwargs


def golden(schema: Schema, value: Message, version: int, expected: bytes) -> None:
    """``value`` encodes to the hand-written ``expected`` and reads back from it, with pylogq and
    with kafka-python (which encodes the same value to the same bytes and decodes them to it)."""
    assert schema.encode(value, version) == expected
    assert schema.parse(expected, version) == value
    peer = PEERS[schema.name]
    as_dict = value.as_dict()
    assert bytes(peer[version](**_peer_kwargs(peer._struct.fields, as_dict, version)).encode()) == expected
    assert peer[version].decode(expected).to_dict() == _present(schema._struct, as_dict, version)


# -- the tables: keys, names, ranges, not served ----------------------------------------------


@pytest.mark.parametrize("api_key, name, request_table, response_table, versions, flexible", APIS,
                         ids=[a[1] for a in APIS])
def test_tables_over_the_schemas_ranges(api_key: int, name: str, request_table: Schema,
                                        response_table: Schema, versions: Tuple[int, int],
                                        flexible: int) -> None:
    assert REQUESTS[api_key] is request_table and RESPONSES[api_key] is response_table
    assert API_NAMES[api_key] == name
    for table, kind in ((request_table, "request"), (response_table, "response")):
        assert table.api_key == api_key and table.type == kind
        assert table.name == name + kind.capitalize()
        assert (table.min_version, table.max_version) == versions
        assert table.cls is getattr(msg, table.name)
        for version in range(versions[0], versions[1] + 1):
            assert table.is_flexible(version) == (version >= flexible)
    for version in range(versions[0], versions[1] + 1):
        assert header_versions(api_key, version) == ((2, 1) if version >= flexible else (1, 0))
    # Served over Kafka 3.9's advertised range (EndTxn's v5 is unstable there), WriteTxnMarkers
    # among the inter-broker APIs.
    assert SUPPORTED_VERSIONS[api_key] == ((0, 4) if api_key == 26 else versions)
    assert (api_key in INTER_BROKER_APIS) == (api_key == 27)


def test_init_producer_id_covers_every_version_with_its_transactional_fields() -> None:
    assert SUPPORTED_VERSIONS[ApiKey.INIT_PRODUCER_ID] == (0, 5)
    for table in (INIT_PRODUCER_ID_REQUEST, INIT_PRODUCER_ID_RESPONSE):
        assert (table.min_version, table.max_version) == (0, 5)
    for version in range(6):
        assert INIT_PRODUCER_ID_REQUEST.has_field("transactional_id", version)
        assert INIT_PRODUCER_ID_REQUEST.has_field("transaction_timeout_ms", version)
        # From v3 a producer names its id and epoch to resume after INVALID_PRODUCER_EPOCH (KIP-360).
        assert INIT_PRODUCER_ID_REQUEST.has_field("producer_id", version) == (version >= 3)
        assert INIT_PRODUCER_ID_REQUEST.has_field("producer_epoch", version) == (version >= 3)
    assert IPI().producer_id == IPI().producer_epoch == IPI_RESPONSE().producer_id == -1


def test_defaults_are_kafkas() -> None:
    assert APT.AddPartitionsToTxnTransaction().verify_only is False
    assert ET_RESPONSE().producer_id == ET_RESPONSE().producer_epoch == -1
    assert (TOC().generation_id, TOC().member_id, TOC().group_instance_id) == (-1, "", None)
    assert TOC.TxnOffsetCommitRequestPartition().committed_leader_epoch == -1
    assert LT().duration_filter == -1
    # Left out below their first version, they read back as their defaults.
    assert END_TXN_RESPONSE.parse(i32(0) + i16(0) + NO_TAGS, 4).producer_id == -1
    assert LIST_TRANSACTIONS_REQUEST.parse(carray(0) + carray(0) + NO_TAGS, 0).duration_filter == -1



# -- AddPartitionsToTxn (24) ------------------------------------------------------------------


def _add_partitions(version: int) -> msg.AddPartitionsToTxnRequest:
    """A client's request (v0-3: one transaction), or a broker's (v4+: several, KIP-890)."""
    T = APT.AddPartitionsToTxnTopic
    if version <= 3:
        return APT(v3_and_below_transactional_id="txn-1", v3_and_below_producer_id=4000,
                   v3_and_below_producer_epoch=3,
                   v3_and_below_topics=[T(name="orders", partitions=[0, 2]), T(name="clicks", partitions=[1])])
    X = APT.AddPartitionsToTxnTransaction
    return APT(transactions=[
        X(transactional_id="txn-1", producer_id=4000, producer_epoch=3, verify_only=True,
          topics=[T(name="orders", partitions=[0, 2])]),
        X(transactional_id="txn-2", producer_id=4001, producer_epoch=0, verify_only=False, topics=[]),
    ])


def _topic_results() -> List[msg.AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]:
    P = APT_RESPONSE.AddPartitionsToTxnPartitionResult
    return [APT_RESPONSE.AddPartitionsToTxnTopicResult(name="orders", results_by_partition=[
        P(partition_index=0, partition_error_code=0),
        P(partition_index=2, partition_error_code=errors.ConcurrentTransactionsError.code)])]


def _add_partitions_response(version: int) -> msg.AddPartitionsToTxnResponse:
    if version <= 3:
        return APT_RESPONSE(throttle_time_ms=12, results_by_topic_v3_and_below=_topic_results())
    R = APT_RESPONSE.AddPartitionsToTxnResult
    return APT_RESPONSE(throttle_time_ms=12, error_code=0, results_by_transaction=[
        R(transactional_id="txn-1", topic_results=_topic_results()),
        R(transactional_id="txn-2", topic_results=[])])


@pytest.mark.parametrize("version", range(6))
def test_add_partitions_to_txn_round_trip(version: int) -> None:
    round_trip(ADD_PARTITIONS_TO_TXN_REQUEST, _add_partitions(version), version)
    round_trip(ADD_PARTITIONS_TO_TXN_REQUEST, APT(), version)
    round_trip(ADD_PARTITIONS_TO_TXN_RESPONSE, _add_partitions_response(version), version)
    round_trip(ADD_PARTITIONS_TO_TXN_RESPONSE, APT_RESPONSE(
        throttle_time_ms=1, error_code=errors.ClusterAuthorizationFailedError.code if version >= 4 else 0), version)


def test_add_partitions_to_txn_keeps_the_client_and_broker_forms_apart() -> None:
    # A v4+ request carries no v3-and-below field, and the reverse.
    assert not ADD_PARTITIONS_TO_TXN_REQUEST.has_field("transactions", 3)
    assert not ADD_PARTITIONS_TO_TXN_REQUEST.has_field("v3_and_below_transactional_id", 4)
    assert not ADD_PARTITIONS_TO_TXN_RESPONSE.has_field("error_code", 3)
    assert ADD_PARTITIONS_TO_TXN_RESPONSE.has_field("error_code", 4)
    # A v4 value at v3 is written with the v3 fields' defaults: its transactions are not sent.
    assert ADD_PARTITIONS_TO_TXN_REQUEST.encode(_add_partitions(4), 3) == \
        cstring("") + i64(0) + i16(0) + carray(0) + NO_TAGS


@pytest.mark.parametrize("version", [0, 1, 2])
def test_add_partitions_to_txn_golden_v0_to_v2(version: int) -> None:
    request = (
        string("txn-1") + i64(4000) + i16(3) + array(2)
        + string("orders") + array(2) + i32(0) + i32(2)
        + string("clicks") + array(1) + i32(1)
    )
    golden(ADD_PARTITIONS_TO_TXN_REQUEST, _add_partitions(version), version, request)
    response = (
        i32(12) + array(1)
        + string("orders") + array(2) + i32(0) + i16(0) + i32(2) + i16(51)
    )
    golden(ADD_PARTITIONS_TO_TXN_RESPONSE, _add_partitions_response(version), version, response)


def test_add_partitions_to_txn_golden_v3_flexible() -> None:
    request = (
        cstring("txn-1") + i64(4000) + i16(3) + carray(2)
        + cstring("orders") + carray(2) + i32(0) + i32(2) + NO_TAGS
        + cstring("clicks") + carray(1) + i32(1) + NO_TAGS
        + NO_TAGS
    )
    golden(ADD_PARTITIONS_TO_TXN_REQUEST, _add_partitions(3), 3, request)
    response = (
        i32(12) + carray(1)
        + cstring("orders") + carray(2) + i32(0) + i16(0) + NO_TAGS + i32(2) + i16(51) + NO_TAGS + NO_TAGS
        + NO_TAGS
    )
    golden(ADD_PARTITIONS_TO_TXN_RESPONSE, _add_partitions_response(3), 3, response)


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_to_txn_golden_v4_v5_batched(version: int) -> None:
    request = (
        carray(2)
        + cstring("txn-1") + i64(4000) + i16(3) + boolean(True) + carray(1)
        + cstring("orders") + carray(2) + i32(0) + i32(2) + NO_TAGS
        + NO_TAGS
        + cstring("txn-2") + i64(4001) + i16(0) + boolean(False) + carray(0) + NO_TAGS
        + NO_TAGS
    )
    golden(ADD_PARTITIONS_TO_TXN_REQUEST, _add_partitions(version), version, request)
    response = (
        i32(12) + i16(0) + carray(2)
        + cstring("txn-1") + carray(1)
        + cstring("orders") + carray(2) + i32(0) + i16(0) + NO_TAGS + i32(2) + i16(51) + NO_TAGS + NO_TAGS
        + NO_TAGS
        + cstring("txn-2") + carray(0) + NO_TAGS
        + NO_TAGS
    )
    golden(ADD_PARTITIONS_TO_TXN_RESPONSE, _add_partitions_response(version), version, response)


# -- AddOffsetsToTxn (25) ---------------------------------------------------------------------


def _add_offsets() -> msg.AddOffsetsToTxnRequest:
    return AOT(transactional_id="txn-1", producer_id=4000, producer_epoch=3, group_id="readers")


@pytest.mark.parametrize("version", range(5))
def test_add_offsets_to_txn_round_trip(version: int) -> None:
    round_trip(ADD_OFFSETS_TO_TXN_REQUEST, _add_offsets(), version)
    round_trip(ADD_OFFSETS_TO_TXN_RESPONSE, AOT_RESPONSE(throttle_time_ms=9,
                                                         error_code=errors.ProducerFencedError.code), version)


def test_add_offsets_to_txn_golden() -> None:
    golden(ADD_OFFSETS_TO_TXN_REQUEST, _add_offsets(), 2,
           string("txn-1") + i64(4000) + i16(3) + string("readers"))
    golden(ADD_OFFSETS_TO_TXN_REQUEST, _add_offsets(), 4,
           cstring("txn-1") + i64(4000) + i16(3) + cstring("readers") + NO_TAGS)
    fenced = AOT_RESPONSE(throttle_time_ms=9, error_code=errors.ProducerFencedError.code)
    golden(ADD_OFFSETS_TO_TXN_RESPONSE, fenced, 2, i32(9) + i16(90))
    golden(ADD_OFFSETS_TO_TXN_RESPONSE, fenced, 3, i32(9) + i16(90) + NO_TAGS)


# -- EndTxn (26) ------------------------------------------------------------------------------


def _end_txn(committed: bool) -> msg.EndTxnRequest:
    return ET(transactional_id="txn-1", producer_id=4000, producer_epoch=3, committed=committed)


def _end_txn_response(version: int) -> msg.EndTxnResponse:
    # From v5 the coordinator answers with the epoch it bumped at the transaction's end.
    if version >= 5:
        return ET_RESPONSE(throttle_time_ms=0, error_code=0, producer_id=4000, producer_epoch=4)
    return ET_RESPONSE(throttle_time_ms=0, error_code=errors.TransactionAbortableError.code)


@pytest.mark.parametrize("version", range(6))
def test_end_txn_round_trip(version: int) -> None:
    for committed in (True, False):
        round_trip(END_TXN_REQUEST, _end_txn(committed), version)
    round_trip(END_TXN_RESPONSE, _end_txn_response(version), version)


def test_end_txn_golden() -> None:
    golden(END_TXN_REQUEST, _end_txn(True), 0, string("txn-1") + i64(4000) + i16(3) + boolean(True))
    golden(END_TXN_REQUEST, _end_txn(False), 3, cstring("txn-1") + i64(4000) + i16(3) + boolean(False) + NO_TAGS)
    golden(END_TXN_RESPONSE, _end_txn_response(2), 2, i32(0) + i16(120))
    golden(END_TXN_RESPONSE, _end_txn_response(4), 4, i32(0) + i16(120) + NO_TAGS)
    golden(END_TXN_RESPONSE, _end_txn_response(5), 5, i32(0) + i16(0) + i64(4000) + i16(4) + NO_TAGS)


# -- WriteTxnMarkers (27) ---------------------------------------------------------------------


def _write_txn_markers() -> msg.WriteTxnMarkersRequest:
    M, T = WTM.WritableTxnMarker, WTM.WritableTxnMarkerTopic
    return WTM(markers=[
        M(producer_id=4000, producer_epoch=3, transaction_result=True, coordinator_epoch=7,
          topics=[T(name="orders", partition_indexes=[0, 2]), T(name="clicks", partition_indexes=[1])]),
        M(producer_id=4001, producer_epoch=0, transaction_result=False, coordinator_epoch=7, topics=[]),
    ])


def _write_txn_markers_response() -> msg.WriteTxnMarkersResponse:
    R, T, P = (WTM_RESPONSE.WritableTxnMarkerResult, WTM_RESPONSE.WritableTxnMarkerTopicResult,
               WTM_RESPONSE.WritableTxnMarkerPartitionResult)
    return WTM_RESPONSE(markers=[R(producer_id=4000, topics=[T(name="orders", partitions=[
        P(partition_index=0, error_code=0),
        P(partition_index=2, error_code=errors.NotLeaderOrFollowerError.code)])])])


@pytest.mark.parametrize("version", range(2))
def test_write_txn_markers_round_trip(version: int) -> None:
    round_trip(WRITE_TXN_MARKERS_REQUEST, _write_txn_markers(), version)
    round_trip(WRITE_TXN_MARKERS_REQUEST, WTM(), version)
    round_trip(WRITE_TXN_MARKERS_RESPONSE, _write_txn_markers_response(), version)


_WTM_V0 = (
    array(2)
    + i64(4000) + i16(3) + boolean(True) + array(2)
    + string("orders") + array(2) + i32(0) + i32(2)
    + string("clicks") + array(1) + i32(1)
    + i32(7)
    + i64(4001) + i16(0) + boolean(False) + array(0) + i32(7)
)


def test_write_txn_markers_golden_v0() -> None:
    # kafka-python has no v0 class (its newer Kafka dropped it): pylogq alone against the layout.
    assert WRITE_TXN_MARKERS_REQUEST.encode(_write_txn_markers(), 0) == _WTM_V0
    assert WRITE_TXN_MARKERS_REQUEST.parse(_WTM_V0, 0) == _write_txn_markers()
    response = (
        array(1) + i64(4000) + array(1)
        + string("orders") + array(2) + i32(0) + i16(0) + i32(2) + i16(6)
    )
    assert WRITE_TXN_MARKERS_RESPONSE.encode(_write_txn_markers_response(), 0) == response
    assert WRITE_TXN_MARKERS_RESPONSE.parse(response, 0) == _write_txn_markers_response()


_WTM_V1 = (
    carray(2)
    + i64(4000) + i16(3) + boolean(True) + carray(2)
    + cstring("orders") + carray(2) + i32(0) + i32(2) + NO_TAGS
    + cstring("clicks") + carray(1) + i32(1) + NO_TAGS
    + i32(7) + NO_TAGS
    + i64(4001) + i16(0) + boolean(False) + carray(0) + i32(7) + NO_TAGS
    + NO_TAGS
)


def test_write_txn_markers_golden_v1_flexible() -> None:
    golden(WRITE_TXN_MARKERS_REQUEST, _write_txn_markers(), 1, _WTM_V1)
    response = (
        carray(1) + i64(4000) + carray(1)
        + cstring("orders") + carray(2) + i32(0) + i16(0) + NO_TAGS + i32(2) + i16(6) + NO_TAGS
        + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )
    golden(WRITE_TXN_MARKERS_RESPONSE, _write_txn_markers_response(), 1, response)


def test_unknown_tagged_fields_are_skipped_at_every_depth() -> None:
    """A newer peer may add tagged fields to any struct of a flexible version: skipped, whatever
    their size (here in the request, a marker and a topic of WriteTxnMarkers v1)."""
    with_tags = (
        carray(2)
        + i64(4000) + i16(3) + boolean(True) + carray(2)
        + cstring("orders") + carray(2) + i32(0) + i32(2) + tags((0, b"\x01\x02"), (9, b""))
        + cstring("clicks") + carray(1) + i32(1) + NO_TAGS
        + i32(7) + tags((3, bytes(200)))
        + i64(4001) + i16(0) + boolean(False) + carray(0) + i32(7) + NO_TAGS
        + tags((1000, b"later"))
    )
    assert WRITE_TXN_MARKERS_REQUEST.parse(with_tags, 1) == _write_txn_markers()
    assert WRITE_TXN_MARKERS_REQUEST.decode(with_tags, 1) == _write_txn_markers().as_dict()
    # kafka-python skips them the same way; both write none back.
    assert PEERS["WriteTxnMarkersRequest"][1].decode(with_tags).to_dict() == \
        _present(WRITE_TXN_MARKERS_REQUEST._struct, _write_txn_markers().as_dict(), 1)
    assert WRITE_TXN_MARKERS_REQUEST.encode(WRITE_TXN_MARKERS_REQUEST.parse(with_tags, 1), 1) == _WTM_V1
    # A tagged field's declared size past the struct's end is a ProtocolError.
    with pytest.raises(ProtocolError):
        DESCRIBE_TRANSACTIONS_REQUEST.parse(carray(0) + uvarint(1) + uvarint(4) + uvarint(10) + b"abc", 0)


# -- TxnOffsetCommit (28) ---------------------------------------------------------------------


def _txn_offset_commit(version: int) -> msg.TxnOffsetCommitRequest:
    """The fields each version carries: the leader epoch from v2, the member from v3 (KIP-447)."""
    T, P = TOC.TxnOffsetCommitRequestTopic, TOC.TxnOffsetCommitRequestPartition
    epoch = 4 if version >= 2 else -1
    value = TOC(transactional_id="txn-1", group_id="readers", producer_id=4000, producer_epoch=3, topics=[
        T(name="orders", partitions=[
            P(partition_index=0, committed_offset=120, committed_leader_epoch=epoch, committed_metadata="meta"),
            P(partition_index=2, committed_offset=7, committed_metadata=None)])])
    if version >= 3:
        value.generation_id, value.member_id, value.group_instance_id = 5, "m-1", "instance-1"
    return value


def _txn_offset_commit_response() -> msg.TxnOffsetCommitResponse:
    T, P = TOC_RESPONSE.TxnOffsetCommitResponseTopic, TOC_RESPONSE.TxnOffsetCommitResponsePartition
    return TOC_RESPONSE(throttle_time_ms=3, topics=[T(name="orders", partitions=[
        P(partition_index=0, error_code=0), P(partition_index=2, error_code=errors.UnknownMemberIdError.code)])])


@pytest.mark.parametrize("version", range(5))
def test_txn_offset_commit_round_trip(version: int) -> None:
    round_trip(TXN_OFFSET_COMMIT_REQUEST, _txn_offset_commit(version), version)
    round_trip(TXN_OFFSET_COMMIT_REQUEST, TOC(), version)
    round_trip(TXN_OFFSET_COMMIT_RESPONSE, _txn_offset_commit_response(), version)
    if version >= 3:  # a null group instance id (a dynamic member) stays null
        value = _txn_offset_commit(version)
        value.group_instance_id = None
        assert TXN_OFFSET_COMMIT_REQUEST.parse(round_trip(TXN_OFFSET_COMMIT_REQUEST, value, version),
                                               version).group_instance_id is None


def test_txn_offset_commit_golden_v1_v2() -> None:
    v1 = (
        string("txn-1") + string("readers") + i64(4000) + i16(3) + array(1)
        + string("orders") + array(2)
        + i32(0) + i64(120) + string("meta")
        + i32(2) + i64(7) + string(None)
    )
    golden(TXN_OFFSET_COMMIT_REQUEST, _txn_offset_commit(1), 1, v1)
    v2 = (
        string("txn-1") + string("readers") + i64(4000) + i16(3) + array(1)
        + string("orders") + array(2)
        + i32(0) + i64(120) + i32(4) + string("meta")
        + i32(2) + i64(7) + i32(-1) + string(None)
    )
    golden(TXN_OFFSET_COMMIT_REQUEST, _txn_offset_commit(2), 2, v2)
    golden(TXN_OFFSET_COMMIT_RESPONSE, _txn_offset_commit_response(), 2, (
        i32(3) + array(1) + string("orders") + array(2) + i32(0) + i16(0) + i32(2) + i16(25)))


@pytest.mark.parametrize("version", [3, 4])
def test_txn_offset_commit_golden_flexible(version: int) -> None:
    request = (
        cstring("txn-1") + cstring("readers") + i64(4000) + i16(3)
        + i32(5) + cstring("m-1") + cstring("instance-1") + carray(1)
        + cstring("orders") + carray(2)
        + i32(0) + i64(120) + i32(4) + cstring("meta") + NO_TAGS
        + i32(2) + i64(7) + i32(-1) + cstring(None) + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )
    golden(TXN_OFFSET_COMMIT_REQUEST, _txn_offset_commit(version), version, request)
    response = (
        i32(3) + carray(1) + cstring("orders") + carray(2)
        + i32(0) + i16(0) + NO_TAGS + i32(2) + i16(25) + NO_TAGS + NO_TAGS + NO_TAGS
    )
    golden(TXN_OFFSET_COMMIT_RESPONSE, _txn_offset_commit_response(), version, response)


# -- DescribeTransactions (65) ----------------------------------------------------------------


def _describe_transactions_response() -> msg.DescribeTransactionsResponse:
    S, T = DT_RESPONSE.TransactionState, DT_RESPONSE.TopicData
    return DT_RESPONSE(throttle_time_ms=0, transaction_states=[
        S(error_code=0, transactional_id="txn-1", transaction_state="Ongoing", transaction_timeout_ms=60000,
          transaction_start_time_ms=1_700_000_000_000, producer_id=4000, producer_epoch=3,
          topics=[T(topic="orders", partitions=[0, 2])]),
        S(error_code=errors.TransactionalIdNotFoundError.code, transactional_id="txn-2", transaction_state="",
          transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]),
    ])


def test_describe_transactions_round_trip_and_golden() -> None:
    request = DT(transactional_ids=["txn-1", "txn-2"])
    round_trip(DESCRIBE_TRANSACTIONS_REQUEST, request, 0)
    round_trip(DESCRIBE_TRANSACTIONS_REQUEST, DT(), 0)
    round_trip(DESCRIBE_TRANSACTIONS_RESPONSE, _describe_transactions_response(), 0)
    golden(DESCRIBE_TRANSACTIONS_REQUEST, request, 0, carray(2) + cstring("txn-1") + cstring("txn-2") + NO_TAGS)
    response = (
        i32(0) + carray(2)
        + i16(0) + cstring("txn-1") + cstring("Ongoing") + i32(60000) + i64(1_700_000_000_000)
        + i64(4000) + i16(3) + carray(1) + cstring("orders") + carray(2) + i32(0) + i32(2) + NO_TAGS + NO_TAGS
        + i16(105) + cstring("txn-2") + cstring("") + i32(0) + i64(-1) + i64(-1) + i16(-1) + carray(0) + NO_TAGS
        + NO_TAGS
    )
    golden(DESCRIBE_TRANSACTIONS_RESPONSE, _describe_transactions_response(), 0, response)


# -- ListTransactions (66) --------------------------------------------------------------------


def _list_transactions(version: int) -> msg.ListTransactionsRequest:
    # DurationFilter is a v1 field (KIP-994): transactions running longer than it.
    return LT(state_filters=["Ongoing", "PrepareCommit"], producer_id_filters=[4000],
              duration_filter=60000 if version >= 1 else -1)


def _list_transactions_response() -> msg.ListTransactionsResponse:
    S = LT_RESPONSE.TransactionState
    return LT_RESPONSE(throttle_time_ms=0, error_code=0, unknown_state_filters=["Bogus"], transaction_states=[
        S(transactional_id="txn-1", producer_id=4000, transaction_state="Ongoing")])


@pytest.mark.parametrize("version", range(2))
def test_list_transactions_round_trip(version: int) -> None:
    round_trip(LIST_TRANSACTIONS_REQUEST, _list_transactions(version), version)
    round_trip(LIST_TRANSACTIONS_REQUEST, LT(), version)
    round_trip(LIST_TRANSACTIONS_RESPONSE, _list_transactions_response(), version)
    round_trip(LIST_TRANSACTIONS_RESPONSE, LT_RESPONSE(error_code=errors.CoordinatorLoadInProgressError.code), version)


def test_list_transactions_golden() -> None:
    filters = carray(2) + cstring("Ongoing") + cstring("PrepareCommit") + carray(1) + i64(4000)
    golden(LIST_TRANSACTIONS_REQUEST, _list_transactions(0), 0, filters + NO_TAGS)
    golden(LIST_TRANSACTIONS_REQUEST, _list_transactions(1), 1, filters + i64(60000) + NO_TAGS)
    response = (
        i32(0) + i16(0) + carray(1) + cstring("Bogus") + carray(1)
        + cstring("txn-1") + i64(4000) + cstring("Ongoing") + NO_TAGS
        + NO_TAGS
    )
    for version in (0, 1):
        golden(LIST_TRANSACTIONS_RESPONSE, _list_transactions_response(), version, response)


# -- InitProducerId (22) with a transactional id ----------------------------------------------


def _init_producer_id(version: int, transactional_id: Optional[str]) -> msg.InitProducerIdRequest:
    value = IPI(transactional_id=transactional_id, transaction_timeout_ms=60000)
    if version >= 3:
        value.producer_id, value.producer_epoch = 4000, 3
    return value


@pytest.mark.parametrize("version", range(6))
def test_init_producer_id_round_trip(version: int) -> None:
    for transactional_id in ("txn-1", None, ""):
        round_trip(INIT_PRODUCER_ID_REQUEST, _init_producer_id(version, transactional_id), version)
    round_trip(INIT_PRODUCER_ID_RESPONSE, IPI_RESPONSE(throttle_time_ms=0, error_code=0, producer_id=4000,
                                                       producer_epoch=4), version)
    round_trip(INIT_PRODUCER_ID_RESPONSE, IPI_RESPONSE(error_code=errors.ProducerFencedError.code), version)


def test_init_producer_id_golden() -> None:
    golden(INIT_PRODUCER_ID_REQUEST, _init_producer_id(1, "txn-1"), 1, string("txn-1") + i32(60000))
    golden(INIT_PRODUCER_ID_REQUEST, _init_producer_id(1, None), 1, string(None) + i32(60000))
    golden(INIT_PRODUCER_ID_REQUEST, _init_producer_id(2, "txn-1"), 2, cstring("txn-1") + i32(60000) + NO_TAGS)
    golden(INIT_PRODUCER_ID_REQUEST, _init_producer_id(4, "txn-1"), 4,
           cstring("txn-1") + i32(60000) + i64(4000) + i16(3) + NO_TAGS)
    golden(INIT_PRODUCER_ID_REQUEST, _init_producer_id(5, None), 5,
           cstring(None) + i32(60000) + i64(4000) + i16(3) + NO_TAGS)
    golden(INIT_PRODUCER_ID_RESPONSE, IPI_RESPONSE(producer_id=4000, producer_epoch=4), 5,
           i32(0) + i16(0) + i64(4000) + i16(4) + NO_TAGS)


# -- arbitrary bytes --------------------------------------------------------------------------


def _decodes_or_refuses(schema: Schema, version: int, data: bytes) -> None:
    """Decoding either gives a message that re-encodes to bytes reading back as the same
    message, or raises ProtocolError; never another exception."""
    for decode in (schema.parse, schema.decode):
        try:
            value = decode(data, version)
        except ProtocolError:
            continue
        again = schema.encode(value, version)
        assert decode(again, version) == value


_SAMPLES: Dict[Tuple[str, int], bytes] = {}


def _sample(schema: Schema, version: int) -> bytes:
    """A valid encoding of a representative value (every array non-empty where the value has one)."""
    key = (schema.name, version)
    if key not in _SAMPLES:
        values: Dict[str, Callable[[int], Message]] = {
            "AddPartitionsToTxnRequest": _add_partitions, "AddPartitionsToTxnResponse": _add_partitions_response,
            "AddOffsetsToTxnRequest": lambda v: _add_offsets(),
            "AddOffsetsToTxnResponse": lambda v: AOT_RESPONSE(throttle_time_ms=9, error_code=90),
            "EndTxnRequest": lambda v: _end_txn(True), "EndTxnResponse": _end_txn_response,
            "WriteTxnMarkersRequest": lambda v: _write_txn_markers(),
            "WriteTxnMarkersResponse": lambda v: _write_txn_markers_response(),
            "TxnOffsetCommitRequest": _txn_offset_commit,
            "TxnOffsetCommitResponse": lambda v: _txn_offset_commit_response(),
            "DescribeTransactionsRequest": lambda v: DT(transactional_ids=["txn-1", "txn-2"]),
            "DescribeTransactionsResponse": lambda v: _describe_transactions_response(),
            "ListTransactionsRequest": _list_transactions,
            "ListTransactionsResponse": lambda v: _list_transactions_response(),
            "InitProducerIdRequest": lambda v: _init_producer_id(v, "txn-1"),
            "InitProducerIdResponse": lambda v: IPI_RESPONSE(producer_id=4000, producer_epoch=4),
        }
        _SAMPLES[key] = schema.encode(values[schema.name](version), version)
    return _SAMPLES[key]


PAIR_IDS = ["%s-v%d" % (s.name, v) for s, v in PAIRS]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PAIRS), st.binary(max_size=96))
def test_arbitrary_bytes_decode_or_raise_protocol_error(case: Tuple[Schema, int], data: bytes) -> None:
    schema, version = case
    _decodes_or_refuses(schema, version, data)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PAIRS), st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)),
                                        min_size=1, max_size=4),
       st.integers(-8, 8))
def test_damaged_encodings_decode_or_raise_protocol_error(case: Tuple[Schema, int], writes: List[Tuple[int, int]],
                                                          resize: int) -> None:
    """A valid message with bytes overwritten (lengths, counts, varints, booleans) and cut
    short or extended: the decoder reads it or refuses it, never crashes."""
    schema, version = case
    data = bytearray(_sample(schema, version))
    for at, byte in writes:
        data[at % len(data)] = byte
    data = data[:len(data) + resize] if resize < 0 else data + bytes(resize)
    _decodes_or_refuses(schema, version, bytes(data))


@pytest.mark.parametrize("schema, version", PAIRS, ids=PAIR_IDS)
def test_every_sample_reads_back(schema: Schema, version: int) -> None:
    """The samples the damage test starts from are themselves valid (so damage is what it tests)."""
    data = _sample(schema, version)
    assert schema.encode(schema.parse(data, version), version) == data


# -- a broker does not serve them yet ---------------------------------------------------------
