"""``pylogq groups``: list, describe, reset and delete consumer groups, as Kafka's ``kafka-consumer-groups.sh``.

``--describe --group G`` prints a line per partition that the group owns or
has committed, in the consumer group command's columns::

    GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID
    my-group        events          0          5               8               3               consumer-1-...  /127.0.0.1      consumer-1

A partition without a committed offset shows ``-`` as its current offset and
lag; one that no member owns shows ``-`` for the member columns. Before the
table, as Kafka does, stderr says when the group has no active members or is
rebalancing. ``--offset-checker`` prints the same facts in the columns of the
0.8 tool the seeds use, ``kafka.tools.ConsumerOffsetChecker``
(``Group Topic Pid Offset logSize Lag Owner``). ``--members`` lists the members
(with ``--verbose``, their partitions); ``--state`` prints the group's
coordinator, assignment strategy, state and number of members::

    GROUP                     COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS
    my-group                  127.0.0.1:9092  (0)       range                Stable          2

``--reset-offsets`` moves a group's committed offsets for ``--topic T`` (every
partition, or ``T:0,2``) or ``--all-topics`` (those it has committed) to
``--to-earliest``, ``--to-latest``, ``--to-offset N``, ``--shift-by N``,
``--to-datetime`` or ``--to-current``, each clamped into the partition's
``[log start, log end]`` range. It prints the plan (``GROUP TOPIC PARTITION
NEW-OFFSET``) and commits it only with ``--execute``; the group must have no
active members. ``--delete --group G`` deletes empty groups with their offsets.
``--delete-offsets --group G --topic T[:P,P]`` deletes a group's committed
offsets of those partitions (Kafka's OffsetDelete): any partition of an empty
group, and of a group with members those of topics it does not subscribe to. It
prints ``TOPIC PARTITION STATUS`` per partition, as Kafka's tool does.

Exit status: 0 on success, 1 when the group does not exist, the broker refused,
or some group could not be deleted; 2 for usage errors.
"""

from __future__ import annotations

import argparse
import datetime
import re
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

from .. import errors
from ..client.consumer import OffsetAndMetadata, TopicPartition
from ..errors import CommandError
from ._errors import error_text, report_error
from .clients import Clients, add_bootstrap_argument, int_argument
from .command_config import add_command_config_argument

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = "list, describe, reset the offsets of and delete consumer groups, as kafka-consumer-groups.sh does"

_INACTIVE = ("Empty", "Dead")


_int = int_argument()

def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list every group")
    actions.add_argument("--describe", action="store_true", help="describe groups: offsets, lag, members")
    actions.add_argument("--reset-offsets", action="store_true", help="move a group's committed offsets")
    actions.add_argument("--delete", action="store_true", help="delete empty groups and their offsets")
    actions.add_argument("--delete-offsets", action="store_true",
                         help="delete a group's committed offsets of --topic (topics it does not subscribe to)")
    parser.add_argument("--group", action="append", help="the group; repeatable")
    parser.add_argument("--all-groups", action="store_true", help="every group (--describe, --delete)")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="--describe: offsets and lag per partition (default)")
    view.add_argument("--members", action="store_true", help="--describe: the members")
    view.add_argument("--state", action="store_true",
                      help="--describe: the group's coordinator, assignment strategy, state and member count")
    view.add_argument("--offset-checker", action="store_true",
                      help="--describe: offsets in ConsumerOffsetChecker's columns (Kafka 0.8)")
    parser.add_argument("--verbose", action="store_true", help="--describe --members: each member's partitions")
    parser.add_argument("--topic", action="append", metavar="TOPIC[:P,P]",
                        help="--reset-offsets, --delete-offsets: a topic, or some of its partitions; repeatable")
    parser.add_argument("--all-topics", action="store_true",
                        help="--reset-offsets: every topic the group has offsets for")
    spec = parser.add_mutually_exclusive_group()
    spec.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    spec.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    spec.add_argument("--to-offset", type=_int, metavar="N", help="reset to offset N")
    spec.add_argument("--shift-by", type=_int, metavar="N", help="move the committed offset by N (may be negative)")
    spec.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                      help="reset to the first record at or after this time (local time unless it has an offset)")
    spec.add_argument("--to-current", action="store_true", help="reset to the committed offset (or the log end)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="--reset-offsets: commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="--reset-offsets: only print them (the default)")


