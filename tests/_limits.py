"""Process limits a test needs raised: open files for tests that hold many connections (both ends
of each live in the test's process)."""

from __future__ import annotations

import resource

import pytest


def need_files(count: int) -> None:
    """Raise the soft open-file limit to ``count`` if it is lower, or skip naming the hard limit
    (a failure under ``PYLOGQ_REQUIRE_ALL=1``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < count:
        if hard != resource.RLIM_INFINITY and hard < count:
            pytest.skip("needs %d open files; the hard limit (ulimit -Hn) is %d" % (count, hard))
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, hard))
