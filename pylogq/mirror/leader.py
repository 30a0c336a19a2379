"""The work of a flow that is done once however many processes run it: its leader's.

The process that runs task 0 of flow ``A->B`` is the flow's leader (:mod:`pylogq.mirror.worker`
hands task 0 out like any task, through the workers' group, so there is always exactly one
once the group is stable). On a thread of its own, each job on its schedule, it does what
Kafka's MirrorSourceConnector, MirrorCheckpointTask and MirrorHeartbeatTask do:

- **topics** (at start, then every ``refresh.topics.interval.seconds``): every source topic
  the flow mirrors gets its remote topic on the target, with the source's partition count,
  ``replication.factor`` replicas and the source's configs that ``config.properties.exclude``
  lets through (and, with ``use.defaults.from = source``, the source's defaults too); a
  remote topic with fewer partitions than its source gets the missing ones. The local
  tasks are told at once (``on_topics_changed``); tasks of other processes find them
  within a second (they look for the partitions they wait for every second);
- **topic configs** (every ``sync.topic.configs.interval.seconds``): a remote topic's
  copied configs follow its source's (set where they differ, deleted where the source is
  back at its default); configs the filter excludes are left alone on the target;
- **heartbeats** (every ``emit.heartbeats.interval.seconds``): a Heartbeat(A, B, now)
  record to the source's ``heartbeats`` topic, which the flow mirrors like any topic: the
  target's ``A.heartbeats`` shows the flow is alive end to end (Kafka writes Heartbeat(A, B)
  into B's ``heartbeats``, and the reverse direction's Heartbeat(B, A) into A's: the same
  topics come to exist on B, with other records; docs/mirroring.md);
- **checkpoints** (every ``emit.checkpoints.interval.seconds``, once the offset syncs have
  been read to their end): the committed offsets on the source of each consumer group the
  flow checkpoints (listed every ``refresh.groups.interval.seconds``; the mirror's own
  ``mm2-*`` groups excluded) translated through an
  :class:`~pylogq.mirror.offsets.OffsetSyncStore` fed from the offset-syncs topic, kept
  monotonic by a :class:`~pylogq.mirror.offsets.CheckpointStore` loaded from the checkpoints
  topic, and written to it (``A.checkpoints.internal`` on the target, partition 0);
- **group offsets** (with ``sync.group.offsets.enabled``, every
  ``sync.group.offsets.interval.seconds``): the checkpointed offsets committed to the same
  groups on the target, for groups with no member there (Empty, or unknown to it), and only
  where they move a partition forward.

A job that fails (a cluster not answering) is logged and tried again a few seconds later;
the leader goes on with the others. :func:`create_internal_topics` makes the flow's
internal topics; every worker calls it when it starts the flow. Not thread-safe but for
:meth:`FlowLeader.stop`, :meth:`FlowLeader.request_stop` and :meth:`FlowLeader.join`: its
clients are its thread's.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

from ..client.admin import AdminClient, ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from ..client.consumer import Consumer, OffsetAndMetadata, TopicPartition
from ..client.producer import Producer
from ..errors import (
    ConfigError,
    CorruptRecordError,
    InvalidPartitionsError,
    KafkaTimeoutError,
    PylogqError,
    TopicAlreadyExistsError,
)
from ._threads import Threaded
from .clients import FlowClients
from .config import FlowConfig
from .metrics import MirrorMetrics
from .offsets import CheckpointStore, OffsetSyncStore, checkpoints_for_group, offsets_to_sync
from .records import Heartbeat

__all__ = ["RETRY_S", "FlowLeader", "InternalTopic", "create_internal_topics", "internal_topics", "tasks_topic",
           "workers_group"]

log = logging.getLogger("pylogq.mirror.leader")

#: How soon a job that failed is tried again (its own interval when that is shorter).
RETRY_S = 5.0
#: The longest the leader's thread waits between two looks at its jobs and the offset syncs.
TICK_S = 0.5
#: Groups of the mirror itself (a flow's positions, a flow's workers): never checkpointed.
_MIRROR_GROUP = re.compile(r"mm2-.+->.+")


def tasks_topic(flow: FlowConfig) -> str:
    """The topic on the target whose partitions are the flow's tasks: ``mm2-tasks.<source>.internal``."""
    return "mm2-tasks.%s.internal" % flow.source


