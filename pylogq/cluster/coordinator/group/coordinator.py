"""Kafka's group coordinator: consumer group membership, rebalances and committed offsets.

:class:`GroupCoordinator` runs the group protocol (Kafka's GroupCoordinator) over the
groups its :class:`~pylogq.cluster.coordinator.group.metadata_manager.GroupMetadataManager`
keeps: the state of each group and member is :mod:`.group`'s, and the manager knows
which ``__consumer_offsets`` partitions are served here, reads them back
(:meth:`GroupCoordinator.load`, :meth:`GroupCoordinator.load_partition`) and writes
group metadata and committed offsets to them in Kafka's formats, through two callables
the broker hands over, so the coordinator does not depend on the broker. Members call it
from their own threads; the calls mirror the protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups,
DeleteGroups, OffsetDelete) and return Kafka error codes, as the wire does. Blocking calls
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
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, TypeVar

from ....errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
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
)
from ...delayed import DelayedCall, DelayedOperationPurgatory, TimedTask, Timer
from . import offsets_schema as schema
from .group import (
    COMPLETING_REBALANCE,
    CONSUMER_PROTOCOL_TYPE,
    DEAD,
    EMPTY,
    NONE,
    PREPARING_REBALANCE,
    STABLE,
    GroupMetadata,
    MemberMetadata,
    Partition,
    now_ms,
    subscribed_topics,
)
from .metadata_manager import GroupMetadataManager, StorageRecord
from .offsets_schema import partition_for_group

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

NO_OFFSET = -1
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
        read_all: Callable[[int], Iterable[StorageRecord]],
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
            raise ValueError("num_partitions must be positive, got %r" % (num_partitions,))
        if initial_rebalance_delay_ms < 0:
            raise ValueError("initial_rebalance_delay_ms must be >= 0, got %r" % (initial_rebalance_delay_ms,))
        #: The groups, the partitions served and their storage (lock held for every call).
        self.metadata = GroupMetadataManager(append, read_all, num_partitions)
        self.num_partitions = num_partitions
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._clock = clock
        self.group_min_session_timeout_ms = group_min_session_timeout_ms
        self.group_max_session_timeout_ms = group_max_session_timeout_ms
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        # Reentrant: a waiting operation's deadline answer takes it, and may be forced
        # from a path that already holds it.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._write_seq = 0  # numbers the offset commits written, in the order written
        # Joins and syncs waiting for their answer, watched under their group id; the
        # timer (the broker's, or one of our own) expires callers' ``timeout_s``.
        self._own_timer = timer is None
        self._delay_timer = timer if timer is not None else Timer("group-coordinator-delayed")
        self._waits = DelayedOperationPurgatory("rebalance", self._delay_timer)
        self._groups = self.metadata.groups  # the manager's map, by group id
        self._closed = False
        self._deadlines_on_timer = start_timer
        self._next_tick: Optional[TimedTask] = None
        #: Join phases that ended with a new generation (the rebalance metric).
        self.completed_rebalances = 0

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

    def load_partition(self, partition: int) -> None:
        """Become the coordinator of the groups in one ``__consumer_offsets`` partition: read it
        (to its log end, as Kafka does; calls for its groups answer COORDINATOR_LOAD_IN_PROGRESS
        meanwhile) and serve them. Blocking: not for the event loop."""
        with self._cond:
            self.metadata.begin_loading(partition)
        try:
            loaded = self.metadata.read_partitions([partition])
        except Exception:
            with self._cond:
                self.metadata.loading.discard(partition)
            raise
        with self._cond:
            if self.metadata.finish_loading(partition, loaded, self._clock()):
                self._reschedule()
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
        comes back Empty.
        """
        loaded = self.metadata.read_partitions(range(self.num_partitions))
        with self._cond:
            self._groups.clear()
            self.metadata.install(loaded, self._clock())
            self._reschedule()

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
                self._reschedule()
                return JoinResult(MemberIdRequiredError.code, member_id=new_id)
            member = MemberMetadata(new_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                             session_timeout_ms, protocol_type, protocols)
            self._add_member_and_rebalance(group, member)
            return member
        if member_id in group.pending and group_instance_id is None:
            # The second join of a member that was told MEMBER_ID_REQUIRED.
            del group.pending[member_id]
            member = MemberMetadata(member_id, None, client_id, client_host, rebalance_timeout_ms,
                             session_timeout_ms, protocol_type, protocols)
            self._add_member_and_rebalance(group, member)
            return member
        code = group.validate_member(member_id, group_instance_id)
        if code != NONE or group.state == EMPTY:
            return JoinResult(code or UnknownMemberIdError.code, member_id=member_id)
        member = group.members[member_id]
        if group.state == PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms)
        elif group.state == COMPLETING_REBALANCE:
            if member.protocols == protocols:
                # The member lost the join response: answer again for this generation.
                return self._join_result(group, member)
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms)
        else:  # Stable
            if member.member_id == group.leader_id or member.protocols != protocols:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms)
            else:
                # A follower rejoining with unchanged metadata: no rebalance needed.
                self._touch(member)
                return self._join_result(group, member)
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
        self._touch(member)
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
                    self._touch(old)
                    self._changed(group)
                    return JoinResult(code, group.generation_id, group.protocol_name, current_leader or "",
                                      "", protocol_type=group.protocol_type)
                self._changed(group)
                if supports_skip_assignment and group.leader_id == new_id:
                    # KIP-814: the leader learns it leads, but keeps the current assignment.
                    result = self._join_result(group, member)
                    return result._replace(skip_assignment=True)
                # The old leader id keeps a rejoining leader from assigning anew: a Stable
                # group would not pass its next sync's assignment on.
                return JoinResult(NONE, group.generation_id, group.protocol_name, current_leader or "", new_id, [],
                                  protocol_type=group.protocol_type)
            member.awaiting_join = True
            self._prepare_rebalance(group)
            return member
        self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms)
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
                    self._touch(member)
                    self._reschedule()  # its session counts again
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
            self._touch(member)
            return SyncResult(NONE, member.assignment)

        # CompletingRebalance.
        member.awaiting_sync = True
        member.sync_result = None
        if member_id == group.leader_id:
            self._complete_sync(group, dict(assignments or {}))
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
        """
        with self._cond:
            if self._closed:
                return CoordinatorNotAvailableError.code
            owner = self.metadata.owner_error(group_id)
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
            self._touch(group.members[member_id])
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
                        self._try_complete_join(group)
                    self._changed(group)
                    codes.append(NONE)
                    continue
                else:
                    code = group.validate_member(member_id, group_instance_id)
                    if code != NONE:
                        codes.append(code)
                        continue
                log.info("member %s left group %s%s", member_id, group_id, "; reason: %s" % reason if reason else "")
                self._remove_member_and_update_group(group, group.members[member_id])
                codes.append(NONE)
            return NONE, codes

    # -- offsets ---------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Dict[Partition, Tuple[int, Optional[str]]],
        leader_epochs: Optional[Dict[Partition, int]] = None,
        *,
        group_instance_id: Optional[str] = None,
        commit_timestamps: Optional[Dict[Partition, int]] = None,
        unknown_group_not_found: bool = False,
    ) -> Dict[Partition, int]:
        """Commit offsets for a group member, or (generation -1, member "") for a group without members.

        The commit is written to ``__consumer_offsets`` before this returns; a
        failed write answers every partition with the mapped error code. A
        partition's commit timestamp is ``commit_timestamps``' (OffsetCommit v1)
        unless missing or -1, then now. A member commit to an unknown group is
        ILLEGAL_GENERATION, or GROUP_ID_NOT_FOUND with ``unknown_group_not_found``
        (OffsetCommit v9+). The commit is visible at once: see
        :meth:`commit_offsets_pending` for a write that must be replicated first.
        """
        codes, complete = self.commit_offsets_pending(
            group_id, generation_id, member_id, offsets, leader_epochs, group_instance_id=group_instance_id,
            commit_timestamps=commit_timestamps, unknown_group_not_found=unknown_group_not_found)
        complete(NONE)
        return codes

    def commit_offsets_pending(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Dict[Partition, Tuple[int, Optional[str]]],
        leader_epochs: Optional[Dict[Partition, int]] = None,
        *,
        group_instance_id: Optional[str] = None,
        commit_timestamps: Optional[Dict[Partition, int]] = None,
        unknown_group_not_found: bool = False,
    ) -> Tuple[Dict[Partition, int], Callable[[int], None]]:
        """:meth:`commit_offsets`, the written offsets kept pending: OffsetFetch goes on seeing
        the previous commit until the returned function is called with the outcome of the
        write's replication (Kafka's pending offset commits). 0 makes them the committed
        offsets (unless a later write already is), an error code drops them."""
        with self._cond:
            codes, written = self._commit_locked(group_id, generation_id, member_id, offsets, leader_epochs,
                                                 group_instance_id, commit_timestamps, unknown_group_not_found)
        done: List[int] = []

        def complete(code: int) -> None:
            if not done:
                done.append(code)
                self._complete_commit(group_id, written, code)

        return codes, complete

    def _complete_commit(self, group_id: str, written: Dict[Partition, Tuple[int, schema.OffsetCommitValue]],
                         code: int) -> None:
        if not written:
            return
        with self._cond:
            group = self._groups.get(group_id)
            if group is None:
                return  # deleted or unloaded meanwhile: what the log holds is loaded again
            for tp, (seq, value) in written.items():
                pending = group.pending_offsets.get(tp)
                if pending is not None and pending[0] == seq:
                    del group.pending_offsets[tp]
                if code == NONE and group.offset_writes.get(tp, -1) < seq:
                    group.offsets[tp] = value
                    group.offset_writes[tp] = seq
            self._maybe_forget(group)

    def _maybe_forget(self, group: "GroupMetadata") -> None:
        if not group.members and not group.pending and not group.offsets and not group.pending_offsets \
                and group.state == EMPTY and group.protocol_type is None:
            self._groups.pop(group.group_id, None)

    def _commit_locked(self, group_id: str, generation_id: int, member_id: str,
                       offsets: Dict[Partition, Tuple[int, Optional[str]]],
                       leader_epochs: Optional[Dict[Partition, int]], group_instance_id: Optional[str],
                       commit_timestamps: Optional[Dict[Partition, int]], unknown_group_not_found: bool
                       ) -> Tuple[Dict[Partition, int], Dict[Partition, Tuple[int, schema.OffsetCommitValue]]]:
        error = self._validate_commit(group_id, generation_id, member_id, group_instance_id,
                                      unknown_group_not_found)
        if error != NONE:
            return {tp: error for tp in offsets}, {}
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = GroupMetadata(group_id)
        member = group.members.get(member_id)
        if member is not None:
            self._touch(member)
        commit_ms = now_ms()
        result: Dict[Partition, int] = {}
        written: Dict[Partition, Tuple[int, schema.OffsetCommitValue]] = {}
        to_write: Dict[Partition, schema.OffsetCommitValue] = {}
        for tp, (offset, metadata) in offsets.items():
            metadata = metadata or ""
            if len(metadata.encode("utf-8")) > self.offset_metadata_max_bytes:
                result[tp] = OffsetMetadataTooLargeError.code
                continue
            epoch = -1 if leader_epochs is None else leader_epochs.get(tp, -1)
            timestamp = -1 if commit_timestamps is None else commit_timestamps.get(tp, -1)
            to_write[tp] = schema.OffsetCommitValue(offset, metadata, commit_ms if timestamp == -1 else timestamp,
                                                    epoch)
        if to_write:
            keys = [schema.encode_offset_commit_key(group_id, t, p) for t, p in to_write]
            values = [
                schema.encode_offset_commit_value(v.offset, v.metadata, v.commit_timestamp, v.leader_epoch)
                for v in to_write.values()
            ]
            code = self.metadata.store(group_id, keys, values, for_commit=True)
            self._write_seq += 1
            for tp, value in to_write.items():
                result[tp] = code
                if code == NONE:
                    group.pending_offsets[tp] = (self._write_seq, value)
                    written[tp] = (self._write_seq, value)
        self._maybe_forget(group)
        return result, written

    def fetch_offsets(
        self, group_id: str, partitions: Optional[Iterable[Partition]] = None
    ) -> Dict[Partition, Tuple[int, str, int]]:
        """Committed ``(offset, metadata, error_code)`` per partition; offset -1 when none.

        ``partitions=None`` returns every committed partition of the group.
        """
        wanted = None if partitions is None else list(partitions)
        code, found = self.fetch_committed(group_id, wanted)
        if code != NONE:
            return {tp: (NO_OFFSET, "", code) for tp in wanted or ()}
        return {tp: (c.offset, c.metadata, c.error_code) for tp, c in found.items()}

    def fetch_committed(
        self, group_id: str, partitions: Optional[Iterable[Partition]] = None
    ) -> Tuple[int, Dict[Partition, CommittedOffset]]:
        """OffsetFetch: (group error, committed offset and leader epoch per partition).

        A partition without a committed offset reports offset -1, epoch -1 and "";
        ``partitions=None`` returns every committed partition of the group. An
        unknown group has no offsets (not an error, as in Kafka).
        """
        with self._cond:
            if self._closed:
                return CoordinatorNotAvailableError.code, {}
            owner = self.metadata.owner_error(group_id)
            if owner != NONE:
                return owner, {}
            group = self._groups.get(group_id)
            stored = group.offsets if group is not None else {}
            wanted = list(stored) if partitions is None else list(partitions)
            out: Dict[Partition, CommittedOffset] = {}
            for tp in wanted:
                v = stored.get(tp)
                out[tp] = CommittedOffset(NO_OFFSET) if v is None else CommittedOffset(v.offset, v.leader_epoch,
                                                                                      v.metadata)
            return NONE, out

    # -- administration ------------------------------------------------------------------

    def list_groups(self) -> List[Tuple[str, str]]:
        """Every live group as ``(group_id, protocol_type)``; "" for groups that only commit offsets."""
        return [(g.group_id, g.protocol_type) for g in self.listed_groups()]

    def listed_groups(self, states: Optional[Iterable[str]] = None,
                      types: Optional[Iterable[str]] = None) -> List[ListedGroup]:
        """ListGroups: every live group with its state, sorted by id.

        A non-empty ``states`` keeps the groups in one of them, a non-empty
        ``types`` those of one of those group types (every group here is
        "classic"); both compare case-insensitively, as Kafka's coordinator does.
        """
        state_set = {x.strip().lower() for x in states or ()}
        type_set = {x.strip().lower() for x in types or ()}
        with self._cond:
            out = [ListedGroup(g.group_id, g.protocol_type or "", g.state) for g in self._groups.values()
                   if g.state != DEAD]
        return sorted(g for g in out if (not state_set or g.state.lower() in state_set)
                      and (not type_set or g.group_type in type_set))

    def metrics_snapshot(self) -> List[Tuple[str, str, int, List[Tuple[Partition, int]]]]:
        """(group id, state, member count, [(partition, committed offset)]) of every group
        this coordinator serves, for the broker's metrics."""
        with self._cond:
            return [(g.group_id, g.state, len(g.members), [(tp, v.offset) for tp, v in g.offsets.items()])
                    for g in self._groups.values()]

    def describe_group(self, group_id: str) -> GroupDescription:
        """Kafka's DescribeGroups for one group; member metadata and assignments only when Stable."""
        with self._cond:
            owner = self.metadata.owner_error(group_id)
            if owner != NONE:
                return GroupDescription(owner, DEAD, "", "", [])
            group = self._groups.get(group_id)
            if group is None or group.state == DEAD:
                return GroupDescription(NONE, DEAD, "", "", [])
            stable = group.state == STABLE
            members = [
                MemberDescription(
                    m.member_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(group.protocol_name) if stable else b"",
                    m.assignment if stable else b"",
                    m.group_instance_id,
                )
                for m in group.members.values()
            ]
            protocol = (group.protocol_name or "") if stable else ""
            return GroupDescription(NONE, group.state, group.protocol_type or "", protocol, members)

    def delete_groups(self, group_ids: Iterable[str]) -> Dict[str, int]:
        """Delete empty groups and their offsets (tombstones); NON_EMPTY_GROUP while members remain."""
        out: Dict[str, int] = {}
        with self._cond:
            for group_id in group_ids:
                if not group_id:
                    out[group_id] = InvalidGroupIdError.code
                    continue
                owner = self.metadata.owner_error(group_id)
                if owner != NONE:
                    out[group_id] = owner
                    continue
                group = self._groups.get(group_id)
                if group is None or group.state == DEAD:
                    out[group_id] = GroupIdNotFoundError.code
                    continue
                if group.state != EMPTY:
                    out[group_id] = NonEmptyGroupError.code
                    continue
                keys = [schema.encode_offset_commit_key(group_id, t, p) for t, p in group.offsets]
                keys.append(schema.encode_group_metadata_key(group_id))
                code = self.metadata.store(group_id, keys, [None] * len(keys), for_commit=False)
                if code == NONE:
                    group.transition(DEAD)
                    del self._groups[group_id]
                out[group_id] = code
        return out

    def delete_offsets(self, group_id: str, partitions: Iterable[Partition]) -> Tuple[int, Dict[Partition, int]]:
        """Kafka's OffsetDelete: tombstone a group's committed offsets; -> (group error, per-partition codes).

        As Kafka's handleDeleteOffsets: an unknown group answers GROUP_ID_NOT_FOUND; an
        Empty group may delete any offset; a consumer group with members only those of
        topics none of them subscribes to (the others GROUP_SUBSCRIBED_TO_TOPIC); any
        other group with members NON_EMPTY_GROUP. A group left Empty without offsets
        is removed (Dead), its metadata tombstoned in the same batch.
        """
        wanted = list(dict.fromkeys(partitions))
        with self._cond:
            if not group_id:
                return InvalidGroupIdError.code, {}
            owner = self.metadata.owner_error(group_id)
            if owner != NONE:
                return owner, {}
            group = self._groups.get(group_id)
            if group is None or group.state == DEAD:
                return GroupIdNotFoundError.code, {}
            codes: Dict[Partition, int] = {}
            if group.state == EMPTY:
                eligible = wanted
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                subscribed: Set[str] = set()
                for m in group.members.values():
                    subscribed |= subscribed_topics(m.metadata(group.protocol_name))
                eligible = [tp for tp in wanted if tp[0] not in subscribed]
                codes = {tp: GroupSubscribedToTopicError.code for tp in wanted if tp[0] in subscribed}
            else:
                return NonEmptyGroupError.code, {}
            removed = [tp for tp in eligible if tp in group.offsets]
            dead = group.state == EMPTY and not group.members and len(removed) == len(group.offsets)
            keys = [schema.encode_offset_commit_key(group_id, t, p) for t, p in removed]
            if dead and removed:
                keys.append(schema.encode_group_metadata_key(group_id))
            code = self.metadata.store(group_id, keys, [None] * len(keys), for_commit=False) if keys else NONE
            if code != NONE:
                return code, {}
            for tp in removed:
                del group.offsets[tp]
            if dead and removed:
                group.transition(DEAD)
                del self._groups[group_id]
            for tp in eligible:
                codes[tp] = NONE
            return NONE, codes

    # -- timers ----------------------------------------------------------------------

    def tick(self) -> None:
        """Expire every session and rebalance deadline that passed by ``clock``."""
        with self._cond:
            self._expire(self._clock())

    def _on_tick(self) -> None:
        """The timer reached a scheduled deadline: expire what passed, schedule the next."""
        with self._cond:
            if self._closed:
                return
            self._next_tick = None
            self._schedule(self._expire(self._clock()))

    def _reschedule(self) -> None:
        """Deadlines may have moved earlier (lock held): make sure the timer fires by the earliest."""
        if self._deadlines_on_timer and not self._closed:
            self._schedule(self._next_deadline())

    def _schedule(self, deadline: Optional[float]) -> None:
        if deadline is None or not self._deadlines_on_timer or self._closed:
            return
        current = self._next_tick
        if current is not None and not current.completed and current.deadline is not None \
                and current.deadline <= deadline:
            return  # an earlier tick will look again
        tick = TimedTask(deadline, self._on_tick)
        self._next_tick = tick
        self._delay_timer.add(tick)

    def _next_deadline(self) -> Optional[float]:
        """The earliest session or rebalance deadline (lock held)."""
        found: Optional[float] = None
        for group in self._groups.values():
            if group.join_deadline is not None and (found is None or group.join_deadline < found):
                found = group.join_deadline
            for deadline in group.pending.values():
                if found is None or deadline < found:
                    found = deadline
            for member in group.members.values():
                if not member.kept_alive() and (found is None or member.heartbeat_deadline < found):
                    found = member.heartbeat_deadline
        return found

    def _expire(self, now: float) -> Optional[float]:
        """Handle every passed deadline; return the earliest one still ahead (None if none)."""
        next_deadline: Optional[float] = None
        for group in list(self._groups.values()):
            expired = [mid for mid, deadline in group.pending.items() if deadline <= now]
            for mid in expired:
                log.info("pending member %s of group %s did not join again in time", mid, group.group_id)
                del group.pending[mid]
            if expired:
                self._try_complete_join(group)
                self._changed(group)
            if group.join_deadline is not None and group.join_deadline <= now:
                self._on_join_deadline(group, now)
            for member in list(group.members.values()):
                if group.members.get(member.member_id) is not member or member.kept_alive():
                    continue
                if member.heartbeat_deadline <= now:
                    log.info("member %s of group %s timed out", member.member_id, group.group_id)
                    self._remove_member_and_update_group(group, member)
            deadlines = [m.heartbeat_deadline for m in group.members.values() if not m.kept_alive()]
            deadlines.extend(group.pending.values())
            if group.join_deadline is not None:
                deadlines.append(group.join_deadline)
            if deadlines:
                d = min(deadlines)
                next_deadline = d if next_deadline is None else min(next_deadline, d)
        return next_deadline

    # -- state machine (lock held) ----------------------------------------------------------

    def _changed(self, group: GroupMetadata) -> None:
        """Deadlines may have moved and waiting calls may be answered: see to both (lock held)."""
        self._reschedule()
        self._waits.check_and_complete(group.group_id)

    def _touch(self, member: MemberMetadata) -> None:
        member.heartbeat_deadline = self._clock() + member.session_timeout_ms / 1000.0

    def _add_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.awaiting_join = True
        member.join_result = None
        if not group.members:
            group.protocol_type = member.protocol_type
        group.members[member.member_id] = member
        if group.leader_id is None or group.leader_id not in group.members:
            group.leader_id = member.member_id
        group.new_member_added = True
        if group.state == PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group)

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: List[Tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
    ) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = True
        member.join_result = None
        if group.state == PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.state == COMPLETING_REBALANCE:
            self._propagate_sync_error(group, RebalanceInProgressError.code)
        now = self._clock()
        rebalance_ms = group.rebalance_timeout_ms()
        if group.state == EMPTY and self.initial_rebalance_delay_ms > 0:
            delay = min(self.initial_rebalance_delay_ms, rebalance_ms)
            group.initial_delay_active = True
            group.initial_delay_remaining_ms = max(0, rebalance_ms - delay)
            group.new_member_added = False
            group.join_deadline = now + delay / 1000.0
        else:
            group.initial_delay_active = False
            group.join_deadline = now + rebalance_ms / 1000.0
        group.transition(PREPARING_REBALANCE)
        log.info("group %s preparing to rebalance (generation %d)", group.group_id, group.generation_id)
        self._try_complete_join(group)
        self._changed(group)

    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.state in (STABLE, COMPLETING_REBALANCE, EMPTY):
            self._prepare_rebalance(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if group.state == PREPARING_REBALANCE and not group.initial_delay_active and group.all_joined():
            self._complete_join(group)

    def _on_join_deadline(self, group: GroupMetadata, now: float) -> None:
        if group.state != PREPARING_REBALANCE:
            group.join_deadline = None
            return
        if group.initial_delay_active:
            if group.new_member_added and group.initial_delay_remaining_ms > 0:
                # Kafka's InitialDelayedJoin: each new member buys another delay, up to the rebalance timeout.
                delay = min(self.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
                group.initial_delay_remaining_ms -= delay
                group.new_member_added = False
                group.join_deadline = now + delay / 1000.0
                return
            group.initial_delay_active = False
        self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """End the join phase: drop members that did not rejoin, start the next generation."""
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            log.info("member %s of group %s did not rejoin in time", member.member_id, group.group_id)
            self._drop_member(group, member)
        group.join_deadline = None
        group.initial_delay_active = False
        group.new_member_added = False
        group.generation_id += 1
        self.completed_rebalances += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(EMPTY)
            self.metadata.store_group(group, {})
            self._changed(group)
            return
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.protocol_name = group.select_protocol()
        group.transition(COMPLETING_REBALANCE)
        for member in group.members.values():
            member.awaiting_join = False
            member.assignment = b""
            member.join_result = self._join_result(group, member)
            self._touch(member)
        log.info("group %s generation %d: %d members", group.group_id, group.generation_id, len(group.members))
        self._changed(group)

    def _join_result(self, group: GroupMetadata, member: MemberMetadata) -> JoinResult:
        members: List[Tuple[str, Optional[str], bytes]] = []
        if member.member_id == group.leader_id:
            members = [
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name)) for m in group.members.values()
            ]
        return JoinResult(
            NONE, group.generation_id, group.protocol_name, group.leader_id or "", member.member_id, members,
            protocol_type=group.protocol_type,
        )

    def _complete_sync(self, group: GroupMetadata, assignments: Dict[str, bytes]) -> None:
        full = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
        code = self.metadata.store_group(group, full)
        if code != NONE:
            self._propagate_sync_error(group, code)
            self._maybe_prepare_rebalance(group)
            return
        for mid, member in group.members.items():
            member.assignment = full[mid]
        group.transition(STABLE)
        for member in group.members.values():
            if member.awaiting_sync:
                member.awaiting_sync = False
                member.sync_result = SyncResult(NONE, member.assignment)
                self._touch(member)
        self._changed(group)

    def _propagate_sync_error(self, group: GroupMetadata, code: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync:
                member.awaiting_sync = False
                member.sync_result = SyncResult(code)
        self._changed(group)

    def _drop_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Remove a member and answer any call it is blocked in with UNKNOWN_MEMBER_ID."""
        del group.members[member.member_id]
        if member.awaiting_join:
            member.awaiting_join = False
            member.join_result = JoinResult(UnknownMemberIdError.code, member_id=member.member_id)
        if member.awaiting_sync:
            member.awaiting_sync = False
            member.sync_result = SyncResult(UnknownMemberIdError.code)
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)
        self._changed(group)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._drop_member(group, member)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.state == PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _validate_commit(self, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: Optional[str] = None, unknown_group_not_found: bool = False) -> int:
        """Kafka's validateOffsetCommit for a classic group (lock held)."""
        if self._closed:
            return CoordinatorNotAvailableError.code
        if not group_id:
            return InvalidGroupIdError.code
        owner = self.metadata.owner_error(group_id)
        if owner != NONE:
            return owner
        group = self._groups.get(group_id)
        if group is None:
            # Only a consumer that manages its own partitions may create a group by committing.
            if generation_id < 0:
                return NONE
            return GroupIdNotFoundError.code if unknown_group_not_found else IllegalGenerationError.code
        if group.state == DEAD:
            return CoordinatorNotAvailableError.code
        if generation_id < 0 and group.state == EMPTY:
            return NONE  # a simple commit: the admin client, or a consumer without group management
        if generation_id >= 0 or member_id or group_instance_id is not None:
            code = group.validate_member(member_id, group_instance_id)
            if code != NONE:
                return code
            if generation_id != group.generation_id:
                return IllegalGenerationError.code
        elif group.state != EMPTY:
            # A commit without member and generation (OffsetCommit v0) needs an Empty group.
            return UnknownMemberIdError.code
        if group.state == COMPLETING_REBALANCE:
            return RebalanceInProgressError.code
        return NONE

    # -- storage (lock held) ------------------------------------------------------------
