"""Every public module says what its public API is: an ``__all__`` whose every name exists."""

from __future__ import annotations

import importlib
import pkgutil
from typing import List

import pytest

import pylogq


def _public_modules() -> List[str]:
    """Modules and packages no part of whose dotted name starts with ``_``."""
    names = ["pylogq"] + [m.name for m in pkgutil.walk_packages(pylogq.__path__, "pylogq.")]
    return [n for n in names if not any(part.startswith("_") for part in n.split("."))]


PUBLIC = _public_modules()


def test_the_walk_finds_the_package():
    assert {"pylogq", "pylogq.errors", "pylogq.storage", "pylogq.storage.log", "pylogq.cli.main"} <= set(PUBLIC)
    assert not any(name.startswith("pylogq._core") or name.endswith("._impl") for name in PUBLIC)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_module_defines_all_and_every_name_exists(name):
    module = importlib.import_module(name)
    if "__all__" not in vars(module):
        pytest.fail("%s has no __all__" % name)
    listed = list(module.__all__)
    assert all(isinstance(n, str) for n in listed), name
    assert len(listed) == len(set(listed)), "%s lists a name twice" % name
    missing = [n for n in listed if not hasattr(module, n)]
    assert not missing, "%s.__all__ names what it does not have: %s" % (name, missing)
