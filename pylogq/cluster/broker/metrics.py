"""What a broker's metrics read at a scrape: its logs, replicas, groups and their lag.

:func:`broker_readings` is the broker's collector (:meth:`pylogq.metrics.MetricsRegistry.add_collector`):
each scrape walks the partitions this broker hosts and the groups it coordinates, so
the values are those of the moment, and nothing is kept up to date between scrapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterator, List, Tuple

from ...metrics import Reading

if TYPE_CHECKING:
    from .admin import BrokerAdmin

__all__ = ["broker_readings"]

_STATE_GAUGES = {
    "Stable": "kafka_coordinator_group_groupmetadatamanager_numgroupsstable",
    "PreparingRebalance": "kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance",
    "CompletingRebalance": "kafka_coordinator_group_groupmetadatamanager_numgroupscompletingrebalance",
    "Empty": "kafka_coordinator_group_groupmetadatamanager_numgroupsempty",
    "Dead": "kafka_coordinator_group_groupmetadatamanager_numgroupsdead",
}


def broker_readings(broker: "BrokerAdmin") -> Iterator[Reading]:
    if broker.closed:
        return
    yield from _log_and_replica_readings(broker)
    yield from _group_readings(broker)
    yield from _cleaner_readings(broker)
    yield from _cluster_readings(broker)


def _log_and_replica_readings(broker: "BrokerAdmin") -> Iterator[Reading]:
    partitions = broker.hosted_partitions()
    leaders = under = under_min = 0
    per_topic: Dict[str, int] = {}
    for part in partitions:
        labels = (part.topic, str(part.index))
        log = part.log
        try:
            size, segments = log.size_in_bytes, log.num_segments
        except (ValueError, OSError):  # closed or deleted meanwhile
            continue
        yield "kafka_log_log_size", labels, size
        yield "kafka_log_log_numlogsegments", labels, segments
        yield "kafka_log_log_logendoffset", labels, part.log_end_offset
        yield "kafka_log_log_logstartoffset", labels, part.log_start_offset
        per_topic[part.topic] = per_topic.get(part.topic, 0) + 1
        if not part.is_leader:
            continue
        leaders += 1
        isr = len(part.isr)
        lacking = isr < len(part.assignment)
        under += lacking
        under_min += isr < log.config.min_insync_replicas
        yield "kafka_cluster_partition_underreplicated", labels, int(lacking)
        yield "kafka_topic_partition_current_offset", labels, part.high_watermark
        yield "kafka_topic_partition_oldest_offset", labels, part.log_start_offset
    yield "kafka_server_replicamanager_partitioncount", (), len(partitions)
    yield "kafka_server_replicamanager_leadercount", (), leaders
    yield "kafka_server_replicamanager_underreplicatedpartitions", (), under
    yield "kafka_server_replicamanager_underminisrpartitioncount", (), under_min
    yield "kafka_server_replicamanager_offlinereplicacount", (), 0
    if broker.cluster is None:
        for topic, count in per_topic.items():
            yield "kafka_topic_partitions", (topic,), count
    else:
        replicas = broker.cluster.replicas
        yield "kafka_server_replicamanager_isrshrinks", (), replicas.isr_shrinks
        yield "kafka_server_replicamanager_isrexpands", (), replicas.isr_expands
        for side, quota in (("leader", replicas.leader_quota), ("follower", replicas.follower_quota)):
            yield "kafka_server_%sreplication_throttledbytes" % side, (), quota.throttled_bytes
            yield "kafka_server_%sreplication_byte_rate" % side, (), quota.rate()


def _group_readings(broker: "BrokerAdmin") -> Iterator[Reading]:
    coordinator = broker.group_coordinator
    groups = coordinator.metrics_snapshot()
    counts = dict.fromkeys(_STATE_GAUGES, 0)
    offsets = 0
    for group_id, state, members, committed in groups:
        counts[state] = counts.get(state, 0) + 1
        offsets += len(committed)
        yield "kafka_consumergroup_members", (group_id,), members
        sums: Dict[str, int] = {}
        for (topic, index), offset in committed:
            part = broker.hosted((topic, index))
            labels = (group_id, topic, str(index))
            yield "kafka_consumergroup_current_offset", labels, offset
            if part is None or not part.is_leader or offset < 0:
                continue  # another broker leads it and publishes its end
            lag = max(0, part.high_watermark - offset)
            yield "kafka_consumergroup_lag", labels, lag
            sums[topic] = sums.get(topic, 0) + lag
        for topic, total in sums.items():
            yield "kafka_consumergroup_lag_sum", (group_id, topic), total
    yield "kafka_coordinator_group_groupmetadatamanager_numgroups", (), len(groups)
    for state, name in _STATE_GAUGES.items():
        yield name, (), counts.get(state, 0)
    yield "kafka_coordinator_group_groupmetadatamanager_numoffsets", (), offsets
    yield "kafka_server_group_coordinator_metrics_group_completed_rebalance", (), coordinator.completed_rebalances


def _cleaner_readings(broker: "BrokerAdmin") -> Iterator[Reading]:
    cleaner = broker.logs.cleaner
    if cleaner is None:
        return
    totals = cleaner.totals()
    yield "kafka_log_logcleaner_cleanings", (), totals.cleanings
    yield "kafka_log_logcleaner_cleaned_bytes", (), totals.bytes_read
    yield "kafka_log_logcleaner_max_clean_time_secs", (), totals.max_clean_time_s
    yield "kafka_log_logcleaner_cleaner_recopy_percent", (), totals.recopy_percent
    yield "kafka_log_logcleanermanager_max_dirty_percent", (), totals.max_dirty_percent


def _cluster_readings(broker: "BrokerAdmin") -> Iterator[Reading]:
    cluster = broker.cluster
    if cluster is None:
        topics: List[Tuple[str, int]] = [(t, broker.partitions_for(t)) for t in broker.list_topics(True)]
        yield "kafka_brokers", (), 1
        yield "kafka_controller_kafkacontroller_activecontrollercount", (), 1
        yield "kafka_controller_kafkacontroller_offlinepartitionscount", (), 0
        yield "kafka_controller_kafkacontroller_globaltopiccount", (), len(topics)
        yield "kafka_controller_kafkacontroller_globalpartitioncount", (), sum(n for _, n in topics)
        return
    yield "kafka_brokers", (), len(cluster.metadata.live_brokers())
    controller = cluster.controller
    active = controller.active
    yield "kafka_controller_kafkacontroller_activecontrollercount", (), int(active)
    if active:
        states = dict(controller.states)
        assignments = dict(controller.assignments)
        yield "kafka_controller_kafkacontroller_offlinepartitionscount", (), sum(
            1 for s in states.values() if s.leader < 0)
        yield "kafka_controller_kafkacontroller_globaltopiccount", (), len(assignments)
        yield "kafka_controller_kafkacontroller_globalpartitioncount", (), sum(len(a) for a in assignments.values())
        for topic, assignment in assignments.items():
            yield "kafka_topic_partitions", (topic,), len(assignment)
