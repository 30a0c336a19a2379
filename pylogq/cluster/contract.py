"""The broker contract: the types and calls that the server and both client transports share.

``pylogq.server`` answers the Kafka protocol by calling a broker through
:class:`BrokerApi`; ``pylogq.client`` talks to a broker through a transport with the
same calls (:class:`pylogq.client.transport.Transport`), in-process or over TCP.
Both depend on this module only, never on the broker, the storage engine or the
group coordinator, so a TCP-only client loads none of them.

Results carry Kafka's error codes where the protocol has per-entry codes (a fetch's
partitions, a join's answer); other failures raise the errors of
:mod:`pylogq.errors`.
"""

from __future__ import annotations

from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Type,
    Union,
)

from ..config import Config, LogConfig
from ..metrics import MetricsRegistry
from ..records.memory_records import AppendResult
from .acl import Authorizer
from .delayed import DelayedCall

__all__ = [
    "BrokerApi",
    "BrokerConfigEntry",
    "BrokerConfigView",
    "BrokerEndpoint",
    "BrokerNode",
    "BrokerRegistration",
    "EpochEndOffset",
    "InterBrokerClient",
    "InterBrokerConnector",
    "LEADER_DURING_DELETE",
    "LeaderAndIsrPartition",
    "LeaderAndIsrRequest",
    "ReplicaFetchPartition",
    "ScramCredentialDeletion",
    "ScramCredentialUpsertion",
    "UserScramCredentials",
    "QuotaAlteration",
    "QuotaEntity",
    "QuotaFilterComponent",
    "StopReplicaRequest",
    "UpdateMetadataPartition",
    "UpdateMetadataRequest",
    "inter_broker_connector",
    "register_inter_broker_connector",
    "ClusterDescription",
    "CommittedOffset",
    "LogDirDescription",
    "LogDirsQuery",
    "ReplicaInfo",
    "FetchResults",
    "GroupCoordinatorApi",
    "ServedBroker",
    "ConfigEntries",
    "ConfigValue",
    "FetchRequest",
    "FetchResult",
    "GroupDescription",
    "JoinResult",
    "Listener",
    "ListedGroup",
    "PartitionReassignment",
    "PartitionOutcome",
    "ListenerFactory",
    "MemberDescription",
    "OffsetDeleteResult",
    "ProduceResult",
    "ProducerDescription",
    "RecordBytes",
    "RecordsView",
    "SyncResult",
    "TopicDescription",
    "TopicPartition",
    "TopicPartitionInfo",
    "TransactionDescription",
    "TransactionListing",
    "TxnMarker",
    "TxnOffset",
    "listener_factory",
    "listener_settings",
    "register_listener_factory",
]

NO_GENERATION = -1


class TopicPartition(NamedTuple):
    """A partition of a topic (kafka-python's ``TopicPartition``); equal to the plain tuple."""

    topic: str
    partition: int


class RecordsView(Protocol):
    """Record batches as a fetch returns them: a file region, or bytes read off the wire."""

    def __len__(self) -> int: ...

    def read(self) -> bytes: ...


class RecordBytes:
    """A :class:`RecordsView` of record batches held in memory: read off the wire (a Fetch
    response, a follower's fetch from another broker) or down-converted for an old client.
    Immutable."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def read(self) -> bytes:
        return self.data

    def __repr__(self) -> str:
        return "RecordBytes(%d bytes)" % len(self.data)


#: One partition of a Fetch: (topic, partition, fetch offset, partition max bytes).
FetchRequest = Tuple[str, int, int, int]

#: A Fetch's answer per (topic, partition).
FetchResults = Dict[Tuple[str, int], "FetchResult"]

#: A setting's parsed value (lists as tuples; None for an unset optional key).
ConfigValue = Union[str, int, float, bool, Tuple[str, ...], None]

#: DescribeConfigs for a topic: dotted key -> (value, is_default).
ConfigEntries = Dict[str, Tuple[Optional[str], bool]]


class BrokerConfigEntry(NamedTuple):
    """One of a broker's settings as DescribeConfigs tells it.

    ``source`` is Kafka's ConfigSource name: ``DYNAMIC_BROKER_CONFIG`` and
    ``DYNAMIC_DEFAULT_BROKER_CONFIG`` for a value set by AlterConfigs on this broker or on
    the cluster-wide default, ``STATIC_BROKER_CONFIG`` for a key the broker was given (its
    properties file, ``--override``, ``pylogq.Broker`` keywords), ``DEFAULT_CONFIG`` for one
    left at its default. ``synonyms``: (source, value) of every source that has a value,
    the winning one first (empty when not known); ``read_only`` is False for a key Kafka
    changes while the broker runs. A sensitive key (a password, a JAAS
    config) has ``value`` and ``default`` None; an unset optional key (``advertised.listeners``)
    has ``value`` None and is not sensitive.
    """

    value: Optional[str]
    source: str
    sensitive: bool
    default: Optional[str]
    synonyms: Tuple[Tuple[str, Optional[str]], ...] = ()
    #: False for a key Kafka changes while the broker runs (AlterConfigs on a BROKER resource).
    read_only: bool = True


#: Kafka's ProduceResponse for one partition: the append's own result, from the log to the
#: wire (``error_code``, ``base_offset``, ``log_append_time``, ``log_start_offset``,
#: ``record_count``, then what the log learned: last offset, batches, max timestamp, ...).
ProduceResult = AppendResult


class FetchResult(NamedTuple):
    """Kafka's FetchResponse for one partition; ``records`` is None on error.

    ``preferred_read_replica`` (Fetch v11+, KIP-392) is the broker the consumer should fetch
    this partition from instead, as the leader's ``replica.selector.class`` chose for the
    consumer's rack; -1 for none (the records, if any, are here).

    ``last_stable_offset`` is the partition's last stable offset when the read knew it
    (None: the high watermark, a partition without transactions answering it). A
    read_committed read gives ``aborted_transactions``: (producer id, first offset) of each
    aborted transaction overlapping the records, empty when none; None for any other read.
    """

    error_code: int
    high_watermark: int
    log_start_offset: int
    records: Optional[RecordsView]
    preferred_read_replica: int = -1
    last_stable_offset: Optional[int] = None
    aborted_transactions: Optional[List[Tuple[int, int]]] = None


class TopicPartitionInfo(NamedTuple):
    """One partition in Metadata: its leader (-1: none), replicas, in-sync replicas, the
    replicas on brokers that are down, and the leader's epoch (broker ids)."""

    partition: int
    leader: int
    replicas: List[int]
    isr: List[int]
    offline_replicas: List[int] = []
    leader_epoch: int = 0


