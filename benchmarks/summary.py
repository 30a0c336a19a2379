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

import time
from typing import Any, Callable, List, Optional, Protocol, Tuple

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


class Rounds(Protocol):
    """A workload timed in rounds: ``prepare`` (untimed), ``run`` (timed), ``finish`` (untimed:
    its client stops working, so it does nothing during the other side's rounds)."""

    def prepare(self) -> None: ...

    def run(self) -> Any: ...

    def finish(self) -> None: ...


def alternate(benchmark: Any, own: Rounds, peer: Optional[Rounds], rounds: int, warmup: int,
              mark: Optional[Callable[[Rounds, bool], None]] = None) -> Tuple[Any, Any]:
    """Time ``own``'s rounds (``warmup`` first, untimed); with a ``peer``, one of its rounds before
    each, in the untimed setup and timed there, so that the two alternate and meet the same drifts
    of the machine's speed: the summary compares them (``alternating_peer_seconds``, the warm-up
    rounds left out). ``mark(workload, True)`` is called as a round starts and
    ``mark(workload, False)`` once it is over (a broker's CPU time read around it).
    -> (``own``'s last result, the ``peer``'s last result)."""
    peer_seconds: List[float] = []
    peer_result: Any = None
    marked = mark or (lambda workload, starting: None)

    def setup() -> Any:
        nonlocal peer_result
        marked(own, False)  # the previous round's, if any
        own.finish()
        if peer is not None:
            peer.prepare()
            marked(peer, True)
            start = time.perf_counter()
            peer_result = peer.run()
            peer_seconds.append(time.perf_counter() - start)
            marked(peer, False)
            peer.finish()
        own.prepare()
        marked(own, True)
        return (), {}

    result = benchmark.pedantic(own.run, setup=setup, rounds=rounds, iterations=1, warmup_rounds=warmup)
    marked(own, False)
    own.finish()
    if peer is not None:
        benchmark.extra_info["alternating_peer_seconds"] = peer_seconds[warmup:]
    return result, peer_result
