"""Names: topic names' legality and metric-name collision rules, and Kafka's ``Sanitizer``.

A topic name is 1 to 249 characters of ``[a-zA-Z0-9._-]`` and neither ``.``
nor ``..``. The limit is 249 because a partition directory is
``<topic>-<partition>`` and most file systems cap a name at 255 bytes.
Kafka writes topic names into metric names, where ``.`` becomes ``_``; so
two topics whose names differ only there (``a.b`` and ``a_b``) collide, and
Kafka refuses to create the second one.

User, client-id and ip entity names go into config paths (``/config/users/<name>``)
and quota metric tags url-encoded, as Kafka's ``Sanitizer`` encodes them
(:func:`sanitize`, :func:`desanitize`): the metadata store, the quota store and the
server's quota managers all key on that one spelling.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import FrozenSet

from ..errors import InvalidTopicError

__all__ = [
    "MAX_NAME_LENGTH", "INTERNAL_TOPICS", "validate_topic_name", "unify_collision_chars",
    "has_collision_chars", "collides", "is_internal", "sanitize", "desanitize"
]

#: Kafka's limit (Topic.MAX_NAME_LENGTH): room for "-<partition>" in a 255-byte file name.
MAX_NAME_LENGTH = 249

#: Topics the broker creates and owns; clients may not create or delete them.
INTERNAL_TOPICS: FrozenSet[str] = frozenset({"__consumer_offsets", "__transaction_state"})

# ASCII only: str.isalnum and \w would accept letters Kafka refuses.
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> str:
    """Return ``name`` if Kafka accepts it as a topic name; InvalidTopicError naming the rule otherwise."""
    if not isinstance(name, str):
        raise InvalidTopicError("a topic name is a str, got %s %r" % (type(name).__name__, name))
    if not name:
        raise InvalidTopicError("a topic name cannot be empty")
    if name in (".", ".."):
        raise InvalidTopicError("topic name %r is illegal: it cannot be '.' or '..'" % name)
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            "topic name %r... is illegal: %d characters, the limit is %d"
            % (name[:20], len(name), MAX_NAME_LENGTH))
    if _LEGAL.fullmatch(name) is None:
        bad = next(c for c in name if _LEGAL.fullmatch(c) is None)
        raise InvalidTopicError(
            "topic name %r is illegal: it contains %r; legal characters are ASCII letters, digits, '.', '_' and '-'"
            % (name, bad))
    return name


def unify_collision_chars(name: str) -> str:
    """``name`` as a metric sees it: '.' replaced by '_'."""
    return name.replace(".", "_")


def has_collision_chars(name: str) -> bool:
    """Whether ``name`` holds a character ('.' or '_') that may collide with another topic's."""
    return "." in name or "_" in name


def collides(a: str, b: str) -> bool:
    """Whether topics ``a`` and ``b`` map to the same metric name (equal names collide too)."""
    return unify_collision_chars(a) == unify_collision_chars(b)


def is_internal(name: str) -> bool:
    """Whether ``name`` is one of the broker's internal topics."""
    return name in INTERNAL_TOPICS


def sanitize(name: str) -> str:
    """``name`` url-encoded as Kafka's ``Sanitizer`` encodes it: Java's URLEncoder (which keeps
    only letters, digits and ``.-*_``) with ``*`` and the space percent-encoded too, so every
    character but ``[A-Za-z0-9._-]`` is ``%XX`` of its UTF-8 bytes."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """A sanitized name decoded (Kafka's ``Sanitizer.desanitize``, Java's URLDecoder: ``+``
    is a space)."""
    return urllib.parse.unquote_plus(name)
