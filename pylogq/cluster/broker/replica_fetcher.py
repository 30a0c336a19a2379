"""Followers copying their leaders' logs: one fetcher thread per source broker (Kafka's
ReplicaFetcherThread and ReplicaFetcherManager).

A partition a broker follows goes to the fetcher of its leader (``num.replica.fetchers``
fetchers per leader, a partition's chosen by hashing its name and number, as Kafka
does). It starts *truncating*: before copying anything, the follower asks the leader
where the follower's latest leader epoch ends in the leader's log
(OffsetForLeaderEpoch, KIP-101/279) and truncates its own log there, so that records a
previous leader wrote but never committed do not survive on this replica. A follower
whose log has no leader epochs yet truncates to its high watermark instead. Then it
*fetches*: one Fetch with the replica id for all of the fetcher's partitions, long-
polling at the leader (``replica.fetch.wait.max.ms``), each answer appended as it is
and the leader's high watermark taken. A partition whose leader answers an error
(a leadership change in flight) backs off for ``replica.fetch.backoff.ms`` and waits
for the controller's next decision.

Thread-safety: a fetcher's partition map is guarded by its lock, which is also held
while a response is applied, so once :meth:`ReplicaFetcherThread.remove_partitions`
returns, that fetcher touches those partitions no more.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ... import errors
from ..broker_link import BrokerLink
from ..contract import BrokerRegistration, FetchResult, InterBrokerConnector, ReplicaFetchPartition
from ..partitioner import java_string_hash
from ..state.partition import Partition
from .replication_quota import ReplicationQuota, is_throttled_replica

__all__ = ["FetcherSettings", "ReplicaFetcherManager", "ReplicaFetcherThread", "fetcher_id"]

log = logging.getLogger("pylogq.replica_fetcher")

TopicPartition = Tuple[str, int]
TRUNCATING = "truncating"
FETCHING = "fetching"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class FetcherSettings(NamedTuple):
    """The ``replica.fetch.*`` keys, in Kafka's units."""

    wait_max_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    backoff_ms: int = 1000
    num_fetchers: int = 1


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Which of a leader's fetchers copies ``topic``-``partition`` (Kafka's choice: the
    absolute value of ``31 * topic.hashCode() + partition`` in Java's int arithmetic)."""
    value = (31 * java_string_hash(topic) + partition) & 0xFFFFFFFF
    if value == 0x80000000:
        return 0
    value = value - (1 << 32) if value & 0x80000000 else value
    return abs(value) % num_fetchers


def _name(code: int) -> str:
    found = errors.error_for_code(code)
    return found.__name__ if found is not None else "error %d" % code


class _FetchState:
    """One partition of a fetcher: where to fetch, in which leader epoch, truncating or fetching."""

    __slots__ = ("state", "leader_epoch", "fetch_offset", "delayed_until")

    def __init__(self, leader_epoch: int, fetch_offset: int) -> None:
        self.state = TRUNCATING
        self.leader_epoch = leader_epoch
        self.fetch_offset = fetch_offset
        self.delayed_until = 0.0


