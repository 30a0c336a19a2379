"""The seam between the clients and a broker: one contract, in-process or over TCP.

``Producer``, ``Consumer`` and ``AdminClient`` talk to a broker only through a
:class:`Transport`: the contract's :class:`~pylogq.cluster.contract.BrokerApi`
plus ``close()``. A :class:`pylogq.Broker` in this process hands out its own
(``broker.transport()``, :class:`pylogq.cluster.broker.in_process.InProcessTransport`:
direct calls, no sockets, no encoding); :class:`~pylogq.client.tcp.TcpTransport`
speaks the Kafka protocol to ``pylogq-broker`` or any Kafka broker. Results and
errors are the contract's: per-partition error codes where the Kafka protocol has
them, exceptions from pylogq.errors otherwise. This module imports neither.

A client that keeps metrics hands ``connect()`` its
:class:`~pylogq.client.metrics.NetworkSensors`: the TCP transport's connections
record every request and response on the wire; an in-process transport is
wrapped so that each call counts as a request, timed around the call.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, Union, cast

from ..cluster.acl import AclBinding, AclBindingFilter
from ..cluster.contract import (
    BrokerApi,
    PartitionOutcome,
    PartitionReassignment,
    ProduceResult,
    ProducerDescription,
    TransactionDescription,
    TransactionListing,
    TxnMarker,
    TxnOffset,
)
from ..errors import ConfigError
from .metrics import NetworkSensors

__all__ = ["LocalBroker", "TCP_OPTIONS", "Transport", "connect"]


class Transport(BrokerApi, Protocol):
    """What a client needs from a broker: the contract's calls, the controller's
    reassignment and election calls, a transactional producer's and the transaction
    administrator's calls, and ``close()``."""

    def init_producer_id(self, transactional_id: Optional[str] = None, transaction_timeout_ms: int = 60000,
                         producer_id: int = -1, producer_epoch: int = -1) -> Tuple[int, int]:
        """InitProducerId: -> (producer id, epoch). Without ``transactional_id`` any broker
        gives an idempotent producer a new id; with one, the id's transaction coordinator
        gives its id and a new epoch (``producer_id`` and ``producer_epoch``: the current
        ones, to bump the epoch, KIP-360). Errors raise their pylogq.errors class."""

    def produce(self, topic: str, partition: int, records: Union[bytes, bytearray, memoryview], acks: int,
                transactional_id: Optional[str] = None) -> ProduceResult:
        """Produce, carrying a transactional producer's ``transactional_id``."""

    # The transaction coordinator's calls (KIP-98). Each goes to the coordinator of the
    # transactional id (the group's, for TxnOffsetCommit); NOT_COORDINATOR and
    # COORDINATOR_NOT_AVAILABLE make the transport look it up again before it raises or
    # answers them. Errors raise their pylogq.errors class, except the per-partition codes.

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Sequence[Tuple[str, int]]) -> Dict[Tuple[str, int], int]:
        """AddPartitionsToTxn: -> each partition's error code."""

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           group_id: str) -> None:
        """AddOffsetsToTxn: the group's offsets partition joins the transaction."""

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """EndTxn: commit or abort the ongoing transaction."""

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                          generation_id: int, member_id: str, group_instance_id: Optional[str],
                          offsets: Mapping[Tuple[str, int], TxnOffset]) -> Dict[Tuple[str, int], int]:
        """TxnOffsetCommit, to the group's coordinator: -> each partition's error code."""

    def describe_producers(self, topic: str, partition: int, broker_id: Optional[int] = None
                           ) -> List[ProducerDescription]:
        """DescribeProducers on the partition's leader, or on replica ``broker_id`` when given
        (NotLeaderOrFollowerError when that broker holds no replica of it)."""

    def list_transactions(self, states: Sequence[str], producer_ids: Sequence[int], duration_ms: int
                          ) -> Dict[int, List[TransactionListing]]:
        """ListTransactions on every broker (each coordinates the transactional ids of its
        ``__transaction_state`` partitions): -> the listings by broker id. Filters as Kafka's:
        any of ``states``, any of ``producer_ids`` (empty: no filter), running for at least
        ``duration_ms`` (-1: any). A broker's refusal raises."""

    def describe_transactions(self, transactional_ids: Sequence[str]
                              ) -> Dict[str, Tuple[int, TransactionDescription]]:
        """DescribeTransactions, each id asked of its coordinator (FindCoordinator, key type 1):
        -> per id (its coordinator's broker id, or -1 when none was found; its description,
        whose error code says why it has none)."""

    def write_txn_markers(self, markers: Sequence[TxnMarker]) -> Dict[int, Dict[Tuple[str, int], int]]:
        """WriteTxnMarkers to the leaders of the markers' partitions, as a transaction
        coordinator writes them (an administrator aborting a hanging transaction, here):
        -> each marker's (by producer id) error code per partition."""

    def alter_partition_reassignments(self, targets: Mapping[Tuple[str, int], Optional[Sequence[int]]],
                                      timeout_ms: int) -> Dict[Tuple[str, int], PartitionOutcome]:
        """AlterPartitionReassignments, carried out by the controller (a target of None cancels
        the partition's reassignment under way): -> each partition's (error code, message).

        A refusal of the whole request raises; so does NotControllerError when no broker
        answered as the controller within ``timeout_ms``.
        """

    def list_partition_reassignments(self, partitions: Optional[Sequence[Tuple[str, int]]],
                                     timeout_ms: int) -> Dict[Tuple[str, int], PartitionReassignment]:
        """ListPartitionReassignments, answered by the controller: the reassignments under way
        (of ``partitions`` only, when given). Errors as :meth:`alter_partition_reassignments`."""

    def elect_leaders(self, election_type: int, partitions: Optional[Sequence[Tuple[str, int]]],
                      timeout_ms: int) -> Dict[Tuple[str, int], PartitionOutcome]:
        """ElectLeaders (0 preferred, 1 unclean), held by the controller: -> each partition's
        (error code, message); with ``partitions`` None, every partition that needed an
        election. Errors as :meth:`alter_partition_reassignments`."""

    def describe_acls(self, binding_filter: AclBindingFilter) -> List[AclBinding]:
        """DescribeAcls: the ACL bindings the filter matches (SecurityDisabledError without an authorizer)."""

    def create_acls(self, bindings: Sequence[AclBinding]) -> List[Tuple[int, Optional[str]]]:
        """CreateAcls: -> (error code, message) per binding."""

    def delete_acls(self, filters: Sequence[AclBindingFilter]
                    ) -> List[Tuple[int, Optional[str], List[Tuple[AclBinding, int, Optional[str]]]]]:
        """DeleteAcls: -> per filter (error code, message, [(binding deleted, its code, message)])."""

    def close(self) -> None:
        """Release the transport's resources (the broker itself stays up)."""


