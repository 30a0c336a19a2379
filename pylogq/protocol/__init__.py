"""Kafka wire protocol: primitive types, a declarative message codec and message tables."""

from .messages import (
    API_VERSIONS_REQUEST,
    API_VERSIONS_RESPONSE,
    METADATA_REQUEST,
    METADATA_RESPONSE,
    PRODUCE_REQUEST,
    PRODUCE_RESPONSE,
    REQUEST_HEADER,
    REQUESTS,
    RESPONSE_HEADER,
    RESPONSES,
    header_versions,
)
from .schema import Schema, parse_versions, snake_case
from .types import ProtocolError, Reader, Writer

__all__ = [
    "API_VERSIONS_REQUEST", "API_VERSIONS_RESPONSE", "METADATA_REQUEST", "METADATA_RESPONSE",
    "PRODUCE_REQUEST", "PRODUCE_RESPONSE", "REQUEST_HEADER", "RESPONSE_HEADER", "REQUESTS",
    "RESPONSES", "header_versions", "Schema", "parse_versions", "snake_case", "ProtocolError",
    "Reader", "Writer",
]
