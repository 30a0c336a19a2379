"""``pylogq.Broker``: a Kafka broker node's data plane in this process.

A broker owns a data directory (Kafka's log dir layout, see docs/storage.md),
the topics in it and their partitions, and the group coordinator whose state
lives in the compacted internal topic ``__consumer_offsets``. Its operations are
the ones the Kafka protocol exposes (produce, fetch, list offsets, topic and
config administration, groups), typed by :mod:`pylogq.cluster.contract`, and
called directly by the in-process clients and by the network server.

Its parts, one concept per module: the settings (:mod:`pylogq.cluster.broker.config`), the
topic-metadata store (:mod:`pylogq.cluster.broker.topic_store`), producer ids (:mod:`pylogq.cluster.state.producer_ids`),
``__consumer_offsets`` (:mod:`pylogq.cluster.coordinator.group.offsets_topic`), and the delayed operations that
every waiting call uses (:mod:`.delayed`). The identity is Kafka's
``meta.properties``. Thread-safe: producers and consumers call from their own
threads.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ... import errors
from ...config import parse_properties
from ...errors import ConfigError
from ...metrics import MetricsRegistry, MetricsServer
from ...storage.checkpoint import write_atomically
from ...storage.config import LogConfig
from ...storage.manager import LogManager
from ...storage.partition_metadata import (
    META_FILE,
    PARTITION_METADATA_FILE,
    ZERO_TOPIC_ID,
    meta_broker_id,
    new_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)
from ..contract import (
    BrokerConfigEntry,
    BrokerEndpoint,
    BrokerNode,
    BrokerRegistration,
    ClusterDescription,
    EpochEndOffset,
    FetchRequest,
    FetchResult,
    FetchResults,
    InterBrokerConnector,
    LeaderAndIsrRequest,
    Listener,
    LogDirDescription,
    LogDirsQuery,
    OffsetDeleteResult,
    ProducerDescription,
    ProduceResult,
    ReplicaFetchPartition,
    ReplicaInfo,
    StopReplicaRequest,
    TopicDescription,
    TopicPartitionInfo,
    UpdateMetadataRequest,
    inter_broker_connector,
    listener_factory,
)
from ..coordinator.group.coordinator import GroupCoordinator
from ..coordinator.group.metadata_manager import storage_error_code
from ..coordinator.group.offsets_topic import OFFSETS_TOPIC, OffsetsTopic
from ..delayed import DelayedCall, DelayedOperationPurgatory, Tapped, Timer
from ..names import INTERNAL_TOPICS, collides, validate_topic_name
from ..replica_assignment import check_added_assignment, check_new_assignment
from ..state.partition import Partition
from ..state.producer_ids import ProducerIdManager
from .config import BrokerConfig, is_dynamic_in_kafka, with_development_defaults
from .dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig, read_config_file, write_config_file
from .in_process import InProcessTransport
from .metrics import broker_readings
from .topic_store import FileTopicStore, TopicMetadata
from .user_credentials import FileUserCredentials, UserCredentials

if TYPE_CHECKING:  # a single node never loads the cluster's modules
    from ..zk.store import MetadataStore
    from .cluster_node import ClusterNode

log = logging.getLogger("pylogq.broker")

__all__ = ["Broker", "FetchResults", "MAX_PARTITIONS_PER_REQUEST", "OFFSETS_TOPIC", "META_FILE"]

# Kafka refuses to create more partitions than this in one request (POLICY_VIOLATION):
# a count from a bad or hostile request must not make the broker open millions of logs.
MAX_PARTITIONS_PER_REQUEST = 10000
# How long joining a cluster waits for the controller's first UpdateMetadata.
JOIN_METADATA_TIMEOUT_S = 30.0
# How long close() waits for a topic administration in progress.
ADMIN_CLOSE_TIMEOUT_S = 30.0


class Broker:
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
            for topic, meta in self._topics.items():
                for p in range(meta.partitions):
                    self._partitions[(topic, p)] = self._open_partition(topic, p, meta.topic_id)
            self.offsets_topic = OffsetsTopic(self._offsets_partition)
            # __consumer_offsets is created on first use (ensure_offsets_topic), as Kafka does.
            offsets_meta = self._topics.get(OFFSETS_TOPIC) if self.cluster is None else None
            self._offsets_ready = offsets_meta is not None
            self.group_coordinator = GroupCoordinator(
                append=self.offsets_topic.append, read_all=self.offsets_topic.read_all,
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
                self._group_loads: "queue.Queue[Optional[int]]" = queue.Queue()
                self._group_loader = threading.Thread(target=self._load_groups, daemon=True,
                                                      name="pylogq-group-loader-%d" % self.broker_id)
                self._group_loader.start()
            interval = self.config.node.replica_high_watermark_checkpoint_interval_ms / 1000.0
            self.logs.scheduler.schedule(self.checkpoint_high_watermarks, delay=interval, period=interval,
                                         name="high-watermark-checkpoint")
            self.metrics_registry.add_collector(lambda: broker_readings(self))
            if self.config.node.metrics_listener:
                self._metrics_server = self.metrics_registry.serve(self.config.node.metrics_listener)
                log.info("metrics served on %s", self._metrics_server.url)
        except BaseException:
            if self.cluster is not None:
                self.cluster.close()
            self.timer.close()
            self.logs.close()
            raise

    # -- cluster membership -----------------------------------------------------------

    def _stored_dynamic_configs(self, store: Optional[MetadataStore]) -> Dict[str, Dict[str, str]]:
        """A cluster member's dynamic configs as its start finds them in the store (read again
        when it joins, and on every change): the store given, or a short session of its own."""
        from ..zk.client import KafkaZkClient

        own = store is None
        if store is None:
            store = self._open_zookeeper()
        try:
            zk = KafkaZkClient(store)
            return {entity: zk.get_broker_config(entity) for entity in (DEFAULT_ENTITY, str(self.broker_id))}
        finally:
            if own:
                store.close()

    def _open_zookeeper(self) -> MetadataStore:
        from ..zk.kazoo_store import ZooKeeperStore  # kazoo is loaded only by brokers of a cluster

        node = self.config.node
        assert node.zookeeper_connect is not None
        return ZooKeeperStore(node.zookeeper_connect, session_timeout_ms=node.zookeeper_session_timeout_ms,
                              connection_timeout_ms=node.zookeeper_connection_timeout_ms)

    def _cluster_node(self, store: Optional[MetadataStore], connector: Optional[InterBrokerConnector]) -> ClusterNode:
        from .cluster_node import ClusterNode

        node = self.config.node
        own_store = store is None  # a broker process's own session, whose pauses are its own
        if store is None:
            store = self._open_zookeeper()
        if connector is None:
            connector = inter_broker_connector()
            if connector is None:
                store.close()
                raise errors.PylogqError("a broker of a cluster needs pylogq.server (import it) to reach the others")

        def schedule(fn: Callable[[], None], delay: float, period: Optional[float], name: str) -> None:
            self.logs.scheduler.schedule(fn, delay=delay, period=period, name=name)

        return ClusterNode(self.broker_id, node, store, connector, self, self.timer, schedule,
                           self._unclean_leader_election, self.fetch_purgatory,
                           on_leadership=self._leadership_changed, on_topic_config=self._topic_config_changed,
                           watch_pauses=own_store, on_broker_config=self._broker_config_changed)

    def _leadership_changed(self, led: List[Tuple[str, int]], followed: List[Tuple[str, int]]) -> None:
        """The group coordinator follows the leadership of ``__consumer_offsets``' partitions:
        it loads a partition's groups when this broker comes to lead it (in a thread of its
        own: the read may be long) and drops them when the leadership goes."""
        for topic, p in followed:
            if topic == OFFSETS_TOPIC:
                self.group_coordinator.unload_partition(p)
        for topic, p in led:
            if topic == OFFSETS_TOPIC:
                self.group_coordinator.begin_loading(p)
                self._group_loads.put(p)

    def _offsets_leadership_in_doubt(self, p: int) -> bool:
        """Whether this broker's leadership of ``__consumer_offsets``-``p`` is in doubt."""
        partition = self._partitions.get((OFFSETS_TOPIC, p))
        return (partition is not None and self.cluster is not None
                and self.cluster.replicas.leadership_doubt(partition) is not None)

    def _load_groups(self) -> None:
        while True:
            p = self._group_loads.get()
            if p is None:
                return
            partition = self._partitions.get((OFFSETS_TOPIC, p))
            if partition is None or not partition.is_leader or self.closed:
                continue
            try:
                self.group_coordinator.load_partition(p)
            except Exception:  # noqa: BLE001 - the partition's groups stay unavailable until the next leadership
                log.exception("could not load the groups of %s-%d", OFFSETS_TOPIC, p)
                self.group_coordinator.unload_partition(p)

    def coordinator_for(self, group_id: str) -> Tuple[int, int]:
        """FindCoordinator for a group: (error code, the coordinator's broker id). In a cluster,
        the leader of the group's ``__consumer_offsets`` partition; the topic is created on
        first use, as Kafka does (:meth:`ensure_offsets_topic`, which the caller runs first)."""
        if self.cluster is None:
            return 0, self.broker_id
        p = self.group_coordinator.partition_for(group_id)
        leader = self.cluster.metadata.leader_of(OFFSETS_TOPIC, p)
        if leader < 0 or (leader == self.broker_id and self._offsets_leadership_in_doubt(p)):
            return errors.CoordinatorNotAvailableError.code, -1
        return 0, leader

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

    def group_writes_replicated_async(self, group_id: str, for_commit: bool,
                                      deliver: Callable[[int], None] = lambda code: None) -> "DelayedCall[int]":
        """A barrier after the group coordinator wrote for ``group_id``: completes when every
        in-sync replica of its ``__consumer_offsets`` partition has the writes, with the code
        the coordinator answers (0; COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, ...). At once
        on a single node."""
        if self.cluster is None:
            return DelayedCall.immediate(0, deliver)
        partition = self._partitions.get((OFFSETS_TOPIC, self.group_coordinator.partition_for(group_id)))

        def mapped(code: int) -> None:
            deliver(_coordinator_code(code, for_commit))

        if partition is None or not partition.is_leader:
            return DelayedCall.immediate(errors.NotLeaderOrFollowerError.code, mapped)
        return self.cluster.replicas.wait_replicated(partition, self.config.node.offsets_commit_timeout_ms, mapped)

    def when_joined(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once this broker has joined its cluster (at once if it has, or
        is a single node). A listener answers clients only from then on: a broker restarted
        at once waits up to a session timeout for its previous registration to expire, its
        listener bound, and what it would answer meanwhile (no brokers, no topics) is false.
        librdkafka drops every broker such a Metadata answer leaves out, and with none left
        stops until it bootstraps again. Kafka serves no request before it has registered."""
        with self._joined_lock:
            if not self._joined:
                self._joined_callbacks.append(callback)
                return
        callback()

    def _mark_joined(self) -> None:
        with self._joined_lock:
            self._joined = True
            callbacks, self._joined_callbacks = self._joined_callbacks, []
        for callback in callbacks:
            callback()

    def join_cluster(self, endpoints: Sequence[BrokerEndpoint]) -> None:
        """Register in the cluster with ``endpoints`` (once the listeners are bound), or
        advertise new ones. Nothing for a single node."""
        if self.cluster is None:
            return
        if self.cluster.registration is None:
            self.cluster_id = self.cluster.start(self.cluster_id, endpoints)
            # Clients are answered from the controller's picture of the cluster: wait for the
            # first one that includes this broker (else a client connecting now would learn
            # of no broker and no controller).
            cluster = self.cluster
            if not cluster.wait_for_metadata(lambda: self.broker_id in cluster.metadata.live_brokers(),
                                             JOIN_METADATA_TIMEOUT_S):
                log.warning("broker %d: no metadata from a controller within %.0f s of registering; serving "
                            "anyway", self.broker_id, JOIN_METADATA_TIMEOUT_S)
            self._mark_joined()
        else:
            self.cluster.update_endpoints(endpoints)

    def _write_meta_cluster_id(self, cluster_id: str) -> None:
        write_atomically(os.path.join(self.data_dir, META_FILE),
                         ("version=0\nbroker.id=%d\ncluster.id=%s\n" % (self.broker_id, cluster_id)).encode())

    def _unclean_leader_election(self, topic: str) -> bool:
        assert self.cluster is not None
        overrides = self.cluster.topic_config(topic)
        return bool(self.default_log_config.merged(overrides).unclean_leader_election_enable)

    # The ReplicaHost calls: the replica manager asks the broker for partitions and their logs.

    def hosted(self, tp: Tuple[str, int]) -> Optional[Partition]:
        return self._partitions.get(tp)

    def hosted_partitions(self) -> List[Partition]:
        with self._lock:
            return list(self._partitions.values())

    def host_partition(self, topic: str, index: int, topic_id: Optional[str]) -> Partition:
        """Open a replica the controller assigned to this broker (its log created if new)."""
        assert self.cluster is not None
        with self._lock:
            found = self._partitions.get((topic, index))
            if found is not None:
                return found
            meta = self._topics.get(topic)
        if meta is None or (topic_id and meta.topic_id != topic_id):
            config = self.cluster.topic_config(topic)
            meta = TopicMetadata(index + 1, config, topic_id or ZERO_TOPIC_ID)
            with self._lock:
                self._topics[topic] = meta
                if topic_id:
                    self._topic_names[topic_id] = topic
        partition = self._open_partition(topic, index, meta.topic_id)
        with self._lock:
            self._partitions[(topic, index)] = partition
            self._stopped_marks.pop((topic, index), None)
        return partition

    def unhost_partition(self, topic: str, index: int, delete: bool) -> None:
        """Stop a replica (and delete its log)."""
        with self._lock:
            partition = self._partitions.pop((topic, index), None)
            if delete:
                self._stopped_marks.pop((topic, index), None)
            elif partition is not None:
                self._stopped_marks[(topic, index)] = partition.high_watermark
            if not any(t == topic for t, _ in self._partitions):
                meta = self._topics.pop(topic, None)
                if meta is not None:
                    self._topic_names.pop(meta.topic_id, None)
                    self.metrics_registry.forget_topic(topic)
        if partition is not None:
            partition.close()
        if delete:
            self.logs.delete_logs(topic, [index])
        self.fetch_purgatory.check_and_complete((topic, index))

    def _topic_config_changed(self, topic: str, config: Dict[str, str]) -> None:
        """A topic's config changed in the cluster: its logs here take it."""
        with self._lock:
            meta = self._topics.get(topic)
            if meta is None:
                return
            self._topics[topic] = meta._replace(config=dict(config))
            partitions = [p for (t, _), p in self._partitions.items() if t == topic]
        try:
            log_config = self.default_log_config.merged(config)
        except ConfigError as exc:
            log.error("topic %s: the cluster's config %s is invalid here: %s", topic, config, exc)
            return
        for partition in partitions:
            partition.log.config = log_config

    # The controller's and followers' requests (the server and the in-process cluster call these).

    def _require_cluster(self) -> ClusterNode:
        if self.cluster is None:
            raise errors.PylogqError("broker %d is a single node: it takes no inter-broker requests" % self.broker_id)
        return self.cluster

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[Tuple[str, int], int]]:
        return self._require_cluster().leader_and_isr(request)

    def update_metadata(self, request: UpdateMetadataRequest) -> int:
        return self._require_cluster().update_metadata(request)

    def stop_replica(self, request: StopReplicaRequest) -> Tuple[int, Dict[Tuple[str, int], int]]:
        return self._require_cluster().stop_replica(request)

    def controlled_shutdown_of(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[Tuple[str, int]]]:
        """Another broker's ControlledShutdown, answered by this broker's controller when active."""
        return self._require_cluster().controlled_shutdown(broker_id, broker_epoch)

    def replica_fetch_async(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                            max_wait_ms: int, min_bytes: int, max_bytes: int,
                            deliver: Callable[[FetchResults], None] = lambda results: None
                            ) -> "DelayedCall[FetchResults]":
        """A follower's Fetch (a delayed operation woken by appends)."""
        return self._require_cluster().replicas.fetch_for_replica(replica_id, broker_epoch, partitions, max_wait_ms,
                                                                  min_bytes, max_bytes,
                                                                  Tapped(deliver, self._count_replicated))

    def offsets_for_leader_epoch(self, partitions: Mapping[Tuple[str, int], Tuple[int, int]]
                                 ) -> Dict[Tuple[str, int], EpochEndOffset]:
        """OffsetForLeaderEpoch: for (topic, partition) -> (current leader epoch, epoch), where
        ``epoch`` ends in this leader's log (a follower truncating, a consumer checking its
        position after a leader change). Errors per partition."""
        out = {}
        for tp, (current, epoch) in partitions.items():
            try:
                part = self.leader_partition(*tp, in_doubt=True)
                if current >= 0 and current != part.leader_epoch:
                    error = errors.FencedLeaderEpochError if current < part.leader_epoch else \
                        errors.UnknownLeaderEpochError
                    raise error("leader epoch %d of %s-%d is not the leader's %d"
                                % (current, tp[0], tp[1], part.leader_epoch))
                found_epoch, end = part.end_offset_for_epoch(epoch)
                out[tp] = EpochEndOffset(0, found_epoch, end)
            except errors.BrokerError as exc:
                out[tp] = EpochEndOffset(exc.code, -1, -1)
        return out

    def leader_epoch_of(self, topic: str, partition: int) -> int:
        """The leader epoch of a partition this broker leads (NotLeaderOrFollowerError if not)."""
        return self.leader_partition(topic, partition).leader_epoch

    @property
    def clustered(self) -> bool:
        """Whether this broker is a member of a replicated cluster."""
        return self.cluster is not None

    def cluster_view(self) -> Optional[Tuple[int, List[BrokerRegistration]]]:
        """(the controller's id, the live brokers) of this broker's cluster; None for a single node."""
        if self.cluster is None:
            return None
        snapshot = self.cluster.metadata.snapshot
        return snapshot.controller_id, [snapshot.brokers[b] for b in sorted(snapshot.brokers)]

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

    def controlled_shutdown(self) -> bool:
        """Move this broker's leaderships to other replicas before it stops (Kafka's controlled
        shutdown, ``controlled.shutdown.*``); -> whether every one moved. Nothing for a
        single node."""
        if self.cluster is None or self.cluster.registration is None or not self.config.node.controlled_shutdown_enable:
            return True
        node = self.config.node
        return self.cluster.controlled_shutdown_request(node.controlled_shutdown_max_retries,
                                                        node.controlled_shutdown_retry_backoff_ms / 1000.0)

    # -- identity and metadata files ----------------------------------------------

    def _join_cluster_id(self, stored: Optional[str]) -> str:
        """A cluster member's id is the cluster's, from the metadata store (the first broker
        writes its own, or a new one), before the broker serves anyone: a broker whose disk
        was replaced takes it, as Kafka's does. One whose ``meta.properties`` names another
        cluster is refused (Kafka's InconsistentClusterIdException)."""
        assert self.cluster is not None
        cluster_id = self.cluster.zk.get_or_create_cluster_id(stored or uuid.uuid4().hex[:22])
        if stored and stored != cluster_id:
            raise ConfigError(
                "the cluster id %s in the metadata store does not match %s in %s: this broker is joining another "
                "cluster than its data belongs to (is zookeeper.connect right?)"
                % (cluster_id, stored, os.path.join(self.data_dir, META_FILE)))
        if stored != cluster_id:
            self._write_meta_cluster_id(cluster_id)
        return cluster_id

    def _load_meta(self, generate: bool = True) -> Optional[str]:
        """The cluster id from ``meta.properties`` (Kafka's v0 layout: version, broker.id,
        cluster.id), written on the first start: a new id when ``generate``, else None (a
        cluster member takes the cluster's). A file that does not parse stops the broker
        with CorruptMetadataError; one of another broker.id with ConfigError."""
        path = os.path.join(self.data_dir, META_FILE)

        def corrupt(problem: str) -> errors.CorruptMetadataError:
            return errors.CorruptMetadataError(
                path, problem, "restore it from a backup, or delete it to have the broker write a new one "
                "(with a new cluster.id, which clients that remember the old one notice)")

        props: Dict[str, str] = {}
        if os.path.exists(path):
            try:
                with open(path, "rb") as f:
                    props = parse_properties(f.read().decode("utf-8"))
            except (OSError, UnicodeDecodeError) as exc:
                raise corrupt((exc.strerror or str(exc)) if isinstance(exc, OSError) else "not UTF-8 text") from None
            if props.get("version", "").strip() not in ("0", "1"):
                raise corrupt("version %r is not 0 or 1" % props.get("version"))
            key, owner = meta_broker_id(props)
            if owner is None:
                raise corrupt("%s %r is not an integer" % (key, props.get(key)))
            if owner != self.broker_id:
                raise ConfigError("data dir %s belongs to broker.id %d, not %d" % (self.data_dir, owner,
                                                                                  self.broker_id))
        cluster_id = props.get("cluster.id", "").strip()
        if not cluster_id and generate:  # a new data dir (or a v0 file of a broker that predates cluster ids)
            cluster_id = uuid.uuid4().hex[:22]
            self._write_meta_cluster_id(cluster_id)
        return cluster_id or None

    def _log_config_for(self, topic: str) -> Optional[LogConfig]:
        meta = self._pending_configs.get(topic) or self._topics.get(topic)
        if meta is None:
            return None
        return self.default_log_config.merged(meta.config) if meta.config else None

    def _open_partition(self, topic: str, index: int, topic_id: str) -> Partition:
        """Open (or create) a partition's log and its Partition; not yet published in the maps.

        The directory's ``partition.metadata`` is written when missing; one holding another
        topic id refuses the partition (InconsistentTopicIdError naming the file), as Kafka
        takes such a log directory offline: its data may be another topic's.
        """
        log_ = self.logs.get_or_create_log(topic, index, self._log_config_for(topic))
        found = read_partition_metadata(log_.directory)
        if found is None:
            write_partition_metadata(log_.directory, topic_id)
        elif found != topic_id:
            raise errors.InconsistentTopicIdError(
                "%s holds topic id %s but topic %s has id %s: the directory may hold another topic's data; "
                "move it away, or delete the file if the data is this topic's"
                % (os.path.join(log_.directory, PARTITION_METADATA_FILE), found, topic, topic_id))
        key = (topic, index)
        if self.cluster is None:
            partition = Partition(topic, index, log_, broker_id=self.broker_id)
        else:
            # A replica starts as a follower of no one: its role comes from the controller,
            # its high watermark from the last checkpoint.
            hw = self.logs.high_watermark_checkpoint().get(key, 0)
            partition = Partition(topic, index, log_, broker_id=self.broker_id, high_watermark=hw,
                                  single_replica=False)
            partition.make_unassigned()
            self.cluster.replicas.attach(partition)
        partition.on_high_watermark_advanced = lambda: self._data_committed(key)
        return partition

    def _open_partitions(self, topic: str, indexes: Iterable[int], topic_id: str) -> Dict[Tuple[str, int], Partition]:
        """Open several partitions, all or none: a failure removes the logs this call created."""
        opened: Dict[Tuple[str, int], Partition] = {}
        created: List[int] = []
        try:
            for p in indexes:
                if self.logs.get_log(topic, p) is None:
                    created.append(p)  # before opening: a log made by a failing open goes too
                opened[(topic, p)] = self._open_partition(topic, p, topic_id)
        except BaseException as exc:
            for partition in opened.values():
                partition.close()
            for p in created:
                try:
                    self.logs.delete_log(topic, p)
                except Exception:  # noqa: BLE001 - the first failure is the one to report
                    log.exception("could not remove the log of %s-%d after a failed creation", topic, p)
            if isinstance(exc, OSError):  # out of file descriptors or disk: the client may retry
                log.error("could not open the partitions of %s (%s); none is kept", topic, exc)
                raise errors.KafkaStorageError("could not create the partitions of %r: %s" % (topic, exc)) from exc
            raise
        return opened

    def _store_or_discard(self, name: str, meta: TopicMetadata, opened: Dict[Tuple[str, int], Partition]) -> None:
        """Store a topic's metadata; when that fails, remove the partitions opened for it."""
        try:
            self._store.put(name, meta)
        except BaseException:
            for tp, partition in opened.items():
                partition.close()
                self.logs.delete_log(*tp)
            raise

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
        _check_partitions_per_request(count)
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
            _check_partitions_per_request(total - meta.partitions)
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
            if _sensitive(name):
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
                     {k: ("[hidden]" if _sensitive(k) else v) for k, v in sorted(props.items())})
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

    def partition(self, topic: str, index: int, create: bool = False) -> Partition:
        """The partition ``topic``-``index``; with ``create``, auto-create the topic
        (``auto.create.topics.enable``) when it does not exist."""
        with self._lock:
            self._check_open()
            found = self._partitions.get((topic, index))
            if found is not None:
                return found
            exists = topic in self._topics
        if create and not exists:
            try:
                self.auto_create_topic(topic)
            except errors.UnknownTopicOrPartitionError:
                pass  # auto.create.topics.enable is false
            with self._lock:
                found = self._partitions.get((topic, index))
                if found is not None:
                    return found
        if self.cluster is not None and self.cluster.metadata.partition(topic, index) is not None:
            raise errors.NotLeaderOrFollowerError("broker %d has no replica of %s-%d (leader: %d)" % (
                self.broker_id, topic, index, self.cluster.metadata.leader_of(topic, index)))
        raise errors.UnknownTopicOrPartitionError("%s-%d does not exist" % (topic, index))

    def leader_partition(self, topic: str, index: int, in_doubt: bool = False) -> Partition:
        """The partition, which this broker must lead (else NotLeaderOrFollowerError): for a
        client, also with its leadership not in doubt (:mod:`~pylogq.cluster.zk.session_guard`:
        a broker back from a pause or a partition past its session may have been replaced,
        and its log end is no longer the partition's). ``in_doubt``: a leadership in doubt
        will do (a follower asking where an epoch ends in this log)."""
        part = self.partition(topic, index)
        if not part.is_leader:
            raise errors.NotLeaderOrFollowerError("broker %d does not lead %s-%d (leader: %d)"
                                                  % (self.broker_id, topic, index, part.leader_id))
        if not in_doubt and self.cluster is not None:
            doubt = self.cluster.replicas.leadership_doubt(part)
            if doubt is not None:
                raise errors.NotLeaderOrFollowerError("broker %d may no longer lead %s-%d: %s"
                                                      % (self.broker_id, topic, index, doubt))
        return part

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


    def produce(self, topic: str, partition: int, records: Union[bytes, bytearray, memoryview], acks: int = 1,
                auto_create: bool = True, timeout_ms: int = 30000) -> ProduceResult:
        """Append one partition's record batches (Kafka's Produce). Errors raise.

        ``auto_create`` creates a missing topic (``auto.create.topics.enable``) as the
        in-process clients expect; the network server passes False, as Kafka's Produce
        never creates a topic (a client's Metadata request does).
        """
        if acks not in (0, 1, -1):
            raise errors.InvalidRequiredAcksError("acks must be 0, 1 or -1 (all), got %r" % (acks,))
        if self.cluster is not None:
            op = self.produce_async(topic, partition, records, acks, timeout_ms, auto_create)
            op.wait()
            result = op.answer()
            if result.error_code:
                error = errors.error_for_code(result.error_code)
                raise (error or errors.BrokerError)("produce to %s-%d failed after its append" % (topic, partition))
            return result
        return self._append(topic, partition, records, acks, auto_create)

    def produce_async(self, topic: str, partition: int, records: Union[bytes, bytearray, memoryview], acks: int,
                      timeout_ms: int = 30000, auto_create: bool = False,
                      deliver: Callable[[ProduceResult], None] = lambda result: None) -> "DelayedCall[ProduceResult]":
        """:meth:`produce` as a delayed operation: an acks=-1 produce of a cluster completes when
        every in-sync replica has the records (or ``timeout_ms`` passes: REQUEST_TIMED_OUT).
        Errors of the append itself raise."""
        if self.cluster is None:
            return DelayedCall.immediate(self._append(topic, partition, records, acks, auto_create), deliver)
        size = len(records)
        try:
            target = self.partition(topic, partition, create=auto_create)
            return self.cluster.replicas.append_records(target, bytes(records), acks, timeout_ms, deliver=deliver,
                                                        appended=lambda r: self._count_appended(topic, size, r))
        except errors.BrokerError:
            self._count_refused(topic, partition, size)
            raise

    def _append(self, topic: str, partition: int, records: Union[bytes, bytearray, memoryview], acks: int,
                auto_create: bool) -> ProduceResult:
        """A single node's append (its high watermark hook wakes parked fetches), counted."""
        try:
            result = self.partition(topic, partition, create=auto_create).append(records, required_acks=acks)
        except errors.BrokerError:
            self._count_refused(topic, partition, len(records))
            raise
        self._count_appended(topic, len(records), result)
        return result

    def _count_refused(self, topic: str, partition: int, size: int) -> None:
        items = (("kafka_server_brokertopicmetrics_totalproducerequests", 1),
                 ("kafka_server_brokertopicmetrics_failedproducerequests", 1),
                 ("kafka_server_brokertopicmetrics_bytesrejected", size))
        self.metrics_registry.count_topic(topic, items, own=self.hosted((topic, partition)) is not None)

    def _count_appended(self, topic: str, size: int, result: ProduceResult) -> None:
        self.metrics_registry.count_topic(topic, (
            ("kafka_server_brokertopicmetrics_totalproducerequests", 1),
            ("kafka_server_brokertopicmetrics_failedproducerequests", 0),  # the series exists from the start
            ("kafka_server_brokertopicmetrics_messagesin", 0 if result.duplicate else result.record_count),
            ("kafka_server_brokertopicmetrics_bytesin", size)))

    def _count_fetched(self, results: FetchResults) -> None:
        """The topic metrics of a consumer fetch's answer (bytes out, failed partitions)."""
        registry = self.metrics_registry
        for (topic, index), result in results.items():
            records = result.records
            items = (("kafka_server_brokertopicmetrics_totalfetchrequests", 1),
                     ("kafka_server_brokertopicmetrics_failedfetchrequests", 1 if result.error_code else 0),
                     ("kafka_server_brokertopicmetrics_bytesout", len(records) if records is not None else 0))
            registry.count_topic(topic, items, own=records is not None or (topic, index) in self._partitions)

    def _count_replicated(self, results: FetchResults) -> None:
        """The bytes a follower's fetch answer carries (replication bytes out)."""
        self.metrics_registry.inc("kafka_server_brokertopicmetrics_replicationbytesout", (), sum(
            len(r.records) for r in results.values() if r.records is not None))

    def _log_flushed(self, ms: float) -> None:
        self.metrics_registry.observe("kafka_log_logflushstats_logflushrateandtimems", (), ms)

    def metrics(self) -> Dict[str, float]:
        """Every metric's samples, as ``/metrics`` shows them: ``'name{label="v"}'`` -> value
        (``docs/operations.md`` lists them; names follow Kafka's, as the Prometheus JMX
        exporter renames them)."""
        return self.metrics_registry.samples()

    @property
    def metrics_url(self) -> Optional[str]:
        """Where ``/metrics`` is served (``metrics.listener``), or None."""
        return self._metrics_server.url if self._metrics_server is not None else None

    def _data_committed(self, key: Tuple[str, int]) -> None:
        """A partition's high watermark moved: the fetches (and acks=all produces) waiting on
        it may complete."""
        self.fetch_purgatory.check_and_complete(key)
        if self.cluster is not None:
            self.cluster.replicas.high_watermark_advanced(key)

    def fetch(self, requests: Sequence[FetchRequest], max_wait_ms: int = 500, min_bytes: int = 1,
              max_bytes: int = 52428800, isolation_level: str = "read_uncommitted") -> FetchResults:
        """Kafka's Fetch: ``requests`` are (topic, partition, offset, partition max bytes).

        Waits up to ``max_wait_ms`` for ``min_bytes`` (a delayed operation woken by
        appends, never polling); per-partition errors come back as codes, as on the wire.
        """
        op = self.fetch_async(requests, max_wait_ms, min_bytes, max_bytes, isolation_level)
        op.wait()
        return op.answer()

    def fetch_async(self, requests: Sequence[FetchRequest], max_wait_ms: int, min_bytes: int, max_bytes: int,
                    isolation_level: str = "read_uncommitted",
                    deliver: Callable[[FetchResults], None] = lambda results: None) -> "DelayedCall[FetchResults]":
        """:meth:`fetch` as a delayed operation: ``deliver(results)`` gets the answer.

        It completes at once when ``min_bytes`` are there, a partition failed or there
        is nothing to wait for; otherwise it watches the requested partitions and is
        checked after each append to one of them, or answered at ``max_wait_ms`` with
        what is there then. No thread waits for it.
        """
        def read() -> FetchResults:
            return self._fetch_once(requests, max_bytes, isolation_level)

        def check() -> Optional[FetchResults]:
            results = read()
            return results if self.closed or _enough(results, min_bytes) else None

        deadline = time.monotonic() + max(0, max_wait_ms) / 1000.0
        op: DelayedCall[FetchResults] = DelayedCall(deadline, check, read, Tapped(deliver, self._count_fetched))
        if max_wait_ms <= 0 or not requests or self.closed:
            op.complete_with(read())
            return op
        self.fetch_purgatory.try_complete_else_watch(op, {(t, p) for t, p, _, _ in requests})
        return op

    def _fetch_once(self, requests: Sequence[FetchRequest], max_bytes: int, isolation_level: str) -> FetchResults:
        out: Dict[Tuple[str, int], FetchResult] = {}
        budget = max_bytes
        for topic, index, offset, partition_max in requests:
            try:
                if self.closed:  # shutting down: the client goes to the partition's next leader
                    raise errors.NotLeaderOrFollowerError("broker %d is shutting down" % self.broker_id)
                part = self.leader_partition(topic, index)
                limit = max(0, min(partition_max, budget))
                region = part.read(offset, limit, isolation_level, min_one_batch=budget == max_bytes)
                budget -= len(region)
                out[(topic, index)] = FetchResult(0, part.high_watermark, part.log_start_offset, region)
            except errors.BrokerError as exc:
                hw = ls = -1
                found = self._partitions.get((topic, index))
                if found is not None:
                    hw, ls = found.high_watermark, found.log_start_offset
                out[(topic, index)] = FetchResult(exc.code, hw, ls, None)
        return out

    def list_offsets(self, topic: str, partition: int, timestamp: int) -> Tuple[int, int]:
        """Kafka's ListOffsets: -1 latest, -2 earliest (and -4, earliest local), -3 the record
        with the largest timestamp, else the first offset at or after ``timestamp``;
        -> (offset, timestamp), offset -1 when none is that late (and for -5, latest tiered)."""
        found = self.leader_partition(topic, partition).offset_for_timestamp(timestamp)
        if found is None:
            return -1, -1
        return found

    def legacy_offsets_before(self, topic: str, partition: int, timestamp: int, max_count: int) -> List[int]:
        """ListOffsets v0 (Kafka 0.8's offsets before a time): up to ``max_count`` segment
        base offsets of segments last modified by ``timestamp``, newest first (-1: from the
        high watermark, -2: the log start)."""
        return self.leader_partition(topic, partition).legacy_offsets_before(timestamp, max_count)

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Kafka's DeleteRecords: -> the new log start offset (offset -1: up to the high watermark)."""
        part = self.partition(topic, partition)
        return part.delete_records_before(part.high_watermark if offset == -1 else offset)

    # -- idempotent producers ------------------------------------------------------------

    def init_producer_id(self, transactional_id: Optional[str] = None) -> Tuple[int, int]:
        """Kafka's InitProducerId: a new producer id and epoch 0 for an idempotent producer."""
        if transactional_id is not None:
            raise errors.TransactionalIdAuthorizationFailedError(
                "transactions are not supported by this broker (transactional.id %r)" % transactional_id)
        self._check_open()
        return self.producer_ids.next_id()

    def describe_log_dirs(self, partitions: LogDirsQuery = None) -> List[LogDirDescription]:
        """Kafka's DescribeLogDirs: each log directory with its logs of ``partitions``
        (None: every partition), their sizes in bytes, and the volume's total and usable
        bytes. A directory whose volume cannot be read answers KAFKA_STORAGE_ERROR.

        Takes the log manager's lock (logs being opened may hold it): not for the event loop.
        """
        self._check_open()
        wanted = None if partitions is None else {(t, p) for t, indexes in partitions.items() for p in indexes}
        out = []
        for path, logs in self.logs.logs_by_dir():
            try:
                volume = os.statvfs(path)
            except OSError as exc:
                log.warning("describe log dirs: cannot read the volume of %s: %s", path, exc)
                out.append(LogDirDescription(path, errors.KafkaStorageError.code, []))
                continue
            # With one replica the high watermark is the log end: no lag, and no future logs
            # (AlterReplicaLogDirs is not supported).
            replicas = [ReplicaInfo(lg.topic, lg.partition, lg.size_in_bytes, 0, False) for lg in logs
                        if wanted is None or (lg.topic, lg.partition) in wanted]
            out.append(LogDirDescription(path, 0, replicas, volume.f_blocks * volume.f_frsize,
                                         volume.f_bavail * volume.f_frsize))
        return out

    def describe_producers(self, topic: str, partition: int) -> List[ProducerDescription]:
        """Kafka's DescribeProducers for one partition: its active idempotent producers."""
        return self.leader_partition(topic, partition).active_producers()

    # -- groups ----------------------------------------------------------------------------

    def delete_offsets(self, group_id: str, partitions: Sequence[Tuple[str, int]]) -> OffsetDeleteResult:
        """Kafka's OffsetDelete: partitions that do not exist answer UNKNOWN_TOPIC_OR_PARTITION
        (checked here, as Kafka's KafkaApis does against its metadata cache: in a cluster
        the cluster's partitions, wherever their replicas live), the group coordinator
        deletes the others' offsets."""
        with self._lock:
            self._check_open()
            if self.cluster is not None:
                metadata = self.cluster.metadata
                exists = [metadata.partition(t, p) is not None for t, p in partitions]
            else:
                exists = [tp in self._partitions for tp in partitions]
        known = [tp for tp, ok in zip(partitions, exists) if ok]
        unknown = {tp: errors.UnknownTopicOrPartitionError.code for tp, ok in zip(partitions, exists) if not ok}
        group_error, codes = self.group_coordinator.delete_offsets(group_id, known)
        if group_error:
            return group_error, {}
        codes.update(unknown)
        return group_error, codes

    def _offsets_partition(self, index: int) -> Partition:
        return self._partitions[(OFFSETS_TOPIC, index)]

    # -- lifecycle -------------------------------------------------------------------------

    def checkpoint_high_watermarks(self) -> None:
        """Write every partition's high watermark to ``replication-offset-checkpoint``.

        Runs every ``replica.high.watermark.checkpoint.interval.ms`` and at close. A
        reader of the segment files alone (``pylogq.spark``) takes it as the committed
        end, so its reads never include what was not acknowledged by then.
        """
        with self._lock:
            if self.closed:
                return
            marks = self._high_watermarks()
        self.logs.checkpoint_high_watermarks(marks)

    def _high_watermarks(self) -> Dict[Tuple[str, int], int]:
        """What the checkpoint holds: every hosted replica's high watermark, and the last one
        of each replica stopped with its log kept (lock held)."""
        marks = dict(self._stopped_marks)
        marks.update((tp, partition.high_watermark) for tp, partition in self._partitions.items())
        return marks

    def serve(self, host: str = "127.0.0.1", port: int = 0, **options: Any) -> Tuple[str, int]:
        """Open a Kafka protocol listener in a background thread; -> its (host, port).

        ``port=0`` takes a free port. ``options`` are :class:`pylogq.server.KafkaServer`'s
        (``sasl_users={"alice": "secret"}`` requires SASL/PLAIN on this listener). The
        listener closes with the broker. Call it again for more listeners.
        """
        factory = listener_factory()  # pylogq.server registers it: the broker does not import the server
        if factory is None:
            raise errors.PylogqError("no Kafka listener is available: import pylogq.server (pylogq.Broker does)")
        self._check_open()
        server = factory(self, host, port, options)
        self._servers.append(server)
        return server.addresses[0]

    def listener_endpoints(self) -> List[BrokerEndpoint]:
        """The advertised endpoints of the listeners :meth:`serve` opened."""
        return [BrokerEndpoint("PLAINTEXT", host, port) for host, port in self.listener_addresses]

    @property
    def listener_addresses(self) -> List[Tuple[str, int]]:
        """The (host, port) of every listener :meth:`serve` opened, in order."""
        return [address for server in list(self._servers) for address in server.addresses]

    def transport(self) -> "InProcessTransport":
        """The contract's calls on this broker, for clients given ``broker=``."""
        return InProcessTransport(self)

    def _check_open(self) -> None:
        if self.closed:
            raise errors.PylogqError("broker %s is closed" % self.data_dir)

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
        self.timer.close()
        for partition in list(self._partitions.values()):
            partition.close()
        try:
            self.logs.checkpoint_high_watermarks(marks)
        except OSError as exc:  # a full disk: the logs still close; readers of the files see older marks
            log.error("could not write the high watermark checkpoint at close: %s", exc)
        self.logs.close()

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Broker(%s, broker_id=%d, topics=%d)" % (self.data_dir, self.broker_id, len(self._topics))


def _coordinator_code(code: int, for_commit: bool) -> int:
    """A replication wait's code as the group coordinator answers it (Kafka's mapping)."""
    if not code:
        return 0
    error = errors.error_for_code(code)
    return storage_error_code(error("") if error is not None else errors.UnknownServerError(""), for_commit)


def _check_partitions_per_request(count: int) -> None:
    if count > MAX_PARTITIONS_PER_REQUEST:
        raise errors.PolicyViolationError("Excessively large number of partitions per request: %d (at most %d)"
                                          % (count, MAX_PARTITIONS_PER_REQUEST))


def _enough(results: FetchResults, min_bytes: int) -> bool:
    """Whether a fetch can be answered: ``min_bytes`` are there, or a partition failed."""
    size = 0
    for r in results.values():
        if r.error_code:
            return True
        if r.records is not None:
            size += len(r.records)
    return size >= min_bytes


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


def _sensitive(key: str) -> bool:
    """A broker key whose value DescribeConfigs never shows (Kafka's PASSWORD type and JAAS configs)."""
    return "jaas" in key or "password" in key or key.endswith(".secret")
