"""``pylogq reassign-partitions``: move partitions between brokers, as Kafka's ``kafka-reassign-partitions.sh``.

Exactly one action, with the options Kafka's tool takes for it (any other is a
usage error, ``Option "[throttle]" can't be used with action "[verify]"``, exit
status 2, as is a missing one, ``Missing required argument "[reassignment-json-file]"``):

``--generate --topics-to-move-json-file F --broker-list 0,1,2 [--disable-rack-aware]``
    Prints the current replicas of every partition of the topics in ``F``
    (``{"version":1,"topics":[{"topic":"foo"}]}``) and a proposed assignment of them
    onto the brokers listed, each partition keeping its replication factor, placed as
    CreateTopics places a new topic's (rack-aware when every listed broker has
    ``broker.rack``; with racks on only some of them it refuses unless
    ``--disable-rack-aware``). Changes nothing::

        Current partition replica assignment
        {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[0,1],"log_dirs":["any","any"]}]}

        Proposed partition reassignment configuration
        {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,0],"log_dirs":["any","any"]}]}

``--execute --reassignment-json-file F [--throttle B] [--replica-alter-log-dirs-throttle B] [--additional] [--timeout MS]``
    Starts the reassignments of ``F`` (``{"version":1,"partitions":[{"topic":"foo",
    "partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}``; ``log_dirs`` is
    optional), after printing the current replicas of those partitions ("Save this to
    use as the --reassignment-json-file option during rollback"), and prints
    ``Successfully started partition reassignments for foo-0,foo-1``. While other
    reassignments are under way it refuses unless ``--additional``. ``--throttle B``
    (bytes/s) sets, as Kafka's tool does, the dynamic broker configs
    ``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate`` on
    every broker that is a moving partition's source or destination, and on each moving
    topic ``leader.replication.throttled.replicas`` (the replicas the partitions are
    moving from, ``partition:broker`` comma-separated) and
    ``follower.replication.throttled.replicas`` (those being added); the moves already
    under way count too. The brokers throttle as Kafka's replication quota manager does
    (``pylogq.cluster.broker.replication_quota``). A ``log_dirs`` entry other than
    ``"any"`` moves that replica to that log directory of its broker (AlterReplicaLogDirs),
    once the partitions' reassignments have started: ``Successfully started log directory
    move for: foo-0-1`` (topic, partition, broker); a replica the reassignment has yet to
    create is asked again every 100 ms, at most ``--timeout`` ms (``Timed out before log
    directory move could be started for: ...``). ``--replica-alter-log-dirs-throttle B``
    sets ``replica.alter.log.dirs.io.max.bytes.per.second`` on those brokers.

``--verify --reassignment-json-file F [--preserve-throttles]``
    Prints ``Status of partition reassignment:`` and, per partition, ``Reassignment of
    partition foo-0 is completed.``, ``... is still in progress.`` or ``There is no
    active reassignment of partition foo-0, but replica set is 1,2 rather than 2,3.``;
    then, per move between log directories, ``Reassignment of replica foo-0-1 completed
    successfully.``, ``... is still in progress.`` or Kafka's line for a move elsewhere,
    none, or a replica in no live directory. Once no reassignment at all is under way,
    nor any of the file's moves (Kafka cannot tell which brokers older
    ones throttled) it removes the throttles: ``Clearing broker-level throttles on
    brokers 0,1,2`` (the three rates, from every broker of the cluster and of ``F``) and
    ``Clearing topic-level throttles on topic foo`` (the two replica lists), unless
    ``--preserve-throttles``.

``--cancel --reassignment-json-file F [--preserve-throttles] [--timeout MS]``
    Cancels the reassignments of ``F``'s partitions that are under way (each goes back
    to its original replicas): ``Successfully cancelled partition reassignments for:
    foo-0``, or ``None of the specified partition reassignments are active.``; and its
    moves between log directories under way (each replica stays where it is):
    ``Successfully cancelled log directory move for: foo-0-1``, or ``None of the specified
    partition moves are active.``; then clears the throttles as ``--verify`` does, unless
    ``--preserve-throttles``.

``--list``
    Prints ``Current partition reassignments:`` and a line per partition moving,
    ``foo-0: replicas: 2,3,1. adding: 3. removing: 1.``, or ``No partition
    reassignments found.``

``--bootstrap-server HOST:PORT`` (default 127.0.0.1:9092) names any broker: the
reassignment requests go to the controller. ``--broker-list`` is the brokers to
generate for here, not the old name of ``--bootstrap-server`` it is in the other tools.
``--timeout`` (default 10000) is the wait for moves between log directories to start.
Kafka's ``--bootstrap-controller`` (KRaft) is not taken.

Exit status: 0 on success (``--verify`` too while moves are in progress); 1 when the
JSON is bad, a partition or broker is unknown, or the controller refused (``Error:
<reason>`` on stderr; a refused partition reads ``foo-0: INVALID_REPLICATION_ASSIGNMENT:
...``); 2 for usage errors.
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set, TextIO, Tuple

from .. import errors
from ..client.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from ..cluster.replica_assignment import assign_replicas
from ..errors import CommandError
from ._errors import error_text, report_error
from .clients import Clients, add_bootstrap_argument, int_argument
from .command_config import add_command_config_argument

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = "move partitions between brokers, as Kafka's kafka-reassign-partitions.sh does"

ANY_LOG_DIR = "any"
#: ``--timeout``'s default: the longest wait for moves between log directories to start.
DEFAULT_TIMEOUT_MS = 10000
#: The pause before asking again for moves whose replicas their brokers do not have yet.
MOVE_RETRY_S = 0.1

#: The dynamic broker configs a throttled reassignment sets, and the topic configs.
BROKER_LEVEL_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                          "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_LEVEL_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")

CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used "
    "to change the throttle by resubmitting the current reassignment.")
YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is "
    "removed.")
NOT_ALL_RACKS_MESSAGE = ("Not all brokers have rack information. Add --disable-rack-aware in command line to make "
                         "replica assignment without rack information.")

_ACTIONS = ("generate", "execute", "verify", "cancel", "list")
#: Per action, the options it needs and those it also takes (Kafka's validateAndParseArgs).
_REQUIRED: Dict[str, Tuple[str, ...]] = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
_PERMITTED: Dict[str, Tuple[str, ...]] = {
    "generate": ("disable_rack_aware",),
    "execute": ("additional", "throttle", "replica_alter_log_dirs_throttle", "timeout"),
    "verify": ("preserve_throttles",),
    "cancel": ("preserve_throttles", "timeout"),
    "list": (),
}
_OPTIONS = ("reassignment_json_file", "topics_to_move_json_file", "broker_list", "disable_rack_aware", "throttle",
            "replica_alter_log_dirs_throttle", "timeout", "additional", "preserve_throttles")

Partition = Tuple[str, int]
#: A partition's replica on a broker: (topic, partition, broker id), Kafka's TopicPartitionReplica.
Replica = Tuple[str, int, int]


class _State(NamedTuple):
    """One partition's reassignment as --verify sees it (Kafka's PartitionReassignmentState)."""

    current: List[int]
    target: List[int]
    done: bool


def _broker_ids(text: str) -> List[int]:
    """``--broker-list 0,1,2``, as broker ids in the order given."""
    try:
        return [int(item.strip()) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a comma-separated list of broker ids (\"0,1,2\")"
                                         % (text,)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of Kafka's tool. ``parser`` resolves option conflicts (main.py builds it so):
    ``--broker-list`` here is Kafka's target brokers, not the bootstrap alias the other tools have."""
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    parser.add_argument("--generate", action="store_true",
                        help="generate a candidate partition reassignment configuration (it is not executed)")
    parser.add_argument("--execute", action="store_true",
                        help="start the reassignment of --reassignment-json-file")
    parser.add_argument("--verify", action="store_true",
                        help="check whether the reassignment of --reassignment-json-file completed; once it has, "
                             "remove the throttles")
    parser.add_argument("--cancel", action="store_true", help="cancel an active reassignment")
    parser.add_argument("--list", action="store_true", help="list all active partition reassignments")
    parser.add_argument("--reassignment-json-file", metavar="FILE",
                        help='the partition reassignment: {"version":1,"partitions":[{"topic":"foo","partition":0,'
                             '"replicas":[1,2],"log_dirs":["any","any"]}]} (log_dirs optional)')
    parser.add_argument("--topics-to-move-json-file", metavar="FILE",
                        help='--generate: the topics to move: {"version":1,"topics":[{"topic":"foo"}]}')
    parser.add_argument("--broker-list", type=_broker_ids, metavar="0,1,2",
                        help="--generate: the brokers to which the partitions need to be reassigned")
    parser.add_argument("--disable-rack-aware", action="store_true", default=None,
                        help="--generate: place replicas without regard to the brokers' racks")
    parser.add_argument("--throttle", type=int_argument(), metavar="BYTES/S",
                        help="--execute: throttle the movement of partitions between brokers to this rate "
                             "(set again with --additional)")
    parser.add_argument("--replica-alter-log-dirs-throttle", type=int_argument(), metavar="BYTES/S",
                        help="--execute: throttle the movement of replicas between log directories of a broker")
    parser.add_argument("--timeout", type=int_argument(0), metavar="MS",
                        help="--execute, --cancel: the longest wait for moves between log directories to start "
                             "(default 10000)")
    parser.add_argument("--additional", action="store_true", default=None,
                        help="--execute: in addition to the reassignments under way (or to change the throttle)")
    parser.add_argument("--preserve-throttles", action="store_true", default=None,
                        help="--verify, --cancel: do not remove the broker and topic throttles")
    parser.set_defaults(usage_error=parser.error)


