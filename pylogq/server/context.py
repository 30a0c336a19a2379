"""What the API handlers use of the server that runs them: :class:`ServerContext`.

The handlers (:mod:`.handler_base` and the modules built on it) are written
against this Protocol, not against :class:`~pylogq.server.server.KafkaServer`,
so the server imports the handlers and nothing imports back: the broker they
serve, the executors that run file work off the event loop, the listener a
connection came in on, SASL's settings, and the way a parked request (a long
poll, a join) waits for its delayed operation and is answered from any thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Mapping, Optional, Protocol, Tuple, TypeVar

from ..cluster.contract import ServedBroker
from ..cluster.delayed import DelayedCall
from ..metrics import MetricsRegistry
from .connection import Connection
from .quotas import ClientQuotas

__all__ = ["Delivery", "ServerContext"]

_T = TypeVar("_T")
_T_contra = TypeVar("_T_contra", contravariant=True)


class Delivery(Protocol[_T_contra]):
    """A delayed operation's ``deliver``: settles a parked request's future, from any thread."""

    def __call__(self, answer: _T_contra) -> None: ...

    def fail(self, exc: BaseException) -> None: ...


class ServerContext(Protocol):
    """The server as its handlers see it."""

    @property
    def broker(self) -> ServedBroker: ...

    @property
    def executor(self) -> concurrent.futures.Executor:
        """Runs broker calls that do file work (DeleteRecords, group deletion) off the loop."""

    @property
    def admin_executor(self) -> concurrent.futures.Executor:
        """One thread for topic administration: they take the broker's admin lock one at a time."""

    @property
    def coordinator_executor(self) -> concurrent.futures.Executor:
        """Runs the transaction coordinator's calls and WriteTxnMarkers, which wait for replicas."""

    @property
    def fetch_max_bytes(self) -> int: ...

    def sasl_users_for(self, listener: str) -> Mapping[str, str]: ...

    def sasl_mechanisms_for(self, listener: str) -> Tuple[str, ...]: ...

    @property
    def scram_secret(self) -> bytes: ...

    @property
    def failed_authentication_delay_ms(self) -> int:
        """``connection.failed.authentication.delay.ms``."""

    @property
    def connections_max_reauth_ms(self) -> int:
        """``connections.max.reauth.ms`` (0: sessions never expire)."""

    @property
    def quotas(self) -> ClientQuotas:
        """The client quota managers (:mod:`.quotas`)."""

    @property
    def metrics(self) -> MetricsRegistry: ...

    def new_future(self) -> "asyncio.Future[Any]": ...

    def deliver_to(self, future: "asyncio.Future[_T]") -> Delivery[_T]: ...

    async def parked(self, op: DelayedCall[_T], future: "asyncio.Future[_T]", at_stop: Optional[_T] = None) -> _T:
        ...

    def listener_name_for(self, conn: Connection) -> str: ...

    def advertised_for(self, conn: Connection) -> Tuple[str, int]: ...
