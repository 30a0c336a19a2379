"""Kafka's client properties files for the tools: ``--command-config``, ``--producer.config``, ``--consumer.config``.

An operator reaches a broker that has only SSL or SASL listeners the way Kafka's tools
do, with a properties file of Kafka's client keys::

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="alice" password="alice-secret";
    ssl.truststore.type=PEM
    ssl.truststore.location=/etc/kafka/ca.pem

:func:`connection_options` turns the keys about the connection into the keyword
arguments of pylogq's clients (:data:`pylogq.client.transport.TCP_OPTIONS`):

- ``security.protocol`` (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``);
- ``sasl.mechanism`` (``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``; Kafka's default,
  ``GSSAPI``, is refused) and the ``username`` and ``password`` of ``sasl.jaas.config``'s
  PlainLoginModule or ScramLoginModule;
- the ``ssl.*`` keys of Kafka's clients (trust store and key store as PKCS12 or PEM,
  files or inline text, ``ssl.endpoint.identification.algorithm``,
  ``ssl.enabled.protocols``, ``ssl.cipher.suites``) become one ``ssl.SSLContext``, made
  by the broker's own :func:`pylogq.server.ssl_factory.client_context`: the same rules
  and messages as a broker's, a JKS store refused the same way;
- ``client.id`` and ``request.timeout.ms``.

A bad value, a missing file or a wrong password is a ConfigError naming the key. The
``ssl.*`` and ``sasl.*`` keys the clients have no use for (``ssl.protocol``,
``sasl.login.*``, those of a protocol not in use) are reported in one warning and
ignored, as Kafka's clients ignore settings they do not use; so are, for
``--command-config`` (:func:`read_command_config`), the keys about anything but the
connection. The console and perf tools' files hold their clients' other settings
too (``linger.ms``), which :func:`client_settings` hands on.
"""

from __future__ import annotations

import argparse
import ssl
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, TextIO, Tuple

from ..client.tcp import SASL_MECHANISMS, SECURITY_PROTOCOLS
from ..config import _INT, parse_setting
from ..errors import ConfigError
from .clients import client_configs, parse_key_values, read_properties

__all__ = ["ClientProperties", "add_client_config_argument", "add_command_config_argument", "client_settings",
           "connection_options", "read_command_config"]

#: Kafka's client defaults of the ``ssl.*`` keys the SSL context is made from.
_SSL_DEFAULTS: Dict[str, Any] = {
    "ssl.keystore.type": "JKS",
    "ssl.truststore.type": "JKS",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.endpoint.identification.algorithm": "https",
}
_SSL_LISTS = ("ssl.enabled.protocols", "ssl.cipher.suites")
_LOGIN_EXAMPLE = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="..." password="...";'


class ClientProperties(NamedTuple):
    """A properties file sorted for a client: its connection options, the rest, and what is ignored."""

    #: Keyword arguments of pylogq's clients (security_protocol, ssl_context, ...).
    options: Dict[str, Any]
    #: The keys not about the connection, as given.
    rest: Dict[str, str]
    #: Connection keys given and not used, each with why.
    ignored: List[Tuple[str, str]]


def _security(properties: Mapping[str, str]) -> Tuple[Dict[str, Any], List[str]]:
    """``security.protocol`` and the SASL login: (options, the sasl.* keys used)."""
    text = properties.get("security.protocol", "PLAINTEXT")
    protocol = text.strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError("Invalid value %r for configuration security.protocol: String must be one of: %s"
                          % (text, ", ".join(SECURITY_PROTOCOLS)))
    options: Dict[str, Any] = {"security_protocol": protocol}
    if not protocol.startswith("SASL_"):
        return options, []
    given = properties.get("sasl.mechanism")
    mechanism = (given or "GSSAPI").strip().upper()
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError("sasl.mechanism %s is not supported by pylogq's clients (%s)%s"
                          % (mechanism, ", ".join(SASL_MECHANISMS),
                             "" if given else ": it is Kafka's default, set sasl.mechanism"))
    from ..server.listeners import jaas_credentials  # with a SASL login only: it loads the server package

    credentials = jaas_credentials(properties.get("sasl.jaas.config"), "sasl.jaas.config", _LOGIN_EXAMPLE)
    if credentials is None:
        raise ConfigError("sasl.jaas.config is not set: security.protocol %s logs in with it (%s)"
                          % (protocol, _LOGIN_EXAMPLE))
    options.update(sasl_mechanism=mechanism, sasl_plain_username=credentials[0], sasl_plain_password=credentials[1])
    return options, ["sasl.mechanism", "sasl.jaas.config"]