class TopicDescription(NamedTuple):
    """A topic as Metadata and CreateTopics describe it."""

    name: str
    partitions: List[TopicPartitionInfo]
    config: Dict[str, str]  # the topic's overrides, dotted keys
    internal: bool
    # Kafka's base64url topic id; when none is known, the zero id (Kafka's Uuid.ZERO_UUID,
    # storage.partition_metadata.ZERO_TOPIC_ID, not imported: TCP clients load no storage).
    topic_id: str = "AAAAAAAAAAAAAAAAAAAAAA"


class JoinResult(NamedTuple):
    """The JoinGroup response; ``members`` is filled for the leader only.

    ``protocol_type`` is the group's (None on an error); ``skip_assignment`` tells a
    static leader that rejoined a Stable group that it must not compute a new
    assignment (JoinGroup v9, KIP-814).
    """

    error_code: int
    generation_id: int = NO_GENERATION
    protocol_name: Optional[str] = None
    leader_id: str = ""
    member_id: str = ""
    members: List[Tuple[str, Optional[str], bytes]] = []
    protocol_type: Optional[str] = None
    skip_assignment: bool = False


class SyncResult(NamedTuple):
    """The SyncGroup response: this member's assignment."""

    error_code: int
    assignment: bytes = b""


class MemberDescription(NamedTuple):
    """One member as DescribeGroups reports it (metadata and assignment only when Stable)."""

    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes
    group_instance_id: Optional[str] = None


class GroupDescription(NamedTuple):
    """The DescribeGroups answer for one group; an unknown group is reported as Dead."""

    error: int
    state: str
    protocol_type: str
    protocol: str
    members: List[MemberDescription]


class ProducerDescription(NamedTuple):
    """One active producer of a partition, as DescribeProducers reports it: the coordinator
    epoch of its last transaction marker (-1 before any) and the first offset of its open
    transaction (-1 without one)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1


class TxnMarker(NamedTuple):
    """One marker of a WriteTxnMarkers request: end ``producer_id``'s transaction (COMMIT when
    ``committed``, else ABORT) on each partition, written by a transaction coordinator in
    ``coordinator_epoch`` (the leader epoch of its ``__transaction_state`` partition)."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: Tuple[Tuple[str, int], ...]


class TxnOffset(NamedTuple):
    """One partition's offset in a TxnOffsetCommit: committed with the transaction."""

    offset: int
    leader_epoch: int = -1
    metadata: Optional[str] = None


class TransactionDescription(NamedTuple):
    """One transactional id as DescribeTransactions reports it (``error_code`` non-zero: the
    rest is unset). ``state`` is Kafka's name (Empty, Ongoing, PrepareCommit, ...), the
    start time -1 with no transaction under way."""

    transactional_id: str
    error_code: int
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    partitions: Tuple[Tuple[str, int], ...] = ()


class TransactionListing(NamedTuple):
    """One transactional id as ListTransactions reports it."""

    transactional_id: str
    producer_id: int
    state: str


class PartitionReassignment(NamedTuple):
    """A reassignment under way, as ListPartitionReassignments reports it: the partition's
    replicas now (the target's and the original's together), those being added and those
    being removed."""

    replicas: List[int]
    adding: List[int]
    removing: List[int]


#: A partition's answer to a cluster operation (a reassignment, an election): (error code, message or None).
PartitionOutcome = Tuple[int, Optional[str]]


class ListedGroup(NamedTuple):
    """One group as ListGroups reports it; every pylogq group is a classic group."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


class CommittedOffset(NamedTuple):
    """A committed offset as OffsetFetch reports it (offset -1, epoch -1 and "" when none)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    error_code: int = 0


