"""librdkafka's own transaction tests against three ``pylogq-broker`` processes on real ZooKeeper.

librdkafka's test runner (``tests/test-runner`` of a librdkafka source tree whose test
programs are built) runs, unmodified, against the cluster: 0103-transactions (each of its
sub-tests in a run of its own, so that one failing sub-test does not hide the others: the
runner stops a test at its first failure), 0129-fetch_aborted_msgs, and 0098-consumer-txn
(its scenarios written once by Apache Kafka's Java producer, ``tests/java/
TransactionProducerCli.java`` run through ``$KAFKA_PATH/bin/kafka-run-class.sh``, and once by
librdkafka's; it needs a Kafka distribution at ``KAFKA_PATH`` and a runner built with RapidJSON).

Opt-in: the suite's tests are marked ``librdkafka_suite`` and run only with
``PYLOGQ_LIBRDKAFKA_SUITE=1`` (tests/conftest.py deselects them otherwise), with
``PYLOGQ_LIBRDKAFKA_DIR`` naming the librdkafka tree (docs/compatibility.md says what it needs).
They take minutes, and the tree is not part of the test command's machine. The tests of how
the runner's output is read (at the end) need none of it and run in every pass.

The runner is told what librdkafka's own clusters tell it: ``test.conf`` with
``bootstrap.servers`` and a timeout multiplier (a Python broker on a shared two-core machine
answers slower than the JVM brokers the timeouts were set for), ``TEST_KAFKA_VERSION`` (the
Kafka version whose APIs the broker serves, which picks each test's broker-version branches)
and ``BROKERS``. ``-L`` leaves out the runner's local tests (0103_transactions_local and the
mock-cluster tests need no broker: they test the client alone); ``-p1`` runs one test at a time.
The brokers are configured as librdkafka's default test scenario configures Kafka's
(tests/scenarios/default.json: topics created on first use, 4 partitions, replication factor 3).
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

import pytest

from .._zookeeper import ZooKeeperServer
from ._processes import ProcessCluster

F = TypeVar("F", bound=Callable[..., Any])


def suite(test: F) -> F:
    """librdkafka's own test programs: run only when asked for (tests/conftest.py); replication
    across broker processes, so the compiled pass only."""
    return pytest.mark.compiled_pass(pytest.mark.librdkafka_suite(test))


#: The Kafka version the broker serves the APIs of (docs/compatibility.md).
KAFKA_VERSION = "3.9.0"
#: librdkafka's ``test.timeout.multiplier``: its timeouts are scaled by this.
TIMEOUT_MULTIPLIER = 2
#: A deadline for one run of the runner (its own test timeouts end a stuck test well before).
RUN_DEADLINE_S = 900.0

#: 0103-transactions' sub-tests (its functions, as SUBTESTS matches them) and how many variants
#: of each main_0103_transactions runs: the runner must report that many passed.
SUBTESTS_0103: List[Tuple[str, int]] = [
    ("do_test_misuse_txn", 1),
    ("do_test_basic_producer_txn", 2),  # without and with compression
    ("do_test_consumer_producer_txn", 1),
    ("do_test_fenced_txn", 2),  # without and with a produce after the fence
    ("do_test_fatal_idempo_error_without_kip360", 1),
    ("do_test_empty_txn", 4),  # offsets sent or not, committed or aborted
    ("do_test_wmark_isolation_level", 1),
    ("do_test_txn_abort_control_message_leader_epoch", 1),
]

_ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\(B")
#: ``[ do_test_fenced_txn:760: produce after fence: PASS (1.31s) ]``
_SUBTEST_PASSED = re.compile(r"\[ (\S+?:\d+(?:: [^\]]*?)?): PASS \(")
#: ``### Test "0103_transactions (do_test_empty_txn:1020: send offsets, commit)" failed at ...: ###``
_FAILED = re.compile(r'^### Test "([^"]*)" failed at (.*?): ###$')
#: The summary table's rows: ``| 0129_fetch_aborted_msgs   |     PASSED |  11.867s |  reason``
_SUMMARY = re.compile(r"^\| (\S+)\s+\|\s+(PASSED|FAILED|SKIPPED|RUNNING|DNS)\s+\|\s+[\d.]+s \|\s*(.*)$")


@dataclass
class RunnerResult:
    """What one run of librdkafka's test runner reported, read from its output."""

    returncode: int
    output: str
    passed_subtests: List[str] = field(default_factory=list)
    #: (the failed test, with its sub-test in brackets; where; the failure's first line)
    failures: List[Tuple[str, str, str]] = field(default_factory=list)
    #: test name -> (state, the summary row's note: a skip's reason)
    summary: Dict[str, Tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, returncode: int, raw: str) -> "RunnerResult":
        text = _ANSI.sub("", raw)
        result = cls(returncode, text)
        lines = text.splitlines()
        for i, line in enumerate(lines):
            found = _SUBTEST_PASSED.search(line)
            if found:
                result.passed_subtests.append(found.group(1))
            failed = _FAILED.match(line.strip())
            if failed:
                reason = lines[i + 1].strip() if i + 1 < len(lines) else ""
                result.failures.append((failed.group(1), failed.group(2), reason))
            row = _SUMMARY.match(line.strip())
            if row:
                result.summary[row.group(1)] = (row.group(2), row.group(3).strip())
        return result

    def report(self, tail: int = 80) -> str:
        """The failures, then the end of the output (a failure the runner aborted on has no summary)."""
        failures = "".join("\n  %s at %s: %s" % f for f in self.failures) or " none reported"
        return "test-runner exited with %d; failures:%s\n--- end of its output ---\n%s" % (
            self.returncode, failures, "\n".join(self.output.splitlines()[-tail:]))


