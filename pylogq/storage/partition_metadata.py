"""Topic ids (Kafka's ``Uuid``), the ``partition.metadata`` file of a partition directory, and the
broker id in a log directory's ``meta.properties``.

A topic id is 16 random bytes (a type-4 UUID), written as Kafka's ``Uuid.toString``
does: base64url without padding, 22 characters. The all-zero id
(``AAAAAAAAAAAAAAAAAAAAAA``, Kafka's ``Uuid.ZERO_UUID``) means "no id" and is never
a topic's; nor is Kafka's reserved metadata topic id, nor one whose text starts
with ``-`` (Kafka avoids those, as a command line would take them for an option).

``partition.metadata`` (one per partition directory, Kafka's
``PartitionMetadataFile``), UTF-8, each line ending in ``\\n``::

    version: 0
    topic_id: <topic id>

It is replaced atomically (``<path>.tmp``, fsync, rename, directory fsync), so a
reader sees the old file or the new one.

``meta.properties`` (one per log directory, Kafka's broker metadata file) names
the broker the directory belongs to: ``broker.id``, or KRaft's ``node.id``.
"""

from __future__ import annotations

import base64
import os
import re
import uuid
from typing import Mapping, Optional, Tuple

from ..errors import CorruptMetadataError
from .checkpoint import write_atomically

__all__ = ["META_FILE", "PARTITION_METADATA_FILE", "ZERO_TOPIC_ID", "meta_broker_id", "new_topic_id",
           "parse_topic_id", "read_partition_metadata", "write_partition_metadata"]

PARTITION_METADATA_FILE = "partition.metadata"
#: The file naming the broker a log directory belongs to (Kafka's and pylogq's).
META_FILE = "meta.properties"
PARTITION_METADATA_VERSION = 0
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
# Kafka's Uuid.METADATA_TOPIC_ID (0, 1): reserved for KRaft's __cluster_metadata.
_METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
_RESERVED = frozenset([ZERO_TOPIC_ID, _METADATA_TOPIC_ID])
_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}\Z")
# Kafka's PartitionMetadataReadBuffer splits each line at ":\s+".
_FIELD = re.compile(r"([a-z_]+):\s+(\S*)\Z")


def _to_string(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def new_topic_id() -> str:
    """A new random topic id, as Kafka's ``Uuid.randomUuid``: never reserved, never starting with ``-``."""
    while True:
        text = _to_string(uuid.uuid4().bytes)
        if text not in _RESERVED and not text.startswith("-"):
            return text


def parse_topic_id(text: object) -> str:
    """``text`` if it is a topic id (canonical base64url of 16 bytes, not the zero id); else ValueError."""
    if not isinstance(text, str) or not _TOPIC_ID.match(text):
        raise ValueError("topic id %r is not 22 base64url characters" % (text,))
    if _to_string(base64.urlsafe_b64decode(text + "==")) != text:
        raise ValueError("topic id %r is not the base64url form of 16 bytes" % (text,))
    if text == ZERO_TOPIC_ID:
        raise ValueError("topic id %r is the all-zero id, which means no id" % (text,))
    return text


def write_partition_metadata(directory: str, topic_id: str) -> None:
    """Write ``directory``'s ``partition.metadata`` for ``topic_id``, atomically."""
    body = "version: %d\ntopic_id: %s\n" % (PARTITION_METADATA_VERSION, parse_topic_id(topic_id))
    write_atomically(os.path.join(directory, PARTITION_METADATA_FILE), body.encode("ascii"))


def read_partition_metadata(directory: str) -> Optional[str]:
    """The topic id in ``directory``'s ``partition.metadata``; None without the file.

    A file that does not parse raises CorruptMetadataError naming it.
    """
    path = os.path.join(directory, PARTITION_METADATA_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptMetadataError(path, exc.strerror or str(exc), _REMEDY) from None
    try:
        try:
            lines = raw.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise ValueError("not UTF-8 text") from None
        fields = [_FIELD.match(line) for line in lines]
        if len(lines) != 2 or not all(fields):
            raise ValueError('not the two lines "version: 0" and "topic_id: <id>"')
        (k1, version), (k2, topic_id) = [m.groups() for m in fields if m is not None]
        if k1 != "version" or k2 != "topic_id":
            raise ValueError('not the two lines "version: 0" and "topic_id: <id>"')
        if version != str(PARTITION_METADATA_VERSION):
            raise ValueError("unrecognized version %r (only %d is known)" % (version, PARTITION_METADATA_VERSION))
        return parse_topic_id(topic_id)
    except ValueError as exc:
        raise CorruptMetadataError(path, str(exc), _REMEDY) from None


_REMEDY = "delete it to have the broker write it again from the topic's id"


def meta_broker_id(props: Mapping[str, str]) -> Tuple[str, Optional[int]]:
    """The key naming the broker in a parsed ``meta.properties`` (``broker.id``, else KRaft's
    ``node.id``) and its value as an integer (None when it is not one)."""
    key = "broker.id" if "broker.id" in props else "node.id"
    raw = props.get(key, "").strip()
    return key, (int(raw) if raw.lstrip("-").isdigit() else None)
