"""pylogq's error hierarchy, mirroring Kafka's protocol error codes.

Every broker-visible error is a subclass of :class:`BrokerError` that knows its
Kafka ``code``, its protocol ``name`` and whether a client may retry it
(``retriable``). ``error_for_code(code)`` maps a wire code back to its class.
A refinement raised on this side for one cause of a coded error (a lost
connection, a client-side timeout, a corrupt index) keeps its parent's code.
Errors that never cross the wire (bad arguments, a missing codec library, a
locked log directory) are plain :class:`PylogqError` subclasses.

Every exception class pylogq defines is defined here, and is imported from here:
a module that raises one does not export it again. So is :class:`RecordProblem`, the
``kind`` that :class:`CorruptRecordError` and :class:`InvalidRecordError` carry: which
check the bytes of a record batch or message failed.
"""

from __future__ import annotations

import enum
from typing import Dict, List, Optional, Sequence, Tuple, Type

__all__ = [
    "RecordProblem", "PylogqError", "BrokerError", "RetriableError", "UnknownServerError", "OffsetOutOfRangeError",
    "CorruptRecordError", "UnknownTopicOrPartitionError", "InvalidFetchSizeError",
    "LeaderNotAvailableError", "NotLeaderOrFollowerError", "NotLeaderForPartitionError",
    "RequestTimedOutError", "BrokerNotAvailableError", "ReplicaNotAvailableError",
    "MessageTooLargeError", "MessageSizeTooLargeError", "StaleControllerEpochError",
    "OffsetMetadataTooLargeError", "NetworkExceptionError", "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError", "NotCoordinatorError", "InvalidTopicError",
    "RecordListTooLargeError", "NotEnoughReplicasError", "NotEnoughReplicasAfterAppendError",
    "InvalidRequiredAcksError", "IllegalGenerationError", "InconsistentGroupProtocolError",
    "InvalidGroupIdError", "UnknownMemberIdError", "InvalidSessionTimeoutError",
    "RebalanceInProgressError", "InvalidCommitOffsetSizeError", "TopicAuthorizationFailedError",
    "GroupAuthorizationFailedError", "ClusterAuthorizationFailedError", "InvalidTimestampError",
    "UnsupportedSaslMechanismError", "IllegalSaslStateError", "UnsupportedVersionError",
    "TopicAlreadyExistsError", "InvalidPartitionsError", "InvalidReplicationFactorError",
    "InvalidReplicationAssignmentError", "InvalidConfigError", "NotControllerError", "ControllerMovedError",
    "InvalidRequestError", "UnsupportedForMessageFormatError", "PolicyViolationError",
    "OutOfOrderSequenceNumberError", "DuplicateSequenceNumberError", "InvalidProducerEpochError",
    "InvalidTxnStateError", "InvalidProducerIdMappingError", "InvalidTransactionTimeoutError",
    "ConcurrentTransactionsError", "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError", "SecurityDisabledError",
    "OperationNotAttemptedError", "KafkaStorageError", "LogDirNotFoundError",
    "SaslAuthenticationFailedError", "SslAuthenticationError", "PrincipalMappingError", "UnknownProducerIdError", "ReassignmentInProgressError",
    "DelegationTokenAuthDisabledError", "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError", "DelegationTokenRequestNotAllowedError",
    "DelegationTokenAuthorizationFailedError", "DelegationTokenExpiredError",
    "InvalidPrincipalTypeError", "NonEmptyGroupError", "GroupIdNotFoundError",
    "FetchSessionIdNotFoundError", "InvalidFetchSessionEpochError", "ListenerNotFoundError",
    "TopicDeletionDisabledError", "FencedLeaderEpochError", "UnknownLeaderEpochError",
    "UnsupportedCompressionTypeError", "StaleBrokerEpochError", "OffsetNotAvailableError",
    "MemberIdRequiredError", "PreferredLeaderNotAvailableError", "GroupMaxSizeReachedError",
    "FencedInstanceIdError", "EligibleLeadersNotAvailableError", "ElectionNotNeededError",
    "NoReassignmentInProgressError", "GroupSubscribedToTopicError", "InvalidRecordError",
    "UnstableOffsetCommitError", "ThrottlingQuotaExceededError", "ProducerFencedError",
    "ResourceNotFoundError", "DuplicateResourceError", "UnacceptableCredentialError",
    "InconsistentVoterSetError", "InvalidUpdateVersionError", "FeatureUpdateFailedError",
    "PrincipalDeserializationFailureError", "SnapshotNotFoundError", "PositionOutOfRangeError",
    "UnknownTopicIdError", "DuplicateBrokerRegistrationError", "BrokerIdNotRegisteredError",
    "InconsistentTopicIdError", "InconsistentClusterIdError", "TransactionalIdNotFoundError",
    "FetchSessionTopicIdError", "IneligibleReplicaError", "NewLeaderElectedError",
    "OffsetMovedToTieredStorageError", "FencedMemberEpochError", "UnreleasedInstanceIdError",
    "UnsupportedAssignorError", "StaleMemberEpochError", "MismatchedEndpointTypeError",
    "UnsupportedEndpointTypeError", "UnknownControllerIdError", "UnknownSubscriptionIdError",
    "TelemetryTooLargeError", "InvalidRegistrationError", "TransactionAbortableError",
    "InvalidRecordStateError", "ShareSessionNotFoundError", "InvalidShareSessionEpochError",
    "FencedStateEpochError", "InvalidVoterKeyError", "DuplicateVoterError", "VoterNotFoundError",
    "CorruptIndexError", "KafkaConnectionError", "NoBrokersAvailable", "KafkaTimeoutError",
    "BufferExhaustedError", "NoOffsetForPartitionError", "UnsupportedCodecError", "ConfigError",
    "InvalidArgumentError", "InvalidArgumentTypeError",
    "IllegalStateError", "TransactionAbortedError", "ProtocolError", "ScramError", "OffsetMapFullError", "IndexFullError",
    "InvalidIndexEntryError", "IndexClosedError", "LogClosedError", "CorruptCheckpointError", "LogDirInUseError",
    "CorruptMetadataError", "CleaningAbortedError", "CloseConnection", "InvalidConsumerProtocolError",
    "CommitFailedError", "CommandError", "DumpError", "DataLossError", "JvmReaderUnavailable", "MetadataStoreError",
    "NoNodeError", "NodeExistsError", "BadVersionError", "NotEmptyError", "NoChildrenForEphemeralsError",
    "InvalidPathError", "SessionExpiredError", "StoreConnectionError", "error_for_code"
]


