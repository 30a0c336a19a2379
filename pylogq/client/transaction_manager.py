"""A transactional producer's transaction state (KIP-98): Kafka's ``TransactionManager``.

A producer given a ``transactional_id`` writes its records in transactions:
``init_transactions()`` takes the id's producer id and a new epoch from the
id's transaction coordinator (InitProducerId), which fences any earlier
producer of the same id and aborts its open transaction; between
``begin_transaction()`` and ``commit_transaction()`` or
``abort_transaction()`` every record sent, and every group offset given to
``send_offsets_to_transaction()``, belongs to one transaction, which readers
with ``isolation_level="read_committed"`` see whole or not at all.

States and the transitions Kafka allows (``FATAL_ERROR`` is reachable from
anywhere and left never)::

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING -> READY
                                                             \\-> ABORTING ---> READY
                     IN_TRANSACTION, COMMITTING -> ABORTABLE_ERROR -> ABORTING
                     ABORTING -> INITIALIZING (the epoch bumped after a failed batch) -> READY
                     INITIALIZING -> ABORTABLE_ERROR -> UNINITIALIZED (InitProducerId not authorized)

The coordinator's calls are made here, synchronously, on the thread that
called the public method, except AddPartitionsToTxn: the sender thread adds
a partition to the transaction (:meth:`TransactionManager.add_partitions`)
before that partition's first batch of the transaction is sent, so a
batch never reaches a partition that the coordinator would not write a
marker to. A retriable answer (CONCURRENT_TRANSACTIONS while the previous
transaction's markers are written, COORDINATOR_LOAD_IN_PROGRESS,
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE: the transport looks the
coordinator up again after the last two) is retried after
``retry_backoff_ms`` until ``max_block_ms`` runs out; CONCURRENT_TRANSACTIONS
on a transaction's first AddPartitionsToTxn, after at most 20 ms, as Kafka's
client does.

Errors, as Kafka's client sorts them: PRODUCER_FENCED and
INVALID_PRODUCER_EPOCH from the coordinator (another producer took the id),
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE and an unexpected
error are *fatal*: the producer raises :class:`ProducerFencedError` (or the
error) from every later call and can only be closed. InitProducerId's
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and CLUSTER_AUTHORIZATION_FAILED are
not (Kafka 3.6 on, KAFKA-13668): the call raises it and leaves the producer
UNINITIALIZED, for ``init_transactions()`` once the permission is granted (so
does TRANSACTIONAL_ID_AUTHORIZATION_FAILED from FindCoordinator, which the
transport raises alike and Kafka's client takes as fatal; no producer id was
taken, so nothing is lost by trying again). A failed batch, a refused
partition or group offset, TRANSACTION_ABORTABLE and the like are
*abortable*: the transaction cannot commit (``commit_transaction`` raises
the error), ``abort_transaction()`` ends it and the producer goes on. After
UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING or a lost batch the abort
also bumps the epoch (InitProducerId naming the current producer id and
epoch, KIP-360); after INVALID_PRODUCER_ID_MAPPING it sends no EndTxn, which
a coordinator that no longer maps the id to this producer id would refuse
each time: the InitProducerId alone maps it again and ends whatever
transaction the coordinator holds.

A call that runs out of time raises :class:`KafkaTimeoutError` and leaves
the transition under way: calling the same method again resumes it (as
Kafka's client does); any other transactional call raises
:class:`IllegalStateError` until it has. ``send_offsets_to_transaction()``
that runs out of time keeps the offsets not yet acknowledged and sends them
first thing in the commit (Kafka's client sends its queued AddOffsetsToTxn
and TxnOffsetCommit before EndTxn), or with the group's next offsets, so a
commit never leaves them out; an abort drops them.

Thread-safety: the public methods may be called from any thread, one at a
time (a second waits for the first); the state is read by ``send()`` and the
sender thread under the manager's lock, which is never held across a call
to the broker. When the accumulator's lock is also needed it is taken
first.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Set, Tuple, TypeVar, Union

from ..cluster.contract import TopicPartition, TxnOffset
from ..errors import (
    BrokerError,
    ClusterAuthorizationFailedError,
    CommitFailedError,
    ConcurrentTransactionsError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    IllegalGenerationError,
    IllegalStateError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaTimeoutError,
    OperationNotAttemptedError,
    ProducerFencedError,
    PylogqError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionalIdAuthorizationFailedError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnsupportedVersionError,
    error_for_code,
)
from ..records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from .consumer_coordinator import ConsumerGroupMetadata
from .transport import Transport

__all__ = ["ConsumerGroupMetadata", "TransactionManager", "TransactionState", "group_metadata_of", "offsets_of",
           "retry_retriable"]

log = logging.getLogger("pylogq.client.producer")

# Kafka's ADD_PARTITIONS_RETRY_BACKOFF_MS: the first AddPartitionsToTxn of a transaction is
# usually answered CONCURRENT_TRANSACTIONS only while the previous one's markers are written,
# which takes a few milliseconds: wait no longer than this for it (other answers, and later
# AddPartitionsToTxn, wait retry_backoff_ms).
_ADD_PARTITIONS_RETRY_BACKOFF_S = 0.02

T = TypeVar("T")


def retry_retriable(what: str, call: Callable[[], T], deadline: float,
                    backoff_s: Union[float, Callable[[BrokerError], float]]) -> T:
    """``call()`` until it does not raise a retriable :class:`BrokerError` (Kafka's client
    sends a transactional request answered so again), waiting ``backoff_s`` seconds (or
    ``backoff_s(error)``) between tries. Past ``deadline`` (``time.monotonic()``) raises
    KafkaTimeoutError naming ``what`` and chaining the last answer; any other error is
    raised as it is. The one retry loop of the coordinator's calls: the transaction manager's
    and pylogq.spark's driver's."""
    while True:
        try:
            return call()
        except BrokerError as exc:
            if not exc.retriable:
                raise
            wait = backoff_s(exc) if callable(backoff_s) else backoff_s
            if time.monotonic() + wait >= deadline:
                raise KafkaTimeoutError("%s did not complete within max_block_ms: %s" % (what, exc)) from exc
            log.debug("%s: retrying in %.3f s after %r", what, wait, exc)
            time.sleep(wait)


class TransactionState(enum.Enum):
    """A transactional producer's state (Kafka's ``TransactionManager.State``)."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING_TRANSACTION"
    ABORTING = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TransactionState

