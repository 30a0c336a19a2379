"""A griffe extension that reads pylogq's docstrings the way they are written, for the API pages.

The docstrings are prose in reStructuredText's inline habits, which Markdown does
not know:

- A role (``:class:`Log```, ``:meth:`~pylogq.Broker.serve```, ``:mod:`.delayed```)
  becomes a link to the object when the site documents it, and code otherwise: an
  optional autorefs reference, so a target the API pages leave out is no warning.
- A literal block's ``text::`` reads ``text:`` (the block itself is indented, so
  Markdown shows it as code too).
- A ``#:`` comment above an attribute (Sphinx's attribute docstring) becomes its
  docstring.
- A name a chooser binds to the compiled kernel or its twin (``pylogq._speedups``)
  is documented by the twin, which has the same names and behaviour and, unlike the
  compiled module, source.
- What a class does not document is hidden: an attribute set in a method
  (``self.x = ...``) without a docstring is internal state, and special methods
  other than ``__init__`` (merged into the class's signature) are Python's
  protocols, not pylogq's API. So is an attribute declared for the type checker
  only (under ``if TYPE_CHECKING:`` in a class body: a mixin naming the state it
  shares with its class) without a docstring. Methods and attributes declared in
  the class body stay, documented or not (a NamedTuple's fields, an error's code).
"""

from __future__ import annotations

import ast
import re
from typing import Any, Dict, List, Optional, Union

import griffe

LITERAL_BLOCK = re.compile(r"(?<=\S)::$", re.M)  # reST's "text::" before a literal block reads "text:"
ROLE = re.compile(r":(?:class|meth|func|attr|data|mod|exc|obj):`(~?)([^`<>]+)`")
PACKAGE = "pylogq"


class PylogqDocstrings(griffe.Extension):
    """The extension ``mkdocs.yml`` loads; it changes only the objects of the ``pylogq`` package."""

    def on_attribute_instance(self, *, node: Union[ast.AST, griffe.ObjectNode], attr: griffe.Attribute,
                              agent: Any, **kwargs: Any) -> None:
        if not attr.path.startswith(PACKAGE + "."):
            return
        if getattr(agent, "current", None) is not None and agent.current.is_function:
            attr.extra[PACKAGE]["set_in_method"] = True  # ``self.x = ...``: the object's state
        elif _under_type_checking(attr):
            attr.extra[PACKAGE]["set_in_method"] = True  # declared for the type checker: the same state
        if attr.docstring is not None:
            return
        lines = _source_lines(attr)
        if lines is None:
            return
        comment: List[str] = []
        number = attr.lineno - 1  # the line above the assignment, 1-based
        while number >= 1 and lines[number - 1].strip().startswith("#:"):
            comment.insert(0, lines[number - 1].strip()[2:].strip())
            number -= 1
        if comment:
            attr.docstring = griffe.Docstring("\n".join(comment), lineno=number + 1, endlineno=attr.lineno - 1,
                                              parent=attr)

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name == PACKAGE:
            self._walk(pkg)

    def _walk(self, obj: griffe.Object) -> None:
        if isinstance(obj, griffe.Module):
            _bind_twins(obj)
        if obj.docstring is not None:
            text = LITERAL_BLOCK.sub(":", obj.docstring.value)
            obj.docstring.value = ROLE.sub(lambda match: _reference(obj, match), text)
        for member in list(obj.members.values()):
            if isinstance(member, griffe.Alias):
                continue
            if obj.is_class and _hidden(member):
                # Removed rather than marked private: the pages show classes through their
                # public aliases (``pylogq.Broker``), whose members do not inherit a mark.
                obj.del_member(member.name)
                continue
            self._walk(member)


def _bind_twins(module: griffe.Module) -> None:
    """A chooser's ``NAME = _kernel.NAME`` becomes an alias of the pure-Python twin's ``NAME``.

    The compiled kernel has the same names and behaviour (``pylogq._speedups``) but no
    source to read; the twin is either a module (``from . import default_records as
    pure``) or ``pure = types.SimpleNamespace(NAME=_py_name, ...)`` in the chooser.
    """
    pure = module.members.get("pure")
    if pure is None or "_kernel" not in module.members:
        return
    twins: Dict[str, str] = {}  # for a twin module: none, its names are looked up in it
    if isinstance(pure, griffe.Alias):
        pass
    elif isinstance(pure, griffe.Attribute) and isinstance(pure.value, griffe.ExprCall):
        twins = {argument.name: str(argument.value) for argument in pure.value.arguments
                 if isinstance(argument, griffe.ExprKeyword)}
    else:
        return
    for name, member in list(module.members.items()):
        if not isinstance(member, griffe.Attribute) or str(member.value) != "_kernel." + name:
            continue
        if isinstance(pure, griffe.Alias):
            target = "%s.%s" % (pure.target_path, name)
        elif name in twins:
            try:
                target = module.resolve(twins[name])
            except griffe.NameResolutionError:
                continue
        else:
            continue
        module.set_member(name, griffe.Alias(name, target, lineno=member.lineno, endlineno=member.endlineno,
                                             parent=module))


def _source_lines(attr: griffe.Attribute) -> Optional[List[str]]:
    """The lines of the file that declares ``attr``; None when griffe has no source for it."""
    if not attr.lineno:
        return None
    try:
        return attr.lines_collection[attr.filepath]  # type: ignore[index,no-any-return]
    except (KeyError, TypeError, ValueError):
        return None


def _under_type_checking(attr: griffe.Attribute) -> bool:
    """Whether the attribute's line sits in an ``if TYPE_CHECKING:`` block (the nearest line above it
    indented less)."""
    lines = _source_lines(attr)
    if lines is None:
        return False
    line = lines[attr.lineno - 1]
    indent = len(line) - len(line.lstrip())
    for number in range(attr.lineno - 2, -1, -1):
        above = lines[number]
        if above.strip() and len(above) - len(above.lstrip()) < indent:
            return above.strip().startswith("if TYPE_CHECKING:")
    return False


def _hidden(member: griffe.Object) -> bool:
    """Whether a class's member stays off the page (see the module docstring)."""
    if member.name.startswith("__") and member.name.endswith("__"):
        return member.name != "__init__"
    return bool(member.is_attribute and member.extra[PACKAGE].get("set_in_method") and not member.has_docstring)


def _reference(obj: griffe.Object, match: "re.Match[str]") -> str:
    """A role as Markdown: an optional cross-reference when its target resolves, else code."""
    short, target = match.group(1) == "~", match.group(2).rstrip("()")
    title = target.rsplit(".", 1)[-1] if short else target.lstrip(".")
    path = _resolve(obj, target)
    if path is None:
        return "`%s`" % title
    return '<autoref identifier="%s" optional>`%s`</autoref>' % (path, title)


def _resolve(obj: griffe.Object, target: str) -> Optional[str]:
    """The full path of ``target`` as written in ``obj``'s docstring; None when it names nothing known."""
    if target.startswith(PACKAGE + "."):
        return target
    if target.startswith("."):  # relative to the package of obj's module
        module = obj.module
        package = module if module.is_package else module.parent
        return "%s.%s" % (package.path, target.lstrip(".")) if package is not None else None
    first, _, rest = target.partition(".")
    try:
        path = obj.resolve(first)
    except griffe.NameResolutionError:
        return None
    return "%s.%s" % (path, rest) if rest else path
