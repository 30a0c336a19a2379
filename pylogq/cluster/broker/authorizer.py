"""Kafka's ACL authorizer (``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``).

The decision rules are :mod:`pylogq.cluster.acl`'s (Kafka's): super users first, then the
ACLs that apply to the resource (its literal name, the wildcard ``*``, each prefixed
pattern the name starts with), ``allow.everyone.if.no.acl.found`` when there are none,
deny before allow, DESCRIBE implied by READ, WRITE, DELETE and ALTER, DESCRIBE_CONFIGS by
ALTER_CONFIGS, ALL for any operation.

Where the ACLs live:

- a single node keeps them in its data directory (``pylogq-acls.json``, replaced
  atomically on every change, read at start): :class:`FileAclAuthorizer`;
- a broker of a cluster keeps them in the metadata store in Kafka's layout
  (:mod:`pylogq.cluster.zk.acls`): each change is a conditional write of the resource's
  znode plus a change notification, and every broker applies the notifications to its
  cache as they come (a watch, so within moments): :class:`ZkAclAuthorizer`.

The cache: an immutable :class:`_Snapshot` (the ACLs per pattern, the prefix lengths in
use per resource type, the ACLs that apply to each resource looked up so far, and the
decisions made so far) replaced whole on every change, so a Produce or a Fetch pays one
dict lookup for a decision it has met before and readers never take a lock. Writers take
:attr:`AclAuthorizer._lock` (one change at a time in this broker; the store's versions
keep brokers apart). Thread-safe.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import defaultdict
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

from ... import errors
from ...storage.checkpoint import write_atomically
from ..acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    acls_json,
    entries_from_json,
    implying,
    parse_enum,
    pascal_name,
    validate_binding,
)

if TYPE_CHECKING:  # a single node never loads the cluster's modules
    from ..zk.acls import AclZkStore
    from ..zk.store import MetadataStore, WatchedEvent

__all__ = ["ACLS_FILE", "AUTHORIZER_CLASS_NAMES", "AclAuthorizer", "FileAclAuthorizer", "ZkAclAuthorizer",
           "open_authorizer", "parse_super_users"]

log = logging.getLogger("pylogq.authorizer")

#: The ``authorizer.class.name`` values that turn this authorizer on (Kafka's ZooKeeper-mode
#: authorizer and its older name); empty (the default) leaves every request allowed.
AUTHORIZER_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer")
ACLS_FILE = "pylogq-acls.json"
#: Kafka's bound on retries of a conditional ACL write that keeps losing to other writers.
MAX_UPDATE_RETRIES = 10
#: Decisions remembered per snapshot; past this the memo starts again (bounded memory).
MAX_DECISIONS = 100_000
#: How long closing waits for the ACL change applier to stop.
CLOSE_TIMEOUT_S = 5.0

_ALLOW = AclPermissionType.ALLOW
_DENY = AclPermissionType.DENY
_ALL = AclOperation.ALL
_Entries = FrozenSet[AccessControlEntry]


def parse_super_users(text: Optional[str]) -> FrozenSet[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    out = set()
    for item in (text or "").split(";"):
        item = item.strip()
        if not item:
            continue
        if ":" not in item:
            raise errors.ConfigError("super.users: expected a string in format principalType:principalName but "
                                     "got %r" % item)
        out.add(item)
    return frozenset(out)


def open_authorizer(class_name: str, super_users_text: Optional[str], allow_everyone_if_no_acl_found: bool,
                    data_dir: str, broker_id: int, store: Optional["MetadataStore"]) -> Optional["AclAuthorizer"]:
    """The authorizer ``authorizer.class.name`` asks for (None when empty), with ``super.users``
    and ``allow.everyone.if.no.acl.found``: a single node's on its data directory, a cluster
    member's on the metadata store (loaded and watching)."""
    if not class_name:
        return None
    super_users = parse_super_users(super_users_text)
    if store is None:
        return FileAclAuthorizer(data_dir, super_users, allow_everyone_if_no_acl_found)
    from ..zk.acls import AclZkStore

    authorizer = ZkAclAuthorizer(AclZkStore(store), broker_id, super_users, allow_everyone_if_no_acl_found)
    authorizer.start()
    return authorizer


