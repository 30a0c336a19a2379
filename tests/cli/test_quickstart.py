"""docs/quickstart.md, run as written: the commands are read out of the page, so page and test cannot drift.

Every line ``> command`` of the page's ``sh`` blocks is a step, run by bash in a fresh
directory (a fresh clone's root, as the page says). The lines after a command are what
it prints, or what is typed into it when it is ``pylogq produce`` (up to ``^D``, the end
of input); a ``^C`` after the output means the command runs until it has printed that,
then gets Ctrl-C (SIGINT). ``pylogq-broker`` and ``pylogq zookeeper-server-start`` are
servers: started, as with ``&``, and waited for (the broker's ready line, ZooKeeper's
answer to ``srvr``). Output is compared line by line with runs of blanks as one (the
columns' widths may differ), blank lines aside; a line the page shows may come on stderr
(the terminal shows both). Where a step's outcome takes time (a new leader after the
kill, a broker back in the ISR), ``topics --describe`` is run again until it shows it, as
the page tells the reader to, within a deadline.

What the test changes, and nothing else:

- the ports (9092, 9093, 9094, ZooKeeper's 2181) become free ports, and the data
  directories (``/tmp/kafka-logs*``, ``/tmp/zookeeper``) directories of the test, in the
  commands, in their output and in the files ``pylogq config-files`` writes: fixed ports
  and shared directories would collide with whatever else runs on the machine, and a
  second run would find the first one's topics;
- ``pip install .`` is not run: the pylogq under test is the one this interpreter
  imports, and ``pylogq``, ``pylogq-broker`` and ``python`` on the PATH run it;
- the leader is the one ``--describe`` names: where the page's example says broker 1
  (``config/server-1.properties``), the test writes the leader's number, as the page asks
  the reader to, and ``kill -9`` gets the pid that ``pgrep`` printed for it (checked to be
  the broker this test started, so no other process is touched);
- the partition lines of ``--describe`` are compared by what they say (the replicas, the
  size of the ISR, a live leader in it, the killed broker out of it), not by broker ids.

ZooKeeper's JVM gets a smaller heap through ``KAFKA_HEAP_OPTS`` (the machine's memory is
shared). Step 9 needs Debian's zookeeper package: without it that test skips, saying so.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

import pytest

import pylogq

from .._ports import free_port
from .._zookeeper import dies_with_test, four_letter_word, interruptible, zookeeper_install_or_skip
from ..server.conftest import READY

#: Broker processes and ZooKeeper, whatever the kernels: the compiled pass only (tests/conftest.py).
pytestmark = [pytest.mark.compiled_pass, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "quickstart.md"
#: The directory holding the package under test (a checkout's root for an editable install).
PACKAGE_PARENT = Path(pylogq.__file__).resolve().parents[1]

DOC_PORTS = (9092, 9093, 9094, 2181)
DOC_DIRS = ("/tmp/kafka-logs", "/tmp/zookeeper")
#: The leader in the page's example, and the pid it shows for it.
DOC_LEADER = 1
DOC_PID = "12345"
COMMAND_TIMEOUT_S = 120.0
READY_TIMEOUT_S = 60.0
#: Past zookeeper.session.timeout.ms (6 s in server-N.properties) and ZooKeeper's tick.
STATE_TIMEOUT_S = 60.0
SKIPPED = {"pip install .": "the pylogq under test is installed already"}
PARTITION = re.compile(r"^Topic: (\S+) Partition: (\d+) Leader: (-?\d+) Replicas: ([\d,]*) Isr: ([\d,]*)$")
HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")


class Step(NamedTuple):
    """One ``> command`` of the page and the lines after it."""

    section: str
    command: str
    lines: Tuple[str, ...]  # what it prints, or (produce) what is typed into it
    interrupt: bool  # ^C: stopped with SIGINT once it has printed ``lines``


def read_steps(text: str) -> List[Step]:
    """The commands of the page's ``sh`` blocks, in order."""
    steps: List[Step] = []
    section = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        if line.strip() != "```sh":
            continue
        block: List[str] = []
        while lines[i].strip() != "```":
            block.append(lines[i])
            i += 1
        i += 1
        j = 0
        while j < len(block):
            assert block[j].startswith("> "), "%s: %r is neither a command nor after one" % (section, block[j])
            command = block[j][2:]
            j += 1
            while command.endswith("\\"):
                command = command[:-1] + block[j].strip()
                j += 1
            heredoc = HEREDOC.search(command)
            if heredoc:  # the command's input, up to the terminator line
                end = block.index(heredoc.group(1), j)
                command = "\n".join([command] + block[j:end + 1])
                j = end + 1
            after: List[str] = []
            while j < len(block) and not block[j].startswith("> "):
                after.append(block[j])
                j += 1
            interrupt = bool(after) and after[-1] == "^C"
            if interrupt or (after and after[-1] == "^D"):
                after.pop()
            steps.append(Step(section, command, tuple(after), interrupt))
    return steps