#: OffsetDelete's answer: the group's error code, and each partition's (empty with a group error).
OffsetDeleteResult = Tuple[int, Dict[Tuple[str, int], int]]


class UserScramCredentials(NamedTuple):
    """DescribeUserScramCredentials' answer for one user: (mechanism name, iterations) per credential."""

    user: str
    error_code: int
    error_message: Optional[str]
    credentials: List[Tuple[str, int]]


class ScramCredentialDeletion(NamedTuple):
    """Remove ``user``'s credential for ``mechanism`` (Kafka's type byte: 1 SCRAM-SHA-256, 2 -512)."""

    user: str
    mechanism: int


class ScramCredentialUpsertion(NamedTuple):
    """Set ``user``'s credential for ``mechanism``; the client salts the password (RFC 5802's Hi)."""

    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


#: A client quota entity (Kafka's ClientQuotaEntity): its (entity type, name) pairs sorted by
#: type; the types are ``user``, ``client-id`` and ``ip``, and a name of None is the type's
#: default (``<default>`` in ZooKeeper and in kafka-configs).
QuotaEntity = Tuple[Tuple[str, Optional[str]], ...]


class QuotaFilterComponent(NamedTuple):
    """One component of a DescribeClientQuotas filter: the entities of ``entity_type`` whose name
    is ``match`` (``match_type`` 0), the type's default (1), or any name (2: ``match`` None)."""

    entity_type: str
    match_type: int
    match: Optional[str] = None


class QuotaAlteration(NamedTuple):
    """AlterClientQuotas' change of one entity: (key, value) to set, (key, None) to remove."""

    entity: QuotaEntity
    ops: Sequence[Tuple[str, Optional[float]]]


class BrokerNode(NamedTuple):
    """A broker as DescribeCluster describes it: its advertised address and rack (None: no rack)."""

    broker_id: int
    host: str
    port: int
    rack: Optional[str] = None


class ClusterDescription(NamedTuple):
    """The DescribeCluster answer: the cluster id, the controller and the brokers."""

    cluster_id: str
    controller_id: int
    brokers: List[BrokerNode]


class ReplicaInfo(NamedTuple):
    """One partition's log in a log directory (Kafka's ``DescribeLogDirsResponse.ReplicaInfo``)."""

    topic: str
    partition: int
    size: int  # bytes of the log's segments
    offset_lag: int  # a log's end offset - its high watermark (0 with one replica); a copy's: its lag behind the log
    is_future: bool  # the copy of a replica being moved here by AlterReplicaLogDirs


class LogDirDescription(NamedTuple):
    """One log directory as DescribeLogDirs describes it; the volume's sizes are -1 when unknown."""

    path: str
    error_code: int
    replicas: List[ReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1

    def as_result(self) -> Dict[str, Any]:
        """The directory as a DescribeLogDirs result entry: its replicas grouped by topic, in order."""
        topics: Dict[str, List[Dict[str, Any]]] = {}
        for r in self.replicas:
            topics.setdefault(r.topic, []).append(
                {"partition_index": r.partition, "partition_size": r.size, "offset_lag": r.offset_lag,
                 "is_future_key": r.is_future})
        return {"error_code": self.error_code, "log_dir": self.path,
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
                "total_bytes": self.total_bytes, "usable_bytes": self.usable_bytes}


#: Which partitions DescribeLogDirs describes: topic -> partition indexes (None: every partition).
LogDirsQuery = Optional[Mapping[str, Sequence[int]]]


# -- replication: what brokers and the controller say to each other ----------------------------


class BrokerEndpoint(NamedTuple):
    """One advertised listener of a broker: ``PLAINTEXT://host:port``."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        return "%s://%s:%d" % (self.listener, "[%s]" % self.host if ":" in self.host else self.host, self.port)


class BrokerRegistration(NamedTuple):
    """A live broker: its id, advertised endpoints and rack (``/brokers/ids/<id>``).

    ``epoch`` is the registration's creation zxid (Kafka's broker epoch, KIP-380): it
    grows each time the broker registers, so a request stamped with an older epoch
    comes from an earlier life of the broker. -1 when not known.
    """

    broker_id: int
    endpoints: Tuple[BrokerEndpoint, ...]
    rack: Optional[str] = None
    epoch: int = -1

    def endpoint(self, listener: Optional[str] = None) -> Optional[BrokerEndpoint]:
        """The endpoint of ``listener``, or the first one when ``listener`` is None."""
        for e in self.endpoints:
            if listener is None or e.listener == listener:
                return e
        return None


#: The leader a LeaderAndIsr or UpdateMetadata request gives a partition of a topic being
#: deleted (Kafka's LeaderAndIsr.LeaderDuringDelete).
LEADER_DURING_DELETE = -2


class LeaderAndIsrPartition(NamedTuple):
    """One partition of a LeaderAndIsr or UpdateMetadata request: who leads it, in which
    epoch, with which in-sync replicas. ``partition_epoch`` is the version of the
    partition's state in the metadata store (Kafka's zkVersion)."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: List[int]
    partition_epoch: int
    replicas: List[int]
    offline_replicas: List[int] = []
    is_new: bool = False


