"""MirrorMaker 2's configuration: a ``connect-mirror-maker.properties`` file read as flows.

The file is Java properties (:func:`pylogq.config.parse_properties`: ``key = value``,
``#`` and ``!`` comment lines) with Kafka's keys and rules (``MirrorMakerConfig``,
``MirrorConnectorConfig``, ``MirrorSourceConfig``, ``MirrorCheckpointConfig``,
``MirrorHeartbeatConfig``)::

    clusters = A, B                       # the cluster aliases (required)
    A.bootstrap.servers = a1:9092         # each cluster's connection, and its other
    A.security.protocol = SSL             #   client settings: ssl.*, sasl.*
    A.consumer.isolation.level = read_committed     # one client kind's settings
    B.producer.compression.type = lz4
    B.exactly.once.source.support = enabled         # transactions on writes to B
    A->B.enabled = true                   # a flow (none is enabled by default)
    topics = .*                           # a setting for every flow ...
    A->B.topics = orders.*, payments      # ... and for one flow, which wins
    A->B.producer.linger.ms = 5           # client settings of one flow's clients

(a ``#`` after a value is part of the value, as Java reads it: comments take lines of
their own; a mirror setting whose value holds one is refused, naming the key).

Each enabled flow becomes a :class:`FlowConfig`: its aliases, its clients' settings, its
filters and policy, and every setting as a typed attribute named after Kafka's key
(dots and dashes as underscores: ``offset-syncs.topic.location`` is
``offset_syncs_topic_location``), with Kafka's defaults. A bad value is a
:class:`~pylogq.errors.ConfigError` naming the key as it was written (``A->B.tasks.max``).

Clients. A client of a flow gets, lowest precedence first (Kafka's order):

1. the connection keys (``bootstrap.servers``, ``security.protocol``, ``ssl.*``, ``sasl.*``)
   of its cluster: ``<alias>.<key>``, else the top-level ``<key>``;
2. the flow's ``A->B.<kind>.<key>`` (kind ``consumer``, ``producer`` or ``admin``; for
   the clients of both clusters);
3. the cluster's ``<alias>.<kind>.<key>``, and again the connection keys (so a
   connection key given at step 1 wins over the flow's);
4. for a consumer, ``enable.auto.commit=false`` and, unless given, ``auto.offset.reset=earliest``.

Keys no part of the mirror reads (Kafka Connect's worker settings such as
``offset.storage.replication.factor``, a top-level ``producer.*``, an unknown key) are
kept in :attr:`MirrorConfig.unused` with the reason, for the caller to report; a key
that names a flow between clusters not in ``clusters`` is an error.

:func:`legacy_config` maps MirrorMaker 1's command line (``--consumer.config``,
``--producer.config``, ``--whitelist``/``--include``, ``--num.streams``) to one flow.
Everything here is immutable once built and safe to share between threads.
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..client.tcp import SECURITY_PROTOCOLS, parse_bootstrap
from ..config import _BOOLEAN, _INT, _LIST, _LONG, _STRING, Config, parse_properties, parse_setting, sensitive, \
    setting, suggest
from ..errors import ConfigError
from .policy import (
    CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
    GROUPS_DEFAULT,
    GROUPS_EXCLUDE_DEFAULT,
    TOPICS_DEFAULT,
    TOPICS_EXCLUDE_DEFAULT,
    ConfigPropertyFilter,
    DefaultReplicationPolicy,
    GroupFilter,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    TopicFilter,
    is_cycle,
)

__all__ = ["CLIENT_KINDS", "SIDES", "FlowConfig", "MirrorConfig", "is_connection_key", "legacy_config",
           "load_config", "parse_config"]

#: The clients a flow makes on each side, and the sides.
CLIENT_KINDS: Tuple[str, ...] = ("consumer", "producer", "admin")
SIDES: Tuple[str, ...] = ("source", "target")

_PACKAGE = "org.apache.kafka.connect.mirror."
DEFAULT_POLICY = _PACKAGE + "DefaultReplicationPolicy"
IDENTITY_POLICY = _PACKAGE + "IdentityReplicationPolicy"
_POLICIES = (DEFAULT_POLICY, IDENTITY_POLICY, "DefaultReplicationPolicy", "IdentityReplicationPolicy")
# Only Kafka's own filter and admin classes: a Java class cannot be loaded here.
_TOPIC_FILTERS = (_PACKAGE + "DefaultTopicFilter", "DefaultTopicFilter")
_GROUP_FILTERS = (_PACKAGE + "DefaultGroupFilter", "DefaultGroupFilter")
_CONFIG_FILTERS = (_PACKAGE + "DefaultConfigPropertyFilter", "DefaultConfigPropertyFilter")
_FORWARDING_ADMINS = ("org.apache.kafka.clients.admin.ForwardingAdmin", "ForwardingAdmin")
_SHORT_MAX = 0x7FFF

#: Settings whose values Kafka reads case-insensitively (its enums' ``fromProperty``).
_CASE_INSENSITIVE = ("exactly.once.support", "exactly.once.source.support")
#: A setting of the target cluster's Connect worker in Kafka, given as ``<alias>.<key>``
#: (a top-level value is every cluster's default).
EXACTLY_ONCE_SOURCE_SUPPORT = "exactly.once.source.support"
#: The intervals a negative value turns off (Kafka's scheduler), and the switch of each.
_INTERVALS = {
    "refresh.topics.interval.seconds": "refresh.topics.enabled",
    "sync.topic.configs.interval.seconds": "sync.topic.configs.enabled",
    "sync.topic.acls.interval.seconds": "sync.topic.acls.enabled",
    "refresh.groups.interval.seconds": "refresh.groups.enabled",
    "emit.checkpoints.interval.seconds": "emit.checkpoints.enabled",
    "emit.heartbeats.interval.seconds": "emit.heartbeats.enabled",
    "sync.group.offsets.interval.seconds": "sync.group.offsets.enabled",
}
_REPLICATION_FACTORS = ("replication.factor", "offset-syncs.topic.replication.factor",
                        "checkpoints.topic.replication.factor", "heartbeats.topic.replication.factor")
#: Seconds that still fit Kafka's Duration in milliseconds.
_MAX_SECONDS = ((1 << 63) - 1) // 1000

# Kafka Connect's own settings, which a connect-mirror-maker.properties file may carry for
# Kafka's Connect workers (its sample file sets the *.storage.replication.factor ones).
_CONNECT_PREFIXES = ("offset.storage.", "config.storage.", "status.storage.", "key.converter", "value.converter",
                     "header.converter", "config.providers", "task.", "worker.", "listeners", "rest.",
                     "admin.listeners", "metric.reporters", "metrics.", "dedicated.mode.")
_CONNECT_KEYS = {"name", "connector.class", "group.id", "client.id", "source.cluster.alias", "target.cluster.alias",
                 "transforms", "predicates", "errors.tolerance", "transaction.boundary", "offsets.storage.topic",
                 "scheduled.rebalance.max.delay.ms", "connect.protocol", "session.key.algorithm"}

_COMMENT = re.compile(r"\s#")


def is_connection_key(key: str) -> bool:
    """Whether ``key`` is a client setting about the connection (Kafka's ``MirrorClientConfig``
    client keys): ``bootstrap.servers``, ``security.protocol``, ``ssl.*``, ``sasl.*``."""
    return key in ("bootstrap.servers", "security.protocol") or key.startswith(("ssl.", "sasl."))


def _no_comment(key: str, value: str) -> None:
    """A value with ``#`` after a blank: an end-of-line comment, which properties files do not have."""
    match = _COMMENT.search(value)
    if match is not None:
        raise ConfigError("Invalid value %r for configuration %s: %r after a blank is part of the value in a "
                          "properties file (Java reads comments only on lines of their own); put the comment on "
                          "a line of its own" % (value, key, match.group(0).strip()))


