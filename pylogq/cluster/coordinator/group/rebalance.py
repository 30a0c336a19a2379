"""The group state machine's transitions and the deadlines that drive them: members
added, updated and dropped, a rebalance prepared, its join phase completed (the next
generation) and its sync completed (Stable), and the session, pending-member and
rebalance deadlines expired on a timer (Kafka's GroupCoordinator transitions with its
DelayedJoin, InitialDelayedJoin and DelayedHeartbeat, here one timer task at the
earliest deadline).

:class:`Rebalancer` changes the groups the
:class:`~pylogq.cluster.coordinator.group.metadata_manager.GroupMetadataManager` keeps,
writes a group's metadata through it when a generation is decided, and answers the calls
parked in the coordinator's purgatory when their group changed; the group coordinator's
protocol calls (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) decide which transition a
request makes.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Dict, List, Optional, Tuple

from ....errors import RebalanceInProgressError, UnknownMemberIdError
from ...contract import JoinResult, SyncResult
from ...delayed import DelayedOperationPurgatory, TimedTask, Timer
from .group import (
    COMPLETING_REBALANCE,
    EMPTY,
    NONE,
    PREPARING_REBALANCE,
    STABLE,
    GroupMetadata,
    MemberMetadata,
)
from .metadata_manager import GroupMetadataManager

__all__ = ["Rebalancer"]

# The coordinator's logger: the transitions it logs keep the name they were logged under.
log = logging.getLogger("pylogq.cluster.coordinator.group.coordinator")


class Rebalancer:
    """The transitions of the groups a coordinator serves, and their deadlines.

    Not thread-safe by itself: every call is made under the coordinator's lock
    (``lock``), except :meth:`tick` and the timer's own task, which take it. With
    ``on_timer`` the deadlines run on ``timer``: at the earliest one, members whose
    session timed out are removed and rebalances whose timeout passed complete; without
    it nothing runs by itself and :meth:`tick` expires deadlines by hand. Nothing is
    scheduled once the coordinator is closed (``closed()``).
    """

    def __init__(self, metadata: GroupMetadataManager, lock: threading.Condition, closed: Callable[[], bool],
                 clock: Callable[[], float], initial_rebalance_delay_ms: int, waits: DelayedOperationPurgatory,
                 timer: Timer, on_timer: bool) -> None:
        self.metadata = metadata
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._groups = metadata.groups  # the manager's map, by group id
        self._lock = lock
        self._closed = closed
        self._clock = clock
        # Joins and syncs waiting for their answer, watched under their group id.
        self._waits = waits
        self._delay_timer = timer
        self._deadlines_on_timer = on_timer
        self._next_tick: Optional[TimedTask] = None
        #: Join phases that ended with a new generation (the rebalance metric).
        self.completed_rebalances = 0

    # -- deadlines ------------------------------------------------------------------------

    def tick(self) -> None:
        """Expire every session and rebalance deadline that passed by ``clock``."""
        with self._lock:
            self._expire(self._clock())

    def _on_tick(self) -> None:
        """The timer reached a scheduled deadline: expire what passed, schedule the next."""
        with self._lock:
            if self._closed():
                return
            self._next_tick = None
            self._schedule(self._expire(self._clock()))

    def reschedule(self) -> None:
        """Deadlines may have moved earlier (lock held): make sure the timer fires by the earliest."""
        if self._deadlines_on_timer and not self._closed():
            self._schedule(self._next_deadline())

    def _schedule(self, deadline: Optional[float]) -> None:
        if deadline is None or not self._deadlines_on_timer or self._closed():
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
                self.try_complete_join(group)
                self.changed(group)
            if group.join_deadline is not None and group.join_deadline <= now:
                self._on_join_deadline(group, now)
            for member in list(group.members.values()):
                if group.members.get(member.member_id) is not member or member.kept_alive():
                    continue
                if member.heartbeat_deadline <= now:
                    log.info("member %s of group %s timed out", member.member_id, group.group_id)
                    self.remove_member_and_update_group(group, member)
            deadlines = [m.heartbeat_deadline for m in group.members.values() if not m.kept_alive()]
            deadlines.extend(group.pending.values())
            if group.join_deadline is not None:
                deadlines.append(group.join_deadline)
            if deadlines:
                d = min(deadlines)
                next_deadline = d if next_deadline is None else min(next_deadline, d)
        return next_deadline

    # -- transitions (lock held) ------------------------------------------------------------

    def changed(self, group: GroupMetadata) -> None:
        """Deadlines may have moved and waiting calls may be answered: see to both (lock held)."""
        self.reschedule()
        self._waits.check_and_complete(group.group_id)

    def touch(self, member: MemberMetadata) -> None:
        member.heartbeat_deadline = self._clock() + member.session_timeout_ms / 1000.0

    def add_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.awaiting_join = True
        member.join_result = None
        if not group.members:
            group.protocol_type = member.protocol_type
        group.members[member.member_id] = member
        if group.leader_id is None or group.leader_id not in group.members:
            group.leader_id = member.member_id
        group.new_member_added = True
        if group.state == PREPARING_REBALANCE:
            self.try_complete_join(group)
        else:
            self.prepare_rebalance(group)

    def update_member_and_rebalance(
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
            self.try_complete_join(group)
        else:
            self.prepare_rebalance(group)

    def prepare_rebalance(self, group: GroupMetadata) -> None:
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
        self.try_complete_join(group)
        self.changed(group)

    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.state in (STABLE, COMPLETING_REBALANCE, EMPTY):
            self.prepare_rebalance(group)

    def try_complete_join(self, group: GroupMetadata) -> None:
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
            self.changed(group)
            return
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.protocol_name = group.select_protocol()
        group.transition(COMPLETING_REBALANCE)
        for member in group.members.values():
            member.awaiting_join = False
            member.assignment = b""
            member.join_result = self.join_result(group, member)
            self.touch(member)
        log.info("group %s generation %d: %d members", group.group_id, group.generation_id, len(group.members))
        self.changed(group)

    def join_result(self, group: GroupMetadata, member: MemberMetadata) -> JoinResult:
        members: List[Tuple[str, Optional[str], bytes]] = []
        if member.member_id == group.leader_id:
            members = [
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name)) for m in group.members.values()
            ]
        return JoinResult(
            NONE, group.generation_id, group.protocol_name, group.leader_id or "", member.member_id, members,
            protocol_type=group.protocol_type,
        )

    def complete_sync(self, group: GroupMetadata, assignments: Dict[str, bytes]) -> None:
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
                self.touch(member)
        self.changed(group)

    def _propagate_sync_error(self, group: GroupMetadata, code: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync:
                member.awaiting_sync = False
                member.sync_result = SyncResult(code)
        self.changed(group)

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
        self.changed(group)

    def remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._drop_member(group, member)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.state == PREPARING_REBALANCE:
            self.try_complete_join(group)