def _action(args: argparse.Namespace) -> str:
    """The one action asked for, its options checked as Kafka's tool checks them (a usage error else)."""
    chosen = [name for name in _ACTIONS if getattr(args, name)]
    if len(chosen) != 1:
        args.usage_error("Command must include exactly one action: %s" % ", ".join("--" + a for a in _ACTIONS))
    action = chosen[0]
    for option in _REQUIRED[action]:
        if getattr(args, option) is None:
            args.usage_error('Missing required argument "[%s]"' % option.replace("_", "-"))
    for option in _OPTIONS:
        if getattr(args, option) is not None and option not in _REQUIRED[action] + _PERMITTED[action]:
            args.usage_error('Option "[%s]" can\'t be used with action "[%s]"' % (option.replace("_", "-"), action))
    return action


def run(args: argparse.Namespace, clients: Clients, out: TextIO, err: TextIO) -> int:
    """Carry out one reassign-partitions command; -> the exit status."""
    action = _action(args)
    try:
        admin = clients.admin(client_id="reassign-partitions-tool")
        if action == "generate":
            _generate(admin, args.topics_to_move_json_file, args.broker_list, not args.disable_rack_aware, out)
        elif action == "execute":
            _execute(admin, args, out)
        elif action == "verify":
            _verify(admin, args.reassignment_json_file, bool(args.preserve_throttles), out)
        elif action == "cancel":
            _cancel(admin, args.reassignment_json_file, bool(args.preserve_throttles), out)
        else:
            _list(admin, out)
    except (errors.PylogqError, OSError) as exc:  # CommandError among them
        return report_error(err, exc)
    return 0