def _check_security_protocol(key: str, value: str) -> None:
    _no_comment(key, value)
    if value.strip().upper() not in SECURITY_PROTOCOLS:
        raise ConfigError("Invalid value %r for configuration %s: String must be one of: %s"
                          % (value, key, ", ".join(SECURITY_PROTOCOLS)))


def _check_bootstrap(key: str, value: str) -> None:
    _no_comment(key, value)
    try:
        parse_bootstrap(value)
    except ConfigError as exc:
        raise ConfigError("Invalid value %r for configuration %s: %s" % (value, key, exc)) from None


def _client_key_kind(key: str) -> Optional[Tuple[str, str]]:
    """(client kind, its setting) of ``producer.x``/``consumer.x``/``admin.x``; None for another key."""
    kind, dot, rest = key.partition(".")
    if dot and rest and kind in CLIENT_KINDS:
        return kind, rest
    return None


def _hidden(settings: Mapping[str, str]) -> Dict[str, str]:
    return {k: ("[hidden]" if sensitive(k) else v) for k, v in settings.items()}


class FlowConfig(Config):
    """One replication flow ``source->target``: where it reads and writes, and how.

    Settings are Kafka's, with Kafka's defaults (``FlowConfig.tasks_max`` reads as 1);
    the non-setting attributes:

    - ``source``, ``target`` (str): the clusters' aliases; different;
    - ``source_client``, ``target_client`` (Dict[str, str]): each cluster's client settings
      by Kafka property name, as Kafka's ``MirrorMakerConfig.clusterProps`` merges them:
      the connection keys (from ``<alias>.`` and the top level) and the
      ``consumer.``/``producer.``/``admin.``-prefixed settings; :meth:`client_config`
      makes one client's settings from them;
    - ``flow_client`` (Dict[str, str]): the flow's own ``A->B.<kind>.<key>`` settings,
      ``<kind>.<key>``;
    - ``policy`` (:class:`~pylogq.mirror.policy.ReplicationPolicy`), ``topic_filter``,
      ``group_filter``, ``config_filter``: made from the settings.

    Immutable; equal when the aliases, client settings and settings are. Build one from a
    file with :func:`load_config`, or directly (tests, embedding):
    ``FlowConfig("A", "B", source_client={"bootstrap.servers": "a:9092"}, tasks_max=2)``.
    """

    # -- the flow (MirrorConnectorConfig, ConnectorConfig)
    tasks_max: int = setting("tasks.max", _INT, 1, at_least=1,
                             doc="tasks the flow's partitions are shared between (across processes)")
    replication_policy_class: str = setting("replication.policy.class", _STRING, DEFAULT_POLICY, choices=_POLICIES,
                                            doc="how remote topics are named: the default or the identity policy")
    replication_policy_separator: str = setting("replication.policy.separator", _STRING, ".",
                                                doc="between the source alias and the topic in a remote topic's name")
    replication_policy_internal_topic_separator_enabled: bool = setting(
        "replication.policy.internal.topic.separator.enabled", _BOOLEAN, True,
        doc="whether the offset-syncs and checkpoints topics' names use the separator too")
    admin_timeout_ms: int = setting("admin.timeout.ms", _LONG, 60000, at_least=0,
                                    doc="time allowed for an administrative call (listing topics, creating them)")
    forwarding_admin_class: str = setting("forwarding.admin.class", _STRING, _FORWARDING_ADMINS[0],
                                          choices=_FORWARDING_ADMINS, doc="Kafka's default only")
    exactly_once_support: str = setting("exactly.once.support", _STRING, "requested",
                                        choices=("requested", "required"),
                                        doc="required: the flow refuses to run without exactly-once delivery")
    exactly_once_source_support: str = setting(
        EXACTLY_ONCE_SOURCE_SUPPORT, _STRING, "disabled", choices=("disabled", "preparing", "enabled"),
        doc="of the target cluster (<target>.exactly.once.source.support): enabled writes in transactions")
    # -- topics (MirrorSourceConfig, DefaultTopicFilter, DefaultConfigPropertyFilter)
    topics: Tuple[str, ...] = setting("topics", _LIST, TOPICS_DEFAULT, doc="topics to mirror: regular expressions")
    topics_exclude: Tuple[str, ...] = setting("topics.exclude", _LIST, TOPICS_EXCLUDE_DEFAULT,
                                              doc="topics not to mirror: regular expressions; win over topics")
    config_properties_exclude: Tuple[str, ...] = setting("config.properties.exclude", _LIST,
                                                         CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
                                                         doc="topic configs not copied to remote topics")
    use_defaults_from: str = setting("use.defaults.from", _STRING, "target", choices=("source", "target"),
                                     doc="whose defaults a remote topic gets for configs left at their default")
    topic_filter_class: str = setting("topic.filter.class", _STRING, _TOPIC_FILTERS[0], choices=_TOPIC_FILTERS)
    config_property_filter_class: str = setting("config.property.filter.class", _STRING, _CONFIG_FILTERS[0],
                                                choices=_CONFIG_FILTERS)
    consumer_poll_timeout_ms: int = setting("consumer.poll.timeout.ms", _LONG, 1000, at_least=0,
                                            doc="how long a task's poll of the source waits")
    refresh_topics_enabled: bool = setting("refresh.topics.enabled", _BOOLEAN, True,
                                           doc="whether new topics and partitions are looked for")
    refresh_topics_interval_seconds: int = setting("refresh.topics.interval.seconds", _LONG, 600)
    sync_topic_configs_enabled: bool = setting("sync.topic.configs.enabled", _BOOLEAN, True,
                                               doc="whether remote topics' configs follow their sources'")
    sync_topic_configs_interval_seconds: int = setting("sync.topic.configs.interval.seconds", _LONG, 600)
    sync_topic_acls_enabled: bool = setting("sync.topic.acls.enabled", _BOOLEAN, True,
                                            doc="whether remote topics get their sources' read ACLs")
    sync_topic_acls_interval_seconds: int = setting("sync.topic.acls.interval.seconds", _LONG, 600)
    replication_factor: int = setting("replication.factor", _INT, 2,
                                      doc="replicas of a remote topic created on the target; -1: the broker's default")
    offset_syncs_topic_replication_factor: int = setting("offset-syncs.topic.replication.factor", _INT, 3,
                                                         at_most=_SHORT_MAX)
    offset_lag_max: int = setting("offset.lag.max", _LONG, 100,
                                  doc="how far translation may lag before a new offset sync is emitted")
    offset_syncs_topic_location: str = setting("offset-syncs.topic.location", _STRING, "source",
                                               choices=("source", "target"),
                                               doc="the cluster the offset-syncs topic is on")
    emit_offset_syncs_enabled: bool = setting("emit.offset-syncs.enabled", _BOOLEAN, True)
    heartbeats_replication_enabled: bool = setting("heartbeats.replication.enabled", _BOOLEAN, True,
                                                   doc="mirror heartbeats topics even if topics leaves them out")
    # -- groups and checkpoints (MirrorCheckpointConfig, DefaultGroupFilter)
    groups: Tuple[str, ...] = setting("groups", _LIST, GROUPS_DEFAULT, doc="consumer groups to checkpoint")
    groups_exclude: Tuple[str, ...] = setting("groups.exclude", _LIST, GROUPS_EXCLUDE_DEFAULT)
    group_filter_class: str = setting("group.filter.class", _STRING, _GROUP_FILTERS[0], choices=_GROUP_FILTERS)
    refresh_groups_enabled: bool = setting("refresh.groups.enabled", _BOOLEAN, True)
    refresh_groups_interval_seconds: int = setting("refresh.groups.interval.seconds", _LONG, 600)
    emit_checkpoints_enabled: bool = setting("emit.checkpoints.enabled", _BOOLEAN, True)
    emit_checkpoints_interval_seconds: int = setting("emit.checkpoints.interval.seconds", _LONG, 60)
    sync_group_offsets_enabled: bool = setting("sync.group.offsets.enabled", _BOOLEAN, False,
                                               doc="commit translated offsets on the target for idle groups")
    sync_group_offsets_interval_seconds: int = setting("sync.group.offsets.interval.seconds", _LONG, 60)
    checkpoints_topic_replication_factor: int = setting("checkpoints.topic.replication.factor", _INT, 3,
                                                        at_most=_SHORT_MAX)
    # -- heartbeats (MirrorHeartbeatConfig)
    emit_heartbeats_enabled: bool = setting("emit.heartbeats.enabled", _BOOLEAN, True)
    emit_heartbeats_interval_seconds: int = setting("emit.heartbeats.interval.seconds", _LONG, 1)
    heartbeats_topic_replication_factor: int = setting("heartbeats.topic.replication.factor", _INT, 3,
                                                       at_most=_SHORT_MAX)

    source: str
    target: str
    source_client: Dict[str, str]
    target_client: Dict[str, str]
    flow_client: Dict[str, str]
    policy: ReplicationPolicy
    topic_filter: TopicFilter
    group_filter: GroupFilter
    config_filter: ConfigPropertyFilter
    _spelled: Dict[str, str]
    _COMPARED: ClassVar[Tuple[str, ...]] = ("source", "target", "source_client", "target_client", "flow_client")

    def __init__(self, source: str, target: str, *, source_client: Optional[Mapping[str, str]] = None,
                 target_client: Optional[Mapping[str, str]] = None, flow_client: Optional[Mapping[str, str]] = None,
                 **settings: Any) -> None:
        self._init(source, target, dict(source_client or {}), dict(target_client or {}), dict(flow_client or {}),
                   settings, {})

    @classmethod
    def build(cls, settings: Mapping[str, Any]) -> "FlowConfig":
        """Not for a flow, which needs its clusters: ``FlowConfig(source, target, **settings)``."""
        raise TypeError("a FlowConfig is built with its clusters: FlowConfig(source, target, **settings)")

    @classmethod
    def _from_file(cls, source: str, target: str, source_client: Dict[str, str], target_client: Dict[str, str],
                   flow_client: Dict[str, str], settings: Mapping[str, Any], spelled: Dict[str, str]) -> "FlowConfig":
        flow = object.__new__(cls)
        flow._init(source, target, source_client, target_client, flow_client, settings, spelled)
        return flow

    def _init(self, source: str, target: str, source_client: Dict[str, str], target_client: Dict[str, str],
              flow_client: Dict[str, str], settings: Mapping[str, Any], spelled: Dict[str, str]) -> None:
        if not isinstance(source, str) or not isinstance(target, str) or not source or not target:
            raise ConfigError("a flow's source and target are cluster aliases, not %r and %r" % (source, target))
        if source == target:
            raise ConfigError("a flow goes between two clusters, not from %r to itself" % (source,))
        for name, value in (("source", source), ("target", target), ("source_client", source_client),
                            ("target_client", target_client), ("flow_client", flow_client), ("_spelled", spelled)):
            object.__setattr__(self, name, value)
        self._build({}, settings, strict=True)

    def _validate(self) -> None:
        """Checks Kafka leaves to the run (a zero interval, a replication factor of 0 fail there),
        made here with the key as written; then the policy and filters, whose bad expressions
        name their key too."""
        spelled = self._spelled
        for key in _INTERVALS:
            value = getattr(self, key.replace(".", "_"))
            if value == 0 or value > _MAX_SECONDS:
                raise ConfigError("Invalid value %r for configuration %s: an interval is at least 1 second and at "
                                  "most %d (a negative one turns it off)" % (value, spelled.get(key, key), _MAX_SECONDS))
        for key in _REPLICATION_FACTORS:
            value = getattr(self, key.replace(".", "_").replace("-", "_"))
            if value != -1 and value < 1:
                raise ConfigError("Invalid value %r for configuration %s: a replication factor is at least 1, or -1 "
                                  "for the target broker's default" % (value, spelled.get(key, key)))
        separator_key = "replication.policy.separator"
        if not self.replication_policy_separator:
            raise ConfigError("Invalid value '' for configuration %s: the separator must not be empty"
                              % spelled.get(separator_key, separator_key))
        identity = self.replication_policy_class.endswith("IdentityReplicationPolicy")
        policy: ReplicationPolicy
        if identity:
            policy = IdentityReplicationPolicy(self.source, self.replication_policy_separator,
                                               self.replication_policy_internal_topic_separator_enabled)
        else:
            policy = DefaultReplicationPolicy(self.replication_policy_separator,
                                              self.replication_policy_internal_topic_separator_enabled)
        object.__setattr__(self, "policy", policy)
        object.__setattr__(self, "topic_filter", TopicFilter(
            self.topics, self.topics_exclude, include_key=spelled.get("topics", "topics"),
            exclude_key=spelled.get("topics.exclude", "topics.exclude")))
        object.__setattr__(self, "group_filter", GroupFilter(
            self.groups, self.groups_exclude, include_key=spelled.get("groups", "groups"),
            exclude_key=spelled.get("groups.exclude", "groups.exclude")))
        object.__setattr__(self, "config_filter", ConfigPropertyFilter(
            self.config_properties_exclude, self.use_defaults_from,
            exclude_key=spelled.get("config.properties.exclude", "config.properties.exclude")))

    def __repr__(self) -> str:
        settings = ", ".join("%s=%r" % (attr, getattr(self, attr)) for attr in self._table()[0])
        return "FlowConfig(%r, %r, source_client=%r, target_client=%r, flow_client=%r, %s)" % (
            self.source, self.target, _hidden(self.source_client), _hidden(self.target_client),
            _hidden(self.flow_client), settings)

    # -- derived ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``source->target``."""
        return self.source + "->" + self.target

    @property
    def exactly_once(self) -> bool:
        """Whether the flow writes in transactions (``<target>.exactly.once.source.support=enabled``)."""
        return self.exactly_once_source_support == "enabled"

    def period(self, job: str) -> Optional[int]:
        """Seconds between runs of ``job`` (``refresh_topics``, ``sync_topic_configs``,
        ``sync_topic_acls``, ``refresh_groups``, ``emit_checkpoints``, ``emit_heartbeats``,
        ``sync_group_offsets``): its ``<job>.interval.seconds``, or None when it is turned off
        (its ``<job>.enabled`` false or the interval negative, as Kafka's scheduler reads them)."""
        enabled: bool = getattr(self, job + "_enabled")
        seconds: int = getattr(self, job + "_interval_seconds")
        return seconds if enabled and seconds > 0 else None

    @property
    def offset_syncs_side(self) -> str:
        """The side (``source`` or ``target``) whose cluster holds the offset-syncs topic."""
        return self.offset_syncs_topic_location

    @property
    def offset_syncs_topic(self) -> str:
        """The offset-syncs topic's name: named after the cluster it is NOT on (Kafka's rule:
        ``mm2-offset-syncs.<target>.internal`` on the source by default)."""
        other = self.target if self.offset_syncs_topic_location == "source" else self.source
        return self.policy.offset_syncs_topic(other)

    @property
    def checkpoints_topic(self) -> str:
        """The checkpoints topic on the target: ``<source>.checkpoints.internal``."""
        return self.policy.checkpoints_topic(self.source)

    @property
    def heartbeats_topic(self) -> str:
        """The heartbeats topic: ``heartbeats``."""
        return self.policy.heartbeats_topic()

    def remote_topic(self, topic: str) -> str:
        """The name on the target of source topic ``topic`` (``A.topic`` by default)."""
        return self.policy.format_remote_topic(self.source, topic)

    def checkpoint_topic(self, upstream_topic: str) -> str:
        """The target's name for source topic ``upstream_topic`` in a checkpoint (Kafka's
        ``renameTopicPartition``): the original name for a topic that came from the target
        (``B.t`` read on A, checkpointed to B as ``t``), else the remote topic's name."""
        if self.policy.topic_source(upstream_topic) == self.target:
            return self.policy.original_topic(upstream_topic)
        return self.remote_topic(upstream_topic)

    def should_replicate_topic(self, topic: str) -> bool:
        """Whether the flow mirrors source topic ``topic`` (Kafka's ``shouldReplicateTopic``): the
        topic filter lets it through (or it is a heartbeats topic, with
        ``heartbeats.replication.enabled``), it is not internal, and it did not come from the target."""
        wanted = self.topic_filter.should_replicate_topic(topic) or (
            self.heartbeats_replication_enabled and self.policy.is_heartbeats_topic(topic))
        return wanted and not self.policy.is_internal_topic(topic) and not is_cycle(self.policy, topic, self.target)

    def should_checkpoint_topic(self, topic: str) -> bool:
        """Whether a group's offsets of source topic ``topic`` are checkpointed (the topic filter)."""
        return self.topic_filter.should_replicate_topic(topic)

    def should_replicate_group(self, group: str) -> bool:
        """Whether the flow checkpoints consumer group ``group`` of the source."""
        return self.group_filter.should_replicate_group(group)

    def should_replicate_config_property(self, prop: str) -> bool:
        """Whether topic config ``prop`` is copied to remote topics."""
        return self.config_filter.should_replicate_config_property(prop)

    def client_config(self, side: str, kind: str) -> Dict[str, str]:
        """The settings (Kafka property name -> value) of the flow's ``kind`` client (``consumer``,
        ``producer`` or ``admin``) on ``side`` (``source`` or ``target``), merged in Kafka's order
        (module docstring); a new dict on every call."""
        if side not in SIDES:
            raise ConfigError("side must be one of %s, not %r" % (", ".join(SIDES), side))
        if kind not in CLIENT_KINDS:
            raise ConfigError("kind must be one of %s, not %r" % (", ".join(CLIENT_KINDS), kind))
        cluster = self.source_client if side == "source" else self.target_client
        prefix = kind + "."
        props = {k: v for k, v in cluster.items() if is_connection_key(k)}
        props.update((k[len(prefix):], v) for k, v in self.flow_client.items() if k.startswith(prefix))
        props.update((k[len(prefix):], v) for k, v in cluster.items() if k.startswith(prefix))
        if kind == "consumer":
            # The mirror commits its positions itself, and reads a new partition from its start.
            props["enable.auto.commit"] = "false"
            props.setdefault("auto.offset.reset", "earliest")
        return props

    def cluster_alias(self, side: str) -> str:
        """The alias of ``side`` (``source`` or ``target``)."""
        if side not in SIDES:
            raise ConfigError("side must be one of %s, not %r" % (", ".join(SIDES), side))
        return self.source if side == "source" else self.target


