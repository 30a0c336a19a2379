"""``pylogq configs``: describe and alter topic, broker, user, client and ip configs, as Kafka's ``kafka-configs.sh``.

The entity is ``--entity-type topics|brokers|users|clients|ips`` with ``--entity-name N`` (or
``--entity-default`` for brokers, users, clients and ips), or one of the shortcuts ``--topic T``,
``--broker N``, ``--broker-defaults``, ``--user U``, ``--user-defaults``, ``--client C``,
``--client-defaults``, ``--ip A`` and ``--ip-defaults``. ``--describe`` prints, as Kafka's
command does, the dynamic configs (a topic's overrides, a broker's dynamic values)
or, with ``--all``, every config::

    Dynamic configs for topic events are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}

Without a name it describes every topic (internal ones included) or every
broker. ``--alter`` changes only the keys named: ``--add-config
k1=v1,k2=[a,b]`` (a list value in brackets) and ``--add-config-file`` (a
properties file) set them, ``--delete-config k1,k2`` returns them to their
defaults; the whole change is one IncrementalAlterConfigs request, applied
entirely or not at all. Deleting a topic config that is not overridden does
nothing, as IncrementalAlterConfigs has it (Kafka's kafka-configs.sh refuses it
before sending anything, which made ``--add-config ... --delete-config ...``
depend on what was set before); a key that is no topic config at all is refused.
A broker's dynamic configs are altered the same way (``--entity-name ID`` for one
broker, ``--entity-default`` for every broker), as Kafka alters them: a key Kafka reads
only at start is refused, and ``--describe`` lists the dynamic values (``Dynamic configs
for broker 1 are:``, ``Default configs for brokers in the cluster are:``). With ``--all``
a broker's configs are labelled as Kafka labels them: ``DYNAMIC_BROKER_CONFIG``,
``DYNAMIC_DEFAULT_BROKER_CONFIG``, ``STATIC_BROKER_CONFIG`` for those set in its
properties file (or with ``--override``), ``DEFAULT_CONFIG`` for the others, each with
every source that has a value as a synonym, the winning one first.
Users' SCRAM credentials: see :mod:`pylogq.cli._configs_users`; client, user and ip
quotas (``--entity-type clients|users|ips``, users and clients together for a user's
client): :mod:`pylogq.cli._configs_quotas`.

Exit status: 0 on success; 1 when the broker refused, the entity does not exist
or the options name no entity (``Error: <reason>`` on stderr, nothing on stdout);
2 for options argparse rejects.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Dict, List, Optional, TextIO

from .. import errors
from ..client.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from ..cluster.names import INTERNAL_TOPICS
from ..errors import CommandError
from ..cluster.broker.client_quotas import CLIENT_QUOTA_KEYS
from ._configs_quotas import EntityName, Pair, alter_quotas, describe_quotas
from ._configs_users import MECHANISMS, alter_users, entry_keys
from ._errors import report_error
from .clients import Clients, add_bootstrap_argument, parse_key_values, parse_keys, read_properties
from .command_config import add_command_config_argument

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = "describe and alter topic and broker configs, as Kafka's kafka-configs.sh does"

_ENTITY_TYPES = ("topics", "brokers", "users", "clients", "ips")
_DEFAULTABLE = ("brokers", "users", "clients", "ips")
_KEY = re.compile(r"[a-zA-Z0-9._-]*\Z")  # Kafka's check on the keys to add


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="list the configs of the entity")
    actions.add_argument("--alter", action="store_true", help="change the configs of the entity")
    parser.add_argument("--entity-type", choices=_ENTITY_TYPES, action="append",
                        help="the kind of entity: topics, brokers, users, clients or ips (users and clients "
                             "together: a user's client)")
    parser.add_argument("--entity-name", action=EntityName, dest="entity_names",
                        help="the entity's name (a topic, a broker id, a user, a client id, an ip)")
    parser.add_argument("--entity-default", action=EntityName, dest="entity_names", nargs=0,
                        help="the default entity of brokers, users, clients or ips")
    parser.add_argument("--topic", help="shortcut for --entity-type topics --entity-name TOPIC")
    parser.add_argument("--broker", help="shortcut for --entity-type brokers --entity-name ID")
    parser.add_argument("--broker-defaults", action="store_true",
                        help="shortcut for --entity-type brokers --entity-default")
    for kind in ("user", "client", "ip"):
        parser.add_argument("--%s" % kind, help="shortcut for --entity-type %ss --entity-name NAME" % kind)
        parser.add_argument("--%s-defaults" % kind, action="store_true",
                            help="shortcut for --entity-type %ss --entity-default" % kind)
    parser.add_argument("--all", action="store_true", help="--describe: every config, not only the dynamic ones")
    parser.add_argument("--add-config", action="append", metavar="K=V[,K=[A,B]]",
                        help="--alter: configs to set, comma-separated (a list value in brackets)")
    parser.add_argument("--add-config-file", metavar="FILE", help="--alter: a properties file of configs to set")
    parser.add_argument("--delete-config", action="append", metavar="K[,K]",
                        help="--alter: configs to return to their defaults, comma-separated")


def run(args: argparse.Namespace, clients: Clients, out: TextIO, err: TextIO) -> int:
    """Carry out one configs command; -> the exit status."""
    try:
        pairs = _entity(args)
        entity_type, name = pairs[0]
        admin = clients.admin()
        if entity_type in ("users", "clients", "ips"):
            return _quota_entity(args, admin, pairs, out)
        if args.describe:
            return _describe(admin, entity_type, name, args.all, out)
        return _alter(args, admin, entity_type, name, out)
    except (errors.PylogqError, OSError) as exc:  # CommandError among them
        return report_error(err, exc)


def _entity(args: argparse.Namespace) -> List[Pair]:
    """The entity: [(entity type, name or None for all)], the default named ""; two pairs
    for a user's client (users, then clients)."""
    chosen: List[List[Pair]] = []
    if args.topic is not None:
        chosen.append([("topics", args.topic)])
    if args.broker is not None:
        chosen.append([("brokers", args.broker)])
    if args.broker_defaults:
        chosen.append([("brokers", "")])
    shortcuts: List[Pair] = []
    for kind in ("user", "client", "ip"):
        if getattr(args, kind) is not None:
            shortcuts.append((kind + "s", getattr(args, kind)))
        if getattr(args, kind + "_defaults"):
            shortcuts.append((kind + "s", ""))
    if shortcuts:
        chosen.append(shortcuts)
    types: List[str] = args.entity_type or []
    names: List[str] = getattr(args, "entity_names", None) or []
    if types:
        if len(names) > len(types):
            raise CommandError("More entity names specified than entity types" if len(types) > 1 else
                               "give --entity-name or --entity-default, not both")
        pairs: List[Pair] = [(kind, names[i] if i < len(names) else None) for i, kind in enumerate(types)]
        for kind, name in pairs:
            if name == "" and kind not in _DEFAULTABLE:
                raise CommandError("--entity-default applies to brokers, clients, users and ips, not %s" % kind)
        chosen.append(pairs)
    elif names:
        raise CommandError("--entity-name and --entity-default need --entity-type")
    if len(chosen) != 1:
        raise CommandError("give one entity: --entity-type with --entity-name (or --entity-default), or one of "
                           "--topic, --broker, --broker-defaults, --user, --client, --ip and their -defaults")
    pairs = sorted(chosen[0], key=lambda p: ("users", "clients").index(p[0]) if p[0] in ("users", "clients") else 0)
    kinds = [kind for kind, _ in pairs]
    if len(pairs) > 1 and sorted(kinds) != ["clients", "users"]:
        raise CommandError("Only '--entity-type users' and '--entity-type clients' may be given together, got %s"
                           % ", ".join(kinds))
    entity_type, name = pairs[0]
    if entity_type == "brokers" and name:
        if not re.fullmatch(r"\d+", name):
            raise CommandError("The entity name for brokers must be a valid integer broker id, found: %s" % name)
    if args.alter and any(n is None for _, n in pairs):
        raise CommandError("--entity-name or --entity-default must be specified with each --entity-type for --alter")
    return pairs


