"""``pylogq zookeeper-server-start``: the system's ZooKeeper in the foreground, as Kafka's script runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from pylogq.cli.zookeeper_server import effective_config, read_properties
from pylogq.cluster.zk.kazoo_store import ZooKeeperStore

from .._ports import free_port
from .._zookeeper import four_letter_word, zookeeper_install_or_skip

#: ZooKeeper's own server under the CLI, no pylogq broker: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass


def _listening_addresses(port: int) -> List[str]:
    """The local addresses (hex, as /proc/net/tcp* shows them) of the sockets listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                address, _, hex_port = fields[1].partition(":")
                if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                    found.append(address)
    return found


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def _environment() -> Dict[str, str]:
    env = dict(os.environ)
    env["KAFKA_HEAP_OPTS"] = "-Xmx64M"  # Kafka's 512 MB is more than a test needs
    return env


@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_serves_from_a_properties_file_and_stops_on_a_signal(tmp_path: Path, signum: int, status: int) -> None:
    zookeeper_install_or_skip()
    port = free_port()
    config = tmp_path / "zookeeper.properties"
    config.write_text("# as Kafka's config/zookeeper.properties, on a port of the test's own\n"
                      "dataDir=%s\nclientPort=%d\nmaxClientCnxns=0\nadmin.enableServer=false\n"
                      % (tmp_path / "data", port))
    # Started as from a terminal: SIGINT at its default, whatever this run inherited (a shell's
    # background job ignores it, and the command rightly keeps ignoring it then). In a session of
    # its own, so a failure can kill ZooKeeper with it rather than leave it holding the output pipe.
    command = [sys.executable, "-m", "pylogq", "zookeeper-server-start", str(config)]
    as_from_a_terminal = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                          "os.execv(sys.argv[1], sys.argv[1:])")
    proc = subprocess.Popen([sys.executable, "-c", as_from_a_terminal] + command, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=_environment(), start_new_session=True)
    try:
        with ZooKeeperStore("127.0.0.1:%d/cli" % port, session_timeout_ms=4000,
                            connection_timeout_ms=60000) as store:
            store.create("/written", b"through pylogq zookeeper-server-start")
            assert store.get("/written")[0] == b"through pylogq zookeeper-server-start"
        assert (tmp_path / "data" / "version-2").is_dir()
        addresses = _listening_addresses(port)
        assert addresses and set(addresses) <= LOOPBACK, addresses  # 127.0.0.1 unless the file says otherwise
        proc.send_signal(signum)
        assert proc.wait(60) == status
        assert four_letter_word(port, "ruok", timeout=5) == ""  # ZooKeeper is gone with the command
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the command and its ZooKeeper
        except ProcessLookupError:
            pass  # (nothing: the usual end)
        proc.wait(60)
        assert proc.stdout is not None
        output = proc.stdout.read().decode("utf-8", "replace")
        proc.stdout.close()
    assert "binding to port" in output and "127.0.0.1:%d" % port in output  # ZooKeeper's log, on the console


def test_without_java_it_says_what_to_install(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java there
    done = subprocess.run([sys.executable, "-m", "pylogq", "zookeeper-server-start"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 1
    assert "no Java runtime" in done.stderr and "apt-get install zookeeper" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_properties_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.properties"
    done = subprocess.run([sys.executable, "-m", "pylogq", "zookeeper-server-start", str(missing)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and str(missing) in done.stderr and "Traceback" not in done.stderr


def test_kafkas_defaults_on_the_loopback_interface() -> None:
    props = read_properties(effective_config(None))
    assert props == {"dataDir": "/tmp/zookeeper", "clientPort": "2181", "maxClientCnxns": "0",
                     "admin.enableServer": "false", "clientPortAddress": "127.0.0.1",
                     "admin.serverAddress": "127.0.0.1"}


def test_a_file_keeps_its_own_addresses() -> None:
    own = "clientPort=2181\nclientPortAddress=0.0.0.0\nadmin.serverAddress=0.0.0.0\n"
    assert effective_config(own) == own
    added = read_properties(effective_config("dataDir=/d\nclientPort = 2182\n"))
    assert added["clientPortAddress"] == "127.0.0.1" and added["clientPort"] == "2182"
    # A dynamic config names each server's client address itself: nothing added for it.
    dynamic = read_properties(effective_config("dataDir=/d\nserver.1=h1:2888:3888;2181\n"))
    assert "clientPortAddress" not in dynamic


def test_properties_syntax() -> None:
    text = "# comment\n! also a comment\n\nkey=value\nspaced = v \ncolon: c\nbare\n"
    assert read_properties(text) == {"key": "value", "spaced": "v", "colon": "c", "bare": ""}
