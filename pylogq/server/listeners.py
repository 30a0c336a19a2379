"""Kafka's ``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map``, and SASL/PLAIN user lists.

``listeners=CLIENT://127.0.0.1:9093,INTERNAL://127.0.0.1:9094``: one server socket per
entry, each under a listener name that ``listener.security.protocol.map``
(``CLIENT:SSL,INTERNAL:PLAINTEXT``) gives its security protocol. Kafka's default map
names each protocol after itself (``PLAINTEXT://``, ``SSL://``, ``SASL_PLAINTEXT://``,
``SASL_SSL://``), so a listener named after its protocol needs no map. Names are
case-insensitive and kept upper-case (Kafka's ``ListenerName.normalised``); a listener's
own settings are the keys under ``listener.name.<name in lower case>.`` (Kafka's
prefix), which win over the unprefixed key. An empty host means every interface, as in
Kafka. The errors are Kafka's, in Kafka's words.
"""

from __future__ import annotations

import re
from typing import Dict, List, Mapping, NamedTuple, Optional

from ..errors import ConfigError

__all__ = ["DEFAULT_PROTOCOL_MAP", "Listener", "SECURITY_PROTOCOLS", "listener_prefix", "parse_jaas_users",
           "parse_jaas_login", "parse_listeners", "parse_protocol_map"]

#: Kafka's security protocols.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: ``listener.security.protocol.map``'s default: every protocol is a listener name of its own.
DEFAULT_PROTOCOL_MAP = ",".join("%s:%s" % (p, p) for p in SECURITY_PROTOCOLS)
# Kafka's EndPoint pattern: NAME://host:port, an IPv6 host in brackets.
_LISTENER = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


class Listener(NamedTuple):
    """One listener: its name, bind host and port (0: any free port), and security protocol."""

    name: str
    host: str
    port: int
    protocol: str

    @property
    def sasl(self) -> bool:
        """Whether clients authenticate with SASL first (SASL_PLAINTEXT, SASL_SSL)."""
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def ssl(self) -> bool:
        """Whether the connection is TLS (SSL, SASL_SSL)."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def prefix(self) -> str:
        """The prefix of this listener's own settings: ``listener.name.<name>.``."""
        return listener_prefix(self.name)


def listener_prefix(name: str) -> str:
    """``listener.name.<name in lower case>.``: Kafka's ``ListenerName.configPrefix``."""
    return "listener.name.%s." % name.lower()


def parse_protocol_map(text: str, key: str = "listener.security.protocol.map") -> Dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME (upper case): PROTOCOL}; ConfigError as Kafka words it."""
    out: Dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, protocol = entry.rpartition(":")
        if not sep or not name.strip():
            raise ConfigError("Error parsing configuration property '%s': entry %r is not LISTENER_NAME:PROTOCOL"
                              % (key, entry))
        protocol = protocol.strip()
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError("Invalid security protocol `%s` defined in %s" % (protocol, key))
        out[name.strip().upper()] = protocol.upper()
    return out


def parse_listeners(text: str, key: str = "listeners", protocol_map: Optional[Mapping[str, str]] = None,
                    distinct_ports: bool = True) -> List[Listener]:
    """A comma-separated listener list, each named in ``protocol_map`` (Kafka's default map when
    None); ConfigError as Kafka words it, naming the setting and the list."""
    protocols = parse_protocol_map(DEFAULT_PROTOCOL_MAP) if protocol_map is None else protocol_map
    out: List[Listener] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        m = _LISTENER.match(item)
        if m is None:
            raise ConfigError("Error creating broker listeners from '%s' (%s): Unable to parse %s to a broker "
                              "endpoint" % (text, key, item))
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError("Error creating broker listeners from '%s' (%s): No security protocol defined for "
                              "listener %s" % (text, key, name))
        if not 0 <= port <= 65535:
            raise ConfigError("Invalid value %r for configuration %s: port %d is out of range" % (item, key, port))
        if any(existing.name == name for existing in out):
            raise ConfigError("Each listener must have a different name, %s: %s" % (key, text))
        if distinct_ports and port and any(existing.port == port for existing in out):
            raise ConfigError("Each listener must have a different port, %s: %s" % (key, text))
        out.append(Listener(name, host, port, protocol))
    if not out:
        raise ConfigError("Invalid value %r for configuration %s: no listener given" % (text, key))
    return out


_JAAS_USER = re.compile(r'\buser_([^=\s]+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_OPTION = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_MODULES = ("org.apache.kafka.common.security.plain.PlainLoginModule",
                 "org.apache.kafka.common.security.scram.ScramLoginModule")


def parse_jaas_users(text: Optional[str]) -> Dict[str, str]:
    """The ``user_NAME="PASSWORD"`` entries of a PlainLoginModule JAAS line, as Kafka reads them."""
    if not text:
        return {}
    if "PlainLoginModule" not in text:
        raise ConfigError("only org.apache.kafka.common.security.plain.PlainLoginModule is supported, got %r" % text)
    return {name: password.replace('\\"', '"') for name, password in _JAAS_USER.findall(text)}


def parse_jaas_login(text: Optional[str], key: str) -> Optional[Dict[str, str]]:
    """The ``username`` and ``password`` of a PlainLoginModule or ScramLoginModule JAAS line:
    what a broker authenticates to the others with (None when ``text`` is empty)."""
    if not text:
        return None
    if not any(module in text for module in _JAAS_MODULES):
        raise ConfigError("%s: only %s are supported, got %r" % (key, " and ".join(_JAAS_MODULES), text))
    return {option: value.replace('\\"', '"') for option, value in _JAAS_OPTION.findall(text)}
