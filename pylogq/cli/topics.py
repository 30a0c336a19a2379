"""``pylogq topics``: create, list, describe, alter and delete topics, as Kafka's ``kafka-topics.sh``.

The output is that of Kafka 0.8-0.10's topic command. ``--describe`` prints a
summary line per topic, then a line per partition::

    Topic:events\tPartitionCount:2\tReplicationFactor:1\tConfigs:retention.ms=1000
    \tTopic: events\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0
    \tTopic: events\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0

``Configs`` lists the topic's overrides (keys sorted). ``--under-replicated-partitions``
and ``--unavailable-partitions`` print only the matching partition lines;
``--topics-with-overrides`` only the summary lines of topics with overrides.

``--alter`` grows the partition count (``--partitions``) and changes configs
in both of Kafka's spellings: the seeds' ``--config k=v`` / ``--deleteConfig k``
(``--delete-config``) and kafka-configs.sh's ``--add-config k=v,k2=v2``; only
the named keys change, the other overrides stay.

``--topic`` selects topics for ``--describe``, ``--alter``, ``--delete`` and
``--list`` as Kafka's does, as a regular expression (``,`` meaning ``|``),
except that a name that exists exactly selects only that topic: deleting
``a.b`` never deletes ``a_b`` too. ``--list`` and ``--describe`` include the
internal topics (``__consumer_offsets``, once a group has used it), as Kafka's
do, unless ``--exclude-internal`` is given.

``--create`` checks the name before anything else: an illegal one is refused
without the warning a name with ``.`` or ``_`` gets (they could collide in
metric names).

Exit status: 0 on success, 1 when the broker refused (the reason goes to
stderr as ``Error: ...``), 2 for usage errors.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Dict, List, Optional, TextIO, Tuple

from .. import errors
from ..client.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from ..cluster.names import INTERNAL_TOPICS, has_collision_chars, validate_topic_name
from ..errors import CommandError
from ._errors import report_error
from .clients import Clients, add_bootstrap_argument, int_argument, parse_key_values, parse_keys
from .command_config import add_command_config_argument

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = "create, list, describe, alter and delete topics, as Kafka's kafka-topics.sh does"

_ACTIONS = ("create", "list", "describe", "alter", "delete")

COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                     "could collide. To avoid issues it is best to use either, but not both.")
PARTITIONS_WARNING = ("WARNING: If partitions are increased for a topic that has a key, the partition logic or "
                      "ordering of the messages will be affected")


_positive = int_argument(1)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    actions = parser.add_mutually_exclusive_group()
    actions.add_argument("--create", action="store_true", help="create a topic")
    actions.add_argument("--list", action="store_true", help="list the topics")
    actions.add_argument("--describe", action="store_true", help="describe topics and their partitions")
    actions.add_argument("--alter", action="store_true", help="add partitions or change configs of a topic")
    actions.add_argument("--delete", action="store_true", help="delete a topic and its data")
    parser.add_argument("--topic", help="the topic (for --describe, --alter, --delete, --list: a regular "
                                        "expression, unless a topic has exactly this name)")
    parser.add_argument("--partitions", type=_positive, help="the partition count (--create) or new total (--alter)")
    parser.add_argument("--replication-factor", type=_positive, help="replicas per partition (--create)")
    parser.add_argument("--replica-assignment", metavar="B:B,B:B",
                        help="the replicas of each partition, partitions separated by ',' (--create)")
    parser.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="a topic config override (--create, --alter); repeatable")
    parser.add_argument("--add-config", action="append", metavar="K=V[,K=V]",
                        help="config overrides to set, comma-separated (--alter; kafka-configs.sh's form)")
    parser.add_argument("--delete-config", "--deleteConfig", action="append", metavar="KEY",
                        help="a config override to remove (implies --alter); repeatable")
    parser.add_argument("--if-not-exists", action="store_true", help="--create: do nothing if the topic exists")
    parser.add_argument("--if-exists", action="store_true",
                        help="--alter, --delete, --describe: do nothing if no topic matches")
    parser.add_argument("--under-replicated-partitions", action="store_true",
                        help="--describe: only partitions whose ISR is smaller than their replica set")
    parser.add_argument("--unavailable-partitions", action="store_true",
                        help="--describe: only partitions without a leader")
    parser.add_argument("--topics-with-overrides", action="store_true",
                        help="--describe: only topics that have config overrides")
    parser.add_argument("--exclude-internal", action="store_true",
                        help="--list, --describe: leave out internal topics (__consumer_offsets)")


def _action(args: argparse.Namespace) -> str:
    for name in _ACTIONS:
        if getattr(args, name):
            return name
    if args.delete_config or args.add_config:
        return "alter"
    raise CommandError("Command must include exactly one action: --create, --list, --describe, --alter or --delete")


def _check_options(action: str, args: argparse.Namespace) -> None:
    """Kafka's option rules: each option only with the actions it means something for."""
    allowed = {
        "partitions": ("create", "alter"),
        "replication_factor": ("create",),
        "replica_assignment": ("create",),
        "config": ("create", "alter"),
        "add_config": ("alter",),
        "delete_config": ("alter",),
        "if_not_exists": ("create",),
        "if_exists": ("alter", "delete", "describe"),
        "under_replicated_partitions": ("describe",),
        "unavailable_partitions": ("describe",),
        "topics_with_overrides": ("describe",),
        "exclude_internal": ("list", "describe"),
    }
    for option, actions in allowed.items():
        value = getattr(args, option)
        if value not in (None, False, []) and action not in actions:
            raise CommandError("Option --%s can't be used with --%s" % (option.replace("_", "-"), action))
    if action in ("create", "alter", "delete") and not args.topic:
        raise CommandError("--%s needs --topic" % action)
    if args.replica_assignment and (args.partitions or args.replication_factor):
        raise CommandError("--replica-assignment can't be used with --partitions or --replication-factor")