class LeaderAndIsrRequest(NamedTuple):
    """The controller telling a broker which of its replicas lead and which follow."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: List[LeaderAndIsrPartition]
    topic_ids: Dict[str, str]
    live_leaders: List[BrokerRegistration]


#: An UpdateMetadata partition has the same fields (``offline_replicas`` filled).
UpdateMetadataPartition = LeaderAndIsrPartition


class UpdateMetadataRequest(NamedTuple):
    """The controller telling every broker the cluster's state: live brokers and partitions."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: List[UpdateMetadataPartition]
    live_brokers: List[BrokerRegistration]
    topic_ids: Dict[str, str]


class StopReplicaRequest(NamedTuple):
    """The controller telling a broker to stop replicas: (topic, partition) -> (leader epoch,
    delete). ``delete`` removes the replica's log too (topic deletion, reassignment)."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: Dict[Tuple[str, int], Tuple[int, bool]]


class ReplicaFetchPartition(NamedTuple):
    """One partition of a follower's Fetch: where its log ends and the leader epoch it knows."""

    topic: str
    partition: int
    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int


class EpochEndOffset(NamedTuple):
    """OffsetForLeaderEpoch's answer for one partition: the largest epoch at or below the one
    asked about, and where it ends in the leader's log (-1, -1 when undefined)."""

    error_code: int
    leader_epoch: int
    end_offset: int


class InterBrokerClient(Protocol):
    """The calls one broker makes on another: the controller's requests, a follower's fetches,
    a broker's controlled shutdown. In this process (:class:`pylogq.Cluster`) or over the
    Kafka protocol (``pylogq.server`` registers that connector). Calls raise
    :class:`~pylogq.errors.BrokerNotAvailableError` when the other broker cannot be reached;
    one client is used by one thread at a time."""

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[Tuple[str, int], int]]: ...

    def update_metadata(self, request: UpdateMetadataRequest) -> int: ...

    def stop_replica(self, request: StopReplicaRequest) -> Tuple[int, Dict[Tuple[str, int], int]]: ...

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[Tuple[str, int]]]: ...

    def replica_fetch(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                      max_wait_ms: int, min_bytes: int, max_bytes: int) -> Dict[Tuple[str, int], "FetchResult"]: ...

    def offsets_for_leader_epoch(self, replica_id: int, partitions: Mapping[Tuple[str, int], Tuple[int, int]]
                                 ) -> Dict[Tuple[str, int], EpochEndOffset]: ...

    def write_txn_markers(self, markers: Sequence[TxnMarker]) -> Dict[int, Dict[Tuple[str, int], int]]:
        """A transaction coordinator's WriteTxnMarkers to a partitions' leader; -> each
        marker's (by producer id) error code per partition."""
        ...

    def abort(self) -> None:
        """From another thread: end the call in flight, if any, at once (it raises
        BrokerNotAvailableError), as a broker that stopped answering would otherwise hold its
        caller until the request times out. The client connects again at its next call."""
        ...

    def close(self) -> None: ...


#: Opens a client to another broker: (its broker id, host, port) -> a client.
InterBrokerConnector = Callable[[int, str, int], InterBrokerClient]
#: The connector of a broker whose inter-broker listener is the one named, from the broker's
#: listener settings (that listener's security protocol, its SSL and SASL settings).
SecuredConnector = Callable[[Config, str], InterBrokerConnector]

_inter_broker: List[Tuple[InterBrokerConnector, Optional[SecuredConnector]]] = []


def register_inter_broker_connector(connector: InterBrokerConnector, secured: Optional[SecuredConnector] = None) -> None:
    """Called by :mod:`pylogq.server` when imported: how a broker reaches the others over the
    Kafka protocol (the broker sits below the server and never imports it); ``secured`` makes
    the connector of a broker's own inter-broker listener (TLS, SASL)."""
    _inter_broker[:] = [(connector, secured)]


def inter_broker_connector(listener_settings: Optional[Config] = None,
                           listener: str = "PLAINTEXT") -> Optional[InterBrokerConnector]:
    """The registered connector (for ``listener``, with ``listener_settings``: the broker's
    listener configuration), or None when :mod:`pylogq.server` was not imported. Raises
    ConfigError when the listener's settings cannot make one."""
    if not _inter_broker:
        return None
    plain, secured = _inter_broker[0]
    if listener_settings is not None and secured is not None:
        return secured(listener_settings, listener)
    return plain


