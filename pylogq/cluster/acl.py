"""Kafka's access control model: resource patterns, access control entries, their filters,
the operations and their implications, and the authorizer as the server sees it.

The enums carry Kafka's wire codes (``AclOperation``, ``AclPermissionType``,
``ResourceType``, ``PatternType``), so a request's bytes map to them directly; their
names in ZooKeeper's JSON and in the tools' output are Kafka's too (``Read``,
``ClusterAction``, ``TransactionalId``; ``ResourcePattern(resourceType=TOPIC, name=t,
patternType=LITERAL)``).

A binding (:class:`AclBinding`) is a pattern (what it applies to: a literal name, the
wildcard ``*``, or a name prefix) and an entry (who, from where, which operation, allow
or deny). Filters select bindings for DescribeAcls and DeleteAcls with Kafka's rules: a
``None`` field or an ``ANY`` value matches everything, and the ``MATCH`` pattern type
selects every pattern that applies to a resource name (its literal, the wildcard and
each prefix of it).

How an authorizer decides (Kafka's ``AclAuthorizer``): a super user may do anything;
otherwise the ACLs that apply to the resource are gathered (its literal name, the
wildcard, every prefixed pattern the name starts with). None at all: the answer is
``allow.everyone.if.no.acl.found``. Else a DENY entry for the principal (or ``User:*``),
the host (or ``*``) and the operation (or ``ALL``) refuses; failing that, an ALLOW entry
grants, where READ, WRITE, DELETE and ALTER each imply DESCRIBE, and ALTER_CONFIGS
implies DESCRIBE_CONFIGS.

This module is pure data: no locks, no I/O. Everything here is immutable.
"""

from __future__ import annotations

import enum
import json
from typing import Any, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Protocol, Sequence, Tuple, Type, TypeVar

from .. import errors

__all__ = [
    "AccessControlEntry", "AccessControlEntryFilter", "AclBinding", "AclBindingFilter", "AclOperation",
    "AclPermissionType", "Authorizer", "CLUSTER_NAME", "PatternType", "ResourcePattern", "ResourcePatternFilter",
    "ResourceType", "SUPPORTED_OPERATIONS", "WILDCARD_HOST", "WILDCARD_PRINCIPAL", "WILDCARD_RESOURCE", "acls_json",
    "decode_acls", "encode_acls", "entries_from_json", "from_code", "implying", "operations_bits", "pascal_name",
    "parse_enum", "validate_binding",
]