def run(args: argparse.Namespace, clients: Clients, out: TextIO, err: TextIO) -> int:
    """Carry out one topic command; -> the exit status."""
    try:
        action = _action(args)
        _check_options(action, args)
        admin = clients.admin()
        if action == "create":
            _create(admin, args, out)
        elif action == "list":
            for name in _select(admin, args.topic, required=False, internal=not args.exclude_internal):
                out.write(name + "\n")
        elif action == "describe":
            _describe(admin, args, out)
        elif action == "alter":
            _alter(admin, args, out)
        else:
            _delete(admin, args, out)
    except (errors.PylogqError, OSError) as exc:
        return report_error(err, exc)
    return 0


def _select(admin: Any, pattern: Optional[str], required: bool, if_exists: bool = False,
            internal: Optional[bool] = None) -> List[str]:
    """The topics ``pattern`` names (every topic when None); CommandError when none and ``required``.

    ``internal``: True, the internal topics that exist are selected as any other
    (``--list``, ``--describe``); False, never (``--exclude-internal``); None, only
    by their exact name (``--alter``, ``--delete``, which then refuse them).
    """
    names = admin.list_topics()
    if internal:
        # The admin client's listing leaves them out, as kafka-python's does; Kafka's tool lists them.
        names = sorted(names + [t["topic"] for t in admin.describe_topics(sorted(INTERNAL_TOPICS))
                                if t["error_code"] == 0 and t["topic"] not in names])
    if pattern is None:
        return names
    if pattern in names or (internal is None and pattern in INTERNAL_TOPICS and _exists(admin, pattern)):
        return [pattern]
    try:
        regex = re.compile(pattern.replace(",", "|"))
    except re.error as exc:
        raise CommandError("--topic %r is neither a topic nor a regular expression: %s" % (pattern, exc)) from None
    selected = [name for name in names if regex.fullmatch(name)]
    if not selected and required and not if_exists:
        raise CommandError("Topic '%s' does not exist" % pattern)
    return selected


def _exists(admin: Any, name: str) -> bool:
    return bool(admin.describe_topics([name])[0]["partitions"])


def _create(admin: Any, args: argparse.Namespace, out: TextIO) -> None:
    name = args.topic
    configs = parse_key_values(args.config, "--config")
    assignments: Dict[int, List[int]] = {}
    if args.replica_assignment:
        assignments = _parse_assignment(args.replica_assignment)
    topic = NewTopic(name, args.partitions or -1, args.replication_factor or -1,
                     replica_assignments=assignments, topic_configs=configs)
    validate_topic_name(name)  # an illegal name ("." say) is refused before any warning about it
    if has_collision_chars(name):
        out.write(COLLISION_WARNING + "\n")
    try:
        admin.create_topics([topic])
    except errors.TopicAlreadyExistsError:
        if args.if_not_exists:
            return
        raise CommandError('Topic "%s" already exists.' % name) from None
    out.write('Created topic "%s".\n' % name)


