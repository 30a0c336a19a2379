"""Benchmark runs: the suite's skip rule, and a closing table of throughput and ratios, per group.

``PYLOGQ_REQUIRE_ALL=1`` makes every skip a failure here as in the test suite
(the hooks are tests/_require_all.py's): a benchmark whose peer, module or
external part is missing fails, at collection or at run time.

A benchmark opts in to the table by setting ``extra_info["items"]`` (records,
bytes or lookups per round) and ``extra_info["unit"]``; the group member with
``extra_info["peer"] = True`` is the reference for the ratio column (a peer
doing the same task, or where no peer can, a baseline the group's docstring
names), marked "(ref)", and ``extra_info["target"]`` states the goal in
words. Figures are medians. A row with ``extra_info["context"] = True`` does a
different task than the group's (shown for scale): it gets no ratio and is
marked "(context)". A group with no reference row says so.

A benchmark whose rounds alternated with the peer's (``extra_info
["alternating_peer_seconds"]``: the peer's round times, taken between its own
rounds) gets its ratio from those side-by-side rounds instead, marked "alt";
a line below gives the peer's median from them. Where a benchmark measured a
broker process's CPU time per round (``extra_info["broker_cpu_seconds"]`` and,
for the peer's alternating rounds, ``["alternating_peer_cpu_seconds"]``; None
where it could not be read), the line ends with it.

In a timed run under ``PYLOGQ_REQUIRE_ALL=1`` (the test command's quick pass), a
benchmark that did not label itself for the table, or a group whose reference row
was not measured, fails the run: every group's ratio is printed in every CI run.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections import defaultdict
from typing import Any, Dict, Iterator, List, Optional

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # the checkout, for the suite's shared hooks
    sys.path.insert(0, ROOT)

from tests._require_all import REQUIRE_ALL, header  # noqa: E402
from tests._require_all import pytest_make_collect_report, pytest_runtest_makereport  # noqa: E402,F401 - hooks

from peers import BrokerProcess, pylogq_broker  # noqa: E402

from pylogq.client.admin import AdminClient  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory: Any) -> Iterator[BrokerProcess]:
    """A ``pylogq-broker`` process per module (a module may define its own ``server``)."""
    process = pylogq_broker(str(tmp_path_factory.mktemp("pylogq-data")))
    try:
        yield process.start()
    finally:
        process.stop()


@pytest.fixture(scope="module")
def admin(server: BrokerProcess) -> Iterator[AdminClient]:
    """pylogq's AdminClient on the module's ``server``."""
    client = AdminClient(bootstrap_servers=server.bootstrap)
    yield client
    client.close()


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--quick", action="store_true", dest="pylogq_quick", default=False,
                     help="pylogq: timed at the smoke sizes, one round where a benchmark sets its rounds, "
                          "no speed target asserted (benchmarks/summary.py)")


def pytest_report_header(config: Any) -> str:
    return "pylogq benchmarks: %s%s" % (header(), "; quick: smoke sizes, targets not asserted"
                                       if config.getoption("pylogq_quick") else "")


def _measured(bench: Any) -> bool:
    """Whether a benchmark has timings (one that failed in its first round has none)."""
    return bench.stats is not None and bool(bench.stats.data)


def _groups(config: Any) -> Optional[Dict[str, List[Any]]]:
    """The timed benchmarks of this run that opted in to the table, by group (None when untimed)."""
    session = getattr(config, "_benchmarksession", None)
    if session is None or session.disabled:
        return None
    groups: Dict[str, List[Any]] = defaultdict(list)
    for bench in session.benchmarks:
        if bench.extra_info.get("items") and _measured(bench):
            groups[bench.group or ""].append(bench)
    return groups


def _unratioed(config: Any) -> List[str]:
    """What keeps this timed run from printing a ratio for every group: benchmarks measured but
    not labelled for the table, and groups without a measured reference row."""
    groups = _groups(config)
    if groups is None:
        return []
    session = config._benchmarksession
    problems = ["%s: measured without items for the summary (summary.info)" % bench.fullname
                for bench in session.benchmarks if _measured(bench) and not bench.extra_info.get("items")]
    problems += ["group %r: no reference row (peer=True) measured in this run" % group
                 for group, benches in sorted(groups.items()) if not any(b.extra_info.get("peer") for b in benches)]
    return problems


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if REQUIRE_ALL and exitstatus == 0 and _unratioed(session.config):
        session.exitstatus = 1


def _rate(items: float, seconds: float) -> str:
    value = items / seconds
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return "%.2f%s" % (value / scale, prefix)
    return "%.1f" % value


def _cpu(seconds: Optional[float]) -> str:
    """The broker CPU suffix of a summary line ("" without a figure)."""
    return "  broker CPU %.1f ms/round" % (seconds * 1e3) if seconds is not None else ""


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    groups = _groups(config)
    if not groups:
        return
    write = terminalreporter.write_line
    write("")
    write("pylogq benchmark summary (median; ratio = throughput / the reference row's (ref) in this run)")
    for group, benches in sorted(groups.items()):
        peer = next((b for b in benches if b.extra_info.get("peer")), None)
        target = next((b.extra_info["target"] for b in benches if b.extra_info.get("target")), "")
        write("  %s%s" % (group, ("  [target: %s]" % target) if target else ""))
        if peer is None:
            write("    (no reference row measured in this run: no ratio)")
        for b in sorted(benches, key=lambda b: b.stats.median):
            items = b.extra_info["items"]
            unit = b.extra_info.get("unit", "items")
            alternating = b.extra_info.get("alternating_peer_seconds")
            peer_seconds = statistics.median(alternating) if peer is not None and alternating else None
            context = bool(b.extra_info.get("context"))
            ratio = ""
            if context:
                ratio = "-"  # another task: shown for scale, not compared
            elif peer_seconds is not None:
                ratio = "%.2fx alt" % (peer_seconds / b.stats.median)
            elif peer is not None:
                ratio = "%.2fx" % ((items / b.stats.median) / (peer.extra_info["items"] / peer.stats.median))
            write("    %-48s %10.1f us  %9s %s/s  %9s%s%s" % (
                b.name, b.stats.median * 1e6, _rate(items, b.stats.median), unit, ratio,
                "  (ref)" if b is peer else "  (context)" if context else "",
                _cpu(b.extra_info.get("broker_cpu_seconds"))))
            if peer is not None and peer_seconds is not None:
                write("      %-46s %10.1f us  %9s %s/s  (%d rounds between this one's)%s" % (
                    "%s, alternating" % peer.name, peer_seconds * 1e6, _rate(items, peer_seconds), unit,
                    len(alternating), _cpu(b.extra_info.get("alternating_peer_cpu_seconds"))))
    problems = _unratioed(config)
    if problems:
        write("")
        failure = " (a failure under PYLOGQ_REQUIRE_ALL=1)" if REQUIRE_ALL else ""
        write("benchmarks without a measured ratio%s:" % failure)
        for problem in problems:
            write("  " + problem)
