"""A flow's source task: copies its share of the source partitions to the target, in order.

Task ``i`` of flow ``A->B`` (of ``tasks.max``) copies the source partitions ``(t, p)`` with
``murmur2(t + "-" + p) % tasks.max == i`` (:func:`task_of`) among the topics the flow
mirrors, each to the same partition of the remote topic (``A.t``), with its key, value,
headers and timestamp (as a CreateTime: a LogAppendTime source keeps its times), in
offset order. It reads with a consumer of its own on the source (manual assignment, no
group) and writes with a producer on the target that never creates a topic: the flow's
leader creates remote topics (:mod:`pylogq.mirror.leader`), and a source partition
whose remote partition does not exist yet waits, looked at again every second.

**Positions.** Where the task resumes is stored on the target, as the committed offsets
of the consumer group ``mm2-A->B`` keyed by the remote partition, each the next source
offset to copy (Kafka Connect keeps a source task's offsets in a topic of its own; a
group's offsets are the same thing under a name every tool can read). A partition
without one starts from ``auto.offset.reset`` (``earliest`` unless the consumer settings
say otherwise).

**At least once** (the default): an idempotent producer; a position moves past a record
only once the target has acknowledged its copy, and is committed every second
(:data:`COMMIT_INTERVAL_S`) and when the task stops, with an OffsetCommit of no member
(:meth:`~pylogq.client.admin.AdminClient.alter_consumer_group_offsets`). A task that
dies copies again, when it restarts, what it copied after its last commit: duplicates,
never a gap.

**Exactly once** (``<target>.exactly.once.source.support = enabled``): a transactional
producer, ``transactional.id = mm2-A->B-task-<i>``, whose ``init_transactions`` at start
fences a previous owner of the task and aborts what it left open; then each batch of
records (a poll's, and what the consumer has at hand then, up to 10,000 records or 0.1 s)
is one transaction with the positions after them (``send_offsets_to_transaction`` to
group ``mm2-A->B``, a TxnOffsetCommit), so the copies and the positions commit together
or not at all. A failed transaction is aborted and the task ends (the worker starts it
again from the committed positions). The positions a new owner reads are those of the
last transaction: its ``init_transactions``, with the task's transactional id, returns
only once that transaction is complete, markers and offsets included.

**Offset syncs** (unless ``emit.offset-syncs.enabled = false``): every acknowledged copy
goes through an :class:`~pylogq.mirror.offsets.OffsetSyncQueue`; the syncs it makes due
are sent at once, the latest of each partition at every commit of the positions, with a
producer of their own to the offset-syncs topic (partition 0). In exactly-once mode the
copies count as acknowledged once their transaction committed (Kafka Connect's
``commitRecord`` comes then too). A lost sync costs precision, not correctness: it is
logged, not retried.

**Metrics**: per remote partition (:class:`~pylogq.mirror.metrics.MirrorMetrics`), recorded
per poll: records and value bytes copied, record age (when read) and replication latency
(when acknowledged), and lag (the source's high watermark at the last fetch minus the
position acknowledged).

The task runs on a thread of its own (:meth:`SourceTask.start`); :meth:`SourceTask.stop`
asks it to finish cleanly (at least once: flush and commit; exactly once: the open
transaction, if any, was committed before the stop is seen) and waits. A task that
fails keeps the error in :attr:`SourceTask.error`. Its clients are its thread's alone;
:meth:`stop`, :meth:`poke` and the properties are safe from any thread.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Deque, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from ..client.admin import AdminClient
from ..client.consumer import Consumer, ConsumerRecord, OffsetAndMetadata, TopicPartition
from ..client.producer import FutureRecordMetadata, Producer
from ..cluster.partitioner import murmur2, to_positive
from ..errors import PylogqError
from ._threads import Threaded
from .clients import FlowClients
from .config import FlowConfig
from .metrics import MirrorMetrics, PartitionMetrics
from .offsets import OffsetSyncQueue

__all__ = ["COMMIT_INTERVAL_S", "PENDING_RECHECK_S", "TRANSACTION_MAX_RECORDS", "TRANSACTION_MAX_S", "SourceTask",
           "flow_group", "task_of", "transactional_id"]

log = logging.getLogger("pylogq.mirror.task")

#: How often an at-least-once task commits the positions its copies reached.
COMMIT_INTERVAL_S = 1.0
#: How often a task looks again for the remote partitions it waits for.
PENDING_RECHECK_S = 1.0
#: The most records, and the longest time, an exactly-once task puts in one transaction (more
#: when one poll returns more): whatever the consumer has at hand once the first poll returned.
TRANSACTION_MAX_RECORDS = 10000
TRANSACTION_MAX_S = 0.1
#: The pause after a cluster did not answer, before the next try.
RETRY_BACKOFF_S = 0.5
#: How long a stopping task waits for its copies to be acknowledged.
STOP_TIMEOUT_S = 30.0


def task_of(topic: str, partition: int, tasks_max: int) -> int:
    """The task of a flow with ``tasks_max`` tasks that copies source partition ``topic``/``partition``:
    ``murmur2(topic + "-" + partition)`` made positive, modulo ``tasks_max``."""
    return to_positive(murmur2(("%s-%d" % (topic, partition)).encode("utf-8"))) % tasks_max


def flow_group(flow: FlowConfig) -> str:
    """The consumer group on the target whose committed offsets are the flow's positions: ``mm2-A->B``."""
    return "mm2-%s" % flow.name


