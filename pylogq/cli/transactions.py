"""``pylogq transactions``: inspect transactions and end hanging ones, as Kafka's ``kafka-transactions.sh``.

The options about the broker (``--bootstrap-server``, ``--command-config``) come
before or after the command; the commands are Kafka's:

- ``list [--duration-filter MS]``: every transactional id every coordinator knows
  (ListTransactions, asked of each broker), or those whose transaction has run for more
  than ``MS`` milliseconds;
- ``describe --transactional-id ID``: the id's state at its coordinator
  (DescribeTransactions, sent where FindCoordinator with key type 1 points);
- ``describe-producers --topic T --partition P [--broker-id N]``: the producers a
  partition's leader (or replica ``N``) keeps state for, with the first offset of each
  one's open transaction;
- ``find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]``:
  the open transactions of those partitions older than ``MIN`` minutes (15) whose
  coordinator does not know them, Kafka's search: DescribeProducers on each partition,
  then ListTransactions by producer id and DescribeTransactions of the ids found. A
  transaction the coordinator still lists on that partition is left out (it will write
  its marker);
- ``abort --topic T --partition P (--start-offset N | --producer-id ID --producer-epoch E
  --coordinator-epoch C)``: end a hanging transaction with an ABORT marker written by
  the partition's leader (WriteTxnMarkers). With ``--start-offset`` the producer is the
  one whose open transaction starts there (DescribeProducers); a coordinator epoch of
  -1 (a producer whose transaction never ended) is sent as 0, as Kafka's tool does.

Tables are Kafka's: a header of its column names, each cell padded to its column's
width and followed by a tab, one line per row::

    TransactionalId	Coordinator	ProducerId	TransactionState	
    payments       	0          	4000      	Ongoing         	

``abort`` prints nothing when the marker is written. Exit status: 0 on success; 1 when
the broker refused or a transaction to abort was not found (``Error: <reason>`` on
stderr, in Kafka's words); 2 for options argparse rejects.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, TextIO

from .. import errors
from ..client.admin import DescribedTransaction, ProducerDescription
from ..client.consumer import TopicPartition
from ..cluster.names import INTERNAL_TOPICS
from ..errors import CommandError
from ._errors import error_text, report_error
from .clients import Clients, add_bootstrap_argument, int_argument
from .command_config import add_command_config_argument

__all__ = ["SUMMARY", "add_arguments", "run"]

SUMMARY = ("list, describe and find hanging transactions and abort them, as Kafka's kafka-transactions.sh does")

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)")

_int = int_argument()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _broker_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """``--bootstrap-server`` and ``--command-config``; after the command (``suppress``) they
    default to nothing, so they do not undo the same options given before it."""
    default: Any = argparse.SUPPRESS if suppress else None
    add_bootstrap_argument(parser, **({"default": default} if suppress else {}))
    add_command_config_argument(parser, default=default)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _broker_options(parser, suppress=False)
    sub = parser.add_subparsers(dest="transactions_command", required=True, title="commands", metavar="COMMAND")

    listing = sub.add_parser("list", help="list transactions", description="List the transactional ids every "
                             "coordinator knows, with their producer ids and states.")
    listing.add_argument("--duration-filter", type=_int, metavar="MS",
                         help="only transactions running longer than MS milliseconds (< 0: every one)")

    describe = sub.add_parser("describe", help="describe the state of an active transactional-id",
                              description="Describe the state of an active transactional-id.")
    describe.add_argument("--transactional-id", required=True, help="transactional id")

    producers = sub.add_parser("describe-producers", help="describe the states of active producers for a topic "
                               "partition", description="The producers a partition keeps state for.")
    producers.add_argument("--broker-id", type=_int,
                           help="describe the producer state on this replica (default: the partition's leader)")
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", type=_int, required=True, help="partition number")

    abort = sub.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)",
                           description="Abort a hanging transaction on one partition: its leader writes an ABORT "
                                       "marker for it.")
    abort.add_argument("--topic", required=True, help="topic name")
    abort.add_argument("--partition", type=_int, required=True, help="partition number")
    newer = abort.add_argument_group("Brokers on versions 3.0 and above",
                                     "the start offset of the transaction to abort is enough")
    newer.add_argument("--start-offset", type=_int, help="start offset of the transaction to abort")
    older = abort.add_argument_group("Brokers on versions older than 3.0", "all of these are needed")
    older.add_argument("--producer-id", type=_int, help="producer id")
    older.add_argument("--producer-epoch", type=_int, help="producer epoch")
    older.add_argument("--coordinator-epoch", type=_int, help="coordinator epoch")

    hanging = sub.add_parser("find-hanging", help="find hanging transactions",
                             description="Find the open transactions of a broker's or a topic's partitions that "
                                         "their coordinator does not know.")
    hanging.add_argument("--broker-id", type=_int, help="broker id to search for hanging transactions")
    hanging.add_argument("--max-transaction-timeout", type=int_argument(0), default=15, metavar="MINUTES",
                         help="maximum transaction timeout in minutes to limit the scope of the search "
                              "(15 minutes by default)")
    hanging.add_argument("--topic", help="topic name to limit search to (required if --partition is specified)")
    hanging.add_argument("--partition", type=_int, help="partition number")

    for command in (listing, describe, producers, abort, hanging):
        _broker_options(command, suppress=True)


def run(args: argparse.Namespace, clients: Clients, out: TextIO, err: TextIO) -> int:
    """Carry out one transactions command; -> the exit status."""
    command = args.transactions_command
    try:
        if command == "list":
            return _list(args, clients, out)
        if command == "describe":
            return _describe(args, clients, out)
        if command == "describe-producers":
            return _describe_producers(args, clients, out)
        if command == "abort":
            return _abort(args, clients)
        return _find_hanging(args, clients, out)
    except (errors.PylogqError, OSError) as exc:  # CommandError among them
        return report_error(err, exc)


def _failed(what: str, cause: BaseException) -> CommandError:
    """A step that failed, in Kafka's words: ``<what failed>: <why>``."""
    return CommandError("%s: %s" % (what, error_text(cause)))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """Kafka's ``ToolsUtils.prettyPrintTable``: each cell padded to its column's width, then a tab."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    for row in [list(headers)] + [list(r) for r in rows]:
        out.write("".join(cell.ljust(width) + "\t" for cell, width in zip(row, widths)) + "\n")


# -- list, describe ----------------------------------------------------------------------------------


def _list(args: argparse.Namespace, clients: Clients, out: TextIO) -> int:
    duration = -1 if args.duration_filter is None else args.duration_filter
    try:
        by_broker = clients.admin().list_transactions(duration_ms=duration)
    except errors.PylogqError as exc:
        raise _failed("Failed to list transactions", exc) from None
    rows = [[listing.transactional_id, str(broker_id), str(listing.producer_id), listing.state]
            for broker_id in sorted(by_broker)
            for listing in sorted(by_broker[broker_id], key=lambda listing: listing.transactional_id)]
    print_table(LIST_HEADERS, rows, out)
    return 0


def _describe(args: argparse.Namespace, clients: Clients, out: TextIO) -> int:
    transactional_id = args.transactional_id
    try:
        found = clients.admin().describe_transactions([transactional_id])[transactional_id]
    except errors.PylogqError as exc:
        raise _failed("Failed to describe transaction state of transactional-id `%s`" % transactional_id,
                      exc) from None
    print_table(DESCRIBE_HEADERS, [_description_row(found, _now_ms())], out)
    return 0


def _description_row(found: DescribedTransaction, now_ms: int) -> List[str]:
    start = found.transaction_start_time_ms
    return [str(found.coordinator_id), found.transactional_id, str(found.producer_id), str(found.producer_epoch),
            found.state, str(found.transaction_timeout_ms), "None" if start is None else str(start),
            "None" if start is None else str(now_ms - start),
            ",".join("%s-%d" % (tp.topic, tp.partition) for tp in found.partitions)]


# -- describe-producers ------------------------------------------------------------------------------


def _describe_producers(args: argparse.Namespace, clients: Clients, out: TextIO) -> int:
    tp = TopicPartition(args.topic, args.partition)
    try:
        found = clients.admin().describe_producers([tp], broker_id=args.broker_id)[tp]
    except errors.PylogqError as exc:
        where = "leader" if args.broker_id is None else "broker %d" % args.broker_id
        raise _failed("Failed to describe producers for partition %s-%d on %s" % (tp.topic, tp.partition, where),
                      exc) from None
    rows = [[str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
             str(p.last_timestamp), "None" if p.current_txn_start_offset < 0 else str(p.current_txn_start_offset)]
            for p in found]
    print_table(PRODUCERS_HEADERS, rows, out)
    return 0


# -- abort --------------------------------------------------------------------------------------------


class _AbortSpec(NamedTuple):
    """What to abort, as Kafka's AbortTransactionSpec names it in its messages."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:
        return ("AbortTransactionSpec(topicPartition=%s-%d, producerId=%d, producerEpoch=%d, coordinatorEpoch=%d)"
                % self)