class MirrorConfig:
    """A whole MirrorMaker configuration: the clusters and the flows this process runs.

    - ``clusters`` (Tuple[str, ...]): every alias of ``clusters``, in the file's order;
    - ``target_clusters`` (Tuple[str, ...]): the aliases this process writes to (``--clusters``;
      all by default): the flows into the others are left to other processes;
    - ``flows`` (List[FlowConfig]): the enabled flows into ``target_clusters``, in the order
      of ``clusters`` (by source, then target); never empty;
    - ``cluster_clients`` (Dict[str, Dict[str, str]]): every cluster's client settings, as
      :attr:`FlowConfig.source_client` holds them;
    - ``policy`` (ReplicationPolicy): the top-level policy, which tools that read a cluster
      on their own (``translate-offsets``, ``status``) name topics with;
    - ``unused`` (Dict[str, str]): key -> why no part of the mirror reads it;
    - ``legacy`` (bool): made from MirrorMaker 1's flags by :func:`legacy_config`.

    Immutable once built.
    """

    def __init__(self, clusters: Sequence[str], target_clusters: Sequence[str], flows: Sequence[FlowConfig],
                 cluster_clients: Mapping[str, Mapping[str, str]], policy: ReplicationPolicy,
                 unused: Mapping[str, str], legacy: bool = False) -> None:
        self.clusters = tuple(clusters)
        self.target_clusters = tuple(target_clusters)
        self.flows: List[FlowConfig] = list(flows)
        self.cluster_clients = {alias: dict(props) for alias, props in cluster_clients.items()}
        self.policy = policy
        self.unused = dict(unused)
        self.legacy = legacy

    def __repr__(self) -> str:
        return "MirrorConfig(clusters=%r, target_clusters=%r, flows=%r, unused=%r%s)" % (
            self.clusters, self.target_clusters, [f.name for f in self.flows], sorted(self.unused),
            ", legacy=True" if self.legacy else "")

    def flow(self, source: str, target: str) -> FlowConfig:
        """The flow ``source->target``; ConfigError naming the flows there are if it is not one."""
        for flow in self.flows:
            if flow.source == source and flow.target == target:
                return flow
        raise ConfigError("%s->%s is not an enabled flow of this configuration (flows: %s)"
                          % (source, target, ", ".join(f.name for f in self.flows)))

    def client_config(self, cluster: str, kind: str) -> Dict[str, str]:
        """The connection settings of a ``kind`` client of ``cluster``, for a tool that reads a
        cluster outside any flow (Kafka's ``MirrorClientConfig``: only the connection keys,
        ``<alias>.<kind>.<key>`` over ``<alias>.<key>`` over the top level)."""
        if cluster not in self.cluster_clients:
            raise ConfigError("%r is not one of the clusters (%s)" % (cluster, ", ".join(self.clusters)))
        if kind not in CLIENT_KINDS:
            raise ConfigError("kind must be one of %s, not %r" % (", ".join(CLIENT_KINDS), kind))
        props = self.cluster_clients[cluster]
        prefix = kind + "."
        keys = {k for k in props if is_connection_key(k)}
        keys |= {k[len(prefix):] for k in props if k.startswith(prefix) and is_connection_key(k[len(prefix):])}
        return {k: props.get(prefix + k, props.get(k, "")) for k in sorted(keys)}


