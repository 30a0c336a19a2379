"""Kafka's ACL model and its authorizer's decisions (pylogq/cluster/acl.py, cluster/broker/authorizer.py).

The rules are those of Kafka's AclAuthorizer: literal, wildcard and prefixed patterns, the
wildcard principal and host, deny before allow, the operations that imply DESCRIBE and
DESCRIBE_CONFIGS, ALL, super users and ``allow.everyone.if.no.acl.found``; the filters of
DescribeAcls and DeleteAcls (ANY and MATCH); the JSON Kafka keeps in ZooKeeper; a single
node's file across a restart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, List, Optional

import pytest

from pylogq import errors
from pylogq.cluster.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    SUPPORTED_OPERATIONS,
    decode_acls,
    encode_acls,
)
from pylogq.cluster.broker.authorizer import ACLS_FILE, FileAclAuthorizer, parse_super_users
from pylogq.cluster.zk.acls import decode_change, encode_change

O, P, T, K = AclOperation, AclPermissionType, ResourceType, PatternType
ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"


def _binding(kind: ResourceType, name: str, principal: str = ALICE, op: AclOperation = O.READ,
             permission: AclPermissionType = P.ALLOW, pattern: PatternType = K.LITERAL,
             host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(kind, name, pattern), AccessControlEntry(principal, host, op, permission))


@pytest.fixture
def authorizer(tmp_path: Path) -> FileAclAuthorizer:
    return FileAclAuthorizer(str(tmp_path))


def _add(authorizer: FileAclAuthorizer, *bindings: AclBinding) -> None:
    assert authorizer.create_acls(list(bindings)) == [None] * len(bindings)


def _can(authorizer: FileAclAuthorizer, op: AclOperation, name: str, principal: str = ALICE,
         kind: ResourceType = T.TOPIC, host: str = HOST) -> bool:
    return authorizer.authorize(principal, host, op, kind, name)


def test_without_acls_nothing_is_allowed_unless_configured(tmp_path: Path) -> None:
    assert not _can(FileAclAuthorizer(str(tmp_path)), O.READ, "t")
    open_one = FileAclAuthorizer(str(tmp_path), allow_everyone_if_no_acl_found=True)
    assert _can(open_one, O.READ, "t") and _can(open_one, O.ALTER, "kafka-cluster", kind=T.CLUSTER)


def test_allow_everyone_applies_only_to_resources_without_acls(tmp_path: Path) -> None:
    authorizer = FileAclAuthorizer(str(tmp_path), allow_everyone_if_no_acl_found=True)
    _add(authorizer, _binding(T.TOPIC, "guarded", BOB))
    assert _can(authorizer, O.READ, "open")  # no ACL on it
    assert not _can(authorizer, O.READ, "guarded")  # ACLs exist, none for alice
    assert _can(authorizer, O.READ, "guarded", BOB)


def test_literal_acl_grants_its_operation_on_its_resource_only(authorizer: FileAclAuthorizer) -> None:
    _add(authorizer, _binding(T.TOPIC, "orders"))
    assert _can(authorizer, O.READ, "orders")
    assert not _can(authorizer, O.WRITE, "orders")
    assert not _can(authorizer, O.READ, "orders2")  # literal: not a prefix
    assert not _can(authorizer, O.READ, "orders", BOB)
    assert not _can(authorizer, O.READ, "orders", kind=T.GROUP)


def test_wildcard_resource_principal_and_host(authorizer: FileAclAuthorizer) -> None:
    _add(authorizer, _binding(T.GROUP, "*", "User:*", O.READ))
    assert _can(authorizer, O.READ, "any-group", "User:someone", T.GROUP)
    _add(authorizer, _binding(T.TOPIC, "t", ALICE, O.WRITE, host=HOST))
    assert _can(authorizer, O.WRITE, "t", host=HOST)
    assert not _can(authorizer, O.WRITE, "t", host=OTHER_HOST)


def test_prefixed_patterns_match_names_that_start_with_them(authorizer: FileAclAuthorizer) -> None:
    _add(authorizer, _binding(T.TOPIC, "pay", pattern=K.PREFIXED), _binding(T.TOPIC, "payments-eu", BOB))
    assert _can(authorizer, O.READ, "pay")
    assert _can(authorizer, O.READ, "payments")
    assert _can(authorizer, O.READ, "payments-eu")  # the prefix applies beside bob's literal
    assert not _can(authorizer, O.READ, "pa")
    assert not _can(authorizer, O.READ, "xpay")
    # A prefixed pattern is not a literal one: a resource literally named like it matches too, nothing else.
    _add(authorizer, _binding(T.TOPIC, "a", BOB, pattern=K.PREFIXED))
    assert _can(authorizer, O.READ, "abc", BOB) and not _can(authorizer, O.READ, "bac", BOB)


def test_deny_beats_allow_whatever_the_pattern(authorizer: FileAclAuthorizer) -> None:
    _add(authorizer, _binding(T.TOPIC, "*", ALICE, O.ALL),
         _binding(T.TOPIC, "secret", pattern=K.PREFIXED, permission=P.DENY))
    assert _can(authorizer, O.WRITE, "public")
    assert not _can(authorizer, O.READ, "secret-plans")
    assert _can(authorizer, O.READ, "secre")
    # A deny of ALL denies every operation; a deny from one host only from that host.
    _add(authorizer, _binding(T.TOPIC, "t", ALICE, O.ALL, P.DENY, host=OTHER_HOST))
    assert _can(authorizer, O.READ, "t", host=HOST) and not _can(authorizer, O.READ, "t", host=OTHER_HOST)
    # A deny for every user denies alice too.
    _add(authorizer, _binding(T.TOPIC, "closed", "User:*", O.WRITE, P.DENY))
    assert not _can(authorizer, O.WRITE, "closed") and _can(authorizer, O.READ, "closed")


def test_implications(authorizer: FileAclAuthorizer) -> None:
    for op in (O.READ, O.WRITE, O.DELETE, O.ALTER):
        name = "t-%s" % op.name
        _add(authorizer, _binding(T.TOPIC, name, op=op))
        assert _can(authorizer, O.DESCRIBE, name), op
        assert not _can(authorizer, O.DESCRIBE_CONFIGS, name)
    _add(authorizer, _binding(T.TOPIC, "configs", op=O.ALTER_CONFIGS))
    assert _can(authorizer, O.DESCRIBE_CONFIGS, "configs") and not _can(authorizer, O.DESCRIBE, "configs")
    # DESCRIBE implies nothing; CREATE does not imply DESCRIBE.
    _add(authorizer, _binding(T.TOPIC, "described", op=O.DESCRIBE), _binding(T.TOPIC, "created", op=O.CREATE))
    assert not _can(authorizer, O.READ, "described")
    assert not _can(authorizer, O.DESCRIBE, "created")
    # ALL grants every operation.
    _add(authorizer, _binding(T.CLUSTER, "kafka-cluster", op=O.ALL))
    assert all(_can(authorizer, op, "kafka-cluster", kind=T.CLUSTER)
               for op in (O.ALTER, O.DESCRIBE, O.CLUSTER_ACTION, O.IDEMPOTENT_WRITE))


def test_a_denied_describe_is_not_undone_by_an_implying_allow(authorizer: FileAclAuthorizer) -> None:
    _add(authorizer, _binding(T.TOPIC, "t", op=O.READ), _binding(T.TOPIC, "t", op=O.DESCRIBE, permission=P.DENY))
    assert _can(authorizer, O.READ, "t")
    assert not _can(authorizer, O.DESCRIBE, "t")


def test_super_users(tmp_path: Path) -> None:
    authorizer = FileAclAuthorizer(str(tmp_path), parse_super_users(" User:admin ; User:broker;"))
    assert authorizer.super_users == {"User:admin", "User:broker"}
    _add(authorizer, _binding(T.TOPIC, "t", "User:admin", O.ALL, P.DENY))
    assert _can(authorizer, O.DELETE, "t", "User:admin")  # a super user is not checked: its own DENY is overridden
    assert not _can(authorizer, O.DELETE, "t", "User:other")
    with pytest.raises(errors.ConfigError, match="principalType:principalName"):
        parse_super_users("admin")


def test_read_on_a_group_allows_read_and_describe(authorizer: FileAclAuthorizer) -> None:
    """What an authorized-operations answer reports for the group (the wire's is in
    tests/server/test_authorization.py)."""
    _add(authorizer, _binding(T.GROUP, "g", op=O.READ))
    allowed = {op for op in SUPPORTED_OPERATIONS[T.GROUP] if _can(authorizer, op, "g", kind=T.GROUP)}
    assert allowed == {O.READ, O.DESCRIBE}


def test_authorize_any_of_a_type(authorizer: FileAclAuthorizer) -> None:
    """Kafka's authorizeByResourceType (an idempotent producer may write some topic)."""
    assert not authorizer.authorize_any(ALICE, HOST, O.WRITE, T.TOPIC)
    _add(authorizer, _binding(T.TOPIC, "pay", op=O.WRITE, pattern=K.PREFIXED))
    assert authorizer.authorize_any(ALICE, HOST, O.WRITE, T.TOPIC)
    _add(authorizer, _binding(T.TOPIC, "pa", op=O.WRITE, pattern=K.PREFIXED, permission=P.DENY))
    assert not authorizer.authorize_any(ALICE, HOST, O.WRITE, T.TOPIC)  # the deny dominates the prefix
    _add(authorizer, _binding(T.TOPIC, "orders", op=O.WRITE))
    assert authorizer.authorize_any(ALICE, HOST, O.WRITE, T.TOPIC)
    _add(authorizer, _binding(T.TOPIC, "*", op=O.WRITE, permission=P.DENY))
    assert not authorizer.authorize_any(ALICE, HOST, O.WRITE, T.TOPIC)