def run(args: argparse.Namespace, clients: Clients, out: TextIO, err: TextIO) -> int:
    """Carry out one group command; -> the exit status."""
    try:
        admin = clients.admin()
        if args.list:
            for group_id, _protocol in admin.list_consumer_groups():
                out.write(group_id + "\n")
            return 0
        if args.describe:
            return _describe(args, clients, admin, out, err)
        if args.reset_offsets:
            return _reset(args, clients, admin, out, err)
        if args.delete_offsets:
            return _delete_offsets(args, clients, admin, out, err)
        return _delete(args, admin, out, err)
    except (errors.PylogqError, OSError) as exc:
        return report_error(err, exc)


def _groups(args: argparse.Namespace, admin: Any) -> List[str]:
    if args.all_groups:
        if args.group:
            raise CommandError("--group can't be used with --all-groups")
        return [group_id for group_id, _ in admin.list_consumer_groups()]
    if not args.group:
        raise CommandError("give --group (or --all-groups)")
    return list(dict.fromkeys(args.group))


# -- describe --------------------------------------------------------------------------------------


class _Row:
    """One partition line of ``--describe``."""

    __slots__ = ("topic", "partition", "offset", "end", "consumer_id", "host", "client_id")

    def __init__(self, topic: str, partition: int, offset: Optional[int], consumer_id: str = "-",
                 host: str = "-", client_id: str = "-") -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.end: Optional[int] = None
        self.consumer_id = consumer_id
        self.host = host
        self.client_id = client_id

    @property
    def lag(self) -> Optional[int]:
        if self.offset is None or self.end is None:
            return None
        return max(0, self.end - self.offset)


def _dash(value: Optional[int]) -> str:
    return "-" if value is None else str(value)


def _describe(args: argparse.Namespace, clients: Clients, admin: Any, out: TextIO, err: TextIO) -> int:
    status = 0
    consumer: Any = None
    for group_id in _groups(args, admin):
        info = admin.describe_consumer_groups([group_id])[0]
        if info.state == "Dead":
            status = report_error(err, "Consumer group '%s' does not exist." % group_id)
            continue
        if info.state == "Empty":
            err.write("\nConsumer group '%s' has no active members.\n" % group_id)
        elif info.state in ("PreparingRebalance", "CompletingRebalance"):
            err.write("\nWarning: Consumer group '%s' is rebalancing.\n" % group_id)
        if args.members:
            _print_members(group_id, info, args.verbose, out)
            continue
        if args.state:
            _print_state(group_id, info, admin.find_coordinator(group_id), out)
            continue
        rows = _offset_rows(admin, group_id, info)
        if consumer is None:
            consumer = clients.consumer(enable_auto_commit=False)
        _fill_log_end(consumer, rows)
        if args.offset_checker:
            _print_offset_checker(group_id, rows, out)
        else:
            _print_offsets(group_id, rows, out)
    return status


def _assigned(member: Any) -> List[Tuple[str, int]]:
    """A member's partitions, from its decoded assignment (none while the group rebalances)."""
    assignment = member.member_assignment
    partitions = getattr(assignment, "partitions", None)
    if not partitions:
        return []
    return sorted((topic, p) for topic, ps in partitions.items() for p in ps)


def _offset_rows(admin: Any, group_id: str, info: Any) -> List[_Row]:
    committed = admin.list_consumer_group_offsets(group_id)
    rows: Dict[Tuple[str, int], _Row] = {}
    for member in info.members:
        for tp in _assigned(member):
            found = committed.get(TopicPartition(*tp))
            rows[tp] = _Row(tp[0], tp[1], None if found is None or found.offset < 0 else found.offset,
                            member.member_id, member.client_host, member.client_id)
    for tp, found in committed.items():
        key = (tp.topic, tp.partition)
        if key not in rows and found.offset >= 0:
            rows[key] = _Row(tp.topic, tp.partition, found.offset)
    return [rows[key] for key in sorted(rows)]