# -- reading a file ---------------------------------------------------------------------


def load_config(path_or_text: Union[str, "os.PathLike[str]"], clusters: Optional[Sequence[str]] = None) -> MirrorConfig:
    """A MirrorMaker configuration from a file (a path, or a ``str`` of one line) or from the
    file's text (a ``str`` holding a newline). ``clusters``: ``--clusters``, the aliases this
    process writes to (all by default). ConfigError on an unreadable file or a bad setting."""
    if isinstance(path_or_text, str) and "\n" in path_or_text:
        text = path_or_text
    else:
        path = os.fspath(path_or_text)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError("cannot read the mirror maker configuration %s: %s"
                              % (path, getattr(exc, "strerror", None) or exc)) from None
    return parse_config(parse_properties(text), clusters)


class _Sorted:
    """The keys of a file sorted by what they configure."""

    def __init__(self, aliases: Sequence[str]) -> None:
        self.aliases = aliases
        self.top: Dict[str, Tuple[str, str]] = {}  # setting -> (value, key)
        self.top_connection: Dict[str, Tuple[str, str]] = {}
        self.cluster_connection: Dict[str, Dict[str, Tuple[str, str]]] = {a: {} for a in aliases}
        self.cluster_client: Dict[str, Dict[str, str]] = {a: {} for a in aliases}
        self.cluster_settings: Dict[str, Dict[str, Tuple[str, str]]] = {a: {} for a in aliases}
        self.flow_settings: Dict[Tuple[str, str], Dict[str, Tuple[str, str]]] = {}
        self.flow_client: Dict[Tuple[str, str], Dict[str, str]] = {}
        self.enabled: Dict[Tuple[str, str], bool] = {}
        self.unused: Dict[str, str] = {}


