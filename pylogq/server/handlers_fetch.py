"""Fetch: the handler that reads partitions, waiting as a delayed operation for long polls.

Every version Kafka 3.9 serves is answered, 0-17. The response is framed around file
regions (:mod:`.fetch`) so its records go out with sendfile; v0-3 clients read the
legacy message formats, so their records are down-converted
(:mod:`pylogq.records.downconvert`) off the event loop first. From v13 topics are
named by id (Kafka's ``Uuid``), in requests and responses; an id no topic has (the
zero id included) answers UNKNOWN_TOPIC_ID for each of its partitions.

From v11 a consumer's Fetch carries its rack (KIP-392): a leader with a
``replica.selector.class`` may answer a partition with the replica the consumer should
fetch it from instead (``preferred_read_replica``), and a follower serves such a fetch
up to its own high watermark. Below v11 only the leader serves consumers, as in Kafka.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import AbstractSet, Awaitable, Dict, List, Optional, Tuple, Union

from .. import errors
from ..cluster.acl import AclOperation, ResourceType
from ..cluster.contract import FetchResult, RecordBytes, RecordsView
from ..cluster.delayed import DelayedCall
from ..errors import CloseConnection
from ..protocol.message_data import FetchRequest
from ..records.downconvert import ReadAt, down_convert, target_magic
from .authorization import NOTHING_REFUSED
from .connection import Connection, RequestSlot
from .fetch import FIRST_TOPIC_ID, TopicKey, frame_fetch_response, replica_id_of
from .handler_base import Framed, HandlerBase, text_of
from .quotas import REQUEST_PERCENT_PER_SECOND

__all__ = ["FetchHandlers"]

_ZERO_UUID = uuid.UUID(int=0)
_UNKNOWN_TOPIC_ID = errors.UnknownTopicIdError.code
_TOPIC_AUTHORIZATION_FAILED = errors.TopicAuthorizationFailedError.code
#: The first version whose clients read v2 record batches; older ones get legacy messages.
FIRST_V2_RECORDS = 4
#: The first version with the client's current leader epoch (KIP-320).
FIRST_LEADER_EPOCH = 9
#: The first version with the client's rack and the preferred read replica (KIP-392).
FIRST_RACK_ID = 11

Results = Dict[Tuple[str, int], FetchResult]
#: Per topic of a request: how the response names it, its name (None for an unknown id),
#: and its partitions in request order.
Order = List[Tuple[TopicKey, Optional[str], List[int]]]
#: What a Fetch is answered with: its framed response, at once or once it is ready.
Answer = Union[Framed, Awaitable[Framed]]


class FetchHandlers(HandlerBase):
    """Fetch (API 1)."""

    def fetch(self, conn: Connection, req: FetchRequest, version: int, slot: RequestSlot) -> Answer:
        replica_id = replica_id_of(req, version)
        if replica_id >= 0:
            if not self.broker.clustered:
                raise CloseConnection("follower fetches are not served by a single-node broker")
            return self._replica_fetch(conn, req, version, slot, replica_id)
        requests: List[Tuple[str, int, int, int]] = []
        order: Order = []
        offsets: Dict[Tuple[str, int], Tuple[int, int]] = {}  # what down-conversion needs (v0-3)
        fenced: Results = {}
        legacy = version < FIRST_V2_RECORDS
        # Kafka's client metadata: a v11+ consumer may be served by a follower the leader sent it to.
        client_rack = req.rack_id if version >= FIRST_RACK_ID else None
        epoch_fenced = False
        # A consumer reads a topic it may READ; the others' partitions answer TOPIC_AUTHORIZATION_FAILED.
        refused = self._refused_reads(conn, req, version) if self.authz.enabled else NOTHING_REFUSED
        for topic in req.topics:
            name = self._topic_of(topic, version)
            indexes = []
            for p in topic.partitions:
                index = p.partition
                indexes.append(index)
                if name is not None and name in refused:
                    fenced[(name, index)] = FetchResult(_TOPIC_AUTHORIZATION_FAILED, -1, -1, None)
                    continue
                code = self._fenced(name, index, p.current_leader_epoch, client_rack is not None) \
                    if name is not None and version >= FIRST_LEADER_EPOCH else 0
                if name is not None and code:
                    # KIP-320: a client that knows another epoch than the leader's is answered
                    # at once (UNKNOWN_LEADER_EPOCH for a newer one, FENCED for an older one).
                    fenced[(name, index)] = FetchResult(code, -1, -1, None)
                    epoch_fenced = True
                elif name is not None:
                    requests.append((name, index, p.fetch_offset, p.partition_max_bytes))
                    if legacy:
                        offsets[(name, index)] = (p.fetch_offset, p.partition_max_bytes)
            order.append((topic.topic_id if version >= FIRST_TOPIC_ID else name or "", name, indexes))
        # Sessions are not kept: every fetch is a full one (session id 0 in the answer), so
        # forgotten_topics_data, which only an incremental fetch of a session uses, is ignored.
        isolation = "read_committed" if req.isolation_level == 1 else "read_uncommitted"
        max_bytes = min(req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF, self.server.fetch_max_bytes)
        quotas = self.server.quotas
        if quotas.fetch.enabled:
            # Kafka's cap: no more than an idle client may fetch without being throttled at once.
            window_bytes = quotas.fetch.max_value_in_window(conn.quota_user, conn.client_id)
            max_bytes = max(1, min(max_bytes, int(min(window_bytes, 0x7FFFFFFF))))
        # Kafka's fetchMinBytes: a fetch waits for no more than it may be answered with.
        min_bytes = min(req.min_bytes, max_bytes)
        future: "asyncio.Future[Results]" = self.server.new_future()
        # A partition answered at once (fenced) answers the whole fetch at once; so does a fetch
        # left with nothing to read once the refused partitions are out.
        at_once = epoch_fenced or (bool(fenced) and not requests)
        op = self.broker.fetch_async(requests, 0 if at_once else req.max_wait_ms, min_bytes, max_bytes,
                                     isolation, deliver=self.server.deliver_to(future), client_rack=client_rack)
        if op.completed:
            results = {**op.answer(), **fenced} if fenced else op.answer()
            if legacy and _has_records(results):
                return self._fetch_converted(slot, version, order, results, offsets, max_bytes, conn)
            return self._fetch_response(slot, version, order, results, isolation, conn)
        return self._fetch_wait(op, future, version, order, isolation, slot, offsets, max_bytes, fenced, conn)

    def _refused_reads(self, conn: Connection, req: FetchRequest, version: int) -> AbstractSet[str]:
        """The topics of a consumer's fetch it may not READ. (A topic id names one topic for
        ever, so the fetch loop's own lookup of each name finds the same one, or none.)"""
        return self.authz.refused_names(conn, AclOperation.READ, ResourceType.TOPIC,
                                        (self._topic_of(topic, version) for topic in req.topics))

    def _fenced(self, topic: str, partition: int, current: int, follower_ok: bool) -> int:
        """The error for a fetch whose current leader epoch is not the one this replica knows,
        else 0 (``follower_ok``: a v11+ fetch, which a follower serves and fences alike)."""
        if current < 0:
            return 0
        try:
            epoch = self.broker.leader_epoch_of(topic, partition, follower_ok)
        except errors.BrokerError:
            return 0  # the fetch itself answers the partition's error
        if current > epoch:
            return int(errors.UnknownLeaderEpochError.code)
        if current < epoch:
            return int(errors.FencedLeaderEpochError.code)
        return 0

    def _replica_fetch(self, conn: Connection, req: FetchRequest, version: int, slot: RequestSlot,
                       replica_id: int) -> Answer:
        """A follower's Fetch: records up to the leader's log end, waiting for appends."""
        # Loaded on a cluster's first follower Fetch: a single node never needs the replication wire.
        from .replication_wire import decode_replica_fetch

        slot.follower = True
        fetch, order = decode_replica_fetch(req, version, self._topic_of)
        if not self.authz.cluster(conn, AclOperation.CLUSTER_ACTION):
            # Only the brokers fetch as replicas (CLUSTER_ACTION on the cluster).
            results = {(name, i): FetchResult(_TOPIC_AUTHORIZATION_FAILED, -1, -1, None)
                       for _, name, indexes in order if name is not None for i in indexes}
            return self._fetch_response(slot, version, order, results, "read_uncommitted")
        future: "asyncio.Future[Results]" = self.server.new_future()
        op = self.broker.replica_fetch_async(replica_id, fetch.broker_epoch, fetch.partitions, fetch.max_wait_ms,
                                             fetch.min_bytes, fetch.max_bytes, deliver=self.server.deliver_to(future))
        if op.completed:
            return self._fetch_response(slot, version, order, op.answer(), "read_uncommitted")
        return self._replica_fetch_wait(op, future, version, order, slot)

    async def _replica_fetch_wait(self, op: "DelayedCall[Results]", future: "asyncio.Future[Results]", version: int,
                                  order: Order, slot: RequestSlot) -> Framed:
        slot.release()  # parked: the queue is for requests being worked on
        results = await self.server.parked(op, future)
        return self._fetch_response(slot, version, order, results, "read_uncommitted")

    def _topic_of(self, topic: FetchRequest.FetchTopic, version: int) -> Optional[str]:
        """The name of a requested topic; None when it is named by an id no topic has."""
        if version < FIRST_TOPIC_ID:
            return topic.topic
        topic_id = topic.topic_id
        if topic_id == _ZERO_UUID:
            return None
        try:
            return self.broker.topic_name(text_of(topic_id))
        except errors.UnknownTopicIdError:
            return None

    async def _fetch_wait(self, op: "DelayedCall[Results]", future: "asyncio.Future[Results]", version: int,
                          order: Order, isolation: str, slot: RequestSlot,
                          offsets: Dict[Tuple[str, int], Tuple[int, int]], max_bytes: int, fenced: Results,
                          conn: Connection) -> Framed:
        slot.release()  # parked: the queue is for requests being worked on
        results = await self.server.parked(op, future)
        if fenced:
            results = {**results, **fenced}
        if version < FIRST_V2_RECORDS and _has_records(results):
            return await self._fetch_converted(slot, version, order, results, offsets, max_bytes, conn)
        return self._fetch_response(slot, version, order, results, isolation, conn)

    async def _fetch_converted(self, slot: RequestSlot, version: int, order: Order, results: Results,
                               offsets: Dict[Tuple[str, int], Tuple[int, int]], max_bytes: int,
                               conn: Connection) -> Framed:
        """Answer an old version with its records down-converted in the executor: decompressing
        and re-encoding batches must not stall the other connections on the loop.

        The quotas are decided first, on the response's unconverted size, as Kafka decides
        them: a throttled fetch is answered empty and never converted."""
        if self.server.quotas.enabled:
            _, size = frame_fetch_response(slot.correlation_id, version, 0, 0, 0, _topics(order, results))
            throttle_ms = self._fetch_throttle(conn, slot, size)
            if throttle_ms > 0:
                return self._throttled_response(slot, version, throttle_ms, False)
        converted = await self._blocking(_down_convert_results, results, order, offsets, target_magic(version),
                                         max_bytes if version >= 3 else 0x7FFFFFFF)
        return self._fetch_response(slot, version, order, converted, "read_uncommitted")

    def _fetch_response(self, slot: RequestSlot, version: int, order: Order, results: Results,
                        isolation: str, conn: Optional[Connection] = None) -> Framed:
        """The framed response; a consumer's (``conn`` given) is recorded against its quotas
        first, and one over its fetch or request quota is answered as Kafka answers it
        (KIP-219): no partitions, the throttle time, and its bytes taken back, the connection
        then muted for that time."""
        topics = _topics(order, results)
        counts = {0: 1}  # the top-level code (always NONE here), then each partition's
        for _, answers in topics:
            for _, result in answers:
                counts[result.error_code] = counts.get(result.error_code, 0) + 1
        read_committed = isolation == "read_committed"
        parts, size = frame_fetch_response(slot.correlation_id, version, 0, 0, 0, topics,
                                           read_committed=read_committed)
        if conn is not None and self.server.quotas.enabled:
            throttle_ms = self._fetch_throttle(conn, slot, size)
            if throttle_ms > 0:
                return self._throttled_response(slot, version, throttle_ms, read_committed)
        slot.errors = counts
        return Framed(parts)

    @staticmethod
    def _throttled_response(slot: RequestSlot, version: int, throttle_ms: int, read_committed: bool) -> Framed:
        """Kafka's answer to a throttled fetch: no partitions, the throttle time."""
        parts, _ = frame_fetch_response(slot.correlation_id, version, throttle_ms, 0, 0, [],
                                        read_committed=read_committed)
        slot.errors = {0: 1}
        return Framed(parts)

    def _fetch_throttle(self, conn: Connection, slot: RequestSlot, size: int) -> int:
        """Record a consumer's fetch of ``size`` bytes and its handling time; -> the throttle
        time (ms) when over a quota (the bytes then taken back), else 0."""
        quotas = self.server.quotas
        user, client_id = conn.quota_user, conn.client_id
        request_ms = fetch_ms = 0
        if quotas.request.enabled:
            handling = (slot.dispatched or time.monotonic()) - slot.started
            request_ms = quotas.request.record(user, client_id, handling * REQUEST_PERCENT_PER_SECOND)
        if quotas.fetch.enabled:
            fetch_ms = quotas.fetch.record(user, client_id, size)
        throttle_ms = max(request_ms, fetch_ms)
        if throttle_ms <= 0:
            return 0
        quotas.fetch.unrecord(user, client_id, size)  # answered without its records
        (quotas.fetch if fetch_ms > request_ms else quotas.request).throttled(user, client_id, throttle_ms)
        conn.mute_for(throttle_ms)
        return throttle_ms


