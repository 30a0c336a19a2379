"""Golden bytes for every version of every implemented API, from Kafka 3.9's JSON schemas.

For each request and response table and the request/response headers, at each version in the
JSON's ``validVersions``:

1. the table agrees with the JSON field by field (name, type, versions, nullable, tagged and
   field-level flexible versions, tag, default) and in the message's validVersions and
   flexibleVersions, so a transcription slip fails here by name;
2. three deterministic samples (``_kafka_json.Samples``) encode with pylogq to the bytes of
   the independent reference encoder in ``_kafka_json`` (the golden bytes), decode back to
   the same values and re-encode to the same bytes;
3. kafka-python 3.0.12 encodes the same samples to the same golden bytes: its JSON-driven
   classes (from a newer Kafka) where they list the version, else its hand-written per-version
   classes (``kafka.protocol.old``). Cross-checked cases are enumerated at collection rather
   than skipped, and a coverage test pins the cases no kafka-python class can check: among
   them every version of the inter-broker APIs kafka-python has no class for (LeaderAndIsr,
   StopReplica, UpdateMetadata, ControlledShutdown), which steps 1 and 2 hold alone.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest
from kafka.protocol import admin as k_admin
from kafka.protocol import consumer as k_consumer
from kafka.protocol import metadata as k_metadata
from kafka.protocol import producer as k_producer
from kafka.protocol import sasl as k_sasl
from kafka.protocol.api_header import RequestHeader as KRequestHeader
from kafka.protocol.api_header import ResponseHeader as KResponseHeader
from kafka.protocol.old import admin as old_admin
from kafka.protocol.old import commit as old_commit
from kafka.protocol.old import fetch as old_fetch
from kafka.protocol.old import list_offsets as old_list_offsets
from kafka.protocol.old import offset_for_leader_epoch as old_offset_for_leader_epoch
from kafka.protocol.old import produce as old_produce
from kafka.protocol.old.types import Array as OldArray
from kafka.protocol.old.types import Schema as OldSchema

from pylogq.protocol import API_NAMES, REQUEST_HEADER, REQUESTS, RESPONSE_HEADER, RESPONSES
from pylogq.protocol import Schema

from . import _kafka_json as kj

#: The protocol layer has no pure-Python twin (records are opaque bytes to it): the compiled pass
#: only (tests/conftest.py).
pytestmark = [pytest.mark.compiled_pass,
              pytest.mark.skipif(not kj.MESSAGES.is_dir(), reason="Kafka's JSON schemas not beside the repository")]

#: Message name -> kafka-python's JSON-driven class for it (its packages re-export them all).
PEERS: Dict[str, Any] = {
    name: cls for module in (k_admin, k_consumer, k_metadata, k_producer, k_sasl)
    for name, cls in vars(module).items()
    if name.endswith(("Request", "Response")) and isinstance(getattr(cls, "json", None), dict)
}
PEERS.update(RequestHeader=KRequestHeader, ResponseHeader=KResponseHeader)

#: Message name -> kafka-python's hand-written per-version classes (``kafka.protocol.old``),
#: used for the old versions its JSON-driven classes (from a newer Kafka) no longer list.
OLD_PEERS: Dict[str, Any] = {
    name: classes for module in (old_admin, old_commit, old_fetch, old_list_offsets,
                                 old_offset_for_leader_epoch, old_produce)
    for name, classes in vars(module).items()
    if name.endswith(("Request", "Response")) and isinstance(classes, list)
}

TABLES: List[Schema] = [REQUEST_HEADER, RESPONSE_HEADER] + [
    t for k in sorted(REQUESTS) for t in (REQUESTS[k], RESPONSES[k])]
SPECS: Dict[str, Dict[str, Any]] = (
    {t.name: kj.load(t.name) for t in TABLES} if kj.MESSAGES.is_dir() else {})


def _label(schema: Schema, version: int) -> str:
    if schema.type == "header":
        return "%s-v%d" % (schema.name, version)
    return "%s-v%d-%s" % (API_NAMES[schema.api_key or 0], version, schema.type)


def _json_versions(schema: Schema) -> range:
    lo, hi = kj.versions(SPECS[schema.name]["validVersions"]) or (0, -1)
    return range(lo, hi + 1)


PAIRS: List[Tuple[Schema, int]] = [(schema, version) for schema in TABLES if schema.name in SPECS
                                   for version in _json_versions(schema)]


def _params(pairs: List[Tuple[Schema, int]]) -> List[Any]:
    return [pytest.param(schema, version, id=_label(schema, version)) for schema, version in pairs]


# -- 1. the tables against the JSON ----------------------------------------------------------


def _norm(rng: Any) -> Any:
    """pylogq and the reference mark an open range differently; compare (low, high or None)."""
    if rng is None:
        return None
    return rng[0], None if rng[1] >= 1 << 15 else rng[1]


def _json_field(spec: Dict[str, Any]) -> Tuple[Any, ...]:
    tag = spec.get("tag")
    primitive = "fields" not in spec or spec["type"].startswith("[]")
    return (spec["name"], spec["type"], _norm(kj.versions(spec["versions"])),
            _norm(kj.versions(spec.get("nullableVersions"))), tag,
            _norm(kj.versions(spec.get("taggedVersions"))) if tag is not None else None,
            # An absent field-level flexibleVersions follows the message's, as "0+" does.
            _norm(kj.versions(spec.get("flexibleVersions", "0+"))),
            kj.default(spec, 0) if primitive else None,
            [_json_field(f) for f in spec.get("fields", [])])


def _table_field(field: Any) -> Tuple[Any, ...]:
    return (field.name, field.type, _norm(field.versions), _norm(field.nullable), field.tag,
            _norm(field.tagged), _norm(field.flexible), field.default_value,
            [_table_field(f) for f in field.struct.fields] if field.struct is not None else [])


@pytest.mark.parametrize("schema", [t for t in TABLES if t.name in SPECS],
                         ids=lambda t: t.name)
def test_table_matches_kafka_json(schema: Schema) -> None:
    spec = SPECS[schema.name]
    assert (spec["type"], spec["name"], spec.get("apiKey")) == (
        schema.type, schema.name, schema.api_key)
    assert (schema.min_version, schema.max_version) == kj.versions(spec["validVersions"])
    assert _norm(schema.flexible_versions) == _norm(kj.versions(spec.get("flexibleVersions")))
    expected = [_json_field(f) for f in spec["fields"]]
    actual = [_table_field(f) for f in schema._struct.fields]
    for want, got in zip(expected, actual):
        assert got == want, "%s field %s" % (schema.name, want[0])
    assert len(actual) == len(expected)


# -- 2. golden bytes from the independent encoder, and pylogq's round trip -------------------


def _samples(schema: Schema, version: int) -> List[Dict[str, Any]]:
    fields = SPECS[schema.name]["fields"]
    return [kj.Samples(i).struct(fields, version) for i in range(3)]


@pytest.mark.parametrize("schema, version", _params(PAIRS))
def test_golden_bytes(schema: Schema, version: int) -> None:
    spec = SPECS[schema.name]
    for index, value in enumerate(_samples(schema, version)):
        golden = kj.encode(spec, value, version)
        assert schema.encode(value, version) == golden, "sample %d" % index
        decoded = schema.decode(golden, version)
        kj.contains(decoded, value)
        assert schema.encode(decoded, version) == golden, "sample %d re-encoded" % index


def _reach(fields: List[Dict[str, Any]], values: List[Dict[str, Any]], version: int,
           path: str, found: Dict[str, set]) -> None:
    """Record, per field path, "set", "null" and the array sizes the samples reach."""
    for f in fields:
        if not kj.has(kj.versions(f["versions"]), version):
            continue
        k = kj.key(f["name"])
        items = [v[k] for v in values if k in v]
        seen = found.setdefault(path + k, set())
        seen.update("null" if x is None else "set" for x in items)
        present = [x for x in items if x is not None]
        if f["type"].startswith("[]"):
            seen.update(len(x) for x in present)
        if "fields" in f:
            inner = [y for x in present for y in (x if isinstance(x, list) else [x])]
            _reach(f["fields"], inner, version, path + k + ".", found)


@pytest.mark.parametrize("schema, version", _params(PAIRS))
def test_samples_reach_every_field_null_and_array_size(schema: Schema, version: int) -> None:
    """Across the three samples every field is set, every nullable one is null somewhere, and
    arrays at every depth hold 0, 1 and 2 elements (a nullable array: null and two sizes)."""
    found: Dict[str, set] = {}
    fields = SPECS[schema.name]["fields"]
    _reach(fields, _samples(schema, version), version, "", found)

    def check(specs: List[Dict[str, Any]], path: str) -> None:
        for f in specs:
            if not kj.has(kj.versions(f["versions"]), version):
                continue
            name = path + kj.key(f["name"])
            nullable = kj.has(kj.versions(f.get("nullableVersions")), version)
            assert "set" in found[name] and ("null" in found[name]) == nullable, name
            if f["type"].startswith("[]"):
                sizes = found[name] & {0, 1, 2}
                assert len(sizes) >= (2 if nullable else 3), (name, sizes)
            check(f.get("fields", []), name + ".")

    check(fields, "")


# -- 3. cross-check with kafka-python --------------------------------------------------------

#: The peer patches authorized-operations int32 fields into bit sets (same four bytes).
_PEER_TYPES = {"bitfield": "int32"}


def _peer_class(schema: Schema) -> Any:
    return PEERS.get(schema.name)


#: Hand-written classes that disagree with Kafka: DescribeLogDirsRequest_v0 declares
#: ``partitions`` as one int32 where Kafka's schema has an array of int32.
_OLD_PEER_BUGS = {("DescribeLogDirsRequest", 0)}


def _old_class(schema: Schema, version: int) -> Any:
    classes = [] if (schema.name, version) in _OLD_PEER_BUGS else OLD_PEERS.get(schema.name, [])
    if version < len(classes):
        cls = classes[version]
        # kafka-python lists AlterConfigsRequest_v1 as AlterConfigsResponse[1]: skip such slips.
        if cls.__name__ == "%s_v%d" % (schema.name, version) and cls.API_VERSION == version:
            return cls
    return None


def _old_tuple(schema: Any, fields: List[Dict[str, Any]], value: Dict[str, Any],
               version: int) -> Tuple[Any, ...]:
    """One sample value as the nested tuples a hand-written class takes.

    Their layouts differ in shape, not bytes: a nested group of fields may be a sub-tuple, and
    an array of one-field structs a plain array.
    """
    pairs = iter([(f, value[kj.key(f["name"])]) for f in fields
                  if kj.has(kj.versions(f["versions"]), version)])
    out = _consume(schema, pairs, version)
    assert next(pairs, None) is None, "the JSON has more fields than %r" % schema.names
    return out


def _consume(schema: Any, pairs: Any, version: int) -> Tuple[Any, ...]:
    out: List[Any] = []
    for old_type in schema.fields:
        if isinstance(old_type, OldSchema):
            out.append(_consume(old_type, pairs, version))
        else:
            f, item = next(pairs)
            out.append(_old_value(old_type, f, item, version))
    return tuple(out)


def _old_value(old_type: Any, f: Dict[str, Any], item: Any, version: int) -> Any:
    if item is None or "fields" not in f:
        return item
    assert f["type"].startswith("[]") and isinstance(old_type, OldArray)
    inner = old_type.array_of
    if isinstance(inner, OldSchema):
        return [_old_tuple(inner, f["fields"], x, version) for x in item]
    (only,) = [g for g in f["fields"] if kj.has(kj.versions(g["versions"]), version)]
    return [_old_value(inner, only, x[kj.key(only["name"])], version) for x in item]


def _peer_has(schema: Schema, version: int) -> bool:
    peer = _peer_class(schema)
    if schema.type == "header":
        # A kafka-python header encodes only its first plain and first flexible version.
        return version in (peer._valid_versions[0], peer._flexible_versions[0])
    return peer is not None and kj.has(kj.versions(peer.json["validVersions"]), version)


def _peer_encode(schema: Schema, kwargs: Dict[str, Any], version: int) -> bytes:
    peer = _peer_class(schema)
    if schema.type == "header":
        return bytes(peer(**kwargs).encode(flexible=schema.is_flexible(version)))
    return bytes(peer[version](**kwargs).encode())


def _to_peer(fields: List[Dict[str, Any]], peer_fields: Dict[str, Any], value: Dict[str, Any],
             version: int) -> Dict[str, Any]:
    """Keyword arguments for a kafka-python data class holding one of our sample values.

    Fields pair by position (the peer renames a few, which does not change the bytes); their
    primitive types must agree so a pairing slip fails here rather than in the bytes.
    """
    ours = [f for f in fields if kj.has(kj.versions(f["versions"]), version)]
    theirs = [p for p in peer_fields.values() if p.for_version_q(version)]
    assert [(f["type"] if "fields" not in f else "struct") for f in ours] == [
        "struct" if p.is_struct() or p.is_struct_array()
        else _PEER_TYPES.get(p.type_str, p.type_str) for p in theirs]
    kwargs: Dict[str, Any] = {}
    for f, p in zip(ours, theirs):
        k = kj.key(f["name"])
        if k not in value:
            continue  # a tagged field left at its default
        item = value[k]
        if item is not None and "fields" in f:
            if f["type"].startswith("[]"):
                item = [p.data_class(**_to_peer(f["fields"], p.fields, x, version)) for x in item]
            else:
                item = p.data_class(**_to_peer(f["fields"], p.fields, item, version))
        elif p.type_str == "bitfield":
            item = {bit for bit in range(32) if item >> bit & 1}
        kwargs[p.name] = item
    return kwargs


PEER_PAIRS = [(s, v) for s, v in PAIRS if _peer_has(s, v)]
OLD_PEER_PAIRS = [(s, v) for s, v in PAIRS
                  if (s, v) not in PEER_PAIRS and _old_class(s, v) is not None]


@pytest.mark.parametrize("schema, version", _params(PEER_PAIRS))
def test_golden_bytes_match_kafka_python(schema: Schema, version: int) -> None:
    spec = SPECS[schema.name]
    peer = _peer_class(schema)
    for index, value in enumerate(_samples(schema, version)):
        kwargs = _to_peer(spec["fields"], peer._struct.fields, value, version)
        assert _peer_encode(schema, kwargs, version) == kj.encode(spec, value, version), \
            "sample %d" % index


@pytest.mark.parametrize("schema, version", _params(OLD_PEER_PAIRS))
def test_golden_bytes_match_hand_written_kafka_python(schema: Schema, version: int) -> None:
    spec = SPECS[schema.name]
    cls = _old_class(schema, version)
    for index, value in enumerate(_samples(schema, version)):
        message = cls(*_old_tuple(cls.SCHEMA, spec["fields"], value, version))
        assert bytes(message.encode()) == kj.encode(spec, value, version), "sample %d" % index


def test_kafka_python_cross_check_coverage() -> None:
    """Pins what kafka-python cannot check, so a lost peer cannot pass unnoticed."""
    assert sorted(t.name for t in TABLES if t.name not in PEERS) == sorted(TABLES_WITHOUT_PEER)
    missing = sorted(_label(s, v) for s, v in PAIRS
                     if (s, v) not in PEER_PAIRS and (s, v) not in OLD_PEER_PAIRS)
    assert missing == sorted(EXPECTED_WITHOUT_PEER), missing
    assert len(PEER_PAIRS) >= 320 and len(OLD_PEER_PAIRS) >= 25
    assert len(PEER_PAIRS) + len(OLD_PEER_PAIRS) + len(missing) == len(PAIRS)


#: The inter-broker messages, which kafka-python has no class for (it has OffsetForLeaderEpoch's).
TABLES_WITHOUT_PEER = [
    name + kind for name in ("LeaderAndIsr", "StopReplica", "UpdateMetadata", "ControlledShutdown")
    for kind in ("Request", "Response")]

#: kafka-python's header classes encode only v1 and v2 of the request header; see
#: ``_OLD_PEER_BUGS`` for the DescribeLogDirs request; kafka-python's AlterReplicaLogDirs and
#: WriteTxnMarkers classes (from a newer Kafka, which dropped their v0) start at v1 and it has
#: no hand-written v0 of either; then every version of the tables above.
EXPECTED_WITHOUT_PEER = ["RequestHeader-v0", "DescribeLogDirs-v0-request",
                         "AlterReplicaLogDirs-v0-request", "AlterReplicaLogDirs-v0-response",
                         "WriteTxnMarkers-v0-request", "WriteTxnMarkers-v0-response"] + [
    "%s-v%d-%s" % (name, version, kind)
    for name, (lo, hi) in (("LeaderAndIsr", (0, 7)), ("StopReplica", (0, 4)),
                           ("UpdateMetadata", (0, 8)), ("ControlledShutdown", (0, 3)))
    for version in range(lo, hi + 1) for kind in ("request", "response")]
