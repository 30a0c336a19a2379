"""Kafka wire protocol: primitive types, a declarative message codec and message tables.

Every name of :mod:`pylogq.protocol.messages` (its ``__all__``: the tables, ``REQUESTS``,
``RESPONSES``, ``SUPPORTED_VERSIONS``, ``INTER_BROKER_APIS``, ``API_NAMES``,
``header_versions``) is exported here.
"""

from . import messages
from .constants import AlterConfigOp, ApiKey, ConfigResourceType, ConfigSource
from .messages import *  # noqa: F401,F403 - the tables, listed once in messages.__all__
from .schema import Schema, parse_versions, snake_case
from .types import Reader, Writer

__all__ = list(messages.__all__) + [
    "AlterConfigOp", "ApiKey", "ConfigResourceType", "ConfigSource",
    "Schema", "parse_versions", "snake_case", "Reader", "Writer",
]
