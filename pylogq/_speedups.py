"""The one place that chooses between compiled kernels and their pure-Python twins.

Each kernel module in ``pylogq._core`` has a twin outside ``_core`` with the same
public names. Callers ask :func:`compiled` once, at import, and bind names from
whichever module it returns. ``PYLOGQ_NO_EXTENSIONS=1`` forces pure Python;
:data:`loaded` records what each request got so the test suite can fail loudly
when a compiled module was expected and did not load.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Dict, Optional

NO_EXTENSIONS: bool = os.environ.get("PYLOGQ_NO_EXTENSIONS", "") not in ("", "0")

#: kernel name -> True if the compiled module is in use, False for the twin.
loaded: Dict[str, bool] = {}

#: kernel name -> the ImportError that sent it to the twin (for diagnostics).
failures: Dict[str, BaseException] = {}


def compiled(name: str) -> Optional[ModuleType]:
    """The compiled module ``pylogq._core.<name>``, or None to use the twin."""
    if NO_EXTENSIONS:
        loaded[name] = False
        return None
    try:
        module = importlib.import_module("pylogq._core." + name)
    except ImportError as exc:
        failures[name] = exc
        loaded[name] = False
        return None
    loaded[name] = True
    return module