@dataclass
class Librdkafka:
    """A librdkafka source tree whose test runner is built."""

    root: Path
    version: str

    @property
    def tests(self) -> Path:
        return self.root / "tests"


def _librdkafka_version(root: Path) -> str:
    """``RD_KAFKA_VERSION`` of the tree's rdkafka.h, as ``major.minor.revision``."""
    header = (root / "src" / "rdkafka.h").read_text("utf-8", "replace")
    found = re.search(r"#define RD_KAFKA_VERSION\s+0x([0-9a-fA-F]{8})", header)
    if found is None:
        return "unknown"
    v = int(found.group(1), 16)
    return "%d.%d.%d" % (v >> 24, (v >> 16) & 0xFF, (v >> 8) & 0xFF)


@pytest.fixture(scope="module")
def librdkafka() -> Librdkafka:
    configured = os.environ.get("PYLOGQ_LIBRDKAFKA_DIR", "")
    if not configured:
        pytest.skip("PYLOGQ_LIBRDKAFKA_DIR is not set: it names a librdkafka source tree whose test runner "
                    "(tests/test-runner) is built (docs/compatibility.md)")
    root = Path(configured).resolve()
    runner = root / "tests" / "test-runner"
    if not os.access(runner, os.X_OK):
        pytest.skip("PYLOGQ_LIBRDKAFKA_DIR=%s has no built test runner (%s)" % (configured, runner))
    return Librdkafka(root, _librdkafka_version(root))


