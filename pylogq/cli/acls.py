"""``pylogq acls``: add, remove and list ACLs, as Kafka's ``kafka-acls.sh --bootstrap-server``.

- ``--add --allow-principal User:alice --operation Read --topic orders`` adds an ALLOW
  entry per principal, host and operation (``--operation`` repeats; its default is All;
  ``--allow-host``/``--deny-host`` default to ``*``) on each resource named: ``--topic``,
  ``--group``, ``--transactional-id`` (each repeatable) and ``--cluster``;
- ``--producer --topic T`` is WRITE, DESCRIBE and CREATE on the topics (and WRITE, DESCRIBE
  on ``--transactional-id``s); with ``--idempotent`` IDEMPOTENT_WRITE on the cluster too;
  ``--consumer --topic T --group G`` is READ and DESCRIBE on the topics and READ on the
  groups;
- ``--remove`` deletes the entries given (every entry of the resources named when no
  principal is given), after asking ``(y/n)`` unless ``--force``;
- ``--list`` prints the ACLs of the resources named (every ACL without one), only those of
  ``--principal`` when given.

``--resource-pattern-type`` is ``literal`` (the default), ``prefixed``, or, to remove and
list, ``any`` (every pattern of exactly that name) or ``match`` (every pattern that applies
to the name: its literal, the wildcard ``*``, every prefix). The output is Kafka's::

    Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:
     	(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

    Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:
     	(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

The broker must have an authorizer (``authorizer.class.name``; SECURITY_DISABLED without)
and the tool's principal ALTER on the cluster to change ACLs, DESCRIBE to list them: the
tool is the principal its ``--command-config`` file logs in as (a SASL user, a TLS client
certificate's subject), ``User:ANONYMOUS`` without one (docs/security.md). A failure is
``Error: <reason>`` on stderr with exit status 1; options argparse rejects exit with 2.
"""

from __future__ import annotations

import argparse
from typing import IO, Any, Dict, List, Optional, Set, TextIO, Tuple

from .. import errors
from ..cluster.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    parse_enum,
    pascal_name,
)
from ..client.admin import ACL, ACLFilter
from ..client.admin import ResourcePattern as AdminPattern
from ..client.admin import ResourcePatternFilter as AdminPatternFilter
from ..errors import CommandError
from ._errors import report_error
from .clients import Clients, add_bootstrap_argument
from .command_config import add_command_config_argument

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = "add, remove and list ACLs, as Kafka's kafka-acls.sh does"
_NEWLINE = "\n"
_O = AclOperation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs (of the resources named, else every ACL)")
    parser.add_argument("--topic", action="append", default=[], help="a topic ('*': every topic); repeatable")
    parser.add_argument("--group", action="append", default=[], help="a consumer group ('*': every group)")
    parser.add_argument("--transactional-id", action="append", default=[], help="a transactional id")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", default="literal", type=str.lower,
                        choices=("literal", "prefixed", "any", "match"),
                        help="how the names match: literal (default) or prefixed; any or match to list and remove")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME",
                        help="a principal to allow (User:alice; User:* is every user); repeatable")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME",
                        help="a principal to deny (deny takes precedence over allow); repeatable")
    parser.add_argument("--allow-host", action="append", default=[], help="a host the allowed principals may "
                        "come from (default *)")
    parser.add_argument("--deny-host", action="append", default=[], help="a host the denied principals are "
                        "denied from (default *)")
    parser.add_argument("--operation", action="append", default=[],
                        help="an operation: %s (default All); repeatable"
                             % ", ".join(pascal_name(op) for op in sorted(_O) if op not in (_O.UNKNOWN, _O.ANY)))
    parser.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                        help="with --list: only this principal's ACLs")
    parser.add_argument("--producer", action="store_true", help="the ACLs of a producer: WRITE, DESCRIBE and "
                        "CREATE on the topics (WRITE, DESCRIBE on transactional ids)")
    parser.add_argument("--consumer", action="store_true", help="the ACLs of a consumer: READ, DESCRIBE on the "
                        "topics and READ on the groups")
    parser.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    parser.add_argument("--force", action="store_true", help="remove without asking")


