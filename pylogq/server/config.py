"""The network listener's settings: Kafka's ``listeners``, socket and SASL keys.

Declared on :mod:`pylogq.config`'s machinery and registered with the broker contract
when :mod:`pylogq.server` is imported, so one ``server.properties`` (or one set of
``pylogq.Broker`` keywords) configures the broker and its listener together; the
broker keeps them, unread, in ``BrokerConfig.listener``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..config import _INT, _LONG, _STRING, Config, setting

__all__ = ["JAAS_KEY", "ServerConfig"]

JAAS_KEY = "listener.name.sasl_plaintext.plain.sasl.jaas.config"


@dataclass(frozen=True, init=False)
class ServerConfig(Config):
    """Listener settings with Kafka's names; pylogq's defaults where noted. Immutable."""

    listeners: str = setting("listeners", _STRING, "PLAINTEXT://127.0.0.1:9092",
                             doc="pylogq binds to loopback unless told otherwise")
    advertised_listeners: Optional[str] = setting("advertised.listeners", _STRING, None, nullable=True)
    socket_request_max_bytes: int = setting("socket.request.max.bytes", _INT, 104857600, at_least=1)
    queued_max_requests: int = setting("queued.max.requests", _INT, 500, at_least=1)
    connections_max_idle_ms: int = setting("connections.max.idle.ms", _LONG, 600000, at_least=1)
    # -1 (the OS's buffers, which Linux grows with the traffic) rather than Kafka's fixed
    # 100 KB, which turns a 4 MiB fetch response into dozens of sendfile calls and waits.
    socket_send_buffer_bytes: int = setting("socket.send.buffer.bytes", _INT, -1, at_least=-1)
    socket_receive_buffer_bytes: int = setting("socket.receive.buffer.bytes", _INT, -1, at_least=-1)
    sasl_enabled_mechanisms: str = setting("sasl.enabled.mechanisms", _STRING, "PLAIN")
    listener_name_sasl_plaintext_plain_sasl_jaas_config: Optional[str] = setting(JAAS_KEY, _STRING, None,
                                                                               nullable=True)
