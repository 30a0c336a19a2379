"""One convention across ``pylogq`` and ``pylogq-broker`` (issue 30, items 5 to 7).

A bad flag gets the subcommand's usage; ``--version`` on both commands; one
error prefix (``Error: ``, exit status 1); Kafka's dotted names in
configuration errors; internal topics listed as Kafka lists them; a name
refused before any warning about it; a closed pipe ends a command quietly; the
sanity check of a live index; a port that does not speak Kafka reported in
seconds, naming it.
"""

from __future__ import annotations

import http.server
import io
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import pylogq
from pylogq import records
from pylogq.cli.main import run
from pylogq.client import connection
from pylogq.cluster.broker.local_cluster import Cluster
from pylogq.records import codecs
from pylogq.config import LogConfig
from pylogq.storage.manager import LogManager

from .conftest import Cli, Result

ROOT = Path(pylogq.__file__).resolve().parents[1]
FIRST = "%020d" % 0
TIMEOUT_S = 120
#: A generous bound on the wait for ``pylogq`` to report a port that does not speak Kafka. What it
#: must show is that it gave up after its own bound for ApiVersions (its message says so), or at
#: the first answer that is not Kafka's, never after a client's 30 s request timeout.
NOT_KAFKA_WAIT_S = 60.0
#: The ApiVersions bound (5 s, ``pylogq.client.connection.HANDSHAKE_TIMEOUT_S``) as these tests
#: set it: still far below the 30 s request timeout the tools keep, so a message naming it shows
#: which of the two bounds the tool gave up at, without waiting 5 s.
NOT_KAFKA_BOUND_S = 0.5


def _env() -> Dict[str, str]:
    """This process's environment, with this checkout first on the import path of a child."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _command(script: str, module: str) -> List[str]:
    """The console script as installed (pyproject's [project.scripts]), else ``python -m module``."""
    path = shutil.which(script)
    return [path] if path else [sys.executable, "-m", module]


def _run(argv: List[str], **kwargs: Any) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, env=_env(),
                          stdin=subprocess.DEVNULL, **kwargs)


def _local(*argv: str) -> Result:
    """``pylogq ARGV`` in this process, for the tools that need no broker; streams captured."""
    out, err = io.StringIO(), io.StringIO()
    status = run(list(argv), stdout=out, stderr=err)
    return Result(status, out.getvalue(), err.getvalue())


# -- an unknown flag: the subcommand's usage ---------------------------------------------------------