# -- the JSON files ------------------------------------------------------------------------------


def _read_json(path: str) -> Dict[str, Any]:
    """A JSON file's top-level object, whose ``version`` (default 1) must be 1."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CommandError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CommandError("The input string is not a valid JSON: %s: %s" % (path, exc)) from None
    if not isinstance(data, dict):
        raise CommandError("%s: expected a JSON object, not %s" % (path, _json(data)))
    version = data.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise CommandError("Not supported version field value %s" % _json(version))
    return data


def _items_of(data: Mapping[str, Any], key: str, path: str) -> List[Dict[str, Any]]:
    """The list of objects under ``key`` (none when the key is absent)."""
    items = data.get(key, [])
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise CommandError("%s: `%s` must be a list of JSON objects, not %s" % (path, key, _json(items)))
    return items


def _field(item: Mapping[str, Any], key: str, kind: str, where: str) -> Any:
    """``item[key]``, checked to be a ``kind``: "string", "integer" or "list of integers"/"list of strings"."""
    if key not in item:
        raise CommandError("%s: No such field exists: `%s`" % (where, key))
    value = item[key]
    if kind == "string":
        ok = isinstance(value, str)
    elif kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "list of integers":
        ok = isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    else:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    if not ok:
        raise CommandError("%s: `%s` must be a%s %s, not %s" % (where, key, "n" if kind[0] == "i" else "", kind,
                                                                 _json(value)))
    return value


def _topics_to_move(path: str) -> List[str]:
    """The topics of a ``--topics-to-move-json-file``, in file order (duplicates kept, for the check)."""
    data = _read_json(path)
    return [_field(item, "topic", "string", "%s: topics[%d]" % (path, i))
            for i, item in enumerate(_items_of(data, "topics", path))]


def _reassignment(path: str) -> Tuple[List[Tuple[Partition, List[int]]], Dict[Replica, str]]:
    """The partitions of a ``--reassignment-json-file`` and their target replicas, in file order
    (duplicates kept, for --execute's check), and the log directory each replica is to move
    to where its ``log_dirs`` entry is not "any" (Kafka's TopicPartitionReplica -> dir)."""
    data = _read_json(path)
    out: List[Tuple[Partition, List[int]]] = []
    dirs: Dict[Replica, str] = {}
    for i, item in enumerate(_items_of(data, "partitions", path)):
        where = "%s: partitions[%d]" % (path, i)
        topic = _field(item, "topic", "string", where)
        partition = _field(item, "partition", "integer", where)
        replicas = list(_field(item, "replicas", "list of integers", where))
        if "log_dirs" in item:
            log_dirs = _field(item, "log_dirs", "list of strings", where)
            if len(log_dirs) != len(replicas):
                raise CommandError("Size of replicas list %s is different from size of log dirs list %s for "
                                   "partition %s-%d" % (_java_list(replicas), _java_list(log_dirs), topic, partition))
            for broker, log_dir in zip(replicas, log_dirs):
                if log_dir != ANY_LOG_DIR:
                    dirs[(topic, partition, broker)] = log_dir
        out.append(((topic, partition), replicas))
    return out, dirs


def _reassignment_json(assignment: Mapping[Partition, Sequence[int]]) -> str:
    """Partitions and replicas in the reassignment JSON, as Kafka's tool writes it (one line,
    partitions sorted, every log dir "any")."""
    partitions = [{"topic": topic, "partition": partition, "replicas": list(assignment[(topic, partition)]),
                   "log_dirs": [ANY_LOG_DIR] * len(assignment[(topic, partition)])}
                  for topic, partition in sorted(assignment)]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"), ensure_ascii=False)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _java_list(values: Iterable[Any]) -> str:
    """Values as Java prints a collection: ``[1, 2]``."""
    return "[%s]" % ", ".join(str(v) for v in values)


def _name(tp: Partition) -> str:
    return "%s-%d" % tp


def _names(tps: Iterable[Partition]) -> str:
    return ",".join(_name(tp) for tp in sorted(tps))


def _duplicates(values: Iterable[Any]) -> List[Any]:
    """The values given more than once, sorted."""
    return sorted(value for value, count in collections.Counter(values).items() if count > 1)


def _plural(count: int) -> str:
    return "" if count == 1 else "s"


# -- what the cluster holds ----------------------------------------------------------------------


def _assignments_of_topics(admin: Any, topics: Iterable[str]) -> Dict[Partition, List[int]]:
    """The replicas of every partition of ``topics``; an unknown topic raises, naming it."""
    out: Dict[Partition, List[int]] = {}
    for described in admin.describe_topics(sorted(set(topics))):
        if described["error_code"]:
            raise errors.UnknownTopicOrPartitionError("Topic %s not found." % described["topic"])
        for p in described["partitions"]:
            out[(described["topic"], p["partition"])] = list(p["replicas"])
    return out


def _assignments_of_partitions(admin: Any, partitions: Iterable[Partition]) -> Dict[Partition, List[int]]:
    """The replicas of ``partitions``; an unknown topic or partition raises, naming them."""
    wanted = set(partitions)
    found = {tp: replicas for tp, replicas in _assignments_of_topics(admin, {t for t, _ in wanted}).items()
             if tp in wanted}
    missing = wanted - set(found)
    if missing:
        raise errors.UnknownTopicOrPartitionError("Unable to find partition: %s"
                                                  % ", ".join(_name(tp) for tp in sorted(missing)))
    return found


def _cluster_brokers(admin: Any) -> Dict[int, Optional[str]]:
    """The live brokers and their racks."""
    return {b["broker_id"]: b.get("rack") for b in admin.describe_cluster()["brokers"]}


# -- --generate ----------------------------------------------------------------------------------


def _generate(admin: Any, topics_file: str, brokers: List[int], rack_aware: bool, out: TextIO) -> None:
    duplicate_brokers = _duplicates(brokers)
    if duplicate_brokers:
        raise CommandError("Broker list contains duplicate entries: %s" % _java_list(duplicate_brokers))
    topics = _topics_to_move(topics_file)
    duplicate_topics = _duplicates(topics)
    if duplicate_topics:
        raise CommandError("List of topics to reassign contains duplicate entries: %s" % _java_list(duplicate_topics))
    current = _assignments_of_topics(admin, topics)
    live = _cluster_brokers(admin)
    # Brokers of the list that are not in the cluster are left out, as Kafka's tool leaves them.
    racks = {b: (live[b] if rack_aware else None) for b in brokers if b in live}
    with_rack = [b for b, rack in racks.items() if rack is not None]
    if with_rack and len(with_rack) != len(racks):
        raise CommandError(NOT_ALL_RACKS_MESSAGE)
    proposed: Dict[Partition, List[int]] = {}
    for topic in sorted(set(topics)):
        partitions = sorted(p for t, p in current if t == topic)
        if not partitions:
            continue
        factor = len(current[(topic, partitions[0])])
        for partition, replicas in assign_replicas(len(partitions), factor, racks).items():
            proposed[(topic, partition)] = replicas
    out.write("Current partition replica assignment\n%s\n\n" % _reassignment_json(current))
    out.write("Proposed partition reassignment configuration\n%s\n" % _reassignment_json(proposed))


# -- --execute -----------------------------------------------------------------------------------


def _execute(admin: Any, args: argparse.Namespace, out: TextIO) -> None:
    entries, log_dirs = _reassignment(args.reassignment_json_file)
    if not entries:
        raise CommandError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in entries):
        raise CommandError("Partition replica list cannot be empty")
    twice = _duplicates([tp for tp, _ in entries])
    if twice:
        raise CommandError("Partition reassignment contains duplicate topic partitions: %s" % _names(twice))
    repeated = [(tp, _duplicates(replicas)) for tp, replicas in entries if _duplicates(replicas)]
    if repeated:
        raise CommandError("Partition replica lists may not contain duplicate entries: %s" % ". ".join(
            "%s contains multiple entries for %s" % (_name(tp), ",".join(map(str, brokers)))
            for tp, brokers in repeated))
    proposed = dict(entries)
    ongoing = admin.list_partition_reassignments()
    if ongoing and not args.additional:
        raise CommandError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE)
    live = _cluster_brokers(admin)
    unknown = sorted({b for replicas in proposed.values() for b in replicas} - set(live))
    if unknown:
        raise CommandError("Unknown broker id %d" % unknown[0])
    current = _assignments_of_partitions(admin, proposed)
    out.write("Current partition replica assignment\n\n%s\n\nSave this to use as the --reassignment-json-file "
              "option during rollback\n" % _reassignment_json(current))
    throttle = -1 if args.throttle is None else args.throttle
    log_dir_throttle = -1 if args.replica_alter_log_dirs_throttle is None else args.replica_alter_log_dirs_throttle
    if throttle >= 0 or log_dir_throttle >= 0:
        out.write(YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE + "\n")
        if throttle >= 0:
            moves = _proposed_moves(ongoing, proposed, current)
            _set_topic_throttles(admin, moves)
            _set_broker_throttles(admin, _moving_brokers(moves), throttle, out)
        if log_dir_throttle >= 0:
            _set_log_dir_throttle(admin, sorted({b for _, _, b in log_dirs}), log_dir_throttle, out)
    answered = admin.alter_partition_reassignments(proposed, raise_errors=False)
    failed = {(tp.topic, tp.partition): error for tp, error in answered.items() if error is not None}
    if failed:
        raise CommandError("Error reassigning partition(s): %s" % "; ".join(
            "%s: %s" % (_name(tp), error_text(failed[tp])) for tp in sorted(failed)))
    out.write("Successfully started partition reassignment%s for %s\n" % (_plural(len(proposed)), _names(proposed)))
    if log_dirs:
        _execute_moves(admin, log_dirs, DEFAULT_TIMEOUT_MS if args.timeout is None else args.timeout, out)


