"""ACLs in ZooKeeper, in Kafka's layout (``kafka.zk.ZkAclStore``, ``ZkAclChangeStore``)::

    /kafka-acl/<Type>/<name>                        {"version":1,"acls":[{"principal":"User:alice",
                                                     "permissionType":"Allow","operation":"Read",
                                                     "host":"*"}]}        (LITERAL patterns)
    /kafka-acl-extended/prefixed/<Type>/<name>      the same JSON          (PREFIXED patterns)
    /kafka-acl-changes/acl_changes_<seq>            TOPIC:<name>           (a literal pattern changed)
    /kafka-acl-extended-changes/acl_changes_<seq>   {"version":1,"resourceType":"TOPIC","name":..,
                                                     "patternType":"PREFIXED"}

``<Type>`` is Kafka's name of the resource type (``Topic``, ``Group``, ``Cluster``,
``TransactionalId``, ``DelegationToken``, ``User``); names are not encoded (a name with
``/`` is refused before it gets here, as Kafka refuses it). A resource's znode is
written conditionally on the version read, created if absent and deleted when its last
ACL goes, so two brokers changing one resource's ACLs at once never lose a change: the
loser reads again and retries. Every change leaves a sequential notification that each
broker watches; notifications older than :data:`CHANGE_EXPIRATION_MS` are purged.
Thread-safe as the store is.
"""

from __future__ import annotations

import json
import time
from typing import FrozenSet, List, Optional, Tuple

from ... import errors
from ..acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    decode_acls,
    encode_acls,
    parse_enum,
    pascal_name,
)
from .store import MetadataStore, Watcher

__all__ = ["ACL_CHANGE_PREFIX", "AclZkStore", "CHANGE_EXPIRATION_MS", "LITERAL_ACL_PATH", "LITERAL_CHANGES_PATH",
           "PREFIXED_ACL_PATH", "PREFIXED_CHANGES_PATH", "acl_path", "decode_change", "encode_change"]

LITERAL_ACL_PATH = "/kafka-acl"
PREFIXED_ACL_PATH = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
PREFIXED_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
#: Kafka's ZkNodeChangeNotificationListener keeps notifications this long (15 minutes).
CHANGE_EXPIRATION_MS = 15 * 60 * 1000

_ROOTS = {PatternType.LITERAL: LITERAL_ACL_PATH, PatternType.PREFIXED: PREFIXED_ACL_PATH}
_CHANGES = {PatternType.LITERAL: LITERAL_CHANGES_PATH, PatternType.PREFIXED: PREFIXED_CHANGES_PATH}
#: Kafka's legacy separator of a literal change: ``TOPIC:name``.
_SEPARATOR = ":"


def acl_path(pattern: ResourcePattern) -> str:
    return "%s/%s/%s" % (_ROOTS[pattern.pattern_type], pascal_name(pattern.resource_type), pattern.name)


def encode_change(pattern: ResourcePattern) -> bytes:
    """A change notification's data: ``TOPIC:name`` for a literal pattern (Kafka's legacy
    form, the type's enum name), Kafka's ExtendedAclChangeEvent JSON for a prefixed one."""
    if pattern.pattern_type == PatternType.LITERAL:
        return (pattern.resource_type.name + _SEPARATOR + pattern.name).encode("utf-8")
    return json.dumps({"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
                       "patternType": pattern.pattern_type.name}, separators=(",", ":")).encode("utf-8")


def decode_change(pattern_type: PatternType, data: bytes) -> ResourcePattern:
    """The pattern a notification names; ValueError when it does not name one."""
    text = data.decode("utf-8")
    if pattern_type == PatternType.LITERAL:
        kind, sep, name = text.partition(_SEPARATOR)
        resource_type = parse_enum(ResourceType, kind)
        if not sep or resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise ValueError("expected a string in format ResourceType:ResourceName but got " + text)
        return ResourcePattern(resource_type, name, PatternType.LITERAL)
    body = json.loads(text)
    if not isinstance(body, dict) or body.get("version") != 1:
        raise ValueError("unsupported ACL change event %r" % text)
    resource_type = parse_enum(ResourceType, str(body.get("resourceType", "")))
    found = parse_enum(PatternType, str(body.get("patternType", "")))
    named = body.get("name")
    if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or found != PatternType.PREFIXED \
            or not isinstance(named, str):
        raise ValueError("unsupported ACL change event %r" % text)
    return ResourcePattern(resource_type, named, found)


