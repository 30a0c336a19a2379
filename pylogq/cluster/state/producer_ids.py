"""Producer ids for idempotent producers (Kafka's InitProducerId), unique across restarts.

Ids are reserved in blocks: the end of the block is written atomically to
``pylogq-producer-ids`` before any id of it is handed out, so a broker that crashes
and restarts starts past every id it may have given (Kafka's ProducerIdManager
reserves its blocks in ZooKeeper the same way).
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Optional, Tuple

from ...errors import CorruptMetadataError
from ...storage.checkpoint import write_atomically

__all__ = ["PRODUCER_ID_BLOCK", "PRODUCER_IDS_FILE", "ProducerIdManager"]

PRODUCER_IDS_FILE = "pylogq-producer-ids"
PRODUCER_ID_BLOCK = 1000
_MAX_ID = 2**62  # far below the int64 of the wire, with room for every block after it


class ProducerIdManager:
    """Hands out producer ids with epoch 0. Thread-safe."""

    def __init__(self, data_dir: str, block_size: int = PRODUCER_ID_BLOCK,
                 allocate: Optional[Callable[[int], Tuple[int, int]]] = None) -> None:
        """``allocate(size)`` -> (first, last) reserves blocks elsewhere (a cluster's metadata
        store, unique across brokers); without it blocks are reserved in this broker's file."""
        self.path = os.path.join(data_dir, PRODUCER_IDS_FILE)
        self.block_size = block_size
        self._allocate = allocate
        self._lock = threading.Lock()
        self._next = self._limit = 0 if allocate is not None else self._read()

    def _read(self) -> int:
        """The end of the last block reserved (0 without the file). A file that does not hold one
        non-negative number raises CorruptMetadataError: ids below an unknown end may have been
        handed out, and a producer given one of them again would be taken for another."""
        try:
            with open(self.path, "rb") as f:
                text = f.read().decode("ascii", "replace").strip()
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise self._corrupt(exc.strerror or str(exc)) from None
        if not text.isdigit() or int(text) > _MAX_ID:
            raise self._corrupt("%r is not a producer id (an integer from 0 to 2**62)" % text[:40])
        return int(text)

    def _corrupt(self, problem: str) -> CorruptMetadataError:
        return CorruptMetadataError(
            self.path, problem,
            "write into it a number above every producer id this broker handed out (its current time in "
            "milliseconds will do), or delete it if no idempotent producer has used this broker")

    def next_id(self) -> Tuple[int, int]:
        """A new (producer id, epoch)."""
        with self._lock:
            if self._next >= self._limit:
                if self._allocate is not None:
                    first, last = self._allocate(self.block_size)
                    self._next, self._limit = first, last + 1
                else:
                    self._limit = self._next + self.block_size
                    write_atomically(self.path, b"%d\n" % self._limit)
            pid = self._next
            self._next += 1
            return pid, 0
