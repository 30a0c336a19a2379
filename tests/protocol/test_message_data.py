"""The typed message classes: generated from the tables, current, and equal to the dict codec.

Each table decodes to its class (``Schema.parse``) with the same values the dict decoder
gives, and the class encodes to the same bytes, over every version the broker serves, with
values and with nulls (the samples of test_messages). A class built with no arguments is the
table's defaults.
"""

from __future__ import annotations

import uuid
from typing import Any, Dict

import pytest

from pylogq.protocol import REQUEST_HEADER, RESPONSE_HEADER, Schema, generator, message_data

from .test_messages import TABLES, _advertised, _cases, _sample

#: The protocol layer has no pure-Python twin (records are opaque bytes to it): the compiled pass
#: only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass


def test_the_generated_module_is_current() -> None:
    assert generator.generate() == generator.TARGET.read_text(encoding="utf-8"), \
        "pylogq/protocol/message_data.py is stale: run python -m pylogq.protocol.generator"
    assert generator.main(["--check"]) == 0


def test_every_table_is_bound_to_its_class() -> None:
    for schema in TABLES + [REQUEST_HEADER, RESPONSE_HEADER]:
        cls = getattr(message_data, schema.name)
        assert schema.cls is cls
        assert message_data.BINDINGS[schema.name][0] is cls


@pytest.mark.parametrize("schema, version, nulls", _cases(_advertised))
def test_the_class_decodes_and_encodes_as_the_dict_codec(schema: Schema, version: int, nulls: bool) -> None:
    encoded = schema.encode(_sample(schema, version, nulls), version)
    as_dict = schema.decode(encoded, version)
    typed = schema.parse(encoded, version)
    assert type(typed) is schema.cls
    assert typed.as_dict() == as_dict
    assert schema.encode(typed, version) == encoded


@pytest.mark.parametrize("schema", TABLES, ids=lambda s: s.name)
def test_a_class_built_without_arguments_is_the_tables_defaults(schema: Schema) -> None:
    assert schema.cls is not None
    built = schema.cls()
    assert built.as_dict() == schema.defaults()
    for version in _advertised(schema):
        assert schema.encode(built, version) == schema.encode({}, version)


def test_lists_and_structs_are_fresh_for_every_object() -> None:
    a, b = message_data.ProduceResponse(), message_data.ProduceResponse()
    a.responses.append(message_data.ProduceResponse.TopicProduceResponse(name="t"))
    assert b.responses == []
    p, q = (message_data.ProduceResponse.PartitionProduceResponse() for _ in range(2))
    p.current_leader.leader_id = 3
    assert q.current_leader.leader_id == -1


def test_objects_compare_by_fields_and_show_them() -> None:
    one = message_data.FindCoordinatorRequest(key="g", key_type=0)
    assert one == message_data.FindCoordinatorRequest(key="g", key_type=0)
    assert one != message_data.FindCoordinatorRequest(key="h", key_type=0)
    assert one != {"key": "g", "key_type": 0}
    assert "key='g'" in repr(one)
    with pytest.raises(TypeError):
        hash(one)
    with pytest.raises(TypeError):
        message_data.FindCoordinatorRequest("g")  # type: ignore[misc]  # keyword-only
    with pytest.raises(AttributeError):
        one.not_a_field = 1  # type: ignore[attr-defined]


def test_a_tagged_struct_at_its_default_is_left_out_of_the_encoding() -> None:
    version = 10
    plain = message_data.ProduceResponse(responses=[message_data.ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[message_data.ProduceResponse.PartitionProduceResponse(index=0)])])
    led = message_data.ProduceResponse(responses=[message_data.ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[message_data.ProduceResponse.PartitionProduceResponse(
            index=0, current_leader=message_data.ProduceResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=5))])])
    schema = message_data.BINDINGS["ProduceResponse"][0]
    assert schema is message_data.ProduceResponse
    from pylogq.protocol import PRODUCE_RESPONSE
    short, long = PRODUCE_RESPONSE.encode(plain, version), PRODUCE_RESPONSE.encode(led, version)
    assert len(long) > len(short)
    back = PRODUCE_RESPONSE.parse(long, version)
    assert back.responses[0].partition_responses[0].current_leader.leader_epoch == 5
    assert PRODUCE_RESPONSE.parse(short, version) == plain


def test_as_dict_is_the_dict_codecs_form() -> None:
    response = message_data.ProduceResponse(responses=[message_data.ProduceResponse.TopicProduceResponse(name="t")])
    plain = response.as_dict()
    assert plain["responses"][0]["name"] == "t"
    assert plain["responses"][0]["partition_responses"] == []
    assert plain["throttle_time_ms"] == 0 and set(plain) == set(response.__slots__)


def test_uuid_fields_default_to_the_null_uuid() -> None:
    assert message_data.MetadataResponse.MetadataResponseTopic().topic_id == uuid.UUID(int=0)


def test_the_generator_refuses_a_struct_that_would_shadow_another() -> None:
    table = Schema({"type": "request", "name": "XRequest", "apiKey": 99, "validVersions": "0",
                    "fields": [
                        {"name": "A", "type": "[]S", "versions": "0+", "fields": [
                            {"name": "X", "type": "int32", "versions": "0+"}]},
                        {"name": "B", "type": "[]S", "versions": "0+", "fields": [
                            {"name": "Y", "type": "int32", "versions": "0+"}]},
                    ]})
    with pytest.raises(ValueError, match="two different structs named S"):
        generator._Message(table)


def test_a_field_that_cannot_be_an_attribute_is_refused() -> None:
    table = Schema({"type": "request", "name": "XRequest", "apiKey": 99, "validVersions": "0",
                    "fields": [{"name": "Class", "type": "int32", "versions": "0+"}]})
    with pytest.raises(ValueError, match="cannot be an attribute"):
        generator._Message(table)


def test_a_field_is_typed_from_its_table() -> None:
    source = generator.generate()
    assert "        records: Optional[Buffer] = None," in source
    assert "        transactional_id: Optional[str] = None," in source
    assert "        topic_data: List[ProduceRequest.TopicProduceData] = _DEFAULT," in source
    hints: Dict[str, Any] = message_data.MetadataRequest.__init__.__annotations__
    assert hints["topics"] == "Optional[List[MetadataRequest.MetadataRequestTopic]]"


def test_a_value_a_field_cannot_carry_is_an_argument_error() -> None:
    from pylogq.errors import InvalidArgumentError, PylogqError
    from pylogq.protocol import FIND_COORDINATOR_REQUEST, METADATA_REQUEST

    with pytest.raises(InvalidArgumentError, match="field Key: bad value 7"):
        FIND_COORDINATOR_REQUEST.encode(message_data.FindCoordinatorRequest(key=7), 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="not in 0-12") as info:
        METADATA_REQUEST.encode(message_data.MetadataRequest(), 99)
    assert isinstance(info.value, (PylogqError, ValueError))