#: target state -> the states it may be entered from (FATAL_ERROR: from any).
_VALID_SOURCES: Dict[TransactionState, Tuple[TransactionState, ...]] = {
    S.UNINITIALIZED: (S.READY, S.ABORTABLE_ERROR),
    S.INITIALIZING: (S.UNINITIALIZED, S.ABORTING),
    S.READY: (S.INITIALIZING, S.COMMITTING, S.ABORTING),
    S.IN_TRANSACTION: (S.READY,),
    S.COMMITTING: (S.IN_TRANSACTION,),
    S.ABORTING: (S.IN_TRANSACTION, S.ABORTABLE_ERROR),
    S.ABORTABLE_ERROR: (S.IN_TRANSACTION, S.COMMITTING, S.ABORTABLE_ERROR, S.INITIALIZING),
}

# Errors that end the producer (Kafka's maybeTransitionToErrorState and the handlers' fatalError).
_FATAL = (ProducerFencedError, InvalidProducerEpochError, TransactionalIdAuthorizationFailedError,
          ClusterAuthorizationFailedError, InvalidTxnStateError, UnsupportedVersionError)


def group_metadata_of(group: Any) -> ConsumerGroupMetadata:
    """``send_offsets_to_transaction``'s group argument as :class:`ConsumerGroupMetadata`.

    Accepted: a group id (kafka-python's form: no generation or member checks), a
    :class:`ConsumerGroupMetadata` (pylogq ``Consumer.consumer_group_metadata()``), or any
    object with ``group_id`` and, optionally, ``generation_id``, ``member_id`` and
    ``group_instance_id`` attributes.
    """
    if isinstance(group, ConsumerGroupMetadata):
        metadata = group
    elif isinstance(group, str):
        metadata = ConsumerGroupMetadata(group)
    elif isinstance(getattr(group, "group_id", None), str):
        metadata = ConsumerGroupMetadata(group.group_id, int(getattr(group, "generation_id", -1)),
                                         str(getattr(group, "member_id", "") or ""),
                                         getattr(group, "group_instance_id", None))
    else:
        raise InvalidArgumentTypeError("the group must be a group id (str) or a consumer's group metadata "
                                       "(Consumer.consumer_group_metadata()), not %r" % (group,))
    if not metadata.group_id:
        raise InvalidArgumentError("the group id of a transaction's offsets must not be empty")
    return metadata