_E = TypeVar("_E", bound=enum.IntEnum)


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` (the wire codes)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    """Kafka's ``AclPermissionType``."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType``."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType``: LITERAL and PREFIXED are patterns; ANY and MATCH only filter."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


#: The one name of the cluster resource.
CLUSTER_NAME = "kafka-cluster"
#: A literal pattern of this name applies to every resource of its type.
WILDCARD_RESOURCE = "*"
#: An entry for this principal applies to every principal.
WILDCARD_PRINCIPAL = "User:*"
#: An entry for this host applies to every host.
WILDCARD_HOST = "*"

_O = AclOperation
#: What each resource type supports (Kafka 3.9's ``AclEntry.supportedOperations``): the
#: operations an authorized-operations answer reports, and what kafka-acls accepts.
SUPPORTED_OPERATIONS: Dict[ResourceType, Tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER, _O.DESCRIBE, _O.DESCRIBE_CONFIGS,
                         _O.ALTER_CONFIGS),
    ResourceType.GROUP: (_O.READ, _O.DELETE, _O.DESCRIBE),
    ResourceType.CLUSTER: (_O.CREATE, _O.ALTER, _O.DESCRIBE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                           _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE),
    ResourceType.TRANSACTIONAL_ID: (_O.WRITE, _O.DESCRIBE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}

# Which allowed operations grant an operation asked for (Kafka's ACL inheritance).
_IMPLYING: Dict[AclOperation, FrozenSet[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
}


def implying(operation: AclOperation) -> FrozenSet[AclOperation]:
    """The operations an ALLOW entry may name to grant ``operation`` (ALL grants anything)."""
    found = _IMPLYING.get(operation)
    return found if found is not None else frozenset({operation})


def operations_bits(operations: Iterable[AclOperation]) -> int:
    """Authorized operations as Kafka sends them: bit n set for operation code n."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


def from_code(cls: Type[_E], code: int) -> _E:
    """An enum value from its wire code; UNKNOWN (0) for a code this side does not know, as
    Kafka's ``fromCode`` answers (a newer peer's code is not an error until it is used)."""
    try:
        return cls(code)
    except ValueError:
        return cls(0)


def pascal_name(member: enum.IntEnum) -> str:
    """Kafka's stored and printed name of an enum value: ``CLUSTER_ACTION`` -> ``ClusterAction``."""
    return "".join(part.capitalize() for part in member.name.split("_"))


def parse_enum(cls: Type[enum.IntEnum], text: str) -> Any:
    """An enum value from Kafka's name of it (``ClusterAction``, any case; ``CLUSTER_ACTION``
    too); UNKNOWN for a name it does not know, as Kafka's SecurityUtils answers."""
    key = text.strip().replace("_", "").upper()
    for member in cls:
        if member.name.replace("_", "") == key:
            return member
    return cls(0)


class ResourcePattern(NamedTuple):
    """What a binding applies to: a resource type, a name, and how the name matches."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return "ResourcePattern(resourceType=%s, name=%s, patternType=%s)" % (
            self.resource_type.name, self.name, self.pattern_type.name)


class AccessControlEntry(NamedTuple):
    """Who may (or may not) do what from where: ``principal`` is ``Type:name`` (``User:alice``)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return "(principal=%s, host=%s, operation=%s, permissionType=%s)" % (
            self.principal, self.host, self.operation.name, self.permission_type.name)

    def to_filter(self) -> "AccessControlEntryFilter":
        return AccessControlEntryFilter(self.principal, self.host, self.operation, self.permission_type)


class AclBinding(NamedTuple):
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return "(pattern=%s, entry=%s)" % (self.pattern, self.entry)


class ResourcePatternFilter(NamedTuple):
    """Selects patterns: ``name`` None matches any name; ``pattern_type`` ANY matches any
    pattern of exactly that name, MATCH every pattern that applies to that name."""

    resource_type: ResourceType
    name: Optional[str]
    pattern_type: PatternType

    def __str__(self) -> str:
        return "ResourcePattern(resourceType=%s, name=%s, patternType=%s)" % (
            self.resource_type.name, "<any>" if self.name is None else self.name, self.pattern_type.name)

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type == PatternType.ANY or self.pattern_type == pattern.pattern_type:
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def indefinite_field(self) -> Optional[str]:
        """Why this filter may match more than one pattern (None: it names exactly one)."""
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None


class AccessControlEntryFilter(NamedTuple):
    """Selects entries: a None principal or host, or ANY, matches every value."""

    principal: Optional[str]
    host: Optional[str]
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type


class AclBindingFilter(NamedTuple):
    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def unknown_element(self) -> bool:
        """Whether a field is UNKNOWN (a code this broker does not know): Kafka refuses such filters."""
        p, e = self.pattern_filter, self.entry_filter
        return p.pattern_type == PatternType.UNKNOWN or p.resource_type == ResourceType.UNKNOWN \
            or e.operation == AclOperation.UNKNOWN or e.permission_type == AclPermissionType.UNKNOWN

    @classmethod
    def any(cls) -> "AclBindingFilter":
        """The filter every binding matches."""
        return cls(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                   AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))


def validate_binding(binding: AclBinding) -> Optional[str]:
    """Why Kafka refuses to create ``binding`` (INVALID_REQUEST), or None when it may be created."""
    pattern, entry = binding
    if ResourceType.UNKNOWN == pattern.resource_type or pattern.pattern_type == PatternType.UNKNOWN \
            or entry.operation == AclOperation.UNKNOWN or entry.permission_type == AclPermissionType.UNKNOWN:
        return "ACL binding contains unknown elements"
    if pattern.resource_type == ResourceType.ANY:
        return "resourceType must not be ANY"
    if pattern.pattern_type in (PatternType.ANY, PatternType.MATCH):
        return "patternType must not be %s" % pattern.pattern_type.name
    if entry.operation == AclOperation.ANY:
        return "operation must not be ANY"
    if entry.permission_type == AclPermissionType.ANY:
        return "permissionType must not be ANY"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is " + CLUSTER_NAME
    if not pattern.name:
        return "Invalid empty resource name"
    if "/" in pattern.name:
        return "ACL binding contains invalid resource name: " + pattern.name
    if ":" not in entry.principal:
        return "expected a string in format principalType:principalName but got " + entry.principal
    return None


# -- ZooKeeper's JSON (and a single node's file): {"version":1,"acls":[{...}]} -------------------

def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """Kafka's JSON of one resource's ACLs, as stored in ``/kafka-acl/<Type>/<name>``."""
    return json.dumps({"version": 1, "acls": acls_json(entries)}, separators=(",", ":")).encode("utf-8")


def acls_json(entries: Iterable[AccessControlEntry]) -> List[Dict[str, str]]:
    """The ``acls`` list of Kafka's JSON, in a stable order."""
    return [{"principal": e.principal, "permissionType": pascal_name(e.permission_type),
             "operation": pascal_name(e.operation), "host": e.host} for e in sorted(entries)]


def entries_from_json(acls: Sequence[Any]) -> FrozenSet[AccessControlEntry]:
    """Entries from the ``acls`` list of Kafka's JSON; ValueError naming what is wrong.

    An operation or permission type this broker does not know (one a newer Kafka wrote) is
    read as UNKNOWN, as Kafka's AclEntry reads it: such an entry is listed, and deleted by
    a filter that matches it, but grants and denies nothing."""
    out = set()
    for item in acls:
        if not isinstance(item, dict):
            raise ValueError("an ACL is not an object: %r" % (item,))
        principal, host = item.get("principal"), item.get("host")
        if not isinstance(principal, str) or ":" not in principal or not isinstance(host, str):
            raise ValueError("bad principal or host in %r" % (item,))
        operation = parse_enum(AclOperation, str(item.get("operation", "")))
        permission = parse_enum(AclPermissionType, str(item.get("permissionType", "")))
        out.add(AccessControlEntry(principal, host, operation, permission))
    return frozenset(out)


def decode_acls(data: bytes) -> FrozenSet[AccessControlEntry]:
    """The entries of Kafka's JSON (empty data: none); ValueError when it is not that JSON."""
    if not data:
        return frozenset()
    body = json.loads(data.decode("utf-8"))
    if not isinstance(body, dict) or body.get("version") != 1 or not isinstance(body.get("acls"), list):
        raise ValueError("not version 1 ACL JSON: %r" % (data[:200],))
    return entries_from_json(body["acls"])


class Authorizer(Protocol):
    """An authorizer as the server calls it (``authorizer.class.name``'s Kafka ACL authorizer).

    ``principal`` is ``Type:name`` (``User:alice``) and ``host`` the client's address. The
    ``authorize*`` calls are quick (a cache) and run on the event loop; the ACL changes write
    to the authorizer's store and may block (run them off the loop). Thread-safe.
    """

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool: ...

    def authorize_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's ``authorizeByResourceType``: whether some resource of the type allows it."""
        ...

    def create_acls(self, bindings: Sequence[AclBinding]) -> List[Optional[errors.BrokerError]]:
        """-> per binding, None or why it was not created."""
        ...

    def delete_acls(self, filters: Sequence[AclBindingFilter]
                    ) -> List[List[Tuple[AclBinding, Optional[errors.BrokerError]]]]:
        """-> per filter, the bindings it deleted (each with None or why its deletion failed)."""
        ...

    def acls(self, binding_filter: AclBindingFilter) -> List[AclBinding]: ...