class _Snapshot:
    """The ACLs as of one change, and what was derived from them. Never changed once
    published, except the two memo dicts, which only grow (bounded) and are discarded
    with the snapshot."""

    __slots__ = ("acls", "prefix_lengths", "matching", "decisions")

    def __init__(self, acls: Dict[ResourcePattern, _Entries]) -> None:
        self.acls = acls
        lengths: Dict[ResourceType, Set[int]] = defaultdict(set)
        for pattern in acls:
            if pattern.pattern_type == PatternType.PREFIXED:
                lengths[pattern.resource_type].add(len(pattern.name))
        self.prefix_lengths: Dict[ResourceType, Tuple[int, ...]] = {t: tuple(sorted(n)) for t, n in lengths.items()}
        self.matching: Dict[Tuple[ResourceType, str], Tuple[AccessControlEntry, ...]] = {}
        self.decisions: Dict[Tuple[str, str, AclOperation, ResourceType, str], bool] = {}

    def applying(self, resource_type: ResourceType, name: str) -> Tuple[AccessControlEntry, ...]:
        """The entries that apply to one resource: its literal name's, the wildcard's and
        every prefixed pattern's that the name starts with."""
        key = (resource_type, name)
        found = self.matching.get(key)
        if found is not None:
            return found
        acls = self.acls
        out: List[AccessControlEntry] = []
        literal = acls.get(ResourcePattern(resource_type, name, PatternType.LITERAL))
        if literal:
            out.extend(literal)
        if name != WILDCARD_RESOURCE:
            wildcard = acls.get(ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL))
            if wildcard:
                out.extend(wildcard)
        for length in self.prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            entries = acls.get(ResourcePattern(resource_type, name[:length], PatternType.PREFIXED))
            if entries:
                out.extend(entries)
        result = tuple(out)
        if len(self.matching) >= MAX_DECISIONS:
            self.matching.clear()
        self.matching[key] = result
        return result


def _matches(entry: AccessControlEntry, principal: str, host: str) -> bool:
    return (entry.principal == principal or entry.principal == WILDCARD_PRINCIPAL) and \
        (entry.host == host or entry.host == WILDCARD_HOST)


