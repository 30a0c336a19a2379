"""A broker's part in transactions: its transaction coordinator's plumbing, and the markers
it writes as a partitions' leader.

:class:`BrokerTransactions` holds the calls of :class:`pylogq.Broker` for the transaction
APIs. The coordinator (:mod:`pylogq.cluster.coordinator.transaction`) does not know the
broker: it is given ``__transaction_state``'s partitions to store in (an append returns
once the partition's in-sync replicas have it) and the markers' way out. Those go to
each partition's leader: this broker's own partitions are written directly, another
broker's through a :class:`~pylogq.cluster.broker_link.BrokerLink` per broker, used by
the coordinator's marker writer (one request at a time per broker).

WriteTxnMarkers, as a leader answers it (Kafka's ReplicaManager with origin
COORDINATOR): each marker is appended as a control batch with acks=all, checked by the
partition's producer state (a fenced producer epoch or coordinator epoch is refused),
and answered once the in-sync replicas have it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ... import errors
from ...records.control import ABORT, COMMIT, build_end_txn_marker
from ..broker_link import BrokerLink
from ..contract import TopicDescription, TransactionDescription, TransactionListing, TxnMarker
from ..coordinator.group.offsets_topic import OFFSETS_TOPIC, OffsetsTopic
from ..coordinator.transaction.coordinator import (
    TRANSACTION_STATE_TOPIC,
    TransactionCoordinator,
    transaction_state_config,
)
from ..delayed import DelayedCall
from ..state.partition import Partition
from .data_path import BrokerDataPath

if TYPE_CHECKING:
    from .topic_store import TopicMetadata

__all__ = ["BrokerTransactions", "TRANSACTION_STATE_TOPIC"]

log = logging.getLogger(__name__)

#: How long a marker or a coordinator's write waits for the in-sync replicas (Kafka's
#: request.timeout.ms, which its coordinator's appends wait).
TXN_WRITE_TIMEOUT_MS = 30000


class BrokerTransactions(BrokerDataPath):
    """The transaction APIs of :class:`pylogq.Broker`. Thread-safe."""

    if TYPE_CHECKING:
        txn_coordinator: TransactionCoordinator
        txn_state_topic: OffsetsTopic
        _txn_state_ready: bool
        _marker_links: Dict[int, BrokerLink]
        _markers_closed: bool

        def _create_cluster_topic(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                                  config: Optional[Mapping[str, Any]], validate_only: bool,
                                  internal: bool = False,
                                  assignment: Optional[Mapping[int, Sequence[int]]] = None) -> TopicDescription: ...

        def _create_topic(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                          config: Optional[Mapping[str, Any]], internal: bool,
                          validate_only: bool = False) -> TopicDescription: ...

    def _open_transaction_coordinator(self, stored: Optional["TopicMetadata"]) -> None:
        """Make the coordinator (in ``__init__``); a single node whose topic exists serves
        every partition of it at once."""
        node = self.config.node
        self.txn_state_topic = OffsetsTopic(lambda p: self._partitions[(TRANSACTION_STATE_TOPIC, p)])
        self._txn_state_ready = stored is not None
        self._marker_links = {}
        self._markers_closed = False
        self.txn_coordinator = TransactionCoordinator(
            append=self._store_txn_state, read_all=self.txn_state_topic.read_all,
            new_producer_id=lambda: self.producer_ids.next_id()[0], send_markers=self._send_txn_markers,
            leader_of=self._marker_leader,
            num_partitions=stored.partitions if stored is not None else node.transaction_state_log_num_partitions,
            max_timeout_ms=node.transaction_max_timeout_ms, id_expiration_ms=node.transactional_id_expiration_ms,
            name="pylogq-txn-markers-%d" % self.broker_id)
        if self.cluster is not None:
            self.txn_coordinator.partition_in_doubt = self._txn_leadership_in_doubt
        elif stored is not None:
            self._serve_all_txn_partitions()
        abort_s = node.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000.0
        expire_s = node.transaction_remove_expired_transaction_cleanup_interval_ms / 1000.0
        coordinator = self.txn_coordinator

        def abort_timed_out() -> None:
            coordinator.abort_timed_out_transactions()

        def expire_ids() -> None:
            coordinator.remove_expired_transactional_ids()

        self.logs.scheduler.schedule(abort_timed_out, delay=abort_s, period=abort_s,
                                     name="transaction-abort-timed-out")
        self.logs.scheduler.schedule(expire_ids, delay=expire_s, period=expire_s, name="transactional-id-expiration")

    def _serve_all_txn_partitions(self) -> None:
        """A single node leads every partition of ``__transaction_state``: load them all."""
        coordinator = self.txn_coordinator
        for p in range(coordinator.num_partitions):
            partition = self._partitions[(TRANSACTION_STATE_TOPIC, p)]
            coordinator.begin_loading(p)
            coordinator.load_partition(p, partition.leader_epoch)

    def _close_transactions(self) -> None:
        """Stop the coordinator: a marker request in flight is aborted (its sender then ends
        at once), the writer's threads are waited for, and the links closed after them."""
        self._markers_closed = True
        links: Dict[int, BrokerLink] = getattr(self, "_marker_links", {})
        for link in list(links.values()):
            link.abort()
        coordinator = getattr(self, "txn_coordinator", None)
        if coordinator is not None:
            coordinator.close()
        for link in list(links.values()):
            link.close()

    def _txn_leadership_in_doubt(self, p: int) -> bool:
        partition = self._partitions.get((TRANSACTION_STATE_TOPIC, p))
        return (partition is not None and self.cluster is not None
                and self.cluster.replicas.leadership_doubt(partition) is not None)

    # -- the coordinator's storage and markers ------------------------------------------------

    def _append_replicated(self, partition: Partition, data: bytes, origin: str) -> "DelayedCall[int]":
        """Append with acks=all; -> the wait for the in-sync replicas (0 at once on a single node)."""
        partition.append(data, required_acks=-1, origin=origin)
        if self.cluster is None:
            return DelayedCall.immediate(0)
        return self.cluster.replicas.wait_replicated(partition, TXN_WRITE_TIMEOUT_MS)

    def _store_txn_state(self, p: int, data: bytes) -> None:
        """The coordinator's write to ``__transaction_state``-``p``: returns once committed."""
        partition = self._partitions.get((TRANSACTION_STATE_TOPIC, p))
        if partition is None:
            raise errors.NotLeaderOrFollowerError("%s-%d is not hosted here" % (TRANSACTION_STATE_TOPIC, p))
        wait = self._append_replicated(partition, data, "client")
        wait.wait()
        code = wait.answer()
        if code:
            error = errors.error_for_code(code) or errors.UnknownServerError
            raise error("%s-%d: the write did not reach the in-sync replicas" % (TRANSACTION_STATE_TOPIC, p))

    def _marker_leader(self, topic: str, p: int) -> Optional[int]:
        if self.cluster is None:
            return self.broker_id if (topic, p) in self._partitions else None
        metadata = self.cluster.metadata
        if metadata.partition(topic, p) is None:
            return None if not metadata.has_topic(topic) else -1
        return metadata.leader_of(topic, p)

    def _send_txn_markers(self, broker_id: int, markers: Sequence[TxnMarker]
                          ) -> Mapping[int, Mapping[Tuple[str, int], int]]:
        """The marker writer's WriteTxnMarkers to ``broker_id`` (this broker: directly)."""
        if getattr(self, "_markers_closed", False):
            raise errors.BrokerNotAvailableError("this broker is stopping")
        if broker_id == self.broker_id:
            return self.write_txn_markers(markers)
        assert self.cluster is not None
        registration = self.cluster.metadata.live_brokers().get(broker_id)
        if registration is None:
            raise errors.BrokerNotAvailableError("broker %d is not alive" % broker_id)
        link = self._marker_links.get(broker_id)
        if link is None or link.broker != registration:
            if link is not None:
                link.close()
            link = self._marker_links[broker_id] = self.cluster.link_to(registration)
        try:
            return link.client().write_txn_markers(markers)
        except Exception:
            link.close()
            raise

    # -- the transaction APIs (served) -----------------------------------------------------------

    def transaction_state_topic_ready(self) -> bool:
        """Whether ``__transaction_state`` exists (on a single node: and is served)."""
        if self.cluster is None:
            return self._txn_state_ready
        return self.cluster.metadata.has_topic(TRANSACTION_STATE_TOPIC)

    def ensure_transaction_state_topic(self) -> int:
        """Create ``__transaction_state`` if there is none yet (Kafka creates it when a
        transaction coordinator is first looked up); -> 0, or COORDINATOR_NOT_AVAILABLE while
        fewer brokers of a cluster are alive than ``transaction.state.log.replication.factor``.
        Blocking (admin work)."""
        if self.transaction_state_topic_ready():
            return 0
        node = self.config.node
        config = transaction_state_config(node.transaction_state_log_segment_bytes,
                                          node.transaction_state_log_min_isr)
        if self.cluster is None:
            with self._admin_lock:
                if not self._txn_state_ready:
                    if TRANSACTION_STATE_TOPIC not in self._topics:
                        self._create_topic(TRANSACTION_STATE_TOPIC, self.txn_coordinator.num_partitions, 1,
                                           dict(config, **{"min.insync.replicas": 1}), internal=True)
                    self._serve_all_txn_partitions()
                    self._txn_state_ready = True
            return 0
        alive = len(self.cluster.live_brokers())
        if alive < node.transaction_state_log_replication_factor:
            log.info("not creating %s: %d live brokers, transaction.state.log.replication.factor is %d",
                     TRANSACTION_STATE_TOPIC, alive, node.transaction_state_log_replication_factor)
            return errors.CoordinatorNotAvailableError.code
        with self._admin_lock:
            try:
                self._create_cluster_topic(TRANSACTION_STATE_TOPIC, node.transaction_state_log_num_partitions,
                                           node.transaction_state_log_replication_factor, config, False,
                                           internal=True)
            except errors.TopicAlreadyExistsError:
                self.cluster.wait_for_metadata(self.transaction_state_topic_ready, 30.0)
        return 0 if self.transaction_state_topic_ready() else errors.CoordinatorNotAvailableError.code

    def coordinator_for_transaction(self, transactional_id: str) -> Tuple[int, int]:
        """(error code, broker id) of ``transactional_id``'s coordinator: the leader of its
        ``__transaction_state`` partition."""
        if self.cluster is None:
            return 0, self.broker_id
        p = self.txn_coordinator.partition_for(transactional_id)
        leader = self.cluster.metadata.leader_of(TRANSACTION_STATE_TOPIC, p)
        if leader < 0 or (leader == self.broker_id and self._txn_leadership_in_doubt(p)):
            return errors.CoordinatorNotAvailableError.code, -1
        return 0, leader

    def init_producer_id(self, transactional_id: Optional[str] = None, transaction_timeout_ms: int = 60000,
                         producer_id: int = -1, producer_epoch: int = -1) -> Tuple[int, int]:
        """Kafka's InitProducerId: a new producer id and epoch 0 for an idempotent producer
        (``transactional_id`` None); a transactional id's producer id and new epoch from its
        coordinator, which fences the id's previous producer."""
        self._check_open()
        if transactional_id is None:
            return self.producer_ids.next_id()
        if self.cluster is None:
            self.ensure_transaction_state_topic()  # a single node's first transactional call makes it
        return self.txn_coordinator.init_producer_id(transactional_id, transaction_timeout_ms, producer_id,
                                                     producer_epoch)

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Sequence[Tuple[str, int]]) -> Dict[Tuple[str, int], int]:
        """AddPartitionsToTxn: unknown partitions answer UNKNOWN_TOPIC_OR_PARTITION and the
        others OPERATION_NOT_ATTEMPTED (nothing is added), as Kafka answers; otherwise every
        partition answers the coordinator's code."""
        unknown = [tp for tp, ok in zip(partitions, self.partitions_exist(partitions)) if not ok]
        if unknown:
            return {tp: errors.UnknownTopicOrPartitionError.code if tp in unknown
                    else errors.OperationNotAttemptedError.code for tp in partitions}
        try:
            self.txn_coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions)
        except errors.BrokerError as exc:
            return {tp: exc.code for tp in partitions}
        return {tp: 0 for tp in partitions}

    def verify_partitions_in_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 partitions: Sequence[Tuple[str, int]]) -> Dict[Tuple[str, int], int]:
        try:
            return self.txn_coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        except errors.BrokerError as exc:
            return {tp: exc.code for tp in partitions}

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           group_id: str) -> None:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        p = self.group_coordinator.partition_for(group_id)
        self.txn_coordinator.add_partitions(transactional_id, producer_id, producer_epoch, [(OFFSETS_TOPIC, p)])

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool) -> None:
        self.txn_coordinator.end_transaction(transactional_id, producer_id, producer_epoch, committed)

    def describe_transactions(self, transactional_ids: Sequence[str]) -> List[TransactionDescription]:
        return [self.txn_coordinator.describe(t) for t in transactional_ids]

    def list_transactions(self, states: Sequence[str] = (), producer_ids: Sequence[int] = (),
                          duration_ms: int = -1) -> Tuple[List[str], List[TransactionListing]]:
        return self.txn_coordinator.list_transactions(states, producer_ids, duration_ms)

    # -- WriteTxnMarkers (as a partitions' leader) -------------------------------------------------

    def write_txn_markers(self, markers: Sequence[TxnMarker]) -> Dict[int, Dict[Tuple[str, int], int]]:
        """Append each marker to each of its partitions led here, then wait for their in-sync
        replicas; -> each marker's code per partition (NOT_LEADER_OR_FOLLOWER where this
        broker does not lead, UNKNOWN_TOPIC_OR_PARTITION where the partition is unknown, the
        producer state's refusals: INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED)."""
        now = int(time.time() * 1000)
        out: Dict[int, Dict[Tuple[str, int], int]] = {}
        waits: List[Tuple[TxnMarker, Tuple[str, int], "DelayedCall[int]"]] = []
        for marker in markers:
            codes = out.setdefault(marker.producer_id, {})
            for tp in marker.partitions:
                try:
                    partition = self.leader_partition(*tp)
                    batch = build_end_txn_marker(marker.producer_id, marker.producer_epoch,
                                                 COMMIT if marker.committed else ABORT, marker.coordinator_epoch,
                                                 now)
                    waits.append((marker, tp, self._append_replicated(partition, bytes(batch), "coordinator")))
                except errors.BrokerError as exc:
                    codes[tp] = exc.code
                except OSError as exc:  # a failing log directory: the partition goes offline
                    log.error("writing a transaction marker to %s-%d: %s", tp[0], tp[1], exc)
                    codes[tp] = errors.KafkaStorageError.code
        for marker, tp, wait in waits:
            wait.wait()
            code = out[marker.producer_id][tp] = wait.answer()
            if code == 0:
                self.txn_markers_appended(tp[0], tp[1], marker.producer_id, marker.committed)
        return out