_SETTINGS = frozenset(FlowConfig.known_keys())
_FLOW_SETTINGS = _SETTINGS - {EXACTLY_ONCE_SOURCE_SUPPORT}


def _alias_prefix(key: str, aliases: Iterable[str]) -> Optional[str]:
    """The longest alias ``key`` starts with, followed by a dot."""
    found = [a for a in aliases if key.startswith(a + ".") and len(key) > len(a) + 1]
    return max(found, key=len) if found else None


def _flow_key(key: str, aliases: Sequence[str]) -> Tuple[str, str, str]:
    """(source, target, setting) of a key ``A->B.setting``; ConfigError when A or B is not an alias."""
    source, _, rest = key.partition("->")
    listed = ", ".join(aliases)
    if source not in aliases:
        raise ConfigError("%s names a flow from %r, which is not one of the clusters (%s)" % (key, source, listed))
    candidates = [a for a in aliases if rest.startswith(a + ".") and len(rest) > len(a) + 1]
    if not candidates:
        raise ConfigError("%s names a flow from %s to a cluster that is not one of the clusters (%s)"
                          % (key, source, listed))
    # Aliases may hold dots: prefer the reading whose remainder is a setting, then the longest alias.
    target = max(candidates, key=lambda a: (rest[len(a) + 1:] in _SETTINGS or rest[len(a) + 1:] == "enabled", len(a)))
    return source, target, rest[len(target) + 1:]