def workers_group(flow: FlowConfig) -> str:
    """The consumer group on the target of the processes sharing the flow's tasks: ``mm2-A->B-workers``."""
    return "mm2-%s-workers" % flow.name


class InternalTopic(NamedTuple):
    """An internal topic of a flow, and the setting its replication factor comes from."""

    side: str
    name: str
    partitions: int
    replication_factor: int
    configs: Dict[str, str]
    setting: str


_COMPACTED = {"cleanup.policy": "compact"}


def emits_checkpoints(flow: FlowConfig) -> bool:
    """Whether the flow writes checkpoints: ``emit.checkpoints.enabled`` with a positive interval,
    and offset syncs to translate from (Kafka's checkpoint connector runs no task without them)."""
    return flow.period("emit_checkpoints") is not None and flow.emit_offset_syncs_enabled


def internal_topics(flow: FlowConfig) -> List[InternalTopic]:
    """The internal topics ``flow`` needs, as Kafka's MirrorUtils makes them: single-partition
    compacted topics for offset syncs, checkpoints and heartbeats, and the tasks topic."""
    topics = [InternalTopic("target", tasks_topic(flow), flow.tasks_max, -1, {}, "the target's default")]
    if flow.emit_offset_syncs_enabled:
        topics.append(InternalTopic(flow.offset_syncs_side, flow.offset_syncs_topic, 1,
                                    flow.offset_syncs_topic_replication_factor, dict(_COMPACTED),
                                    "offset-syncs.topic.replication.factor"))
    if emits_checkpoints(flow):
        topics.append(InternalTopic("target", flow.checkpoints_topic, 1, flow.checkpoints_topic_replication_factor,
                                    dict(_COMPACTED), "checkpoints.topic.replication.factor"))
    if flow.period("emit_heartbeats") is not None:
        topics.append(InternalTopic("source", flow.heartbeats_topic, 1, flow.heartbeats_topic_replication_factor,
                                    dict(_COMPACTED), "heartbeats.topic.replication.factor"))
    return topics


def check_tasks_count(flow: FlowConfig, partitions: int) -> None:
    """The flow's tasks topic has ``partitions`` partitions: raise ConfigError unless that is
    ``tasks.max``. Every process of a flow must split it into the same tasks: with two counts,
    one source partition would belong to two tasks, copied twice, and, exactly once, by two
    transactional ids that cannot fence each other. A process started with a larger
    ``tasks.max`` grows the topic, and the processes with the smaller one stop their flow when
    they see it (at their next assignment); a smaller ``tasks.max`` needs every process of the
    flow stopped and the topic deleted."""
    if partitions != flow.tasks_max:
        raise ConfigError(
            "%s on cluster %s has %d partitions, but this process runs flow %s with tasks.max = %d: every "
            "process of a flow must have the same tasks.max (to lower it, stop every process of the flow and "
            "delete %s)" % (tasks_topic(flow), flow.target, partitions, flow.name, flow.tasks_max, tasks_topic(flow)))


def create_internal_topics(flow: FlowConfig, clients: FlowClients, timeout_s: Optional[float] = None) -> None:
    """Create the flow's internal topics that do not exist; a tasks topic with fewer partitions than
    ``tasks.max`` grows. A cluster not answering is tried again until ``timeout_s``
    (``admin.timeout.ms``); a refusal raises its error, naming the topic, the cluster and the
    setting to look at (a replication factor above the cluster's brokers)."""
    deadline = time.monotonic() + (flow.admin_timeout_ms / 1000.0 if timeout_s is None else timeout_s)
    admins: Dict[str, AdminClient] = {}
    try:
        for topic in internal_topics(flow):
            if topic.side not in admins:
                admins[topic.side] = clients.admin(topic.side, {"client_id": "mm2-%s-admin" % flow.name})
            admin = admins[topic.side]
            _retrying(lambda: _create_internal(admin, flow, topic), deadline)
    finally:
        for admin in admins.values():
            admin.close()


