"""The ``pylogq-broker`` command: its ready line, settings sources, errors and log formats.

Each test runs ``python -m pylogq.cli.broker`` as a process (the console script's
module) and looks at what an operator sees: stdout, stderr and the exit status.
"""

from __future__ import annotations

import json
import os
import platform
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from .test_server import METADATA, PRODUCE, Wire, produce_body

READY = re.compile(r"^pylogq-broker 0 ready on 127\.0\.0\.1:(\d+)$")
TIMEOUT_S = 30.0
DESCRIBE_CONFIGS = 32

# The keys of the server.properties Kafka ships, with values a single-node broker uses.
KAFKA_PROPERTIES = """\
# A single broker, as in Kafka's config/server.properties
broker.id=0
listeners=PLAINTEXT://127.0.0.1:0
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

log.dirs={log_dirs}
num.partitions=2
num.recovery.threads.per.data.dir=1

offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000

zookeeper.connect={zookeeper}
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""


class Running:
    """A started ``pylogq-broker``: its process, its address and, once stopped, its output."""

    def __init__(self, args: List[str], cwd: Path, env: Optional[Dict[str, str]] = None) -> None:
        """``env``: variables added to this process's environment for the broker."""
        self.proc = subprocess.Popen([sys.executable, "-m", "pylogq.cli.broker", *args], cwd=str(cwd),
                                     env=None if env is None else {**os.environ, **env},
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.lines: List[str] = []
        self.port = self._wait_ready()
        self.address = ("127.0.0.1", self.port)

    def _wait_ready(self) -> int:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + TIMEOUT_S
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not selector.select(deadline - time.monotonic()):
                    continue
                line = self.proc.stdout.readline().decode()
                if not line:
                    break
                self.lines.append(line)
                match = READY.match(line.rstrip("\n"))
                if match:
                    return int(match.group(1))
        self.proc.kill()
        _, err = self.proc.communicate()
        raise AssertionError("no ready line; stdout %r, stderr:\n%s" % (self.lines, err.decode()))

    def stop(self) -> Tuple[int, List[str], str]:
        """SIGTERM; -> (exit status, every stdout line, stderr)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError("no exit after SIGTERM; stderr:\n%s" % err.decode()) from None
        return self.proc.returncode, self.lines + out.decode().splitlines(keepends=True), err.decode()


def run_failing(args: List[str], cwd: Path) -> Tuple[int, str, str]:
    """Run a broker that must not start; -> (exit status, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "pylogq.cli.broker", *args], cwd=str(cwd), capture_output=True,
                          timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def auto_created_partitions(address: Tuple[str, int], topic: str) -> int:
    with Wire(address) as wire:
        response = wire.request(METADATA, 4, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
    entry = response["topics"][0]
    assert entry["error_code"] == 0, entry
    return len(entry["partitions"])


def broker_configs(address: Tuple[str, int]) -> Dict[str, Optional[str]]:
    with Wire(address) as wire:
        response = wire.request(DESCRIBE_CONFIGS, 1, {"resources": [
            {"resource_type": 4, "resource_name": "0", "configuration_keys": None}], "include_synonyms": False})
    result = response["results"][0]
    assert result["error_code"] == 0, result
    return {c["name"]: c["value"] for c in result["configs"]}


@pytest.fixture
def base_args(tmp_path: Path) -> List[str]:
    return ["--data-dir", str(tmp_path / "data"), "--listeners", "PLAINTEXT://127.0.0.1:0",
            "--override", "offsets.topic.num.partitions=2"]


def test_prints_exactly_one_ready_line(tmp_path: Path, base_args: List[str]) -> None:
    broker = Running(base_args, tmp_path)
    with Wire(broker.address) as wire:
        assert wire.request(18, 2)["error_code"] == 0
    status, lines, err = broker.stop()
    assert status == 0, err
    assert len(lines) == 1 and READY.match(lines[0].rstrip("\n")), lines
    assert "stopped cleanly" in err


def test_default_data_dir_is_pylogq_data_in_the_working_directory(tmp_path: Path) -> None:
    broker = Running(["--listeners", "PLAINTEXT://127.0.0.1:0", "--override", "offsets.topic.num.partitions=2"],
                     tmp_path)
    status, _, err = broker.stop()
    assert status == 0, err
    assert (tmp_path / "pylogq-data" / "meta.properties").is_file()
    # __consumer_offsets comes with the first group lookup, as on Kafka: none was made.
    assert not (tmp_path / "pylogq-data" / "__consumer_offsets-0").exists()


def test_override_applies(tmp_path: Path, base_args: List[str]) -> None:
    broker = Running(base_args + ["--override", "num.partitions=3", "--override", "log.segment.bytes=1048576"],
                     tmp_path)
    try:
        assert auto_created_partitions(broker.address, "auto-three") == 3
        assert broker_configs(broker.address)["log.segment.bytes"] == "1048576"
    finally:
        status, _, err = broker.stop()
    assert status == 0, err


def test_kafka_server_properties_loads(tmp_path: Path, zookeeper_connect: str) -> None:
    """Kafka's own server.properties keys load unchanged (its zookeeper.connect makes the broker
    a cluster of one, on a real ZooKeeper); --override wins over the file."""
    log_dirs = tmp_path / "kafka-logs"
    properties = tmp_path / "server.properties"
    properties.write_text(KAFKA_PROPERTIES.format(log_dirs=log_dirs, zookeeper=zookeeper_connect))
    broker = Running([str(properties), "--override", "offsets.topic.num.partitions=2"], tmp_path)
    try:
        assert auto_created_partitions(broker.address, "from-file") == 2
        configs = broker_configs(broker.address)
        assert configs["log.segment.bytes"] == "1073741824"
        assert configs["num.io.threads"] == "8"
    finally:
        status, _, err = broker.stop()
    assert status == 0, err
    assert (log_dirs / "from-file-0").is_dir()

    broker = Running(["--config", str(properties), "--override", "num.partitions=4",
                      "--override", "offsets.topic.num.partitions=2"], tmp_path)
    try:
        assert auto_created_partitions(broker.address, "overridden") == 4
    finally:
        status, _, err = broker.stop()
    assert status == 0, err


@pytest.mark.parametrize("override,named", [
    ("no.such.setting=1", "no.such.setting"),
    ("num.partitions=zero", "num.partitions"),
    ("num.partitions=0", "num.partitions"),
    ("log.segment.bytes=big", "log.segment.bytes"),
    ("auto.create.topics.enable=maybe", "auto.create.topics.enable"),
    ("listeners=HTTP://127.0.0.1:0", "listeners"),
    ("listeners=PLAINTEXT://127.0.0.1", "listeners"),
    ("advertised.listeners=PLAINTEXT:/host:1", "advertised.listeners"),
    ("missing-equals-sign", "missing-equals-sign"),
])
def test_bad_setting_exits_2_naming_it(tmp_path: Path, override: str, named: str) -> None:
    """Refused before anything is written: not even the data directory is created."""
    status, out, err = run_failing(["--data-dir", str(tmp_path / "data"), "--override",
                                    "offsets.topic.num.partitions=2", "--override", override], tmp_path)
    assert status == 2, (out, err)
    assert "ready" not in out
    message = err.strip().splitlines()[-1]
    assert message.startswith("Error: ") and named in message, err
    assert "Traceback" not in err
    assert not (tmp_path / "data").exists()


def test_bad_properties_file_exits_2(tmp_path: Path) -> None:
    status, _, err = run_failing([str(tmp_path / "missing.properties")], tmp_path)
    assert status == 2 and "missing.properties" in err and "Traceback" not in err
    properties = tmp_path / "bad.properties"
    properties.write_text("log.dirs=%s\nlog.retention.hours=a week\n" % (tmp_path / "data"))
    status, _, err = run_failing([str(properties)], tmp_path)
    assert status == 2 and "log.retention.hours" in err and "Traceback" not in err


def test_port_in_use_exits_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, out, err = run_failing(["--data-dir", str(tmp_path / "data"),
                                        "--listeners", "PLAINTEXT://127.0.0.1:%d" % port,
                                        "--override", "offsets.topic.num.partitions=2"], tmp_path)
    assert status == 2, (out, err)
    message = err.strip().splitlines()[-1]
    assert message.startswith("Error: cannot listen on PLAINTEXT://127.0.0.1:%d" % port), err
    assert "in use" in message
    assert "Traceback" not in err


def test_json_log_format(tmp_path: Path, base_args: List[str]) -> None:
    broker = Running(base_args + ["--log-format", "json"], tmp_path)
    with Wire(broker.address) as wire:
        wire.request(18, 2)
    status, _, err = broker.stop()
    assert status == 0, err
    entries = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert entries
    for entry in entries:
        assert {"time", "level", "logger", "message"} <= set(entry), entry
    messages = [e["message"] for e in entries if e["logger"] == "pylogq.server"]
    assert any(m.startswith("ready broker_id=0") for m in messages), messages
    assert any(m.startswith("connection opened") for m in messages), messages
    assert any(m.startswith("connection closed") for m in messages), messages
    assert messages[-1] == "stopped cleanly"


# -- memory: request buffers reused, not faulted in afresh --------------------------------

def minor_faults(pid: int) -> int:
    """The process's minor page faults so far (proc(5): the 10th field of /proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        after_name = f.read().rsplit(")", 1)[1].split()
    return int(after_name[7])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not os.path.exists("/proc/self/stat"),
                    reason="pylogq-broker tunes glibc's malloc; page faults are read from Linux's /proc")
def test_produce_requests_of_a_megabyte_reuse_the_brokers_memory(tmp_path: Path, base_args: List[str]) -> None:
    """With glibc's adaptive thresholds each ~1 MB request body and its copies would come from
    fresh pages (a few hundred faults per request, measured); pylogq-broker's malloc settings
    (pylogq/cli/allocator.py) keep them for reuse. Counted after a warm-up, so the first
    requests' growth of the heap is not counted; what remains is the index files' pages."""
    values = [b"%06d" % i + b"v" * 1018 for i in range(1000)]  # one ~1 MB batch
    body = produce_body("big", values)
    megabytes = len(body["topic_data"][0]["partition_data"][0]["records"]) / 1e6
    assert 0.9 < megabytes < 1.1
    warm_up, measured = 10, 40
    broker = Running(base_args, tmp_path)
    try:
        auto_created_partitions(broker.address, "big")
        with Wire(broker.address) as wire:
            for i in range(warm_up + measured):
                if i == warm_up:
                    start = minor_faults(broker.proc.pid)
                response = wire.request(PRODUCE, 7, body)
                assert response["responses"][0]["partition_responses"][0]["error_code"] == 0, response
            faults = minor_faults(broker.proc.pid) - start
    finally:
        status, _, err = broker.stop()
    assert status == 0, err
    assert faults < 32 * measured * megabytes, "%d page faults for %d requests of %.2f MB" % (
        faults, measured, megabytes)


# -- stopping: SIGTERM and Ctrl-C, even with the event loop blocked ------------------------

# The broker as the console script runs it, with ApiVersions replaced by a handler that
# blocks the event loop for good (as a lock-order deadlock once did); SIGINT back at its
# default, as in a terminal (a suite started as a background job ignores SIGINT, and a
# child inherits that). The handler is replaced once main has started, as the console
# script imports the server: importing it starts native threads (numpy's).
BLOCKING_BROKER = """\
import logging, signal, sys, threading
from pylogq.cli import broker

never = threading.Event()

def blocked(self, conn, req, version, slot):
    logging.getLogger("pylogq.test").warning("api_versions blocks the event loop")
    never.wait()

def run_blocking(*args):
    from pylogq.server.handlers import Handlers
    Handlers.api_versions = blocked
    return run(*args)

if sys.argv[1] == "block":
    run, broker._run = broker._run, run_blocking
elif sys.argv[1] == "native-threads":
    import pylogq.records  # numpy's threads start now, the signals unblocked in them
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.exit(broker.main(sys.argv[2:]))
"""
BLOCKED = "api_versions blocks the event loop"


class Child:
    """``pylogq-broker`` run through :data:`BLOCKING_BROKER`, its log in a file to watch."""

    def __init__(self, mode: str, args: List[str], cwd: Path) -> None:
        self.log_path = cwd / ("%s.log" % mode)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-c", BLOCKING_BROKER, mode, *args], cwd=str(cwd),
                                         stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + TIMEOUT_S
            while not selector.select(max(deadline - time.monotonic(), 0)) and time.monotonic() < deadline:
                pass
            match = READY.match(self.proc.stdout.readline().decode().rstrip("\n"))
        if match is None:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("no ready line; log:\n%s" % self.log())
        self.address = ("127.0.0.1", int(match.group(1)))

    def log(self) -> str:
        return self.log_path.read_text("utf-8", "replace")

    def wait_logged(self, text: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while text not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("%r not logged; log:\n%s" % (text, self.log()))
            time.sleep(0.01)  # polling a file another process writes: nothing can wake us

    def exit_status(self) -> int:
        """The exit status; fails if the process is still running after TIMEOUT_S."""
        try:
            return self.proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("still running %.0f s after the signal; log:\n%s" % (TIMEOUT_S, self.log())) from None
        finally:
            assert self.proc.stdout is not None
            self.proc.stdout.close()


def test_sigterm_exits_with_status_1_when_the_event_loop_is_blocked(tmp_path: Path, base_args: List[str]) -> None:
    child = Child("block", base_args + ["--shutdown-timeout", "1"], tmp_path)
    with Wire(child.address) as wire:
        wire.send(18, 2)
        child.wait_logged(BLOCKED)
        child.proc.send_signal(signal.SIGTERM)
        status = child.exit_status()
    log = child.log()
    assert status == 1, log
    assert "shutting down signal=SIGTERM" in log
    assert ("ERROR pylogq.server shutdown did not finish within 1 s of SIGTERM, stuck waiting for the event loop "
            "to take the stop request; exiting with status 1") in log, log
    assert "stopped cleanly" not in log


def test_a_second_ctrl_c_exits_at_once(tmp_path: Path, base_args: List[str]) -> None:
    child = Child("block", base_args, tmp_path)  # the default timeout: only the second signal can end it
    with Wire(child.address) as wire:
        wire.send(18, 2)
        child.wait_logged(BLOCKED)
        child.proc.send_signal(signal.SIGINT)
        child.wait_logged("shutting down signal=SIGINT")  # taken: a second one now is not merged with it
        child.proc.send_signal(signal.SIGINT)
        status = child.exit_status()
    log = child.log()
    assert status == 1, log
    assert "shutdown interrupted by a second signal (SIGINT)" in log, log


def test_ctrl_c_stops_cleanly(tmp_path: Path, base_args: List[str]) -> None:
    child = Child("serve", base_args, tmp_path)
    with Wire(child.address) as wire:
        assert wire.request(18, 2)["error_code"] == 0
        assert wire.request(3, 4, {"topics": [{"name": "kept"}], "allow_auto_topic_creation": True})["topics"]
        child.proc.send_signal(signal.SIGINT)
        assert wire.closed_by_server()
    status = child.exit_status()
    log = child.log()
    assert status == 0, log
    assert "shutting down signal=SIGINT" in log and "stopped cleanly" in log, log
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log


def test_sigterm_stops_cleanly_when_threads_started_before_main(tmp_path: Path, base_args: List[str]) -> None:
    """A program that loaded a native library (threads of its own) before calling main:
    the kernel may hand SIGTERM to one of those threads; it still stops the broker cleanly."""
    child = Child("native-threads", base_args, tmp_path)
    with Wire(child.address) as wire:
        assert wire.request(18, 2)["error_code"] == 0
        child.proc.send_signal(signal.SIGTERM)
        assert wire.closed_by_server()
    status = child.exit_status()
    log = child.log()
    assert status == 0, log
    assert "shutting down signal=SIGTERM" in log and "stopped cleanly" in log, log
