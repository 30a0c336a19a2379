"""Every Python block in docs/*.md runs, so the documentation cannot drift from the code."""

from __future__ import annotations

import pathlib
import re

import pytest

DOCS = sorted((pathlib.Path(__file__).parent.parent / "docs").glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks():
    for doc in DOCS:
        for i, match in enumerate(BLOCK.finditer(doc.read_text())):
            yield pytest.param(match.group(1), id="%s-%d" % (doc.stem, i))


@pytest.mark.parametrize("code", list(_blocks()))
def test_doc_example_runs(code, capsys):
    exec(compile(code, "<doc>", "exec"), {"__name__": "__doc_example__"})
