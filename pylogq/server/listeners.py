"""Kafka's ``listeners`` and ``advertised.listeners`` settings, and SASL/PLAIN user lists.

``listeners=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093``: one server socket
per entry. A listener's name is its security protocol (pylogq has no listener.security.protocol.map),
so at most one listener per protocol. An empty host means every interface, as in Kafka.
"""

from __future__ import annotations

import re
from typing import Dict, List, NamedTuple, Optional

from ..errors import ConfigError

__all__ = ["Listener", "parse_listeners", "parse_jaas_users", "SECURITY_PROTOCOLS"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT")
_LISTENER = re.compile(r"^([A-Za-z_]+)://(\[[0-9A-Fa-f:.]+\]|[^:/\s]*):(\d+)$")


class Listener(NamedTuple):
    """One listener: its security protocol, bind host and port (0: any free port)."""

    protocol: str
    host: str
    port: int

    @property
    def sasl(self) -> bool:
        return self.protocol == "SASL_PLAINTEXT"


def parse_listeners(text: str, key: str = "listeners") -> List[Listener]:
    """Parse a comma-separated listener list; ConfigError names the bad entry."""
    out: List[Listener] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        m = _LISTENER.match(item)
        if m is None:
            raise ConfigError("Invalid value %r for configuration %s: expected PROTOCOL://host:port" % (item, key))
        protocol, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError("Invalid value %r for configuration %s: security protocol %s is not one of %s"
                              % (item, key, protocol, ", ".join(SECURITY_PROTOCOLS)))
        if port > 65535:
            raise ConfigError("Invalid value %r for configuration %s: port %d is out of range" % (item, key, port))
        if any(existing.protocol == protocol for existing in out):
            raise ConfigError("Invalid value %r for configuration %s: protocol %s is listed twice"
                              % (text, key, protocol))
        out.append(Listener(protocol, host.strip("[]"), port))
    if not out:
        raise ConfigError("Invalid value %r for configuration %s: no listener given" % (text, key))
    return out


_JAAS_USER = re.compile(r'\buser_([^=\s]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_jaas_users(text: Optional[str]) -> Dict[str, str]:
    """The ``user_NAME="PASSWORD"`` entries of a PlainLoginModule JAAS line, as Kafka reads them."""
    if not text:
        return {}
    if "PlainLoginModule" not in text:
        raise ConfigError("only org.apache.kafka.common.security.plain.PlainLoginModule is supported, got %r" % text)
    return {name: password.replace('\\"', '"') for name, password in _JAAS_USER.findall(text)}