class AclZkStore:
    """The ACL znodes and their change notifications on a metadata store."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def ensure_paths(self) -> None:
        for path in (LITERAL_ACL_PATH, PREFIXED_ACL_PATH, LITERAL_CHANGES_PATH, PREFIXED_CHANGES_PATH):
            self.store.ensure_path(path)

    def read(self, pattern: ResourcePattern) -> Tuple[FrozenSet[AccessControlEntry], int]:
        """(the pattern's entries, its znode's version; -1 when there is no znode)."""
        try:
            data, stat = self.store.get(acl_path(pattern))
        except errors.NoNodeError:
            return frozenset(), -1
        try:
            return decode_acls(data), stat.version
        except ValueError as exc:
            raise errors.CorruptMetadataError(acl_path(pattern), str(exc), "rewrite the znode in Kafka's ACL JSON") \
                from None

    def patterns(self) -> List[ResourcePattern]:
        """Every pattern with a znode (a resource type Kafka does not know is skipped)."""
        out: List[ResourcePattern] = []
        for pattern_type, root in _ROOTS.items():
            try:
                kinds = self.store.get_children(root)
            except errors.NoNodeError:
                continue
            for kind in kinds:
                resource_type = parse_enum(ResourceType, kind)
                if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
                    continue
                try:
                    names = self.store.get_children(root + "/" + kind)
                except errors.NoNodeError:
                    continue
                out.extend(ResourcePattern(resource_type, name, pattern_type) for name in names)
        return out

    def write(self, pattern: ResourcePattern, entries: FrozenSet[AccessControlEntry], version: int) -> Optional[int]:
        """Replace the pattern's entries if its znode is still at ``version`` (-1: absent);
        an empty set deletes the znode. -> the znode's new version (-1: deleted), None when
        another writer got there first."""
        path = acl_path(pattern)
        try:
            if not entries:
                if version >= 0:
                    self.store.delete(path, version)
                return -1
            if version < 0:
                self.store.create(path, encode_acls(entries), makepath=True)
                return 0
            return self.store.set(path, encode_acls(entries), version).version
        except (errors.BadVersionError, errors.NodeExistsError, errors.NoNodeError):
            return None

    def notify(self, pattern: ResourcePattern) -> None:
        """Tell every broker the pattern's ACLs changed."""
        self.store.create("%s/%s" % (_CHANGES[pattern.pattern_type], ACL_CHANGE_PREFIX), encode_change(pattern),
                          sequential=True, makepath=True)

    def changes(self, pattern_type: PatternType, watch: Optional[Watcher] = None) -> List[str]:
        """The pending notifications of one kind, oldest first (``watch``: called at the next one)."""
        children = self.store.get_children(_CHANGES[pattern_type], watch=watch)
        return sorted(c for c in children if c.startswith(ACL_CHANGE_PREFIX))

    def read_change(self, pattern_type: PatternType, name: str) -> Optional[ResourcePattern]:
        """The pattern a notification names; None when it is gone."""
        path = "%s/%s" % (_CHANGES[pattern_type], name)
        try:
            data, _ = self.store.get(path)
        except errors.NoNodeError:
            return None
        try:
            return decode_change(pattern_type, data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.CorruptMetadataError(path, str(exc), "delete the notification") from None

    def purge(self, pattern_type: PatternType, names: List[str]) -> None:
        """Delete the notifications among ``names`` created more than :data:`CHANGE_EXPIRATION_MS`
        ago, by each one's creation time as the store keeps it (Kafka's
        purgeObsoleteNotifications): whichever broker gets there first deletes it."""
        now = int(time.time() * 1000)
        for name in names:
            path = "%s/%s" % (_CHANGES[pattern_type], name)
            stat = self.store.exists(path)
            if stat is not None and now - stat.ctime > CHANGE_EXPIRATION_MS:
                try:
                    self.store.delete(path)
                except errors.NoNodeError:
                    pass
