"""The topic-metadata store: which topics exist, their partition counts and config overrides.

The broker reads and writes topic metadata only through :class:`TopicStore`. A
single node keeps it in ``pylogq-topics.json`` in its data directory
(:class:`FileTopicStore`, written atomically, so a crash leaves the old or the new
file, never a torn one); a cluster's stores (in memory for one process, ZooKeeper's
``/brokers/topics`` and ``/config/topics`` across processes) implement the same calls.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Iterator, Mapping, NamedTuple, Protocol

from ..storage.checkpoint import write_atomically

__all__ = ["FileTopicStore", "TOPICS_FILE", "TopicMetadata", "TopicStore"]

TOPICS_FILE = "pylogq-topics.json"


class TopicMetadata(NamedTuple):
    """One topic: its partition count and its config overrides (dotted keys, string values)."""

    partitions: int
    config: Dict[str, str]


class TopicStore(Protocol):
    """Where topic metadata lives. Callers serialize changes (the broker's lock)."""

    def load(self) -> Dict[str, TopicMetadata]:
        """Every topic, as stored."""
        ...

    def put(self, name: str, metadata: TopicMetadata) -> None:
        """Create or replace a topic's metadata (durable when it returns)."""
        ...

    def remove(self, name: str) -> None:
        """Forget a topic (durable when it returns)."""
        ...


class FileTopicStore:
    """Topic metadata in one JSON file, rewritten atomically on every change. Not thread-safe."""

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, TOPICS_FILE)
        self._topics: Dict[str, TopicMetadata] = {}

    def load(self) -> Dict[str, TopicMetadata]:
        if not os.path.exists(self.path):
            self._topics = {}
        else:
            with open(self.path) as f:
                data = json.load(f)
            self._topics = {t: TopicMetadata(int(m["partitions"]), dict(m.get("config", {})))
                            for t, m in data.get("topics", {}).items()}
        return dict(self._topics)

    def put(self, name: str, metadata: TopicMetadata) -> None:
        self._topics[name] = metadata
        self._save()

    def remove(self, name: str) -> None:
        self._topics.pop(name, None)
        self._save()

    def __iter__(self) -> Iterator[str]:
        return iter(self._topics)

    def _save(self) -> None:
        topics: Mapping[str, Dict[str, object]] = {
            name: {"partitions": m.partitions, "config": m.config} for name, m in self._topics.items()}
        body = json.dumps({"version": 1, "topics": topics}, indent=1, sort_keys=True).encode()
        write_atomically(self.path, body)
