"""Kafka's group coordinator: consumer group membership, rebalances and committed offsets.

:class:`GroupCoordinator` runs the group protocol (Kafka's GroupCoordinator) over the
groups its :class:`~pylogq.cluster.coordinator.group.metadata_manager.GroupMetadataManager`
keeps: the state of each group and member is :mod:`.group`'s, and the manager knows
which ``__consumer_offsets`` partitions are served here, reads them back
(:meth:`GroupCoordinator.load`, :meth:`GroupCoordinator.load_partition`) and writes
group metadata and committed offsets to them in Kafka's formats, through two callables
the broker hands over, so the coordinator does not depend on the broker. Members call it
from their own threads; the calls mirror the protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, TxnOffsetCommit, OffsetFetch, ListGroups,
DescribeGroups, DeleteGroups, OffsetDelete) and return Kafka error codes, as the wire
does (a transaction's offsets wait for its marker: :meth:`GroupCoordinator.complete_txn`,
which the broker calls once it wrote one to ``__consumer_offsets``); the offset
calls are :mod:`.offsets`', the administrative ones :mod:`.admin`', and the groups'
transitions with the deadlines that drive them :mod:`.rebalance`'s. Blocking calls
(a join waiting for the rebalance, a follower's sync waiting for the leader)
are delayed operations (:mod:`pylogq.cluster.delayed`) watched under their group:
the ``*_async`` calls hand the answer to a callback and park no thread, the
blocking calls wait for the same operation on the caller's own thread. One
background thread expires session and rebalance deadlines.

A dynamic member's first join with an empty member id gets MEMBER_ID_REQUIRED
and a generated id when the caller asks for it (``require_known_member_id``, as
Kafka does for JoinGroup v4+, KIP-394): the id waits as a pending member until
the member joins again with it, or its session timeout passes. A static member
(``group_instance_id``, KIP-345) that joins with an empty member id takes over
its instance's place in the group, and calls made with the replaced member id
are fenced (FENCED_INSTANCE_ID).

Differences from Kafka: the in-process API's join with an empty member id gets
its id at once; committed offsets never expire (no ``offsets.retention.minutes``:
a commit's retention time is accepted and ignored, and offsets stay until their
group or the offsets are deleted); a storage call runs under the coordinator's
lock, which keeps the order of the log equal to the order of the in-memory
changes.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, TypeVar

from ....errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidArgumentError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
    error_for_code,
)
from ...contract import (
    NO_GENERATION,
    CommittedOffset,
    GroupDescription,
    JoinResult,
    ListedGroup,
    MemberDescription,
    SyncResult,
    TxnOffset,
)
from ...delayed import DelayedCall, DelayedOperationPurgatory, Timer
from .group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    NONE,
    PREPARING_REBALANCE,
    STABLE,
    GroupMetadata,
    MemberMetadata,
    Partition,
)
from .admin import GroupAdmin
from .metadata_manager import GroupMetadataManager, StoredBatch
from .offsets import GroupOffsets
from .offsets_schema import partition_for_group
from .rebalance import Rebalancer

__all__ = [
    "COMPLETING_REBALANCE",
    "DEAD",
    "EMPTY",
    "GroupCoordinator",
    "GroupDescription",
    "JoinResult",
    "MemberDescription",
    "PREPARING_REBALANCE",
    "STABLE",
    "SyncResult",
    "partition_for_group",
    "raise_for",
]

log = logging.getLogger(__name__)

R = TypeVar("R")

NO_MEMBER = ""



def raise_for(code: int) -> None:
    """Raise the pylogq error for a Kafka error code; do nothing for 0."""
    cls = error_for_code(code)
    if cls is not None:
        raise cls()


class GroupCoordinator:
    """Consumer groups and their committed offsets, stored in ``__consumer_offsets``.

    Thread-safe: one lock guards every group. Calls that wait are delayed
    operations watched under their group. Session and rebalance deadlines run on
    the delayed operations' timer (the broker's, or one of the coordinator's own):
    at the earliest one, members whose session timed out are removed and
    rebalances whose timeout passed complete. With ``start_timer=False`` nothing
    runs by itself and :meth:`tick` expires deadlines by hand, as with a fake
    ``clock`` (seconds; with the timer it must be ``time.monotonic``).
    """

    def __init__(
        self,
        append: Callable[[int, bytes], None],
        read_all: Callable[[int], Iterable[StoredBatch]],
        num_partitions: int = 50,
        initial_rebalance_delay_ms: int = 3000,
        clock: Callable[[], float] = time.monotonic,
        group_min_session_timeout_ms: int = 6000,
        group_max_session_timeout_ms: int = 1800000,
        offset_metadata_max_bytes: int = 4096,
        start_timer: bool = True,
        timer: Optional[Timer] = None,
    ) -> None:
        if num_partitions <= 0:
            raise InvalidArgumentError("num_partitions must be positive, got %r" % (num_partitions,))
        if initial_rebalance_delay_ms < 0:
            raise InvalidArgumentError("initial_rebalance_delay_ms must be >= 0, got %r" % (initial_rebalance_delay_ms,))
        #: The groups, the partitions served and their storage (lock held for every call).
        self.metadata = GroupMetadataManager(append, read_all, num_partitions)
        self.num_partitions = num_partitions
        self._clock = clock
        self.group_min_session_timeout_ms = group_min_session_timeout_ms
        self.group_max_session_timeout_ms = group_max_session_timeout_ms
        # Reentrant: a waiting operation's deadline answer takes it, and may be forced
        # from a path that already holds it.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        # Joins and syncs waiting for their answer, watched under their group id; the
        # timer (the broker's, or one of our own) expires callers' ``timeout_s``.
        self._own_timer = timer is None
        self._delay_timer = timer if timer is not None else Timer("group-coordinator-delayed")
        self._waits = DelayedOperationPurgatory("rebalance", self._delay_timer)
        self._groups = self.metadata.groups  # the manager's map, by group id
        self._closed = False
        #: The groups' transitions and the session and rebalance deadlines that drive them.
        self._rebalancer = Rebalancer(self.metadata, self._cond, self._is_closed, clock, initial_rebalance_delay_ms,
                                      self._waits, self._delay_timer, start_timer)
        #: OffsetCommit, TxnOffsetCommit, OffsetFetch and OffsetDelete.
        self.offsets = GroupOffsets(self.metadata, self._cond, self._is_closed, self._rebalancer.touch,
                                    offset_metadata_max_bytes)
        #: ListGroups, DescribeGroups and DeleteGroups.
        self.admin = GroupAdmin(self.metadata, self._cond)

    def _is_closed(self) -> bool:
        """Whether :meth:`close` was called (the collaborators ask, under the lock)."""
        return self._closed

    @property
    def initial_rebalance_delay_ms(self) -> int:
        """How long the first rebalance of an Empty group waits for more members."""
        return self._rebalancer.initial_rebalance_delay_ms

    @property
    def offset_metadata_max_bytes(self) -> int:
        """The longest metadata string an offset commit may carry (UTF-8 bytes)."""
        return self.offsets.offset_metadata_max_bytes

    @property
    def completed_rebalances(self) -> int:
        """Join phases that ended with a new generation (the rebalance metric)."""
        return self._rebalancer.completed_rebalances

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Stop the deadlines and answer every waiting call (COORDINATOR_NOT_AVAILABLE)."""
        with self._cond:
            self._closed = True
            for group in self._groups.values():
                for m in group.members.values():
                    if m.awaiting_join and m.join_result is None:
                        m.join_result = JoinResult(CoordinatorNotAvailableError.code)
                    if m.awaiting_sync and m.sync_result is None:
                        m.sync_result = SyncResult(CoordinatorNotAvailableError.code)
            for group_id in list(self._groups):
                self._waits.check_and_complete(group_id)
        self._waits.close()
        if self._own_timer:
            self._delay_timer.close()

    def __enter__(self) -> "GroupCoordinator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def partition_in_doubt(self) -> Optional[Callable[[int], bool]]:
        """Set by a broker of a cluster: whether its leadership of a ``__consumer_offsets``
        partition is in doubt (its store session may have ended); its groups then answer
        NOT_COORDINATOR rather than from a cache a new coordinator may have overtaken."""
        return self.metadata.partition_in_doubt

    @partition_in_doubt.setter
    def partition_in_doubt(self, check: Optional[Callable[[int], bool]]) -> None:
        with self._cond:
            self.metadata.partition_in_doubt = check

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of ``group_id``."""
        return self.metadata.partition_for(group_id)

    def serves_partition(self, partition: int) -> bool:
        """Whether the groups of this ``__consumer_offsets`` partition are served (loaded)."""
        with self._cond:
            return self.metadata.serves(partition)

    def begin_loading(self, partition: int) -> None:
        """Answer COORDINATOR_LOAD_IN_PROGRESS for the partition's groups from now until
        :meth:`load_partition` (queued elsewhere) has read it, rather than NOT_COORDINATOR."""
        with self._cond:
            self.metadata.begin_loading(partition)

    def serve_partitions(self, partitions: Iterable[int]) -> None:
        """Serve only the groups of these partitions from now on (a cluster member: the
        partitions it leads); the others' groups are dropped as by :meth:`unload_partition`."""
        with self._cond:
            dropped = self.metadata.serve_only(partitions)
        for p in dropped:
            self.unload_partition(p)

    def serve_all_partitions(self) -> None:
        """Serve the groups of every partition (a single node once ``__consumer_offsets`` exists:
        it was created empty, so there is nothing to load)."""
        with self._cond:
            self.metadata.serve_all()

    def load_partition(self, partition: int, begun: bool = False) -> None:
        """Become the coordinator of the groups in one ``__consumer_offsets`` partition: read it
        (to its log end, as Kafka does; calls for its groups answer COORDINATOR_LOAD_IN_PROGRESS
        meanwhile) and serve them. ``begun``: :meth:`begin_loading` was called when the broker
        came to lead the partition, and a load of a partition unloaded since (its leadership
        gone again) does nothing. Blocking: not for the event loop."""
        with self._cond:
            if begun:
                if partition not in self.metadata.loading:
                    return
            else:
                self.metadata.begin_loading(partition)
        loaded = self.metadata.read_partitions([partition])  # failing, the partition stays loading
        with self._cond:
            if self.metadata.finish_loading(partition, loaded, self._clock()):
                self._rebalancer.reschedule()
                log.info("coordinator: loaded %d groups of __consumer_offsets-%d", len(loaded), partition)

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating the groups of one partition (its leadership moved): their waiting
        calls answer NOT_COORDINATOR and the clients find the new coordinator."""
        with self._cond:
            gone = self.metadata.unload(partition)
            for group in gone.values():
                for m in group.members.values():
                    if m.awaiting_join and m.join_result is None:
                        m.join_result = JoinResult(NotCoordinatorError.code, member_id=m.member_id)
                    if m.awaiting_sync and m.sync_result is None:
                        m.sync_result = SyncResult(NotCoordinatorError.code)
        for group_id in gone:
            self._waits.check_and_complete(group_id)
        if gone:
            log.info("coordinator: unloaded %d groups of __consumer_offsets-%d", len(gone), partition)

    def load(self) -> None:
        """Rebuild groups and committed offsets from every partition of ``__consumer_offsets``.

        The last record of a key wins and a tombstone deletes it. A group with
        stored members comes back Stable (its members must heartbeat within
        their session timeouts); a group with no members, or with offsets only,
        comes back Empty. Transactional offset commits are replayed with their
        producers' markers: those of a transaction still open stay pending.
        """
        loaded = self.metadata.read_partitions(range(self.num_partitions))
        with self._cond:
            self.metadata.clear()
            self.metadata.install(loaded, self._clock())
            self._rebalancer.reschedule()

    # -- membership ----------------------------------------------------------------

    def join_group(
        self,
        group_id: str,
        member_id: str,
        client_id: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[Tuple[str, bytes]],
        group_instance_id: Optional[str] = None,
        timeout_s: Optional[float] = None,
        client_host: str = "/127.0.0.1",
    ) -> JoinResult:
        """Join (or rejoin) a group; blocks until the rebalance completes.

        An empty ``member_id`` gets ``client_id + "-" + uuid4``. The result
        carries the new generation, the chosen protocol, the leader, this
        member's id and, for the leader, every member's metadata for the chosen
        protocol. A join that does not complete within ``timeout_s`` returns
        REQUEST_TIMED_OUT and leaves the member in the group (it can rejoin).
        """
        op = self.join_group_async(group_id, member_id, client_id, session_timeout_ms, rebalance_timeout_ms,
                                   protocol_type, protocols, group_instance_id=group_instance_id,
                                   timeout_s=timeout_s, client_host=client_host)
        op.wait()
        return op.answer()

    def join_group_async(
        self,
        group_id: str,
        member_id: str,
        client_id: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[Tuple[str, bytes]],
        group_instance_id: Optional[str] = None,
        timeout_s: Optional[float] = None,
        client_host: str = "/127.0.0.1",
        deliver: Callable[[JoinResult], None] = lambda result: None,
        *,
        require_known_member_id: bool = False,
        supports_skip_assignment: bool = False,
        reason: Optional[str] = None,
    ) -> "DelayedCall[JoinResult]":
        """:meth:`join_group` as a delayed operation: ``deliver(result)`` gets the answer.

        Returns at once with the operation (completed already when the answer
        needs no wait); no thread waits for it. ``deliver`` runs on whichever
        thread completes the join and must not block.

        ``require_known_member_id`` (JoinGroup v4+): a dynamic member joining with an
        empty id gets MEMBER_ID_REQUIRED and its id, and must join again with it.
        ``supports_skip_assignment`` (JoinGroup v9+): a static leader that rejoins a
        Stable group is told it leads and must skip the assignment. ``reason`` is
        the client's reason for joining, for the log.
        """
        protocols = [(str(name), bytes(data)) for name, data in protocols]
        if reason:
            log.info("member %r joins group %s: %s", member_id or client_id, group_id, reason)
        with self._cond:
            answer = self._join(group_id, member_id, client_id, session_timeout_ms, rebalance_timeout_ms,
                                protocol_type, protocols, group_instance_id, client_host,
                                require_known_member_id, supports_skip_assignment)
            if isinstance(answer, JoinResult):
                return DelayedCall.immediate(answer, deliver)
            member = answer

            def take() -> Optional[JoinResult]:
                result, member.join_result = member.join_result, None
                return result

            return self._park(group_id, take, lambda: JoinResult(RequestTimedOutError.code, member_id=member.member_id),
                              timeout_s, deliver)

    def _join(self, group_id: str, member_id: str, client_id: str, session_timeout_ms: int,
              rebalance_timeout_ms: int, protocol_type: str, protocols: List[Tuple[str, bytes]],
              group_instance_id: Optional[str], client_host: str, require_known_member_id: bool = False,
              supports_skip_assignment: bool = False) -> "JoinResult | MemberMetadata":
        """A join's immediate answer, or the member that waits for the rebalance (lock held)."""
        if self._closed:
            return JoinResult(CoordinatorNotAvailableError.code, member_id=member_id)
        if not group_id:
            return JoinResult(InvalidGroupIdError.code, member_id=member_id)
        owner = self.metadata.owner_error(group_id)
        if owner != NONE:
            return JoinResult(owner, member_id=member_id)
        if not self.group_min_session_timeout_ms <= session_timeout_ms <= self.group_max_session_timeout_ms:
            return JoinResult(InvalidSessionTimeoutError.code, member_id=member_id)
        if not protocol_type or not protocols:
            return JoinResult(InconsistentGroupProtocolError.code, member_id=member_id)
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(UnknownMemberIdError.code, member_id=member_id)
            group = self._groups[group_id] = GroupMetadata(group_id)
        if group.state == DEAD:
            return JoinResult(CoordinatorNotAvailableError.code, member_id=member_id)
        if not group.supports(protocol_type, protocols):
            return JoinResult(InconsistentGroupProtocolError.code, member_id=member_id)

        if not member_id:
            # Kafka's generateMemberId: a static member's id starts with its instance id.
            new_id = "%s-%s" % (group_instance_id if group_instance_id is not None else client_id, uuid.uuid4())
            if group_instance_id is not None:
                old_id = group.static_member_id(group_instance_id)
                if old_id is not None:
                    log.info("static member %s of group %s rejoins as %s", group_instance_id, group_id, new_id)
                    return self._replace_static_member(group, old_id, new_id, protocols, rebalance_timeout_ms,
                                                       session_timeout_ms, supports_skip_assignment)
            elif require_known_member_id:
                group.pending[new_id] = self._clock() + session_timeout_ms / 1000.0
                self._rebalancer.reschedule()
                return JoinResult(MemberIdRequiredError.code, member_id=new_id)
            member = MemberMetadata(new_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                             session_timeout_ms, protocol_type, protocols)
            self._rebalancer.add_member_and_rebalance(group, member)
            return member
        if member_id in group.pending and group_instance_id is None:
            # The second join of a member that was told MEMBER_ID_REQUIRED.
            del group.pending[member_id]
            member = MemberMetadata(member_id, None, client_id, client_host, rebalance_timeout_ms,
                             session_timeout_ms, protocol_type, protocols)
            self._rebalancer.add_member_and_rebalance(group, member)
            return member
        code = group.validate_member(member_id, group_instance_id)
        if code != NONE or group.state == EMPTY:
            return JoinResult(code or UnknownMemberIdError.code, member_id=member_id)
        member = group.members[member_id]
        if group.state == PREPARING_REBALANCE:
            self._rebalancer.update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                         session_timeout_ms)
        elif group.state == COMPLETING_REBALANCE:
            if member.protocols == protocols:
                # The member lost the join response: answer again for this generation.
                return self._rebalancer.join_result(group, member)
            self._rebalancer.update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                         session_timeout_ms)
        else:  # Stable
            if member.member_id == group.leader_id or member.protocols != protocols:
                self._rebalancer.update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                             session_timeout_ms)
            else:
                # A follower rejoining with unchanged metadata: no rebalance needed.
                self._rebalancer.touch(member)
                return self._rebalancer.join_result(group, member)
        return member

    def _replace_static_member(self, group: GroupMetadata, old_id: str, new_id: str, protocols: List[Tuple[str, bytes]],
                               rebalance_timeout_ms: int, session_timeout_ms: int,
                               supports_skip_assignment: bool) -> "JoinResult | MemberMetadata":
        """A static member rejoined with a new member id (Kafka's updateStaticMemberAndRebalance).

        The old id is fenced: a join or sync it is blocked in is answered
        FENCED_INSTANCE_ID. In a Stable group whose protocol stays the same the
        member keeps its assignment and no rebalance starts; otherwise the group
        rebalances. Lock held.
        """
        old = group.members.pop(old_id)
        current_leader = group.leader_id
        if old.awaiting_join:
            old.awaiting_join = False
            old.join_result = JoinResult(FencedInstanceIdError.code, member_id=old_id)
        if old.awaiting_sync:
            old.awaiting_sync = False
            old.sync_result = SyncResult(FencedInstanceIdError.code)
        member = MemberMetadata(new_id, old.group_instance_id, old.client_id, old.client_host, old.rebalance_timeout_ms,
                         old.session_timeout_ms, old.protocol_type, old.protocols)
        member.assignment = old.assignment
        group.members[new_id] = member
        if group.leader_id == old_id:
            group.leader_id = new_id
        self._rebalancer.touch(member)
        if group.state == STABLE:
            member.protocols = protocols
            member.rebalance_timeout_ms = rebalance_timeout_ms
            member.session_timeout_ms = session_timeout_ms
            if group.select_protocol() == group.protocol_name:
                code = self.metadata.store_group(group, {m.member_id: m.assignment for m in group.members.values()})
                if code != NONE:  # as Kafka: the old member id stays the instance's
                    del group.members[new_id]
                    group.members[old_id] = old
                    group.leader_id = current_leader
                    self._rebalancer.touch(old)
                    self._rebalancer.changed(group)
                    return JoinResult(code, group.generation_id, group.protocol_name, current_leader or "",
                                      "", protocol_type=group.protocol_type)
                self._rebalancer.changed(group)
                if supports_skip_assignment and group.leader_id == new_id:
                    # KIP-814: the leader learns it leads, but keeps the current assignment.
                    result = self._rebalancer.join_result(group, member)
                    return result._replace(skip_assignment=True)
                # The old leader id keeps a rejoining leader from assigning anew: a Stable
                # group would not pass its next sync's assignment on.
                return JoinResult(NONE, group.generation_id, group.protocol_name, current_leader or "", new_id, [],
                                  protocol_type=group.protocol_type)
            member.awaiting_join = True
            self._rebalancer.prepare_rebalance(group)
            return member
        self._rebalancer.update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                     session_timeout_ms)
        return member

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: Optional[Dict[str, bytes]] = None,
        timeout_s: Optional[float] = None,
    ) -> SyncResult:
        """Send the leader's assignments, or (a follower) wait for them; returns this member's assignment.

        A follower blocks until the leader syncs, a new rebalance starts
        (REBALANCE_IN_PROGRESS) or ``timeout_s`` passes (REQUEST_TIMED_OUT).
        """
        op = self.sync_group_async(group_id, generation_id, member_id, assignments, timeout_s=timeout_s)
        op.wait()
        return op.answer()

    def sync_group_async(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: Optional[Dict[str, bytes]] = None,
        timeout_s: Optional[float] = None,
        deliver: Callable[[SyncResult], None] = lambda result: None,
        *,
        group_instance_id: Optional[str] = None,
        protocol_type: Optional[str] = None,
        protocol_name: Optional[str] = None,
    ) -> "DelayedCall[SyncResult]":
        """:meth:`sync_group` as a delayed operation: ``deliver(result)`` gets the answer (see
        :meth:`join_group_async`).

        A static member's ``group_instance_id`` must still be its own (else
        FENCED_INSTANCE_ID); a ``protocol_type`` or ``protocol_name`` given (SyncGroup
        v5+, KIP-559) must be the group's (else INCONSISTENT_GROUP_PROTOCOL).
        """
        with self._cond:
            answer = self._sync(group_id, generation_id, member_id, assignments, group_instance_id,
                                protocol_type, protocol_name)
            if isinstance(answer, SyncResult):
                return DelayedCall.immediate(answer, deliver)
            member = answer

            def take() -> Optional[SyncResult]:
                result, member.sync_result = member.sync_result, None
                return result

            def timed_out() -> SyncResult:
                if member.awaiting_sync:
                    member.awaiting_sync = False
                    self._rebalancer.touch(member)
                    self._rebalancer.reschedule()  # its session counts again
                return SyncResult(RequestTimedOutError.code)

            return self._park(group_id, take, timed_out, timeout_s, deliver)

    def _park(self, group_id: str, take: Callable[[], Optional[R]], timed_out: Callable[[], R],
              timeout_s: Optional[float], deliver: Callable[[R], None]) -> "DelayedCall[R]":
        """A member's answer to come, as a delayed operation watched under its group (lock held):
        ``take`` returns the answer once it is set (and clears it), ``timed_out`` gives the answer
        when ``timeout_s`` passes first; both run under the lock."""

        def on_deadline() -> R:
            with self._cond:
                found = take()
                return found if found is not None else timed_out()

        op = DelayedCall(None if timeout_s is None else time.monotonic() + timeout_s, take, on_deadline, deliver)
        self._waits.try_complete_else_watch(op, [group_id])
        return op

    def _sync(self, group_id: str, generation_id: int, member_id: str, assignments: Optional[Dict[str, bytes]],
              group_instance_id: Optional[str] = None, protocol_type: Optional[str] = None,
              protocol_name: Optional[str] = None) -> "SyncResult | MemberMetadata":
        """A sync's immediate answer, or the member that waits for its assignment (lock held)."""
        if self._closed:
            return SyncResult(CoordinatorNotAvailableError.code)
        owner = self.metadata.owner_error(group_id)
        if owner != NONE:
            return SyncResult(owner)
        group = self._groups.get(group_id)
        if group is None:
            return SyncResult(UnknownMemberIdError.code)
        if group.state == DEAD:
            return SyncResult(CoordinatorNotAvailableError.code)
        code = group.validate_member(member_id, group_instance_id)
        if code != NONE or group.state == EMPTY:
            return SyncResult(code or UnknownMemberIdError.code)
        member = group.members[member_id]
        if generation_id != group.generation_id:
            return SyncResult(IllegalGenerationError.code)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(InconsistentGroupProtocolError.code)
        if group.state == PREPARING_REBALANCE:
            return SyncResult(RebalanceInProgressError.code)
        if group.state == STABLE:
            self._rebalancer.touch(member)
            return SyncResult(NONE, member.assignment)

        # CompletingRebalance.
        member.awaiting_sync = True
        member.sync_result = None
        if member_id == group.leader_id:
            self._rebalancer.complete_sync(group, dict(assignments or {}))
        return member

    def group_protocol(self, group_id: str) -> Tuple[int, Optional[str], Optional[str]]:
        """(generation, protocol type, protocol name) of a group; (-1, None, None) if unknown.

        Both stay the same for as long as a generation lasts: the answer for a sync
        of the same generation is that generation's (SyncGroup v5 returns them).
        """
        with self._cond:
            group = self._groups.get(group_id)
            if group is None or group.state == DEAD:
                return NO_GENERATION, None, None
            return group.generation_id, group.protocol_type, group.protocol_name

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: Optional[str] = None) -> int:
        """Keep a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

        A static member whose instance id another member took over is FENCED_INSTANCE_ID.
        While the group's partition is loading the heartbeat is answered NONE, as Kafka answers
        it: nothing is known of the member yet, and clients (aiokafka) treat
        COORDINATOR_LOAD_IN_PROGRESS on a heartbeat as a fatal error.
        """
        with self._cond:
            if self._closed:
                return CoordinatorNotAvailableError.code
            owner = self.metadata.owner_error(group_id)
            if owner == CoordinatorLoadInProgressError.code:
                return NONE
            if owner != NONE:
                return owner
            group = self._groups.get(group_id)
            if group is None:
                return UnknownMemberIdError.code
            if group.state == DEAD:
                return CoordinatorNotAvailableError.code
            code = group.validate_member(member_id, group_instance_id)
            if code != NONE:
                return code
            if group.state == EMPTY:
                return UnknownMemberIdError.code
            if generation_id != group.generation_id:
                return IllegalGenerationError.code
            self._rebalancer.touch(group.members[member_id])
            if group.state == PREPARING_REBALANCE:
                return RebalanceInProgressError.code
            return NONE

    def leave_group(self, group_id: str, member_id: str) -> int:
        """Remove a member at once; the others rebalance."""
        code, codes = self.leave_group_members(group_id, [(member_id, None)])
        return code or codes[0]

    def leave_group_members(self, group_id: str, members: Sequence[Tuple[str, Optional[str]]],
                            reason: Optional[str] = None) -> Tuple[int, List[int]]:
        """LeaveGroup v3+: remove several members; -> (group error, each member's code).

        Each member is named by member id, or (an administrator removing a static
        member) by its group instance id with an empty member id. A group error
        (unknown group: UNKNOWN_MEMBER_ID) answers no member. ``reason`` is logged.
        """
        with self._cond:
            if self._closed:
                return CoordinatorNotAvailableError.code, []
            owner = self.metadata.owner_error(group_id)
            if owner != NONE:
                return owner, []
            group = self._groups.get(group_id)
            if group is None:
                return UnknownMemberIdError.code, []
            if group.state == DEAD:
                return CoordinatorNotAvailableError.code, []
            codes = []
            for member_id, group_instance_id in members:
                if not member_id:
                    current = group.static_member_id(group_instance_id)
                    if current is None:
                        codes.append(UnknownMemberIdError.code)
                        continue
                    member_id = current
                elif member_id in group.pending:
                    del group.pending[member_id]
                    log.info("pending member %s left group %s%s", member_id, group_id,
                             "; reason: %s" % reason if reason else "")
                    if group.state == PREPARING_REBALANCE:
                        self._rebalancer.try_complete_join(group)
                    self._rebalancer.changed(group)
                    codes.append(NONE)
                    continue
                else:
                    code = group.validate_member(member_id, group_instance_id)
                    if code != NONE:
                        codes.append(code)
                        continue
                log.info("member %s left group %s%s", member_id, group_id, "; reason: %s" % reason if reason else "")
                self._rebalancer.remove_member_and_update_group(group, group.members[member_id])
                codes.append(NONE)
            return NONE, codes


    # -- offsets (:class:`.offsets.GroupOffsets`) ------------------------------------------

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       offsets: Dict[Partition, Tuple[int, Optional[str]]],
                       leader_epochs: Optional[Dict[Partition, int]] = None, *, group_instance_id: Optional[str] = None,
                       commit_timestamps: Optional[Dict[Partition, int]] = None,
                       unknown_group_not_found: bool = False) -> Dict[Partition, int]:
        """OffsetCommit, visible at once: :meth:`.offsets.GroupOffsets.commit_offsets`."""
        return self.offsets.commit_offsets(group_id, generation_id, member_id, offsets, leader_epochs,
                                           group_instance_id=group_instance_id, commit_timestamps=commit_timestamps,
                                           unknown_group_not_found=unknown_group_not_found)

    def commit_offsets_pending(self, group_id: str, generation_id: int, member_id: str,
                               offsets: Dict[Partition, Tuple[int, Optional[str]]],
                               leader_epochs: Optional[Dict[Partition, int]] = None, *,
                               group_instance_id: Optional[str] = None,
                               commit_timestamps: Optional[Dict[Partition, int]] = None,
                               unknown_group_not_found: bool = False,
                               ) -> Tuple[Dict[Partition, int], Callable[[int], None]]:
        """OffsetCommit, pending until replicated: :meth:`.offsets.GroupOffsets.commit_offsets_pending`."""
        return self.offsets.commit_offsets_pending(group_id, generation_id, member_id, offsets, leader_epochs,
                                                   group_instance_id=group_instance_id,
                                                   commit_timestamps=commit_timestamps,
                                                   unknown_group_not_found=unknown_group_not_found)

    def txn_offset_commit(self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
                          member_id: str, group_instance_id: Optional[str],
                          offsets: Mapping[Partition, TxnOffset]) -> Dict[Partition, int]:
        """TxnOffsetCommit, its write taken as replicated: :meth:`.offsets.GroupOffsets.txn_offset_commit`."""
        return self.offsets.txn_offset_commit(group_id, producer_id, producer_epoch, generation_id, member_id,
                                              group_instance_id, offsets)

    def txn_offset_commit_pending(self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
                                  member_id: str, group_instance_id: Optional[str],
                                  offsets: Mapping[Partition, TxnOffset]
                                  ) -> Tuple[Dict[Partition, int], Callable[[int], None]]:
        """TxnOffsetCommit, dropped if its write is not replicated:
        :meth:`.offsets.GroupOffsets.txn_offset_commit_pending`."""
        return self.offsets.txn_offset_commit_pending(group_id, producer_id, producer_epoch, generation_id,
                                                      member_id, group_instance_id, offsets)

    def complete_txn(self, offsets_partition: int, producer_id: int, committed: bool) -> None:
        """The broker appended ``producer_id``'s COMMIT (``committed``) or ABORT marker to
        ``__consumer_offsets`` partition ``offsets_partition``: commit or drop the producer's
        pending offsets of its groups (:meth:`.offsets.GroupOffsets.complete_txn`)."""
        self.offsets.complete_txn(offsets_partition, producer_id, committed)

    def fetch_offsets(self, group_id: str, partitions: Optional[Iterable[Partition]] = None,
                      require_stable: bool = False) -> Dict[Partition, Tuple[int, str, int]]:
        """Committed ``(offset, metadata, error_code)`` per partition: :meth:`.offsets.GroupOffsets.fetch_offsets`."""
        return self.offsets.fetch_offsets(group_id, partitions, require_stable)

    def fetch_committed(self, group_id: str, partitions: Optional[Iterable[Partition]] = None,
                        require_stable: bool = False) -> Tuple[int, Dict[Partition, CommittedOffset]]:
        """OffsetFetch: :meth:`.offsets.GroupOffsets.fetch_committed`."""
        return self.offsets.fetch_committed(group_id, partitions, require_stable)

    def delete_offsets(self, group_id: str, partitions: Iterable[Partition]) -> Tuple[int, Dict[Partition, int]]:
        """OffsetDelete: :meth:`.offsets.GroupOffsets.delete_offsets`."""
        return self.offsets.delete_offsets(group_id, partitions)

    # -- administration (:class:`.admin.GroupAdmin`) ----------------------------------------

    def list_groups(self) -> List[Tuple[str, str]]:
        """Every live group as ``(group_id, protocol_type)``: :meth:`.admin.GroupAdmin.list_groups`."""
        return self.admin.list_groups()

    def listed_groups(self, states: Optional[Iterable[str]] = None,
                      types: Optional[Iterable[str]] = None) -> List[ListedGroup]:
        """ListGroups: :meth:`.admin.GroupAdmin.listed_groups`."""
        return self.admin.listed_groups(states, types)

    def metrics_snapshot(self) -> List[Tuple[str, str, int, List[Tuple[Partition, int]]]]:
        """Every group served, for the broker's metrics: :meth:`.admin.GroupAdmin.metrics_snapshot`."""
        return self.admin.metrics_snapshot()

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups for one group: :meth:`.admin.GroupAdmin.describe_group`."""
        return self.admin.describe_group(group_id)

    def delete_groups(self, group_ids: Iterable[str]) -> Dict[str, int]:
        """DeleteGroups: :meth:`.admin.GroupAdmin.delete_groups`."""
        return self.admin.delete_groups(group_ids)

    # -- timers (:class:`.rebalance.Rebalancer`) --------------------------------------------

    def tick(self) -> None:
        """Expire every session and rebalance deadline that passed by ``clock``."""
        self._rebalancer.tick()
