"""The declarative protocol codec: primitives, round trips and golden bytes from kafka-python."""

from __future__ import annotations

import uuid
from typing import Any, Callable, Dict, List, Tuple

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.metadata import (
    ApiVersionsRequest as KApiVersionsRequest,
    ApiVersionsResponse as KApiVersionsResponse,
    MetadataRequest as KMetadataRequest,
    MetadataResponse as KMetadataResponse,
)
from kafka.protocol.producer import ProduceRequest as KProduceRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from pylogq.errors import ProtocolError, PylogqError
from pylogq.protocol import (
    API_VERSIONS_REQUEST,
    API_VERSIONS_RESPONSE,
    METADATA_REQUEST,
    METADATA_RESPONSE,
    PRODUCE_REQUEST,
    PRODUCE_RESPONSE,
    REQUEST_HEADER,
    RESPONSE_HEADER,
    Reader,
    Schema,
    Writer,
    header_versions,
    parse_versions,
    snake_case,
)

from . import _kafka_json as kj

#: The protocol layer has no pure-Python twin (records are opaque bytes to it): the compiled pass
#: only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


# -- primitives ---------------------------------------------------------------------------


@given(st.integers(0, (1 << 64) - 1))
def test_unsigned_varint_round_trip(v: int) -> None:
    w = Writer()
    w.unsigned_varint(v)
    r = Reader(w.getvalue())
    assert r.unsigned_varint(10) == v
    assert r.remaining == 0


@given(INT32)
def test_varint_round_trip(v: int) -> None:
    w = Writer()
    w.varint(v)
    assert len(w.buf) <= 5
    r = Reader(w.getvalue())
    assert r.varint() == v and r.remaining == 0


@given(INT64)
def test_varlong_round_trip(v: int) -> None:
    w = Writer()
    w.varlong(v)
    assert len(w.buf) <= 10
    r = Reader(w.getvalue())
    assert r.varlong() == v and r.remaining == 0


@pytest.mark.parametrize("value, encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"),
    ((1 << 31) - 1, b"\xfe\xff\xff\xff\x0f"), (-(1 << 31), b"\xff\xff\xff\xff\x0f"),
])
def test_varint_golden(value: int, encoded: bytes) -> None:
    w = Writer()
    w.varint(value)
    assert w.getvalue() == encoded
    assert Reader(encoded).varint() == value


@given(st.one_of(st.none(), st.text(max_size=200)), st.booleans())
def test_string_round_trip(v: Any, compact: bool) -> None:
    w = Writer()
    w.string(v, compact)
    r = Reader(w.getvalue())
    assert r.string(compact) == v and r.remaining == 0


@given(st.one_of(st.none(), st.binary(max_size=300)), st.booleans())
def test_bytes_round_trip(v: Any, compact: bool) -> None:
    w = Writer()
    w.blob(v, compact)
    r = Reader(w.getvalue())
    assert r.blob(compact) == v and r.remaining == 0


def test_string_encodings_golden() -> None:
    w = Writer()
    w.string("ab")
    w.string(None)
    w.string("ab", compact=True)
    w.string(None, compact=True)
    w.blob(b"\x01", compact=True)
    w.blob(None)
    assert w.getvalue() == b"\x00\x02ab\xff\xff\x03ab\x00\x02\x01\xff\xff\xff\xff"


@given(st.integers(-128, 127), st.integers(-(1 << 15), (1 << 15) - 1), INT32, INT64,
       st.integers(0, 0xFFFF), st.floats(allow_nan=False), st.booleans(), st.uuids())
def test_fixed_round_trip(i8: int, i16: int, i32: int, i64: int, u16: int, f: float,
                          b: bool, u: uuid.UUID) -> None:
    w = Writer()
    w.int8(i8)
    w.int16(i16)
    w.int32(i32)
    w.int64(i64)
    w.uint16(u16)
    w.float64(f)
    w.boolean(b)
    w.uuid(u)
    r = Reader(w.getvalue())
    assert (r.int8(), r.int16(), r.int32(), r.int64(), r.uint16(), r.float64(), r.boolean(),
            r.uuid()) == (i8, i16, i32, i64, u16, f, b, u)
    assert r.remaining == 0


def test_reader_error_message() -> None:
    with pytest.raises(ProtocolError, match=r"needed 4 bytes at position 1, have 2"):
        r = Reader(b"\x00\x00\x00")
        r.int8()
        r.int32()
    assert issubclass(ProtocolError, PylogqError)


