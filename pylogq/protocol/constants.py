"""Kafka's protocol numbers, declared once: API keys and the config-resource enums.

The server's dispatch table, the clients' requests and the message tables all name
APIs through :class:`ApiKey` (the APIs brokers send one another among them); DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs use :class:`ConfigResourceType`, :class:`ConfigSource` and
:class:`AlterConfigOp` (Kafka's ``ConfigResource.Type``, ``DescribeConfigsResponse.
ConfigSource`` and ``AlterConfigOp.OpType`` wire values); ElectLeaders uses
:class:`ElectionType` (Kafka's ``ElectionType``). ``IntEnum`` members are the
ints on the wire, so they encode, compare and index tables as plain numbers.
"""

from __future__ import annotations

import enum

__all__ = ["AlterConfigOp", "ApiKey", "ConfigResourceType", "ConfigSource", "ElectionType"]


class ApiKey(enum.IntEnum):
    """The API keys the broker serves (Kafka's ``ApiKeys``).

    Every member is served: the server's handler for each is the method named after it
    (``JOIN_GROUP`` -> ``join_group``).
    """

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


class ConfigResourceType(enum.IntEnum):
    """Kafka's config resource types (the wire values)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.IntEnum):
    """Where a described config value comes from (DescribeConfigs v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class AlterConfigOp(enum.IntEnum):
    """IncrementalAlterConfigs operations (the wire values)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ElectionType(enum.IntEnum):
    """ElectLeaders election types (v1+; the wire values of Kafka's ``ElectionType``)."""

    PREFERRED = 0
    UNCLEAN = 1
