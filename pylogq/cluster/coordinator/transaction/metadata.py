"""One transactional id's state at its coordinator, and the transitions Kafka allows.

A change is made in two steps, as Kafka's TransactionMetadata makes it: ``prepare``
computes the next state (a :class:`TxnTransit`) and marks the id pending, the
coordinator stores the transit in ``__transaction_state``, and ``complete`` applies it
(``abandon`` clears the mark when the write failed). While a transit is pending, other
requests for the id answer CONCURRENT_TRANSACTIONS. Not thread-safe: the coordinator
calls every method under its lock.
"""

from __future__ import annotations

import enum
from typing import FrozenSet, NamedTuple, Optional, Tuple

from .log_schema import TxnLogValue

__all__ = ["NO_PRODUCER_EPOCH", "TransactionMetadata", "TxnState", "TxnTransit", "epoch_exhausted"]

NO_PRODUCER_EPOCH = -1
NO_PRODUCER_ID = -1
#: A producer may not use Short.MAX_VALUE itself, so that its coordinator can always fence it.
_LAST_USABLE_EPOCH = 0x7FFF - 1


class TxnState(enum.IntEnum):
    """Kafka's transaction states, by their stored value."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions report (Kafka's)."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
#: Kafka's names, for ListTransactions' state filter.
STATE_NAMES = {name: state for state, name in _NAMES.items()}

#: Each state's allowed previous states (Kafka's validPreviousStates).
_PREVIOUS = {
    TxnState.EMPTY: {TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.ONGOING: {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.PREPARE_COMMIT: {TxnState.ONGOING},
    TxnState.PREPARE_ABORT: {TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE},
    TxnState.COMPLETE_COMMIT: {TxnState.PREPARE_COMMIT},
    TxnState.COMPLETE_ABORT: {TxnState.PREPARE_ABORT},
    TxnState.DEAD: {TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT},
    TxnState.PREPARE_EPOCH_FENCE: {TxnState.ONGOING},
}


def epoch_exhausted(epoch: int) -> bool:
    """Whether ``epoch`` is the last one a producer id may use."""
    return epoch >= _LAST_USABLE_EPOCH


class TxnTransit(NamedTuple):
    """A prepared next state of a transactional id: what is stored, then applied."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: FrozenSet[Tuple[str, int]]
    start_ms: int
    last_update_ms: int

    def stored(self) -> TxnLogValue:
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, int(self.state), self.partitions,
                           self.last_update_ms, self.start_ms, self.last_producer_id)


class TransactionMetadata:
    """A transactional id's producer id and epoch, its transaction's state and partitions."""

    __slots__ = ("transactional_id", "producer_id", "last_producer_id", "producer_epoch", "last_producer_epoch",
                 "timeout_ms", "state", "partitions", "start_ms", "last_update_ms", "pending", "fence_failed")

    def __init__(self, transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int,
                 producer_epoch: int = NO_PRODUCER_EPOCH, state: TxnState = TxnState.EMPTY) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = NO_PRODUCER_ID
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = NO_PRODUCER_EPOCH
        self.timeout_ms = timeout_ms
        self.state = state
        self.partitions: FrozenSet[Tuple[str, int]] = frozenset()
        self.start_ms = -1
        self.last_update_ms = now_ms
        #: The state being stored, if any.
        self.pending: Optional[TxnState] = None
        #: A fence's abort was not stored: its bumped epoch stands, the next fence keeps it.
        self.fence_failed = False

    @classmethod
    def loaded(cls, transactional_id: str, value: TxnLogValue) -> "TransactionMetadata":
        meta = cls(transactional_id, value.producer_id, value.timeout_ms, value.last_update_ms,
                   value.producer_epoch, TxnState(value.state))
        meta.last_producer_id = value.last_producer_id
        meta.partitions = value.partitions
        meta.start_ms = value.start_ms
        return meta

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    @property
    def in_transaction(self) -> bool:
        return self.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    def _prepare(self, state: TxnState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: FrozenSet[Tuple[str, int]], start_ms: int, now_ms: int) -> TxnTransit:
        if self.pending is not None:
            raise AssertionError("%s: a transition to %s while %s is pending"
                                 % (self.transactional_id, state.kafka_name, self.pending.kafka_name))
        if self.state not in _PREVIOUS[state]:
            raise AssertionError("%s: no transition from %s to %s"
                                 % (self.transactional_id, self.state.kafka_name, state.kafka_name))
        self.pending = state
        last_pid = self.producer_id if producer_id != self.producer_id else self.last_producer_id
        return TxnTransit(producer_id, last_pid, epoch, last_epoch, timeout_ms, state, partitions, start_ms, now_ms)

    def prepare_epoch_bump(self, timeout_ms: int, expected_epoch: Optional[int], now_ms: int
                           ) -> Optional[TxnTransit]:
        """InitProducerId on an id with no transaction under way; None: the producer is fenced
        (its expected epoch is neither the current nor the previous one, KIP-360)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:  # a retry of a bump that succeeded
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(TxnState.EMPTY, self.producer_id, epoch, last_epoch, timeout_ms, frozenset(), -1,
                             now_ms)

    def prepare_producer_id_rotation(self, producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """A new producer id at epoch 0, the old one's epochs being exhausted."""
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(TxnState.EMPTY, producer_id, 0, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_fence(self) -> None:
        """Fence the producer of an ongoing transaction (InitProducerId from a new one, or its
        timeout): the epoch is bumped (unless exhausted) and the transaction aborted with it.
        The bumped epoch is never answered to a producer."""
        if self.pending is not None or self.state is not TxnState.ONGOING:
            raise AssertionError("%s: fencing from %s" % (self.transactional_id, self.state.kafka_name))
        if not self.epoch_exhausted and not self.fence_failed:
            self.producer_epoch += 1
        self.pending = TxnState.PREPARE_EPOCH_FENCE

    def prepare_add_partitions(self, added: FrozenSet[Tuple[str, int]], now_ms: int) -> TxnTransit:
        start = now_ms if self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) \
            else self.start_ms
        return self._prepare(TxnState.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions | added, start, now_ms)

    def prepare_end(self, committed: bool, now_ms: int) -> TxnTransit:
        if self.pending is TxnState.PREPARE_EPOCH_FENCE:
            self.pending = None  # the fence becomes the abort it asked for
        state = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, self.partitions, self.start_ms, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, frozenset(), self.start_ms, now_ms)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(TxnState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, frozenset(), self.start_ms, self.last_update_ms)

    def complete(self, transit: TxnTransit) -> None:
        """Apply a stored transit."""
        self.pending = None
        self.fence_failed = False
        self.last_producer_id = transit.last_producer_id
        self.producer_id = transit.producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = transit.partitions
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.last_update_ms

    def abandon(self) -> None:
        """The transit was not stored: nothing changes (a fence's bumped epoch stays, as in
        Kafka: the next InitProducerId bumps past it)."""
        self.pending = None

    def __repr__(self) -> str:
        return "TransactionMetadata(%r, producer_id=%d, epoch=%d, %s, %d partitions%s)" % (
            self.transactional_id, self.producer_id, self.producer_epoch, self.state.kafka_name,
            len(self.partitions), "" if self.pending is None else ", pending " + self.pending.kafka_name)