class BrokerApi(Protocol):
    """What a transport may call: Kafka's client-facing APIs, by name.

    :class:`pylogq.Broker` implements it in this process (its group calls go to
    its group coordinator); :class:`pylogq.client.tcp.TcpTransport` implements it
    over the Kafka protocol.
    """

    # metadata
    def partitions_for(self, topic: str, create: bool = False) -> Optional[int]: ...

    def list_topics(self) -> List[str]: ...

    def describe_topic(self, name: str) -> TopicDescription: ...

    # produce / consume
    def init_producer_id(self) -> Tuple[int, int]: ...

    def produce(self, topic: str, partition: int, records: Union[bytes, bytearray, memoryview],
                acks: int) -> ProduceResult: ...

    def fetch(self, requests: Sequence[FetchRequest], max_wait_ms: int, min_bytes: int, max_bytes: int,
              isolation_level: str) -> Dict[Tuple[str, int], FetchResult]: ...

    def list_offsets(self, topic: str, partition: int, timestamp: int,
                     isolation_level: str = "read_uncommitted") -> Tuple[int, int]: ...

    def delete_records(self, topic: str, partition: int, offset: int) -> int: ...

    # groups
    def find_coordinator(self, group_id: str) -> BrokerNode: ...

    def join_group(self, group_id: str, member_id: str, client_id: str, session_timeout_ms: int,
                   rebalance_timeout_ms: int, protocol_type: str, protocols: Sequence[Tuple[str, bytes]],
                   group_instance_id: Optional[str] = None, timeout_s: Optional[float] = None,
                   client_host: str = "") -> JoinResult: ...

    def sync_group(self, group_id: str, generation_id: int, member_id: str,
                   assignments: Optional[Dict[str, bytes]] = None,
                   timeout_s: Optional[float] = None) -> SyncResult: ...

    def heartbeat(self, group_id: str, generation_id: int, member_id: str) -> int: ...

    def leave_group(self, group_id: str, member_id: str) -> int: ...

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       offsets: Mapping[Tuple[str, int], Tuple[int, Optional[str]]]) -> Dict[Tuple[str, int], int]: ...

    def fetch_offsets(self, group_id: str, partitions: Optional[Iterable[Tuple[str, int]]] = None,
                      require_stable: bool = False) -> Dict[Tuple[str, int], Tuple[int, Optional[str], int]]: ...

    def list_groups(self) -> List[Tuple[str, str]]: ...

    def describe_group(self, group_id: str) -> GroupDescription: ...

    def delete_groups(self, group_ids: Sequence[str]) -> Dict[str, int]: ...

    def delete_offsets(self, group_id: str, partitions: Sequence[Tuple[str, int]]) -> OffsetDeleteResult: ...

    def describe_producers(self, topic: str, partition: int) -> List[ProducerDescription]: ...

    # admin
    def create_topic(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                     config: Optional[Mapping[str, object]],
                     replica_assignment: Optional[Mapping[int, Sequence[int]]] = None) -> TopicDescription: ...

    def delete_topic(self, name: str) -> None: ...

    def create_partitions(self, name: str, total: int,
                          replica_assignment: Optional[Sequence[Sequence[int]]] = None) -> TopicDescription: ...

    def describe_configs(self, topic: str) -> ConfigEntries: ...

    def describe_broker_configs(self, broker_id: int) -> Dict[str, BrokerConfigEntry]: ...

    def alter_broker_configs(self, resource_name: str, ops: Sequence[Tuple[str, str, Optional[str]]],
                             incremental: bool, validate_only: bool = False) -> None: ...

    def alter_configs(self, topic: str, config: Mapping[str, object], incremental: bool) -> None: ...

    def describe_cluster(self) -> ClusterDescription: ...

    def describe_log_dirs(self, partitions: LogDirsQuery = None) -> Dict[int, List[LogDirDescription]]: ...

    def alter_replica_log_dirs(self, dirs: Mapping[Tuple[str, int, int], str]) -> Dict[Tuple[str, int, int], int]:
        """AlterReplicaLogDirs to each broker named: (topic, partition, broker) -> the log directory
        to move that replica to; -> each replica's error code."""
        ...

    # users' SCRAM credentials
    def describe_user_scram_credentials(self, users: Optional[Sequence[str]] = None
                                        ) -> List[UserScramCredentials]: ...

    def alter_user_scram_credentials(self, deletions: Sequence[ScramCredentialDeletion],
                                     upsertions: Sequence[ScramCredentialUpsertion]) -> Dict[str, Tuple[int, Optional[str]]]:
        """-> user -> (error code, message), one entry per user named."""
        ...

    # client quotas
    def describe_client_quotas(self, components: Sequence[QuotaFilterComponent], strict: bool = False
                               ) -> Dict[QuotaEntity, Dict[str, float]]:
        """DescribeClientQuotas: the entities the filter matches with their quota values (raises
        Kafka's error for a bad filter)."""
        ...

    def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], validate_only: bool = False
                            ) -> Dict[QuotaEntity, Tuple[int, Optional[str]]]:
        """AlterClientQuotas: -> entity -> (error code, message), one entry per entity named."""
        ...


