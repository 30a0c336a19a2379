"""Every public module says what its public API is: an ``__all__`` whose every name exists."""

from __future__ import annotations

import importlib
import pkgutil
from typing import List

import pytest

import pylogq


def _public_modules() -> List[str]:
    """Modules and packages no part of whose dotted name starts with ``_``."""
    names = ["pylogq"] + [m.name for m in pkgutil.walk_packages(pylogq.__path__, "pylogq.")]
    return [n for n in names if not any(part.startswith("_") for part in n.split("."))]


PUBLIC = _public_modules()


def test_the_walk_finds_the_package():
    assert {"pylogq", "pylogq.errors", "pylogq.storage", "pylogq.storage.log", "pylogq.cli.main"} <= set(PUBLIC)
    assert not any(name.startswith("pylogq._core") or name.endswith("._impl") for name in PUBLIC)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_module_defines_all_and_every_name_exists(name):
    module = importlib.import_module(name)
    if "__all__" not in vars(module):
        pytest.fail("%s has no __all__" % name)
    listed = list(module.__all__)
    assert all(isinstance(n, str) for n in listed), name
    assert len(listed) == len(set(listed)), "%s lists a name twice" % name
    missing = [n for n in listed if not hasattr(module, n)]
    assert not missing, "%s.__all__ names what it does not have: %s" % (name, missing)


def test_a_single_node_broker_starts_without_numpy_or_the_cluster_modules(tmp_path):
    """What ``pylogq-broker`` loads to start on an empty data directory and serve: numpy
    (about 45 ms to import) comes with the first columnar decode or compaction; the
    replication modules, the inter-broker client and its wire conversion, and kazoo only
    with ``zookeeper.connect``; hashlib with the first SCRAM exchange; the hashing kernel
    with the first group; the in-process client transport with the first embedded client."""
    import subprocess
    import sys

    script = (
        "import sys, pylogq, pylogq.cli.broker\n"
        "b = pylogq.Broker(sys.argv[1], development_defaults=True)\n"
        "b.serve('127.0.0.1', 0)\n"
        "b.create_topic('t', 2)\n"
        "b.close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'kazoo')\n"
        "             or m in ('pylogq.cluster.broker.cluster_node', 'pylogq.cluster.controller.controller',\n"
        "                      'pylogq.server.inter_broker', 'pylogq.server.replication_wire',\n"
        "                      'pylogq.protocol.blocking_client', 'pylogq.cluster.broker.in_process',\n"
        "                      'pylogq.cluster.partitioner', 'hashlib')))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "data")], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "[]", out
