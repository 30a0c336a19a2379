"""The error hierarchy mirrors Kafka's protocol error codes."""

from __future__ import annotations

import pytest
from kafka import errors as kp_errors

from pylogq import errors


def test_codes_names_and_retriable_flags_match_kafka_python():
    # kafka-python's table is an independent transcription of Kafka's codes.
    # Where Kafka renamed a code, pylogq uses the current name.
    renamed = {6: "NOT_LEADER_OR_FOLLOWER", 10: "MESSAGE_TOO_LARGE"}
    checked = 0
    for name in dir(kp_errors):
        theirs = getattr(kp_errors, name)
        if not (isinstance(theirs, type) and issubclass(theirs, kp_errors.BrokerResponseError)):
            continue
        code = getattr(theirs, "errno", None)
        if not isinstance(code, int) or code in (0, -1):
            continue
        ours = errors.error_for_code(code)
        assert ours.name == renamed.get(code, theirs.message), code
        if code != 2:  # Kafka's CorruptRecordException is retriable; kafka-python marks it not
            assert ours.retriable == bool(theirs.retriable), (code, ours)
        checked += 1
    assert checked > 100


def test_corrupt_record_error():
    exc = errors.CorruptRecordError("batch at offset 5 failed its CRC")
    assert exc.code == 2 and exc.name == "CORRUPT_MESSAGE" and exc.retriable
    assert str(exc) == "[Error 2] CORRUPT_MESSAGE: batch at offset 5 failed its CRC"
    assert isinstance(exc, errors.BrokerError) and isinstance(exc, errors.PylogqError)


def test_default_message_and_lookup():
    exc = errors.UnsupportedVersionError()
    assert exc.code == 35 and "unsupported version" in str(exc)
    assert errors.error_for_code(0) is None
    assert errors.error_for_code(1) is errors.OffsetOutOfRangeError
    assert errors.error_for_code(6) is errors.NotLeaderOrFollowerError
    assert errors.error_for_code(-1) is errors.UnknownServerError
    assert errors.error_for_code(10_000) is errors.UnknownServerError


@pytest.mark.parametrize("code", [3, 5, 6, 7, 13, 14, 15, 16])
def test_retriable_codes(code):
    assert errors.error_for_code(code).retriable


def test_every_code_is_unique():
    seen = {}
    stack = [errors.BrokerError]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls in (errors.BrokerError, errors.RetriableError) or cls.__module__ != errors.__name__:
            continue  # a refinement elsewhere (an index's corruption) shares its parent's code
        assert cls.code not in seen, (cls, seen.get(cls.code))
        seen[cls.code] = cls


def test_local_errors_are_not_broker_errors():
    assert issubclass(errors.ConfigError, ValueError)
    assert not issubclass(errors.UnsupportedCodecError, errors.BrokerError)
