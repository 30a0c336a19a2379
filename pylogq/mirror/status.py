"""What a flow has mirrored and who mirrors it, read from the clusters (``pylogq mirror-maker status``),
and a group's offsets translated to a target (``pylogq mirror-maker translate-offsets``).

Nothing here asks a mirror maker process: everything a flow does leaves its state on the
clusters. :func:`flow_status` reads, for every source partition the flow mirrors, the
source's end offset (its high watermark), the flow's position (the committed offset of the
group ``mm2-A->B`` on the target for the remote partition: the next source offset to copy)
and their difference, the lag; and the members of the workers' group
(``mm2-A->B-workers``) with the tasks each runs (the partitions of the tasks topic assigned
to it). :func:`translate_group` reads the checkpoints topic of the source on the target to
its end and answers a group's latest checkpoint per remote partition, as Kafka's
``RemoteClusterUtils.translateOffsets`` does: what a consumer moving from the source to the
target commits there.

Each call opens its own clients and closes them; safe from any thread.
"""

from __future__ import annotations

import time
from typing import List, NamedTuple, Optional, Tuple

from ..client.consumer import Consumer, TopicPartition
from ..errors import KafkaTimeoutError
from .clients import ClientOptions, FlowClients, plain_client_options
from .config import FlowConfig, MirrorConfig
from .leader import tasks_topic, workers_group
from .offsets import TranslatedOffsets, translate_offsets
from .task import flow_group, task_of

__all__ = ["FlowStatus", "PartitionStatus", "WorkerStatus", "flow_status", "translate_group"]

#: How long reading a checkpoints topic to its end may take.
READ_TIMEOUT_S = 30.0


class PartitionStatus(NamedTuple):
    """One source partition of a flow: where the source ends, where the mirror is, how far behind.
    ``position`` None: the flow has copied nothing of it yet (lag counts from the log start)."""

    topic: str
    partition: int
    remote_topic: str
    task: int
    end_offset: int
    position: Optional[int]
    lag: int


class WorkerStatus(NamedTuple):
    """A member of a flow's workers' group and the tasks it was assigned."""

    member_id: str
    client_id: str
    host: str
    tasks: Tuple[int, ...]


class FlowStatus(NamedTuple):
    """A flow's partitions, and its workers' group (its state and members)."""

    flow: str
    partitions: List[PartitionStatus]
    workers_state: str
    workers: List[WorkerStatus]

    @property
    def lag(self) -> int:
        """The lag of every partition together."""
        return sum(p.lag for p in self.partitions)


def flow_status(flow: FlowConfig, client_options: Optional[ClientOptions] = None) -> FlowStatus:
    """Flow ``flow`` as the clusters show it now (module docstring)."""
    clients = FlowClients(flow, client_options or plain_client_options)
    with clients.consumer("source", {"client_id": "mm2-%s-status" % flow.name}, group_id=None,
                          enable_auto_commit=False) as source, \
            clients.admin("target", {"client_id": "mm2-%s-status" % flow.name}) as target:
        partitions = [TopicPartition(topic, p) for topic in sorted(source.topics())
                      if flow.should_replicate_topic(topic)
                      for p in sorted(source.partitions_for_topic(topic) or ())]
        ends = source.end_offsets(partitions) if partitions else {}
        starts = source.beginning_offsets(partitions) if partitions else {}
        committed = target.list_consumer_group_offsets(flow_group(flow))
        rows = []
        for tp in partitions:
            remote = TopicPartition(flow.remote_topic(tp.topic), tp.partition)
            found = committed.get(remote)
            position = found.offset if found is not None and found.offset >= 0 else None
            end = ends.get(tp, 0)
            lag = max(0, end - (position if position is not None else starts.get(tp, 0)))
            rows.append(PartitionStatus(tp.topic, tp.partition, remote.topic, task_of(tp.topic, tp.partition,
                                                                                       flow.tasks_max),
                                        end, position, lag))
        [group] = target.describe_consumer_groups([workers_group(flow)])
        topic = tasks_topic(flow)
        workers = []
        for member in group.members:
            assignment = getattr(member.member_assignment, "partitions", None) or {}
            tasks = tuple(sorted(p for p in assignment.get(topic, ()) if p < flow.tasks_max))
            workers.append(WorkerStatus(member.member_id, member.client_id, member.client_host, tasks))
    return FlowStatus(flow.name, rows, group.state, workers)


def translate_group(config: MirrorConfig, source: str, target: str, group: str,
                    client_options: Optional[ClientOptions] = None,
                    timeout_s: float = READ_TIMEOUT_S) -> TranslatedOffsets:
    """Consumer group ``group``'s offsets on cluster ``target``, translated from its offsets on
    ``source`` by the checkpoints of the flow ``source->target`` (the latest one of each remote
    partition): ``{TopicPartition: OffsetAndMetadata}`` to commit on the target. Empty when the
    flow has checkpointed nothing of the group (or no checkpoints topic exists)."""
    convert = client_options or plain_client_options
    props = config.client_config(target, "consumer")
    options = dict(convert(props, "consumer"))
    options.update(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
    options.setdefault("client_id", "mm2-translate-offsets")
    topic = config.policy.checkpoints_topic(source)
    records: List[Tuple[Optional[bytes], Optional[bytes]]] = []
    with Consumer(**options) as reader:
        if reader.partitions_for_topic(topic) is None:
            return TranslatedOffsets()
        tp = TopicPartition(topic, 0)
        reader.assign([tp])
        reader.seek_to_beginning(tp)
        end = reader.end_offsets([tp])[tp]
        deadline = time.monotonic() + timeout_s
        while reader.position(tp) < end:
            if time.monotonic() > deadline:
                raise KafkaTimeoutError("reading %s on %s to its end (offset %d) took more than %g s"
                                        % (topic, target, end, timeout_s))
            for batch in reader.poll(timeout_ms=500).values():
                records.extend((r.key, r.value) for r in batch)
    return translate_offsets(records, group)
