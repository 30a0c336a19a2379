"""``pylogq acls``: kafka-acls.sh's add, remove and list, with its shortcuts and its output."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

import pylogq
from pylogq.cluster.acl import AclBindingFilter, AclOperation, ResourceType

from .conftest import Cli, run_cli, run_process

#: ACL administration moves no records and has no pure-Python twin: the compiled pass only
#: (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
TOPIC_ORDERS = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Any]:
    with pylogq.Broker(str(tmp_path / "data"), **AUTHORIZER) as b:
        yield b


@pytest.fixture
def acls(secured: Any) -> Cli:
    def call(*argv: str, stdin: bytes = b"") -> Any:
        return run_cli(secured, "acls", *argv, stdin=stdin)
    return call


def _bindings(broker: Any) -> List[Tuple[str, str, str, str, str, str]]:
    return [(b.pattern.resource_type.name, b.pattern.name, b.pattern.pattern_type.name, b.entry.principal,
             b.entry.operation.name, b.entry.permission_type.name)
            for b in broker.authorizer.acls(AclBindingFilter.any())]


def test_add_prints_kafkas_lines_and_creates_the_acls(acls: Cli, secured: Any) -> None:
    done = acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "write",
                "--topic", "orders")
    assert done == (0, "Adding ACLs for resource `%s`: \n"
                       " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
                       "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW) \n\n" % TOPIC_ORDERS,
                    "")
    assert _bindings(secured) == [("TOPIC", "orders", "LITERAL", "User:alice", "READ", "ALLOW"),
                                  ("TOPIC", "orders", "LITERAL", "User:alice", "WRITE", "ALLOW")]
    assert secured.authorizer.authorize("User:alice", "10.1.1.1", AclOperation.DESCRIBE, ResourceType.TOPIC, "orders")


def test_deny_hosts_and_prefixes(acls: Cli, secured: Any) -> None:
    assert acls("--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--topic", "pay",
                "--resource-pattern-type", "prefixed").status == 0
    assert _bindings(secured) == [("TOPIC", "pay", "PREFIXED", "User:mallory", "ALL", "DENY")]
    assert secured.authorizer.acls(AclBindingFilter.any())[0].entry.host == "10.0.0.9"


def test_producer_and_consumer_shortcuts(acls: Cli, secured: Any) -> None:
    assert acls("--add", "--producer", "--idempotent", "--allow-principal", "User:p", "--topic", "t").status == 0
    assert acls("--add", "--consumer", "--allow-principal", "User:c", "--topic", "t", "--group", "g").status == 0
    assert sorted(_bindings(secured)) == sorted([
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:p", "IDEMPOTENT_WRITE", "ALLOW"),
        ("TOPIC", "t", "LITERAL", "User:p", "WRITE", "ALLOW"),
        ("TOPIC", "t", "LITERAL", "User:p", "DESCRIBE", "ALLOW"),
        ("TOPIC", "t", "LITERAL", "User:p", "CREATE", "ALLOW"),
        ("TOPIC", "t", "LITERAL", "User:c", "READ", "ALLOW"),
        ("TOPIC", "t", "LITERAL", "User:c", "DESCRIBE", "ALLOW"),
        ("GROUP", "g", "LITERAL", "User:c", "READ", "ALLOW")])


def test_list_all_by_resource_and_by_principal(acls: Cli) -> None:
    acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
    acls("--add", "--allow-principal", "User:bob", "--operation", "Read", "--group", "g")
    listed = acls("--list")
    assert listed.status == 0
    assert "Current ACLs for resource `%s`: \n \t(principal=User:alice, host=*, operation=READ, " \
           "permissionType=ALLOW) \n\n" % TOPIC_ORDERS in listed.out
    assert "ResourcePattern(resourceType=GROUP, name=g, patternType=LITERAL)" in listed.out
    only = acls("--list", "--topic", "orders")
    assert "GROUP" not in only.out and TOPIC_ORDERS in only.out
    # MATCH: every pattern that applies to the name (a prefix of it here).
    acls("--add", "--allow-principal", "User:carol", "--topic", "ord", "--resource-pattern-type", "prefixed")
    matched = acls("--list", "--topic", "orders", "--resource-pattern-type", "match").out
    assert TOPIC_ORDERS in matched and "name=ord, patternType=PREFIXED" in matched
    by_principal = acls("--list", "--principal", "User:bob").out
    assert by_principal.startswith("ACLs for principal `User:bob`\n") and "orders" not in by_principal


def test_remove_asks_unless_forced(acls: Cli, secured: Any) -> None:
    acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write",
         "--topic", "orders")
    kept = acls("--remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders",
                stdin=b"n\n")
    assert kept.status == 0 and "Are you sure you want to remove ACLs: \n \t(principal=User:alice" in kept.out
    assert len(_bindings(secured)) == 2
    assert acls("--remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders",
                stdin=b"y\n").status == 0
    assert _bindings(secured) == [("TOPIC", "orders", "LITERAL", "User:alice", "READ", "ALLOW")]
    gone = acls("--remove", "--force", "--topic", "orders")
    assert gone == (0, "", "") and _bindings(secured) == []


@pytest.mark.parametrize("argv, message", [
    (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a"], "You must provide at least one resource"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
     "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "principalType:principalName"),
    (["--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"],
     "ResourceType GROUP only supports operations"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"], "Unknown operation 'Fly'"),
    (["--add", "--consumer", "--allow-principal", "User:a", "--topic", "t"], "you must specify a --topic and a "
                                                                              "--group"),
])
def test_bad_options_are_errors(acls: Cli, argv: List[str], message: str) -> None:
    failed = acls(*argv)
    assert failed.status == 1 and failed.err.startswith("Error: ") and message in failed.err


def test_without_an_authorizer_it_says_security_disabled(cli: Cli) -> None:
    failed = cli("acls", "--list")
    assert failed.status == 1 and "SECURITY_DISABLED" in failed.err


def test_over_the_wire_as_a_process(tmp_path: Path) -> None:
    """kafka-acls.sh's way: a separate process over TCP, with ALTER and DESCRIBE on the cluster
    (here its anonymous principal is a super user)."""
    with pylogq.Broker(str(tmp_path / "data"), **dict(AUTHORIZER, **{"super.users": "User:ANONYMOUS"})) as broker:
        host, port = broker.serve("127.0.0.1", 0)
        bootstrap = "%s:%d" % (host, port)
        added = run_process(bootstrap, "acls", "--add", "--allow-principal", "User:alice", "--topic", "orders")
        assert added.status == 0, added.err
        assert run_process(bootstrap, "acls", "--list").out == (
            "Current ACLs for resource `%s`: \n \t(principal=User:alice, host=*, operation=ALL, "
            "permissionType=ALLOW) \n\n" % TOPIC_ORDERS)
        assert run_process(bootstrap, "acls", "--remove", "--force", "--topic", "orders").status == 0
        assert broker.authorizer is not None and broker.authorizer.acls(AclBindingFilter.any()) == []