def _why_unused(key: str, name: str, where: str, aliases: Sequence[str]) -> str:
    if where == "top":
        head, _, rest = key.partition(".")
        if rest and (is_connection_key(rest) or _client_key_kind(rest) is not None
                     or rest == EXACTLY_ONCE_SOURCE_SUPPORT):
            return "a setting of cluster %r, which is not one of the clusters (%s)" % (head, ", ".join(aliases))
    if name.startswith(_CONNECT_PREFIXES) or name in _CONNECT_KEYS:
        return "a Kafka Connect setting the mirror does not use"
    if where == "top" and _client_key_kind(name) is not None:
        return "client settings are given per cluster (<alias>.%s) or per flow (A->B.%s)" % (name, name)
    if where == "top" and name == "enabled":
        return "flows are enabled one by one: A->B.enabled = true"
    if where == "cluster" and name in _FLOW_SETTINGS:
        return "a flow setting: set it for every flow (%s) or for one (A->B.%s)" % (name, name)
    if where == "flow" and name == EXACTLY_ONCE_SOURCE_SUPPORT:
        return "set per target cluster: <target>.%s" % EXACTLY_ONCE_SOURCE_SUPPORT
    if where == "flow" and is_connection_key(name):
        return "a connection setting is given per cluster: <alias>.%s" % name
    candidates = list(_SETTINGS) + ["enabled", "clusters", "bootstrap.servers", "security.protocol"]
    return "not a MirrorMaker setting%s" % suggest(name, candidates)


