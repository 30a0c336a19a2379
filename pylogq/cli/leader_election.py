"""``pylogq leader-election``: elect partitions' leaders, as Kafka's ``kafka-leader-election.sh``.

``--election-type PREFERRED`` gives each partition back to its preferred replica (the
first of its replicas) where that replica is alive and in sync; ``--election-type
UNCLEAN`` gives a partition without a live leader one, the first live in-sync replica or
else any live replica, at the cost of the records only the lost replicas had. The
partitions are one of:

- ``--topic T --partition P``: one partition;
- ``--all-topic-partitions``: every partition of the cluster (the controller answers only
  for those that needed an election);
- ``--path-to-json-file F``: those a file lists, in Kafka's format
  ``{"partitions": [{"topic": "foo", "partition": 1}, ...]}``.

The controller holds the elections (ElectLeaders). The command prints, as Kafka's does::

    Successfully completed leader election (PREFERRED) for partitions foo-0, foo-1
    Valid replica already elected for partitions foo-2
    Error completing leader election (PREFERRED) for partition: foo-3: ...

Exit status: 0 when every partition has a leader it elected or already had; 1 when one
could not be elected or the request failed (``Error: <reason>`` on stderr); 2 for
options argparse rejects.
"""

from __future__ import annotations

import argparse
import json
from typing import List, Mapping, Optional, TextIO, Tuple

from .. import errors
from ..client.consumer import TopicPartition
from ..errors import CommandError
from ._errors import report_error
from .clients import Clients, add_bootstrap_argument
from .command_config import add_command_config_argument

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = "elect partitions' leaders (preferred or unclean), as Kafka's kafka-leader-election.sh does"

_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser, "--admin.config")
    parser.add_argument("--election-type", required=True, type=str.upper, choices=sorted(_TYPES),
                        help="PREFERRED (back to the preferred replica) or UNCLEAN (any live replica where no "
                             "in-sync one is left)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic of the one partition to elect (with --partition)")
    which.add_argument("--all-topic-partitions", action="store_true", help="every partition of the cluster")
    which.add_argument("--path-to-json-file", metavar="FILE",
                       help='the partitions to elect: {"partitions": [{"topic": "foo", "partition": 1}]}')
    parser.add_argument("--partition", type=int, help="the partition of --topic")


def run(args: argparse.Namespace, clients: Clients, out: TextIO, err: TextIO) -> int:
    """Hold the elections; -> the exit status."""
    try:
        partitions = _partitions(args)
        election = args.election_type
        results = clients.admin().elect_leaders(_TYPES[election], partitions)
        return _report(election, results, out, err)
    except (errors.PylogqError, OSError) as exc:  # CommandError among them
        return report_error(err, exc)


def _partitions(args: argparse.Namespace) -> Optional[List[TopicPartition]]:
    if args.all_topic_partitions:
        if args.partition is not None:
            raise CommandError("--partition goes with --topic, not --all-topic-partitions")
        return None
    if args.topic is not None:
        if args.partition is None:
            raise CommandError("--topic needs --partition: the partition to elect")
        return [TopicPartition(args.topic, args.partition)]
    if args.partition is not None:
        raise CommandError("--partition goes with --topic, not --path-to-json-file")
    return _read_json(args.path_to_json_file)


def _read_json(path: str) -> List[TopicPartition]:
    try:
        with open(path, "rb") as f:
            body = json.loads(f.read().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CommandError("%s is not JSON: %s" % (path, exc)) from None
    entries = body.get("partitions") if isinstance(body, dict) else None
    if not isinstance(entries, list) or not entries:
        raise CommandError('%s lists no partitions: expected {"partitions": [{"topic": "foo", "partition": 1}]}'
                           % path)
    out: List[TopicPartition] = []
    seen = set()
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            raise CommandError("%s: %r is not {\"topic\": NAME, \"partition\": NUMBER}" % (path, entry))
        if (topic, partition) in seen:
            raise CommandError("%s lists %s-%d twice" % (path, topic, partition))
        seen.add((topic, partition))
        out.append(TopicPartition(topic, partition))
    return out


def _report(election: str, results: Mapping[TopicPartition, Optional[errors.BrokerError]], out: TextIO,
            err: TextIO) -> int:
    done: List[Tuple[str, int]] = []
    noop: List[Tuple[str, int]] = []
    failed: List[Tuple[Tuple[str, int], errors.BrokerError]] = []
    for tp, error in sorted(results.items(), key=lambda item: (item[0].topic, item[0].partition)):
        key = (tp.topic, tp.partition)
        if error is None:
            done.append(key)
        elif isinstance(error, errors.ElectionNotNeededError):
            noop.append(key)
        else:
            failed.append((key, error))
    if done:
        out.write("Successfully completed leader election (%s) for partitions %s\n"
                  % (election, ", ".join("%s-%d" % tp for tp in done)))
    if noop:
        out.write("Valid replica already elected for partitions %s\n" % ", ".join("%s-%d" % tp for tp in noop))
    for (topic, partition), error in failed:
        out.write("Error completing leader election (%s) for partition: %s-%d: %s\n"
                  % (election, topic, partition, error))
    if failed:
        return report_error(err, CommandError("%d replica(s) could not be elected" % len(failed)))
    return 0
