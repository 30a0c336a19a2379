"""Which replica's files a Spark read takes, when several brokers' log directories hold a partition.

A replicated topic has a copy of each partition in the log directory of each
broker that is one of its replicas. Given every broker's log directories, a
read takes exactly one replica's partition directory per partition, so no
record is read twice, and bounds the read by a high watermark, so no record
that was not committed is read:

- from files alone, the replica with the highest high watermark in its log
  directory's ``replication-offset-checkpoint``. A replica's own high
  watermark proves that the records below it are committed, and so the same
  on every replica that holds them; records above it may be an old leader's
  that no other replica ever took (and that the new leader's records
  replace at the same offsets), so an ex-leader whose checkpoint is lower is
  never chosen over the replicas that went on. The read ends at that high
  watermark (``partition_bounds`` caps the end by the chosen directory's
  checkpoint) even when the files hold more;
- with ``bootstrap_servers``, a replica that the cluster's Metadata lists in
  the partition's ISR; the read ends at the leader's high watermark
  (ListOffsets latest), which every ISR member holds. With ``client_rack``
  too, an ISR member on a broker of that rack (``broker.rack``, as the
  cluster describes its brokers) when one was given, as a consumer with
  ``client.rack`` is sent to one (KIP-392); else any ISR member, as without.
  A rack changes which copy is read, never which copies are safe to read.

A replica whose log directory has no checkpoint entry for the partition has
no known high watermark: it is chosen only when no replica has one, and then
the read is a single directory's read of the replica with the longest log
(every whole batch on disk counts as committed, which holds for a topic that
was never replicated but not for an ex-leader's records above what was
acknowledged).

Replicas that qualify equally are spread over the brokers by partition
number, so one host does not serve every partition. A broker is known by
the ``broker.id`` (or ``node.id``) of the ``meta.properties`` in its log
directory; a partition found in two directories that are not known to be of
different brokers is an error, as it is for one broker.

Spark's Python Data Source API (PySpark 4.x) gives an ``InputPartition`` no
preferred locations, so a task is not sent to the host of the replica it
reads: the chosen directories must be readable from every executor (a shared
filesystem), and the spreading above balances the reads over the brokers'
disks, not over the network.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from ..cluster.contract import TopicPartitionInfo
from ..config import parse_properties
from ..errors import InvalidArgumentError, PylogqError, UnknownTopicOrPartitionError
from ..storage.checkpoint import REPLICATION_CHECKPOINT, OffsetCheckpoint
from ..storage.partition_metadata import META_FILE, meta_broker_id

__all__ = ["Replica", "broker_id_of", "choose_replicas"]


class Replica(NamedTuple):
    """One partition directory and the broker whose log directory holds it (None: not known)."""

    broker_id: Optional[int]
    directory: str  # <log dir>/<topic>-<partition>

    @property
    def log_dir(self) -> str:
        return os.path.dirname(self.directory)


def broker_id_of(log_dir: str) -> Optional[int]:
    """The ``broker.id`` (or KRaft's ``node.id``) in ``log_dir``'s ``meta.properties``; None without one."""
    path = os.path.join(log_dir, META_FILE)
    try:
        with open(path, "rb") as f:
            props = parse_properties(f.read().decode("utf-8", "replace"))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PylogqError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    key, broker_id = meta_broker_id(props)
    if broker_id is None:
        raise PylogqError("%s has no integer broker.id or node.id (%r)" % (path, props.get(key, "").strip()))
    return broker_id


def choose_replicas(topic: str, candidates: Mapping[int, Sequence[str]], log_end: Callable[[str], int],
                    bootstrap_servers: Union[None, str, Sequence[str]] = None,
                    client_rack: Optional[str] = None) -> Dict[int, str]:
    """partition -> the one partition directory to read, of the ``candidates`` found for it.

    ``log_end(directory)`` is the end of the last whole batch in a partition
    directory's files (used only when no candidate has a checkpointed high
    watermark). A partition found once is read there, as with one broker,
    unless ``bootstrap_servers`` shows its broker out of the ISR. See the
    module docstring for the choice among several, and ``client_rack``'s
    preference among the ISR members (it needs ``bootstrap_servers``: the
    racks and the ISR are the cluster's; InvalidArgumentError without).

    Raises PylogqError when two directories of one broker (or of brokers
    not told apart by a ``meta.properties``) hold a partition, or, with
    ``bootstrap_servers``, when no directory given is of an ISR member.
    """
    if client_rack is not None and not isinstance(client_rack, str):
        raise InvalidArgumentError("client_rack must be a string, not %r" % (client_rack,))
    if client_rack and not bootstrap_servers:
        raise InvalidArgumentError("client_rack %r needs bootstrap_servers: the brokers' racks and each "
                                   "partition's ISR come from the cluster's metadata" % client_rack)
    brokers: Dict[str, Optional[int]] = {}
    replicas: Dict[int, List[Replica]] = {}
    for p, directories in sorted(candidates.items()):
        found: List[Replica] = []
        for directory in directories:
            log_dir = os.path.dirname(directory)
            if log_dir not in brokers and (len(directories) > 1 or bootstrap_servers):
                brokers[log_dir] = broker_id_of(log_dir)
            found.append(Replica(brokers.get(log_dir), directory))
        if len(found) > 1:
            _check_distinct_brokers(topic, p, found)
        replicas[p] = sorted(found, key=lambda r: (r.broker_id if r.broker_id is not None else -1, r.directory))
    in_sync: Dict[int, TopicPartitionInfo] = {}
    racks: Dict[int, Optional[str]] = {}
    if bootstrap_servers and any(r.broker_id is not None for found in replicas.values() for r in found):
        in_sync, racks = _cluster_partitions(bootstrap_servers, topic, bool(client_rack))
    checkpoints: Dict[str, Dict[Tuple[str, int], int]] = {}
    chosen: Dict[int, str] = {}
    for p, found in replicas.items():
        if p in in_sync and any(r.broker_id is not None for r in found):
            chosen[p] = _in_sync_replica(topic, p, found, in_sync[p], racks, client_rack).directory
        elif len(found) == 1:
            chosen[p] = found[0].directory
        else:
            chosen[p] = _by_high_watermark(topic, p, found, checkpoints, log_end).directory
    return chosen


def _check_distinct_brokers(topic: str, partition: int, found: Sequence[Replica]) -> None:
    """Two directories holding one partition must be of two known brokers."""
    unknown = next((r for r in found if r.broker_id is None), None)
    if unknown is not None:
        other = next(r for r in found if r is not unknown)
        raise PylogqError("partition %s-%d is in %s and in %s, and %s has no %s: cannot tell whether they are "
                          "replicas on two brokers" % (topic, partition, unknown.directory, other.directory,
                                                       unknown.log_dir, META_FILE))
    seen: Dict[Optional[int], Replica] = {}
    for r in found:
        if r.broker_id in seen:
            raise PylogqError("partition %s-%d is in two log directories of broker %s: %s and %s"
                              % (topic, partition, r.broker_id, seen[r.broker_id].directory, r.directory))
        seen[r.broker_id] = r


def _spread(partition: int, tied: Sequence[Replica]) -> Replica:
    """One of equally good replicas (in broker order), rotated by partition number."""
    return tied[partition % len(tied)]


def _by_high_watermark(topic: str, partition: int, found: Sequence[Replica],
                       checkpoints: Dict[str, Dict[Tuple[str, int], int]], log_end: Callable[[str], int]) -> Replica:
    """The replica with the highest checkpointed high watermark; with none checkpointed, the longest log."""
    marks: Dict[Replica, int] = {}
    for r in found:
        if r.log_dir not in checkpoints:
            checkpoints[r.log_dir] = OffsetCheckpoint(os.path.join(r.log_dir, REPLICATION_CHECKPOINT)).read()
        mark = checkpoints[r.log_dir].get((topic, partition))
        if mark is not None:
            marks[r] = mark
    if not marks:
        # No replica proves anything committed: take the most records, as a single directory's read does.
        marks = {r: log_end(r.directory) for r in found}
    best = max(marks.values())
    return _spread(partition, [r for r in found if marks.get(r) == best])


def _in_sync_replica(topic: str, partition: int, found: Sequence[Replica], info: TopicPartitionInfo,
                     racks: Mapping[int, Optional[str]], client_rack: Optional[str]) -> Replica:
    """A replica in the partition's ISR, among the directories given, one in ``client_rack``
    when there is such; PylogqError when there is none in the ISR."""
    members = [r for r in found if r.broker_id is not None and r.broker_id in info.isr]
    if not members:
        raise PylogqError(
            "partition %s-%d: no log directory given is of a replica in its ISR %s (leader %d); the directories "
            "given hold it as %s: give the log directories of an in-sync replica"
            % (topic, partition, sorted(info.isr), info.leader,
               ", ".join("%s (broker %s)" % (r.directory, "unknown" if r.broker_id is None else r.broker_id)
                         for r in found)))
    if client_rack:
        local = [r for r in members if r.broker_id is not None and racks.get(r.broker_id) == client_rack]
        if local:
            return _spread(partition, local)
    return _spread(partition, members)


def _cluster_partitions(bootstrap_servers: Union[str, Sequence[str]], topic: str, with_racks: bool = False
                        ) -> Tuple[Dict[int, TopicPartitionInfo], Dict[int, Optional[str]]]:
    """(partition -> its leader, replicas and ISR, from a Metadata request to the cluster; and
    with ``with_racks``, broker id -> its ``broker.rack``, from DescribeCluster)."""
    from ..client.tcp import TcpTransport

    transport = TcpTransport(bootstrap_servers)
    try:
        try:
            described = transport.describe_topic(topic)
        except UnknownTopicOrPartitionError:
            raise UnknownTopicOrPartitionError("topic %r does not exist on the broker at %s"
                                               % (topic, bootstrap_servers)) from None
        racks = {b.broker_id: b.rack for b in transport.describe_cluster().brokers} if with_racks else {}
    finally:
        transport.close()
    return {info.partition: info for info in described.partitions}, racks