@pytest.mark.parametrize("argv,prog", [
    (["topics", "--list"], "pylogq topics"),
    (["produce", "--topic", "t"], "pylogq produce"),
    (["consume", "--topic", "t"], "pylogq consume"),
    (["groups", "--list"], "pylogq groups"),
    (["configs", "--describe", "--topic", "t"], "pylogq configs"),
    (["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1"], "pylogq perf produce"),
    (["transactions", "describe", "--transactional-id", "x"], "pylogq transactions describe"),
    (["dump-log", "--files", "x.log"], "pylogq dump-log"),
    (["zookeeper-server-start"], "pylogq zookeeper-server-start"),
    (["demo"], "pylogq demo"),
    (["mirror-maker", "mm2.properties"], "pylogq mirror-maker"),
    (["mirror-maker", "status", "--config", "mm2.properties"], "pylogq mirror-maker status"),
    (["mirror-maker", "translate-offsets", "--config", "c", "--source", "A", "--target", "B", "--group", "g"],
     "pylogq mirror-maker translate-offsets"),
])
def test_an_unknown_flag_prints_the_subcommands_usage(argv: List[str], prog: str, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        run(argv + ["--bogus"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: %s " % prog), err
    assert err.endswith("%s: error: unrecognized arguments: --bogus\n" % prog), err


def test_an_unknown_flag_before_the_subcommand_is_the_top_levels(capsys: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        run(["--bogus", "topics", "--list"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith("pylogq: error: unrecognized arguments: --bogus\n")


# -- --version ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("script,module", [("pylogq", "pylogq"), ("pylogq-broker", "pylogq.cli.broker")])
def test_version_of_both_commands(script: str, module: str) -> None:
    done = _run(_command(script, module) + ["--version"])
    assert (done.returncode, done.stdout, done.stderr) == (0, "%s %s\n" % (script, pylogq.__version__), "")


def test_the_version_is_the_projects() -> None:
    import tomllib

    project = tomllib.loads((Path(pylogq.__file__).parent.parent / "pyproject.toml").read_text("utf-8"))["project"]
    assert pylogq.__version__ == project["version"]


# -- one error prefix ---------------------------------------------------------------------------------------


def _one_error(err: str) -> str:
    """The one line a failed command printed, checked to be ``Error: ...``; -> its message."""
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("Processed a total")]
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "ERROR" not in err and "Error while" not in err and "Traceback" not in err, err
    return lines[0][len("Error: "):]


def test_every_tool_reports_a_failure_as_error_colon(cli: Cli, tmp_path: Path) -> None:
    assert cli("topics", "--create", "--topic", "t").status == 0
    failures = {
        "topics": cli("topics", "--describe", "--topic", "ghost"),
        "groups": cli("groups", "--describe", "--group", "ghost"),
        "produce": cli("produce", "--topic", "t", "--producer-property", "acks=some", stdin=b"x\n"),
        "consume": cli("consume", "--topic", "t", "--partition", "5"),
        "perf": cli("perf", "consume", "--topic", "ghost", "--messages", "1"),
        "dump-log": cli("dump-log", "--files", str(tmp_path / (FIRST + ".log"))),
        "zookeeper-server-start": cli("zookeeper-server-start", str(tmp_path / "missing.properties")),
    }
    messages = {tool: _one_error(result.err) for tool, result in failures.items()}
    assert {tool: result.status for tool, result in failures.items()} == dict.fromkeys(failures, 1)
    assert messages["topics"] == "Topic 'ghost' does not exist"
    assert messages["groups"] == "Consumer group 'ghost' does not exist."
    assert messages["produce"].startswith("acks must be")
    assert messages["consume"] == "Topic t has no partition 5 (it has 1)"
    assert messages["perf"] == "Topic 'ghost' does not exist"
    assert messages["dump-log"] == "cannot read %s: No such file or directory" % (tmp_path / (FIRST + ".log"))
    assert messages["zookeeper-server-start"] == "cannot read %s: No such file or directory" % (
        tmp_path / "missing.properties")


def test_an_unreachable_broker_is_the_same_error_in_every_client_tool(capsys: Any) -> None:
    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        address = "127.0.0.1:%d" % s.getsockname()[1]
        for argv in (["topics", "--list"], ["groups", "--list"], ["consume", "--topic", "t"],
                     ["perf", "consume", "--topic", "t", "--messages", "1"]):
            assert run(argv + ["--bootstrap-server", address]) == 1
            message = _one_error(capsys.readouterr().err)
            assert message.startswith("NETWORK_EXCEPTION: no broker reachable (bootstrap_servers %s)" % address)


def test_the_broker_that_cannot_start_says_error_colon(tmp_path: Path) -> None:
    done = _run(_command("pylogq-broker", "pylogq.cli.broker")
                + ["--data-dir", str(tmp_path / "data"), "--override", "no.such.setting=1"], cwd=str(tmp_path))
    assert done.returncode == 2, done.stderr  # did not start (1 is a forced shutdown)
    assert "no.such.setting" in _one_error(done.stderr)


# -- configuration errors in Kafka's dotted names -------------------------------------------------------------


def test_configuration_errors_name_the_dotted_keys(cli: Cli) -> None:
    assert cli("topics", "--create", "--topic", "t").status == 0
    unknown = cli("produce", "--topic", "t", "--producer-property", "linger.mss=5", stdin=b"x\n")
    assert (unknown.status, _one_error(unknown.err)) == (1, "unknown producer configuration: linger.mss")
    wrong = cli("produce", "--topic", "t", "--producer-property", "linger.ms=soon", stdin=b"x\n")
    assert wrong.status == 1 and _one_error(wrong.err).startswith("linger.ms must be an integer")
    consumer = cli("consume", "--topic", "t", "--consumer-property", "fetch.max.wait.mss=5")
    assert consumer.status == 1 and _one_error(consumer.err).endswith("configuration: fetch.max.wait.mss")
    perf = cli("perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
               "--producer-props", "batch.sise=1")
    assert perf.status == 1 and _one_error(perf.err) == "unknown producer configuration: batch.sise"


# -- topics: internal topics, and a name refused before any warning ----------------------------------------


def _with_offsets_topic(cli: Cli, broker: Any) -> None:
    for name in ("zeta", "alpha"):
        assert cli("topics", "--create", "--topic", name).status == 0
    with pylogq.Consumer(broker=broker, group_id="g", enable_auto_commit=False) as consumer:
        consumer.assign([("alpha", 0)])
        consumer.commit({("alpha", 0): 0})  # the group coordinator creates __consumer_offsets


def test_list_shows_internal_topics_unless_excluded(cli: Cli, broker: Any) -> None:
    assert cli("topics", "--list") == (0, "", "")  # no group yet: no __consumer_offsets either
    _with_offsets_topic(cli, broker)
    assert cli("topics", "--list") == (0, "__consumer_offsets\nalpha\nzeta\n", "")
    assert cli("topics", "--list", "--exclude-internal") == (0, "alpha\nzeta\n", "")
    assert cli("topics", "--list", "--topic", "__.*") == (0, "__consumer_offsets\n", "")
    assert cli("topics", "--list", "--topic", "__.*", "--exclude-internal") == (0, "", "")


def test_describe_shows_internal_topics_unless_excluded(cli: Cli, broker: Any) -> None:
    _with_offsets_topic(cli, broker)
    summaries = [line.split("\t")[0] for line in cli("topics", "--describe").out.splitlines()
                 if not line.startswith("\t")]
    assert summaries == ["Topic:__consumer_offsets", "Topic:alpha", "Topic:zeta"]
    excluded = cli("topics", "--describe", "--exclude-internal").out
    assert "__consumer_offsets" not in excluded and excluded.startswith("Topic:alpha\t")
    missing = cli("topics", "--describe", "--topic", "__consumer_offsets", "--exclude-internal")
    assert (missing.status, _one_error(missing.err)) == (1, "Topic '__consumer_offsets' does not exist")
    wrong = cli("topics", "--create", "--topic", "t", "--exclude-internal")
    assert wrong.status == 1 and "--exclude-internal can't be used with --create" in wrong.err


@pytest.mark.parametrize("name", [".", ".."])
def test_an_illegal_name_is_refused_before_the_collision_warning(cli: Cli, name: str) -> None:
    refused = cli("topics", "--create", "--topic", name)
    assert refused.status == 1 and refused.out == ""  # no WARNING about '.' and '_' first
    assert "cannot be '.' or '..'" in _one_error(refused.err)
    legal = cli("topics", "--create", "--topic", "a.b")
    assert legal.status == 0 and legal.out.startswith("WARNING: Due to limitations in metric names")


# -- controlled shutdown: a plain log line ---------------------------------------------------------------------


def test_controlled_shutdown_log_line_reads_plainly(tmp_path: Path, caplog: Any) -> None:
    with Cluster(3, str(tmp_path), **{"zookeeper.session.timeout.ms": 2000}) as cluster:
        cluster.create_topic("t", partitions=4, replication_factor=2)
        cluster.stop_broker(2)  # the partitions broker 1 shares with 2 have nowhere to go
        node = cluster.broker(1).cluster
        assert node is not None
        logger = logging.getLogger("pylogq.cluster")
        logger.addHandler(caplog.handler)  # also when "pylogq" does not propagate (pylogq-broker's logging)
        try:
            with caplog.at_level(logging.INFO, logger="pylogq.cluster"):
                assert node.controlled_shutdown_request(0, 0.0) is False
        finally:
            logger.removeHandler(caplog.handler)
    lines = [r.getMessage() for r in caplog.records if "still led" in r.getMessage()]
    assert lines and all(line.startswith("controlled shutdown of broker 1: ") for line in lines), lines
    detail = lines[0][len("controlled shutdown of broker 1: "):]
    assert detail[0].isdigit() and detail.endswith("partitions still led (attempt 1)"), lines  # no "0, " code


# -- a closed pipe ends a command quietly -----------------------------------------------------------------------


def _closed_pipe_run(argv: List[str]) -> "subprocess.CompletedProcess[str]":
    """``pylogq ARGV`` with stdout a pipe whose reader is gone before it starts (``| head`` done early)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(_command("pylogq", "pylogq") + argv, stdout=write_end, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True, timeout=TIMEOUT_S, env=_env())
    finally:
        os.close(write_end)


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: Any) -> str:
    """A segment whose dump is far larger than a pipe's buffer."""
    manager = LogManager(log_dirs=[str(tmp_path_factory.mktemp("pipe"))], background=False)
    try:
        log = manager.get_or_create_log("big", 0, LogConfig())
        for i in range(20):
            builder = records.RecordBatchBuilder(codecs.NONE)
            for j in range(500):
                builder.append(j, 1700000000000 + j, b"k", b"value %d" % j)
            log.append(builder.build())
        return os.path.join(log.directory, FIRST + ".log")
    finally:
        manager.close()


def test_dump_log_into_a_closed_pipe_exits_quietly(big_log: str) -> None:
    done = _closed_pipe_run(["dump-log", "--deep-iteration", "--files", big_log])
    assert (done.returncode, done.stderr) == (0, "")  # nothing blames the log file


def test_dump_log_into_head_exits_quietly(big_log: str) -> None:
    proc = subprocess.Popen(_command("pylogq", "pylogq") + ["dump-log", "--deep-iteration", "--files", big_log],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=_env())
    assert proc.stdout is not None and proc.stderr is not None
    try:
        assert proc.stdout.readline().decode() == "Dumping %s\n" % big_log  # head -1
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(TIMEOUT_S) == 0
    finally:
        proc.kill()
        proc.wait()
    assert err == ""


@pytest.mark.parametrize("argv", [
    ["topics", "--list"],  # a few bytes: the pipe breaks when main flushes stdout at the end
    ["topics", "--describe"],  # more than stdout's buffer: it breaks in the tool, which goes no further
    ["configs", "--describe", "--topic", "t"],
    ["configs", "--describe", "--broker", "0", "--all"],  # in the tool too (it printed [Errno 32] Broken pipe)
])
def test_broker_tools_into_a_closed_pipe_exit_quietly(pylogq_broker: Any, pylogq_bootstrap: str,
                                                      argv: List[str]) -> None:
    pylogq_broker.create_topic("t", 200)
    done = _closed_pipe_run(argv + ["--bootstrap-server", pylogq_bootstrap])
    assert (done.returncode, done.stderr) == (0, "")


# -- dump-log --index-sanity-check on a running log's active segment ------------------------------------------


@pytest.fixture
def live_log(tmp_path: Path) -> Iterator[Any]:
    manager = LogManager(log_dirs=[str(tmp_path / "data")], background=False)
    try:
        log = manager.get_or_create_log("live", 0, LogConfig(index_interval_bytes=0))
        for i in range(5):
            builder = records.RecordBatchBuilder(codecs.NONE)
            for j in range(2):
                builder.append(j, 1700000000000 + 10 * i + j, b"k", b"v")
            log.append(builder.build())
        yield log
    finally:
        manager.close()


def test_sanity_check_of_an_active_segment_ignores_the_preallocated_tail(live_log: Any) -> None:
    paths = [os.path.join(live_log.directory, FIRST + suffix) for suffix in (".index", ".timeindex")]
    assert os.path.getsize(paths[0]) > 8 * live_log.active_segment.offset_index.entries  # preallocated, zeros
    done = _local("dump-log", "--index-sanity-check", "--files", ",".join(paths))
    assert done == (0, "Dumping %s\n%s passed sanity check.\nDumping %s\n%s passed sanity check.\n" % (
        paths[0], paths[0], paths[1], paths[1]), "")


def test_sanity_check_of_an_active_segment_still_finds_disorder_before_the_tail(live_log: Any,
                                                                               tmp_path: Path) -> None:
    index = live_log.active_segment.offset_index
    assert index.entries >= 3
    copy = tmp_path / (FIRST + ".index")
    shutil.copyfile(os.path.join(live_log.directory, FIRST + ".index"), copy)  # preallocated as it is
    (offset1, position1), (offset2, _) = index.entry(1), index.entry(2)
    with open(copy, "r+b") as f:
        f.seek(2 * 8)
        f.write((offset1 - index.base_offset).to_bytes(4, "big"))  # entry 2 repeats entry 1's offset
    done = _local("dump-log", "--index-sanity-check", "--files", str(copy))
    assert done.status == 1
    assert done.out.splitlines()[1].startswith(
        "%s failed sanity check: offsets not strictly increasing: entry 2 is offset: %d position: " % (copy, offset1))
    assert "after offset: %d position: %d" % (offset1, position1) in done.out


# -- a port that does not speak Kafka ---------------------------------------------------------------------------


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A listener that accepts connections (the kernel completes them) and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


class _QuietHttp(http.server.SimpleHTTPRequestHandler):
    """Python's HTTP server, without its log lines on stderr (the test reads stderr)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Http400(_QuietHttp):
    """What many web servers answer to bytes that are not HTTP: 400, at once."""

    def handle_one_request(self) -> None:
        self.rfile.read1(4096)
        self.wfile.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        self.close_connection = True


@pytest.fixture(params=["http.server", "400 at once"])
def http_port(request: Any) -> Iterator[int]:
    """An HTTP server: Python's own (it waits for a line the Kafka request never ends), or one that answers 400."""
    handler = _QuietHttp if request.param == "http.server" else _Http400
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    worker = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)  # quick to shut down
    worker.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _not_kafka(port: int, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run ``pylogq topics --list`` against ``port``, the ApiVersions bound set to
    :data:`NOT_KAFKA_BOUND_S`; -> its error message, which says why it gave up."""
    assert connection.HANDSHAKE_TIMEOUT_S == 5.0  # the bound docs/operations.md names
    monkeypatch.setattr(connection, "HANDSHAKE_TIMEOUT_S", NOT_KAFKA_BOUND_S)
    statuses: List[int] = []
    runner = threading.Thread(target=lambda: statuses.append(
        run(["topics", "--list", "--bootstrap-server", "127.0.0.1:%d" % port])), daemon=True)
    runner.start()
    runner.join(NOT_KAFKA_WAIT_S)
    assert not runner.is_alive(), "pylogq topics was still waiting for 127.0.0.1:%d" % port
    message = _one_error(capsys.readouterr().err)
    assert statuses == [1], (statuses, message)
    assert "127.0.0.1:%d" % port in message and "is it a Kafka listener?" in message, message
    assert ("got no response within 500 ms" in message or "the first answer is not Kafka's" in message), message
    return message


def test_a_listener_that_never_answers_is_reported_within_the_bound(silent_port: int, capsys: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    message = _not_kafka(silent_port, capsys, monkeypatch)
    assert "ApiVersions request to 127.0.0.1:%d got no response within 500 ms" % silent_port in message


def test_an_http_server_is_reported_within_the_bound(http_port: int, capsys: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _not_kafka(http_port, capsys, monkeypatch)