class LocalBroker(Protocol):
    """A broker in this process (:class:`pylogq.Broker`): it hands out its own transport."""

    def transport(self) -> Transport: ...


#: The keyword arguments of the clients that configure a TCP transport, with their defaults.
TCP_OPTIONS: Dict[str, Any] = {
    "client_id": "pylogq",
    "request_timeout_ms": 30000,
    "security_protocol": "PLAINTEXT",
    "sasl_mechanism": None,
    "sasl_plain_username": None,
    "sasl_plain_password": None,
    "ssl_context": None,
    "ssl_cafile": None,
    "ssl_certfile": None,
    "ssl_keyfile": None,
    "ssl_password": None,
    "ssl_check_hostname": True,
}


def connect(broker: Union[LocalBroker, Transport, None] = None, bootstrap_servers: Union[str, Sequence[str], None] = None,
            metrics: Optional[NetworkSensors] = None, client_rack: Optional[str] = None,
            metadata_max_age_ms: int = 300000, **options: Any) -> Transport:
    """The transport for a client's ``broker=`` or ``bootstrap_servers=`` argument.

    ``options`` (the keys of :data:`TCP_OPTIONS`) configure the TCP transport;
    an in-process broker needs none and ignores them. ``metrics``: the
    client's request sensors, which the transport records into. A consumer's
    ``client_rack`` and ``metadata_max_age_ms`` say where its fetches may go
    over TCP (KIP-392: :class:`~pylogq.client.tcp.TcpTransport`); an in-process
    broker is the only replica such a client reaches, so they do nothing there.
    """
    if (broker is None) == (bootstrap_servers is None):
        raise ConfigError("give exactly one of broker= (a pylogq.Broker in this process) or bootstrap_servers=")
    unknown = sorted(set(options) - set(TCP_OPTIONS))
    if unknown:
        raise ConfigError("unknown transport option%s: %s" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)))
    if broker is not None:
        make = getattr(broker, "transport", None)
        if callable(make):
            transport: Transport = make()
        else:
            transport = cast(Transport, broker)  # already a transport (a test's wrapper around one, say)
        if metrics is None or not metrics.metrics.enabled:
            return transport
        return cast(Transport, _MeteredTransport(transport, metrics))
    from .tcp import TcpTransport

    assert bootstrap_servers is not None
    return TcpTransport(bootstrap_servers, metrics=metrics, client_rack=client_rack,
                        metadata_max_age_ms=metadata_max_age_ms,
                        **{**TCP_OPTIONS, **{k: v for k, v in options.items() if v is not None}})


class _MeteredTransport:
    """An in-process transport whose calls count as the client's requests (``close`` aside).

    Each call is timed from its start to its return (a long-polled fetch or a
    join that waits for its group included, as on the wire) and recorded
    before its result is handed back. The timed wrappers are made once per
    method, on first use.
    """

    def __init__(self, transport: Transport, sensors: NetworkSensors) -> None:
        self._transport = transport
        self._sensors = sensors

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._transport, name)
        if name.startswith("_") or name == "close" or not callable(attr):
            return attr
        call = self._sensors.call

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return attr(*args, **kwargs)
            finally:
                call(started)

        setattr(self, name, timed)
        return timed

    def __repr__(self) -> str:
        return "<metered %r>" % (self._transport,)