def _replica_name(replica: Replica) -> str:
    """As Kafka prints a TopicPartitionReplica: ``foo-0-1`` (topic, partition, broker)."""
    return "%s-%d-%d" % replica


def _replica_names(replicas: Iterable[Replica]) -> str:
    return ",".join(_replica_name(r) for r in sorted(replicas, key=lambda r: (r[2], r[0], r[1])))


def _alter_replica_log_dirs(admin: Any, dirs: Mapping[Replica, str]) -> Set[Replica]:
    """AlterReplicaLogDirs; -> the replicas whose move started. One not on its broker yet
    (REPLICA_NOT_AVAILABLE) is not: its broker creates it in that directory when it comes,
    and the next call finds it there. Any other error fails the command."""
    started: Set[Replica] = set()
    for replica, error in admin.alter_replica_log_dirs(dict(dirs), raise_errors=False).items():
        if error is None:
            started.add(replica)
        elif not isinstance(error, errors.ReplicaNotAvailableError):
            raise CommandError("Failed to alter dir for %s: %s" % (_replica_name(replica), error_text(error)))
    return started


def _execute_moves(admin: Any, dirs: Mapping[Replica, str], timeout_ms: int, out: TextIO) -> None:
    """Start every move between log directories, asking again every 100 ms for replicas their
    broker does not have yet (a reassignment is adding them), for at most ``timeout_ms``
    (Kafka's executeMoves)."""
    pending = dict(dirs)
    deadline = time.monotonic() + timeout_ms / 1000.0
    while True:
        started = _alter_replica_log_dirs(admin, pending)
        if started:
            out.write("Successfully started log directory move%s for: %s\n" % (_plural(len(started)),
                                                                               _replica_names(started)))
        for replica in started:
            del pending[replica]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise CommandError("Timed out before log directory move%s could be started for: %s" % (
                _plural(len(pending)), _replica_names(pending)))
        time.sleep(MOVE_RETRY_S)


