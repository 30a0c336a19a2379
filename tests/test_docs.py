"""Every Python block in docs/*.md runs, so the documentation cannot drift from the code."""

from __future__ import annotations

import logging
import pathlib
import re

import pytest

DOCS = sorted((pathlib.Path(__file__).parent.parent / "docs").glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks():
    for doc in DOCS:
        for i, match in enumerate(BLOCK.finditer(doc.read_text())):
            yield pytest.param(match.group(1), id="%s-%d" % (doc.stem, i))


@pytest.fixture
def logger_levels():
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


@pytest.mark.parametrize("code", list(_blocks()))
def test_doc_example_runs(code, capsys, logger_levels):
    exec(compile(code, "<doc>", "exec"), {"__name__": "__doc_example__"})
