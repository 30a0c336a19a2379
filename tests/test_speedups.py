"""The compiled/pure choice is made once, in one place, and honours PYLOGQ_NO_EXTENSIONS."""

from __future__ import annotations

import os
import subprocess
import sys

from pylogq import _speedups

KERNELS = ("_crc", "_records", "_index", "_offset_map")


def _loaded_in_child(env_value):
    env = dict(os.environ)
    env.pop("PYLOGQ_NO_EXTENSIONS", None)
    if env_value is not None:
        env["PYLOGQ_NO_EXTENSIONS"] = env_value
    code = (
        "import pylogq.records, pylogq.storage.index_search, pylogq.storage.offset_map;"
        "from pylogq import _speedups; print(sorted(_speedups.loaded.items()))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return dict(eval(out.stdout))


def test_no_extensions_forces_every_twin():
    assert _loaded_in_child("1") == {k: False for k in KERNELS}


def test_current_mode_is_consistent():
    import pylogq.records  # noqa: F401
    import pylogq.storage.index_search  # noqa: F401
    import pylogq.storage.offset_map  # noqa: F401

    assert set(_speedups.loaded) == set(KERNELS)
    assert all(v is (not _speedups.NO_EXTENSIONS) for v in _speedups.loaded.values())
    if not _speedups.NO_EXTENSIONS:
        assert _loaded_in_child(None) == {k: True for k in KERNELS}
        assert _loaded_in_child("0") == {k: True for k in KERNELS}
