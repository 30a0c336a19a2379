"""Writing a decided transaction's COMMIT or ABORT markers to its partitions (Kafka's
TransactionMarkerChannelManager).

Once the coordinator has stored PrepareCommit or PrepareAbort, :class:`MarkerWriter`
sends WriteTxnMarkers to each partition's leader, the markers of every transaction
waiting for one leader in one request. Each broker has at most one request in flight,
and the brokers are asked independently (Kafka's marker channel, a queue per broker): a
leader that is slow to answer, or frozen until the request times out, holds back only
the markers it owes. A partition that answers a retriable error (its leader moved, too
few in-sync replicas, the leader unreachable) is tried again, at its leader then, after
``retry_backoff_ms``; a partition whose topic is gone is dropped, as Kafka drops it.
When every partition of a transaction has its marker, ``on_written`` is called, on a
thread of its own (the coordinator then stores CompleteCommit or CompleteAbort, which
waits for ``__transaction_state``'s in-sync replicas: the markers of other transactions
go on meanwhile); when it answers False (the write failed and may succeed later), it is
called again after ``retry_backoff_ms``, as Kafka retries its transaction log appends. A coordinator that was fenced (its marker refused with
TRANSACTION_COORDINATOR_FENCED or INVALID_PRODUCER_EPOCH: a newer coordinator or
producer epoch has taken over) gives the transaction up: ``on_written`` is not called,
and its next coordinator completes it.

Thread-safe: :meth:`add` and :meth:`drop` may be called from any thread.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from typing import Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from .... import errors
from ...contract import TxnMarker

__all__ = ["MarkerWriter", "PendingMarkers"]

log = logging.getLogger(__name__)

#: (broker id, markers) -> each marker's (by producer id) error code per partition; raises
#: BrokerNotAvailableError (or any error) when the broker could not be asked.
SendMarkers = Callable[[int, Sequence[TxnMarker]], Mapping[int, Mapping[Tuple[str, int], int]]]
#: (topic, partition) -> its leader's broker id, -1 when it has none now, None when the
#: partition does not exist.
LeaderOf = Callable[[str, int], Optional[int]]

#: Codes after which a partition's marker is sent again.
_RETRIABLE = frozenset({
    errors.NotLeaderOrFollowerError.code, errors.UnknownTopicOrPartitionError.code,
    errors.NotEnoughReplicasError.code, errors.NotEnoughReplicasAfterAppendError.code,
    errors.RequestTimedOutError.code, errors.KafkaStorageError.code, errors.BrokerNotAvailableError.code,
    errors.LeaderNotAvailableError.code, errors.NetworkExceptionError.code, errors.CoordinatorLoadInProgressError.code,
    errors.NotCoordinatorError.code, errors.CoordinatorNotAvailableError.code,
})
#: Codes after which a partition's marker is not sent again (Kafka's: the broker cannot take
#: a marker at all); any other code is tried again, and logged when not retriable.
_WRITTEN_ENOUGH = frozenset({errors.UnsupportedVersionError.code, errors.UnsupportedForMessageFormatError.code})
#: A partition's backoff while its leader has a request in flight: due once it answers.
_UNTIL_ANSWERED = float("inf")
#: Codes that say this coordinator (or the producer epoch it writes) was overtaken.
_FENCED = frozenset({errors.TransactionCoordinatorFencedError.code, errors.InvalidProducerEpochError.code,
                     errors.ProducerFencedError.code})


class PendingMarkers(NamedTuple):
    """One transaction's markers still to write: the coordinator partition and epoch that
    decided it (its key for :meth:`MarkerWriter.drop`), and the marker."""

    transactional_id: str
    txn_partition: int
    marker: TxnMarker


class MarkerWriter:
    """The markers of decided transactions: a dispatching thread, and a pool on which each
    broker's requests are sent, one at a time per broker."""

    #: Brokers asked at once (a request per broker; more brokers wait for a free sender).
    SENDERS = 8
    #: ``on_written`` calls run at once (each may wait for its partition's in-sync replicas).
    COMPLETERS = 4

    def __init__(self, send: SendMarkers, leader_of: LeaderOf,
                 on_written: Callable[[PendingMarkers], bool], retry_backoff_ms: int = 100,
                 name: str = "pylogq-txn-markers") -> None:
        self._send = send
        self._leader_of = leader_of
        self._on_written = on_written
        self._backoff_s = retry_backoff_ms / 1000.0
        self._cond = threading.Condition()
        #: transactional id -> (its pending markers, the partitions still without one).
        self._pending: Dict[str, Tuple[PendingMarkers, Set[Tuple[str, int]]]] = {}
        #: (transactional id, partition) in a request not answered yet.
        self._in_flight: Set[Tuple[str, Tuple[str, int]]] = set()
        #: The brokers with a request in flight, and the partitions waiting for each to answer.
        self._busy: Dict[int, Set[Tuple[str, Tuple[str, int]]]] = {}
        #: (transactional id, partition) -> not sent again before this time (a backoff).
        self._not_before: Dict[Tuple[str, Tuple[str, int]], float] = {}
        #: Transactions whose markers are written, and whose completion is to be tried again at
        #: the time given (an ``on_written`` that answered False).
        self._completions: Dict[str, Tuple[PendingMarkers, float]] = {}
        self._closed = False
        self._senders = _Workers(self.SENDERS, name + "-send")
        self._completers = _Workers(self.COMPLETERS, name + "-complete")
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, pending: PendingMarkers) -> None:
        with self._cond:
            self._pending[pending.transactional_id] = (pending, set(pending.marker.partitions))
            self._cond.notify_all()

    def drop(self, txn_partition: int) -> None:
        """Forget the transactions of a coordinator partition (no longer led here); answers
        to their requests in flight are ignored."""
        with self._cond:
            for txn_id in [t for t, (p, _) in self._pending.items() if p.txn_partition == txn_partition]:
                del self._pending[txn_id]
            for txn_id in [t for t, (p, _) in self._completions.items() if p.txn_partition == txn_partition]:
                del self._completions[txn_id]

    def complete_later(self, pending: PendingMarkers) -> None:
        """Call ``on_written`` for ``pending`` after the backoff (its markers are written, or
        it owed none, and the completion's write failed)."""
        with self._cond:
            if not self._closed:
                self._completions[pending.transactional_id] = (pending, time.monotonic() + self._backoff_s)
                self._cond.notify_all()

    def pending(self, transactional_id: str) -> Optional[Set[Tuple[str, int]]]:
        """The partitions still without a marker of ``transactional_id``'s transaction."""
        with self._cond:
            entry = self._pending.get(transactional_id)
            return None if entry is None else set(entry[1])

    def close(self, timeout: float = 10.0) -> None:
        """Stop: nothing is sent or completed any more; waits up to ``timeout`` for the calls
        under way (a send the caller aborted first ends at once)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        self._thread.join(timeout)
        self._senders.close(max(0.0, deadline - time.monotonic()))
        self._completers.close(max(0.0, deadline - time.monotonic()))

    # -- the dispatching thread -------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                due: List[Tuple[str, Tuple[str, int]]] = []
                later: List[float] = []
                for txn_id, (_, left) in self._pending.items():
                    for tp in left:
                        key = (txn_id, tp)
                        if key in self._in_flight:
                            continue
                        at = self._not_before.get(key, 0.0)
                        if at <= now:
                            due.append(key)
                        elif at != _UNTIL_ANSWERED:
                            later.append(at)
                completing = [p for p, at in self._completions.values() if at <= now]
                for pending in completing:
                    del self._completions[pending.transactional_id]
                later.extend(at for _, at in self._completions.values())
                if not due and not completing:
                    self._cond.wait(max(0.0, min(later) - now) if later else None)
                    continue
            for pending in completing:
                self._completers.submit(self._complete, pending)
            if not due:
                continue
            try:
                self._dispatch(due)
            except Exception:  # noqa: BLE001 - the thread lives on; the markers are tried again
                log.exception("writing transaction markers")
                with self._cond:
                    retry_at = time.monotonic() + self._backoff_s
                    self._not_before.update((key, retry_at) for key in due)

    def _dispatch(self, due: List[Tuple[str, Tuple[str, int]]]) -> None:
        """Send each partition due to its leader now, unless that leader has a request in
        flight (the partition then goes once it has answered)."""
        leaders = {key: self._leader_of(*key[1]) for key in due}  # outside the lock: metadata
        gone: List[Tuple[str, Tuple[str, int]]] = []
        with self._cond:
            retry_at = time.monotonic() + self._backoff_s
            by_leader: Dict[int, Dict[str, List[Tuple[str, int]]]] = {}
            for key, leader in leaders.items():
                txn_id, tp = key
                entry = self._pending.get(txn_id)
                if entry is None or tp not in entry[1] or key in self._in_flight:
                    continue  # written, dropped or sent meanwhile
                if leader is None:
                    gone.append(key)  # the topic was deleted: no marker is owed
                elif leader < 0:
                    self._not_before[key] = retry_at
                elif leader in self._busy:
                    self._busy[leader].add(key)
                    self._not_before[key] = _UNTIL_ANSWERED
                else:
                    by_leader.setdefault(leader, {}).setdefault(txn_id, []).append(tp)
            requests = []
            for leader, txns in by_leader.items():
                self._busy[leader] = set()
                work = {txn_id: (self._pending[txn_id][0], tps) for txn_id, tps in txns.items()}
                for txn_id, tps in txns.items():
                    self._sending((txn_id, tp) for tp in tps)
                requests.append((leader, work))
            owed: Dict[str, Tuple[Optional[PendingMarkers], List[Tuple[str, int]]]] = {}
            for txn_id, tp in gone:
                owed.setdefault(txn_id, (self._pending[txn_id][0], []))[1].append(tp)
                self._sending([(txn_id, tp)])
        if owed:
            self._answered(owed, {key: 0 for key in gone}, None)
        for leader, work in requests:
            self._senders.submit(self._request, leader, work)

    def _sending(self, keys: Iterable[Tuple[str, Tuple[str, int]]]) -> None:
        """``keys`` go in a request now (under the lock): in flight, with no backoff left."""
        for key in keys:
            self._in_flight.add(key)
            self._not_before.pop(key, None)

    # -- a broker's request (on a sender) ---------------------------------------------------------

    def _request(self, leader: int, work: Dict[str, Tuple[PendingMarkers, List[Tuple[str, int]]]]) -> None:
        codes: Dict[Tuple[str, Tuple[str, int]], int] = {}
        if self._closed:
            return  # stopped: nothing more is sent
        try:
            markers = [p.marker._replace(partitions=tuple(sorted(tps))) for p, tps in work.values()]
            answers = self._send(leader, markers)
            for txn_id, (p, tps) in work.items():
                by_partition = answers.get(p.marker.producer_id, {})
                for tp in tps:
                    codes[(txn_id, tp)] = by_partition.get(tp, errors.UnknownServerError.code)
        except Exception as exc:  # noqa: BLE001 - the leader could not be asked: its partitions wait
            log.info("could not send transaction markers to broker %d: %s", leader, exc)
            codes = {(txn_id, tp): errors.BrokerNotAvailableError.code for txn_id, (_, tps) in work.items()
                     for tp in tps}
        self._answered(work, codes, leader)

    def _answered(self, work: Mapping[str, Tuple[Optional[PendingMarkers], Sequence[Tuple[str, int]]]],
                  codes: Mapping[Tuple[str, Tuple[str, int]], int], leader: Optional[int]) -> None:
        """Apply a request's answers (``leader`` None: partitions owing no marker); the
        transactions now complete go to ``on_written``."""
        finished: List[PendingMarkers] = []
        with self._cond:
            now = time.monotonic()
            if leader is not None:
                for key in self._busy.pop(leader, ()):
                    self._not_before.pop(key, None)  # waited for this leader: due at once
            for txn_id, (sent, tps) in work.items():
                entry = self._pending.get(txn_id)
                # None: dropped or replaced meanwhile (the answers are of no use)
                left = entry[1] if entry is not None and sent is not None and entry[0] is sent else None
                fenced = False
                for tp in tps:
                    key = (txn_id, tp)
                    self._in_flight.discard(key)
                    code = codes.get(key, errors.UnknownServerError.code)
                    if left is None or code == 0:
                        if left is not None:
                            left.discard(tp)
                        self._not_before.pop(key, None)
                    elif code in _FENCED:
                        log.info("transaction markers of %r refused at %s-%d (%s): a newer coordinator or producer "
                                 "epoch completes it", txn_id, tp[0], tp[1], _error_name(code))
                        fenced = True
                    elif code in _WRITTEN_ENOUGH:
                        log.error("the transaction marker of %r for %s-%d was refused with %s; not retried",
                                  txn_id, tp[0], tp[1], _error_name(code))
                        left.discard(tp)
                    else:
                        if code not in _RETRIABLE:
                            log.error("the transaction marker of %r for %s-%d was answered %s; trying again",
                                      txn_id, tp[0], tp[1], _error_name(code))
                        self._not_before[key] = now + self._backoff_s
                if left is None or sent is None or (left and not fenced):
                    continue
                del self._pending[txn_id]
                for tp in sent.marker.partitions:
                    self._not_before.pop((txn_id, tp), None)
                if not fenced:
                    finished.append(sent)
            self._cond.notify_all()
        for pending in finished:
            self._completers.submit(self._complete, pending)

    def _complete(self, pending: PendingMarkers) -> None:
        if self._closed:
            return
        try:
            done = self._on_written(pending)
        except Exception:  # noqa: BLE001 - tried again, as a write that failed
            log.exception("completing the transaction of %r", pending.transactional_id)
            done = False
        if not done:
            self.complete_later(pending)


class _Workers:
    """``size`` daemon threads running what is submitted, in order (started at the first
    call). Daemons: a process never waits at its exit for a request to a frozen broker."""

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._calls: "queue.SimpleQueue[Optional[Callable[[], None]]]" = queue.SimpleQueue()
        self._started = False
        self._threads: List[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., None], *args: object) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                self._threads = [threading.Thread(target=self._work, name="%s-%d" % (self._name, i), daemon=True)
                                 for i in range(self._size)]
                for thread in self._threads:
                    thread.start()
        self._calls.put(functools.partial(fn, *args))

    def close(self, timeout: float) -> None:
        """No more calls: each thread ends after the calls queued before; waits up to
        ``timeout`` for them."""
        with self._lock:
            threads, self._threads = self._threads, []
            self._started = True  # a late submit starts no thread
        for _ in threads:
            self._calls.put(None)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _work(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            try:
                call()
            except Exception:  # noqa: BLE001 - the worker serves the next call
                log.exception("transaction marker work")


def _error_name(code: int) -> str:
    cls = errors.error_for_code(code)
    return "error %d" % code if cls is None else cls.name