def _normal(lines: List[str]) -> List[str]:
    return [" ".join(line.split()) for line in lines if line.strip()]


class Server:
    """A long-running command of the page (a broker, ZooKeeper), as with ``&``."""

    def __init__(self, command: str, proc: "subprocess.Popen[bytes]", log: Path) -> None:
        self.command = command
        self.proc = proc
        self.log = log


class QuickStart:
    """Runs the page's steps in a fresh directory; see the module docstring for what it changes."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.cwd = tmp_path / "clone"
        self.cwd.mkdir()
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        for name, target in (("pylogq", "-m pylogq"), ("pylogq-broker", "-m pylogq.cli.broker"), ("python", "")):
            path = bin_dir / name
            path.write_text('#!/bin/sh\nexec "%s" %s "$@"\n' % (sys.executable, target))
            path.chmod(0o755)
        self.env = dict(os.environ)
        self.env["PATH"] = "%s%s%s" % (bin_dir, os.pathsep, os.environ.get("PATH", os.defpath))
        self.env["PYTHONPATH"] = os.pathsep.join(
            [str(PACKAGE_PARENT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        self.env.pop("PYLOGQ_NO_EXTENSIONS", None)
        self.env["KAFKA_HEAP_OPTS"] = "-Xmx128m -Xms32m"
        self.env["KAFKA_OPTS"] = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
        self.ports: Dict[int, int] = {}
        for port in DOC_PORTS:
            while port not in self.ports:
                chosen = free_port()
                if chosen not in self.ports.values():
                    self.ports[port] = chosen
        self.servers: List[Server] = []
        self.leader: Optional[int] = None
        self.killed: Set[int] = set()
        self.restarted: Set[int] = set()
        self.ran: List[str] = []
        self.pgrep_output: List[str] = []

    # -- what the test changes

    def substitute(self, text: str) -> str:
        """The page's ports and data directories replaced by this run's."""
        text = re.sub(r"(?<=127\.0\.0\.1:)(\d+)\b",
                      lambda m: str(self.ports.get(int(m.group(1)), m.group(1))), text)
        text = re.sub(r"(?<=clientPort=)2181\b", str(self.ports[2181]), text)
        for directory in DOC_DIRS:
            text = text.replace(directory, str(self.tmp / Path(directory).name))
        return text

    def with_leader(self, command: str) -> str:
        """``command`` with the page's example leader replaced by the real one (once known)."""
        if self.leader is not None and self.leader != DOC_LEADER:
            command = command.replace("server-%d.properties" % DOC_LEADER, "server-%d.properties" % self.leader)
        return command

    # -- running

    def run(self, steps: List[Step]) -> None:
        for step in steps:
            if step.command in SKIPPED:
                continue
            if step.section.startswith("Step 9"):
                self.stop_single_broker()
            command = self.substitute(self.with_leader(step.command))
            self.ran.append(command)
            if _program(command) in ("pylogq-broker", "pylogq zookeeper-server-start"):
                self.start_server(step, command)
            elif command.startswith("kill -9 "):
                self.kill(step, command)
            elif step.interrupt:
                self.run_until_printed(step, command)
            else:
                self.run_once(step, command)
            if step.command == "pylogq config-files":
                self.substitute_files()

    def substitute_files(self) -> None:
        files = sorted((self.cwd / "config").glob("*.properties"))
        assert [f.name for f in files] == ["connect-mirror-maker.properties", "server-0.properties",
                                           "server-1.properties", "server-2.properties", "server.properties",
                                           "zookeeper.properties"], files
        for path in files:
            path.write_text(self.substitute(path.read_text()))

    def _popen(self, command: str, **kwargs: object) -> "subprocess.Popen[bytes]":
        return subprocess.Popen(dies_with_test(["bash", "-c", "exec " + command]), cwd=self.cwd, env=self.env,
                                preexec_fn=interruptible, **kwargs)  # type: ignore[call-overload]

    def start_server(self, step: Step, command: str) -> None:
        command = command.rstrip(" &")
        log = self.tmp / ("server-%d.log" % len(self.servers))
        with open(log, "ab") as err:
            if command.startswith("pylogq zookeeper-server-start"):
                zookeeper_install_or_skip()
                proc = self._popen(command, stdout=err, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            else:
                proc = self._popen(command, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        server = Server(command, proc, log)
        self.servers.append(server)
        back = re.search(r"server-(\d+)\.properties$", command)
        if back and int(back.group(1)) in self.killed:  # the killed broker started again
            self.killed.discard(int(back.group(1)))
            self.restarted.add(int(back.group(1)))
        if command.startswith("pylogq zookeeper-server-start"):
            self.until("ZooKeeper to serve (%s)" % command,
                       lambda: "Mode:" in four_letter_word(self.ports[2181], "srvr") or self._exited(server))
            assert proc.poll() is None, "%s exited with %s:\n%s" % (command, proc.returncode, log.read_text())
            return
        line = self._ready_line(server)
        expected = _normal([self.substitute(x) for x in step.lines])
        assert not expected or expected == [line], "%s printed %r, the page shows %r" % (command, line, expected)

    def _ready_line(self, server: Server) -> str:
        out = _read_until(server.proc, lambda text: "\n" in text, READY_TIMEOUT_S)
        line = out.split("\n")[0].strip()
        assert READY.match(line), "%s printed no ready line within %.0f s (%r, status %s); its log:\n%s" % (
            server.command, READY_TIMEOUT_S, out, server.proc.poll(), server.log.read_text())
        return line

    def _exited(self, server: Server) -> bool:
        return server.proc.poll() is not None

    def stop_single_broker(self) -> None:
        """Step 9 begins: "stop the broker of Step 2 with Ctrl-C"."""
        for server in [s for s in self.servers if s.command == "pylogq-broker config/server.properties"]:
            server.proc.send_signal(signal.SIGINT)
            status = server.proc.wait(READY_TIMEOUT_S)
            assert status == 0, "the broker of Step 2 exited with %s after Ctrl-C:\n%s" % (status, server.log.read_text())
            self.servers.remove(server)
            self.check_log(server)

    def kill(self, step: Step, command: str) -> None:
        """``kill -9 PID`` of the pid that ``pgrep`` printed: the leader this test started."""
        config = "config/server-%d.properties" % self.leader if self.leader is not None else None
        leader = [s for s in self.servers if config is not None and s.command.endswith(config)]
        assert len(leader) == 1, "no broker of this test started with %s: %s" % (config, self.ran)
        pid = str(leader[0].proc.pid)
        assert pid in self.pgrep_output, "pgrep printed %r, not the leader's pid %s" % (self.pgrep_output, pid)
        self.run_once(step, command.replace(DOC_PID, pid))
        leader[0].proc.wait(READY_TIMEOUT_S)
        assert self.leader is not None
        self.killed.add(self.leader)
        self.servers.remove(leader[0])

    def run_once(self, step: Step, command: str) -> None:
        retry = " topics --describe " in " %s " % command
        deadline = time.monotonic() + STATE_TIMEOUT_S
        while True:
            done = subprocess.run(["bash", "-c", command], cwd=self.cwd, env=self.env, capture_output=True,
                                  input=("\n".join(step.lines) + "\n").encode() if _takes_input(command) else b"",
                                  timeout=COMMAND_TIMEOUT_S)
            out, err = done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
            if command.startswith("pgrep "):
                self.pgrep_output = out.split()
                assert done.returncode == 0, self._failure(command, done.returncode, out, err)
                return
            problem = self._compare(step, command, done.returncode, out, err)
            if problem is None:
                return
            if not retry or time.monotonic() > deadline:
                raise AssertionError(problem)
            time.sleep(0.5)  # the cluster's state is polled: another describe in a moment

    def run_until_printed(self, step: Step, command: str) -> None:
        """Run until the page's output has been printed, then Ctrl-C."""
        expected = _normal([self.substitute(x) for x in step.lines])
        proc = self._popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        got = _read_until(proc, lambda text: len(_normal(text.splitlines())) >= len(expected), STATE_TIMEOUT_S)
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=COMMAND_TIMEOUT_S)
        out = got + rest.decode("utf-8", "replace")
        assert proc.returncode in (0, 130), self._failure(command, proc.returncode, out, err.decode())
        assert _normal(out.splitlines()) == expected, self._failure(command, proc.returncode, out, err.decode())

    def _compare(self, step: Step, command: str, status: int, out: str, err: str) -> Optional[str]:
        """None when the command did what the page shows, else what went wrong."""
        if status != 0:
            return self._failure(command, status, out, err)
        if _takes_input(command) or not step.lines:
            return None
        expected = _normal([self.substitute(x) for x in step.lines])
        on_stderr = set(_normal(err.splitlines()))
        expected = [line for line in expected if line not in on_stderr]
        got = _normal(out.splitlines())
        if len(got) == len(expected) and all(self._same_line(e, g) for e, g in zip(expected, got)):
            return None
        return "%s printed:\n%s\nthe page shows:\n%s\nstderr:\n%s" % (command, "\n".join(got), "\n".join(expected), err)

    def _same_line(self, expected: str, got: str) -> bool:
        want = PARTITION.match(expected)
        have = PARTITION.match(got)
        if want is None or have is None:
            return expected == got
        ids = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
        leader, isr = int(have.group(3)), ids(have.group(5))
        if want.group(1, 2) != have.group(1, 2) or sorted(ids(want.group(4))) != sorted(ids(have.group(4))):
            return False
        if len(isr) != len(ids(want.group(5))) or leader not in isr or self.killed & ({leader} | set(isr)):
            return False
        if self.leader is None and want.group(1) == "my-replicated-topic":
            self.leader = leader  # the page's "Leader: 1": from here on, this broker
        return True

    def _failure(self, command: str, status: int, out: str, err: str) -> str:
        logs = "\n".join("--- %s:\n%s" % (s.command, s.log.read_text()[-4000:]) for s in self.servers)
        return "%s exited with %d\nstdout:\n%s\nstderr:\n%s\nservers:\n%s" % (command, status, out, err, logs)

    def until(self, what: str, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + STATE_TIMEOUT_S
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError("%s did not happen within %.0f s" % (what, STATE_TIMEOUT_S))
            time.sleep(0.2)  # polled: ZooKeeper answers srvr once it serves

    # -- the end

    def stop(self) -> None:
        """SIGTERM to every server still running, newest first; each must stop cleanly."""
        failures = []
        for server in reversed(self.servers):
            if server.proc.poll() is None:
                server.proc.send_signal(signal.SIGTERM)
            try:
                status = server.proc.wait(READY_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                server.proc.kill()
                status = server.proc.wait()
            if server.proc.stdout is not None:
                server.proc.stdout.close()
            # ZooKeeper's JVM reports SIGTERM as 143, as a shell would.
            if status not in (0, 143):
                failures.append("%s exited with %s:\n%s" % (server.command, status, server.log.read_text()))
        self.servers.clear()
        assert not failures, "\n".join(failures)

    def check_log(self, server: Server) -> None:
        text = server.log.read_text()
        assert "Traceback" not in text, text


def _read_until(proc: "subprocess.Popen[bytes]", done: Callable[[str], bool], timeout: float) -> str:
    """What ``proc`` printed on stdout until ``done`` says it is enough, its stdout closes or
    ``timeout`` seconds pass (raw reads: a buffered readline would keep lines from the selector)."""
    assert proc.stdout is not None
    got = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while not done(got.decode("utf-8", "replace")):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if selector.select(left):
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                got += chunk
    return got.decode("utf-8", "replace")


def _program(command: str) -> str:
    words = command.split()
    return " ".join(words[:2]) if words[:1] == ["pylogq"] else words[0]


def _takes_input(command: str) -> bool:
    return command.startswith("pylogq produce ")


STEPS = read_steps(DOC.read_text())


@pytest.fixture
def quickstart(tmp_path: Path) -> Iterator[QuickStart]:
    run = QuickStart(tmp_path)
    try:
        yield run
    finally:
        run.stop()


def test_the_page_has_the_steps_the_tests_run() -> None:
    sections = [s.section for s in STEPS]
    assert sections[0] == "Step 1: install" and any(s.startswith("Step 9") for s in sections)
    commands = [s.command for s in STEPS]
    assert "pylogq config-files" in commands
    assert "pylogq zookeeper-server-start config/zookeeper.properties" in commands
    assert ["pylogq-broker config/server-%d.properties &" % n for n in range(3)] == [
        c for c in commands if c.startswith("pylogq-broker config/server-")][:3]
    assert "pgrep -f config/server-%d.properties" % DOC_LEADER in commands and "kill -9 %s" % DOC_PID in commands


def test_the_page_shows_the_cluster_files_as_they_are() -> None:
    """Step 9's ``properties`` blocks are the settings of config/server-N.properties, every one."""
    shown = re.findall(r"^```properties\n# (config/\S+)\n(.*?)^```", DOC.read_text(), re.S | re.M)
    assert [name for name, _ in shown] == ["config/server-%d.properties" % n for n in range(3)]
    for name, text in shown:
        settings = [line for line in (ROOT / name).read_text().splitlines() if line.strip() and line[0] != "#"]
        assert text.splitlines() == settings, name


def test_the_single_broker_steps(quickstart: QuickStart) -> None:
    """Steps 1 to 8: the config files, one broker from config/server.properties, its topics,
    records, groups, configs, a client and the perf tools; then Ctrl-C, as Step 9 begins."""
    quickstart.run([s for s in STEPS if not s.section.startswith("Step 9")])
    quickstart.stop_single_broker()
    assert (quickstart.tmp / "kafka-logs" / "test-0").is_dir()  # log.dirs of config/server.properties


def test_the_cluster_steps(quickstart: QuickStart) -> None:
    """Step 1 (the config files), then Step 9: ZooKeeper, three brokers, a topic replicated
    three times, the leader killed, the messages read from the others, the leader back."""
    zookeeper_install_or_skip()
    quickstart.run([s for s in STEPS if s.section.startswith("Step 1") or s.section.startswith("Step 9")])
    assert quickstart.leader is not None and quickstart.restarted == {quickstart.leader}
    brokers = [s for s in quickstart.servers if s.command.startswith("pylogq-broker")]
    for server in brokers:
        quickstart.check_log(server)