def offsets_of(offsets: Any) -> Dict[Tuple[str, int], TxnOffset]:
    """``send_offsets_to_transaction``'s offsets as ``{TopicPartition: TxnOffset}``.

    Accepted: a mapping of a partition (a TopicPartition or ``(topic, partition)``) to an
    offset (an int, or an ``OffsetAndMetadata`` with ``offset``, ``metadata`` and
    ``leader_epoch``), or confluent-kafka's list of TopicPartition objects with ``topic``,
    ``partition``, ``offset`` and optionally ``metadata`` and ``leader_epoch``. Each offset
    is the next one to read, as in a group commit.
    """
    items: Iterable[Tuple[Any, Any]]
    if isinstance(offsets, Mapping):
        items = offsets.items()
    elif isinstance(offsets, (list, tuple)):
        items = [((getattr(tp, "topic", None), getattr(tp, "partition", None)), tp) for tp in offsets]
    else:
        raise InvalidArgumentTypeError("offsets must be a mapping {TopicPartition: OffsetAndMetadata or int} or a "
                                       "list of TopicPartition with offsets, not %r" % (offsets,))
    out: Dict[Tuple[str, int], TxnOffset] = {}
    for key, value in items:
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str) and key[0]
                and isinstance(key[1], int) and not isinstance(key[1], bool) and key[1] >= 0):
            raise InvalidArgumentTypeError("a partition must be a TopicPartition (topic, partition), not %r" % (key,))
        offset: Any
        metadata: Any
        epoch: Any
        if isinstance(value, int) and not isinstance(value, bool):
            offset, metadata, epoch = value, None, -1
        else:
            offset = getattr(value, "offset", None)
            metadata = getattr(value, "metadata", None)
            epoch = getattr(value, "leader_epoch", -1)
            epoch = -1 if epoch is None else epoch
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidArgumentError("the offset of %s-%d must be an int >= 0, not %r" % (key[0], key[1], offset))
        if metadata is not None and not isinstance(metadata, str):
            raise InvalidArgumentTypeError("the metadata of %s-%d must be a str, not %r" % (key[0], key[1], metadata))
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise InvalidArgumentTypeError("the leader epoch of %s-%d must be an int, not %r"
                                           % (key[0], key[1], epoch))
        out[TopicPartition(key[0], key[1])] = TxnOffset(offset, epoch, metadata)
    return out


class _UnsentOffsets:
    """A group's offsets given to the transaction and not yet acknowledged: ``added`` once
    AddOffsetsToTxn was answered (the coordinator holds the group's partition in the
    transaction); ``offsets`` those TxnOffsetCommit has still to write, with the group's
    latest metadata."""

    __slots__ = ("group", "added", "offsets")

    def __init__(self, group: ConsumerGroupMetadata) -> None:
        self.group = group
        self.added = False
        self.offsets: Dict[Tuple[str, int], TxnOffset] = {}


