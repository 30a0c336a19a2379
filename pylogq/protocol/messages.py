"""Message tables for the APIs pylogq speaks, in the shape of Kafka's JSON message schemas.

Only names, types and version ranges are given; :class:`~pylogq.protocol.schema.Schema` does
the rest. ``header_versions`` picks the request/response header version for an API version.
"""

from __future__ import annotations

from typing import Dict, Tuple

from .schema import Schema

__all__ = [
    "REQUEST_HEADER", "RESPONSE_HEADER",
    "API_VERSIONS_REQUEST", "API_VERSIONS_RESPONSE",
    "METADATA_REQUEST", "METADATA_RESPONSE",
    "PRODUCE_REQUEST", "PRODUCE_RESPONSE",
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
        {"name": "SupportedFeatures", "type": "[]SupportedFeatureKey", "versions": "3+",
         "tag": 0, "taggedVersions": "3+", "fields": [
            {"name": "Name", "type": "string", "versions": "3+"},
            {"name": "MinVersion", "type": "int16", "versions": "3+"},
            {"name": "MaxVersion", "type": "int16", "versions": "3+"},
        ]},
        {"name": "FinalizedFeaturesEpoch", "type": "int64", "versions": "3+",
         "tag": 1, "taggedVersions": "3+", "default": "-1"},
        {"name": "FinalizedFeatures", "type": "[]FinalizedFeatureKey", "versions": "3+",
         "tag": 2, "taggedVersions": "3+", "fields": [
            {"name": "Name", "type": "string", "versions": "3+"},
            {"name": "MaxVersionLevel", "type": "int16", "versions": "3+"},
            {"name": "MinVersionLevel", "type": "int16", "versions": "3+"},
        ]},
        {"name": "ZkMigrationReady", "type": "bool", "versions": "3+",
         "tag": 3, "taggedVersions": "3+", "default": "false"},
    ],
})

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
            {"name": "Partitions", "type": "[]MetadataResponsePartition", "versions": "0+",
             "fields": [
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
            {"name": "PartitionData", "type": "[]PartitionProduceData", "versions": "0+",
             "fields": [
                {"name": "Index", "type": "int32", "versions": "0+"},
                {"name": "Records", "type": "records", "versions": "0+",
                 "nullableVersions": "0+"},
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
                {"name": "CurrentLeader", "type": "LeaderIdAndEpoch", "versions": "10+",
                 "tag": 0, "taggedVersions": "10+", "fields": [
                    {"name": "LeaderId", "type": "int32", "versions": "10+", "default": "-1"},
                    {"name": "LeaderEpoch", "type": "int32", "versions": "10+", "default": "-1"},
                ]},
            ]},
        ]},
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+", "default": "0"},
        {"name": "NodeEndpoints", "type": "[]NodeEndpoint", "versions": "10+",
         "tag": 0, "taggedVersions": "10+", "fields": [
            {"name": "NodeId", "type": "int32", "versions": "10+"},
            {"name": "Host", "type": "string", "versions": "10+"},
            {"name": "Port", "type": "int32", "versions": "10+"},
            {"name": "Rack", "type": "string", "versions": "10+", "nullableVersions": "10+",
             "default": "null"},
        ]},
    ],
})

REQUESTS: Dict[int, Schema] = {
    s.api_key: s for s in (API_VERSIONS_REQUEST, METADATA_REQUEST, PRODUCE_REQUEST)
    if s.api_key is not None
}
RESPONSES: Dict[int, Schema] = {
    s.api_key: s for s in (API_VERSIONS_RESPONSE, METADATA_RESPONSE, PRODUCE_RESPONSE)
    if s.api_key is not None
}


def header_versions(api_key: int, api_version: int) -> Tuple[int, int]:
    """(request header version, response header version) for an API version.

    Flexible API versions use request header v2 and response header v1, except that the
    ApiVersions response header stays v0 so a client that does not yet know the broker's
    versions can always read it.
    """
    flexible = REQUESTS[api_key].is_flexible(api_version)
    response = 1 if flexible and api_key != API_VERSIONS_RESPONSE.api_key else 0
    return (2 if flexible else 1), response
