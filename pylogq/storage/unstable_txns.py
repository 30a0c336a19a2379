"""The transactions that keep a partition's offsets unstable: those still ongoing, and those whose
marker is not yet below the high watermark (Kafka's ProducerStateManager ``ongoingTxns`` and
``unreplicatedTxns``).

A producer's transactional batch opens its transaction at the batch's base
offset, unless one is open; its COMMIT or ABORT marker ends it
(:meth:`UnstableTxns.end`), and once the aborted transaction's entry is in the
transaction index the transaction is complete (:meth:`UnstableTxns.complete`).
A completed transaction stays unstable until the high watermark passes its
marker: a new leader could otherwise lose the marker that read_committed
consumers were shown. The first unstable offset is the first offset of the
oldest of them all, and the last stable offset the smaller of it and the high
watermark: below it every transaction is decided and replicated.

Only offsets are kept here, per producer id: the producers' epochs and
sequences are the partition's (:mod:`pylogq.cluster.state.producer_state`).
The log's loader replays the same steps over the log's batches to rebuild the
transaction indexes of the segments it recovered, and a log no partition has
given its first unstable offset yet replays them to know it
(:meth:`UnstableTxns.replay`).
"""

from __future__ import annotations

from typing import Container, Dict, List, Optional, Tuple, Union

from ..errors import CorruptRecordError, IllegalStateError, InvalidRecordError
from ..records import CONTROL_MASK, TRANSACTIONAL_MASK, iter_batches
from ..records.control import end_txn_marker
from .transaction_index import CompletedTxn

__all__ = ["UnstableTxns"]


