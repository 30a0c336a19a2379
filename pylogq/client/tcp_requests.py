"""The per-API half of the TCP transport: each Kafka API's request built, and its response mapped.

:class:`TcpRequests` holds, for each call of the broker contract
(:class:`~pylogq.cluster.contract.BrokerApi`), the request it sends and how its
response becomes the contract's result (:class:`~pylogq.cluster.contract.ProduceResult`,
:class:`~pylogq.cluster.contract.FetchResult`, ...): codes where the in-process
call returns codes, the pylogq.errors class of the wire's error code where it
raises. Where a request goes (any broker, a partition's leader, the
controller, a group's coordinator) it says through the routing calls of
:class:`TcpRouting`, which :class:`pylogq.client.tcp.TcpTransport` implements:
bootstrap, metadata, leaders and coordinators cached and looked up again,
connections per broker and channel, retries on routing errors.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Protocol, Sequence, Set, Tuple

from ..cluster.contract import (
    BrokerConfigEntry,
    BrokerNode,
    ClusterDescription,
    FetchResult,
    GroupDescription,
    JoinResult,
    LogDirDescription,
    LogDirsQuery,
    MemberDescription,
    OffsetDeleteResult,
    PartitionOutcome,
    PartitionReassignment,
    ProducerDescription,
    ProduceResult,
    QuotaAlteration,
    QuotaEntity,
    QuotaFilterComponent,
    RecordBytes,
    ReplicaInfo,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    SyncResult,
    TopicDescription,
    TopicPartitionInfo,
    TransactionDescription,
    TransactionListing,
    TxnMarker,
    TxnOffset,
    UserScramCredentials,
)
from ..cluster.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_code,
)
from ..cluster.names import INTERNAL_TOPICS
from ..config import LogConfig
from ..errors import (
    BrokerError,
    BrokerNotAvailableError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaConnectionError,
    LeaderNotAvailableError,
    MemberIdRequiredError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    ProtocolError,
    RequestTimedOutError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
)
from ..protocol.constants import AlterConfigOp, ApiKey, ConfigResourceType, ConfigSource
from ..records import iter_batches
from .connection import BrokerConnection

__all__ = ["FetchedRecords", "TcpRequests", "TcpRouting"]

ADD_PARTITIONS_TO_TXN = ApiKey.ADD_PARTITIONS_TO_TXN
ADD_OFFSETS_TO_TXN = ApiKey.ADD_OFFSETS_TO_TXN
END_TXN = ApiKey.END_TXN
TXN_OFFSET_COMMIT = ApiKey.TXN_OFFSET_COMMIT

_COORDINATOR_CODES = frozenset((NotCoordinatorError.code, CoordinatorNotAvailableError.code,
                                CoordinatorLoadInProgressError.code))
_STALE_LEADER_CODES = frozenset((NotLeaderOrFollowerError.code, LeaderNotAvailableError.code,
                                 UnknownTopicOrPartitionError.code))
#: Kafka's ScramMechanism type bytes.
SCRAM_MECHANISM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}

NodeKey = Any  # a broker's node id, or ("bootstrap", host, port) before Metadata named it


#: One partition's record bytes from a Fetch response (read like the in-process file region).
FetchedRecords = RecordBytes


def _raise(code: int, context: str, message: Optional[str] = None) -> None:
    cls = error_for_code(code)
    if cls is not None:
        raise cls("%s: %s" % (context, message) if message else context)


def _config_value(value: Any) -> Optional[str]:
    """A config value as Kafka's string form."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _dotted(key: str) -> str:
    """Kafka's dotted spelling of a topic config key given dotted or snake_case."""
    known = LogConfig.known_keys()
    if key in known:
        return key
    dotted = key.replace("_", ".")
    return dotted if dotted in known else key


def _group_topics(pairs: Iterable[Tuple[str, int, Any]]) -> Dict[str, List[Tuple[int, Any]]]:
    out: Dict[str, List[Tuple[int, Any]]] = {}
    for topic, partition, extra in pairs:
        out.setdefault(topic, []).append((partition, extra))
    return out


class TcpRouting(Protocol):
    """The routing the per-API requests go through (:class:`pylogq.client.tcp.TcpTransport` implements it).

    Each call finds its broker from cached metadata (refreshed when missing
    or stale) and retries what the transport's routing retries; the requests
    only say which kind of broker a request goes to and what to forget when
    the answer says it moved.
    """

    timeout_s: float
    _timeout_ms: int

    def _call(self, node: Optional[NodeKey], api_key: int, body: Mapping[str, Any], channel: str = "default",
              retry: bool = True) -> Dict[str, Any]: ...

    def _connection(self, node: NodeKey, channel: str = "default") -> BrokerConnection: ...

    def _metadata(self, topics: Optional[List[str]], create: bool = False) -> Dict[str, Any]: ...

    def _topic_metadata(self, topic: str, create: bool = False) -> Optional[Dict[str, Any]]: ...

    def _leader(self, topic: str, partition: int) -> int: ...

    def _forget_leaders(self, topic: str) -> None: ...

    client_rack: Optional[str]

    def _read_replica(self, topic: str, partition: int) -> Optional[int]: ...

    def _prefer_read_replica(self, topic: str, partition: int, node: int) -> None: ...

    def _forget_read_replica(self, topic: str, partition: int) -> None: ...

    def _node_ids(self) -> List[int]: ...

    def _group_call(self, group_id: str, api_key: int, body: Mapping[str, Any],
                    code_of: Callable[[Dict[str, Any]], int], key_type: int = 0) -> Dict[str, Any]: ...

    def _group_code(self, group_id: str, api_key: int, body: Mapping[str, Any]) -> int: ...

    def _await_group(self, kind: str, group_id: str, signature: Any, body: Dict[str, Any], api_key: int,
                     deadline: float, expires_s: float) -> Optional[Dict[str, Any]]: ...

    def _forget_pending(self, group_id: str) -> None: ...

    def _transaction_coordinator(self, transactional_id: str, deadline: float) -> Tuple[int, int]: ...

    def _backoff(self, deadline: float) -> bool: ...

    def _controller_call(self, api_key: int, body: Mapping[str, Any], code_of: Callable[[Dict[str, Any]], int],
                         timeout_s: Optional[float] = None, retry_lost: bool = False) -> Dict[str, Any]: ...

    def _await_topic(self, name: str, ready: Callable[[TopicDescription], bool]) -> TopicDescription: ...


