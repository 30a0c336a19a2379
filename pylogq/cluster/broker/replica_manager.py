"""The replicas a broker of a cluster hosts, as leaders and followers (Kafka's ReplicaManager).

The controller decides, the replica manager carries out: a LeaderAndIsr request makes
each named replica a leader (:meth:`Partition.make_leader`) or a follower
(:meth:`Partition.make_follower`, then a fetcher copies it from its leader), a
StopReplica stops (and may delete) replicas. Both are fenced: a request from an older
controller epoch than one already seen answers STALE_CONTROLLER_EPOCH, one for an
earlier life of this broker STALE_BROKER_EPOCH, and a partition's state only moves to
a newer leader epoch.

It also owns what waits on replication:

- an acks=all produce is a delayed operation watched under its partition and
  completed when the high watermark passes its records (or the leadership is lost,
  or ``timeout_ms`` passes: REQUEST_TIMED_OUT);
- a follower's fetch long-polls as a delayed operation woken by appends to the leader;
- leaders' ISR changes are written to the metadata store by one writer thread
  (a partition asks without blocking, see :data:`~pylogq.cluster.state.partition.AlterIsr`),
  and the changed partitions are announced to the controller in batches
  (``/isr_change_notification``), which then updates every broker's metadata;
- every ``replica.lag.time.max.ms / 2`` each leader drops lagging followers from its ISR.

Thread-safety: controller requests are serialized by one lock (held across the role
changes they make, never by the event loop's hot paths); produce and fetch go to the
partitions, which guard themselves.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Protocol, Sequence, Set, Tuple

from ... import errors
from ...records import AppendResult
from ..contract import (
    BrokerRegistration,
    FetchResult,
    InterBrokerConnector,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    ReplicaFetchPartition,
    StopReplicaRequest,
)
from ..delayed import DelayedCall, DelayedOperationPurgatory, Timer
from ..state.partition import Partition
from ..zk.client import KafkaZkClient
from ..zk.data import PartitionState
from ..zk.session_guard import SessionGuard
from .replica_fetcher import FetcherSettings, ReplicaFetcherManager
from .replication_quota import ReplicationQuota, is_throttled_replica

__all__ = ["ReplicaHost", "ReplicaManager", "ReplicationSettings"]

log = logging.getLogger("pylogq.replica_manager")

TopicPartition = Tuple[str, int]
#: StopReplica's leader epoch for a partition being deleted: stop whatever its epoch.
EPOCH_DURING_DELETE = -2
#: OffsetForLeaderEpoch's "no epoch known".
UNDEFINED_EPOCH = -1
#: The first pause before an ISR write whose outcome is unknown is tried again (doubling to 1 s).
ISR_WRITE_RETRY_BACKOFF_S = 0.05


class ReplicationSettings(NamedTuple):
    """The replication keys of a broker, in Kafka's names and units."""

    replica_lag_time_max_ms: int = 30000
    fetcher: FetcherSettings = FetcherSettings()
    #: How often pending ISR changes are announced to the controller.
    isr_change_propagation_ms: int = 200
    inter_broker_listener: Optional[str] = None
    #: The replication throttles' samples: ``replication.quota.window.num`` of
    #: ``replication.quota.window.size.seconds`` each.
    quota_window_num: int = 11
    quota_window_s: float = 1.0


class ReplicaHost(Protocol):
    """What the replica manager asks of its broker: the partitions it hosts and their logs."""

    def hosted(self, tp: TopicPartition) -> Optional[Partition]: ...

    def host_partition(self, topic: str, index: int, topic_id: Optional[str], is_new: bool = False) -> Partition: ...

    def unhost_partition(self, topic: str, index: int, delete: bool) -> None: ...

    def hosted_partitions(self) -> List[Partition]: ...


