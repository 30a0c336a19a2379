"""The seam between the clients and a broker: one contract, in-process or over TCP.

``Producer``, ``Consumer`` and ``AdminClient`` talk to a broker only through a
:class:`Transport`: the contract's :class:`~pylogq.cluster.contract.BrokerApi`
plus ``close()``. A :class:`pylogq.Broker` in this process hands out its own
(``broker.transport()``, :class:`pylogq.cluster.in_process.InProcessTransport`:
direct calls, no sockets, no encoding); :class:`~pylogq.client.tcp.TcpTransport`
speaks the Kafka protocol to ``pylogq-broker`` or any Kafka broker. Results and
errors are the contract's: per-partition error codes where the Kafka protocol has
them, exceptions from pylogq.errors otherwise. This module imports neither.
"""

from __future__ import annotations

from typing import Any, Dict, Protocol, Sequence, Union, cast

from ..cluster.contract import BrokerApi
from ..errors import ConfigError

__all__ = ["LocalBroker", "TCP_OPTIONS", "Transport", "connect"]


class Transport(BrokerApi, Protocol):
    """What a client needs from a broker: the contract's calls, and ``close()``."""

    def close(self) -> None:
        """Release the transport's resources (the broker itself stays up)."""


class LocalBroker(Protocol):
    """A broker in this process (:class:`pylogq.Broker`): it hands out its own transport."""

    def transport(self) -> Transport: ...


#: The keyword arguments of the clients that configure a TCP transport, with their defaults.
TCP_OPTIONS: Dict[str, Any] = {
    "client_id": "pylogq",
    "request_timeout_ms": 30000,
    "security_protocol": "PLAINTEXT",
    "sasl_mechanism": None,
    "sasl_plain_username": None,
    "sasl_plain_password": None,
}


def connect(broker: Union[LocalBroker, Transport, None] = None, bootstrap_servers: Union[str, Sequence[str], None] = None,
            **options: Any) -> Transport:
    """The transport for a client's ``broker=`` or ``bootstrap_servers=`` argument.

    ``options`` (the keys of :data:`TCP_OPTIONS`) configure the TCP transport;
    an in-process broker needs none and ignores them.
    """
    if (broker is None) == (bootstrap_servers is None):
        raise ConfigError("give exactly one of broker= (a pylogq.Broker in this process) or bootstrap_servers=")
    unknown = sorted(set(options) - set(TCP_OPTIONS))
    if unknown:
        raise ConfigError("unknown transport option%s: %s" % ("s" if len(unknown) > 1 else "", ", ".join(unknown)))
    if broker is not None:
        make = getattr(broker, "transport", None)
        if callable(make):
            transport: Transport = make()
            return transport
        return cast(Transport, broker)  # already a transport (a test's wrapper around one, say)
    from .tcp import TcpTransport

    assert bootstrap_servers is not None
    return TcpTransport(bootstrap_servers, **{**TCP_OPTIONS, **{k: v for k, v in options.items() if v is not None}})
