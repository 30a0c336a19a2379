"""The Spark install has one answer: the ``spark`` extra, named alike by docs/spark.md and the error."""

from __future__ import annotations

import pathlib
import sys

import pytest

from pylogq.spark import splits

SPARK_DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "spark.md"
INSTALLED = "pip install 'pylogq[spark]'"  # where pylogq is installed, editable or not
CHECKOUT = "pip install -e '.[spark]'"  # a checkout not installed yet


def test_without_pyarrow_the_error_names_the_extra_as_the_docs_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    with pytest.raises(ImportError) as caught:
        splits._pyarrow()
    message = str(caught.value)
    assert message.startswith("pylogq.spark needs pyarrow: " + INSTALLED), message
    assert CHECKOUT in message, message
    doc = SPARK_DOC.read_text()
    assert INSTALLED in doc and CHECKOUT in doc


def test_the_docs_name_no_install_other_than_the_extra() -> None:
    doc = SPARK_DOC.read_text()
    commands = [line for line in doc.splitlines() if "pip install" in line]
    assert commands
    for line in commands:
        for part in line.split("pip install")[1:]:
            assert part.lstrip().startswith(("'pylogq[spark]'", "-e '.[spark]'", ".`", "-e .`")), line
