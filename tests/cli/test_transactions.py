"""``pylogq transactions`` (Kafka's kafka-transactions.sh): its options, Kafka's tables, and the
search for hanging transactions, over an in-process broker whose partitions hold transactions
written with the partition API (as the transaction coordinator's markers are appended).

Where the transaction coordinator's answers (ListTransactions, DescribeTransactions) decide
what the tool prints, :class:`Coordinators` gives them: the in-process broker's transport with
those two calls answered by the test, so the search's every branch is reached. The tool against
a broker's own coordinator, over TCP, is tests/cli/test_transactions_broker.py.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import pytest

import pylogq
from pylogq import records
from pylogq.cli import transactions
from pylogq.cli.clients import Clients
from pylogq.cli.main import build_parser, run
from pylogq.cluster.contract import TransactionDescription, TransactionListing
from pylogq.records.control import ABORT, build_end_txn_marker

from .conftest import Result

#: An old batch timestamp: a transaction whose producer last wrote then is past any timeout.
OLD_TS = 1_700_000_000_000


def txn_batch(pid: int, seq: int, n: int = 1, epoch: int = 0, timestamp: int = OLD_TS) -> bytes:
    return bytes(records.build_batch([b"%d-%d" % (pid, seq + i) for i in range(n)], timestamps=timestamp,
                                     producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                     is_transactional=True))


def idempotent_batch(pid: int, seq: int, timestamp: int = OLD_TS) -> bytes:
    return bytes(records.build_batch([b"plain"], timestamps=timestamp, producer_id=pid, producer_epoch=0,
                                     base_sequence=seq))


class Coordinators:
    """A broker's in-process transport whose transaction coordinator answers what the test says."""

    def __init__(self, broker: pylogq.Broker, listings: Dict[int, List[TransactionListing]],
                 descriptions: Dict[str, Tuple[int, TransactionDescription]]) -> None:
        self._transport = broker.transport()
        self.listings = listings
        self.descriptions = descriptions
        self.asked: List[Tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def list_transactions(self, states: Sequence[str], producer_ids: Sequence[int], duration_ms: int
                          ) -> Dict[int, List[TransactionListing]]:
        self.asked.append(("list", (list(states), list(producer_ids), duration_ms)))
        return {b: [t for t in found if not producer_ids or t.producer_id in producer_ids]
                for b, found in self.listings.items()}

    def describe_transactions(self, ids: Sequence[str]) -> Dict[str, Tuple[int, TransactionDescription]]:
        self.asked.append(("describe", list(ids)))
        return {t: self.descriptions.get(t, (-1, TransactionDescription(t, 105))) for t in ids}


def cli_on(target: Any, *argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    status = run(["transactions", *argv], clients=Clients(broker=target), stdout=out, stderr=err)
    return Result(status, out.getvalue(), err.getvalue())


def table(*rows: Sequence[str]) -> str:
    """Kafka's prettyPrintTable, written out by hand: cells padded to the column, each then a tab."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("".join(c + " " * (w - len(c)) + "\t" for c, w in zip(r, widths)) + "\n" for r in rows)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[pylogq.Broker]:
    with pylogq.Broker(str(tmp_path / "data")) as b:
        b.create_topic("t", 2)
        yield b


# -- options --------------------------------------------------------------------------------------------


def test_the_broker_options_go_before_or_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["transactions", "--bootstrap-server", "h:1", "--command-config", "c.properties",
                                "list", "--duration-filter", "5"])
    assert (before.bootstrap_server, before.command_config, before.duration_filter) == ("h:1", "c.properties", 5)
    after = parser.parse_args(["transactions", "describe", "--transactional-id", "x", "--bootstrap-server", "h:2"])
    assert (after.bootstrap_server, after.command_config, after.transactional_id) == ("h:2", None, "x")
    neither = parser.parse_args(["transactions", "find-hanging", "--broker-id", "3"])
    assert (neither.bootstrap_server, neither.max_transaction_timeout, neither.broker_id) == ("127.0.0.1:9092", 15, 3)


@pytest.mark.parametrize("argv,message", [
    (["describe"], "the following arguments are required: --transactional-id"),
    (["describe-producers", "--topic", "t"], "the following arguments are required: --partition"),
    (["abort", "--partition", "0"], "the following arguments are required: --topic"),
    (["list", "--bogus"], "unrecognized arguments: --bogus"),
    (["list", "--duration-filter", "soon"], "'soon' is not an integer"),
    (["find-hanging", "--max-transaction-timeout", "-1"], "must be at least 0"),
    (["list", "--bootstrap-server", "nowhere"], "'nowhere' is not HOST:PORT"),
    ([], "the following arguments are required: COMMAND"),
])
def test_usage_errors_are_the_commands_own(argv: List[str], message: str, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exit_:
        run(["transactions", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "usage: pylogq transactions" in err


@pytest.mark.parametrize("argv,message", [
    (["find-hanging"], "The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
                       "the search"),
    (["find-hanging", "--broker-id", "0", "--partition", "1"], "The --partition argument requires --topic to be "
                                                               "provided"),
    (["abort", "--topic", "t", "--partition", "0"], "The transaction to abort must be identified either with "
     "--start-offset (for brokers on 3.0 or above) or with --producer-id, --producer-epoch, and "
     "--coordinator-epoch (for older brokers)"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "5", "--coordinator-epoch", "0"],
     "Missing required argument --producer-epoch"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "5", "--producer-epoch", "0"],
     "Missing required argument --coordinator-epoch"),
    (["abort", "--topic", "t", "--partition", "0", "--start-offset", "0", "--producer-id", "5"],
     "--start-offset identifies the transaction to abort by itself"),
])
def test_options_that_do_not_make_a_request(broker: pylogq.Broker, argv: List[str], message: str) -> None:
    found = cli_on(broker, *argv)
    assert found.status == 1 and found.out == ""
    assert found.err.startswith("Error: ") and message in found.err


# -- tables ---------------------------------------------------------------------------------------------


def test_kafkas_table_layout() -> None:
    out = io.StringIO()
    transactions.print_table(("A", "Longer"), [["xyz", "1"], ["", "22"]], out)
    assert out.getvalue() == "A  \tLonger\t\nxyz\t1     \t\n   \t22    \t\n"
    empty = io.StringIO()
    transactions.print_table(transactions.LIST_HEADERS, [], empty)
    assert empty.getvalue() == "TransactionalId\tCoordinator\tProducerId\tTransactionState\t\n"


def test_describe_producers_shows_the_open_transactions_start(broker: pylogq.Broker) -> None:
    part = broker.partition("t", 1)
    part.append(idempotent_batch(7, 0))  # 0
    part.append(txn_batch(9, 0, 2, epoch=3))  # 1, 2: open
    found = cli_on(broker, "describe-producers", "--topic", "t", "--partition", "1")
    assert found == Result(0, table(transactions.PRODUCERS_HEADERS,
                                    ["7", "0", "-1", "0", str(OLD_TS), "None"],
                                    ["9", "3", "-1", "1", str(OLD_TS), "1"]), "")
    on_self = cli_on(broker, "describe-producers", "--topic", "t", "--partition", "1", "--broker-id",
                     str(broker.broker_id))
    assert on_self == found
    quiet = cli_on(broker, "describe-producers", "--topic", "t", "--partition", "0")
    assert quiet == Result(0, table(transactions.PRODUCERS_HEADERS), "")


def test_describe_producers_reports_a_missing_partition(broker: pylogq.Broker) -> None:
    found = cli_on(broker, "describe-producers", "--topic", "t", "--partition", "5")
    assert found.status == 1 and found.out == ""
    assert found.err.startswith("Error: Failed to describe producers for partition t-5 on leader: "
                                "UNKNOWN_TOPIC_OR_PARTITION")
    elsewhere = cli_on(broker, "describe-producers", "--topic", "t", "--partition", "0", "--broker-id", "42")
    assert elsewhere.status == 1
    assert elsewhere.err.startswith("Error: Failed to describe producers for partition t-0 on broker 42: ")


def test_list_prints_each_coordinators_ids_and_passes_the_duration_filter(broker: pylogq.Broker) -> None:
    stub = Coordinators(broker, {1: [TransactionListing("payments", 4000, "Ongoing")],
                                 0: [TransactionListing("orders", 12, "CompleteCommit"),
                                     TransactionListing("audit", 13, "Empty")]}, {})
    found = cli_on(stub, "list", "--duration-filter", "60000")
    assert found == Result(0, table(transactions.LIST_HEADERS, ["audit", "0", "13", "Empty"],
                                    ["orders", "0", "12", "CompleteCommit"],
                                    ["payments", "1", "4000", "Ongoing"]), "")
    assert stub.asked == [("list", ([], [], 60000))]
    every = Coordinators(broker, {}, {})
    assert cli_on(every, "list") == Result(0, table(transactions.LIST_HEADERS), "")
    assert every.asked == [("list", ([], [], -1))]


def test_describe_prints_the_state_and_its_duration(broker: pylogq.Broker, monkeypatch: Any) -> None:
    monkeypatch.setattr(transactions, "_now_ms", lambda: OLD_TS + 2500)
    stub = Coordinators(broker, {}, {
        "payments": (2, TransactionDescription("payments", 0, "Ongoing", 4000, 5, 60000, OLD_TS,
                                               (("t", 1), ("s", 0)))),
        "idle": (0, TransactionDescription("idle", 0, "CompleteAbort", 17, 1, 30000, -1, ())),
    })
    found = cli_on(stub, "describe", "--transactional-id", "payments")
    assert found == Result(0, table(transactions.DESCRIBE_HEADERS,
                                    ["2", "payments", "4000", "5", "Ongoing", "60000", str(OLD_TS), "2500",
                                     "s-0,t-1"]), "")
    idle = cli_on(stub, "describe", "--transactional-id", "idle")
    assert idle == Result(0, table(transactions.DESCRIBE_HEADERS,
                                   ["0", "idle", "17", "1", "CompleteAbort", "30000", "None", "None", ""]), "")
    missing = cli_on(stub, "describe", "--transactional-id", "nobody")
    assert missing == Result(1, "", "Error: Failed to describe transaction state of transactional-id `nobody`: "
                                    "TRANSACTIONAL_ID_NOT_FOUND: transactional id 'nobody' is not known to its "
                                    "coordinator\n")


# -- find-hanging ---------------------------------------------------------------------------------------


def open_transactions(broker: pylogq.Broker) -> None:
    """t-0: producer 9's transaction open at 1 (since OLD_TS), producer 11's at 2 (just now);
    t-1: producer 9's open at 0, producer 10's aborted (closed)."""
    p0, p1 = broker.partition("t", 0), broker.partition("t", 1)
    p0.append(idempotent_batch(7, 0))  # 0
    p0.append(txn_batch(9, 0))  # 1
    p0.append(txn_batch(11, 0, timestamp=int(time.time() * 1000)))  # 2: too recent to be a candidate
    p1.append(txn_batch(9, 0))  # 0
    p1.append(txn_batch(10, 0))  # 1
    p1.append(bytes(build_end_txn_marker(10, 0, ABORT, 0, OLD_TS)), origin="coordinator")  # 2


def hanging_rows(*rows: Tuple[int, int, int]) -> List[List[str]]:
    return [["t", str(partition), str(pid), "0", "-1", str(start), str(OLD_TS), "60"]
            for partition, pid, start in rows]


def test_find_hanging_lists_open_transactions_no_coordinator_knows(broker: pylogq.Broker, monkeypatch: Any) -> None:
    monkeypatch.setattr(transactions, "_now_ms", lambda: OLD_TS + 60 * 60000 + 1)
    open_transactions(broker)
    stub = Coordinators(broker, {}, {})
    found = cli_on(stub, "find-hanging", "--broker-id", str(broker.broker_id))
    assert found == Result(0, table(transactions.HANGING_HEADERS, *hanging_rows((0, 9, 1), (1, 9, 0))), "")
    assert stub.asked == [("list", ([], [9], -1))]  # no transactional id found: nothing to describe
    one = cli_on(Coordinators(broker, {}, {}), "find-hanging", "--topic", "t", "--partition", "1")
    assert one == Result(0, table(transactions.HANGING_HEADERS, *hanging_rows((1, 9, 0))), "")
    # Past 60 minutes a transaction is not a candidate when the timeout may be longer.
    longer = cli_on(Coordinators(broker, {}, {}), "find-hanging", "--topic", "t", "--max-transaction-timeout", "61")
    assert longer == Result(0, table(transactions.HANGING_HEADERS), "")


def test_find_hanging_leaves_out_what_the_coordinator_will_end(broker: pylogq.Broker, monkeypatch: Any) -> None:
    monkeypatch.setattr(transactions, "_now_ms", lambda: OLD_TS + 60 * 60000 + 1)
    open_transactions(broker)
    # The coordinator runs producer 9's transaction on t-1 only: its t-0 part hangs.
    stub = Coordinators(broker, {0: [TransactionListing("payments", 9, "Ongoing")]}, {
        "payments": (0, TransactionDescription("payments", 0, "Ongoing", 9, 0, 60000, OLD_TS, (("t", 1),)))})
    found = cli_on(stub, "find-hanging", "--topic", "t")
    assert found == Result(0, table(transactions.HANGING_HEADERS, *hanging_rows((0, 9, 1))), "")
    assert stub.asked == [("list", ([], [9], -1)), ("describe", ["payments"])]
    # An id the coordinator no longer knows (expired): both hang.
    gone = Coordinators(broker, {0: [TransactionListing("payments", 9, "Ongoing")]}, {})
    assert cli_on(gone, "find-hanging", "--topic", "t") == Result(
        0, table(transactions.HANGING_HEADERS, *hanging_rows((0, 9, 1), (1, 9, 0))), "")
    # Another failure to describe it fails the search, as Kafka's tool does.
    loading = Coordinators(broker, {0: [TransactionListing("payments", 9, "Ongoing")]},
                           {"payments": (-1, TransactionDescription("payments", 14))})
    failed = cli_on(loading, "find-hanging", "--topic", "t")
    assert failed.status == 1 and failed.out == ""
    assert failed.err.startswith("Error: Failed to describe 1 transactions: COORDINATOR_LOAD_IN_PROGRESS")


def test_find_hanging_on_a_topic_that_does_not_exist(broker: pylogq.Broker) -> None:
    found = cli_on(Coordinators(broker, {}, {}), "find-hanging", "--topic", "nope")
    assert found.status == 1 and found.out == ""
    assert found.err.startswith("Error: Failed to describe 1 topics: UNKNOWN_TOPIC_OR_PARTITION")


def test_abort_by_start_offset_needs_an_open_transaction_there(broker: pylogq.Broker) -> None:
    broker.partition("t", 0).append(txn_batch(9, 0))
    found = cli_on(broker, "abort", "--topic", "t", "--partition", "0", "--start-offset", "5")
    assert found == Result(1, "", "Error: Could not find any open transactions starting at offset 5 on partition "
                                  "t-0\n")
    missing = cli_on(broker, "abort", "--topic", "t", "--partition", "9", "--start-offset", "0")
    assert missing.status == 1
    assert missing.err.startswith("Error: Failed to validate producer state for partition t-9: "
                                  "UNKNOWN_TOPIC_OR_PARTITION")


# -- the in-process broker's own coordinator and leader -------------------------------------------------


def test_in_process_list_describe_and_abort(broker: pylogq.Broker) -> None:
    pid, epoch = broker.init_producer_id("tx-in", 60000)
    assert broker.add_partitions_to_txn("tx-in", pid, epoch, [("t", 0)]) == {("t", 0): 0}
    listed = cli_on(broker, "list")
    assert listed == Result(0, table(transactions.LIST_HEADERS, ["tx-in", str(broker.broker_id), str(pid),
                                                                 "Ongoing"]), "")
    described = cli_on(broker, "describe", "--transactional-id", "tx-in")
    assert described.status == 0, described
    row = [cell.strip() for cell in described.out.splitlines()[1].split("\t")[:-1]]
    assert row[:6] + row[8:] == [str(broker.broker_id), "tx-in", str(pid), str(epoch), "Ongoing", "60000", "t-0"]
    # A transaction no coordinator knows, on t-1, holds read_committed readers until aborted.
    part = broker.partition("t", 1)
    part.append(txn_batch(1 << 40, 0))
    part.append(idempotent_batch(7, 0))
    assert part.last_stable_offset == 0
    aborted = cli_on(broker, "abort", "--topic", "t", "--partition", "1", "--start-offset", "0")
    assert aborted == Result(0, "", "")
    assert part.last_stable_offset == part.log_end_offset == 3
