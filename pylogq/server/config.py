"""The network listener's settings: Kafka's ``listeners``, socket, SSL and SASL keys.

Declared on :mod:`pylogq.config`'s machinery and registered with the broker contract
when :mod:`pylogq.server` is imported, so one ``server.properties`` (or one set of
``pylogq.Broker`` keywords) configures the broker and its listener together; the
broker keeps them, unread, in ``BrokerConfig.listener``.

A listener's own SSL and SASL settings are Kafka's keys under its prefix,
``listener.name.<name in lower case>.ssl.keystore.location`` (``listener.name.client.`` for
a listener named ``CLIENT``): accepted for any listener name and any key of the SSL family
(and a mechanism's ``sasl.jaas.config``), they win over the unprefixed key for that
listener only (:meth:`ServerConfig.for_listener`).
"""

from __future__ import annotations

import re
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Optional, Tuple

from ..config import _INT, _LIST, _LONG, _STRING, INT_MAX, Config, _parse_value, sensitive, setting
from ..errors import ConfigError
from .listeners import DEFAULT_PROTOCOL_MAP, Listener, listener_prefix, parse_listeners, parse_protocol_map

__all__ = ["JAAS_KEY", "ServerConfig", "parse_connection_overrides"]

JAAS_KEY = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
#: A listener's own setting: ``listener.name.<listener>.<key>``, the key an SSL one, its connection
#: creation rate, or a mechanism's JAAS config (``listener.name.client.scram-sha-256.sasl.jaas.config``).
_PREFIXED = re.compile(r"^listener\.name\.([^.]+)\.((?:ssl\..+)|(?:sasl\.enabled\.mechanisms)|"
                       r"(?:[a-z0-9-]+\.sasl\.jaas\.config)|(?:max\.connection\.creation\.rate))$")


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
    # KIP-612: connections accepted per second, broker-wide and per listener
    # (listener.name.<name>.max.connection.creation.rate); past the rate, acceptance is delayed.
    max_connection_creation_rate: int = setting("max.connection.creation.rate", _INT, INT_MAX, at_least=0)
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
    listener_security_protocol_map: str = setting("listener.security.protocol.map", _STRING, DEFAULT_PROTOCOL_MAP)
    # How a broker of a cluster authenticates to the others over a SASL inter-broker listener.
    sasl_mechanism_inter_broker_protocol: str = setting("sasl.mechanism.inter.broker.protocol", _STRING, "GSSAPI")
    # SSL (Kafka's SslConfigs and BrokerSecurityConfigs), for SSL and SASL_SSL listeners and the
    # client side of a TLS inter-broker listener. Each may be given per listener (module docstring).
    ssl_protocol: str = setting("ssl.protocol", _STRING, "TLSv1.3",
                                doc="accepted as Kafka names it; ssl.enabled.protocols decides")
    ssl_enabled_protocols: Tuple[str, ...] = setting("ssl.enabled.protocols", _LIST, ("TLSv1.2", "TLSv1.3"))
    ssl_keystore_type: str = setting("ssl.keystore.type", _STRING, "JKS",
                                     doc="PEM or PKCS12 (JKS, Kafka's default, is refused: convert it)")
    ssl_keystore_location: Optional[str] = setting("ssl.keystore.location", _STRING, None, nullable=True)
    ssl_keystore_password: Optional[str] = setting("ssl.keystore.password", _STRING, None, nullable=True)
    ssl_key_password: Optional[str] = setting("ssl.key.password", _STRING, None, nullable=True)
    ssl_keystore_certificate_chain: Optional[str] = setting("ssl.keystore.certificate.chain", _STRING, None,
                                                            nullable=True)
    ssl_keystore_key: Optional[str] = setting("ssl.keystore.key", _STRING, None, nullable=True)
    ssl_truststore_type: str = setting("ssl.truststore.type", _STRING, "JKS")
    ssl_truststore_location: Optional[str] = setting("ssl.truststore.location", _STRING, None, nullable=True)
    ssl_truststore_password: Optional[str] = setting("ssl.truststore.password", _STRING, None, nullable=True)
    ssl_truststore_certificates: Optional[str] = setting("ssl.truststore.certificates", _STRING, None,
                                                         nullable=True)
    ssl_client_auth: str = setting("ssl.client.auth", _STRING, "none", choices=("required", "requested", "none"))
    ssl_cipher_suites: Tuple[str, ...] = setting("ssl.cipher.suites", _LIST, ())
    ssl_endpoint_identification_algorithm: str = setting("ssl.endpoint.identification.algorithm", _STRING, "https")
    ssl_principal_mapping_rules: str = setting("ssl.principal.mapping.rules", _STRING, "DEFAULT")
    # Kafka's JVM-side choices, accepted so that a Kafka server.properties loads unchanged;
    # Python's ssl module (OpenSSL) has one of each.
    ssl_keymanager_algorithm: str = setting("ssl.keymanager.algorithm", _STRING, "SunX509")
    ssl_trustmanager_algorithm: str = setting("ssl.trustmanager.algorithm", _STRING, "PKIX")
    ssl_secure_random_implementation: Optional[str] = setting("ssl.secure.random.implementation", _STRING, None,
                                                              nullable=True)
    ssl_provider: Optional[str] = setting("ssl.provider", _STRING, None, nullable=True)

    #: listener.name.<listener>.<key> settings, by their whole key.
    listener_overrides: Mapping[str, Any]
    _COMPARED: ClassVar[Tuple[str, ...]] = ("listener_overrides",)

    @classmethod
    def accepts(cls, key: str) -> bool:
        return super().accepts(key) or cls._prefixed(key) is not None

    @classmethod
    def _prefixed(cls, key: str) -> Optional[Tuple[str, str]]:
        """(listener name, key) of a listener's own setting, or None for another key."""
        if not isinstance(key, str) or key in cls._table()[1]:
            return None
        m = _PREFIXED.match(key)
        return (m.group(1).upper(), m.group(2)) if m is not None else None

    def _build(self, base: Mapping[str, Any], changes: Mapping[str, Any], strict: bool,
               extra: Optional[Mapping[str, Any]] = None) -> None:
        overrides: Dict[str, Any] = dict(extra or {})
        own: Dict[str, Any] = {}
        specs, names = self._table()
        for key, value in changes.items():
            found = self._prefixed(key)
            if found is None:
                own[key] = value
                continue
            attr = names.get(found[1])
            if attr is not None:
                try:
                    value = _parse_value(specs[attr], value)
                except ConfigError as exc:  # named by the key given, prefix and all
                    raise ConfigError(str(exc).replace(" " + found[1], " " + key, 1)) from None
            elif not found[1].endswith("sasl.jaas.config") and found[1] != "sasl.enabled.mechanisms":
                raise ConfigError("Unknown configuration %r for %s: %s is not a setting a listener overrides"
                                  % (key, type(self).__name__, found[1]))
            overrides[key] = value
        object.__setattr__(self, "listener_overrides", overrides)
        super()._build(base, own, strict)

    def _extra(self) -> Mapping[str, Any]:
        return self.listener_overrides

    def to_dict(self) -> Dict[str, Any]:
        out = super().to_dict()
        out.update(self.listener_overrides)
        return out

    def __repr__(self) -> str:
        shown = ", ".join("%s=%r" % (key, "[hidden]" if sensitive(key) and value is not None
                                     else value) for key, value in self.to_dict().items())
        return "%s(%s)" % (type(self).__qualname__, shown)

    def get(self, key: str, listener: Optional[str] = None) -> Any:
        """Setting ``key`` (dotted) as ``listener`` (a name) sees it: its prefixed value, else the
        broker's. A JAAS config or ``sasl.enabled.mechanisms`` has no unprefixed form but these."""
        return self.source_for(listener)(key)[0]

    def source_for(self, listener: Optional[str]) -> Callable[[str], Tuple[Any, str]]:
        """The settings as ``listener`` (a name; None: the broker's own) sees them, as :meth:`get`
        reads them: key -> (its value, the key to name in an error: the prefixed one when that is
        what was given). What :mod:`.ssl_factory` reads a listener's settings with."""
        prefix = listener_prefix(listener) if listener is not None else None

        def get(key: str) -> Tuple[Any, str]:
            if prefix is not None:
                prefixed = prefix + key
                if prefixed in self.listener_overrides:
                    return self.listener_overrides[prefixed], prefixed
                if prefixed == JAAS_KEY:  # the one prefixed key declared as a setting of its own
                    return self.listener_name_sasl_plaintext_plain_sasl_jaas_config, prefixed
            attr = self._table()[1].get(key)
            return (getattr(self, attr) if attr is not None else None), key
        return get

    def protocol_map(self) -> Dict[str, str]:
        """``listener.security.protocol.map`` as {LISTENER NAME: security protocol}."""
        return parse_protocol_map(self.listener_security_protocol_map)

    def parsed_listeners(self) -> List[Listener]:
        return parse_listeners(self.listeners, "listeners", self.protocol_map())

    def parsed_advertised(self) -> Optional[List[Listener]]:
        if not self.advertised_listeners:
            return None
        return parse_listeners(self.advertised_listeners, "advertised.listeners", self.protocol_map(),
                               distinct_ports=False)

    def _validate(self) -> None:
        # Checked with the rest of the broker's settings, before any file is written:
        # a bad listener must not leave a data directory behind.
        listeners = self.parsed_listeners()
        advertised = self.parsed_advertised()
        if advertised is not None:
            names = {item.name for item in listeners}
            found = [item.name for item in advertised]
            if not set(found) <= names:
                raise ConfigError("advertised.listeners listener names must be equal to or a subset of the ones "
                                  "defined in listeners. Found %s. The valid options based on the current "
                                  "configuration are %s" % (",".join(found), ",".join(sorted(names))))
            if any(item.host == "0.0.0.0" for item in advertised):
                raise ConfigError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                                  "Use a routable IP address.")
        if self.sasl_mechanism_inter_broker_protocol.upper() not in (
                "GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"):
            raise ConfigError("Invalid value %r for configuration sasl.mechanism.inter.broker.protocol"
                              % self.sasl_mechanism_inter_broker_protocol)
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