def test_a_change_takes_effect_at_once(authorizer: FileAclAuthorizer) -> None:
    binding = _binding(T.TOPIC, "t")
    assert not _can(authorizer, O.READ, "t")  # remembered as denied
    _add(authorizer, binding)
    assert _can(authorizer, O.READ, "t")
    deleted = authorizer.delete_acls([AclBindingFilter.any()])
    assert deleted == [[(binding, None)]]
    assert not _can(authorizer, O.READ, "t")


def _filter(kind: ResourceType, name: Optional[str], pattern: PatternType, principal: Optional[str] = None,
            op: AclOperation = O.ANY) -> AclBindingFilter:
    return AclBindingFilter(ResourcePatternFilter(kind, name, pattern),
                            AccessControlEntryFilter(principal, None, op, P.ANY))


def _names(bindings: Iterable[AclBinding]) -> List[str]:
    return sorted("%s:%s" % (b.pattern.pattern_type.name, b.pattern.name) for b in bindings)


def test_filters_any_and_match(authorizer: FileAclAuthorizer) -> None:
    _add(authorizer, _binding(T.TOPIC, "orders"), _binding(T.TOPIC, "ord", pattern=K.PREFIXED),
         _binding(T.TOPIC, "*"), _binding(T.TOPIC, "orders", pattern=K.PREFIXED, principal=BOB),
         _binding(T.GROUP, "orders"))
    assert _names(authorizer.acls(_filter(T.TOPIC, "orders", K.LITERAL))) == ["LITERAL:orders"]
    assert _names(authorizer.acls(_filter(T.TOPIC, "orders", K.ANY))) == ["LITERAL:orders", "PREFIXED:orders"]
    assert _names(authorizer.acls(_filter(T.TOPIC, "orders", K.MATCH))) == [
        "LITERAL:*", "LITERAL:orders", "PREFIXED:ord", "PREFIXED:orders"]
    assert len(authorizer.acls(_filter(T.ANY, None, K.ANY))) == 5
    assert _names(authorizer.acls(_filter(T.ANY, None, K.ANY, principal=BOB))) == ["PREFIXED:orders"]
    # Deleting by MATCH removes every pattern that applies to the name.
    deleted = authorizer.delete_acls([_filter(T.TOPIC, "orders", K.MATCH, principal=ALICE)])
    assert _names(b for b, _ in deleted[0]) == ["LITERAL:*", "LITERAL:orders", "PREFIXED:ord"]
    assert _names(authorizer.acls(AclBindingFilter.any())) == ["LITERAL:orders", "PREFIXED:orders"]


