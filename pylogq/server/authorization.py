"""Authorization of requests: what each API needs, asked of the broker's authorizer.

The handlers ask through one :class:`Authorization` (``self.authz``): may this connection
do this operation on this resource, which of these names may it, which operations may it
do on a resource (the authorized-operations answers). Without an authorizer
(``authorizer.class.name`` empty, the default) everything is allowed: the hot handlers
(Produce, Fetch, ListOffsets, the offset commits and fetches) test
:attr:`Authorization.enabled` and skip the question, taking :data:`NOTHING_REFUSED`. The
principal is the connection's (:attr:`Connection.principal`), the host its peer's
address, as Kafka's AclAuthorizer sees them.

The APIs that one operation on the cluster resource covers whole (Kafka's
``authorizeClusterOperation``) are listed once in :data:`CLUSTER_CHECKS`, and
:func:`refused` builds each one's refusal as Kafka's ``getErrorResponse`` does; with an
authorizer the dispatcher puts the check in front of their handlers, so a refused request
changes nothing (without one, no request pays for it). Every other API checks its own
resources in its handler (topics, groups, transactional ids), where Kafka's KafkaApis
does.

The brokers of a cluster that reach each other without SASL and without client
certificates carry no principal of their own: a ``User:ANONYMOUS`` connection that came
in on the listener the other brokers use (``inter.broker.listener.name``, else the one
``security.inter.broker.protocol`` names) is granted CLUSTER_ACTION on the cluster,
which is what the inter-broker requests need (LeaderAndIsr, UpdateMetadata,
StopReplica, ControlledShutdown, a follower's Fetch and OffsetForLeaderEpoch, a
transaction coordinator's WriteTxnMarkers), and
nothing else. A connection with a principal (a SASL user, a client certificate's
subject) is authorized as that principal, as Kafka does: brokers that show certificates
or log in are named in ``super.users``. A secured cluster keeps the inter-broker listener
for the brokers (docs/security.md).
"""

from __future__ import annotations

from typing import AbstractSet, Callable, Dict, FrozenSet, Iterable, Optional, Tuple

from .. import errors
from ..cluster.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    operations_bits,
)
from ..cluster.contract import ServedBroker
from ..protocol import RESPONSES, ApiKey
from ..protocol import message_data as msg
from ..protocol.schema import Message
from .connection import Connection
from .context import ServerContext
from .ssl_principal import ANONYMOUS

__all__ = ["CLUSTER_CHECKS", "NOTHING_REFUSED", "Authorization", "refused"]

_CLUSTER = ResourceType.CLUSTER
_OP = AclOperation
#: What :meth:`Authorization.refused_names` answers without an authorizer; the hot handlers
#: take it without asking when :attr:`Authorization.enabled` is false.
NOTHING_REFUSED: FrozenSet[str] = frozenset()
# Every operation each resource type supports, as bits: the authorized operations without an authorizer.
_ALL_OPERATIONS: Dict[ResourceType, int] = {t: operations_bits(ops) for t, ops in SUPPORTED_OPERATIONS.items()}

#: The APIs one operation on the cluster resource authorizes whole (Kafka's KafkaApis and AclApis).
CLUSTER_CHECKS: Dict[int, AclOperation] = {
    ApiKey.LEADER_AND_ISR: _OP.CLUSTER_ACTION,
    ApiKey.STOP_REPLICA: _OP.CLUSTER_ACTION,
    ApiKey.UPDATE_METADATA: _OP.CLUSTER_ACTION,
    ApiKey.CONTROLLED_SHUTDOWN: _OP.CLUSTER_ACTION,
    ApiKey.WRITE_TXN_MARKERS: _OP.CLUSTER_ACTION,
    ApiKey.DESCRIBE_ACLS: _OP.DESCRIBE,
    ApiKey.CREATE_ACLS: _OP.ALTER,
    ApiKey.DELETE_ACLS: _OP.ALTER,
    ApiKey.ALTER_REPLICA_LOG_DIRS: _OP.ALTER,
    ApiKey.DESCRIBE_LOG_DIRS: _OP.DESCRIBE,
    ApiKey.ELECT_LEADERS: _OP.ALTER,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _OP.ALTER,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _OP.DESCRIBE,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _OP.DESCRIBE,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _OP.ALTER,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _OP.DESCRIBE_CONFIGS,
    ApiKey.ALTER_CLIENT_QUOTAS: _OP.ALTER_CONFIGS,
}


