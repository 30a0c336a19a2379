"""Every Python block of the docs runs and checks what it shows, so the documentation cannot drift.

The convention: a ```` ```python ```` block in ``docs/*.md`` (or ``README.md``) is runnable,
and it states its results as ``assert`` lines, which a reader takes for the expected
output (``assert [m.value for m in msgs] == [b"hello"]``). A ``print`` may show the reader
more, with what it prints in a comment, but a print checks nothing: the asserts do. Each
runnable block must hold at least one ``assert``, and every one of its asserts must run
(an assert in an ``except`` clause runs only if the error it describes was raised), else
this test fails naming the lines. A block that is not meant to run is fenced as ``text``.
"""

from __future__ import annotations

import ast
import logging
import pathlib
import re
import tempfile
from typing import Iterator, List, Set

import pytest

ROOT = pathlib.Path(__file__).parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
#: The name an instrumented block records each assert it ran in (its line in the block).
_RAN = "__doc_asserts_ran__"


def _blocks() -> Iterator[object]:
    for doc in DOCS:
        for i, match in enumerate(BLOCK.finditer(doc.read_text())):
            yield pytest.param(match.group(1), id="%s-%d" % (doc.stem, i))


class _RecordAsserts(ast.NodeTransformer):
    """Put ``__doc_asserts_ran__.add(<line>)`` before every assert of a block."""

    def __init__(self) -> None:
        self.lines: List[int] = []

    def visit_Assert(self, node: ast.Assert) -> List[ast.stmt]:
        self.lines.append(node.lineno)
        mark = ast.parse("%s.add(%d)" % (_RAN, node.lineno)).body[0]
        return [ast.copy_location(mark, node), node]


def _instrumented(code: str) -> "tuple[object, List[int]]":
    tree = ast.parse(code, "<doc>")
    recorder = _RecordAsserts()
    tree = ast.fix_missing_locations(recorder.visit(tree))
    return compile(tree, "<doc>", "exec"), recorder.lines


@pytest.fixture
def logger_levels() -> Iterator[None]:
    """Examples may quiet pylogq's loggers (as a user would); later tests need them as they were."""
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict) if name.startswith("pylogq")]
    loggers.append(logging.getLogger("pylogq"))
    levels = [(logger, logger.level) for logger in loggers]
    yield
    for logger, level in levels:
        logger.setLevel(level)
    for name in list(logging.root.manager.loggerDict):  # loggers the example created
        if name.startswith("pylogq") and all(name != logger.name for logger, _ in levels):
            logging.getLogger(name).setLevel(logging.NOTSET)


@pytest.fixture
def temporary_files_in_the_test(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples make their data directories as a reader would, with ``tempfile.mkdtemp()``;
    under the test they go in its own directory, which pytest removes, not in the machine's /tmp
    (a whole suite's worth, every run)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.mark.parametrize("code", list(_blocks()))
def test_doc_example_runs_and_checks_what_it_shows(code: str, capsys: pytest.CaptureFixture[str],
                                                    logger_levels: None, temporary_files_in_the_test: None) -> None:
    compiled, lines = _instrumented(code)
    assert lines, "this block checks nothing: state its result with an assert"
    ran: Set[int] = set()
    exec(compiled, {"__name__": "__doc_example__", _RAN: ran})
    never = sorted(set(lines) - ran)
    assert not never, "the asserts on lines %s of this block never ran: %s" % (
        never, "; ".join(code.splitlines()[n - 1].strip() for n in never))


def test_an_unchecked_block_or_an_assert_that_never_runs_is_found() -> None:
    """The instrumentation sees what the test above relies on it to see."""
    _, lines = _instrumented("print('hello')\n")
    assert lines == []
    code = "try:\n    x = 1\nexcept ValueError as exc:\n    assert 'bad' in str(exc)\nassert x == 1\n"
    compiled, lines = _instrumented(code)
    ran: Set[int] = set()
    exec(compiled, {_RAN: ran})
    assert (lines, sorted(ran)) == ([4, 5], [5])
