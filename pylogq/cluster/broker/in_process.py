"""The in-process transport: a client's calls on a :class:`pylogq.Broker` in this process.

``Producer``, ``Consumer`` and ``AdminClient`` given ``broker=`` talk to it through
:class:`InProcessTransport`, which implements the contract's
:class:`~pylogq.cluster.contract.BrokerApi` by calling the broker and its group
coordinator directly (no sockets, no encoding). The client layer reaches it through
``Broker.transport()``, so it never imports the broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterable, List, Mapping, NoReturn, Optional, Protocol, Sequence, Tuple, Union

from ...errors import (
    BrokerError,
    BrokerNotAvailableError,
    InvalidRequestError,
    NotControllerError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    SecurityDisabledError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
)
from ..acl import AclBinding, AclBindingFilter, Authorizer
from ..contract import (
    BrokerConfigEntry,
    BrokerNode,
    ClusterDescription,
    ConfigEntries,
    FetchRequest,
    FetchResult,
    FetchResults,
    GroupDescription,
    JoinResult,
    LogDirDescription,
    LogDirsQuery,
    OffsetDeleteResult,
    PartitionOutcome,
    PartitionReassignment,
    ProducerDescription,
    ProduceResult,
    QuotaAlteration,
    QuotaEntity,
    QuotaFilterComponent,
    ScramCredentialDeletion,
    ServedBroker,
    ScramCredentialUpsertion,
    SyncResult,
    TopicDescription,
    TransactionDescription,
    TransactionListing,
    TxnMarker,
    TxnOffset,
    UserScramCredentials,
)

from .config import BrokerConfig

if TYPE_CHECKING:
    from ..coordinator.group.coordinator import GroupCoordinator

__all__ = ["InProcessTransport", "LocalBroker"]


class LocalBroker(ServedBroker, Protocol):
    """What the transport calls on a :class:`pylogq.Broker` in this process, beyond what its
    server calls: the whole config, the coordinator itself, the blocking fetch, the listeners."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def group_coordinator(self) -> "GroupCoordinator": ...

    @property
    def listener_addresses(self) -> List[Tuple[str, int]]: ...

    def fetch(self, requests: Sequence[FetchRequest], max_wait_ms: int = 500, min_bytes: int = 1,
              max_bytes: int = 52428800, isolation_level: str = "read_uncommitted") -> FetchResults: ...

    def describe_cluster(self) -> ClusterDescription: ...