class RecordProblem(enum.Enum):
    """What is wrong with bytes that fail to decode: the ``kind`` of a
    :class:`CorruptRecordError` (or of an :class:`InvalidRecordError` raised on bad bytes).

    The names, and which check gives which, are those of the JVM reader's
    ``CorruptRecordException.Kind`` (pylogq/spark/java), so one corpus of damaged bytes
    checks both decoders. Values are the names: ``RecordProblem("BAD_CRC")``.
    """

    #: An entry's stored checksum (v2: CRC-32C over the batch; v0/v1: CRC-32 over the message) is wrong.
    BAD_CRC = "BAD_CRC"
    #: An entry's magic is not 0, 1 or 2, or a message in a compressed wrapper has another magic than it.
    BAD_MAGIC = "BAD_MAGIC"
    #: An entry's length/size field is impossible: below its magic's smallest entry, negative, or
    #: past the bytes that follow (where a whole entry must be present).
    BAD_LENGTH = "BAD_LENGTH"
    #: The attributes name a compression codec that does not exist, or that the magic cannot carry.
    UNKNOWN_CODEC = "UNKNOWN_CODEC"
    #: The codec cannot decompress the payload: a truncated or corrupt stream, a bad frame or checksum.
    BAD_COMPRESSED_DATA = "BAD_COMPRESSED_DATA"
    #: Decompressing would produce more than the decompression bound.
    TOO_LARGE_DECOMPRESSED = "TOO_LARGE_DECOMPRESSED"
    #: A record's own encoding is broken: a varint, length or header that overruns or disagrees.
    BAD_RECORD = "BAD_RECORD"
    #: A v2 batch's record count disagrees with its bytes.
    BAD_RECORD_COUNT = "BAD_RECORD_COUNT"
    #: A v0/v1 wrapper holds what it may not: a null value, no inner message, a compressed or
    #: overrunning one.
    BAD_WRAPPER = "BAD_WRAPPER"


class PylogqError(Exception):
    """Base of every error pylogq raises on purpose."""