def _parse_assignment(text: str) -> Dict[int, List[int]]:
    out: Dict[int, List[int]] = {}
    for partition, replicas in enumerate(text.split(",")):
        try:
            out[partition] = [int(b) for b in replicas.split(":")]
        except ValueError:
            raise CommandError("--replica-assignment %r: partition %d's replicas %r are not broker ids "
                               "separated by ':'" % (text, partition, replicas)) from None
    return out


def _describe(admin: Any, args: argparse.Namespace, out: TextIO) -> None:
    names = _select(admin, args.topic, required=True, if_exists=args.if_exists, internal=not args.exclude_internal)
    only_partitions = args.under_replicated_partitions or args.unavailable_partitions
    for desc in admin.describe_topics(names):
        if desc["error_code"]:
            continue  # deleted since the listing
        name = desc["topic"]
        partitions = sorted(desc["partitions"], key=lambda p: p["partition"])
        if not only_partitions:
            configs = _overrides(admin, name)
            if not args.topics_with_overrides or configs:
                factor = len(partitions[0]["replicas"]) if partitions else 0
                out.write("Topic:%s\tPartitionCount:%d\tReplicationFactor:%d\tConfigs:%s\n" % (
                    name, len(partitions), factor, ",".join("%s=%s" % kv for kv in sorted(configs.items()))))
        if args.topics_with_overrides:
            continue
        for p in partitions:
            leader = p["leader"]
            if args.under_replicated_partitions or args.unavailable_partitions:
                under = args.under_replicated_partitions and len(p["isr"]) < len(p["replicas"])
                unavailable = args.unavailable_partitions and leader < 0
                if not (under or unavailable):
                    continue
            out.write("\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s\n" % (
                name, p["partition"], leader if leader >= 0 else "none",
                ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"]))))


def _overrides(admin: Any, name: str) -> Dict[str, Any]:
    resource = ConfigResource(ConfigResourceType.TOPIC, name)
    try:
        described = admin.describe_configs([resource], config_filter="modified")
    except errors.UnknownTopicOrPartitionError:
        return {}
    return {key: entry["value"] for key, entry in described.get("topic", {}).get(name, {}).items()}


def _alter(admin: Any, args: argparse.Namespace, out: TextIO) -> None:
    names = _select(admin, args.topic, required=True, if_exists=args.if_exists)
    changes: Dict[str, Tuple[AlterConfigOp, Any]] = {}
    for key, value in parse_key_values(args.config, "--config").items():
        changes[key] = (AlterConfigOp.SET, value)
    for key, value in parse_key_values(args.add_config, "--add-config", split_commas=True).items():
        changes[key] = (AlterConfigOp.SET, value)
    for key in parse_keys(args.delete_config):
        if key in changes:
            raise CommandError("config %r is both set and deleted" % key)
        changes[key] = (AlterConfigOp.DELETE, None)
    if not changes and args.partitions is None:
        raise CommandError("--alter needs --partitions, --config, --add-config or --delete-config")
    for name in names:
        if name in INTERNAL_TOPICS:
            raise CommandError("The number of partitions or the configs of the internal topic %s cannot be "
                               "changed" % name)
    for name in names:
        if changes:
            admin.incremental_alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, changes)])
            out.write('Updated config for topic "%s".\n' % name)
        if args.partitions is not None:
            current = len(admin.describe_topics([name])[0]["partitions"])
            if args.partitions < current:
                raise CommandError("The number of partitions for a topic can only be increased. Topic %s "
                                   "currently has %d partitions, %d would not be an increase."
                                   % (name, current, args.partitions))
            if args.partitions == current:
                raise CommandError("Topic %s already has %d partitions." % (name, current))
            out.write(PARTITIONS_WARNING + "\n")
            admin.create_partitions({name: NewPartitions(args.partitions)})
            out.write("Adding partitions succeeded!\n")


def _delete(admin: Any, args: argparse.Namespace, out: TextIO) -> None:
    names = _select(admin, args.topic, required=True, if_exists=args.if_exists)
    for name in names:
        if name in INTERNAL_TOPICS:
            raise CommandError("Topic %s is a kafka internal topic and is not allowed to be marked for deletion."
                               % name)
    for name in names:
        try:
            admin.delete_topics([name])
        except errors.UnknownTopicOrPartitionError:
            if args.if_exists:
                continue
            raise CommandError("Topic '%s' does not exist" % name) from None
        out.write("Topic %s is marked for deletion.\n" % name)
