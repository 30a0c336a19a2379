"""The transaction APIs (KIP-98): InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, DescribeTransactions and ListTransactions, over Kafka 3.9's versions.

The coordinator's calls (InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn) store to ``__transaction_state`` and wait for its in-sync
replicas, and WriteTxnMarkers waits for the markers' replicas: all run off the event loop.
Authorization is Kafka's KafkaApis': WRITE on the transactional id for a producer's
requests (and WRITE on each topic it adds, READ on the group whose offsets it adds),
CLUSTER_ACTION for WriteTxnMarkers (the dispatcher checks it) and AddPartitionsToTxn v4+
(sent by brokers), DESCRIBE on each transactional id described or listed.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Sequence, Tuple

from .. import errors
from ..cluster.acl import AclOperation, ResourceType
from ..protocol.message_data import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from .connection import Connection, RequestSlot
from .handler_base import HandlerBase, error_code

__all__ = ["TransactionHandlers"]

_TXN_ID = ResourceType.TRANSACTIONAL_ID
_TOPIC = ResourceType.TOPIC
_GROUP = ResourceType.GROUP
_WRITE = AclOperation.WRITE
_DESCRIBE = AclOperation.DESCRIBE
_TXN_ID_REFUSED = errors.TransactionalIdAuthorizationFailedError.code

_APT = AddPartitionsToTxnResponse
TopicPartitions = List[Tuple[str, int]]


def _topic_results(codes: Dict[Tuple[str, int], int]) -> List[_APT.AddPartitionsToTxnTopicResult]:
    by_topic: Dict[str, List[_APT.AddPartitionsToTxnPartitionResult]] = defaultdict(list)
    for (topic, p), code in codes.items():
        by_topic[topic].append(_APT.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code))
    return [_APT.AddPartitionsToTxnTopicResult(name=t, results_by_partition=r) for t, r in by_topic.items()]


def _partitions(topics: Sequence[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]) -> TopicPartitions:
    return list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))


class TransactionHandlers(HandlerBase):
    """The transaction coordinator's APIs, and WriteTxnMarkers as a partitions' leader answers it."""

    def _txn_id_refused(self, conn: Connection, transactional_id: str, operation: AclOperation = _WRITE) -> bool:
        return self.authz.enabled and not self.authz.allowed(conn, operation, _TXN_ID, transactional_id)

    # -- InitProducerId ----------------------------------------------------------------

    async def init_producer_id(self, conn: Connection, req: InitProducerIdRequest, version: int,
                               slot: RequestSlot) -> InitProducerIdResponse:
        try:
            # v3+ (KIP-360) names the producer asking again; giving only one of the id and the
            # epoch is an invalid request.
            if req.transactional_id is not None and self._txn_id_refused(conn, req.transactional_id):
                raise errors.TransactionalIdAuthorizationFailedError(
                    "not authorized to write transactional id %r" % req.transactional_id)
            if req.transactional_id is None and not self.authz.cluster(conn, AclOperation.IDEMPOTENT_WRITE) \
                    and not self.authz.any_of_type(conn, _WRITE, _TOPIC):
                # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679).
                raise errors.ClusterAuthorizationFailedError("not authorized to produce idempotently")
            if (req.producer_id == -1) != (req.producer_epoch == -1):
                raise errors.InvalidRequestError("give both the producer id and epoch, or neither")
            if req.transactional_id is None:  # a new block of ids may come from the metadata store
                pid, epoch = await self._blocking(self.broker.init_producer_id)
            else:
                pid, epoch = await self._coordinated(self.broker.init_producer_id, req.transactional_id,
                                                     req.transaction_timeout_ms, req.producer_id,
                                                     req.producer_epoch)
        except Exception as exc:  # noqa: BLE001 - reported as the response's error
            code = error_code(self._failed(conn, exc, "init producer id"))
            if code == errors.ProducerFencedError.code and version < 4:
                code = errors.InvalidProducerEpochError.code  # PRODUCER_FENCED is v4+ (KIP-588)
            return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch)

    # -- AddPartitionsToTxn ----------------------------------------------------------------

    async def add_partitions_to_txn(self, conn: Connection, req: AddPartitionsToTxnRequest, version: int,
                                    slot: RequestSlot) -> AddPartitionsToTxnResponse:
        if version >= 4:
            return await self._add_partitions_batched(conn, req)
        codes = await self._add_partitions(conn, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                           req.v3_and_below_producer_epoch,
                                           _partitions(req.v3_and_below_topics), False, version)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=[],
                                          results_by_topic_v3_and_below=_topic_results(codes))

    async def _add_partitions_batched(self, conn: Connection,
                                      req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
        """v4+: a broker asks about several transactions (KIP-890), which needs CLUSTER_ACTION."""
        if not self.authz.cluster(conn, AclOperation.CLUSTER_ACTION):
            return AddPartitionsToTxnResponse(throttle_time_ms=0,
                                              error_code=errors.ClusterAuthorizationFailedError.code,
                                              results_by_transaction=[], results_by_topic_v3_and_below=[])
        results = []
        for txn in req.transactions:
            codes = await self._add_partitions(conn, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                               _partitions(txn.topics), txn.verify_only, 4)
            results.append(_APT.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                         topic_results=_topic_results(codes)))
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=results,
                                          results_by_topic_v3_and_below=[])

    async def _add_partitions(self, conn: Connection, transactional_id: str, producer_id: int, epoch: int,
                              partitions: TopicPartitions, verify_only: bool, version: int
                              ) -> Dict[Tuple[str, int], int]:
        if version < 4:  # v4+ comes from brokers, authorized by CLUSTER_ACTION alone (as in Kafka)
            if self._txn_id_refused(conn, transactional_id):
                return {tp: _TXN_ID_REFUSED for tp in partitions}
            refused = self.authz.refused_names(conn, _WRITE, _TOPIC, {t for t, _ in partitions})
            if refused:  # Kafka adds none of them: unknown ones say so, the others OPERATION_NOT_ATTEMPTED
                exists = dict(zip(partitions, self.broker.partitions_exist(partitions)))
                return {tp: errors.TopicAuthorizationFailedError.code if tp[0] in refused
                        else errors.UnknownTopicOrPartitionError.code if not exists[tp]
                        else errors.OperationNotAttemptedError.code for tp in partitions}
        call = self.broker.verify_partitions_in_txn if verify_only else self.broker.add_partitions_to_txn
        try:
            codes = await self._coordinated(call, transactional_id, producer_id, epoch, partitions)
        except Exception as exc:  # noqa: BLE001 - every partition answers the failure
            code = error_code(self._failed(conn, exc, "AddPartitionsToTxn"))
            codes = {tp: code for tp in partitions}
        if version < 2:  # PRODUCER_FENCED is v2+ (KIP-588): older clients read INVALID_PRODUCER_EPOCH
            fenced, epoch_code = errors.ProducerFencedError.code, errors.InvalidProducerEpochError.code
            codes = {tp: epoch_code if c == fenced else c for tp, c in codes.items()}
        return codes

    # -- AddOffsetsToTxn, EndTxn ----------------------------------------------------------

    async def add_offsets_to_txn(self, conn: Connection, req: AddOffsetsToTxnRequest, version: int,
                                 slot: RequestSlot) -> AddOffsetsToTxnResponse:
        try:
            if self._txn_id_refused(conn, req.transactional_id):
                raise errors.TransactionalIdAuthorizationFailedError(
                    "not authorized to write transactional id %r" % req.transactional_id)
            if self.authz.enabled and not self.authz.allowed(conn, AclOperation.READ, _GROUP, req.group_id):
                raise errors.GroupAuthorizationFailedError("not authorized to read group %r" % req.group_id)
            await self._coordinated(self.broker.add_offsets_to_txn, req.transactional_id, req.producer_id,
                                    req.producer_epoch, req.group_id)
        except Exception as exc:  # noqa: BLE001 - reported as the response's error
            return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=self._txn_code(conn, exc, version,
                                                                                       "AddOffsetsToTxn"))
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=0)

    async def end_txn(self, conn: Connection, req: EndTxnRequest, version: int, slot: RequestSlot) -> EndTxnResponse:
        try:
            if self._txn_id_refused(conn, req.transactional_id):
                raise errors.TransactionalIdAuthorizationFailedError(
                    "not authorized to write transactional id %r" % req.transactional_id)
            await self._coordinated(self.broker.end_txn, req.transactional_id, req.producer_id,
                                    req.producer_epoch, req.committed)
        except Exception as exc:  # noqa: BLE001 - reported as the response's error
            return EndTxnResponse(throttle_time_ms=0, error_code=self._txn_code(conn, exc, version, "EndTxn"),
                                  producer_id=-1, producer_epoch=-1)
        return EndTxnResponse(throttle_time_ms=0, error_code=0, producer_id=-1, producer_epoch=-1)

    def _txn_code(self, conn: Connection, exc: BaseException, version: int, what: str) -> int:
        """A coordinator failure's code: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2
        of AddOffsetsToTxn and EndTxn (KIP-588), as Kafka answers older clients."""
        code = error_code(self._failed(conn, exc, what))
        if code == errors.ProducerFencedError.code and version < 2:
            return errors.InvalidProducerEpochError.code
        return code

    # -- WriteTxnMarkers (a coordinator to a partition's leader) -----------------------

    async def write_txn_markers(self, conn: Connection, req: WriteTxnMarkersRequest, version: int,
                                slot: RequestSlot) -> WriteTxnMarkersResponse:
        # The replication wire is loaded only by a broker that takes inter-broker requests.
        from .replication_wire import decode_write_txn_markers, encode_write_txn_markers_response

        markers = decode_write_txn_markers(req)
        try:
            answers = await self._coordinated(self.broker.write_txn_markers, markers)
        except Exception as exc:  # noqa: BLE001 - every partition answers the failure
            code = error_code(self._failed(conn, exc, "WriteTxnMarkers"))
            answers = {m.producer_id: {tp: code for tp in m.partitions} for m in markers}
        return encode_write_txn_markers_response(markers, answers)

    # -- DescribeTransactions, ListTransactions --------------------------------------------

    def describe_transactions(self, conn: Connection, req: DescribeTransactionsRequest, version: int,
                              slot: RequestSlot) -> DescribeTransactionsResponse:
        R = DescribeTransactionsResponse
        ids = list(req.transactional_ids)
        refused = self.authz.refused_names(conn, _DESCRIBE, _TXN_ID, ids)
        found = {d.transactional_id: d for d in
                 self.broker.describe_transactions([t for t in ids if t not in refused])}
        states = []
        for txn_id in ids:
            if txn_id in refused:
                states.append(R.TransactionState(error_code=_TXN_ID_REFUSED, transactional_id=txn_id,
                                                 transaction_state="", transaction_timeout_ms=0,
                                                 transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
                                                 topics=[]))
                continue
            d = found[txn_id]
            by_topic: Dict[str, List[int]] = defaultdict(list)
            for topic, p in d.partitions:
                by_topic[topic].append(p)
            # Kafka leaves out the topics the client may not describe.
            hidden = self.authz.refused_names(conn, _DESCRIBE, _TOPIC, by_topic)
            states.append(R.TransactionState(
                error_code=d.error_code, transactional_id=txn_id, transaction_state=d.state,
                transaction_timeout_ms=d.transaction_timeout_ms, transaction_start_time_ms=d.transaction_start_time_ms,
                producer_id=d.producer_id, producer_epoch=d.producer_epoch,
                topics=[R.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items() if t not in hidden]))
        return R(throttle_time_ms=0, transaction_states=states)

    def list_transactions(self, conn: Connection, req: ListTransactionsRequest, version: int,
                          slot: RequestSlot) -> ListTransactionsResponse:
        R = ListTransactionsResponse
        duration = req.duration_filter if version >= 1 else -1
        try:
            unknown, listed = self.broker.list_transactions(list(req.state_filters), list(req.producer_id_filters),
                                                            duration)
        except Exception as exc:  # noqa: BLE001 - reported as the response's error
            return R(throttle_time_ms=0, error_code=error_code(self._failed(conn, exc, "ListTransactions")),
                     unknown_state_filters=[], transaction_states=[])
        refused = self.authz.refused_names(conn, _DESCRIBE, _TXN_ID, (t.transactional_id for t in listed))
        return R(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=[
            R.TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                               transaction_state=t.state) for t in listed if t.transactional_id not in refused])
