"""Kafka wire protocol: primitive types, a declarative message codec, message tables and
the typed message classes generated from them (:mod:`pylogq.protocol.message_data`).

Every name of :mod:`pylogq.protocol.messages` (its ``__all__``: the tables, ``REQUESTS``,
``RESPONSES``, ``SUPPORTED_VERSIONS``, ``INTER_BROKER_APIS``, ``API_NAMES``,
``header_versions``) is exported here.
"""

from . import message_data, messages
from .constants import AlterConfigOp, ApiKey, ConfigResourceType, ConfigSource
from .messages import *  # noqa: F401,F403 - the tables, listed once in messages.__all__
from .schema import Message, Schema, parse_versions, snake_case
from .types import Reader, Writer

__all__ = list(messages.__all__) + [
    "AlterConfigOp", "ApiKey", "ConfigResourceType", "ConfigSource",
    "Message", "Schema", "message_data", "parse_versions", "snake_case", "Reader", "Writer",
]
