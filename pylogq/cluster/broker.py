"""``pylogq.Broker``: a Kafka broker node's data plane in this process.

A broker owns a data directory (Kafka's log dir layout, see docs/storage.md),
the topics in it and their partitions, and the group coordinator whose state
lives in the compacted internal topic ``__consumer_offsets``. Its operations are
the ones the Kafka protocol exposes (produce, fetch, list offsets, topic and
config administration, groups), typed by :mod:`pylogq.cluster.contract`, and
called directly by the in-process clients and by the network server.

Its parts, one concept per module: the settings (:mod:`.broker_config`), the
topic-metadata store (:mod:`.topic_store`), producer ids (:mod:`.producer_ids`),
``__consumer_offsets`` (:mod:`.offsets_topic`), and the delayed operations that
every waiting call uses (:mod:`.delayed`). The identity is Kafka's
``meta.properties``. Thread-safe: producers and consumers call from their own
threads.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .. import errors
from ..config import parse_properties
from ..errors import ConfigError
from ..storage.checkpoint import write_atomically
from ..storage.config import LogConfig
from ..storage.manager import LogManager
from ..storage.partition_metadata import (
    PARTITION_METADATA_FILE,
    ZERO_TOPIC_ID,
    new_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)
from .broker_config import BrokerConfig, with_development_defaults
from .contract import (
    FetchRequest,
    FetchResult,
    FetchResults,
    Listener,
    LogDirDescription,
    LogDirsQuery,
    OffsetDeleteResult,
    ProduceResult,
    ReplicaInfo,
    ProducerDescription,
    TopicDescription,
    TopicPartitionInfo,
    listener_factory,
)
from .delayed import DelayedCall, DelayedOperationPurgatory, Timer
from .group_coordinator import GroupCoordinator
from .in_process import InProcessTransport
from .names import INTERNAL_TOPICS, collides, validate_topic_name
from .offsets_topic import OFFSETS_TOPIC, OffsetsTopic
from .partition import Partition
from .producer_ids import ProducerIdManager
from .topic_store import FileTopicStore, TopicMetadata

log = logging.getLogger("pylogq.broker")

__all__ = ["Broker", "FetchResults", "MAX_PARTITIONS_PER_REQUEST", "OFFSETS_TOPIC", "META_FILE"]

META_FILE = "meta.properties"
# Kafka refuses to create more partitions than this in one request (POLICY_VIOLATION):
# a count from a bad or hostile request must not make the broker open millions of logs.
MAX_PARTITIONS_PER_REQUEST = 10000
# How long close() waits for a topic administration in progress.
ADMIN_CLOSE_TIMEOUT_S = 30.0


class Broker:
    """A broker in this process: topics of partitioned logs and the group coordinator.

    Use as a context manager, or call ``close()``: it flushes every log and
    writes the checkpoints, so the next open needs no recovery. Without a
    ``config_file`` it starts from :data:`~pylogq.cluster.broker_config.DEVELOPMENT_DEFAULTS`,
    as ``pylogq-broker`` does without a properties file.
    """

    def __init__(self, data_dir: str, *, development_defaults: Optional[bool] = None, **config: Any) -> None:
        """``config``: Kafka's broker keys (dotted or snake_case), or ``config_file=`` a
        ``server.properties`` with keywords on top. ``development_defaults`` (default:
        without a ``config_file``) starts from :data:`DEVELOPMENT_DEFAULTS` instead of
        Kafka's code defaults, as ``pylogq-broker`` does without a properties file."""
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
        os.makedirs(self.data_dir, exist_ok=True)
        self.broker_id: int = self.config.node.broker_id
        self.cluster_id = self._load_meta()
        self.producer_ids = ProducerIdManager(self.data_dir)
        self._lock = threading.RLock()  # the maps below; see "Locks" at the topics' methods
        self._admin_lock = threading.RLock()
        self._pending_configs: Dict[str, TopicMetadata] = {}  # topics being created, for their logs' config
        self._store = FileTopicStore(self.data_dir)
        # A missing topics file is rebuilt from the partition directories (the offsets topic with its own config).
        offsets_config = OffsetsTopic.config(self.config.node.offsets_topic_segment_bytes)
        self._topics: Dict[str, TopicMetadata] = self._store.load(
            self.config.log_manager.log_dirs, {OFFSETS_TOPIC: {k: str(v) for k, v in offsets_config.items()}})
        self._topic_names: Dict[str, str] = {m.topic_id: t for t, m in self._topics.items()}  # id -> name
        self.default_log_config = self.config.log_manager.default_log_config()
        self.logs = LogManager(config=self.config.log_manager, topic_config=self._log_config_for)
        self._partitions: Dict[Tuple[str, int], Partition] = {}
        self._servers: List[Listener] = []
        self.closed = False
        # Every call that waits is a delayed operation: one timer thread expires them all.
        self.timer = Timer("pylogq-delayed-timer")
        #: Long-poll fetches, watched under (topic, partition) and checked after appends.
        self.fetch_purgatory = DelayedOperationPurgatory("fetch", self.timer)
        try:
            for topic, meta in self._topics.items():
                for p in range(meta.partitions):
                    self._partitions[(topic, p)] = self._open_partition(topic, p, meta.topic_id)
            self.offsets_topic = OffsetsTopic(self._offsets_partition)
            if OFFSETS_TOPIC not in self._topics:
                self._create_topic(OFFSETS_TOPIC, self.config.node.offsets_topic_num_partitions, 1,
                                   self.offsets_topic.config(self.config.node.offsets_topic_segment_bytes),
                                   internal=True)
            self.group_coordinator = GroupCoordinator(
                append=self.offsets_topic.append, read_all=self.offsets_topic.read_all,
                timer=self.timer,
                num_partitions=self._topics[OFFSETS_TOPIC].partitions,
                initial_rebalance_delay_ms=self.config.node.group_initial_rebalance_delay_ms,
                group_min_session_timeout_ms=self.config.node.group_min_session_timeout_ms,
                group_max_session_timeout_ms=self.config.node.group_max_session_timeout_ms,
            )
            self.group_coordinator.load()
            interval = self.config.node.replica_high_watermark_checkpoint_interval_ms / 1000.0
            self.logs.scheduler.schedule(self.checkpoint_high_watermarks, delay=interval, period=interval,
                                         name="high-watermark-checkpoint")
        except BaseException:
            self.timer.close()
            self.logs.close()
            raise

    # -- identity and metadata files ----------------------------------------------

    def _load_meta(self) -> str:
        """The cluster id from ``meta.properties`` (Kafka's v0 layout: version, broker.id,
        cluster.id), written on the first start. A file that does not parse stops the
        broker with CorruptMetadataError; one of another broker.id with ConfigError."""
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
            key = "broker.id" if "broker.id" in props else "node.id"
            raw = props.get(key, "").strip()
            if not raw.lstrip("-").isdigit():
                raise corrupt("%s %r is not an integer" % (key, props.get(key)))
            if int(raw) != self.broker_id:
                raise ConfigError("data dir %s belongs to broker.id %d, not %d" % (self.data_dir, int(raw),
                                                                                  self.broker_id))
        cluster_id = props.get("cluster.id", "").strip()
        if not cluster_id:  # a new data dir (or a v0 file of a broker that predates cluster ids)
            cluster_id = uuid.uuid4().hex[:22]
            write_atomically(path, ("version=0\nbroker.id=%d\ncluster.id=%s\n"
                                    % (self.broker_id, cluster_id)).encode())
        return cluster_id

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
        partition = Partition(topic, index, log_)
        key = (topic, index)
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
                     config: Optional[Mapping[str, Any]] = None, validate_only: bool = False) -> TopicDescription:
        """Create a topic; Kafka's naming rules, config keys and validation apply.

        ``validate_only`` runs every check and returns the description the
        topic would have, creating nothing (CreateTopics' validateOnly). A topic
        whose partitions cannot all be created is not created at all.
        """
        with self._admin_lock:
            self._check_open()
            return self._create_topic(name, partitions, replication_factor, config, internal=False,
                                      validate_only=validate_only)

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
        count = self.config.node.num_partitions if partitions is None else partitions
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise errors.InvalidPartitionsError("number of partitions must be at least 1, got %r" % (count,))
        _check_partitions_per_request(count)
        factor = self.config.node.default_replication_factor if replication_factor is None else replication_factor
        if not isinstance(factor, int) or isinstance(factor, bool) or factor < 1:
            raise errors.InvalidReplicationFactorError(
                "replication factor must be at least 1, got %r" % (factor,))
        if factor != 1:
            raise errors.InvalidReplicationFactorError(
                "replication factor %d is larger than the 1 available broker" % factor)
        overrides = dict(config or {})
        try:
            log_config = self.default_log_config.merged(overrides)
        except ConfigError as exc:
            raise errors.InvalidConfigError(str(exc)) from None
        dotted = {k: str(v) for k, v in log_config.to_strings().items() if k in _dotted_keys(overrides)}
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
            with self._lock:
                meta = self._require_topic(name)
                keys = [(name, p) for p in range(meta.partitions)]
                detached = {tp: self._partitions.pop(tp) for tp in keys}
                del self._topics[name]
                self._topic_names.pop(meta.topic_id, None)
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

    def create_partitions(self, name: str, total: int, validate_only: bool = False) -> TopicDescription:
        """Grow a topic to ``total`` partitions (Kafka never shrinks one), all or none.

        ``validate_only`` runs the checks and changes nothing (CreatePartitions' validateOnly).
        """
        with self._admin_lock:
            self._check_open()
            with self._lock:
                meta = self._require_topic(name)
            if not isinstance(total, int) or isinstance(total, bool) or total <= meta.partitions:
                raise errors.InvalidPartitionsError(
                    "topic %r has %d partitions; the new total %r must be larger" % (name, meta.partitions, total))
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
        with self._lock:
            return sorted(t for t in self._topics if include_internal or t not in INTERNAL_TOPICS)

    def describe_topic(self, name: str) -> TopicDescription:
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
        with self._lock:
            return self._require_topic(name).topic_id

    def topic_name(self, topic_id: str) -> str:
        """The name of the topic with id ``topic_id``; UnknownTopicIdError when none has it
        (a deleted topic's id names nothing, even when a topic of that name exists again)."""
        with self._lock:
            name = self._topic_names.get(topic_id)
        if name is None:
            raise errors.UnknownTopicIdError("no topic has id %r" % (topic_id,))
        return name

    def partitions_for(self, topic: str) -> int:
        with self._lock:
            return self._require_topic(topic).partitions

    def describe_configs(self, topic: str) -> Dict[str, Tuple[Optional[str], bool]]:
        """Every config key of a topic: -> {dotted key: (value, is_default)}."""
        with self._lock:
            meta = self._require_topic(topic)
            effective = self.default_log_config.merged(meta.config).to_strings()
            return {k: (v, k not in meta.config) for k, v in sorted(effective.items())}

    def alter_configs(self, topic: str, config: Mapping[str, Any], incremental: bool = False) -> None:
        """Replace a topic's overrides (``incremental``: set only the given keys;
        a value of None removes an override). Existing logs take the new config."""
        with self._admin_lock:
            self._check_open()
            with self._lock:
                meta = self._require_topic(topic)
            overrides: Dict[str, Any] = dict(meta.config) if incremental else {}
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
            altered = meta._replace(config={k: str(strings[k]) for k in overrides})
            self._store.put(topic, altered)
            with self._lock:
                self._topics[topic] = altered
                partitions = [self._partitions[(topic, p)] for p in range(meta.partitions)]
            for partition in partitions:
                partition.log.config = log_config

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
        raise errors.UnknownTopicOrPartitionError("%s-%d does not exist" % (topic, index))

    # -- produce, fetch, offsets -----------------------------------------------------

    def produce(self, topic: str, partition: int, records: Union[bytes, bytearray, memoryview], acks: int = 1,
                auto_create: bool = True) -> ProduceResult:
        """Append one partition's record batches (Kafka's Produce). Errors raise.

        ``auto_create`` creates a missing topic (``auto.create.topics.enable``) as the
        in-process clients expect; the network server passes False, as Kafka's Produce
        never creates a topic (a client's Metadata request does).
        """
        if acks not in (0, 1, -1):
            raise errors.InvalidRequiredAcksError("acks must be 0, 1 or -1 (all), got %r" % (acks,))
        target = self.partition(topic, partition, create=auto_create)
        return target.append(records, required_acks=acks)  # its high watermark hook wakes parked fetches

    def _data_committed(self, key: Tuple[str, int]) -> None:
        """A partition's high watermark moved: the fetches waiting on it may complete."""
        self.fetch_purgatory.check_and_complete(key)

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
        op: DelayedCall[FetchResults] = DelayedCall(deadline, check, read, deliver)
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
                part = self.partition(topic, index)
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
        found = self.partition(topic, partition).offset_for_timestamp(timestamp)
        if found is None:
            return -1, -1
        return found

    def legacy_offsets_before(self, topic: str, partition: int, timestamp: int, max_count: int) -> List[int]:
        """ListOffsets v0 (Kafka 0.8's offsets before a time): up to ``max_count`` segment
        base offsets of segments last modified by ``timestamp``, newest first (-1: from the
        high watermark, -2: the log start)."""
        return self.partition(topic, partition).legacy_offsets_before(timestamp, max_count)

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
        return self.partition(topic, partition).active_producers()

    # -- groups ----------------------------------------------------------------------------

    def delete_offsets(self, group_id: str, partitions: Sequence[Tuple[str, int]]) -> OffsetDeleteResult:
        """Kafka's OffsetDelete: partitions that do not exist answer UNKNOWN_TOPIC_OR_PARTITION
        (checked here, as Kafka's KafkaApis does against its metadata), the group
        coordinator deletes the others' offsets."""
        with self._lock:
            self._check_open()
            known = [tp for tp in partitions if tp in self._partitions]
            unknown = {tp: errors.UnknownTopicOrPartitionError.code for tp in partitions if tp not in self._partitions}
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
            marks = {tp: partition.high_watermark for tp, partition in self._partitions.items()}
        self.logs.checkpoint_high_watermarks(marks)

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
        self.fetch_purgatory.close()  # parked fetches answer with what is there
        marks = {tp: partition.high_watermark for tp, partition in self._partitions.items()}
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
