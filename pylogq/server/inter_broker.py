"""How a broker reaches the other brokers of its cluster over the Kafka protocol.

:class:`TcpInterBrokerClient` implements the contract's
:class:`~pylogq.cluster.contract.InterBrokerClient` on a blocking socket: the
controller's sender threads, the follower fetchers and a broker's controlled shutdown
each own one and call it from their own thread. Requests go out at the newest version
the tables know (brokers of one pylogq version understand each other's), as the
typed objects of the contract turned into the wire's message classes
(:mod:`pylogq.protocol.message_data`) by :mod:`.replication_wire`, over the protocol
layer's :class:`~pylogq.protocol.blocking_client.BlockingClient`, which reads the answers
as message classes too; :mod:`.handlers_replication` is the receiving side. A connection
that fails, times out or answers garbage is closed and the call raises
:class:`~pylogq.errors.BrokerNotAvailableError`: the caller retries with a new client.

Importing :mod:`pylogq.server` registers :func:`connect` as the brokers' connector.
"""

from __future__ import annotations

import threading
from typing import Dict, List, Mapping, Sequence, Tuple, Type, TypeVar

from .. import errors
from ..cluster.contract import (
    EpochEndOffset,
    FetchResult,
    LeaderAndIsrRequest,
    ReplicaFetchPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from ..protocol import ApiKey
from ..protocol import message_data as msg
from ..protocol.blocking_client import BlockingClient
from ..protocol.schema import Message
from . import replication_wire as wire

__all__ = ["TcpInterBrokerClient", "connect"]

#: The versions brokers send each other (Kafka 3.9's newest; Fetch by name, before topic ids).
VERSIONS: Dict[int, int] = {ApiKey.LEADER_AND_ISR: 7, ApiKey.UPDATE_METADATA: 8, ApiKey.STOP_REPLICA: 4,
            ApiKey.CONTROLLED_SHUTDOWN: 3, ApiKey.OFFSET_FOR_LEADER_EPOCH: 4, ApiKey.FETCH: 12}
#: How long a request may take beyond its own wait (Kafka's ``replica.socket.timeout.ms``).
SOCKET_TIMEOUT_S = 30.0
#: The largest response accepted (a fetch answers at most replica.fetch.response.max.bytes).
MAX_RESPONSE_BYTES = 1 << 30

_Response = TypeVar("_Response", bound=Message)


class TcpInterBrokerClient:
    """One connection to another broker. Used by one thread at a time (a lock serializes
    calls anyway)."""

    def __init__(self, broker_id: int, host: str, port: int, client_id: str = "pylogq-broker") -> None:
        self.broker_id = broker_id
        self.address = (host, port)
        self.client_id = client_id
        self._lock = threading.Lock()
        self._client = BlockingClient(host, port, client_id, SOCKET_TIMEOUT_S)

    def _call(self, api_key: int, body: Message, response: Type[_Response], wait_ms: int = 0) -> _Response:
        """Send ``body`` and read its answer, of class ``response``."""
        version = VERSIONS[api_key]
        with self._lock:
            frame, correlation_id = self._client.encode(api_key, version, body)
            try:
                self._client.connect()
            except OSError as exc:
                raise errors.BrokerNotAvailableError("cannot connect to broker %d at %s:%d: %s"
                                                     % ((self.broker_id,) + self.address + (exc,))) from None
            try:
                answer = self._client.exchange(api_key, version, frame, correlation_id,
                                               SOCKET_TIMEOUT_S + wait_ms / 1000.0, MAX_RESPONSE_BYTES, typed=True)
            except (OSError, errors.ProtocolError, ValueError) as exc:
                self._client.close()
                raise errors.BrokerNotAvailableError("broker %d at %s:%d: %s"
                                                     % ((self.broker_id,) + self.address + (exc,))) from None
        assert isinstance(answer, response)  # the response table of api_key reads its class
        return answer

    # -- the controller's requests ------------------------------------------------------

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[Tuple[str, int], int]]:
        version = VERSIONS[ApiKey.LEADER_AND_ISR]
        answer = self._call(ApiKey.LEADER_AND_ISR, wire.encode_leader_and_isr(request, version),
                            msg.LeaderAndIsrResponse)
        return wire.decode_leader_and_isr_response(answer, request.topic_ids, version)

    def update_metadata(self, request: UpdateMetadataRequest) -> int:
        answer = self._call(ApiKey.UPDATE_METADATA,
                            wire.encode_update_metadata(request, VERSIONS[ApiKey.UPDATE_METADATA]),
                            msg.UpdateMetadataResponse)
        return wire.decode_update_metadata_response(answer)

    def stop_replica(self, request: StopReplicaRequest) -> Tuple[int, Dict[Tuple[str, int], int]]:
        answer = self._call(ApiKey.STOP_REPLICA, wire.encode_stop_replica(request, VERSIONS[ApiKey.STOP_REPLICA]),
                            msg.StopReplicaResponse)
        return wire.decode_stop_replica_response(answer)

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[Tuple[str, int]]]:
        answer = self._call(ApiKey.CONTROLLED_SHUTDOWN, wire.encode_controlled_shutdown(broker_id, broker_epoch),
                            msg.ControlledShutdownResponse, wait_ms=int(SOCKET_TIMEOUT_S * 1000))
        return wire.decode_controlled_shutdown_response(answer)

    # -- a follower's requests ----------------------------------------------------------

    def replica_fetch(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                      max_wait_ms: int, min_bytes: int, max_bytes: int) -> Dict[Tuple[str, int], FetchResult]:
        fetch = wire.ReplicaFetch(replica_id, broker_epoch, list(partitions), max_wait_ms, min_bytes, max_bytes)
        answer = self._call(ApiKey.FETCH, wire.encode_replica_fetch(fetch, VERSIONS[ApiKey.FETCH]), msg.FetchResponse,
                            wait_ms=max_wait_ms)
        return wire.decode_replica_fetch_response(answer)

    def offsets_for_leader_epoch(self, replica_id: int, partitions: Mapping[Tuple[str, int], Tuple[int, int]]
                                 ) -> Dict[Tuple[str, int], EpochEndOffset]:
        answer = self._call(ApiKey.OFFSET_FOR_LEADER_EPOCH, wire.encode_offset_for_leader_epoch(replica_id, partitions),
                            msg.OffsetForLeaderEpochResponse)
        return wire.decode_offset_for_leader_epoch_response(answer)

    # -- lifecycle ----------------------------------------------------------------------

    def abort(self) -> None:
        """End the call in flight (its blocked read fails at once) without waiting for it."""
        self._client.abort()

    def close(self) -> None:
        with self._lock:
            self._client.close()


def connect(broker_id: int, host: str, port: int) -> TcpInterBrokerClient:
    """The brokers' connector (registered with the contract when :mod:`pylogq.server` is imported)."""
    return TcpInterBrokerClient(broker_id, host, port)
