"""The package's layers call only downward, and the client and server see only the broker contract.

The order is DESIGN.md's: ``_core`` and the base modules, ``records``, ``storage``,
``cluster`` (its subpackages ordered too: the shared base, ``zk``, ``state``,
``coordinator``, ``controller``, ``broker``), ``protocol``, then ``server`` and ``client`` (side by side, neither
importing the other), then ``mirror`` and ``spark`` (built on the clients), then ``cli``
(whose tools run them), then ``testing`` and the package's own ``__init__`` (which names
the public classes). Every import counts, those inside
functions and under ``TYPE_CHECKING`` too: a type-only dependency is still a
dependency a reader has to follow.
"""

from __future__ import annotations

import ast
import functools
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
    "config": 1, "metrics": 1, "rate": 1,
    "records": 2,
    "storage": 3,
    "cluster": 4,
    "protocol": 5,
    "server": 6, "client": 6,
    "mirror": 7, "spark": 7,
    "cli": 8,
    "testing": 9,
    "__init__": 10, "__main__": 10,
}

# What server/ and client/ may use of cluster/: the contract and the mechanisms it
# hands out, never the broker, its storage or its coordinator (replica_assignment: the
# checks of an explicit assignment, which the admin client's validate_only runs too;
# acl: the access control model the ACL APIs carry).
CONTRACT_MODULES = {"pylogq.cluster.contract", "pylogq.cluster.delayed", "pylogq.cluster.names",
                    "pylogq.cluster.partitioner", "pylogq.cluster.replica_assignment", "pylogq.cluster.acl"}


# What mirror/ may use below it: the clients (and the contract types they hand out), their
# metrics registry, the errors, the config machinery its properties file is parsed with, and the
# partitioner's murmur2 (which task a partition belongs to). No broker, storage or protocol code:
# a mirror is a client of its clusters.
MIRROR_ALLOWED = ("pylogq.client", "pylogq.metrics", "pylogq.errors", "pylogq.config", "pylogq.cluster.partitioner",
                  "pylogq.mirror")


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
    return iter(_imports_of(path))


@functools.lru_cache(maxsize=None)
def _imports_of(path: Path) -> Tuple[Tuple[int, str], ...]:
    """:func:`_imports` of ``path``, each file parsed once for the whole module: its tests walk the
    package several times. (The layer probe is a file of its own name, never walked twice.)"""
    return tuple(_parse_imports(path))


def _parse_imports(path: Path) -> Iterator[Tuple[int, str]]:
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


#: Imports between two files of one package that may close a cycle, each with its reason.
CYCLE_EDGES_ALLOWED: Dict[Tuple[str, str], str] = {
    ("pylogq.storage.log", "pylogq.storage.manager"):
        "Log.open, the documented way to open a standalone log (pylogq.Log.open), hands the opening to "
        "the manager of the log's directory, which holds its lock and checkpoints (imported at the call)",
    ("pylogq.client.transport", "pylogq.client.tcp"):
        "connect(), the clients' one way to a broker, builds a TcpTransport for bootstrap_servers= only, "
        "importing it at that call: a client of a broker in this process loads no socket code",
}


def _module_of(target: str) -> Optional[str]:
    """The module file an imported name lives in (``pylogq.storage.log`` for ``...log.Log``), or
    None for a package's ``__init__``."""
    parts = target.split(".")
    while len(parts) > 1:
        base = PACKAGE.parent.joinpath(*parts)
        if base.with_suffix(".py").exists():
            return ".".join(parts)
        if (base / "__init__.py").exists():
            return None
        parts.pop()
    return None


def _module_graph() -> Dict[str, Set[str]]:
    """Module -> the modules of its own package it imports (allowed edges left out)."""
    graph: Dict[str, Set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py" or path.name.startswith(PROBE_PREFIX):
            continue
        module = _module_name(path)
        package = module.rsplit(".", 1)[0]
        for _, target in _imports(path):
            dest = _module_of(target)
            if (dest is None or dest == module or dest.rsplit(".", 1)[0] != package
                    or (module, dest) in CYCLE_EDGES_ALLOWED):
                continue
            graph.setdefault(module, set()).add(dest)
    return graph


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected groups of more than one module (Tarjan), sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_cycle_between_modules_of_a_package() -> None:
    cycles = _cycles(_module_graph())
    assert not cycles, "import cycles between modules of one package (or name the edge in CYCLE_EDGES_ALLOWED):\n" + (
        "\n".join(" <-> ".join(group) for group in cycles))


def test_the_module_cycle_check_sees_a_cycle() -> None:
    assert _cycles({"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}) == [["p.a", "p.b", "p.c"]]
    assert _cycles({"p.a": {"p.b"}, "p.b": set()}) == []


def test_every_allowed_cycle_edge_is_an_import() -> None:
    """An allowance outlives its reason silently unless the import it names still exists."""
    for source, dest in CYCLE_EDGES_ALLOWED:
        path = PACKAGE.parent.joinpath(*source.split(".")).with_suffix(".py")
        assert dest in {_module_of(target) for _, target in _imports(path)}, (source, dest)


def test_server_and_client_use_only_the_broker_contract() -> None:
    bad = []
    for layer in ("server", "client"):
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            for line, target in _imports(path):
                if target.startswith("pylogq.cluster") and target not in CONTRACT_MODULES:
                    bad.append("%s:%d imports %s" % (path.relative_to(PACKAGE.parent), line, target))
    assert not bad, "server/ and client/ must depend on cluster.contract only:\n" + "\n".join(bad)


def test_mirror_uses_only_the_clients() -> None:
    bad = []
    for path in sorted((PACKAGE / "mirror").rglob("*.py")):
        for line, target in _imports(path):
            if not any(target == allowed or target.startswith(allowed + ".") for allowed in MIRROR_ALLOWED):
                bad.append("%s:%d imports %s" % (path.relative_to(PACKAGE.parent), line, target))
    assert not bad, "mirror/ may import only %s:\n%s" % (", ".join(MIRROR_ALLOWED), "\n".join(bad))


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
