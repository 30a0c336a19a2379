"""Kafka API handlers: decoded requests in, the broker's operations, responses out.

Each handler takes the connection, the decoded request (a dict keyed by the snake_case
field names of Kafka's schemas), the API version and the request's queue slot, and
returns the response body as a dict, a list of framed parts (Fetch), ``None`` for no
response (Produce with acks=0), or a coroutine for requests that wait (long-poll
fetches, group joins). A request that waits for an event (a long-poll fetch, a join
waiting for the other members, a follower's sync) is one of the broker's delayed
operations (:mod:`pylogq.cluster.delayed`), whose answer resolves a future on the
loop: no thread is parked for it. Operations that do file work (topic creation and
deletion) run in the server's executor, and so do Produce requests whose data must be
decompressed (:meth:`Handlers.produce`); quick ones run inline.

Errors that belong to one topic, partition or group become that entry's error code,
with Kafka's codes from :mod:`pylogq.errors`; nothing a client sends can raise out of
a handler except :class:`CloseConnection` (what Kafka does for requests it cannot
parse or must refuse).
"""

from __future__ import annotations

import asyncio
import logging
import re
import struct
import time
import uuid
from typing import Awaitable, Callable, Dict, FrozenSet, List, NamedTuple, Optional, Tuple, Union

from .. import errors
from ..cluster.acl import AclOperation, ResourceType
from ..cluster.contract import ProduceResult, TopicDescription
from ..cluster.delayed import DelayedCall
from ..cluster.names import INTERNAL_TOPICS
from ..errors import CloseConnection
from ..protocol import (
    API_NAMES,
    REQUESTS,
    RESPONSE_HEADER,
    RESPONSES,
    SUPPORTED_VERSIONS,
    ApiKey,
    Reader,
    Writer,
    header_versions,
)
from ..protocol.message_data import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    ResponseHeader,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from ..protocol.schema import Message
from ..records import uncompressed_v2
from .connection import Connection, Outcome, Part, Parts, RequestSlot
from .context import ServerContext
from .authorization import CLUSTER_CHECKS, NOTHING_REFUSED, refused
from .quotas import REQUEST_PERCENT_PER_SECOND
from .handler_base import (
    NOT_COMPUTED,
    ZERO_UUID,
    Framed,
    error_code,
    error_counts,
    error_message,
    text_of,
    uuid_of,
)
from .handlers_acls import AclHandlers
from .handlers_admin import AdminHandlers
from .handlers_fetch import FetchHandlers
from .handlers_groups import GroupHandlers
from .handlers_operations import OperationsHandlers
from .handlers_quotas import QuotaHandlers
from .handlers_replication import ReplicationHandlers
from .handlers_scram import ScramHandlers
from .handlers_transactions import TransactionHandlers

log = logging.getLogger("pylogq.server")

__all__ = ["Handlers"]

