"""Labels a benchmark for the closing summary table printed by benchmarks/conftest.py, and
the run's size: full, quick or untimed.

Three kinds of run:
- full (``pytest benchmarks``): the stated sizes and rounds, and each speed target
  that a benchmark asserts is asserted (:func:`asserting`);
- quick (``--quick``, as the test command runs them): timed, so that every group's
  ratio is measured and printed, at the smoke sizes with one round where a benchmark
  sets its rounds; no target asserted, as a loaded 2-core machine's figures at those
  sizes are not the benchmark's;
- untimed (``--benchmark-disable``): every benchmark once at the smoke sizes, checking
  only its outcome.
``PYLOGQ_NO_EXTENSIONS=1`` makes a run use the smoke sizes too (the pure-Python twins
are slow), while still asserting targets where timing is on and the run is not quick.
"""

from __future__ import annotations

from typing import Any

from pylogq import _speedups


def quick(config: Any) -> bool:
    """Timed at the smoke sizes (``--quick``)."""
    return bool(config.getoption("pylogq_quick", False))


def smoke(config: Any) -> bool:
    """Whether this run uses the small sizes and one round: untimed, quick, or pure Python."""
    return bool(_speedups.NO_EXTENSIONS or config.getoption("benchmark_disable", False) or quick(config))


def asserting(config: Any) -> bool:
    """Whether a benchmark asserts its speed target: timing on, and not a quick run."""
    return not (config.getoption("benchmark_disable", False) or quick(config))


def info(benchmark: Any, group: str, items: int, unit: str, peer: bool = False, target: str = "",
         context: bool = False) -> None:
    """Group, throughput items per round and unit; mark the peer, or a row shown for scale only
    (``context``: a different task than the group's, no ratio); state the target."""
    benchmark.group = group
    benchmark.extra_info["items"] = items
    benchmark.extra_info["unit"] = unit
    if peer:
        benchmark.extra_info["peer"] = True
    if context:
        benchmark.extra_info["context"] = True
    if target:
        benchmark.extra_info["target"] = target
