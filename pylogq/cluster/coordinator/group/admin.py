"""The group administration paths of a coordinator: ListGroups, DescribeGroups and
DeleteGroups (Kafka's handleListGroups, handleDescribeGroup and handleDeleteGroups), and
the snapshot of its groups the broker's metrics read.

:class:`GroupAdmin` reads the groups the
:class:`~pylogq.cluster.coordinator.group.metadata_manager.GroupMetadataManager` keeps
and deletes Empty ones, tombstoning their metadata and offsets in ``__consumer_offsets``;
the group coordinator hands these calls on, with the lock it guards every group with.
"""

from __future__ import annotations

import threading
from typing import Dict, Iterable, List, Optional, Tuple

from ....errors import GroupIdNotFoundError, InvalidGroupIdError, NonEmptyGroupError
from ...contract import GroupDescription, ListedGroup, MemberDescription
from . import offsets_schema as schema
from .group import DEAD, EMPTY, NONE, STABLE, Partition
from .metadata_manager import GroupMetadataManager

__all__ = ["GroupAdmin"]


class GroupAdmin:
    """Listing, describing and deleting the groups a coordinator serves.

    Thread-safe: every call takes the coordinator's lock (``lock``), the one that guards
    every group; a deletion's tombstones are written under it.
    """

    def __init__(self, metadata: GroupMetadataManager, lock: threading.Condition) -> None:
        self.metadata = metadata
        self._groups = metadata.groups  # the manager's map, by group id
        self._lock = lock

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
        with self._lock:
            out = [ListedGroup(g.group_id, g.protocol_type or "", g.state) for g in self._groups.values()
                   if g.state != DEAD]
        return sorted(g for g in out if (not state_set or g.state.lower() in state_set)
                      and (not type_set or g.group_type in type_set))

    def metrics_snapshot(self) -> List[Tuple[str, str, int, List[Tuple[Partition, int]]]]:
        """(group id, state, member count, [(partition, committed offset)]) of every group
        this coordinator serves, for the broker's metrics."""
        with self._lock:
            return [(g.group_id, g.state, len(g.members), [(tp, v.offset) for tp, v in g.offsets.items()])
                    for g in self._groups.values()]

    def describe_group(self, group_id: str) -> GroupDescription:
        """Kafka's DescribeGroups for one group; member metadata and assignments only when Stable."""
        with self._lock:
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
        """Delete empty groups and their offsets (tombstones); NON_EMPTY_GROUP while members remain.

        Offsets an undecided transaction holds are tombstoned too (as Kafka's deleteAllOffsets
        does), so that neither the transaction's COMMIT marker nor a load brings them back."""
        out: Dict[str, int] = {}
        with self._lock:
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
                partitions = dict.fromkeys(group.offsets)
                for written in group.pending_txn_offsets.values():
                    partitions.update(dict.fromkeys(written))
                keys = [schema.encode_offset_commit_key(group_id, t, p) for t, p in partitions]
                keys.append(schema.encode_group_metadata_key(group_id))
                code = self.metadata.store(group_id, keys, [None] * len(keys), for_commit=False)
                if code == NONE:
                    group.transition(DEAD)
                    del self._groups[group_id]
                out[group_id] = code
        return out