def _abort(args: argparse.Namespace, clients: Clients) -> int:
    admin = clients.admin()
    if args.start_offset is None and args.producer_id is None:
        raise CommandError("The transaction to abort must be identified either with --start-offset (for brokers "
                           "on 3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch "
                           "(for older brokers)")
    if args.start_offset is not None and any(
            v is not None for v in (args.producer_id, args.producer_epoch, args.coordinator_epoch)):
        raise CommandError("--start-offset identifies the transaction to abort by itself: give it, or "
                           "--producer-id, --producer-epoch and --coordinator-epoch, not both")
    if args.start_offset is None:
        for flag, value in (("--producer-epoch", args.producer_epoch),
                            ("--coordinator-epoch", args.coordinator_epoch)):
            if value is None:
                raise CommandError("Missing required argument %s" % flag)
        # A transaction begun by a new producer id that hung before any marker shows coordinator
        # epoch -1 in DescribeProducers; 0 is at most any epoch a leader can have seen.
        spec = _AbortSpec(args.topic, args.partition, args.producer_id, args.producer_epoch,
                          max(args.coordinator_epoch, 0))
    else:
        spec = _abort_spec(admin, args.topic, args.partition, args.start_offset)
    try:
        admin.abort_transaction(*spec)
    except errors.PylogqError as exc:
        raise _failed("Failed to abort transaction %s" % (spec,), exc) from None
    return 0


