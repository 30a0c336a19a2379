"""Producer ids for idempotent producers (Kafka's InitProducerId), unique across restarts.

Ids are reserved in blocks: the end of the block is written atomically to
``pylogq-producer-ids`` before any id of it is handed out, so a broker that crashes
and restarts starts past every id it may have given (Kafka's ProducerIdManager
reserves its blocks in ZooKeeper the same way).
"""

from __future__ import annotations

import os
import threading
from typing import Tuple

from ..storage.checkpoint import write_atomically

__all__ = ["PRODUCER_ID_BLOCK", "PRODUCER_IDS_FILE", "ProducerIdManager"]

PRODUCER_IDS_FILE = "pylogq-producer-ids"
PRODUCER_ID_BLOCK = 1000


class ProducerIdManager:
    """Hands out producer ids with epoch 0. Thread-safe."""

    def __init__(self, data_dir: str, block_size: int = PRODUCER_ID_BLOCK) -> None:
        self.path = os.path.join(data_dir, PRODUCER_IDS_FILE)
        self.block_size = block_size
        self._lock = threading.Lock()
        start = 0
        if os.path.exists(self.path):
            with open(self.path) as f:
                start = int(f.read().strip() or 0)
        self._next = self._limit = start

    def next_id(self) -> Tuple[int, int]:
        """A new (producer id, epoch)."""
        with self._lock:
            if self._next >= self._limit:
                self._limit = self._next + self.block_size
                write_atomically(self.path, b"%d\n" % self._limit)
            pid = self._next
            self._next += 1
            return pid, 0