class GroupCoordinatorApi(Protocol):
    """The group calls the server makes; the waiting ones are delayed operations that
    hand their answer to ``deliver`` (on the thread that completes them)."""

    def join_group_async(self, group_id: str, member_id: str, client_id: str, session_timeout_ms: int,
                         rebalance_timeout_ms: int, protocol_type: str, protocols: Sequence[Tuple[str, bytes]],
                         group_instance_id: Optional[str] = None, timeout_s: Optional[float] = None,
                         client_host: str = "/127.0.0.1",
                         deliver: Callable[[JoinResult], None] = ..., *,
                         require_known_member_id: bool = False, supports_skip_assignment: bool = False,
                         reason: Optional[str] = None) -> DelayedCall[JoinResult]: ...

    def sync_group_async(self, group_id: str, generation_id: int, member_id: str,
                         assignments: Optional[Dict[str, bytes]] = None, timeout_s: Optional[float] = None,
                         deliver: Callable[[SyncResult], None] = ..., *,
                         group_instance_id: Optional[str] = None, protocol_type: Optional[str] = None,
                         protocol_name: Optional[str] = None) -> DelayedCall[SyncResult]: ...

    def group_protocol(self, group_id: str) -> Tuple[int, Optional[str], Optional[str]]: ...

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: Optional[str] = None) -> int: ...

    def leave_group(self, group_id: str, member_id: str) -> int: ...

    def leave_group_members(self, group_id: str, members: Sequence[Tuple[str, Optional[str]]],
                            reason: Optional[str] = None) -> Tuple[int, List[int]]: ...

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       offsets: Dict[Tuple[str, int], Tuple[int, Optional[str]]],
                       leader_epochs: Optional[Dict[Tuple[str, int], int]] = None, *,
                       group_instance_id: Optional[str] = None,
                       commit_timestamps: Optional[Dict[Tuple[str, int], int]] = None,
                       unknown_group_not_found: bool = False) -> Dict[Tuple[str, int], int]: ...

    def commit_offsets_pending(self, group_id: str, generation_id: int, member_id: str,
                               offsets: Dict[Tuple[str, int], Tuple[int, Optional[str]]],
                               leader_epochs: Optional[Dict[Tuple[str, int], int]] = None, *,
                               group_instance_id: Optional[str] = None,
                               commit_timestamps: Optional[Dict[Tuple[str, int], int]] = None,
                               unknown_group_not_found: bool = False
                               ) -> Tuple[Dict[Tuple[str, int], int], Callable[[int], None]]: ...

    def fetch_offsets(self, group_id: str, partitions: Optional[Iterable[Tuple[str, int]]] = None,
                      require_stable: bool = False) -> Dict[Tuple[str, int], Tuple[int, str, int]]: ...

    def txn_offset_commit_pending(self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
                                  member_id: str, group_instance_id: Optional[str],
                                  offsets: Mapping[Tuple[str, int], TxnOffset]
                                  ) -> Tuple[Dict[Tuple[str, int], int], Callable[[int], None]]:
        """TxnOffsetCommit: -> (each partition's code, the call that takes the outcome of the
        write's replication); the offsets wait for the transaction's marker."""
        ...

    def fetch_committed(self, group_id: str, partitions: Optional[Iterable[Tuple[str, int]]] = None,
                        require_stable: bool = False) -> Tuple[int, Dict[Tuple[str, int], CommittedOffset]]: ...

    def list_groups(self) -> List[Tuple[str, str]]: ...

    def listed_groups(self, states: Optional[Iterable[str]] = None,
                      types: Optional[Iterable[str]] = None) -> List[ListedGroup]: ...

    def describe_group(self, group_id: str) -> GroupDescription: ...

    def delete_groups(self, group_ids: Iterable[str]) -> Dict[str, int]: ...

    def delete_offsets(self, group_id: str, partitions: Iterable[Tuple[str, int]]) -> OffsetDeleteResult: ...


class BrokerConfigView(Protocol):
    """A broker's configuration as the server reads it."""

    @property
    def listener(self) -> Optional[Config]: ...

    def __getitem__(self, key: str) -> "ConfigValue": ...

    def describe_key(self, key: str) -> Optional[Tuple[str, str]]: ...

    def to_strings(self) -> Dict[str, Optional[str]]: ...