@pytest.mark.parametrize("data, read", [
    (b"\xff\xff\xff\xff\xff\x01", Reader.varint),  # longer than 5 bytes
    (b"\xff\xff\xff\xff\x7f", Reader.varint),  # beyond int32
    (b"\xff\xfe", Reader.string),  # length -2
    (b"\xff\xff\xff\xfe", Reader.blob),  # length -2
    (b"\x00\x02\xff\xfe", Reader.string),  # invalid UTF-8
], ids=["long-varint", "wide-varint", "string-length", "bytes-length", "utf8"])
def test_malformed_input_raises(data: bytes, read: Callable[[Reader], Any]) -> None:
    with pytest.raises(ProtocolError):
        read(Reader(data))


def test_versions_and_names() -> None:
    assert parse_versions("3+") == (3, 1 << 15)
    assert parse_versions("0-7") == (0, 7)
    assert parse_versions("5") == (5, 5)
    assert parse_versions("none") is None
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"
    assert snake_case("IsrNodes") == "isr_nodes"
    assert snake_case("TopicId") == "topic_id"


# -- schema codec -----------------------------------------------------------------------

TOY = Schema({
    "name": "Toy", "type": "request", "apiKey": 999, "validVersions": "0-2",
    "flexibleVersions": "2+",
    "fields": [
        {"name": "Small", "type": "int8", "versions": "0+"},
        {"name": "Port", "type": "uint16", "versions": "0+"},
        {"name": "Delta", "type": "varint", "versions": "0+"},
        {"name": "Ratio", "type": "float64", "versions": "1+"},
        {"name": "Label", "type": "string", "versions": "0+", "nullableVersions": "1+"},
        {"name": "Blob", "type": "bytes", "versions": "0+", "nullableVersions": "0+"},
        {"name": "Id", "type": "uuid", "versions": "1+"},
        {"name": "Items", "type": "[]Item", "versions": "0+", "nullableVersions": "2+", "fields": [
            {"name": "Key", "type": "int64", "versions": "0+"},
            {"name": "Names", "type": "[]string", "versions": "0+"},
        ]},
        {"name": "Limit", "type": "int32", "versions": "0+", "default": "-1",
         "tag": 0, "taggedVersions": "2+"},
    ],
})


@st.composite
def toy_values(draw: Callable[..., Any]) -> Tuple[int, Dict[str, Any]]:
    version = draw(st.integers(0, 2))
    item = st.fixed_dictionaries({
        "key": INT64, "names": st.lists(st.text(max_size=10), max_size=3)})
    items = st.lists(item, max_size=3)
    return version, {
        "small": draw(st.integers(-128, 127)),
        "port": draw(st.integers(0, 0xFFFF)),
        "delta": draw(INT32),
        "ratio": draw(st.floats(allow_nan=False)) if version >= 1 else 0.0,
        "label": draw(st.one_of(st.none(), st.text(max_size=20)) if version >= 1
                      else st.text(max_size=20)),
        "blob": draw(st.one_of(st.none(), st.binary(max_size=20))),
        "id": draw(st.uuids()) if version >= 1 else uuid.UUID(int=0),
        "items": draw(st.one_of(st.none(), items) if version >= 2 else items),
        "limit": draw(INT32) if version >= 2 else -1,
    }


@given(toy_values())
def test_schema_round_trip(case: Tuple[int, Dict[str, Any]]) -> None:
    version, value = case
    encoded = TOY.encode(value, version)
    assert TOY.decode(encoded, version) == value
    for cut in range(len(encoded)):
        with pytest.raises(ProtocolError):
            TOY.decode(encoded[:cut], version)


def test_defaults_for_absent_fields() -> None:
    decoded = TOY.decode(TOY.encode({}, 0), 0)
    assert decoded == {"small": 0, "port": 0, "delta": 0, "ratio": 0.0, "label": "",
                       "blob": b"", "id": uuid.UUID(int=0), "items": [], "limit": -1}
    assert TOY.encode({}, 2) == TOY.encode(TOY.defaults(), 2)


def test_unknown_tagged_fields_skipped() -> None:
    body = TOY.encode({"limit": 7}, 2)
    assert body.endswith(b"\x01\x00\x04\x00\x00\x00\x07")
    # Replace the tagged section with one unknown tag (5) and the known one.
    extended = body[:-7] + b"\x02\x00\x04\x00\x00\x00\x07\x05\x03abc"
    assert TOY.decode(extended, 2)["limit"] == 7


