"""A broker's administration: topics, configs, users' credentials, log dirs, the cluster.

:class:`BrokerAdmin` holds the calls of :class:`pylogq.Broker` that change or describe
what the broker holds rather than its records, as Kafka's AdminManager (ZkAdminManager)
and ConfigAdminManager do: CreateTopics (and the topics created on first use,
``__consumer_offsets`` among them), DeleteTopics, CreatePartitions, the topics' metadata,
DescribeConfigs and AlterConfigs on topics and brokers (dynamic broker configs), users'
SCRAM credentials, client quotas, DescribeLogDirs and DescribeCluster. On a single node it changes the
topic store and the logs itself; a cluster member goes through the metadata store.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ... import errors
from ...errors import ConfigError
from ...config import LogConfig, sensitive
from ...storage.partition_metadata import ZERO_TOPIC_ID, new_topic_id
from ..contract import (
    BrokerConfigEntry,
    BrokerNode,
    BrokerRegistration,
    ClusterDescription,
    LogDirDescription,
    LogDirsQuery,
    PartitionReassignment,
    PartitionOutcome,
    QuotaAlteration,
    QuotaEntity,
    QuotaFilterComponent,
    ReplicaInfo,
    TopicDescription,
    TopicPartitionInfo,
)
from ..coordinator.group.offsets_topic import OFFSETS_TOPIC
from ..names import INTERNAL_TOPICS, collides, validate_topic_name
from ..replica_assignment import check_added_assignment, check_new_assignment
from ..state.partition import Partition
from .client_quotas import ClientQuotaStore
from .config import is_dynamic_in_kafka
from .dynamic_config import DEFAULT_ENTITY, write_config_file
from .lifecycle import BrokerLifecycle
from .topic_store import TopicMetadata
from .user_credentials import UserCredentials

if TYPE_CHECKING:
    from .log_dir_mover import LogDirMover

log = logging.getLogger("pylogq.broker")

__all__ = ["BrokerAdmin"]


class BrokerAdmin(BrokerLifecycle):
    """The administration of a :class:`pylogq.Broker`: topics, topic and broker configs,
    users' SCRAM credentials, log dirs and the cluster's description.

    A mixin over the broker's state (:class:`~.lifecycle.BrokerLifecycle`). Blocking (file
    work, or the metadata store in a cluster): the server runs these calls in its executor,
    never on its event loop. Thread-safe: one administration at a time (``_admin_lock``,
    see "Locks" below).
    """

    if TYPE_CHECKING:  # Broker's: it reads MAX_PARTITIONS_PER_REQUEST in its own module at each call
        def _check_partitions_per_request(self, count: int) -> None: ...

    # -- topics -------------------------------------------------------------------
    #
    # Locks, in the order they may be taken (a thread holding one may take only those after it):
    #   _admin_lock   one topic administration at a time (create, delete, add partitions,
    #                 alter configs); held across their file work, so never taken on the
    #                 server's event loop (those requests run in its executor);
    #   _lock         the maps of topics and partitions; held only to read or publish them,
    #                 never across file work or a call into another component, so the event
    #                 loop may take it;
    #   partition, log, log manager, cleaning registry: see docs/architecture.md.

    def create_topic(self, name: str, partitions: Optional[int] = None, replication_factor: Optional[int] = None,
                     config: Optional[Mapping[str, Any]] = None, validate_only: bool = False,
                     replica_assignment: Optional[Mapping[int, Sequence[int]]] = None) -> TopicDescription:
        """Create a topic; Kafka's naming rules, config keys and validation apply.

        ``validate_only`` runs every check and returns the description the
        topic would have, creating nothing (CreateTopics' validateOnly). A topic
        whose partitions cannot all be created is not created at all.
        ``replica_assignment`` (partition -> broker ids, the first the preferred
        leader) places the replicas as given, in place of ``partitions`` and
        ``replication_factor``; Kafka's checks apply (on a single node every list is
        this broker's id alone).
        """
        with self._admin_lock:
            self._check_open()
            if replica_assignment:
                if partitions is not None or replication_factor is not None:
                    raise errors.InvalidRequestError(
                        "Both numPartitions or replicationFactor and replicasAssignments were set. "
                        "Both cannot be used at the same time.")
                if self.cluster is None:
                    placed = check_new_assignment(replica_assignment, {self.broker_id})
                    partitions, replication_factor = len(placed), len(placed[0])
            if self.cluster is not None:
                return self._create_cluster_topic(name, partitions, replication_factor, config, validate_only,
                                                  assignment=replica_assignment or None)
            return self._create_topic(name, partitions, replication_factor, config, internal=False,
                                      validate_only=validate_only)

    def _checked_topic_settings(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                                config: Optional[Mapping[str, Any]], internal: bool) -> Tuple[int, int, Dict[str, str]]:
        """A new topic's partition count, replication factor and config overrides (dotted keys,
        string values), each checked as Kafka does."""
        validate_topic_name(name)
        if name in INTERNAL_TOPICS and not internal:
            raise errors.InvalidTopicError("%s is an internal topic; it cannot be created by a client" % name)
        count = self.config.node.num_partitions if partitions is None else partitions
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise errors.InvalidPartitionsError("number of partitions must be at least 1, got %r" % (count,))
        self._check_partitions_per_request(count)
        factor = self.config.node.default_replication_factor if replication_factor is None else replication_factor
        if not isinstance(factor, int) or isinstance(factor, bool) or factor < 1:
            raise errors.InvalidReplicationFactorError(
                "replication factor must be at least 1, got %r" % (factor,))
        overrides = dict(config or {})
        try:
            log_config = self.default_log_config.merged(overrides)
        except ConfigError as exc:
            raise errors.InvalidConfigError(str(exc)) from None
        dotted = {k: str(v) for k, v in log_config.to_strings().items() if k in _dotted_keys(overrides)}
        return count, factor, dotted

    def _create_cluster_topic(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                              config: Optional[Mapping[str, Any]], validate_only: bool,
                              internal: bool = False,
                              assignment: Optional[Mapping[int, Sequence[int]]] = None) -> TopicDescription:
        """CreateTopics in a cluster: the assignment and config go to the metadata store, the
        controller elects the leaders; returns once this broker's metadata has them.
        ``assignment`` is checked against the registered brokers and placed as given."""
        assert self.cluster is not None
        if assignment is not None:
            placed = check_new_assignment(assignment, set(self.cluster.live_brokers()))
            partitions, replication_factor = len(placed), len(placed[0])
        count, factor, dotted = self._checked_topic_settings(name, partitions, replication_factor, config, internal)
        topic_id = new_topic_id()
        assignment = self.cluster.create_topic(name, count, factor, dotted, topic_id, validate_only=validate_only,
                                               assignment=None if assignment is None else placed)
        if validate_only:
            infos = [TopicPartitionInfo(p, r[0], list(r), list(r)) for p, r in sorted(assignment.items())]
            return TopicDescription(name, infos, dotted, internal, ZERO_TOPIC_ID)
        log.info("created topic %s with %d partitions and %d replicas (topic id %s)%s", name, count, factor,
                 topic_id, " and config %s" % dotted if dotted else "")
        return self.cluster.describe_topic(name, dotted)

    def _create_topic(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                      config: Optional[Mapping[str, Any]], internal: bool,
                      validate_only: bool = False) -> TopicDescription:
        """Under the admin lock: check, open every partition, then publish the topic."""
        validate_topic_name(name)
        if name in INTERNAL_TOPICS and not internal:
            raise errors.InvalidTopicError("%s is an internal topic; it cannot be created by a client" % name)
        with self._lock:
            if name in self._topics:
                raise errors.TopicAlreadyExistsError("topic %r already exists" % name)
            for existing in self._topics:
                if collides(name, existing):
                    raise errors.InvalidTopicError(
                        "topic %r collides with existing topic %r ('.' and '_' are the same in metric names)"
                        % (name, existing))
        count, factor, dotted = self._checked_topic_settings(name, partitions, replication_factor, config, internal)
        if factor != 1:
            raise errors.InvalidReplicationFactorError(
                "replication factor %d is larger than the 1 available broker" % factor)
        if validate_only:
            infos = [TopicPartitionInfo(p, self.broker_id, [self.broker_id], [self.broker_id]) for p in range(count)]
            return TopicDescription(name, infos, dotted, internal, ZERO_TOPIC_ID)
        with self._lock:
            topic_id = new_topic_id()
            while topic_id in self._topic_names:  # 2^-122 a pair, but an id must name one topic
                topic_id = new_topic_id()
        meta = TopicMetadata(count, dotted, topic_id)
        self._pending_configs[name] = meta  # the logs take the topic's config as they open
        try:
            opened = self._open_partitions(name, range(count), topic_id)
        finally:
            del self._pending_configs[name]
        self._store_or_discard(name, meta, opened)
        with self._lock:
            self._topics[name] = meta
            self._topic_names[topic_id] = name
            self._partitions.update(opened)
        log.info("created topic %s with %d partitions (topic id %s)%s", name, count, topic_id,
                 " and config %s" % dotted if dotted else "")
        return self.describe_topic(name)

    def delete_topic(self, name: str) -> None:
        """Delete a topic, all or nothing: its partitions stop serving, their directories are
        renamed ``*-delete`` (removed in the background), then its metadata goes. A failure
        on the way puts back what was done and raises."""
        with self._admin_lock:
            self._check_open()
            if not self.config.node.delete_topic_enable:
                raise errors.TopicDeletionDisabledError("delete.topic.enable is false")
            if name in INTERNAL_TOPICS:
                raise errors.InvalidTopicError("%s is an internal topic; it cannot be deleted" % name)
            if self.cluster is not None:
                self.cluster.delete_topic(name)
                log.info("deleted topic %s", name)
                return
            with self._lock:
                meta = self._require_topic(name)
                keys = [(name, p) for p in range(meta.partitions)]
                detached = {tp: self._partitions.pop(tp) for tp in keys}
                del self._topics[name]
                self._topic_names.pop(meta.topic_id, None)
            self.metrics_registry.forget_topic(name)
            try:
                for partition in detached.values():
                    partition.close()
                self.logs.delete_logs(name, range(meta.partitions))
                self._store.remove(name)
            except BaseException as exc:
                log.error("could not delete topic %s: %r; it stays as it was", name, exc)
                self._reattach(name, meta)
                raise errors.KafkaStorageError("could not delete topic %r: %s" % (name, exc)) from exc
        log.info("deleted topic %s (%d partitions)", name, meta.partitions)
        for tp in keys:  # fetches parked on the topic answer now (UNKNOWN_TOPIC_OR_PARTITION)
            self.fetch_purgatory.check_and_complete(tp)

    def _reattach(self, name: str, meta: TopicMetadata) -> None:
        """Serve a topic again after a failed delete (its logs were put back by the log manager)."""
        reopened: Dict[Tuple[str, int], Partition] = {}
        for p in range(meta.partitions):
            try:
                reopened[(name, p)] = self._open_partition(name, p, meta.topic_id)
            except Exception:  # noqa: BLE001 - logged; the topic serves what it can
                log.exception("could not reopen %s-%d after a failed delete", name, p)
        with self._lock:
            self._topics[name] = meta
            self._topic_names[meta.topic_id] = name
            self._partitions.update(reopened)

    def create_partitions(self, name: str, total: int, validate_only: bool = False,
                          replica_assignment: Optional[Sequence[Sequence[int]]] = None) -> TopicDescription:
        """Grow a topic to ``total`` partitions (Kafka never shrinks one), all or none.

        ``validate_only`` runs the checks and changes nothing (CreatePartitions' validateOnly).
        ``replica_assignment`` gives the new partitions' replica lists, one per new
        partition, checked as Kafka checks them (None: placed as the topic's are).
        """
        with self._admin_lock:
            self._check_open()
            if self.cluster is not None:
                if not isinstance(total, int) or isinstance(total, bool):
                    raise errors.InvalidPartitionsError("the new total %r is not a number of partitions" % (total,))
                self.cluster.create_partitions(name, total, validate_only, assignment=replica_assignment)
                return self.describe_topic(name)
            with self._lock:
                meta = self._require_topic(name)
            if not isinstance(total, int) or isinstance(total, bool) or total <= meta.partitions:
                raise errors.InvalidPartitionsError(
                    "topic %r has %d partitions; the new total %r must be larger" % (name, meta.partitions, total))
            if replica_assignment is not None:
                check_added_assignment({p: [self.broker_id] for p in range(meta.partitions)}, total,
                                       replica_assignment, {self.broker_id})
            self._check_partitions_per_request(total - meta.partitions)
            if validate_only:
                return self.describe_topic(name)
            opened = self._open_partitions(name, range(meta.partitions, total), meta.topic_id)
            grown = meta._replace(partitions=total)
            self._store_or_discard(name, grown, opened)
            with self._lock:
                self._topics[name] = grown
                self._partitions.update(opened)
            log.info("topic %s grew from %d to %d partitions", name, meta.partitions, total)
            return self.describe_topic(name)

    def _store_or_discard(self, name: str, meta: TopicMetadata, opened: Dict[Tuple[str, int], Partition]) -> None:
        """Store a topic's metadata; when that fails, remove the partitions opened for it."""
        try:
            self._store.put(name, meta)
        except BaseException:
            for tp, partition in opened.items():
                partition.close()
                self.logs.delete_log(*tp)
            raise

    def list_topics(self, include_internal: bool = False) -> List[str]:
        if self.cluster is not None:
            return self.cluster.list_topics(include_internal)
        with self._lock:
            return sorted(t for t in self._topics if include_internal or t not in INTERNAL_TOPICS)

    def describe_topic(self, name: str) -> TopicDescription:
        if self.cluster is not None:
            meta = self._topics.get(name)
            return self.cluster.describe_topic(name, meta.config if meta is not None else None)
        with self._lock:
            self._require_topic(name)
            return self._describe(name)

    def _describe(self, name: str) -> TopicDescription:
        meta = self._topics[name]
        infos = [TopicPartitionInfo(p, self.broker_id, [self.broker_id], [self.broker_id])
                 for p in range(meta.partitions)]
        return TopicDescription(name, infos, dict(meta.config), name in INTERNAL_TOPICS, meta.topic_id)

    def topic_id(self, name: str) -> str:
        """The id of topic ``name`` (Kafka's base64url ``Uuid``), kept for the topic's life."""
        if self.cluster is not None:
            found = self.cluster.metadata.topic_id(name)
            if found is None:
                raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % name)
            return found
        with self._lock:
            return self._require_topic(name).topic_id

    def topic_name(self, topic_id: str) -> str:
        """The name of the topic with id ``topic_id``; UnknownTopicIdError when none has it
        (a deleted topic's id names nothing, even when a topic of that name exists again)."""
        if self.cluster is not None:
            ids = self.cluster.metadata.snapshot.topic_ids
            name = next((t for t, i in ids.items() if i == topic_id), None)
            if name is None:
                raise errors.UnknownTopicIdError("no topic has id %r" % (topic_id,))
            return name
        with self._lock:
            name = self._topic_names.get(topic_id)
        if name is None:
            raise errors.UnknownTopicIdError("no topic has id %r" % (topic_id,))
        return name

    def partitions_for(self, topic: str) -> int:
        if self.cluster is not None:
            count = len(self.cluster.metadata.partitions_of(topic))
            if not count:
                raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % topic)
            return count
        with self._lock:
            return self._require_topic(topic).partitions

    def _require_topic(self, name: str) -> TopicMetadata:
        meta = self._topics.get(name)
        if meta is None:
            raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % name)
        return meta

    def auto_create_topic(self, name: str) -> TopicDescription:
        """Create a topic a client asked for by name, with the broker's defaults
        (``auto.create.topics.enable``, Kafka's Metadata and Produce); -> its description,
        also when another request created it first."""
        if not self.config.node.auto_create_topics_enable:
            raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % name)
        if name in INTERNAL_TOPICS:
            raise errors.InvalidTopicError("%s is an internal topic; it cannot be created by a client" % name)
        try:
            described = self.create_topic(name)
        except errors.TopicAlreadyExistsError:
            return self.describe_topic(name)
        log.info("auto-created topic %s", name)
        return described

    def offsets_topic_ready(self) -> bool:
        """Whether ``__consumer_offsets`` exists (on a single node: and its groups are served)."""
        return self._offsets_ready if self.cluster is None else self.cluster.metadata.has_topic(OFFSETS_TOPIC)

    def ensure_offsets_topic(self) -> int:
        """Create ``__consumer_offsets`` if there is none yet (Kafka creates it when a
        coordinator is first looked up; a single node also at its first group call); -> 0, or
        COORDINATOR_NOT_AVAILABLE while fewer brokers of a cluster are alive than
        ``offsets.topic.replication.factor``. Blocking (admin work): not for the event loop."""
        if self.offsets_topic_ready():
            return 0
        node = self.config.node
        if self.cluster is None:
            with self._admin_lock:
                if not self._offsets_ready:
                    if OFFSETS_TOPIC not in self._topics:
                        self._create_topic(OFFSETS_TOPIC, node.offsets_topic_num_partitions, 1,
                                           self.offsets_topic.config(node.offsets_topic_segment_bytes),
                                           internal=True)
                    self.group_coordinator.serve_all_partitions()
                    self._offsets_ready = True
            return 0
        alive = len(self.cluster.live_brokers())
        if alive < node.offsets_topic_replication_factor:
            log.info("not creating %s: %d live brokers, offsets.topic.replication.factor is %d", OFFSETS_TOPIC,
                     alive, node.offsets_topic_replication_factor)
            return errors.CoordinatorNotAvailableError.code
        with self._admin_lock:
            try:
                self._create_cluster_topic(OFFSETS_TOPIC, node.offsets_topic_num_partitions,
                                           node.offsets_topic_replication_factor,
                                           self.offsets_topic.config(node.offsets_topic_segment_bytes), False,
                                           internal=True)
            except errors.TopicAlreadyExistsError:
                self.cluster.wait_for_metadata(self.offsets_topic_ready, 30.0)
        return 0 if self.offsets_topic_ready() else errors.CoordinatorNotAvailableError.code

    # -- configs (DescribeConfigs, AlterConfigs) -----------------------------------------

    def broker_configs(self, per_broker: bool = True) -> Dict[str, BrokerConfigEntry]:
        """This broker's settings by dotted key, each from where its value comes, as Kafka's
        DescribeConfigs tells it: DYNAMIC_BROKER_CONFIG (this broker's dynamic value),
        DYNAMIC_DEFAULT_BROKER_CONFIG (the cluster-wide default), STATIC_BROKER_CONFIG (the
        keys it was given: server.properties, ``--override``, keywords) or DEFAULT_CONFIG;
        ``synonyms`` lists every source that has a value, the winning one first. Without
        ``per_broker`` (the resource "") this broker's own dynamic values are left out. A
        dynamic key pylogq has no setting for is listed as stored. A sensitive one (a JAAS
        config with passwords) has no value, as DescribeConfigs hides it."""
        dynamic = self.dynamic_config
        config = self.config if per_broker else dynamic.effective(per_broker={})
        static = dynamic.static.to_strings()
        defaults = self.config.default_strings()
        values: Dict[str, Optional[str]] = dict(config.to_strings())
        for layer in ((dynamic.default, dynamic.per_broker) if per_broker else (dynamic.default,)):
            for key, value in layer.items():
                if self.config.dotted_key(key) is None:
                    values[key] = value  # a key pylogq has no setting for: kept as stored, as Kafka keeps it
        out: Dict[str, BrokerConfigEntry] = {}
        for name, text in sorted(values.items()):
            synonyms: List[Tuple[str, Optional[str]]] = [
                (source, value) for source, value in dynamic.layers(name)
                if per_broker or source != "DYNAMIC_BROKER_CONFIG"]
            if name in self.config.static_keys:
                synonyms.append(("STATIC_BROKER_CONFIG", static.get(name)))
            if name in defaults:
                synonyms.append(("DEFAULT_CONFIG", defaults[name]))
            source = synonyms[0][0] if synonyms else "DEFAULT_CONFIG"
            read_only = not is_dynamic_in_kafka(name)
            if sensitive(name):
                out[name] = BrokerConfigEntry(None, source, True, None, tuple((s, None) for s, _ in synonyms),
                                              read_only)
            else:
                out[name] = BrokerConfigEntry(text, source, False, defaults.get(name), tuple(synonyms), read_only)
        return out

    def describe_configs(self, topic: str) -> Dict[str, Tuple[Optional[str], bool]]:
        """Every config key of a topic: -> {dotted key: (value, is_default)}."""
        if self.cluster is not None:
            if not self.cluster.metadata.has_topic(topic):
                raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % topic)
            overrides = self.cluster.topic_config(topic)
            effective = self.default_log_config.merged(overrides).to_strings()
            return {k: (v, k not in overrides) for k, v in sorted(effective.items())}
        with self._lock:
            meta = self._require_topic(topic)
            effective = self.default_log_config.merged(meta.config).to_strings()
            return {k: (v, k not in meta.config) for k, v in sorted(effective.items())}

    def alter_broker_configs(self, resource_name: str, ops: Sequence[Tuple[str, str, Optional[str]]],
                             incremental: bool = False, validate_only: bool = False) -> None:
        """AlterConfigs on a BROKER resource: this broker's id, or "" for the cluster-wide default.

        ``ops`` are (``SET``/``DELETE``/``APPEND``/``SUBTRACT``, key, value). Without
        ``incremental`` the SETs are the resource's whole new dynamic set (Kafka's
        AlterConfigs); with it they change the stored set, APPEND and SUBTRACT working on a
        list key's dynamic value or, when it has none, its default (as Kafka does). The new
        set is checked as Kafka checks it (INVALID_REQUEST "Invalid config value for
        resource ..."), then stored (the cluster's store, with a change notification every
        broker reads; a single node's data directory) and applied. ``validate_only``
        stores nothing.
        """
        per_broker = resource_name != ""
        if per_broker:
            try:
                named = int(resource_name)
            except ValueError:
                raise errors.InvalidRequestError("Broker id must be an integer, but it is: %s"
                                                 % resource_name) from None
            if named != self.broker_id:
                raise errors.InvalidRequestError("Unexpected broker id, expected %d, but received %s"
                                                 % (self.broker_id, resource_name))
        entity = str(self.broker_id) if per_broker else DEFAULT_ENTITY
        with self._admin_lock:
            self._check_open()
            current = self.dynamic_config.per_broker if per_broker else self.dynamic_config.default
            if self.cluster is not None:  # the store's, in case this broker has not read the last change yet
                current = self.cluster.zk.get_broker_config(entity)
            props: Dict[str, str] = dict(current) if incremental else {}
            defaults = self.config.default_strings()
            for op, key, value in ops:
                if op == "SET":
                    if value is not None:
                        props[key] = value
                elif op == "DELETE":
                    props.pop(key, None)
                elif op in ("APPEND", "SUBTRACT"):
                    described = self.config.describe_key(key)
                    if described is None:
                        raise errors.InvalidConfigError("Unknown config name: %s" % key)
                    if described[0] != "LIST":
                        raise errors.InvalidConfigError("Config value %s is not allowed for config key: %s"
                                                        % ("append" if op == "APPEND" else "subtract", key))
                    base = props.get(key, defaults.get(key) or "")
                    items = [v for v in base.split(",") if v]
                    given = (value or "").split(",")
                    if op == "APPEND":
                        items = list(dict.fromkeys(items + given))
                    else:
                        items = [v for v in items if v not in given]
                    props[key] = ",".join(items)
                else:
                    raise errors.InvalidRequestError("unknown config operation %s for %r" % (op, key))
            resource = "ConfigResource(type=BROKER, name='%s')" % resource_name
            try:
                self.dynamic_config.validate(props, per_broker)
            except ConfigError as exc:
                raise errors.InvalidRequestError("Invalid config value for resource %s: %s" % (resource, exc)) from None
            if validate_only:
                return
            log.info("dynamic configs of %s: %s", "broker %d" % self.broker_id if per_broker else "every broker",
                     {k: ("[hidden]" if sensitive(k) else v) for k, v in sorted(props.items())})
            if self.cluster is not None:
                self.cluster.zk.set_broker_config(entity, props)
            else:
                sets = {DEFAULT_ENTITY: self.dynamic_config.default,
                        str(self.broker_id): self.dynamic_config.per_broker}
                sets[entity] = props
                write_config_file(self.data_dir, sets)
            self._broker_config_changed(entity, props)  # the notification brings the same to the others

    def _broker_config_changed(self, entity: str, props: Dict[str, str]) -> None:
        """The dynamic configs of ``entity`` (this broker's id or <default>) are now ``props``:
        the effective configuration and the log defaults follow; every log without its own
        value of a changed topic key takes the new default at once."""
        with self._dynamic_lock:
            per_broker = entity != DEFAULT_ENTITY
            usable = self.dynamic_config.usable(props, per_broker, "broker configs of %s" % entity)
            try:
                config = (self.dynamic_config.effective(per_broker=usable) if per_broker
                          else self.dynamic_config.effective(default=usable))
            except ConfigError as exc:
                log.error("ignoring the dynamic broker configs of %s %s: %s", entity, usable, exc)
                return
            if per_broker:
                self.dynamic_config.per_broker = usable
            else:
                self.dynamic_config.default = usable
            self.config = config
            if self.cluster is not None:
                self.cluster.replicas.set_throttle_rates(self._throttle_rate("leader.replication.throttled.rate"),
                                                         self._throttle_rate("follower.replication.throttled.rate"))
            if self.log_dir_mover is not None:
                self.log_dir_mover.set_bound(self._throttle_rate("replica.alter.log.dirs.io.max.bytes.per.second"))
            new_defaults = self.config.log_manager.default_log_config()
            if new_defaults == self.default_log_config:
                return
            self.default_log_config = new_defaults
            self.logs.default_log_config = new_defaults
            with self._lock:
                partitions = list(self._partitions.items())
                overrides = {topic: meta.config for topic, meta in self._topics.items()}
            for (topic, _), partition in partitions:
                try:
                    partition.log.config = new_defaults.merged(overrides.get(topic) or {})
                except ConfigError as exc:
                    log.error("topic %s: its config %s is invalid over the new broker defaults: %s", topic,
                              overrides.get(topic), exc)

    def _throttle_rate(self, key: str) -> Optional[int]:
        """A replication throttle's bound from the dynamic configs (this broker's over the
        cluster's default; None: unbounded)."""
        value = self.dynamic_config.per_broker.get(key, self.dynamic_config.default.get(key))
        try:
            return None if value is None else int(value)
        except ValueError:
            return None

    def alter_configs(self, topic: str, config: Mapping[str, Any], incremental: bool = False) -> None:
        """Replace a topic's overrides (``incremental``: set only the given keys;
        a value of None removes an override). Existing logs take the new config."""
        with self._admin_lock:
            self._check_open()
            if self.cluster is not None:
                self._alter_cluster_configs(topic, config, incremental)
                return
            with self._lock:
                meta = self._require_topic(topic)
            overrides, log_config = self._altered_config(meta.config, config, incremental)
            altered = meta._replace(config=overrides)
            self._store.put(topic, altered)
            with self._lock:
                self._topics[topic] = altered
                partitions = [self._partitions[(topic, p)] for p in range(meta.partitions)]
            for partition in partitions:
                partition.log.config = log_config

    def _alter_cluster_configs(self, topic: str, config: Mapping[str, Any], incremental: bool) -> None:
        assert self.cluster is not None
        if not self.cluster.metadata.has_topic(topic):
            raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % topic)
        overrides, _ = self._altered_config(self.cluster.topic_config(topic), config, incremental)
        self.cluster.set_topic_config(topic, overrides)

    def _altered_config(self, current: Mapping[str, Any], config: Mapping[str, Any], incremental: bool
                        ) -> Tuple[Dict[str, str], LogConfig]:
        """A topic's overrides after AlterConfigs (``incremental``: on top of ``current``; a
        value of None removes a key), as the strings stored, and the log config they make."""
        overrides: Dict[str, Any] = dict(current) if incremental else {}
        for key, value in config.items():
            dotted = next(iter(_dotted_keys({key})))
            if value is None:
                overrides.pop(dotted, None)
            else:
                overrides[dotted] = value
        try:
            log_config = self.default_log_config.merged(overrides)
        except ConfigError as exc:
            raise errors.InvalidConfigError(str(exc)) from None
        strings = log_config.to_strings()
        return {k: str(strings[k]) for k in overrides}, log_config

    # -- users' SCRAM credentials (DescribeUserScramCredentials, AlterUserScramCredentials) ----

    @property
    def _users(self) -> UserCredentials:
        if self.cluster is not None:
            return self.cluster.users
        assert self._file_users is not None
        return self._file_users

    def scram_credential(self, user: str, mechanism: str) -> Optional[str]:
        """The user's credential string for ``mechanism`` as this broker knows it (quick: a cache)."""
        return self._users.cached(user).get(mechanism)

    def describe_user_configs(self, users: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, str]]:
        """Users' configs (every user's when None; a user without one is left out), read from
        the data directory or the metadata store (which may block: not on the loop)."""
        return self._users.read(users)

    def alter_user_config(self, user: str, changes: Mapping[str, Optional[str]]) -> None:
        """Set (a string) or remove (None) keys of one user's config; in a cluster, every broker
        is notified. Not on the loop."""
        config = self._users.read([user]).get(user, {})
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        self._users.write(user, config)

    # -- client quotas (DescribeClientQuotas, AlterClientQuotas) ---------------------------------

    @property
    def _quotas(self) -> ClientQuotaStore:
        if self.cluster is not None:
            return self.cluster.quotas
        assert self._file_quotas is not None
        return self._file_quotas

    def describe_client_quotas(self, components: Sequence[QuotaFilterComponent], strict: bool = False
                               ) -> Dict[QuotaEntity, Dict[str, float]]:
        """The quota entities the filter matches (Kafka's rules and errors); not on the loop."""
        return self._quotas.describe(components, strict)

    def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], validate_only: bool = False
                            ) -> Dict[QuotaEntity, Tuple[int, Optional[str]]]:
        """Change quota entities; in a cluster every broker is notified. Not on the loop."""
        return self._quotas.alter(alterations, validate_only)

    def client_quota_configs(self) -> Dict[QuotaEntity, Dict[str, float]]:
        return self._quotas.cached()

    def watch_client_quotas(self, callback: Callable[[Dict[QuotaEntity, Dict[str, float]]], None]
                            ) -> Callable[[], None]:
        return self._quotas.watch(callback)

    # -- log dirs and the cluster --------------------------------------------------------

    def describe_log_dirs(self, partitions: LogDirsQuery = None) -> List[LogDirDescription]:
        """Kafka's DescribeLogDirs: each log directory with its logs of ``partitions``
        (None: every partition), their sizes in bytes, and the volume's total and usable
        bytes. An offline directory (it failed), or one whose volume cannot be read, answers
        KAFKA_STORAGE_ERROR.

        Takes the log manager's lock (logs being opened may hold it): not for the event loop.
        """
        self._check_open()
        wanted = None if partitions is None else {(t, p) for t, indexes in partitions.items() for p in indexes}
        out = []
        moves: List[Tuple[Tuple[str, int], str, int, int]] = []
        if self.log_dir_mover is not None:
            from .log_dir_mover import describe_moves

            moves = describe_moves(self.log_dir_mover, self.logs)
        for path, logs in self.logs.logs_by_dir():
            try:
                volume = os.statvfs(path)
            except OSError as exc:
                log.warning("describe log dirs: cannot read the volume of %s: %s", path, exc)
                out.append(LogDirDescription(path, errors.KafkaStorageError.code, []))
                continue
            replicas = [ReplicaInfo(lg.topic, lg.partition, lg.size_in_bytes, self._offset_lag(lg), False)
                        for lg in logs if wanted is None or (lg.topic, lg.partition) in wanted]
            # The copies of replicas being moved here (AlterReplicaLogDirs): their lag behind the log.
            replicas += [ReplicaInfo(tp[0], tp[1], size, lag, True) for tp, dest, size, lag in moves
                         if dest == path and (wanted is None or tp in wanted)]
            out.append(LogDirDescription(path, 0, replicas, volume.f_blocks * volume.f_frsize,
                                         volume.f_bavail * volume.f_frsize))
        out.extend(LogDirDescription(path, errors.KafkaStorageError.code, []) for path in self.logs.offline_dirs())
        return out

    def _offset_lag(self, lg: Any) -> int:
        """Kafka's DescribeLogDirs lag of a current log: its end offset less the high watermark."""
        partition = self._partitions.get((lg.topic, lg.partition))
        return 0 if partition is None else max(0, lg.log_end_offset - partition.high_watermark)

    def alter_replica_log_dirs(self, dirs: Mapping[Tuple[str, int], str]) -> Dict[Tuple[str, int], int]:
        """Kafka's AlterReplicaLogDirs: move each partition's replica on this broker to the log
        directory given (:mod:`.log_dir_mover`); -> each partition's error code.

        LOG_DIR_NOT_FOUND for a directory that is not one of ``log.dirs``, KAFKA_STORAGE_ERROR
        for an offline one (or a replica in one, or while one is offline: the replica could
        be there). A partition with no replica here yet gets REPLICA_NOT_AVAILABLE, and its
        replica is created in that directory when it comes (Kafka's preferred log dir). A
        replica in that directory already stops any move elsewhere.

        Takes the log manager's lock: not for the event loop.
        """
        self._check_open()
        out: Dict[Tuple[str, int], int] = {}
        for tp, path in dirs.items():
            try:
                self.logs.check_online_dir(path)
                found = self._partitions.get(tp)
                if found is not None and found.offline:
                    raise errors.KafkaStorageError("the log of %s-%d is in an offline log directory" % tp)
                if found is None:
                    self.logs.prefer_dir(tp[0], tp[1], path)
                    raise errors.ReplicaNotAvailableError("broker %d has no replica of %s-%d yet: it is created in %s"
                                                          % (self.broker_id, tp[0], tp[1], path))
                self._mover().move(tp, path)
                out[tp] = 0
            except errors.BrokerError as exc:
                out[tp] = exc.code
        return out

    def _mover(self) -> "LogDirMover":
        with self._lock:
            if self.log_dir_mover is None:
                from .log_dir_mover import LogDirMover

                self.log_dir_mover = LogDirMover(self.broker_id, self.logs, self.hosted)
                self.log_dir_mover.set_bound(self._throttle_rate("replica.alter.log.dirs.io.max.bytes.per.second"))
            return self.log_dir_mover

    def alter_partition_reassignments(self, targets: Mapping[Tuple[str, int], Optional[List[int]]]
                                      ) -> Dict[Tuple[str, int], PartitionOutcome]:
        """Reassign partitions to target replicas (None cancels a reassignment under way):
        -> each partition's (error code, message). A cluster's controller carries them out
        (:mod:`pylogq.cluster.controller.reassignments`); a single node's partitions have one
        replica, itself, so the one target it takes is that, done at once."""
        self._check_open()
        if self.cluster is not None:
            return self.cluster.alter_partition_reassignments(targets)
        out: Dict[Tuple[str, int], PartitionOutcome] = {}
        bad = errors.InvalidReplicationAssignmentError.code
        for (topic, p), target in targets.items():
            with self._lock:
                meta = self._topics.get(topic)
            if meta is None or not 0 <= p < meta.partitions:
                out[(topic, p)] = (errors.UnknownTopicOrPartitionError.code, "unknown partition %s-%d" % (topic, p))
            elif target is None:
                out[(topic, p)] = (errors.NoReassignmentInProgressError.code,
                                   "no reassignment of %s-%d is under way" % (topic, p))
            elif not target or len(set(target)) != len(target):
                out[(topic, p)] = (bad, "the target replicas of %s-%d are empty or name a broker twice: %s"
                                   % (topic, p, target))
            elif list(target) != [self.broker_id]:
                out[(topic, p)] = (bad, "the target replicas of %s-%d name brokers that are not alive: %s (this "
                                   "single node is broker %d)" % (topic, p, sorted(set(target) - {self.broker_id}),
                                                                  self.broker_id))
            else:
                out[(topic, p)] = (0, None)
        return out

    def list_partition_reassignments(self, partitions: Optional[Sequence[Tuple[str, int]]] = None
                                     ) -> Optional[Dict[Tuple[str, int], PartitionReassignment]]:
        """The reassignments under way (of ``partitions`` only, when given); None when this
        broker of a cluster is not its controller. A single node has none."""
        self._check_open()
        if self.cluster is not None:
            return self.cluster.list_partition_reassignments(partitions)
        return {}

    def elect_leaders(self, election_type: int, partitions: Optional[Sequence[Tuple[str, int]]] = None
                      ) -> Optional[Dict[Tuple[str, int], PartitionOutcome]]:
        """Leader elections asked for (ElectLeaders: 0 preferred, 1 unclean) of ``partitions``
        (None: all, those that needed none left out): -> each one's (error code, message);
        None when this broker of a cluster is not its controller. A single node leads all
        its partitions, so none needs an election."""
        self._check_open()
        if self.cluster is not None:
            return self.cluster.elect_leaders(election_type, partitions)
        if partitions is None:
            return {}
        out: Dict[Tuple[str, int], PartitionOutcome] = {}
        for topic, p in partitions:
            with self._lock:
                meta = self._topics.get(topic)
            if meta is None or not 0 <= p < meta.partitions:
                out[(topic, p)] = (errors.UnknownTopicOrPartitionError.code, "unknown partition %s-%d" % (topic, p))
            else:
                out[(topic, p)] = (errors.ElectionNotNeededError.code,
                                   "%s-%d is led by its only replica, %d" % (topic, p, self.broker_id))
        return out

    def cluster_view(self) -> Optional[Tuple[int, List[BrokerRegistration]]]:
        """(the controller's id, the live brokers) of this broker's cluster; None for a single node."""
        if self.cluster is None:
            return None
        snapshot = self.cluster.metadata.snapshot
        return snapshot.controller_id, [snapshot.brokers[b] for b in sorted(snapshot.brokers)]

    def inter_broker_listener(self) -> Optional[str]:
        """The name of the listener the other brokers reach this one on (``inter.broker.listener.name``,
        else the one named after ``security.inter.broker.protocol``; the first endpoint's when it
        has none of that name, as the brokers' links fall back to it); None for a single node or
        before it has registered."""
        registration = None if self.cluster is None else self.cluster.registration
        if registration is None:
            return None
        endpoint = registration.endpoint(self.config.node.inter_broker_listener) or registration.endpoint()
        return None if endpoint is None else endpoint.listener

    def describe_cluster(self) -> ClusterDescription:
        """The cluster id, the controller and the live brokers (their first endpoint)."""
        if self.cluster is None:
            addresses = self.listener_addresses
            host, port = addresses[0] if addresses else ("", -1)
            return ClusterDescription(self.cluster_id, self.broker_id, [BrokerNode(self.broker_id, host, port)])
        out = []
        for b, reg in sorted(self.cluster.metadata.live_brokers().items()):
            endpoint = reg.endpoint()
            out.append(BrokerNode(b, endpoint.host if endpoint else "", endpoint.port if endpoint else -1, reg.rack))
        return ClusterDescription(self.cluster_id, self.cluster.metadata.controller_id, out)


def _dotted_keys(keys: Iterable[str]) -> List[str]:
    """Kafka's dotted spelling of config keys given dotted or snake_case."""
    known = set(LogConfig.known_keys())
    out = []
    for key in keys:
        if key in known:
            out.append(key)
        elif key.replace("_", ".") in known:
            out.append(key.replace("_", "."))
        else:
            out.append(key)
    return out