@pytest.fixture(scope="module")
def cluster(librdkafka: Librdkafka, zookeeper: ZooKeeperServer,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    if not zookeeper.running:
        zookeeper.start()
    connect = zookeeper.fresh_chroot("pylogq-librdkafka-%s" % uuid.uuid4().hex[:8])
    c = ProcessCluster(tmp_path_factory.mktemp("librdkafka-suite"), connect, 3,
                       {"auto.create.topics.enable": True, "num.partitions": 4, "default.replication.factor": 3})
    try:
        c.start_all()
        yield c
    finally:
        try:
            c.close()  # raises on an unclean shutdown: the chroot goes all the same
        finally:
            zookeeper.delete_chroot(connect)


def run_tests(librdkafka: Librdkafka, cluster: ProcessCluster, work: Path, tests: str,
              subtests: Optional[str] = None, extra_env: Optional[Dict[str, str]] = None) -> RunnerResult:
    """Run librdkafka's runner on ``tests`` (its TESTS: test numbers) against the cluster.

    Its own shared libraries come first on the library path (a system librdkafka may be
    installed), and it runs in its tests directory, as its run-test.sh runs it: 0098 builds and
    starts the Java helper from there. Its output goes to a file under ``work``, kept with the
    test's temporary files."""
    conf = work / "test.conf"
    conf.write_text("bootstrap.servers=%s\ntest.timeout.multiplier=%d\n" % (cluster.bootstrap, TIMEOUT_MULTIPLIER))
    env = dict(os.environ)
    env.pop("TESTS", None)
    env.pop("SUBTESTS", None)
    env.update({
        "RDKAFKA_TEST_CONF": str(conf),
        "TEST_KAFKA_VERSION": KAFKA_VERSION,
        "BROKERS": cluster.bootstrap,
        "TESTS": tests,
        "LD_LIBRARY_PATH": os.pathsep.join(
            [str(librdkafka.root / "src"), str(librdkafka.root / "src-cpp")]
            + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else [])),
    })
    if subtests:
        env["SUBTESTS"] = subtests
    env.update(extra_env or {})
    log = work / ("test-runner-%s%s.log" % (tests, "-" + subtests if subtests else ""))
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(librdkafka.tests / "test-runner"), "-p1", "-L"], cwd=librdkafka.tests,
                                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            returncode = proc.wait(RUN_DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            returncode = proc.wait()
    return RunnerResult.parse(returncode, log.read_text("utf-8", "replace"))


def _check(result: RunnerResult, test: str, cluster: ProcessCluster, librdkafka: Librdkafka) -> None:
    """The runner's verdict on ``test``: passed, or the failure with the brokers' logs."""
    state, note = result.summary.get(test, ("", ""))
    if state == "SKIPPED":
        pytest.skip("librdkafka %s's runner skipped %s: %s" % (librdkafka.version, test, note))
    assert result.returncode == 0 and state == "PASSED" and not result.failures, (
        "librdkafka %s's %s did not pass (%s)\n%s\n%s" % (
            librdkafka.version, test, state or "no summary", result.report(), cluster.logs()))


@suite
@pytest.mark.parametrize("subtest, variants", SUBTESTS_0103, ids=[name for name, _ in SUBTESTS_0103])
def test_0103_transactions(librdkafka: Librdkafka, cluster: ProcessCluster, tmp_path: Path,
                           subtest: str, variants: int) -> None:
    result = run_tests(librdkafka, cluster, tmp_path, "0103", subtest)
    _check(result, "0103_transactions", cluster, librdkafka)
    ran = [name for name in result.passed_subtests if name.split(":", 1)[0] == subtest]
    assert len(ran) == variants, "librdkafka %s's 0103 ran %d variants of %s, not %d: %s\n%s" % (
        librdkafka.version, len(ran), subtest, variants, ran, result.report())


@suite
def test_0129_fetch_aborted_msgs(librdkafka: Librdkafka, cluster: ProcessCluster, tmp_path: Path) -> None:
    _check(run_tests(librdkafka, cluster, tmp_path, "0129"), "0129_fetch_aborted_msgs", cluster, librdkafka)


@suite
def test_0098_consumer_txn(librdkafka: Librdkafka, cluster: ProcessCluster, tmp_path: Path) -> None:
    """Needs Apache Kafka's Java producer: a Kafka distribution at ``KAFKA_PATH`` (its
    bin/kafka-run-class.sh and libs/kafka-clients jar), from which the runner compiles
    tests/java/TransactionProducerCli.java."""
    kafka = os.environ.get("KAFKA_PATH", "")
    if not kafka or not (Path(kafka) / "bin" / "kafka-run-class.sh").exists():
        pytest.skip("0098 runs Apache Kafka's Java transactional producer: KAFKA_PATH must name a Kafka "
                    "distribution (bin/kafka-run-class.sh, libs/kafka-clients-*.jar); it is %r" % kafka)
    _check(run_tests(librdkafka, cluster, tmp_path, "0098"), "0098_consumer_txn", cluster, librdkafka)


# -- reading the runner's output (runs in every pass: no librdkafka needed) ---------------------

#: The runner's output as it prints it (colours included), trimmed: two sub-tests passed and
#: the summary table.
PASSED_OUTPUT = (
    "\x1b[36m[0103_transactions           /  1.594s] \x1b[32m[ do_test_fenced_txn:760: do not produce after "
    "fence: PASS (1.59s) ]\n"
    "\x1b[0m\x1b[36m[0103_transactions           /  2.903s] \x1b[32m[ do_test_fenced_txn:760: produce after fence: "
    "PASS (1.31s) ]\n"
    "\x1b[0m============== ALL TESTS PASSED ==============\n"
    "| <MAIN>                                   |     PASSED |   3.005s |\n"
    "| 0103_transactions_local                  |    SKIPPED |   0.000s | Filtered due to negative test flags\n"
    "| 0103_transactions                        |     PASSED |   2.903s |\n")
#: A failed sub-test: the runner aborts with no summary table.
FAILED_OUTPUT = (
    "\x1b[0m\x1b[36m[0103_transactions           /  2.087s] \x1b[32m[ do_test_empty_txn:1020: don't send offsets, "
    "commit: PASS (2.09s) ]\n"
    "\x1b[0m\x1b[31m### Test \"0103_transactions (do_test_empty_txn:1020: send offsets, commit)\" failed at "
    "0103-transactions.c:1062:do_test_empty_txn() at Mon Nov 30 12:36:14 2026: ###\n"
    "rd_kafka_send_offsets_to_transaction( p, offsets, cgmetadata, -1) failed: Local: Required feature not "
    "supported by broker\n"
    "test-runner: test.c:7702: test_fail0: Assertion `0' failed.\n")


def test_runner_output_read_passed() -> None:
    result = RunnerResult.parse(0, PASSED_OUTPUT)
    assert result.passed_subtests == ["do_test_fenced_txn:760: do not produce after fence",
                                      "do_test_fenced_txn:760: produce after fence"]
    assert result.failures == []
    assert result.summary == {"<MAIN>": ("PASSED", ""), "0103_transactions": ("PASSED", ""),
                              "0103_transactions_local": ("SKIPPED", "Filtered due to negative test flags")}


def test_runner_output_read_failed() -> None:
    result = RunnerResult.parse(-6, FAILED_OUTPUT)
    assert result.passed_subtests == ["do_test_empty_txn:1020: don't send offsets, commit"]
    assert result.failures == [("0103_transactions (do_test_empty_txn:1020: send offsets, commit)",
                                "0103-transactions.c:1062:do_test_empty_txn() at Mon Nov 30 12:36:14 2026",
                                "rd_kafka_send_offsets_to_transaction( p, offsets, cgmetadata, -1) failed: Local: "
                                "Required feature not supported by broker")]
    assert result.summary == {}  # so _check finds no PASSED row: the test fails
    assert "send offsets, commit" in result.report()