def test_tagged_field_size_mismatch_raises() -> None:
    body = TOY.encode({"limit": 7}, 2)
    with pytest.raises(ProtocolError):
        TOY.decode(body[:-7] + b"\x01\x00\x05\x00\x00\x00\x07\x00", 2)


def test_bad_values_raise_value_error() -> None:
    with pytest.raises(ValueError, match="Small"):
        TOY.encode({"small": 300}, 0)
    with pytest.raises(ValueError, match="Label"):
        TOY.encode({"label": None}, 0)
    with pytest.raises(ValueError, match="version 3"):
        TOY.encode({}, 3)


COMMON = Schema({
    "name": "Common", "type": "request", "apiKey": 998, "validVersions": "0-1",
    "flexibleVersions": "1+",
    "fields": [
        {"name": "Loose", "type": "[]Part", "versions": "0"},
        {"name": "Topics", "type": "[]Topic", "versions": "1+", "fields": [
            {"name": "Name", "type": "string", "versions": "1+"},
            {"name": "Parts", "type": "[]Part", "versions": "1+"},
        ]},
        {"name": "Main", "type": "Part", "versions": "0+"},
    ],
    "commonStructs": [
        {"name": "Part", "versions": "0+", "fields": [
            {"name": "Topic", "type": "string", "versions": "0"},
            {"name": "Index", "type": "int32", "versions": "0+"},
        ]},
    ],
})


def test_common_structs_are_shared_and_follow_each_fields_versions() -> None:
    loose, topics, main = COMMON._struct.fields
    assert loose.struct is main.struct is topics.struct.fields[1].struct
    v0 = {"loose": [{"topic": "a", "index": 1}], "main": {"topic": "b", "index": 2}}
    assert COMMON.encode(v0, 0) == (b"\x00\x00\x00\x01" + b"\x00\x01a\x00\x00\x00\x01"
                                    + b"\x00\x01b\x00\x00\x00\x02")
    v1 = {"topics": [{"name": "t", "parts": [{"index": 3}]}], "main": {"index": 4}}
    encoded = COMMON.encode(v1, 1)
    # topics[1]: name, parts[1]: index, tags; tags; then main: index, tags; then the message's tags
    assert encoded == b"\x02\x02t\x02\x00\x00\x00\x03\x00\x00" + b"\x00\x00\x00\x04\x00" + b"\x00"
    assert COMMON.decode(encoded, 1) == {"loose": [], "topics": [
        {"name": "t", "parts": [{"topic": "", "index": 3}]}], "main": {"topic": "", "index": 4}}


def test_unknown_and_self_containing_common_structs_raise() -> None:
    # A table's fields are compiled at its first use (a broker starts before it needs most).
    head = {"name": "Bad", "type": "request", "apiKey": 997, "validVersions": "0"}
    missing = Schema(dict(head, fields=[{"name": "X", "type": "[]Missing", "versions": "0+"}]))
    with pytest.raises(ValueError, match="unknown type 'Missing'"):
        missing.encode({}, 0)
    loop = [{"name": "Loop", "versions": "0+", "fields": [
        {"name": "Inner", "type": "Loop", "versions": "0+"}]}]
    looping = Schema(dict(head, fields=[{"name": "X", "type": "Loop", "versions": "0+"}], commonStructs=loop))
    with pytest.raises(ValueError, match="common struct Loop contains itself"):
        looping.decode(b"", 0)
    with pytest.raises(ValueError, match="common struct Loop contains itself"):
        looping.defaults()  # again: a failed compilation is not kept


def test_huge_array_count_raises() -> None:
    with pytest.raises(ProtocolError):
        API_VERSIONS_RESPONSE.decode(b"\x00\x00\x7f\xff\xff\xff", 0)


# -- golden bytes against kafka-python ------------------------------------------------------


def _records() -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1_700_000_000_000, key=b"k", value=b"value", headers=[])
    builder.close()
    return bytes(builder.buffer())


KAV = KApiVersionsResponse
KMR = KMetadataResponse
KTopic = KMR.MetadataResponseTopic
KPart = KTopic.MetadataResponsePartition
KProduceTopic = KProduceRequest.TopicProduceData
RECORDS = _records()