class Authorization:
    """The handlers' questions to the broker's authorizer (any thread; quick: a cache).

    The broker's authorizer is made with the broker, before any server: whether there is
    one (:attr:`enabled`) is fixed for the life of this object."""

    def __init__(self, server: ServerContext) -> None:
        self.server = server
        self.broker: ServedBroker = server.broker
        #: Whether the broker has an authorizer; without one every request is allowed.
        self.enabled = self.broker.authorizer is not None
        # The inter-broker listener's name once the broker has registered (it does not change:
        # the server checked it is one of its listeners).
        self._inter_broker_listener: Optional[str] = None

    def allowed(self, conn: Connection, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        if resource_type == _CLUSTER and operation == _OP.CLUSTER_ACTION and self.from_broker(conn):
            return True
        return authorizer.authorize(conn.principal, conn.peer_host, operation, resource_type, name)

    def cluster(self, conn: Connection, operation: AclOperation) -> bool:
        return self.allowed(conn, operation, _CLUSTER, CLUSTER_NAME)

    def refused_names(self, conn: Connection, operation: AclOperation, resource_type: ResourceType,
                      names: Iterable[Optional[str]]) -> AbstractSet[str]:
        """The names among ``names`` the connection may not do ``operation`` on (none without an authorizer)."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return NOTHING_REFUSED
        principal, host = conn.principal, conn.peer_host
        return {n for n in set(names) if n is not None
                and not authorizer.authorize(principal, host, operation, resource_type, n)}

    def any_of_type(self, conn: Connection, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: some resource of the type allows the operation."""
        authorizer = self.broker.authorizer
        return authorizer is None or authorizer.authorize_any(conn.principal, conn.peer_host, operation,
                                                              resource_type)

    def operations(self, conn: Connection, resource_type: ResourceType, name: str) -> int:
        """The authorized-operations bits of a resource: every operation the type supports
        without an authorizer (what Kafka answers then), else those the connection may do."""
        if not self.enabled:
            return _ALL_OPERATIONS[resource_type]
        return operations_bits(op for op in SUPPORTED_OPERATIONS[resource_type]
                               if self.allowed(conn, op, resource_type, name))

    def cluster_operations(self, conn: Connection) -> int:
        """The cluster's authorized operations as Metadata and DescribeCluster answer them:
        0 without DESCRIBE on the cluster, as Kafka answers."""
        if not self.cluster(conn, _OP.DESCRIBE):
            return 0
        return self.operations(conn, _CLUSTER, CLUSTER_NAME)

    def from_broker(self, conn: Connection) -> bool:
        """A connection of another broker: without a principal of its own (``User:ANONYMOUS``:
        no SASL user, no client certificate), on the inter-broker listener."""
        if conn.principal != ANONYMOUS:
            return False
        listener = self._inter_broker_listener
        if listener is None:
            listener = self._inter_broker_listener = self.broker.inter_broker_listener()
            if listener is None:  # a single node, or not registered yet
                return False
        return conn.listener.name == listener


# -- refusals of a whole request, as Kafka's getErrorResponse builds them ------------------------

def _top_level(api_key: int, version: int, exc: errors.BrokerError) -> Message:
    cls = RESPONSES[api_key].cls
    assert cls is not None
    answer: Message = cls()
    setattr(answer, "error_code", exc.code)
    if RESPONSES[api_key].has_field("error_message", version):
        setattr(answer, "error_message", str(exc))
    return answer


def _create_acls(req: Message, version: int, exc: errors.BrokerError) -> Message:
    assert isinstance(req, msg.CreateAclsRequest)
    return msg.CreateAclsResponse(throttle_time_ms=0, results=[
        msg.CreateAclsResponse.AclCreationResult(error_code=exc.code, error_message=str(exc)) for _ in req.creations])


def _delete_acls(req: Message, version: int, exc: errors.BrokerError) -> Message:
    assert isinstance(req, msg.DeleteAclsRequest)
    return msg.DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        msg.DeleteAclsResponse.DeleteAclsFilterResult(error_code=exc.code, error_message=str(exc), matching_acls=[])
        for _ in req.filters])