class ServedBroker(Protocol):
    """What the Kafka protocol server calls on the broker it serves (:class:`pylogq.Broker`)."""

    @property
    def broker_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def config(self) -> BrokerConfigView: ...

    @property
    def default_log_config(self) -> LogConfig: ...

    @property
    def group_coordinator(self) -> GroupCoordinatorApi: ...

    @property
    def metrics_registry(self) -> MetricsRegistry: ...

    @property
    def authorizer(self) -> Optional[Authorizer]:
        """Kafka's ACL authorizer (``authorizer.class.name``); None: every request is allowed."""

    def inter_broker_listener(self) -> Optional[str]:
        """The listener the cluster's other brokers reach this one on; None for a single node."""

    def list_topics(self, include_internal: bool = False) -> List[str]: ...

    def describe_topic(self, name: str) -> TopicDescription: ...

    def partitions_for(self, topic: str) -> int: ...

    def topic_id(self, name: str) -> str: ...

    def topic_name(self, topic_id: str) -> str: ...

    def create_topic(self, name: str, partitions: Optional[int] = None, replication_factor: Optional[int] = None,
                     config: Optional[Mapping[str, object]] = None, validate_only: bool = False,
                     replica_assignment: Optional[Mapping[int, Sequence[int]]] = None) -> TopicDescription: ...

    def auto_create_topic(self, name: str) -> TopicDescription: ...

    def delete_topic(self, name: str) -> None: ...

    def create_partitions(self, name: str, total: int, validate_only: bool = False,
                          replica_assignment: Optional[Sequence[Sequence[int]]] = None) -> TopicDescription: ...

    def describe_configs(self, topic: str) -> ConfigEntries: ...

    def broker_configs(self, per_broker: bool = True) -> Dict[str, BrokerConfigEntry]: ...

    def alter_configs(self, topic: str, config: Mapping[str, Optional[object]], incremental: bool = False) -> None: ...

    def alter_broker_configs(self, resource_name: str, ops: Sequence[Tuple[str, str, Optional[str]]],
                             incremental: bool = False, validate_only: bool = False) -> None: ...

    # users' SCRAM credentials (Kafka's user entity configs)
    def scram_credential(self, user: str, mechanism: str) -> Optional[str]: ...

    def describe_user_configs(self, users: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, str]]: ...

    def alter_user_config(self, user: str, changes: Mapping[str, Optional[str]]) -> None: ...

    # client quotas (Kafka's client, user and ip entity configs)
    def describe_client_quotas(self, components: Sequence[QuotaFilterComponent], strict: bool = False
                               ) -> Dict[QuotaEntity, Dict[str, float]]: ...

    def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], validate_only: bool = False
                            ) -> Dict[QuotaEntity, Tuple[int, Optional[str]]]: ...

    def client_quota_configs(self) -> Dict[QuotaEntity, Dict[str, float]]:
        """Every entity's quota values as this broker last heard of them (quick: a cache)."""
        ...

    def watch_client_quotas(self, callback: Callable[[Dict[QuotaEntity, Dict[str, float]]], None]
                            ) -> Callable[[], None]:
        """Call ``callback`` with every entity's quota values now and whenever one changes (from
        the thread that applied the change); -> the call that stops it."""
        ...

    def produce(self, topic: str, partition: int, records: Union[bytes, bytearray, memoryview],
                acks: int = 1, auto_create: bool = True) -> ProduceResult: ...

    def produce_async(self, topic: str, partition: int, records: Union[bytes, bytearray, memoryview], acks: int,
                      timeout_ms: int = 30000, auto_create: bool = False,
                      deliver: Callable[[ProduceResult], None] = ...) -> DelayedCall[ProduceResult]: ...

    def fetch_async(self, requests: Sequence[FetchRequest], max_wait_ms: int, min_bytes: int, max_bytes: int,
                    isolation_level: str = "read_uncommitted",
                    deliver: Callable[[FetchResults], None] = ...,
                    client_rack: Optional[str] = None) -> DelayedCall[FetchResults]: ...

    def list_offsets(self, topic: str, partition: int, timestamp: int,
                     isolation_level: str = "read_uncommitted") -> Tuple[int, int]: ...

    def legacy_offsets_before(self, topic: str, partition: int, timestamp: int, max_count: int) -> List[int]: ...

    def delete_records(self, topic: str, partition: int, offset: int) -> int: ...

    def init_producer_id(self, transactional_id: Optional[str] = None, transaction_timeout_ms: int = 60000,
                         producer_id: int = -1, producer_epoch: int = -1) -> Tuple[int, int]:
        """InitProducerId: an idempotent producer's new id (epoch 0), or a transactional id's id
        and bumped epoch from its coordinator, which fences the previous producer of that id
        (aborting its open transaction: CONCURRENT_TRANSACTIONS until that is done)."""
        ...

    def partitions_exist(self, partitions: Sequence[Tuple[str, int]]) -> List[bool]:
        """Whether each partition exists (in a cluster: in the cluster's metadata, wherever its
        replicas live), as Kafka's handlers check against their metadata cache."""
        ...

    # transactions: the transaction coordinator's calls, and the partitions' leaders'
    def coordinator_for_transaction(self, transactional_id: str) -> Tuple[int, int]:
        """FindCoordinator for a transactional id: (error code, the coordinator's broker id),
        the leader of the id's ``__transaction_state`` partition (created on first use:
        :meth:`ensure_transaction_state_topic`, which the caller runs first)."""
        ...

    def transaction_state_topic_ready(self) -> bool: ...

    def ensure_transaction_state_topic(self) -> int: ...

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Sequence[Tuple[str, int]]) -> Dict[Tuple[str, int], int]:
        """AddPartitionsToTxn: -> each partition's error code (all one code when the
        transaction refuses them)."""
        ...

    def verify_partitions_in_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 partitions: Sequence[Tuple[str, int]]) -> Dict[Tuple[str, int], int]:
        """AddPartitionsToTxn v4+'s verify-only: whether each partition is in the ongoing
        transaction (0, or INVALID_TXN_STATE), nothing added."""
        ...

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           group_id: str) -> None:
        """AddOffsetsToTxn: add the group's ``__consumer_offsets`` partition to the transaction."""
        ...

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """EndTxn: commit or abort the ongoing transaction; returns once the decision is
        stored (its markers are written after)."""
        ...

    def write_txn_markers(self, markers: Sequence[TxnMarker]) -> Dict[int, Dict[Tuple[str, int], int]]:
        """WriteTxnMarkers on the partitions led here: -> each marker's (by producer id)
        error code per partition, once each marker is replicated (acks=all)."""
        ...

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                          generation_id: int, member_id: str, group_instance_id: Optional[str],
                          offsets: Mapping[Tuple[str, int], TxnOffset]) -> Dict[Tuple[str, int], int]:
        """TxnOffsetCommit: the group's offsets, committed when the transaction commits; -> each
        partition's error code."""
        ...

    def describe_transactions(self, transactional_ids: Sequence[str]) -> List[TransactionDescription]: ...

    def list_transactions(self, states: Sequence[str] = (), producer_ids: Sequence[int] = (),
                          duration_ms: int = -1) -> Tuple[List[str], List[TransactionListing]]:
        """ListTransactions on this coordinator: -> (the states asked for that are unknown,
        the transactional ids whose state, producer id and running time (at least
        ``duration_ms``, -1: any) match)."""
        ...

    def describe_log_dirs(self, partitions: LogDirsQuery = None) -> List[LogDirDescription]: ...

    def alter_replica_log_dirs(self, dirs: Mapping[Tuple[str, int], str]) -> Dict[Tuple[str, int], int]:
        """AlterReplicaLogDirs: move each partition's replica here to the log directory given;
        -> each partition's error code."""
        ...

    def delete_offsets(self, group_id: str, partitions: Sequence[Tuple[str, int]]) -> OffsetDeleteResult: ...

    def describe_producers(self, topic: str, partition: int) -> List[ProducerDescription]: ...

    # groups in a cluster
    def coordinator_for(self, group_id: str) -> Tuple[int, int]: ...

    def offsets_topic_ready(self) -> bool: ...

    def ensure_offsets_topic(self) -> int: ...

    def group_writes_replicated_async(self, group_id: str, for_commit: bool,
                                      deliver: Callable[[int], None] = ...) -> DelayedCall[int]: ...

    # replication: the controller's and followers' requests
    def leader_epoch_of(self, topic: str, partition: int, follower_ok: bool = False) -> int: ...

    @property
    def clustered(self) -> bool: ...

    def cluster_view(self) -> Optional[Tuple[int, List[BrokerRegistration]]]: ...

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[Tuple[str, int], int]]: ...

    def update_metadata(self, request: UpdateMetadataRequest) -> int: ...

    def stop_replica(self, request: StopReplicaRequest) -> Tuple[int, Dict[Tuple[str, int], int]]: ...

    def controlled_shutdown_of(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[Tuple[str, int]]]: ...

    def alter_partition_reassignments(self, targets: Mapping[Tuple[str, int], Optional[List[int]]]
                                      ) -> Dict[Tuple[str, int], PartitionOutcome]: ...

    def list_partition_reassignments(self, partitions: Optional[Sequence[Tuple[str, int]]] = None
                                     ) -> Optional[Dict[Tuple[str, int], PartitionReassignment]]: ...

    def elect_leaders(self, election_type: int, partitions: Optional[Sequence[Tuple[str, int]]] = None
                      ) -> Optional[Dict[Tuple[str, int], PartitionOutcome]]: ...

    def replica_fetch_async(self, replica_id: int, broker_epoch: int, partitions: Sequence[ReplicaFetchPartition],
                            max_wait_ms: int, min_bytes: int, max_bytes: int,
                            deliver: Callable[[FetchResults], None] = ...) -> DelayedCall[FetchResults]: ...

    def offsets_for_leader_epoch(self, partitions: Mapping[Tuple[str, int], Tuple[int, int]]
                                 ) -> Dict[Tuple[str, int], EpochEndOffset]: ...

    def join_cluster(self, endpoints: Sequence[BrokerEndpoint]) -> None: ...

    def when_joined(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from any thread) once the broker has joined its cluster, at once
        for a single node or a broker that has: until then it answers only other brokers."""
        ...


class Listener(Protocol):
    """A network listener serving a broker in a thread of its own (``pylogq.server.KafkaServer``)."""

    addresses: List[Tuple[str, int]]

    def stop_thread(self) -> None: ...


#: Opens a listener for ``Broker.serve``: (broker, host, port, options) -> a started listener.
#: ``options`` are the listener's own keyword arguments (``KafkaServer``'s), checked by it.
ListenerFactory = Callable[[ServedBroker, str, int, Mapping[str, Any]], Listener]

_listener: List[Tuple[ListenerFactory, Type[Config]]] = []


def register_listener_factory(factory: ListenerFactory, settings: Type[Config]) -> None:
    """Called by :mod:`pylogq.server` when imported: how ``Broker.serve`` opens listeners,
    and the class of the listener's settings (``listeners``, ``socket.*``, SASL), which a
    broker's configuration then accepts beside its own.

    The broker sits below the server and never imports it; the server registers itself here.
    """
    _listener[:] = [(factory, settings)]


def listener_factory() -> Optional[ListenerFactory]:
    """The registered listener factory, or None when :mod:`pylogq.server` was not imported."""
    return _listener[0][0] if _listener else None


def listener_settings() -> Optional[Type[Config]]:
    """The registered listener's settings class, or None when :mod:`pylogq.server` was not imported."""
    return _listener[0][1] if _listener else None