class ReplicaFetcherThread:
    """Copies its partitions from one leader broker, in a thread of its own."""

    def __init__(self, broker_id: int, source: BrokerRegistration, fetcher: int, settings: FetcherSettings,
                 connector: InterBrokerConnector, partitions: Callable[[TopicPartition], Optional[Partition]],
                 broker_epoch: Callable[[], int], listener: Optional[str] = None,
                 quota: Optional[ReplicationQuota] = None) -> None:
        self.broker_id = broker_id
        self.source = source
        self.fetcher = fetcher
        self.settings = settings
        #: The follower's replication throttle (``follower.replication.throttled.rate``).
        self.quota = quota if quota is not None else ReplicationQuota("follower")
        self._link = BrokerLink(source, connector, listener)
        self._partition_of = partitions
        self._broker_epoch = broker_epoch
        self._lock = threading.Condition(threading.RLock())
        self._states: Dict[TopicPartition, _FetchState] = {}
        self._stopped = False
        self.name = "pylogq-replica-fetcher-%d-from-%d-%d" % (broker_id, source.broker_id, fetcher)
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    # -- partitions ---------------------------------------------------------------------

    def add_partitions(self, partitions: Dict[TopicPartition, Tuple[int, int]]) -> None:
        """Start copying ``partitions``: (topic, partition) -> (leader epoch, initial offset, the
        follower's high watermark, used when the leader cannot say where an epoch ends)."""
        with self._lock:
            for tp, (epoch, offset) in partitions.items():
                self._states[tp] = _FetchState(epoch, offset)
            self._lock.notify_all()

    def remove_partitions(self, partitions: Sequence[TopicPartition]) -> None:
        """Stop copying ``partitions``; returns once no response is being applied to them."""
        with self._lock:
            for tp in partitions:
                self._states.pop(tp, None)

    def partition_count(self) -> int:
        with self._lock:
            return len(self._states)

    def fetch_state(self, tp: TopicPartition) -> Optional[Tuple[str, int, int]]:
        """(state, leader epoch, fetch offset) of a partition, for tests and tools."""
        with self._lock:
            s = self._states.get(tp)
            return None if s is None else (s.state, s.leader_epoch, s.fetch_offset)

    # -- the thread ---------------------------------------------------------------------

    def shutdown(self, wait: bool = True) -> None:
        """Stop the thread. A request in flight is abandoned: its connection is shut down, so a
        leader that stopped answering (a frozen process) holds nothing up, and its answer, if any,
        is applied to no partition. ``wait=False`` returns without waiting for the thread to end
        (it ends as soon as its request is over), so that a LeaderAndIsr request that removes a
        frozen leader's partitions is not held by that leader."""
        with self._lock:
            self._stopped = True
            self._states.clear()
            self._lock.notify_all()
        self._link.abort()
        if wait and self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(30)

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self._link.close()

    def _loop(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                now = time.monotonic()
                ready = {tp: s for tp, s in self._states.items() if s.delayed_until <= now}
                if not ready:
                    later = [s.delayed_until for s in self._states.values()]
                    self._lock.wait(max(0.001, min(later) - now) if later else None)
                    continue
            try:
                truncating = {tp: s for tp, s in ready.items() if s.state == TRUNCATING}
                if truncating:
                    self._truncate(truncating)
                    continue
                self._fetch(ready)
            except errors.BrokerNotAvailableError as exc:
                self._back_off(list(ready), "leader %d unreachable: %s" % (self.source.broker_id, exc))
                self._link.close()
            except Exception:  # noqa: BLE001 - a fetcher never dies of one bad answer
                if self._stopped:
                    return
                log.exception("%s: fetch failed; backing off", self.name)
                self._back_off(list(ready), "an unexpected error")
                self._link.close()

    def _back_off(self, partitions: Sequence[TopicPartition], why: str) -> None:
        until = time.monotonic() + self.settings.backoff_ms / 1000.0
        with self._lock:
            for tp in partitions:
                s = self._states.get(tp)
                if s is not None:
                    s.delayed_until = until
        log.debug("%s: backing off %d partitions: %s", self.name, len(partitions), why)

    # -- truncation ---------------------------------------------------------------------

    def _truncate(self, states: Dict[TopicPartition, _FetchState]) -> None:
        asks: Dict[TopicPartition, Tuple[int, int]] = {}
        without: List[TopicPartition] = []
        for tp, s in states.items():
            partition = self._partition_of(tp)
            if partition is None:
                continue
            latest = partition.log.latest_epoch
            if latest is None:
                without.append(tp)
            else:
                asks[tp] = (s.leader_epoch, latest)
        with self._lock:
            for tp in without:  # no epochs yet: the high watermark is the safe point
                self._truncated(tp, states[tp], states[tp].fetch_offset, True)
        if not asks:
            return
        answers = self._link.client().offsets_for_leader_epoch(self.broker_id, asks)
        with self._lock:
            for tp, (_, epoch) in asks.items():
                current = self._states.get(tp)
                if current is None or current is not states[tp]:
                    continue  # removed or replaced meanwhile
                s = current
                answer = answers.get(tp)
                if answer is None or answer.error_code:
                    code = answer.error_code if answer is not None else -1
                    self._delay(s, "OffsetForLeaderEpoch of %s-%d answered %s" % (tp[0], tp[1], _name(code)))
                    continue
                partition = self._partition_of(tp)
                if partition is None:
                    continue
                offset, done = self._truncation_point(partition, s, epoch, answer.leader_epoch, answer.end_offset)
                self._truncated(tp, s, offset, done)

    @staticmethod
    def _truncation_point(partition: Partition, s: _FetchState, asked: int, leader_epoch: int,
                          leader_end: int) -> Tuple[int, bool]:
        """Where to truncate after the leader said ``asked`` ends at (``leader_epoch``,
        ``leader_end``) in its log; -> (offset, whether truncation is complete)."""
        end = partition.log_end_offset
        if leader_end == UNDEFINED_OFFSET:
            return s.fetch_offset, True  # the leader knows no such epoch: the high watermark
        if leader_epoch == UNDEFINED_EPOCH:
            return min(leader_end, end), True
        epoch, follower_end = partition.end_offset_for_epoch(leader_epoch)
        if epoch == UNDEFINED_EPOCH:
            return min(leader_end, end), True
        if epoch != leader_epoch:
            # The leader's epoch is one this replica never saw: cut to where this replica's
            # largest earlier epoch ends and ask again.
            return min(follower_end, end), False
        return min(follower_end, leader_end, end), True

    def _truncated(self, tp: TopicPartition, s: _FetchState, offset: int, done: bool) -> None:
        """Truncate a partition at ``offset`` (lock held) and fetch from its new end when done."""
        partition = self._partition_of(tp)
        if partition is None:
            self._states.pop(tp, None)
            return
        try:
            if partition.truncate_as_follower(offset, s.leader_epoch):
                log.info("%s-%d truncated to offset %d to match leader %d", tp[0], tp[1], offset,
                         self.source.broker_id)
        except errors.NotLeaderOrFollowerError as exc:
            self._delay(s, str(exc))
            return
        if done:
            s.state = FETCHING
            s.fetch_offset = partition.log_end_offset

    def _delay(self, s: _FetchState, why: str) -> None:
        s.delayed_until = time.monotonic() + self.settings.backoff_ms / 1000.0
        log.debug("%s: %s; backing off", self.name, why)

    # -- fetching -----------------------------------------------------------------------

    def _throttled(self, partition: Partition) -> bool:
        """Whether this replica is one the follower throttle holds back (listed, out of the ISR)."""
        return self.broker_id not in partition.isr and is_throttled_replica(
            partition.log.config.follower_replication_throttled_replicas, partition.index, self.broker_id)

    def _fetch(self, states: Dict[TopicPartition, _FetchState]) -> None:
        asks = []
        held = []
        exceeded = self.quota.exceeded()
        for tp, s in states.items():
            partition = self._partition_of(tp)
            if partition is None:
                continue
            if exceeded and self._throttled(partition):
                held.append(tp)
                continue
            asks.append(ReplicaFetchPartition(tp[0], tp[1], s.fetch_offset, partition.log_start_offset,
                                              self.settings.max_bytes, s.leader_epoch))
        if held:
            # Past the bound: they wait out the time the rate needs to come back under it.
            until = time.monotonic() + min(max(self.quota.wait_s(), 0.01), self.settings.backoff_ms / 1000.0)
            with self._lock:
                for tp in held:
                    if self._states.get(tp) is states[tp]:
                        states[tp].delayed_until = until
        if not asks:
            return
        answers = self._link.client().replica_fetch(
            self.broker_id, self._broker_epoch(), asks, self.settings.wait_max_ms, self.settings.min_bytes,
            self.settings.response_max_bytes)
        with self._lock:
            for ask in asks:
                tp = (ask.topic, ask.partition)
                current = self._states.get(tp)
                if current is None or current is not states[tp] or current.fetch_offset != ask.fetch_offset \
                        or current.state != FETCHING:
                    continue  # removed, replaced or moved on meanwhile
                s = current
                answer = answers.get(tp)
                if answer is None:
                    continue
                self._apply(tp, s, answer)

    def _apply(self, tp: TopicPartition, s: _FetchState, answer: FetchResult) -> None:
        """One partition's fetch answer (lock held)."""
        partition = self._partition_of(tp)
        if partition is None:
            self._states.pop(tp, None)
            return
        code = answer.error_code
        try:
            if code == 0:
                if answer.records is not None and len(answer.records):
                    try:
                        data = answer.records.read()
                    except errors.OffsetOutOfRangeError as exc:
                        # An in-process answer is a region of the leader's segment, read here:
                        # the leader truncated it meanwhile (it is leading no more, or not at
                        # this epoch). Asked again after the back-off, it answers what it is now.
                        self._delay(s, "the leader's log changed under the fetch of %s-%d: %s" % (tp[0], tp[1], exc))
                        return
                    partition.append_as_follower(data, s.leader_epoch)
                    if self.quota.bound is not None and self._throttled(partition):
                        self.quota.record(len(data))
                s.fetch_offset = partition.log_end_offset
                partition.update_follower_high_watermark(answer.high_watermark, answer.log_start_offset,
                                                         s.leader_epoch)
            elif code == errors.OffsetOutOfRangeError.code:
                self._out_of_range(tp, s, partition, answer)
            else:
                self._delay(s, "fetch of %s-%d answered %s" % (tp[0], tp[1], _name(code)))
        except errors.NotLeaderOrFollowerError as exc:
            self._delay(s, str(exc))
        except errors.CorruptRecordError as exc:
            # Bytes that do not continue this log (it diverged): find the point again, after
            # the back-off, as Kafka retries a partition with invalid records: bytes damaged on
            # the leader's disk come back at every fetch, and without it this loop would spin.
            log.warning("%s-%d: the leader's records do not continue this replica's log (%s); truncating again",
                        tp[0], tp[1], exc)
            s.state = TRUNCATING
            s.fetch_offset = partition.high_watermark
            self._delay(s, str(exc))
        except errors.KafkaStorageError as exc:
            log.error("%s-%d: cannot write fetched records: %s", tp[0], tp[1], exc)
            self._delay(s, str(exc))

    def _out_of_range(self, tp: TopicPartition, s: _FetchState, partition: Partition, answer: FetchResult) -> None:
        leader_start = answer.log_start_offset
        if leader_start >= 0 and s.fetch_offset < leader_start:
            # The leader deleted what this replica would copy next (retention): start over there.
            log.info("%s-%d: fetch offset %d is below leader %d's log start %d; restarting the log there",
                     tp[0], tp[1], s.fetch_offset, self.source.broker_id, leader_start)
            partition.truncate_fully_as_follower(leader_start, s.leader_epoch)
            s.fetch_offset = leader_start
        else:
            # This replica's log runs past the leader's: find where they agree.
            s.state = TRUNCATING
            s.fetch_offset = partition.high_watermark

    def __repr__(self) -> str:
        return "ReplicaFetcherThread(%s, partitions=%d)" % (self.name, len(self._states))


class ReplicaFetcherManager:
    """The fetcher threads of one broker, by (leader, fetcher id). Thread-safe."""

    def __init__(self, broker_id: int, settings: FetcherSettings, connector: InterBrokerConnector,
                 partitions: Callable[[TopicPartition], Optional[Partition]], broker_epoch: Callable[[], int],
                 listener: Optional[str] = None, quota: Optional[ReplicationQuota] = None) -> None:
        self.broker_id = broker_id
        self.settings = settings
        #: The follower's replication throttle, shared by every fetcher thread.
        self.quota = quota if quota is not None else ReplicationQuota("follower")
        self._connector = connector
        self._partitions = partitions
        self._broker_epoch = broker_epoch
        self._listener = listener
        self._lock = threading.Lock()
        self._fetchers: Dict[Tuple[int, int], ReplicaFetcherThread] = {}
        self._where: Dict[TopicPartition, Tuple[int, int]] = {}

    def add_partitions(self, leader: BrokerRegistration, partitions: Dict[TopicPartition, Tuple[int, int]]) -> None:
        """Copy ``partitions`` from ``leader``: (topic, partition) -> (leader epoch, initial offset)."""
        with self._lock:
            groups: Dict[int, Dict[TopicPartition, Tuple[int, int]]] = {}
            for tp, value in partitions.items():
                groups.setdefault(fetcher_id(tp[0], tp[1], self.settings.num_fetchers), {})[tp] = value
            for fid, group in groups.items():
                key = (leader.broker_id, fid)
                fetcher = self._fetchers.get(key)
                if fetcher is not None and fetcher.source.endpoints != leader.endpoints:
                    # The leader came back on another address: a new fetcher for it.
                    fetcher.shutdown(wait=False)
                    fetcher = None
                if fetcher is None:
                    fetcher = ReplicaFetcherThread(self.broker_id, leader, fid, self.settings, self._connector,
                                                   self._partitions, self._broker_epoch, self._listener, self.quota)
                    self._fetchers[key] = fetcher
                    fetcher.start()
                fetcher.add_partitions(group)
                for tp in group:
                    self._where[tp] = key

    def remove_partitions(self, partitions: Sequence[TopicPartition]) -> None:
        """Stop copying ``partitions``; returns once no fetcher is applying a response to them."""
        with self._lock:
            by_fetcher: Dict[Tuple[int, int], List[TopicPartition]] = {}
            for tp in partitions:
                key = self._where.pop(tp, None)
                if key is not None:
                    by_fetcher.setdefault(key, []).append(tp)
            fetchers = [(self._fetchers[k], tps) for k, tps in by_fetcher.items() if k in self._fetchers]
        for fetcher, tps in fetchers:
            fetcher.remove_partitions(tps)
        self.shutdown_idle()

    def shutdown_idle(self) -> None:
        """Stop fetchers left with no partitions."""
        with self._lock:
            idle = [(k, f) for k, f in self._fetchers.items() if f.partition_count() == 0]
            for k, _ in idle:
                del self._fetchers[k]
        for _, f in idle:
            f.shutdown(wait=False)

    def fetcher_of(self, tp: TopicPartition) -> Optional[ReplicaFetcherThread]:
        with self._lock:
            key = self._where.get(tp)
            return self._fetchers.get(key) if key is not None else None

    def fetchers(self) -> List[ReplicaFetcherThread]:
        with self._lock:
            return list(self._fetchers.values())

    def shutdown(self) -> None:
        with self._lock:
            fetchers = list(self._fetchers.values())
            self._fetchers.clear()
            self._where.clear()
        for f in fetchers:
            f.shutdown()