class _Move(NamedTuple):
    """A partition's move: the brokers it moves from (its replicas before) and to (those added)."""

    sources: Set[int]
    destinations: Set[int]


def _proposed_moves(ongoing: Mapping[Any, Mapping[str, List[int]]], proposed: Mapping[Partition, List[int]],
                    current: Mapping[Partition, List[int]]) -> Dict[str, Dict[int, _Move]]:
    """Every partition moving once ``proposed`` starts, by topic and partition (Kafka's
    calculateProposedMoveMap): those under way, with the replicas they started from, and the
    proposed ones, from those under way's sources or else their current replicas."""
    moves: Dict[str, Dict[int, _Move]] = {}
    for tp, moving in ongoing.items():
        adding = set(moving["adding_replicas"])
        moves.setdefault(tp[0], {})[tp[1]] = _Move(set(moving["replicas"]) - adding, adding)
    for (topic, partition), replicas in proposed.items():
        by_partition = moves.setdefault(topic, {})
        sources = set(by_partition[partition].sources) if partition in by_partition else set(current[(topic, partition)])
        by_partition[partition] = _Move(sources, set(replicas) - sources)
    return moves


def _moving_brokers(moves: Mapping[str, Mapping[int, _Move]]) -> List[int]:
    return sorted({b for by_partition in moves.values() for move in by_partition.values()
                   for b in move.sources | move.destinations})