class InProcessTransport:
    """Calls a :class:`pylogq.Broker` in this process. Thread-safe (the broker is)."""

    def __init__(self, broker: LocalBroker) -> None:
        self.broker = broker
        self._coordinator = broker.group_coordinator

    @property
    def coordinator(self) -> "GroupCoordinator":
        """The broker's group coordinator, with ``__consumer_offsets`` created at the first
        group call (as the first FindCoordinator does over the wire)."""
        self.broker.ensure_offsets_topic()
        return self._coordinator

    def partitions_for(self, topic: str, create: bool = False) -> Optional[int]:
        try:
            return self.broker.partitions_for(topic)
        except UnknownTopicOrPartitionError:
            if not create or not self.broker.config.node.auto_create_topics_enable:
                return None
            try:
                self.broker.create_topic(topic)
            except Exception:  # noqa: BLE001 - raced with another creator: it exists now
                pass
            return self.broker.partitions_for(topic)

    def list_topics(self) -> List[str]:
        return self.broker.list_topics()

    def describe_topic(self, name: str) -> TopicDescription:
        return self.broker.describe_topic(name)

    def init_producer_id(self, transactional_id: Optional[str] = None, transaction_timeout_ms: int = 60000,
                         producer_id: int = -1, producer_epoch: int = -1) -> Tuple[int, int]:
        if transactional_id is None:
            return self.broker.init_producer_id()
        self._transaction_coordinator(transactional_id)
        return self.broker.init_producer_id(transactional_id, transaction_timeout_ms, producer_id, producer_epoch)

    def produce(self, topic: str, partition: int, records: Union[bytes, bytearray, memoryview],
                acks: int, transactional_id: Optional[str] = None) -> ProduceResult:
        """``transactional_id`` is the wire's: in process the batches' producer id says it all."""
        return self.broker.produce(topic, partition, records, acks)

    # -- transactions: the broker's transaction coordinator ------------------------------------

    def _transaction_coordinator(self, transactional_id: str) -> None:
        """Check that this broker coordinates ``transactional_id`` (``__transaction_state``
        made on first use, as FindCoordinator does over the wire): a cluster's other brokers
        are out of reach in process, so another coordinator raises NotCoordinatorError."""
        code, node = self.broker.ensure_transaction_state_topic(), -1
        if not code:
            code, node = self.broker.coordinator_for_transaction(transactional_id)
        if code:
            cls = error_for_code(code) or BrokerError
            raise cls("finding the coordinator of transactional id %r" % (transactional_id,))
        if node != self.broker.broker_id:
            raise NotCoordinatorError("broker %d coordinates transactional id %r, not broker %d: give the producer "
                                      "that Broker (or bootstrap_servers)"
                                      % (node, transactional_id, self.broker.broker_id))

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Sequence[Tuple[str, int]]) -> Dict[Tuple[str, int], int]:
        self._transaction_coordinator(transactional_id)
        return self.broker.add_partitions_to_txn(transactional_id, producer_id, producer_epoch, partitions)

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           group_id: str) -> None:
        self._transaction_coordinator(transactional_id)
        self.broker.add_offsets_to_txn(transactional_id, producer_id, producer_epoch, group_id)

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool) -> None:
        self._transaction_coordinator(transactional_id)
        self.broker.end_txn(transactional_id, producer_id, producer_epoch, committed)

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                          generation_id: int, member_id: str, group_instance_id: Optional[str],
                          offsets: Mapping[Tuple[str, int], TxnOffset]) -> Dict[Tuple[str, int], int]:
        self.broker.ensure_offsets_topic()
        return self.broker.txn_offset_commit(transactional_id, group_id, producer_id, producer_epoch,
                                             generation_id, member_id, group_instance_id, offsets)

    def fetch(self, requests: Sequence[FetchRequest], max_wait_ms: int, min_bytes: int, max_bytes: int,
              isolation_level: str) -> Dict[Tuple[str, int], FetchResult]:
        return self.broker.fetch(requests, max_wait_ms, min_bytes, max_bytes, isolation_level)

    def list_offsets(self, topic: str, partition: int, timestamp: int,
                     isolation_level: str = "read_uncommitted") -> Tuple[int, int]:
        return self.broker.list_offsets(topic, partition, timestamp, isolation_level)

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        return self.broker.delete_records(topic, partition, offset)

    def find_coordinator(self, group_id: str) -> BrokerNode:
        """This broker (the coordinator of every group of a single node), as :meth:`describe_cluster` names it."""
        self.broker.ensure_offsets_topic()  # made on first use, as a lookup does
        return self.describe_cluster().brokers[0]

    def join_group(self, group_id: str, member_id: str, client_id: str, session_timeout_ms: int,
                   rebalance_timeout_ms: int, protocol_type: str, protocols: Sequence[Tuple[str, bytes]],
                   group_instance_id: Optional[str] = None, timeout_s: Optional[float] = None,
                   client_host: str = "/127.0.0.1") -> JoinResult:
        return self.coordinator.join_group(group_id, member_id, client_id, session_timeout_ms, rebalance_timeout_ms,
                                           protocol_type, protocols, group_instance_id=group_instance_id,
                                           timeout_s=timeout_s, client_host=client_host or "/127.0.0.1")

    def sync_group(self, group_id: str, generation_id: int, member_id: str,
                   assignments: Optional[Dict[str, bytes]] = None, timeout_s: Optional[float] = None) -> SyncResult:
        return self.coordinator.sync_group(group_id, generation_id, member_id, assignments, timeout_s=timeout_s)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str) -> int:
        return self.coordinator.heartbeat(group_id, generation_id, member_id)

    def leave_group(self, group_id: str, member_id: str) -> int:
        return self.coordinator.leave_group(group_id, member_id)

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       offsets: Mapping[Tuple[str, int], Tuple[int, Optional[str]]]) -> Dict[Tuple[str, int], int]:
        """As OffsetCommit: in a cluster the commit is answered, and becomes visible, once every
        in-sync replica of its ``__consumer_offsets`` partition has it."""
        codes, complete = self.coordinator.commit_offsets_pending(group_id, generation_id, member_id, dict(offsets))
        if not self.broker.clustered or not any(c == 0 for c in codes.values()):
            complete(0)
            return codes
        op = self.broker.group_writes_replicated_async(group_id, True, deliver=complete)
        op.wait()
        code = op.answer()
        return {tp: c or code for tp, c in codes.items()}

    def fetch_offsets(self, group_id: str, partitions: Optional[Iterable[Tuple[str, int]]] = None,
                      require_stable: bool = False) -> Dict[Tuple[str, int], Tuple[int, Optional[str], int]]:
        found: Dict[Tuple[str, int], Tuple[int, Optional[str], int]] = dict(self.coordinator.fetch_offsets(
            group_id, None if partitions is None else list(partitions), require_stable))
        return found

    def list_groups(self) -> List[Tuple[str, str]]:
        return self.coordinator.list_groups()

    def describe_group(self, group_id: str) -> GroupDescription:
        return self.coordinator.describe_group(group_id)

    def delete_groups(self, group_ids: Sequence[str]) -> Dict[str, int]:
        return self.coordinator.delete_groups(list(group_ids))

    def delete_offsets(self, group_id: str, partitions: Sequence[Tuple[str, int]]) -> OffsetDeleteResult:
        self.broker.ensure_offsets_topic()
        return self.broker.delete_offsets(group_id, partitions)

    def describe_producers(self, topic: str, partition: int, broker_id: Optional[int] = None
                           ) -> List[ProducerDescription]:
        """The broker's own replica's producers; ``broker_id``, when given, must be this broker's
        (another broker of its cluster is out of this transport's reach)."""
        if broker_id is not None and broker_id != self.broker.broker_id:
            raise NotLeaderOrFollowerError("broker %d is not in reach of an in-process client of broker %d: give "
                                           "the client bootstrap_servers" % (broker_id, self.broker.broker_id))
        return self.broker.describe_producers(topic, partition)

    # -- transactions, as an administrator sees them ---------------------------------------------

    def list_transactions(self, states: Sequence[str], producer_ids: Sequence[int], duration_ms: int
                          ) -> Dict[int, List[TransactionListing]]:
        """This broker's coordinator's transactional ids (a cluster's other brokers are out of
        reach: give the client bootstrap_servers to list theirs)."""
        _unknown, listings = self.broker.list_transactions(states, producer_ids, duration_ms)
        return {self.broker.broker_id: listings}

    def describe_transactions(self, transactional_ids: Sequence[str]
                              ) -> Dict[str, Tuple[int, TransactionDescription]]:
        """The ids this broker coordinates described by it; another's answers NOT_COORDINATOR
        naming where it is (``__transaction_state`` made on first use, as a lookup does)."""
        self.broker.ensure_transaction_state_topic()
        own = self.broker.broker_id
        out: Dict[str, Tuple[int, TransactionDescription]] = {}
        here: List[str] = []
        for transactional_id in dict.fromkeys(transactional_ids):
            code, coordinator = self.broker.coordinator_for_transaction(transactional_id)
            if code == 0 and coordinator == own:
                here.append(transactional_id)
            else:
                out[transactional_id] = (coordinator if code == 0 else -1, TransactionDescription(
                    transactional_id, code or NotCoordinatorError.code))
        for description in self.broker.describe_transactions(here) if here else ():
            out[description.transactional_id] = (own, description)
        return {t: out[t] for t in dict.fromkeys(transactional_ids) if t in out}

    def write_txn_markers(self, markers: Sequence[TxnMarker]) -> Dict[int, Dict[Tuple[str, int], int]]:
        return self.broker.write_txn_markers(markers)

    def create_topic(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                     config: Optional[Mapping[str, object]],
                     replica_assignment: Optional[Mapping[int, Sequence[int]]] = None) -> TopicDescription:
        return self.broker.create_topic(name, partitions, replication_factor, config,
                                        replica_assignment=replica_assignment)

    def delete_topic(self, name: str) -> None:
        self.broker.delete_topic(name)

    def create_partitions(self, name: str, total: int,
                          replica_assignment: Optional[Sequence[Sequence[int]]] = None) -> TopicDescription:
        return self.broker.create_partitions(name, total, replica_assignment=replica_assignment)

    def describe_configs(self, topic: str) -> ConfigEntries:
        return self.broker.describe_configs(topic)

    def describe_broker_configs(self, broker_id: int) -> Dict[str, BrokerConfigEntry]:
        if broker_id != self.broker.broker_id:
            raise InvalidRequestError("unknown broker %d (this is broker %d)" % (broker_id, self.broker.broker_id))
        return self.broker.broker_configs()

    def alter_configs(self, topic: str, config: Mapping[str, object], incremental: bool) -> None:
        self.broker.alter_configs(topic, config, incremental)

    def alter_broker_configs(self, resource_name: str, ops: Sequence[Tuple[str, str, Optional[str]]],
                             incremental: bool, validate_only: bool = False) -> None:
        self.broker.alter_broker_configs(resource_name, ops, incremental, validate_only)

    def describe_cluster(self) -> ClusterDescription:
        """The broker's cluster as it describes it: a single node itself (at the address of its
        first listener, Kafka's no-node ("", -1) when it serves none), a cluster's broker the
        controller and every live broker its metadata knows."""
        return self.broker.describe_cluster()

    def describe_log_dirs(self, partitions: LogDirsQuery = None) -> Dict[int, List[LogDirDescription]]:
        return {self.broker.broker_id: self.broker.describe_log_dirs(partitions)}

    def alter_replica_log_dirs(self, dirs: Mapping[Tuple[str, int, int], str]) -> Dict[Tuple[str, int, int], int]:
        """This broker's replicas move; one on another broker is out of reach (BROKER_NOT_AVAILABLE)."""
        own = self.broker.alter_replica_log_dirs({(t, p): path for (t, p, b), path in dirs.items()
                                                  if b == self.broker.broker_id})
        return {(t, p, b): own[(t, p)] if b == self.broker.broker_id else BrokerNotAvailableError.code
                for (t, p, b) in dirs}

    def alter_partition_reassignments(self, targets: Mapping[Tuple[str, int], Optional[Sequence[int]]],
                                      timeout_ms: int) -> Dict[Tuple[str, int], PartitionOutcome]:
        """The broker's controller carries them out (a single node takes only targets of itself);
        a broker of a cluster that is not its controller raises NotControllerError naming the one
        that is, as there is no other broker in reach to send them to. ``timeout_ms``: the
        controller's own admin timeout bounds the call instead."""
        outcomes = self.broker.alter_partition_reassignments(
            {tp: None if replicas is None else list(replicas) for tp, replicas in targets.items()})
        if any(code == NotControllerError.code for code, _ in outcomes.values()):
            self._not_the_controller()
        return outcomes

    def list_partition_reassignments(self, partitions: Optional[Sequence[Tuple[str, int]]],
                                     timeout_ms: int) -> Dict[Tuple[str, int], PartitionReassignment]:
        """The reassignments under way, as the broker's controller knows them (a single node
        has none); NotControllerError as :meth:`alter_partition_reassignments`."""
        found = self.broker.list_partition_reassignments(None if partitions is None else list(partitions))
        if found is None:
            self._not_the_controller()
        return found

    def elect_leaders(self, election_type: int, partitions: Optional[Sequence[Tuple[str, int]]],
                      timeout_ms: int) -> Dict[Tuple[str, int], PartitionOutcome]:
        """The broker's controller holds them (a single node leads all its partitions);
        NotControllerError as :meth:`alter_partition_reassignments`."""
        found = self.broker.elect_leaders(election_type, None if partitions is None else list(partitions))
        if found is None:
            self._not_the_controller()
        return found

    def _not_the_controller(self) -> NoReturn:
        view = self.broker.cluster_view()
        other = view[0] if view is not None and view[0] >= 0 and view[0] != self.broker.broker_id else None
        where = "none is active at the moment" if other is None else "broker %d is" % other
        raise NotControllerError("broker %d is not the controller of its cluster (%s): give the client the "
                                 "controller's Broker (Cluster.controller()) or bootstrap_servers"
                                 % (self.broker.broker_id, where))

    def describe_user_scram_credentials(self, users: Optional[Sequence[str]] = None
                                        ) -> List[UserScramCredentials]:
        raise UnsupportedVersionError("SCRAM credentials are administered over the Kafka protocol: "
                                             "give the admin client bootstrap_servers, not broker")

    def alter_user_scram_credentials(self, deletions: Sequence[ScramCredentialDeletion],
                                     upsertions: Sequence[ScramCredentialUpsertion]
                                     ) -> Dict[str, Tuple[int, Optional[str]]]:
        raise UnsupportedVersionError("SCRAM credentials are administered over the Kafka protocol: "
                                             "give the admin client bootstrap_servers, not broker")

    # -- ACLs: the broker's authorizer itself (an embedded caller owns the broker) -------------

    def _authorizer(self) -> Authorizer:
        authorizer = self.broker.authorizer
        if authorizer is None:
            raise SecurityDisabledError("No Authorizer is configured on the broker")
        return authorizer

    def describe_acls(self, binding_filter: AclBindingFilter) -> List[AclBinding]:
        return self._authorizer().acls(binding_filter)

    def create_acls(self, bindings: Sequence[AclBinding]) -> List[Tuple[int, Optional[str]]]:
        return [(0, None) if e is None else (int(e.code), str(e)) for e in self._authorizer().create_acls(bindings)]

    def delete_acls(self, filters: Sequence[AclBindingFilter]
                    ) -> List[Tuple[int, Optional[str], List[Tuple[AclBinding, int, Optional[str]]]]]:
        return [(0, None, [(b, 0, None) if e is None else (b, int(e.code), str(e)) for b, e in found])
                for found in self._authorizer().delete_acls(filters)]

    # -- client quotas ---------------------------------------------------------------------------

    def describe_client_quotas(self, components: Sequence[QuotaFilterComponent], strict: bool = False
                               ) -> Dict[QuotaEntity, Dict[str, float]]:
        return self.broker.describe_client_quotas(components, strict)

    def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], validate_only: bool = False
                            ) -> Dict[QuotaEntity, Tuple[int, Optional[str]]]:
        """Written to the broker's store (a cluster's metadata store: every broker is told)."""
        return self.broker.alter_client_quotas(alterations, validate_only)

    def close(self) -> None:
        """Nothing to release: the broker stays up."""