def _fill_log_end(consumer: Any, rows: Sequence[_Row]) -> None:
    """Each row's log end offset; ``-`` for a partition whose topic was deleted after the group committed."""
    tps = [TopicPartition(r.topic, r.partition) for r in rows]
    try:
        ends = consumer.end_offsets(tps)
    except errors.UnknownTopicOrPartitionError:
        ends = {}
        for tp in tps:
            try:
                ends.update(consumer.end_offsets([tp]))
            except errors.UnknownTopicOrPartitionError:
                pass
    for row, tp in zip(rows, tps):
        row.end = ends.get(tp)


def _print_offsets(group_id: str, rows: Sequence[_Row], out: TextIO) -> None:
    group_w = max(15, len(group_id))
    topic_w = max([15] + [len(r.topic) for r in rows])
    consumer_w = max([15] + [len(r.consumer_id) for r in rows])
    host_w = max([15] + [len(r.host) for r in rows])
    line = "%%-%ds %%-%ds %%-10s %%-15s %%-15s %%-15s %%-%ds %%-%ds %%s" % (group_w, topic_w, consumer_w, host_w)
    out.write("\n" + line % ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                             "CONSUMER-ID", "HOST", "CLIENT-ID") + "\n")
    for r in rows:
        out.write(line % (group_id, r.topic, r.partition, _dash(r.offset), _dash(r.end), _dash(r.lag),
                          r.consumer_id, r.host, r.client_id) + "\n")