class ReplicaManager:
    """This broker's replicas: their roles, their fetchers, and what waits on replication."""

    def __init__(self, broker_id: int, host: ReplicaHost, zk: KafkaZkClient, settings: ReplicationSettings,
                 connector: InterBrokerConnector, timer: Timer,
                 schedule: Callable[[Callable[[], None], float, Optional[float], str], None],
                 broker_epoch: Callable[[], int],
                 on_leadership: Optional[Callable[[List[TopicPartition], List[TopicPartition]], None]] = None,
                 consumer_fetches: Optional[DelayedOperationPurgatory] = None,
                 guard: Optional[SessionGuard] = None) -> None:
        self.broker_id = broker_id
        #: Whether the store session still vouches for this broker's leaderships.
        self.guard = guard
        self.host = host
        self.zk = zk
        self.settings = settings
        self._broker_epoch = broker_epoch
        self._on_leadership = on_leadership
        self._consumer_fetches = consumer_fetches
        self._lock = threading.RLock()  # controller requests, one at a time
        self.controller_epoch = -1
        self.closed = False
        #: Set when this broker's controlled shutdown begins: followers it is made no longer
        #: fetch (they would rejoin ISRs just before the broker goes).
        self.shutting_down = False
        #: acks=all produces waiting for the high watermark, by (topic, partition).
        self.produce_purgatory = DelayedOperationPurgatory("produce", timer)
        #: followers' fetches waiting for appends, by (topic, partition).
        self.replica_fetch_purgatory = DelayedOperationPurgatory("replica-fetch", timer)
        #: The replication throttles (replication_quota.py): what this broker sends as a
        #: leader and what it fetches as a follower, for replicas being moved.
        self.leader_quota = ReplicationQuota("leader", settings.quota_window_num, settings.quota_window_s)
        self.follower_quota = ReplicationQuota("follower", settings.quota_window_num, settings.quota_window_s)
        self.fetchers = ReplicaFetcherManager(broker_id, settings.fetcher, connector, host.hosted, broker_epoch,
                                              settings.inter_broker_listener, self.follower_quota)
        self._isr_writes: "queue.Queue[Optional[Tuple[Partition, List[int], int]]]" = queue.Queue()
        self._closing = threading.Event()
        self._isr_changed: Set[TopicPartition] = set()
        self._isr_changed_lock = threading.Lock()
        self._propagate_lock = threading.Lock()  # announcements, and close, one at a time
        #: ISR changes written to the store, by direction (the ISR shrink and expand metrics).
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._isr_writer = threading.Thread(target=self._write_isr_changes, name="pylogq-isr-writer-%d" % broker_id,
                                            daemon=True)
        self._isr_writer.start()
        lag_s = settings.replica_lag_time_max_ms / 2000.0
        schedule(self.maybe_shrink_isrs, lag_s, lag_s, "isr-expiration")
        period = settings.isr_change_propagation_ms / 1000.0
        schedule(self.propagate_isr_changes, period, period, "isr-change-propagation")

    # -- wiring partitions --------------------------------------------------------------

    def attach(self, partition: Partition) -> None:
        """Give a newly hosted partition its replication hooks (the broker calls this once)."""
        partition.alter_isr = self._ask_isr_change
        key = (partition.topic, partition.index)

        def appended() -> None:
            self.replica_fetch_purgatory.check_and_complete(key)

        partition.on_log_end_advanced = appended

    def high_watermark_advanced(self, key: TopicPartition) -> None:
        """A partition's high watermark moved: acks=all produces may complete."""
        self.produce_purgatory.check_and_complete(key)

    # -- controller requests ------------------------------------------------------------

    def _fence(self, controller_epoch: int, broker_epoch: int, what: str) -> Optional[int]:
        """The error code for a stale controller request, else None (lock held)."""
        if controller_epoch < self.controller_epoch:
            log.warning("ignoring %s from controller epoch %d: epoch %d was seen", what, controller_epoch,
                        self.controller_epoch)
            return errors.StaleControllerEpochError.code
        current = self._broker_epoch()
        if broker_epoch != -1 and broker_epoch < current:
            log.warning("ignoring %s for broker epoch %d: this broker registered at epoch %d", what, broker_epoch,
                        current)
            return errors.StaleBrokerEpochError.code
        self.controller_epoch = controller_epoch
        return None

    def fence(self, controller_epoch: int, broker_epoch: int, what: str) -> Optional[int]:
        """For a controller request that changes no replica (UpdateMetadata): the error code
        when it is stale (an older controller epoch than one seen, or an earlier life of this
        broker), else None, the request's controller epoch being remembered."""
        with self._lock:
            return self._fence(controller_epoch, broker_epoch, what)

    def become_leader_or_follower(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[TopicPartition, int]]:
        """Apply a LeaderAndIsr request; -> (request error, each partition's error)."""
        with self._lock:
            if self.closed:
                return errors.NotControllerError.code, {}
            stale = self._fence(request.controller_epoch, request.broker_epoch, "LeaderAndIsr")
            if stale is not None:
                return stale, {(p.topic, p.partition): stale for p in request.partitions}
            results: Dict[TopicPartition, int] = {}
            leaders: List[Tuple[Partition, LeaderAndIsrPartition]] = []
            followers: List[Tuple[Partition, LeaderAndIsrPartition]] = []
            for state in request.partitions:
                tp = (state.topic, state.partition)
                if self.broker_id not in state.replicas:
                    results[tp] = errors.UnknownTopicOrPartitionError.code
                    continue
                partition = self.host.hosted(tp)
                if partition is not None and (state.leader_epoch < partition.leader_epoch or (
                        state.leader_epoch == partition.leader_epoch
                        and state.partition_epoch <= partition.partition_epoch
                        and partition.leader_id == state.leader)):
                    # An older (or the same) decision than the one applied: nothing to do.
                    results[tp] = 0 if state.leader_epoch == partition.leader_epoch else \
                        errors.StaleControllerEpochError.code
                    continue
                try:
                    if partition is None:
                        partition = self.host.host_partition(state.topic, state.partition,
                                                             request.topic_ids.get(state.topic), state.is_new)
                except errors.BrokerError as exc:
                    log.error("cannot host %s-%d: %s", state.topic, state.partition, exc)
                    results[tp] = exc.code
                    continue
                results[tp] = 0
                (leaders if state.leader == self.broker_id else followers).append((partition, state))
            led = self._make_leaders(leaders)
            followed = self._make_followers(followers, {b.broker_id: b for b in request.live_leaders})
            if self.guard is not None:
                self.guard.controller_spoke(request.broker_epoch)
            # Only leaderships that are new, and followers whose leader changed, are news to
            # the coordinators: a new epoch of a leadership kept (a follower left the ISR) is
            # not, and must not make the group coordinator load its groups again. Told under
            # the lock, as Kafka's ReplicaManager tells them, so that two requests' news arrive
            # in the order the requests were applied (the callback only marks and queues).
            if self._on_leadership is not None and (led or followed):
                self._on_leadership(led, followed)
        return 0, results

    def _make_leaders(self, leaders: Sequence[Tuple[Partition, LeaderAndIsrPartition]]) -> List[TopicPartition]:
        """-> the partitions this broker did not lead before."""
        if not leaders:
            return []
        self.fetchers.remove_partitions([(p.topic, p.index) for p, _ in leaders])
        led = []
        for partition, state in leaders:
            try:
                if partition.make_leader(state):
                    led.append((partition.topic, partition.index))
                log.info("broker %d leads %s-%d in epoch %d (ISR %s, log end %d, high watermark %d)",
                         self.broker_id, partition.topic, partition.index, state.leader_epoch, state.isr,
                         partition.log_end_offset, partition.high_watermark)
            except (errors.BrokerError, ValueError) as exc:
                log.error("cannot lead %s-%d: %s", partition.topic, partition.index, exc)
            self._wake(partition)
        return led

    def _make_followers(self, followers: Sequence[Tuple[Partition, LeaderAndIsrPartition]],
                        live_leaders: Dict[int, BrokerRegistration]) -> List[TopicPartition]:
        """-> the partitions whose leader (or its epoch) changed."""
        if not followers:
            return []
        changed = []
        for partition, state in followers:
            try:
                if partition.make_follower(state):
                    changed.append((partition, state))
            except (errors.BrokerError, ValueError) as exc:
                log.error("cannot follow %s-%d: %s", partition.topic, partition.index, exc)
            self._wake(partition)  # acks=all produces and consumer fetches answer NOT_LEADER_OR_FOLLOWER
        self.fetchers.remove_partitions([(p.topic, p.index) for p, _ in changed])
        by_leader: Dict[int, Dict[TopicPartition, Tuple[int, int]]] = {}
        for partition, state in changed:
            if state.leader in live_leaders:
                by_leader.setdefault(state.leader, {})[(partition.topic, partition.index)] = (
                    state.leader_epoch, partition.high_watermark)
            else:
                log.info("%s-%d: leader %d is not live; not fetching until the controller elects one",
                         partition.topic, partition.index, state.leader)
        if not self.shutting_down:
            for leader, partitions in by_leader.items():
                self.fetchers.add_partitions(live_leaders[leader], partitions)
                log.info("broker %d follows %d partitions of leader %d", self.broker_id, len(partitions), leader)
        return [(p.topic, p.index) for p, _ in changed]

    def log_dir_failed(self, tps: Sequence[TopicPartition]) -> None:
        """Replicas whose log directory went offline: their fetchers stop and what waits on them
        answers (the broker has closed them already)."""
        self.fetchers.remove_partitions(list(tps))
        for tp in tps:
            self.produce_purgatory.check_and_complete(tp)
            self.replica_fetch_purgatory.check_and_complete(tp)

    def _wake(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        self.produce_purgatory.check_and_complete(key)
        self.replica_fetch_purgatory.check_and_complete(key)
        if self._consumer_fetches is not None:
            self._consumer_fetches.check_and_complete(key)

    def stop_replicas(self, request: StopReplicaRequest) -> Tuple[int, Dict[TopicPartition, int]]:
        """Apply a StopReplica request; -> (request error, each partition's error)."""
        with self._lock:
            if self.closed:
                return errors.NotControllerError.code, {}
            stale = self._fence(request.controller_epoch, request.broker_epoch, "StopReplica")
            if stale is not None:
                return stale, {tp: stale for tp in request.partitions}
            results: Dict[TopicPartition, int] = {}
            stopping = []
            for tp, (epoch, delete) in request.partitions.items():
                partition = self.host.hosted(tp)
                if partition is not None and epoch != EPOCH_DURING_DELETE and epoch < partition.leader_epoch:
                    results[tp] = errors.FencedLeaderEpochError.code
                    continue
                stopping.append((tp, delete))
            self.fetchers.remove_partitions([tp for tp, _ in stopping])
            for tp, delete in stopping:
                partition = self.host.hosted(tp)
                try:
                    self.host.unhost_partition(tp[0], tp[1], delete)
                    results[tp] = 0
                except errors.BrokerError as exc:
                    log.error("cannot stop replica %s-%d: %s", tp[0], tp[1], exc)
                    results[tp] = exc.code
                if partition is not None:
                    self._wake(partition)
            if self._on_leadership is not None and stopping:
                self._on_leadership([], [tp for tp, _ in stopping])
        return 0, results

    # -- produce ------------------------------------------------------------------------

    def append_records(self, partition: Partition, data: bytes, acks: int, timeout_ms: int, origin: str = "client",
                       deliver: Callable[[AppendResult], None] = lambda result: None,
                       appended: Optional[Callable[[AppendResult], None]] = None) -> "DelayedCall[AppendResult]":
        """Append to a partition this broker leads; with acks=-1 the answer waits until every
        in-sync replica has the records (a delayed operation, ``deliver`` gets it).

        The append's own errors raise. A wait that ends badly answers the result with
        the error code: NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER (the
        leadership moved; the records may be lost), or REQUEST_TIMED_OUT.
        """
        doubt = self.leadership_doubt(partition)
        if doubt is not None:
            raise errors.NotLeaderOrFollowerError("broker %d may no longer lead %s-%d: %s"
                                                  % (self.broker_id, partition.topic, partition.index, doubt))
        result = partition.append(data, required_acks=acks, origin=origin)
        if appended is not None:
            appended(result)  # the local append (the topic metrics count it)
        deadline = time.monotonic() + max(0, timeout_ms) / 1000.0
        required = result.last_offset + 1

        def check() -> Optional[AppendResult]:
            code = partition.check_replicated(required)
            if code is None:
                return None
            return result if code == 0 else _failed(result, code)

        op: DelayedCall[AppendResult] = DelayedCall(
            deadline, check, lambda: _failed(result, errors.RequestTimedOutError.code), deliver)
        if acks != -1:
            op.complete_with(result)
            return op
        self.produce_purgatory.try_complete_else_watch(op, [(partition.topic, partition.index)])
        return op

    def leadership_doubt(self, partition: Partition) -> Optional[str]:
        """Why this broker must not act as the partition's leader although it believes it leads
        it (see :mod:`~pylogq.cluster.zk.session_guard`), or None."""
        if self.guard is None:
            return None
        return self.guard.doubt(partition.followers_silent_ms)

    def wait_replicated(self, partition: Partition, timeout_ms: int,
                        deliver: Callable[[int], None] = lambda code: None) -> "DelayedCall[int]":
        """Wait until every in-sync replica has what the partition's log holds now (a barrier
        after the group coordinator's writes); the answer is an error code: 0,
        NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND or REQUEST_TIMED_OUT."""
        required = partition.log_end_offset
        deadline = time.monotonic() + max(0, timeout_ms) / 1000.0
        op: DelayedCall[int] = DelayedCall(deadline, lambda: partition.check_replicated(required),
                                           lambda: errors.RequestTimedOutError.code, deliver)
        self.produce_purgatory.try_complete_else_watch(op, [(partition.topic, partition.index)])
        return op

    # -- followers' requests ------------------------------------------------------------

    def fetch_for_replica(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                          max_wait_ms: int, min_bytes: int, max_bytes: int,
                          deliver: Callable[[Dict[TopicPartition, FetchResult]], None] = lambda r: None
                          ) -> "DelayedCall[Dict[TopicPartition, FetchResult]]":
        """A follower's Fetch: records up to the leader's log end, its position recorded
        (which may grow the ISR and move the high watermark). Waits up to ``max_wait_ms``
        for ``min_bytes``, woken by appends."""
        def read() -> Dict[TopicPartition, FetchResult]:
            return self._read_for_replica(replica_id, partitions, max_bytes, record=False)

        if self.leader_quota.bound is not None:
            deliver = self._counting_throttled(replica_id, deliver)

        def check() -> Optional[Dict[TopicPartition, FetchResult]]:
            results = read()
            size = 0
            for r in results.values():
                if r.error_code:
                    return results
                size += len(r.records) if r.records is not None else 0
            return results if size >= min_bytes or self.closed else None

        first = self._read_for_replica(replica_id, partitions, max_bytes, record=True)
        deadline = time.monotonic() + max(0, max_wait_ms) / 1000.0
        if self.leader_quota.bound is not None and self.leader_quota.exceeded():
            # Throttled partitions answer nothing until the rate is back at the bound: the
            # wait ends then, so that the follower asks again at once rather than after its
            # whole wait (which would hold the copy well under the bound).
            deadline = min(deadline, time.monotonic() + max(0.001, self.leader_quota.wait_s()))
        op: DelayedCall[Dict[TopicPartition, FetchResult]] = DelayedCall(deadline, check, read, deliver)
        size = sum(len(r.records) for r in first.values() if r.records is not None)
        if max_wait_ms <= 0 or size >= min_bytes or any(r.error_code for r in first.values()) or self.closed:
            op.complete_with(first)
            return op
        self.replica_fetch_purgatory.try_complete_else_watch(op, [(p.topic, p.partition) for p in partitions],
                                                             checked=True)
        return op

    def _throttled_for(self, partition: Partition, replica_id: int) -> bool:
        """Whether the leader throttle covers what ``replica_id`` copies of ``partition``: listed
        for this broker, and the replica out of the ISR (one in sync is never held back)."""
        return replica_id not in partition.isr and is_throttled_replica(
            partition.log.config.leader_replication_throttled_replicas, partition.index, self.broker_id)

    def _leader_throttles(self, partition: Partition, replica_id: int) -> bool:
        """Whether this fetch answers ``replica_id`` nothing of ``partition`` now: throttled,
        with the leader's rate past its bound."""
        return self.leader_quota.bound is not None and self._throttled_for(partition, replica_id) and \
            self.leader_quota.exceeded()

    def _counting_throttled(self, replica_id: int, deliver: Callable[[Dict[TopicPartition, FetchResult]], None]
                            ) -> Callable[[Dict[TopicPartition, FetchResult]], None]:
        """``deliver``, recording first the bytes the answer sends of throttled replicas."""
        def counted(results: Dict[TopicPartition, FetchResult]) -> None:
            sent = 0
            for tp, r in results.items():
                if r.records is not None and len(r.records):
                    partition = self.host.hosted(tp)
                    if partition is not None and self._throttled_for(partition, replica_id):
                        sent += len(r.records)
            self.leader_quota.record(sent)
            deliver(results)
        return counted

    def set_throttle_rates(self, leader: Optional[int], follower: Optional[int]) -> None:
        """The bounds of ``leader.replication.throttled.rate`` and
        ``follower.replication.throttled.rate`` (None: unbounded)."""
        self.leader_quota.set_bound(leader)
        self.follower_quota.set_bound(follower)

    def _read_for_replica(self, replica_id: int, partitions: Sequence[ReplicaFetchPartition], max_bytes: int,
                          record: bool) -> Dict[TopicPartition, FetchResult]:
        out: Dict[TopicPartition, FetchResult] = {}
        budget = max_bytes
        for p in partitions:
            tp = (p.topic, p.partition)
            partition = self.host.hosted(tp)
            try:
                if partition is None:
                    raise errors.UnknownTopicOrPartitionError("%s-%d is not hosted by broker %d"
                                                              % (p.topic, p.partition, self.broker_id))
                if not partition.is_leader:
                    raise errors.NotLeaderOrFollowerError("broker %d does not lead %s-%d"
                                                          % (self.broker_id, p.topic, p.partition))
                _check_epoch(partition, p.current_leader_epoch)
                end = partition.log_end_offset
                if p.fetch_offset > end or p.fetch_offset < partition.log_start_offset:
                    raise errors.OffsetOutOfRangeError(
                        "fetch offset %d of %s-%d outside the leader's log [%d, %d]"
                        % (p.fetch_offset, p.topic, p.partition, partition.log_start_offset, end))
                if record:
                    partition.update_follower_fetch_state(replica_id, p.fetch_offset, p.log_start_offset, end)
                limit = max(0, min(p.max_bytes, budget))
                if self._leader_throttles(partition, replica_id):
                    limit = 0  # past the leader's bound: nothing for a throttled replica until it is under
                region = partition.read_for_follower(p.fetch_offset, limit,
                                                     min_one_batch=budget == max_bytes and limit > 0)
                budget -= len(region)
                out[tp] = FetchResult(0, partition.high_watermark, partition.log_start_offset, region)
            except errors.BrokerError as exc:
                hw = ls = -1
                if partition is not None:
                    hw, ls = partition.high_watermark, partition.log_start_offset
                out[tp] = FetchResult(exc.code, hw, ls, None)
        return out

    # -- ISR ----------------------------------------------------------------------------

    def _ask_isr_change(self, partition: Partition, proposed: List[int], partition_epoch: int) -> None:
        self._isr_writes.put((partition, proposed, partition_epoch))

    def _write_isr_changes(self) -> None:
        while True:
            item = self._isr_writes.get()
            if item is None:
                return
            partition, proposed, expected = item
            written = self._write_isr(partition, proposed, expected)
            before = len(partition.isr)
            partition.isr_change_done(proposed, expected, written)
            if written is not None:
                if len(proposed) < before:
                    self.isr_shrinks += 1
                elif len(proposed) > before:
                    self.isr_expands += 1
                with self._isr_changed_lock:
                    self._isr_changed.add((partition.topic, partition.index))

    def _write_isr(self, partition: Partition, proposed: List[int], expected: int) -> Optional[int]:
        """Write one ISR change; -> the new partition epoch, None when refused.

        A write whose outcome is unknown (the connection was lost after the store may have
        applied it) is tried again until it is known, as Kafka's leader does: the change
        stays pending meanwhile, so the high watermark counts the maximal ISR. A retry
        that finds the state already as proposed (the first write did land) takes it
        (:meth:`~pylogq.cluster.zk.client.KafkaZkClient.update_partition_state`). It gives up when the
        session is gone, the broker closes, or the controller decided meanwhile.
        """
        state = PartitionState(self.broker_id, partition.leader_epoch, proposed, partition.controller_epoch, expected)
        backoff = ISR_WRITE_RETRY_BACKOFF_S
        while True:
            try:
                done = self.zk.update_partition_state(partition.topic, partition.index, state)
                return done.partition_epoch if done is not None else None
            except errors.StoreConnectionError as exc:
                log.warning("writing the ISR of %s-%d: %s; trying again", partition.topic, partition.index, exc)
            except errors.MetadataStoreError as exc:  # the session is gone: the controller decides anew
                log.warning("could not write the ISR of %s-%d: %s", partition.topic, partition.index, exc)
                return None
            except Exception:  # noqa: BLE001 - the writer thread must go on for the other partitions
                log.exception("could not write the ISR of %s-%d", partition.topic, partition.index)
                return None
            if self._closing.wait(backoff) or not partition.isr_change_pending(proposed, expected):
                return None
            backoff = min(backoff * 2, 1.0)

    def propagate_isr_changes(self) -> None:
        """Announce the partitions whose ISR this broker changed to the controller (a
        scheduled task; after close it does nothing, close itself announces the last ones
        while the session is still open)."""
        with self._propagate_lock:
            if not self.closed:
                self._announce_isr_changes()

    def _announce_isr_changes(self) -> None:
        with self._isr_changed_lock:
            changed, self._isr_changed = sorted(self._isr_changed), set()
        if not changed:
            return
        try:
            self.zk.propagate_isr_changes(changed)
        except Exception as exc:  # noqa: BLE001 - tried again at the next period
            if isinstance(exc, errors.MetadataStoreError):  # the store unreachable: no traceback to show
                log.warning("could not announce ISR changes of %d partitions (%s); retrying", len(changed), exc)
            else:
                log.exception("could not announce ISR changes of %d partitions; retrying", len(changed))
            with self._isr_changed_lock:
                self._isr_changed.update(changed)

    def maybe_shrink_isrs(self) -> None:
        """Drop lagging followers from the ISR of every partition this broker leads."""
        if self.closed:
            return
        for partition in self.host.hosted_partitions():
            if partition.is_leader:
                try:
                    partition.maybe_shrink_isr(self.settings.replica_lag_time_max_ms)
                except Exception:  # noqa: BLE001 - one partition must not stop the others' checks
                    log.exception("ISR check of %s-%d failed", partition.topic, partition.index)

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self._closing.set()
        self.fetchers.shutdown()
        self.produce_purgatory.close()
        self.replica_fetch_purgatory.close()
        self._isr_writes.put(None)
        self._isr_writer.join(10)
        # The scheduled announcement stops (one in flight finishes first); the ISR changes
        # written since the last one are announced now, before the session goes.
        with self._propagate_lock:
            self._announce_isr_changes()


def _failed(result: AppendResult, code: int) -> AppendResult:
    return result._replace(error_code=code)


def _check_epoch(partition: Partition, current: int) -> None:
    """KIP-320: a request from a client that knows an older epoch is fenced, a newer one
    means this broker has not heard of it yet."""
    if current < 0:
        return
    if current < partition.leader_epoch:
        raise errors.FencedLeaderEpochError("leader epoch %d of %s-%d is older than the leader's %d"
                                            % (current, partition.topic, partition.index, partition.leader_epoch))
    if current > partition.leader_epoch:
        raise errors.UnknownLeaderEpochError("leader epoch %d of %s-%d is newer than the leader's %d"
                                             % (current, partition.topic, partition.index, partition.leader_epoch))