def _create_internal(admin: AdminClient, flow: FlowConfig, topic: InternalTopic) -> None:
    alias = flow.cluster_alias(topic.side)
    found = admin.describe_topics([topic.name])[0]
    if not found["error_code"]:
        if topic.name == tasks_topic(flow):
            have = len(found["partitions"])
            if have < topic.partitions:
                try:
                    admin.create_partitions({topic.name: NewPartitions(topic.partitions)})
                    log.info("grew %s on %s to %d partitions (tasks.max)", topic.name, alias, topic.partitions)
                    have = topic.partitions
                except InvalidPartitionsError:  # another process grew it meanwhile: look again
                    have = len(admin.describe_topics([topic.name])[0]["partitions"])
                    if have < topic.partitions:
                        raise
            check_tasks_count(flow, have)
        return
    try:
        admin.create_topics([NewTopic(topic.name, topic.partitions, topic.replication_factor,
                                      topic_configs=topic.configs)])
    except TopicAlreadyExistsError:
        return  # another process made it first
    except PylogqError as exc:
        if getattr(exc, "retriable", False):
            raise
        raise type(exc)("creating %s on cluster %s (%d partitions, replication factor %d: %s): %s"
                        % (topic.name, alias, topic.partitions, topic.replication_factor, topic.setting,
                           exc)) from None
    log.info("created %s on %s", topic.name, alias)


def _retrying(call: Callable[[], Any], deadline: float) -> Any:
    """``call()``, again after a retriable error until ``deadline``."""
    delay = 0.1
    while True:
        try:
            return call()
        except PylogqError as exc:
            if not getattr(exc, "retriable", False) or time.monotonic() + delay > deadline:
                raise
            log.debug("retrying after %s", exc)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


class _Job:
    """One of the leader's schedules: what to run and when next. ``run()`` answers False when
    its inputs are not ready yet (it is tried again at the next tick)."""

    __slots__ = ("name", "period", "run", "due")

    def __init__(self, name: str, period: Optional[int], run: Callable[[], bool], due: float) -> None:
        self.name = name
        self.period = period
        self.run = run
        self.due = due


