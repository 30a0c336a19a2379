"""The group coordinator's APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, TxnOffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups and
OffsetDelete.

Joins and syncs wait as delayed operations; a group's offsets are read and written through the
broker's group coordinator (:class:`~pylogq.cluster.contract.GroupCoordinatorApi`).
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .. import errors
from ..cluster.acl import AclOperation, ResourceType
from ..cluster.contract import CommittedOffset, GroupCoordinatorApi, JoinResult, SyncResult, TxnOffset
from ..protocol.message_data import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from .authorization import NOTHING_REFUSED
from .connection import Connection, RequestSlot
from .handler_base import NOT_COMPUTED, HandlerBase, error_code

__all__ = ["GroupHandlers"]


# FindCoordinator key types (Kafka's CoordinatorType).
GROUP_KEY = 0
TRANSACTION_KEY = 1
SHARE_KEY = 2

_GROUP = ResourceType.GROUP
_TOPIC = ResourceType.TOPIC
_READ = AclOperation.READ
_DESCRIBE = AclOperation.DESCRIBE
_GROUP_AUTHORIZATION_FAILED = errors.GroupAuthorizationFailedError.code
_TOPIC_AUTHORIZATION_FAILED = errors.TopicAuthorizationFailedError.code

# OffsetFetch's topics asked for: v0-7's, and each group's from v8.
_FetchTopic = Union[OffsetFetchRequest.OffsetFetchRequestTopic, OffsetFetchRequest.OffsetFetchRequestTopics]


class GroupHandlers(HandlerBase):
    """The group APIs. A member's requests (join, sync, heartbeat, leave, commit) need READ
    on the group, as Kafka's do; describing it (and fetching its offsets, finding its
    coordinator) DESCRIBE, deleting it or its offsets DELETE; the topics of commits and
    offset deletions READ, those of offset fetches DESCRIBE."""

    def _group_refused(self, conn: Connection, operation: AclOperation, group_id: str) -> bool:
        return self.authz.enabled and not self.authz.allowed(conn, operation, _GROUP, group_id)

    @property
    def _groups(self) -> GroupCoordinatorApi:
        return self.broker.group_coordinator

    def find_coordinator(self, conn: Connection, req: FindCoordinatorRequest, version: int, slot: RequestSlot
                         ) -> Union[FindCoordinatorResponse, Awaitable[FindCoordinatorResponse]]:
        """v0-3 look one key up; v4+ a batch (KIP-699), each key answered on its own. In a
        cluster whose ``__consumer_offsets`` does not exist yet, it is created first (off the
        loop), as Kafka does on the first lookup."""
        keys = [req.key] if version < 4 else list(req.coordinator_keys)
        if req.key_type == GROUP_KEY and not self.broker.offsets_topic_ready() and \
                len(self.authz.refused_names(conn, _DESCRIBE, _GROUP, keys)) < len(set(keys)):
            return self._find_coordinator_creating(conn, req, version, self.broker.ensure_offsets_topic)
        if req.key_type == TRANSACTION_KEY and not self.broker.transaction_state_topic_ready() and \
                len(self.authz.refused_names(conn, _DESCRIBE, ResourceType.TRANSACTIONAL_ID, keys)) < len(set(keys)):
            return self._find_coordinator_creating(conn, req, version, self.broker.ensure_transaction_state_topic)
        return self._find_coordinator(conn, req, version)

    async def _find_coordinator_creating(self, conn: Connection, req: FindCoordinatorRequest, version: int,
                                         create: Callable[[], int]) -> FindCoordinatorResponse:
        try:
            await self._admin(create)
        except Exception as exc:  # noqa: BLE001 - the lookup answers COORDINATOR_NOT_AVAILABLE, clients retry
            self._failed(conn, exc, "creating the coordinator's topic")
        return self._find_coordinator(conn, req, version)

    def _find_coordinator(self, conn: Connection, req: FindCoordinatorRequest, version: int) -> FindCoordinatorResponse:
        if version < 4:
            found = self._coordinator_for(conn, req.key_type, version, req.key)
            return FindCoordinatorResponse(throttle_time_ms=0, error_code=found.error_code,
                                           error_message=found.error_message, node_id=found.node_id,
                                           host=found.host, port=found.port)
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            self._coordinator_for(conn, req.key_type, version, key) for key in req.coordinator_keys])

    def _coordinator_for(self, conn: Connection, key_type: int, version: int,
                         key: str) -> FindCoordinatorResponse.Coordinator:
        """A group's or a transactional id's coordinator: this broker on a single node, the
        leader of the key's ``__consumer_offsets`` or ``__transaction_state`` partition in a
        cluster. There is no share group coordinator (KIP-932): Kafka answers a share key
        INVALID_REQUEST before v6, and so does a Kafka broker without share groups at v6."""
        if key_type == GROUP_KEY and self._group_refused(conn, _DESCRIBE, key):
            return FindCoordinatorResponse.Coordinator(
                key=key, error_code=_GROUP_AUTHORIZATION_FAILED, error_message="not authorized to describe the group",
                node_id=-1, host="", port=-1)
        if key_type == TRANSACTION_KEY and not self.authz.allowed(conn, _DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                                                   key):
            return FindCoordinatorResponse.Coordinator(
                key=key, error_code=errors.TransactionalIdAuthorizationFailedError.code,
                error_message="not authorized to describe the transactional id", node_id=-1, host="", port=-1)
        if key_type in (GROUP_KEY, TRANSACTION_KEY):
            if key_type == TRANSACTION_KEY and not key:
                return FindCoordinatorResponse.Coordinator(
                    key=key, error_code=errors.InvalidRequestError.code,
                    error_message="the transactional id is empty", node_id=-1, host="", port=-1)
            code, node = self.broker.coordinator_for(key) if key_type == GROUP_KEY \
                else self.broker.coordinator_for_transaction(key)
            if not code:
                for broker_id, host, port, _ in self._brokers_for(conn)[1]:
                    if broker_id == node:
                        return FindCoordinatorResponse.Coordinator(key=key, error_code=0, error_message=None,
                                                                   node_id=node, host=host, port=port)
                code = errors.CoordinatorNotAvailableError.code
            return FindCoordinatorResponse.Coordinator(
                key=key, error_code=code, error_message="the coordinator is not available yet",
                node_id=-1, host="", port=-1)
        if key_type == SHARE_KEY:
            code, message = errors.InvalidRequestError.code, "share groups are not supported by this broker"
        else:
            code, message = errors.InvalidRequestError.code, "unknown coordinator key type %d" % key_type
        return FindCoordinatorResponse.Coordinator(key=key, error_code=code, error_message=message, node_id=-1,
                                                   host="", port=-1)

    async def join_group(self, conn: Connection, req: JoinGroupRequest, version: int,
                         slot: RequestSlot) -> JoinGroupResponse:
        if self._group_refused(conn, _READ, req.group_id):
            return JoinGroupResponse(throttle_time_ms=0, error_code=_GROUP_AUTHORIZATION_FAILED, generation_id=-1,
                                     protocol_type=None, protocol_name=None if version >= 7 else "", leader="",
                                     skip_assignment=False, member_id="", members=[])
        slot.release()  # parked until the rebalance completes
        rebalance_timeout = req.rebalance_timeout_ms
        if rebalance_timeout < 0:  # v0 has none: the session timeout stands in
            rebalance_timeout = req.session_timeout_ms
        future: "asyncio.Future[JoinResult]" = self.server.new_future()
        op = self._groups.join_group_async(
            req.group_id, req.member_id, conn.client_id, req.session_timeout_ms, rebalance_timeout,
            req.protocol_type, [(p.name, p.metadata) for p in req.protocols],
            group_instance_id=req.group_instance_id, client_host="/" + conn.peer_host,
            deliver=self.server.deliver_to(future),
            require_known_member_id=version >= 4, supports_skip_assignment=version >= 9, reason=req.reason)
        result = await self.server.parked(op, future, JoinResult(errors.NotCoordinatorError.code))
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=result.error_code, generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            # Nullable from v7; before, an error's protocol name is "".
            protocol_name=result.protocol_name if version >= 7 else result.protocol_name or "",
            leader=result.leader_id, skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=[JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=g, metadata=md)
                     for m, g, md in result.members],
        )

    async def sync_group(self, conn: Connection, req: SyncGroupRequest, version: int,
                         slot: RequestSlot) -> SyncGroupResponse:
        if self._group_refused(conn, _READ, req.group_id):
            return SyncGroupResponse(throttle_time_ms=0, error_code=_GROUP_AUTHORIZATION_FAILED, protocol_type=None,
                                     protocol_name=None, assignment=b"")
        slot.release()  # a follower waits for the leader's assignment
        assignments = {a.member_id: a.assignment for a in req.assignments} or None
        future: "asyncio.Future[SyncResult]" = self.server.new_future()
        op = self._groups.sync_group_async(req.group_id, req.generation_id, req.member_id, assignments,
                                           deliver=self.server.deliver_to(future),
                                           group_instance_id=req.group_instance_id,
                                           protocol_type=req.protocol_type, protocol_name=req.protocol_name)
        result = await self.server.parked(op, future, SyncResult(errors.NotCoordinatorError.code))
        if result.error_code == 0 and self.broker.clustered:
            # The group's new state is answered once the offsets topic's replicas have it.
            code = await self._replicated(req.group_id, for_commit=False)
            if code:
                result = SyncResult(code)
        protocol_type: Optional[str] = None
        protocol_name: Optional[str] = None
        if result.error_code == 0 and version >= 5:
            # The generation's protocol: it cannot change before the next generation.
            generation, protocol_type, protocol_name = self._groups.group_protocol(req.group_id)
            if generation != req.generation_id:  # a later generation already: the ones checked
                protocol_type, protocol_name = req.protocol_type, req.protocol_name
        return SyncGroupResponse(throttle_time_ms=0, error_code=result.error_code, protocol_type=protocol_type,
                                 protocol_name=protocol_name, assignment=result.assignment)

    def heartbeat(self, conn: Connection, req: HeartbeatRequest, version: int, slot: RequestSlot) -> HeartbeatResponse:
        if self._group_refused(conn, _READ, req.group_id):
            return HeartbeatResponse(throttle_time_ms=0, error_code=_GROUP_AUTHORIZATION_FAILED)
        code = self._groups.heartbeat(req.group_id, req.generation_id, req.member_id, req.group_instance_id)
        return HeartbeatResponse(throttle_time_ms=0, error_code=code)

    def leave_group(self, conn: Connection, req: LeaveGroupRequest, version: int,
                    slot: RequestSlot) -> LeaveGroupResponse:
        """v0-2 name one member; v3+ a batch, by member id or by group instance id (KIP-345),
        with each member's code and the group's at the top; v5 adds each member's reason."""
        if self._group_refused(conn, _READ, req.group_id):
            return LeaveGroupResponse(throttle_time_ms=0, error_code=_GROUP_AUTHORIZATION_FAILED, members=[])
        members = req.members if version >= 3 else [LeaveGroupRequest.MemberIdentity(member_id=req.member_id)]
        reasons = sorted({m.reason for m in members if m.reason})
        group_code, codes = self._groups.leave_group_members(
            req.group_id, [(m.member_id, m.group_instance_id) for m in members],
            reason="; ".join(reasons) or None)
        if version < 3:  # as Kafka's LeaveGroupResponse: the group's error, else the member's
            return LeaveGroupResponse(throttle_time_ms=0, error_code=group_code or (codes[0] if codes else 0),
                                      members=[])
        return LeaveGroupResponse(throttle_time_ms=0, error_code=group_code, members=[
            LeaveGroupResponse.MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                              error_code=c) for m, c in zip(members, codes)])

    async def _replicated(self, group_id: str, for_commit: bool,
                          outcome: Optional[Callable[[int], None]] = None) -> int:
        """Wait until the coordinator's writes for ``group_id`` are on every in-sync replica of
        the offsets topic; -> the code to answer with (0 when they are). ``outcome`` is told
        the code as the wait ends, whether or not anyone still waits for the answer."""
        future: "asyncio.Future[int]" = self.server.new_future()
        deliver = self.server.deliver_to(future)

        def replicated(code: int) -> None:
            if outcome is not None:
                outcome(code)
            deliver(code)

        op = self.broker.group_writes_replicated_async(group_id, for_commit, deliver=replicated)
        code: int = await self.server.parked(op, future, errors.NotCoordinatorError.code)
        return code

    def offset_commit(self, conn: Connection, req: OffsetCommitRequest, version: int, slot: RequestSlot
                      ) -> Union[OffsetCommitResponse, Awaitable[OffsetCommitResponse]]:
        """Every version commits to ``__consumer_offsets``: Kafka stored v0 commits in
        ZooKeeper, which pylogq does not have.

        v0 carries no generation or member: a simple commit (the defaults -1 and ""). v1
        sets each partition's commit timestamp (-1: now). v2-4 carry a retention time:
        pylogq's coordinator expires no offsets, so any retention (-1, the broker default,
        included) keeps them until the group or the offsets are deleted. v6 adds the
        leader epoch, v7 the group instance id (a static member's commit is fenced when
        another member took its instance over). v9: for a classic group the generation,
        and an unknown group is GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION.
        """
        if self._group_refused(conn, _READ, req.group_id):
            return self._offset_commit_response(req, {(t.name, p.partition_index): _GROUP_AUTHORIZATION_FAILED
                                                      for t in req.topics for p in t.partitions})
        refused_topics = self.authz.refused_names(conn, _READ, _TOPIC, (t.name for t in req.topics)) \
            if self.authz.enabled else NOTHING_REFUSED
        offsets: Dict[Tuple[str, int], Tuple[int, Optional[str]]] = {}
        epochs: Dict[Tuple[str, int], int] = {}
        timestamps: Dict[Tuple[str, int], int] = {}
        for topic in req.topics:
            if topic.name in refused_topics:
                continue
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                offsets[tp] = (p.committed_offset, p.committed_metadata)
                epochs[tp] = p.committed_leader_epoch
                timestamps[tp] = p.commit_timestamp
        unknown = {tp for tp in offsets if not self._partition_exists(*tp)}
        codes: Dict[Tuple[str, int], int] = {}
        complete: Optional[Callable[[int], None]] = None
        if len(unknown) < len(offsets):
            codes, complete = self._groups.commit_offsets_pending(
                req.group_id, req.generation_id_or_member_epoch, req.member_id,
                {tp: v for tp, v in offsets.items() if tp not in unknown},
                {tp: e for tp, e in epochs.items() if tp not in unknown},
                group_instance_id=req.group_instance_id, commit_timestamps=timestamps,
                unknown_group_not_found=version >= 9)
        for tp in unknown:
            codes[tp] = errors.UnknownTopicOrPartitionError.code
        for topic in req.topics:
            if topic.name in refused_topics:
                for p in topic.partitions:
                    codes[(topic.name, p.partition_index)] = _TOPIC_AUTHORIZATION_FAILED
        if self.broker.clustered and complete is not None and any(c == 0 for c in codes.values()):
            return self._offset_commit_replicated(req, codes, complete)
        if complete is not None:
            complete(0)  # a single node: written is committed
        return self._offset_commit_response(req, codes)

    async def _offset_commit_replicated(self, req: OffsetCommitRequest, codes: Dict[Tuple[str, int], int],
                                        complete: Callable[[int], None]) -> OffsetCommitResponse:
        """A commit is answered once every in-sync replica of the offsets topic has it (acks=all);
        until then OffsetFetch does not show it, and a commit whose replication fails is
        dropped (the previous one stays), as Kafka's pending offset commits are."""
        slot_code = await self._replicated(req.group_id, True, complete)
        if slot_code:
            codes = {tp: c or slot_code for tp, c in codes.items()}
        return self._offset_commit_response(req, codes)

    @staticmethod
    def _offset_commit_response(req: OffsetCommitRequest, codes: Dict[Tuple[str, int], int]) -> OffsetCommitResponse:
        return OffsetCommitResponse(throttle_time_ms=0, topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(name=topic.name, partitions=[
                OffsetCommitResponse.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=codes[(topic.name, p.partition_index)])
                for p in topic.partitions])
            for topic in req.topics])

    def txn_offset_commit(self, conn: Connection, req: TxnOffsetCommitRequest, version: int, slot: RequestSlot
                          ) -> Union[TxnOffsetCommitResponse, Awaitable[TxnOffsetCommitResponse]]:
        """A transactional producer's offsets of a group (KIP-98), committed when its transaction
        commits: the coordinator holds them pending until the transaction's marker.

        As Kafka's KafkaApis: WRITE on the transactional id (else every partition is
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (GROUP_AUTHORIZATION_FAILED),
        READ on each topic (its partitions TOPIC_AUTHORIZATION_FAILED), partitions that do
        not exist UNKNOWN_TOPIC_OR_PARTITION. v2 adds the leader epoch; v3 the generation,
        member id and group instance id (KIP-447: the member is checked only when given);
        v4 may answer TRANSACTION_ABORTABLE, which only Kafka's partition verification
        (KIP-890) gives. v0-1 answer COORDINATOR_LOAD_IN_PROGRESS as COORDINATOR_NOT_AVAILABLE,
        as Kafka does for the clients before 2.0 that treat it as fatal. In a cluster the
        answer waits for the replicas of the offsets topic, as an OffsetCommit's does.
        """
        wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        if not self.authz.allowed(conn, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            code = errors.TransactionalIdAuthorizationFailedError.code
            return self._txn_offset_commit_response(req, version, {tp: code for tp in wanted})
        if self._group_refused(conn, _READ, req.group_id):
            return self._txn_offset_commit_response(req, version, {tp: _GROUP_AUTHORIZATION_FAILED for tp in wanted})
        refused_topics = self.authz.refused_names(conn, _READ, _TOPIC, (t.name for t in req.topics)) \
            if self.authz.enabled else NOTHING_REFUSED
        codes: Dict[Tuple[str, int], int] = {}
        offsets: Dict[Tuple[str, int], TxnOffset] = {}
        for topic in req.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if topic.name in refused_topics:
                    codes[tp] = _TOPIC_AUTHORIZATION_FAILED
                elif not self._partition_exists(*tp):
                    codes[tp] = errors.UnknownTopicOrPartitionError.code
                else:
                    offsets[tp] = TxnOffset(p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
        if not offsets:
            return self._txn_offset_commit_response(req, version, codes)
        written, complete = self._groups.txn_offset_commit_pending(
            req.group_id, req.producer_id, req.producer_epoch, req.generation_id, req.member_id,
            req.group_instance_id, offsets)
        codes.update(written)
        if self.broker.clustered and any(c == 0 for c in written.values()):
            return self._txn_offset_commit_replicated(req, version, codes, complete)
        complete(0)  # a single node: written is committed
        return self._txn_offset_commit_response(req, version, codes)

    async def _txn_offset_commit_replicated(self, req: TxnOffsetCommitRequest, version: int,
                                            codes: Dict[Tuple[str, int], int],
                                            complete: Callable[[int], None]) -> TxnOffsetCommitResponse:
        """Answered once every in-sync replica of the offsets topic has the write; one that does
        not get there is dropped (the client retries it), as Kafka's failed pending write is."""
        slot_code = await self._replicated(req.group_id, True, complete)
        if slot_code:
            codes = {tp: c or slot_code for tp, c in codes.items()}
        return self._txn_offset_commit_response(req, version, codes)

    @staticmethod
    def _txn_offset_commit_response(req: TxnOffsetCommitRequest, version: int,
                                    codes: Dict[Tuple[str, int], int]) -> TxnOffsetCommitResponse:
        loading, unavailable = errors.CoordinatorLoadInProgressError.code, errors.CoordinatorNotAvailableError.code
        out = []
        for topic in req.topics:
            partitions = []
            for p in topic.partitions:
                code = codes[(topic.name, p.partition_index)]
                if version < 2 and code == loading:
                    code = unavailable
                partitions.append(TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=code))
            out.append(TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name=topic.name, partitions=partitions))
        return TxnOffsetCommitResponse(throttle_time_ms=0, topics=out)

    def _partition_exists(self, topic: str, partition: int) -> bool:
        try:
            return 0 <= partition < self.broker.partitions_for(topic)
        except errors.UnknownTopicOrPartitionError:
            return False

    def offset_fetch(self, conn: Connection, req: OffsetFetchRequest, version: int,
                     slot: RequestSlot) -> OffsetFetchResponse:
        """v0-7 fetch one group's offsets, v8+ several groups' (each with its own error).

        v0 read ZooKeeper in Kafka; here every version reads ``__consumer_offsets``.
        v0-1 have no top-level error: a group error goes to every partition. v2+ accept
        null topics (every committed partition). v5+ return the committed leader epoch.
        v7+'s require_stable (KIP-447) answers UNSTABLE_OFFSET_COMMIT for a partition whose
        offset an undecided transaction holds (TxnOffsetCommit): the consumer asks again.
        v9's member id and epoch concern KIP-848 consumer groups; a classic group
        ignores them, as Kafka does.
        """
        if version >= 8:
            groups = []
            for g in req.groups:
                code, found = self._fetch_group(conn, g.group_id, g.topics, req.require_stable)
                topics = [OffsetFetchResponse.OffsetFetchResponseTopics(name=topic, partitions=[
                    OffsetFetchResponse.OffsetFetchResponsePartitions(
                        partition_index=p, committed_offset=c.offset, committed_leader_epoch=c.leader_epoch,
                        metadata=c.metadata, error_code=c.error_code)
                    for p, c in partitions]) for topic, partitions in found]
                groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(group_id=g.group_id, topics=topics,
                                                                           error_code=code))
            return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
        code, found = self._fetch_group(conn, req.group_id, req.topics, version >= 7 and req.require_stable)
        # v0-1: a group error goes to every partition.
        partition_code = code if version < 2 else 0
        return OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(name=topic, partitions=[
                OffsetFetchResponse.OffsetFetchResponsePartition(
                    partition_index=p, committed_offset=c.offset, committed_leader_epoch=c.leader_epoch,
                    metadata=c.metadata, error_code=partition_code or c.error_code)
                for p, c in partitions])
            for topic, partitions in found])

    def _fetch_group(self, conn: Connection, group_id: str, topics: Optional[Sequence[_FetchTopic]],
                     require_stable: bool = False) -> Tuple[int, List[Tuple[str, List[Tuple[int, CommittedOffset]]]]]:
        """-> (the group's error code, [(topic, [(partition, its committed offset)])]): the
        partitions asked for, in the request's order, or every committed one (``topics`` None).
        A partition without a committed offset has epoch -1 and metadata "". A topic the
        connection may not describe is left out of "every one", and answers
        TOPIC_AUTHORIZATION_FAILED when asked for."""
        wanted = None
        if topics is not None:
            wanted = [(t.name, p) for t in topics for p in t.partition_indexes]
        if self._group_refused(conn, _DESCRIBE, group_id):
            return _GROUP_AUTHORIZATION_FAILED, [(t, [(p, CommittedOffset(-1)) for p in ps])
                                                  for t, ps in _by_topic(wanted or [])]
        hidden = self.authz.refused_names(conn, _DESCRIBE, _TOPIC, (t for t, _ in wanted or [])) \
            if self.authz.enabled else NOTHING_REFUSED
        asked = wanted if not hidden else [tp for tp in wanted or [] if tp[0] not in hidden]
        code, found = self._groups.fetch_committed(group_id, asked, require_stable)
        if self.authz.enabled and wanted is None:
            hidden = self.authz.refused_names(conn, _DESCRIBE, _TOPIC, (t for t, _ in found))
            found = {tp: c for tp, c in found.items() if tp[0] not in hidden}
        if code and asked is not None:
            found = {tp: CommittedOffset(-1) for tp in asked}
        by_topic: Dict[str, List[Tuple[int, CommittedOffset]]] = {}
        for (topic, partition), c in sorted(found.items()):
            by_topic.setdefault(topic, []).append(
                (partition, c if c.offset >= 0 else c._replace(leader_epoch=-1, metadata="")))
        for topic, partition in wanted or []:
            if topic in hidden:
                by_topic.setdefault(topic, []).append(
                    (partition, CommittedOffset(-1, error_code=_TOPIC_AUTHORIZATION_FAILED)))
        if wanted is not None:  # keep the request's order
            order = list(dict.fromkeys(t for t, _ in wanted))
            return code, [(t, by_topic.get(t, [])) for t in order]
        return code, list(by_topic.items())

    def describe_groups(self, conn: Connection, req: DescribeGroupsRequest, version: int,
                        slot: RequestSlot) -> DescribeGroupsResponse:
        """v3+ may ask for the authorized operations: without an authorizer, all of a
        group's (only for a group described without error, as Kafka); v4+ report each
        member's group instance id."""
        out = []
        for group_id in req.groups:
            if self._group_refused(conn, _DESCRIBE, group_id):
                out.append(DescribeGroupsResponse.DescribedGroup(
                    error_code=_GROUP_AUTHORIZATION_FAILED, group_id=group_id, group_state="", protocol_type="",
                    protocol_data="", members=[], authorized_operations=NOT_COMPUTED))
                continue
            d = self._groups.describe_group(group_id)
            out.append(DescribeGroupsResponse.DescribedGroup(
                error_code=d.error, group_id=group_id, group_state=d.state,
                protocol_type=d.protocol_type, protocol_data=d.protocol,
                members=[DescribeGroupsResponse.DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id,
                    client_id=m.client_id, client_host=m.client_host,
                    member_metadata=m.metadata, member_assignment=m.assignment)
                    for m in d.members],
                authorized_operations=self.authz.operations(conn, _GROUP, group_id)
                if req.include_authorized_operations and not d.error else NOT_COMPUTED,
            ))
        return DescribeGroupsResponse(throttle_time_ms=0, groups=out)

    def list_groups(self, conn: Connection, req: ListGroupsRequest, version: int,
                    slot: RequestSlot) -> ListGroupsResponse:
        """v4+ filter by state and report it, v5+ by type (every group here is "classic")."""
        listed = self._groups.listed_groups(req.states_filter, req.types_filter)
        if not self.authz.cluster(conn, _DESCRIBE):  # without DESCRIBE on the cluster: the groups it may describe
            hidden = self.authz.refused_names(conn, _DESCRIBE, _GROUP, (g.group_id for g in listed))
            listed = [g for g in listed if g.group_id not in hidden]
        return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=[
            ListGroupsResponse.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
                                           group_type=g.group_type) for g in listed])

    async def delete_groups(self, conn: Connection, req: DeleteGroupsRequest, version: int,
                            slot: RequestSlot) -> DeleteGroupsResponse:
        refused = self.authz.refused_names(conn, AclOperation.DELETE, _GROUP, req.groups_names)
        allowed = [g for g in dict.fromkeys(req.groups_names) if g not in refused]
        codes: Dict[str, int] = await self._blocking(self._groups.delete_groups, allowed) if allowed else {}
        codes.update({g: _GROUP_AUTHORIZATION_FAILED for g in refused})
        return DeleteGroupsResponse(throttle_time_ms=0, results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=codes[g]) for g in req.groups_names])

    async def offset_delete(self, conn: Connection, req: OffsetDeleteRequest, version: int,
                            slot: RequestSlot) -> OffsetDeleteResponse:
        if self._group_refused(conn, AclOperation.DELETE, req.group_id):
            return OffsetDeleteResponse(error_code=_GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
        refused_topics = self.authz.refused_names(conn, _READ, _TOPIC, (t.name for t in req.topics))
        wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        group_error: int
        codes: Dict[Tuple[str, int], int]
        try:
            allowed = [tp for tp in wanted if tp[0] not in refused_topics]
            group_error, codes = await self._blocking(self.broker.delete_offsets, req.group_id, allowed) \
                if allowed or not refused_topics else (0, {})
            codes.update({tp: _TOPIC_AUTHORIZATION_FAILED for tp in wanted if tp[0] in refused_topics})
        except Exception as exc:  # noqa: BLE001 - reported as the response's error
            group_error, codes = error_code(self._failed(conn, exc, "delete offsets of group %r" % req.group_id)), {}
        if group_error:
            return OffsetDeleteResponse(error_code=group_error, throttle_time_ms=0, topics=[])
        by_topic: Dict[str, List[int]] = {}
        for topic, partition in dict.fromkeys(wanted):
            by_topic.setdefault(topic, []).append(partition)
        return OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(name=topic, partitions=[
                OffsetDeleteResponse.OffsetDeleteResponsePartition(partition_index=p, error_code=codes[(topic, p)])
                for p in parts])
            for topic, parts in by_topic.items()])


def _by_topic(partitions: Sequence[Tuple[str, int]]) -> List[Tuple[str, List[int]]]:
    """Partitions grouped by topic, in the order given."""
    out: Dict[str, List[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return list(out.items())
