"""Topic name rules and collisions, against Kafka's Topic.validate and Topic.hasCollision, and
entity names sanitized as Kafka's Sanitizer does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pylogq.cluster.names import (
    INTERNAL_TOPICS,
    MAX_NAME_LENGTH,
    collides,
    desanitize,
    has_collision_chars,
    is_internal,
    sanitize,
    validate_topic_name,
)
from pylogq.errors import InvalidTopicError

LEGAL_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"


@pytest.mark.parametrize("name", ["a", "events", "my.topic", "my_topic", "my-topic", "A1.b_2-c",
                                  "...", "-", "_", "__consumer_offsets", "x" * 249, "0" * 249])
def test_legal_names_are_returned(name):
    assert validate_topic_name(name) == name


@pytest.mark.parametrize("name, rule", [
    ("", "cannot be empty"),
    (".", "'.' or '..'"),
    ("..", "'.' or '..'"),
    ("x" * 250, "the limit is 249"),
    ("x" * 1000, "the limit is 249"),
    ("with space", "contains ' '"),
    ("slash/name", "contains '/'"),
    ("back\\slash", "contains '\\\\\\\\'"),
    ("colon:name", "contains ':'"),
    ("tab\tname", "contains '\\\\t'"),
    ("newline\n", "contains '\\\\n'"),
    ("caf\u00e9", "contains '\u00e9'"),
    ("\u0442\u043e\u043f\u0438\u043a", "contains '\u0442'"),
    ("digits\u0663", "contains '\u0663'"),  # an Arabic-Indic digit: isdigit() would accept it
    ("fullwidth\uff41", "contains '\uff41'"),
    ("emoji\U0001f600", "contains"),
])
def test_illegal_names_name_the_rule(name, rule):
    with pytest.raises(InvalidTopicError, match=rule):
        validate_topic_name(name)


@pytest.mark.parametrize("value", [None, b"bytes", 5])
def test_non_strings_are_refused(value):
    with pytest.raises(InvalidTopicError, match="a topic name is a str"):
        validate_topic_name(value)


def test_limit_is_kafkas():
    assert MAX_NAME_LENGTH == 249
    validate_topic_name("a" * MAX_NAME_LENGTH)
    with pytest.raises(InvalidTopicError):
        validate_topic_name("a" * (MAX_NAME_LENGTH + 1))


@given(st.text(alphabet=LEGAL_CHARS, min_size=1, max_size=249).filter(lambda s: s not in (".", "..")))
def test_every_name_of_legal_characters_is_legal(name):
    assert validate_topic_name(name) == name


@given(st.text(min_size=1, max_size=60))
def test_validation_agrees_with_the_rule(name):
    legal = all(c in LEGAL_CHARS for c in name) and name not in (".", "..")
    if legal:
        assert validate_topic_name(name) == name
    else:
        with pytest.raises(InvalidTopicError):
            validate_topic_name(name)


@pytest.mark.parametrize("a, b, expected", [
    ("a.b", "a_b", True),
    ("a_b", "a.b", True),
    ("a.b.c", "a_b.c", True),
    ("x", "x", True),
    ("a.b", "a-b", False),
    ("a.b", "ab", False),
    ("A.b", "a_b", False),
    ("__consumer_offsets", "__consumer.offsets", True),
    ("topic", "topic1", False),
])
def test_collisions(a, b, expected):
    assert collides(a, b) is expected
    assert collides(b, a) is expected


def test_collision_chars_and_internal_topics():
    assert has_collision_chars("a.b") and has_collision_chars("a_b")
    assert not has_collision_chars("a-b")
    assert INTERNAL_TOPICS == {"__consumer_offsets", "__transaction_state"}
    assert is_internal("__consumer_offsets") and not is_internal("consumer_offsets")


def test_sanitize_is_kafkas_sanitizer() -> None:
    # Kafka's SanitizerTest principal, encoded as Java's URLEncoder encodes it, with the space
    # (URLEncoder's "+") and "*" percent-encoded, as Sanitizer.sanitize answers.
    principal = "CN=Some characters !@#$%&*()_-+=';:,/~"
    assert sanitize(principal) == "CN%3DSome%20characters%20%21%40%23%24%25%26%2A%28%29_-%2B%3D%27%3B%3A%2C%2F%7E"
    assert sanitize("alice.b-c_d") == "alice.b-c_d" and sanitize("é") == "%C3%A9"
    assert desanitize(sanitize(principal)) == principal
    assert desanitize("a+b") == "a b"  # Java's URLDecoder, as Kafka's desanitize decodes


@given(st.text())
def test_sanitized_names_are_kafkas_safe_characters_and_decode_back(name: str) -> None:
    encoded = sanitize(name)
    assert set(encoded.replace("%", "_")) <= set(LEGAL_CHARS)  # Kafka's check: [a-zA-Z0-9._-] and %
    assert desanitize(encoded) == name
