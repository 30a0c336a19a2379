"""The network listener's settings: Kafka's ``listeners``, socket and SASL keys.

Declared on :mod:`pylogq.config`'s machinery and registered with the broker contract
when :mod:`pylogq.server` is imported, so one ``server.properties`` (or one set of
``pylogq.Broker`` keywords) configures the broker and its listener together; the
broker keeps them, unread, in ``BrokerConfig.listener``.
"""

from __future__ import annotations

from typing import Dict, Optional

from ..config import _INT, _LONG, _STRING, INT_MAX, Config, setting
from ..errors import ConfigError
from .listeners import parse_listeners

__all__ = ["JAAS_KEY", "ServerConfig", "parse_connection_overrides"]

JAAS_KEY = "listener.name.sasl_plaintext.plain.sasl.jaas.config"


class ServerConfig(Config):
    """Listener settings with Kafka's names; pylogq's defaults where noted. Immutable."""

    listeners: str = setting("listeners", _STRING, "PLAINTEXT://127.0.0.1:9092",
                             doc="pylogq binds to loopback unless told otherwise")
    advertised_listeners: Optional[str] = setting("advertised.listeners", _STRING, None, nullable=True)
    socket_request_max_bytes: int = setting("socket.request.max.bytes", _INT, 104857600, at_least=1)
    queued_max_requests: int = setting("queued.max.requests", _INT, 500, at_least=1)
    connections_max_idle_ms: int = setting("connections.max.idle.ms", _LONG, 600000, at_least=1,
                                           doc="a connection with nothing in flight and no byte received for "
                                               "this long is closed (a partial request counts as idle)")
    # pylogq's own key (Kafka has none): Kafka clients give up on a request after
    # request.timeout.ms (30 s by default), so a request still arriving after that helps nobody.
    socket_request_read_timeout_ms: int = setting("socket.request.read.timeout.ms", _LONG, 30000, at_least=1,
                                                  doc="time from a request's size prefix to its last byte")
    queued_max_request_bytes: int = setting("queued.max.request.bytes", _LONG, -1,
                                            doc="bytes of requests being read or queued; 0 or less is unbounded")
    max_connections: int = setting("max.connections", _INT, INT_MAX, at_least=0)
    max_connections_per_ip: int = setting("max.connections.per.ip", _INT, INT_MAX, at_least=0)
    max_connections_per_ip_overrides: str = setting("max.connections.per.ip.overrides", _STRING, "",
                                                    doc="host:count pairs, e.g. 10.0.0.7:200,build-host:50")
    # -1 (the OS's buffers, which Linux grows with the traffic) rather than Kafka's fixed
    # 100 KB, which turns a 4 MiB fetch response into dozens of sendfile calls and waits.
    socket_send_buffer_bytes: int = setting("socket.send.buffer.bytes", _INT, -1, at_least=-1)
    socket_receive_buffer_bytes: int = setting("socket.receive.buffer.bytes", _INT, -1, at_least=-1)
    # KIP-612: connections accepted per second, broker-wide and per listener (pylogq's
    # listeners are named after their protocols); past the rate, acceptance is delayed.
    max_connection_creation_rate: int = setting("max.connection.creation.rate", _INT, INT_MAX, at_least=0)
    listener_name_plaintext_max_connection_creation_rate: Optional[int] = setting(
        "listener.name.plaintext.max.connection.creation.rate", _INT, None, nullable=True, at_least=0)
    listener_name_sasl_plaintext_max_connection_creation_rate: Optional[int] = setting(
        "listener.name.sasl_plaintext.max.connection.creation.rate", _INT, None, nullable=True, at_least=0)
    # Client quotas' and connection rates' samples (docs/security.md, "Quotas").
    quota_window_num: int = setting("quota.window.num", _INT, 11, at_least=1)
    quota_window_size_seconds: int = setting("quota.window.size.seconds", _INT, 1, at_least=1)
    controller_quota_window_num: int = setting("controller.quota.window.num", _INT, 11, at_least=1)
    controller_quota_window_size_seconds: int = setting("controller.quota.window.size.seconds", _INT, 1,
                                                        at_least=1)
    sasl_enabled_mechanisms: str = setting("sasl.enabled.mechanisms", _STRING, "PLAIN")
    # How long a failed SASL authentication waits before its answer and the close (Kafka's
    # default; slows password guessing without holding up other connections).
    connection_failed_authentication_delay_ms: int = setting("connection.failed.authentication.delay.ms", _INT,
                                                             100, at_least=0)
    # KIP-368: a SASL session's lifetime (0: sessions never expire); clients re-authenticate
    # on the same connection before it ends.
    connections_max_reauth_ms: int = setting("connections.max.reauth.ms", _LONG, 0, at_least=0)
    listener_name_sasl_plaintext_plain_sasl_jaas_config: Optional[str] = setting(JAAS_KEY, _STRING, None,
                                                                               nullable=True)

    def _validate(self) -> None:
        # Checked with the rest of the broker's settings, before any file is written:
        # a bad listener must not leave a data directory behind.
        parse_listeners(self.listeners)
        if self.advertised_listeners:
            parse_listeners(self.advertised_listeners, "advertised.listeners")
        if 0 < self.queued_max_request_bytes < self.socket_request_max_bytes:
            raise ConfigError("queued.max.request.bytes (%d) must be larger or equal to socket.request.max.bytes (%d)"
                              % (self.queued_max_request_bytes, self.socket_request_max_bytes))
        overrides = parse_connection_overrides(self.max_connections_per_ip_overrides)
        if self.max_connections_per_ip == 0 and not overrides:
            raise ConfigError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                              "is set")


def parse_connection_overrides(text: str) -> Dict[str, int]:
    """``max.connections.per.ip.overrides`` (``host:count,host:count``) -> host -> count.

    As Kafka reads it: each entry splits at its last colon (so an IPv6 address keeps its
    own), the count is a non-negative int; hosts are resolved when the listener starts.
    """
    overrides: Dict[str, int] = {}
    for entry in text.split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError("Invalid value %r for configuration max.connections.per.ip.overrides: expected "
                              "host:count entries separated by commas, got %r" % (text, entry))
        overrides[host] = int(count)
    return overrides