def _ssl_context(properties: Mapping[str, str]) -> Tuple[ssl.SSLContext, List[str]]:
    """The SSL context of the ``ssl.*`` keys, as a broker makes its own client side: (it, the keys read)."""
    from ..server.ssl_factory import client_context  # with TLS only: it loads the server package

    read: List[str] = []

    def get(key: str) -> Tuple[Any, str]:
        read.append(key)
        value: Any = properties.get(key, _SSL_DEFAULTS.get(key))
        if key in _SSL_LISTS and isinstance(value, str):
            value = [item.strip() for item in value.split(",") if item.strip()]
        return value, key

    return client_context(get), read


def connection_options(properties: Mapping[str, str]) -> ClientProperties:
    """Kafka's client keys about the connection as pylogq's client options (module docstring).

    ConfigError naming the key when one is wrong; the other keys are in ``rest``.
    """
    options, used = _security(properties)
    protocol = options["security_protocol"]
    if protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"], read = _ssl_context(properties)
        used.extend(read)
    if properties.get("client.id", "").strip():
        options["client_id"] = properties["client.id"].strip()
    if "request.timeout.ms" in properties:
        options["request_timeout_ms"] = parse_setting("request.timeout.ms", _INT, properties["request.timeout.ms"],
                                                      at_least=1)
    rest: Dict[str, str] = {}
    ignored: List[Tuple[str, str]] = []
    for key, value in properties.items():
        if key in used or key in ("security.protocol", "client.id", "request.timeout.ms"):
            continue
        if key.startswith("ssl.") and protocol not in ("SSL", "SASL_SSL"):
            ignored.append((key, "security.protocol is %s" % protocol))
        elif key.startswith("sasl.") and not protocol.startswith("SASL_"):
            ignored.append((key, "security.protocol is %s" % protocol))
        elif key.startswith(("ssl.", "sasl.")):
            ignored.append((key, "pylogq's clients do not use it"))
        else:
            rest[key] = value
    return ClientProperties(options, rest, ignored)


def _warn(err: TextIO, source: str, ignored: List[Tuple[str, str]]) -> None:
    by_reason: Dict[str, List[str]] = {}
    for key, reason in ignored:
        by_reason.setdefault(reason, []).append(key)
    for reason, keys in by_reason.items():
        err.write("Warning: %s: %s ignored (%s)\n" % (source, ", ".join(sorted(keys)), reason))


def read_command_config(path: str, err: TextIO) -> Dict[str, Any]:
    """The client options of a ``--command-config`` file; a warning on ``err`` names the keys
    ignored. CommandError when the file cannot be read, ConfigError naming a bad key."""
    found = connection_options(read_properties(path))
    # bootstrap.servers is --bootstrap-server's, as in Kafka's tools, which set it over the file's.
    unused = [(key, "not a connection setting") for key in found.rest if key != "bootstrap.servers"]
    _warn(err, path, found.ignored + unused)
    return found.options


def client_settings(path: Optional[str], items: Optional[Sequence[str]], flag: str, err: TextIO) -> Dict[str, Any]:
    """A producer's or consumer's keyword arguments from a properties file (``--producer.config``,
    or none) overridden key by key by ``KEY=VALUE`` items (``--producer-property``, named
    ``flag``): the connection's options, and the other keys as
    :func:`pylogq.cli.clients.client_configs` spells them (the client refuses one it does
    not know). The warning about ignored keys names where each came from."""
    properties: Dict[str, str] = dict(read_properties(path)) if path else {}
    overrides = parse_key_values(items, flag)
    properties.update(overrides)
    found = connection_options(properties)
    _warn(err, flag, [entry for entry in found.ignored if entry[0] in overrides])
    if path:
        _warn(err, path, [entry for entry in found.ignored if entry[0] not in overrides])
    return {**client_configs(found.rest), **found.options}


def add_command_config_argument(parser: argparse.ArgumentParser, *aliases: str, default: Optional[str] = None) -> None:
    """``--command-config FILE``, as Kafka's admin tools take it (``aliases``: the tool's older names;
    ``default``: as :func:`pylogq.cli.clients.add_bootstrap_argument`'s)."""
    parser.add_argument("--command-config", *aliases, dest="command_config", metavar="FILE", default=default,
                        help="a properties file of Kafka's client settings for reaching the broker: "
                             "security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config, client.id, "
                             "request.timeout.ms")


def add_client_config_argument(parser: argparse.ArgumentParser, client: str) -> None:
    """``--producer.config FILE`` (or ``--consumer.config``), and ``--command-config``, its name
    since Kafka 4.2 (KIP-1147): one or the other, for a properties file of the ``client``'s settings."""
    which = parser.add_mutually_exclusive_group()
    dest = "%s_config" % client
    which.add_argument("--%s.config" % client, dest=dest, metavar="FILE",
                       help="a properties file of %s settings (security.protocol, ssl.*, sasl.* and the %s's own)"
                            % (client, client))
    which.add_argument("--command-config", dest=dest, metavar="FILE",
                       help="the same as --%s.config (its name since Kafka 4.2)" % client)
