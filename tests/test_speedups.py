"""The compiled/pure choice is made once, in one place, one way, and honours PYLOGQ_NO_EXTENSIONS."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

import pylogq
from pylogq import _speedups

KERNELS = tuple(_speedups.KERNELS)
CHOOSERS = sorted({module for modules in _speedups.KERNELS.values() for module in modules})
PACKAGE = Path(pylogq.__file__).parent


def _loaded_in_child(env_value):
    env = dict(os.environ)
    env.pop("PYLOGQ_NO_EXTENSIONS", None)
    if env_value is not None:
        env["PYLOGQ_NO_EXTENSIONS"] = env_value
    code = "import %s; from pylogq import _speedups; print(sorted(_speedups.loaded.items()))" % ", ".join(CHOOSERS)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return dict(eval(out.stdout))


def test_no_extensions_forces_every_twin():
    assert _loaded_in_child("1") == {k: False for k in KERNELS}


def test_current_mode_is_consistent():
    for module in CHOOSERS:
        importlib.import_module(module)

    assert set(_speedups.loaded) == set(KERNELS)
    assert all(v is (not _speedups.NO_EXTENSIONS) for v in _speedups.loaded.values())
    if not _speedups.NO_EXTENSIONS:
        assert _loaded_in_child(None) == {k: True for k in KERNELS}
        assert _loaded_in_child("0") == {k: True for k in KERNELS}


def test_the_choice_is_made_once_per_kernel():
    for name in KERNELS:
        assert _speedups.compiled(name) is _speedups.compiled(name)
    with pytest.raises(ValueError, match="unknown kernel '_nope'"):
        _speedups.compiled("_nope")


def test_every_compiled_kernel_is_registered():
    assert {p.stem for p in (PACKAGE / "_core").glob("*.pyx")} == set(KERNELS)


def _sources() -> Dict[str, ast.Module]:
    trees = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        trees[".".join(parts)] = ast.parse(path.read_text(), str(path))
    return trees


def _chooser_statements(tree: ast.Module) -> List[str]:
    """The kernel of every ``_kernel = compiled("<kernel>") or pure`` (or ``... or _pure()``)
    at the top of a module."""
    found = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "_kernel"):
            continue
        value = node.value
        if (isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) and len(value.values) == 2
                and isinstance(value.values[0], ast.Call) and isinstance(value.values[0].func, ast.Name)
                and value.values[0].func.id == "compiled" and len(value.values[0].args) == 1
                and isinstance(value.values[0].args[0], ast.Constant)
                and (isinstance(value.values[1], ast.Name) and value.values[1].id == "pure"
                     # or a twin built only when it is needed: `compiled("<kernel>") or _pure()`
                     or isinstance(value.values[1], ast.Call) and not value.values[1].args
                     and isinstance(value.values[1].func, ast.Name) and value.values[1].func.id == "_pure")):
            found.append(value.values[0].args[0].value)
    return found


def test_every_kernel_is_chosen_one_way_by_its_registered_choosers():
    problems = []
    for module, tree in _sources().items():
        if module == "pylogq._speedups" or module.startswith("pylogq._core"):
            continue
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", getattr(n.func, "attr", None)) == "compiled"]
        chosen = _chooser_statements(tree)
        expected = [k for k, choosers in _speedups.KERNELS.items() if module in choosers]
        if sorted(chosen) != sorted(expected) or len(calls) != len(chosen):
            problems.append("%s: chooses %s with compiled() called %d times; KERNELS says it chooses %s "
                            "with `_kernel = compiled(name) or pure`" % (module, chosen, len(calls), expected))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + ["%s.%s" % (node.module or "", a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, (ast.Name, ast.Attribute)):
                names = [getattr(node, "id", getattr(node, "attr", ""))]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("pylogq._core"):
                names = [node.value] if " " not in node.value else []
            if any(n.split(".")[-1] in ("_core", "NO_EXTENSIONS") or n.startswith(("_core.", "pylogq._core."))
                   for n in names):
                problems.append("%s:%d reaches the kernels or the switch itself" % (module, node.lineno))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("module", CHOOSERS)
def test_a_chooser_binds_the_chosen_kernel_and_its_twin_has_every_name(module):
    mod = importlib.import_module(module)
    tree = ast.parse(Path(mod.__file__).read_text())
    targets = [(node.targets[0] if isinstance(node, ast.Assign) else node.target, node.value)
               for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))]
    bound = [target.id for target, value in targets
             if isinstance(target, ast.Name) and isinstance(value, ast.Attribute)
             and getattr(value.value, "id", None) == "_kernel" and value.attr == target.id]
    assert bound, "%s binds no names from _kernel" % module
    (kernel,) = [k for k, choosers in _speedups.KERNELS.items() if module in choosers]
    compiled = None if _speedups.NO_EXTENSIONS else importlib.import_module("pylogq._core." + kernel)
    for name in bound:
        assert hasattr(mod.pure, name), "%s.pure lacks %s" % (module, name)
        chosen = getattr(compiled if compiled is not None else mod.pure, name)
        assert getattr(mod, name) is chosen, (module, name)
