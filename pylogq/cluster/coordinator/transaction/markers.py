"""Writing a decided transaction's COMMIT or ABORT markers to its partitions (Kafka's
TransactionMarkerChannelManager).

Once the coordinator has stored PrepareCommit or PrepareAbort, :class:`MarkerWriter`
sends WriteTxnMarkers to each partition's leader, the markers of every transaction
waiting for one leader in one request, from one thread of its own. A partition that
answers a retriable error (its leader moved, too few in-sync replicas, the leader
unreachable) is tried again, at its leader then, after ``retry_backoff_ms``; a partition
whose topic is gone is dropped, as Kafka drops it. When every partition of a
transaction has its marker, ``on_written`` is called (the coordinator then stores
CompleteCommit or CompleteAbort). A coordinator that was fenced (its marker refused with
TRANSACTION_COORDINATOR_FENCED or INVALID_PRODUCER_EPOCH: a newer coordinator or
producer epoch has taken over) gives the transaction up: ``on_written`` is not called,
and its next coordinator completes it.

Thread-safe: :meth:`add` and :meth:`drop` may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

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
    """The markers of decided transactions, written by a thread of their own."""

    def __init__(self, send: SendMarkers, leader_of: LeaderOf,
                 on_written: Callable[[PendingMarkers], None], retry_backoff_ms: int = 100,
                 name: str = "pylogq-txn-markers") -> None:
        self._send = send
        self._leader_of = leader_of
        self._on_written = on_written
        self._backoff_s = retry_backoff_ms / 1000.0
        self._cond = threading.Condition()
        #: transactional id -> (its pending markers, the partitions still without one).
        self._pending: Dict[str, Tuple[PendingMarkers, Set[Tuple[str, int]]]] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, pending: PendingMarkers) -> None:
        with self._cond:
            self._pending[pending.transactional_id] = (pending, set(pending.marker.partitions))
            self._cond.notify_all()

    def drop(self, txn_partition: int) -> None:
        """Forget the transactions of a coordinator partition (no longer led here)."""
        with self._cond:
            for txn_id in [t for t, (p, _) in self._pending.items() if p.txn_partition == txn_partition]:
                del self._pending[txn_id]

    def pending(self, transactional_id: str) -> Optional[Set[Tuple[str, int]]]:
        """The partitions still without a marker of ``transactional_id``'s transaction."""
        with self._cond:
            entry = self._pending.get(transactional_id)
            return None if entry is None else set(entry[1])

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(30)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                work = {txn_id: (p, set(left)) for txn_id, (p, left) in self._pending.items()}
            try:
                retry = self._write(work)
            except Exception:  # noqa: BLE001 - the thread lives on; the markers are tried again
                log.exception("writing transaction markers")
                retry = True
            if retry:
                with self._cond:
                    if not self._closed:
                        self._cond.wait(self._backoff_s)

    def _write(self, work: Dict[str, Tuple[PendingMarkers, Set[Tuple[str, int]]]]) -> bool:
        """One round: each leader is sent the markers it owes; -> whether any is left to retry."""
        by_leader: Dict[int, Dict[str, List[Tuple[str, int]]]] = {}
        gone: Dict[str, Set[Tuple[str, int]]] = {}
        retry = False
        for txn_id, (_, left) in work.items():
            for tp in left:
                leader = self._leader_of(*tp)
                if leader is None:
                    gone.setdefault(txn_id, set()).add(tp)  # the topic was deleted: no marker is owed
                elif leader < 0:
                    retry = True
                else:
                    by_leader.setdefault(leader, {}).setdefault(txn_id, []).append(tp)
        done: Dict[str, Set[Tuple[str, int]]] = gone
        fenced: Set[str] = set()
        for leader, txns in by_leader.items():
            markers = [work[txn_id][0].marker._replace(partitions=tuple(sorted(tps))) for txn_id, tps in txns.items()]
            try:
                answers = self._send(leader, markers)
            except Exception as exc:  # noqa: BLE001 - the leader could not be asked: its partitions wait
                log.info("could not send transaction markers to broker %d: %s", leader, exc)
                retry = True
                continue
            for txn_id, tps in txns.items():
                codes = answers.get(work[txn_id][0].marker.producer_id, {})
                for tp in tps:
                    code = codes.get(tp, errors.UnknownServerError.code)
                    if code == 0:
                        done.setdefault(txn_id, set()).add(tp)
                    elif code in _FENCED:
                        log.info("transaction markers of %r refused at %s-%d (%s): a newer coordinator or producer "
                                 "epoch completes it", txn_id, tp[0], tp[1], _error_name(code))
                        fenced.add(txn_id)
                    elif code in _RETRIABLE:
                        retry = True
                    else:
                        log.error("the transaction marker of %r for %s-%d was refused with %s; not retried",
                                  txn_id, tp[0], tp[1], _error_name(code))
                        done.setdefault(txn_id, set()).add(tp)
        finished: List[PendingMarkers] = []
        with self._cond:
            for txn_id, written in done.items():
                entry = self._pending.get(txn_id)
                if entry is None or entry[0] is not work[txn_id][0]:
                    continue  # dropped or replaced meanwhile
                entry[1].difference_update(written)
                if not entry[1] and txn_id not in fenced:
                    del self._pending[txn_id]
                    finished.append(entry[0])
            for txn_id in fenced:
                entry = self._pending.get(txn_id)
                if entry is not None and entry[0] is work[txn_id][0]:
                    del self._pending[txn_id]
        for pending in finished:
            try:
                self._on_written(pending)
            except Exception:  # noqa: BLE001 - the coordinator logs and retries its own write
                log.exception("completing the transaction of %r", pending.transactional_id)
        return retry


def _error_name(code: int) -> str:
    cls = errors.error_for_code(code)
    return "error %d" % code if cls is None else cls.name
