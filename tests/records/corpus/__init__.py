"""The record-format corpus (see :mod:`.build`): its cases as the tests read them."""

from __future__ import annotations

import gzip
import json
import os
from typing import Any, Dict, NamedTuple, Optional

HERE = os.path.dirname(os.path.abspath(__file__))


class CorpusCase(NamedTuple):
    """One case of the corpus: the bytes, the window, and what reading them gives."""

    name: str
    data: bytes
    start: Optional[int]
    end: Optional[int]
    max_decompressed: int
    jvm_only: bool
    kind: Optional[str]  # the RecordProblem's name the reading fails with, or None
    read: Optional[Dict[str, Any]]  # else: {"records": [...], "entries": [...], "stop": n}
    reference_length: Optional[int]  # pylogq's decoder reads only these first bytes (a tail the walker skips)


def load() -> Dict[str, CorpusCase]:
    """Every case of the manifest, with its file's bytes."""
    with open(os.path.join(HERE, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    out: Dict[str, CorpusCase] = {}
    for name, entry in sorted(manifest.items()):
        with open(os.path.join(HERE, entry["file"]), "rb") as f:
            data = gzip.decompress(f.read())
        out[name] = CorpusCase(name, data, entry["start"], entry["end"], entry["max_decompressed"],
                               entry["jvm_only"], entry.get("kind"), entry.get("read"), entry.get("reference_length"))
    return out
