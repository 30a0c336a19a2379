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
"""

from __future__ import annotations

import os
import statistics
import sys
from collections import defaultdict
from typing import Any, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # the checkout, for the suite's shared hooks
    sys.path.insert(0, ROOT)

from tests._require_all import header  # noqa: E402
from tests._require_all import pytest_make_collect_report, pytest_runtest_makereport  # noqa: E402,F401 - hooks


def pytest_report_header(config: Any) -> str:
    return "pylogq benchmarks: %s" % header()


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
    session = getattr(config, "_benchmarksession", None)
    if session is None or session.disabled:
        return
    groups: Dict[str, List[Any]] = defaultdict(list)
    for bench in session.benchmarks:
        if bench.extra_info.get("items") and bench.stats is not None:
            groups[bench.group or ""].append(bench)
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