METADATA_RESPONSE_V4: Dict[str, Any] = {
    "throttle_time_ms": 12,
    "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": None},
                {"node_id": 2, "host": "b2", "port": 9093, "rack": "r1"}],
    "cluster_id": "cluster",
    "controller_id": 1,
    "topics": [{"error_code": 0, "name": "t", "is_internal": False, "partitions": [
        {"error_code": 0, "partition_index": 0, "leader_id": 1, "replica_nodes": [1, 2],
         "isr_nodes": [1]},
        {"error_code": 5, "partition_index": 1, "leader_id": -1, "replica_nodes": [],
         "isr_nodes": []},
    ]}],
}


def _kafka_metadata_response() -> Any:
    return KMR[4](
        throttle_time_ms=12,
        brokers=[KMR.MetadataResponseBroker(node_id=1, host="localhost", port=9092, rack=None),
                 KMR.MetadataResponseBroker(node_id=2, host="b2", port=9093, rack="r1")],
        cluster_id="cluster", controller_id=1,
        topics=[KTopic(error_code=0, name="t", is_internal=False, partitions=[
            KPart(error_code=0, partition_index=0, leader_id=1, replica_nodes=[1, 2],
                  isr_nodes=[1]),
            KPart(error_code=5, partition_index=1, leader_id=-1, replica_nodes=[], isr_nodes=[]),
        ])])


GOLDEN: List[Tuple[str, Schema, int, Dict[str, Any], Callable[[], Any]]] = [
    *[(f"api_versions_request_v{v}", API_VERSIONS_REQUEST, v, {}, (lambda v=v: KApiVersionsRequest[v]()))
      for v in (0, 1, 2)],
    ("api_versions_request_v3", API_VERSIONS_REQUEST, 3,
     {"client_software_name": "pylogq", "client_software_version": "0.1"},
     lambda: KApiVersionsRequest[3](client_software_name="pylogq", client_software_version="0.1")),
    ("api_versions_response_v0", API_VERSIONS_RESPONSE, 0,
     {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 7},
                                    {"api_key": 18, "min_version": 0, "max_version": 3}]},
     lambda: KAV[0](error_code=0, api_keys=[KAV.ApiVersion(api_key=0, min_version=0, max_version=7),
                                            KAV.ApiVersion(api_key=18, min_version=0, max_version=3)])),
    ("api_versions_response_v3", API_VERSIONS_RESPONSE, 3,
     {"error_code": 0, "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 4}],
      "throttle_time_ms": 5,
      "supported_features": [{"name": "metadata.version", "min_version": 1, "max_version": 2}],
      "finalized_features_epoch": 3},
     lambda: KAV[3](error_code=0, api_keys=[KAV.ApiVersion(api_key=3, min_version=0, max_version=4)],
                    throttle_time_ms=5,
                    supported_features=[KAV.SupportedFeatureKey(name="metadata.version",
                                                                min_version=1, max_version=2)],
                    finalized_features_epoch=3)),
    ("metadata_request_v4", METADATA_REQUEST, 4,
     {"topics": [{"name": "t"}, {"name": "other"}], "allow_auto_topic_creation": False},
     lambda: KMetadataRequest[4](topics=[KMetadataRequest.MetadataRequestTopic(name="t"),
                                         KMetadataRequest.MetadataRequestTopic(name="other")],
                                 allow_auto_topic_creation=False)),
    ("metadata_request_v4_all_topics", METADATA_REQUEST, 4,
     {"topics": None},
     lambda: KMetadataRequest[4](topics=None, allow_auto_topic_creation=True)),
    ("metadata_response_v4", METADATA_RESPONSE, 4, METADATA_RESPONSE_V4, _kafka_metadata_response),
    ("produce_request_v7", PRODUCE_REQUEST, 7,
     {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
         {"name": "t", "partition_data": [{"index": 0, "records": RECORDS},
                                          {"index": 1, "records": None}]}]},
     lambda: KProduceRequest[7](transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
         KProduceTopic(name="t", partition_data=[
             KProduceTopic.PartitionProduceData(index=0, records=RECORDS),
             KProduceTopic.PartitionProduceData(index=1, records=None)])])),
]


