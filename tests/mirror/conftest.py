"""The mirror's tests' two clusters (tests/mirror/_support.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from ._support import Clusters, brokers


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[Clusters]:
    """Brokers A (the source) and B (the target) in this process, served on loopback."""
    yield from brokers(tmp_path)