def _topics(order: Order, results: Results) -> List[Tuple[TopicKey, List[Tuple[int, FetchResult]]]]:
    """Each topic of the response, as it names it, with its partitions' results in request order."""
    return [(key, [(i, _result_of(results, name, i)) for i in indexes]) for key, name, indexes in order]


def _result_of(results: Results, name: Optional[str], index: int) -> FetchResult:
    if name is None:
        return FetchResult(_UNKNOWN_TOPIC_ID, -1, -1, None)
    return results[(name, index)]


def _has_records(results: Results) -> bool:
    return any(r.records is not None and len(r.records) for r in results.values())


def _reader(region: RecordsView) -> ReadAt:
    """``read_at(position, n)`` over a region: pread from its file, one entry at a time,
    when it is a file region; else slices of its bytes."""
    fileno = getattr(region, "fileno", None)
    base = getattr(region, "position", None)
    if fileno is not None and isinstance(base, int):
        fd = fileno()

        def read_file(position: int, n: int) -> bytes:
            return os.pread(fd, n, base + position)

        return read_file
    data = region.read()

    def read_bytes(position: int, n: int) -> bytes:
        return data[position:position + n]

    return read_bytes


def _down_convert_results(results: Results, order: Order, offsets: Dict[Tuple[str, int], Tuple[int, int]],
                          magic: int, max_bytes: int) -> Results:
    """Each partition's records as magic ``magic`` messages (in the executor).

    A partition gets at most its max bytes, and the response at most ``max_bytes``,
    except that the first partition with records gets at least its first message
    set; a partition whose first batch is zstd answers UNSUPPORTED_COMPRESSION_TYPE (76).
    """
    out = dict(results)
    budget = max_bytes
    first = True
    for _, name, indexes in order:
        if name is None:
            continue
        for index in indexes:
            key = (name, index)
            result = results[key]
            region = result.records
            if region is None or not len(region):
                continue
            fetch_offset, partition_max = offsets[key]
            limit = min(partition_max, budget)
            if limit <= 0 and not first:
                out[key] = result._replace(records=RecordBytes(b""))
                continue
            try:
                data = down_convert(_reader(region), len(region), magic, fetch_offset, limit)
            except errors.BrokerError as exc:
                # A zstd first batch (UNSUPPORTED_COMPRESSION_TYPE), or bytes that do not
                # decode: the partition's error, answered as Kafka answers one (no offsets).
                out[key] = FetchResult(int(exc.code), -1, -1, None)
                continue
            budget -= len(data)
            first = first and not data
            out[key] = result._replace(records=RecordBytes(data))
    return out