def _sort_keys(properties: Mapping[str, str], aliases: Sequence[str]) -> _Sorted:
    keys = _Sorted(aliases)
    for key, value in properties.items():
        if key == "clusters":
            continue
        if "->" in key:
            source, target, name = _flow_key(key, aliases)
            if source == target:
                raise ConfigError("%s: a flow goes between two different clusters" % key)
            pair = (source, target)
            if name == "enabled":
                _no_comment(key, value)
                keys.enabled[pair] = parse_setting(key, _BOOLEAN, value)
            elif name in _FLOW_SETTINGS:
                keys.flow_settings.setdefault(pair, {})[name] = (value, key)
            elif _client_key_kind(name) is not None:
                client = _client_key_kind(name)
                assert client is not None
                if client[1] == "security.protocol":
                    _check_security_protocol(key, value)
                elif client[1] == "bootstrap.servers":
                    _check_bootstrap(key, value)
                keys.flow_client.setdefault(pair, {})[name] = value
            else:
                keys.unused[key] = _why_unused(key, name, "flow", aliases)
            continue
        known_top = key in _SETTINGS or is_connection_key(key)
        alias = None if known_top else _alias_prefix(key, aliases)
        if alias is None:
            if key in _SETTINGS:
                keys.top[key] = (value, key)
            elif is_connection_key(key):
                keys.top_connection[key] = (value, key)
            else:
                keys.unused[key] = _why_unused(key, key, "top", aliases)
            continue
        name = key[len(alias) + 1:]
        if is_connection_key(name):
            keys.cluster_connection[alias][name] = (value, key)
        elif _client_key_kind(name) is not None:
            client = _client_key_kind(name)
            assert client is not None
            if client[1] == "security.protocol":
                _check_security_protocol(key, value)
            elif client[1] == "bootstrap.servers":
                _check_bootstrap(key, value)
            keys.cluster_client[alias][name] = value
        elif name == EXACTLY_ONCE_SOURCE_SUPPORT:
            keys.cluster_settings[alias][name] = (value, key)
        else:
            keys.unused[key] = _why_unused(key, name, "cluster", aliases)
    return keys


def _cluster_clients(keys: _Sorted) -> Dict[str, Dict[str, str]]:
    """Each cluster's client settings, as Kafka's ``MirrorMakerConfig.clusterProps`` merges them."""
    for name, (value, key) in keys.top_connection.items():
        if name == "security.protocol":
            _check_security_protocol(key, value)
        elif name == "bootstrap.servers":
            _check_bootstrap(key, value)
    clients: Dict[str, Dict[str, str]] = {}
    for alias in keys.aliases:
        props = dict(keys.cluster_client[alias])
        for name, (value, key) in keys.cluster_connection[alias].items():
            if name == "security.protocol":
                _check_security_protocol(key, value)
            elif name == "bootstrap.servers":
                _check_bootstrap(key, value)
            props[name] = value
            for kind in CLIENT_KINDS:
                props.setdefault(kind + "." + name, value)
        for name, (value, _) in keys.top_connection.items():
            for kind in CLIENT_KINDS:
                props.setdefault(kind + "." + name, value)
            props.setdefault(name, value)
        clients[alias] = props
    return clients


def _parse_flow_settings(raw: Mapping[str, Tuple[str, str]]) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """Each setting's value parsed, a bad one naming its key as written: (values, key as written)."""
    values: Dict[str, Any] = {}
    spelled: Dict[str, str] = {}
    for name, (value, key) in raw.items():
        _no_comment(key, value)
        text = value.strip().lower() if name in _CASE_INSENSITIVE else value
        values[name] = FlowConfig.parse(name, text, spelled=key)
        spelled[name] = key
    return values, spelled


def _check_connections(flow: FlowConfig) -> None:
    """Every client of the flow knows where its cluster is."""
    for side in SIDES:
        alias = flow.cluster_alias(side)
        for kind in CLIENT_KINDS:
            if not flow.client_config(side, kind).get("bootstrap.servers", "").strip():
                raise ConfigError("%s.bootstrap.servers is required: the flow %s connects to cluster %s"
                                  % (alias, flow.name, alias))


def _check_exactly_once(flow: FlowConfig) -> None:
    """A flow that writes in transactions with ``exactly.once.support = required`` must read
    committed records only: Kafka's MirrorSourceConnector supports exactly once only with
    ``isolation.level = read_committed`` (it would copy aborted records as committed ones), and
    Connect refuses such a connector where the worker has exactly-once support enabled."""
    if flow.exactly_once_support != "required" or not flow.exactly_once:
        return
    level = flow.client_config("source", "consumer").get("isolation.level", "read_uncommitted").strip().lower()
    if level != "read_committed":
        raise ConfigError("exactly.once.support is required for flow %s, but its source consumers read with "
                          "isolation.level=%s and would copy aborted records: set %s.consumer.isolation.level = "
                          "read_committed" % (flow.name, level, flow.source))


def parse_config(properties: Mapping[str, str], clusters: Optional[Sequence[str]] = None) -> MirrorConfig:
    """A MirrorMaker configuration from its properties (key -> value strings, as
    :func:`pylogq.config.parse_properties` reads a file); see :func:`load_config`."""
    if "clusters" not in properties:
        raise ConfigError("Missing required configuration \"clusters\" which has no default value: the aliases "
                          "of the clusters, comma-separated (clusters = A, B)")
    _no_comment("clusters", properties["clusters"])
    aliases: Tuple[str, ...] = parse_setting("clusters", _LIST, properties["clusters"])
    if not aliases:
        raise ConfigError("Invalid value '' for configuration clusters: at least one cluster alias is required")
    for alias in aliases:
        if "->" in alias or re.search(r"\s", alias):
            raise ConfigError("Invalid value %r for configuration clusters: alias %r holds '->' or a blank"
                              % (properties["clusters"], alias))
    if clusters:
        missing = [c for c in clusters if c not in aliases]
        if missing:
            raise ConfigError("--clusters names %s, not among the clusters of the configuration (%s)"
                              % (", ".join(missing), ", ".join(aliases)))
        targets = tuple(a for a in aliases if a in clusters)
    else:
        targets = aliases
    keys = _sort_keys(properties, aliases)
    cluster_clients = _cluster_clients(keys)
    top_values, top_spelled = _parse_flow_settings(keys.top)
    flows: List[FlowConfig] = []
    for source in aliases:
        for target in aliases:
            if source == target or not keys.enabled.get((source, target)) or target not in targets:
                continue
            flow_values, flow_spelled = _parse_flow_settings(keys.flow_settings.get((source, target), {}))
            cluster_eos = keys.cluster_settings[target].get(EXACTLY_ONCE_SOURCE_SUPPORT)
            if cluster_eos is not None:
                eos_values, eos_spelled = _parse_flow_settings({EXACTLY_ONCE_SOURCE_SUPPORT: cluster_eos})
                flow_values.update(eos_values)
                flow_spelled.update(eos_spelled)
            values = dict(top_values)
            values.update(flow_values)
            spelled = dict(top_spelled)
            spelled.update(flow_spelled)
            flow = FlowConfig._from_file(source, target, cluster_clients[source], cluster_clients[target],
                                         dict(keys.flow_client.get((source, target), {})), values, spelled)
            _check_connections(flow)
            _check_exactly_once(flow)
            flows.append(flow)
    if not flows:
        raise ConfigError(_no_flows(properties, keys, aliases, targets))
    separator = top_values.get("replication.policy.separator", ".")
    internal = top_values.get("replication.policy.internal.topic.separator.enabled", True)
    policy: ReplicationPolicy = DefaultReplicationPolicy(separator, internal)
    if top_values.get("replication.policy.class", DEFAULT_POLICY).endswith("IdentityReplicationPolicy"):
        policy = IdentityReplicationPolicy(None, separator, internal)
    return MirrorConfig(aliases, targets, flows, cluster_clients, policy, keys.unused)


