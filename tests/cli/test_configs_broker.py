"""``pylogq configs`` against ``pylogq-broker`` processes started from properties files, as a user runs them.

A broker's settings are labelled as Kafka labels them: ``STATIC_BROKER_CONFIG`` only for the
keys its properties file (or ``--override``) sets, ``DEFAULT_CONFIG`` for the others, each
with its default as a synonym; only a password-like key is sensitive. A properties file
without ``group.initial.rebalance.delay.ms`` gets Kafka's built-in 3000, the shipped
``config/server.properties`` sets 0. ``--delete-config`` of a key a fresh topic does not
override is no error, and the ``--add-config`` beside it is applied.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from ..server.conftest import READY
from .conftest import run_process

#: Config administration of broker processes: no record is written or read, no pure-Python twin runs:
#: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0
JAAS = "listener.name.sasl_plaintext.plain.sasl.jaas.config"


class Running:
    """``pylogq-broker ARGS`` as a child process, ready when it has printed its ready line."""

    def __init__(self, args: List[str], log: Path) -> None:
        with open(log, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "pylogq.cli.broker", *args], stdout=subprocess.PIPE,
                                         stderr=err, stdin=subprocess.DEVNULL)
        self.log = log
        assert self.proc.stdout is not None
        got = b""
        deadline = time.monotonic() + START_TIMEOUT_S
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while b"\n" not in got and time.monotonic() < deadline:
                if selector.select(deadline - time.monotonic()):
                    chunk = os.read(self.proc.stdout.fileno(), 4096)
                    if not chunk:
                        break
                    got += chunk
        match = READY.match(got.decode("utf-8", "replace").split("\n")[0])
        if match is None:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("no ready line (%r); log:\n%s" % (got, log.read_text()))
        self.bootstrap = "%s:%s" % (match.group(2), match.group(3))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        status = self.proc.wait(START_TIMEOUT_S)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        assert status == 0, "pylogq-broker exited with %s; log:\n%s" % (status, self.log.read_text())


def _every_config(bootstrap: str) -> Dict[str, str]:
    """``configs --describe --broker 0 --all``: key -> its line."""
    done = run_process(bootstrap, "configs", "--describe", "--broker", "0", "--all")
    assert done.status == 0 and done.err == "", done
    lines = done.out.splitlines()
    assert lines[0] == "All configs for broker 0 are:"
    return {line.split("=", 1)[0].strip(): line for line in lines[1:]}


@pytest.fixture(scope="module")
def from_a_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A broker whose properties file sets a few keys, a password-like one among them, and
    not group.initial.rebalance.delay.ms."""
    base = tmp_path_factory.mktemp("from-a-file")
    properties = base / "server.properties"
    properties.write_text("listeners=PLAINTEXT://127.0.0.1:0\nlog.dirs=%s\nnum.partitions=2\n"
                          "offsets.topic.num.partitions=2\n%s=org.apache.kafka.common.security.plain.PlainLoginModule "
                          "required user_admin=\"s3cret\";\n" % (base / "data", JAAS))
    broker = Running([str(properties)], base / "broker.log")
    yield broker
    broker.stop()


def test_keys_set_in_the_file_are_static_and_the_others_defaults(from_a_file: Running) -> None:
    every = _every_config(from_a_file.bootstrap)
    static = {key for key, line in every.items() if "STATIC_BROKER_CONFIG" in line}
    assert static == {"listeners", "log.dirs", "num.partitions", "offsets.topic.num.partitions", JAAS}
    assert every["num.partitions"] == (
        "  num.partitions=2 sensitive=false synonyms={STATIC_BROKER_CONFIG:num.partitions=2, "
        "DEFAULT_CONFIG:num.partitions=1}")
    # Not in the file: Kafka's built-in 3000 (the shipped server.properties sets 0), labelled a default.
    assert every["group.initial.rebalance.delay.ms"] == (
        "  group.initial.rebalance.delay.ms=3000 sensitive=false "
        "synonyms={DEFAULT_CONFIG:group.initial.rebalance.delay.ms=3000}")
    assert all(line.split(" synonyms=")[1] == "{DEFAULT_CONFIG:%s}" % line.strip().split(" sensitive=")[0]
               for key, line in every.items() if key not in static)


