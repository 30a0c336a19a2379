"""``pylogq.AdminClient``: topics, configs, consumer groups, records and transactions, administered.

Shaped like kafka-python's ``KafkaAdminClient`` so code can switch between
the two: the same method names, keyword arguments and request classes
(``NewTopic``, ``NewPartitions``, ``ConfigResource``; kafka-python's own
instances are accepted too, by their attributes). Every call goes through a
:class:`~pylogq.client.transport.Transport`, so the client works the same
against a :class:`pylogq.Broker` in this process and, later, over TCP.

Batch operations (``create_topics``, ``delete_topics``, ``create_partitions``,
``alter_configs``, ``delete_consumer_groups``, ``alter_partition_reassignments``)
are per item, as on the wire:
every item is attempted, the result maps each one to ``None`` or its error,
and with ``raise_errors=True`` (the default, as in kafka-python) the first
error is raised once all items were attempted. Errors are the classes of
:mod:`pylogq.errors`, which carry Kafka's codes and names.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

from .. import errors
from ..cluster.contract import (
    BrokerConfigEntry,
    BrokerNode,
    ProducerDescription,
    QuotaAlteration,
    QuotaFilterComponent,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    TransactionListing,
    TxnMarker,
)
from ..cluster.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from ..cluster.acl import ResourcePattern as _Pattern
from ..cluster.acl import ResourcePatternFilter as _PatternFilter
from ..cluster.names import INTERNAL_TOPICS, collides, validate_topic_name
from ..cluster.replica_assignment import check_added_assignment, check_new_assignment
from ..errors import ConfigError
from ..config import LogConfig, to_string
from ..protocol.constants import AlterConfigOp, ConfigResourceType
from ..protocol.scram import MAX_ITERATIONS, MECHANISMS, salted_password
from . import assignors
from .consumer import OffsetAndMetadata, TopicPartition
from .transaction_manager import offsets_of
from .transport import TCP_OPTIONS, Transport, connect

__all__ = [
    "ACL",
    "ACLFilter",
    "ACLOperation",
    "ACLPermissionType",
    "ACLResourcePatternType",
    "AdminClient",
    "AlterConfigOp",
    "ConfigResource",
    "ConfigResourceType",
    "DescribedTransaction",
    "GroupInformation",
    "MemberInformation",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "ProducerDescription",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "TopicPartition",
    "TRANSACTION_STATES",
    "TransactionListing",
    "UserScramCredentialDeletion",
    "ClientQuotaAlteration",
    "ClientQuotaEntity",
    "ClientQuotaFilterComponent",
    "UserScramCredentialUpsertion",
]

OFFSETS_TOPIC = "__consumer_offsets"


class MemberInformation(NamedTuple):
    """One group member; metadata and assignment decoded for ``consumer`` groups."""

    member_id: str
    client_id: str
    client_host: str
    member_metadata: Any  # assignors.Subscription, or the raw bytes
    member_assignment: Any  # assignors.Assignment, or the raw bytes


class GroupInformation(NamedTuple):
    """One group as DescribeGroups reports it; an unknown group has state ``Dead``."""

    error_code: int
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: List[MemberInformation]
    authorized_operations: Optional[List[Any]] = None


#: The states of a transactional id as Kafka's admin clients name them (a ListTransactions filter).
TRANSACTION_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
                      "PrepareEpochFence")


class DescribedTransaction(NamedTuple):
    """One transactional id as its coordinator describes it (Kafka's TransactionDescription).

    ``error`` set (TransactionalIdNotFoundError for an id no producer has used, or whose
    state expired): the other fields are unset. ``transaction_start_time_ms`` is None and
    ``partitions`` empty with no transaction under way; ``partitions`` are those of the
    ongoing transaction, or those still waiting for their markers while it commits or aborts.
    """

    transactional_id: str
    coordinator_id: int
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: Optional[int] = None
    partitions: List[TopicPartition] = []
    error: Optional[errors.BrokerError] = None


class NewTopic:
    """A topic to create: partitions and replication factor (-1: the broker's default),
    or explicit ``replica_assignments`` ``{partition: [broker ids]}``, and config overrides."""

    def __init__(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                 replica_assignments: Optional[Mapping[int, Sequence[int]]] = None,
                 topic_configs: Optional[Mapping[str, Any]] = None) -> None:
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.replica_assignments = dict(replica_assignments or {})
        self.topic_configs = dict(topic_configs or {})

    def __repr__(self) -> str:
        return "NewTopic(%r, num_partitions=%r, replication_factor=%r, topic_configs=%r)" % (
            self.name, self.num_partitions, self.replication_factor, self.topic_configs)


class NewPartitions:
    """The new partition total of an existing topic (it only grows); ``new_assignments``
    lists the replicas of each added partition."""

    def __init__(self, total_count: int, new_assignments: Optional[Sequence[Sequence[int]]] = None) -> None:
        self.total_count = total_count
        self.new_assignments = new_assignments

    def __repr__(self) -> str:
        return "NewPartitions(%r, new_assignments=%r)" % (self.total_count, self.new_assignments)


class ConfigResource:
    """A resource whose configs are described or altered: its type, name and
    ``configs`` (keys to describe, or ``{key: value}`` / ``{key: (op, value)}`` to alter)."""

    def __init__(self, resource_type: Union[ConfigResourceType, int, str], name: str,
                 configs: Optional[Any] = None) -> None:
        self.resource_type = _resource_type(resource_type)
        self.name = name
        self.configs = configs

    def __repr__(self) -> str:
        return "ConfigResource(%s, %r, %r)" % (self.resource_type.name, self.name, self.configs)


def _resource_type(value: Any) -> ConfigResourceType:
    """``value`` as a ConfigResourceType: ours, kafka-python's (an IntEnum), an int or a name."""
    try:
        if isinstance(value, str):
            return ConfigResourceType[value.upper()]
        return ConfigResourceType(int(value))
    except (KeyError, ValueError, TypeError):
        raise ConfigError("unknown config resource type %r; expected one of %s"
                          % (value, ", ".join(t.name for t in ConfigResourceType))) from None


def _broker_id_of(resource: Any) -> int:
    name = getattr(resource, "name", None)
    try:
        return int(str(name))
    except ValueError:
        raise errors.InvalidRequestError("a BROKER resource is named by a broker id, not %r" % (name,)) from None


def _broker_entry(key: str, described: BrokerConfigEntry, synonyms: bool) -> Dict[str, Any]:
    """A broker setting as kafka-python shapes it; with ``synonyms``, where its value comes
    from, then its default (Kafka's order)."""
    is_default = described.source == "DEFAULT_CONFIG"
    # read_only as Kafka answers it: False for the keys AlterConfigs may change while the broker runs.
    entry: Dict[str, Any] = {"value": described.value, "read_only": described.read_only, "is_default": is_default,
                             "config_source": described.source, "is_sensitive": described.sensitive}
    if synonyms and described.synonyms:
        entry["synonyms"] = [{"name": key, "value": value, "source": source}
                             for source, value in described.synonyms]
    elif synonyms:
        entry["synonyms"] = ([] if is_default else [{"name": key, "value": described.value,
                                                     "source": described.source}])
        entry["synonyms"].append({"name": key, "value": described.default, "source": "DEFAULT_CONFIG"})
    return entry


def _broker_resource_name(resource: Any) -> Optional[str]:
    """A BROKER resource's name ("" for the cluster-wide default), or None for another resource type."""
    if _resource_type(getattr(resource, "resource_type", None)) is not ConfigResourceType.BROKER:
        return None
    name = getattr(resource, "name", None)
    return "" if name in (None, "") else str(_broker_id_of(resource))


def _alter_op(value: Any) -> AlterConfigOp:
    try:
        if isinstance(value, str):
            return AlterConfigOp[value.upper()]
        return AlterConfigOp(int(value))
    except (KeyError, ValueError, TypeError):
        raise ConfigError("unknown config operation %r; expected one of %s"
                          % (value, ", ".join(op.name for op in AlterConfigOp))) from None


_CONFIG_FILTERS = ("all", "modified", "default", "dynamic")

class UserScramCredentialUpsertion(NamedTuple):
    """Set ``user``'s SCRAM credential for ``mechanism`` from ``password`` (salted here, with a
    random salt unless one is given: the password itself never leaves the client)."""

    user: str
    mechanism: str
    password: str
    iterations: int = 4096
    salt: Optional[bytes] = None


class UserScramCredentialDeletion(NamedTuple):
    """Remove ``user``'s SCRAM credential for ``mechanism``."""

    user: str
    mechanism: str


def _scram_type(mechanism: str) -> int:
    try:
        return MECHANISMS[mechanism.upper()][1]
    except (KeyError, AttributeError):
        raise ConfigError("SCRAM mechanism %r is not one of %s" % (mechanism, ", ".join(MECHANISMS))) from None


# -- ACLs, as kafka-python's kafka.admin names them ------------------------------------------

#: Kafka's ACL enums, under kafka-python's names.
ACLOperation = AclOperation
ACLPermissionType = AclPermissionType
ACLResourcePatternType = PatternType


class ResourcePatternFilter:
    """Selects resource patterns (kafka-python's): ``resource_name`` None matches any name;
    ``pattern_type`` ANY any pattern of exactly that name, MATCH every pattern that applies to it."""

    def __init__(self, resource_type: ResourceType, resource_name: Optional[str],
                 pattern_type: PatternType) -> None:
        self.resource_type = ResourceType(resource_type)
        self.resource_name = resource_name
        self.pattern_type = PatternType(pattern_type)
        self.validate()

    def validate(self) -> None:
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            raise ConfigError("a resource pattern filter cannot name UNKNOWN")

    def __repr__(self) -> str:
        return "<ResourcePattern type=%s, name=%s, pattern=%s>" % (
            self.resource_type.name, self.resource_name, self.pattern_type.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResourcePatternFilter) and (
            self.resource_type, self.resource_name, self.pattern_type) == (
            other.resource_type, other.resource_name, other.pattern_type)

    def __hash__(self) -> int:
        return hash((self.resource_type, self.resource_name, self.pattern_type))


class ResourcePattern(ResourcePatternFilter):
    """A resource pattern an ACL applies to (kafka-python's): a literal name (``*``: every
    resource of the type) or a prefix."""

    def __init__(self, resource_type: ResourceType, resource_name: str,
                 pattern_type: PatternType = PatternType.LITERAL) -> None:
        super().__init__(resource_type, resource_name, pattern_type)

    def validate(self) -> None:
        super().validate()
        if self.resource_type == ResourceType.ANY:
            raise ConfigError("resource_type cannot be ANY")
        if self.pattern_type in (PatternType.ANY, PatternType.MATCH):
            raise ConfigError("pattern_type cannot be %s for a resource pattern" % self.pattern_type.name)


class ACLFilter:
    """Selects ACLs (kafka-python's): a None principal or host, or ANY, matches every value."""

    def __init__(self, principal: Optional[str], host: Optional[str], operation: AclOperation,
                 permission_type: AclPermissionType, resource_pattern: ResourcePatternFilter) -> None:
        self.principal = principal
        self.host = host
        self.operation = AclOperation(operation)
        self.permission_type = AclPermissionType(permission_type)
        self.resource_pattern = resource_pattern
        self.validate()

    def validate(self) -> None:
        if self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN:
            raise ConfigError("an ACL filter cannot name UNKNOWN")
        if not isinstance(self.resource_pattern, ResourcePatternFilter):
            raise ConfigError("resource_pattern must be a ResourcePatternFilter")

    def __repr__(self) -> str:
        return "<ACL principal=%s, resource=%s, operation=%s, type=%s, host=%s>" % (
            self.principal, self.resource_pattern, self.operation.name, self.permission_type.name, self.host)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ACLFilter) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> Tuple[Any, ...]:
        return self.principal, self.host, self.operation, self.permission_type, self.resource_pattern


class ACL(ACLFilter):
    """One ACL (kafka-python's): ``principal`` (``User:alice``) may (ALLOW) or may not (DENY)
    do ``operation`` from ``host`` (``*``: any) on the resources ``resource_pattern`` names."""

    def __init__(self, principal: str, host: str, operation: AclOperation, permission_type: AclPermissionType,
                 resource_pattern: ResourcePattern) -> None:
        super().__init__(principal, host, operation, permission_type, resource_pattern)

    def validate(self) -> None:
        super().validate()
        if self.operation == AclOperation.ANY:
            raise ConfigError("operation cannot be ANY")
        if self.permission_type == AclPermissionType.ANY:
            raise ConfigError("permission_type cannot be ANY")
        if not isinstance(self.resource_pattern, ResourcePattern):
            raise ConfigError("resource_pattern must be a ResourcePattern")


def _binding(acl: Any) -> AclBinding:
    """An ACL (ours or kafka-python's) as the model's binding."""
    p = acl.resource_pattern
    return AclBinding(_Pattern(ResourceType(int(p.resource_type)), p.resource_name, PatternType(int(p.pattern_type))),
                      AccessControlEntry(acl.principal, acl.host, AclOperation(int(acl.operation)),
                                         AclPermissionType(int(acl.permission_type))))


def _binding_filter(acl_filter: Any) -> AclBindingFilter:
    """An ACL filter (ours or kafka-python's) as the model's."""
    p = acl_filter.resource_pattern
    return AclBindingFilter(
        _PatternFilter(ResourceType(int(p.resource_type)), p.resource_name, PatternType(int(p.pattern_type))),
        AccessControlEntryFilter(acl_filter.principal, acl_filter.host, AclOperation(int(acl_filter.operation)),
                                 AclPermissionType(int(acl_filter.permission_type))))


def _acl(binding: AclBinding) -> ACL:
    p, e = binding
    return ACL(e.principal, e.host, e.operation, e.permission_type,
               ResourcePattern(p.resource_type, p.name, p.pattern_type))


def _error(code: int, message: Optional[str]) -> Optional[errors.BrokerError]:
    cls = errors.error_for_code(code) if code else None
    return None if cls is None else cls(message or cls.message)


# -- client quotas, as Kafka's Admin names them -----------------------------------------------

class ClientQuotaFilterComponent(NamedTuple):
    """One component of :meth:`AdminClient.describe_client_quotas`' filter (Kafka's
    ClientQuotaFilterComponent): entities of ``entity_type`` (``user``, ``client-id``, ``ip``)
    named ``match`` (``of_entity``), the type's default (``of_default_entity``) or any name
    (``of_entity_type``)."""

    entity_type: str
    match_type: int
    match: Optional[str] = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> "ClientQuotaFilterComponent":
        return cls(entity_type, 0, name)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> "ClientQuotaFilterComponent":
        return cls(entity_type, 1, None)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> "ClientQuotaFilterComponent":
        return cls(entity_type, 2, None)


class ClientQuotaAlteration(NamedTuple):
    """A change of one quota entity (Kafka's ClientQuotaAlteration): ``entity`` maps entity
    types to names (None: the type's default, ``<default>``); ``ops`` are (key, value) pairs,
    a value of None removing the key."""

    entity: Mapping[str, Optional[str]]
    ops: Sequence[Tuple[str, Optional[float]]]


#: A quota entity as :meth:`AdminClient.describe_client_quotas` keys it: its (entity type,
#: name) pairs sorted by type, a name of None for the type's default.
ClientQuotaEntity = Tuple[Tuple[str, Optional[str]], ...]

# What a client may pass, beside broker= and bootstrap_servers=.
_DEFAULTS: Dict[str, Any] = {
    "client_id": None,
    "request_timeout_ms": 30000,
}


class AdminClient:
    """Administer a broker: topics, partitions, configs, consumer groups, records, transactions.

    Give ``broker=`` (a :class:`pylogq.Broker` in this process) or
    ``bootstrap_servers=``; an unknown keyword raises ConfigError naming it.
    Thread-safe as far as the broker is; ``close()`` releases the transport
    and leaves the broker running.
    """

    def __init__(self, broker: Any = None, bootstrap_servers: Any = None, **configs: Any) -> None:
        accepted = set(_DEFAULTS) | set(TCP_OPTIONS)
        unknown = sorted(set(configs) - accepted)
        if unknown:
            raise ConfigError("unknown AdminClient configuration %s; accepted: broker, bootstrap_servers, %s"
                              % (", ".join(repr(k) for k in unknown), ", ".join(sorted(accepted))))
        self.config: Dict[str, Any] = {**_DEFAULTS, **configs}
        if self.config["client_id"] is None:
            self.config["client_id"] = "pylogq-admin"
        if not isinstance(self.config["client_id"], str):
            raise ConfigError("client_id must be a str, not %r" % (self.config["client_id"],))
        self.config["request_timeout_ms"] = _timeout(self.config["request_timeout_ms"], "request_timeout_ms")
        self._transport: Transport = connect(broker=broker, bootstrap_servers=bootstrap_servers,
                                             **{k: self.config[k] for k in TCP_OPTIONS if k in self.config})
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Release the transport; the broker stays up. Idempotent."""
        if not self._closed:
            self._closed = True
            self._transport.close()

    def __enter__(self) -> "AdminClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> Transport:
        if self._closed:
            raise errors.PylogqError("this AdminClient is closed")
        return self._transport

    def _timeout_ms(self, timeout_ms: Optional[int]) -> int:
        return self.config["request_timeout_ms"] if timeout_ms is None else _timeout(timeout_ms, "timeout_ms")

    # -- topics ----------------------------------------------------------------------

    def list_topics(self) -> List[str]:
        """Every topic name, sorted; internal topics (``__consumer_offsets``) are left out."""
        return list(self._check_open().list_topics())

    def describe_topics(self, topics: Optional[Iterable[str]] = None) -> List[Dict[str, Any]]:
        """Topic metadata as kafka-python's dicts, one per topic (all topics when None).

        An unknown topic is reported with ``error_code`` 3 (UNKNOWN_TOPIC_OR_PARTITION)
        and no partitions, as in a Metadata response, rather than raised.
        """
        transport = self._check_open()
        names = transport.list_topics() if topics is None else _names(topics, "topics")
        out = []
        for name in names:
            try:
                desc = transport.describe_topic(name)
            except errors.UnknownTopicOrPartitionError as exc:
                out.append({"error_code": exc.code, "topic": name, "is_internal": name in INTERNAL_TOPICS,
                            "partitions": []})
                continue
            out.append({
                "error_code": 0,
                "topic": desc.name,
                "is_internal": bool(desc.internal),
                "partitions": [{"error_code": 0, "partition": p.partition, "leader": p.leader,
                                "replicas": list(p.replicas), "isr": list(p.isr), "offline_replicas": []}
                               for p in desc.partitions],
            })
        return out

    def create_topics(self, new_topics: Any, timeout_ms: Optional[int] = None, validate_only: bool = False,
                      raise_errors: bool = True) -> Dict[str, Optional[errors.BrokerError]]:
        """Create topics; -> ``{name: None or the error}``.

        ``new_topics`` is a list of :class:`NewTopic` (or kafka-python's), a
        list of names (broker defaults), or kafka-python's dict form
        ``{name: {"num_partitions", "replication_factor", "assignments", "configs"}}``.
        Each topic is created or refused on its own; ``validate_only`` runs
        every check and creates nothing.
        """
        transport = self._check_open()
        self._timeout_ms(timeout_ms)
        specs = _new_topic_specs(new_topics)
        results: Dict[str, Optional[errors.BrokerError]] = {}
        seen: Dict[str, int] = {}
        for name, *_ in specs:
            seen[name] = seen.get(name, 0) + 1
        broker_ids = self._broker_ids() if validate_only else None
        for name, partitions, factor, assignments, configs in specs:
            try:
                if seen[name] > 1:
                    raise errors.InvalidRequestError("topic %r appears more than once in the request" % (name,))
                if validate_only:
                    partitions, factor = _resolve_assignments(name, partitions, factor, assignments, broker_ids)
                    self._validate_new_topic(name, partitions, factor, configs)
                else:  # the broker checks an assignment and places the replicas as it says
                    transport.create_topic(name, partitions, factor, configs, replica_assignment=assignments or None)
                results[name] = None
            except errors.BrokerError as exc:
                results[name] = exc
        return _finish(results, raise_errors)

    def _validate_new_topic(self, name: str, partitions: Optional[int], factor: Optional[int],
                            configs: Mapping[str, Any]) -> None:
        """The checks CreateTopics with validate_only runs, creating nothing."""
        validate_topic_name(name)
        if name in INTERNAL_TOPICS:
            raise errors.InvalidTopicError("%s is an internal topic; it cannot be created by a client" % name)
        transport = self._check_open()
        if transport.partitions_for(name) is not None:
            raise errors.TopicAlreadyExistsError("topic %r already exists" % name)
        for existing in transport.list_topics():
            if collides(name, existing):
                raise errors.InvalidTopicError(
                    "topic %r collides with existing topic %r ('.' and '_' are the same in metric names)"
                    % (name, existing))
        if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
            raise errors.InvalidPartitionsError("number of partitions must be at least 1, got %r" % (partitions,))
        if factor is not None and factor != 1:
            raise errors.InvalidReplicationFactorError(
                "replication factor %r is larger than the 1 available broker" % (factor,))
        _check_log_config(configs)

    def delete_topics(self, topics: Iterable[str], timeout_ms: Optional[int] = None,
                      raise_errors: bool = True) -> Dict[str, Optional[errors.BrokerError]]:
        """Delete topics and their data; -> ``{name: None or the error}``."""
        transport = self._check_open()
        self._timeout_ms(timeout_ms)
        results: Dict[str, Optional[errors.BrokerError]] = {}
        for name in _names(topics, "topics"):
            try:
                transport.delete_topic(name)
                results[name] = None
            except errors.BrokerError as exc:
                results[name] = exc
        return _finish(results, raise_errors)

    def create_partitions(self, topic_partitions: Mapping[str, Any], timeout_ms: Optional[int] = None,
                          validate_only: bool = False,
                          raise_errors: bool = True) -> Dict[str, Optional[errors.BrokerError]]:
        """Grow topics to a new partition total; -> ``{topic: None or the error}``.

        Values are :class:`NewPartitions` (or kafka-python's), an int total, or
        ``{"count": total, "assignments": [[broker ids], ...]}``.
        """
        transport = self._check_open()
        self._timeout_ms(timeout_ms)
        if not isinstance(topic_partitions, Mapping):
            raise errors.InvalidArgumentTypeError("topic_partitions must be a dict {topic: NewPartitions or total}, "
                                                  "not %r" % (topic_partitions,))
        broker_ids = self._broker_ids() if validate_only else None
        results: Dict[str, Optional[errors.BrokerError]] = {}
        for topic, spec in topic_partitions.items():
            try:
                total, assignments = _partitions_spec(topic, spec)
                current = transport.partitions_for(topic)
                if current is None:
                    raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % (topic,))
                if not isinstance(total, int) or isinstance(total, bool) or total <= current:
                    raise errors.InvalidPartitionsError(
                        "topic %r has %d partitions; the new total %r must be larger" % (topic, current, total))
                if not validate_only:  # the broker checks an assignment, as Kafka's does
                    transport.create_partitions(topic, total, replica_assignment=assignments)
                elif assignments is not None:
                    existing = {p.partition: list(p.replicas) for p in transport.describe_topic(topic).partitions}
                    check_added_assignment(existing, total, assignments, _live(assignments, broker_ids))
                results[topic] = None
            except errors.BrokerError as exc:
                results[topic] = exc
        return _finish(results, raise_errors)

    def _broker_ids(self) -> Optional[List[int]]:
        """The ids of the live brokers (None when the transport cannot tell)."""
        try:
            cluster = self._check_open().describe_cluster()
        except errors.BrokerError:
            return None
        return sorted(b.broker_id for b in cluster.brokers) or None

    # -- configs -------------------------------------------------------------------------

    def describe_configs(self, config_resources: Iterable[Any], include_synonyms: bool = False,
                         config_filter: str = "modified") -> Dict[str, Dict[str, Dict[str, Dict[str, Any]]]]:
        """Configs of topics and brokers, as kafka-python 3 shapes them:
        ``{"topic": {name: {key: {"value", "is_default", "config_source", "read_only", "is_sensitive"}}}}``
        (``"broker"`` for a BROKER resource, named by its broker id).

        ``config_filter`` (kafka-python's default ``"modified"``) keeps only the
        topic's overrides (a broker's settings it was given); ``"all"`` lists every
        key with its effective value, ``"default"`` only the keys left at their
        default. A broker's settings: ``DYNAMIC_BROKER_CONFIG`` or
        ``DYNAMIC_DEFAULT_BROKER_CONFIG`` when set by AlterConfigs on the broker or the
        cluster-wide default, ``STATIC_BROKER_CONFIG`` when set in server.properties or
        when the Broker was opened, else ``DEFAULT_CONFIG``; a sensitive one has value None. A resource's ``configs`` (a list of keys, or a dict whose
        keys count) narrows the keys; an unknown topic raises
        UnknownTopicOrPartitionError.
        """
        transport = self._check_open()
        mode = _config_filter(config_filter)
        out: Dict[str, Dict[str, Dict[str, Dict[str, Any]]]] = {}
        for resource in config_resources:
            wanted = None if resource.configs is None else set(resource.configs)
            if _resource_type(getattr(resource, "resource_type", None)) is ConfigResourceType.BROKER:
                broker_id = _broker_id_of(resource)
                out.setdefault("broker", {})[str(broker_id)] = {
                    key: _broker_entry(key, described, include_synonyms)
                    for key, described in transport.describe_broker_configs(broker_id).items()
                    if (wanted is None or key in wanted)
                    and not (mode == "modified" and described.source == "DEFAULT_CONFIG")
                    and not (mode == "default" and described.source != "DEFAULT_CONFIG")}
                continue
            rtype, name = self._topic_resource(resource, "describe_configs")
            entries: Dict[str, Dict[str, Any]] = {}
            for key, (value, is_default) in transport.describe_configs(name).items():
                if wanted is not None and key not in wanted:
                    continue
                if (mode == "modified" and is_default) or (mode == "default" and not is_default):
                    continue
                entry: Dict[str, Any] = {
                    "value": value,
                    "read_only": False,
                    "is_default": is_default,
                    "config_source": "DEFAULT_CONFIG" if is_default else "DYNAMIC_TOPIC_CONFIG",
                    "is_sensitive": False,
                }
                if include_synonyms:
                    entry["synonyms"] = []
                entries[key] = entry
            out.setdefault(rtype.name.lower(), {})[name] = entries
        return out

    def alter_configs(self, config_resources: Iterable[Any], validate_only: bool = False,
                      incremental: Optional[bool] = None,
                      raise_errors: bool = True) -> Dict[str, Dict[str, Optional[errors.BrokerError]]]:
        """Kafka's AlterConfigs: each topic's overrides become exactly ``configs``
        (a key left out returns to its default); -> ``{"topic": {name: None or the error}}``.

        Unlike kafka-python 3, which picks IncrementalAlterConfigs whenever the
        broker has it, the full replacement is the default here; pass
        ``incremental=True`` (or call :meth:`incremental_alter_configs`) to
        change only the given keys. Only SET applies to a full replacement.
        """
        if incremental:
            return self.incremental_alter_configs(config_resources, validate_only, raise_errors)
        transport = self._check_open()
        results: Dict[str, Dict[str, Optional[errors.BrokerError]]] = {}
        for resource in config_resources:
            broker = _broker_resource_name(resource)
            if broker is not None:
                self._alter_broker(transport, broker, resource, False, validate_only, results)
                continue
            rtype, name = self._topic_resource(resource, "alter_configs")
            try:
                new: Dict[str, Any] = {}
                for key, (op, value) in _alter_entries(resource.configs).items():
                    if op is not AlterConfigOp.SET:
                        raise errors.InvalidRequestError(
                            "alter_configs replaces every config; operation %s on %r needs "
                            "incremental_alter_configs" % (op.name, key))
                    if value is None:
                        raise errors.InvalidRequestError(
                            "config %r of topic %r: a null value needs incremental_alter_configs (DELETE)"
                            % (key, name))
                    new[key] = value
                if validate_only:
                    transport.describe_configs(name)
                    _check_log_config(new)
                else:
                    transport.alter_configs(name, new, False)
                results.setdefault(rtype.name.lower(), {})[name] = None
            except errors.BrokerError as exc:
                results.setdefault(rtype.name.lower(), {})[name] = exc
        return _finish_nested(results, raise_errors)

    def incremental_alter_configs(self, config_resources: Iterable[Any], validate_only: bool = False,
                                  raise_errors: bool = True) -> Dict[str, Dict[str, Optional[errors.BrokerError]]]:
        """Kafka's IncrementalAlterConfigs: change only the given keys of each topic.

        ``configs`` maps a key to a value (SET) or to ``(op, value)`` with op an
        :class:`AlterConfigOp` (or kafka-python's), its name or its int:
        DELETE returns the key to its default; APPEND and SUBTRACT add or
        remove items of a list key such as ``cleanup.policy``.
        """
        transport = self._check_open()
        results: Dict[str, Dict[str, Optional[errors.BrokerError]]] = {}
        defaults = LogConfig.defaults()
        for resource in config_resources:
            broker = _broker_resource_name(resource)
            if broker is not None:
                self._alter_broker(transport, broker, resource, True, validate_only, results)
                continue
            rtype, name = self._topic_resource(resource, "incremental_alter_configs")
            try:
                current = transport.describe_configs(name)
                changes: Dict[str, Any] = {}
                for key, (op, value) in _alter_entries(resource.configs).items():
                    if op is AlterConfigOp.SET:
                        changes[key] = value
                    elif op is AlterConfigOp.DELETE:
                        changes[key] = None
                    else:
                        dotted = key.replace("_", ".") if key.replace("_", ".") in defaults else key
                        if not isinstance(defaults.get(dotted), tuple):
                            raise errors.InvalidConfigError(
                                "%s applies only to list configs; %r of topic %r is not one" % (op.name, key, name))
                        have = [v for v in (current.get(dotted, (None, True))[0] or "").split(",") if v]
                        items = _list_items(value)
                        if op is AlterConfigOp.APPEND:
                            merged = have + [v for v in items if v not in have]
                        else:
                            merged = [v for v in have if v not in items]
                        changes[dotted] = ",".join(merged)
                if validate_only:
                    overrides = {k: v for k, (v, is_default) in current.items() if not is_default}
                    for key, value in changes.items():
                        dotted = key.replace("_", ".") if key.replace("_", ".") in defaults else key
                        overrides.pop(key, None)
                        overrides.pop(dotted, None)
                        if value is not None:
                            overrides[key] = value
                    _check_log_config(overrides)
                else:
                    transport.alter_configs(name, changes, True)
                results.setdefault(rtype.name.lower(), {})[name] = None
            except errors.BrokerError as exc:
                results.setdefault(rtype.name.lower(), {})[name] = exc
        return _finish_nested(results, raise_errors)

    @staticmethod
    def _alter_broker(transport: Any, name: str, resource: Any, incremental: bool, validate_only: bool,
                      results: Dict[str, Dict[str, Optional[errors.BrokerError]]]) -> None:
        """A BROKER resource's dynamic configs (``name`` its id, or "" for the cluster-wide
        default): the broker checks, stores and applies them; its error is the resource's."""
        try:
            ops = []
            for key, (op, value) in _alter_entries(resource.configs).items():
                if not incremental and op is not AlterConfigOp.SET:
                    raise errors.InvalidRequestError(
                        "alter_configs replaces every config; operation %s on %r needs "
                        "incremental_alter_configs" % (op.name, key))
                ops.append((op.name, key, to_string(value)))
            transport.alter_broker_configs(name, ops, incremental, validate_only)
            results.setdefault("broker", {})[name] = None
        except errors.BrokerError as exc:
            results.setdefault("broker", {})[name] = exc

    def _topic_resource(self, resource: Any, operation: str) -> Tuple[ConfigResourceType, str]:
        rtype = _resource_type(getattr(resource, "resource_type", None))
        if rtype is not ConfigResourceType.TOPIC:
            raise errors.InvalidRequestError(
                "%s supports TOPIC and BROKER resources; %s %r is neither" % (operation, rtype.name, getattr(resource, "name", None)))
        name = getattr(resource, "name", None)
        if not isinstance(name, str):
            raise errors.InvalidRequestError("a TOPIC resource needs a topic name, got %r" % (name,))
        return rtype, name

    # -- consumer groups -------------------------------------------------------------------

    def list_consumer_groups(self) -> List[Tuple[str, str]]:
        """Every group as ``(group_id, protocol_type)``; protocol type "" for a
        group that only commits offsets."""
        return list(self._check_open().list_groups())

    def describe_consumer_groups(self, group_ids: Iterable[str], group_coordinator_id: Optional[int] = None,
                                 include_authorized_operations: bool = False) -> List[GroupInformation]:
        """One :class:`GroupInformation` per group, in the order asked.

        Members' metadata and assignments are decoded
        (:class:`pylogq.client.assignors.Subscription` / ``Assignment``) for
        ``consumer`` groups and kept as bytes otherwise; they are empty unless
        the group is Stable. An unknown group comes back with state ``Dead``.
        """
        transport = self._check_open()
        out = []
        for group_id in _names(group_ids, "group_ids"):
            desc = transport.describe_group(group_id)
            consumer = desc.protocol_type == "consumer"
            members = [MemberInformation(
                m.member_id, m.client_id, m.client_host,
                _decode(assignors.decode_subscription, m.metadata) if consumer else m.metadata,
                _decode(assignors.decode_assignment, m.assignment) if consumer else m.assignment,
            ) for m in desc.members]
            out.append(GroupInformation(desc.error, group_id, desc.state, desc.protocol_type, desc.protocol,
                                        members, [] if include_authorized_operations else None))
        return out

    def find_coordinator(self, group_id: str) -> BrokerNode:
        """The broker coordinating ``group_id`` (FindCoordinator): its id and advertised address."""
        if not isinstance(group_id, str):
            raise errors.InvalidArgumentTypeError("group_id must be a str, not %r" % (group_id,))
        return self._check_open().find_coordinator(group_id)

    def list_consumer_group_offsets(self, group_id: str, partitions: Optional[Iterable[Any]] = None,
                                    group_coordinator_id: Optional[int] = None, require_stable: bool = False
                                    ) -> Dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of a group: every committed partition, or the given
        ``partitions`` (offset -1 where nothing was committed). ``require_stable`` (Kafka's
        ``ListConsumerGroupOffsetsOptions.requireStable``, KIP-447): a partition whose offset a
        transaction not yet committed or aborted holds raises UnstableOffsetCommitError, which
        is retriable, rather than answering the offset before it."""
        transport = self._check_open()
        wanted = None if partitions is None else [_topic_partition(tp) for tp in partitions]
        found = transport.fetch_offsets(group_id, wanted, require_stable)
        out: Dict[TopicPartition, OffsetAndMetadata] = {}
        for (topic, partition), (offset, metadata, code) in sorted(found.items()):
            _raise_code(code, "fetching the offsets of group %r for %s-%d" % (group_id, topic, partition))
            out[TopicPartition(topic, partition)] = OffsetAndMetadata(offset, metadata or "", -1)
        return out

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[Any, Any], raise_errors: bool = True
                                     ) -> Dict[TopicPartition, Optional[errors.BrokerError]]:
        """Commit ``offsets`` (``{TopicPartition: OffsetAndMetadata or offset}``, or confluent-kafka's list
        of TopicPartition with offsets, as ``send_offsets_to_transaction`` takes them), each the next
        offset to read) for a group from outside it (Kafka's ``Admin.alterConsumerGroupOffsets``):
        an OffsetCommit of no member and generation -1, which the coordinator takes for a group
        with no members (or none yet) and refuses, with UnknownMemberIdError, for one whose
        members are consuming; -> ``{TopicPartition: None or the error}``."""
        transport = self._check_open()
        if not isinstance(group_id, str) or not group_id:
            raise errors.InvalidArgumentTypeError("group_id must be a non-empty str, not %r" % (group_id,))
        wanted = {tp: (o.offset, o.metadata) for tp, o in offsets_of(offsets).items()}
        if not wanted:
            return {}
        codes = transport.commit_offsets(group_id, -1, "", wanted)
        return _partition_results(codes, wanted, "committing the offset of group %r" % group_id, raise_errors)

    def delete_consumer_groups(self, group_ids: Iterable[str], group_coordinator_id: Optional[int] = None,
                               raise_errors: bool = True) -> List[Tuple[str, Optional[errors.BrokerError]]]:
        """Delete empty groups and their committed offsets; -> ``[(group_id, None or the error)]``.

        A group with members answers NonEmptyGroupError, an unknown one
        GroupIdNotFoundError.
        """
        transport = self._check_open()
        ids = _names(group_ids, "group_ids")
        codes = transport.delete_groups(ids)
        results: Dict[str, Optional[errors.BrokerError]] = {}
        for group_id in ids:
            cls = errors.error_for_code(codes.get(group_id, 0))
            results[group_id] = None if cls is None else cls(_group_error_message(cls, group_id))
        _finish(results, raise_errors)
        return list(results.items())

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[Any], raise_errors: bool = True
                                      ) -> Dict[TopicPartition, Optional[errors.BrokerError]]:
        """Delete a group's committed offsets of ``partitions`` (Kafka's OffsetDelete);
        -> ``{TopicPartition: None or the error}``.

        An unknown group raises GroupIdNotFoundError, a group with members that
        are not consumers NonEmptyGroupError. A consumer group with members keeps
        the offsets of topics it subscribes to (GroupSubscribedToTopicError for
        those partitions); a partition that does not exist answers
        UnknownTopicOrPartitionError.
        """
        transport = self._check_open()
        wanted = list(dict.fromkeys(_topic_partition(tp) for tp in _items(partitions, "partitions")))
        group_error, codes = transport.delete_offsets(group_id, [(tp.topic, tp.partition) for tp in wanted])
        cls = errors.error_for_code(group_error)
        if cls is errors.NonEmptyGroupError:
            raise cls("group %r has members that are not consumers: its offsets can be deleted once they have "
                      "left" % group_id)
        if cls is not None:
            raise cls(_group_error_message(cls, group_id, "deleting the offsets of"))
        return _partition_results(codes, wanted, "deleting the offset of group %r" % group_id, raise_errors)

    # -- producers ------------------------------------------------------------------------

    def describe_producers(self, partitions: Iterable[Any], broker_id: Optional[int] = None
                           ) -> Dict[TopicPartition, List[ProducerDescription]]:
        """The active idempotent producers of each partition (Kafka's DescribeProducers), as
        its leader knows them, or the replica on ``broker_id`` when given; a partition that
        does not exist raises UnknownTopicOrPartitionError, a broker without a replica of it
        NotLeaderOrFollowerError. A producer's ``current_txn_start_offset`` is the first
        offset of its open transaction on the partition (-1: none open)."""
        transport = self._check_open()
        if broker_id is not None and (not isinstance(broker_id, int) or isinstance(broker_id, bool)):
            raise errors.InvalidArgumentTypeError("broker_id must be an int, not %r" % (broker_id,))
        out: Dict[TopicPartition, List[ProducerDescription]] = {}
        for tp in (_topic_partition(p) for p in _items(partitions, "partitions")):
            if broker_id is None:
                out[tp] = transport.describe_producers(tp.topic, tp.partition)
            else:
                out[tp] = transport.describe_producers(tp.topic, tp.partition, broker_id)
        return out

    # -- transactions ---------------------------------------------------------------------

    def list_transactions(self, states: Optional[Iterable[str]] = None, producer_ids: Optional[Iterable[int]] = None,
                          duration_ms: int = -1) -> Dict[int, List[TransactionListing]]:
        """The transactional ids every coordinator knows (Kafka's ListTransactions, asked of every
        broker): -> ``{coordinator's broker id: [TransactionListing]}``.

        Filters, as Kafka's ListTransactionsOptions: ``states`` (names of
        :data:`TRANSACTION_STATES`), ``producer_ids`` (either: None or empty lists all), and
        ``duration_ms``, the least time a transaction has run (-1: any; a broker before Kafka
        3.8 cannot filter by it: UnsupportedVersionError).
        """
        transport = self._check_open()
        wanted_states = [] if states is None else _names(states, "states")
        unknown = [s for s in wanted_states if s not in TRANSACTION_STATES]
        if unknown:
            raise errors.InvalidArgumentError("unknown transaction state%s %s; the states are %s" % (
                "s" if len(unknown) > 1 else "", ", ".join(map(repr, unknown)), ", ".join(TRANSACTION_STATES)))
        ids = [] if producer_ids is None else _items(producer_ids, "producer_ids")
        if any(not isinstance(i, int) or isinstance(i, bool) for i in ids):
            raise errors.InvalidArgumentTypeError("producer_ids must be ints, not %r" % (ids,))
        if not isinstance(duration_ms, int) or isinstance(duration_ms, bool):
            raise errors.InvalidArgumentTypeError("duration_ms must be an int, not %r" % (duration_ms,))
        return transport.list_transactions(list(dict.fromkeys(wanted_states)), list(dict.fromkeys(ids)),
                                           max(duration_ms, -1))

    def describe_transactions(self, transactional_ids: Iterable[str], raise_errors: bool = True
                              ) -> Dict[str, DescribedTransaction]:
        """Each transactional id as its coordinator describes it (Kafka's DescribeTransactions, sent
        to the coordinator FindCoordinator names for it): -> ``{id: DescribedTransaction}`` in the
        order asked. Every id is asked; then, with ``raise_errors`` (the default), the first
        error is raised (TransactionalIdNotFoundError for an id the coordinator does not know),
        else each failed id's ``error`` says why it has no description.
        """
        transport = self._check_open()
        ids = list(dict.fromkeys(_names(transactional_ids, "transactional_ids")))
        if any(not isinstance(t, str) or not t for t in ids):
            raise errors.InvalidArgumentTypeError("transactional ids must be non-empty strs, not %r" % (ids,))
        found = transport.describe_transactions(ids) if ids else {}
        out: Dict[str, DescribedTransaction] = {}
        for transactional_id in ids:
            coordinator, d = found.get(transactional_id, (-1, None))
            if d is None or d.error_code:
                code = errors.UnknownServerError.code if d is None else d.error_code
                out[transactional_id] = DescribedTransaction(transactional_id, coordinator,
                                                             error=_transaction_error(code, transactional_id))
                continue
            out[transactional_id] = DescribedTransaction(
                transactional_id, coordinator, d.state, d.producer_id, d.producer_epoch, d.transaction_timeout_ms,
                None if d.transaction_start_time_ms < 0 else d.transaction_start_time_ms,
                sorted(TopicPartition(t, p) for t, p in d.partitions))
        if raise_errors:
            for described in out.values():
                if described.error is not None:
                    raise described.error
        return out

    def abort_transaction(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int) -> None:
        """End a hanging transaction on one partition: WriteTxnMarkers with an ABORT marker, sent to
        the partition's leader as its transaction coordinator would (Kafka's abortTransaction).

        ``producer_id`` and ``producer_epoch`` are those of the transaction's producer and
        ``coordinator_epoch`` at least the one its last marker carried (DescribeProducers
        reports all three: ``pylogq transactions abort --start-offset`` looks them up). The
        leader refuses an older epoch: InvalidProducerEpochError, or
        TransactionCoordinatorFencedError for the coordinator epoch. Read-committed consumers
        move past the transaction's records once it is aborted.
        """
        transport = self._check_open()
        tp = _topic_partition((topic, partition))
        for name, value in (("producer_id", producer_id), ("producer_epoch", producer_epoch),
                            ("coordinator_epoch", coordinator_epoch)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise errors.InvalidArgumentTypeError("%s must be an int, not %r" % (name, value))
        if producer_id < 0 or not 0 <= producer_epoch <= 32767 or coordinator_epoch < 0:
            raise errors.InvalidArgumentError(
                "abort of %s-%d: producer id %d, producer epoch %d and coordinator epoch %d must be >= 0 (the "
                "producer epoch at most 32767)" % (tp.topic, tp.partition, producer_id, producer_epoch,
                                                    coordinator_epoch))
        marker = TxnMarker(producer_id, producer_epoch, False, coordinator_epoch, ((tp.topic, tp.partition),))
        codes = transport.write_txn_markers([marker]).get(producer_id, {})
        code = codes.get((tp.topic, tp.partition), errors.UnknownServerError.code)
        cls = errors.error_for_code(code)
        if cls is not None:
            raise cls("aborting the transaction of producer %d (epoch %d, coordinator epoch %d) on %s-%d: %s" % (
                producer_id, producer_epoch, coordinator_epoch, tp.topic, tp.partition, _ABORT_REASONS.get(
                    code, cls.message)))

    # -- records --------------------------------------------------------------------------

    def delete_records(self, records_to_delete: Mapping[Any, int], timeout_ms: Optional[int] = None,
                       partition_leader_id: Optional[int] = None) -> Dict[TopicPartition, int]:
        """Make records below each offset unreadable (offset -1: everything up to
        the high watermark); -> ``{TopicPartition: new low watermark}``.

        Every partition is checked to exist before any record is deleted; an
        offset beyond the high watermark raises OffsetOutOfRangeError.
        """
        transport = self._check_open()
        self._timeout_ms(timeout_ms)
        requests = [(_topic_partition(tp), offset) for tp, offset in records_to_delete.items()]
        for tp, offset in requests:
            count = transport.partitions_for(tp.topic)
            if count is None or not 0 <= tp.partition < count:
                raise errors.UnknownTopicOrPartitionError("cannot delete records of %s-%d: no such partition"
                                                          % (tp.topic, tp.partition))
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < -1:
                raise errors.OffsetOutOfRangeError("cannot delete records of %s-%d before offset %r"
                                                   % (tp.topic, tp.partition, offset))
        return {tp: transport.delete_records(tp.topic, tp.partition, offset) for tp, offset in requests}

    # -- partition reassignments ---------------------------------------------------------

    def alter_partition_reassignments(self, reassignments: Mapping[Any, Optional[Sequence[int]]],
                                      timeout_ms: Optional[int] = None, raise_errors: bool = True
                                      ) -> Dict[TopicPartition, Optional[errors.BrokerError]]:
        """Move partitions to new replicas (Kafka's AlterPartitionReassignments, KIP-455);
        -> ``{TopicPartition: None or the error}``, in the order asked.

        ``reassignments`` maps a :class:`TopicPartition` (or kafka-python's, or a
        ``(topic, partition)`` pair) to its target broker ids, the first its preferred
        leader, or to None to cancel the reassignment under way (back to the original
        replicas). The cluster's controller starts each move and answers at once; the
        records are copied in the background, and :meth:`list_partition_reassignments`
        lists the partitions still moving. Each partition is accepted or refused on its
        own (UnknownTopicOrPartitionError; InvalidReplicationAssignmentError for a broker
        that is not alive or is named twice; NoReassignmentInProgressError for a
        cancellation with nothing to cancel); with ``raise_errors`` (the default) the first
        refusal is raised once every partition was answered. Unlike kafka-python, which
        maps a partition to its error class, the value is the error itself, with the
        controller's message. A refusal of the whole request raises, as does
        NotControllerError when no broker answered as the controller within
        ``timeout_ms`` (default: the client's ``request_timeout_ms``).
        """
        transport = self._check_open()
        timeout = self._timeout_ms(timeout_ms)
        if not isinstance(reassignments, Mapping):
            raise errors.InvalidArgumentTypeError("reassignments must be a dict {TopicPartition: [broker ids] or None}, "
                                                  "not %r" % (reassignments,))
        targets: Dict[Tuple[str, int], Optional[List[int]]] = {}  # TopicPartition keys, as the transport takes them
        for key, replicas in reassignments.items():
            tp = _topic_partition(key)
            targets[tp] = None if replicas is None else _replica_ids(tp, replicas)
        if not targets:
            return {}
        outcomes = transport.alter_partition_reassignments(targets, timeout)
        results: Dict[TopicPartition, Optional[errors.BrokerError]] = {}
        for topic, partition in targets:
            code, message = outcomes.get((topic, partition), (
                errors.UnknownServerError.code, "the controller answered nothing for %s-%d" % (topic, partition)))
            cls = errors.error_for_code(code)
            # The controller's message names the partition; a bare code gets it named here.
            results[TopicPartition(topic, partition)] = None if cls is None else cls(
                message or "reassigning %s-%d: %s" % (topic, partition, cls.message))
        if raise_errors:
            for error in results.values():
                if error is not None:
                    raise error
        return results

    def list_partition_reassignments(self, topic_partitions: Any = None, timeout_ms: Optional[int] = None
                                     ) -> Dict[TopicPartition, Dict[str, List[int]]]:
        """The reassignments under way (Kafka's ListPartitionReassignments, answered by the
        controller), as kafka-python returns them: ``{TopicPartition: {"replicas",
        "adding_replicas", "removing_replicas"}}``, sorted. ``replicas`` is the partition's
        whole set while it moves (the target's and the original's together); a partition
        leaves the listing once its target replicas are in sync and the others removed.

        ``topic_partitions``: ``{topic: [partitions]}``, a list of :class:`TopicPartition`
        (or pairs), or None for every partition; a partition that is not moving (or does
        not exist) is left out. Errors as :meth:`alter_partition_reassignments`.
        """
        transport = self._check_open()
        timeout = self._timeout_ms(timeout_ms)
        wanted = _partitions_asked(topic_partitions)
        found = transport.list_partition_reassignments(wanted, timeout)
        return {TopicPartition(topic, partition): {"replicas": list(moving.replicas),
                                                   "adding_replicas": list(moving.adding),
                                                   "removing_replicas": list(moving.removing)}
                for (topic, partition), moving in sorted(found.items())}

    def elect_leaders(self, election_type: Any, topic_partitions: Any = None, timeout_ms: Optional[int] = None,
                      raise_errors: bool = False) -> Dict[TopicPartition, Optional[errors.BrokerError]]:
        """Elect partitions' leaders (Kafka's ElectLeaders, KIP-460) -> ``{TopicPartition: None
        or the error}``, as confluent-kafka's ``elect_leaders`` answers.

        ``election_type``: 0 or ``"PREFERRED"`` gives each partition back to its preferred
        replica where it is alive and in sync (PreferredLeaderNotAvailableError otherwise);
        1 or ``"UNCLEAN"`` gives a partition without a live leader the first live in-sync
        replica, else any live replica (EligibleLeadersNotAvailableError with none).
        ElectionNotNeededError: the partition has the leader it should. ``topic_partitions``:
        ``{topic: [partitions]}``, a list of :class:`TopicPartition` (or pairs), or None for
        every partition (then only those that needed an election are answered).
        ``raise_errors`` raises the first error other than ElectionNotNeededError once every
        partition was answered. The controller holds them; NotControllerError as
        :meth:`alter_partition_reassignments`.
        """
        transport = self._check_open()
        timeout = self._timeout_ms(timeout_ms)
        kinds = {"PREFERRED": 0, "UNCLEAN": 1}
        kind = kinds.get(election_type.upper()) if isinstance(election_type, str) else election_type
        if kind not in (0, 1) or isinstance(kind, bool):
            raise errors.InvalidArgumentError("election_type must be 0 (PREFERRED) or 1 (UNCLEAN), not %r"
                                              % (election_type,))
        wanted = _partitions_asked(topic_partitions)
        outcomes = transport.elect_leaders(kind, wanted, timeout)
        results: Dict[TopicPartition, Optional[errors.BrokerError]] = {}
        for (topic, partition), (code, message) in outcomes.items():
            cls = errors.error_for_code(code)
            results[TopicPartition(topic, partition)] = None if cls is None else cls(
                message or "electing the leader of %s-%d: %s" % (topic, partition, cls.message))
        if raise_errors:
            for error in results.values():
                if error is not None and not isinstance(error, errors.ElectionNotNeededError):
                    raise error
        return results

    # -- cluster and log dirs -------------------------------------------------------------

    def describe_cluster(self) -> Dict[str, Any]:
        """The cluster as kafka-python's ``describe_cluster`` returns it (Kafka's DescribeCluster):
        ``{"cluster_id", "controller_id", "brokers": [{"broker_id", "host", "port", "rack"}]}``."""
        described = self._check_open().describe_cluster()
        return {"cluster_id": described.cluster_id, "controller_id": described.controller_id,
                "brokers": [b._asdict() for b in described.brokers]}

    def describe_user_scram_credentials(self, users: Optional[Iterable[str]] = None) -> Dict[str, Any]:
        """Users' SCRAM credentials (every user's when ``users`` is None): user -> a list of
        ``(mechanism, iterations)``, or the error (a BrokerError) the broker answered for it
        (RESOURCE_NOT_FOUND for a user without credentials)."""
        described = self._check_open().describe_user_scram_credentials(None if users is None else list(users))
        out: Dict[str, Any] = {}
        for d in described:
            cls = errors.error_for_code(d.error_code) if d.error_code else None
            out[d.user] = d.credentials if cls is None else cls(d.error_message or cls.message)
        return out

    def alter_user_scram_credentials(self, alterations: Iterable[Any], raise_errors: bool = True
                                     ) -> Dict[str, Optional[errors.BrokerError]]:
        """Apply :class:`UserScramCredentialUpsertion` and :class:`UserScramCredentialDeletion`
        items; -> user -> None or the broker's error for that user (raised, the first one,
        when ``raise_errors``). A user with any refused change keeps all its credentials."""
        deletions: List[ScramCredentialDeletion] = []
        upsertions: List[ScramCredentialUpsertion] = []
        for item in alterations:
            if isinstance(item, UserScramCredentialDeletion):
                deletions.append(ScramCredentialDeletion(item.user, _scram_type(item.mechanism)))
            elif isinstance(item, UserScramCredentialUpsertion):
                kind = _scram_type(item.mechanism)
                salt = item.salt if item.salt is not None else os.urandom(32)
                # Out-of-range iterations go to the broker unsalted, for its answer (UNACCEPTABLE_CREDENTIAL).
                salted = (salted_password(item.mechanism.upper(), item.password, salt, item.iterations)
                          if 0 < item.iterations <= MAX_ITERATIONS else b"")
                upsertions.append(ScramCredentialUpsertion(item.user, kind, item.iterations, salt, salted))
            else:
                raise ConfigError("alter_user_scram_credentials takes UserScramCredentialUpsertion and "
                                  "UserScramCredentialDeletion items, not %r" % (item,))
        answers = self._check_open().alter_user_scram_credentials(deletions, upsertions)
        out: Dict[str, Optional[errors.BrokerError]] = {user: _error(code, message)
                                                    for user, (code, message) in answers.items()}
        if raise_errors:
            for failure in out.values():
                if failure is not None:
                    raise failure
        return out

    # -- ACLs (kafka-python's calls) -----------------------------------------------------------

    def describe_acls(self, acl_filter: Any) -> Tuple[List[ACL], None]:
        """The ACLs an :class:`ACLFilter` matches, as kafka-python answers: ``(acls, None)``
        (kafka-python's second element is its NoError); the broker's refusal raises
        (SecurityDisabledError without an authorizer, ClusterAuthorizationFailedError
        without DESCRIBE on the cluster)."""
        return [_acl(b) for b in self._check_open().describe_acls(_binding_filter(acl_filter))], None

    def create_acls(self, acls: Iterable[Any]) -> Dict[str, List[Any]]:
        """Create :class:`ACL` s; -> ``{"succeeded": [acl, ...], "failed": [(acl, error), ...]}``
        (kafka-python's keys; a failure is paired with the ACL it belongs to)."""
        items = list(acls)
        answers = self._check_open().create_acls([_binding(a) for a in items])
        out: Dict[str, List[Any]] = {"succeeded": [], "failed": []}
        for acl, (code, message) in zip(items, answers):
            failure = _error(code, message)
            if failure is None:
                out["succeeded"].append(acl)
            else:
                out["failed"].append((acl, failure))
        return out

    def delete_acls(self, acl_filters: Iterable[Any]) -> List[Tuple[Any, List[ACL], Optional[errors.BrokerError]]]:
        """Delete the ACLs each :class:`ACLFilter` matches; -> per filter, as kafka-python:
        ``(filter, [the ACLs deleted], None or the error)``."""
        items = list(acl_filters)
        answers = self._check_open().delete_acls([_binding_filter(f) for f in items])
        out: List[Tuple[Any, List[ACL], Optional[errors.BrokerError]]] = []
        for acl_filter, (code, message, matching) in zip(items, answers):
            failure = _error(code, message)
            deleted = []
            for binding, entry_code, entry_message in matching:
                if entry_code:
                    failure = failure or _error(entry_code, entry_message)
                else:
                    deleted.append(_acl(binding))
            out.append((acl_filter, deleted, failure))
        return out

    # -- client quotas (Kafka's Admin calls) -------------------------------------------------------

    def describe_client_quotas(self, components: Iterable[ClientQuotaFilterComponent] = (), strict: bool = False
                               ) -> Dict[ClientQuotaEntity, Dict[str, float]]:
        """The client quotas whose entities match every component (Kafka's describeClientQuotas;
        ``strict`` leaves out entities with a type no component names): entity -> quota key
        -> value. A filter the broker refuses raises its error (INVALID_REQUEST, ...)."""
        items = [QuotaFilterComponent(c.entity_type, int(c.match_type), c.match) for c in components]
        return self._check_open().describe_client_quotas(items, strict)

    def alter_client_quotas(self, alterations: Iterable[ClientQuotaAlteration], validate_only: bool = False,
                            raise_errors: bool = True) -> Dict[ClientQuotaEntity, Optional[errors.BrokerError]]:
        """Apply each alteration (Kafka's alterClientQuotas); -> entity -> None or the broker's
        error for it (raised, the first one, when ``raise_errors``). An entity with a refused
        change keeps all its quotas."""
        items = [QuotaAlteration(tuple(sorted(dict(a.entity).items())),
                                 [(key, None if value is None else float(value)) for key, value in a.ops])
                 for a in alterations]
        answers = self._check_open().alter_client_quotas(items, validate_only)
        out: Dict[ClientQuotaEntity, Optional[errors.BrokerError]] = {entity: _error(code, message)
                                                                  for entity, (code, message) in answers.items()}
        if raise_errors:
            for failure in out.values():
                if failure is not None:
                    raise failure
        return out

    def describe_log_dirs(self, topic_partitions: Any = None, brokers: Optional[Iterable[int]] = None
                          ) -> List[Dict[str, Any]]:
        """Each broker's log directories as kafka-python's ``describe_log_dirs`` returns them:
        ``[{"broker": id, "log_dirs": [{"error_code", "log_dir", "topics": [{"name", "partitions":
        [{"partition_index", "partition_size", "offset_lag", "is_future_key"}]}], "total_bytes",
        "usable_bytes"}]}]``.

        ``topic_partitions``: ``{topic: [partitions]}``, a list of topics (all their
        partitions; an unknown topic has none), or None for every partition. ``brokers``:
        the broker ids to ask (None: all).
        """
        transport = self._check_open()
        query: Optional[Dict[str, List[int]]] = None
        if isinstance(topic_partitions, Mapping):
            query = {str(t): [int(p) for p in parts] for t, parts in topic_partitions.items()}
        elif topic_partitions is not None:
            query = {}
            for topic in _names(topic_partitions, "topic_partitions"):
                count = transport.partitions_for(topic)
                query[topic] = list(range(count or 0))
        found = transport.describe_log_dirs(query)
        wanted = None if brokers is None else list(brokers)
        out = []
        for broker_id in (sorted(found) if wanted is None else wanted):
            if broker_id not in found:
                raise errors.BrokerNotAvailableError("broker %r is not in the cluster (brokers: %s)"
                                                     % (broker_id, ", ".join(map(str, sorted(found)))))
            out.append({"broker": broker_id, "log_dirs": [d.as_result() for d in found[broker_id]]})
        return out

    def alter_replica_log_dirs(self, replica_assignments: Mapping[Any, str], raise_errors: bool = True
                               ) -> Dict[Tuple[str, int, int], Optional[errors.BrokerError]]:
        """Move replicas between their brokers' log directories (Kafka's alterReplicaLogDirs);
        -> ``{(topic, partition, broker): None or the error}``.

        ``replica_assignments`` maps a replica, ``(topic, partition, broker id)`` (or an
        object with ``topic``, ``partition`` and ``broker_id`` attributes, as Kafka's
        TopicPartitionReplica), to the absolute path of one of that broker's ``log.dirs``.
        Each broker copies its replica there in the background while it goes on serving
        it (:meth:`describe_replica_log_dirs` shows the progress). A replica the broker
        does not have yet answers ReplicaNotAvailableError, and is created in that
        directory when it comes; LogDirNotFoundError names a directory the broker does not
        have, KafkaStorageError an offline one. With ``raise_errors`` the first error is
        raised once every replica was answered.
        """
        transport = self._check_open()
        if not isinstance(replica_assignments, Mapping):
            raise errors.InvalidArgumentTypeError("replica_assignments must be a dict {(topic, partition, broker): "
                                                  "log dir}, not %r" % (replica_assignments,))
        dirs = {_replica(key): str(path) for key, path in replica_assignments.items()}
        codes = transport.alter_replica_log_dirs(dirs)
        out: Dict[Tuple[str, int, int], Optional[errors.BrokerError]] = {}
        for replica in dirs:
            cls = errors.error_for_code(codes.get(replica, errors.UnknownServerError.code))
            out[replica] = None if cls is None else cls(
                "%s-%d on broker %d: %s" % (replica[0], replica[1], replica[2], dirs[replica]))
        if raise_errors:
            for error in out.values():
                if error is not None:
                    raise error
        return out

    def describe_replica_log_dirs(self, replicas: Iterable[Any]) -> Dict[Tuple[str, int, int], Dict[str, Any]]:
        """Where each replica's log is (Kafka's describeReplicaLogDirs): ``{(topic, partition,
        broker): {"current_replica_log_dir", "current_replica_offset_lag", "future_replica_log_dir",
        "future_replica_offset_lag"}}`` (None and -1 where there is none: no log there, or no move
        under way)."""
        transport = self._check_open()
        wanted = [_replica(r) for r in replicas]
        query: Dict[str, List[int]] = {}
        for topic, partition, _ in wanted:
            query.setdefault(topic, []).append(partition)
        found = transport.describe_log_dirs(query)
        out: Dict[Tuple[str, int, int], Dict[str, Any]] = {}
        for topic, partition, broker in wanted:
            entry: Dict[str, Any] = {"current_replica_log_dir": None, "current_replica_offset_lag": -1,
                                     "future_replica_log_dir": None, "future_replica_offset_lag": -1}
            for d in found.get(broker, []):
                for r in d.replicas:
                    if (r.topic, r.partition) == (topic, partition):
                        side = "future" if r.is_future else "current"
                        entry["%s_replica_log_dir" % side] = d.path
                        entry["%s_replica_offset_lag" % side] = r.offset_lag
            out[(topic, partition, broker)] = entry
        return out

    def __repr__(self) -> str:
        return "AdminClient(client_id=%r%s)" % (self.config["client_id"], ", closed" if self._closed else "")


# -- helpers -------------------------------------------------------------------------------


def _timeout(value: Any, key: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError("Invalid value %r for configuration %s: expected an integer >= 0" % (value, key))
    return value


def _names(values: Iterable[str], what: str) -> List[str]:
    if isinstance(values, (str, bytes)):
        raise errors.InvalidArgumentTypeError("%s must be a list of names, not the single name %r" % (what, values))
    return list(values)


def _finish(results: Dict[str, Optional[errors.BrokerError]], raise_errors: bool
            ) -> Dict[str, Optional[errors.BrokerError]]:
    if raise_errors:
        for error in results.values():
            if error is not None:
                raise error
    return results


def _partition_results(codes: Mapping[Tuple[str, int], int], partitions: Iterable[Tuple[str, int]], what: str,
                       raise_errors: bool) -> Dict[TopicPartition, Optional[errors.BrokerError]]:
    """Each partition's error (None for none) from its code, as ``<what> for <topic>-<partition>:
    <message>``; the first one raised when ``raise_errors``."""
    results: Dict[TopicPartition, Optional[errors.BrokerError]] = {}
    for topic, partition in partitions:
        cls = errors.error_for_code(codes.get((topic, partition), 0))
        results[TopicPartition(topic, partition)] = None if cls is None else cls(
            "%s for %s-%d: %s" % (what, topic, partition, cls.message))
    if raise_errors:
        for error in results.values():
            if error is not None:
                raise error
    return results


def _finish_nested(results: Dict[str, Dict[str, Optional[errors.BrokerError]]], raise_errors: bool
                   ) -> Dict[str, Dict[str, Optional[errors.BrokerError]]]:
    for inner in results.values():
        _finish(inner, raise_errors)
    return results


def _raise_code(code: int, context: str) -> None:
    cls = errors.error_for_code(code)
    if cls is not None:
        raise cls("%s: %s" % (context, cls.message))


_ABORT_REASONS = {
    errors.InvalidProducerEpochError.code: "the partition has seen a newer epoch of this producer",
    errors.TransactionCoordinatorFencedError.code: "the coordinator epoch is older than the one the partition's "
                                                   "last marker of this producer carried",
    errors.ClusterAuthorizationFailedError.code: "writing transaction markers needs ClusterAction on the cluster",
}


def _transaction_error(code: int, transactional_id: str) -> errors.BrokerError:
    """The error of a transactional id DescribeTransactions could not describe."""
    cls = errors.error_for_code(code) or errors.UnknownServerError
    if cls is errors.TransactionalIdNotFoundError:
        return cls("transactional id %r is not known to its coordinator" % transactional_id)
    return cls("describing transactional id %r: %s" % (transactional_id, cls.message))


def _group_error_message(cls: type, group_id: str, what: str = "deleting") -> str:
    if cls is errors.NonEmptyGroupError:
        return "group %r still has members; it can be deleted once they have left" % group_id
    if cls is errors.GroupIdNotFoundError:
        return "group %r does not exist" % group_id
    return "%s group %r failed" % (what, group_id)


def _items(values: Iterable[Any], what: str) -> List[Any]:
    """A list from an iterable of items; a lone TopicPartition or pair is refused by name."""
    if isinstance(values, (str, bytes)) or hasattr(values, "topic"):
        raise errors.InvalidArgumentTypeError("%s must be a list of TopicPartitions or (topic, partition) pairs, not %r"
                                              % (what, values))
    return list(values)


def _replica_ids(tp: TopicPartition, replicas: Any) -> List[int]:
    """A reassignment's target replicas as a list of broker ids, checked before anything is sent."""
    if isinstance(replicas, (str, bytes)) or not isinstance(replicas, (list, tuple)) or \
            not all(isinstance(b, int) and not isinstance(b, bool) for b in replicas):
        raise errors.InvalidArgumentTypeError("the target replicas of %s-%d must be a list of broker ids (None "
                                              "cancels its reassignment), not %r" % (tp.topic, tp.partition, replicas))
    if not replicas:
        raise errors.InvalidArgumentError("the target replicas of %s-%d must name at least one broker (None "
                                          "cancels its reassignment), not []" % (tp.topic, tp.partition))
    return list(replicas)


def _decode(decoder: Any, data: bytes) -> Any:
    """A member's protocol bytes decoded; kept as bytes when empty or not parseable (as kafka-python)."""
    if not data:
        return data
    try:
        return decoder(data)
    except errors.InvalidConsumerProtocolError:
        return data


def _partitions_asked(topic_partitions: Any) -> Optional[List[Tuple[str, int]]]:
    """``{topic: [partitions]}``, a list of TopicPartitions (or pairs), or None (every one)."""
    if topic_partitions is None:
        return None
    if isinstance(topic_partitions, Mapping):
        return [(tp.topic, tp.partition) for topic, parts in topic_partitions.items()
                for tp in (_topic_partition((topic, p)) for p in _items(parts, "the partitions of %r" % (topic,)))]
    return [(tp.topic, tp.partition) for tp in (_topic_partition(v) for v in _items(topic_partitions, "topic_partitions"))]


def _replica(value: Any) -> Tuple[str, int, int]:
    """(topic, partition, broker id) from a triple or an object with ``topic``, ``partition``
    and ``broker_id`` (Kafka's TopicPartitionReplica)."""
    if isinstance(value, tuple) and len(value) == 3:
        topic, partition, broker = value
    else:
        topic, partition, broker = (getattr(value, "topic", None), getattr(value, "partition", None),
                                    getattr(value, "broker_id", None))
    if not isinstance(topic, str) or any(not isinstance(v, int) or isinstance(v, bool) for v in (partition, broker)):
        raise errors.InvalidArgumentTypeError("a replica must be a (topic, partition, broker id) triple, not %r"
                                              % (value,))
    return topic, int(partition), int(broker)


def _topic_partition(value: Any) -> TopicPartition:
    """A TopicPartition from ours, kafka-python's, or a ``(topic, partition)`` pair."""
    topic = getattr(value, "topic", None)
    partition = getattr(value, "partition", None)
    if topic is None and isinstance(value, tuple) and len(value) == 2:
        topic, partition = value
    if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
        raise errors.InvalidArgumentTypeError("a partition must be a TopicPartition or a (topic, partition) pair, "
                                              "not %r" % (value,))
    return TopicPartition(topic, partition)


def _config_filter(value: Any) -> str:
    name = getattr(value, "name", value)
    mode = str(name).lower()
    if mode not in _CONFIG_FILTERS:
        raise ConfigError("unknown config_filter %r; expected one of %s" % (value, ", ".join(_CONFIG_FILTERS)))
    return mode


def _check_log_config(configs: Mapping[str, Any]) -> None:
    """Validate topic config overrides as the broker does: InvalidConfigError naming the key."""
    try:
        LogConfig().merged(dict(configs))
    except ConfigError as exc:
        raise errors.InvalidConfigError(str(exc)) from None


def _list_items(value: Any) -> List[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value]
    raise errors.InvalidConfigError("expected a comma-separated string or a list, got %r" % (value,))


def _alter_entries(configs: Any) -> Dict[str, Tuple[AlterConfigOp, Any]]:
    """``{key: value}`` or ``{key: (op, value)}`` as ``{key: (op, value)}``."""
    if not configs:
        return {}
    if not isinstance(configs, Mapping):
        raise errors.InvalidArgumentTypeError("configs to alter must be a dict {key: value} or {key: (op, value)}, "
                                              "not %r" % (configs,))
    out: Dict[str, Tuple[AlterConfigOp, Any]] = {}
    for key, entry in configs.items():
        if isinstance(entry, tuple) and len(entry) == 2:
            op = _alter_op(entry[0])
            out[key] = (op, None if op is AlterConfigOp.DELETE else entry[1])
        else:
            out[key] = (AlterConfigOp.SET, entry)
    return out


_TopicSpec = Tuple[str, Optional[int], Optional[int], Dict[int, List[int]], Dict[str, Any]]


def _new_topic_specs(new_topics: Any) -> List[_TopicSpec]:
    """``(name, partitions, factor, assignments, configs)`` per requested topic; -1 becomes None."""
    def opt(value: Any) -> Optional[int]:
        return None if value is None or value == -1 else value

    specs: List[_TopicSpec] = []
    if isinstance(new_topics, Mapping):
        for name, data in new_topics.items():
            data = data or {}
            specs.append((name, opt(data.get("num_partitions", -1)), opt(data.get("replication_factor", -1)),
                          {int(p): list(r) for p, r in (data.get("assignments") or {}).items()},
                          dict(data.get("configs") or {})))
    else:
        if isinstance(new_topics, (str, bytes)):
            raise errors.InvalidArgumentTypeError("new_topics must be a list, not the single name %r" % (new_topics,))
        for item in new_topics:
            if isinstance(item, str):
                specs.append((item, None, None, {}, {}))
            elif hasattr(item, "name") and hasattr(item, "num_partitions"):
                specs.append((item.name, opt(item.num_partitions), opt(getattr(item, "replication_factor", -1)),
                              {int(p): list(r) for p, r in (getattr(item, "replica_assignments", None) or {}).items()},
                              dict(getattr(item, "topic_configs", None) or {})))
            else:
                raise errors.InvalidArgumentTypeError("new_topics items must be NewTopics or topic names, not %r"
                                                      % (item,))
    if not specs:
        raise errors.InvalidArgumentError("new_topics must name at least one topic, not %r" % (new_topics,))
    return specs


def _resolve_assignments(name: str, partitions: Optional[int], factor: Optional[int],
                         assignments: Dict[int, List[int]], broker_ids: Optional[List[int]]
                         ) -> Tuple[Optional[int], Optional[int]]:
    """Partitions and replication factor implied by explicit replica assignments, checked
    as the broker checks them (validate_only, where nothing reaches the broker)."""
    if not assignments:
        return partitions, factor
    if partitions is not None or factor is not None:
        raise errors.InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments were set. "
                                         "Both cannot be used at the same time.")
    placed = check_new_assignment(assignments, _live(assignments.values(), broker_ids))
    return len(placed), len(placed[0])


def _live(assignments: Iterable[Sequence[int]], broker_ids: Optional[List[int]]) -> Set[int]:
    """The live brokers an assignment is checked against (every one it names when unknown)."""
    if broker_ids is not None:
        return set(broker_ids)
    return {b for replicas in assignments for b in replicas}


def _partitions_spec(topic: str, spec: Any) -> Tuple[Any, Optional[List[List[int]]]]:
    if isinstance(spec, int) and not isinstance(spec, bool):
        return spec, None
    if isinstance(spec, Mapping):
        assignments = spec.get("assignments")
        return spec.get("count"), None if assignments is None else [list(a) for a in assignments]
    if hasattr(spec, "total_count"):
        assignments = getattr(spec, "new_assignments", None)
        return spec.total_count, None if assignments is None else [list(a) for a in assignments]
    raise errors.InvalidArgumentTypeError("new partitions of topic %r must be NewPartitions, an int total or "
                                          "{'count': ...}, not %r" % (topic, spec))
