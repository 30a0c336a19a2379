"""The broker's settings: the node's keys, the log manager's (``log.*``) and the listener's.

One :class:`BrokerConfig` reads a whole ``server.properties``. Each layer declares its
own keys on :mod:`pylogq.config`'s machinery: the node's here (:class:`NodeConfig`:
``broker.id``, ``num.partitions``, the group coordinator's, ...), the log manager's in
:class:`~pylogq.storage.config.LogManagerConfig`, and the network listener's in
``pylogq.server.config`` (``listeners``, ``socket.*``, SASL), which the server
registers through the contract (the broker does not import the server). An unknown
key raises ConfigError naming it, with the closest known key as a suggestion.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Mapping, Optional, Set, Tuple, Type

from ...config import _BOOLEAN, _INT, _LONG, _STRING, Config, setting, suggest, to_string
from ...errors import ConfigError
from ...metrics import parse_listener
from ...storage.config import LogManagerConfig
from ..contract import listener_settings
from .authorizer import AUTHORIZER_CLASS_NAMES, parse_super_users
from .replica_selector import SELECTORS

__all__ = ["BrokerConfig", "DEVELOPMENT_DEFAULTS", "NodeConfig", "is_dynamic_in_kafka", "with_development_defaults"]

#: The broker keys Kafka updates without a restart (DynamicBrokerConfig.AllDynamicConfigs
#: and DynamicConfig.Broker, Kafka 3.x), besides the ``ssl.``/``sasl.``/``listener.name.``
#: families. Every other broker key is read-only there: AlterConfigs refuses it with
#: INVALID_REQUEST "Cannot update these configs dynamically" (:mod:`pylogq.cluster.broker.dynamic_config`).
_KAFKA_DYNAMIC_BROKER_KEYS = frozenset("""
    log.segment.bytes log.roll.ms log.roll.hours log.roll.jitter.ms log.roll.jitter.hours
    log.index.size.max.bytes log.flush.interval.messages log.flush.interval.ms log.retention.bytes
    log.retention.ms log.retention.minutes log.retention.hours log.index.interval.bytes
    log.cleaner.delete.retention.ms log.cleaner.min.compaction.lag.ms log.cleaner.max.compaction.lag.ms
    log.segment.delete.delay.ms log.cleaner.min.cleanable.ratio log.cleanup.policy
    unclean.leader.election.enable min.insync.replicas compression.type log.preallocate
    log.message.timestamp.type log.message.timestamp.difference.max.ms log.message.timestamp.before.max.ms
    log.message.timestamp.after.max.ms message.max.bytes log.message.downconversion.enable
    log.local.retention.ms log.local.retention.bytes
    log.cleaner.threads log.cleaner.dedupe.buffer.size log.cleaner.io.buffer.size
    log.cleaner.io.buffer.load.factor log.cleaner.io.max.bytes.per.second log.cleaner.backoff.ms
    num.io.threads num.replica.fetchers num.recovery.threads.per.data.dir background.threads
    num.network.threads metric.reporters listeners advertised.listeners listener.security.protocol.map
    max.connections.per.ip max.connections.per.ip.overrides max.connections max.connection.creation.rate
    producer.id.expiration.ms transaction.partition.verification.enable
    leader.replication.throttled.rate follower.replication.throttled.rate
    replica.alter.log.dirs.io.max.bytes.per.second