def _set_topic_throttles(admin: Any, moves: Mapping[str, Mapping[int, _Move]]) -> None:
    """Each moving topic's throttled replicas: its sources lead (``leader.``), its new replicas
    follow (``follower.``), as ``partition:broker`` items sorted as Kafka's tool sorts them (as text)."""
    resources = []
    for topic in sorted(moves):
        leaders = sorted("%d:%d" % (p, b) for p, move in moves[topic].items() for b in move.sources)
        followers = sorted("%d:%d" % (p, b) for p, move in moves[topic].items()
                           for b in move.destinations if b not in move.sources)
        resources.append(ConfigResource(ConfigResourceType.TOPIC, topic, {
            TOPIC_LEVEL_THROTTLES[0]: (AlterConfigOp.SET, ",".join(leaders)),
            TOPIC_LEVEL_THROTTLES[1]: (AlterConfigOp.SET, ",".join(followers))}))
    if resources:
        admin.incremental_alter_configs(resources)


def _set_broker_throttles(admin: Any, brokers: Sequence[int], rate: int, out: TextIO) -> None:
    resources = [ConfigResource(ConfigResourceType.BROKER, str(b), {
        BROKER_LEVEL_THROTTLES[0]: (AlterConfigOp.SET, str(rate)),
        BROKER_LEVEL_THROTTLES[1]: (AlterConfigOp.SET, str(rate))}) for b in brokers]
    if resources:
        admin.incremental_alter_configs(resources)
    out.write("The inter-broker throttle limit was set to %d B/s\n" % rate)


