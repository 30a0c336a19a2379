"""The consumer's group coordinator client (Kafka's ``ConsumerCoordinator``): membership and commits.

Group membership runs from ``poll`` (join, the leader's assignment, sync)
with the poll's timeout, so a poll stays responsive while the other members
rejoin from their own polls; a heartbeat thread keeps the session alive and
flags the rebalances the coordinator announces. Before a rejoin the consumer
commits what it consumed (with ``enable_auto_commit``) and tells the
rebalance listener; after a sync it takes the new assignment and tells the
listener again. Also here: committing and reading committed offsets, the
auto commit, leaving the group, and following the subscription's metadata
(see :mod:`pylogq.client.consumer`): without a group the metadata assigns,
in a group a change rejoins.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

from ..cluster.contract import TopicPartition
from ..errors import (
    BrokerError,
    CommitFailedError,
    IllegalGenerationError,
    IllegalStateError,
    PylogqError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
    error_for_code,
)
from .assignors import Assignment, PartitionAssignor, decode_assignment, decode_subscription, encode_assignment
from .metrics import AVG, COUNT, COUNT_RATE, MAX, MetricName, Metrics
from .subscription_state import SubscriptionState, as_tp
from .transport import Transport

__all__ = ["ConsumerCoordinator", "ConsumerGroupMetadata", "ConsumerRebalanceListener", "CoordinatorMetrics",
           "OffsetAndMetadata"]

log = logging.getLogger("pylogq.consumer")

_REJOIN_CODES = (RebalanceInProgressError.code, UnknownMemberIdError.code, IllegalGenerationError.code)
# While a subscribed topic is missing, its metadata is asked for again after
# retry_backoff_ms, doubling up to this (Kafka's retry.backoff.max.ms default).
_METADATA_RETRY_MAX_S = 1.0


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next one to read) with its metadata string."""

    offset: int
    metadata: str
    leader_epoch: int


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's group membership as a transaction's offsets carry it (Kafka's
    ``ConsumerGroupMetadata``, from ``Consumer.consumer_group_metadata()``): the coordinator
    refuses the offsets of a member that left the group or of a generation that is over,
    so a consumer that lost its partitions cannot commit them from a transaction."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: Optional[str] = None


class ConsumerRebalanceListener:
    """Callbacks around a group rebalance (kafka-python's shape); override any."""

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        """Called before a rebalance, with the partitions this consumer gives up."""

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        """Called after a rebalance, with this consumer's new partitions."""

    def on_partitions_lost(self, lost: Sequence[TopicPartition]) -> None:
        """Called instead of :meth:`on_partitions_revoked` when the consumer finds it is no longer
        a member of the group's current generation (its session expired, or the generation
        moved on without it: Kafka's ``onPartitionsLost``, KIP-429). Other members may own
        these partitions already: nothing should be committed for them. By default, as in
        Kafka, :meth:`on_partitions_revoked`."""
        self.on_partitions_revoked(lost)


class CoordinatorMetrics:
    """The consumer's group metrics (Kafka's ``ConsumerCoordinatorMetrics``): per request.

    ``last_heartbeat`` (monotonic) is when the last heartbeat was sent; the
    heartbeat thread sets it and the ``last-heartbeat-seconds-ago`` gauge reads it.
    """

    GROUP = "consumer-coordinator-metrics"

    def __init__(self, metrics: Metrics, subscriptions: SubscriptionState) -> None:
        self.last_heartbeat = float("-inf")  # monotonic; when the last heartbeat was sent
        m = metrics
        group = self.GROUP
        self.commit = m.add_stats(m.sensor("commit-latency"), group, [
            ("commit-latency-avg", AVG, "The average time taken for a commit request"),
            ("commit-latency-max", MAX, "The max time taken for a commit request"),
            ("commit-rate", COUNT_RATE, "The number of commit calls per second"),
            ("commit-total", COUNT, "The total number of commit calls"),
        ])
        self.heartbeat = m.add_stats(m.sensor("heartbeat-latency"), group, [
            ("heartbeat-response-time-max", MAX, "The max time taken to receive a response to a heartbeat request"),
            ("heartbeat-rate", COUNT_RATE, "The average number of heartbeats per second"),
            ("heartbeat-total", COUNT, "The total number of heartbeats"),
        ])
        self.join = m.add_stats(m.sensor("join-latency"), group, [
            ("join-time-avg", AVG, "The average time taken for a group rejoin"),
            ("join-time-max", MAX, "The max time taken for a group rejoin"),
            ("join-rate", COUNT_RATE, "The number of group joins per second"),
            ("join-total", COUNT, "The total number of group joins"),
        ])
        self.sync = m.add_stats(m.sensor("sync-latency"), group, [
            ("sync-time-avg", AVG, "The average time taken for a group sync"),
            ("sync-time-max", MAX, "The max time taken for a group sync"),
            ("sync-rate", COUNT_RATE, "The number of group syncs per second"),
            ("sync-total", COUNT, "The total number of group syncs"),
        ])
        m.add(MetricName("assigned-partitions", group, "The number of partitions currently assigned to this consumer"),
              lambda now: float(len(subscriptions.assignment)))
        m.add(MetricName("last-heartbeat-seconds-ago", group,
                         "The number of seconds since the last coordinator heartbeat was sent"),
              lambda now: now - self.last_heartbeat)