class TcpRequests(TcpRouting):
    """The broker contract's calls as Kafka requests and their responses as the contract's results.

    A mixin of :class:`pylogq.client.tcp.TcpTransport`, which supplies the
    routing (:class:`TcpRouting`) and sets up ``_rebalance_timeout_s``, the
    only state kept here. Thread-safe as the transport is: the cached metadata,
    connections and requests in flight are read and written only through the
    routing calls, under the transport's lock.
    """

    _rebalance_timeout_s: float  # the largest JoinGroup rebalance timeout yet: SyncGroup waits as long

    # -- metadata ------------------------------------------------------------------------------

    def partitions_for(self, topic: str, create: bool = False) -> Optional[int]:
        entry = self._topic_metadata(topic, create)
        return None if entry is None else len(entry["partitions"])

    def list_topics(self) -> List[str]:
        response = self._metadata(None)
        return sorted(t["name"] for t in response["topics"] if t["error_code"] == 0 and not t["is_internal"])

    def describe_topic(self, name: str) -> TopicDescription:
        entry = self._topic_metadata(name)
        if entry is None:
            raise UnknownTopicOrPartitionError("topic %r does not exist" % name)
        partitions = [TopicPartitionInfo(p["partition_index"], p["leader_id"], list(p["replica_nodes"]),
                                         list(p["isr_nodes"]))
                      for p in sorted(entry["partitions"], key=lambda p: p["partition_index"])]
        overrides = {k: v for k, (v, is_default) in self.describe_configs(name).items()
                     if not is_default and v is not None}
        return TopicDescription(name, partitions, overrides, bool(entry["is_internal"]))

    # -- produce / fetch / offsets -------------------------------------------------------------

    def init_producer_id(self, transactional_id: Optional[str] = None, transaction_timeout_ms: int = 60000,
                         producer_id: int = -1, producer_epoch: int = -1) -> Tuple[int, int]:
        body = {"transactional_id": transactional_id, "transaction_timeout_ms": transaction_timeout_ms,
                "producer_id": producer_id, "producer_epoch": producer_epoch}
        if transactional_id is None:
            response = self._call(None, ApiKey.INIT_PRODUCER_ID, body)
        else:
            response = self._group_call(transactional_id, ApiKey.INIT_PRODUCER_ID, body,
                                        lambda r: int(r["error_code"]), key_type=1)
        _raise(response["error_code"], "InitProducerId" if transactional_id is None else
               "InitProducerId of transactional id %r" % transactional_id)
        return response["producer_id"], response["producer_epoch"]

    # -- transactions (KIP-98): to the transactional id's coordinator ---------------------------

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Sequence[Tuple[str, int]]) -> Dict[Tuple[str, int], int]:
        grouped = _group_topics((t, p, None) for t, p in partitions)
        body = {"v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": producer_id,
                "v3_and_below_producer_epoch": producer_epoch,
                "v3_and_below_topics": [{"name": t, "partitions": [p for p, _ in ps]} for t, ps in grouped.items()]}

        def code_of(response: Dict[str, Any]) -> int:
            return next((p["partition_error_code"] for t in response["results_by_topic_v3_and_below"]
                         for p in t["results_by_partition"] if p["partition_error_code"] in _COORDINATOR_CODES), 0)

        response = self._group_call(transactional_id, ADD_PARTITIONS_TO_TXN, body, code_of, key_type=1)
        return {(t["name"], p["partition_index"]): p["partition_error_code"]
                for t in response["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}

    def _txn_code(self, transactional_id: str, api_key: int, body: Mapping[str, Any], what: str) -> None:
        response = self._group_call(transactional_id, api_key, body, lambda r: int(r["error_code"]), key_type=1)
        _raise(response["error_code"], "%s of transactional id %r" % (what, transactional_id))

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           group_id: str) -> None:
        self._txn_code(transactional_id, ADD_OFFSETS_TO_TXN, {
            "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "group_id": group_id}, "AddOffsetsToTxn")

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool) -> None:
        self._txn_code(transactional_id, END_TXN, {
            "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "committed": committed}, "EndTxn")

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                          generation_id: int, member_id: str, group_instance_id: Optional[str],
                          offsets: Mapping[Tuple[str, int], TxnOffset]) -> Dict[Tuple[str, int], int]:
        grouped = _group_topics((t, p, o) for (t, p), o in offsets.items())
        body = {"transactional_id": transactional_id, "group_id": group_id, "producer_id": producer_id,
                "producer_epoch": producer_epoch, "generation_id": generation_id, "member_id": member_id,
                "group_instance_id": group_instance_id,
                "topics": [{"name": t, "partitions": [
                    {"partition_index": p, "committed_offset": o.offset, "committed_leader_epoch": o.leader_epoch,
                     "committed_metadata": o.metadata} for p, o in ps]} for t, ps in grouped.items()]}

        def code_of(response: Dict[str, Any]) -> int:
            return next((p["error_code"] for t in response["topics"] for p in t["partitions"]
                         if p["error_code"] in _COORDINATOR_CODES), 0)

        response = self._group_call(group_id, TXN_OFFSET_COMMIT, body, code_of)
        return {(t["name"], p["partition_index"]): p["error_code"]
                for t in response["topics"] for p in t["partitions"]}

    def produce(self, topic: str, partition: int, records: Any, acks: int,
                transactional_id: Optional[str] = None) -> ProduceResult:
        count = sum(max(info.records_count, 1) for info in iter_batches(records))
        body = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": self._timeout_ms,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
        try:
            conn = self._connection(self._leader(topic, partition))
            if acks == 0:
                conn.send(ApiKey.PRODUCE, body, expect_response=False)
                return ProduceResult(0, -1, -1, -1, count)
            response = conn.request(ApiKey.PRODUCE, body)
        except KafkaConnectionError:
            # The leader may be gone (a cluster elects another): look it up again next time.
            self._forget_leaders(topic)
            raise
        part = response["responses"][0]["partition_responses"][0]
        code = part["error_code"]
        if code:
            if code in _STALE_LEADER_CODES:
                self._forget_leaders(topic)
            _raise(code, "producing to %s-%d at %s" % (topic, partition, conn.address), part.get("error_message"))
        return ProduceResult(0, part["base_offset"], part["log_append_time_ms"], part["log_start_offset"], count)

    def fetch(self, requests: Sequence[Tuple[str, int, int, int]], max_wait_ms: int, min_bytes: int,
              max_bytes: int, isolation_level: str) -> Dict[Tuple[str, int], FetchResult]:
        """Fetch each partition from its leader, or from the replica its leader last named for
        this consumer's rack (KIP-392). A partition that replica answers with an error (it
        fell behind the fetch offset, stopped following, ...) is asked of its leader at
        once, without waiting, so that the consumer neither resets its position on a
        follower's OFFSET_OUT_OF_RANGE nor waits a round for the leader's answer."""
        out: Dict[Tuple[str, int], FetchResult] = {}
        again = self._fetch_round(requests, max_wait_ms, min_bytes, max_bytes, isolation_level, out, True)
        if again:
            self._fetch_round(again, 0, min_bytes, max_bytes, isolation_level, out, False)
        return out

    def _fetch_round(self, requests: Sequence[Tuple[str, int, int, int]], max_wait_ms: int, min_bytes: int,
                     max_bytes: int, isolation_level: str, out: Dict[Tuple[str, int], FetchResult],
                     read_replicas: bool) -> List[Tuple[str, int, int, int]]:
        """One Fetch per broker over ``requests`` into ``out``; -> the requests a read replica
        answered with an error (its preference forgotten), for the leader to answer. Without
        ``read_replicas`` every partition goes to its leader."""
        by_node: Dict[int, Dict[str, List[Dict[str, Any]]]] = {}
        asked: Dict[Tuple[str, int], Tuple[str, int, int, int]] = {}  # those sent to a read replica
        for request in requests:
            topic, partition, offset, partition_max = request
            node = self._read_replica(topic, partition) if read_replicas else None
            if node is not None:
                asked[(topic, partition)] = request
            else:
                try:
                    node = self._leader(topic, partition)
                except BrokerError as exc:
                    out[(topic, partition)] = FetchResult(exc.code, -1, -1, None)
                    continue
            by_node.setdefault(node, {}).setdefault(topic, []).append({
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": partition_max})
        sent = []
        for node, topics in by_node.items():
            body = {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
                    "isolation_level": 1 if isolation_level == "read_committed" else 0,
                    "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                    "forgotten_topics_data": [], "rack_id": self.client_rack or ""}
            try:
                conn = self._connection(node, "fetch")
                sent.append((node, conn, conn.send(ApiKey.FETCH, body)))
            except (KafkaConnectionError, RequestTimedOutError) as exc:
                self._fail_fetch(out, topics, exc.code, asked)
        again: List[Tuple[str, int, int, int]] = []
        for node, conn, future in sent:
            try:
                response = conn.wait(future, ApiKey.FETCH, self.timeout_s + max_wait_ms / 1000.0)
            except (KafkaConnectionError, RequestTimedOutError, ProtocolError) as exc:
                self._fail_fetch(out, by_node[node], getattr(exc, "code", UnknownServerError.code), asked)
                continue
            _raise(response["error_code"], "Fetch from %s" % conn.address)
            for t in response["responses"]:
                for p in t["partitions"]:
                    key = (t["topic"], p["partition_index"])
                    code = p["error_code"]
                    if code and key in asked:
                        self._forget_read_replica(*key)
                        again.append(asked[key])
                        continue
                    if code in _STALE_LEADER_CODES:
                        self._forget_leaders(t["topic"])
                    preferred = p.get("preferred_read_replica", -1)
                    if not code and preferred >= 0 and preferred != node:
                        self._prefer_read_replica(key[0], key[1], preferred)
                    data = p["records"]
                    aborted = p.get("aborted_transactions")
                    lso = p.get("last_stable_offset", -1)
                    out[key] = FetchResult(code, p["high_watermark"], p["log_start_offset"],
                                           None if code else FetchedRecords(data if data is not None else b""),
                                           preferred, lso if lso >= 0 else None,
                                           None if aborted is None else
                                           [(a["producer_id"], a["first_offset"]) for a in aborted])
        return again

    def _fail_fetch(self, out: Dict[Tuple[str, int], FetchResult], topics: Mapping[str, List[Dict[str, Any]]],
                    code: int, asked: Mapping[Tuple[str, int], Any]) -> None:
        """Answer a node's partitions with a retriable code: the consumer backs off and fetches
        again, from the leader (a partition's read replica that cannot be reached is forgotten;
        the leaders are looked up again)."""
        for topic, parts in topics.items():
            for p in parts:
                key = (topic, p["partition"])
                if key in asked:
                    self._forget_read_replica(topic, p["partition"])
                else:
                    self._forget_leaders(topic)
                out[key] = FetchResult(code, -1, -1, None)

    def list_offsets(self, topic: str, partition: int, timestamp: int,
                     isolation_level: str = "read_uncommitted") -> Tuple[int, int]:
        try:
            node = self._leader(topic, partition)
            response = self._call(node, ApiKey.LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 1 if isolation_level == "read_committed" else 0,
                "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}]})
        except KafkaConnectionError:
            self._forget_leaders(topic)
            raise
        part = response["topics"][0]["partitions"][0]
        if part["error_code"]:
            if part["error_code"] in _STALE_LEADER_CODES:
                self._forget_leaders(topic)
            _raise(part["error_code"], "listing offsets of %s-%d" % (topic, partition))
        return part["offset"], part["timestamp"]

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        try:
            node = self._leader(topic, partition)
            response = self._call(node, ApiKey.DELETE_RECORDS, {
                "topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
                "timeout_ms": self._timeout_ms})
        except KafkaConnectionError:
            self._forget_leaders(topic)
            raise
        part = response["topics"][0]["partitions"][0]
        code = part["error_code"]
        if code == OffsetOutOfRangeError.code:
            # The response carries no message: say where the limit is.
            end, _ = self.list_offsets(topic, partition, -1)
            raise OffsetOutOfRangeError("cannot delete records of %s-%d before offset %d: it is past the high "
                                        "watermark %d" % (topic, partition, offset, end))
        _raise(code, "deleting records of %s-%d before offset %d" % (topic, partition, offset))
        return int(part["low_watermark"])

    # -- groups --------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str) -> int:
        return self._group_code(group_id, ApiKey.HEARTBEAT, {
            "group_id": group_id, "generation_id": generation_id, "member_id": member_id})

    def leave_group(self, group_id: str, member_id: str) -> int:
        self._forget_pending(group_id)
        return self._group_code(group_id, ApiKey.LEAVE_GROUP, {"group_id": group_id, "member_id": member_id})

    def join_group(self, group_id: str, member_id: str, client_id: str, session_timeout_ms: int,
                   rebalance_timeout_ms: int, protocol_type: str, protocols: Sequence[Tuple[str, bytes]],
                   group_instance_id: Optional[str] = None, timeout_s: Optional[float] = None,
                   client_host: str = "") -> JoinResult:
        """JoinGroup; REQUEST_TIMED_OUT when ``timeout_s`` passes first (the join stays in flight).

        The member's client id is the connection's (``client_id=`` of the
        transport), as on the wire; MEMBER_ID_REQUIRED is answered by joining
        again with the id given.
        """
        protocols = [(str(name), bytes(metadata)) for name, metadata in protocols]
        expires_s = (rebalance_timeout_ms + self._timeout_ms) / 1000.0
        self._rebalance_timeout_s = max(self._rebalance_timeout_s, rebalance_timeout_ms / 1000.0)
        deadline = time.monotonic() + (expires_s if timeout_s is None else timeout_s)
        signature = (session_timeout_ms, rebalance_timeout_ms, protocol_type, tuple(protocols), group_instance_id)
        while True:
            body = {"group_id": group_id, "session_timeout_ms": session_timeout_ms,
                    "rebalance_timeout_ms": rebalance_timeout_ms, "member_id": member_id,
                    "group_instance_id": group_instance_id, "protocol_type": protocol_type,
                    "protocols": [{"name": n, "metadata": m} for n, m in protocols]}
            response = self._await_group("join", group_id, signature, body, ApiKey.JOIN_GROUP, deadline, expires_s)
            if response is None:
                return JoinResult(RequestTimedOutError.code, member_id=member_id)
            code = response["error_code"]
            if code == MemberIdRequiredError.code and response["member_id"]:
                member_id = response["member_id"]
                continue
            return JoinResult(code, response["generation_id"], response["protocol_name"], response["leader"] or "",
                              response["member_id"] or member_id,
                              [(m["member_id"], m["group_instance_id"], m["metadata"] or b"")
                               for m in response["members"]])

    def sync_group(self, group_id: str, generation_id: int, member_id: str,
                   assignments: Optional[Dict[str, bytes]] = None, timeout_s: Optional[float] = None) -> SyncResult:
        """SyncGroup; REQUEST_TIMED_OUT when ``timeout_s`` passes first (the sync stays in flight)."""
        items = sorted((m, bytes(a)) for m, a in (assignments or {}).items())
        expires_s = self._rebalance_timeout_s + self.timeout_s
        deadline = time.monotonic() + (expires_s if timeout_s is None else timeout_s)
        body = {"group_id": group_id, "generation_id": generation_id, "member_id": member_id,
                "group_instance_id": None, "assignments": [{"member_id": m, "assignment": a} for m, a in items]}
        response = self._await_group("sync", group_id, (generation_id, member_id, tuple(items)), body,
                                     ApiKey.SYNC_GROUP, deadline, expires_s)
        if response is None:
            return SyncResult(RequestTimedOutError.code)
        return SyncResult(response["error_code"], response["assignment"] or b"")

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       offsets: Mapping[Tuple[str, int], Tuple[int, Optional[str]]]) -> Dict[Tuple[str, int], int]:
        grouped = _group_topics((t, p, v) for (t, p), v in offsets.items())
        body = {"group_id": group_id, "generation_id_or_member_epoch": generation_id, "member_id": member_id,
                "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": [
                    {"partition_index": p, "committed_offset": offset, "committed_metadata": metadata}
                    for p, (offset, metadata) in ps]} for t, ps in grouped.items()]}

        def code_of(response: Dict[str, Any]) -> int:
            return next((p["error_code"] for t in response["topics"] for p in t["partitions"]
                         if p["error_code"] in _COORDINATOR_CODES), 0)

        response = self._group_call(group_id, ApiKey.OFFSET_COMMIT, body, code_of)
        return {(t["name"], p["partition_index"]): p["error_code"]
                for t in response["topics"] for p in t["partitions"]}

    def fetch_offsets(self, group_id: str, partitions: Optional[Iterable[Tuple[str, int]]] = None,
                      require_stable: bool = False) -> Dict[Tuple[str, int], Tuple[int, Optional[str], int]]:
        topics = None
        if partitions is not None:
            topics = [{"name": t, "partition_indexes": [p for p, _ in ps]}
                      for t, ps in _group_topics((t, p, None) for t, p in partitions).items()]

        def code_of(response: Dict[str, Any]) -> int:
            return int(response["error_code"]) or next(
                (p["error_code"] for t in response["topics"] for p in t["partitions"]
                 if p["error_code"] in _COORDINATOR_CODES), 0)

        # require_stable is sent from v7 (KIP-447); a broker older than that reads without it.
        body = {"group_id": group_id, "topics": topics, "require_stable": require_stable}
        response = self._group_call(group_id, ApiKey.OFFSET_FETCH, body, code_of)
        _raise(response["error_code"], "fetching the committed offsets of group %r" % group_id)
        return {(t["name"], p["partition_index"]): (p["committed_offset"], p["metadata"] or "", p["error_code"])
                for t in response["topics"] for p in t["partitions"]}

    def list_groups(self) -> List[Tuple[str, str]]:
        self._metadata([])
        nodes = self._node_ids()
        found: Set[Tuple[str, str]] = set()
        for node in nodes:
            response = self._call(node, ApiKey.LIST_GROUPS, {})
            _raise(response["error_code"], "listing the groups of broker %d" % node)
            found.update((g["group_id"], g["protocol_type"] or "") for g in response["groups"])
        return sorted(found)

    def describe_group(self, group_id: str) -> GroupDescription:
        response = self._group_call(group_id, ApiKey.DESCRIBE_GROUPS, {"groups": [group_id]},
                                    lambda r: r["groups"][0]["error_code"] if r["groups"] else 0)
        g = next((g for g in response["groups"] if g["group_id"] == group_id), None)
        if g is None:
            raise UnknownServerError("DescribeGroups answered no entry for group %r" % group_id)
        members = [MemberDescription(m["member_id"], m["client_id"], m["client_host"], m["member_metadata"] or b"",
                                     m["member_assignment"] or b"") for m in g["members"]]
        return GroupDescription(g["error_code"], g["group_state"], g["protocol_type"] or "", g["protocol_data"] or "",
                                members)

    def delete_groups(self, group_ids: Sequence[str]) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for group_id in group_ids:
            response = self._group_call(group_id, ApiKey.DELETE_GROUPS, {"groups_names": [group_id]},
                                        lambda r: r["results"][0]["error_code"] if r["results"] else 0)
            for result in response["results"]:
                out[result["group_id"]] = result["error_code"]
        return out

    def delete_offsets(self, group_id: str, partitions: Sequence[Tuple[str, int]]) -> OffsetDeleteResult:
        topics: Dict[str, List[Dict[str, int]]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append({"partition_index": partition})
        response = self._group_call(group_id, ApiKey.OFFSET_DELETE, {
            "group_id": group_id, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
            lambda r: r["error_code"])
        codes = {(t["name"], p["partition_index"]): p["error_code"]
                 for t in response["topics"] for p in t["partitions"]}
        return response["error_code"], codes

    def describe_producers(self, topic: str, partition: int, broker_id: Optional[int] = None
                           ) -> List[ProducerDescription]:
        node = self._leader(topic, partition) if broker_id is None else broker_id
        if broker_id is not None and broker_id not in self._node_ids():
            self._metadata([])
            if broker_id not in self._node_ids():
                raise BrokerNotAvailableError("broker %d is not in the cluster" % broker_id)
        response = self._call(node, ApiKey.DESCRIBE_PRODUCERS, {
            "topics": [{"name": topic, "partition_indexes": [partition]}]})
        part = response["topics"][0]["partitions"][0]
        if part["error_code"] in _STALE_LEADER_CODES and broker_id is None:
            self._forget_leaders(topic)
        where = "" if broker_id is None else " on broker %d" % broker_id
        _raise(part["error_code"], "describing the producers of %s-%d%s" % (topic, partition, where),
               part["error_message"])
        return [ProducerDescription(p["producer_id"], p["producer_epoch"], p["last_sequence"], p["last_timestamp"],
                                    p["coordinator_epoch"], p["current_txn_start_offset"])
                for p in part["active_producers"]]

    # -- transactions, as an administrator sees them --------------------------------------------

    def list_transactions(self, states: Sequence[str], producer_ids: Sequence[int], duration_ms: int
                          ) -> Dict[int, List[TransactionListing]]:
        """ListTransactions on every broker the metadata names now (Kafka's admin client asks
        them all: each coordinates its own ``__transaction_state`` partitions). A coordinator
        still loading is asked again until the request timeout."""
        self._metadata([])
        body = {"state_filters": list(states), "producer_id_filters": list(producer_ids),
                "duration_filter": duration_ms}
        out: Dict[int, List[TransactionListing]] = {}
        for node in self._node_ids():
            if duration_ms >= 0 and self._connection(node).version(ApiKey.LIST_TRANSACTIONS) < 1:
                raise UnsupportedVersionError("broker %d does not filter transactions by duration "
                                              "(ListTransactions v1, Kafka 3.8)" % node)
            deadline = time.monotonic() + self.timeout_s
            while True:
                response = self._call(node, ApiKey.LIST_TRANSACTIONS, body)
                code = response["error_code"]
                if code != CoordinatorLoadInProgressError.code or not self._backoff(deadline):
                    break
            _raise(code, "listing the transactions of broker %d" % node)
            out[node] = [TransactionListing(t["transactional_id"], t["producer_id"], t["transaction_state"])
                         for t in response["transaction_states"]]
        return out

    def describe_transactions(self, transactional_ids: Sequence[str]
                              ) -> Dict[str, Tuple[int, TransactionDescription]]:
        """DescribeTransactions, each id to its coordinator (one request per coordinator); an id
        whose coordinator moved, is loading or cannot be reached is looked up and asked again
        until the request timeout, then reported with that error."""
        wanted = list(dict.fromkeys(transactional_ids))
        deadline = time.monotonic() + self.timeout_s
        out: Dict[str, Tuple[int, TransactionDescription]] = {}
        pending = wanted
        while pending:
            failed: Dict[str, int] = {}
            by_node: Dict[int, List[str]] = {}
            for transactional_id in pending:
                code, node = self._transaction_coordinator(transactional_id, deadline)
                if code:
                    out[transactional_id] = (-1, TransactionDescription(transactional_id, code))
                else:
                    by_node.setdefault(node, []).append(transactional_id)
            for node, ids in by_node.items():
                try:
                    response = self._call(node, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": ids})
                except KafkaConnectionError:
                    failed.update((t, CoordinatorNotAvailableError.code) for t in ids)
                    continue
                for state in response["transaction_states"]:
                    transactional_id = state["transactional_id"]
                    if transactional_id not in ids:
                        continue  # not asked: Kafka's client ignores it too
                    code = state["error_code"]
                    if code in _COORDINATOR_CODES:
                        failed[transactional_id] = code
                        continue
                    partitions = tuple((t["topic"], p) for t in state["topics"] for p in t["partitions"])
                    out[transactional_id] = (node, TransactionDescription(
                        transactional_id, code, state["transaction_state"], state["producer_id"],
                        state["producer_epoch"], state["transaction_timeout_ms"],
                        state["transaction_start_time_ms"], partitions) if code == 0
                        else TransactionDescription(transactional_id, code))
            pending = list(failed)
            if pending and not self._backoff(deadline):
                for transactional_id, code in failed.items():
                    out[transactional_id] = (-1, TransactionDescription(transactional_id, code))
                break
        return {t: out[t] for t in wanted if t in out}

    def write_txn_markers(self, markers: Sequence[TxnMarker]) -> Dict[int, Dict[Tuple[str, int], int]]:
        """Each marker's partitions sent to their leaders, one request per leader. A partition
        whose leader moved is sent to the new one until the request timeout; a request whose
        connection was lost is not sent again (the leader may have written the marker)."""
        out: Dict[int, Dict[Tuple[str, int], int]] = {m.producer_id: {} for m in markers}
        deadline = time.monotonic() + self.timeout_s
        pending = [(m, tp) for m in markers for tp in m.partitions]
        while pending:
            by_node: Dict[int, Dict[int, Tuple[TxnMarker, List[Tuple[str, int]]]]] = {}
            for marker, (topic, partition) in pending:
                try:
                    node = self._leader(topic, partition)
                except BrokerError as exc:
                    out[marker.producer_id][(topic, partition)] = exc.code
                    continue
                entry = by_node.setdefault(node, {}).setdefault(id(marker), (marker, []))
                entry[1].append((topic, partition))
            stale: List[Tuple[TxnMarker, Tuple[str, int]]] = []
            for node, entries in by_node.items():
                body = {"markers": [{
                    "producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
                    "transaction_result": m.committed, "coordinator_epoch": m.coordinator_epoch,
                    "topics": [{"name": t, "partition_indexes": [p for p, _ in ps]}
                               for t, ps in _group_topics((t, p, None) for t, p in tps).items()],
                } for m, tps in entries.values()]}
                response = self._call(node, ApiKey.WRITE_TXN_MARKERS, body, retry=False)
                sent = {m.producer_id: m for m, _ in entries.values()}
                for result in response["markers"]:
                    answered = sent.get(result["producer_id"])
                    if answered is None:
                        continue
                    for t in result["topics"]:
                        for p in t["partitions"]:
                            key = (t["name"], p["partition_index"])
                            code = p["error_code"]
                            out[answered.producer_id][key] = code
                            if code in _STALE_LEADER_CODES:
                                self._forget_leaders(t["name"])
                                stale.append((answered, key))
            pending = stale
            if pending and not self._backoff(deadline):
                break
        return out

    # -- admin ---------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: Optional[int], replication_factor: Optional[int],
                     config: Optional[Mapping[str, Any]],
                     replica_assignment: Optional[Mapping[int, Sequence[int]]] = None) -> TopicDescription:
        body = {"topics": [{
            "name": name, "num_partitions": -1 if partitions is None else partitions,
            "replication_factor": -1 if replication_factor is None else replication_factor,
            "assignments": [{"partition_index": p, "broker_ids": list(r)}
                            for p, r in sorted((replica_assignment or {}).items())],
            "configs": [{"name": _dotted(k), "value": _config_value(v)} for k, v in (config or {}).items()],
        }], "timeout_ms": self._timeout_ms, "validate_only": False}
        response = self._controller_call(ApiKey.CREATE_TOPICS, body, lambda r: r["topics"][0]["error_code"])
        result = response["topics"][0]
        _raise(result["error_code"], "creating topic %r" % name, result.get("error_message"))
        return self._await_topic(name, lambda d: True)

    def delete_topic(self, name: str) -> None:
        response = self._controller_call(ApiKey.DELETE_TOPICS, {"topic_names": [name], "timeout_ms": self._timeout_ms},
                                         lambda r: r["responses"][0]["error_code"])
        self._forget_leaders(name)
        code = response["responses"][0]["error_code"]
        if code == UnknownTopicOrPartitionError.code:
            raise UnknownTopicOrPartitionError("topic %r does not exist" % name)
        if code == InvalidTopicError.code and name in INTERNAL_TOPICS:
            raise InvalidTopicError("cannot delete topic %r: it is an internal topic" % name)
        _raise(code, "deleting topic %r" % name)

    def create_partitions(self, name: str, total: int,
                          replica_assignment: Optional[Sequence[Sequence[int]]] = None) -> TopicDescription:
        assignments = (None if replica_assignment is None
                       else [{"broker_ids": list(r)} for r in replica_assignment])
        body = {"topics": [{"name": name, "count": total, "assignments": assignments}],
                "timeout_ms": self._timeout_ms, "validate_only": False}
        response = self._controller_call(ApiKey.CREATE_PARTITIONS, body, lambda r: r["results"][0]["error_code"])
        result = response["results"][0]
        _raise(result["error_code"], "creating partitions of topic %r" % name, result.get("error_message"))
        self._forget_leaders(name)
        return self._await_topic(name, lambda d: len(d.partitions) >= total)

    def alter_partition_reassignments(self, targets: Mapping[Tuple[str, int], Optional[Sequence[int]]],
                                      timeout_ms: int) -> Dict[Tuple[str, int], PartitionOutcome]:
        """AlterPartitionReassignments to the controller (found again while another broker answers
        NOT_CONTROLLER, for up to ``timeout_ms``); -> each partition's (error code, message)."""
        topics: Dict[str, List[Dict[str, Any]]] = {}
        for (topic, partition), replicas in targets.items():
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "replicas": None if replicas is None else list(replicas)})
        body = {"timeout_ms": timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        response = self._controller_call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, lambda r: r["error_code"],
                                         timeout_s=timeout_ms / 1000.0)
        _raise(response["error_code"], "altering partition reassignments", response["error_message"])
        return {(t["name"], p["partition_index"]): (p["error_code"], p["error_message"])
                for t in response["responses"] for p in t["partitions"]}

    def list_partition_reassignments(self, partitions: Optional[Sequence[Tuple[str, int]]],
                                     timeout_ms: int) -> Dict[Tuple[str, int], PartitionReassignment]:
        """ListPartitionReassignments to the controller, found as for AlterPartitionReassignments
        (a read: sent again after a lost connection)."""
        topics: Optional[List[Dict[str, Any]]] = None
        if partitions is not None:
            grouped: Dict[str, List[int]] = {}
            for topic, partition in partitions:
                grouped.setdefault(topic, []).append(partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in grouped.items()]
        response = self._controller_call(ApiKey.LIST_PARTITION_REASSIGNMENTS,
                                         {"timeout_ms": timeout_ms, "topics": topics}, lambda r: r["error_code"],
                                         timeout_s=timeout_ms / 1000.0, retry_lost=True)
        _raise(response["error_code"], "listing partition reassignments", response["error_message"])
        return {(t["name"], p["partition_index"]): PartitionReassignment(
                    list(p["replicas"]), list(p["adding_replicas"]), list(p["removing_replicas"]))
                for t in response["topics"] for p in t["partitions"]}

    def elect_leaders(self, election_type: int, partitions: Optional[Sequence[Tuple[str, int]]],
                      timeout_ms: int) -> Dict[Tuple[str, int], PartitionOutcome]:
        """ElectLeaders to the controller, found as for AlterPartitionReassignments (an
        election is safe to ask for again: sent again after a lost connection)."""
        topics: Optional[List[Dict[str, Any]]] = None
        if partitions is not None:
            grouped: Dict[str, List[int]] = {}
            for topic, partition in partitions:
                grouped.setdefault(topic, []).append(partition)
            topics = [{"topic": t, "partitions": ps} for t, ps in grouped.items()]
        body = {"election_type": election_type, "topic_partitions": topics, "timeout_ms": timeout_ms}

        def code_of(r: Dict[str, Any]) -> int:
            # v0 has no top-level error: a broker that is not the controller says it per partition.
            codes = [p["error_code"] for t in r["replica_election_results"] for p in t["partition_result"]]
            return r.get("error_code") or (codes[0] if codes and all(c == codes[0] for c in codes) else 0)

        response = self._controller_call(ApiKey.ELECT_LEADERS, body, code_of, timeout_s=timeout_ms / 1000.0,
                                         retry_lost=True)
        _raise(response.get("error_code", 0), "electing leaders", None)
        return {(t["topic"], p["partition_id"]): (p["error_code"], p["error_message"])
                for t in response["replica_election_results"] for p in t["partition_result"]}

    def describe_configs(self, topic: str) -> Dict[str, Tuple[Optional[str], bool]]:
        response = self._call(None, ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": ConfigResourceType.TOPIC, "resource_name": topic,
                           "configuration_keys": None}],
            "include_synonyms": False})
        result = response["results"][0]
        _raise(result["error_code"], "describing the configs of topic %r" % topic, result.get("error_message"))
        return {c["name"]: (c["value"], c["config_source"] != ConfigSource.DYNAMIC_TOPIC_CONFIG)
                for c in sorted(result["configs"], key=lambda c: c["name"])}

    def describe_broker_configs(self, broker_id: int) -> Dict[str, BrokerConfigEntry]:
        """Every setting of broker ``broker_id``, with its source and default (DescribeConfigs
        with synonyms, sent to it; a sensitive one without a value)."""
        self._metadata([])
        known = broker_id in self._node_ids()
        if not known:
            raise InvalidRequestError("unknown broker %d (not in the cluster metadata)" % broker_id)
        response = self._call(broker_id, ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": ConfigResourceType.BROKER, "resource_name": str(broker_id),
                           "configuration_keys": None}],
            "include_synonyms": True})
        result = response["results"][0]
        _raise(result["error_code"], "describing the configs of broker %d" % broker_id, result.get("error_message"))
        out: Dict[str, BrokerConfigEntry] = {}
        for c in sorted(result["configs"], key=lambda c: c["name"]):
            try:
                source = ConfigSource(c["config_source"]).name
            except ValueError:
                source = ConfigSource.UNKNOWN.name
            default = next((s["value"] for s in c.get("synonyms") or ()
                            if s["source"] == ConfigSource.DEFAULT_CONFIG), None)
            synonyms = []
            for syn in c.get("synonyms") or ():
                try:
                    synonyms.append((ConfigSource(syn["source"]).name, syn["value"]))
                except ValueError:
                    synonyms.append((ConfigSource.UNKNOWN.name, syn["value"]))
            out[c["name"]] = BrokerConfigEntry(None if c["is_sensitive"] else c["value"], source,
                                               bool(c["is_sensitive"]), default, tuple(synonyms),
                                               bool(c["read_only"]))
        return out

    def broker_log_dirs(self) -> List[str]:
        """The ``log.dirs`` of the broker this transport reaches first (DescribeConfigs, broker resource)."""
        response = self._call(None, ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": ConfigResourceType.BROKER, "resource_name": "",
                           "configuration_keys": ["log.dirs"]}],
            "include_synonyms": False})
        result = response["results"][0]
        _raise(result["error_code"], "describing the broker's configs", result.get("error_message"))
        for entry in result["configs"]:
            if entry["name"] == "log.dirs" and entry["value"]:
                return [d.strip() for d in entry["value"].split(",") if d.strip()]
        raise UnknownServerError("the broker did not describe its log.dirs")

    def alter_configs(self, topic: str, config: Mapping[str, Any], incremental: bool) -> None:
        if incremental:
            entries = [{"name": _dotted(k),
                        "config_operation": AlterConfigOp.DELETE if v is None else AlterConfigOp.SET,
                        "value": _config_value(v)} for k, v in config.items()]
            api_key = ApiKey.INCREMENTAL_ALTER_CONFIGS
        else:
            entries = [{"name": _dotted(k), "value": _config_value(v)} for k, v in config.items()]
            api_key = ApiKey.ALTER_CONFIGS
        response = self._call(None, api_key, {
            "resources": [{"resource_type": ConfigResourceType.TOPIC, "resource_name": topic, "configs": entries}],
            "validate_only": False})
        result = response["responses"][0]
        _raise(result["error_code"], "altering the configs of topic %r" % topic, result.get("error_message"))

    def alter_broker_configs(self, resource_name: str, ops: Sequence[Tuple[str, str, Optional[str]]],
                             incremental: bool, validate_only: bool = False) -> None:
        """AlterConfigs (or IncrementalAlterConfigs) of a BROKER resource, sent to that broker
        (any broker for "", the cluster-wide default), as Kafka's admin client routes it."""
        if incremental:
            entries = [{"name": k, "config_operation": AlterConfigOp[op], "value": v} for op, k, v in ops]
            api_key = ApiKey.INCREMENTAL_ALTER_CONFIGS
        else:
            entries = [{"name": k, "value": v} for _, k, v in ops]
            api_key = ApiKey.ALTER_CONFIGS
        node = int(resource_name) if resource_name else None
        response = self._call(node, api_key, {
            "resources": [{"resource_type": ConfigResourceType.BROKER, "resource_name": resource_name,
                           "configs": entries}],
            "validate_only": validate_only})
        result = response["responses"][0]
        what = "broker %s" % resource_name if resource_name else "the cluster-wide broker default"
        _raise(result["error_code"], "altering the configs of %s" % what, result.get("error_message"))

    def describe_cluster(self) -> ClusterDescription:
        """DescribeCluster, or Metadata from a broker that does not speak it (Kafka before 2.8)."""
        try:
            response = self._call(None, ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False})
        except UnsupportedVersionError:
            metadata = self._metadata([])
            return ClusterDescription(metadata["cluster_id"] or "", metadata["controller_id"],
                                      [BrokerNode(b["node_id"], b["host"], b["port"], b["rack"])
                                       for b in metadata["brokers"]])
        _raise(response["error_code"], "describing the cluster", response["error_message"])
        return ClusterDescription(response["cluster_id"], response["controller_id"],
                                  [BrokerNode(b["broker_id"], b["host"], b["port"], b["rack"])
                                   for b in response["brokers"]])

    def describe_user_scram_credentials(self, users: Optional[Sequence[str]] = None
                                        ) -> List[UserScramCredentials]:
        """DescribeUserScramCredentials (any broker answers); every user's when ``users`` is None."""
        response = self._call(None, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                              {"users": None if users is None else [{"name": u} for u in users]})
        _raise(response["error_code"], "describing SCRAM credentials", response["error_message"])
        return [UserScramCredentials(r["user"], r["error_code"], r["error_message"],
                                     [(SCRAM_MECHANISM_NAMES.get(c["mechanism"], "UNKNOWN"), c["iterations"])
                                      for c in r["credential_infos"]])
                for r in response["results"]]

    def alter_user_scram_credentials(self, deletions: Sequence[ScramCredentialDeletion],
                                     upsertions: Sequence[ScramCredentialUpsertion]
                                     ) -> Dict[str, Tuple[int, Optional[str]]]:
        """AlterUserScramCredentials (any broker answers: it writes to the cluster's store)."""
        response = self._call(None, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {
            "deletions": [{"name": d.user, "mechanism": d.mechanism} for d in deletions],
            "upsertions": [{"name": u.user, "mechanism": u.mechanism, "iterations": u.iterations, "salt": u.salt,
                            "salted_password": u.salted_password} for u in upsertions]}, retry=False)
        return {r["user"]: (r["error_code"], r["error_message"]) for r in response["results"]}

    # -- ACLs (any broker answers: every broker has the cluster's ACLs) --------------------------

    def describe_acls(self, binding_filter: AclBindingFilter) -> List[AclBinding]:
        """DescribeAcls: the bindings the filter matches (SECURITY_DISABLED without an authorizer)."""
        p, e = binding_filter
        response = self._call(None, ApiKey.DESCRIBE_ACLS, {
            "resource_type_filter": p.resource_type, "resource_name_filter": p.name,
            "pattern_type_filter": p.pattern_type, "principal_filter": e.principal, "host_filter": e.host,
            "operation": e.operation, "permission_type": e.permission_type})
        _raise(response["error_code"], "describing ACLs", response["error_message"])
        return [AclBinding(ResourcePattern(from_code(ResourceType, r["resource_type"]), r["resource_name"],
                                           from_code(PatternType, r["pattern_type"])),
                           AccessControlEntry(a["principal"], a["host"], from_code(AclOperation, a["operation"]),
                                              from_code(AclPermissionType, a["permission_type"])))
                for r in response["resources"] for a in r["acls"]]

    def create_acls(self, bindings: Sequence[AclBinding]) -> List[Tuple[int, Optional[str]]]:
        """CreateAcls: -> (error code, message) per binding."""
        response = self._call(None, ApiKey.CREATE_ACLS, {"creations": [
            {"resource_type": p.resource_type, "resource_name": p.name, "resource_pattern_type": p.pattern_type,
             "principal": e.principal, "host": e.host, "operation": e.operation, "permission_type": e.permission_type}
            for p, e in bindings]}, retry=False)
        return [(r["error_code"], r["error_message"]) for r in response["results"]]

    def delete_acls(self, filters: Sequence[AclBindingFilter]
                    ) -> List[Tuple[int, Optional[str], List[Tuple[AclBinding, int, Optional[str]]]]]:
        """DeleteAcls: -> per filter (error code, message, [(binding deleted, its code, message)])."""
        response = self._call(None, ApiKey.DELETE_ACLS, {"filters": [
            {"resource_type_filter": p.resource_type, "resource_name_filter": p.name,
             "pattern_type_filter": p.pattern_type, "principal_filter": e.principal, "host_filter": e.host,
             "operation": e.operation, "permission_type": e.permission_type} for p, e in filters]}, retry=False)
        return [(r["error_code"], r["error_message"], [
            (AclBinding(ResourcePattern(from_code(ResourceType, m["resource_type"]), m["resource_name"],
                                        from_code(PatternType, m["pattern_type"])),
                        AccessControlEntry(m["principal"], m["host"], from_code(AclOperation, m["operation"]),
                                           from_code(AclPermissionType, m["permission_type"]))),
             m["error_code"], m["error_message"]) for m in r["matching_acls"]])
            for r in response["filter_results"]]

    # -- client quotas ---------------------------------------------------------------------------

    def describe_client_quotas(self, components: Sequence[QuotaFilterComponent], strict: bool = False
                               ) -> Dict[QuotaEntity, Dict[str, float]]:
        """DescribeClientQuotas (any broker answers: it reads the cluster's store)."""
        response = self._call(None, ApiKey.DESCRIBE_CLIENT_QUOTAS, {
            "components": [{"entity_type": c.entity_type, "match_type": c.match_type, "match": c.match}
                           for c in components], "strict": strict})
        _raise(response["error_code"], "describing client quotas", response["error_message"])
        return {tuple(sorted((e["entity_type"], e["entity_name"]) for e in entry["entity"])):
                {v["key"]: v["value"] for v in entry["values"]} for entry in response["entries"] or ()}

    def alter_client_quotas(self, alterations: Sequence[QuotaAlteration], validate_only: bool = False
                            ) -> Dict[QuotaEntity, Tuple[int, Optional[str]]]:
        """AlterClientQuotas (any broker answers: it writes to the cluster's store)."""
        response = self._call(None, ApiKey.ALTER_CLIENT_QUOTAS, {
            "entries": [{"entity": [{"entity_type": kind, "entity_name": name} for kind, name in a.entity],
                         "ops": [{"key": key, "value": 0.0 if value is None else float(value),
                                  "remove": value is None} for key, value in a.ops]}
                        for a in alterations], "validate_only": validate_only}, retry=False)
        return {tuple(sorted((e["entity_type"], e["entity_name"]) for e in entry["entity"])):
                (entry["error_code"], entry["error_message"]) for entry in response["entries"]}

    def describe_log_dirs(self, partitions: LogDirsQuery = None) -> Dict[int, List[LogDirDescription]]:
        """DescribeLogDirs to every broker in the metadata; -> broker id -> its log directories."""
        self._metadata([])
        nodes = self._node_ids()
        body = {"topics": None if partitions is None else
                [{"topic": t, "partitions": list(indexes)} for t, indexes in partitions.items()]}
        out: Dict[int, List[LogDirDescription]] = {}
        for node in nodes:
            response = self._call(node, ApiKey.DESCRIBE_LOG_DIRS, body)
            _raise(response["error_code"], "describing the log dirs of broker %d" % node)
            out[node] = [LogDirDescription(
                r["log_dir"], r["error_code"],
                [ReplicaInfo(t["name"], p["partition_index"], p["partition_size"], p["offset_lag"], p["is_future_key"])
                 for t in r["topics"] for p in t["partitions"]],
                r["total_bytes"], r["usable_bytes"]) for r in response["results"]]
        return out

    def alter_replica_log_dirs(self, dirs: Mapping[Tuple[str, int, int], str]) -> Dict[Tuple[str, int, int], int]:
        """AlterReplicaLogDirs to each broker named, with its replicas grouped by directory and
        topic; a broker not in the metadata answers BROKER_NOT_AVAILABLE for its replicas."""
        self._metadata([])
        nodes = set(self._node_ids())
        out: Dict[Tuple[str, int, int], int] = {}
        by_broker: Dict[int, Dict[str, Dict[str, List[int]]]] = {}
        for (topic, partition, broker), path in dirs.items():
            if broker not in nodes:
                out[(topic, partition, broker)] = BrokerNotAvailableError.code
                continue
            by_broker.setdefault(broker, {}).setdefault(path, {}).setdefault(topic, []).append(partition)
        for broker, by_dir in sorted(by_broker.items()):
            body = {"dirs": [{"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                             for path, topics in by_dir.items()]}
            response = self._call(broker, ApiKey.ALTER_REPLICA_LOG_DIRS, body)
            for t in response["results"]:
                for p in t["partitions"]:
                    out[(t["topic_name"], p["partition_index"], broker)] = p["error_code"]
        return out
