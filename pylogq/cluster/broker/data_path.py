"""A broker's data path: produce, fetch, offsets, and the requests of its cluster's replicas.

:class:`BrokerDataPath` holds the calls of :class:`pylogq.Broker` that read and write
partitions, as Kafka's ReplicaManager does: Produce (acks=all a delayed operation in a
cluster), Fetch (a long poll parked in the fetch purgatory; from v11 followers serve
consumers too, and a leader may send a consumer to the replica of its rack, KIP-392),
ListOffsets, DeleteRecords, DescribeProducers; the controller's and
followers' requests (LeaderAndIsr, UpdateMetadata, StopReplica, a follower's Fetch,
OffsetForLeaderEpoch); and the plumbing of the group coordinator's offsets to
``__consumer_offsets`` (FindCoordinator, the replication barrier after its writes,
OffsetDelete, TxnOffsetCommit, and the transaction markers it must hear of).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ... import errors
from ..contract import (
    EpochEndOffset,
    FetchRequest,
    FetchResult,
    FetchResults,
    LeaderAndIsrRequest,
    OffsetDeleteResult,
    ProducerDescription,
    ProduceResult,
    RecordBytes,
    ReplicaFetchPartition,
    StopReplicaRequest,
    TopicDescription,
    TxnOffset,
    UpdateMetadataRequest,
)
from ..coordinator.group.metadata_manager import storage_error_code
from ..coordinator.group.offsets_topic import OFFSETS_TOPIC
from ..delayed import DelayedCall, Tapped
from ..state.partition import NO_LEADER, Partition
from .lifecycle import BrokerLifecycle
from .replica_selector import ReplicaSelector, partition_view, replica_selector

if TYPE_CHECKING:
    from .cluster_node import ClusterNode

__all__ = ["BrokerDataPath"]


class BrokerDataPath(BrokerLifecycle):
    """The data path of a :class:`pylogq.Broker`: its partitions' reads and writes, the
    replicas' requests, and the group coordinator's offsets in ``__consumer_offsets``.

    A mixin over the broker's state (:class:`~.lifecycle.BrokerLifecycle`); every call that
    waits is a delayed operation (:mod:`..delayed`), never a thread. Thread-safe: producers
    and consumers call from their own threads.
    """

    if TYPE_CHECKING:  # the administration's (:class:`~.admin.BrokerAdmin`), which Broker combines with this
        def auto_create_topic(self, name: str) -> TopicDescription: ...

    # -- partitions, produce and fetch -------------------------------------------------

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

    def readable_partition(self, topic: str, index: int, follower_ok: bool = False) -> Partition:
        """The partition a consumer's fetch reads: one this broker leads (:meth:`leader_partition`),
        or with ``follower_ok`` (a Fetch v11+, which may come from a consumer the leader sent
        here, KIP-392) also one it follows. A replica without a role yet serves neither."""
        if follower_ok:
            part = self.partition(topic, index)
            if not part.is_leader and part.leader_id != NO_LEADER:
                return part
        return self.leader_partition(topic, index)

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

    def fetch(self, requests: Sequence[FetchRequest], max_wait_ms: int = 500, min_bytes: int = 1,
              max_bytes: int = 52428800, isolation_level: str = "read_uncommitted",
              client_rack: Optional[str] = None) -> FetchResults:
        """Kafka's Fetch: ``requests`` are (topic, partition, offset, partition max bytes).

        Waits up to ``max_wait_ms`` for ``min_bytes`` (a delayed operation woken by
        appends, never polling); per-partition errors come back as codes, as on the wire.
        ``client_rack``: see :meth:`fetch_async`.
        """
        op = self.fetch_async(requests, max_wait_ms, min_bytes, max_bytes, isolation_level, client_rack=client_rack)
        op.wait()
        return op.answer()

    def fetch_async(self, requests: Sequence[FetchRequest], max_wait_ms: int, min_bytes: int, max_bytes: int,
                    isolation_level: str = "read_uncommitted",
                    deliver: Callable[[FetchResults], None] = lambda results: None,
                    client_rack: Optional[str] = None) -> "DelayedCall[FetchResults]":
        """:meth:`fetch` as a delayed operation: ``deliver(results)`` gets the answer.

        It completes at once when ``min_bytes`` are there, a partition failed, a partition
        names a preferred read replica, or there is nothing to wait for; otherwise it
        watches the requested partitions and is checked after each high watermark
        advance of one of them, or answered at ``max_wait_ms`` with what is there then.
        No thread waits for it.

        ``client_rack`` is the consumer's rack of a Fetch v11+ ("" when it named none),
        None for an older one (Kafka's client metadata, KIP-392). With it, a partition this
        broker follows is served too, up to this replica's high watermark; and a leader
        whose ``replica.selector.class`` prefers another replica for that rack answers the
        partition with that broker as ``preferred_read_replica`` and no records.
        """
        def read() -> FetchResults:
            return self._fetch_once(requests, max_bytes, isolation_level, client_rack)

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

    def _fetch_once(self, requests: Sequence[FetchRequest], max_bytes: int, isolation_level: str,
                    client_rack: Optional[str] = None) -> FetchResults:
        out: Dict[Tuple[str, int], FetchResult] = {}
        budget = max_bytes
        committed = isolation_level == "read_committed"
        if not committed and isolation_level != "read_uncommitted":
            raise errors.InvalidArgumentError("isolation_level must be 'read_uncommitted' or 'read_committed', got %r"
                                              % (isolation_level,))
        selector = replica_selector(self.config.node.replica_selector_class) if client_rack else None
        for topic, index, offset, partition_max in requests:
            try:
                if self.closed:  # shutting down: the client goes to the partition's next leader
                    raise errors.NotLeaderOrFollowerError("broker %d is shutting down" % self.broker_id)
                part = self.readable_partition(topic, index, follower_ok=client_rack is not None)
                if selector is not None and client_rack and part.is_leader:
                    preferred = self._preferred_read_replica(part, selector, client_rack, offset)
                    if preferred is not None:
                        # As Kafka's leader: no read, the consumer asks that replica next.
                        out[(topic, index)] = FetchResult(0, part.high_watermark, part.log_start_offset,
                                                          RecordBytes(b""), preferred)
                        continue
                limit = max(0, min(partition_max, budget))
                if committed:
                    region, lso, aborted = part.read_committed(offset, limit, min_one_batch=budget == max_bytes)
                    budget -= len(region)
                    out[(topic, index)] = FetchResult(0, part.high_watermark, part.log_start_offset, region, -1, lso,
                                                      [(txn.producer_id, txn.first_offset) for txn in aborted])
                    continue
                region = part.read(offset, limit, isolation_level, min_one_batch=budget == max_bytes)
                budget -= len(region)
                out[(topic, index)] = FetchResult(0, part.high_watermark, part.log_start_offset, region, -1,
                                                  part.last_stable_offset)
            except errors.BrokerError as exc:
                hw = ls = -1
                found = self._partitions.get((topic, index))
                if found is not None:
                    hw, ls = found.high_watermark, found.log_start_offset
                out[(topic, index)] = FetchResult(exc.code, hw, ls, None)
        return out

    def _preferred_read_replica(self, part: Partition, selector: ReplicaSelector, client_rack: str,
                                offset: int) -> Optional[int]:
        """The broker ``selector`` prefers for a consumer in ``client_rack`` fetching ``part`` (led
        here) at ``offset``, when that is not this broker; else None. Single nodes have no other."""
        if self.cluster is None:
            return None
        followers = {}
        for broker_id in part.assignment:
            state = part.replica_state(broker_id)
            if state is not None:
                followers[broker_id] = (state.log_start_offset, state.log_end_offset, state.last_caught_up_ms)
        racks = {b: r.rack for b, r in self.cluster.metadata.live_brokers().items()}
        view = partition_view(self.broker_id, part.log_end_offset, part.isr, followers, racks, offset,
                              int(time.time() * 1000))
        chosen = selector.select(part.topic, part.index, client_rack, view)
        if chosen is None or chosen.broker_id == self.broker_id:
            return None
        return chosen.broker_id

    def list_offsets(self, topic: str, partition: int, timestamp: int,
                     isolation_level: str = "read_uncommitted") -> Tuple[int, int]:
        """Kafka's ListOffsets: -1 latest, -2 earliest (and -4, earliest local), -3 the record
        with the largest timestamp, else the first offset at or after ``timestamp``;
        -> (offset, timestamp), offset -1 when none is that late (and for -5, latest tiered).
        Bounded by the high watermark, or the last stable offset for ``read_committed``."""
        found = self.leader_partition(topic, partition).offset_for_timestamp(timestamp, isolation_level)
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

    # -- producers ------------------------------------------------------------------------

    def describe_producers(self, topic: str, partition: int) -> List[ProducerDescription]:
        """Kafka's DescribeProducers for one partition: its active idempotent producers, as this
        broker's replica knows them, leader or follower (KIP-664: an administrator looking for
        hanging transactions asks each replica); NotLeaderOrFollowerError without one here."""
        return self.partition(topic, partition).active_producers()

    # -- groups ----------------------------------------------------------------------------

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

    def partitions_exist(self, partitions: Sequence[Tuple[str, int]]) -> List[bool]:
        """Whether each partition exists, as Kafka's KafkaApis checks against its metadata
        cache: in a cluster the cluster's partitions, wherever their replicas live."""
        with self._lock:
            self._check_open()
            if self.cluster is not None:
                metadata = self.cluster.metadata
                return [metadata.partition(t, p) is not None for t, p in partitions]
            return [tp in self._partitions for tp in partitions]

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                          generation_id: int, member_id: str, group_instance_id: Optional[str],
                          offsets: Mapping[Tuple[str, int], TxnOffset]) -> Dict[Tuple[str, int], int]:
        """Kafka's TxnOffsetCommit: the group coordinator writes the offsets as a transactional
        batch of ``producer_id`` and holds them until the transaction's marker
        (:meth:`~pylogq.cluster.coordinator.group.coordinator.GroupCoordinator.txn_offset_commit_pending`);
        -> each partition's code. ``transactional_id`` is the caller's to authorize (WRITE
        on it, as the server does). Partitions that do not exist answer
        UNKNOWN_TOPIC_OR_PARTITION (:meth:`partitions_exist`). In a cluster the answer waits
        until every in-sync replica of the group's ``__consumer_offsets`` partition has the
        write, as an offset commit's does; if it does not get there the offsets are dropped
        and the partitions answer the coordinator's code for it."""
        wanted = list(offsets)
        exists = self.partitions_exist(wanted)
        known = {tp: offsets[tp] for tp, ok in zip(wanted, exists) if ok}
        codes: Dict[Tuple[str, int], int] = {}
        if known:
            codes, complete = self.group_coordinator.txn_offset_commit_pending(
                group_id, producer_id, producer_epoch, generation_id, member_id, group_instance_id, known)
            if self.cluster is None or not any(c == 0 for c in codes.values()):
                complete(0)
            else:
                op = self.group_writes_replicated_async(group_id, True, deliver=complete)
                op.wait()
                code = op.answer()
                codes = {tp: c or code for tp, c in codes.items()}
        codes.update({tp: errors.UnknownTopicOrPartitionError.code for tp, ok in zip(wanted, exists) if not ok})
        return codes

    def txn_markers_appended(self, topic: str, partition: int, producer_id: int, committed: bool) -> None:
        """The broker appended ``producer_id``'s COMMIT (``committed``) or ABORT marker to
        ``topic``-``partition`` (WriteTxnMarkers): on a partition of ``__consumer_offsets``
        the group coordinator commits or drops the producer's pending offsets of its groups
        (Kafka's onTransactionCompleted). Other topics need nothing."""
        if topic == OFFSETS_TOPIC:
            self.group_coordinator.complete_txn(partition, producer_id, committed)

    def delete_offsets(self, group_id: str, partitions: Sequence[Tuple[str, int]]) -> OffsetDeleteResult:
        """Kafka's OffsetDelete: partitions that do not exist answer UNKNOWN_TOPIC_OR_PARTITION
        (:meth:`partitions_exist`), the group coordinator deletes the others' offsets."""
        exists = self.partitions_exist(partitions)
        known = [tp for tp, ok in zip(partitions, exists) if ok]
        unknown = {tp: errors.UnknownTopicOrPartitionError.code for tp, ok in zip(partitions, exists) if not ok}
        group_error, codes = self.group_coordinator.delete_offsets(group_id, known)
        if group_error:
            return group_error, {}
        codes.update(unknown)
        return group_error, codes

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

    def leader_epoch_of(self, topic: str, partition: int, follower_ok: bool = False) -> int:
        """The leader epoch of a partition this broker leads (NotLeaderOrFollowerError if not);
        with ``follower_ok``, or follows (the epoch a consumer's Fetch v11+ to a follower is
        fenced against, as on the leader)."""
        return self.readable_partition(topic, partition, follower_ok).leader_epoch


def _coordinator_code(code: int, for_commit: bool) -> int:
    """A replication wait's code as the group coordinator answers it (Kafka's mapping)."""
    if not code:
        return 0
    error = errors.error_for_code(code)
    return storage_error_code(error("") if error is not None else errors.UnknownServerError(""), for_commit)


def _enough(results: FetchResults, min_bytes: int) -> bool:
    """Whether a fetch can be answered: ``min_bytes`` are there, or a partition failed or
    sends the consumer to another replica (which it should not wait to hear)."""
    size = 0
    for r in results.values():
        if r.error_code or r.preferred_read_replica >= 0:
            return True
        if r.records is not None:
            size += len(r.records)
    return size >= min_bytes
