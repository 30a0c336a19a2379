"""What every API handler shares: error codes from exceptions,
pre-framed responses, and the ways a handler runs file work off the event loop.

:class:`HandlerBase` is the base of the handler classes, one per family of APIs:
:mod:`.handlers_fetch` (Fetch), :mod:`.handlers_groups` (the group coordinator's),
:mod:`.handlers_admin` (topics, configs, log dirs, the cluster), :mod:`.handlers_transactions`
(the transaction coordinator's APIs and WriteTxnMarkers),
:mod:`.handlers_operations` (elections, reassignments), :mod:`.handlers_replication` (the
controller's and followers'), :mod:`.handlers_scram`
(SCRAM and its credentials), :mod:`.handlers_acls` (the ACLs), :mod:`.handlers_quotas` (the client
quota APIs); each asks :attr:`HandlerBase.authz` (:mod:`.authorization`) what a request may do;
:class:`~pylogq.server.handlers.Handlers` combines them
with ApiVersions, SASL, Metadata, Produce, ListOffsets, DeleteRecords
and DescribeProducers, and dispatches. They reach the server only
through :class:`~pylogq.server.context.ServerContext`.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from typing import Callable, Dict, List, Optional, Tuple, TypeVar

from .. import errors
from ..protocol.schema import Message
from .authorization import Authorization
from .connection import Connection, Part
from .context import ServerContext

log = logging.getLogger("pylogq.server")

_T = TypeVar("_T")

__all__ = ["HandlerBase", "Framed", "error_code", "error_message", "text_of", "uuid_of", "NOT_COMPUTED", "ZERO_UUID"]

_UNKNOWN_SERVER_ERROR = errors.UnknownServerError.code
# Authorized operations the schema's way of saying "not computed" (not asked for).
NOT_COMPUTED = -2147483648
#: The null topic id.
ZERO_UUID = uuid.UUID(int=0)


def error_code(exc: BaseException) -> int:
    """Kafka's error code for an exception raised by a broker operation."""
    if isinstance(exc, errors.BrokerError):
        return int(exc.code)
    return _UNKNOWN_SERVER_ERROR


def error_message(exc: BaseException) -> Optional[str]:
    return str(exc) or type(exc).__name__


_ERROR_NAMES: Dict[int, str] = {0: "NONE"}


def error_name(code: int) -> str:
    """Kafka's name of an error code (``NONE`` for 0), as the error metrics label it."""
    name = _ERROR_NAMES.get(code)
    if name is None:
        error = errors.error_for_code(code)
        name = _ERROR_NAMES[code] = error.name if error is not None else "UNKNOWN_%d" % code
    return name


def error_counts(body: Message, out: Optional[Dict[int, int]] = None) -> Dict[int, int]:
    """How often each ``error_code`` occurs in a response (Kafka's errorCounts: the
    top-level code and every partition's, NONE included)."""
    if out is None:
        out = {}
    for key in body.__slots__:
        value = getattr(body, key)
        if key == "error_code":
            out[value] = out.get(value, 0) + 1
        elif isinstance(value, Message):
            error_counts(value, out)
        elif isinstance(value, list) and value and isinstance(value[0], Message):
            for item in value:
                error_counts(item, out)
    return out


def uuid_of(topic_id: str) -> uuid.UUID:
    """A topic id as the wire's uuid: Kafka's base64url text is its 16 bytes."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))


def text_of(topic_id: uuid.UUID) -> str:
    """A wire uuid as a topic id's text (Kafka's base64url, unpadded)."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


class Framed:
    """A response already framed as parts (Fetch's zero-copy frames)."""

    __slots__ = ("parts",)

    def __init__(self, parts: List[Part]) -> None:
        self.parts = parts


class HandlerBase:
    """The server, its broker, and how a handler runs work off the loop."""

    def __init__(self, server: ServerContext) -> None:
        self.server = server
        self.broker = server.broker
        #: What each request may do (:mod:`.authorization`): everything without an authorizer.
        self.authz = Authorization(server)

    def _brokers_for(self, conn: Connection) -> Tuple[int, List[Tuple[int, str, int, Optional[str]]]]:
        """(controller id, [(broker id, host, port, rack)]) as a client on ``conn`` should see
        them: a single node is its own controller at this listener's advertised address; a
        cluster's brokers are listed at their endpoint of the same listener (a broker without
        one is left out, as Kafka does)."""
        view = self.broker.cluster_view()
        if view is None:
            host, port = self.server.advertised_for(conn)
            return self.broker.broker_id, [(self.broker.broker_id, host, port, None)]
        controller, brokers = view
        listener = self.server.listener_name_for(conn)
        out = []
        for b in brokers:
            endpoint = b.endpoint(listener)
            if endpoint is not None:
                out.append((b.broker_id, endpoint.host, endpoint.port, b.rack))
        return controller, out

    async def _blocking(self, fn: Callable[..., _T], *args: object) -> _T:
        """Run a broker call that does file work (DeleteRecords, group deletion) off the loop."""
        return await asyncio.get_running_loop().run_in_executor(self.server.executor, fn, *args)

    async def _coordinated(self, fn: Callable[..., _T], *args: object) -> _T:
        """Run a transaction coordinator's call, or WriteTxnMarkers, on the coordinator's threads:
        they wait for replicas, and must not hold the threads whose work ends those waits."""
        return await asyncio.get_running_loop().run_in_executor(self.server.coordinator_executor, fn, *args)

    async def _admin(self, fn: Callable[..., _T], *args: object) -> _T:
        """Run a topic administration (create, delete, add partitions, alter configs, auto-create)
        on the server's admin thread: they take the broker's admin lock one at a time, and
        must not hold the threads other file work needs while they wait for it."""
        return await asyncio.get_running_loop().run_in_executor(self.server.admin_executor, fn, *args)

    @classmethod
    def _entry_failed(cls, entry: Message, conn: Connection, exc: BaseException, what: str,
                      message: bool = True) -> None:
        """One entry of a response (a topic, a partition, a resource) answers ``exc``: its
        ``error_code`` (and ``error_message``, where the entry has one), logged as :meth:`_failed`."""
        cls._failed(conn, exc, what)
        setattr(entry, "error_code", error_code(exc))
        if message:
            setattr(entry, "error_message", error_message(exc))

    @staticmethod
    def _failed(conn: Connection, exc: BaseException, what: str) -> BaseException:
        """Log an operation's failure (with its traceback when it is not one of Kafka's errors,
        i.e. a bug or an environment fault); -> the exception, to answer with its code."""
        if isinstance(exc, errors.BrokerError):
            log.debug("%s failed id=%d client_id=%s error=%r", what, conn.id, conn.client_id, exc)
        else:
            log.error("%s failed id=%d client_id=%s", what, conn.id, conn.client_id, exc_info=exc)
        return exc