def _abort_spec(admin: Any, topic: str, partition: int, start_offset: int) -> _AbortSpec:
    """The producer whose open transaction on the partition starts at ``start_offset``."""
    tp = TopicPartition(topic, partition)
    try:
        producers = admin.describe_producers([tp])[tp]
    except errors.PylogqError as exc:
        raise _failed("Failed to validate producer state for partition %s-%d" % (topic, partition), exc) from None
    for p in producers:
        if p.current_txn_start_offset >= 0 and p.current_txn_start_offset == start_offset:
            return _AbortSpec(topic, partition, p.producer_id, p.producer_epoch, max(p.coordinator_epoch, 0))
    raise CommandError("Could not find any open transactions starting at offset %d on partition %s-%d"
                       % (start_offset, topic, partition))


# -- find-hanging -------------------------------------------------------------------------------------


class _Open(NamedTuple):
    """An open transaction a partition's producer state shows."""

    tp: TopicPartition
    producer: ProducerDescription


def _find_hanging(args: argparse.Namespace, clients: Clients, out: TextIO) -> int:
    if args.topic is None and args.broker_id is None:
        raise CommandError("The `find-hanging` command requires either --topic or --broker-id to limit the scope "
                           "of the search")
    if args.partition is not None and args.topic is None:
        raise CommandError("The --partition argument requires --topic to be provided")
    admin = clients.admin()
    max_timeout_ms = args.max_transaction_timeout * 60000
    partitions = _partitions_to_search(admin, args.topic, args.partition, args.broker_id)
    candidates = _candidates(admin, partitions, args.broker_id, max_timeout_ms)
    hanging: List[_Open] = []
    if candidates:
        by_producer: Dict[int, List[_Open]] = {}
        for found in candidates:
            by_producer.setdefault(found.producer.producer_id, []).append(found)
        ids = _transactional_ids(admin, sorted(by_producer))
        descriptions = _descriptions(admin, sorted(set(ids.values())))
        for producer_id, opened in by_producer.items():
            description = descriptions.get(ids[producer_id]) if producer_id in ids else None
            if description is None:
                hanging.extend(opened)  # the coordinator knows no transactional id of this producer
            else:
                # The coordinator lists the partitions of an ongoing transaction, and while it
                # commits or aborts those still waiting for their markers: it will write those.
                hanging.extend(o for o in opened if o.tp not in description.partitions)
    now = _now_ms()
    rows = [[o.tp.topic, str(o.tp.partition), str(o.producer.producer_id), str(o.producer.producer_epoch),
             str(o.producer.coordinator_epoch), str(o.producer.current_txn_start_offset),
             str(o.producer.last_timestamp), str((now - o.producer.last_timestamp) // 60000)]
            for o in sorted(hanging, key=lambda o: (o.tp.topic, o.tp.partition, o.producer.producer_id))]
    print_table(HANGING_HEADERS, rows, out)
    return 0


def _partitions_to_search(admin: Any, topic: Optional[str], partition: Optional[int],
                          broker_id: Optional[int]) -> List[TopicPartition]:
    if topic is not None and partition is not None:
        return [TopicPartition(topic, partition)]
    if topic is not None:
        topics = [topic]
    else:
        try:
            topics = admin.list_topics()
            # The admin client's listing leaves the internal topics out; Kafka's search includes them.
            topics += [t["topic"] for t in admin.describe_topics(sorted(INTERNAL_TOPICS)) if t["error_code"] == 0]
        except errors.PylogqError as exc:
            raise _failed("Failed to list topics", exc) from None
    try:
        described = admin.describe_topics(topics)
    except errors.PylogqError as exc:
        raise _failed("Failed to describe %d topics" % len(topics), exc) from None
    out: List[TopicPartition] = []
    for entry in described:
        if entry["error_code"]:
            cls = errors.error_for_code(entry["error_code"]) or errors.UnknownServerError
            raise _failed("Failed to describe %d topics" % len(topics), cls("topic %r: %s" % (entry["topic"],
                                                                                            cls.message)))
        for p in entry["partitions"]:
            if broker_id is None or broker_id in p["replicas"]:
                out.append(TopicPartition(entry["topic"], p["partition"]))
    return out


def _candidates(admin: Any, partitions: List[TopicPartition], broker_id: Optional[int],
                max_timeout_ms: int) -> List[_Open]:
    """The open transactions whose producer last wrote more than ``max_timeout_ms`` ago: a
    transaction the coordinator still runs would have timed out and been aborted by then."""
    if not partitions:
        return []
    try:
        found = admin.describe_producers(partitions, broker_id=broker_id)
    except errors.PylogqError as exc:
        raise _failed("Failed to describe producers for %d partitions on broker %s"
                      % (len(partitions), "(any)" if broker_id is None else broker_id), exc) from None
    now = _now_ms()
    return [_Open(tp, p) for tp, producers in found.items() for p in producers
            if p.current_txn_start_offset >= 0 and now - p.last_timestamp > max_timeout_ms]


def _transactional_ids(admin: Any, producer_ids: List[int]) -> Dict[int, str]:
    try:
        by_broker = admin.list_transactions(producer_ids=producer_ids)
    except errors.PylogqError as exc:
        raise _failed("Failed to list transactions for %d producers" % len(producer_ids), exc) from None
    wanted = set(producer_ids)
    return {listing.producer_id: listing.transactional_id for listings in by_broker.values()
            for listing in listings if listing.producer_id in wanted}


def _descriptions(admin: Any, transactional_ids: List[str]) -> Dict[str, Optional[DescribedTransaction]]:
    """Each id's description; None for one its coordinator does not know (its transactions hang)."""
    if not transactional_ids:
        return {}
    try:
        found = admin.describe_transactions(transactional_ids, raise_errors=False)
    except errors.PylogqError as exc:
        raise _failed("Failed to describe %d transactions" % len(transactional_ids), exc) from None
    out: Dict[str, Optional[DescribedTransaction]] = {}
    for transactional_id, described in found.items():
        if isinstance(described.error, errors.TransactionalIdNotFoundError):
            out[transactional_id] = None
        elif described.error is not None:
            raise _failed("Failed to describe %d transactions" % len(transactional_ids), described.error)
        else:
            out[transactional_id] = described
    return out