class FlowLeader(Threaded):
    """The leader's jobs for one flow (module docstring), on a thread of their own.

    ``on_topics_changed`` is called (from the leader's thread) after remote topics or
    partitions were created, so the process's tasks look for them at once.
    """

    def __init__(self, flow: FlowConfig, clients: FlowClients, metrics: MirrorMetrics,
                 on_topics_changed: Optional[Callable[[], None]] = None) -> None:
        self.flow = flow
        self._clients = clients
        self._metrics = metrics
        self._on_topics_changed = on_topics_changed or (lambda: None)
        Threaded.__init__(self, "mirror-%s-leader" % flow.name)
        #: Why the leader's thread ended, if it failed.
        self.error: Optional[BaseException] = None
        #: How many times each job has run to the end (tests and status wait on these).
        self.runs: Dict[str, int] = {}
        # The thread's own from here on.
        self._source_admin: Optional[AdminClient] = None
        self._target_admin: Optional[AdminClient] = None
        self._source_meta: Optional[Consumer] = None
        self._target_meta: Optional[Consumer] = None
        self._heartbeats: Optional[Producer] = None
        self._checkpoint_producer: Optional[Producer] = None
        self._syncs_reader: Optional[Consumer] = None
        self._syncs_end = 0
        self._sync_store: Optional[OffsetSyncStore] = None
        self._checkpoint_store: Optional[CheckpointStore] = None
        self._groups: List[str] = []

    # -- control -----------------------------------------------------------------------------

    def start(self) -> None:
        """Run the flow's leader jobs, on a thread of their own."""
        self._start_thread()

    # -- the thread --------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._open()
            jobs = self._jobs()
            while not self._stopping.is_set():
                now = time.monotonic()
                for job in jobs:
                    if job.due > now or self._stopping.is_set():
                        continue
                    try:
                        if not job.run():
                            job.due = time.monotonic() + TICK_S
                            continue
                        self.runs[job.name] = self.runs.get(job.name, 0) + 1
                        job.due = float("inf") if job.period is None else time.monotonic() + job.period
                    except PylogqError as exc:
                        retry = RETRY_S if job.period is None else min(RETRY_S, job.period)
                        log.warning("flow %s: %s failed (again in %g s): %s", self.flow.name, job.name, retry, exc)
                        job.due = time.monotonic() + retry
                wait = max(0.0, min([job.due for job in jobs] + [time.monotonic() + TICK_S]) - time.monotonic())
                if self._syncs_reader is not None:
                    try:
                        self._read_syncs(wait)
                    except PylogqError as exc:
                        if not getattr(exc, "retriable", False):
                            raise
                        log.warning("flow %s: reading %s: %s", self.flow.name, self.flow.offset_syncs_topic, exc)
                        self._stopping.wait(min(wait, TICK_S))
                else:
                    self._stopping.wait(wait)
        except BaseException as exc:
            self.error = exc
            log.error("the leader of flow %s failed: %s", self.flow.name, exc,
                      exc_info=not isinstance(exc, PylogqError))
        finally:
            self._close()

    def _open(self) -> None:
        flow = self.flow
        clients = self._clients
        client_id = "mm2-%s-leader" % flow.name
        self._source_admin = clients.admin("source", {"client_id": client_id})
        self._target_admin = clients.admin("target", {"client_id": client_id})
        self._source_meta = clients.consumer("source", {"client_id": client_id}, group_id=None,
                                             enable_auto_commit=False)
        self._target_meta = clients.consumer("target", {"client_id": client_id}, group_id=None,
                                             enable_auto_commit=False)
        if flow.period("emit_heartbeats") is not None:
            self._heartbeats = clients.producer("source", {"client_id": client_id + "-heartbeats"},
                                                allow_auto_create_topics=False)
        if flow.period("emit_checkpoints") is not None and not flow.emit_offset_syncs_enabled:
            log.warning("flow %s writes no checkpoints: they are translated through offset syncs, and "
                        "emit.offset-syncs.enabled is false", flow.name)
        if emits_checkpoints(flow):
            self._checkpoint_producer = clients.producer("target", {"client_id": client_id + "-checkpoints"},
                                                         allow_auto_create_topics=False)
            self._checkpoint_store = CheckpointStore()
            loaded = self._load_checkpoints()
            # Kafka's rule: without the last checkpoints, only syncs read after the start are
            # trusted for more than their partition's latest (a rewind may be unread yet).
            self._sync_store = OffsetSyncStore(initialization_must_read_to_end=not loaded)
            self._open_syncs_reader()

    def _jobs(self) -> List[_Job]:
        flow = self.flow
        now = time.monotonic()
        jobs = [_Job("topics", flow.period("refresh_topics"), self._refresh_topics, now)]
        configs = flow.period("sync_topic_configs")
        if configs is not None:
            jobs.append(_Job("topic configs", configs, self._sync_configs, now + configs))
        if self._heartbeats is not None:
            jobs.append(_Job("heartbeats", flow.period("emit_heartbeats"), self._heartbeat, now))
        if self._checkpoint_producer is not None:
            jobs.append(_Job("groups", flow.period("refresh_groups"), self._refresh_groups, now))
            period = flow.period("emit_checkpoints")
            assert period is not None  # emits_checkpoints(flow)
            jobs.append(_Job("checkpoints", period, self._checkpoint, now + period))
            offsets = flow.period("sync_group_offsets")
            if offsets is not None:
                jobs.append(_Job("group offsets", offsets, self._sync_group_offsets, now + offsets))
        return jobs

    # -- topics --------------------------------------------------------------------------------

    def _partition_count(self, consumer: Optional[Consumer], topic: str) -> Optional[int]:
        assert consumer is not None
        found = consumer.partitions_for_topic(topic)
        return None if found is None else len(found)

    def _replicated_topics(self) -> Dict[str, int]:
        """The source topics the flow mirrors, with their partition counts."""
        assert self._source_meta is not None
        out: Dict[str, int] = {}
        for topic in sorted(self._source_meta.topics()):
            if self.flow.should_replicate_topic(topic):
                count = self._partition_count(self._source_meta, topic)
                if count:
                    out[topic] = count
        return out

    def _refresh_topics(self) -> bool:
        flow = self.flow
        admin = self._target_admin
        assert admin is not None
        changed = False
        for topic, count in self._replicated_topics().items():
            remote = flow.remote_topic(topic)
            have = self._partition_count(self._target_meta, remote)
            if have is None:
                configs = self._remote_configs(topic, for_creation=True)
                result = admin.create_topics([NewTopic(remote, count, flow.replication_factor,
                                                       topic_configs=configs)], raise_errors=False)[remote]
                if result is None:
                    log.info("flow %s: created %s with %d partitions", flow.name, remote, count)
                    changed = True
                elif not isinstance(result, TopicAlreadyExistsError):
                    log.warning("flow %s: could not create %s: %s", flow.name, remote, result)
            elif have < count:
                result = admin.create_partitions({remote: NewPartitions(count)}, raise_errors=False)[remote]
                if result is None:
                    log.info("flow %s: grew %s from %d to %d partitions", flow.name, remote, have, count)
                    changed = True
                else:
                    log.warning("flow %s: could not grow %s to %d partitions: %s", flow.name, remote, count, result)
        if changed:
            self._on_topics_changed()
        return True

    def _describe(self, admin: Optional[AdminClient], topic: str, config_filter: str) -> Dict[str, Dict[str, Any]]:
        assert admin is not None
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                           config_filter=config_filter)
        return described.get("topic", {}).get(topic, {})

    def _remote_configs(self, topic: str, for_creation: bool) -> Dict[str, Optional[str]]:
        """What source topic ``topic``'s remote topic should have, by key: the value to set, or
        (not ``for_creation``) None for a key to return to the target's default (Kafka's
        ``targetConfig`` with its incremental rule)."""
        flow = self.flow
        out: Dict[str, Optional[str]] = {}
        for key, entry in self._describe(self._source_admin, topic, "all").items():
            if entry.get("read_only") or entry.get("is_sensitive") or not flow.should_replicate_config_property(key):
                continue
            value = entry.get("value")
            if not entry.get("is_default") or flow.config_filter.should_replicate_source_default(key):
                if value is not None:
                    out[key] = str(value)
            elif not for_creation:
                out[key] = None
        return out

    def _sync_configs(self) -> bool:
        flow = self.flow
        admin = self._target_admin
        assert admin is not None
        for topic in self._replicated_topics():
            remote = flow.remote_topic(topic)
            if self._partition_count(self._target_meta, remote) is None:
                continue  # not created yet: it gets its configs when it is
            wanted = self._remote_configs(topic, for_creation=False)
            current = {key: str(entry.get("value")) for key, entry in self._describe(admin, remote, "modified").items()
                       if flow.should_replicate_config_property(key)}
            changes: Dict[str, Tuple[str, Optional[str]]] = {}
            for key, value in wanted.items():
                if value is None:
                    if key in current:
                        changes[key] = ("DELETE", None)
                elif current.get(key) != value:
                    changes[key] = ("SET", value)
            if not changes:
                continue
            result = admin.incremental_alter_configs([ConfigResource(ConfigResourceType.TOPIC, remote, changes)],
                                                     raise_errors=False)
            error = result.get("topic", {}).get(remote)
            if error is not None:
                log.warning("flow %s: could not sync the configs of %s: %s", flow.name, remote, error)
            else:
                log.info("flow %s: synced the configs of %s: %s", flow.name, remote,
                         ", ".join("%s=%s" % (k, "(default)" if v is None else v) for k, (_, v) in sorted(changes.items())))
        return True

    # -- heartbeats ----------------------------------------------------------------------------

    def _heartbeat(self) -> bool:
        producer = self._heartbeats
        assert producer is not None
        heartbeat = Heartbeat(self.flow.source, self.flow.target, int(time.time() * 1000))
        producer.send(self.flow.heartbeats_topic, heartbeat.encode_value(), heartbeat.encode_key(), partition=0)
        return True

    # -- offset syncs and checkpoints -------------------------------------------------------

    def _open_syncs_reader(self) -> None:
        flow = self.flow
        reader = self._syncs_reader = self._clients.consumer(
            flow.offset_syncs_side, {"client_id": "mm2-%s-leader-offset-syncs" % flow.name}, group_id=None,
            enable_auto_commit=False, auto_offset_reset="earliest")  # kept at once: _close closes it
        tp = TopicPartition(flow.offset_syncs_topic, 0)
        reader.assign([tp])
        reader.seek_to_beginning(tp)
        self._syncs_end = reader.end_offsets([tp])[tp]
        assert self._sync_store is not None
        if reader.position(tp) >= self._syncs_end:
            self._sync_store.mark_read_to_end()

    def _read_syncs(self, wait_s: float) -> None:
        """Feed the sync store what the offset-syncs topic has, waiting up to ``wait_s`` for it."""
        reader = self._syncs_reader
        store = self._sync_store
        assert reader is not None and store is not None
        polled = reader.poll(timeout_ms=int(wait_s * 1000))
        for records in polled.values():
            for record in records:
                try:
                    store.handle_record(record.key, record.value)
                except CorruptRecordError as exc:
                    log.warning("flow %s: skipped offset sync at offset %d: %s", self.flow.name, record.offset, exc)
        if not store.read_to_end:
            tp = TopicPartition(self.flow.offset_syncs_topic, 0)
            if reader.position(tp) >= self._syncs_end:
                store.mark_read_to_end()
                log.info("flow %s: read the offset syncs to their end (%d)", self.flow.name, self._syncs_end)

    def _load_checkpoints(self) -> bool:
        """Read the checkpoints topic into the checkpoint store; -> whether it was read whole."""
        flow = self.flow
        store = self._checkpoint_store
        assert store is not None
        try:
            with self._clients.consumer("target", {"client_id": "mm2-%s-leader-checkpoints" % flow.name},
                                        group_id=None, enable_auto_commit=False,
                                        auto_offset_reset="earliest") as reader:
                tp = TopicPartition(flow.checkpoints_topic, 0)
                reader.assign([tp])
                reader.seek_to_beginning(tp)
                end = reader.end_offsets([tp])[tp]
                deadline = time.monotonic() + flow.admin_timeout_ms / 1000.0
                while reader.position(tp) < end:
                    if time.monotonic() > deadline or self._stopping.is_set():
                        return False
                    for records in reader.poll(timeout_ms=500).values():
                        for record in records:
                            store.handle_record(record.key, record.value)
            return True
        except PylogqError as exc:
            log.warning("flow %s: could not read %s: %s", flow.name, flow.checkpoints_topic, exc)
            return False

    def _refresh_groups(self) -> bool:
        admin = self._source_admin
        assert admin is not None
        self._groups = sorted(group for group, _ in admin.list_consumer_groups()
                              if self.flow.should_replicate_group(group) and not _MIRROR_GROUP.fullmatch(group))
        return True

    def _checkpoint(self) -> bool:
        store = self._sync_store
        checkpoints = self._checkpoint_store
        producer = self._checkpoint_producer
        admin = self._source_admin
        assert store is not None and checkpoints is not None and producer is not None and admin is not None
        if not store.read_to_end:
            return False
        flow = self.flow
        written = True
        for group in self._groups:
            # One group's failure (its coordinator away, a refusal) holds back no other group's
            # checkpoints, as Kafka's checkpoint task goes on group by group.
            try:
                self._checkpoint_group(group)
            except PylogqError as exc:
                written = False
                log.warning("flow %s: no checkpoints of group %s this time: %s", flow.name, group, exc)
        return written

    def _checkpoint_group(self, group: str) -> None:
        """Write ``group``'s new checkpoints; they count as written (and are not written again until
        the group's offsets move) only once every one was acknowledged."""
        flow = self.flow
        store, checkpoints = self._sync_store, self._checkpoint_store
        producer, admin = self._checkpoint_producer, self._source_admin
        assert store is not None and checkpoints is not None and producer is not None and admin is not None
        listed = time.monotonic()
        upstream: Dict[Tuple[str, int], Optional[OffsetAndMetadata]] = {
            (tp.topic, tp.partition): offset for tp, offset in admin.list_consumer_group_offsets(group).items()}
        found = checkpoints_for_group(flow, store, checkpoints, group, upstream)
        if not found:
            return
        futures = [producer.send(flow.checkpoints_topic, checkpoint.encode_value(), checkpoint.encode_key(),
                                 partition=0) for checkpoint in found.values()]
        producer.flush(flow.admin_timeout_ms / 1000.0)
        for future in futures:
            if not future.is_done:
                raise KafkaTimeoutError("checkpoints of group %s unacknowledged after admin.timeout.ms (%d ms)"
                                        % (group, flow.admin_timeout_ms))
            if future.exception is not None:
                raise future.exception
        checkpoints.update(group, found)
        latency_ms = (time.monotonic() - listed) * 1000.0
        for tp in found:
            self._metrics.checkpoint_latency(flow.source, flow.target, group, tp.topic, tp.partition, latency_ms)

    def _sync_group_offsets(self) -> bool:
        checkpoints = self._checkpoint_store
        admin = self._target_admin
        assert checkpoints is not None and admin is not None
        flow = self.flow
        converted_offsets = checkpoints.converted_offsets()
        synced = True
        # The groups mirrored now (a group deleted on the source is left alone on the target).
        for group in self._groups:
            converted = converted_offsets.get(group)
            if not converted:
                continue
            try:
                [described] = admin.describe_consumer_groups([group])
                if described.state not in ("Empty", "Dead"):
                    continue  # its members own their offsets
                current: Optional[Mapping[TopicPartition, Optional[OffsetAndMetadata]]] = None
                if described.state == "Empty":
                    current = admin.list_consumer_group_offsets(group)
                moves = offsets_to_sync(converted, current)
                if not moves:
                    continue
                results = admin.alter_consumer_group_offsets(group, moves, raise_errors=False)
            except PylogqError as exc:
                synced = False
                log.warning("flow %s: could not sync the offsets of group %s on %s: %s", flow.name, group,
                            flow.target, exc)
                continue
            failed = {tp: error for tp, error in results.items() if error is not None}
            if failed:
                log.warning("flow %s: could not sync the offsets of group %s on %s (a member joined?): %s",
                            flow.name, group, flow.target, next(iter(failed.values())))
            else:
                log.debug("flow %s: synced %d offsets of group %s", flow.name, len(moves), group)
        return synced

    # -- ending ----------------------------------------------------------------------------------

    def _close(self) -> None:
        clients: List[Any] = [self._syncs_reader, self._heartbeats, self._checkpoint_producer, self._source_meta,
                              self._target_meta, self._source_admin, self._target_admin]
        for client in clients:
            if client is None:
                continue
            try:
                if isinstance(client, Producer):
                    client.close(timeout=5.0)
                else:
                    client.close()
            except Exception as exc:
                log.debug("the leader of flow %s: closing %r: %s", self.flow.name, client, exc)
        self._syncs_reader = self._heartbeats = self._checkpoint_producer = None
        self._source_meta = self._target_meta = None
        self._source_admin = self._target_admin = None
        self._metrics.forget_checkpoints(self.flow.source, self.flow.target)

