"""The package's layers call only downward, and the client and server see only the broker contract.

The order is DESIGN.md's: ``_core`` and the base modules, ``records``, ``storage``,
``cluster`` (its subpackages ordered too: the shared base, ``zk``, ``state``,
``coordinator``, ``controller``, ``broker``), ``protocol``, then ``server`` and ``client`` (side by side, neither
importing the other), then ``cli`` and ``spark``, then ``testing`` and the package's
own ``__init__`` (which names the public classes). Every import counts, those inside
functions and under ``TYPE_CHECKING`` too: a type-only dependency is still a
dependency a reader has to follow.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pylogq

PACKAGE = Path(pylogq.__file__).parent
#: The name of the upward-import probe files the walker test writes into the package, one per run.
PROBE_PREFIX = "_layer_probe_"

# Rank per top-level package or module of pylogq; an import must go to a lower rank.
RANKS: Dict[str, int] = {
    "_speedups": 0, "_core": 0, "errors": 0, "_version": 0,
    "config": 1, "metrics": 1,
    "records": 2,
    "storage": 3,
    "cluster": 4,
    "protocol": 5,
    "server": 6, "client": 6,
    "cli": 7, "spark": 7,
    "testing": 8,
    "__init__": 9, "__main__": 9,
}

# What server/ and client/ may use of cluster/: the contract and the mechanisms it
# hands out, never the broker, its storage or its coordinator (replica_assignment: the
# checks of an explicit assignment, which the admin client's validate_only runs too).
CONTRACT_MODULES = {"pylogq.cluster.contract", "pylogq.cluster.delayed", "pylogq.cluster.names",
                    "pylogq.cluster.partitioner", "pylogq.cluster.replica_assignment"}


# The cluster layer's subpackages, bottom up (pylogq/cluster/__init__.py): each imports only
# those ranked below it and the shared base (the modules directly in cluster/, rank 0).
CLUSTER_RANKS: Dict[str, int] = {"": 0, "zk": 1, "state": 2, "coordinator": 3, "controller": 4, "broker": 5}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> Iterator[Tuple[int, str]]:
    """(line, absolute module) for every import of a pylogq module in ``path``."""
    module = _module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "pylogq" or alias.name.startswith("pylogq."):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "pylogq" and not target.startswith("pylogq."):
                continue
            if node.module is None or target == "pylogq":  # from . import x: each name may be a module
                for alias in node.names:
                    yield node.lineno, target + "." + alias.name
            else:
                yield node.lineno, target


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1] if parts[1] in RANKS else "__init__"  # pylogq.Broker and friends: the facade


def _graph(probe: Optional[Path] = None) -> Tuple[Dict[str, Set[str]], List[str]]:
    """The package's layer edges and upward imports; ``probe``: the one layer probe to read (the
    probes of other runs of the suite at once come and go while this one walks)."""
    edges: Dict[str, Set[str]] = {}
    found: List[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name.startswith(PROBE_PREFIX) and path != probe:
            continue
        module = _module_name(path)
        source = _layer(module)
        for line, target in _imports(path):
            dest = _layer(target)
            if dest == source:
                continue
            edges.setdefault(source, set()).add(dest)
            if RANKS[dest] >= RANKS[source]:
                found.append("%s:%d: %s (%s) imports %s (%s)" % (path.relative_to(PACKAGE.parent), line, module,
                                                                 source, target, dest))
    return edges, found


def test_every_package_is_ranked() -> None:
    names = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert names <= set(RANKS), "unranked: %s" % sorted(names - set(RANKS))


def test_imports_point_down_only() -> None:
    _, upward = _graph()
    assert not upward, "imports from a lower layer to a higher one or across one:\n" + "\n".join(upward)


def test_no_cycle_between_packages() -> None:
    edges, _ = _graph()
    state: Dict[str, int] = {}
    cycles: List[List[str]] = []

    def visit(node: str, path: List[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt] if nxt in path else path + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles between packages: %s" % cycles


def test_server_and_client_use_only_the_broker_contract() -> None:
    bad = []
    for layer in ("server", "client"):
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            for line, target in _imports(path):
                if target.startswith("pylogq.cluster") and target not in CONTRACT_MODULES:
                    bad.append("%s:%d imports %s" % (path.relative_to(PACKAGE.parent), line, target))
    assert not bad, "server/ and client/ must depend on cluster.contract only:\n" + "\n".join(bad)


def _cluster_part(module: str) -> str:
    """The cluster subpackage a module of pylogq.cluster belongs to ("" for the shared base)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[2] in CLUSTER_RANKS else ""


def test_cluster_subpackages_import_down_only() -> None:
    names = {p.name for p in (PACKAGE / "cluster").iterdir() if (p / "__init__.py").exists()}
    assert names == set(CLUSTER_RANKS) - {""}, "unranked or gone: %s" % sorted(names ^ (set(CLUSTER_RANKS) - {""}))
    bad = []
    for path in sorted((PACKAGE / "cluster").rglob("*.py")):
        module = _module_name(path)
        source = _cluster_part(module)
        for line, target in _imports(path):
            if not target.startswith("pylogq.cluster.") or path.name.startswith(PROBE_PREFIX):
                continue
            dest = _cluster_part(target)
            if dest != source and CLUSTER_RANKS[dest] >= CLUSTER_RANKS[source]:
                bad.append("%s:%d: %s (%s) imports %s (%s)" % (path.relative_to(PACKAGE.parent), line, module,
                                                               source or "base", target, dest or "base"))
    assert not bad, "imports up or across the cluster's subpackages:\n" + "\n".join(bad)


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The walker resolves relative imports: a storage module importing the server is caught."""
    # A name of its own: two runs of the suite at once must not share (and delete) one probe.
    fake = PACKAGE / "storage" / ("%s%s.py" % (PROBE_PREFIX, uuid.uuid4().hex))
    assert not fake.exists()
    fake.write_text("from ..server import KafkaServer\nfrom . import log\n")
    try:
        imports = list(_imports(fake))
        _, upward = _graph(fake)
    finally:
        fake.unlink()
    assert imports == [(1, "pylogq.server"), (2, "pylogq.storage.log")]
    assert any(fake.stem in line for line in upward)


def test_tcp_clients_load_no_storage_broker_or_coordinator() -> None:
    code = (
        "import sys\n"
        "from pylogq import AdminClient, Consumer, Producer\n"
        "import pylogq.client.tcp\n"
        "implementations = {'pylogq.cluster.broker.broker', 'pylogq.cluster.coordinator.group.coordinator',\n"
        "    'pylogq.cluster.state.partition', 'pylogq.cluster.broker.in_process', 'pylogq.cluster.state.producer_state',\n"
        "    'pylogq.cluster.coordinator.group.offsets_topic', 'pylogq.cluster.broker.topic_store', 'pylogq.cluster.broker.config'}\n"
        "loaded = sorted(m for m in sys.modules if m in implementations\n"
        "    or m.startswith(('pylogq.storage', 'pylogq.server', 'pylogq.spark')))\n"
        "print(','.join(loaded))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", "a TCP-only client loaded: %s" % done.stdout.strip()


def test_the_broker_still_serves_through_the_public_name() -> None:
    code = (
        "import sys, tempfile\n"
        "import pylogq\n"
        "with tempfile.TemporaryDirectory() as d:\n"
        "    with pylogq.Broker(d) as b:\n"
        "        host, port = b.serve()\n"
        "        print(host, port > 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["127.0.0.1", "True"]
