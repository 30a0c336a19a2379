"""The transaction coordinator (Kafka's TransactionCoordinator and TransactionStateManager).

Each transactional id belongs to one partition of ``__transaction_state``; the broker
that leads that partition coordinates the id. The coordinator keeps the ids of the
partitions it leads in memory (:class:`~.metadata.TransactionMetadata`), loads them
when it comes to lead a partition (the last record of an id wins, a tombstone removes
it) and stores every change there before it answers: a change is committed to the
partition's in-sync replicas (acks=all) when ``append`` returns.

Its coordinator epoch for a partition is the partition's leader epoch when it was
loaded; every marker it writes carries it, so that a partition refuses the markers of
a coordinator that a newer one has replaced.

What it answers:

- :meth:`init_producer_id`: a transactional id's producer id and a new epoch, which
  fences the previous producer of the id. An ongoing transaction of that producer is
  aborted first (the answer is CONCURRENT_TRANSACTIONS until it is), and epochs that
  run out move the id to a new producer id.
- :meth:`add_partitions` (AddPartitionsToTxn, and AddOffsetsToTxn's group partition):
  begins the transaction, or adds to it.
- :meth:`end_transaction` (EndTxn): stores PrepareCommit or PrepareAbort and answers;
  :class:`~.markers.MarkerWriter` then writes the markers, and CompleteCommit or
  CompleteAbort is stored when every partition has its marker.
- :meth:`describe` and :meth:`list_transactions`.

In the background (the broker schedules them): :meth:`abort_timed_out_transactions`
aborts transactions open longer than their timeout, fencing their producer, and
:meth:`remove_expired_transactional_ids` forgets ids idle for
``transactional.id.expiration.ms``.

Thread-safe: the ids and partitions are changed under one lock; the writes to
``__transaction_state`` are made outside it, the id marked pending meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .... import errors
from ....records import build_batch
from ...contract import TransactionDescription, TransactionListing, TxnMarker
from ..group.metadata_manager import StorageRecord, storage_error_code
from .log_schema import decode_key, decode_value, encode_key, encode_value, partition_for_transactional_id
from .markers import LeaderOf, MarkerWriter, PendingMarkers, SendMarkers
from .metadata import NO_PRODUCER_EPOCH, STATE_NAMES, TransactionMetadata, TxnState, TxnTransit

__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionCoordinator", "transaction_state_config"]

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"

_NOT_COORDINATOR = errors.NotCoordinatorError
_LOADING = errors.CoordinatorLoadInProgressError


def transaction_state_config(segment_bytes: int, min_isr: int) -> Dict[str, object]:
    """The topic's config (Kafka's): compacted, its own segment size and min.insync.replicas,
    uncompressed batches as written."""
    return {"cleanup.policy": "compact", "segment.bytes": segment_bytes, "min.insync.replicas": min_isr,
            "compression.type": "uncompressed", "unclean.leader.election.enable": "false"}


def _now_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions led here."""

    def __init__(self, append: Callable[[int, bytes], None], read_all: Callable[[int], Iterable[StorageRecord]],
                 new_producer_id: Callable[[], int], send_markers: SendMarkers, leader_of: LeaderOf,
                 num_partitions: int, max_timeout_ms: int = 900000, id_expiration_ms: int = 604800000,
                 retry_backoff_ms: int = 100, clock: Callable[[], int] = _now_ms, name: str = "pylogq-txn-markers"
                 ) -> None:
        if num_partitions <= 0:
            raise errors.InvalidArgumentError("num_partitions must be positive, got %r" % (num_partitions,))
        self._append = append
        self._read_all = read_all
        self._new_producer_id = new_producer_id
        self._clock = clock
        self.num_partitions = num_partitions
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self._lock = threading.RLock()
        #: Every transactional id of the partitions served, by id.
        self._txns: Dict[str, TransactionMetadata] = {}
        #: The partitions served, with this coordinator's epoch for each; those being loaded.
        self._owned: Dict[int, int] = {}
        self._loading: Set[int] = set()
        #: Set by a broker of a cluster: whether its leadership of a partition is in doubt
        #: (its store session may have ended); its ids then answer NOT_COORDINATOR.
        self.partition_in_doubt: Optional[Callable[[int], bool]] = None
        self.markers = MarkerWriter(send_markers, leader_of, self._markers_written, retry_backoff_ms, name)
        self._closed = False

    def partition_for(self, transactional_id: str) -> int:
        return partition_for_transactional_id(transactional_id, self.num_partitions)

    # -- which partitions are served -------------------------------------------------------

    def _owner_check(self, transactional_id: str) -> int:
        """-> the coordinator epoch of the id's partition; NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS when it is not served here now."""
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            raise _LOADING("the transactions of %s-%d are being loaded" % (TRANSACTION_STATE_TOPIC, partition))
        epoch = self._owned.get(partition)
        if epoch is None or self._closed:
            raise _NOT_COORDINATOR("this broker does not coordinate transactional id %r (%s-%d)"
                                   % (transactional_id, TRANSACTION_STATE_TOPIC, partition))
        if self.partition_in_doubt is not None and self.partition_in_doubt(partition):
            raise _NOT_COORDINATOR("this broker's leadership of %s-%d is in doubt" % (TRANSACTION_STATE_TOPIC,
                                                                                     partition))
        return epoch

    def _serving(self, partition: int) -> bool:
        """Whether ``partition``'s ids are served here now (under the lock)."""
        return partition in self._owned and not (self.partition_in_doubt is not None
                                                 and self.partition_in_doubt(partition))

    def begin_loading(self, partition: int) -> None:
        """The broker has come to lead ``partition``: its ids answer
        COORDINATOR_LOAD_IN_PROGRESS until :meth:`load_partition` is done."""
        with self._lock:
            self._loading.add(partition)
            self._owned.pop(partition, None)

    def load_partition(self, partition: int, coordinator_epoch: int) -> None:
        """Read ``partition`` back and serve its ids with ``coordinator_epoch`` (the partition's
        leader epoch); the markers of transactions it finds decided but not completed are
        written again. Raises what the read raises (the partition then stays loading: its ids
        answer COORDINATOR_LOAD_IN_PROGRESS until a later load, or its unload)."""
        found: Dict[str, TransactionMetadata] = {}
        # A failed read raises with the partition still loading (its ids wait, as in Kafka).
        for key, value in self._read_all(partition):
            if key is None:
                continue
            txn_id = decode_key(key)
            if txn_id is None:
                continue
            if value is None:
                found.pop(txn_id, None)
            else:
                found[txn_id] = TransactionMetadata.loaded(txn_id, decode_value(value))
        with self._lock:
            if partition not in self._loading or self._closed:
                return  # unloaded meanwhile
            self._loading.discard(partition)
            for txn_id in [t for t in self._txns if self.partition_for(t) == partition]:
                del self._txns[txn_id]
            self._txns.update(found)
            self._owned[partition] = coordinator_epoch
            decided = [m for m in found.values() if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)]
        for meta in decided:
            self._send_markers(meta, partition, coordinator_epoch)
        log.info("loaded %d transactional ids of %s-%d (coordinator epoch %d, %d to complete)", len(found),
                 TRANSACTION_STATE_TOPIC, partition, coordinator_epoch, len(decided))

    def unload_partition(self, partition: int) -> None:
        """The broker no longer leads ``partition``: forget its ids and their markers."""
        with self._lock:
            self._loading.discard(partition)
            self._owned.pop(partition, None)
            for txn_id in [t for t in self._txns if self.partition_for(t) == partition]:
                del self._txns[txn_id]
        self.markers.drop(partition)

    def owned_partitions(self) -> Dict[int, int]:
        with self._lock:
            return dict(self._owned)

    # -- storing ---------------------------------------------------------------------------

    def _store(self, meta: TransactionMetadata, transit: TxnTransit, coordinator_epoch: int) -> None:
        """Write ``transit`` and apply it, or abandon it and raise the coordinator's error.
        Called with the id pending and the lock released."""
        partition = self.partition_for(meta.transactional_id)
        with self._lock:
            if self._owned.get(partition) != coordinator_epoch or self._txns.get(meta.transactional_id) is not meta:
                meta.abandon()  # loaded again, or moved, since the transit was prepared: not ours to write
                raise _NOT_COORDINATOR("the coordinator of %r moved" % meta.transactional_id)
        value = None if transit.state is TxnState.DEAD else encode_value(transit.stored())
        batch = build_batch([value], keys=[encode_key(meta.transactional_id)], timestamps=transit.last_update_ms)
        try:
            self._append(partition, bytes(batch))
        except Exception as exc:
            with self._lock:
                meta.abandon()
            code = storage_error_code(exc, for_commit=False)
            log.info("could not store %s of transactional id %r: %s", transit.state.kafka_name,
                     meta.transactional_id, exc)
            error = errors.error_for_code(code) or errors.UnknownServerError
            raise error("could not store the transaction state of %r: %s" % (meta.transactional_id, exc)) from exc
        with self._lock:
            if self._owned.get(partition) != coordinator_epoch or self._txns.get(meta.transactional_id) is not meta:
                meta.abandon()
                raise _NOT_COORDINATOR("the coordinator of %r moved while its state was stored"
                                       % meta.transactional_id)
            meta.complete(transit)

    # -- InitProducerId ----------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_producer_id: int = -1,
                         expected_epoch: int = -1) -> Tuple[int, int]:
        """-> (producer id, epoch) for the new producer of ``transactional_id``; raises
        InvalidRequestError, InvalidTransactionTimeoutError, ProducerFencedError,
        ConcurrentTransactionsError (retriable: a transaction is being ended, or the
        previous producer's is being aborted now), NOT_COORDINATOR and the like."""
        if not transactional_id:
            raise errors.InvalidRequestError("the transactional id is empty")
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            raise errors.InvalidTransactionTimeoutError(
                "transaction timeout %d ms is not within 1..%d (transaction.max.timeout.ms)"
                % (timeout_ms, self.max_timeout_ms))
        expected = None if expected_producer_id == -1 else (expected_producer_id, expected_epoch)
        with self._lock:
            self._owner_check(transactional_id)
            known = transactional_id in self._txns
        # A new id may need a block from the metadata store: not under the lock (an id taken
        # and not used is harmless).
        new_id = None if known else self._new_producer_id()
        with self._lock:
            coordinator_epoch = self._owner_check(transactional_id)
            meta = self._txns.get(transactional_id)
            if meta is None:
                if new_id is None:
                    raise errors.ConcurrentTransactionsError("transactional id %r was just forgotten; retry"
                                                             % transactional_id)
                meta = TransactionMetadata(transactional_id, new_id, timeout_ms, self._clock())
                self._txns[transactional_id] = meta
            if meta.pending is not None:
                raise errors.ConcurrentTransactionsError("transactional id %r has a state change under way"
                                                         % transactional_id)
            if expected is not None and not self._valid_expected(meta, *expected):
                raise errors.ProducerFencedError(
                    "producer %d epoch %d of %r was fenced: the id is at producer %d epoch %d"
                    % (expected[0], expected[1], transactional_id, meta.producer_id, meta.producer_epoch))
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                raise errors.ConcurrentTransactionsError("the transaction of %r is being completed" % transactional_id)
            if meta.state is TxnState.ONGOING:
                # Abort the previous producer's transaction, with a bumped epoch it never learns;
                # the new producer retries and gets an epoch past it.
                meta.prepare_fence()
                fence = True
            else:
                fence = False
                now = self._clock()
                if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
                    # Rare (32767 epochs of one id): the new id is taken under the lock.
                    transit = meta.prepare_producer_id_rotation(self._new_producer_id(), timeout_ms, now,
                                                                expected is not None)
                else:
                    bumped = meta.prepare_epoch_bump(timeout_ms, None if expected is None else expected[1], now)
                    if bumped is None:
                        raise errors.ProducerFencedError(
                            "producer epoch %d of %r is neither its current nor its previous epoch"
                            % (expected[1] if expected else -1, transactional_id))
                    transit = bumped
        if fence:
            self._abort_fenced(meta, coordinator_epoch)
            raise errors.ConcurrentTransactionsError(
                "the transaction of the previous producer of %r is being aborted; retry" % transactional_id)
        self._store(meta, transit, coordinator_epoch)
        log.info("initialized transactional id %r: producer %d epoch %d", transactional_id, transit.producer_id,
                 transit.producer_epoch)
        return transit.producer_id, transit.producer_epoch

    @staticmethod
    def _valid_expected(meta: TransactionMetadata, producer_id: int, epoch: int) -> bool:
        """KIP-360: a producer that names its id and epoch may continue unless another producer
        took the id over (a retried bump of an exhausted id names the previous producer id)."""
        return (meta.producer_epoch == NO_PRODUCER_EPOCH or producer_id == meta.producer_id
                or (producer_id == meta.last_producer_id and epoch >= 0x7FFF - 1))

    # -- AddPartitionsToTxn, AddOffsetsToTxn --------------------------------------------------

    def _checked(self, transactional_id: str, producer_id: int, epoch: int) -> Tuple[TransactionMetadata, int]:
        """The id's metadata and coordinator epoch, for a request of ``producer_id`` at
        ``epoch`` (under the lock)."""
        coordinator_epoch = self._owner_check(transactional_id)
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise errors.InvalidProducerIdMappingError(
                "producer %d is not the producer of transactional id %r" % (producer_id, transactional_id))
        if epoch != meta.producer_epoch:
            raise errors.ProducerFencedError(
                "producer %d epoch %d of %r was fenced: its epoch is now %d"
                % (producer_id, epoch, transactional_id, meta.producer_epoch))
        if meta.pending is not None or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise errors.ConcurrentTransactionsError("the transaction of %r is being completed" % transactional_id)
        return meta, coordinator_epoch

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[Tuple[str, int]]) -> None:
        """Add ``partitions`` to the producer's transaction, beginning it if none is under way."""
        added = frozenset(partitions)
        with self._lock:
            meta, coordinator_epoch = self._checked(transactional_id, producer_id, epoch)
            if meta.state is TxnState.ONGOING and added <= meta.partitions:
                return  # nothing new: no write
            transit = meta.prepare_add_partitions(added, self._clock())
        self._store(meta, transit, coordinator_epoch)

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[Tuple[str, int]]) -> Dict[Tuple[str, int], int]:
        """AddPartitionsToTxn's verify-only form: each partition's 0 when it is in the
        producer's ongoing transaction, else INVALID_TXN_STATE."""
        with self._lock:
            meta, _ = self._checked(transactional_id, producer_id, epoch)
            inside = meta.partitions if meta.state is TxnState.ONGOING else frozenset()
            return {tp: 0 if tp in inside else errors.InvalidTxnStateError.code for tp in partitions}

    # -- EndTxn --------------------------------------------------------------------------------

    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, committed: bool) -> None:
        """Commit or abort the producer's transaction. Returns once the decision is stored;
        a retry of a decided one returns at once. InvalidTxnStateError when there is no
        transaction or it was decided the other way."""
        with self._lock:
            coordinator_epoch = self._owner_check(transactional_id)
            meta = self._txns.get(transactional_id)
        if meta is None:
            raise errors.InvalidProducerIdMappingError("transactional id %r is not known" % transactional_id)
        self._end(meta, producer_id, epoch, committed, coordinator_epoch, from_client=True)

    def _end(self, meta: TransactionMetadata, producer_id: int, epoch: int, committed: bool,
             coordinator_epoch: int, from_client: bool) -> None:
        what = "commit" if committed else "abort"
        with self._lock:
            if self._txns.get(meta.transactional_id) is not meta or \
                    self._owned.get(self.partition_for(meta.transactional_id)) != coordinator_epoch:
                raise _NOT_COORDINATOR("the coordinator of %r moved" % meta.transactional_id)
            if meta.producer_id != producer_id:
                raise errors.InvalidProducerIdMappingError(
                    "producer %d is not the producer of transactional id %r" % (producer_id, meta.transactional_id))
            if from_client and epoch != meta.producer_epoch:
                raise errors.ProducerFencedError("producer %d epoch %d of %r was fenced: its epoch is now %d"
                                                 % (producer_id, epoch, meta.transactional_id, meta.producer_epoch))
            fencing = not from_client and meta.pending is TxnState.PREPARE_EPOCH_FENCE
            if meta.pending is not None and not fencing:
                raise errors.ConcurrentTransactionsError("transactional id %r has a state change under way"
                                                         % meta.transactional_id)
            state = meta.state
            if state is TxnState.ONGOING:
                transit = meta.prepare_end(committed, self._clock())
            elif (state is TxnState.COMPLETE_COMMIT and committed) or (state is TxnState.COMPLETE_ABORT
                                                                        and not committed):
                return  # a retry of a decision already made and completed
            elif (state is TxnState.PREPARE_COMMIT and committed) or (state is TxnState.PREPARE_ABORT
                                                                       and not committed):
                raise errors.ConcurrentTransactionsError("the transaction of %r is being completed"
                                                         % meta.transactional_id)
            else:
                raise errors.InvalidTxnStateError("cannot %s the transaction of %r: it is %s"
                                                  % (what, meta.transactional_id, state.kafka_name))
        self._store(meta, transit, coordinator_epoch)
        log.debug("transactional id %r: %s decided (%d partitions)", meta.transactional_id, what,
                  len(transit.partitions))
        self._send_markers(meta, self.partition_for(meta.transactional_id), coordinator_epoch)

    def _send_markers(self, meta: TransactionMetadata, partition: int, coordinator_epoch: int) -> None:
        """Hand the decided transaction's markers to the writer, unless the partition was
        unloaded meanwhile (under the lock, so that an unload's drop comes after the add)."""
        with self._lock:
            if self._owned.get(partition) != coordinator_epoch or self._closed:
                return  # its next coordinator completes it
            marker = TxnMarker(meta.producer_id, meta.producer_epoch, meta.state is TxnState.PREPARE_COMMIT,
                               coordinator_epoch, tuple(sorted(meta.partitions)))
            pending = PendingMarkers(meta.transactional_id, partition, marker)
            if marker.partitions:
                self.markers.add(pending)
                return
        if not self._markers_written(pending):
            self.markers.complete_later(pending)

    def _markers_written(self, pending: PendingMarkers) -> bool:
        """Every partition has the transaction's marker: store CompleteCommit or CompleteAbort.
        -> False when the write failed and may succeed later (the writer then calls again
        after its backoff); True when done, or when this coordinator no longer decides."""
        txn_id = pending.transactional_id
        with self._lock:
            meta = self._txns.get(txn_id)
            if (meta is None or self._owned.get(pending.txn_partition) != pending.marker.coordinator_epoch
                    or meta.pending is not None or meta.producer_epoch != pending.marker.producer_epoch
                    or meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) or self._closed):
                return True  # another coordinator, or another decision, took over
            transit = meta.prepare_complete(self._clock())
        try:
            self._store(meta, transit, pending.marker.coordinator_epoch)
        except errors.NotCoordinatorError:
            return True
        except errors.BrokerError as exc:
            log.info("completing the transaction of %r: %s; trying again", txn_id, exc)
            return False
        return True

    # -- timeouts and expiration ---------------------------------------------------------------

    def abort_timed_out_transactions(self) -> int:
        """Abort every ongoing transaction open longer than its timeout, fencing its producer
        (Kafka's abortTimedOutTransactions); -> how many were aborted."""
        now = self._clock()
        with self._lock:
            late = [(m, self._owned[self.partition_for(t)]) for t, m in self._txns.items()
                    if m.state is TxnState.ONGOING and m.pending is None and m.start_ms + m.timeout_ms < now
                    and self._serving(self.partition_for(t))]
            for meta, _ in late:
                meta.prepare_fence()
        aborted = 0
        for meta, coordinator_epoch in late:
            log.info("aborting the transaction of %r (producer %d): open %d ms, past its timeout of %d ms",
                     meta.transactional_id, meta.producer_id, now - meta.start_ms, meta.timeout_ms)
            try:
                self._abort_fenced(meta, coordinator_epoch)
                aborted += 1
            except errors.BrokerError as exc:
                log.info("could not abort the timed-out transaction of %r: %s", meta.transactional_id, exc)
        return aborted

    def _abort_fenced(self, meta: TransactionMetadata, coordinator_epoch: int) -> None:
        """Abort the transaction of a producer :meth:`TransactionMetadata.prepare_fence` fenced."""
        try:
            self._end(meta, meta.producer_id, meta.producer_epoch, False, coordinator_epoch, from_client=False)
        except BaseException:
            with self._lock:
                meta.fence_failed = True  # the epoch in memory is bumped already: bump it once only
                if meta.pending is TxnState.PREPARE_EPOCH_FENCE:
                    meta.abandon()
            raise

    def remove_expired_transactional_ids(self) -> int:
        """Forget ids with no transaction whose last change is older than
        ``transactional.id.expiration.ms`` (a tombstone each); -> how many."""
        now = self._clock()
        with self._lock:
            idle = [(m, self._owned[self.partition_for(t)]) for t, m in self._txns.items()
                    if m.pending is None and not m.in_transaction and m.last_update_ms + self.id_expiration_ms <= now
                    and self._serving(self.partition_for(t))]
            transits = [(m, e, m.prepare_dead()) for m, e in idle]
        removed = 0
        for meta, coordinator_epoch, transit in transits:
            try:
                self._store(meta, transit, coordinator_epoch)
            except errors.BrokerError as exc:
                log.info("could not expire transactional id %r: %s", meta.transactional_id, exc)
                continue
            with self._lock:
                if self._txns.get(meta.transactional_id) is meta:
                    del self._txns[meta.transactional_id]
                    removed += 1
        if removed:
            log.info("expired %d transactional ids idle for %d ms", removed, self.id_expiration_ms)
        return removed

    # -- describing --------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionDescription:
        if not transactional_id:
            return TransactionDescription(transactional_id, errors.InvalidRequestError.code)
        with self._lock:
            try:
                self._owner_check(transactional_id)
            except errors.BrokerError as exc:
                return TransactionDescription(transactional_id, exc.code)
            meta = self._txns.get(transactional_id)
            if meta is None or meta.state is TxnState.DEAD:
                return TransactionDescription(transactional_id, errors.TransactionalIdNotFoundError.code)
            return TransactionDescription(transactional_id, 0, meta.state.kafka_name, meta.producer_id,
                                          meta.producer_epoch, meta.timeout_ms,
                                          meta.start_ms if meta.in_transaction else -1,
                                          tuple(sorted(meta.partitions)))

    def list_transactions(self, states: Sequence[str] = (), producer_ids: Sequence[int] = (),
                          duration_ms: int = -1) -> Tuple[List[str], List[TransactionListing]]:
        """-> (the states asked for that Kafka does not know, the matching ids); a running
        time filter keeps ids whose transaction has been open at least ``duration_ms``."""
        unknown = [s for s in states if s not in STATE_NAMES]
        wanted = {STATE_NAMES[s] for s in states if s in STATE_NAMES}
        pids = set(producer_ids)
        now = self._clock()
        out = []
        with self._lock:
            if self._loading:
                raise _LOADING("transactions are being loaded")
            for txn_id, meta in sorted(self._txns.items()):
                if self.partition_for(txn_id) not in self._owned or meta.state is TxnState.DEAD:
                    continue
                if (states and meta.state not in wanted) or (pids and meta.producer_id not in pids):
                    continue
                if duration_ms >= 0 and (not meta.in_transaction or now - meta.start_ms < duration_ms):
                    continue
                out.append(TransactionListing(txn_id, meta.producer_id, meta.state.kafka_name))
        return unknown, out

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.markers.close()
