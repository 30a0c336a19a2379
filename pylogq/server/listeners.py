"""Kafka's ``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map``, and SASL/PLAIN user lists.

``listeners=CLIENT://127.0.0.1:9093,INTERNAL://127.0.0.1:9094``: one server socket per
entry, each under a listener name that ``listener.security.protocol.map``
(``CLIENT:SSL,INTERNAL:PLAINTEXT``) gives its security protocol. Kafka's default map
names each protocol after itself (``PLAINTEXT://``, ``SSL://``, ``SASL_PLAINTEXT://``,
``SASL_SSL://``), so a listener named after its protocol needs no map. Names are
case-insensitive and kept upper-case (Kafka's ``ListenerName.normalised``); a listener's
own settings are the keys under ``listener.name.<name in lower case>.`` (Kafka's
prefix), which win over the unprefixed key. An empty host means every interface, as in
Kafka. Listeners have different ports, but for two on the same port of which one binds an
IPv4 address and the other an IPv6 address, as Kafka allows. The errors are Kafka's, in
Kafka's words.
"""

from __future__ import annotations

import re
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple

from ..errors import ConfigError

__all__ = ["DEFAULT_PROTOCOL_MAP", "JaasEntry", "Listener", "SECURITY_PROTOCOLS", "jaas_credentials", "listener_prefix",
           "parse_jaas_config", "parse_jaas_login", "parse_jaas_users", "parse_listeners", "parse_protocol_map"]

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
        out.append(Listener(name, host, port, protocol))
    if not out:
        raise ConfigError("Invalid value %r for configuration %s: no listener given" % (text, key))
    if distinct_ports:
        _check_ports(out, key, text)
    return out


def _ip_version(host: str) -> Optional[int]:
    """4 or 6 for an IP address, None for a host name (or the empty host: every interface)."""
    import ipaddress  # with a shared port only: not on the startup path

    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


def _check_ports(listeners: List[Listener], key: str, text: str) -> None:
    """Kafka's rule (``listenerListToEndPoints``): listeners have different ports (0, any free
    port, excepted), but for one IPv4 address and one IPv6 address on the same port."""
    by_port: Dict[int, List[Listener]] = {}
    for listener in listeners:
        if listener.port:
            by_port.setdefault(listener.port, []).append(listener)
    for port, sharing in by_port.items():
        if len(sharing) < 2:
            continue
        versions = [_ip_version(listener.host) for listener in sharing]
        ips = sorted(version for version in versions if version is not None)
        if len(sharing) - len(ips) > 1:  # host names: nothing tells them apart
            raise ConfigError("Each listener must have a different port, %s: %s" % (key, text))
        if len(ips) != 2:
            raise ConfigError("Each listener must have a different port unless exactly one listener has an IPv4 "
                              "address and the other IPv6 address, %s: %s, port: %d" % (key, text, port))
        if ips != [4, 6] or len(sharing) > 2:
            raise ConfigError("If you have two listeners on the same port then one needs to be IPv4 and the other "
                              "IPv6, %s: %s, port: %d" % (key, text, port))


PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_JAAS_MODULES = (PLAIN_LOGIN_MODULE, "org.apache.kafka.common.security.scram.ScramLoginModule")
_JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")
# Java's StreamTokenizer as Kafka's JaasConfig sets it up: comments, quoted strings (with
# backslash escapes), the two ordinary characters, and words of anything else.
_JAAS_TOKEN = re.compile(r"""\s+|//[^\n]*|/\*.*?\*/|"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([=;])|([^\s=;"']+)""",
                         re.DOTALL)
_JAAS_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class JaasEntry(NamedTuple):
    """One login module of a JAAS configuration: its class, control flag and options."""

    module: str
    flag: str
    options: Dict[str, str]


def _jaas_tokens(text: str, key: str) -> List[Tuple[str, str]]:
    """(kind, text) per token: ``word``, ``quoted`` or the character ``=`` / ``;``."""
    tokens: List[Tuple[str, str]] = []
    at = 0
    while at < len(text):
        m = _JAAS_TOKEN.match(text, at)
        if m is None:  # an unterminated quote or comment
            raise ConfigError("%s: unterminated quoted value or comment in the JAAS configuration" % key)
        at = m.end()
        quoted = m.group(1) if m.group(1) is not None else m.group(2)
        if quoted is not None:
            tokens.append(("quoted", re.sub(r"\\(.)", lambda e: _JAAS_ESCAPES.get(e.group(1), e.group(1)), quoted)))
        elif m.group(3):
            tokens.append((m.group(3), m.group(3)))
        elif m.group(4):
            tokens.append(("word", m.group(4)))
    return tokens