def test_bindings_kafka_refuses(authorizer: FileAclAuthorizer) -> None:
    refused = [
        _binding(T.CLUSTER, "my-cluster"),
        _binding(T.TOPIC, ""),
        _binding(T.TOPIC, "a/b"),
        _binding(T.TOPIC, "t", principal="alice"),
        _binding(T.ANY, "t"),
        _binding(T.TOPIC, "t", pattern=K.MATCH),
        _binding(T.TOPIC, "t", op=O.ANY),
        _binding(T.TOPIC, "t", permission=P.ANY),
        _binding(T.UNKNOWN, "t"),
    ]
    outcomes = authorizer.create_acls(refused + [_binding(T.TOPIC, "fine")])
    assert all(isinstance(o, errors.InvalidRequestError) for o in outcomes[:-1]), outcomes
    assert outcomes[-1] is None
    assert _names(authorizer.acls(AclBindingFilter.any())) == ["LITERAL:fine"]


def test_kafka_json_round_trip() -> None:
    entries = frozenset({AccessControlEntry("User:alice", "*", O.READ, P.ALLOW),
                         AccessControlEntry("User:bob", "10.0.0.1", O.CLUSTER_ACTION, P.DENY)})
    data = encode_acls(entries)
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "ClusterAction", "host": "10.0.0.1"}]}
    assert decode_acls(data) == entries
    # Kafka reads its names in upper case too.
    assert decode_acls(b'{"version":1,"acls":[{"principal":"User:a","permissionType":"ALLOW",'
                       b'"operation":"IDEMPOTENTWRITE","host":"*"}]}') == {
        AccessControlEntry("User:a", "*", O.IDEMPOTENT_WRITE, P.ALLOW)}
    with pytest.raises(ValueError):
        decode_acls(b'{"version":2,"acls":[]}')