class ConsumerCoordinator:
    """The consumer's side of its group: join, sync, heartbeats, leave, commits, metadata following.

    Invariant: ``_member_id`` and ``_generation`` are those of the last
    successful join (``""`` and -1 outside the group); ``_pending_sync`` is
    set between a successful join and its sync; ``_rejoin_needed`` is set
    from a subscription change or a flagged rebalance until a sync of the
    current generation succeeds; ``_joining`` from the JoinGroup's sending
    until then. Heartbeats go on while a rebalance is flagged but not joined
    yet (the listener's ``on_partitions_revoked`` may take a while: a member
    that stopped heartbeating would lose its session, and its partitions be
    handed out while it still works on them), and stop once JoinGroup is
    sent, as Kafka's heartbeat thread is disabled when a join starts.

    Thread-safety: called by the polling thread, except :meth:`_run_heartbeat`,
    which runs on the heartbeat thread. The two share ``_member_id``,
    ``_generation``, ``_rejoin_needed``, ``_joining`` and ``_stopping``, written under
    ``_group_lock`` (``_wakeup`` is its condition, which wakes the heartbeat
    thread and a poll waiting idle); everything else is the polling thread's.
    """

    def __init__(self, transport: Transport, subscriptions: SubscriptionState, sensors: CoordinatorMetrics,
                 set_assignment: Callable[[Sequence[TopicPartition]], None], *, group_id: Optional[str],
                 client_id: str, assignors: List[PartitionAssignor], session_timeout_ms: int,
                 max_poll_interval_ms: int, heartbeat_interval_ms: int, enable_auto_commit: bool,
                 auto_commit_interval_ms: int, commit_callback: Optional[Callable[[Any, Any], Any]],
                 metadata_max_age_ms: int, retry_backoff_s: float, exclude_internal_topics: bool) -> None:
        self._transport = transport
        self._subscriptions = subscriptions
        self._sensors = sensors
        # The consumer's assignment change (its positions, pauses and buffered records follow).
        self._set_assignment = set_assignment
        self.group_id = group_id
        self.client_id = client_id
        self.assignors = assignors
        self.session_timeout_ms = session_timeout_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self._commit_callback = commit_callback
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_s = retry_backoff_s
        self.exclude_internal_topics = exclude_internal_topics
        self._join_started: Optional[float] = None  # the rejoin under way began (monotonic)
        self._sync_started: Optional[float] = None
        # The subscription's metadata (see pylogq.client.consumer's docstring): when to read it next
        # (monotonic; inf without a subscription), the wait after a refresh that found a topic missing,
        # and what the assignment was made from: without a group, topic -> partitions; in a group, the
        # topics this member joined with and, as the leader, the group's topics -> partitions.
        self._metadata_due = math.inf
        self._metadata_retry_s = 0.0
        self._metadata_snapshot: Optional[Dict[str, int]] = None
        self._joined_topics: Optional[Set[str]] = None
        self._group_topics: List[str] = []
        self._assignment_snapshot: Optional[Dict[str, int]] = None
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000.0

        # Group membership: written by the polling thread, read and flagged by the heartbeat thread.
        self._group_lock = threading.Lock()
        self._wakeup = threading.Condition(self._group_lock)
        self._member_id = ""
        self._generation = -1
        self._rejoin_needed = False
        self._joining = False
        self._lost = False  # the generation is over: the next revocation is a loss
        self._revoked = True
        self._pending_sync: Optional[Tuple[int, str, Optional[Dict[str, bytes]]]] = None
        self._heartbeat_thread: Optional[threading.Thread] = None
        self._stopping = False

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group id with the generation and member id of the last join, read together.
        The consumer joins without a group instance id (no static membership)."""
        group_id = self._require_group()
        with self._group_lock:
            return ConsumerGroupMetadata(group_id, self._generation, self._member_id, None)

    @property
    def member_id(self) -> str:
        """The member id of the last join ("" outside the group)."""
        return self._member_id

    @property
    def generation(self) -> int:
        """The generation of the last join (-1 outside the group)."""
        return self._generation

    @property
    def metadata_due(self) -> float:
        """When (monotonic) the subscription's metadata is read next; inf without a subscription."""
        return self._metadata_due

    def set_rejoin_needed(self, needed: bool) -> None:
        """The subscription changed (rejoin on the next poll) or was dropped (nothing to rejoin)."""
        with self._group_lock:
            self._rejoin_needed = needed

    def wait_idle(self, wait_s: float) -> None:
        """Nothing to fetch: sleep up to ``wait_s``, woken early when a rebalance is flagged."""
        with self._wakeup:
            if not self._rejoin_needed:
                self._wakeup.wait(wait_s)

    # -- offsets ---------------------------------------------------------------------------------

    def _require_group(self) -> str:
        if self.group_id is None:
            raise IllegalStateError("committing and reading committed offsets need a group_id")
        return self.group_id

    def committed(self, partition: Any, metadata: bool = False) -> Union[int, OffsetAndMetadata, None]:
        """The group's committed offset (the next to read) for ``partition``; None if none."""
        group_id = self._require_group()
        tp = as_tp(partition)
        found = self._transport.fetch_offsets(group_id, [(tp.topic, tp.partition)]).get((tp.topic, tp.partition))
        if found is None or found[0] < 0:
            return None
        if found[2]:
            raise (error_for_code(found[2]) or BrokerError)("reading the committed offset of %s-%d" % tp)
        return OffsetAndMetadata(found[0], found[1] or "", -1) if metadata else found[0]

    def _current_offsets(self) -> Dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(pos, "", -1) for tp, pos in self._subscriptions.all_consumed().items()}

    def commit(self, offsets: Optional[Mapping[Any, Any]] = None) -> None:
        """Commit ``offsets`` ({tp: OffsetAndMetadata or int}; default: every position) for the group."""
        group_id = self._require_group()
        to_commit = self._current_offsets() if offsets is None else {
            as_tp(tp): (v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v), "", -1))
            for tp, v in offsets.items()}
        if not to_commit:
            return
        with self._group_lock:
            generation, member_id = self._commit_identity()
        started = time.monotonic()
        codes = self._transport.commit_offsets(
            group_id, generation, member_id,
            {(tp.topic, tp.partition): (om.offset, om.metadata) for tp, om in to_commit.items()})
        self._sensors.commit.record((time.monotonic() - started) * 1000.0)
        failed = {tp: code for tp, code in codes.items() if code}
        if not failed:
            return
        code = next(iter(failed.values()))
        if code in _REJOIN_CODES:
            self._flag_rejoin(generation, reset_member=code == UnknownMemberIdError.code,
                              lost=code != RebalanceInProgressError.code)
            raise CommitFailedError(
                "commit of %s failed: the group rebalanced (%s); the partitions may have been reassigned"
                % (sorted(failed), error_for_code(code).name))  # type: ignore[union-attr]
        raise (error_for_code(code) or BrokerError)("committing offsets of %s" % sorted(failed))

    def _commit_identity(self) -> Tuple[int, str]:
        if self._subscriptions.manual or self._generation < 0:
            return -1, ""
        return self._generation, self._member_id

    def commit_async(self, offsets: Optional[Mapping[Any, Any]] = None,
                     callback: Optional[Callable[[Any, Any], Any]] = None) -> "concurrent.futures.Future[Any]":
        """Commit as :meth:`commit` does; -> a completed Future; ``callback(offsets, exception or None)``."""
        future: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
        snapshot = self._current_offsets() if offsets is None else dict(offsets)
        try:
            self.commit(snapshot)
        except PylogqError as exc:
            future.set_exception(exc)
            result: Any = exc
        else:
            future.set_result(None)
            result = None
        callback = callback or self._commit_callback
        if callback is not None:
            callback(snapshot, result)
        return future

    def maybe_auto_commit(self) -> None:
        if self.group_id is None:
            return
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.auto_commit_interval_ms / 1000.0
        self.auto_commit()

    def auto_commit(self) -> None:
        try:
            self.commit()
        except (CommitFailedError, BrokerError) as exc:
            log.warning("auto commit of group %s failed: %s", self.group_id, exc)

    # -- subscription metadata ---------------------------------------------------------------------

    def forget_metadata(self, due: float) -> None:
        """The subscription changed: nothing was assigned from metadata yet; refresh at ``due``."""
        self._metadata_due = due
        self._metadata_retry_s = 0.0
        self._metadata_snapshot = None
        self._joined_topics = None
        self._group_topics = []
        self._assignment_snapshot = None

    def watching_metadata(self) -> bool:
        """Whether ``poll`` refreshes the metadata when it is due: for a subscription, and in a
        group only between rebalances (a join reads the metadata afresh, then restarts the timer)."""
        if not self._subscriptions.group_managed():
            return False
        if self.group_id is None:
            return True
        return self._joined_topics is not None and not self._rejoin_needed and self._pending_sync is None

    def _schedule_metadata(self, missing: bool) -> None:
        """Refresh next after ``metadata_max_age_ms``, or sooner, backing off, while a topic is ``missing``;
        never sooner than ``retry_backoff_ms`` (Kafka's refresh backoff)."""
        wait = self.metadata_max_age_ms / 1000.0
        if missing:
            self._metadata_retry_s = min(max(self._metadata_retry_s * 2, self.retry_backoff_s), _METADATA_RETRY_MAX_S)
            wait = min(wait, self._metadata_retry_s)
        else:
            self._metadata_retry_s = 0.0
        self._metadata_due = time.monotonic() + max(wait, self.retry_backoff_s)

    def request_metadata_update(self) -> None:
        """An error says the metadata may be stale (Kafka's ``requestUpdate``): refresh after a backoff."""
        self._metadata_due = min(self._metadata_due, time.monotonic() + self.retry_backoff_s)

    def maybe_refresh_metadata(self) -> None:
        """Read the subscription's metadata when due and follow it (see :mod:`pylogq.client.consumer`).

        A retriable failure (no broker reachable, a leader being elected) is
        logged and retried after a backoff; any other (InvalidTopicError,
        an authorization error) is raised from ``poll``.
        """
        if time.monotonic() < self._metadata_due or not self.watching_metadata():
            return
        try:
            missing = self._refresh_metadata()
        except BrokerError as exc:
            if not exc.retriable:
                raise
            log.warning("reading the metadata of the subscribed topics failed (%s); retrying", exc)
            missing = True
        self._schedule_metadata(missing)

    def _matched_topics(self) -> List[str]:
        """The existing topics the subscription's pattern matches (internal ones only if allowed)."""
        pattern = self._subscriptions.pattern
        assert pattern is not None
        return sorted(t for t in self._transport.list_topics() if pattern.match(t)
                      and not (self.exclude_internal_topics and t.startswith("__")))

    def _partition_counts(self, topics: Iterable[str]) -> Dict[str, int]:
        """Topic -> partition count, for those of ``topics`` that exist."""
        counts: Dict[str, int] = {}
        for topic in topics:
            count = self._transport.partitions_for(topic)
            if count:
                counts[topic] = count
        return counts

    def _refresh_metadata(self) -> bool:
        """Compare the metadata with what the assignment was made from and follow a change:
        without a group, assign what it shows; in a group, rejoin. True when a topic
        subscribed by name (or, for the leader, by a member) does not exist."""
        state = self._subscriptions
        topics = self._matched_topics() if state.pattern is not None else sorted(state.subscription)
        if self.group_id is None:
            counts = self._partition_counts(topics)
            if state.pattern is not None:
                state.subscription = set(topics)
            if counts != self._metadata_snapshot:
                if self._metadata_snapshot is not None:
                    log.info("subscribed topics changed from %s to %s (topic: partitions); reassigning",
                             self._metadata_snapshot, counts)
                self._metadata_snapshot = counts
                self._set_assignment([TopicPartition(t, p) for t in sorted(counts) for p in range(counts[t])])
            return state.pattern is None and len(counts) < len(topics)
        reason = None
        if state.pattern is not None and set(topics) != self._joined_topics:
            reason = "its pattern now matches %s" % topics
        missing = False
        if self._assignment_snapshot is not None:  # the leader watches every member's topics
            counts = self._partition_counts(self._group_topics)
            missing = len(counts) < len(self._group_topics)
            if counts != self._assignment_snapshot and reason is None:
                reason = "the group's topics changed from %s to %s (topic: partitions)" % (
                    self._assignment_snapshot, counts)
        if reason is not None:
            log.info("group %s: rejoining: %s", self.group_id, reason)
            with self._group_lock:
                self._rejoin_needed = True
        return missing

    # -- group membership --------------------------------------------------------------------------

    def _subscribed_topics(self) -> List[str]:
        """The topics to join with: the subscribed ones, or those the pattern matches now."""
        if self._subscriptions.pattern is None:
            return sorted(self._subscriptions.subscription)
        matched = self._matched_topics()
        self._subscriptions.subscription = set(matched)
        return matched

    def poll(self, deadline: float) -> None:
        """Bring the assignment up to date: rejoin the group when a rebalance was flagged."""
        if not self._rejoin_needed and self._pending_sync is None:
            return
        if not self._subscriptions.group_managed():
            return
        if self.group_id is None:  # the metadata refresh assigns; nothing to join
            with self._group_lock:
                self._rejoin_needed = False
            return
        while True:
            if self._pending_sync is None:
                if not self._revoked:
                    self.revoke()
                if not self._join(deadline):
                    return
            if self._sync(deadline):
                return
            if time.monotonic() >= deadline:
                return

    def revoke(self) -> None:
        """Before a rejoin: commit what was consumed, tell the listener, drop the partitions.
        Partitions lost with the member's generation are not committed, and the listener's
        ``on_partitions_lost`` is told (Kafka's ``onJoinPrepare``)."""
        self._revoked = True
        revoked = list(self._subscriptions.assignment)
        with self._group_lock:
            lost, self._lost = self._lost and bool(revoked), False
        if self.enable_auto_commit and self.group_id is not None and not lost:
            self.auto_commit()
        listener = self._subscriptions.listener
        if listener is not None:
            # A listener of kafka-python's shape, without on_partitions_lost, is told of a revocation.
            lose = getattr(listener, "on_partitions_lost", None) if lost else None
            try:
                if lose is not None:
                    lose(revoked)
                else:
                    listener.on_partitions_revoked(revoked)
            except Exception:
                log.exception("the rebalance listener of group %s failed", self.group_id)
        self._set_assignment([])

    def _join(self, deadline: float) -> bool:
        """Send JoinGroup (and, as the leader, compute the assignments); False when the poll's time ran out."""
        group_id = self._require_group()
        topics = self._subscribed_topics()
        protocols = [(a.name, a.metadata(topics)) for a in self.assignors]
        with self._group_lock:
            self._rejoin_needed = True
            self._joining = True
            member_id = self._member_id
        if self._join_started is None:
            self._join_started = time.monotonic()
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            result = self._transport.join_group(
                group_id, member_id, self.client_id, self.session_timeout_ms, self.max_poll_interval_ms,
                "consumer", protocols, timeout_s=remaining)
            code = result.error_code
            if code == 0:
                break
            if code == UnknownMemberIdError.code and member_id:
                member_id = ""
                with self._group_lock:
                    self._member_id = ""
                continue
            if code == RequestTimedOutError.code:
                with self._group_lock:
                    self._member_id = result.member_id or member_id
                return False
            if code in (RebalanceInProgressError.code, IllegalGenerationError.code) and time.monotonic() < deadline:
                continue
            if code in _REJOIN_CODES:
                return False
            self._join_started = None
            raise (error_for_code(code) or BrokerError)("joining group %s" % group_id)
        self._sensors.join.record((time.monotonic() - self._join_started) * 1000.0)
        self._join_started = None
        assignments: Optional[Dict[str, bytes]] = None
        self._joined_topics = set(topics)
        self._assignment_snapshot = None
        if result.member_id == result.leader_id:
            assignments = self._leader_assign(result.protocol_name, result.members)
        self._schedule_metadata(self._assignment_snapshot is not None
                                and len(self._assignment_snapshot) < len(self._group_topics))
        with self._group_lock:
            self._member_id = result.member_id
            self._generation = result.generation_id
        self._pending_sync = (result.generation_id, result.protocol_name or "", assignments)
        return True

    def _assignor(self, name: str) -> PartitionAssignor:
        for a in self.assignors:
            if a.name == name:
                return a
        raise IllegalStateError("the group chose assignor %r, which this consumer does not have" % name)

    def _leader_assign(self, protocol: Optional[str], members: Sequence[Tuple[str, Optional[str], bytes]]
                       ) -> Dict[str, bytes]:
        assignor = self._assignor(protocol or "")
        subscriptions = {mid: decode_subscription(meta) for mid, _, meta in members}
        self._group_topics = sorted({t for s in subscriptions.values() for t in s.topics})
        cluster: Dict[str, int] = self._partition_counts(self._group_topics)
        self._assignment_snapshot = dict(cluster)
        result = assignor.assign(cluster, subscriptions)
        return {mid: encode_assignment(a.partitions, a.user_data) for mid, a in result.items()}

    def _sync(self, deadline: float) -> bool:
        """Send SyncGroup; on success take the assignment. True when done (or the poll's time ran out)."""
        assert self._pending_sync is not None
        generation, protocol, assignments = self._pending_sync
        remaining = max(0.0, deadline - time.monotonic())
        if self._sync_started is None:
            self._sync_started = time.monotonic()
        result = self._transport.sync_group(self._require_group(), generation, self._member_id, assignments,
                                            timeout_s=remaining)
        code = result.error_code
        if code == RequestTimedOutError.code:
            return True
        if code == 0:
            self._sensors.sync.record((time.monotonic() - self._sync_started) * 1000.0)
        self._sync_started = None
        self._pending_sync = None
        if code in _REJOIN_CODES:
            self._flag_rejoin(generation, reset_member=code == UnknownMemberIdError.code,
                              lost=code != RebalanceInProgressError.code)
            return False
        if code:
            raise (error_for_code(code) or BrokerError)("syncing group %s" % self.group_id)
        assignment: Assignment = decode_assignment(result.assignment)
        self._assignor(protocol).on_assignment(assignment, generation)
        tps = [TopicPartition(t, p) for t, ps in sorted(assignment.partitions.items()) for p in ps]
        self._subscriptions.positions = {}
        self._set_assignment(tps)
        with self._group_lock:
            if self._generation == generation:
                self._rejoin_needed = False
            self._joining = False
            self._revoked = False
        self._ensure_heartbeat()
        if self._subscriptions.listener is not None:
            try:
                self._subscriptions.listener.on_partitions_assigned(list(tps))
            except Exception:
                log.exception("on_partitions_assigned of group %s failed", self.group_id)
        return True

    def _flag_rejoin(self, generation: int, reset_member: bool = False, lost: bool = False) -> None:
        """Rejoin at the next poll; ``lost``: the coordinator said this member's generation is over
        (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION), so its partitions are lost, not revoked."""
        with self._group_lock:
            if generation != self._generation:
                return
            self._rejoin_needed = True
            self._lost = self._lost or lost
            if reset_member:
                self._member_id = ""
                self._generation = -1
            self._wakeup.notify_all()

    def _ensure_heartbeat(self) -> None:
        if self._heartbeat_thread is None:
            self._heartbeat_thread = threading.Thread(
                target=self._run_heartbeat, name="pylogq-heartbeat-%s" % self.client_id, daemon=True)
            self._heartbeat_thread.start()

    def _run_heartbeat(self) -> None:
        interval = self.heartbeat_interval_ms / 1000.0
        group_id = self.group_id
        assert group_id is not None
        while True:
            with self._wakeup:
                if self._stopping:
                    return
                self._wakeup.wait(interval)
                if self._stopping:
                    return
                if self._joining or not self._member_id or self._generation < 0:
                    continue
                generation, member_id, flagged = self._generation, self._member_id, self._rejoin_needed
            started = self._sensors.last_heartbeat = time.monotonic()
            code = self._transport.heartbeat(group_id, generation, member_id)
            self._sensors.heartbeat.record((time.monotonic() - started) * 1000.0)
            if code in _REJOIN_CODES:
                if flagged and code == RebalanceInProgressError.code:
                    continue  # flagged already: the member is still revoking, and stays in the group
                log.info("group %s: heartbeat answered %s; rejoining on the next poll", group_id,
                         error_for_code(code).name)  # type: ignore[union-attr]
                self._flag_rejoin(generation, reset_member=code == UnknownMemberIdError.code,
                                  lost=code != RebalanceInProgressError.code)
            elif code:
                log.warning("group %s: heartbeat failed with error code %d", group_id, code)

    def leave_group(self) -> None:
        with self._wakeup:
            member_id = self._member_id
            self._member_id = ""
            self._generation = -1
            self._stopping = True
            self._wakeup.notify_all()
        thread = self._heartbeat_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._heartbeat_thread = None
        with self._wakeup:
            self._stopping = False
        self._pending_sync = None
        self._join_started = self._sync_started = None
        self._revoked = True
        if member_id and self.group_id is not None:
            code = self._transport.leave_group(self.group_id, member_id)
            if code and code != UnknownMemberIdError.code:
                log.warning("leaving group %s failed with error code %d", self.group_id, code)

