"""``pylogq.Broker``: a Kafka broker node's data plane in this process.

A broker owns a data directory (Kafka's log dir layout, see docs/storage.md),
the topics in it and their partitions, and the group coordinator whose state
lives in the compacted internal topic ``__consumer_offsets``. Its operations are
the ones the Kafka protocol exposes (produce, fetch, list offsets, topic and
config administration, groups), typed by :mod:`pylogq.cluster.contract`, and
called directly by the in-process clients and by the network server.

Its parts, one concept per module: the settings (:mod:`pylogq.cluster.broker.config`), the
topic-metadata store (:mod:`pylogq.cluster.broker.topic_store`), producer ids
(:mod:`pylogq.cluster.state.producer_ids`), ``__consumer_offsets``
(:mod:`pylogq.cluster.coordinator.group.offsets_topic`), and the delayed operations that
every waiting call uses (:mod:`.delayed`). The identity is Kafka's
``meta.properties``. Thread-safe: producers and consumers call from their own
threads.

The class is made of four parts along Kafka's seams, as KafkaServer is of its managers:
:mod:`.data_path` (produce, fetch, offsets, the replicas' requests, the groups' offsets:
Kafka's ReplicaManager), :mod:`.transactions` (the transaction coordinator's plumbing and
the markers a leader writes), :mod:`.admin` (topics, configs, credentials: its
AdminManager) and :mod:`.lifecycle` (the state they share, cluster membership, identity,
hosting, metrics); this module opens and closes it, and opens its listeners.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from ... import errors
from ...config import parse_properties
from ...errors import ConfigError
from ...metrics import MetricsRegistry, MetricsServer
from ...storage.manager import LogManager
from ...storage.partition_metadata import META_FILE
from ..contract import FetchResults, InterBrokerConnector, Listener, inter_broker_connector, listener_factory
from ..coordinator.group.coordinator import GroupCoordinator
from ..coordinator.group.offsets_topic import OFFSETS_TOPIC, OffsetsTopic
from ..delayed import DelayedOperationPurgatory, Timer
from ..state.partition import Partition
from ..state.producer_ids import ProducerIdManager
from .admin import BrokerAdmin
from .authorizer import AclAuthorizer, open_authorizer
from .config import BrokerConfig, with_development_defaults
from .dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig, read_config_file
from .metrics import broker_readings
from .topic_store import FileTopicStore, TopicMetadata
from .transactions import TRANSACTION_STATE_TOPIC, BrokerTransactions
from .client_quotas import FileClientQuotas
from .user_credentials import FileUserCredentials

if TYPE_CHECKING:  # a single node never loads the cluster's modules
    from ..zk.store import MetadataStore
    from .cluster_node import ClusterNode
    from .in_process import InProcessTransport  # loaded by the first embedded client
    from .log_dir_mover import LogDirMover  # loaded by the first move between log directories

log = logging.getLogger("pylogq.broker")

__all__ = ["Broker", "FetchResults", "MAX_PARTITIONS_PER_REQUEST", "OFFSETS_TOPIC", "META_FILE"]

# Kafka refuses to create more partitions than this in one request (POLICY_VIOLATION):
# a count from a bad or hostile request must not make the broker open millions of logs.
MAX_PARTITIONS_PER_REQUEST = 10000
# How long close() waits for a topic administration in progress.
ADMIN_CLOSE_TIMEOUT_S = 30.0


class Broker(BrokerTransactions, BrokerAdmin):
    """A broker in this process: topics of partitioned logs and the group coordinator.

    Use as a context manager, or call ``close()``: it flushes every log and
    writes the checkpoints, so the next open needs no recovery. Without a
    ``config_file`` it starts from :data:`~pylogq.cluster.broker.config.DEVELOPMENT_DEFAULTS`,
    as ``pylogq-broker`` does without a properties file.
    """

    def __init__(self, data_dir: str, *, development_defaults: Optional[bool] = None,
                 metadata_store: Optional[MetadataStore] = None, inter_broker: Optional[InterBrokerConnector] = None,
                 **config: Any) -> None:
        """``config``: Kafka's broker keys (dotted or snake_case), or ``config_file=`` a
        ``server.properties`` with keywords on top. ``development_defaults`` (default:
        without a ``config_file``) starts from :data:`DEVELOPMENT_DEFAULTS` instead of
        Kafka's code defaults, as ``pylogq-broker`` does without a properties file.

        With ``zookeeper.connect`` (or a ``metadata_store``, :class:`pylogq.Cluster`'s) the
        broker is a member of a replicated cluster (:attr:`cluster`); it joins when
        :meth:`join_cluster` (or :meth:`serve`) gives it its endpoints. ``inter_broker``
        reaches the other brokers (default: over the Kafka protocol)."""
        self.data_dir = os.path.abspath(data_dir)
        if development_defaults is None:
            development_defaults = "config_file" not in config
        if "config_file" in config:
            with open(config.pop("config_file")) as f:
                config = {**parse_properties(f.read()), **config}
        if development_defaults:
            config = with_development_defaults(config)
        if not any(k in config for k in ("log.dirs", "log_dirs", "log.dir", "log_dir")):
            config["log.dirs"] = self.data_dir
        self.config = BrokerConfig(config)  # every setting checked before anything is written
        #: The dynamic configs (AlterConfigs on a BROKER resource) over the static ``config``,
        #: which is then the effective one: read now (a cluster's from the store, read again
        #: when it joins and on every change; a single node's from its data directory).
        self.dynamic_config = DynamicBrokerConfig(self.config)
        self._dynamic_lock = threading.Lock()
        os.makedirs(self.data_dir, exist_ok=True)
        self.broker_id: int = self.config.node.broker_id
        clustered = metadata_store is not None or self.config.node.zookeeper_connect is not None
        # Before anything reads the settings (the log manager, the cleaner, the listener):
        # the keys read only at start take their dynamic values too.
        stored = self._stored_dynamic_configs(metadata_store) if clustered else read_config_file(self.data_dir)
        self.dynamic_config.default = self.dynamic_config.usable(
            stored.get(DEFAULT_ENTITY, {}), False, "the default broker configs")
        self.dynamic_config.per_broker = self.dynamic_config.usable(
            stored.get(str(self.broker_id), {}), True, "broker %d's configs" % self.broker_id)
        try:
            self.config = self.dynamic_config.effective()
        except ConfigError as exc:  # each key passes alone, not all together: start with the static settings
            log.error("ignoring the dynamic broker configs %s and %s: %s", self.dynamic_config.default,
                      self.dynamic_config.per_broker, exc)
            self.dynamic_config.default, self.dynamic_config.per_broker = {}, {}
        stored_cluster_id = self._load_meta(generate=not clustered)
        self.cluster_id = stored_cluster_id or ""
        self.producer_ids = ProducerIdManager(self.data_dir)
        self._lock = threading.RLock()  # the maps below; see "Locks" at the topics' methods
        self._admin_lock = threading.RLock()
        self._pending_configs: Dict[str, TopicMetadata] = {}  # topics being created, for their logs' config
        self._store = FileTopicStore(self.data_dir)
        self._file_users = None if clustered else FileUserCredentials(self.data_dir)  # a cluster's: in the store
        self._file_quotas = None if clustered else FileClientQuotas(self.data_dir)  # likewise
        # A missing topics file is rebuilt from the partition directories (the offsets topic with its own config).
        offsets_config = OffsetsTopic.config(self.config.node.offsets_topic_segment_bytes)
        # A single node's topics; a cluster member's are in the metadata store (this map then
        # holds the topics it hosts replicas of, for their logs' config).
        self._topics: Dict[str, TopicMetadata] = {} if clustered else self._store.load(
            self.config.log_manager.log_dirs, {OFFSETS_TOPIC: {k: str(v) for k, v in offsets_config.items()}})
        self._topic_names: Dict[str, str] = {m.topic_id: t for t, m in self._topics.items()}  # id -> name
        self.default_log_config = self.config.log_manager.default_log_config()
        #: This broker's metrics (:meth:`metrics`; served on ``metrics.listener``).
        self.metrics_registry = MetricsRegistry()
        self._metrics_server: Optional[MetricsServer] = None
        self.logs = LogManager(config=self.config.log_manager, topic_config=self._log_config_for,
                               on_flush=self._log_flushed)
        #: Called (on the log manager's thread) with the reason when every log directory has
        #: gone offline; by default the broker closes. ``pylogq-broker`` exits instead.
        self.on_storage_failure: Callable[[str], None] = self._stop_after_storage_failure
        self.logs.add_dir_failure_listener(self._log_dir_failed)
        #: Moves of replicas between log directories (AlterReplicaLogDirs), made on the first.
        self.log_dir_mover: Optional["LogDirMover"] = None
        self._partitions: Dict[Tuple[str, int], Partition] = {}
        # The high watermarks of replicas stopped without deleting their logs (a controlled
        # shutdown stops its followers): their logs stay, so their checkpoint entries do.
        self._stopped_marks: Dict[Tuple[str, int], int] = {}
        self._servers: List[Listener] = []
        self.closed = False
        # Every call that waits is a delayed operation: one timer thread expires them all.
        self.timer = Timer("pylogq-delayed-timer")
        #: Long-poll fetches, watched under (topic, partition) and checked after appends.
        self.fetch_purgatory = DelayedOperationPurgatory("fetch", self.timer)
        #: This broker's part in a cluster (None for a single node).
        self.cluster: Optional[ClusterNode] = None
        #: Kafka's ACL authorizer (``authorizer.class.name``); None: every request is allowed.
        self.authorizer: Optional[AclAuthorizer] = None
        self._joined = not clustered  # a member answers clients once it has joined
        self._joined_lock = threading.Lock()
        self._joined_callbacks: List[Callable[[], None]] = []
        try:
            if clustered:
                self.cluster = self._cluster_node(metadata_store, inter_broker)
                self.cluster_id = self._join_cluster_id(stored_cluster_id)
                zk = self.cluster.zk
                self.producer_ids = ProducerIdManager(  # blocks unique across the cluster
                    self.data_dir, allocate=lambda size: zk.allocate_producer_id_block(self.broker_id, size))
            node = self.config.node
            self.authorizer = open_authorizer(node.authorizer_class_name, node.super_users,
                                              node.allow_everyone_if_no_acl_found, self.data_dir, self.broker_id,
                                              None if self.cluster is None else self.cluster.store)
            for topic, meta in self._topics.items():
                for p in range(meta.partitions):
                    self._partitions[(topic, p)] = self._open_partition(topic, p, meta.topic_id)
            self.offsets_topic = OffsetsTopic(self._offsets_partition)
            # __consumer_offsets is created on first use (ensure_offsets_topic), as Kafka does.
            offsets_meta = self._topics.get(OFFSETS_TOPIC) if self.cluster is None else None
            self._offsets_ready = offsets_meta is not None
            self.group_coordinator = GroupCoordinator(
                append=self.offsets_topic.append, read_all=self.offsets_topic.read_batches,
                timer=self.timer,
                num_partitions=offsets_meta.partitions if offsets_meta is not None
                else self.config.node.offsets_topic_num_partitions,
                initial_rebalance_delay_ms=self.config.node.group_initial_rebalance_delay_ms,
                group_min_session_timeout_ms=self.config.node.group_min_session_timeout_ms,
                group_max_session_timeout_ms=self.config.node.group_max_session_timeout_ms,
            )
            if self._offsets_ready:
                self.group_coordinator.load()
            elif self.cluster is None:
                self.group_coordinator.serve_partitions([])  # NOT_COORDINATOR until the topic exists
            else:
                # A cluster member coordinates the groups of the offsets partitions it leads.
                self.group_coordinator.serve_partitions([])
                self.group_coordinator.partition_in_doubt = self._offsets_leadership_in_doubt
                self._group_loads: "queue.Queue[Optional[Tuple[str, int]]]" = queue.Queue()
                self._group_loader = threading.Thread(target=self._load_groups, daemon=True,
                                                      name="pylogq-group-loader-%d" % self.broker_id)
                self._group_loader.start()
            # __transaction_state likewise, on the first lookup of a transaction coordinator.
            self._open_transaction_coordinator(self._topics.get(TRANSACTION_STATE_TOPIC) if self.cluster is None
                                               else None)
            interval = self.config.node.replica_high_watermark_checkpoint_interval_ms / 1000.0
            self.logs.scheduler.schedule(self.checkpoint_high_watermarks, delay=interval, period=interval,
                                         name="high-watermark-checkpoint")
            self.metrics_registry.add_collector(lambda: broker_readings(self))
            if self.config.node.metrics_listener:
                self._metrics_server = self.metrics_registry.serve(self.config.node.metrics_listener)
                log.info("metrics served on %s", self._metrics_server.url)
        except BaseException:
            self._close_transactions()
            if self.authorizer is not None:
                self.authorizer.close()
            if self.cluster is not None:
                self.cluster.close()
            self.timer.close()
            self.logs.close()
            raise

    def _cluster_node(self, store: Optional[MetadataStore], connector: Optional[InterBrokerConnector]) -> ClusterNode:
        from .cluster_node import ClusterNode

        node = self.config.node
        own_store = store is None  # a broker process's own session, whose pauses are its own
        if store is None:
            store = self._open_zookeeper()
        if connector is None:
            try:
                connector = inter_broker_connector(self.config.listener, node.inter_broker_listener)
            except BaseException:
                store.close()
                raise
            if connector is None:
                store.close()
                raise errors.PylogqError("a broker of a cluster needs pylogq.server (import it) to reach the others")

        def schedule(fn: Callable[[], None], delay: float, period: Optional[float], name: str) -> None:
            self.logs.scheduler.schedule(fn, delay=delay, period=period, name=name)

        return ClusterNode(self.broker_id, node, store, connector, self, self.timer, schedule,
                           self._unclean_leader_election, self.fetch_purgatory,
                           on_leadership=self._leadership_changed, on_topic_config=self._topic_config_changed,
                           watch_pauses=own_store, on_broker_config=self._broker_config_changed)

    def _check_partitions_per_request(self, count: int) -> None:
        """:func:`_check_partitions_per_request` for the administration (the limit is read
        from this module at each call)."""
        _check_partitions_per_request(count)

    def serve(self, host: str = "127.0.0.1", port: int = 0, **options: Any) -> Tuple[str, int]:
        """Open a Kafka protocol listener in a background thread; -> its (host, port).

        ``port=0`` takes a free port. ``options`` are :class:`pylogq.server.KafkaServer`'s
        (``sasl_users={"alice": "secret"}`` requires SASL/PLAIN on this listener).
        ``listeners="SSL://127.0.0.1:0"`` (Kafka's listener list) opens those listeners
        instead of a PLAINTEXT one on ``host:port``, with the broker's own settings
        (``listener.security.protocol.map``, ``ssl.*``, ``sasl.*``); the first one's address
        is returned. The listeners close with the broker. Call it again for more listeners.
        """
        factory = listener_factory()  # pylogq.server registers it: the broker does not import the server
        if factory is None:
            raise errors.PylogqError("no Kafka listener is available: import pylogq.server (pylogq.Broker does)")
        self._check_open()
        server = factory(self, host, port, options)
        self._servers.append(server)
        return server.addresses[0]

    def transport(self) -> "InProcessTransport":
        """The contract's calls on this broker, for clients given ``broker=``."""
        from .in_process import InProcessTransport

        return InProcessTransport(self)

    def close(self) -> None:
        """Stop any listeners (answering the requests in flight), then flush and checkpoint."""
        if self.cluster is not None:
            self.cluster.begin_close()  # requests in flight stop waiting for the cluster's metadata
        for server in self._servers:
            server.stop_thread()
        self._servers.clear()
        with self._lock:
            if self.closed:
                return
            self.closed = True
        # A topic administration in progress finishes first (new ones see the broker closed).
        if not self._admin_lock.acquire(timeout=ADMIN_CLOSE_TIMEOUT_S):
            log.error("a topic administration did not finish within %.0f s; closing without it",
                      ADMIN_CLOSE_TIMEOUT_S)
        else:
            self._admin_lock.release()
        if self.authorizer is not None:
            self.authorizer.close()
        if self.cluster is not None:
            self.cluster.close()  # the controller resigns, fetchers stop, the registration goes
            self._group_loads.put(None)
            self._group_loader.join(30)
        self.fetch_purgatory.close()  # parked fetches answer with what is there
        if self._metrics_server is not None:
            self._metrics_server.close()
        with self._lock:
            marks = self._high_watermarks()
        coordinator = getattr(self, "group_coordinator", None)
        if coordinator is not None:
            coordinator.close()
        self._close_transactions()
        self.timer.close()
        if self.log_dir_mover is not None:
            self.log_dir_mover.close()
        for partition in list(self._partitions.values()):
            partition.close()
        try:
            self.logs.checkpoint_high_watermarks(marks)
        except OSError as exc:  # a full disk: the logs still close; readers of the files see older marks
            log.error("could not write the high watermark checkpoint at close: %s", exc)
        self.logs.close()

    def _stop_after_storage_failure(self, why: str) -> None:
        """The default ``on_storage_failure``: close the broker, off the failing thread (a
        member of a cluster goes from it, and its leaderships move)."""
        threading.Thread(target=self.close, name="pylogq-storage-failure-%d" % self.broker_id, daemon=True).start()

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Broker(%s, broker_id=%d, topics=%d)" % (self.data_dir, self.broker_id, len(self._topics))


def _check_partitions_per_request(count: int) -> None:
    if count > MAX_PARTITIONS_PER_REQUEST:
        raise errors.PolicyViolationError("Excessively large number of partitions per request: %d (at most %d)"
                                          % (count, MAX_PARTITIONS_PER_REQUEST))