class TransactionManager:
    """One transactional id's producer state: its producer id and epoch, the state, the
    partitions in the ongoing transaction, the last error. See the module docstring for the
    states, the errors and the thread-safety.

    Invariant: ``added`` holds the partitions AddPartitionsToTxn put in the ongoing
    transaction; a partition's batch is sent only once its partition is in it. ``started``
    is true once the coordinator knows of the transaction (a partition or the offsets of a
    group added), so an empty transaction ends without EndTxn, as Kafka's does.
    """

    def __init__(self, transactional_id: str, transaction_timeout_ms: int, transport: Transport,
                 max_block_ms: int, retry_backoff_ms: int,
                 set_producer: Callable[[int, int], None]) -> None:
        """``set_producer(producer_id, epoch)``: stamps the accumulator's next batches
        (their sequences start again at 0); called when the id and epoch change."""
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._transport = transport
        self._max_block_s = max_block_ms / 1000.0
        self._backoff_s = retry_backoff_ms / 1000.0
        self._set_producer = set_producer
        self._lock = threading.Lock()  # guards the state, the error, the partitions
        self._op_lock = threading.Lock()  # one public call at a time
        self.state = S.UNINITIALIZED
        self.last_error: Optional[BaseException] = None
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.added: Set[TopicPartition] = set()
        self.started = False
        self._epoch_bump_required = False
        # INVALID_PRODUCER_ID_MAPPING: the coordinator no longer maps the transactional id to
        # this producer id and refuses its EndTxn, so the abort goes straight to InitProducerId.
        # A flag of its own, as entering ABORTING clears last_error.
        self._invalid_mapping = False
        self._pending: Optional[str] = None  # the public call whose transition stopped half way
        # group id -> the transaction's offsets of that group not yet acknowledged (a send
        # ran out of time); guarded by the op lock.
        self._unsent_offsets: Dict[str, _UnsentOffsets] = {}
        # The open transaction was handed out by prepare_transaction (its new owner ends it):
        # close() leaves it open. Cleared by the next begin_transaction().
        self._handed_out = False

    def __repr__(self) -> str:
        return "<TransactionManager %r %s producer_id=%d epoch=%d>" % (
            self.transactional_id, self.state.value, self.producer_id, self.producer_epoch)

    # -- state --------------------------------------------------------------------------------

    def _transition(self, target: TransactionState, error: Optional[BaseException] = None) -> None:
        """Move to ``target`` (lock held); IllegalStateError when Kafka's client would not."""
        if target is not S.FATAL_ERROR and self.state not in _VALID_SOURCES[target]:
            raise IllegalStateError("TransactionalId %s: invalid transition attempted from state %s to state %s"
                                    % (self.transactional_id, self.state.value, target.value))
        if target in (S.FATAL_ERROR, S.ABORTABLE_ERROR):
            assert error is not None
            self.last_error = error
        else:
            self.last_error = None
        log.debug("transactional id %s: %s -> %s%s", self.transactional_id, self.state.value, target.value,
                  "" if error is None else " (%r)" % (error,))
        self.state = target

    def _fail_fatal(self, error: BaseException) -> BaseException:
        with self._lock:
            self._transition(S.FATAL_ERROR, error)
        return error

    def _fail_abortable(self, error: BaseException) -> BaseException:
        with self._lock:
            if self.state is S.FATAL_ERROR:
                return self.last_error or error
            if self.state is not S.ABORTING:  # an abort under way ends the transaction anyway
                self._transition(S.ABORTABLE_ERROR, error)
        return error

    def _raise_if_failed(self) -> None:
        """Raise the error the producer is in, if any (lock held): Kafka's maybeFailWithError."""
        error = self.last_error
        if self.state is S.FATAL_ERROR or self.state is S.ABORTABLE_ERROR:
            assert error is not None
            if isinstance(error, ProducerFencedError):
                raise ProducerFencedError(
                    "the producer with transactional id %r (producer id %d, epoch %d) has been fenced by another "
                    "producer with the same transactional id" % (self.transactional_id, self.producer_id,
                                                                  self.producer_epoch)) from error
            if isinstance(error, InvalidProducerEpochError):
                raise InvalidProducerEpochError(
                    "the producer with transactional id %r (producer id %d, epoch %d) attempted to produce with "
                    "an old epoch" % (self.transactional_id, self.producer_id, self.producer_epoch)) from error
            if not isinstance(error, PylogqError):
                raise error
            if self.state is S.FATAL_ERROR:
                raise type(error)(*error.args) from error
            raise type(error)("cannot execute a transactional call: the transaction must be aborted after "
                              "%s" % (error,)) from error

    def _check_pending(self, operation: str) -> bool:
        """Whether ``operation`` resumes a transition that timed out (lock held); IllegalStateError
        when another one did."""
        if self._pending is None:
            return False
        if self._pending != operation:
            raise IllegalStateError("cannot call %s: the previous call to %s did not complete and must be retried"
                                    % (operation, self._pending))
        return True

    def check_append(self) -> None:
        """``send()`` may add a record to the transaction: raise otherwise (the accumulator's
        lock is held). Kafka's ``maybeAddPartition`` checks."""
        state = self.state
        if state is S.IN_TRANSACTION:
            return
        with self._lock:
            self._raise_if_failed()
            if self.producer_id == NO_PRODUCER_ID:
                raise IllegalStateError("cannot send before init_transactions() has completed")
            raise IllegalStateError("cannot send outside a transaction (state %s): call begin_transaction() first"
                                    % self.state.value)

    @property
    def has_error(self) -> bool:
        return self.state is S.ABORTABLE_ERROR or self.state is S.FATAL_ERROR

    def unsendable(self) -> Optional[BaseException]:
        """Why the sender must not send batches not yet sent, if it must not: the error the
        producer is in, or an abort under way (Kafka fails the batches not yet drained)."""
        with self._lock:
            if self.state is S.ABORTABLE_ERROR or self.state is S.FATAL_ERROR:
                return self.last_error
            if self.state is S.ABORTING:
                return TransactionAbortedError("failing batch since transaction was aborted")
        return None

    @property
    def fatal(self) -> bool:
        return self.state is S.FATAL_ERROR

    # -- coordinator calls --------------------------------------------------------------------

    def _retry(self, what: str, deadline: float, call: Callable[[], T],
               backoff_of: Optional[Callable[[BrokerError], float]] = None) -> T:
        """:func:`retry_retriable` after ``retry_backoff_ms`` (or ``backoff_of(error)``)."""
        return retry_retriable("%s of transactional id %r" % (what, self.transactional_id), call, deadline,
                               self._backoff_s if backoff_of is None else backoff_of)

    def deadline(self, timeout: Optional[float]) -> float:
        """When a public call given ``timeout`` seconds (None: ``max_block_ms``) gives up."""
        return time.monotonic() + (self._max_block_s if timeout is None else max(0.0, float(timeout)))

    def _settle(self, call: Callable[[], None]) -> None:
        """Run the rest of a transition. One that stopped half way (a timeout, a lost
        answer: still INITIALIZING, COMMITTING or ABORTING) stays pending for the same call
        to resume; one that ended (done, or in an error state) is no longer pending."""
        try:
            call()
        finally:
            with self._lock:
                if self.state not in (S.INITIALIZING, S.COMMITTING, S.ABORTING):
                    self._pending = None

    def init_transactions(self, timeout: Optional[float] = None) -> None:
        """InitProducerId for the transactional id: READY with a new epoch, every earlier
        producer of the id fenced (its open transaction aborted by the coordinator)."""
        with self._op_lock:
            with self._lock:
                resuming = self._check_pending("init_transactions")
                self._raise_if_failed()
                if not resuming:
                    self._transition(S.INITIALIZING)
                self._pending = "init_transactions"
            deadline = self.deadline(timeout)
            self._settle(lambda: self._init_producer_id(deadline, NO_PRODUCER_ID, NO_PRODUCER_EPOCH))

    def _init_producer_id(self, deadline: float, producer_id: int, producer_epoch: int) -> None:
        """InitProducerId (given the current id and epoch: the epoch bumped, KIP-360), then READY."""
        try:
            pid, epoch = self._retry("InitProducerId", deadline, lambda: self._transport.init_producer_id(
                self.transactional_id, self.transaction_timeout_ms, producer_id, producer_epoch))
        except KafkaTimeoutError:
            raise
        except (ProducerFencedError, InvalidProducerEpochError) as exc:
            raise self._fail_fatal(ProducerFencedError(
                "InitProducerId of transactional id %r: fenced by another producer with the same transactional "
                "id (%s)" % (self.transactional_id, exc))) from exc
        except TransactionAbortableError as exc:
            raise self._fail_abortable(exc)
        except (TransactionalIdAuthorizationFailedError, ClusterAuthorizationFailedError) as exc:
            # Kafka's client since 3.6 (KAFKA-13668): not fatal, the producer is uninitialized
            # again, so init_transactions() may be called once the permission is granted.
            with self._lock:
                if self.state is not S.FATAL_ERROR:
                    self._transition(S.ABORTABLE_ERROR, exc)
                    self._transition(S.UNINITIALIZED)
            raise
        except BrokerError as exc:
            raise self._fail_fatal(exc)
        self._set_producer(pid, epoch)
        with self._lock:
            self.producer_id, self.producer_epoch = pid, epoch
            self._epoch_bump_required = False
            self._invalid_mapping = False
            self._transition(S.READY)
        log.info("transactional id %s: producer id %d, epoch %d", self.transactional_id, pid, epoch)

    def begin_transaction(self) -> None:
        with self._op_lock, self._lock:
            self._check_pending("begin_transaction")
            self._raise_if_failed()
            if self.state is not S.READY:
                if self.state is S.UNINITIALIZED:
                    raise IllegalStateError("cannot begin a transaction before init_transactions() has completed")
                raise IllegalStateError("cannot begin a transaction in state %s" % self.state.value)
            self._transition(S.IN_TRANSACTION)
            self._handed_out = False

    def add_partitions(self, partitions: Iterable[Tuple[str, int]], deadline: float) -> Optional[BaseException]:
        """The sender adds ``partitions`` to the ongoing transaction (those not in it yet, in
        one AddPartitionsToTxn) before sending their batches; -> None when all are in it,
        else the error their batches fail with (the producer is then in an error state)."""
        with self._lock:
            if self.state is not S.IN_TRANSACTION and self.state is not S.COMMITTING:
                return self.last_error if self.has_error else IllegalStateError(
                    "cannot add partitions to a transaction in state %s" % self.state.value)
            new = sorted({TopicPartition(t, p) for t, p in partitions} - self.added)
            pid, epoch = self.producer_id, self.producer_epoch
        if not new:
            return None
        first_add = not self.added

        def backoff(error: BrokerError) -> float:
            # CONCURRENT_TRANSACTIONS on a transaction's first partitions: the previous
            # transaction's markers are being written, which takes milliseconds.
            if first_add and isinstance(error, ConcurrentTransactionsError):
                return min(self._backoff_s, _ADD_PARTITIONS_RETRY_BACKOFF_S)
            return self._backoff_s

        def add() -> Dict[Tuple[str, int], int]:
            codes = self._transport.add_partitions_to_txn(self.transactional_id, pid, epoch, new)
            retry = next((c for c in codes.values() if c and _retriable(c)), 0)
            if retry:
                _raise_code(retry, "AddPartitionsToTxn")
            return codes

        try:
            codes = self._retry("AddPartitionsToTxn", deadline, add, backoff)
        except Exception as exc:  # noqa: BLE001 - the sender thread goes on, whatever failed
            if not isinstance(exc, KafkaTimeoutError) and isinstance(exc, BrokerError):
                return self._classify(exc, "AddPartitionsToTxn")
            # Whether the coordinator added them is unknown: the abort bumps the epoch, which
            # ends a transaction the coordinator may hold without an EndTxn this side knows to send.
            with self._lock:
                self._epoch_bump_required = True
            return self._fail_abortable(exc)
        failed = {tp: c for tp, c in codes.items() if c}
        if failed:
            unauthorized = sorted({t for (t, _), c in failed.items() if c == TopicAuthorizationFailedError.code})
            if unauthorized:
                return self._fail_abortable(TopicAuthorizationFailedError(
                    "not authorized to write to topic%s %s" % ("s" if len(unauthorized) > 1 else "",
                                                              ", ".join(unauthorized))))
            first = next((c for c in failed.values() if c != OperationNotAttemptedError.code),
                         next(iter(failed.values())))
            cls = error_for_code(first) or BrokerError
            error = cls("could not add partitions to the transaction: %s" % ", ".join(
                "%s-%d: %s" % (t, p, getattr(error_for_code(c), "name", c)) for (t, p), c in sorted(failed.items())))
            if isinstance(error, (ProducerFencedError, InvalidProducerEpochError, UnknownProducerIdError,
                                  InvalidProducerIdMappingError) + _FATAL):
                return self._classify(error, "AddPartitionsToTxn")
            return self._fail_abortable(error)  # Kafka: any other partition's error leaves it abortable
        with self._lock:
            self.added.update(new)
            self.started = True
        log.debug("transactional id %s: added %s to the transaction", self.transactional_id, new)
        return None

    def _classify(self, error: BrokerError, what: str) -> BaseException:
        """Move to the error state Kafka's client moves to on ``error`` from a coordinator call."""
        if isinstance(error, (ProducerFencedError, InvalidProducerEpochError)):
            return self._fail_fatal(ProducerFencedError(
                "%s of transactional id %r: fenced by another producer with the same transactional id (%s)"
                % (what, self.transactional_id, error)))
        if isinstance(error, _FATAL):
            return self._fail_fatal(error)
        if isinstance(error, (UnknownProducerIdError, InvalidProducerIdMappingError)):
            with self._lock:
                self._epoch_bump_required = True
                if isinstance(error, InvalidProducerIdMappingError):
                    self._invalid_mapping = True
            return self._fail_abortable(error)
        if isinstance(error, (TransactionAbortableError, TopicAuthorizationFailedError,
                              GroupAuthorizationFailedError, FencedInstanceIdError, OperationNotAttemptedError)):
            return self._fail_abortable(error)
        if error.retriable:  # retried until max_block_ms ran out
            return self._fail_abortable(error)
        return self._fail_fatal(error)

    def batch_failed(self, error: BaseException) -> None:
        """A batch of the transaction failed for good (the sender thread): the transaction
        cannot commit; its abort bumps the epoch, as the partition's sequence is lost."""
        if isinstance(error, (ProducerFencedError, TransactionalIdAuthorizationFailedError,
                              ClusterAuthorizationFailedError, UnsupportedVersionError)):
            self._fail_fatal(error)
            return
        if isinstance(error, TransactionAbortedError):
            return
        with self._lock:
            self._epoch_bump_required = True
        self._fail_abortable(error)

    def send_offsets_to_transaction(self, offsets: Mapping[Tuple[str, int], TxnOffset],
                                    group: ConsumerGroupMetadata, timeout: Optional[float] = None) -> None:
        """AddOffsetsToTxn for the group, then TxnOffsetCommit to the group's coordinator: the
        offsets are committed if, and when, the transaction commits. On KafkaTimeoutError the
        offsets not yet acknowledged are kept: sent with the group's next offsets, or before
        the commit's EndTxn (Kafka's client sends its queued requests before EndTxn)."""
        with self._op_lock:
            with self._lock:
                self._check_pending("send_offsets_to_transaction")
                self._raise_if_failed()
                if self.state is not S.IN_TRANSACTION:
                    raise IllegalStateError("cannot send offsets if a transaction is not in progress (state %s)"
                                            % self.state.value)
            unsent = self._unsent_offsets.get(group.group_id)
            if unsent is None:
                unsent = self._unsent_offsets[group.group_id] = _UnsentOffsets(group)
            unsent.group = group
            unsent.offsets.update(offsets)
            self._send_offsets(unsent, self.deadline(timeout))

    def _send_offsets(self, unsent: "_UnsentOffsets", deadline: float) -> None:
        """Send a group's kept offsets (op lock held): AddOffsetsToTxn unless it was answered,
        then TxnOffsetCommit until every partition is acknowledged. Forgotten once sent, or
        once the transaction is in an error state; kept on KafkaTimeoutError."""
        group = unsent.group
        with self._lock:
            pid, epoch = self.producer_id, self.producer_epoch
        if not unsent.added:
            try:
                self._retry("AddOffsetsToTxn", deadline, lambda: self._transport.add_offsets_to_txn(
                    self.transactional_id, pid, epoch, group.group_id))
            except KafkaTimeoutError:
                raise
            except BrokerError as exc:
                self._unsent_offsets.pop(group.group_id, None)
                raise self._classify(exc, "AddOffsetsToTxn")
            unsent.added = True
            with self._lock:
                self.started = True
        while unsent.offsets:
            pending = dict(unsent.offsets)
            try:
                codes = self._transport.txn_offset_commit(
                    self.transactional_id, group.group_id, pid, epoch, group.generation_id, group.member_id,
                    group.group_instance_id, pending)
            except BrokerError as exc:
                if not exc.retriable:
                    self._unsent_offsets.pop(group.group_id, None)
                    raise self._classify(exc, "TxnOffsetCommit")
                codes = {tp: exc.code for tp in pending}
            error = self._txn_offset_error(codes, group.group_id)
            if error is not None:
                self._unsent_offsets.pop(group.group_id, None)
                raise error
            for tp in pending:
                if not codes.get(tp, 0):
                    del unsent.offsets[tp]
            if unsent.offsets:
                if time.monotonic() + self._backoff_s >= deadline:
                    raise KafkaTimeoutError("TxnOffsetCommit of group %r did not complete within max_block_ms"
                                            % group.group_id)
                time.sleep(self._backoff_s)
        self._unsent_offsets.pop(group.group_id, None)

    def _txn_offset_error(self, codes: Mapping[Tuple[str, int], int], group_id: str) -> Optional[BaseException]:
        """The error a TxnOffsetCommit answer ends the call with, in its state (None: the
        partitions answered without error, or retriably)."""
        for code in codes.values():
            if not code or _retriable(code):
                continue
            cls = error_for_code(code) or BrokerError
            if cls in (UnknownMemberIdError, IllegalGenerationError):
                return self._fail_abortable(CommitFailedError(
                    "the transaction's offset commit of group %r failed: the consumer's group metadata is "
                    "stale (%s)" % (group_id, cls.name)))
            return self._classify(cls("TxnOffsetCommit of group %r" % group_id), "TxnOffsetCommit")
        return None

    def prepared(self, deadline: float) -> Tuple[int, int, bool]:
        """The open transaction's (producer id, epoch, whether the coordinator has heard of it),
        once its records are flushed and its kept offsets sent (op lock held): what
        :meth:`Producer.prepare_transaction` hands out. Raises the error the producer is in;
        IllegalStateError outside a transaction."""
        def check() -> None:
            self._raise_if_failed()
            if self.state is not S.IN_TRANSACTION:
                raise IllegalStateError("prepare_transaction: the transactional id %r is %s, not in a transaction"
                                        % (self.transactional_id, self.state.value))

        with self._lock:
            check()
        for unsent in list(self._unsent_offsets.values()):
            self._send_offsets(unsent, deadline)
        with self._lock:
            check()  # (a batch may have failed meanwhile)
            self._handed_out = True
            return self.producer_id, self.producer_epoch, self.started

    def left_open(self) -> Optional[str]:
        """What ``close()`` ends, as Kafka's sender does on a graceful close: "commit" or
        "abort" for a commit or an abort that stopped half way, "abort" for a transaction
        under way (or in an abortable error) that was not handed out by prepare_transaction;
        None when there is none (op lock held)."""
        with self._lock:
            if self._pending == "commit_transaction":
                return "commit"
            if self._pending == "abort_transaction":
                return "abort"
            if self._pending is None and not self._handed_out and self.state in (S.IN_TRANSACTION,
                                                                                   S.ABORTABLE_ERROR):
                return "abort"
            return None

    def begin_commit(self) -> bool:
        """Start committing (``commit_transaction``'s first step, lock of the accumulator held
        so no record joins after it); -> whether a commit timed out earlier is resumed."""
        with self._lock:
            if self._check_pending("commit_transaction"):
                return True
            self._raise_if_failed()
            if self.state is not S.IN_TRANSACTION:
                raise IllegalStateError("cannot commit a transaction in state %s" % self.state.value)
            self._transition(S.COMMITTING)
            self._pending = "commit_transaction"
            return False

    def begin_abort(self) -> bool:
        """Start aborting (lock of the accumulator held); -> whether an abort is resumed."""
        with self._lock:
            if self._check_pending("abort_transaction"):
                return True
            if self.state is S.FATAL_ERROR:
                self._raise_if_failed()
            if self.state is not S.IN_TRANSACTION and self.state is not S.ABORTABLE_ERROR:
                raise IllegalStateError("cannot abort a transaction in state %s" % self.state.value)
            # Kept offsets go with the transaction. Whether an AddOffsetsToTxn that ran out of
            # time began a transaction at the coordinator is unknown: the new epoch ends one.
            if any(not unsent.added for unsent in self._unsent_offsets.values()):
                self._epoch_bump_required = True
            self._unsent_offsets.clear()
            self._transition(S.ABORTING)
            self._pending = "abort_transaction"
            return False

    def end_transaction(self, committed: bool, deadline: float) -> None:
        """After the flush: EndTxn (unless the coordinator never heard of the transaction),
        the epoch bumped if a batch was lost, READY."""
        self._settle(lambda: self._end_transaction(committed, deadline))

    def _end_transaction(self, committed: bool, deadline: float) -> None:
        """EndTxn, then READY; or the abort of a producer id the coordinator no longer maps
        the transactional id to, which it would refuse EndTxn: InitProducerId instead."""
        with self._lock:
            if self.state is S.INITIALIZING:  # an abort's epoch bump that timed out, resumed
                pid, epoch = self.producer_id, self.producer_epoch
                resumed = True
            else:
                resumed = False
        if resumed:
            self._init_producer_id(deadline, pid, epoch)
            return
        if committed:
            with self._lock:
                self._raise_if_failed()  # a batch failed during the flush: the commit cannot go on
            for unsent in list(self._unsent_offsets.values()):  # before EndTxn, as Kafka's client
                self._send_offsets(unsent, deadline)
        with self._lock:
            started, pid, epoch = self.started, self.producer_id, self.producer_epoch
            bump = (self._epoch_bump_required or self._invalid_mapping) and not committed
            skip_end = self._invalid_mapping and not committed
        what = "EndTxn(%s)" % ("commit" if committed else "abort")
        if started and not skip_end:
            try:
                self._retry(what, deadline, lambda: self._transport.end_txn(
                    self.transactional_id, pid, epoch, committed))
            except KafkaTimeoutError:
                raise
            except BrokerError as exc:
                raise self._classify(exc, what)
        with self._lock:
            self.added.clear()
            self.started = False
            self._transition(S.INITIALIZING if bump else S.READY)
        if bump:
            self._init_producer_id(deadline, pid, epoch)

    def op_lock(self) -> "threading.Lock":
        """Held by the producer around a commit or an abort (one public call at a time)."""
        return self._op_lock


def _retriable(code: int) -> bool:
    cls = error_for_code(code)
    return bool(cls is not None and cls.retriable)


def _raise_code(code: int, context: str) -> None:
    cls = error_for_code(code) or BrokerError
    raise cls(context)
