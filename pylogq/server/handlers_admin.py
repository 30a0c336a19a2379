"""The administration APIs: topics, partitions, configs, log directories and the cluster.

CreateTopics, DeleteTopics and CreatePartitions run on the server's admin thread
(they take the broker's admin lock one at a time, and do file and store work);
DescribeConfigs, AlterConfigs and IncrementalAlterConfigs cover TOPIC and BROKER
resources with Kafka's sources, synonyms and types; DescribeLogDirs and
DescribeCluster describe this broker and its cluster. Each entry answers its own
error, as Kafka's AdminManager does.
"""

from __future__ import annotations

import logging
import uuid
from typing import Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Type, TypeVar, Union

from .. import errors
from ..cluster.acl import AclOperation, ResourceType
from ..cluster.contract import LogDirDescription, TopicDescription
from ..protocol.constants import AlterConfigOp, ConfigResourceType, ConfigSource
from ..protocol.message_data import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from .connection import Connection, RequestSlot
from .handler_base import (
    NOT_COMPUTED,
    ZERO_UUID,
    HandlerBase,
    error_code,
    error_message,
    text_of,
    uuid_of,
)

log = logging.getLogger("pylogq.server")

__all__ = ["AdminHandlers"]

#: The first versions whose clients are told THROTTLING_QUOTA_EXCEEDED (KIP-599); older
#: ones are throttled after the change instead (Kafka's permissive quota).
STRICT_CREATE_TOPICS = 6
STRICT_DELETE_TOPICS = 5
STRICT_CREATE_PARTITIONS = 3
_T = TypeVar("_T")


def _partitions_created(created: TopicDescription) -> int:
    return len(created.partitions)

# DescribeCluster's endpoint types (KIP-919): a broker describes brokers (1), not controllers (2).
_BROKERS_ENDPOINT = 1
_ENDPOINT_TYPES = (1, 2)
# DescribeConfigs v3+'s ConfigType per kind of setting (PASSWORD 9 for the sensitive ones).
_CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7, "CLASS": 8}
_PASSWORD = 9

_CreatedConfig = CreateTopicsResponse.CreatableTopicConfigs
_ConfigResult = DescribeConfigsResponse.DescribeConfigsResourceResult
_Synonym = DescribeConfigsResponse.DescribeConfigsSynonym
#: A resource of AlterConfigs or of IncrementalAlterConfigs, and its answer.
_Resource = TypeVar("_Resource", AlterConfigsRequest.AlterConfigsResource,
                    IncrementalAlterConfigsRequest.AlterConfigsResource)
_Altered = TypeVar("_Altered", AlterConfigsResponse.AlterConfigsResourceResponse,
                   IncrementalAlterConfigsResponse.AlterConfigsResourceResponse)


