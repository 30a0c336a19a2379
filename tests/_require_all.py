"""``PYLOGQ_REQUIRE_ALL=1``: every skip is a failure, at collection and at run time.

Shared by the suite's and the benchmarks' conftest.py, which take these hooks
into their own namespace, so every pytest run of the test command (scripts/
run-tests) follows one rule. A skip at run time (a test, or a fixture it uses,
calling ``pytest.skip``) is caught in its report; a skip at collection (a
module-level ``pytest.importorskip`` or ``pytest.skip(allow_module_level=True)``)
never reaches a test report, so the collector's report is caught too and the
module is reported as a collection error, as a plain ``import`` of the missing
module would be (pytest then stops before running tests: exit status 2).
Either way the failure names the skip's reason. An expected failure (``xfail``) is not a skip and is left alone.
"""

from __future__ import annotations

import os
from typing import Any, Generator

import pytest

#: Whether skips are failures in this run (``.ci/run`` sets the variable).
REQUIRE_ALL = os.environ.get("PYLOGQ_REQUIRE_ALL", "") not in ("", "0")
PREFIX = "skipped under PYLOGQ_REQUIRE_ALL=1: "


def _reason(longrepr: Any) -> str:
    """The reason of a skipped report (its longrepr is ``(path, lineno, reason)``; a collector's
    reason starts with "Skipped: ")."""
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


def _fail_if_skipped(report: Any) -> None:
    if REQUIRE_ALL and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = PREFIX + _reason(report.longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: "pytest.CallInfo[None]") -> Generator[None, Any, None]:
    outcome = yield
    _fail_if_skipped(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    _fail_if_skipped(outcome.get_result())


def header() -> str:
    """The report header's words on the rule."""
    return "skips are failures (PYLOGQ_REQUIRE_ALL): %s" % REQUIRE_ALL
