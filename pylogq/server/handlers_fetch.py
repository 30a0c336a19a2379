"""Fetch: the handler that reads partitions, waiting as a delayed operation for long polls.

The response is framed around file regions (:mod:`.fetch`) so its records go out with sendfile.
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Tuple

from ..cluster.contract import FetchResult
from ..cluster.delayed import DelayedCall
from ..errors import CloseConnection
from .connection import Connection
from .fetch import frame_fetch_response
from .handler_base import Framed, HandlerBase, resolve

__all__ = ["FetchHandlers"]


class FetchHandlers(HandlerBase):
    """Fetch (API 1)."""

    def fetch(self, conn: Connection, req: Dict[str, Any], version: int, slot: Any) -> Any:
        if req["replica_id"] >= 0:
            raise CloseConnection("follower fetches are not served by a single-node broker")
        requests: List[Tuple[str, int, int, int]] = []
        order: List[Tuple[str, List[int]]] = []
        for topic in req["topics"]:
            indexes = []
            for p in topic["partitions"]:
                requests.append((topic["topic"], p["partition"], p["fetch_offset"], p["partition_max_bytes"]))
                indexes.append(p["partition"])
            order.append((topic["topic"], indexes))
        isolation = "read_committed" if req["isolation_level"] == 1 else "read_uncommitted"
        max_bytes = min(req["max_bytes"] if req["max_bytes"] > 0 else 0x7FFFFFFF, self.server.fetch_max_bytes)
        future: "asyncio.Future[Dict[Tuple[str, int], FetchResult]]" = self.server.new_future()
        op = self.broker.fetch_async(requests, req["max_wait_ms"], req["min_bytes"], max_bytes, isolation,
                                     deliver=self.server.on_loop(resolve, future))
        if op.completed:
            return self._fetch_response(slot, version, order, op.answer(), isolation)
        return self._fetch_wait(op, future, version, order, isolation, slot)

    async def _fetch_wait(self, op: "DelayedCall[Dict[Tuple[str, int], FetchResult]]",
                          future: "asyncio.Future[Dict[Tuple[str, int], FetchResult]]", version: int,
                          order: List[Tuple[str, List[int]]], isolation: str, slot: Any) -> Any:
        slot.release()  # parked: the queue is for requests being worked on
        results = await self.server.parked(op, future)
        return self._fetch_response(slot, version, order, results, isolation)

    def _fetch_response(self, slot: Any, version: int, order: List[Tuple[str, List[int]]],
                        results: Dict[Tuple[str, int], FetchResult], isolation: str) -> "Framed":
        topics = [(name, [(i, results[(name, i)]) for i in indexes]) for name, indexes in order]
        parts, _ = frame_fetch_response(slot.correlation_id, version, 0, 0, 0, topics,
                                        read_committed=isolation == "read_committed")
        return Framed(parts)