def transactional_id(flow: FlowConfig, index: int) -> str:
    """The transactional id of task ``index`` of an exactly-once flow: ``mm2-A->B-task-<index>``."""
    return "mm2-%s-task-%d" % (flow.name, index)


class _Sent(NamedTuple):
    """The copies of one poll's records of one source partition, waiting for acknowledgement,
    with their timestamps' sum, least and greatest (for the latency metrics)."""

    records: List[ConsumerRecord]
    futures: List[FutureRecordMetadata]
    stamp_sum: int
    stamp_min: int
    stamp_max: int


class SourceTask(Threaded):
    """Task ``index`` of ``flow``: see the module docstring.

    ``clients`` makes its clients, ``metrics`` takes its readings. Lifecycle: :meth:`start`
    once, then :meth:`stop` (or :meth:`request_stop` and :meth:`join`); after the thread
    ends, :attr:`error` says why if it failed. Not restartable: the worker makes a new one.
    """

    def __init__(self, flow: FlowConfig, index: int, clients: FlowClients, metrics: MirrorMetrics) -> None:
        if not 0 <= index < flow.tasks_max:
            raise ValueError("task %d of flow %s, which has %d" % (index, flow.name, flow.tasks_max))
        self.flow = flow
        self.index = index
        self.name = "%s-task-%d" % (flow.name, index)
        super().__init__("mirror-" + self.name)
        self.group = flow_group(flow)
        self._clients = clients
        self._metrics = metrics
        self._exactly_once = flow.exactly_once
        self._lost = threading.Event()  # stopping without committing: the task runs elsewhere now
        self._poked = threading.Event()
        self._partitions: Tuple[TopicPartition, ...] = ()
        #: Why the task's thread ended, if it failed.
        self.error: Optional[BaseException] = None
        #: Copies the target acknowledged since the task started.
        self.copied = 0
        # The thread's own state from here on.
        self._consumer: Optional[Consumer] = None
        self._metadata: Optional[Consumer] = None  # the target's metadata: which remote partitions exist
        self._producer: Optional[Producer] = None
        self._admin: Optional[AdminClient] = None
        self._sync_producer: Optional[Producer] = None
        self._syncs: Optional[OffsetSyncQueue] = None
        self._remote: Dict[TopicPartition, TopicPartition] = {}  # source partition -> remote partition
        self._inflight: Dict[TopicPartition, Deque[_Sent]] = {}
        self._acked: Dict[TopicPartition, int] = {}  # source partition -> next offset whose copy is unacknowledged
        self._committed: Dict[TopicPartition, int] = {}  # source partition -> the position committed
        self._pending: Set[TopicPartition] = set()  # source partitions whose remote partition is missing
        self._part_metrics: Dict[TopicPartition, PartitionMetrics] = {}

    # -- control, from any thread ------------------------------------------------------------

    def start(self) -> None:
        """Start copying, on a thread of the task's own."""
        self._start_thread()

    def request_stop(self) -> None:
        """Ask the task to finish cleanly, without waiting."""
        self._stopping.set()
        self._poked.set()

    def request_lost(self) -> None:
        """Ask the task to stop without committing anything more, without waiting: the worker's
        membership expired, so another process may run the task already, and positions
        committed from here could only go back (at least once: copies made again; exactly
        once, the open transaction is aborted, as its new owner's would be)."""
        self._lost.set()
        self.request_stop()

    def poke(self) -> None:
        """Look for new topics and partitions now (the flow's leader created some)."""
        self._poked.set()

    @property
    def partitions(self) -> Tuple[TopicPartition, ...]:
        """The source partitions the task copies now."""
        return self._partitions

    # -- the thread --------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._open()
            self._copy_loop()
            if self._lost.is_set():
                self._abandon()
            else:
                self._finish()
        except BaseException as exc:  # the worker reports it and starts the task again
            self.error = exc
            log.error("task %s failed: %s", self.name, exc, exc_info=not isinstance(exc, PylogqError))
            self._abandon()
        finally:
            self._close()

    def _open(self) -> None:
        flow = self.flow
        clients = self._clients
        client_id = "mm2-%s" % self.name
        self._admin = clients.admin("target", {"client_id": client_id + "-admin"})
        producer_defaults: Dict[str, Any] = {"client_id": client_id, "acks": -1, "enable_idempotence": True}
        forced: Dict[str, Any] = {"allow_auto_create_topics": False}
        if self._exactly_once:
            forced.update(transactional_id=transactional_id(flow, self.index), enable_idempotence=True)
        self._producer = clients.producer("target", producer_defaults, **forced)
        if self._exactly_once:
            # Fences the task's previous owner and aborts what it left open, so the positions
            # read next are the last ones committed with their copies.
            self._producer.init_transactions()
        self._consumer = clients.consumer("source", {"client_id": client_id}, group_id=None, enable_auto_commit=False)
        self._metadata = clients.consumer("target", {"client_id": client_id + "-metadata"}, group_id=None,
                                          enable_auto_commit=False)
        if flow.emit_offset_syncs_enabled:
            self._syncs = OffsetSyncQueue(flow.offset_lag_max)
            self._sync_producer = clients.producer(flow.offset_syncs_side, {"client_id": client_id + "-offset-syncs"},
                                                   allow_auto_create_topics=False)

    def _copy_loop(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        period = self.flow.period("refresh_topics")
        now = time.monotonic()
        refresh_at = now  # the first look, in the loop: a cluster not answering yet is tried again
        recheck_at = now + PENDING_RECHECK_S
        commit_at = now + COMMIT_INTERVAL_S
        poll_ms = self.flow.consumer_poll_timeout_ms
        while not self._stopping.is_set():
            now = time.monotonic()
            poked = self._poked.is_set()
            if now >= refresh_at or poked or (self._pending and now >= recheck_at):
                self._poked.clear()
                whole = poked or now >= refresh_at
                try:
                    self._refresh(all_topics=whole)
                    if whole:
                        refresh_at = float("inf") if period is None else now + period
                except PylogqError as exc:
                    if not getattr(exc, "retriable", False):
                        raise
                    # A cluster not answering: the partitions copied so far go on.
                    log.warning("task %s could not look for partitions (again in %g s): %s", self.name,
                                PENDING_RECHECK_S, exc)
                    if whole:
                        refresh_at = now + PENDING_RECHECK_S
                recheck_at = now + PENDING_RECHECK_S
            if not self._partitions:
                wake = min(refresh_at, recheck_at if self._pending else float("inf"), now + 1.0)
                self._poked.wait(max(0.0, wake - time.monotonic()))
                continue
            try:
                polled = consumer.poll(timeout_ms=poll_ms)
            except PylogqError as exc:
                if not getattr(exc, "retriable", False):
                    raise
                # The source's broker went away: the consumer finds the new leader at its next poll.
                log.warning("task %s: reading the source: %s", self.name, exc)
                self._stopping.wait(RETRY_BACKOFF_S)
                continue
            if polled:
                if self._exactly_once:
                    self._copy_in_transaction(polled)
                else:
                    self._send_all(polled)
            self._complete()
            if time.monotonic() >= commit_at:
                self._commit()
                commit_at = time.monotonic() + COMMIT_INTERVAL_S
            self._send_syncs()

    # -- which partitions --------------------------------------------------------------------

    def _refresh(self, all_topics: bool) -> None:
        """Find this task's source partitions whose remote partitions exist: start the new ones at
        their positions, let go of those gone. ``all_topics`` False: look only at the waiting ones.

        What is asked of the clusters (topics, partition counts, the new partitions' positions)
        is asked first: a cluster not answering raises before anything changed, and the loop
        tries again later. Only then are the copies taken and the partitions reassigned, so a
        copy that failed fails the task here as it does in the loop."""
        consumer = self._consumer
        assert consumer is not None
        flow = self.flow
        if all_topics:
            candidates: Set[TopicPartition] = set()
            for topic in consumer.topics():
                if not flow.should_replicate_topic(topic):
                    continue
                numbers = consumer.partitions_for_topic(topic) or set()
                candidates.update(TopicPartition(topic, p) for p in numbers
                                  if task_of(topic, p, flow.tasks_max) == self.index)
        else:
            candidates = set(self._partitions) | self._pending
        remote_counts = {topic: self._remote_partitions(flow.remote_topic(topic))
                         for topic in sorted({tp.topic for tp in candidates})}
        ready = {tp for tp in candidates if tp.partition < remote_counts[tp.topic]}
        current = set(self._partitions)
        added = sorted(ready - current)
        positions = self._positions(added) if added else {}
        self._pending = candidates - ready
        if ready == current:
            return
        gone = current - ready
        if gone:
            self._complete(wait=True)
            self._commit(only=gone)
            for tp in gone:
                self._let_go(tp)
        partitions = sorted(ready)
        consumer.assign(partitions)
        self._partitions = tuple(partitions)
        for tp in added:
            remote = self._remote[tp] = TopicPartition(flow.remote_topic(tp.topic), tp.partition)
            self._part_metrics[tp] = self._metrics.partition(flow.source, flow.target, remote.topic, remote.partition)
            position = positions.get(tp)
            if position is not None:
                consumer.seek(tp, position)
                self._acked[tp] = self._committed[tp] = position
        log.info("task %s copies %d partitions (%d new, %d let go, %d waiting for their remote partition)",
                 self.name, len(partitions), len(added), len(gone), len(self._pending))

    def _remote_partitions(self, remote_topic: str) -> int:
        """How many partitions the remote topic has on the target (0: it does not exist yet)."""
        assert self._metadata is not None
        found = self._metadata.partitions_for_topic(remote_topic)
        return 0 if found is None else len(found)

    def _positions(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """Where ``partitions`` start: the committed offsets of the flow's group on the target
        (those with none start from ``auto.offset.reset``). Exactly once, they are read as
        stable (KIP-447's ``require_stable``): a position a transaction still holds is waited
        for, as UnstableOffsetCommitError is retriable."""
        assert self._admin is not None
        remote_topic = self.flow.remote_topic
        wanted = {TopicPartition(remote_topic(tp.topic), tp.partition): tp for tp in partitions}
        committed = self._admin.list_consumer_group_offsets(self.group, partitions=list(wanted),
                                                            require_stable=self._exactly_once)
        return {tp: found.offset for remote, tp in wanted.items()
                if (found := committed.get(remote)) is not None and found.offset >= 0}

    def _let_go(self, tp: TopicPartition) -> None:
        """Forget a source partition the task no longer copies."""
        self._inflight.pop(tp, None)
        self._acked.pop(tp, None)
        self._committed.pop(tp, None)
        self._part_metrics.pop(tp, None)
        remote = self._remote.pop(tp, None)
        if self._syncs is not None:
            self._syncs.forget([tp])
        if remote is not None:
            self._metrics.forget(self.flow.source, self.flow.target, remote.topic, remote.partition)

    # -- copying -----------------------------------------------------------------------------

    def _send_all(self, polled: Dict[TopicPartition, List[ConsumerRecord]]) -> None:
        """Send the copies of a poll's records; they are taken when acknowledged (:meth:`_complete`)."""
        producer = self._producer
        assert producer is not None
        send = producer.send
        now_ms = time.time() * 1000.0
        for tp, records in polled.items():
            remote = self._remote[tp]
            topic, partition = remote.topic, remote.partition
            # The consumer's headers list is the copy's (a header's value may be null, which the
            # producer takes though its signature says bytes); a record without a timestamp (-1,
            # a v0 message) gets the time of its copy, as a producer stamps one.
            futures = [send(topic, r.value, r.key, r.headers or None,  # type: ignore[arg-type]
                            partition, r.timestamp if r.timestamp >= 0 else None)
                       for r in records]
            stamps = [r.timestamp for r in records]
            sent = _Sent(records, futures, sum(stamps), min(stamps), max(stamps))
            queue = self._inflight.get(tp)
            if queue is None:
                queue = self._inflight[tp] = collections.deque()
            queue.append(sent)
            nbytes = sum([r.serialized_value_size for r in records if r.serialized_value_size > 0])
            self._part_metrics[tp].read(len(stamps), nbytes, (len(stamps) * now_ms - sent.stamp_sum,
                                                              now_ms - sent.stamp_max, now_ms - sent.stamp_min,
                                                              now_ms - stamps[-1]))

    def _copy_in_transaction(self, polled: Dict[TopicPartition, List[ConsumerRecord]]) -> None:
        """Exactly once: the copies and the positions after them in one transaction. Records the
        consumer has at hand join it too, up to :data:`TRANSACTION_MAX_RECORDS` or
        :data:`TRANSACTION_MAX_S` (a transaction costs several round trips to its coordinator
        whatever its size)."""
        producer = self._producer
        consumer = self._consumer
        assert producer is not None and consumer is not None
        positions: Dict[TopicPartition, int] = {}
        started = time.monotonic()
        copied = 0
        producer.begin_transaction()
        try:
            while True:
                self._send_all(polled)
                for tp, records in polled.items():
                    positions[tp] = records[-1].offset + 1
                    copied += len(records)
                if self._lost.is_set():
                    # Lost: nothing more is committed; _run aborts the transaction as the task ends.
                    self._inflight.clear()
                    return
                if copied >= TRANSACTION_MAX_RECORDS or time.monotonic() - started >= TRANSACTION_MAX_S \
                        or self._stopping.is_set():
                    break
                try:
                    polled = consumer.poll(timeout_ms=0)
                except PylogqError as exc:
                    if not getattr(exc, "retriable", False):
                        raise
                    break  # the source's broker went away: commit what was sent; the loop retries
                if not polled:
                    break
            producer.send_offsets_to_transaction(
                {self._remote[tp]: OffsetAndMetadata(position, "", -1) for tp, position in positions.items()},
                self.group)
            producer.commit_transaction()
        except BaseException:
            self._inflight.clear()  # nothing of the transaction counts: the task ends and starts again
            raise
        self._complete(wait=True)
        self._committed.update(positions)
        if self._syncs is not None:
            self._syncs.promote_delayed()

    def _complete(self, wait: bool = False) -> None:
        """Take the acknowledged copies in order: move the positions, queue offset syncs, record the
        metrics. ``wait``: flush the producer first, so that every copy sent is acknowledged. A
        copy that failed fails the task (its position stays before it)."""
        if not self._inflight:
            return
        producer = self._producer
        assert producer is not None
        if wait:
            producer.flush(STOP_TIMEOUT_S)
        now_ms = time.time() * 1000.0
        for tp, queue in self._inflight.items():
            done = 0
            total = 0.0
            smallest = float("inf")
            largest = float("-inf")
            last = 0.0
            while queue and queue[0].futures[-1].is_done:
                sent = queue[0]
                self._take(tp, sent)  # raises for a failed copy, which stays first in its queue
                queue.popleft()
                count = len(sent.records)
                total += count * now_ms - sent.stamp_sum
                smallest = min(smallest, now_ms - sent.stamp_max)
                largest = max(largest, now_ms - sent.stamp_min)
                last = now_ms - sent.records[-1].timestamp
                done += count
                self._acked[tp] = sent.records[-1].offset + 1
            if done:
                self.copied += done
                self._part_metrics[tp].acknowledged(done, (total, smallest, largest, last))

    def _take(self, tp: TopicPartition, sent: _Sent) -> None:
        """Check one poll's copies of one partition and queue their offset syncs, a producer batch
        at a time: the copies in one batch have consecutive offsets on the target, and where their
        source offsets are consecutive too the sync rule runs once per due sync, not per record."""
        records, futures = sent.records, sent.futures
        syncs = self._syncs
        n = len(futures)
        i = 0
        while i < n:
            batch = futures[i].batch
            metadata = futures[i].value
            if metadata is None:
                error = futures[i].exception
                raise error if error is not None else PylogqError(
                    "the copy of %s-%d offset %d was not acknowledged" % (tp.topic, tp.partition, records[i].offset))
            j = i + 1
            while j < n and futures[j].batch is batch:
                j += 1
            if syncs is not None:
                downstream = metadata.offset
                upstream = records[i].offset
                if records[j - 1].offset - upstream == j - 1 - i:
                    syncs.maybe_queue_run(tp, upstream, downstream, j - i, self._send_syncs)
                else:  # offsets skipped on the source (transaction markers, compaction): one by one
                    for k in range(i, j):
                        if syncs.maybe_queue(tp, records[k].offset, downstream + k - i):
                            self._send_syncs()
            i = j

    # -- positions and syncs ---------------------------------------------------------------

    def _commit(self, only: Optional[Iterable[TopicPartition]] = None) -> None:
        """At least once: commit the positions the acknowledged copies reached (of ``only``, or of
        every partition), and make the latest undue offset sync of each partition due. Both
        modes: the lag metrics."""
        if not self._exactly_once and not self._lost.is_set():
            wanted = None if only is None else set(only)
            changed = {tp: position for tp, position in self._acked.items()
                       if self._committed.get(tp) != position and (wanted is None or tp in wanted)}
            if changed:
                assert self._admin is not None
                try:
                    self._admin.alter_consumer_group_offsets(
                        self.group, {self._remote[tp]: OffsetAndMetadata(position, "", -1)
                                     for tp, position in changed.items()})
                except PylogqError as exc:
                    if not getattr(exc, "retriable", False):
                        raise
                    # The target's coordinator is away: the next commit carries these positions too
                    # (until then a restart would copy a little more again, never less).
                    log.warning("task %s could not commit its positions: %s", self.name, exc)
                else:
                    self._committed.update(changed)
            if self._syncs is not None:
                self._syncs.promote_delayed()
        self._update_lag()

    def _update_lag(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        for tp in self._partitions:
            metrics = self._part_metrics.get(tp)
            if metrics is None:
                continue
            highwater = consumer.highwater(tp)
            acked = self._acked.get(tp)
            metrics.set_lag(None if highwater is None or acked is None else max(0, highwater - acked))

    def _send_syncs(self) -> None:
        syncs = self._syncs
        producer = self._sync_producer
        if syncs is None or producer is None:
            return
        topic = self.flow.offset_syncs_topic
        for sync in syncs.take_pending():
            try:
                future = producer.send(topic, sync.encode_value(), sync.encode_key(), partition=0)
            except PylogqError as exc:
                syncs.sent()
                log.warning("task %s could not send an offset sync to %s: %s", self.name, topic, exc)
                continue
            future.add_both(self._sync_sent)

    def _sync_sent(self, result: Any) -> None:
        """A sync's send finished (on the sync producer's sender thread)."""
        assert self._syncs is not None
        self._syncs.sent()
        if isinstance(result, BaseException):
            log.warning("task %s: an offset sync to %s failed: %s", self.name, self.flow.offset_syncs_topic, result)

    # -- ending ------------------------------------------------------------------------------

    def _finish(self) -> None:
        """The clean stop: every copy acknowledged, the positions committed, the syncs sent."""
        self._complete(wait=True)
        self._commit()
        self._send_syncs()
        if self._sync_producer is not None:
            try:
                self._sync_producer.flush(STOP_TIMEOUT_S)
            except PylogqError as exc:
                log.warning("task %s stopped with offset syncs unsent: %s", self.name, exc)

    def _abandon(self) -> None:
        """After a failure or a loss, an open transaction is aborted (its next owner would abort it
        anyway)."""
        producer = self._producer
        if producer is None or not self._exactly_once:
            return
        try:
            producer.abort_transaction(timeout=5.0)
        except Exception as exc:  # nothing open, or fenced: either way nothing of it commits
            log.debug("task %s: aborting after its failure: %s", self.name, exc)

    def _close(self) -> None:
        for tp in list(self._remote):
            self._let_go(tp)
        clients: List[Tuple[str, Any]] = [("consumer", self._consumer), ("target metadata consumer", self._metadata),
                                          ("producer", self._producer), ("offset sync producer", self._sync_producer),
                                          ("admin client", self._admin)]
        for what, client in clients:
            if client is None:
                continue
            try:
                if isinstance(client, Producer):
                    # After a failure or a loss, what is unsent is dropped: the copies are made again.
                    client.close(timeout=0 if self.error is not None or self._lost.is_set() else 5.0)
                else:
                    client.close()
            except Exception as exc:
                log.debug("task %s: closing its %s: %s", self.name, what, exc)
        self._consumer = self._metadata = self._producer = self._sync_producer = None
        self._admin = None
        self._partitions = ()

    def __repr__(self) -> str:
        return "SourceTask(%s, %d partitions%s)" % (self.name, len(self._partitions),
                                                   ", failed" if self.error is not None else "")
