"""Message tables for the APIs pylogq speaks, in the shape of Kafka's JSON message schemas.

Each table transcribes one request or response schema (names, types, version ranges,
nullability, defaults, tags, common structs) over the schema's full ``validVersions``;
:class:`~pylogq.protocol.schema.Schema` does the rest. ``SUPPORTED_VERSIONS`` is the range the
broker serves per API: Kafka 3.9's whole range, flexible versions included, the APIs brokers
send one another (``INTER_BROKER_APIS``) among them. ``REQUESTS`` and ``RESPONSES`` hold a
table for each (EndTxn's over its schema's whole ``validVersions``, a version wider than
Kafka 3.9 serves).
``header_versions`` picks the request/response header version for an API version.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, Tuple

from .constants import ApiKey
from .schema import Schema

__all__ = [
    "REQUEST_HEADER", "RESPONSE_HEADER", "PRODUCE_REQUEST", "PRODUCE_RESPONSE", "FETCH_REQUEST",
    "FETCH_RESPONSE", "LIST_OFFSETS_REQUEST", "LIST_OFFSETS_RESPONSE", "METADATA_REQUEST",
    "METADATA_RESPONSE", "LEADER_AND_ISR_REQUEST", "LEADER_AND_ISR_RESPONSE",
    "STOP_REPLICA_REQUEST", "STOP_REPLICA_RESPONSE", "UPDATE_METADATA_REQUEST",
    "UPDATE_METADATA_RESPONSE", "CONTROLLED_SHUTDOWN_REQUEST", "CONTROLLED_SHUTDOWN_RESPONSE",
    "OFFSET_COMMIT_REQUEST", "OFFSET_COMMIT_RESPONSE", "OFFSET_FETCH_REQUEST",
    "OFFSET_FETCH_RESPONSE", "FIND_COORDINATOR_REQUEST", "FIND_COORDINATOR_RESPONSE",
    "JOIN_GROUP_REQUEST", "JOIN_GROUP_RESPONSE", "HEARTBEAT_REQUEST", "HEARTBEAT_RESPONSE",
    "LEAVE_GROUP_REQUEST", "LEAVE_GROUP_RESPONSE", "SYNC_GROUP_REQUEST", "SYNC_GROUP_RESPONSE",
    "DESCRIBE_GROUPS_REQUEST", "DESCRIBE_GROUPS_RESPONSE", "LIST_GROUPS_REQUEST",
    "LIST_GROUPS_RESPONSE", "SASL_HANDSHAKE_REQUEST", "SASL_HANDSHAKE_RESPONSE",
    "API_VERSIONS_REQUEST", "API_VERSIONS_RESPONSE", "CREATE_TOPICS_REQUEST",
    "CREATE_TOPICS_RESPONSE", "DELETE_TOPICS_REQUEST", "DELETE_TOPICS_RESPONSE",
    "DELETE_RECORDS_REQUEST", "DELETE_RECORDS_RESPONSE", "INIT_PRODUCER_ID_REQUEST",
    "INIT_PRODUCER_ID_RESPONSE", "OFFSET_FOR_LEADER_EPOCH_REQUEST",
    "OFFSET_FOR_LEADER_EPOCH_RESPONSE", "ADD_PARTITIONS_TO_TXN_REQUEST",
    "ADD_PARTITIONS_TO_TXN_RESPONSE", "ADD_OFFSETS_TO_TXN_REQUEST", "ADD_OFFSETS_TO_TXN_RESPONSE",
    "END_TXN_REQUEST", "END_TXN_RESPONSE", "WRITE_TXN_MARKERS_REQUEST",
    "WRITE_TXN_MARKERS_RESPONSE", "TXN_OFFSET_COMMIT_REQUEST", "TXN_OFFSET_COMMIT_RESPONSE",
    "DESCRIBE_CONFIGS_REQUEST", "DESCRIBE_CONFIGS_RESPONSE",
    "ALTER_CONFIGS_REQUEST", "ALTER_CONFIGS_RESPONSE", "ALTER_REPLICA_LOG_DIRS_REQUEST",
    "ALTER_REPLICA_LOG_DIRS_RESPONSE", "SASL_AUTHENTICATE_REQUEST",
    "SASL_AUTHENTICATE_RESPONSE", "CREATE_PARTITIONS_REQUEST", "CREATE_PARTITIONS_RESPONSE",
    "DELETE_GROUPS_REQUEST", "DELETE_GROUPS_RESPONSE", "ELECT_LEADERS_REQUEST",
    "ELECT_LEADERS_RESPONSE", "INCREMENTAL_ALTER_CONFIGS_REQUEST",
    "INCREMENTAL_ALTER_CONFIGS_RESPONSE", "ALTER_PARTITION_REASSIGNMENTS_REQUEST",
    "ALTER_PARTITION_REASSIGNMENTS_RESPONSE", "LIST_PARTITION_REASSIGNMENTS_REQUEST",
    "LIST_PARTITION_REASSIGNMENTS_RESPONSE", "DESCRIBE_LOG_DIRS_REQUEST",
    "DESCRIBE_LOG_DIRS_RESPONSE", "DESCRIBE_CLUSTER_REQUEST", "DESCRIBE_CLUSTER_RESPONSE",
    "OFFSET_DELETE_REQUEST", "OFFSET_DELETE_RESPONSE", "DESCRIBE_PRODUCERS_REQUEST",
    "DESCRIBE_PRODUCERS_RESPONSE", "DESCRIBE_TRANSACTIONS_REQUEST",
    "DESCRIBE_TRANSACTIONS_RESPONSE", "LIST_TRANSACTIONS_REQUEST", "LIST_TRANSACTIONS_RESPONSE",
    "DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST",
    "DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE", "ALTER_USER_SCRAM_CREDENTIALS_REQUEST",
    "ALTER_USER_SCRAM_CREDENTIALS_RESPONSE", "DESCRIBE_ACLS_REQUEST", "DESCRIBE_ACLS_RESPONSE",
    "CREATE_ACLS_REQUEST", "CREATE_ACLS_RESPONSE", "DELETE_ACLS_REQUEST", "DELETE_ACLS_RESPONSE",
    "DESCRIBE_CLIENT_QUOTAS_REQUEST", "DESCRIBE_CLIENT_QUOTAS_RESPONSE",
    "ALTER_CLIENT_QUOTAS_REQUEST", "ALTER_CLIENT_QUOTAS_RESPONSE", "API_NAMES", "SUPPORTED_VERSIONS", "INTER_BROKER_APIS",
    "REQUESTS", "RESPONSES", "header_versions",
]

REQUEST_HEADER = Schema({
    "type": "header", "name": "RequestHeader", "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "RequestApiKey", "type": "int16", "versions": "0+"},
        {"name": "RequestApiVersion", "type": "int16", "versions": "0+"},
        {"name": "CorrelationId", "type": "int32", "versions": "0+"},
        {"name": "ClientId", "type": "string", "versions": "1+", "nullableVersions": "1+",
         "flexibleVersions": "none"},
    ],
})

RESPONSE_HEADER = Schema({
    "type": "header", "name": "ResponseHeader", "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "CorrelationId", "type": "int32", "versions": "0+"},
    ],
})


# -- Produce (0) -----------------------------------------------------------------------------------
PRODUCE_REQUEST = Schema({
    "apiKey": 0, "type": "request", "name": "ProduceRequest",
    "validVersions": "0-11", "flexibleVersions": "9+",
    "fields": [
        {"name": "TransactionalId", "type": "string", "versions": "3+", "nullableVersions": "3+",
         "default": "null"},
        {"name": "Acks", "type": "int16", "versions": "0+"},
        {"name": "TimeoutMs", "type": "int32", "versions": "0+"},
        {"name": "TopicData", "type": "[]TopicProduceData", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "PartitionData", "type": "[]PartitionProduceData",
             "versions": "0+", "fields": [
                {"name": "Index", "type": "int32", "versions": "0+"},
                {"name": "Records", "type": "records", "versions": "0+", "nullableVersions": "0+"},
            ]},
        ]},
    ],
})

PRODUCE_RESPONSE = Schema({
    "apiKey": 0, "type": "response", "name": "ProduceResponse",
    "validVersions": "0-11", "flexibleVersions": "9+",
    "fields": [
        {"name": "Responses", "type": "[]TopicProduceResponse", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "PartitionResponses", "type": "[]PartitionProduceResponse",
             "versions": "0+", "fields": [
                {"name": "Index", "type": "int32", "versions": "0+"},
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
                {"name": "BaseOffset", "type": "int64", "versions": "0+"},
                {"name": "LogAppendTimeMs", "type": "int64", "versions": "2+", "default": "-1"},
                {"name": "LogStartOffset", "type": "int64", "versions": "5+", "default": "-1"},
                {"name": "RecordErrors", "type": "[]BatchIndexAndErrorMessage",
                 "versions": "8+", "fields": [
                    {"name": "BatchIndex", "type": "int32", "versions": "8+"},
                    {"name": "BatchIndexErrorMessage", "type": "string", "versions": "8+",
                     "nullableVersions": "8+", "default": "null"},
                ]},
                {"name": "ErrorMessage", "type": "string", "versions": "8+",
                 "nullableVersions": "8+", "default": "null"},
                {"name": "CurrentLeader", "type": "LeaderIdAndEpoch", "versions": "10+", "tag": 0,
                 "taggedVersions": "10+", "fields": [
                    {"name": "LeaderId", "type": "int32", "versions": "10+", "default": "-1"},
                    {"name": "LeaderEpoch", "type": "int32", "versions": "10+", "default": "-1"},
                ]},
            ]},
        ]},
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+", "default": "0"},
        {"name": "NodeEndpoints", "type": "[]NodeEndpoint", "versions": "10+", "tag": 0,
         "taggedVersions": "10+", "fields": [
            {"name": "NodeId", "type": "int32", "versions": "10+"},
            {"name": "Host", "type": "string", "versions": "10+"},
            {"name": "Port", "type": "int32", "versions": "10+"},
            {"name": "Rack", "type": "string", "versions": "10+", "nullableVersions": "10+",
             "default": "null"},
        ]},
    ],
})

# -- Fetch (1) -------------------------------------------------------------------------------------
FETCH_REQUEST = Schema({
    "apiKey": 1, "type": "request", "name": "FetchRequest",
    "validVersions": "0-17", "flexibleVersions": "12+",
    "fields": [
        {"name": "ClusterId", "type": "string", "versions": "12+", "nullableVersions": "12+",
         "tag": 0, "taggedVersions": "12+", "default": "null"},
        {"name": "ReplicaId", "type": "int32", "versions": "0-14", "default": "-1"},
        {"name": "ReplicaState", "type": "ReplicaState", "versions": "15+", "tag": 1,
         "taggedVersions": "15+", "fields": [
            {"name": "ReplicaId", "type": "int32", "versions": "15+", "default": "-1"},
            {"name": "ReplicaEpoch", "type": "int64", "versions": "15+", "default": "-1"},
        ]},
        {"name": "MaxWaitMs", "type": "int32", "versions": "0+"},
        {"name": "MinBytes", "type": "int32", "versions": "0+"},
        {"name": "MaxBytes", "type": "int32", "versions": "3+", "default": "0x7fffffff"},
        {"name": "IsolationLevel", "type": "int8", "versions": "4+", "default": "0"},
        {"name": "SessionId", "type": "int32", "versions": "7+", "default": "0"},
        {"name": "SessionEpoch", "type": "int32", "versions": "7+", "default": "-1"},
        {"name": "Topics", "type": "[]FetchTopic", "versions": "0+", "fields": [
            {"name": "Topic", "type": "string", "versions": "0-12"},
            {"name": "TopicId", "type": "uuid", "versions": "13+"},
            {"name": "Partitions", "type": "[]FetchPartition", "versions": "0+", "fields": [
                {"name": "Partition", "type": "int32", "versions": "0+"},
                {"name": "CurrentLeaderEpoch", "type": "int32", "versions": "9+", "default": "-1"},
                {"name": "FetchOffset", "type": "int64", "versions": "0+"},
                {"name": "LastFetchedEpoch", "type": "int32", "versions": "12+", "default": "-1"},
                {"name": "LogStartOffset", "type": "int64", "versions": "5+", "default": "-1"},
                {"name": "PartitionMaxBytes", "type": "int32", "versions": "0+"},
                {"name": "ReplicaDirectoryId", "type": "uuid", "versions": "17+", "tag": 0,
                 "taggedVersions": "17+"},
            ]},
        ]},
        {"name": "ForgottenTopicsData", "type": "[]ForgottenTopic", "versions": "7+", "fields": [
            {"name": "Topic", "type": "string", "versions": "7-12"},
            {"name": "TopicId", "type": "uuid", "versions": "13+"},
            {"name": "Partitions", "type": "[]int32", "versions": "7+"},
        ]},
        {"name": "RackId", "type": "string", "versions": "11+", "default": ""},
    ],
})

FETCH_RESPONSE = Schema({
    "apiKey": 1, "type": "response", "name": "FetchResponse",
    "validVersions": "0-17", "flexibleVersions": "12+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+"},
        {"name": "ErrorCode", "type": "int16", "versions": "7+"},
        {"name": "SessionId", "type": "int32", "versions": "7+", "default": "0"},
        {"name": "Responses", "type": "[]FetchableTopicResponse", "versions": "0+", "fields": [
            {"name": "Topic", "type": "string", "versions": "0-12"},
            {"name": "TopicId", "type": "uuid", "versions": "13+"},
            {"name": "Partitions", "type": "[]PartitionData", "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
                {"name": "HighWatermark", "type": "int64", "versions": "0+"},
                {"name": "LastStableOffset", "type": "int64", "versions": "4+", "default": "-1"},
                {"name": "LogStartOffset", "type": "int64", "versions": "5+", "default": "-1"},
                {"name": "DivergingEpoch", "type": "EpochEndOffset", "versions": "12+", "tag": 0,
                 "taggedVersions": "12+", "fields": [
                    {"name": "Epoch", "type": "int32", "versions": "12+", "default": "-1"},
                    {"name": "EndOffset", "type": "int64", "versions": "12+", "default": "-1"},
                ]},
                {"name": "CurrentLeader", "type": "LeaderIdAndEpoch", "versions": "12+", "tag": 1,
                 "taggedVersions": "12+", "fields": [
                    {"name": "LeaderId", "type": "int32", "versions": "12+", "default": "-1"},
                    {"name": "LeaderEpoch", "type": "int32", "versions": "12+", "default": "-1"},
                ]},
                {"name": "SnapshotId", "type": "SnapshotId", "versions": "12+", "tag": 2,
                 "taggedVersions": "12+", "fields": [
                    {"name": "EndOffset", "type": "int64", "versions": "0+", "default": "-1"},
                    {"name": "Epoch", "type": "int32", "versions": "0+", "default": "-1"},
                ]},
                {"name": "AbortedTransactions", "type": "[]AbortedTransaction", "versions": "4+",
                 "nullableVersions": "4+", "fields": [
                    {"name": "ProducerId", "type": "int64", "versions": "4+"},
                    {"name": "FirstOffset", "type": "int64", "versions": "4+"},
                ]},
                {"name": "PreferredReadReplica", "type": "int32", "versions": "11+",
                 "default": "-1"},
                {"name": "Records", "type": "records", "versions": "0+", "nullableVersions": "0+"},
            ]},
        ]},
        {"name": "NodeEndpoints", "type": "[]NodeEndpoint", "versions": "16+", "tag": 0,
         "taggedVersions": "16+", "fields": [
            {"name": "NodeId", "type": "int32", "versions": "16+"},
            {"name": "Host", "type": "string", "versions": "16+"},
            {"name": "Port", "type": "int32", "versions": "16+"},
            {"name": "Rack", "type": "string", "versions": "16+", "nullableVersions": "16+",
             "default": "null"},
        ]},
    ],
})

# -- ListOffsets (2) -------------------------------------------------------------------------------
LIST_OFFSETS_REQUEST = Schema({
    "apiKey": 2, "type": "request", "name": "ListOffsetsRequest",
    "validVersions": "0-10", "flexibleVersions": "6+",
    "fields": [
        {"name": "ReplicaId", "type": "int32", "versions": "0+"},
        {"name": "IsolationLevel", "type": "int8", "versions": "2+"},
        {"name": "Topics", "type": "[]ListOffsetsTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]ListOffsetsPartition", "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "CurrentLeaderEpoch", "type": "int32", "versions": "4+", "default": "-1"},
                {"name": "Timestamp", "type": "int64", "versions": "0+"},
                {"name": "MaxNumOffsets", "type": "int32", "versions": "0", "default": "1"},
            ]},
        ]},
        {"name": "TimeoutMs", "type": "int32", "versions": "10+"},
    ],
})

LIST_OFFSETS_RESPONSE = Schema({
    "apiKey": 2, "type": "response", "name": "ListOffsetsResponse",
    "validVersions": "0-10", "flexibleVersions": "6+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "2+"},
        {"name": "Topics", "type": "[]ListOffsetsTopicResponse", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]ListOffsetsPartitionResponse",
             "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
                {"name": "OldStyleOffsets", "type": "[]int64", "versions": "0"},
                {"name": "Timestamp", "type": "int64", "versions": "1+", "default": "-1"},
                {"name": "Offset", "type": "int64", "versions": "1+", "default": "-1"},
                {"name": "LeaderEpoch", "type": "int32", "versions": "4+", "default": "-1"},
            ]},
        ]},
    ],
})

# -- Metadata (3) ----------------------------------------------------------------------------------
METADATA_REQUEST = Schema({
    "apiKey": 3, "type": "request", "name": "MetadataRequest",
    "validVersions": "0-12", "flexibleVersions": "9+",
    "fields": [
        {"name": "Topics", "type": "[]MetadataRequestTopic", "versions": "0+",
         "nullableVersions": "1+", "fields": [
            {"name": "TopicId", "type": "uuid", "versions": "10+"},
            {"name": "Name", "type": "string", "versions": "0+", "nullableVersions": "10+"},
        ]},
        {"name": "AllowAutoTopicCreation", "type": "bool", "versions": "4+", "default": "true"},
        {"name": "IncludeClusterAuthorizedOperations", "type": "bool", "versions": "8-10"},
        {"name": "IncludeTopicAuthorizedOperations", "type": "bool", "versions": "8+"},
    ],
})

METADATA_RESPONSE = Schema({
    "apiKey": 3, "type": "response", "name": "MetadataResponse",
    "validVersions": "0-12", "flexibleVersions": "9+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "3+"},
        {"name": "Brokers", "type": "[]MetadataResponseBroker", "versions": "0+", "fields": [
            {"name": "NodeId", "type": "int32", "versions": "0+"},
            {"name": "Host", "type": "string", "versions": "0+"},
            {"name": "Port", "type": "int32", "versions": "0+"},
            {"name": "Rack", "type": "string", "versions": "1+", "nullableVersions": "1+",
             "default": "null"},
        ]},
        {"name": "ClusterId", "type": "string", "versions": "2+", "nullableVersions": "2+",
         "default": "null"},
        {"name": "ControllerId", "type": "int32", "versions": "1+", "default": "-1"},
        {"name": "Topics", "type": "[]MetadataResponseTopic", "versions": "0+", "fields": [
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "Name", "type": "string", "versions": "0+", "nullableVersions": "12+"},
            {"name": "TopicId", "type": "uuid", "versions": "10+"},
            {"name": "IsInternal", "type": "bool", "versions": "1+", "default": "false"},
            {"name": "Partitions", "type": "[]MetadataResponsePartition",
             "versions": "0+", "fields": [
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "LeaderId", "type": "int32", "versions": "0+"},
                {"name": "LeaderEpoch", "type": "int32", "versions": "7+", "default": "-1"},
                {"name": "ReplicaNodes", "type": "[]int32", "versions": "0+"},
                {"name": "IsrNodes", "type": "[]int32", "versions": "0+"},
                {"name": "OfflineReplicas", "type": "[]int32", "versions": "5+"},
            ]},
            {"name": "TopicAuthorizedOperations", "type": "int32", "versions": "8+",
             "default": "-2147483648"},
        ]},
        {"name": "ClusterAuthorizedOperations", "type": "int32", "versions": "8-10",
         "default": "-2147483648"},
    ],
})

# -- LeaderAndIsr (4) ------------------------------------------------------------------------------
LEADER_AND_ISR_REQUEST = Schema({
    "apiKey": 4, "type": "request", "name": "LeaderAndIsrRequest",
    "validVersions": "0-7", "flexibleVersions": "4+",
    "fields": [
        {"name": "ControllerId", "type": "int32", "versions": "0+"},
        {"name": "isKRaftController", "type": "bool", "versions": "7+", "default": "false"},
        {"name": "ControllerEpoch", "type": "int32", "versions": "0+"},
        {"name": "BrokerEpoch", "type": "int64", "versions": "2+", "default": "-1"},
        {"name": "Type", "type": "int8", "versions": "5+"},
        {"name": "UngroupedPartitionStates", "type": "[]LeaderAndIsrPartitionState",
         "versions": "0-1"},
        {"name": "TopicStates", "type": "[]LeaderAndIsrTopicState", "versions": "2+", "fields": [
            {"name": "TopicName", "type": "string", "versions": "2+"},
            {"name": "TopicId", "type": "uuid", "versions": "5+"},
            {"name": "PartitionStates", "type": "[]LeaderAndIsrPartitionState", "versions": "2+"},
        ]},
        {"name": "LiveLeaders", "type": "[]LeaderAndIsrLiveLeader", "versions": "0+", "fields": [
            {"name": "BrokerId", "type": "int32", "versions": "0+"},
            {"name": "HostName", "type": "string", "versions": "0+"},
            {"name": "Port", "type": "int32", "versions": "0+"},
        ]},
    ],
    "commonStructs": [
        {"name": "LeaderAndIsrPartitionState", "versions": "0+", "fields": [
            {"name": "TopicName", "type": "string", "versions": "0-1"},
            {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
            {"name": "ControllerEpoch", "type": "int32", "versions": "0+"},
            {"name": "Leader", "type": "int32", "versions": "0+"},
            {"name": "LeaderEpoch", "type": "int32", "versions": "0+"},
            {"name": "Isr", "type": "[]int32", "versions": "0+"},
            {"name": "PartitionEpoch", "type": "int32", "versions": "0+"},
            {"name": "Replicas", "type": "[]int32", "versions": "0+"},
            {"name": "AddingReplicas", "type": "[]int32", "versions": "3+"},
            {"name": "RemovingReplicas", "type": "[]int32", "versions": "3+"},
            {"name": "IsNew", "type": "bool", "versions": "1+", "default": "false"},
            {"name": "LeaderRecoveryState", "type": "int8", "versions": "6+", "default": "0"},
        ]},
    ],
})

LEADER_AND_ISR_RESPONSE = Schema({
    "apiKey": 4, "type": "response", "name": "LeaderAndIsrResponse",
    "validVersions": "0-7", "flexibleVersions": "4+",
    "fields": [
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "PartitionErrors", "type": "[]LeaderAndIsrPartitionError", "versions": "0-4"},
        {"name": "Topics", "type": "[]LeaderAndIsrTopicError", "versions": "5+", "fields": [
            {"name": "TopicId", "type": "uuid", "versions": "5+"},
            {"name": "PartitionErrors", "type": "[]LeaderAndIsrPartitionError", "versions": "5+"},
        ]},
    ],
    "commonStructs": [
        {"name": "LeaderAndIsrPartitionError", "versions": "0+", "fields": [
            {"name": "TopicName", "type": "string", "versions": "0-4"},
            {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        ]},
    ],
})

# -- StopReplica (5) -------------------------------------------------------------------------------
STOP_REPLICA_REQUEST = Schema({
    "apiKey": 5, "type": "request", "name": "StopReplicaRequest",
    "validVersions": "0-4", "flexibleVersions": "2+",
    "fields": [
        {"name": "ControllerId", "type": "int32", "versions": "0+"},
        {"name": "isKRaftController", "type": "bool", "versions": "4+", "default": "false"},
        {"name": "ControllerEpoch", "type": "int32", "versions": "0+"},
        {"name": "BrokerEpoch", "type": "int64", "versions": "1+", "default": "-1"},
        {"name": "DeletePartitions", "type": "bool", "versions": "0-2"},
        {"name": "UngroupedPartitions", "type": "[]StopReplicaPartitionV0", "versions": "0",
         "fields": [
            {"name": "TopicName", "type": "string", "versions": "0"},
            {"name": "PartitionIndex", "type": "int32", "versions": "0"},
        ]},
        {"name": "Topics", "type": "[]StopReplicaTopicV1", "versions": "1-2", "fields": [
            {"name": "Name", "type": "string", "versions": "1-2"},
            {"name": "PartitionIndexes", "type": "[]int32", "versions": "1-2"},
        ]},
        {"name": "TopicStates", "type": "[]StopReplicaTopicState", "versions": "3+", "fields": [
            {"name": "TopicName", "type": "string", "versions": "3+"},
            {"name": "PartitionStates", "type": "[]StopReplicaPartitionState",
             "versions": "3+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "3+"},
                {"name": "LeaderEpoch", "type": "int32", "versions": "3+", "default": "-1"},
                {"name": "DeletePartition", "type": "bool", "versions": "3+"},
            ]},
        ]},
    ],
})

STOP_REPLICA_RESPONSE = Schema({
    "apiKey": 5, "type": "response", "name": "StopReplicaResponse",
    "validVersions": "0-4", "flexibleVersions": "2+",
    "fields": [
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "PartitionErrors", "type": "[]StopReplicaPartitionError",
         "versions": "0+", "fields": [
            {"name": "TopicName", "type": "string", "versions": "0+"},
            {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        ]},
    ],
})

# -- UpdateMetadata (6) ----------------------------------------------------------------------------
UPDATE_METADATA_REQUEST = Schema({
    "apiKey": 6, "type": "request", "name": "UpdateMetadataRequest",
    "validVersions": "0-8", "flexibleVersions": "6+",
    "fields": [
        {"name": "ControllerId", "type": "int32", "versions": "0+"},
        {"name": "isKRaftController", "type": "bool", "versions": "8+", "default": "false"},
        {"name": "Type", "type": "int8", "versions": "8+", "default": "0", "tag": 0,
         "taggedVersions": "8+"},
        {"name": "ControllerEpoch", "type": "int32", "versions": "0+"},
        {"name": "BrokerEpoch", "type": "int64", "versions": "5+", "default": "-1"},
        {"name": "UngroupedPartitionStates", "type": "[]UpdateMetadataPartitionState",
         "versions": "0-4"},
        {"name": "TopicStates", "type": "[]UpdateMetadataTopicState", "versions": "5+",
         "fields": [
            {"name": "TopicName", "type": "string", "versions": "5+"},
            {"name": "TopicId", "type": "uuid", "versions": "7+"},
            {"name": "PartitionStates", "type": "[]UpdateMetadataPartitionState",
             "versions": "5+"},
        ]},
        {"name": "LiveBrokers", "type": "[]UpdateMetadataBroker", "versions": "0+", "fields": [
            {"name": "Id", "type": "int32", "versions": "0+"},
            {"name": "V0Host", "type": "string", "versions": "0"},
            {"name": "V0Port", "type": "int32", "versions": "0"},
            {"name": "Endpoints", "type": "[]UpdateMetadataEndpoint", "versions": "1+", "fields": [
                {"name": "Port", "type": "int32", "versions": "1+"},
                {"name": "Host", "type": "string", "versions": "1+"},
                {"name": "Listener", "type": "string", "versions": "3+"},
                {"name": "SecurityProtocol", "type": "int16", "versions": "1+"},
            ]},
            {"name": "Rack", "type": "string", "versions": "2+", "nullableVersions": "0+"},
        ]},
    ],
    "commonStructs": [
        {"name": "UpdateMetadataPartitionState", "versions": "0+", "fields": [
            {"name": "TopicName", "type": "string", "versions": "0-4"},
            {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
            {"name": "ControllerEpoch", "type": "int32", "versions": "0+"},
            {"name": "Leader", "type": "int32", "versions": "0+"},
            {"name": "LeaderEpoch", "type": "int32", "versions": "0+"},
            {"name": "Isr", "type": "[]int32", "versions": "0+"},
            {"name": "ZkVersion", "type": "int32", "versions": "0+"},
            {"name": "Replicas", "type": "[]int32", "versions": "0+"},
            {"name": "OfflineReplicas", "type": "[]int32", "versions": "4+"},
        ]},
    ],
})

UPDATE_METADATA_RESPONSE = Schema({
    "apiKey": 6, "type": "response", "name": "UpdateMetadataResponse",
    "validVersions": "0-8", "flexibleVersions": "6+",
    "fields": [
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
    ],
})

# -- ControlledShutdown (7) ------------------------------------------------------------------------
# Version 0 goes with request header v0, which has no client id (see header_versions).
CONTROLLED_SHUTDOWN_REQUEST = Schema({
    "apiKey": 7, "type": "request", "name": "ControlledShutdownRequest",
    "validVersions": "0-3", "flexibleVersions": "3+",
    "fields": [
        {"name": "BrokerId", "type": "int32", "versions": "0+"},
        {"name": "BrokerEpoch", "type": "int64", "versions": "2+", "default": "-1"},
    ],
})

CONTROLLED_SHUTDOWN_RESPONSE = Schema({
    "apiKey": 7, "type": "response", "name": "ControlledShutdownResponse",
    "validVersions": "0-3", "flexibleVersions": "3+",
    "fields": [
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "RemainingPartitions", "type": "[]RemainingPartition", "versions": "0+",
         "fields": [
            {"name": "TopicName", "type": "string", "versions": "0+"},
            {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
        ]},
    ],
})

# -- OffsetCommit (8) ------------------------------------------------------------------------------
OFFSET_COMMIT_REQUEST = Schema({
    "apiKey": 8, "type": "request", "name": "OffsetCommitRequest",
    "validVersions": "0-9", "flexibleVersions": "8+",
    "fields": [
        {"name": "GroupId", "type": "string", "versions": "0+"},
        {"name": "GenerationIdOrMemberEpoch", "type": "int32", "versions": "1+", "default": "-1"},
        {"name": "MemberId", "type": "string", "versions": "1+"},
        {"name": "GroupInstanceId", "type": "string", "versions": "7+", "nullableVersions": "7+",
         "default": "null"},
        {"name": "RetentionTimeMs", "type": "int64", "versions": "2-4", "default": "-1"},
        {"name": "Topics", "type": "[]OffsetCommitRequestTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]OffsetCommitRequestPartition",
             "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "CommittedOffset", "type": "int64", "versions": "0+"},
                {"name": "CommittedLeaderEpoch", "type": "int32", "versions": "6+",
                 "default": "-1"},
                {"name": "CommitTimestamp", "type": "int64", "versions": "1", "default": "-1"},
                {"name": "CommittedMetadata", "type": "string", "versions": "0+",
                 "nullableVersions": "0+"},
            ]},
        ]},
    ],
})

OFFSET_COMMIT_RESPONSE = Schema({
    "apiKey": 8, "type": "response", "name": "OffsetCommitResponse",
    "validVersions": "0-9", "flexibleVersions": "8+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "3+"},
        {"name": "Topics", "type": "[]OffsetCommitResponseTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]OffsetCommitResponsePartition",
             "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            ]},
        ]},
    ],
})

# -- OffsetFetch (9) -------------------------------------------------------------------------------
OFFSET_FETCH_REQUEST = Schema({
    "apiKey": 9, "type": "request", "name": "OffsetFetchRequest",
    "validVersions": "0-9", "flexibleVersions": "6+",
    "fields": [
        {"name": "GroupId", "type": "string", "versions": "0-7"},
        {"name": "Topics", "type": "[]OffsetFetchRequestTopic", "versions": "0-7",
         "nullableVersions": "2-7", "fields": [
            {"name": "Name", "type": "string", "versions": "0-7"},
            {"name": "PartitionIndexes", "type": "[]int32", "versions": "0-7"},
        ]},
        {"name": "Groups", "type": "[]OffsetFetchRequestGroup", "versions": "8+", "fields": [
            {"name": "GroupId", "type": "string", "versions": "8+"},
            {"name": "MemberId", "type": "string", "versions": "9+", "nullableVersions": "9+",
             "default": "null"},
            {"name": "MemberEpoch", "type": "int32", "versions": "9+", "default": "-1"},
            {"name": "Topics", "type": "[]OffsetFetchRequestTopics", "versions": "8+",
             "nullableVersions": "8+", "fields": [
                {"name": "Name", "type": "string", "versions": "8+"},
                {"name": "PartitionIndexes", "type": "[]int32", "versions": "8+"},
            ]},
        ]},
        {"name": "RequireStable", "type": "bool", "versions": "7+", "default": "false"},
    ],
})

OFFSET_FETCH_RESPONSE = Schema({
    "apiKey": 9, "type": "response", "name": "OffsetFetchResponse",
    "validVersions": "0-9", "flexibleVersions": "6+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "3+"},
        {"name": "Topics", "type": "[]OffsetFetchResponseTopic", "versions": "0-7", "fields": [
            {"name": "Name", "type": "string", "versions": "0-7"},
            {"name": "Partitions", "type": "[]OffsetFetchResponsePartition",
             "versions": "0-7", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0-7"},
                {"name": "CommittedOffset", "type": "int64", "versions": "0-7"},
                {"name": "CommittedLeaderEpoch", "type": "int32", "versions": "5-7",
                 "default": "-1"},
                {"name": "Metadata", "type": "string", "versions": "0-7",
                 "nullableVersions": "0-7"},
                {"name": "ErrorCode", "type": "int16", "versions": "0-7"},
            ]},
        ]},
        {"name": "ErrorCode", "type": "int16", "versions": "2-7", "default": "0"},
        {"name": "Groups", "type": "[]OffsetFetchResponseGroup", "versions": "8+", "fields": [
            {"name": "GroupId", "type": "string", "versions": "8+"},
            {"name": "Topics", "type": "[]OffsetFetchResponseTopics", "versions": "8+", "fields": [
                {"name": "Name", "type": "string", "versions": "8+"},
                {"name": "Partitions", "type": "[]OffsetFetchResponsePartitions",
                 "versions": "8+", "fields": [
                    {"name": "PartitionIndex", "type": "int32", "versions": "8+"},
                    {"name": "CommittedOffset", "type": "int64", "versions": "8+"},
                    {"name": "CommittedLeaderEpoch", "type": "int32", "versions": "8+",
                     "default": "-1"},
                    {"name": "Metadata", "type": "string", "versions": "8+",
                     "nullableVersions": "8+"},
                    {"name": "ErrorCode", "type": "int16", "versions": "8+"},
                ]},
            ]},
            {"name": "ErrorCode", "type": "int16", "versions": "8+", "default": "0"},
        ]},
    ],
})

# -- FindCoordinator (10) --------------------------------------------------------------------------
FIND_COORDINATOR_REQUEST = Schema({
    "apiKey": 10, "type": "request", "name": "FindCoordinatorRequest",
    "validVersions": "0-6", "flexibleVersions": "3+",
    "fields": [
        {"name": "Key", "type": "string", "versions": "0-3"},
        {"name": "KeyType", "type": "int8", "versions": "1+", "default": "0"},
        {"name": "CoordinatorKeys", "type": "[]string", "versions": "4+"},
    ],
})

FIND_COORDINATOR_RESPONSE = Schema({
    "apiKey": 10, "type": "response", "name": "FindCoordinatorResponse",
    "validVersions": "0-6", "flexibleVersions": "3+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0-3"},
        {"name": "ErrorMessage", "type": "string", "versions": "1-3", "nullableVersions": "1-3"},
        {"name": "NodeId", "type": "int32", "versions": "0-3"},
        {"name": "Host", "type": "string", "versions": "0-3"},
        {"name": "Port", "type": "int32", "versions": "0-3"},
        {"name": "Coordinators", "type": "[]Coordinator", "versions": "4+", "fields": [
            {"name": "Key", "type": "string", "versions": "4+"},
            {"name": "NodeId", "type": "int32", "versions": "4+"},
            {"name": "Host", "type": "string", "versions": "4+"},
            {"name": "Port", "type": "int32", "versions": "4+"},
            {"name": "ErrorCode", "type": "int16", "versions": "4+"},
            {"name": "ErrorMessage", "type": "string", "versions": "4+", "nullableVersions": "4+"},
        ]},
    ],
})

# -- JoinGroup (11) --------------------------------------------------------------------------------
JOIN_GROUP_REQUEST = Schema({
    "apiKey": 11, "type": "request", "name": "JoinGroupRequest",
    "validVersions": "0-9", "flexibleVersions": "6+",
    "fields": [
        {"name": "GroupId", "type": "string", "versions": "0+"},
        {"name": "SessionTimeoutMs", "type": "int32", "versions": "0+"},
        {"name": "RebalanceTimeoutMs", "type": "int32", "versions": "1+", "default": "-1"},
        {"name": "MemberId", "type": "string", "versions": "0+"},
        {"name": "GroupInstanceId", "type": "string", "versions": "5+", "nullableVersions": "5+",
         "default": "null"},
        {"name": "ProtocolType", "type": "string", "versions": "0+"},
        {"name": "Protocols", "type": "[]JoinGroupRequestProtocol", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Metadata", "type": "bytes", "versions": "0+"},
        ]},
        {"name": "Reason", "type": "string", "versions": "8+", "nullableVersions": "8+",
         "default": "null"},
    ],
})

JOIN_GROUP_RESPONSE = Schema({
    "apiKey": 11, "type": "response", "name": "JoinGroupResponse",
    "validVersions": "0-9", "flexibleVersions": "6+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "2+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "GenerationId", "type": "int32", "versions": "0+", "default": "-1"},
        {"name": "ProtocolType", "type": "string", "versions": "7+", "nullableVersions": "7+",
         "default": "null"},
        {"name": "ProtocolName", "type": "string", "versions": "0+", "nullableVersions": "7+"},
        {"name": "Leader", "type": "string", "versions": "0+"},
        {"name": "SkipAssignment", "type": "bool", "versions": "9+", "default": "false"},
        {"name": "MemberId", "type": "string", "versions": "0+"},
        {"name": "Members", "type": "[]JoinGroupResponseMember", "versions": "0+", "fields": [
            {"name": "MemberId", "type": "string", "versions": "0+"},
            {"name": "GroupInstanceId", "type": "string", "versions": "5+",
             "nullableVersions": "5+", "default": "null"},
            {"name": "Metadata", "type": "bytes", "versions": "0+"},
        ]},
    ],
})

# -- Heartbeat (12) --------------------------------------------------------------------------------
HEARTBEAT_REQUEST = Schema({
    "apiKey": 12, "type": "request", "name": "HeartbeatRequest",
    "validVersions": "0-4", "flexibleVersions": "4+",
    "fields": [
        {"name": "GroupId", "type": "string", "versions": "0+"},
        {"name": "GenerationId", "type": "int32", "versions": "0+"},
        {"name": "MemberId", "type": "string", "versions": "0+"},
        {"name": "GroupInstanceId", "type": "string", "versions": "3+", "nullableVersions": "3+",
         "default": "null"},
    ],
})

HEARTBEAT_RESPONSE = Schema({
    "apiKey": 12, "type": "response", "name": "HeartbeatResponse",
    "validVersions": "0-4", "flexibleVersions": "4+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
    ],
})

# -- LeaveGroup (13) -------------------------------------------------------------------------------
LEAVE_GROUP_REQUEST = Schema({
    "apiKey": 13, "type": "request", "name": "LeaveGroupRequest",
    "validVersions": "0-5", "flexibleVersions": "4+",
    "fields": [
        {"name": "GroupId", "type": "string", "versions": "0+"},
        {"name": "MemberId", "type": "string", "versions": "0-2"},
        {"name": "Members", "type": "[]MemberIdentity", "versions": "3+", "fields": [
            {"name": "MemberId", "type": "string", "versions": "3+"},
            {"name": "GroupInstanceId", "type": "string", "versions": "3+",
             "nullableVersions": "3+", "default": "null"},
            {"name": "Reason", "type": "string", "versions": "5+", "nullableVersions": "5+",
             "default": "null"},
        ]},
    ],
})

LEAVE_GROUP_RESPONSE = Schema({
    "apiKey": 13, "type": "response", "name": "LeaveGroupResponse",
    "validVersions": "0-5", "flexibleVersions": "4+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "Members", "type": "[]MemberResponse", "versions": "3+", "fields": [
            {"name": "MemberId", "type": "string", "versions": "3+"},
            {"name": "GroupInstanceId", "type": "string", "versions": "3+",
             "nullableVersions": "3+"},
            {"name": "ErrorCode", "type": "int16", "versions": "3+"},
        ]},
    ],
})

# -- SyncGroup (14) --------------------------------------------------------------------------------
SYNC_GROUP_REQUEST = Schema({
    "apiKey": 14, "type": "request", "name": "SyncGroupRequest",
    "validVersions": "0-5", "flexibleVersions": "4+",
    "fields": [
        {"name": "GroupId", "type": "string", "versions": "0+"},
        {"name": "GenerationId", "type": "int32", "versions": "0+"},
        {"name": "MemberId", "type": "string", "versions": "0+"},
        {"name": "GroupInstanceId", "type": "string", "versions": "3+", "nullableVersions": "3+",
         "default": "null"},
        {"name": "ProtocolType", "type": "string", "versions": "5+", "nullableVersions": "5+",
         "default": "null"},
        {"name": "ProtocolName", "type": "string", "versions": "5+", "nullableVersions": "5+",
         "default": "null"},
        {"name": "Assignments", "type": "[]SyncGroupRequestAssignment",
         "versions": "0+", "fields": [
            {"name": "MemberId", "type": "string", "versions": "0+"},
            {"name": "Assignment", "type": "bytes", "versions": "0+"},
        ]},
    ],
})

SYNC_GROUP_RESPONSE = Schema({
    "apiKey": 14, "type": "response", "name": "SyncGroupResponse",
    "validVersions": "0-5", "flexibleVersions": "4+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ProtocolType", "type": "string", "versions": "5+", "nullableVersions": "5+",
         "default": "null"},
        {"name": "ProtocolName", "type": "string", "versions": "5+", "nullableVersions": "5+",
         "default": "null"},
        {"name": "Assignment", "type": "bytes", "versions": "0+"},
    ],
})

# -- DescribeGroups (15) ---------------------------------------------------------------------------
DESCRIBE_GROUPS_REQUEST = Schema({
    "apiKey": 15, "type": "request", "name": "DescribeGroupsRequest",
    "validVersions": "0-5", "flexibleVersions": "5+",
    "fields": [
        {"name": "Groups", "type": "[]string", "versions": "0+"},
        {"name": "IncludeAuthorizedOperations", "type": "bool", "versions": "3+"},
    ],
})

DESCRIBE_GROUPS_RESPONSE = Schema({
    "apiKey": 15, "type": "response", "name": "DescribeGroupsResponse",
    "validVersions": "0-5", "flexibleVersions": "5+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+"},
        {"name": "Groups", "type": "[]DescribedGroup", "versions": "0+", "fields": [
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "GroupId", "type": "string", "versions": "0+"},
            {"name": "GroupState", "type": "string", "versions": "0+"},
            {"name": "ProtocolType", "type": "string", "versions": "0+"},
            {"name": "ProtocolData", "type": "string", "versions": "0+"},
            {"name": "Members", "type": "[]DescribedGroupMember", "versions": "0+", "fields": [
                {"name": "MemberId", "type": "string", "versions": "0+"},
                {"name": "GroupInstanceId", "type": "string", "versions": "4+",
                 "nullableVersions": "4+", "default": "null"},
                {"name": "ClientId", "type": "string", "versions": "0+"},
                {"name": "ClientHost", "type": "string", "versions": "0+"},
                {"name": "MemberMetadata", "type": "bytes", "versions": "0+"},
                {"name": "MemberAssignment", "type": "bytes", "versions": "0+"},
            ]},
            {"name": "AuthorizedOperations", "type": "int32", "versions": "3+",
             "default": "-2147483648"},
        ]},
    ],
})

# -- ListGroups (16) -------------------------------------------------------------------------------
LIST_GROUPS_REQUEST = Schema({
    "apiKey": 16, "type": "request", "name": "ListGroupsRequest",
    "validVersions": "0-5", "flexibleVersions": "3+",
    "fields": [
        {"name": "StatesFilter", "type": "[]string", "versions": "4+"},
        {"name": "TypesFilter", "type": "[]string", "versions": "5+"},
    ],
})

LIST_GROUPS_RESPONSE = Schema({
    "apiKey": 16, "type": "response", "name": "ListGroupsResponse",
    "validVersions": "0-5", "flexibleVersions": "3+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "Groups", "type": "[]ListedGroup", "versions": "0+", "fields": [
            {"name": "GroupId", "type": "string", "versions": "0+"},
            {"name": "ProtocolType", "type": "string", "versions": "0+"},
            {"name": "GroupState", "type": "string", "versions": "4+"},
            {"name": "GroupType", "type": "string", "versions": "5+"},
        ]},
    ],
})

# -- SaslHandshake (17) ----------------------------------------------------------------------------
SASL_HANDSHAKE_REQUEST = Schema({
    "apiKey": 17, "type": "request", "name": "SaslHandshakeRequest",
    "validVersions": "0-1", "flexibleVersions": "none",
    "fields": [
        {"name": "Mechanism", "type": "string", "versions": "0+"},
    ],
})

SASL_HANDSHAKE_RESPONSE = Schema({
    "apiKey": 17, "type": "response", "name": "SaslHandshakeResponse",
    "validVersions": "0-1", "flexibleVersions": "none",
    "fields": [
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "Mechanisms", "type": "[]string", "versions": "0+"},
    ],
})

# -- ApiVersions (18) ------------------------------------------------------------------------------
API_VERSIONS_REQUEST = Schema({
    "apiKey": 18, "type": "request", "name": "ApiVersionsRequest",
    "validVersions": "0-4", "flexibleVersions": "3+",
    "fields": [
        {"name": "ClientSoftwareName", "type": "string", "versions": "3+"},
        {"name": "ClientSoftwareVersion", "type": "string", "versions": "3+"},
    ],
})

API_VERSIONS_RESPONSE = Schema({
    "apiKey": 18, "type": "response", "name": "ApiVersionsResponse",
    "validVersions": "0-4", "flexibleVersions": "3+",
    "fields": [
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ApiKeys", "type": "[]ApiVersion", "versions": "0+", "fields": [
            {"name": "ApiKey", "type": "int16", "versions": "0+"},
            {"name": "MinVersion", "type": "int16", "versions": "0+"},
            {"name": "MaxVersion", "type": "int16", "versions": "0+"},
        ]},
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+"},
        {"name": "SupportedFeatures", "type": "[]SupportedFeatureKey", "versions": "3+", "tag": 0,
         "taggedVersions": "3+", "fields": [
            {"name": "Name", "type": "string", "versions": "3+"},
            {"name": "MinVersion", "type": "int16", "versions": "3+"},
            {"name": "MaxVersion", "type": "int16", "versions": "3+"},
        ]},
        {"name": "FinalizedFeaturesEpoch", "type": "int64", "versions": "3+", "tag": 1,
         "taggedVersions": "3+", "default": "-1"},
        {"name": "FinalizedFeatures", "type": "[]FinalizedFeatureKey", "versions": "3+", "tag": 2,
         "taggedVersions": "3+", "fields": [
            {"name": "Name", "type": "string", "versions": "3+"},
            {"name": "MaxVersionLevel", "type": "int16", "versions": "3+"},
            {"name": "MinVersionLevel", "type": "int16", "versions": "3+"},
        ]},
        {"name": "ZkMigrationReady", "type": "bool", "versions": "3+", "tag": 3,
         "taggedVersions": "3+", "default": "false"},
    ],
})

# -- CreateTopics (19) -----------------------------------------------------------------------------
CREATE_TOPICS_REQUEST = Schema({
    "apiKey": 19, "type": "request", "name": "CreateTopicsRequest",
    "validVersions": "0-7", "flexibleVersions": "5+",
    "fields": [
        {"name": "Topics", "type": "[]CreatableTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "NumPartitions", "type": "int32", "versions": "0+"},
            {"name": "ReplicationFactor", "type": "int16", "versions": "0+"},
            {"name": "Assignments", "type": "[]CreatableReplicaAssignment",
             "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "BrokerIds", "type": "[]int32", "versions": "0+"},
            ]},
            {"name": "Configs", "type": "[]CreatableTopicConfig", "versions": "0+", "fields": [
                {"name": "Name", "type": "string", "versions": "0+"},
                {"name": "Value", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            ]},
        ]},
        {"name": "timeoutMs", "type": "int32", "versions": "0+", "default": "60000"},
        {"name": "validateOnly", "type": "bool", "versions": "1+", "default": "false"},
    ],
})

CREATE_TOPICS_RESPONSE = Schema({
    "apiKey": 19, "type": "response", "name": "CreateTopicsResponse",
    "validVersions": "0-7", "flexibleVersions": "5+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "2+"},
        {"name": "Topics", "type": "[]CreatableTopicResult", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "TopicId", "type": "uuid", "versions": "7+"},
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "ErrorMessage", "type": "string", "versions": "1+", "nullableVersions": "0+"},
            {"name": "TopicConfigErrorCode", "type": "int16", "versions": "5+", "tag": 0,
             "taggedVersions": "5+"},
            {"name": "NumPartitions", "type": "int32", "versions": "5+", "default": "-1"},
            {"name": "ReplicationFactor", "type": "int16", "versions": "5+", "default": "-1"},
            {"name": "Configs", "type": "[]CreatableTopicConfigs", "versions": "5+",
             "nullableVersions": "5+", "fields": [
                {"name": "Name", "type": "string", "versions": "5+"},
                {"name": "Value", "type": "string", "versions": "5+", "nullableVersions": "5+"},
                {"name": "ReadOnly", "type": "bool", "versions": "5+"},
                {"name": "ConfigSource", "type": "int8", "versions": "5+", "default": "-1"},
                {"name": "IsSensitive", "type": "bool", "versions": "5+"},
            ]},
        ]},
    ],
})

# -- DeleteTopics (20) -----------------------------------------------------------------------------
DELETE_TOPICS_REQUEST = Schema({
    "apiKey": 20, "type": "request", "name": "DeleteTopicsRequest",
    "validVersions": "0-6", "flexibleVersions": "4+",
    "fields": [
        {"name": "Topics", "type": "[]DeleteTopicState", "versions": "6+", "fields": [
            {"name": "Name", "type": "string", "versions": "6+", "nullableVersions": "6+",
             "default": "null"},
            {"name": "TopicId", "type": "uuid", "versions": "6+"},
        ]},
        {"name": "TopicNames", "type": "[]string", "versions": "0-5"},
        {"name": "TimeoutMs", "type": "int32", "versions": "0+"},
    ],
})

DELETE_TOPICS_RESPONSE = Schema({
    "apiKey": 20, "type": "response", "name": "DeleteTopicsResponse",
    "validVersions": "0-6", "flexibleVersions": "4+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+"},
        {"name": "Responses", "type": "[]DeletableTopicResult", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+", "nullableVersions": "6+"},
            {"name": "TopicId", "type": "uuid", "versions": "6+"},
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "ErrorMessage", "type": "string", "versions": "5+", "nullableVersions": "5+",
             "default": "null"},
        ]},
    ],
})

# -- DeleteRecords (21) ----------------------------------------------------------------------------
DELETE_RECORDS_REQUEST = Schema({
    "apiKey": 21, "type": "request", "name": "DeleteRecordsRequest",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "Topics", "type": "[]DeleteRecordsTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]DeleteRecordsPartition", "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "Offset", "type": "int64", "versions": "0+"},
            ]},
        ]},
        {"name": "TimeoutMs", "type": "int32", "versions": "0+"},
    ],
})

DELETE_RECORDS_RESPONSE = Schema({
    "apiKey": 21, "type": "response", "name": "DeleteRecordsResponse",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Topics", "type": "[]DeleteRecordsTopicResult", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]DeleteRecordsPartitionResult",
             "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "LowWatermark", "type": "int64", "versions": "0+"},
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            ]},
        ]},
    ],
})

# -- InitProducerId (22) ---------------------------------------------------------------------------
INIT_PRODUCER_ID_REQUEST = Schema({
    "apiKey": 22, "type": "request", "name": "InitProducerIdRequest",
    "validVersions": "0-5", "flexibleVersions": "2+",
    "fields": [
        {"name": "TransactionalId", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "TransactionTimeoutMs", "type": "int32", "versions": "0+"},
        {"name": "ProducerId", "type": "int64", "versions": "3+", "default": "-1"},
        {"name": "ProducerEpoch", "type": "int16", "versions": "3+", "default": "-1"},
    ],
})

INIT_PRODUCER_ID_RESPONSE = Schema({
    "apiKey": 22, "type": "response", "name": "InitProducerIdResponse",
    "validVersions": "0-5", "flexibleVersions": "2+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ProducerId", "type": "int64", "versions": "0+", "default": "-1"},
        {"name": "ProducerEpoch", "type": "int16", "versions": "0+"},
    ],
})

# -- OffsetForLeaderEpoch (23) ---------------------------------------------------------------------
OFFSET_FOR_LEADER_EPOCH_REQUEST = Schema({
    "apiKey": 23, "type": "request", "name": "OffsetForLeaderEpochRequest",
    "validVersions": "0-4", "flexibleVersions": "4+",
    "fields": [
        {"name": "ReplicaId", "type": "int32", "versions": "3+", "default": "-2"},
        {"name": "Topics", "type": "[]OffsetForLeaderTopic", "versions": "0+", "fields": [
            {"name": "Topic", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]OffsetForLeaderPartition", "versions": "0+",
             "fields": [
                {"name": "Partition", "type": "int32", "versions": "0+"},
                {"name": "CurrentLeaderEpoch", "type": "int32", "versions": "2+", "default": "-1"},
                {"name": "LeaderEpoch", "type": "int32", "versions": "0+"},
            ]},
        ]},
    ],
})

OFFSET_FOR_LEADER_EPOCH_RESPONSE = Schema({
    "apiKey": 23, "type": "response", "name": "OffsetForLeaderEpochResponse",
    "validVersions": "0-4", "flexibleVersions": "4+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "2+"},
        {"name": "Topics", "type": "[]OffsetForLeaderTopicResult", "versions": "0+", "fields": [
            {"name": "Topic", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]EpochEndOffset", "versions": "0+", "fields": [
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
                {"name": "Partition", "type": "int32", "versions": "0+"},
                {"name": "LeaderEpoch", "type": "int32", "versions": "1+", "default": "-1"},
                {"name": "EndOffset", "type": "int64", "versions": "0+", "default": "-1"},
            ]},
        ]},
    ],
})

# -- AddPartitionsToTxn (24) -----------------------------------------------------------------------
# Up to v3 a client adds partitions to its own transaction; from v4 a broker asks the coordinator
# about several transactions at once (KIP-890), and may only verify them (VerifyOnly).
ADD_PARTITIONS_TO_TXN_REQUEST = Schema({
    "apiKey": 24, "type": "request", "name": "AddPartitionsToTxnRequest",
    "validVersions": "0-5", "flexibleVersions": "3+",
    "fields": [
        {"name": "Transactions", "type": "[]AddPartitionsToTxnTransaction", "versions": "4+", "fields": [
            {"name": "TransactionalId", "type": "string", "versions": "4+"},
            {"name": "ProducerId", "type": "int64", "versions": "4+"},
            {"name": "ProducerEpoch", "type": "int16", "versions": "4+"},
            {"name": "VerifyOnly", "type": "bool", "versions": "4+", "default": "false"},
            {"name": "Topics", "type": "[]AddPartitionsToTxnTopic", "versions": "4+"},
        ]},
        {"name": "V3AndBelowTransactionalId", "type": "string", "versions": "0-3"},
        {"name": "V3AndBelowProducerId", "type": "int64", "versions": "0-3"},
        {"name": "V3AndBelowProducerEpoch", "type": "int16", "versions": "0-3"},
        {"name": "V3AndBelowTopics", "type": "[]AddPartitionsToTxnTopic", "versions": "0-3"},
    ],
    "commonStructs": [
        {"name": "AddPartitionsToTxnTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]int32", "versions": "0+"},
        ]},
    ],
})

ADD_PARTITIONS_TO_TXN_RESPONSE = Schema({
    "apiKey": 24, "type": "response", "name": "AddPartitionsToTxnResponse",
    "validVersions": "0-5", "flexibleVersions": "3+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "4+"},
        {"name": "ResultsByTransaction", "type": "[]AddPartitionsToTxnResult", "versions": "4+", "fields": [
            {"name": "TransactionalId", "type": "string", "versions": "4+"},
            {"name": "TopicResults", "type": "[]AddPartitionsToTxnTopicResult", "versions": "4+"},
        ]},
        {"name": "ResultsByTopicV3AndBelow", "type": "[]AddPartitionsToTxnTopicResult", "versions": "0-3"},
    ],
    "commonStructs": [
        {"name": "AddPartitionsToTxnTopicResult", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "ResultsByPartition", "type": "[]AddPartitionsToTxnPartitionResult", "versions": "0+"},
        ]},
        {"name": "AddPartitionsToTxnPartitionResult", "versions": "0+", "fields": [
            {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
            {"name": "PartitionErrorCode", "type": "int16", "versions": "0+"},
        ]},
    ],
})

# -- AddOffsetsToTxn (25) --------------------------------------------------------------------------
ADD_OFFSETS_TO_TXN_REQUEST = Schema({
    "apiKey": 25, "type": "request", "name": "AddOffsetsToTxnRequest",
    "validVersions": "0-4", "flexibleVersions": "3+",
    "fields": [
        {"name": "TransactionalId", "type": "string", "versions": "0+"},
        {"name": "ProducerId", "type": "int64", "versions": "0+"},
        {"name": "ProducerEpoch", "type": "int16", "versions": "0+"},
        {"name": "GroupId", "type": "string", "versions": "0+"},
    ],
})

ADD_OFFSETS_TO_TXN_RESPONSE = Schema({
    "apiKey": 25, "type": "response", "name": "AddOffsetsToTxnResponse",
    "validVersions": "0-4", "flexibleVersions": "3+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
    ],
})

# -- EndTxn (26) -----------------------------------------------------------------------------------
# v5 (KIP-890 part 2: the epoch bumped at every transaction's end, returned in the response) is
# the schema's latest version but unstable in Kafka 3.9, which advertises 0-4.
END_TXN_REQUEST = Schema({
    "apiKey": 26, "type": "request", "name": "EndTxnRequest",
    "validVersions": "0-5", "flexibleVersions": "3+",
    "fields": [
        {"name": "TransactionalId", "type": "string", "versions": "0+"},
        {"name": "ProducerId", "type": "int64", "versions": "0+"},
        {"name": "ProducerEpoch", "type": "int16", "versions": "0+"},
        {"name": "Committed", "type": "bool", "versions": "0+"},
    ],
})

END_TXN_RESPONSE = Schema({
    "apiKey": 26, "type": "response", "name": "EndTxnResponse",
    "validVersions": "0-5", "flexibleVersions": "3+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ProducerId", "type": "int64", "versions": "5+", "default": "-1"},
        {"name": "ProducerEpoch", "type": "int16", "versions": "5+", "default": "-1"},
    ],
})

# -- WriteTxnMarkers (27) --------------------------------------------------------------------------
# Broker to broker: the transaction coordinator asks each partition's leader to write the markers.
WRITE_TXN_MARKERS_REQUEST = Schema({
    "apiKey": 27, "type": "request", "name": "WriteTxnMarkersRequest",
    "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "Markers", "type": "[]WritableTxnMarker", "versions": "0+", "fields": [
            {"name": "ProducerId", "type": "int64", "versions": "0+"},
            {"name": "ProducerEpoch", "type": "int16", "versions": "0+"},
            {"name": "TransactionResult", "type": "bool", "versions": "0+"},
            {"name": "Topics", "type": "[]WritableTxnMarkerTopic", "versions": "0+", "fields": [
                {"name": "Name", "type": "string", "versions": "0+"},
                {"name": "PartitionIndexes", "type": "[]int32", "versions": "0+"},
            ]},
            {"name": "CoordinatorEpoch", "type": "int32", "versions": "0+"},
        ]},
    ],
})

WRITE_TXN_MARKERS_RESPONSE = Schema({
    "apiKey": 27, "type": "response", "name": "WriteTxnMarkersResponse",
    "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "Markers", "type": "[]WritableTxnMarkerResult", "versions": "0+", "fields": [
            {"name": "ProducerId", "type": "int64", "versions": "0+"},
            {"name": "Topics", "type": "[]WritableTxnMarkerTopicResult", "versions": "0+", "fields": [
                {"name": "Name", "type": "string", "versions": "0+"},
                {"name": "Partitions", "type": "[]WritableTxnMarkerPartitionResult",
                 "versions": "0+", "fields": [
                    {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                    {"name": "ErrorCode", "type": "int16", "versions": "0+"},
                ]},
            ]},
        ]},
    ],
})

# -- TxnOffsetCommit (28) --------------------------------------------------------------------------
TXN_OFFSET_COMMIT_REQUEST = Schema({
    "apiKey": 28, "type": "request", "name": "TxnOffsetCommitRequest",
    "validVersions": "0-4", "flexibleVersions": "3+",
    "fields": [
        {"name": "TransactionalId", "type": "string", "versions": "0+"},
        {"name": "GroupId", "type": "string", "versions": "0+"},
        {"name": "ProducerId", "type": "int64", "versions": "0+"},
        {"name": "ProducerEpoch", "type": "int16", "versions": "0+"},
        {"name": "GenerationId", "type": "int32", "versions": "3+", "default": "-1"},
        {"name": "MemberId", "type": "string", "versions": "3+", "default": ""},
        {"name": "GroupInstanceId", "type": "string", "versions": "3+", "nullableVersions": "3+",
         "default": "null"},
        {"name": "Topics", "type": "[]TxnOffsetCommitRequestTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]TxnOffsetCommitRequestPartition", "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "CommittedOffset", "type": "int64", "versions": "0+"},
                {"name": "CommittedLeaderEpoch", "type": "int32", "versions": "2+", "default": "-1"},
                {"name": "CommittedMetadata", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            ]},
        ]},
    ],
})

TXN_OFFSET_COMMIT_RESPONSE = Schema({
    "apiKey": 28, "type": "response", "name": "TxnOffsetCommitResponse",
    "validVersions": "0-4", "flexibleVersions": "3+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Topics", "type": "[]TxnOffsetCommitResponseTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]TxnOffsetCommitResponsePartition", "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            ]},
        ]},
    ],
})

# -- DescribeConfigs (32) --------------------------------------------------------------------------
DESCRIBE_CONFIGS_REQUEST = Schema({
    "apiKey": 32, "type": "request", "name": "DescribeConfigsRequest",
    "validVersions": "0-4", "flexibleVersions": "4+",
    "fields": [
        {"name": "Resources", "type": "[]DescribeConfigsResource", "versions": "0+", "fields": [
            {"name": "ResourceType", "type": "int8", "versions": "0+"},
            {"name": "ResourceName", "type": "string", "versions": "0+"},
            {"name": "ConfigurationKeys", "type": "[]string", "versions": "0+",
             "nullableVersions": "0+"},
        ]},
        {"name": "IncludeSynonyms", "type": "bool", "versions": "1+", "default": "false"},
        {"name": "IncludeDocumentation", "type": "bool", "versions": "3+", "default": "false"},
    ],
})

DESCRIBE_CONFIGS_RESPONSE = Schema({
    "apiKey": 32, "type": "response", "name": "DescribeConfigsResponse",
    "validVersions": "0-4", "flexibleVersions": "4+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Results", "type": "[]DescribeConfigsResult", "versions": "0+", "fields": [
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            {"name": "ResourceType", "type": "int8", "versions": "0+"},
            {"name": "ResourceName", "type": "string", "versions": "0+"},
            {"name": "Configs", "type": "[]DescribeConfigsResourceResult",
             "versions": "0+", "fields": [
                {"name": "Name", "type": "string", "versions": "0+"},
                {"name": "Value", "type": "string", "versions": "0+", "nullableVersions": "0+"},
                {"name": "ReadOnly", "type": "bool", "versions": "0+"},
                {"name": "IsDefault", "type": "bool", "versions": "0"},
                {"name": "ConfigSource", "type": "int8", "versions": "1+", "default": "-1"},
                {"name": "IsSensitive", "type": "bool", "versions": "0+"},
                {"name": "Synonyms", "type": "[]DescribeConfigsSynonym",
                 "versions": "1+", "fields": [
                    {"name": "Name", "type": "string", "versions": "1+"},
                    {"name": "Value", "type": "string", "versions": "1+", "nullableVersions": "0+"},
                    {"name": "Source", "type": "int8", "versions": "1+"},
                ]},
                {"name": "ConfigType", "type": "int8", "versions": "3+", "default": "0"},
                {"name": "Documentation", "type": "string", "versions": "3+",
                 "nullableVersions": "0+"},
            ]},
        ]},
    ],
})

# -- AlterConfigs (33) -----------------------------------------------------------------------------
ALTER_CONFIGS_REQUEST = Schema({
    "apiKey": 33, "type": "request", "name": "AlterConfigsRequest",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "Resources", "type": "[]AlterConfigsResource", "versions": "0+", "fields": [
            {"name": "ResourceType", "type": "int8", "versions": "0+"},
            {"name": "ResourceName", "type": "string", "versions": "0+"},
            {"name": "Configs", "type": "[]AlterableConfig", "versions": "0+", "fields": [
                {"name": "Name", "type": "string", "versions": "0+"},
                {"name": "Value", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            ]},
        ]},
        {"name": "ValidateOnly", "type": "bool", "versions": "0+"},
    ],
})

ALTER_CONFIGS_RESPONSE = Schema({
    "apiKey": 33, "type": "response", "name": "AlterConfigsResponse",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Responses", "type": "[]AlterConfigsResourceResponse",
         "versions": "0+", "fields": [
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            {"name": "ResourceType", "type": "int8", "versions": "0+"},
            {"name": "ResourceName", "type": "string", "versions": "0+"},
        ]},
    ],
})

# -- AlterReplicaLogDirs (34) ----------------------------------------------------------------------
ALTER_REPLICA_LOG_DIRS_REQUEST = Schema({
    "apiKey": 34, "type": "request", "name": "AlterReplicaLogDirsRequest",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "Dirs", "type": "[]AlterReplicaLogDir", "versions": "0+", "fields": [
            {"name": "Path", "type": "string", "versions": "0+"},
            {"name": "Topics", "type": "[]AlterReplicaLogDirTopic", "versions": "0+", "fields": [
                {"name": "Name", "type": "string", "versions": "0+"},
                {"name": "Partitions", "type": "[]int32", "versions": "0+"},
            ]},
        ]},
    ],
})

ALTER_REPLICA_LOG_DIRS_RESPONSE = Schema({
    "apiKey": 34, "type": "response", "name": "AlterReplicaLogDirsResponse",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Results", "type": "[]AlterReplicaLogDirTopicResult", "versions": "0+", "fields": [
            {"name": "TopicName", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]AlterReplicaLogDirPartitionResult",
             "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            ]},
        ]},
    ],
})

# -- DescribeLogDirs (35) --------------------------------------------------------------------------
DESCRIBE_LOG_DIRS_REQUEST = Schema({
    "apiKey": 35, "type": "request", "name": "DescribeLogDirsRequest",
    "validVersions": "0-4", "flexibleVersions": "2+",
    "fields": [
        {"name": "Topics", "type": "[]DescribableLogDirTopic", "versions": "0+", "nullableVersions": "0+",
         "fields": [
            {"name": "Topic", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]int32", "versions": "0+"},
        ]},
    ],
})

DESCRIBE_LOG_DIRS_RESPONSE = Schema({
    "apiKey": 35, "type": "response", "name": "DescribeLogDirsResponse",
    "validVersions": "0-4", "flexibleVersions": "2+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "3+"},
        {"name": "Results", "type": "[]DescribeLogDirsResult", "versions": "0+", "fields": [
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "LogDir", "type": "string", "versions": "0+"},
            {"name": "Topics", "type": "[]DescribeLogDirsTopic", "versions": "0+", "fields": [
                {"name": "Name", "type": "string", "versions": "0+"},
                {"name": "Partitions", "type": "[]DescribeLogDirsPartition", "versions": "0+", "fields": [
                    {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                    {"name": "PartitionSize", "type": "int64", "versions": "0+"},
                    {"name": "OffsetLag", "type": "int64", "versions": "0+"},
                    {"name": "IsFutureKey", "type": "bool", "versions": "0+"},
                ]},
            ]},
            {"name": "TotalBytes", "type": "int64", "versions": "4+", "default": "-1"},
            {"name": "UsableBytes", "type": "int64", "versions": "4+", "default": "-1"},
        ]},
    ],
})

# -- SaslAuthenticate (36) -------------------------------------------------------------------------
SASL_AUTHENTICATE_REQUEST = Schema({
    "apiKey": 36, "type": "request", "name": "SaslAuthenticateRequest",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "AuthBytes", "type": "bytes", "versions": "0+"},
    ],
})

SASL_AUTHENTICATE_RESPONSE = Schema({
    "apiKey": 36, "type": "response", "name": "SaslAuthenticateResponse",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "AuthBytes", "type": "bytes", "versions": "0+"},
        {"name": "SessionLifetimeMs", "type": "int64", "versions": "1+", "default": "0"},
    ],
})

# -- CreatePartitions (37) -------------------------------------------------------------------------
CREATE_PARTITIONS_REQUEST = Schema({
    "apiKey": 37, "type": "request", "name": "CreatePartitionsRequest",
    "validVersions": "0-3", "flexibleVersions": "2+",
    "fields": [
        {"name": "Topics", "type": "[]CreatePartitionsTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Count", "type": "int32", "versions": "0+"},
            {"name": "Assignments", "type": "[]CreatePartitionsAssignment", "versions": "0+",
             "nullableVersions": "0+", "fields": [
                {"name": "BrokerIds", "type": "[]int32", "versions": "0+"},
            ]},
        ]},
        {"name": "TimeoutMs", "type": "int32", "versions": "0+"},
        {"name": "ValidateOnly", "type": "bool", "versions": "0+"},
    ],
})

CREATE_PARTITIONS_RESPONSE = Schema({
    "apiKey": 37, "type": "response", "name": "CreatePartitionsResponse",
    "validVersions": "0-3", "flexibleVersions": "2+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Results", "type": "[]CreatePartitionsTopicResult", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+",
             "default": "null"},
        ]},
    ],
})

# -- DeleteGroups (42) -----------------------------------------------------------------------------
DELETE_GROUPS_REQUEST = Schema({
    "apiKey": 42, "type": "request", "name": "DeleteGroupsRequest",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "GroupsNames", "type": "[]string", "versions": "0+"},
    ],
})

DELETE_GROUPS_RESPONSE = Schema({
    "apiKey": 42, "type": "response", "name": "DeleteGroupsResponse",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Results", "type": "[]DeletableGroupResult", "versions": "0+", "fields": [
            {"name": "GroupId", "type": "string", "versions": "0+"},
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        ]},
    ],
})

# -- ElectLeaders (43) -----------------------------------------------------------------------------
ELECT_LEADERS_REQUEST = Schema({
    "apiKey": 43, "type": "request", "name": "ElectLeadersRequest",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "ElectionType", "type": "int8", "versions": "1+"},
        {"name": "TopicPartitions", "type": "[]TopicPartitions", "versions": "0+",
         "nullableVersions": "0+", "fields": [
            {"name": "Topic", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]int32", "versions": "0+"},
        ]},
        {"name": "TimeoutMs", "type": "int32", "versions": "0+", "default": "60000"},
    ],
})

ELECT_LEADERS_RESPONSE = Schema({
    "apiKey": 43, "type": "response", "name": "ElectLeadersResponse",
    "validVersions": "0-2", "flexibleVersions": "2+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "1+"},
        {"name": "ReplicaElectionResults", "type": "[]ReplicaElectionResult",
         "versions": "0+", "fields": [
            {"name": "Topic", "type": "string", "versions": "0+"},
            {"name": "PartitionResult", "type": "[]PartitionResult", "versions": "0+", "fields": [
                {"name": "PartitionId", "type": "int32", "versions": "0+"},
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
                {"name": "ErrorMessage", "type": "string", "versions": "0+",
                 "nullableVersions": "0+"},
            ]},
        ]},
    ],
})

# -- IncrementalAlterConfigs (44) ------------------------------------------------------------------
INCREMENTAL_ALTER_CONFIGS_REQUEST = Schema({
    "apiKey": 44, "type": "request", "name": "IncrementalAlterConfigsRequest",
    "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "Resources", "type": "[]AlterConfigsResource", "versions": "0+", "fields": [
            {"name": "ResourceType", "type": "int8", "versions": "0+"},
            {"name": "ResourceName", "type": "string", "versions": "0+"},
            {"name": "Configs", "type": "[]AlterableConfig", "versions": "0+", "fields": [
                {"name": "Name", "type": "string", "versions": "0+"},
                {"name": "ConfigOperation", "type": "int8", "versions": "0+"},
                {"name": "Value", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            ]},
        ]},
        {"name": "ValidateOnly", "type": "bool", "versions": "0+"},
    ],
})

INCREMENTAL_ALTER_CONFIGS_RESPONSE = Schema({
    "apiKey": 44, "type": "response", "name": "IncrementalAlterConfigsResponse",
    "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Responses", "type": "[]AlterConfigsResourceResponse",
         "versions": "0+", "fields": [
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            {"name": "ResourceType", "type": "int8", "versions": "0+"},
            {"name": "ResourceName", "type": "string", "versions": "0+"},
        ]},
    ],
})

# -- AlterPartitionReassignments (45) --------------------------------------------------------------
ALTER_PARTITION_REASSIGNMENTS_REQUEST = Schema({
    "apiKey": 45, "type": "request", "name": "AlterPartitionReassignmentsRequest",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "TimeoutMs", "type": "int32", "versions": "0+", "default": "60000"},
        {"name": "Topics", "type": "[]ReassignableTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]ReassignablePartition", "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "Replicas", "type": "[]int32", "versions": "0+", "nullableVersions": "0+",
                 "default": "null"},
            ]},
        ]},
    ],
})

ALTER_PARTITION_REASSIGNMENTS_RESPONSE = Schema({
    "apiKey": 45, "type": "response", "name": "AlterPartitionReassignmentsResponse",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "Responses", "type": "[]ReassignableTopicResponse", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]ReassignablePartitionResponse",
             "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
                {"name": "ErrorMessage", "type": "string", "versions": "0+",
                 "nullableVersions": "0+"},
            ]},
        ]},
    ],
})

# -- ListPartitionReassignments (46) ---------------------------------------------------------------
LIST_PARTITION_REASSIGNMENTS_REQUEST = Schema({
    "apiKey": 46, "type": "request", "name": "ListPartitionReassignmentsRequest",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "TimeoutMs", "type": "int32", "versions": "0+", "default": "60000"},
        {"name": "Topics", "type": "[]ListPartitionReassignmentsTopics", "versions": "0+",
         "nullableVersions": "0+", "default": "null", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "PartitionIndexes", "type": "[]int32", "versions": "0+"},
        ]},
    ],
})

LIST_PARTITION_REASSIGNMENTS_RESPONSE = Schema({
    "apiKey": 46, "type": "response", "name": "ListPartitionReassignmentsResponse",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "Topics", "type": "[]OngoingTopicReassignment", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]OngoingPartitionReassignment",
             "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "Replicas", "type": "[]int32", "versions": "0+"},
                {"name": "AddingReplicas", "type": "[]int32", "versions": "0+"},
                {"name": "RemovingReplicas", "type": "[]int32", "versions": "0+"},
            ]},
        ]},
    ],
})

# -- OffsetDelete (47) -----------------------------------------------------------------------------
OFFSET_DELETE_REQUEST = Schema({
    "apiKey": 47, "type": "request", "name": "OffsetDeleteRequest",
    "validVersions": "0", "flexibleVersions": "none",
    "fields": [
        {"name": "GroupId", "type": "string", "versions": "0+"},
        {"name": "Topics", "type": "[]OffsetDeleteRequestTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]OffsetDeleteRequestPartition", "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
            ]},
        ]},
    ],
})

OFFSET_DELETE_RESPONSE = Schema({
    "apiKey": 47, "type": "response", "name": "OffsetDeleteResponse",
    "validVersions": "0", "flexibleVersions": "none",
    "fields": [
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Topics", "type": "[]OffsetDeleteResponseTopic", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]OffsetDeleteResponsePartition", "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            ]},
        ]},
    ],
})

# -- DescribeCluster (60) --------------------------------------------------------------------------
DESCRIBE_CLUSTER_REQUEST = Schema({
    "apiKey": 60, "type": "request", "name": "DescribeClusterRequest",
    "validVersions": "0-1", "flexibleVersions": "0+",
    "fields": [
        {"name": "IncludeClusterAuthorizedOperations", "type": "bool", "versions": "0+"},
        {"name": "EndpointType", "type": "int8", "versions": "1+", "default": "1"},
    ],
})

DESCRIBE_CLUSTER_RESPONSE = Schema({
    "apiKey": 60, "type": "response", "name": "DescribeClusterResponse",
    "validVersions": "0-1", "flexibleVersions": "0+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+",
         "default": "null"},
        {"name": "EndpointType", "type": "int8", "versions": "1+", "default": "1"},
        {"name": "ClusterId", "type": "string", "versions": "0+"},
        {"name": "ControllerId", "type": "int32", "versions": "0+", "default": "-1"},
        {"name": "Brokers", "type": "[]DescribeClusterBroker", "versions": "0+", "fields": [
            {"name": "BrokerId", "type": "int32", "versions": "0+"},
            {"name": "Host", "type": "string", "versions": "0+"},
            {"name": "Port", "type": "int32", "versions": "0+"},
            {"name": "Rack", "type": "string", "versions": "0+", "nullableVersions": "0+",
             "default": "null"},
        ]},
        {"name": "ClusterAuthorizedOperations", "type": "int32", "versions": "0+",
         "default": "-2147483648"},
    ],
})

# -- DescribeProducers (61) ------------------------------------------------------------------------
DESCRIBE_PRODUCERS_REQUEST = Schema({
    "apiKey": 61, "type": "request", "name": "DescribeProducersRequest",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "Topics", "type": "[]TopicRequest", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "PartitionIndexes", "type": "[]int32", "versions": "0+"},
        ]},
    ],
})

DESCRIBE_PRODUCERS_RESPONSE = Schema({
    "apiKey": 61, "type": "response", "name": "DescribeProducersResponse",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Topics", "type": "[]TopicResponse", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]PartitionResponse", "versions": "0+", "fields": [
                {"name": "PartitionIndex", "type": "int32", "versions": "0+"},
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
                {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+",
                 "default": "null"},
                {"name": "ActiveProducers", "type": "[]ProducerState", "versions": "0+", "fields": [
                    {"name": "ProducerId", "type": "int64", "versions": "0+"},
                    {"name": "ProducerEpoch", "type": "int32", "versions": "0+"},
                    {"name": "LastSequence", "type": "int32", "versions": "0+", "default": "-1"},
                    {"name": "LastTimestamp", "type": "int64", "versions": "0+", "default": "-1"},
                    {"name": "CoordinatorEpoch", "type": "int32", "versions": "0+"},
                    {"name": "CurrentTxnStartOffset", "type": "int64", "versions": "0+", "default": "-1"},
                ]},
            ]},
        ]},
    ],
})

# -- DescribeTransactions (65) ---------------------------------------------------------------------
DESCRIBE_TRANSACTIONS_REQUEST = Schema({
    "apiKey": 65, "type": "request", "name": "DescribeTransactionsRequest",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "TransactionalIds", "type": "[]string", "versions": "0+"},
    ],
})

DESCRIBE_TRANSACTIONS_RESPONSE = Schema({
    "apiKey": 65, "type": "response", "name": "DescribeTransactionsResponse",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "TransactionStates", "type": "[]TransactionState", "versions": "0+", "fields": [
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "TransactionalId", "type": "string", "versions": "0+"},
            {"name": "TransactionState", "type": "string", "versions": "0+"},
            {"name": "TransactionTimeoutMs", "type": "int32", "versions": "0+"},
            {"name": "TransactionStartTimeMs", "type": "int64", "versions": "0+"},
            {"name": "ProducerId", "type": "int64", "versions": "0+"},
            {"name": "ProducerEpoch", "type": "int16", "versions": "0+"},
            {"name": "Topics", "type": "[]TopicData", "versions": "0+", "fields": [
                {"name": "Topic", "type": "string", "versions": "0+"},
                {"name": "Partitions", "type": "[]int32", "versions": "0+"},
            ]},
        ]},
    ],
})

# -- ListTransactions (66) -------------------------------------------------------------------------
LIST_TRANSACTIONS_REQUEST = Schema({
    "apiKey": 66, "type": "request", "name": "ListTransactionsRequest",
    "validVersions": "0-1", "flexibleVersions": "0+",
    "fields": [
        {"name": "StateFilters", "type": "[]string", "versions": "0+"},
        {"name": "ProducerIdFilters", "type": "[]int64", "versions": "0+"},
        {"name": "DurationFilter", "type": "int64", "versions": "1+", "default": "-1"},
    ],
})

LIST_TRANSACTIONS_RESPONSE = Schema({
    "apiKey": 66, "type": "response", "name": "ListTransactionsResponse",
    "validVersions": "0-1", "flexibleVersions": "0+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "UnknownStateFilters", "type": "[]string", "versions": "0+"},
        {"name": "TransactionStates", "type": "[]TransactionState", "versions": "0+", "fields": [
            {"name": "TransactionalId", "type": "string", "versions": "0+"},
            {"name": "ProducerId", "type": "int64", "versions": "0+"},
            {"name": "TransactionState", "type": "string", "versions": "0+"},
        ]},
    ],
})

# -- DescribeClientQuotas (48) -------------------------------------------------------------------
DESCRIBE_CLIENT_QUOTAS_REQUEST = Schema({
    "apiKey": 48, "type": "request", "name": "DescribeClientQuotasRequest",
    "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "Components", "type": "[]ComponentData", "versions": "0+", "fields": [
            {"name": "EntityType", "type": "string", "versions": "0+"},
            {"name": "MatchType", "type": "int8", "versions": "0+"},
            {"name": "Match", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        ]},
        {"name": "Strict", "type": "bool", "versions": "0+"},
    ],
})

DESCRIBE_CLIENT_QUOTAS_RESPONSE = Schema({
    "apiKey": 48, "type": "response", "name": "DescribeClientQuotasResponse",
    "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "Entries", "type": "[]EntryData", "versions": "0+", "nullableVersions": "0+", "fields": [
            {"name": "Entity", "type": "[]EntityData", "versions": "0+", "fields": [
                {"name": "EntityType", "type": "string", "versions": "0+"},
                {"name": "EntityName", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            ]},
            {"name": "Values", "type": "[]ValueData", "versions": "0+", "fields": [
                {"name": "Key", "type": "string", "versions": "0+"},
                {"name": "Value", "type": "float64", "versions": "0+"},
            ]},
        ]},
    ],
})

# -- AlterClientQuotas (49) ----------------------------------------------------------------------
ALTER_CLIENT_QUOTAS_REQUEST = Schema({
    "apiKey": 49, "type": "request", "name": "AlterClientQuotasRequest",
    "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "Entries", "type": "[]EntryData", "versions": "0+", "fields": [
            {"name": "Entity", "type": "[]EntityData", "versions": "0+", "fields": [
                {"name": "EntityType", "type": "string", "versions": "0+"},
                {"name": "EntityName", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            ]},
            {"name": "Ops", "type": "[]OpData", "versions": "0+", "fields": [
                {"name": "Key", "type": "string", "versions": "0+"},
                {"name": "Value", "type": "float64", "versions": "0+"},
                {"name": "Remove", "type": "bool", "versions": "0+"},
            ]},
        ]},
        {"name": "ValidateOnly", "type": "bool", "versions": "0+"},
    ],
})

ALTER_CLIENT_QUOTAS_RESPONSE = Schema({
    "apiKey": 49, "type": "response", "name": "AlterClientQuotasResponse",
    "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Entries", "type": "[]EntryData", "versions": "0+", "fields": [
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            {"name": "Entity", "type": "[]EntityData", "versions": "0+", "fields": [
                {"name": "EntityType", "type": "string", "versions": "0+"},
                {"name": "EntityName", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            ]},
        ]},
    ],
})

# -- DescribeUserScramCredentials (50) -------------------------------------------------------------
DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = Schema({
    "apiKey": 50, "type": "request", "name": "DescribeUserScramCredentialsRequest",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "Users", "type": "[]UserName", "versions": "0+", "nullableVersions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
        ]},
    ],
})

DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = Schema({
    "apiKey": 50, "type": "response", "name": "DescribeUserScramCredentialsResponse",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "Results", "type": "[]DescribeUserScramCredentialsResult", "versions": "0+", "fields": [
            {"name": "User", "type": "string", "versions": "0+"},
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            {"name": "CredentialInfos", "type": "[]CredentialInfo", "versions": "0+", "fields": [
                {"name": "Mechanism", "type": "int8", "versions": "0+"},
                {"name": "Iterations", "type": "int32", "versions": "0+"},
            ]},
        ]},
    ],
})

# -- AlterUserScramCredentials (51) ----------------------------------------------------------------
ALTER_USER_SCRAM_CREDENTIALS_REQUEST = Schema({
    "apiKey": 51, "type": "request", "name": "AlterUserScramCredentialsRequest",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "Deletions", "type": "[]ScramCredentialDeletion", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Mechanism", "type": "int8", "versions": "0+"},
        ]},
        {"name": "Upsertions", "type": "[]ScramCredentialUpsertion", "versions": "0+", "fields": [
            {"name": "Name", "type": "string", "versions": "0+"},
            {"name": "Mechanism", "type": "int8", "versions": "0+"},
            {"name": "Iterations", "type": "int32", "versions": "0+"},
            {"name": "Salt", "type": "bytes", "versions": "0+"},
            {"name": "SaltedPassword", "type": "bytes", "versions": "0+"},
        ]},
    ],
})

ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = Schema({
    "apiKey": 51, "type": "response", "name": "AlterUserScramCredentialsResponse",
    "validVersions": "0", "flexibleVersions": "0+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Results", "type": "[]AlterUserScramCredentialsResult", "versions": "0+", "fields": [
            {"name": "User", "type": "string", "versions": "0+"},
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        ]},
    ],
})

# -- DescribeAcls (29) ---------------------------------------------------------------------------
DESCRIBE_ACLS_REQUEST = Schema({
    "apiKey": 29, "type": "request", "name": "DescribeAclsRequest",
    "validVersions": "0-3", "flexibleVersions": "2+",
    "fields": [
        {"name": "ResourceTypeFilter", "type": "int8", "versions": "0+"},
        {"name": "ResourceNameFilter", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "PatternTypeFilter", "type": "int8", "versions": "1+", "default": "3"},
        {"name": "PrincipalFilter", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "HostFilter", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "Operation", "type": "int8", "versions": "0+"},
        {"name": "PermissionType", "type": "int8", "versions": "0+"},
    ],
})

DESCRIBE_ACLS_RESPONSE = Schema({
    "apiKey": 29, "type": "response", "name": "DescribeAclsResponse",
    "validVersions": "0-3", "flexibleVersions": "2+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "ErrorCode", "type": "int16", "versions": "0+"},
        {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "Resources", "type": "[]DescribeAclsResource", "versions": "0+", "fields": [
            {"name": "ResourceType", "type": "int8", "versions": "0+"},
            {"name": "ResourceName", "type": "string", "versions": "0+"},
            {"name": "PatternType", "type": "int8", "versions": "1+", "default": "3"},
            {"name": "Acls", "type": "[]AclDescription", "versions": "0+", "fields": [
                {"name": "Principal", "type": "string", "versions": "0+"},
                {"name": "Host", "type": "string", "versions": "0+"},
                {"name": "Operation", "type": "int8", "versions": "0+"},
                {"name": "PermissionType", "type": "int8", "versions": "0+"},
            ]},
        ]},
    ],
})

# -- CreateAcls (30) -----------------------------------------------------------------------------
CREATE_ACLS_REQUEST = Schema({
    "apiKey": 30, "type": "request", "name": "CreateAclsRequest",
    "validVersions": "0-3", "flexibleVersions": "2+",
    "fields": [
        {"name": "Creations", "type": "[]AclCreation", "versions": "0+", "fields": [
            {"name": "ResourceType", "type": "int8", "versions": "0+"},
            {"name": "ResourceName", "type": "string", "versions": "0+"},
            {"name": "ResourcePatternType", "type": "int8", "versions": "1+", "default": "3"},
            {"name": "Principal", "type": "string", "versions": "0+"},
            {"name": "Host", "type": "string", "versions": "0+"},
            {"name": "Operation", "type": "int8", "versions": "0+"},
            {"name": "PermissionType", "type": "int8", "versions": "0+"},
        ]},
    ],
})

CREATE_ACLS_RESPONSE = Schema({
    "apiKey": 30, "type": "response", "name": "CreateAclsResponse",
    "validVersions": "0-3", "flexibleVersions": "2+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "Results", "type": "[]AclCreationResult", "versions": "0+", "fields": [
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        ]},
    ],
})

# -- DeleteAcls (31) -----------------------------------------------------------------------------
DELETE_ACLS_REQUEST = Schema({
    "apiKey": 31, "type": "request", "name": "DeleteAclsRequest",
    "validVersions": "0-3", "flexibleVersions": "2+",
    "fields": [
        {"name": "Filters", "type": "[]DeleteAclsFilter", "versions": "0+", "fields": [
            {"name": "ResourceTypeFilter", "type": "int8", "versions": "0+"},
            {"name": "ResourceNameFilter", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            {"name": "PatternTypeFilter", "type": "int8", "versions": "1+", "default": "3"},
            {"name": "PrincipalFilter", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            {"name": "HostFilter", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            {"name": "Operation", "type": "int8", "versions": "0+"},
            {"name": "PermissionType", "type": "int8", "versions": "0+"},
        ]},
    ],
})

DELETE_ACLS_RESPONSE = Schema({
    "apiKey": 31, "type": "response", "name": "DeleteAclsResponse",
    "validVersions": "0-3", "flexibleVersions": "2+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {"name": "FilterResults", "type": "[]DeleteAclsFilterResult", "versions": "0+", "fields": [
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
            {"name": "MatchingAcls", "type": "[]DeleteAclsMatchingAcl", "versions": "0+", "fields": [
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
                {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
                {"name": "ResourceType", "type": "int8", "versions": "0+"},
                {"name": "ResourceName", "type": "string", "versions": "0+"},
                {"name": "PatternType", "type": "int8", "versions": "1+", "default": "3"},
                {"name": "Principal", "type": "string", "versions": "0+"},
                {"name": "Host", "type": "string", "versions": "0+"},
                {"name": "Operation", "type": "int8", "versions": "0+"},
                {"name": "PermissionType", "type": "int8", "versions": "0+"},
            ]},
        ]},
    ],
})


#: API key -> Kafka's name for the API.
API_NAMES: Dict[int, str] = {
    ApiKey.PRODUCE: "Produce",
    ApiKey.FETCH: "Fetch",
    ApiKey.LIST_OFFSETS: "ListOffsets",
    ApiKey.METADATA: "Metadata",
    ApiKey.LEADER_AND_ISR: "LeaderAndIsr",
    ApiKey.STOP_REPLICA: "StopReplica",
    ApiKey.UPDATE_METADATA: "UpdateMetadata",
    ApiKey.CONTROLLED_SHUTDOWN: "ControlledShutdown",
    ApiKey.OFFSET_COMMIT: "OffsetCommit",
    ApiKey.OFFSET_FETCH: "OffsetFetch",
    ApiKey.FIND_COORDINATOR: "FindCoordinator",
    ApiKey.JOIN_GROUP: "JoinGroup",
    ApiKey.HEARTBEAT: "Heartbeat",
    ApiKey.LEAVE_GROUP: "LeaveGroup",
    ApiKey.SYNC_GROUP: "SyncGroup",
    ApiKey.DESCRIBE_GROUPS: "DescribeGroups",
    ApiKey.LIST_GROUPS: "ListGroups",
    ApiKey.SASL_HANDSHAKE: "SaslHandshake",
    ApiKey.API_VERSIONS: "ApiVersions",
    ApiKey.CREATE_TOPICS: "CreateTopics",
    ApiKey.DELETE_TOPICS: "DeleteTopics",
    ApiKey.DELETE_RECORDS: "DeleteRecords",
    ApiKey.INIT_PRODUCER_ID: "InitProducerId",
    ApiKey.OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch",
    ApiKey.ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn",
    ApiKey.ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn",
    ApiKey.END_TXN: "EndTxn",
    ApiKey.WRITE_TXN_MARKERS: "WriteTxnMarkers",
    ApiKey.TXN_OFFSET_COMMIT: "TxnOffsetCommit",
    ApiKey.DESCRIBE_CONFIGS: "DescribeConfigs",
    ApiKey.ALTER_CONFIGS: "AlterConfigs",
    ApiKey.ALTER_REPLICA_LOG_DIRS: "AlterReplicaLogDirs",
    ApiKey.SASL_AUTHENTICATE: "SaslAuthenticate",
    ApiKey.CREATE_PARTITIONS: "CreatePartitions",
    ApiKey.DELETE_GROUPS: "DeleteGroups",
    ApiKey.ELECT_LEADERS: "ElectLeaders",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignments",
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "ListPartitionReassignments",
    ApiKey.OFFSET_DELETE: "OffsetDelete",
    ApiKey.DESCRIBE_PRODUCERS: "DescribeProducers",
    ApiKey.DESCRIBE_TRANSACTIONS: "DescribeTransactions",
    ApiKey.LIST_TRANSACTIONS: "ListTransactions",
    ApiKey.DESCRIBE_LOG_DIRS: "DescribeLogDirs",
    ApiKey.DESCRIBE_CLUSTER: "DescribeCluster",
    ApiKey.DESCRIBE_CLIENT_QUOTAS: "DescribeClientQuotas",
    ApiKey.ALTER_CLIENT_QUOTAS: "AlterClientQuotas",
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: "DescribeUserScramCredentials",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "AlterUserScramCredentials",
    ApiKey.DESCRIBE_ACLS: "DescribeAcls",
    ApiKey.CREATE_ACLS: "CreateAcls",
    ApiKey.DELETE_ACLS: "DeleteAcls",
}

#: API key -> (min, max) version the broker advertises in ApiVersions.
SUPPORTED_VERSIONS: Dict[int, Tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),
    ApiKey.FETCH: (0, 17),
    ApiKey.LIST_OFFSETS: (0, 10),
    ApiKey.METADATA: (0, 12),
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.UPDATE_METADATA: (0, 8),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    # v5 (KIP-890's epoch bump at every end) is unstable in Kafka 3.9, which advertises 0-4.
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
}

#: The APIs a cluster's brokers send one another: the controller's LeaderAndIsr, StopReplica
#: and UpdateMetadata, a broker's ControlledShutdown, a follower's OffsetForLeaderEpoch (which
#: consumers send too, KIP-320), a transaction coordinator's WriteTxnMarkers.
INTER_BROKER_APIS: FrozenSet[int] = frozenset({
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.WRITE_TXN_MARKERS})

#: API key -> request table.
REQUESTS: Dict[int, Schema] = {
    ApiKey.PRODUCE: PRODUCE_REQUEST,
    ApiKey.FETCH: FETCH_REQUEST,
    ApiKey.LIST_OFFSETS: LIST_OFFSETS_REQUEST,
    ApiKey.METADATA: METADATA_REQUEST,
    ApiKey.LEADER_AND_ISR: LEADER_AND_ISR_REQUEST,
    ApiKey.STOP_REPLICA: STOP_REPLICA_REQUEST,
    ApiKey.UPDATE_METADATA: UPDATE_METADATA_REQUEST,
    ApiKey.CONTROLLED_SHUTDOWN: CONTROLLED_SHUTDOWN_REQUEST,
    ApiKey.OFFSET_COMMIT: OFFSET_COMMIT_REQUEST,
    ApiKey.OFFSET_FETCH: OFFSET_FETCH_REQUEST,
    ApiKey.FIND_COORDINATOR: FIND_COORDINATOR_REQUEST,
    ApiKey.JOIN_GROUP: JOIN_GROUP_REQUEST,
    ApiKey.HEARTBEAT: HEARTBEAT_REQUEST,
    ApiKey.LEAVE_GROUP: LEAVE_GROUP_REQUEST,
    ApiKey.SYNC_GROUP: SYNC_GROUP_REQUEST,
    ApiKey.DESCRIBE_GROUPS: DESCRIBE_GROUPS_REQUEST,
    ApiKey.LIST_GROUPS: LIST_GROUPS_REQUEST,
    ApiKey.SASL_HANDSHAKE: SASL_HANDSHAKE_REQUEST,
    ApiKey.API_VERSIONS: API_VERSIONS_REQUEST,
    ApiKey.CREATE_TOPICS: CREATE_TOPICS_REQUEST,
    ApiKey.DELETE_TOPICS: DELETE_TOPICS_REQUEST,
    ApiKey.DELETE_RECORDS: DELETE_RECORDS_REQUEST,
    ApiKey.INIT_PRODUCER_ID: INIT_PRODUCER_ID_REQUEST,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: OFFSET_FOR_LEADER_EPOCH_REQUEST,
    ApiKey.ADD_PARTITIONS_TO_TXN: ADD_PARTITIONS_TO_TXN_REQUEST,
    ApiKey.ADD_OFFSETS_TO_TXN: ADD_OFFSETS_TO_TXN_REQUEST,
    ApiKey.END_TXN: END_TXN_REQUEST,
    ApiKey.WRITE_TXN_MARKERS: WRITE_TXN_MARKERS_REQUEST,
    ApiKey.TXN_OFFSET_COMMIT: TXN_OFFSET_COMMIT_REQUEST,
    ApiKey.DESCRIBE_CONFIGS: DESCRIBE_CONFIGS_REQUEST,
    ApiKey.ALTER_CONFIGS: ALTER_CONFIGS_REQUEST,
    ApiKey.ALTER_REPLICA_LOG_DIRS: ALTER_REPLICA_LOG_DIRS_REQUEST,
    ApiKey.SASL_AUTHENTICATE: SASL_AUTHENTICATE_REQUEST,
    ApiKey.CREATE_PARTITIONS: CREATE_PARTITIONS_REQUEST,
    ApiKey.DELETE_GROUPS: DELETE_GROUPS_REQUEST,
    ApiKey.ELECT_LEADERS: ELECT_LEADERS_REQUEST,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: INCREMENTAL_ALTER_CONFIGS_REQUEST,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ALTER_PARTITION_REASSIGNMENTS_REQUEST,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: LIST_PARTITION_REASSIGNMENTS_REQUEST,
    ApiKey.OFFSET_DELETE: OFFSET_DELETE_REQUEST,
    ApiKey.DESCRIBE_PRODUCERS: DESCRIBE_PRODUCERS_REQUEST,
    ApiKey.DESCRIBE_TRANSACTIONS: DESCRIBE_TRANSACTIONS_REQUEST,
    ApiKey.LIST_TRANSACTIONS: LIST_TRANSACTIONS_REQUEST,
    ApiKey.DESCRIBE_LOG_DIRS: DESCRIBE_LOG_DIRS_REQUEST,
    ApiKey.DESCRIBE_CLUSTER: DESCRIBE_CLUSTER_REQUEST,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: DESCRIBE_CLIENT_QUOTAS_REQUEST,
    ApiKey.ALTER_CLIENT_QUOTAS: ALTER_CLIENT_QUOTAS_REQUEST,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ALTER_USER_SCRAM_CREDENTIALS_REQUEST,
    ApiKey.DESCRIBE_ACLS: DESCRIBE_ACLS_REQUEST,
    ApiKey.CREATE_ACLS: CREATE_ACLS_REQUEST,
    ApiKey.DELETE_ACLS: DELETE_ACLS_REQUEST,
}

#: API key -> response table.
RESPONSES: Dict[int, Schema] = {
    ApiKey.PRODUCE: PRODUCE_RESPONSE,
    ApiKey.FETCH: FETCH_RESPONSE,
    ApiKey.LIST_OFFSETS: LIST_OFFSETS_RESPONSE,
    ApiKey.METADATA: METADATA_RESPONSE,
    ApiKey.LEADER_AND_ISR: LEADER_AND_ISR_RESPONSE,
    ApiKey.STOP_REPLICA: STOP_REPLICA_RESPONSE,
    ApiKey.UPDATE_METADATA: UPDATE_METADATA_RESPONSE,
    ApiKey.CONTROLLED_SHUTDOWN: CONTROLLED_SHUTDOWN_RESPONSE,
    ApiKey.OFFSET_COMMIT: OFFSET_COMMIT_RESPONSE,
    ApiKey.OFFSET_FETCH: OFFSET_FETCH_RESPONSE,
    ApiKey.FIND_COORDINATOR: FIND_COORDINATOR_RESPONSE,
    ApiKey.JOIN_GROUP: JOIN_GROUP_RESPONSE,
    ApiKey.HEARTBEAT: HEARTBEAT_RESPONSE,
    ApiKey.LEAVE_GROUP: LEAVE_GROUP_RESPONSE,
    ApiKey.SYNC_GROUP: SYNC_GROUP_RESPONSE,
    ApiKey.DESCRIBE_GROUPS: DESCRIBE_GROUPS_RESPONSE,
    ApiKey.LIST_GROUPS: LIST_GROUPS_RESPONSE,
    ApiKey.SASL_HANDSHAKE: SASL_HANDSHAKE_RESPONSE,
    ApiKey.API_VERSIONS: API_VERSIONS_RESPONSE,
    ApiKey.CREATE_TOPICS: CREATE_TOPICS_RESPONSE,
    ApiKey.DELETE_TOPICS: DELETE_TOPICS_RESPONSE,
    ApiKey.DELETE_RECORDS: DELETE_RECORDS_RESPONSE,
    ApiKey.INIT_PRODUCER_ID: INIT_PRODUCER_ID_RESPONSE,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: OFFSET_FOR_LEADER_EPOCH_RESPONSE,
    ApiKey.ADD_PARTITIONS_TO_TXN: ADD_PARTITIONS_TO_TXN_RESPONSE,
    ApiKey.ADD_OFFSETS_TO_TXN: ADD_OFFSETS_TO_TXN_RESPONSE,
    ApiKey.END_TXN: END_TXN_RESPONSE,
    ApiKey.WRITE_TXN_MARKERS: WRITE_TXN_MARKERS_RESPONSE,
    ApiKey.TXN_OFFSET_COMMIT: TXN_OFFSET_COMMIT_RESPONSE,
    ApiKey.DESCRIBE_CONFIGS: DESCRIBE_CONFIGS_RESPONSE,
    ApiKey.ALTER_CONFIGS: ALTER_CONFIGS_RESPONSE,
    ApiKey.ALTER_REPLICA_LOG_DIRS: ALTER_REPLICA_LOG_DIRS_RESPONSE,
    ApiKey.SASL_AUTHENTICATE: SASL_AUTHENTICATE_RESPONSE,
    ApiKey.CREATE_PARTITIONS: CREATE_PARTITIONS_RESPONSE,
    ApiKey.DELETE_GROUPS: DELETE_GROUPS_RESPONSE,
    ApiKey.ELECT_LEADERS: ELECT_LEADERS_RESPONSE,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: INCREMENTAL_ALTER_CONFIGS_RESPONSE,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ALTER_PARTITION_REASSIGNMENTS_RESPONSE,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: LIST_PARTITION_REASSIGNMENTS_RESPONSE,
    ApiKey.OFFSET_DELETE: OFFSET_DELETE_RESPONSE,
    ApiKey.DESCRIBE_PRODUCERS: DESCRIBE_PRODUCERS_RESPONSE,
    ApiKey.DESCRIBE_TRANSACTIONS: DESCRIBE_TRANSACTIONS_RESPONSE,
    ApiKey.LIST_TRANSACTIONS: LIST_TRANSACTIONS_RESPONSE,
    ApiKey.DESCRIBE_LOG_DIRS: DESCRIBE_LOG_DIRS_RESPONSE,
    ApiKey.DESCRIBE_CLUSTER: DESCRIBE_CLUSTER_RESPONSE,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: DESCRIBE_CLIENT_QUOTAS_RESPONSE,
    ApiKey.ALTER_CLIENT_QUOTAS: ALTER_CLIENT_QUOTAS_RESPONSE,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ALTER_USER_SCRAM_CREDENTIALS_RESPONSE,
    ApiKey.DESCRIBE_ACLS: DESCRIBE_ACLS_RESPONSE,
    ApiKey.CREATE_ACLS: CREATE_ACLS_RESPONSE,
    ApiKey.DELETE_ACLS: DELETE_ACLS_RESPONSE,
}

def header_versions(api_key: int, api_version: int) -> Tuple[int, int]:
    """(request header version, response header version) for an API version.

    Flexible API versions use request header v2 and response header v1, except that the
    ApiVersions response header stays v0 so a client that does not yet know the broker's
    versions can always read it, and that ControlledShutdown v0 has Kafka's one non-standard
    request header, v0, which carries no client id.
    """
    request = REQUESTS.get(api_key)
    if request is None:
        raise KeyError(f"unknown API key {api_key}")
    flexible = request.is_flexible(api_version)
    response = 1 if flexible and api_key != API_VERSIONS_RESPONSE.api_key else 0
    if api_key == CONTROLLED_SHUTDOWN_REQUEST.api_key and api_version == 0:
        return 0, response
    return (2 if flexible else 1), response


def _bind() -> None:
    """Give each table its generated classes (a table the generated module does not know yet,
    while it is being regenerated, decodes to dicts only)."""
    from . import message_data
    for value in list(globals().values()):
        if isinstance(value, Schema) and value.name in message_data.BINDINGS:
            cls, structs = message_data.BINDINGS[value.name]
            value.bind(cls, structs)


_bind()
