"""The state of a :class:`pylogq.Broker` and its life between opening and closing.

:class:`BrokerLifecycle` declares what every part of the broker shares (``Broker.__init__``,
in :mod:`.broker`, sets it; ``Broker.close`` releases it), and holds what a broker does to
stay a member of its cluster and a host of partitions, as Kafka's KafkaServer does around
its managers: joining the cluster and following the leadership of ``__consumer_offsets``,
its identity in ``meta.properties``, the partitions it hosts (opened, stopped, their high
watermarks checkpointed), its listeners' endpoints, and the metrics its data path counts.
The data path (:mod:`.data_path`) and the administration (:mod:`.admin`) are built on it.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import threading
import uuid
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ... import errors
from ...config import parse_properties
from ...errors import ConfigError
from ...metrics import MetricsRegistry, MetricsServer
from ...storage.checkpoint import write_atomically
from ...config import LogConfig
from ...storage.manager import LogManager
from ...storage.partition_metadata import (
    META_FILE,
    PARTITION_METADATA_FILE,
    ZERO_TOPIC_ID,
    meta_broker_id,
    read_partition_metadata,
    write_partition_metadata,
)
from ..contract import BrokerEndpoint, FetchResults, Listener, ProduceResult
from ..coordinator.group.coordinator import GroupCoordinator
from ..coordinator.group.offsets_topic import OFFSETS_TOPIC, OffsetsTopic
from ..coordinator.transaction.coordinator import TRANSACTION_STATE_TOPIC, TransactionCoordinator
from ..delayed import DelayedOperationPurgatory, Timer
from ..state.partition import Partition
from ..state.producer_ids import ProducerIdManager
from .config import BrokerConfig
from .dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from .topic_store import FileTopicStore, TopicMetadata
from .client_quotas import FileClientQuotas
from .user_credentials import FileUserCredentials

if TYPE_CHECKING:  # a single node never loads the cluster's modules
    from ..zk.store import MetadataStore
    from .cluster_node import ClusterNode
    from .log_dir_mover import LogDirMover

log = logging.getLogger("pylogq.broker")

__all__ = ["BrokerLifecycle", "JOIN_METADATA_TIMEOUT_S"]

# How long joining a cluster waits for the controller's first UpdateMetadata.
JOIN_METADATA_TIMEOUT_S = 30.0


#: How long a coordinator waits before it reads a partition it failed to load again.
LOAD_RETRY_S = 1.0


class BrokerLifecycle:
    """A broker's shared state and its life in a cluster: membership, identity, the
    partitions it hosts, their high watermark checkpoint and the data path's metrics.

    Not used alone: :class:`pylogq.Broker` combines it with its data path and its
    administration, and its ``__init__`` sets every attribute declared here. Thread-safe
    as the broker is: the maps below are read and published under ``_lock`` (see "Locks"
    in :mod:`.admin`).
    """

    if TYPE_CHECKING:  # set by Broker.__init__ (see its comments there)
        data_dir: str
        config: BrokerConfig
        dynamic_config: DynamicBrokerConfig
        _dynamic_lock: threading.Lock
        broker_id: int
        cluster_id: str
        producer_ids: ProducerIdManager
        _lock: threading.RLock
        _admin_lock: threading.RLock
        _pending_configs: Dict[str, TopicMetadata]
        _store: FileTopicStore
        on_storage_failure: Callable[[str], None]
        log_dir_mover: Optional["LogDirMover"]
        _file_users: Optional[FileUserCredentials]
        _file_quotas: Optional[FileClientQuotas]
        _topics: Dict[str, TopicMetadata]
        _topic_names: Dict[str, str]
        default_log_config: LogConfig
        metrics_registry: MetricsRegistry
        _metrics_server: Optional[MetricsServer]
        logs: LogManager
        _partitions: Dict[Tuple[str, int], Partition]
        _stopped_marks: Dict[Tuple[str, int], int]
        _servers: List[Listener]
        closed: bool
        timer: Timer
        fetch_purgatory: DelayedOperationPurgatory
        cluster: Optional[ClusterNode]
        _joined: bool
        _joined_lock: threading.Lock
        _joined_callbacks: List[Callable[[], None]]
        offsets_topic: OffsetsTopic
        _offsets_ready: bool
        group_coordinator: GroupCoordinator
        _group_loads: "queue.Queue[Optional[Tuple[str, int]]]"
        txn_coordinator: TransactionCoordinator
        _group_loader: threading.Thread

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

    def _leadership_changed(self, led: List[Tuple[str, int]], followed: List[Tuple[str, int]]) -> None:
        """The coordinators follow the leadership of their topics' partitions
        (``__consumer_offsets``, ``__transaction_state``): a coordinator loads a partition
        when this broker comes to lead it (in a thread of its own: the read may be long) and
        drops it when the leadership goes."""
        for topic, p in followed:
            if topic == OFFSETS_TOPIC:
                self.group_coordinator.unload_partition(p)
            elif topic == TRANSACTION_STATE_TOPIC:
                self.txn_coordinator.unload_partition(p)
        for topic, p in led:
            if topic == OFFSETS_TOPIC:
                self.group_coordinator.begin_loading(p)
                self._group_loads.put((topic, p))
            elif topic == TRANSACTION_STATE_TOPIC:
                self.txn_coordinator.begin_loading(p)
                self._group_loads.put((topic, p))

    def _offsets_leadership_in_doubt(self, p: int) -> bool:
        """Whether this broker's leadership of ``__consumer_offsets``-``p`` is in doubt."""
        partition = self._partitions.get((OFFSETS_TOPIC, p))
        return (partition is not None and self.cluster is not None
                and self.cluster.replicas.leadership_doubt(partition) is not None)

    def _load_groups(self) -> None:
        """The coordinators' loader thread: one partition at a time, in the order led."""
        while True:
            item = self._group_loads.get()
            if item is None:
                return
            topic, p = item
            partition = self._partitions.get((topic, p))
            if partition is None or not partition.is_leader or self.closed:
                continue
            try:
                if topic == OFFSETS_TOPIC:
                    self.group_coordinator.load_partition(p, begun=True)
                else:
                    self.txn_coordinator.load_partition(p, partition.leader_epoch)
            except Exception:  # noqa: BLE001 - tried again while this broker leads the partition
                # As Kafka's coordinators: the partition stays loading (its clients are told
                # COORDINATOR_LOAD_IN_PROGRESS and wait), not unserved (NOT_COORDINATOR would
                # send them back here, as the partition's leader, in a loop).
                log.exception("could not load the coordinator state of %s-%d; trying again in %.0f s", topic, p,
                              LOAD_RETRY_S)
                self.logs.scheduler.schedule(functools.partial(self._group_loads.put, item), delay=LOAD_RETRY_S,
                                             name="coordinator-load-retry")

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

    def _unclean_leader_election(self, topic: str) -> bool:
        assert self.cluster is not None
        overrides = self.cluster.topic_config(topic)
        return bool(self.default_log_config.merged(overrides).unclean_leader_election_enable)

    @property
    def clustered(self) -> bool:
        """Whether this broker is a member of a replicated cluster."""
        return self.cluster is not None

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

    def _write_meta_cluster_id(self, cluster_id: str) -> None:
        write_atomically(os.path.join(self.data_dir, META_FILE),
                         ("version=0\nbroker.id=%d\ncluster.id=%s\n" % (self.broker_id, cluster_id)).encode())

    # The ReplicaHost calls: the replica manager asks the broker for partitions and their logs.

    def hosted(self, tp: Tuple[str, int]) -> Optional[Partition]:
        """The replica of ``tp`` this broker serves (None for one in a failed log directory:
        the data path still finds that one, and answers KAFKA_STORAGE_ERROR for it)."""
        found = self._partitions.get(tp)
        return None if found is None or found.offline else found

    def hosted_partitions(self) -> List[Partition]:
        with self._lock:
            return [p for p in self._partitions.values() if not p.offline]

    def host_partition(self, topic: str, index: int, topic_id: Optional[str], is_new: bool = False) -> Partition:
        """Open a replica the controller assigned to this broker (its log created if new).

        KafkaStorageError when its log is in an offline log directory, or when it is not
        ``is_new`` and a directory is offline (its log may be there)."""
        assert self.cluster is not None
        with self._lock:
            found = self._partitions.get((topic, index))
            if found is not None:
                if found.offline:
                    raise errors.KafkaStorageError("the log of %s-%d is in an offline log directory" % (topic, index))
                return found
            meta = self._topics.get(topic)
        if meta is None or (topic_id and meta.topic_id != topic_id):
            config = self.cluster.topic_config(topic)
            meta = TopicMetadata(index + 1, config, topic_id or ZERO_TOPIC_ID)
            with self._lock:
                self._topics[topic] = meta
                if topic_id:
                    self._topic_names[topic_id] = topic
        partition = self._open_partition(topic, index, meta.topic_id, is_new)
        with self._lock:
            self._partitions[(topic, index)] = partition
            self._stopped_marks.pop((topic, index), None)
        return partition

    def unhost_partition(self, topic: str, index: int, delete: bool) -> None:
        """Stop a replica (and delete its log). A log in an offline directory cannot be deleted:
        KafkaStorageError (the controller asks again when this broker registers again)."""
        if delete and (topic, index) in self.logs.offline_partitions():
            raise errors.KafkaStorageError("the log of %s-%d is in an offline log directory" % (topic, index))
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
        if self.log_dir_mover is not None:
            self.log_dir_mover.cancel((topic, index))
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

    # -- opening partitions --------------------------------------------------------

    def _log_config_for(self, topic: str) -> Optional[LogConfig]:
        meta = self._pending_configs.get(topic) or self._topics.get(topic)
        if meta is None:
            return None
        return self.default_log_config.merged(meta.config) if meta.config else None

    def _open_partition(self, topic: str, index: int, topic_id: str, is_new: bool = True) -> Partition:
        """Open (or create) a partition's log and its Partition; not yet published in the maps.

        The directory's ``partition.metadata`` is written when missing; one holding another
        topic id refuses the partition (InconsistentTopicIdError naming the file), as Kafka
        takes such a log directory offline: its data may be another topic's.
        """
        log_ = self.logs.get_or_create_log(topic, index, self._log_config_for(topic), is_new=is_new)
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

    def _log_dir_failed(self, path: str, tps: List[Tuple[str, int]], online: int) -> None:
        """A log directory went offline (the log manager's failure channel): its replicas stop
        here (each answers KAFKA_STORAGE_ERROR from now on), a cluster's controller hears of it
        and moves their leaderships, and with no directory left the broker stops, as Kafka halts."""
        with self._lock:
            gone = [p for p in (self._partitions.get(tp) for tp in tps) if p is not None]
        for partition in gone:
            partition.go_offline()  # kept: the data path answers KAFKA_STORAGE_ERROR for it
        if self.cluster is not None:
            self.cluster.log_dir_failed(path, tps)
        self._leadership_changed([], [tp for tp in tps if tp[0] in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)])
        for tp in tps:
            self.fetch_purgatory.check_and_complete(tp)
        if not online and not self.closed:
            why = "every log directory is offline (the last: %s)" % path
            log.critical("broker %d stops: %s", self.broker_id, why)
            self.on_storage_failure(why)

    def _data_committed(self, key: Tuple[str, int]) -> None:
        """A partition's high watermark moved: the fetches (and acks=all produces) waiting on
        it may complete."""
        self.fetch_purgatory.check_and_complete(key)
        if self.cluster is not None:
            self.cluster.replicas.high_watermark_advanced(key)

    def _offsets_partition(self, index: int) -> Partition:
        return self._partitions[(OFFSETS_TOPIC, index)]

    # -- metrics wiring: what the data path counts ----------------------------------

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

    def listener_endpoints(self) -> List[BrokerEndpoint]:
        """The advertised endpoints of the listeners :meth:`serve` opened."""
        return [BrokerEndpoint("PLAINTEXT", host, port) for host, port in self.listener_addresses]

    @property
    def listener_addresses(self) -> List[Tuple[str, int]]:
        """The (host, port) of every listener :meth:`serve` opened, in order."""
        return [address for server in list(self._servers) for address in server.addresses]

    def _check_open(self) -> None:
        if self.closed:
            raise errors.PylogqError("broker %s is closed" % self.data_dir)