def _quota_entity(args: argparse.Namespace, admin: Any, pairs: List[Pair], out: TextIO) -> int:
    """Users, clients, a user's client, ips: their quotas (and a user's SCRAM credentials)."""
    if args.describe:
        return describe_quotas(admin, pairs, out)
    kinds = [kind for kind, _ in pairs]
    added_keys = entry_keys(args.add_config or [])
    deleted = parse_keys(args.delete_config)
    scram = [k for k in added_keys + deleted if k in MECHANISMS]
    quotas = [k for k in added_keys + deleted if k in CLIENT_QUOTA_KEYS]
    if kinds == ["users"] and scram:
        unknown = [k for k in added_keys + deleted if k not in MECHANISMS and k not in CLIENT_QUOTA_KEYS]
        if unknown:
            raise CommandError("Only quota and SCRAM credential configs can be added for 'users' using "
                               "--bootstrap-server. Unexpected config names: %s" % ",".join(unknown))
        if pairs[0][1] == "":
            raise CommandError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                               "Credentials using --bootstrap-server.")
        if quotas:
            raise CommandError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                               "using --bootstrap-server.")
        return alter_users(args, admin, str(pairs[0][1]), out)
    if scram:
        raise CommandError("Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected "
                           "config names: %s" % ",".join(scram))
    added = _to_add(args)
    if not added and not deleted:
        raise CommandError("--alter needs --add-config, --add-config-file or --delete-config")
    return alter_quotas(admin, pairs, added, deleted, out)


# -- describe ----------------------------------------------------------------------------------------