class AdminHandlers(HandlerBase):
    """The administration APIs (mixed into :class:`pylogq.server.handlers.Handlers`)."""

    # -- DescribeCluster, DescribeLogDirs -----------------------------------------------

    def describe_cluster(self, conn: Connection, req: DescribeClusterRequest, version: int,
                         slot: RequestSlot) -> DescribeClusterResponse:
        """Kafka's DescribeCluster: the cluster id, this broker as controller and as the one
        broker, at the address advertised for the listener the request came in on.

        As Kafka's brokers: an unknown endpoint type answers UNSUPPORTED_ENDPOINT_TYPE,
        controllers (2) MISMATCHED_ENDPOINT_TYPE (INVALID_REQUEST for either at v0, which
        has no endpoint type). Asked for the cluster's authorized operations, a broker
        without an authorizer allows every operation on the cluster resource; with one, those
        the principal may do (none without DESCRIBE on the cluster).
        """
        endpoint = req.endpoint_type
        message: Optional[str]
        if endpoint not in _ENDPOINT_TYPES:
            code = errors.UnsupportedEndpointTypeError.code
            message = "unsupported endpoint type %d" % endpoint
        elif endpoint != _BROKERS_ENDPOINT:
            code = errors.MismatchedEndpointTypeError.code
            message = "the request was sent to an endpoint of type brokers (1), but wanted type %d" % endpoint
        else:
            code, message = 0, None
        if code:
            return DescribeClusterResponse(throttle_time_ms=0,
                                           error_code=errors.InvalidRequestError.code if version == 0 else code,
                                           error_message=message)
        controller, brokers = self._brokers_for(conn)
        operations = self.authz.cluster_operations(conn) if req.include_cluster_authorized_operations \
            else NOT_COMPUTED
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=endpoint,
            cluster_id=self.broker.cluster_id, controller_id=controller,
            brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=b, host=h, port=p, rack=r)
                     for b, h, p, r in brokers],
            cluster_authorized_operations=operations)

    async def describe_log_dirs(self, conn: Connection, req: DescribeLogDirsRequest, version: int,
                                slot: RequestSlot) -> DescribeLogDirsResponse:
        """Kafka's DescribeLogDirs (null topics: every partition), off the loop: it takes the
        log manager's lock, which opening logs holds."""
        query: Optional[Dict[str, List[int]]] = None
        if req.topics is not None:
            query = {}
            for topic in req.topics:
                query.setdefault(topic.topic, []).extend(topic.partitions)
        try:
            dirs: List[LogDirDescription] = await self._blocking(self.broker.describe_log_dirs, query)
        except Exception as exc:  # noqa: BLE001 - reported as the response's error (v3+)
            return DescribeLogDirsResponse(throttle_time_ms=0,
                                           error_code=error_code(self._failed(conn, exc, "describe log dirs")),
                                           results=[])
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[_log_dir_result(d) for d in dirs])

    async def alter_replica_log_dirs(self, conn: Connection, req: AlterReplicaLogDirsRequest, version: int,
                                     slot: RequestSlot) -> AlterReplicaLogDirsResponse:
        """Kafka's AlterReplicaLogDirs: this broker moves its replicas of the partitions named to
        the directories named (each partition answers its error), off the loop: it takes the
        log manager's lock. A partition named under two directories answers INVALID_REQUEST
        (Kafka's DuplicateResourceException)."""
        dirs: Dict[Tuple[str, int], str] = {}
        twice = set()
        order: List[Tuple[str, int]] = []
        for d in req.dirs:
            for t in d.topics:
                for p in t.partitions:
                    tp = (t.name, p)
                    if tp in dirs:
                        twice.add(tp)
                    else:
                        order.append(tp)
                    dirs[tp] = d.path
        codes: Dict[Tuple[str, int], int] = {tp: errors.InvalidRequestError.code for tp in twice}
        wanted = {tp: path for tp, path in dirs.items() if tp not in twice}
        if wanted:
            try:
                codes.update(await self._blocking(self.broker.alter_replica_log_dirs, wanted))
            except Exception as exc:  # noqa: BLE001 - each partition answers the error
                code = error_code(self._failed(conn, exc, "alter replica log dirs"))
                codes.update({tp: code for tp in wanted})
        by_topic: Dict[str, List[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult]] = {}
        for topic, p in order:
            by_topic.setdefault(topic, []).append(AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(
                partition_index=p, error_code=codes[(topic, p)]))
        return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
            AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=t, partitions=ps)
            for t, ps in by_topic.items()])

    # -- topics and configs -----------------------------------------------------------------

    async def create_topics(self, conn: Connection, req: CreateTopicsRequest, version: int,
                            slot: RequestSlot) -> CreateTopicsResponse:
        names = [t.name for t in req.topics]
        # CREATE on the cluster creates any topic; else CREATE on each topic. Its configs are
        # answered (v5+) where it may DESCRIBE_CONFIGS the topic.
        refused = set() if self.authz.cluster(conn, AclOperation.CREATE) else \
            self.authz.refused_names(conn, AclOperation.CREATE, ResourceType.TOPIC, names)
        undescribed = self.authz.refused_names(conn, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names)
        results = []
        for t in req.topics:
            out = CreateTopicsResponse.CreatableTopicResult(name=t.name, error_code=0, error_message=None)
            try:
                if t.name in refused:
                    raise errors.TopicAuthorizationFailedError("Authorization failed.")
                partitions = t.num_partitions
                factor = t.replication_factor
                assignment: Optional[Dict[int, List[int]]] = None
                if t.assignments:  # placed as given; the broker checks them as Kafka does
                    assignment = {}
                    for a in t.assignments:
                        if a.partition_index in assignment:  # Kafka's map would keep one
                            raise errors.InvalidReplicationAssignmentError(
                                "partitions should be a consecutive 0-based integer sequence")
                        assignment[a.partition_index] = list(a.broker_ids)
                config = {c.name: c.value for c in t.configs if c.value is not None}
                created: TopicDescription = await self._mutating(conn, slot, version >= STRICT_CREATE_TOPICS,
                                                                 req.validate_only, _partitions_created,
                                                                 self._admin(lambda: self.broker.create_topic(
                    t.name, None if partitions == -1 else partitions, None if factor == -1 else factor,
                    config, validate_only=req.validate_only, replica_assignment=assignment)))
                if version >= 5 and t.name in undescribed:
                    out.topic_config_error_code = errors.TopicAuthorizationFailedError.code
                elif version >= 5:  # what was created (KIP-525): counts and every config with its source
                    self._created_topic(out, created)
            except Exception as exc:  # noqa: BLE001 - reported as this topic's error
                self._entry_failed(out, conn, exc, "creating topic %s" % t.name)
            results.append(out)
        return CreateTopicsResponse(throttle_time_ms=0, topics=results)

    async def _mutating(self, conn: Connection, slot: RequestSlot, strict: bool, validate_only: bool,
                        permits: Union[int, Callable[[_T], int]], change: Awaitable[_T]) -> _T:
        """One topic's change under the client's controller mutation quota (KIP-599).

        A strict quota (the versions that know THROTTLING_QUOTA_EXCEEDED) refuses the change
        while the client's bucket owes tokens, and the response carries that throttle
        (``slot.throttle_ms``); a change it lets through takes its partitions from the bucket,
        into debt if need be, without a throttle: the next one is refused instead (Kafka's
        StrictControllerMutationQuota checks, then records unchecked). A permissive quota
        (older versions) lets every change through and throttles the response by the debt.
        ``permits`` counts the partitions created or deleted: a number, or a function of the
        change's result."""
        quota = self.server.quotas.controller_mutation
        if not quota.enabled or validate_only:
            return await change
        user, client_id = conn.quota_user, conn.client_id
        if strict:
            throttle_ms = quota.mutation_throttle_ms(user, client_id)
            if throttle_ms > 0:
                slot.throttle_ms = max(slot.throttle_ms, throttle_ms)
                close = getattr(change, "close", None)
                if close is not None:
                    close()  # never started: nothing changes
                raise errors.ThrottlingQuotaExceededError("The throttling quota has been exceeded.")
        result = await change
        throttle_ms = quota.take_mutations(user, client_id, permits if isinstance(permits, int) else permits(result))
        if not strict:
            slot.throttle_ms = max(slot.throttle_ms, throttle_ms)
        return result

    def _partition_count(self, topic: str) -> int:
        try:
            return self.broker.partitions_for(topic)
        except errors.BrokerError:
            return 0  # the change itself answers the topic's error

    def _created_topic(self, out: CreateTopicsResponse.CreatableTopicResult, created: TopicDescription) -> None:
        """CreateTopics v5+'s description of a topic created (or that would be, validateOnly),
        set on its result ``out``."""
        overrides = created.config
        effective = self.broker.default_log_config.merged(overrides).to_strings()
        configs = [_CreatedConfig(name=name, value=value, read_only=False, is_sensitive=False,
                                  config_source=ConfigSource.DEFAULT_CONFIG if name not in overrides
                                  else ConfigSource.DYNAMIC_TOPIC_CONFIG)
                   for name, value in sorted(effective.items())]
        factor = len(created.partitions[0].replicas) if created.partitions else -1
        topic_id = uuid_of(created.topic_id)
        out.num_partitions = len(created.partitions)
        out.replication_factor = factor
        out.configs = configs
        out.topic_id = topic_id

    async def delete_topics(self, conn: Connection, req: DeleteTopicsRequest, version: int,
                            slot: RequestSlot) -> DeleteTopicsResponse:
        """Kafka's DeleteTopics; from v6 a topic is named by name or by id (not both), and the
        answer carries both (an unknown id answers UNKNOWN_TOPIC_ID)."""
        wanted: List[Tuple[Optional[str], uuid.UUID]]
        if version >= 6:
            wanted = [(t.name, t.topic_id) for t in req.topics]
        else:
            wanted = [(name, ZERO_UUID) for name in req.topic_names]
        results = []
        for name, topic_id in wanted:
            out = DeleteTopicsResponse.DeletableTopicResult(name=name, topic_id=topic_id, error_code=0,
                                                            error_message=None)
            try:
                if name is not None and topic_id != ZERO_UUID:
                    raise errors.InvalidRequestError("name a topic by its name or by its id, not both")
                if name is None:
                    name = self.broker.topic_name(text_of(topic_id))
                    if not self.authz.allowed(conn, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                        name = None  # its name stays unsaid: the id is no secret, the name is
                        raise errors.TopicAuthorizationFailedError("not authorized to describe the topic")
                    out.name = name
                elif version >= 6:
                    try:
                        out.topic_id = uuid_of(self.broker.topic_id(name))
                    except errors.UnknownTopicOrPartitionError:
                        pass  # answered by the delete below
                if not self.authz.allowed(conn, AclOperation.DELETE, ResourceType.TOPIC, name):
                    raise errors.TopicAuthorizationFailedError("not authorized to delete topic %r" % name)
                await self._mutating(conn, slot, version >= STRICT_DELETE_TOPICS, False, self._partition_count(name),
                                     self._admin(self.broker.delete_topic, name))
            except Exception as exc:  # noqa: BLE001 - reported as this topic's error
                self._entry_failed(out, conn, exc, "deleting topic %s" % (name if name is not None else topic_id))
            results.append(out)
        return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

    async def create_partitions(self, conn: Connection, req: CreatePartitionsRequest, version: int,
                                slot: RequestSlot) -> CreatePartitionsResponse:
        results = []
        for t in req.topics:
            out = CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
            try:
                if not self.authz.allowed(conn, AclOperation.ALTER, ResourceType.TOPIC, t.name):
                    raise errors.TopicAuthorizationFailedError("The topic authorization is failed.")
                # Where the new partitions go (null: as the topic's are); the broker checks them.
                assignment = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
                added = t.count - self._partition_count(t.name)
                await self._mutating(conn, slot, version >= STRICT_CREATE_PARTITIONS, req.validate_only,
                                     added, self._admin(self.broker.create_partitions, t.name, t.count,
                                                                req.validate_only, assignment))
            except Exception as exc:  # noqa: BLE001 - reported as this topic's error
                self._entry_failed(out, conn, exc, "adding partitions to topic %s" % t.name)
            results.append(out)
        return CreatePartitionsResponse(throttle_time_ms=0, results=results)

    def describe_configs(self, conn: Connection, req: DescribeConfigsRequest, version: int,
                         slot: RequestSlot) -> DescribeConfigsResponse:
        results = []
        for res in req.resources:
            out = DescribeConfigsResponse.DescribeConfigsResult(
                error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name,
                configs=[])
            keys = res.configuration_keys
            try:
                self._check_configs(conn, AclOperation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
                describe_key: Callable[[str], Optional[Tuple[str, str]]]
                if res.resource_type == ConfigResourceType.TOPIC:
                    entries = self._topic_configs(res.resource_name, req.include_synonyms)
                    describe_key = type(self.broker.default_log_config).describe_key
                elif res.resource_type == ConfigResourceType.BROKER:
                    if res.resource_name not in ("", str(self.broker.broker_id)):
                        raise errors.InvalidRequestError("unknown broker %r" % res.resource_name)
                    entries = self._broker_configs(req.include_synonyms, res.resource_name != "")
                    describe_key = self.broker.config.describe_key
                else:
                    raise errors.InvalidRequestError("resource type %d is not supported" % res.resource_type)
                out.configs = [e for e in entries if keys is None or e.name in keys]
                if version >= 3:  # each config's type, and its documentation when asked for
                    for e in out.configs:
                        kind, doc = describe_key(e.name) or ("", "")
                        e.config_type = _PASSWORD if e.is_sensitive else _CONFIG_TYPES.get(kind, 0)
                        e.documentation = (doc or None) if req.include_documentation else None
            except Exception as exc:  # noqa: BLE001 - reported as this resource's error
                self._entry_failed(out, conn, exc, "describe configs of %s" % res.resource_name)
            results.append(out)
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)

    def _check_configs(self, conn: Connection, operation: AclOperation, resource_type: int, name: str) -> None:
        """A config resource's authorization, as Kafka's: a topic's on the topic, a broker's on
        the cluster (TOPIC_ or CLUSTER_AUTHORIZATION_FAILED)."""
        if resource_type == ConfigResourceType.TOPIC:
            if not self.authz.allowed(conn, operation, ResourceType.TOPIC, name):
                raise errors.TopicAuthorizationFailedError("not authorized to %s topic %r"
                                                           % (operation.name.lower().replace("_", " "), name))
        elif resource_type == ConfigResourceType.BROKER:
            if not self.authz.cluster(conn, operation):
                raise errors.ClusterAuthorizationFailedError("not authorized to %s the brokers"
                                                             % operation.name.lower().replace("_", " "))

    def _topic_configs(self, topic: str, synonyms: bool) -> List[_ConfigResult]:
        defaults = self.broker.default_log_config.to_strings()
        entries = []
        for name, (value, is_default) in self.broker.describe_configs(topic).items():
            source = ConfigSource.DEFAULT_CONFIG if is_default else ConfigSource.DYNAMIC_TOPIC_CONFIG
            syn = []
            if synonyms:
                if not is_default:
                    syn.append(_Synonym(name=name, value=value, source=ConfigSource.DYNAMIC_TOPIC_CONFIG))
                syn.append(_Synonym(name=name, value=defaults.get(name), source=ConfigSource.DEFAULT_CONFIG))
            entries.append(_ConfigResult(name=name, value=value, read_only=False, is_default=is_default,
                                         config_source=source, is_sensitive=False, synonyms=syn))
        return entries

    def _broker_configs(self, synonyms: bool, per_broker: bool) -> List[_ConfigResult]:
        """Every broker setting with its source (a dynamic value, the static one, the default)
        and, with ``synonyms``, every source that has a value, the winning one first (Kafka's
        order). The resource "" (``per_broker`` False) is seen without this broker's own
        dynamic values, as Kafka describes the cluster-wide default."""
        entries = []
        for name, entry in self.broker.broker_configs(per_broker).items():
            source = ConfigSource[entry.source]
            syn = [_Synonym(name=name, value=value, source=ConfigSource[where])
                   for where, value in entry.synonyms] if synonyms else []
            entries.append(_ConfigResult(name=name, value=entry.value, read_only=entry.read_only,
                                         is_default=source == ConfigSource.DEFAULT_CONFIG, config_source=source,
                                         is_sensitive=entry.sensitive, synonyms=syn))
        return entries

    async def alter_configs(self, conn: Connection, req: AlterConfigsRequest, version: int,
                            slot: RequestSlot) -> AlterConfigsResponse:
        responses = await self._alter(conn, req.resources, req.validate_only,
                                      lambda res: {c.name: c.value for c in res.configs},
                                      AlterConfigsResponse.AlterConfigsResourceResponse, incremental=False)
        return AlterConfigsResponse(throttle_time_ms=0, responses=responses)

    async def incremental_alter_configs(self, conn: Connection, req: IncrementalAlterConfigsRequest, version: int,
                                        slot: RequestSlot) -> IncrementalAlterConfigsResponse:
        responses = await self._alter(conn, req.resources, req.validate_only, self._incremental_changes,
                                      IncrementalAlterConfigsResponse.AlterConfigsResourceResponse, incremental=True)
        return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)

    def _incremental_changes(self, res: IncrementalAlterConfigsRequest.AlterConfigsResource
                             ) -> Dict[str, Optional[str]]:
        changes: Dict[str, Optional[str]] = {}
        current: Optional[Dict[str, Tuple[Optional[str], bool]]] = None
        for c in res.configs:
            op, name, value = c.config_operation, c.name, c.value
            if op == AlterConfigOp.SET:
                changes[name] = value
            elif op == AlterConfigOp.DELETE:
                changes[name] = None
            elif op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
                if current is None:
                    current = self.broker.describe_configs(res.resource_name)
                if name not in current:
                    raise errors.InvalidConfigError("unknown config %r" % name)
                items = [v for v in (current[name][0] or "").split(",") if v]
                given = [v.strip() for v in (value or "").split(",") if v.strip()]
                if op == AlterConfigOp.APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                changes[name] = ",".join(items)
            else:
                raise errors.InvalidRequestError("unknown config operation %d for %r" % (op, name))
        return changes

    async def _alter(self, conn: Connection, resources: Sequence[_Resource], validate_only: bool,
                     changes_of: Callable[[_Resource], Dict[str, Optional[str]]], answer: Type[_Altered],
                     incremental: bool) -> List[_Altered]:
        """Each resource of an AlterConfigs (``incremental`` False) or IncrementalAlterConfigs
        request altered, answered as an ``answer``."""
        out = []
        for res in resources:
            entry = answer(error_code=0, error_message=None, resource_type=res.resource_type,
                           resource_name=res.resource_name)
            try:
                self._check_configs(conn, AclOperation.ALTER_CONFIGS, res.resource_type, res.resource_name)
                if res.resource_type == ConfigResourceType.BROKER:
                    await self._admin(self.broker.alter_broker_configs, res.resource_name,
                                      _broker_ops(res), incremental, validate_only)
                elif res.resource_type != ConfigResourceType.TOPIC:
                    raise errors.InvalidRequestError("resource type %d is not supported" % res.resource_type)
                elif validate_only:
                    changes = changes_of(res)
                    self.broker.default_log_config.merged({k: v for k, v in changes.items() if v is not None})
                    self.broker.describe_configs(res.resource_name)
                else:
                    await self._admin(self.broker.alter_configs, res.resource_name, changes_of(res), incremental)
            except errors.ConfigError as exc:
                entry.error_code = errors.InvalidConfigError.code
                entry.error_message = error_message(exc)
            except Exception as exc:  # noqa: BLE001 - reported as this resource's error
                self._entry_failed(entry, conn, exc, "altering the configs of %s" % res.resource_name)
            out.append(entry)
        return out