class UnstableTxns:
    """Ongoing transactions in the order they started, and completed ones whose marker is at or
    above the high watermark, in the order they completed.

    Invariant: each producer has at most one transaction open (``first_offset_of``), which
    is ongoing; an ongoing transaction whose marker was seen but not yet indexed is no
    producer's open one any more. Transactions start in offset order (appends and replays
    go forward), so the first ongoing one is the oldest. Not thread-safe: the partition's
    lock guards it, or the loader owns it alone.
    """

    __slots__ = ("_open", "_ongoing", "_unreplicated", "empty")

    def __init__(self) -> None:
        self._open: Dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._ongoing: Dict[int, int] = {}  # first offset -> producer id, oldest first
        self._unreplicated: Dict[int, CompletedTxn] = {}  # first offset -> completed txn, in marker order
        #: Whether no transaction keeps an offset unstable: a plain attribute, for the append path
        #: of partitions that never see a transaction to read at no cost.
        self.empty = True

    def _changed(self) -> None:
        self.empty = not self._ongoing and not self._unreplicated

    def __bool__(self) -> bool:
        """Whether any transaction keeps an offset unstable."""
        return not self.empty

    def first_offset_of(self, producer_id: int) -> Optional[int]:
        """The first offset of ``producer_id``'s open transaction; None when it has none."""
        return self._open.get(producer_id)

    @property
    def first_undecided_offset(self) -> Optional[int]:
        """The first offset of the oldest ongoing transaction (Kafka's firstUndecidedOffset)."""
        return next(iter(self._ongoing), None)

    @property
    def first_unstable_offset(self) -> Optional[int]:
        """The first offset of the oldest transaction ongoing or completed above the high
        watermark (Kafka's firstUnstableOffset); None when there is none."""
        first = next(iter(self._ongoing), None)
        if self._unreplicated:
            oldest = min(self._unreplicated)
            if first is None or oldest < first:
                return oldest
        return first

    def ongoing(self) -> List[Tuple[int, int]]:
        """(producer id, first offset) of every ongoing transaction, oldest first."""
        return [(pid, first) for first, pid in self._ongoing.items()]

    def unreplicated(self) -> List[CompletedTxn]:
        """The completed transactions whose marker the high watermark has not passed, in marker order."""
        return list(self._unreplicated.values())

    # -- changes ------------------------------------------------------------------

    def begin(self, producer_id: int, first_offset: int) -> bool:
        """A transactional batch of ``producer_id`` at ``first_offset``: it opens a transaction
        unless one is open; -> whether it did."""
        if producer_id in self._open:
            return False
        self._open[producer_id] = first_offset
        self._ongoing[first_offset] = producer_id
        self.empty = False
        return True

    def end(self, producer_id: int, marker_offset: int, aborted: bool) -> Optional[CompletedTxn]:
        """A marker of ``producer_id`` at ``marker_offset``: its open transaction is decided; -> it,
        or None when none was open (a marker for a transaction with no data here). The
        transaction stays ongoing until :meth:`complete`, after its index entry is written."""
        first = self._open.pop(producer_id, None)
        if first is None:
            return None
        return CompletedTxn(producer_id, first, marker_offset, aborted)

    def last_stable_offset(self, completed: CompletedTxn, decided: Container[int] = ()) -> int:
        """The last stable offset once ``completed`` is (its aborted entry's, Kafka's
        lastStableOffset(completedTxn)): the first offset of the oldest ongoing transaction of
        another producer, or one past the marker. ``decided``: the first offsets of ongoing
        transactions whose markers came before this one's and which are not completed yet (an
        append's earlier markers): they do not count."""
        for first, pid in self._ongoing.items():
            if pid != completed.producer_id and first not in decided:
                return first
        return completed.last_offset + 1

    def complete(self, completed: CompletedTxn, high_watermark: Optional[int] = None) -> None:
        """``completed`` is decided and indexed: it stops being ongoing, and stays unstable until the
        high watermark passes its marker (at once when ``high_watermark`` already has)."""
        if self._ongoing.pop(completed.first_offset, None) is None:
            raise IllegalStateError("transaction %r was completed but never started" % (completed,))
        if high_watermark is None or completed.last_offset >= high_watermark:
            self._unreplicated[completed.first_offset] = completed
        self._changed()

    def on_high_watermark(self, high_watermark: int) -> None:
        """The high watermark moved: completed transactions whose marker is below it are stable."""
        done = [first for first, txn in self._unreplicated.items() if txn.last_offset < high_watermark]
        for first in done:
            del self._unreplicated[first]
        self._changed()

    def truncate_to(self, offset: int) -> None:
        """The log lost its batches from ``offset`` on: transactions started there go, and one whose
        marker went is ongoing and open again (the partition replays its log instead, which is
        exact; this serves a state kept without one)."""
        reopened = [txn for txn in self._unreplicated.values() if txn.last_offset >= offset > txn.first_offset]
        self._unreplicated = {first: txn for first, txn in self._unreplicated.items() if txn.last_offset < offset}
        ongoing = {first: pid for first, pid in self._ongoing.items() if first < offset}
        for txn in reopened:
            ongoing[txn.first_offset] = txn.producer_id
        self._ongoing = dict(sorted(ongoing.items()))
        self._open = {pid: first for first, pid in self._ongoing.items()}
        self._changed()

    def replay(self, data: Union[bytes, bytearray], start: int, end: int, high_watermark: int) -> int:
        """Replay the whole batches ``data`` holds (read from a log from the batch holding
        ``start``) whose last offset lies in [``start``, ``end``), as the partition's producer
        state replays them when it opens: a producer's transactional batch opens its transaction
        unless one is open, its COMMIT or ABORT marker decides and completes it, stable at once
        when the marker is below ``high_watermark``. A control batch with no marker left
        (emptied by the cleaner), or one that is no marker, decides nothing; v0/v1 entries and
        batches of no producer open nothing. No index entry is written. -> one past the last
        offset of the last batch read (``start`` when there is none)."""
        last = start - 1
        for h in iter_batches(data):
            if h.last_offset >= end:
                break
            last = h.last_offset
            if h.last_offset < start or h.magic != 2 or h.producer_id < 0:
                continue
            if h.attributes & CONTROL_MASK:
                try:
                    marker = end_txn_marker(data, h.position)
                except (CorruptRecordError, InvalidRecordError):
                    continue
                if marker is None:
                    continue
                completed = self.end(h.producer_id, h.base_offset, marker.is_abort)
                if completed is not None:
                    self.complete(completed, high_watermark)
            elif h.attributes & TRANSACTIONAL_MASK:
                self.begin(h.producer_id, h.base_offset)
        return max(last + 1, start)

    def clear(self) -> None:
        """Forget every transaction (the log was emptied, or is replayed from its start)."""
        self._open.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self.empty = True

    def __repr__(self) -> str:
        return "UnstableTxns(ongoing=%s, unreplicated=%s)" % (self.ongoing(), self.unreplicated())