def test_names_from_a_newer_kafka_are_read_as_unknown(tmp_path: Path) -> None:
    """An operation or permission type this broker does not know is UNKNOWN, as Kafka reads
    it: the entry is kept and listed, grants and denies nothing, and the others still apply."""
    newer = (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},'
             b'{"principal":"User:alice","permissionType":"Deny","operation":"Frobnicate","host":"*"},'
             b'{"principal":"User:bob","permissionType":"Maybe","operation":"Write","host":"*"}]}')
    assert decode_acls(newer) == {AccessControlEntry(ALICE, "*", O.READ, P.ALLOW),
                                  AccessControlEntry(ALICE, "*", O.UNKNOWN, P.DENY),
                                  AccessControlEntry(BOB, "*", O.WRITE, P.UNKNOWN)}
    (tmp_path / ACLS_FILE).write_text(json.dumps({"version": 1, "resources": [
        {"resourceType": "Topic", "name": "t", "patternType": "LITERAL", "acls": json.loads(newer)["acls"]}]}))
    authorizer = FileAclAuthorizer(str(tmp_path))
    assert _can(authorizer, O.READ, "t")
    assert not _can(authorizer, O.WRITE, "t", BOB)
    assert len(authorizer.acls(AclBindingFilter.any())) == 3


def test_change_notifications_in_kafka_forms() -> None:
    literal = ResourcePattern(T.TRANSACTIONAL_ID, "tx:1", K.LITERAL)
    assert encode_change(literal) == b"TRANSACTIONAL_ID:tx:1"
    assert decode_change(K.LITERAL, b"TRANSACTIONAL_ID:tx:1") == literal
    prefixed = ResourcePattern(T.GROUP, "g", K.PREFIXED)
    assert json.loads(encode_change(prefixed)) == {"version": 1, "resourceType": "GROUP", "name": "g",
                                                   "patternType": "PREFIXED"}
    assert decode_change(K.PREFIXED, encode_change(prefixed)) == prefixed


def test_a_single_nodes_acls_survive_a_restart(tmp_path: Path) -> None:
    first = FileAclAuthorizer(str(tmp_path))
    _add(first, _binding(T.TOPIC, "t"), _binding(T.GROUP, "g", pattern=K.PREFIXED, op=O.DELETE))
    second = FileAclAuthorizer(str(tmp_path))
    assert second.acls(AclBindingFilter.any()) == first.acls(AclBindingFilter.any())
    assert _can(second, O.DELETE, "gx", kind=T.GROUP)
    (tmp_path / ACLS_FILE).write_text("{not json")
    with pytest.raises(errors.CorruptMetadataError, match=ACLS_FILE):
        FileAclAuthorizer(str(tmp_path))
