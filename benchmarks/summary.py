"""Labels a benchmark for the closing summary table printed by benchmarks/conftest.py."""

from __future__ import annotations

from typing import Any


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