def _alter_replica_log_dirs(req: Message, version: int, exc: errors.BrokerError) -> Message:
    assert isinstance(req, msg.AlterReplicaLogDirsRequest)
    by_topic: Dict[str, Dict[int, None]] = {}
    for d in req.dirs:
        for t in d.topics:
            by_topic.setdefault(t.name, {}).update(dict.fromkeys(t.partitions))
    R = msg.AlterReplicaLogDirsResponse
    return R(throttle_time_ms=0, results=[R.AlterReplicaLogDirTopicResult(topic_name=t, partitions=[
        R.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=exc.code) for p in ps])
        for t, ps in by_topic.items()])


def _elect_leaders(req: Message, version: int, exc: errors.BrokerError) -> Message:
    assert isinstance(req, msg.ElectLeadersRequest)
    R = msg.ElectLeadersResponse
    return R(throttle_time_ms=0, error_code=exc.code, replica_election_results=[
        R.ReplicaElectionResult(topic=t.topic, partition_result=[
            R.PartitionResult(partition_id=p, error_code=exc.code, error_message=None) for p in t.partitions])
        for t in req.topic_partitions or []])


def _alter_partition_reassignments(req: Message, version: int, exc: errors.BrokerError) -> Message:
    assert isinstance(req, msg.AlterPartitionReassignmentsRequest)
    R = msg.AlterPartitionReassignmentsResponse
    return R(throttle_time_ms=0, error_code=exc.code, error_message=str(exc), responses=[
        R.ReassignableTopicResponse(name=t.name, partitions=[
            R.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=exc.code,
                                            error_message=str(exc)) for p in t.partitions])
        for t in req.topics])


def _alter_user_scram_credentials(req: Message, version: int, exc: errors.BrokerError) -> Message:
    assert isinstance(req, msg.AlterUserScramCredentialsRequest)
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    R = msg.AlterUserScramCredentialsResponse
    return R(throttle_time_ms=0, results=[
        R.AlterUserScramCredentialsResult(user=u, error_code=exc.code, error_message=str(exc)) for u in users])


def _alter_client_quotas(req: Message, version: int, exc: errors.BrokerError) -> Message:
    assert isinstance(req, msg.AlterClientQuotasRequest)
    R = msg.AlterClientQuotasResponse
    return R(throttle_time_ms=0, entries=[R.EntryData(error_code=exc.code, error_message=str(exc), entity=[
        R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in req.entries])


def _write_txn_markers(req: Message, version: int, exc: errors.BrokerError) -> Message:
    assert isinstance(req, msg.WriteTxnMarkersRequest)
    R = msg.WriteTxnMarkersResponse
    return R(markers=[R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
        R.WritableTxnMarkerTopicResult(name=t.name, partitions=[
            R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=exc.code) for p in t.partition_indexes])
        for t in m.topics]) for m in req.markers])


_REFUSALS: Dict[int, Callable[[Message, int, errors.BrokerError], Message]] = {
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.CREATE_ACLS: _create_acls,
    ApiKey.DELETE_ACLS: _delete_acls,
    ApiKey.ALTER_REPLICA_LOG_DIRS: _alter_replica_log_dirs,
    ApiKey.ELECT_LEADERS: _elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _alter_partition_reassignments,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_user_scram_credentials,
    ApiKey.ALTER_CLIENT_QUOTAS: _alter_client_quotas,
}


def refused(api_key: int, req: Message, version: int, operation: AclOperation) -> Tuple[Message, errors.BrokerError]:
    """The answer to a request of :data:`CLUSTER_CHECKS` refused its cluster operation."""
    exc = errors.ClusterAuthorizationFailedError(
        "Request %s is not authorized: it needs %s on the cluster" % (ApiKey(api_key).name, operation.name))
    build = _REFUSALS.get(api_key)
    return (build(req, version, exc) if build is not None else _top_level(api_key, version, exc)), exc