_UNSUPPORTED_VERSION = errors.UnsupportedVersionError.code
_I32 = struct.Struct(">i")
# Topics one Metadata request may auto-create; the others answer LEADER_NOT_AVAILABLE
# (retriable) and are created by the client's next request.
MAX_AUTO_CREATE_PER_REQUEST = 100
# Produce requests with compressed (or v0/v1) data appended in the executor at once; more wait
# for a turn on the loop, holding no thread. Each may hold a decompression window (8 MiB,
# records.codecs.DECOMPRESS_WINDOW); the streams past it are bounded on their own.
MAX_DECOMPRESSING_PRODUCES = 4
# The highest DescribeGroups version aiokafka decodes right (see Handlers.api_versions).
_AIOKAFKA_DESCRIBE_GROUPS_MAX = 2
# What ApiVersions v3+ accepts as a client's software name and version (Kafka's pattern).
_SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
_LEADER_NOT_AVAILABLE = errors.LeaderNotAvailableError.code
_TOPIC = ResourceType.TOPIC
_WRITE = AclOperation.WRITE
_DESCRIBE = AclOperation.DESCRIBE
# ListOffsets' special timestamp for the record with the largest timestamp (KIP-734).
MAX_TIMESTAMP = -3
# Marks a Metadata v12 topic asked for by id among the names (no topic name holds a NUL).
_BY_ID = "\x00id:"
#: The requests no client quota counts or throttles: those Kafka's KafkaApis answers with
#: sendResponseExemptThrottle that pylogq serves (the controller's LeaderAndIsr, StopReplica and
#: UpdateMetadata, a broker's ControlledShutdown; a follower's Fetch is exempt in its handler),
#: and SaslHandshake and SaslAuthenticate, which Kafka's authenticator answers.
QUOTA_EXEMPT_APIS: FrozenSet[int] = frozenset({
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
#: What a handler answers: a response, pre-framed parts (Fetch), a frame list, or None (acks=0).
Answer = Union[None, Message, Framed, List[Part]]
#: What a handler method returns: its answer, or an awaitable of it.
Handled = Union[Answer, Awaitable[Answer]]



class _Replicating(NamedTuple):
    """A Produce response waiting for acks=all partitions: (their entry, operation, future)."""

    response: ProduceResponse
    partitions: List[Tuple[ProduceResponse.PartitionProduceResponse, DelayedCall[ProduceResult],
                           "asyncio.Future[ProduceResult]"]]


class Handlers(AdminHandlers, FetchHandlers, GroupHandlers, OperationsHandlers, QuotaHandlers, ReplicationHandlers,
               ScramHandlers, AclHandlers, TransactionHandlers):
    """Every API pylogq-broker answers, bound to one server and its broker."""

    # APIs a SASL listener answers before authentication (SaslAuthenticate only after a handshake).
    BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
    #: What a broker of a cluster answers before it has joined (see Broker.when_joined): the
    #: other brokers' requests, the handshake, and fetches (which answer only what it hosts);
    #: other requests wait until it has joined.
    BEFORE_JOINING = BEFORE_AUTHENTICATION | frozenset({
        ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.FETCH})
    # The group coordinator's APIs: on a single node the first of them creates __consumer_offsets
    # (off the loop) when no FindCoordinator did; a cluster's other brokers answer NOT_COORDINATOR.
    GROUP_APIS = frozenset({ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.JOIN_GROUP, ApiKey.HEARTBEAT,
                            ApiKey.LEAVE_GROUP, ApiKey.SYNC_GROUP, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS,
                            ApiKey.OFFSET_DELETE, ApiKey.TXN_OFFSET_COMMIT})

    def __init__(self, server: ServerContext) -> None:
        super().__init__(server)
        # Each API's handler is the method named after it (ApiKey.JOIN_GROUP -> join_group).
        self._table: Dict[int, Callable[..., Handled]] = {key: getattr(self, key.name.lower()) for key in ApiKey}
        missing = set(SUPPORTED_VERSIONS) ^ set(self._table)
        if missing:
            raise AssertionError("handlers and SUPPORTED_VERSIONS disagree on API keys %s" % sorted(missing))
        if self.authz.enabled:  # without an authorizer no request pays for the check
            for api_key, operation in CLUSTER_CHECKS.items():
                self._table[api_key] = self._cluster_checked(api_key, operation, self._table[api_key])
        self._api_versions = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                              for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())]
        self._api_versions_for_aiokafka = [
            ApiVersionsResponse.ApiVersion(api_key=entry.api_key, min_version=entry.min_version,
                                           max_version=min(entry.max_version, _AIOKAFKA_DESCRIBE_GROUPS_MAX))
            if entry.api_key == ApiKey.DESCRIBE_GROUPS else entry for entry in self._api_versions
        ]
        # Loop state of the produces appended off the loop: the turns, and per partition how
        # many are appending (an inline append there would wait for the partition's lock).
        self._decompressing = asyncio.Semaphore(MAX_DECOMPRESSING_PRODUCES)
        self._appending_off_loop: Dict[Tuple[str, int], int] = {}

    # -- framing --------------------------------------------------------------------

    @staticmethod
    def supported(api_key: int) -> Optional[Tuple[int, int]]:
        return SUPPORTED_VERSIONS.get(api_key)

    @staticmethod
    def name(api_key: int) -> str:
        return API_NAMES.get(api_key, "API %d" % api_key)

    @staticmethod
    def request_header_version(api_key: int, version: int) -> int:
        return header_versions(api_key, version)[0]

    @staticmethod
    def decode(api_key: int, version: int, reader: Reader) -> Message:
        """A request as its class (:mod:`pylogq.protocol.message_data`). Bytes after it are
        ignored, as Kafka ignores them: librdkafka 2.16 ends its Metadata v12 for every topic
        with three bytes past the schema's fields."""
        request: Message = REQUESTS[api_key].read(reader, version)
        return request

    @staticmethod
    def encode(api_key: int, version: int, correlation_id: int, body: Message) -> List[Part]:
        """A whole response frame (size prefix, header, body) as one part."""
        w = Writer()
        w.int32(0)
        RESPONSE_HEADER.encode_into(w, ResponseHeader(correlation_id=correlation_id),
                                    header_versions(api_key, version)[1])
        RESPONSES[api_key].encode_into(w, body, version)
        data = bytearray(w.getvalue())
        _I32.pack_into(data, 0, len(data) - 4)
        return [bytes(data)]

    def _cluster_checked(self, api_key: int, operation: AclOperation,
                         handler: Callable[..., Handled]) -> Callable[..., Handled]:
        """``handler`` behind the cluster operation its API needs (:data:`CLUSTER_CHECKS`):
        refused, the request is answered as Kafka's getErrorResponse answers it and the
        handler never runs, so it changes nothing."""
        def checked(conn: Connection, request: Message, version: int, slot: RequestSlot) -> Handled:
            if not self.authz.cluster(conn, operation):
                answer, why = refused(api_key, request, version, operation)
                log.info("refused id=%d peer=%s principal=%s: %s", conn.id, conn.peer, conn.principal, why)
                return answer
            return handler(conn, request, version, slot)

        return checked

    def handle(self, conn: Connection, api_key: int, version: int, correlation_id: int,
               request: Message, slot: RequestSlot) -> Outcome:
        if api_key in self.GROUP_APIS and not self.broker.offsets_topic_ready() and not self.broker.clustered:
            return self._finish(conn, self._after_offsets_topic(conn, api_key, version, request, slot),
                                api_key, version, correlation_id, slot)
        result = self._table[api_key](conn, request, version, slot)
        if isinstance(result, Awaitable):
            return self._finish(conn, result, api_key, version, correlation_id, slot)
        return self._respond(conn, api_key, version, correlation_id, result, slot)

    async def _after_offsets_topic(self, conn: Connection, api_key: int, version: int, request: Message,
                                   slot: RequestSlot) -> Answer:
        await self._admin(self.broker.ensure_offsets_topic)
        result = self._table[api_key](conn, request, version, slot)
        return await result if isinstance(result, Awaitable) else result

    async def _finish(self, conn: Connection, pending: Awaitable[Answer], api_key: int, version: int,
                      correlation_id: int, slot: RequestSlot) -> Parts:
        return self._respond(conn, api_key, version, correlation_id, await pending, slot)

    def _respond(self, conn: Connection, api_key: int, version: int, correlation_id: int, body: Answer,
                 slot: RequestSlot) -> Parts:
        if body is None or isinstance(body, list):
            if api_key == ApiKey.PRODUCE and body is None:  # acks=0: no answer, but the bytes count
                self._throttle(conn, api_key, slot, None)
            return body
        if isinstance(body, Framed):
            return body.parts  # its handler counted its error codes (and throttled: Fetch)
        self._throttle(conn, api_key, slot, body)
        slot.errors = error_counts(body)
        return self.encode(api_key, version, correlation_id, body)

    def _throttle(self, conn: Connection, api_key: int, slot: RequestSlot, body: Optional[Message]) -> None:
        """KIP-219: record the request against the client's quotas; a client over one gets its
        answer with the throttle time and its connection muted for that long. Produce counts
        its bytes and its handling time (none for acks=0), CreateTopics, CreatePartitions and
        DeleteTopics their controller mutations (decided by their handlers) and their
        handling time, every other client request its handling time (OffsetForLeaderEpoch
        too: consumers send it). Exempt, as in Kafka: the cluster actions of the controller
        and the brokers (:data:`QUOTA_EXEMPT_APIS`), and the SASL exchange with the
        ApiVersions before it, which Kafka's authenticator answers outside the quotas."""
        quotas = self.server.quotas
        if not quotas.enabled or api_key in QUOTA_EXEMPT_APIS or not conn.authenticated:
            return
        user, client_id = conn.quota_user, conn.client_id
        # The longest throttle applies, and its quota's throttle-time metric notes it (the
        # request quota's on a tie, as Kafka picks).
        throttle_ms, manager = 0, quotas.request
        if api_key == ApiKey.PRODUCE and quotas.produce.enabled:
            throttle_ms, manager = quotas.produce.record(user, client_id, slot.size), quotas.produce
        if body is not None and quotas.request.enabled:
            handling = (slot.dispatched or time.monotonic()) - slot.started
            request_ms = quotas.request.record(user, client_id, handling * REQUEST_PERCENT_PER_SECOND)
            if request_ms >= throttle_ms:
                throttle_ms, manager = request_ms, quotas.request
        if slot.throttle_ms > throttle_ms:
            throttle_ms, manager = slot.throttle_ms, quotas.controller_mutation
        if throttle_ms <= 0:
            return
        manager.throttled(user, client_id, throttle_ms)
        conn.mute_for(throttle_ms)
        if body is not None and hasattr(body, "throttle_time_ms"):
            setattr(body, "throttle_time_ms", max(throttle_ms, getattr(body, "throttle_time_ms") or 0))

    def unsupported_version(self, conn: Connection, api_key: int, version: int, correlation_id: int) -> Outcome:
        """UNSUPPORTED_VERSION for a version outside the advertised range.

        ApiVersions answers in the v0 layout with the full list, so a client can pick a
        version it shares with the broker and retry; another API answers with its
        top-level error code where that version's response has one, and otherwise the
        connection closes (Kafka cannot answer a request it cannot parse either).
        """
        log.info("unsupported version id=%d peer=%s client_id=%s api=%s version=%d",
                 conn.id, conn.peer, conn.client_id, self.name(api_key), version)
        if api_key == ApiKey.API_VERSIONS:
            w = Writer()
            w.int32(0)
            RESPONSE_HEADER.encode_into(w, ResponseHeader(correlation_id=correlation_id), 0)
            RESPONSES[ApiKey.API_VERSIONS].encode_into(
                w, ApiVersionsResponse(error_code=_UNSUPPORTED_VERSION, api_keys=self._api_versions), 0)
            data = bytearray(w.getvalue())
            _I32.pack_into(data, 0, len(data) - 4)
            return [bytes(data)]
        schema = RESPONSES[api_key]
        # The top-level error code must exist at this version (Fetch has one only from v7):
        # without it the client would read an empty, successful answer.
        if schema.min_version <= version <= schema.max_version and schema.has_field("error_code", version) \
                and schema.cls is not None:
            answer = schema.cls()
            setattr(answer, "error_code", _UNSUPPORTED_VERSION)
            return self.encode(api_key, version, correlation_id, answer)
        raise CloseConnection("%s v%d is not supported (versions %d-%d are)"
                              % ((self.name(api_key), version) + SUPPORTED_VERSIONS[api_key]))

    # -- ApiVersions, SASL -----------------------------------------------------------

    def api_versions(self, conn: Connection, req: ApiVersionsRequest, version: int,
                     slot: RequestSlot) -> ApiVersionsResponse:
        """Kafka's ApiVersions: every API with Kafka 3.9's range. From v3 the client names its
        software, which must match Kafka's pattern (else INVALID_REQUEST, as Kafka answers).

        aiokafka (it always asks at v0, with a client id of ``aiokafka-<version>`` unless the
        application sets another) decodes DescribeGroups v3+ answers with the v2 layout and
        fails on two or more groups: it is offered DescribeGroups up to v2, everyone else
        the whole range.
        """
        if version >= 3:
            for given in (req.client_software_name, req.client_software_version):
                if not _SOFTWARE_NAME.fullmatch(given or ""):
                    return ApiVersionsResponse(error_code=errors.InvalidRequestError.code, api_keys=self._api_versions,
                                               throttle_time_ms=0)
        table = self._api_versions
        if version == 0 and (conn.client_id or "").startswith("aiokafka"):
            table = self._api_versions_for_aiokafka
        return ApiVersionsResponse(error_code=0, api_keys=table, throttle_time_ms=0, finalized_features_epoch=-1)

    def sasl_handshake(self, conn: Connection, req: SaslHandshakeRequest, version: int,
                       slot: RequestSlot) -> SaslHandshakeResponse:
        """SaslHandshake: the mechanism of the exchange that follows. On an authenticated
        connection whose client authenticated with SaslAuthenticate v1+ it begins a
        re-authentication (KIP-368), which must keep the mechanism and the principal."""
        mechanisms = self.server.sasl_mechanisms_for(conn.listener.name)
        if not conn.listener.sasl:
            return SaslHandshakeResponse(error_code=errors.IllegalSaslStateError.code, mechanisms=[])
        if conn.authenticated and conn.reauthentication_supported and not conn.reauthenticating and version >= 1:
            conn.reauthenticating = True
            conn.sasl_exchange = None
            log.debug("re-authentication begins id=%d peer=%s principal=%s", conn.id, conn.peer, conn.principal)
        elif conn.authenticated or conn.sasl_mechanism is not None:
            raise CloseConnection("SaslHandshake repeated on one connection")
        if req.mechanism not in mechanisms:
            return SaslHandshakeResponse(error_code=errors.UnsupportedSaslMechanismError.code,
                                         mechanisms=list(mechanisms))
        if conn.reauthenticating:
            conn.reauthentication_mechanism = req.mechanism  # checked by SaslAuthenticate
        else:
            conn.sasl_mechanism = req.mechanism
        conn.sasl_raw_token = version == 0  # v0: the token follows as a bare frame
        return SaslHandshakeResponse(error_code=0, mechanisms=list(mechanisms))

    def sasl_authenticate(self, conn: Connection, req: SaslAuthenticateRequest, version: int,
                          slot: RequestSlot) -> Union[SaslAuthenticateResponse, Awaitable[SaslAuthenticateResponse]]:
        """One step of the exchange. A failure is answered after
        ``connection.failed.authentication.delay.ms`` and the connection then closed, as Kafka
        does (a guesser waits, other connections do not); with ``connections.max.reauth.ms`` a
        client of v1+ is told its session's lifetime."""
        if conn.sasl_mechanism is None or (conn.authenticated and not conn.reauthenticating):
            raise CloseConnection("SaslAuthenticate without a SaslHandshake")
        previous = conn.user
        changed = conn.reauthentication_mechanism
        answer: bytes
        error: Optional[str]
        if conn.reauthenticating and changed is not None and changed != conn.sasl_mechanism:
            answer, error = b"", ("SASL mechanism '%s' requested by client is not supported for re-authentication "
                                  "of mechanism '%s'" % (changed, conn.sasl_mechanism))
        else:
            answer, error = self._sasl_step(conn, req.auth_bytes or b"")
            if error is None and conn.reauthenticating and conn.sasl_exchange is None:
                error = self._reauthenticated(conn, previous)
        if error is not None:
            conn.close_after_response = True  # Kafka answers with the error, then closes
            failed = SaslAuthenticateResponse(error_code=errors.SaslAuthenticationFailedError.code,
                                              error_message=error, auth_bytes=b"", session_lifetime_ms=0)
            return self._after_failure_delay(conn, failed) if not conn.reauthenticating else failed
        lifetime = 0
        if conn.sasl_exchange is None:  # the exchange is complete
            conn.reauthenticating = False
            conn.reauthentication_mechanism = None
            conn.reauthentication_supported = version >= 1
            lifetime = self.server.connections_max_reauth_ms
            conn.session_expires = asyncio.get_running_loop().time() + lifetime / 1000.0 if lifetime > 0 else None
        return SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=answer,
                                        session_lifetime_ms=lifetime)

    def _reauthenticated(self, conn: Connection, previous: Optional[str]) -> Optional[str]:
        """A re-authentication's check (Kafka's): the same principal; None when good."""
        if conn.user != previous:
            new, conn.user = conn.user, previous
            conn.principal = "User:%s" % previous  # closed after the answer, as the user it was
            return "Cannot change principals during re-authentication from User:%s: User:%s" % (previous, new)
        log.info("re-authenticated id=%d peer=%s principal=%s", conn.id, conn.peer, conn.principal)
        self.server.metrics.inc("kafka_server_socket_server_metrics_successful_reauthentication")
        return None

    async def _after_failure_delay(self, conn: Connection, failed: SaslAuthenticateResponse
                                   ) -> SaslAuthenticateResponse:
        """A failed authentication's answer, once ``connection.failed.authentication.delay.ms`` has passed."""
        delay_ms = self.server.failed_authentication_delay_ms
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000.0)  # Kafka's delay itself, not synchronization
        return failed

    def _sasl_step(self, conn: Connection, token: bytes) -> Tuple[bytes, Optional[str]]:
        """The next step of ``conn``'s exchange in its mechanism -> (answer, error or None)."""
        if conn.sasl_mechanism == "PLAIN":
            return b"", self._check_plain(conn, token)
        return self._scram_step(conn, token)

    def _check_plain(self, conn: Connection, token: bytes) -> Optional[str]:
        """Check a SASL/PLAIN token (authzid NUL authcid NUL password); None when it is good."""
        fields = token.split(b"\x00")
        if len(fields) != 3:
            return "SASL/PLAIN token must be authzid NUL user NUL password"
        authzid, user_bytes, password = fields
        try:
            user = user_bytes.decode("utf-8")
        except UnicodeDecodeError:
            return "SASL/PLAIN user name is not UTF-8"
        expected = self.server.sasl_users_for(conn.listener.name).get(user)
        if expected is None or expected.encode("utf-8") != password or (authzid and authzid != user_bytes):
            log.warning("authentication failed id=%d peer=%s user=%r", conn.id, conn.peer, user)
            return "Authentication failed: Invalid username or password"
        conn.authenticated_as(user, "PLAIN")
        return None

    def sasl_raw_token(self, conn: Connection, token: bytes) -> Outcome:
        """A bare token after SaslHandshake v0: the answer as a bare frame (empty for PLAIN),
        else close (after ``connection.failed.authentication.delay.ms``). A SCRAM exchange
        takes two tokens."""
        answer, error = self._sasl_step(conn, token)
        if error is not None:
            return self._raw_token_failed(error)
        conn.sasl_raw_token = not conn.authenticated
        return [struct.pack(">i", len(answer)) + answer]

    async def _raw_token_failed(self, error: str) -> Parts:
        delay_ms = self.server.failed_authentication_delay_ms
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000.0)  # Kafka's delay itself, not synchronization
        raise CloseConnection(error)

    # -- Metadata ------------------------------------------------------------------------

    def metadata(self, conn: Connection, req: MetadataRequest, version: int,
                 slot: RequestSlot) -> Union[MetadataResponse, Awaitable[MetadataResponse]]:
        """Kafka's Metadata; topics to auto-create are created off the loop, at most
        :data:`MAX_AUTO_CREATE_PER_REQUEST` per request (the rest answer LEADER_NOT_AVAILABLE,
        which clients retry)."""
        broker = self.broker
        requested = req.topics
        if requested is None or (version == 0 and not requested):  # v0: an empty list means every topic
            requested = None
            names = broker.list_topics(include_internal=True)
            hidden = self.authz.refused_names(conn, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
            if hidden:  # every topic: those it may not describe are left out, as Kafka leaves them
                names = [n for n in names if n not in hidden]
        else:
            names = []
            by_id: Dict[str, Union[str, BaseException]] = {}
            for t in requested:
                name, topic_id = t.name, t.topic_id
                if name is not None and topic_id == ZERO_UUID:
                    names.append(name)
                    continue
                # Topic ids are asked for by v12+ only, with a null name (Kafka refuses the rest).
                key = _BY_ID + str(topic_id)
                names.append(key)
                if version < 12 or name is not None:
                    by_id[key] = errors.InvalidRequestError(
                        "topic ids are asked for at Metadata v12+, with a null name" if version >= 12
                        else "Metadata v%d cannot name topics by id" % version)
                    continue
                try:
                    by_id[key] = broker.topic_name(text_of(topic_id))
                except errors.UnknownTopicIdError as exc:
                    by_id[key] = exc
            if by_id:
                return self._metadata_by_id(conn, req, version, names, by_id)
        auto_create = bool(requested is not None and req.allow_auto_topic_creation
                           and broker.config["auto.create.topics.enable"])
        return self._metadata_by_name(conn, req, version, names, auto_create)

    def _metadata_by_id(self, conn: Connection, req: MetadataRequest, version: int, names: List[str],
                        by_id: Dict[str, Union[str, BaseException]]) -> MetadataResponse:
        """Metadata v12 for topics named by id (none is auto-created: an id names what exists),
        with those named by name in the same request. A topic asked for by id that the
        connection may not describe answers its id and no name (a topic id is no secret, its
        name is: as Kafka answers); one asked for by name answers as in any other request."""
        resolved = {key: name for key, name in by_id.items() if isinstance(name, str)}
        hidden = self.authz.refused_names(conn, AclOperation.DESCRIBE, ResourceType.TOPIC, resolved.values())
        for key, name in resolved.items():
            if name in hidden:
                by_id[key] = errors.TopicAuthorizationFailedError("not authorized to describe topic id %s"
                                                                  % key[len(_BY_ID):])
        asked = [n for n in (by_id.get(key, key) for key in names) if isinstance(n, str)]
        answer = self._metadata_by_name(conn, req, version, asked, False)
        assert isinstance(answer, MetadataResponse)
        described = iter(answer.topics)
        topics: List[MetadataResponse.MetadataResponseTopic] = []
        for key in names:
            failure = by_id.get(key)
            if isinstance(failure, BaseException):
                topics.append(MetadataResponse.MetadataResponseTopic(
                    name=None if version >= 12 else "", topic_id=uuid.UUID(key[len(_BY_ID):]),
                    error_code=error_code(failure), is_internal=False, partitions=[],
                    topic_authorized_operations=NOT_COMPUTED))
            else:
                topics.append(next(described))
        answer.topics = topics
        return answer

    def _metadata_by_name(self, conn: Connection, req: MetadataRequest, version: int, names: List[str],
                          auto_create: bool) -> Union[MetadataResponse, Awaitable[MetadataResponse]]:
        broker = self.broker
        found: Dict[str, Union[TopicDescription, BaseException]] = {}
        missing: List[str] = []
        # A topic it may not describe answers TOPIC_AUTHORIZATION_FAILED whether or not it exists.
        for name in self.authz.refused_names(conn, AclOperation.DESCRIBE, ResourceType.TOPIC, names):
            found[name] = errors.TopicAuthorizationFailedError("not authorized to describe topic %r" % name)
        for name in names:
            if name in found:
                continue
            try:
                found[name] = broker.describe_topic(name)
            except errors.UnknownTopicOrPartitionError as exc:
                if auto_create and name not in found and name not in missing:
                    missing.append(name)
                else:
                    found[name] = exc
            except Exception as exc:  # noqa: BLE001 - reported as this topic's error
                found[name] = self._failed(conn, exc, "metadata of topic %s" % name)
        if missing and not self.authz.cluster(conn, AclOperation.CREATE):
            # Auto-creation needs CREATE on the cluster or on the topic.
            cannot = self.authz.refused_names(conn, AclOperation.CREATE, ResourceType.TOPIC, missing)
            for name in cannot:
                found[name] = errors.TopicAuthorizationFailedError("not authorized to create topic %r" % name)
            missing = [n for n in missing if n not in cannot]
        if missing:
            return self._metadata_creating(conn, req, names, found, missing)
        return self._metadata_response(conn, req, names, found)

    async def _metadata_creating(self, conn: Connection, req: MetadataRequest, names: List[str],
                                 found: Dict[str, Union[TopicDescription, BaseException]],
                                 missing: List[str]) -> MetadataResponse:
        for name in missing[:MAX_AUTO_CREATE_PER_REQUEST]:
            try:
                found[name] = await self._admin(self.broker.auto_create_topic, name)
            except Exception as exc:  # noqa: BLE001 - reported as this topic's error
                found[name] = self._failed(conn, exc, "auto-creating topic %s" % name)
        later = missing[MAX_AUTO_CREATE_PER_REQUEST:]
        if later:
            log.info("metadata request id=%d client_id=%s names %d new topics; %d created now, the rest "
                     "answer LEADER_NOT_AVAILABLE until a retry", conn.id, conn.client_id, len(missing),
                     MAX_AUTO_CREATE_PER_REQUEST)
            for name in later:
                found[name] = errors.LeaderNotAvailableError(
                    "topic %r is being created (at most %d per Metadata request)" % (name, MAX_AUTO_CREATE_PER_REQUEST))
        return self._metadata_response(conn, req, names, found)

    def _metadata_response(self, conn: Connection, req: MetadataRequest, names: List[str],
                           found: Dict[str, Union[TopicDescription, BaseException]]) -> MetadataResponse:
        """The answer; v8+ with the authorized operations when asked (every operation without an
        authorizer)."""
        broker = self.broker
        topics_out = []
        for name in names:
            described = found[name]
            entry = MetadataResponse.MetadataResponseTopic(
                name=name, is_internal=name in INTERNAL_TOPICS, partitions=[], topic_id=ZERO_UUID,
                topic_authorized_operations=NOT_COMPUTED)
            if isinstance(described, BaseException):
                entry.error_code = error_code(described)
            else:
                entry.error_code = 0
                entry.topic_id = uuid_of(described.topic_id)
                if req.include_topic_authorized_operations:
                    entry.topic_authorized_operations = self.authz.operations(conn, ResourceType.TOPIC, name)
                # A partition without a leader (all its in-sync replicas down) answers
                # LEADER_NOT_AVAILABLE, which clients retry.
                entry.partitions = [
                    MetadataResponse.MetadataResponsePartition(
                        error_code=0 if p.leader >= 0 else _LEADER_NOT_AVAILABLE, partition_index=p.partition,
                        leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=p.replicas,
                        isr_nodes=p.isr, offline_replicas=p.offline_replicas)
                    for p in described.partitions
                ]
            topics_out.append(entry)
        controller, brokers = self._brokers_for(conn)
        return MetadataResponse(
            throttle_time_ms=0,
            brokers=[MetadataResponse.MetadataResponseBroker(node_id=b, host=h, port=p, rack=r)
                     for b, h, p, r in brokers],
            cluster_id=broker.cluster_id,
            controller_id=controller,
            topics=topics_out,
            cluster_authorized_operations=self.authz.cluster_operations(conn)
            if req.include_cluster_authorized_operations else NOT_COMPUTED,
        )

    # -- Produce, Fetch, ListOffsets, DeleteRecords --------------------------------------

    def produce(self, conn: Connection, req: ProduceRequest, version: int,
                slot: RequestSlot) -> Union[None, ProduceResponse, Awaitable[Optional[ProduceResponse]]]:
        """Kafka's Produce: inline when every partition's data is uncompressed v2 batches, else off the loop.

        Uncompressed v2 data is validated in one cheap pass, on the loop. A
        compressed batch may decompress to far more than it is (and v0/v1
        data is checked message by message): such a request is appended in
        the server's executor, :data:`MAX_DECOMPRESSING_PRODUCES` at once, so
        other connections keep their latency. A connection's produces append
        in request order (an idempotent producer pipelines up to five): one
        behind an off-loop produce waits for it (``Connection.produce_tail``),
        and an inline one also goes off the loop while another connection's
        append to one of its partitions runs there (it would wait for that
        partition's lock).
        """
        partitions = [(t.name, p.index) for t in req.topic_data for p in t.partition_data]
        heavy = any(p.records is not None and not uncompressed_v2(p.records)
                    for t in req.topic_data for p in t.partition_data)
        tail = conn.produce_tail
        if not heavy and (tail is None or tail.done()) and not self._busy(partitions):
            answer = self._produce(conn, req)
            return self._produce_replicated(answer) if isinstance(answer, _Replicating) else answer
        done: "asyncio.Future[None]" = self.server.new_future()
        conn.produce_tail = done
        return self._produce_off_loop(conn, req, heavy, partitions, tail, done)

    def _busy(self, partitions: List[Tuple[str, int]]) -> bool:
        appending = self._appending_off_loop
        return bool(appending) and any(key in appending for key in partitions)

    async def _produce_off_loop(self, conn: Connection, req: ProduceRequest, heavy: bool,
                                partitions: List[Tuple[str, int]], tail: "Optional[asyncio.Future[None]]",
                                done: "asyncio.Future[None]") -> Optional[ProduceResponse]:
        """:meth:`produce` after the connection's previous produce, in the executor when it must be."""
        handed_over = False
        try:
            if tail is not None and not tail.done():
                await asyncio.wait([tail])  # never cancels it: its own response waits for it
            if not heavy and not self._busy(partitions):
                answer = self._produce(conn, req)
                if not done.done():
                    done.set_result(None)  # appended: the connection's next produce may go
                return await self._produce_replicated(answer) if isinstance(answer, _Replicating) else answer
            if heavy:
                await self._decompressing.acquire()
            appending = self._appending_off_loop
            for key in partitions:
                appending[key] = appending.get(key, 0) + 1

            def finished(_: object = None) -> None:
                for key in partitions:
                    left = appending[key] - 1
                    if left:
                        appending[key] = left
                    else:
                        del appending[key]
                if heavy:
                    self._decompressing.release()
                if not done.done():
                    done.set_result(None)

            try:
                work = asyncio.get_running_loop().run_in_executor(self.server.executor, self._produce, conn, req)
            except BaseException:  # the executor is shut down: the server is stopping
                finished()
                raise
            # Cancelled meanwhile (the connection or the server going away), the append still
            # runs in its thread: its partitions, turn and place in order are freed when it ends.
            work.add_done_callback(finished)
            handed_over = True
            answer = await asyncio.shield(work)
            return await self._produce_replicated(answer) if isinstance(answer, _Replicating) else answer
        finally:
            if not handed_over and not done.done():
                done.set_result(None)

    async def _produce_replicated(self, waiting: "_Replicating") -> ProduceResponse:
        """An acks=all produce of a cluster: the response once each partition's records are on
        every in-sync replica (or its wait ended with an error). No slot is held meanwhile."""
        for out, op, future in waiting.partitions:
            result: ProduceResult = await self.server.parked(op, future)
            if result.error_code:
                out.error_code = result.error_code
                out.error_message = "the records were appended but not replicated: %s" % (
                    errors.error_for_code(result.error_code) or errors.BrokerError).__name__
                out.base_offset = out.log_append_time_ms = -1
            else:
                out.base_offset = result.base_offset
                out.log_append_time_ms = result.log_append_time
                out.log_start_offset = result.log_start_offset
        return waiting.response

    def _produce(self, conn: Connection, req: ProduceRequest) -> Union[None, ProduceResponse, "_Replicating"]:
        """The appends of one Produce request and its response (None for acks=0); any thread.

        In a cluster an acks=all append waits for the in-sync replicas as a delayed
        operation: the answer is then a :class:`_Replicating` the caller awaits on the loop.
        """
        acks = req.acks
        broker = self.broker
        responses = []
        waiting: List[Tuple[ProduceResponse.PartitionProduceResponse, DelayedCall[ProduceResult],
                            "asyncio.Future[ProduceResult]"]] = []
        # A transactional producer needs WRITE on its transactional id (Kafka's KafkaApis).
        txn_refused = req.transactional_id is not None and self.authz.enabled and not self.authz.allowed(
            conn, _WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
        refused_topics = self.authz.refused_names(conn, _WRITE, _TOPIC, (t.name for t in req.topic_data)) \
            if self.authz.enabled else NOTHING_REFUSED
        for topic in req.topic_data:
            name = topic.name
            parts = []
            for p in topic.partition_data:
                out = ProduceResponse.PartitionProduceResponse(
                    index=p.index, error_code=0, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
                    record_errors=[], error_message=None)
                try:
                    if txn_refused:
                        raise errors.TransactionalIdAuthorizationFailedError(
                            "not authorized to write transactional id %r" % req.transactional_id)
                    if name in refused_topics:
                        raise errors.TopicAuthorizationFailedError("not authorized to write to topic %r" % name)
                    if p.records is None:
                        raise errors.CorruptRecordError("null records")
                    if name in INTERNAL_TOPICS:  # the broker's own (Kafka refuses clients the same way)
                        raise errors.InvalidTopicError("clients cannot append to the internal topic %s" % name)
                    if acks == -1 and broker.clustered:
                        future: "asyncio.Future[ProduceResult]" = self.server.new_future()
                        op = broker.produce_async(name, p.index, p.records, acks, req.timeout_ms,
                                                  deliver=self.server.deliver_to(future))
                        waiting.append((out, op, future))
                        parts.append(out)
                        continue
                    result = broker.produce(name, p.index, p.records, acks, auto_create=False)
                    out.base_offset = result.base_offset
                    out.log_append_time_ms = result.log_append_time
                    out.log_start_offset = result.log_start_offset
                except Exception as exc:  # noqa: BLE001 - reported as this partition's error
                    out.error_code = error_code(exc)
                    out.error_message = error_message(exc)
                    if isinstance(exc, (errors.InvalidRecordError, errors.InvalidTimestampError)):
                        # v8+: which records (KIP-467)
                        out.record_errors = [ProduceResponse.BatchIndexAndErrorMessage(
                            batch_index=i, batch_index_error_message=why) for i, why in exc.record_errors]
                    if not isinstance(exc, errors.BrokerError):
                        log.exception("produce failed id=%d topic=%s partition=%s", conn.id, name, p.index)
                    else:
                        log.debug("produce error id=%d topic=%s partition=%s error=%r", conn.id, name, p.index, exc)
                parts.append(out)
            responses.append(ProduceResponse.TopicProduceResponse(name=name, partition_responses=parts))
        if acks == 0:
            return None  # kafka-python closes the connection if a response comes
        response = ProduceResponse(responses=responses, throttle_time_ms=0)
        if waiting:
            return _Replicating(response, waiting)
        return response

    def list_offsets(self, conn: Connection, req: ListOffsetsRequest, version: int,
                     slot: RequestSlot) -> Union[ListOffsetsResponse, Awaitable[ListOffsetsResponse]]:
        """Kafka's ListOffsets: latest and earliest inline; a search by timestamp or for the
        max timestamp reads batches (and may decompress one), and v0 stats segment files:
        those run in the executor."""
        if version == 0 or any(p.timestamp >= 0 or p.timestamp == MAX_TIMESTAMP
                               for t in req.topics for p in t.partitions):
            return self._blocking(self._list_offsets, conn, req, version)
        return self._list_offsets(conn, req, version)

    def _list_offsets(self, conn: Connection, req: ListOffsetsRequest, version: int) -> ListOffsetsResponse:
        """Every version's semantics: v0 answers a list of segment offsets (up to its
        ``max_num_offsets``, Kafka's pre-0.10.1 lookup), v1+ one offset and its timestamp; a
        partition named twice answers INVALID_REQUEST (v1+); v4+ fences a current leader epoch
        other than the partition's (0 on a single node), as Kafka does. v2+'s isolation level
        read_committed bounds the answers by the last stable offset instead of the high
        watermark (latest answers it)."""
        isolation = "read_committed" if version >= 2 and req.isolation_level == 1 else "read_uncommitted"
        seen: Dict[Tuple[str, int], int] = {}
        if version >= 1:
            for t in req.topics:
                for p in t.partitions:
                    tp = (t.name, p.partition_index)
                    seen[tp] = seen.get(tp, 0) + 1
        refused_topics = self.authz.refused_names(conn, _DESCRIBE, _TOPIC, (t.name for t in req.topics)) \
            if self.authz.enabled else NOTHING_REFUSED
        topics = []
        for topic in req.topics:
            name = topic.name
            parts = []
            for p in topic.partitions:
                index = p.partition_index
                out = ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=index, error_code=0, timestamp=-1, offset=-1, old_style_offsets=[],
                    leader_epoch=-1)
                try:
                    if name in refused_topics:
                        raise errors.TopicAuthorizationFailedError("not authorized to describe topic %r" % name)
                    if seen.get((name, index), 0) > 1:
                        raise errors.InvalidRequestError("partition %s-%d is listed more than once" % (name, index))
                    epoch = self._check_leader_epoch(name, index, p.current_leader_epoch)
                    if version == 0:
                        out.old_style_offsets = self.broker.legacy_offsets_before(
                            name, index, p.timestamp, p.max_num_offsets)
                    else:
                        offset, timestamp = self.broker.list_offsets(name, index, p.timestamp, isolation)
                        out.offset, out.timestamp = offset, timestamp
                        if offset >= 0:
                            out.leader_epoch = epoch if epoch is not None else \
                                self.broker.leader_epoch_of(name, index)
                except ValueError as exc:
                    out.error_code = errors.InvalidRequestError.code
                    log.debug("list offsets error id=%d error=%r", conn.id, exc)
                except Exception as exc:  # noqa: BLE001 - reported as this partition's error
                    self._entry_failed(out, conn, exc, "list offsets of %s-%s" % (name, index), message=False)
                parts.append(out)
            topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=name, partitions=parts))
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    def _check_leader_epoch(self, topic: str, partition: int, current: int) -> Optional[int]:
        """Kafka's fencing by leader epoch (KIP-320): a client that knows a newer epoch than
        the leader's gets UNKNOWN_LEADER_EPOCH, one that knows an older FENCED_LEADER_EPOCH;
        -1 skips the check. -> the leader's epoch when checked."""
        if current < 0:
            return None
        self.broker.partitions_for(topic)  # an unknown topic answers as such first
        epoch = self.broker.leader_epoch_of(topic, partition)
        if current > epoch:
            raise errors.UnknownLeaderEpochError("leader epoch %d of %s-%d is newer than the leader's (%d)"
                                                 % (current, topic, partition, epoch))
        if current < epoch:
            raise errors.FencedLeaderEpochError("leader epoch %d of %s-%d is older than the leader's (%d)"
                                                % (current, topic, partition, epoch))
        return epoch

    async def delete_records(self, conn: Connection, req: DeleteRecordsRequest, version: int,
                             slot: RequestSlot) -> DeleteRecordsResponse:
        refused_topics = self.authz.refused_names(conn, AclOperation.DELETE, _TOPIC, (t.name for t in req.topics)) \
            if self.authz.enabled else NOTHING_REFUSED
        topics = []
        for topic in req.topics:
            parts = []
            for p in topic.partitions:
                out = DeleteRecordsResponse.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=-1, error_code=0)
                try:
                    if topic.name in refused_topics:
                        raise errors.TopicAuthorizationFailedError("not authorized to delete records of topic %r"
                                                                   % topic.name)
                    out.low_watermark = await self._blocking(
                        self.broker.delete_records, topic.name, p.partition_index, p.offset)
                except Exception as exc:  # noqa: BLE001 - reported as this partition's error
                    what = "delete records of %s-%s" % (topic.name, p.partition_index)
                    self._entry_failed(out, conn, exc, what, message=False)
                parts.append(out)
            topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=topic.name, partitions=parts))
        return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)

    # -- DescribeProducers -------------------------------------------------------------

    def describe_producers(self, conn: Connection, req: DescribeProducersRequest, version: int,
                           slot: RequestSlot) -> DescribeProducersResponse:
        refused_topics = self.authz.refused_names(conn, AclOperation.READ, _TOPIC, (t.name for t in req.topics)) \
            if self.authz.enabled else NOTHING_REFUSED
        topics = []
        for topic in req.topics:
            parts = []
            for index in topic.partition_indexes:
                out = DescribeProducersResponse.PartitionResponse(
                    partition_index=index, error_code=0, error_message=None, active_producers=[])
                try:
                    if topic.name in refused_topics:
                        raise errors.TopicAuthorizationFailedError("not authorized to read topic %r" % topic.name)
                    out.active_producers = [DescribeProducersResponse.ProducerState(**d._asdict()) for d in
                                            self.broker.describe_producers(topic.name, index)]
                except Exception as exc:  # noqa: BLE001 - reported as this partition's error
                    self._entry_failed(out, conn, exc, "describe producers of %s-%d" % (topic.name, index))
                parts.append(out)
            topics.append(DescribeProducersResponse.TopicResponse(name=topic.name, partitions=parts))
        return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
