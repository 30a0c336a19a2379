"""``config/`` and ``pylogq config-files``: Kafka's files as pylogq ships them, one set of them.

The repository's ``config/`` and the package's copy (:data:`pylogq.cli.config_files.PACKAGED_DIR`)
are byte for byte the same; ``server.properties`` holds exactly the values that
``pylogq-broker`` without a file starts from (``DEVELOPMENT_DEFAULTS``), and
``zookeeper.properties`` those ``pylogq zookeeper-server-start`` uses without one.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Dict, Tuple

import pytest

import pylogq.server  # noqa: F401  (registers the listener's keys: server.properties names them)
from pylogq.cli import zookeeper_server
from pylogq.cli.config_files import FILES, PACKAGED_DIR
from pylogq.cli.main import run
from pylogq.cluster.broker.config import DEVELOPMENT_DEFAULTS, BrokerConfig
from pylogq.config import parse_properties, to_string

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"


def _config_files(*argv: str) -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(["config-files", *argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def _settings(name: str) -> Dict[str, str]:
    return parse_properties((CONFIG / name).read_text())


def test_the_package_ships_the_repository_config_files_byte_for_byte() -> None:
    assert sorted(p.name for p in CONFIG.iterdir()) == sorted(FILES)
    assert sorted(p.name for p in Path(PACKAGED_DIR).iterdir()) == sorted(FILES)
    for name in FILES:
        assert (Path(PACKAGED_DIR) / name).read_bytes() == (CONFIG / name).read_bytes(), (
            "config/%s and pylogq/config_files/%s differ: edit config/ and copy it (cp config/*.properties "
            "pylogq/config_files/)" % (name, name))


def test_config_files_writes_them_and_leaves_a_changed_file_alone(tmp_path: Path) -> None:
    target = tmp_path / "config"
    assert _config_files(str(target)) == (0, "".join("%s\n" % (target / n) for n in FILES), "")
    assert all((target / n).read_bytes() == (CONFIG / n).read_bytes() for n in FILES)
    assert _config_files(str(target)) == (0, "", "")  # the same files: nothing to do (a fresh clone)
    edited = target / "server.properties"
    edited.write_text("broker.id=7\n")
    assert _config_files(str(target)) == (
        1, "", "Error: %s exists with other contents: left as it is (--force replaces it)\n" % edited)
    assert edited.read_text() == "broker.id=7\n"
    assert _config_files(str(target), "--force") == (0, "%s\n" % edited, "")
    assert edited.read_bytes() == (CONFIG / "server.properties").read_bytes()


def test_config_files_defaults_to_config_and_path_prints_the_installed_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _config_files()[0] == 0 and sorted(p.name for p in (tmp_path / "config").iterdir()) == sorted(FILES)
    assert _config_files("--path") == (0, PACKAGED_DIR + "\n", "")


def test_config_files_reports_a_directory_it_cannot_write(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    status, out, err = _config_files(str(blocker / "config"))
    assert (status, out) == (1, "") and err.startswith("Error: cannot write the config files to %s: " % (
        blocker / "config"))


def test_server_properties_sets_exactly_the_development_defaults() -> None:
    """The keys of config/server.properties whose values differ from Kafka's defaults are the
    DEVELOPMENT_DEFAULTS a broker without a file starts from (one set of shipped values)."""
    shipped = _settings("server.properties")
    defaults = BrokerConfig({}).to_strings()
    parsed = BrokerConfig(shipped).to_strings()
    differing = {key: parsed[key] for key in shipped if parsed[key] != defaults[key]}
    assert differing == {key: to_string(value) for key, value in DEVELOPMENT_DEFAULTS.items()}
    assert shipped["group.initial.rebalance.delay.ms"] == "0" and shipped["offsets.topic.replication.factor"] == "1"
    assert "zookeeper.connect" not in shipped  # a single broker, without ZooKeeper


def test_zookeeper_properties_are_the_values_used_without_a_file() -> None:
    assert _settings("zookeeper.properties") == dict(zookeeper_server.DEFAULT_PROPERTIES)


def test_the_cluster_files_make_three_brokers_on_one_machine() -> None:
    files = [_settings("server-%d.properties" % n) for n in range(3)]
    for n, settings in enumerate(files):
        BrokerConfig(settings)  # every key known, every value valid
        assert settings["broker.id"] == str(n)
        assert settings["listeners"] == "PLAINTEXT://127.0.0.1:%d" % (9092 + n)  # broker N on 9092 + N
        assert settings["log.dirs"] == "/tmp/kafka-logs-%d" % n
        # What docs/quickstart.md says of the failover: 6 s here, against Kafka's 18 s.
        assert settings["zookeeper.session.timeout.ms"] == "6000"
        assert settings["group.initial.rebalance.delay.ms"] == "0"
        assert settings["offsets.topic.replication.factor"] == "3"
        others = {k: v for k, v in settings.items() if k not in ("broker.id", "listeners", "log.dirs")}
        assert others == {k: v for k, v in files[0].items() if k not in ("broker.id", "listeners", "log.dirs")}
    assert files[0]["zookeeper.connect"] == "127.0.0.1:%s" % _settings("zookeeper.properties")["clientPort"]
