"""The one place that chooses between compiled kernels and their pure-Python twins.

Each kernel module ``pylogq._core.<name>`` has a pure-Python twin outside
``_core`` with the same public names, and a *chooser*: the public module that
holds (or imports) the twin and binds the names its callers use. A chooser does
it in exactly one way, once, at import::

    pure = types.SimpleNamespace(offset_index_lookup=_py_offset_index_lookup, ...)
    # (or a twin module: ``from . import default_records as pure``)

    _kernel = compiled("_index") or pure
    offset_index_lookup = _kernel.offset_index_lookup
    ...

A twin that costs something to build (a library to import, tables to fill) is built by
a function instead, ``_kernel = compiled("_crc") or _pure()``, which the module's
``__getattr__`` also answers ``pure`` with: a process on the kernel never builds it.

Everything else imports those names from the chooser: no other module imports
``pylogq._core``, calls :func:`compiled`, catches an ImportError around a
kernel or reads ``PYLOGQ_NO_EXTENSIONS``. :data:`KERNELS` lists every kernel
with its choosers, so the test suite can import them and check what they got.

``PYLOGQ_NO_EXTENSIONS=1`` forces pure Python. :data:`loaded` records the
choice for each kernel (made on its first request; later requests get the same
module), so a run fails loudly when a compiled module was expected and did not
load (``tests/conftest.py``); :data:`failures` keeps the ImportError that sent
a kernel to its twin.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Dict, Optional, Tuple

__all__ = ["KERNELS", "NO_EXTENSIONS", "compiled", "failures", "loaded"]

NO_EXTENSIONS: bool = os.environ.get("PYLOGQ_NO_EXTENSIONS", "") not in ("", "0")

#: kernel name -> the modules that choose it (each binds its own share of the names).
KERNELS: Dict[str, Tuple[str, ...]] = {
    "_crc": ("pylogq.records.crc",),
    "_records": ("pylogq.records._impl",),
    "_index": ("pylogq.storage.index_search",),
    # One kernel for the hashes: the compaction map's, and the partitioner's murmur2
    # (which the TCP client needs without loading storage).
    "_offset_map": ("pylogq.storage.offset_map", "pylogq.cluster.partitioner"),
}

#: kernel name -> True if the compiled module is in use, False for the twin.
loaded: Dict[str, bool] = {}

#: kernel name -> the ImportError that sent it to the twin (for diagnostics).
failures: Dict[str, BaseException] = {}

_chosen: Dict[str, Optional[ModuleType]] = {}


def compiled(name: str) -> Optional[ModuleType]:
    """The compiled module ``pylogq._core.<name>``, or None to use the twin.

    The choice is made on the first call for ``name`` and kept: every chooser of
    a kernel gets the same answer.
    """
    if name in _chosen:
        return _chosen[name]
    if name not in KERNELS:
        raise ValueError("unknown kernel %r: list it and its choosers in pylogq._speedups.KERNELS" % (name,))
    module: Optional[ModuleType] = None
    if not NO_EXTENSIONS:
        try:
            module = importlib.import_module("pylogq._core." + name)
        except ImportError as exc:
            failures[name] = exc
    _chosen[name] = module
    loaded[name] = module is not None
    return module