def run(args: argparse.Namespace, clients: Clients, out: TextIO, err: TextIO,
        stdin: Optional[IO[Any]] = None) -> int:
    """Carry out ``--add``, ``--remove`` or ``--list``; -> the exit status."""
    try:
        _check(args)
        if args.add:
            return _add(args, clients, out)
        if args.remove:
            return _remove(args, clients, out, stdin)
        return _list(args, clients, out)
    except (errors.PylogqError, OSError) as exc:  # CommandError among them
        return report_error(err, exc)


def _check(args: argparse.Namespace) -> None:
    if (args.producer or args.consumer) and args.list:
        raise CommandError("--producer and --consumer go with --add or --remove, not --list")
    if args.producer and not args.topic and not args.transactional_id:
        raise CommandError("With --producer you must specify a --topic")
    if args.consumer and (not args.topic or not args.group):
        raise CommandError("With --consumer you must specify a --topic and a --group")
    if args.idempotent and not args.producer:
        raise CommandError("--idempotent goes with --producer")
    if args.principal and not args.list:
        raise CommandError("--principal goes with --list")
    if (args.producer or args.consumer) and args.operation:
        raise CommandError("--operation cannot be used with --producer or --consumer")


def _pattern_type(args: argparse.Namespace) -> PatternType:
    return PatternType[args.resource_pattern_type.upper()]


def _filters(args: argparse.Namespace, required: bool = True) -> List[ResourcePatternFilter]:
    """The resources named, as pattern filters in the order given (Kafka's getResourceFilter)."""
    kind = _pattern_type(args)
    out: List[ResourcePatternFilter] = [ResourcePatternFilter(ResourceType.TOPIC, t.strip(), kind) for t in args.topic]
    if kind == PatternType.LITERAL and (args.cluster or args.idempotent):
        out.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    out += [ResourcePatternFilter(ResourceType.GROUP, g.strip(), kind) for g in args.group]
    out += [ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, t, kind) for t in args.transactional_id]
    if not out and required:
        raise CommandError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                           "or --transactional-id <transactional id>")
    return list(dict.fromkeys(out))


def _principals(values: List[str]) -> List[str]:
    out = []
    for value in values:
        value = value.strip()
        if ":" not in value:
            raise CommandError("expected a string in format principalType:principalName but got %s" % value)
        out.append(value)
    return list(dict.fromkeys(out))


