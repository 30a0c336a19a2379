"""``PYLOGQ_REQUIRE_ALL=1`` turns every skip into a failure, under both conftests the test command runs.

A child pytest runs in a temporary directory on two tiny modules: one that
``importorskip``s a missing module at collection, one that skips at run time
(beside a passing test and an expected failure). The child loads
tests/conftest.py or benchmarks/conftest.py as a plugin, as ``pytest tests``
and ``pytest benchmarks`` load them. Without the variable both modules skip
with their reasons and the run passes; with it, the collection skip is a
collection error and the run-time skip a failed test, each naming the reason.
Under benchmarks/conftest.py a timed run (``--quick``, as the test command runs the
benchmarks) prints each group's ratio; under the variable a group whose reference row
was not measured fails the run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

#: The skip hooks and the child runs are the same Python in both passes, and the test command runs
#: the benchmarks compiled only: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

ROOT = Path(__file__).resolve().parent.parent
MISSING = "pylogq_no_such_module"

COLLECT_SKIP = '''
import pytest

pytest.importorskip("%s", reason="%s is not installed")


def test_never_collected():
    pass
''' % (MISSING, MISSING)

RUN_SKIP = '''
import pytest


def test_skips():
    pytest.skip("the external part is missing")


def test_passes():
    pass


@pytest.mark.xfail(reason="an expected failure is not a skip", strict=True)
def test_expected_failure():
    assert False
'''

#: How each conftest is loaded in the child: the plugin's module name and the paths it imports from.
CONFTESTS: Dict[str, Tuple[str, List[Path]]] = {
    "tests": ("tests.conftest", [ROOT]),
    "benchmarks": ("conftest", [ROOT / "benchmarks", ROOT]),
}


def _pytest(directory: Path, conftest: str, require_all: str, *modules: str) -> Tuple[int, str]:
    plugin, paths = CONFTESTS[conftest]
    env = dict(os.environ, PYLOGQ_REQUIRE_ALL=require_all)
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in paths] + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", plugin, "-p", "no:cacheprovider", "-q", "-rs", *modules],
        cwd=directory, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def modules(tmp_path: Path) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the child's rootdir: not the checkout's settings
    (tmp_path / "test_collect_skip.py").write_text(COLLECT_SKIP)
    (tmp_path / "test_run_skip.py").write_text(RUN_SKIP)
    return tmp_path


@pytest.mark.parametrize("conftest", list(CONFTESTS))
def test_without_require_all_skips_pass_with_their_reasons(modules: Path, conftest: str) -> None:
    status, out = _pytest(modules, conftest, "0", "test_collect_skip.py", "test_run_skip.py")
    assert status == pytest.ExitCode.OK, out
    assert re.search(r"SKIPPED \[1\] test_collect_skip.py:\d+: %s is not installed" % MISSING, out), out
    assert re.search(r"SKIPPED \[1\] test_run_skip.py:\d+: the external part is missing", out), out
    assert "1 passed, 2 skipped, 1 xfailed" in out, out
    assert "skipped under PYLOGQ_REQUIRE_ALL" not in out, out


@pytest.mark.parametrize("conftest", list(CONFTESTS))
def test_require_all_fails_a_skip_at_collection(modules: Path, conftest: str) -> None:
    status, out = _pytest(modules, conftest, "1", "test_collect_skip.py")
    assert status == pytest.ExitCode.INTERRUPTED, out
    assert "ERROR collecting test_collect_skip.py" in out, out
    assert "skipped under PYLOGQ_REQUIRE_ALL=1: %s is not installed" % MISSING in out, out
    assert "skipped" not in out.splitlines()[-1], out  # counted as an error, not a skip


@pytest.mark.parametrize("conftest", list(CONFTESTS))
def test_require_all_fails_a_skip_at_run_time(modules: Path, conftest: str) -> None:
    status, out = _pytest(modules, conftest, "1", "test_run_skip.py")
    assert status == pytest.ExitCode.TESTS_FAILED, out
    assert "skipped under PYLOGQ_REQUIRE_ALL=1: the external part is missing" in out, out
    assert "1 failed, 1 passed, 1 xfailed" in out, out


# A benchmark group of two rows; ``-k`` leaves its reference row out or keeps it.
GROUP = '''
from summary import info


def _spin():
    return sum(range(100))


def test_row(benchmark):
    info(benchmark, "spin", 100, "numbers")
    benchmark.pedantic(_spin, rounds=3, iterations=1)


def test_reference(benchmark):
    info(benchmark, "spin", 100, "numbers", peer=True)
    benchmark.pedantic(_spin, rounds=3, iterations=1)
'''


@pytest.fixture
def group(tmp_path: Path) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_group.py").write_text(GROUP)
    return tmp_path


@pytest.mark.parametrize("require_all", ["0", "1"])
def test_a_timed_group_prints_its_ratio(group: Path, require_all: str) -> None:
    status, out = _pytest(group, "benchmarks", require_all, "--quick", "test_group.py")
    assert status == pytest.ExitCode.OK, out
    assert re.search(r"test_reference .* 1\.00x  \(ref\)", out) and re.search(r"test_row .* \d+\.\d\dx\n", out), out
    assert "without a measured ratio" not in out, out


@pytest.mark.parametrize("require_all", ["0", "1"])
def test_a_timed_group_without_its_reference_fails_under_require_all(group: Path, require_all: str) -> None:
    status, out = _pytest(group, "benchmarks", require_all, "--quick", "test_group.py", "-k", "test_row")
    assert "(no reference row measured in this run: no ratio)" in out, out
    assert "group 'spin': no reference row (peer=True) measured in this run" in out, out
    if require_all == "1":
        assert status == pytest.ExitCode.TESTS_FAILED, out
        assert "(a failure under PYLOGQ_REQUIRE_ALL=1)" in out, out
    else:
        assert status == pytest.ExitCode.OK, out