def _set_log_dir_throttle(admin: Any, brokers: Sequence[int], rate: int, out: TextIO) -> None:
    resources = [ConfigResource(ConfigResourceType.BROKER, str(b), {
        BROKER_LEVEL_THROTTLES[2]: (AlterConfigOp.SET, str(rate))}) for b in brokers]
    if resources:
        admin.incremental_alter_configs(resources)
    out.write("The replica-alter-dir throttle limit was set to %d B/s\n" % rate)


# -- --verify, --cancel, --list ------------------------------------------------------------------


def _verify(admin: Any, path: str, preserve_throttles: bool, out: TextIO) -> None:
    targets, log_dirs = _reassignment(path)
    states, any_ongoing = _states(admin, targets)
    out.write("Status of partition reassignment:\n")
    for tp in sorted(states):
        state = states[tp]
        if not state.done:
            out.write("Reassignment of partition %s is still in progress.\n" % _name(tp))
        elif state.current == state.target:
            out.write("Reassignment of partition %s is completed.\n" % _name(tp))
        else:
            out.write("There is no active reassignment of partition %s, but replica set is %s rather than %s.\n"
                      % (_name(tp), ",".join(map(str, state.current)), ",".join(map(str, state.target))))
    moving = False
    for replica, move in _move_states(admin, log_dirs):
        out.write(move.text(replica) + "\n")
        moving |= not move.done
    if not log_dirs:
        out.write("\n")  # Kafka's line for the moves between log directories, none
    if not any_ongoing and not moving and not preserve_throttles:
        # Every throttle goes: which brokers older reassignments throttled cannot be told.
        _clear_all_throttles(admin, targets, out)


def _states(admin: Any, targets: Sequence[Tuple[Partition, List[int]]]) -> Tuple[Dict[Partition, _State], bool]:
    """Each target partition's state, and whether any reassignment at all is under way."""
    ongoing = {(tp.topic, tp.partition): moving for tp, moving in admin.list_partition_reassignments().items()}
    settled = {tp for tp, _ in targets if tp not in ongoing}
    replicas: Dict[Partition, List[int]] = {}
    if settled:
        for described in admin.describe_topics(sorted({t for t, _ in settled})):
            for p in described["partitions"]:  # none for an unknown topic
                replicas[(described["topic"], p["partition"])] = list(p["replicas"])
    states: Dict[Partition, _State] = {}
    for tp, target in targets:
        if tp in ongoing:
            states[tp] = _State(list(ongoing[tp]["replicas"]), target, False)
        else:
            states[tp] = _State(replicas.get(tp, []), target, True)
    return states, bool(ongoing)


class _MoveState(NamedTuple):
    """Where a replica's move between log directories stands (Kafka's LogDirMoveState)."""

    target: str
    current: Optional[str]  # None: no live log directory of the broker holds it
    future: Optional[str]  # where a move under way copies it
    found: bool = True  # False: its broker did not describe it

    @property
    def done(self) -> bool:
        return self.future is None

    def text(self, replica: Replica) -> str:
        """The line ``--verify`` prints for it, as Kafka's tool words it."""
        topic, partition, broker = replica
        if not self.found:
            return "Partition %s-%d cannot be found in any live log directory on broker %d." % replica
        if self.current is None:
            return ("Partition %s-%d is not found in any live log dir on broker %d. There is likely an offline log "
                    "directory on the broker." % replica)
        if self.future is not None:
            if self.future == self.target:
                return "Reassignment of replica %s is still in progress." % _replica_name(replica)
            return "Partition %s-%d on broker %d is being moved to log dir %s instead of %s." % (
                topic, partition, broker, self.future, self.target)
        if self.current == self.target:
            return "Reassignment of replica %s completed successfully." % _replica_name(replica)
        return "Partition %s-%d on broker %d is not being moved from log dir %s to %s." % (
            topic, partition, broker, self.current, self.target)