class AclAuthorizer:
    """The decisions, the cache and the changes; where the ACLs are kept is a subclass's."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._lock = threading.RLock()
        self._snapshot = _Snapshot({})
        self.closed = False

    # -- decisions (any thread; on the event loop) -------------------------------------

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        snapshot = self._snapshot
        key = (principal, host, operation, resource_type, name)
        decided = snapshot.decisions.get(key)
        if decided is None:
            decided = self._decide(snapshot, principal, host, operation, resource_type, name)
            if len(snapshot.decisions) >= MAX_DECISIONS:
                snapshot.decisions.clear()
            snapshot.decisions[key] = decided
        return decided

    def _decide(self, snapshot: _Snapshot, principal: str, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str) -> bool:
        entries = snapshot.applying(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        for e in entries:
            if e.permission_type == _DENY and (e.operation == operation or e.operation == _ALL) \
                    and _matches(e, principal, host):
                return False
        granting = implying(operation)
        for e in entries:
            if e.permission_type == _ALLOW and (e.operation in granting or e.operation == _ALL) \
                    and _matches(e, principal, host):
                return True
        return False

    def authorize_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's ``authorizeByResourceType``: allowed when an ALLOW entry for the principal,
        host and operation (or ALL) exists on some pattern of the type that no DENY entry
        dominates (a DENY on the same literal, the wildcard, or a prefix of it)."""
        if principal in self.super_users:
            return True
        deny_literals: Set[str] = set()
        deny_prefixes: Set[str] = set()
        allow_literals: Set[str] = set()
        allow_prefixes: Set[str] = set()
        for pattern, entries in self._snapshot.acls.items():
            if pattern.resource_type != resource_type:
                continue
            for e in entries:
                if (e.operation == operation or e.operation == _ALL) and _matches(e, principal, host):
                    literal = pattern.pattern_type == PatternType.LITERAL
                    if e.permission_type == _DENY:
                        (deny_literals if literal else deny_prefixes).add(pattern.name)
                    elif e.permission_type == _ALLOW:
                        (allow_literals if literal else allow_prefixes).add(pattern.name)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True

        def dominated(name: str) -> bool:
            return any(name[:n] in deny_prefixes for n in range(1, len(name) + 1))

        if any(not dominated(p) for p in allow_prefixes):
            return True
        return any(n == WILDCARD_RESOURCE or (n not in deny_literals and not dominated(n)) for n in allow_literals)

    def acls(self, binding_filter: AclBindingFilter) -> List[AclBinding]:
        out = []
        for pattern, entries in sorted(self._snapshot.acls.items()):
            for entry in sorted(entries):
                binding = AclBinding(pattern, entry)
                if binding_filter.matches(binding):
                    out.append(binding)
        return out

    # -- changes (off the event loop: they write to the store) -------------------------

    def create_acls(self, bindings: Sequence[AclBinding]) -> List[Optional[errors.BrokerError]]:
        """Kafka's createAcls: each binding checked, then the valid ones added per pattern
        (one conditional write per pattern). -> None or the error, per binding."""
        results: List[Optional[errors.BrokerError]] = [None] * len(bindings)
        by_pattern: Dict[ResourcePattern, List[int]] = {}
        for i, binding in enumerate(bindings):
            problem = validate_binding(binding)
            if problem is not None:
                results[i] = errors.InvalidRequestError("Failed to create ACL: %s" % problem)
            else:
                by_pattern.setdefault(binding.pattern, []).append(i)
        with self._lock:
            for pattern, indexes in by_pattern.items():
                added = frozenset(bindings[i].entry for i in indexes)
                try:
                    self._update(pattern, lambda current: current | added)
                except Exception as exc:  # noqa: BLE001 - this pattern's bindings answer the error
                    failure = _api_error(exc)
                    for i in indexes:
                        results[i] = failure
        return results

    def delete_acls(self, filters: Sequence[AclBindingFilter]
                    ) -> List[List[Tuple[AclBinding, Optional[errors.BrokerError]]]]:
        """Kafka's deleteAcls: every pattern the filters can match (those this broker knows,
        and the exact ones a filter names) loses the entries a filter matches. -> per
        filter, the bindings deleted (each with None or the error of its pattern's write)."""
        deleted: Dict[AclBinding, int] = {}
        failures: Dict[AclBinding, errors.BrokerError] = {}
        with self._lock:
            patterns: Set[ResourcePattern] = set(self._snapshot.acls)
            for f in filters:
                pf = f.pattern_filter
                if pf.indefinite_field() is not None:
                    continue  # it can only match patterns this broker knows
                assert pf.name is not None
                if pf.pattern_type != PatternType.ANY:
                    patterns.add(ResourcePattern(pf.resource_type, pf.name, pf.pattern_type))
                else:
                    patterns.add(ResourcePattern(pf.resource_type, pf.name, PatternType.LITERAL))
                    patterns.add(ResourcePattern(pf.resource_type, pf.name, PatternType.PREFIXED))
            for pattern in sorted(patterns):
                matching = [(i, f) for i, f in enumerate(filters) if f.pattern_filter.matches(pattern)]
                if not matching:
                    continue
                these: Dict[AclBinding, int] = {}

                def remove(current: _Entries, pattern: ResourcePattern = pattern,
                           matching: List[Tuple[int, AclBindingFilter]] = matching,
                           these: Dict[AclBinding, int] = these) -> _Entries:
                    gone = set()
                    for entry in current:
                        for i, f in matching:
                            if f.entry_filter.matches(entry):
                                these.setdefault(AclBinding(pattern, entry), i)
                                gone.add(entry)
                    return current - gone

                try:
                    self._update(pattern, remove)
                except Exception as exc:  # noqa: BLE001 - its bindings answer the error
                    failure = _api_error(exc)
                    for binding in these:
                        failures.setdefault(binding, failure)
                for binding, i in these.items():
                    deleted.setdefault(binding, i)
        out: List[List[Tuple[AclBinding, Optional[errors.BrokerError]]]] = [[] for _ in filters]
        for binding, i in sorted(deleted.items()):
            out[i].append((binding, failures.get(binding)))
        return out

    def _update(self, pattern: ResourcePattern, change: Callable[[_Entries], _Entries]) -> None:
        """Apply ``change`` to the pattern's entries where they are kept, then publish them
        (:meth:`_publish`). Called under the lock."""
        raise NotImplementedError

    def _publish(self, pattern: ResourcePattern, entries: _Entries) -> None:
        """A new snapshot with the pattern's entries replaced (called under the lock)."""
        acls = dict(self._snapshot.acls)
        if entries:
            acls[pattern] = entries
        else:
            acls.pop(pattern, None)
        self._snapshot = _Snapshot(acls)

    def close(self) -> None:
        self.closed = True


