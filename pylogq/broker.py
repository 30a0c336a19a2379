"""``pylogq.Broker``: a Kafka broker's data plane in this process.

A broker owns a data directory (Kafka's log dir layout, see docs/storage.md),
the topics in it and their partitions, and the group coordinator whose state
lives in the compacted internal topic ``__consumer_offsets``. Its operations
are the ones the Kafka protocol exposes (produce, fetch, list offsets, topic
and config administration, groups), called directly by the in-process
clients and, later, by the network server.

Topic metadata (partition counts and per-topic config overrides) is kept in
``pylogq-topics.json`` in the data directory, written atomically; the broker
identity in Kafka's ``meta.properties``. Thread-safe: producers and consumers
call from their own threads.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from . import errors
from .cluster.names import INTERNAL_TOPICS, collides, validate_topic_name
from .cluster.partition import Partition
from .errors import ConfigError
from .records import decode_columns
from .storage.checkpoint import write_atomically
from .storage.config import LogConfig, LogManagerConfig, _suggest, parse_properties
from .storage.manager import LogManager

log = logging.getLogger("pylogq.broker")

OFFSETS_TOPIC = "__consumer_offsets"
TOPICS_FILE = "pylogq-topics.json"
PRODUCER_IDS_FILE = "pylogq-producer-ids"
PRODUCER_ID_BLOCK = 1000
META_FILE = "meta.properties"
# Kafka refuses to create more partitions than this in one request (POLICY_VIOLATION):
# a count from a bad or hostile request must not make the broker open millions of logs.
MAX_PARTITIONS_PER_REQUEST = 10000


def _as_int(key: str, value: Any, minimum: Optional[int] = None) -> int:
    try:
        result = int(value)
    except (TypeError, ValueError):
        raise ConfigError("Invalid value %r for configuration %s: expected an integer" % (value, key)) from None
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ConfigError("Invalid value %r for configuration %s: expected an integer" % (value, key))
    if minimum is not None and result < minimum:
        raise ConfigError("Invalid value %r for configuration %s: value must be at least %d" % (value, key, minimum))
    return result


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError("Invalid value %r for configuration %s: expected true or false" % (value, key))


def _as_str(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError("Invalid value %r for configuration %s: expected a string" % (value, key))
    return value.strip()


# Broker settings beside the log manager's, with Kafka's names and defaults.
_BROKER_KEYS: Dict[str, Tuple[Any, Any]] = {
    "broker.id": (0, lambda k, v: _as_int(k, v, 0)),
    "num.partitions": (1, lambda k, v: _as_int(k, v, 1)),
    "default.replication.factor": (1, lambda k, v: _as_int(k, v, 1)),
    "auto.create.topics.enable": (True, _as_bool),
    "delete.topic.enable": (True, _as_bool),
    "offsets.topic.num.partitions": (50, lambda k, v: _as_int(k, v, 1)),
    "offsets.topic.replication.factor": (1, lambda k, v: _as_int(k, v, 1)),
    "offsets.topic.segment.bytes": (104857600, lambda k, v: _as_int(k, v, 14)),
    "group.initial.rebalance.delay.ms": (3000, lambda k, v: _as_int(k, v, 0)),
    "group.min.session.timeout.ms": (6000, lambda k, v: _as_int(k, v, 0)),
    "group.max.session.timeout.ms": (1800000, lambda k, v: _as_int(k, v, 0)),
    # How often the high watermarks go to replication-offset-checkpoint (Kafka's key and
    # default): readers of the files alone (pylogq.spark) take it as the committed end.
    "replica.high.watermark.checkpoint.interval.ms": (5000, lambda k, v: _as_int(k, v, 1)),
    # The network server's settings (pylogq.server), kept here so one file configures both.
    "listeners": ("PLAINTEXT://127.0.0.1:9092", lambda k, v: _as_str(k, v)),
    "advertised.listeners": (None, lambda k, v: _as_str(k, v)),
    "socket.request.max.bytes": (104857600, lambda k, v: _as_int(k, v, 1)),
    # Kafka's cap on one fetch response (KIP-541; Kafka's default is 55 MB). pylogq's is
    # 4 MiB: a consumer that asks for 50 MB gets it in responses it can decode while the
    # next one is on the wire, which librdkafka consumes at 2-3x the rate of one huge one.
    "fetch.max.bytes": (4194304, lambda k, v: _as_int(k, v, 1024)),
    "queued.max.requests": (500, lambda k, v: _as_int(k, v, 1)),
    "connections.max.idle.ms": (600000, lambda k, v: _as_int(k, v, 1)),
    # -1 (the OS's buffers, which Linux grows with the traffic) rather than Kafka's fixed
    # 100 KB, which turns a 4 MiB fetch response into dozens of sendfile calls and waits.
    "socket.send.buffer.bytes": (-1, lambda k, v: _as_int(k, v, -1)),
    "socket.receive.buffer.bytes": (-1, lambda k, v: _as_int(k, v, -1)),
    "sasl.enabled.mechanisms": ("PLAIN", lambda k, v: _as_str(k, v)),
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (None, lambda k, v: _as_str(k, v)),
    # Kafka settings that name JVM thread pools or ZooKeeper: accepted so a Kafka
    # server.properties loads unchanged; a single asyncio loop has no such pools.
    "num.network.threads": (3, lambda k, v: _as_int(k, v, 1)),
    "num.io.threads": (8, lambda k, v: _as_int(k, v, 1)),
    "zookeeper.connect": (None, lambda k, v: _as_str(k, v)),
    "zookeeper.connection.timeout.ms": (18000, lambda k, v: _as_int(k, v, 0)),
    "transaction.state.log.replication.factor": (1, lambda k, v: _as_int(k, v, 1)),
    "transaction.state.log.min.isr": (1, lambda k, v: _as_int(k, v, 1)),
}


class BrokerConfig:
    """Broker settings: Kafka's broker keys plus every log manager key (``log.*``).

    Accepts Kafka's dotted keys or snake_case keywords; an unknown key or a bad
    value raises ConfigError naming it.
    """

    def __init__(self, settings: Mapping[str, Any]) -> None:
        values = {k: default for k, (default, _) in _BROKER_KEYS.items()}
        rest: Dict[str, Any] = {}
        for key, value in settings.items():
            dotted = key.replace("_", ".") if key.replace("_", ".") in _BROKER_KEYS else key
            if dotted in _BROKER_KEYS:
                values[dotted] = _BROKER_KEYS[dotted][1](dotted, value)
            else:
                rest[key] = value
        self.values = values
        known = set(LogManagerConfig.known_keys())
        for key in rest:
            if key not in known and key.replace("_", ".") not in known and key not in LogManagerConfig._ALIASES \
                    and key.replace("_", ".") not in LogManagerConfig._ALIASES:
                raise ConfigError("Unknown broker configuration %r%s" % (
                    key, _suggest(key, list(_BROKER_KEYS) + sorted(known))))
        self.log_manager = LogManagerConfig.from_dict(rest)
        if values["group.min.session.timeout.ms"] > values["group.max.session.timeout.ms"]:
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")

    def __getitem__(self, key: str) -> Any:
        return self.values[key]


class TopicPartitionInfo(NamedTuple):
    partition: int
    leader: int
    replicas: List[int]
    isr: List[int]


class TopicDescription(NamedTuple):
    name: str
    partitions: List[TopicPartitionInfo]
    config: Dict[str, str]  # the topic's overrides, dotted keys
    internal: bool


class ProduceResult(NamedTuple):
    """Kafka's ProduceResponse for one partition."""

    error_code: int
    base_offset: int
    log_append_time: int
    log_start_offset: int
    record_count: int