def _describe(admin: Any, entity_type: str, name: Optional[str], every: bool, out: TextIO) -> int:
    if entity_type == "topics":
        names = [name] if name is not None else _every_topic(admin)
        for topic in names:
            entries = _entries(admin, ConfigResourceType.TOPIC, topic, every)  # (an unknown topic raises)
            out.write("%s configs for topic %s are:\n" % ("All" if every else "Dynamic", topic))
            _print_entries(entries, out)
        return 0
    ids = [name] if name is not None else [str(b["broker_id"]) for b in admin.describe_cluster()["brokers"]] + [""]
    for broker in ids:
        if broker == "":
            # The cluster-wide default, as any broker sees it (its own dynamic values left out).
            some = str(admin.describe_cluster()["brokers"][0]["broker_id"])
            entries = _default_view(_entries(admin, ConfigResourceType.BROKER, some, True))
            out.write("%s configs for brokers in the cluster are:\n" % ("All" if every else "Default"))
            _print_entries({k: e for k, e in entries.items()
                            if every or e["config_source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"}, out)
            continue
        entries = _entries(admin, ConfigResourceType.BROKER, broker, True)  # (an unknown broker raises)
        out.write("%s configs for broker %s are:\n" % ("All" if every else "Dynamic", broker))
        _print_entries({k: e for k, e in entries.items()
                        if every or e["config_source"] == "DYNAMIC_BROKER_CONFIG"}, out)
    return 0


def _default_view(entries: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """A broker's entries as the cluster-wide default resource shows them: without the
    broker's own dynamic values (the next source in its synonyms wins)."""
    out: Dict[str, Dict[str, Any]] = {}
    for key, entry in entries.items():
        synonyms = [s for s in entry.get("synonyms") or () if s["source"] != "DYNAMIC_BROKER_CONFIG"]
        if synonyms != list(entry.get("synonyms") or ()):
            first = synonyms[0] if synonyms else {"value": None, "source": "DEFAULT_CONFIG"}
            entry = dict(entry, value=first["value"], config_source=first["source"], synonyms=synonyms)
        out[key] = entry
    return out


def _every_topic(admin: Any) -> List[str]:
    """Every topic, the internal ones included (as Kafka's describe of all topics lists them)."""
    internal = [t["topic"] for t in admin.describe_topics(sorted(INTERNAL_TOPICS)) if t["error_code"] == 0]
    return sorted(admin.list_topics() + internal)


def _entries(admin: Any, rtype: ConfigResourceType, name: str, every: bool) -> Dict[str, Dict[str, Any]]:
    described = admin.describe_configs([ConfigResource(rtype, name)], include_synonyms=True,
                                       config_filter="all" if every else "modified")
    return dict(described[rtype.name.lower()][name])


def _print_entries(entries: Dict[str, Dict[str, Any]], out: TextIO) -> None:
    for key in sorted(entries):
        entry = entries[key]
        synonyms = entry.get("synonyms") or [{"name": key, "value": entry["value"], "source": entry["config_source"]}]
        out.write("  %s=%s sensitive=%s synonyms={%s}\n" % (
            key, _text(entry["value"]), "true" if entry["is_sensitive"] else "false",
            ", ".join("%s:%s=%s" % (s["source"], s["name"], _text(s["value"])) for s in synonyms)))


def _text(value: Optional[str]) -> str:
    return "null" if value is None else value


# -- alter -------------------------------------------------------------------------------------------


def _alter(args: argparse.Namespace, admin: Any, entity_type: str, name: Optional[str], out: TextIO) -> int:
    assert name is not None
    added = _to_add(args)
    deleted = parse_keys(args.delete_config)
    if not added and not deleted:
        raise CommandError("--alter needs --add-config, --add-config-file or --delete-config")
    if entity_type == "brokers":
        changes_of_broker: Dict[str, Any] = {k: (AlterConfigOp.SET, v) for k, v in added.items()}
        changes_of_broker.update({k: (AlterConfigOp.DELETE, None) for k in deleted})
        admin.incremental_alter_configs([ConfigResource(ConfigResourceType.BROKER, name, changes_of_broker)])
        if name == "":
            out.write("Completed updating default config for brokers in the cluster.\n")
        else:
            out.write("Completed updating config for broker %s.\n" % name)
        return 0
    known = _entries(admin, ConfigResourceType.TOPIC, name, every=True)  # (an unknown topic raises)
    unknown = [k for k in deleted if k not in known]
    if unknown:
        raise errors.InvalidConfigError("Invalid config(s): %s (not topic configs)" % ",".join(unknown))
    changes: Dict[str, Any] = dict(added)
    changes.update({k: (AlterConfigOp.DELETE, None) for k in deleted})
    admin.incremental_alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, changes)])
    out.write("Completed updating config for topic %s.\n" % name)
    return 0


def _to_add(args: argparse.Namespace) -> Dict[str, str]:
    added: Dict[str, str] = {}
    if args.add_config_file:
        added.update(read_properties(args.add_config_file))
    for key, value in parse_key_values(args.add_config, "--add-config", split_commas=True).items():
        added[key] = re.sub(r"[\[\]]", "", value).strip()  # a list in brackets: [compact,delete]
    bad = [k for k in added if not _KEY.match(k)]
    if bad:
        raise CommandError("Invalid character found for config key: %s" % bad[0])
    return added