def _api_error(exc: BaseException) -> errors.BrokerError:
    if isinstance(exc, errors.BrokerError):
        return exc
    log.error("ACL update failed", exc_info=exc)
    return errors.UnknownServerError("%s: %s" % (type(exc).__name__, exc))


class FileAclAuthorizer(AclAuthorizer):
    """A single node's ACLs in ``<data dir>/pylogq-acls.json`` (survive restarts)."""

    def __init__(self, data_dir: str, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        super().__init__(super_users, allow_everyone_if_no_acl_found)
        self.path = os.path.join(data_dir, ACLS_FILE)
        acls: Dict[ResourcePattern, _Entries] = {}
        try:
            with open(self.path, "rb") as f:
                body = json.loads(f.read().decode("utf-8"))
            if not isinstance(body, dict) or body.get("version") != 1:
                raise ValueError("not version 1")
            for item in body["resources"]:
                pattern = ResourcePattern(parse_enum(ResourceType, item["resourceType"]), str(item["name"]),
                                          parse_enum(PatternType, item["patternType"]))
                if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or \
                        pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
                    raise ValueError("bad resource pattern %r" % (item,))
                entries = entries_from_json(item["acls"])
                if entries:
                    acls[pattern] = entries
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise errors.CorruptMetadataError(self.path, "not an ACLs file (%s)" % exc,
                                              "restore it from a backup: it holds this broker's ACLs") from None
        self._snapshot = _Snapshot(acls)

    def _update(self, pattern: ResourcePattern, change: Callable[[_Entries], _Entries]) -> None:
        """The file is this broker's alone: the change is written whole (atomically), then published."""
        current = self._snapshot.acls.get(pattern, frozenset())
        new = change(current)
        if new == current:
            return
        acls = dict(self._snapshot.acls)
        if new:
            acls[pattern] = new
        else:
            acls.pop(pattern, None)
        resources = [{"resourceType": pascal_name(p.resource_type), "name": p.name, "patternType": p.pattern_type.name,
                      "acls": acls_json(acls[p])} for p in sorted(acls)]
        body = json.dumps({"version": 1, "resources": resources}, indent=1, sort_keys=True)
        write_atomically(self.path, body.encode("utf-8"))
        self._publish(pattern, new)


class ZkAclAuthorizer(AclAuthorizer):
    """A cluster member's ACLs: the metadata store's, with a cache kept current by the
    change notifications (one thread applies them, woken by the store's watches)."""

    def __init__(self, store: "AclZkStore", broker_id: int, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        super().__init__(super_users, allow_everyone_if_no_acl_found)
        self.zk = store
        self._versions: Dict[ResourcePattern, int] = {}
        self._last_seen: Dict[PatternType, str] = {}
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._apply_changes, name="pylogq-acl-changes-%d" % broker_id,
                                        daemon=True)

    def start(self) -> None:
        """Watch the notifications, then load every ACL (a change from now on is a notification:
        the order Kafka keeps, so nothing falls between the load and the first notification)."""
        self.zk.ensure_paths()
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            pending = self.zk.changes(pattern_type, watch=self._changed)
            if pending:
                self._last_seen[pattern_type] = pending[-1]
        acls: Dict[ResourcePattern, _Entries] = {}
        with self._lock:
            for pattern in self.zk.patterns():
                entries, version = self.zk.read(pattern)
                if entries:
                    acls[pattern] = entries
                    self._versions[pattern] = version
            self._snapshot = _Snapshot(acls)
        self.zk.store.add_listener(self._session_state)
        self._thread.start()
        log.info("authorizer loaded %d ACLs on %d resource patterns", sum(len(e) for e in acls.values()), len(acls))

    def _changed(self, event: "WatchedEvent") -> None:
        self._wake.set()  # on the store's thread: the work is the applier's

    def _session_state(self, state: str) -> None:
        """Connected again: read what came while away (the watches went with the connection)."""
        from ..zk.store import CONNECTED

        if state == CONNECTED:
            self._wake.set()

    def _apply_changes(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self.closed:
                return
            for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
                try:
                    self._apply(pattern_type)
                except errors.MetadataStoreError as exc:  # read again when the store is back
                    log.warning("could not read ACL change notifications (%s); they are read again once "
                                "connected", exc)
                except Exception:  # noqa: BLE001 - a bug: logged, the next notification retries
                    log.exception("could not apply ACL change notifications")

    def _apply(self, pattern_type: PatternType) -> None:
        """Apply the notifications of one kind not seen yet, in order, then purge the old ones.

        A notification is marked seen only once applied, so a store error (raised: the pass
        ends) leaves it to the next pass. One that cannot be applied for what it holds (an
        undecodable notification, a corrupt ACL znode, a name the store refuses) is logged
        and passed over, as Kafka's ZkNodeChangeNotificationListener does: it would fail the
        same way every time, and must not hold back the changes after it."""
        names = self.zk.changes(pattern_type, watch=self._changed)
        last = self._last_seen.get(pattern_type, "")
        for name in names:
            if name <= last:
                continue
            try:
                self._apply_change(pattern_type, name)
            except (errors.CorruptMetadataError, ValueError) as exc:  # InvalidPathError is a ValueError
                log.error("skipped ACL change notification %s: %s", name, exc)
            self._last_seen[pattern_type] = name
        self.zk.purge(pattern_type, names)

    def _apply_change(self, pattern_type: PatternType, name: str) -> None:
        """Read the pattern a notification names and publish its entries as the store has them."""
        pattern = self.zk.read_change(pattern_type, name)
        if pattern is None:
            return  # gone (another broker purged it): nothing says which pattern changed
        with self._lock:
            entries, version = self.zk.read(pattern)
            self._publish_version(pattern, entries, version)
        log.info("applied an ACL change of %s: %d entries", pattern, len(entries))

    def _update(self, pattern: ResourcePattern, change: Callable[[_Entries], _Entries]) -> None:
        """Apply ``change`` to the pattern's znode, as Kafka's updateResourceAcls: a conditional
        write on the version this broker knows, read again and retried when another writer got
        there first; then this broker's cache and the others' notification."""
        current, version = self._known(pattern)
        for _ in range(MAX_UPDATE_RETRIES + 1):
            new = change(current)
            if new == current:
                # Nothing to write if the store agrees (the cache may be behind a notification).
                stored = self.zk.read(pattern)
                if stored == (current, version):
                    return
                current, version = stored
                continue
            written = self._write(pattern, new, version)
            if written is not None:
                self._publish_version(pattern, new, written)
                self.zk.notify(pattern)
                return
            current, version = self.zk.read(pattern)
        # Never expected: as many writers on one resource at once as retries.
        raise errors.UnknownServerError("Failed to update ACLs for %s after trying a maximum of %d times"
                                        % (pattern, MAX_UPDATE_RETRIES))

    def _known(self, pattern: ResourcePattern) -> Tuple[_Entries, int]:
        """The pattern's entries and znode version as this broker last wrote or read them."""
        version = self._versions.get(pattern)
        if version is None:
            return self.zk.read(pattern)
        return self._snapshot.acls.get(pattern, frozenset()), version

    def _publish_version(self, pattern: ResourcePattern, entries: _Entries, version: int) -> None:
        """Publish the pattern's entries, remembering the znode version they are at (none: deleted)."""
        if entries and version >= 0:
            self._versions[pattern] = version
        else:
            self._versions.pop(pattern, None)
        self._publish(pattern, entries)

    def _write(self, pattern: ResourcePattern, entries: _Entries, version: int) -> Optional[int]:
        try:
            return self.zk.write(pattern, entries, version)
        except errors.InvalidPathError as exc:
            raise errors.InvalidRequestError("Failed to create ACL: invalid resource name %r (%s)"
                                             % (pattern.name, exc)) from None

    def close(self) -> None:
        """Stop listening to the store and stop the applier (it finishes the notification in
        hand: at most :data:`CLOSE_TIMEOUT_S` is waited for it, as a store call may wait for
        a connection; the store's closing ends such a call)."""
        super().close()
        self.zk.store.remove_listener(self._session_state)
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(CLOSE_TIMEOUT_S)
            if self._thread.is_alive():
                log.warning("the ACL change applier did not stop within %.0f s; it ends with the metadata "
                            "store's session", CLOSE_TIMEOUT_S)