def _log_dir_result(description: LogDirDescription) -> DescribeLogDirsResponse.DescribeLogDirsResult:
    """A log directory as a DescribeLogDirs result (what :meth:`LogDirDescription.as_result` says)."""
    d = description.as_result()
    return DescribeLogDirsResponse.DescribeLogDirsResult(
        error_code=d["error_code"], log_dir=d["log_dir"], total_bytes=d["total_bytes"], usable_bytes=d["usable_bytes"],
        topics=[DescribeLogDirsResponse.DescribeLogDirsTopic(
            name=t["name"],
            partitions=[DescribeLogDirsResponse.DescribeLogDirsPartition(
                partition_index=p["partition_index"], partition_size=p["partition_size"],
                offset_lag=p["offset_lag"], is_future_key=p["is_future_key"]) for p in t["partitions"]])
            for t in d["topics"]])


def _broker_ops(res: Union[AlterConfigsRequest.AlterConfigsResource,
                           IncrementalAlterConfigsRequest.AlterConfigsResource]
                ) -> List[Tuple[str, str, Optional[str]]]:
    """A BROKER resource's changes as (operation name, key, value): AlterConfigs' entries are
    SETs of the whole new set (a null value is left out, as Kafka leaves it)."""
    if isinstance(res, AlterConfigsRequest.AlterConfigsResource):
        return [("SET", c.name, c.value) for c in res.configs if c.value is not None]
    ops: List[Tuple[str, str, Optional[str]]] = []
    for c in res.configs:
        try:
            op = AlterConfigOp(c.config_operation).name
        except ValueError:
            raise errors.InvalidRequestError("unknown config operation %d for %r"
                                             % (c.config_operation, c.name)) from None
        ops.append((op, c.name, c.value))
    return ops