""".split())


def is_dynamic_in_kafka(key: str) -> bool:
    """Whether Kafka lets AlterConfigs change broker key ``key`` while the broker runs."""
    return key in _KAFKA_DYNAMIC_BROKER_KEYS or key.startswith(("ssl.", "sasl.", "listener.name."))

#: The settings of Kafka's shipped single-node ``config/server.properties`` that differ
#: from Kafka's defaults: what ``pylogq-broker`` without a properties file and an
#: embedded :class:`pylogq.Broker` start from (a consumer group's first member is
#: answered at once instead of after the 3 s that suit a production cluster). The
#: repository's ``config/server.properties`` (shipped as ``pylogq/config_files/``) sets
#: exactly these apart from Kafka's defaults; tests/cli/test_config_files.py holds the two together.
DEVELOPMENT_DEFAULTS: Dict[str, Any] = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
}


def with_development_defaults(settings: Mapping[str, Any]) -> Dict[str, Any]:
    """``settings`` with :data:`DEVELOPMENT_DEFAULTS` for the keys it does not set in either spelling."""
    given = {NodeConfig.attribute(key) for key in settings}
    out = {key: value for key, value in DEVELOPMENT_DEFAULTS.items() if NodeConfig.attribute(key) not in given}
    out.update(settings)
    return out


class NodeConfig(Config):
    """The broker node's own keys, with Kafka's names and defaults. Immutable."""

    broker_id: int = setting("broker.id", _INT, 0, at_least=0)
    num_partitions: int = setting("num.partitions", _INT, 1, at_least=1)
    default_replication_factor: int = setting("default.replication.factor", _INT, 1, at_least=1)
    auto_create_topics_enable: bool = setting("auto.create.topics.enable", _BOOLEAN, True)
    delete_topic_enable: bool = setting("delete.topic.enable", _BOOLEAN, True)
    offsets_topic_num_partitions: int = setting("offsets.topic.num.partitions", _INT, 50, at_least=1)
    offsets_topic_replication_factor: int = setting("offsets.topic.replication.factor", _INT, 3, at_least=1)
    offsets_topic_segment_bytes: int = setting("offsets.topic.segment.bytes", _INT, 104857600, at_least=14)
    # How long a commit (or another write of the group coordinator) waits for the in-sync replicas.
    offsets_commit_timeout_ms: int = setting("offsets.commit.timeout.ms", _INT, 5000, at_least=1)
    group_initial_rebalance_delay_ms: int = setting("group.initial.rebalance.delay.ms", _INT, 3000, at_least=0)
    group_min_session_timeout_ms: int = setting("group.min.session.timeout.ms", _INT, 6000, at_least=0)
    group_max_session_timeout_ms: int = setting("group.max.session.timeout.ms", _INT, 1800000, at_least=0)
    # How often the high watermarks go to replication-offset-checkpoint (Kafka's key and
    # default): readers of the files alone (pylogq.spark) take it as the committed end.
    replica_high_watermark_checkpoint_interval_ms: int = setting(
        "replica.high.watermark.checkpoint.interval.ms", _LONG, 5000, at_least=1)
    # Kafka's cap on one fetch response (KIP-541; Kafka's default is 55 MB). pylogq's is
    # 4 MiB: a consumer that asks for 50 MB gets it in responses it can decode while the
    # next one is on the wire, which librdkafka consumes at 2-3x the rate of one huge one.
    fetch_max_bytes: int = setting("fetch.max.bytes", _INT, 4194304, at_least=1024)
    # Kafka settings that name JVM thread pools or ZooKeeper: accepted so a Kafka
    # server.properties loads unchanged; a single asyncio loop has no such pools.
    num_network_threads: int = setting("num.network.threads", _INT, 3, at_least=1)
    num_io_threads: int = setting("num.io.threads", _INT, 8, at_least=1)
    background_threads: int = setting("background.threads", _INT, 10, at_least=1)
    # A cluster (docs/replication.md): without zookeeper.connect the broker is a single node.
    zookeeper_connect: Optional[str] = setting("zookeeper.connect", _STRING, None, nullable=True)
    zookeeper_connection_timeout_ms: int = setting("zookeeper.connection.timeout.ms", _INT, 18000, at_least=0)
    zookeeper_session_timeout_ms: int = setting("zookeeper.session.timeout.ms", _INT, 18000, at_least=1)
    broker_rack: Optional[str] = setting("broker.rack", _STRING, None, nullable=True)
    # KIP-392: how a leader picks the replica a consumer in a rack should fetch from; unset
    # (Kafka's default), consumers read from leaders only. Kafka takes any class implementing
    # its ReplicaSelector; pylogq knows its rack-aware one (replica_selector.py).
    replica_selector_class: Optional[str] = setting("replica.selector.class", _STRING, None, nullable=True,
                                                    choices=tuple(SELECTORS))
    inter_broker_listener_name: Optional[str] = setting("inter.broker.listener.name", _STRING, None, nullable=True)
    security_inter_broker_protocol: str = setting("security.inter.broker.protocol", _STRING, "PLAINTEXT",
                                                  choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    replica_lag_time_max_ms: int = setting("replica.lag.time.max.ms", _LONG, 30000, at_least=1)
    replica_fetch_wait_max_ms: int = setting("replica.fetch.wait.max.ms", _INT, 500, at_least=0)
    replica_fetch_min_bytes: int = setting("replica.fetch.min.bytes", _INT, 1, at_least=1)
    replica_fetch_max_bytes: int = setting("replica.fetch.max.bytes", _INT, 1048576, at_least=0)
    replica_fetch_response_max_bytes: int = setting("replica.fetch.response.max.bytes", _INT, 10485760, at_least=0)
    replica_fetch_backoff_ms: int = setting("replica.fetch.backoff.ms", _INT, 1000, at_least=0)
    num_replica_fetchers: int = setting("num.replica.fetchers", _INT, 1, at_least=1)
    auto_leader_rebalance_enable: bool = setting("auto.leader.rebalance.enable", _BOOLEAN, True)
    leader_imbalance_check_interval_seconds: int = setting("leader.imbalance.check.interval.seconds", _LONG, 300,
                                                           at_least=1)
    leader_imbalance_per_broker_percentage: int = setting("leader.imbalance.per.broker.percentage", _INT, 10,
                                                          at_least=0)
    # The replication throttles' samples (leader.replication.throttled.rate, follower...): the
    # rate is measured over this many windows of this many seconds.
    replication_quota_window_num: int = setting("replication.quota.window.num", _INT, 11, at_least=1)
    replication_quota_window_size_seconds: int = setting("replication.quota.window.size.seconds", _INT, 1,
                                                         at_least=1)
    controlled_shutdown_enable: bool = setting("controlled.shutdown.enable", _BOOLEAN, True)
    controlled_shutdown_max_retries: int = setting("controlled.shutdown.max.retries", _INT, 3, at_least=0)
    controlled_shutdown_retry_backoff_ms: int = setting("controlled.shutdown.retry.backoff.ms", _LONG, 5000,
                                                        at_least=0)
    transaction_state_log_replication_factor: int = setting("transaction.state.log.replication.factor", _INT, 3,
                                                            at_least=1)
    transaction_state_log_min_isr: int = setting("transaction.state.log.min.isr", _INT, 2, at_least=1)
    transaction_state_log_num_partitions: int = setting("transaction.state.log.num.partitions", _INT, 50,
                                                        at_least=1)
    transaction_state_log_segment_bytes: int = setting("transaction.state.log.segment.bytes", _INT, 104857600,
                                                       at_least=1)
    # The transaction coordinator (docs/transactions.md): the longest timeout a producer may
    # ask for, how long an idle transactional id is kept, and how often the coordinator looks
    # for transactions past their timeout and for idle ids.
    transaction_max_timeout_ms: int = setting("transaction.max.timeout.ms", _INT, 900000, at_least=1)
    transactional_id_expiration_ms: int = setting("transactional.id.expiration.ms", _INT, 604800000, at_least=1)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = setting(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", _INT, 10000, at_least=1)
    transaction_remove_expired_transaction_cleanup_interval_ms: int = setting(
        "transaction.remove.expired.transaction.cleanup.interval.ms", _INT, 3600000, at_least=1)
    # Where /metrics is served to Prometheus (http://host:port; docs/operations.md); off when unset.
    metrics_listener: Optional[str] = setting("metrics.listener", _STRING, None, nullable=True)
    # Authorization (docs/security.md): Kafka's ACL authorizer when one of its class names is
    # given; empty (Kafka's default), every request is allowed.
    authorizer_class_name: str = setting("authorizer.class.name", _STRING, "",
                                         choices=("",) + AUTHORIZER_CLASS_NAMES)
    super_users: Optional[str] = setting("super.users", _STRING, None, nullable=True)
    allow_everyone_if_no_acl_found: bool = setting("allow.everyone.if.no.acl.found", _BOOLEAN, False)

    @property
    def inter_broker_listener(self) -> str:
        """The listener the brokers of a cluster reach each other on: ``inter.broker.listener.name``
        (upper case, as Kafka normalises names), else the one named after
        ``security.inter.broker.protocol``."""
        return (self.inter_broker_listener_name or self.security_inter_broker_protocol).upper()

    def _validate(self) -> None:
        parse_super_users(self.super_users)
        if self.metrics_listener:
            parse_listener(self.metrics_listener)
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            raise ConfigError("replica.fetch.wait.max.ms (%d) must not exceed replica.lag.time.max.ms (%d): a "
                              "follower waiting that long at the leader would drop out of the ISR"
                              % (self.replica_fetch_wait_max_ms, self.replica_lag_time_max_ms))


class BrokerConfig:
    """A broker's whole configuration: the node's, the log manager's and the listener's keys.

    Accepts Kafka's dotted keys or snake_case keywords. ``config[key]`` reads a node
    or listener key by its dotted name; ``node``, ``log_manager`` and ``listener`` are
    the typed parts (``listener`` is None when no listener settings are registered,
    i.e. :mod:`pylogq.server` was not imported). Immutable.
    """

    def __init__(self, settings: Mapping[str, Any], listener: Optional[Type[Config]] = None) -> None:
        if listener is None:
            listener = listener_settings()
        node: Dict[str, Any] = {}
        served: Dict[str, Any] = {}
        logs: Dict[str, Any] = {}
        given: Set[str] = set()
        for key, value in settings.items():
            if not isinstance(key, str):
                raise ConfigError("configuration keys must be strings, got %r" % (key,))
            if NodeConfig.accepts(key):
                node[key] = value
                given.add(_dotted(NodeConfig, key))
            elif listener is not None and listener.accepts(key):
                served[key] = value
                given.add(_dotted(listener, key))
            elif LogManagerConfig.accepts(key):
                logs[key] = value
                given.add(_dotted(LogManagerConfig, key))
            else:
                known = list(NodeConfig.known_keys()) + list(LogManagerConfig.known_keys())
                if listener is not None:
                    known += listener.known_keys()
                raise ConfigError("Unknown broker configuration %r%s" % (key, suggest(key, known)))
        self.node: NodeConfig = NodeConfig.build(node)
        self.listener: Optional[Config] = listener.build(served) if listener is not None else None
        self.log_manager = LogManagerConfig.from_dict(logs)
        #: Dotted key -> value of every node and listener setting.
        self.values: Dict[str, Any] = dict(self.node.to_dict())
        if self.listener is not None:
            self.values.update(self.listener.to_dict())
        #: The dotted keys ``settings`` set, in either spelling or as an alias (``log.dir``):
        #: DescribeConfigs' STATIC_BROKER_CONFIG; every other key is at its DEFAULT_CONFIG.
        self.static_keys: FrozenSet[str] = frozenset(given)
        if {"inter.broker.listener.name", "security.inter.broker.protocol"} <= given:
            raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should "
                              "be set.")
        self._listener_type = listener
        self._settings: Dict[str, Any] = dict(settings)

    def dotted_key(self, key: str) -> Optional[str]:
        """The dotted key that ``key`` (either spelling, or an alias) names, or None for a key no part knows."""
        for part in (NodeConfig, self._listener_type, LogManagerConfig):
            if part is not None and part.accepts(key):
                return _dotted(part, key)
        return None

    def with_dynamic(self, values: Mapping[str, Any]) -> "BrokerConfig":
        """This configuration with ``values`` (dotted keys this class knows) in place of the
        settings it was given for them: the effective config of dynamic values. ``static_keys``
        stays this one's (a dynamic value is no static setting). Raises ConfigError as the
        constructor does."""
        replaced = {self.dotted_key(key) for key in values}
        settings = {k: v for k, v in self._settings.items() if self.dotted_key(k) not in replaced}
        settings.update(values)
        config = BrokerConfig(settings, self._listener_type)
        config.static_keys = self.static_keys
        config._settings = self._settings
        return config

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def describe_key(self, key: str) -> Optional[Tuple[str, str]]:
        """(Kafka's type name, documentation) of a broker-level key, or None when unknown."""
        for part in (self.node, self.listener, self.log_manager):
            if part is not None:
                found = type(part).describe_key(key)
                if found is not None:
                    return found
        return None

    def to_strings(self) -> Dict[str, Optional[str]]:
        """Every broker-level key (the log manager's included) in Kafka's string form."""
        out = {key: to_string(value) for key, value in self.values.items()}
        out.update(self.log_manager.to_strings())
        return out

    def default_strings(self) -> Dict[str, Optional[str]]:
        """Every broker-level key's default (Kafka's, not DEVELOPMENT_DEFAULTS) in Kafka's string form."""
        return BrokerConfig({}, self._listener_type).to_strings()


def _dotted(part: Type[Config], key: str) -> str:
    """The dotted key that ``key`` (dotted, snake_case or an alias such as ``log.dir``) sets in ``part``."""
    attribute = part.attribute(key)
    if attribute is None:  # an alias, or a key the part takes by its form (a listener's own setting)
        aliases = part._ALIASES
        alias = aliases.get(key) or aliases.get(key.replace("_", "."))
        if alias is None:
            return key
        attribute = part.attribute(alias)
    return next(dotted for dotted in part.known_keys() if dotted.replace(".", "_") == attribute)