class FetchResult(NamedTuple):
    """Kafka's FetchResponse for one partition: the records as a file region."""

    error_code: int
    high_watermark: int
    log_start_offset: int
    records: Any  # a FileRegion (possibly empty) or None on error


class Broker:
    """A broker in this process: topics of partitioned logs and the group coordinator.

    Use as a context manager, or call ``close()``: it flushes every log and
    writes the checkpoints, so the next open needs no recovery.
    """

    def __init__(self, data_dir: str, **config: Any) -> None:
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(self.data_dir, exist_ok=True)
        if "config_file" in config:
            with open(config.pop("config_file")) as f:
                config = {**parse_properties(f.read()), **config}
        if not any(k in config for k in ("log.dirs", "log_dirs", "log.dir", "log_dir")):
            config["log.dirs"] = self.data_dir
        self.config = BrokerConfig(config)
        self.broker_id: int = self.config["broker.id"]
        self.cluster_id = self._load_meta()
        self._next_producer_id: int = 0
        self._producer_id_limit: int = 0
        self._load_producer_ids()
        self._lock = threading.RLock()
        self._data_arrived = threading.Condition(self._lock)
        self._topics: Dict[str, Dict[str, Any]] = self._load_topics()
        self.default_log_config = self.config.log_manager.default_log_config()
        self.logs = LogManager(config=self.config.log_manager, topic_config=self._log_config_for)
        self._partitions: Dict[Tuple[str, int], Partition] = {}
        self._append_listeners: List[Callable[[str, int], None]] = []
        self._servers: List[Any] = []
        self.closed = False
        try:
            for topic, meta in self._topics.items():
                for p in range(meta["partitions"]):
                    self._open_partition(topic, p)
            self._ensure_offsets_topic()
            from .cluster.group_coordinator import GroupCoordinator

            self.group_coordinator = GroupCoordinator(
                append=self._append_offsets, read_all=self._read_offsets,
                num_partitions=self._topics[OFFSETS_TOPIC]["partitions"],
                initial_rebalance_delay_ms=self.config["group.initial.rebalance.delay.ms"],
                group_min_session_timeout_ms=self.config["group.min.session.timeout.ms"],
                group_max_session_timeout_ms=self.config["group.max.session.timeout.ms"],
            )
            self.group_coordinator.load()
            interval = self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000.0
            self.logs.scheduler.schedule(self.checkpoint_high_watermarks, delay=interval, period=interval,
                                         name="high-watermark-checkpoint")
        except BaseException:
            self.logs.close()
            raise

    # -- identity and metadata files ----------------------------------------------

    def _load_meta(self) -> str:
        path = os.path.join(self.data_dir, META_FILE)
        if os.path.exists(path):
            with open(path) as f:
                props = parse_properties(f.read())
            stored = int(props.get("broker.id", self.broker_id))
            if stored != self.broker_id:
                raise ConfigError("data dir %s belongs to broker.id %d, not %d" % (self.data_dir, stored,
                                                                                  self.broker_id))
            return str(props.get("cluster.id") or uuid.uuid4().hex[:22])
        cluster_id = uuid.uuid4().hex[:22]
        write_atomically(path, ("version=0\nbroker.id=%d\ncluster.id=%s\n" % (self.broker_id, cluster_id)).encode())
        return cluster_id

    def _load_topics(self) -> Dict[str, Dict[str, Any]]:
        path = os.path.join(self.data_dir, TOPICS_FILE)
        if not os.path.exists(path):
            return {}
        with open(path) as f:
            data = json.load(f)
        return {t: {"partitions": int(m["partitions"]), "config": dict(m.get("config", {}))}
                for t, m in data.get("topics", {}).items()}

    def _save_topics(self) -> None:
        body = json.dumps({"version": 1, "topics": self._topics}, indent=1, sort_keys=True).encode()
        write_atomically(os.path.join(self.data_dir, TOPICS_FILE), body)

    def _log_config_for(self, topic: str) -> Optional[LogConfig]:
        meta = self._topics.get(topic)
        if meta is None:
            return None
        return self.default_log_config.merged(meta["config"]) if meta["config"] else None

    def _open_partition(self, topic: str, index: int) -> Partition:
        log_ = self.logs.get_or_create_log(topic, index, self._log_config_for(topic))
        partition = Partition(topic, index, log_)
        self._partitions[(topic, index)] = partition
        return partition

    # -- topics -------------------------------------------------------------------

    def create_topic(self, name: str, partitions: Optional[int] = None, replication_factor: Optional[int] = None,
                     config: Optional[Mapping[str, Any]] = None, validate_only: bool = False) -> TopicDescription:
        """Create a topic; Kafka's naming rules, config keys and validation apply.

        ``validate_only`` runs every check and returns the description the
        topic would have, creating nothing (CreateTopics' validateOnly).
        """
        with self._lock:
            self._check_open()
            return self._create_topic(name, partitions, replication_factor, config, internal=False,
                                      validate_only=validate_only)

    def _create_topic(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                      config: Optional[Mapping[str, Any]], internal: bool,
                      validate_only: bool = False) -> TopicDescription:
        validate_topic_name(name)
        if name in INTERNAL_TOPICS and not internal:
            raise errors.InvalidTopicError("%s is an internal topic; it cannot be created by a client" % name)
        if name in self._topics:
            raise errors.TopicAlreadyExistsError("topic %r already exists" % name)
        for existing in self._topics:
            if collides(name, existing):
                raise errors.InvalidTopicError(
                    "topic %r collides with existing topic %r ('.' and '_' are the same in metric names)"
                    % (name, existing))
        count = self.config["num.partitions"] if partitions is None else partitions
        if not isinstance(count, int) or count < 1:
            raise errors.InvalidPartitionsError("number of partitions must be at least 1, got %r" % (count,))
        _check_partitions_per_request(count)
        factor = self.config["default.replication.factor"] if replication_factor is None else replication_factor
        if factor != 1:
            raise errors.InvalidReplicationFactorError(
                "replication factor %r is larger than the 1 available broker" % (factor,))
        overrides = dict(config or {})
        try:
            log_config = self.default_log_config.merged(overrides)
        except ConfigError as exc:
            raise errors.InvalidConfigError(str(exc)) from None
        dotted = {k: v for k, v in log_config.to_strings().items() if k in _dotted_keys(overrides)}
        if validate_only:
            infos = [TopicPartitionInfo(p, self.broker_id, [self.broker_id], [self.broker_id]) for p in range(count)]
            return TopicDescription(name, infos, {k: str(v) for k, v in dotted.items()}, internal)
        self._topics[name] = {"partitions": count, "config": dotted}
        self._save_topics()
        for p in range(count):
            self._open_partition(name, p)
        log.info("created topic %s with %d partitions%s", name, count, " and config %s" % dotted if dotted else "")
        return self._describe(name)

    def delete_topic(self, name: str) -> None:
        with self._lock:
            self._check_open()
            if not self.config["delete.topic.enable"]:
                raise errors.TopicDeletionDisabledError("delete.topic.enable is false")
            if name not in self._topics:
                raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % name)
            if name in INTERNAL_TOPICS:
                raise errors.InvalidTopicError("%s is an internal topic; it cannot be deleted" % name)
            for p in range(self._topics[name]["partitions"]):
                partition = self._partitions.pop((name, p))
                partition.close()
                self.logs.delete_log(name, p)
            del self._topics[name]
            self._save_topics()
            self._data_arrived.notify_all()

    def create_partitions(self, name: str, total: int, validate_only: bool = False) -> TopicDescription:
        """Grow a topic to ``total`` partitions (Kafka never shrinks one).

        ``validate_only`` runs the checks and changes nothing (CreatePartitions' validateOnly).
        """
        with self._lock:
            self._check_open()
            meta = self._require_topic(name)
            if total <= meta["partitions"]:
                raise errors.InvalidPartitionsError(
                    "topic %r has %d partitions; the new total %d must be larger" % (name, meta["partitions"], total))
            _check_partitions_per_request(total - meta["partitions"])
            if validate_only:
                return self._describe(name)
            for p in range(meta["partitions"], total):
                self._open_partition(name, p)
            meta["partitions"] = total
            self._save_topics()
            return self._describe(name)

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
                 for p in range(meta["partitions"])]
        return TopicDescription(name, infos, dict(meta["config"]), name in INTERNAL_TOPICS)

    def partitions_for(self, topic: str) -> int:
        with self._lock:
            return self._require_topic(topic)["partitions"]

    def describe_configs(self, topic: str) -> Dict[str, Tuple[Optional[str], bool]]:
        """Every config key of a topic: -> {dotted key: (value, is_default)}."""
        with self._lock:
            meta = self._require_topic(topic)
            effective = self.default_log_config.merged(meta["config"]).to_strings()
            return {k: (v, k not in meta["config"]) for k, v in sorted(effective.items())}

    def alter_configs(self, topic: str, config: Mapping[str, Any], incremental: bool = False) -> None:
        """Replace a topic's overrides (``incremental``: set only the given keys;
        a value of None removes an override). Existing logs take the new config."""
        with self._lock:
            self._check_open()
            meta = self._require_topic(topic)
            overrides: Dict[str, Any] = dict(meta["config"]) if incremental else {}
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
            meta["config"] = {k: strings[k] for k in overrides}
            self._save_topics()
            for p in range(meta["partitions"]):
                self._partitions[(topic, p)].log.config = log_config

    def _require_topic(self, name: str) -> Dict[str, Any]:
        meta = self._topics.get(name)
        if meta is None:
            raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % name)
        return meta

    def partition(self, topic: str, index: int, create: bool = False) -> Partition:
        """The partition ``topic``-``index``; with ``create``, auto-create the topic
        (``auto.create.topics.enable``) when it does not exist."""
        with self._lock:
            self._check_open()
            found = self._partitions.get((topic, index))
            if found is not None:
                return found
            if topic not in self._topics:
                if create and self.config["auto.create.topics.enable"] and topic not in INTERNAL_TOPICS:
                    self._create_topic(topic, None, None, None, internal=False)
                    found = self._partitions.get((topic, index))
                    if found is not None:
                        return found
            raise errors.UnknownTopicOrPartitionError("%s-%d does not exist" % (topic, index))

    # -- produce, fetch, offsets -----------------------------------------------------

    def produce(self, topic: str, partition: int, records: Any, acks: int = 1) -> ProduceResult:
        """Append one partition's record batches (Kafka's Produce). Errors raise."""
        if acks not in (0, 1, -1):
            raise errors.InvalidRequiredAcksError("acks must be 0, 1 or -1 (all), got %r" % (acks,))
        target = self.partition(topic, partition, create=True)
        result = target.append(records, required_acks=acks)
        with self._data_arrived:
            self._data_arrived.notify_all()
        for listener in self._append_listeners:
            listener(topic, partition)
        return ProduceResult(0, result.base_offset, result.log_append_time, result.log_start_offset,
                             result.record_count)

    def fetch(self, requests: Sequence[Tuple[str, int, int, int]], max_wait_ms: int = 500, min_bytes: int = 1,
              max_bytes: int = 52428800, isolation_level: str = "read_uncommitted") -> Dict[Tuple[str, int],
                                                                                        FetchResult]:
        """Kafka's Fetch: ``requests`` are (topic, partition, offset, partition max bytes).

        Waits up to ``max_wait_ms`` for ``min_bytes`` (woken by appends, never
        polling); per-partition errors come back as codes, as on the wire.
        """
        deadline = time.monotonic() + max_wait_ms / 1000.0
        with self._data_arrived:
            while True:
                results = self._fetch_once(requests, max_bytes, isolation_level)
                total = sum(len(r.records) for r in results.values() if r.records is not None)
                errors_seen = any(r.error_code for r in results.values())
                remaining = deadline - time.monotonic()
                if total >= min_bytes or errors_seen or remaining <= 0 or self.closed:
                    return results
                self._data_arrived.wait(remaining)

    def _fetch_once(self, requests: Sequence[Tuple[str, int, int, int]], max_bytes: int,
                    isolation_level: str) -> Dict[Tuple[str, int], FetchResult]:
        out: Dict[Tuple[str, int], FetchResult] = {}
        budget = max_bytes
        for topic, index, offset, partition_max in requests:
            try:
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
        """Kafka's ListOffsets: -1 latest, -2 earliest, else the first offset at or after
        ``timestamp``; -> (offset, timestamp), offset -1 when none is that late."""
        found = self.partition(topic, partition).offset_for_timestamp(timestamp)
        if found is None:
            return -1, -1
        return found

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Kafka's DeleteRecords: -> the new log start offset (offset -1: up to the high watermark)."""
        part = self.partition(topic, partition)
        return part.delete_records_before(part.high_watermark if offset == -1 else offset)

    # -- idempotent producers ------------------------------------------------------------

    def init_producer_id(self, transactional_id: Optional[str] = None) -> Tuple[int, int]:
        """Kafka's InitProducerId: a new producer id and epoch 0 for an idempotent producer.

        Ids are unique across restarts: they are reserved in blocks whose end is
        written (atomically) to ``pylogq-producer-ids`` before any id of the
        block is handed out.
        """
        if transactional_id is not None:
            raise errors.TransactionalIdAuthorizationFailedError(
                "transactions are not supported by this broker (transactional.id %r)" % transactional_id)
        with self._lock:
            self._check_open()
            if self._next_producer_id >= self._producer_id_limit:
                self._producer_id_limit = self._next_producer_id + PRODUCER_ID_BLOCK
                write_atomically(os.path.join(self.data_dir, PRODUCER_IDS_FILE),
                                 b"%d\n" % self._producer_id_limit)
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid, 0

    def _load_producer_ids(self) -> None:
        path = os.path.join(self.data_dir, PRODUCER_IDS_FILE)
        start = 0
        if os.path.exists(path):
            with open(path) as f:
                start = int(f.read().strip() or 0)
        self._next_producer_id = self._producer_id_limit = start

    # -- __consumer_offsets -------------------------------------------------------------

    def _ensure_offsets_topic(self) -> None:
        if OFFSETS_TOPIC in self._topics:
            return
        self._create_topic(OFFSETS_TOPIC, self.config["offsets.topic.num.partitions"], 1, {
            "cleanup.policy": "compact",
            "segment.bytes": self.config["offsets.topic.segment.bytes"],
            "compression.type": "producer",
        }, internal=True)

    def _append_offsets(self, partition: int, data: bytes) -> None:
        self._partitions[(OFFSETS_TOPIC, partition)].append(data, required_acks=-1)

    def _read_offsets(self, partition: int) -> Iterable[Tuple[Optional[bytes], Optional[bytes]]]:
        part = self._partitions[(OFFSETS_TOPIC, partition)]
        offset = part.log_start_offset
        while offset < part.high_watermark:
            region = part.read(offset, 1 << 20)
            if len(region) == 0:
                return
            columns = decode_columns(region.read(), start_offset=offset)
            if len(columns) == 0:
                return
            for i in range(len(columns)):
                yield columns.key(i), columns.value(i)
            offset = int(columns.offsets[-1]) + 1

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

    def add_append_listener(self, listener: Callable[[str, int], None]) -> None:
        """Call ``listener(topic, partition)`` after every produce, from the producing thread.

        The network server uses it to wake long-poll fetches without a thread per waiter.
        """
        self._append_listeners.append(listener)

    def remove_append_listener(self, listener: Callable[[str, int], None]) -> None:
        self._append_listeners.remove(listener)

    def serve(self, host: str = "127.0.0.1", port: int = 0, **options: Any) -> Tuple[str, int]:
        """Open a Kafka protocol listener in a background thread; -> its (host, port).

        ``port=0`` takes a free port. ``options`` are :class:`pylogq.server.KafkaServer`'s
        (``sasl_users={"alice": "secret"}`` requires SASL/PLAIN on this listener). The
        listener closes with the broker. Call it again for more listeners.
        """
        from .server import KafkaServer

        self._check_open()
        server = KafkaServer(self, listeners=[(host, port)], **options)
        server.start_in_thread()
        self._servers.append(server)
        return server.addresses[0]

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
            self._data_arrived.notify_all()
        marks = {tp: partition.high_watermark for tp, partition in self._partitions.items()}
        coordinator = getattr(self, "group_coordinator", None)
        if coordinator is not None:
            coordinator.close()
        for partition in list(self._partitions.values()):
            partition.close()
        self.logs.checkpoint_high_watermarks(marks)
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