def _move_states(admin: Any, dirs: Mapping[Replica, str]) -> List[Tuple[Replica, _MoveState]]:
    """Each move's state, in Kafka's order (by broker, then topic and partition)."""
    if not dirs:
        return []
    found = admin.describe_replica_log_dirs(list(dirs))
    out = []
    for replica in sorted(dirs, key=lambda r: (r[2], r[0], r[1])):
        info = found.get(replica)
        if info is None:
            out.append((replica, _MoveState(dirs[replica], None, None, False)))
        else:
            out.append((replica, _MoveState(dirs[replica], info["current_replica_log_dir"],
                                            info["future_replica_log_dir"])))
    return out


def _clear_all_throttles(admin: Any, targets: Sequence[Tuple[Partition, List[int]]], out: TextIO) -> None:
    """Remove the three broker-level throttles from every broker of the cluster and of
    ``targets``, and the two topic-level ones from each topic of ``targets``."""
    brokers = sorted(set(_cluster_brokers(admin)) | {b for _, replicas in targets for b in replicas})
    out.write("Clearing broker-level throttles on broker%s %s\n" % (_plural(len(brokers)), ",".join(map(str, brokers))))
    if brokers:
        admin.incremental_alter_configs([ConfigResource(ConfigResourceType.BROKER, str(b), {
            key: (AlterConfigOp.DELETE, None) for key in BROKER_LEVEL_THROTTLES}) for b in brokers])
    topics = sorted({topic for (topic, _), _ in targets})
    out.write("Clearing topic-level throttles on topic%s %s\n" % (_plural(len(topics)), ",".join(topics)))
    if topics:
        admin.incremental_alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {
            key: (AlterConfigOp.DELETE, None) for key in TOPIC_LEVEL_THROTTLES}) for topic in topics])


def _cancel(admin: Any, path: str, preserve_throttles: bool, out: TextIO) -> None:
    targets, log_dirs = _reassignment(path)
    wanted = list(dict.fromkeys(tp for tp, _ in targets))
    listed = admin.list_partition_reassignments(wanted) if wanted else {}
    active = sorted((tp.topic, tp.partition) for tp, moving in listed.items()
                    if moving["adding_replicas"] or moving["removing_replicas"])
    if active:
        answered = admin.alter_partition_reassignments(dict.fromkeys(active), raise_errors=False)
        failed = {(tp.topic, tp.partition): error for tp, error in answered.items() if error is not None}
        if failed:
            raise CommandError("Error cancelling partition reassignment%s for: %s" % (_plural(len(failed)), "; ".join(
                "%s: %s" % (_name(tp), error_text(failed[tp])) for tp in sorted(failed))))
        out.write("Successfully cancelled partition reassignment%s for: %s\n" % (_plural(len(active)), _names(active)))
    else:
        out.write("None of the specified partition reassignments are active.\n")
    # A move between log directories under way is cancelled by moving the replica back where it is.
    back = {replica: state.current for replica, state in _move_states(admin, log_dirs)
            if state.future is not None and state.current is not None}
    if back:
        _alter_replica_log_dirs(admin, back)
        out.write("Successfully cancelled log directory move%s for: %s\n" % (_plural(len(back)), _replica_names(back)))
    else:
        out.write("None of the specified partition moves are active.\n")
    if not preserve_throttles:
        _clear_all_throttles(admin, targets, out)


def _list(admin: Any, out: TextIO) -> None:
    ongoing = admin.list_partition_reassignments()
    if not ongoing:
        out.write("No partition reassignments found.\n")
        return
    out.write("Current partition reassignments:\n")
    for tp in sorted(ongoing):
        moving = ongoing[tp]
        adding, removing = moving["adding_replicas"], moving["removing_replicas"]
        out.write("%s-%d: replicas: %s.%s%s\n" % (
            tp.topic, tp.partition, ",".join(map(str, moving["replicas"])),
            " adding: %s." % ",".join(map(str, adding)) if adding else "",
            " removing: %s." % ",".join(map(str, removing)) if removing else ""))