def parse_jaas_config(text: str, key: str) -> List[JaasEntry]:
    """The login modules of a JAAS configuration value, as Kafka's JaasConfig reads one:
    ``<LoginModuleClass> <flag> (<option>=<value>)*;`` per module, a value quoted or a
    single word, ``//`` and ``/* */`` comments. ConfigError naming ``key`` when it is not
    in that form; the message never repeats the text, which holds passwords."""
    tokens = _jaas_tokens(text, key)
    entries: List[JaasEntry] = []
    i = 0
    while i < len(tokens):
        kind, module = tokens[i]
        if kind != "word":  # a quoted value is not shown: it may be a password
            raise ConfigError("%s: a JAAS login module's class name is expected, not %s"
                              % (key, "a quoted value" if kind == "quoted" else repr(module)))
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "word":
            raise ConfigError("%s: the control flag (%s) of login module %s is missing"
                              % (key, ", ".join(_JAAS_FLAGS), module))
        flag = tokens[i + 1][1]
        if flag.lower() not in _JAAS_FLAGS:
            raise ConfigError("%s: invalid control flag %r of login module %s (%s)"
                              % (key, flag, module, ", ".join(_JAAS_FLAGS)))
        i += 2
        options: Dict[str, str] = {}
        while i < len(tokens) and tokens[i][0] != ";":
            name = tokens[i][1]
            if tokens[i][0] != "word" or i + 2 >= len(tokens) or tokens[i + 1][0] != "=" \
                    or tokens[i + 2][0] not in ("word", "quoted"):
                raise ConfigError("%s: no value for option %r of login module %s (option=\"value\")"
                                  % (key, name, module))
            options[name] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise ConfigError("%s: the entry of login module %s does not end with ';'" % (key, module))
        i += 1
        entries.append(JaasEntry(module, flag.lower(), options))
    if not entries:
        raise ConfigError("%s: no login module in the JAAS configuration" % key)
    return entries


def parse_jaas_users(text: Optional[str], key: str = "plain.sasl.jaas.config") -> Dict[str, str]:
    """The ``user_NAME="PASSWORD"`` options of a PlainLoginModule JAAS line, as Kafka's
    PlainServerCallbackHandler reads them (the line read as Kafka's JaasConfig reads it);
    ConfigError naming ``key``, never repeating the text (it holds passwords)."""
    if not text or not text.strip():
        return {}
    entries = parse_jaas_config(text, key)
    if len(entries) != 1 or entries[0].module != PLAIN_LOGIN_MODULE:
        raise ConfigError("%s: one %s login module is expected, found %s" % (
            key, PLAIN_LOGIN_MODULE, ", ".join(e.module for e in entries) or "none"))
    return {name[len("user_"):]: value for name, value in entries[0].options.items()
            if name.startswith("user_") and len(name) > len("user_")}


def parse_jaas_login(text: Optional[str], key: str) -> Optional[Dict[str, str]]:
    """The options (``username``, ``password``) of a client's one PlainLoginModule or
    ScramLoginModule JAAS line: what a broker authenticates to the others with, and a tool's
    ``sasl.jaas.config`` (None when ``text`` is empty). ConfigError naming ``key`` otherwise."""
    if not text or not text.strip():
        return None
    entries = parse_jaas_config(text, key)
    if len(entries) != 1:
        raise ConfigError("%s: a client's JAAS configuration names one login module, not %d" % (key, len(entries)))
    if entries[0].module not in _JAAS_MODULES:
        raise ConfigError("%s: login module %s is not supported; use %s"
                          % (key, entries[0].module, " or ".join(_JAAS_MODULES)))
    return dict(entries[0].options)


def jaas_credentials(text: Optional[str], key: str, example: str = "") -> Optional[Tuple[str, str]]:
    """The ``username`` and ``password`` of a client's JAAS line (:func:`parse_jaas_login`): what
    a broker authenticates to the others with, and a tool's ``sasl.jaas.config``. None when
    ``text`` is empty; ConfigError naming ``key`` (and showing ``example``, a line as it should
    be) when the login module lacks either."""
    login = parse_jaas_login(text, key)
    if login is None:
        return None
    missing = [name for name in ("username", "password") if name not in login]
    if missing:
        raise ConfigError("%s: the login module has no %s option%s"
                          % (key, " and no ".join(missing), " (%s)" % example if example else ""))
    return login["username"], login["password"]
