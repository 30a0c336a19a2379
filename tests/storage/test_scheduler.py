"""The log manager's scheduler: a task that keeps failing the same way (a full disk)
is logged with its traceback once, then in one line a run, until it succeeds."""

from __future__ import annotations

import logging
from typing import List

import pytest

from pylogq.storage.scheduler import Scheduler


def test_a_repeated_failure_is_logged_in_full_once(caplog: pytest.LogCaptureFixture) -> None:
    outcomes: List[str] = ["disk full", "disk full", "disk full", "", "disk full"]

    def flush() -> None:
        outcome = outcomes.pop(0)
        if outcome:
            raise OSError(28, "No space left on device")

    scheduler = Scheduler("test-scheduler")
    try:
        with caplog.at_level(logging.WARNING, logger="pylogq.storage"):
            for _ in range(5):
                scheduler.schedule(flush, delay=3600, name="flush")  # run below, not by its thread
                scheduler.run_pending()
    finally:
        scheduler.shutdown(run_pending=False)
    records = [r for r in caplog.records if "flush" in r.getMessage()]
    assert [(r.levelno, r.exc_info is not None) for r in records] == [
        (logging.ERROR, True), (logging.WARNING, False), (logging.WARNING, False),
        (logging.WARNING, False), (logging.ERROR, True)]
    assert "failed again: OSError: [Errno 28] No space left on device" in records[1].getMessage()
    assert "succeeds again" in records[3].getMessage()