def _print_offset_checker(group_id: str, rows: Sequence[_Row], out: TextIO) -> None:
    line = "%-15s %-30s %-3s %-15s %-15s %-15s %s"
    out.write(line % ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner") + "\n")
    for r in rows:
        out.write(line % (group_id, r.topic, r.partition, _dash(r.offset), _dash(r.end), _dash(r.lag),
                          "none" if r.consumer_id == "-" else r.consumer_id) + "\n")


def _print_state(group_id: str, info: Any, coordinator: Any, out: TextIO) -> None:
    """Kafka's ``--state`` table (its first column as wide as the coordinator's, as Kafka's is)."""
    where = "%s:%d  (%d)" % (coordinator.host, coordinator.port, coordinator.broker_id)
    line = "%%-%ds %%-25s %%-20s %%-15s %%s" % max(25, len(where))
    out.write("\n" + line % ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS") + "\n")
    out.write(line % (group_id, where, info.protocol or "", info.state, len(info.members)) + "\n")


def _print_members(group_id: str, info: Any, verbose: bool, out: TextIO) -> None:
    members = sorted(info.members, key=lambda m: m.member_id)
    group_w = max(15, len(group_id))
    consumer_w = max([15] + [len(m.member_id) for m in members])
    host_w = max([15] + [len(m.client_host) for m in members])
    client_w = max([15] + [len(m.client_id) for m in members])
    line = "%%-%ds %%-%ds %%-%ds %%-%ds %%-12s" % (group_w, consumer_w, host_w, client_w)
    header = line % ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    out.write("\n" + (header + " ASSIGNMENT" if verbose else header.rstrip()) + "\n")
    for m in members:
        tps = _assigned(m)
        text = line % (group_id, m.member_id, m.client_host, m.client_id, len(tps))
        if verbose:
            by_topic: Dict[str, List[int]] = {}
            for topic, p in tps:
                by_topic.setdefault(topic, []).append(p)
            text += " " + (",".join("%s(%s)" % (t, ",".join(map(str, ps))) for t, ps in by_topic.items()) or "-")
        out.write(text.rstrip() + "\n")


# -- reset offsets ---------------------------------------------------------------------------------


def _parse_datetime(text: str) -> int:
    """Kafka's ``YYYY-MM-DDTHH:mm:SS.sss`` (an optional zone; local time without one) -> epoch ms."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        when = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise CommandError("--to-datetime %r is not YYYY-MM-DDTHH:mm:SS.sss (with an optional zone such as "
                           "Z or +01:00)" % (text,)) from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as Kafka reads a zoneless date
    return int(when.timestamp() * 1000)


def _reset_scope(args: argparse.Namespace, admin: Any, consumer: Any, group_id: str) -> List[TopicPartition]:
    if args.all_topics == bool(args.topic):
        raise CommandError("--reset-offsets needs one scope: --topic or --all-topics")
    if args.all_topics:
        return sorted(tp for tp, om in admin.list_consumer_group_offsets(group_id).items() if om.offset >= 0)
    out: List[TopicPartition] = []
    for spec in args.topic:
        topic, sep, parts = spec.partition(":")
        existing = consumer.partitions_for_topic(topic)
        if existing is None:
            raise CommandError("Topic '%s' does not exist" % topic)
        if not sep:
            out.extend(TopicPartition(topic, p) for p in sorted(existing))
            continue
        for part in parts.split(","):
            if not re.fullmatch(r"\s*\d+\s*", part):
                raise CommandError("--topic %r: %r is not a partition number" % (spec, part))
            if int(part) not in existing:
                raise CommandError("Topic %s has no partition %s (it has %d)" % (topic, part.strip(), len(existing)))
            out.append(TopicPartition(topic, int(part)))
    return sorted(set(out))


def _reset(args: argparse.Namespace, clients: Clients, admin: Any, out: TextIO, err: TextIO) -> int:
    if args.all_groups or not args.group or len(args.group) != 1:
        raise CommandError("--reset-offsets works on one group at a time: give one --group")
    group_id = args.group[0]
    if not (args.to_earliest or args.to_latest or args.to_current or args.to_offset is not None
            or args.shift_by is not None or args.to_datetime is not None):
        raise CommandError("--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --shift-by, "
                           "--to-datetime, --to-current")
    info = admin.describe_consumer_groups([group_id])[0]
    if info.state not in _INACTIVE:
        raise CommandError("Assignments can only be reset if the group '%s' is inactive, but the current state "
                           "is %s." % (group_id, info.state))
    reader = clients.consumer(enable_auto_commit=False)
    tps = _reset_scope(args, admin, reader, group_id)
    committed = admin.list_consumer_group_offsets(group_id, tps) if tps else {}
    timestamp = None if args.to_datetime is None else _parse_datetime(args.to_datetime)
    plan: Dict[TopicPartition, int] = {}
    for tp in tps:
        start = reader.beginning_offsets([tp])[tp]
        end = reader.end_offsets([tp])[tp]
        current = committed.get(tp)
        current_offset = None if current is None or current.offset < 0 else current.offset
        if args.to_earliest:
            target = start
        elif args.to_latest:
            target = end
        elif args.to_current:
            target = end if current_offset is None else current_offset
        elif args.to_offset is not None:
            target = args.to_offset
        elif args.shift_by is not None:
            if current_offset is None:
                raise CommandError("Cannot shift the offset of %s-%d: group '%s' has no committed offset for it"
                                   % (tp.topic, tp.partition, group_id))
            target = current_offset + args.shift_by
        else:
            assert timestamp is not None
            found = reader.offsets_for_times({tp: timestamp})[tp]
            target = end if found is None else found.offset
        if target < start:
            err.write("New offset (%d) is lower than earliest offset for topic partition %s-%d. Value will be "
                      "set to %d\n" % (target, tp.topic, tp.partition, start))
            target = start
        elif target > end:
            err.write("New offset (%d) is higher than latest offset for topic partition %s-%d. Value will be "
                      "set to %d\n" % (target, tp.topic, tp.partition, end))
            target = end
        plan[tp] = target
    if args.execute and plan:
        committer = clients.consumer(group_id=group_id, enable_auto_commit=False)
        committer.assign(list(plan))
        committer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp, offset in plan.items()})
    elif not args.execute and not args.dry_run:
        err.write("WARN: No action will be performed as the --execute option is missing. Add --dry-run to "
                  "keep this behaviour without the warning.\n")
    group_w = max(30, len(group_id))
    topic_w = max([30] + [len(tp.topic) for tp in plan])
    line = "%%-%ds %%-%ds %%-10s %%s" % (group_w, topic_w)
    out.write("\n" + line % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET") + "\n")
    for tp, offset in plan.items():
        out.write(line % (group_id, tp.topic, tp.partition, offset) + "\n")
    return 0


# -- delete ----------------------------------------------------------------------------------------


def _delete(args: argparse.Namespace, admin: Any, out: TextIO, err: TextIO) -> int:
    group_ids = _groups(args, admin)
    if not group_ids:
        raise CommandError("there are no groups to delete")
    results = admin.delete_consumer_groups(group_ids, raise_errors=False)
    ok = [g for g, error in results if error is None]
    failed = [(g, error) for g, error in results if error is not None]
    if failed:
        report_error(err, "Deletion of some consumer groups failed:")
        for group_id, error in failed:
            err.write("* Group '%s' could not be deleted due to: %s\n" % (group_id, error_text(error)))
    if ok:
        out.write("Deletion of requested consumer groups (%s) was successful.\n" % ", ".join("'%s'" % g for g in ok))
    return 1 if failed else 0


def _delete_offsets(args: argparse.Namespace, clients: Clients, admin: Any, out: TextIO, err: TextIO) -> int:
    if args.all_groups or not args.group or len(args.group) != 1:
        raise CommandError("--delete-offsets works on one group at a time: give one --group")
    if not args.topic:
        raise CommandError("--delete-offsets needs --topic (a topic, or some of its partitions)")
    group_id = args.group[0]
    reader = clients.consumer(enable_auto_commit=False)
    wanted: List[TopicPartition] = []
    missing: List[str] = []  # topics given without partitions that do not exist
    for spec in args.topic:
        topic, sep, parts = spec.partition(":")
        if not sep:
            existing = reader.partitions_for_topic(topic)
            if existing is None:
                missing.append(topic)
            else:
                wanted.extend(TopicPartition(topic, p) for p in sorted(existing))
            continue
        for part in parts.split(","):
            if not re.fullmatch(r"\s*\d+\s*", part):
                raise CommandError("--topic %r: %r is not a partition number" % (spec, part))
            wanted.append(TopicPartition(topic, int(part)))
    try:
        results = admin.delete_consumer_group_offsets(group_id, wanted, raise_errors=False) if wanted else {}
    except errors.GroupIdNotFoundError:
        return report_error(err, "'%s' does not exist." % group_id)
    except errors.NonEmptyGroupError:
        return report_error(err, "Deleting offsets of a consumer group '%s' is forbidden if the group is not empty."
                            % group_id)
    rows: List[Tuple[str, str, Optional[BaseException]]] = [
        (tp.topic, str(tp.partition), error) for tp, error in results.items()]
    rows.extend((topic, "Not Provided", errors.UnknownTopicOrPartitionError(
        "topic %s does not exist" % topic)) for topic in missing)
    failed = any(error is not None for _, _, error in rows)
    if failed:
        report_error(err, "Encounter some partition level error, see the follow-up details:")
    else:
        out.write("Request succeed for deleting offsets with topic %s group %s\n" % (", ".join(args.topic), group_id))
    line = "%-30s %-15s %s"
    out.write("\n" + line % ("TOPIC", "PARTITION", "STATUS") + "\n")
    for topic, partition, error in sorted(rows, key=lambda r: (r[0], r[1].zfill(10))):
        status = "Successful" if error is None else "Error: %s" % (
            error.message if isinstance(error, errors.BrokerError) else error)
        out.write((line % (topic, partition, status)).rstrip() + "\n")
    return 1 if failed else 0