def test_only_a_password_like_key_is_sensitive(from_a_file: Running) -> None:
    every = _every_config(from_a_file.bootstrap)
    assert every["advertised.listeners"] == (
        "  advertised.listeners=null sensitive=false synonyms={DEFAULT_CONFIG:advertised.listeners=null}")
    assert every[JAAS] == "  %s=null sensitive=true synonyms={STATIC_BROKER_CONFIG:%s=null, DEFAULT_CONFIG:%s=null}" % (
        JAAS, JAAS, JAAS)
    # Kafka's PASSWORD settings: the JAAS line, the SSL passwords, inline PEM keys and certificates.
    assert sorted(key for key, line in every.items() if "sensitive=true" in line) == sorted([
        JAAS, "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.password",
        "ssl.truststore.certificates", "ssl.truststore.password"])
    assert "s3cret" not in "".join(every.values())


def test_the_shipped_server_properties_sets_the_development_values(tmp_path: Path) -> None:
    broker = Running([str(ROOT / "config" / "server.properties"), "--data-dir", str(tmp_path / "data"),
                      "--listeners", "PLAINTEXT://127.0.0.1:0"], tmp_path / "broker.log")
    try:
        every = _every_config(broker.bootstrap)
    finally:
        broker.stop()
    assert every["group.initial.rebalance.delay.ms"] == (
        "  group.initial.rebalance.delay.ms=0 sensitive=false synonyms={STATIC_BROKER_CONFIG:"
        "group.initial.rebalance.delay.ms=0, DEFAULT_CONFIG:group.initial.rebalance.delay.ms=3000}")
    assert every["offsets.topic.replication.factor"].startswith(
        "  offsets.topic.replication.factor=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:")
    # Set in the file to Kafka's default value: still the file's, as Kafka labels it.
    assert every["num.partitions"].startswith("  num.partitions=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:")
    assert every["num.replica.fetchers"].endswith("synonyms={DEFAULT_CONFIG:num.replica.fetchers=1}")


def test_delete_config_of_a_key_a_fresh_topic_does_not_set(from_a_file: Running) -> None:
    bootstrap = from_a_file.bootstrap
    assert run_process(bootstrap, "topics", "--create", "--topic", "fresh").status == 0
    done = run_process(bootstrap, "configs", "--alter", "--topic", "fresh", "--add-config",
                       "retention.ms=3600000,cleanup.policy=[compact,delete]", "--delete-config", "segment.ms")
    assert done == (0, "Completed updating config for topic fresh.\n", "")
    assert run_process(bootstrap, "configs", "--describe", "--topic", "fresh").out == (
        "Dynamic configs for topic fresh are:\n"
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete}\n"
        "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}\n")
    # Deleting what is set returns it to its default; deleting it again changes nothing.
    for _ in range(2):
        assert run_process(bootstrap, "configs", "--alter", "--topic", "fresh", "--delete-config",
                           "retention.ms").status == 0
    assert run_process(bootstrap, "configs", "--describe", "--topic", "fresh").out == (
        "Dynamic configs for topic fresh are:\n"
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete}\n")


def test_a_key_that_is_no_topic_config_is_refused_and_nothing_changes(from_a_file: Running) -> None:
    bootstrap = from_a_file.bootstrap
    assert run_process(bootstrap, "topics", "--create", "--topic", "typo").status == 0
    done = run_process(bootstrap, "configs", "--alter", "--topic", "typo", "--add-config", "retention.ms=5",
                       "--delete-config", "segment.mss")
    assert done == (1, "", "Error: INVALID_CONFIG: Invalid config(s): segment.mss (not topic configs)\n")
    assert run_process(bootstrap, "configs", "--describe", "--topic", "typo").out == (
        "Dynamic configs for topic typo are:\n")


def test_describe_of_a_missing_topic_prints_the_error_alone(from_a_file: Running) -> None:
    done = run_process(from_a_file.bootstrap, "configs", "--describe", "--topic", "nope")
    assert done.status == 1 and done.out == ""
    assert done.err.startswith("Error: UNKNOWN_TOPIC_OR_PARTITION: ") and "'nope'" in done.err
    assert done.err.count("\n") == 1