def _no_flows(properties: Mapping[str, str], keys: _Sorted, aliases: Sequence[str], targets: Sequence[str]) -> str:
    message = "No source->target replication flows"
    enabled = [pair for pair, on in keys.enabled.items() if on]
    typos = sorted(k for k in properties if "->" in k and k.endswith(".enable"))
    if typos:
        return message + ": %s is not a setting; a flow is enabled with A->B.enabled = true" % ", ".join(typos)
    if not enabled:
        return message + ": enable one with A->B.enabled = true (clusters: %s)" % ", ".join(aliases)
    return message + " into %s (--clusters); the enabled ones go to %s" % (
        ", ".join(targets), ", ".join(sorted({t for _, t in enabled})))


# -- MirrorMaker 1's command line ---------------------------------------------------------


LEGACY_SOURCE = "source"
LEGACY_TARGET = "target"


def _legacy_topics(include: str) -> str:
    """MirrorMaker 1's ``--whitelist``/``--include`` regex as its ``IncludeList`` read it: blanks
    removed, surrounding quotes dropped, a comma an alternative (``a,b`` is ``a|b``)."""
    regex = include.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"""^["']+""", "", regex)
    regex = re.sub(r"""["']+$""", "", regex)
    if not regex:
        raise ConfigError("Invalid value %r for --include (--whitelist): a regular expression of the topics is "
                          "required" % (include,))
    try:
        re.compile(regex)
    except re.error as exc:
        raise ConfigError("Invalid value %r for --include (--whitelist): not a regular expression (%s)"
                          % (include, exc)) from None
    return regex


def legacy_config(consumer_config: Mapping[str, str], producer_config: Mapping[str, str], include: str,
                  num_streams: int) -> MirrorConfig:
    """MirrorMaker 1's flags as one flow ``source->target`` (the aliases are those words).

    ``consumer_config`` and ``producer_config`` are the files of ``--consumer.config`` and
    ``--producer.config`` (key -> value): their connection keys (``bootstrap.servers``, or the
    old producer's ``metadata.broker.list``; ``security.protocol``, ``ssl.*``, ``sasl.*``)
    reach the source and the target, their other keys the mirror's consumer and producer.
    ``include`` is ``--whitelist``/``--include``, ``num_streams`` ``--num.streams`` (the
    flow's ``tasks.max``). MirrorMaker 1 kept topic names and wrote nothing but the copies,
    so the flow has the identity policy and emits no checkpoints, heartbeats or offset
    syncs; remote topics get the target broker's default replication factor, as MirrorMaker
    1's auto-created topics did. ConfigError names the flag of a bad value.
    """
    if isinstance(num_streams, bool) or not isinstance(num_streams, int) or num_streams < 1:
        raise ConfigError("Invalid value %r for --num.streams: at least 1" % (num_streams,))
    topics = _legacy_topics(include)
    props: Dict[str, str] = {
        "clusters": "%s, %s" % (LEGACY_SOURCE, LEGACY_TARGET),
        "%s->%s.enabled" % (LEGACY_SOURCE, LEGACY_TARGET): "true",
        "replication.policy.class": IDENTITY_POLICY,
        "tasks.max": str(num_streams),
        "topics": topics,
        "replication.factor": "-1",
        "emit.checkpoints.enabled": "false",
        "emit.heartbeats.enabled": "false",
        "emit.offset-syncs.enabled": "false",
    }
    for flag, alias, kind, given in (("--consumer.config", LEGACY_SOURCE, "consumer", consumer_config),
                                     ("--producer.config", LEGACY_TARGET, "producer", producer_config)):
        settings = {str(k): str(v) for k, v in given.items()}
        if "bootstrap.servers" not in settings and kind == "producer" and "metadata.broker.list" in settings:
            settings["bootstrap.servers"] = settings.pop("metadata.broker.list")
        if not settings.get("bootstrap.servers", "").strip():
            old = " (zookeeper.connect is the old consumer's: brokers are reached directly)" \
                if "zookeeper.connect" in settings else ""
            raise ConfigError("%s: bootstrap.servers is required%s" % (flag, old))
        for key, value in settings.items():
            try:
                if key == "security.protocol":
                    _check_security_protocol(key, value)
                elif key == "bootstrap.servers":
                    _check_bootstrap(key, value)
            except ConfigError as exc:
                raise ConfigError("%s: %s" % (flag, exc)) from None
            props[("%s.%s" if is_connection_key(key) else "%s." + kind + ".%s") % (alias, key)] = value
    parsed = parse_config(props)
    return MirrorConfig(parsed.clusters, parsed.target_clusters, parsed.flows, parsed.cluster_clients, parsed.policy,
                        parsed.unused, legacy=True)