@pytest.mark.parametrize("name, schema, version, value, peer", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_against_kafka_python(name: str, schema: Schema, version: int,
                                     value: Dict[str, Any], peer: Callable[[], Any]) -> None:
    golden = bytes(peer().encode())
    assert schema.encode(value, version) == golden
    decoded = schema.decode(golden, version)
    kj.contains(decoded, value)
    assert schema.encode(decoded, version) == golden


@pytest.mark.parametrize("name, schema, version, value, peer", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_every_truncation_raises_protocol_error(name: str, schema: Schema, version: int,
                                                value: Dict[str, Any],
                                                peer: Callable[[], Any]) -> None:
    golden = bytes(peer().encode())
    for cut in range(len(golden)):
        with pytest.raises(ProtocolError):
            schema.decode(golden[:cut], version)
        with pytest.raises(ProtocolError):
            schema.decode(memoryview(golden)[:cut], version)


def test_metadata_response_v4_decodes_defaults() -> None:
    decoded = METADATA_RESPONSE.decode(METADATA_RESPONSE.encode(METADATA_RESPONSE_V4, 4), 4)
    partition = decoded["topics"][0]["partitions"][0]
    assert partition["leader_epoch"] == -1 and partition["offline_replicas"] == []
    assert decoded["topics"][0]["topic_authorized_operations"] == -(1 << 31)


@given(st.integers(0, 11), st.lists(st.tuples(st.text(max_size=8), INT32, st.integers(-1, 1 << 40)),
                                     max_size=3))
def test_produce_response_round_trip(version: int, parts: List[Tuple[str, int, int]]) -> None:
    value = PRODUCE_RESPONSE.defaults()
    value["responses"] = [{"name": n, "partition_responses": [
        {"index": i, "error_code": 0, "base_offset": o}]} for n, i, o in parts]
    decoded = PRODUCE_RESPONSE.decode(PRODUCE_RESPONSE.encode(value, version), version)
    assert [(t["name"], t["partition_responses"][0]["index"], t["partition_responses"][0]["base_offset"])
            for t in decoded["responses"]] == parts


# -- headers --------------------------------------------------------------------------------


@pytest.mark.parametrize("flexible", [False, True])
def test_request_header_golden(flexible: bool) -> None:
    version = 3 if flexible else 2
    request = KApiVersionsRequest[version]()
    request.with_header(correlation_id=7, client_id="cli")
    golden = bytes(request.encode(header=True))
    header_version, _ = header_versions(18, version)
    header = {"request_api_key": 18, "request_api_version": version, "correlation_id": 7,
              "client_id": "cli"}
    w = Writer()
    REQUEST_HEADER.encode_into(w, header, header_version)
    API_VERSIONS_REQUEST.encode_into(w, {}, version)
    assert w.getvalue() == golden
    r = Reader(golden)
    assert REQUEST_HEADER.decode_from(r, header_version) == header
    for cut in range(len(golden) - r.remaining):
        with pytest.raises(ProtocolError):
            REQUEST_HEADER.decode(golden[:cut], header_version)


def test_request_header_v0_has_no_client_id() -> None:
    assert REQUEST_HEADER.encode({"request_api_key": 3, "request_api_version": 0,
                                  "correlation_id": 1, "client_id": "x"}, 0) == \
        b"\x00\x03\x00\x00\x00\x00\x00\x01"


def test_response_headers() -> None:
    assert header_versions(18, 3) == (2, 0)
    assert header_versions(3, 9) == (2, 1)
    assert header_versions(0, 7) == (1, 0)
    assert RESPONSE_HEADER.encode({"correlation_id": 7}, 0) == b"\x00\x00\x00\x07"
    assert RESPONSE_HEADER.encode({"correlation_id": 7}, 1) == b"\x00\x00\x00\x07\x00"
    response = KAV[3](error_code=0, api_keys=[])
    response.with_header(correlation_id=9)
    golden = bytes(response.encode(header=True))
    r = Reader(golden)
    assert RESPONSE_HEADER.decode_from(r, 0) == {"correlation_id": 9}
    assert API_VERSIONS_RESPONSE.decode_from(r, 3)["api_keys"] == []
    assert r.remaining == 0
    with pytest.raises(ProtocolError):
        RESPONSE_HEADER.decode(b"\x00\x00\x00\x07", 1)


@given(st.sampled_from([(g[1], g[2]) for g in GOLDEN] + [(PRODUCE_RESPONSE, 11),
                                                         (METADATA_RESPONSE, 12)]),
       st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_protocol_error(case: Tuple[Schema, int],
                                                        data: bytes) -> None:
    schema, version = case
    try:
        schema.decode(data, version)
    except ProtocolError:
        pass
