"""pylogq's decoders against the record-format corpus (tests/records/corpus): every named case
reads the records, entries and scan end the manifest holds, or fails with its RecordProblem.

The suite runs this in both passes: compiled, it checks the Cython kernels; with
``PYLOGQ_NO_EXTENSIONS=1``, their pure-Python twins. The JVM reader is checked against the same
files in tests/spark/test_jvm_entries.py.
"""

from __future__ import annotations

from typing import Dict

import pytest

from pylogq.errors import RecordProblem

from .corpus import CorpusCase, load
from .corpus.build import NAMED, Case, read_by_pylogq

CORPUS: Dict[str, CorpusCase] = load()


def test_the_corpus_holds_every_named_case() -> None:
    assert sorted(CORPUS) == sorted(NAMED)


def test_the_corpus_covers_every_problem_and_codec() -> None:
    kinds = {c.kind for c in CORPUS.values() if c.kind is not None}
    assert kinds == {p.name for p in RecordProblem}
    assert sum(c.kind is None for c in CORPUS.values()) >= 40


@pytest.mark.parametrize("name", sorted(n for n, c in CORPUS.items() if not c.jvm_only))
def test_pylogq_reads_what_the_corpus_says(name: str) -> None:
    c = CORPUS[name]
    data = c.data if c.reference_length is None else c.data[:c.reference_length]
    read = read_by_pylogq(Case(data, c.start, c.end, c.max_decompressed))
    if c.kind is not None:
        assert read.get("kind") == c.kind, "expected %s, got %s" % (c.kind, read.get("kind") or "records")
        return
    assert "kind" not in read, "pylogq fails (%s: %s)" % (read["kind"], read["message"])
    assert c.read is not None
    assert read["entries"] == c.read["entries"]
    assert read["stop"] == c.read["stop"]
    assert len(read["records"]) == len(c.read["records"])
    for got, want in zip(read["records"], c.read["records"]):
        assert got == want