class BrokerError(PylogqError):
    """An error with a Kafka protocol error code."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    message: str = "unknown server error"
    retriable: bool = False

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or (self.message,)))

    def __str__(self) -> str:
        detail = super().__str__()
        return f"[Error {self.code}] {self.name}: {detail}"


class RetriableError(BrokerError):
    """An error a client may retry: the same request can succeed later."""

    retriable = True


class UnknownServerError(BrokerError):
    code = -1
    name = "UNKNOWN"
    message = "unknown"


class OffsetOutOfRangeError(BrokerError):
    code = 1
    name = "OFFSET_OUT_OF_RANGE"
    message = "offset out of range"


class CorruptRecordError(RetriableError):
    """Bytes that fail a CRC, size or structure check (Kafka's CORRUPT_MESSAGE).

    Raised by every decoder in pylogq on bad bytes: never a crash, never a
    silently wrong record. Retriable on the wire, as in Kafka: a client that
    saw corruption in transit may fetch or send again.
    """

    code = 2
    name = "CORRUPT_MESSAGE"
    message = "record failed its CRC, size or structure check"

    def __init__(self, *args: object, kind: Optional[RecordProblem] = None) -> None:
        super().__init__(*args)
        #: Which check the bytes failed (None when the raiser did not say).
        self.kind: Optional[RecordProblem] = kind


class UnknownTopicOrPartitionError(RetriableError):
    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    message = "unknown topic or partition"


class InvalidFetchSizeError(BrokerError):
    code = 4
    name = "INVALID_FETCH_SIZE"
    message = "invalid fetch size"


class LeaderNotAvailableError(RetriableError):
    code = 5
    name = "LEADER_NOT_AVAILABLE"
    message = "leader not available"


class NotLeaderOrFollowerError(RetriableError):
    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    message = "this broker is not the leader or a follower of the partition"


NotLeaderForPartitionError = NotLeaderOrFollowerError  # the pre-2.6 name, as kafka-python spells it


class RequestTimedOutError(RetriableError):
    code = 7
    name = "REQUEST_TIMED_OUT"
    message = "request timed out"


class BrokerNotAvailableError(BrokerError):
    code = 8
    name = "BROKER_NOT_AVAILABLE"
    message = "broker not available"


class ReplicaNotAvailableError(RetriableError):
    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    message = "replica not available"


class MessageTooLargeError(BrokerError):
    code = 10
    name = "MESSAGE_TOO_LARGE"
    message = "the request included a message larger than the maximum the server accepts"


MessageSizeTooLargeError = MessageTooLargeError  # kafka-python's name


class StaleControllerEpochError(BrokerError):
    code = 11
    name = "STALE_CONTROLLER_EPOCH"
    message = "stale controller epoch"


class OffsetMetadataTooLargeError(BrokerError):
    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"
    message = "offset metadata too large"


class NetworkExceptionError(RetriableError):
    code = 13
    name = "NETWORK_EXCEPTION"
    message = "network exception"


class CoordinatorLoadInProgressError(RetriableError):
    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    message = "coordinator load in progress"


class CoordinatorNotAvailableError(RetriableError):
    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    message = "coordinator not available"


class NotCoordinatorError(RetriableError):
    code = 16
    name = "NOT_COORDINATOR"
    message = "not coordinator"


class InvalidTopicError(BrokerError):
    code = 17
    name = "INVALID_TOPIC"
    message = "invalid topic"


class RecordListTooLargeError(BrokerError):
    code = 18
    name = "RECORD_LIST_TOO_LARGE"
    message = "record list too large"


class NotEnoughReplicasError(RetriableError):
    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    message = "not enough replicas"


class NotEnoughReplicasAfterAppendError(RetriableError):
    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    message = "not enough replicas after append"


class InvalidRequiredAcksError(BrokerError):
    code = 21
    name = "INVALID_REQUIRED_ACKS"
    message = "invalid required acks"


class IllegalGenerationError(BrokerError):
    code = 22
    name = "ILLEGAL_GENERATION"
    message = "illegal generation"


class InconsistentGroupProtocolError(BrokerError):
    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"
    message = "inconsistent group protocol"


class InvalidGroupIdError(BrokerError):
    code = 24
    name = "INVALID_GROUP_ID"
    message = "invalid group id"


class UnknownMemberIdError(BrokerError):
    code = 25
    name = "UNKNOWN_MEMBER_ID"
    message = "unknown member id"


class InvalidSessionTimeoutError(BrokerError):
    code = 26
    name = "INVALID_SESSION_TIMEOUT"
    message = "invalid session timeout"


class RebalanceInProgressError(BrokerError):
    code = 27
    name = "REBALANCE_IN_PROGRESS"
    message = "rebalance in progress"


class InvalidCommitOffsetSizeError(BrokerError):
    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"
    message = "invalid commit offset size"


class TopicAuthorizationFailedError(BrokerError):
    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"
    message = "topic authorization failed"


class GroupAuthorizationFailedError(BrokerError):
    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"
    message = "group authorization failed"


class ClusterAuthorizationFailedError(BrokerError):
    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"
    message = "cluster authorization failed"


class InvalidTimestampError(BrokerError):
    """``record_errors`` as for :class:`InvalidRecordError`: the records whose timestamps (or,
    in the same batch, keys) made it fail (KIP-467)."""

    code = 32
    name = "INVALID_TIMESTAMP"
    message = "invalid timestamp"

    def __init__(self, *args: object, record_errors: Sequence[Tuple[int, str]] = ()) -> None:
        super().__init__(*args)
        self.record_errors: List[Tuple[int, str]] = list(record_errors)


class UnsupportedSaslMechanismError(BrokerError):
    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"
    message = "unsupported sasl mechanism"


class IllegalSaslStateError(BrokerError):
    code = 34
    name = "ILLEGAL_SASL_STATE"
    message = "illegal sasl state"


class UnsupportedVersionError(BrokerError):
    code = 35
    name = "UNSUPPORTED_VERSION"
    message = "unsupported version"


class TopicAlreadyExistsError(BrokerError):
    code = 36
    name = "TOPIC_ALREADY_EXISTS"
    message = "topic already exists"


class InvalidPartitionsError(BrokerError):
    code = 37
    name = "INVALID_PARTITIONS"
    message = "invalid partitions"


class InvalidReplicationFactorError(BrokerError):
    code = 38
    name = "INVALID_REPLICATION_FACTOR"
    message = "invalid replication factor"


class InvalidReplicationAssignmentError(BrokerError):
    code = 39
    name = "INVALID_REPLICATION_ASSIGNMENT"
    message = "invalid replication assignment"


class InvalidConfigError(BrokerError):
    code = 40
    name = "INVALID_CONFIG"
    message = "invalid config"


class NotControllerError(RetriableError):
    code = 41
    name = "NOT_CONTROLLER"
    message = "not controller"


class ControllerMovedError(NotControllerError):
    """A controller's write was refused: a newer controller epoch exists (this broker's
    controller lost its election without noticing). It resigns; on the wire, NOT_CONTROLLER."""


class InvalidRequestError(BrokerError):
    code = 42
    name = "INVALID_REQUEST"
    message = "invalid request"


class UnsupportedForMessageFormatError(BrokerError):
    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    message = "unsupported for message format"


class PolicyViolationError(BrokerError):
    code = 44
    name = "POLICY_VIOLATION"
    message = "policy violation"


class OutOfOrderSequenceNumberError(BrokerError):
    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    message = "out of order sequence number"


class DuplicateSequenceNumberError(BrokerError):
    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"
    message = "duplicate sequence number"


class InvalidProducerEpochError(BrokerError):
    code = 47
    name = "INVALID_PRODUCER_EPOCH"
    message = "invalid producer epoch"


class InvalidTxnStateError(BrokerError):
    code = 48
    name = "INVALID_TXN_STATE"
    message = "invalid txn state"


class InvalidProducerIdMappingError(BrokerError):
    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"
    message = "invalid producer id mapping"


class InvalidTransactionTimeoutError(BrokerError):
    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"
    message = "invalid transaction timeout"


class ConcurrentTransactionsError(RetriableError):
    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    message = "concurrent transactions"


class TransactionCoordinatorFencedError(BrokerError):
    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"
    message = "transaction coordinator fenced"


class TransactionalIdAuthorizationFailedError(BrokerError):
    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    message = "transactional id authorization failed"


class SecurityDisabledError(BrokerError):
    code = 54
    name = "SECURITY_DISABLED"
    message = "security disabled"


class OperationNotAttemptedError(BrokerError):
    code = 55
    name = "OPERATION_NOT_ATTEMPTED"
    message = "operation not attempted"


class KafkaStorageError(RetriableError):
    code = 56
    name = "KAFKA_STORAGE_ERROR"
    message = "kafka storage error"


class LogDirNotFoundError(BrokerError):
    code = 57
    name = "LOG_DIR_NOT_FOUND"
    message = "log dir not found"


class SaslAuthenticationFailedError(BrokerError):
    code = 58
    name = "SASL_AUTHENTICATION_FAILED"
    message = "sasl authentication failed"


class UnknownProducerIdError(BrokerError):
    code = 59
    name = "UNKNOWN_PRODUCER_ID"
    message = "unknown producer id"


class ReassignmentInProgressError(BrokerError):
    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"
    message = "reassignment in progress"


class DelegationTokenAuthDisabledError(BrokerError):
    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"
    message = "delegation token auth disabled"


class DelegationTokenNotFoundError(BrokerError):
    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"
    message = "delegation token not found"


class DelegationTokenOwnerMismatchError(BrokerError):
    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"
    message = "delegation token owner mismatch"


class DelegationTokenRequestNotAllowedError(BrokerError):
    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    message = "delegation token request not allowed"


class DelegationTokenAuthorizationFailedError(BrokerError):
    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
    message = "delegation token authorization failed"


class DelegationTokenExpiredError(BrokerError):
    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"
    message = "delegation token expired"


class InvalidPrincipalTypeError(BrokerError):
    code = 67
    name = "INVALID_PRINCIPAL_TYPE"
    message = "invalid principal type"


class NonEmptyGroupError(BrokerError):
    code = 68
    name = "NON_EMPTY_GROUP"
    message = "non empty group"


class GroupIdNotFoundError(BrokerError):
    code = 69
    name = "GROUP_ID_NOT_FOUND"
    message = "group id not found"


class FetchSessionIdNotFoundError(RetriableError):
    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"
    message = "fetch session id not found"


class InvalidFetchSessionEpochError(RetriableError):
    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"
    message = "invalid fetch session epoch"


class ListenerNotFoundError(RetriableError):
    code = 72
    name = "LISTENER_NOT_FOUND"
    message = "listener not found"


class TopicDeletionDisabledError(BrokerError):
    code = 73
    name = "TOPIC_DELETION_DISABLED"
    message = "topic deletion disabled"


class FencedLeaderEpochError(RetriableError):
    code = 74
    name = "FENCED_LEADER_EPOCH"
    message = "fenced leader epoch"


class UnknownLeaderEpochError(RetriableError):
    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    message = "unknown leader epoch"


class UnsupportedCompressionTypeError(BrokerError):
    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
    message = "unsupported compression type"


class StaleBrokerEpochError(BrokerError):
    code = 77
    name = "STALE_BROKER_EPOCH"
    message = "stale broker epoch"


class OffsetNotAvailableError(RetriableError):
    code = 78
    name = "OFFSET_NOT_AVAILABLE"
    message = "offset not available"


class MemberIdRequiredError(BrokerError):
    code = 79
    name = "MEMBER_ID_REQUIRED"
    message = "member id required"


class PreferredLeaderNotAvailableError(RetriableError):
    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    message = "preferred leader not available"


class GroupMaxSizeReachedError(BrokerError):
    code = 81
    name = "GROUP_MAX_SIZE_REACHED"
    message = "group max size reached"


class FencedInstanceIdError(BrokerError):
    code = 82
    name = "FENCED_INSTANCE_ID"
    message = "fenced instance id"


class EligibleLeadersNotAvailableError(RetriableError):
    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    message = "eligible leaders not available"


class ElectionNotNeededError(RetriableError):
    code = 84
    name = "ELECTION_NOT_NEEDED"
    message = "election not needed"


class NoReassignmentInProgressError(BrokerError):
    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"
    message = "no reassignment in progress"


class GroupSubscribedToTopicError(BrokerError):
    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"
    message = "group subscribed to topic"


class InvalidRecordError(BrokerError):
    """``record_errors``: (index of the record in its batch, why) for every record that made the
    batch fail, as Produce v8+ reports them (KIP-467); empty when the fault is the batch's. A
    client fails the records listed with this error and the others of the batch as failed by
    another's (librdkafka's ``_INVALID_DIFFERENT_RECORD``)."""

    code = 87
    name = "INVALID_RECORD"
    message = "invalid record"

    def __init__(self, *args: object, record_errors: Sequence[Tuple[int, str]] = (),
                 kind: Optional[RecordProblem] = None) -> None:
        super().__init__(*args)
        self.record_errors: List[Tuple[int, str]] = list(record_errors)
        #: Which check the bytes failed, when the fault is in the bytes (None otherwise).
        self.kind: Optional[RecordProblem] = kind


class UnstableOffsetCommitError(RetriableError):
    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    message = "unstable offset commit"


class ThrottlingQuotaExceededError(RetriableError):
    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"
    message = "throttling quota exceeded"


class ProducerFencedError(BrokerError):
    code = 90
    name = "PRODUCER_FENCED"
    message = "producer fenced"


class ResourceNotFoundError(BrokerError):
    code = 91
    name = "RESOURCE_NOT_FOUND"
    message = "resource not found"


class DuplicateResourceError(BrokerError):
    code = 92
    name = "DUPLICATE_RESOURCE"
    message = "duplicate resource"


class UnacceptableCredentialError(BrokerError):
    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"
    message = "unacceptable credential"


class InconsistentVoterSetError(BrokerError):
    code = 94
    name = "INCONSISTENT_VOTER_SET"
    message = "inconsistent voter set"


class InvalidUpdateVersionError(BrokerError):
    code = 95
    name = "INVALID_UPDATE_VERSION"
    message = "invalid update version"


class FeatureUpdateFailedError(BrokerError):
    code = 96
    name = "FEATURE_UPDATE_FAILED"
    message = "feature update failed"


class PrincipalDeserializationFailureError(BrokerError):
    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"
    message = "principal deserialization failure"


class SnapshotNotFoundError(BrokerError):
    code = 98
    name = "SNAPSHOT_NOT_FOUND"
    message = "snapshot not found"


class PositionOutOfRangeError(BrokerError):
    code = 99
    name = "POSITION_OUT_OF_RANGE"
    message = "position out of range"


class UnknownTopicIdError(RetriableError):
    code = 100
    name = "UNKNOWN_TOPIC_ID"
    message = "unknown topic id"


class DuplicateBrokerRegistrationError(BrokerError):
    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"
    message = "duplicate broker registration"


class BrokerIdNotRegisteredError(BrokerError):
    code = 102
    name = "BROKER_ID_NOT_REGISTERED"
    message = "broker id not registered"


class InconsistentTopicIdError(RetriableError):
    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    message = "inconsistent topic id"


class InconsistentClusterIdError(BrokerError):
    code = 104
    name = "INCONSISTENT_CLUSTER_ID"
    message = "inconsistent cluster id"


class TransactionalIdNotFoundError(BrokerError):
    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"
    message = "transactional id not found"


class FetchSessionTopicIdError(RetriableError):
    code = 106
    name = "FETCH_SESSION_TOPIC_ID_ERROR"
    message = "fetch session topic id error"


class IneligibleReplicaError(BrokerError):
    code = 107
    name = "INELIGIBLE_REPLICA"
    message = "ineligible replica"


class NewLeaderElectedError(BrokerError):
    code = 108
    name = "NEW_LEADER_ELECTED"
    message = "new leader elected"


class OffsetMovedToTieredStorageError(BrokerError):
    code = 109
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"
    message = "offset moved to tiered storage"


class FencedMemberEpochError(BrokerError):
    code = 110
    name = "FENCED_MEMBER_EPOCH"
    message = "fenced member epoch"


class UnreleasedInstanceIdError(BrokerError):
    code = 111
    name = "UNRELEASED_INSTANCE_ID"
    message = "unreleased instance id"


class UnsupportedAssignorError(BrokerError):
    code = 112
    name = "UNSUPPORTED_ASSIGNOR"
    message = "unsupported assignor"


class StaleMemberEpochError(BrokerError):
    code = 113
    name = "STALE_MEMBER_EPOCH"
    message = "stale member epoch"


class MismatchedEndpointTypeError(BrokerError):
    code = 114
    name = "MISMATCHED_ENDPOINT_TYPE"
    message = "mismatched endpoint type"


class UnsupportedEndpointTypeError(BrokerError):
    code = 115
    name = "UNSUPPORTED_ENDPOINT_TYPE"
    message = "unsupported endpoint type"


class UnknownControllerIdError(BrokerError):
    code = 116
    name = "UNKNOWN_CONTROLLER_ID"
    message = "unknown controller id"


class UnknownSubscriptionIdError(BrokerError):
    code = 117
    name = "UNKNOWN_SUBSCRIPTION_ID"
    message = "unknown subscription id"


class TelemetryTooLargeError(BrokerError):
    code = 118
    name = "TELEMETRY_TOO_LARGE"
    message = "telemetry too large"


class InvalidRegistrationError(BrokerError):
    code = 119
    name = "INVALID_REGISTRATION"
    message = "invalid registration"


class TransactionAbortableError(BrokerError):
    code = 120
    name = "TRANSACTION_ABORTABLE"
    message = "transaction abortable"


class InvalidRecordStateError(BrokerError):
    code = 121
    name = "INVALID_RECORD_STATE"
    message = "invalid record state"


class ShareSessionNotFoundError(RetriableError):
    code = 122
    name = "SHARE_SESSION_NOT_FOUND"
    message = "share session not found"


class InvalidShareSessionEpochError(RetriableError):
    code = 123
    name = "INVALID_SHARE_SESSION_EPOCH"
    message = "invalid share session epoch"


class FencedStateEpochError(BrokerError):
    code = 124
    name = "FENCED_STATE_EPOCH"
    message = "fenced state epoch"


class InvalidVoterKeyError(BrokerError):
    code = 125
    name = "INVALID_VOTER_KEY"
    message = "invalid voter key"


class DuplicateVoterError(BrokerError):
    code = 126
    name = "DUPLICATE_VOTER"
    message = "duplicate voter"


class VoterNotFoundError(BrokerError):
    code = 127
    name = "VOTER_NOT_FOUND"
    message = "voter not found"


# --------------------------------------------------------------------------- refinements of a code
# Raised on this side of the wire for one cause of a coded error; each keeps its
# parent's code, so error_for_code still names the parent.


class CorruptIndexError(CorruptRecordError):
    """An index file whose size or entries break the index's invariants.

    The segment's recovery rebuilds such an index from its log file.
    """


class KafkaConnectionError(NetworkExceptionError):
    """A broker connection could not be opened or was lost; retriable (another try reconnects)."""


class NoBrokersAvailable(KafkaConnectionError):
    """None of the bootstrap servers answered."""


class PrincipalMappingError(PylogqError):
    """No rule of ``ssl.principal.mapping.rules`` gives a name for a client certificate's
    subject: the broker refuses the client, as Kafka does."""


class SslAuthenticationError(BrokerError):
    """The TLS handshake with a broker failed: a certificate one side does not trust (unknown
    CA, expired, a host name it does not name), no protocol or cipher in common, or a
    listener that does not speak TLS. Kafka's SslAuthenticationException: an authentication
    error, not a lost connection, and not retriable (the same handshake fails again). It has
    no code of its own on the wire: a broker closes the connection."""

    name = "SSL_AUTHENTICATION_FAILED"
    message = "SSL handshake failed"


class KafkaTimeoutError(RequestTimedOutError):
    """A client-side wait ran out: ``future.get``, ``flush``, or a batch past ``delivery_timeout_ms``."""


class BufferExhaustedError(KafkaTimeoutError):
    """``send`` waited ``max_block_ms`` for ``buffer_memory`` to free up, in vain."""


class NoOffsetForPartitionError(OffsetOutOfRangeError):
    """A partition has no committed offset and ``auto_offset_reset`` is ``none``."""


# --------------------------------------------------------------------------- local errors
# Errors that never cross the wire, by the layer that raises them. Those that
# also derive from a builtin (ValueError, RuntimeError) keep callers that catch
# the builtin correct.


class UnsupportedCodecError(PylogqError):
    """A compression codec that is unknown or whose library is not installed."""


class ConfigError(PylogqError, ValueError):
    """A configuration key that is unknown or a value of the wrong type or range."""


class InvalidArgumentError(PylogqError, ValueError):
    """An argument of a public call whose value is out of range or malformed.

    The message names the argument and shows the value (``"partition must be an int >= 0,
    not -1"``). A ValueError too, so callers that catch the builtin stay correct.
    """


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of a public call whose type is wrong: a str where bytes go, a name for a list.

    A TypeError too, as Python's own is; and an :class:`InvalidArgumentError`, so one
    ``except InvalidArgumentError`` catches every bad argument.
    """


class IllegalStateError(PylogqError, RuntimeError):
    """A call that a client's state does not allow: a closed producer, a seek on an unassigned partition."""


class TransactionAbortedError(PylogqError):
    """A record's batch was dropped unsent because its transaction was aborted (Kafka's
    ``TransactionAbortedException``)."""


class ProtocolError(PylogqError):
    """A protocol buffer is truncated or malformed."""


class ScramError(PylogqError):
    """A SCRAM message or credential that cannot be used (the text says why): a broker
    answers SASL_AUTHENTICATION_FAILED with Kafka's text, a client fails its connection."""


class OffsetMapFullError(PylogqError):
    """An insert into a compaction offset map that has no free slot left."""


class IndexFullError(PylogqError, ValueError):
    """An append to an index that has no free entry left (the segment must roll)."""


class InvalidIndexEntryError(PylogqError, ValueError):
    """An entry that would break the index's order or does not fit its 32-bit fields."""


class LogClosedError(PylogqError, ValueError):
    """An operation on a log or a log manager after ``close()``.

    A ValueError too, as a closed file's is.
    """


class IndexClosedError(PylogqError, ValueError):
    """An operation on an index after ``close()`` or ``delete()``.

    A ValueError too, as a closed mmap's is: a reader that lost a race with a
    segment's deletion catches ValueError and looks again.
    """


class CorruptCheckpointError(PylogqError):
    """A checkpoint file that does not parse: wrong version, count mismatch, bad line."""

    def __init__(self, path: str, line: Optional[int], problem: str) -> None:
        self.path = path
        self.line = line
        self.problem = problem
        where = "%s, line %d" % (path, line) if line is not None else path
        super().__init__("corrupt checkpoint file %s: %s" % (where, problem))


class LogDirInUseError(PylogqError):
    """A log directory is locked by another process (or another manager in this one)."""


class CorruptMetadataError(PylogqError):
    """A broker metadata file (``meta.properties``, ``pylogq-topics.json``, the producer-id
    file) that cannot be read: the broker does not start.

    The message is one line naming the file, what is wrong and what the operator can do
    (``remedy``), which ``pylogq-broker`` prints as it is.
    """

    def __init__(self, path: str, problem: str, remedy: str) -> None:
        self.path = path
        self.problem = problem
        self.remedy = remedy
        super().__init__("cannot read %s: %s; %s" % (path, problem, remedy))


class CleaningAbortedError(PylogqError):
    """A clean stopped before its swap: aborted, shut down, or the log changed under it."""


class CloseConnection(PylogqError):
    """Raised by a server handler to end its connection (after earlier responses are written)."""


class InvalidConsumerProtocolError(PylogqError, ValueError):
    """Consumer protocol bytes that do not parse, or values they cannot hold."""


class CommitFailedError(PylogqError):
    """A group commit was refused because the group rebalanced; the partitions may have moved."""


class CommandError(PylogqError):
    """A tool's request that cannot be carried out; the message is printed as is, exit status 1."""


class DumpError(PylogqError):
    """A file that cannot be dumped at all (missing, unreadable, misnamed): exit status 1."""


class DataLossError(PylogqError):
    """Records of a split were deleted (retention, DeleteRecords, topic deletion) before a task read them.

    Spark's Kafka source fails the query in this case unless
    ``failOnDataLoss`` is false; so does :func:`pylogq.spark.splits.read_split`
    unless ``fail_on_data_loss=False``. ``start`` and ``end`` bound the lost
    offsets (``end`` exclusive).
    """

    def __init__(self, message: str, topic: str = "", partition: int = -1, start: int = -1, end: int = -1) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


class JvmReaderUnavailable(PylogqError):
    """pylogq's JVM reader for Spark cannot be built here (no JDK, no PySpark), or the session lacks it.

    :func:`pylogq.spark.jvm.jar_path` raises it with what to install;
    ``read_topic(engine="jvm")`` with how to start a session that has it.
    """


# --------------------------------------------------------------------------- metadata store
# The errors of the cluster's metadata store (pylogq.cluster.zk.store): ZooKeeper's
# KeeperException codes, raised alike by the in-memory store and the ZooKeeper one.


class MetadataStoreError(PylogqError):
    """A metadata store call that failed; ``path`` is the znode it was about ("" for none)."""

    #: What went wrong, before the path in the message.
    problem: str = "metadata store error"

    def __init__(self, path: str = "", detail: str = "") -> None:
        self.path = path
        message = "%s: %s" % (self.problem, path) if path else self.problem
        super().__init__(message + ("; " + detail if detail else ""))


class NoNodeError(MetadataStoreError):
    """The znode (or, for a create, its parent) does not exist (ZooKeeper's NONODE)."""

    problem = "no such znode"


class NodeExistsError(MetadataStoreError):
    """A create of a znode that exists already (NODEEXISTS)."""

    problem = "znode exists already"


class BadVersionError(MetadataStoreError):
    """A conditional set, delete or check whose expected version is not the znode's (BADVERSION)."""

    problem = "znode version does not match"


class NotEmptyError(MetadataStoreError):
    """A delete of a znode that has children, without ``recursive`` (NOTEMPTY)."""

    problem = "znode has children"


class NoChildrenForEphemeralsError(MetadataStoreError):
    """A create under an ephemeral znode, which may have no children (NOCHILDRENFOREPHEMERALS)."""

    problem = "ephemeral znodes have no children"


class InvalidPathError(MetadataStoreError, ValueError):
    """A path ZooKeeper refuses: relative, a trailing or doubled ``/``, ``.`` or ``..``, control
    characters, or the root where a node is needed (BADARGUMENTS)."""

    problem = "invalid znode path"


class SessionExpiredError(MetadataStoreError):
    """The call's session ended (expired or closed) before it was answered (SESSIONEXPIRED).

    The store's next session starts without the old one's ephemerals and watches.
    """

    problem = "metadata store session expired"


class StoreConnectionError(MetadataStoreError):
    """The store could not be reached: no connection within the timeout, or the connection
    was lost before the call was answered (CONNECTIONLOSS; a write may or may not have been applied).

    ``path`` is the connect string for a failed connect, the call's znode otherwise.
    """

    problem = "metadata store not reachable"


def _index() -> Dict[int, Type[BrokerError]]:
    table: Dict[int, Type[BrokerError]] = {}
    stack = [BrokerError]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls not in (BrokerError, RetriableError) and "code" in vars(cls):  # not a refinement
            table.setdefault(cls.code, cls)
    return table


_BY_CODE = _index()


def error_for_code(code: int) -> Optional[Type[BrokerError]]:
    """The error class for a Kafka error code; None for 0 (no error).

    An unknown code maps to :class:`UnknownServerError` so a newer broker's
    code never crashes a decoder.
    """
    if code == 0:
        return None
    return _BY_CODE.get(code, UnknownServerError)