def _entries(args: argparse.Namespace, operations: List[AclOperation]) -> List[AccessControlEntry]:
    """Every (principal, host, operation) entry the options give (Kafka's getAcl)."""
    out: List[AccessControlEntry] = []
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                          (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        names = _principals(principals)
        if not names:
            continue
        for principal in names:
            for operation in operations:
                for host in [h.strip() for h in hosts] or [WILDCARD_HOST]:
                    out.append(AccessControlEntry(principal, host, operation, permission))
    return list(dict.fromkeys(out))


def _operations(args: argparse.Namespace) -> List[AclOperation]:
    out = []
    for text in args.operation or ["All"]:
        operation = parse_enum(AclOperation, text)
        if operation in (_O.UNKNOWN, _O.ANY):
            raise CommandError("Unknown operation %r: valid operations are %s" % (
                text, ", ".join(pascal_name(op) for op in sorted(_O) if op not in (_O.UNKNOWN, _O.ANY))))
        out.append(operation)
    return list(dict.fromkeys(out))


def _resource_entries(args: argparse.Namespace) -> Dict[ResourcePatternFilter, List[AccessControlEntry]]:
    """Each resource filter with the entries to add or remove there (Kafka's getResourceFilterToAcls)."""
    filters = _filters(args)
    found: Dict[ResourcePatternFilter, List[AccessControlEntry]] = {}
    if not args.producer and not args.consumer:
        entries = _entries(args, _operations(args))
        found = {f: entries for f in filters}
    if args.producer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                found[f] = _entries(args, [_O.WRITE, _O.DESCRIBE, _O.CREATE])
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                found[f] = _entries(args, [_O.WRITE, _O.DESCRIBE])
            elif f.resource_type == ResourceType.CLUSTER and args.idempotent:
                found[f] = _entries(args, [_O.IDEMPOTENT_WRITE])
    if args.consumer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                found[f] = list(dict.fromkeys(found.get(f, []) + _entries(args, [_O.READ, _O.DESCRIBE])))
            elif f.resource_type == ResourceType.GROUP:
                found[f] = list(dict.fromkeys(found.get(f, []) + _entries(args, [_O.READ])))
    for f, entries in found.items():
        valid = set(SUPPORTED_OPERATIONS[f.resource_type]) | {_O.ALL}
        if any(e.operation not in valid for e in entries):
            raise CommandError("ResourceType %s only supports operations %s" % (
                f.resource_type.name, ", ".join(pascal_name(op) for op in sorted(valid))))
    return found


def _block(entries: List[AccessControlEntry]) -> str:
    return _NEWLINE.join("\t" + str(e) for e in entries)


def _add(args: argparse.Namespace, clients: Clients, out: TextIO) -> int:
    if _pattern_type(args) not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CommandError("A '--resource-pattern-type' value of '%s' is not valid when adding acls."
                           % _pattern_type(args).name)
    admin = clients.admin()
    for f, entries in _resource_entries(args).items():
        if not entries:
            raise CommandError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
        assert f.name is not None
        pattern = ResourcePattern(f.resource_type, f.name, f.pattern_type)
        out.write("Adding ACLs for resource `%s`: %s %s %s\n" % (pattern, _NEWLINE, _block(sorted(entries)), _NEWLINE))
        result = admin.create_acls([ACL(e.principal, e.host, e.operation, e.permission_type,
                                        AdminPattern(pattern.resource_type, pattern.name, pattern.pattern_type))
                                    for e in entries])
        if result["failed"]:
            raise result["failed"][0][1]
    return 0


def _remove(args: argparse.Namespace, clients: Clients, out: TextIO, stdin: Optional[IO[Any]]) -> int:
    admin = clients.admin()
    for f, entries in _resource_entries(args).items():
        if entries:
            question = "Are you sure you want to remove ACLs: %s %s %s from resource filter `%s`? (y/n)" % (
                _NEWLINE, _block(sorted(entries)), _NEWLINE, f)
        else:
            question = "Are you sure you want to delete all ACLs for resource filter `%s`? (y/n)" % (f,)
        if not args.force and not _confirmed(question, out, stdin):
            continue
        pattern = AdminPatternFilter(f.resource_type, f.name, f.pattern_type)
        filters = [ACLFilter(e.principal, e.host, e.operation, e.permission_type, pattern) for e in entries] or \
            [ACLFilter(None, None, _O.ANY, AclPermissionType.ANY, pattern)]
        for _, _, failure in admin.delete_acls(filters):
            if failure is not None:
                raise failure
    return 0


def _confirmed(question: str, out: TextIO, stdin: Optional[IO[Any]]) -> bool:
    out.write(question + "\n")
    out.flush()
    if stdin is None:
        import sys

        stdin = sys.stdin
    answer = stdin.readline()
    if isinstance(answer, bytes):
        answer = answer.decode("utf-8", "replace")
    return answer.strip().lower() == "y"


def _list(args: argparse.Namespace, clients: Clients, out: TextIO) -> int:
    admin = clients.admin()
    filters = _filters(args, required=False)
    wanted = [AdminPatternFilter(f.resource_type, f.name, f.pattern_type) for f in filters] or \
        [AdminPatternFilter(ResourceType.ANY, None, PatternType.ANY)]
    by_resource: Dict[Tuple[int, str, int], Set[AccessControlEntry]] = {}
    for pattern_filter in wanted:
        acls, _ = admin.describe_acls(ACLFilter(None, None, _O.ANY, AclPermissionType.ANY, pattern_filter))
        for acl in acls:
            p = acl.resource_pattern
            key = (p.resource_type, str(p.resource_name), p.pattern_type)
            by_resource.setdefault(key, set()).add(
                AccessControlEntry(str(acl.principal), str(acl.host), acl.operation, acl.permission_type))
    principals = _principals(args.principal)
    if not principals:
        _print_resources(by_resource, out)
        return 0
    for principal in principals:
        out.write("ACLs for principal `%s`\n" % principal)
        _print_resources({k: {e for e in v if e.principal == principal} for k, v in by_resource.items()}, out)
    return 0


def _print_resources(by_resource: Dict[Tuple[int, str, int], Set[AccessControlEntry]], out: TextIO) -> None:
    for (kind, name, pattern_type), entries in sorted(by_resource.items()):
        if not entries:
            continue
        pattern = ResourcePattern(ResourceType(kind), name, PatternType(pattern_type))
        out.write("Current ACLs for resource `%s`: %s %s %s\n" % (pattern, _NEWLINE, _block(sorted(entries)),
                                                                   _NEWLINE))
