"""Dynamic broker configs: the values AlterConfigs sets on a running broker (Kafka's DynamicBrokerConfig).

Two sets of ``key -> string``, each stored whole where the broker's other metadata is
(a cluster's in ZooKeeper, ``/config/brokers/<id>`` and ``/config/brokers/<default>``;
a single node's in its data directory, :data:`DYNAMIC_CONFIG_FILE`)::

    per-broker dynamic  >  cluster-wide default dynamic  >  static (server.properties)  >  default

A set is checked as Kafka checks it (``validate``): refused are a key Kafka reads only at
start ("Cannot update these configs dynamically"), a keystore or truststore key without a
listener prefix, a per-broker key (listeners, SSL, SASL) on the default resource, and a
password such as a JAAS config (Kafka stores one only encrypted with
``password.encoder.secret``, which pylogq does not have). A value is parsed by its key's
own setting (pylogq's one config parser); a key Kafka does not know is kept as given, as
Kafka keeps custom keys. When each key takes effect: docs/operations.md, "Dynamic broker
configs".
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from ...config import _BOOLEAN, _DOUBLE, _INT, _LIST, _LONG, _STRING, parse_setting
from ...errors import ConfigError
from ...storage.checkpoint import write_atomically
from .config import BrokerConfig, is_dynamic_in_kafka

log = logging.getLogger("pylogq.broker")

__all__ = ["DEFAULT_ENTITY", "DYNAMIC_CONFIG_FILE", "DynamicBrokerConfig", "read_config_file", "write_config_file"]

#: The entity name of the cluster-wide default (Kafka's ``<default>``; the resource name "").
DEFAULT_ENTITY = "<default>"
#: A single node's dynamic configs, next to meta.properties: {"version":1,"<default>":{..},"<id>":{..}}.
DYNAMIC_CONFIG_FILE = "pylogq-broker-configs.json"

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only as listener.name.<listener>.<key>.
_LISTENER_PREFIX_ONLY = frozenset("""
    ssl.keystore.type ssl.keystore.location ssl.keystore.password ssl.key.password ssl.truststore.type
    ssl.truststore.location ssl.truststore.password ssl.keystore.certificate.chain ssl.keystore.key
    ssl.truststore.certificates
""".split())
# Kafka's DynamicListenerConfig.ReconfigurableConfigs less the cluster-level ones: per-broker only.
_PER_BROKER = frozenset("""
    advertised.listeners listeners listener.security.protocol.map principal.builder.class ssl.protocol
    ssl.provider ssl.cipher.suites ssl.enabled.protocols ssl.keymanager.algorithm ssl.trustmanager.algorithm
    ssl.endpoint.identification.algorithm ssl.secure.random.implementation ssl.client.auth
    ssl.engine.factory.class sasl.mechanism.inter.broker.protocol sasl.jaas.config sasl.enabled.mechanisms
    sasl.kerberos.service.name sasl.kerberos.kinit.cmd sasl.kerberos.ticket.renew.window.factor
    sasl.kerberos.ticket.renew.jitter sasl.kerberos.min.time.before.relogin sasl.kerberos.principal.to.local.rules
    sasl.login.refresh.window.factor sasl.login.refresh.window.jitter sasl.login.refresh.min.period.seconds
    sasl.login.refresh.buffer.seconds
""".split()) | _LISTENER_PREFIX_ONLY
# Kafka's dynamic PASSWORD keys (a key ending in one is a password, listener prefix or not).
_PASSWORD_KEYS = ("ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "sasl.jaas.config",
                  "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates")
_CLUSTER_LEVEL_LISTENER = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
_LISTENER_PREFIX = "listener.name."

# Kafka's types of the dynamic keys pylogq declares no setting for (it has no mechanism for
# them): their values are checked as Kafka checks them, then stored and described.
_UNDECLARED_TYPES: Dict[str, Tuple[str, Optional[float]]] = {
    "sasl.kerberos.min.time.before.relogin": (_LONG, None),
    "sasl.kerberos.ticket.renew.window.factor": (_DOUBLE, None),
    "sasl.kerberos.ticket.renew.jitter": (_DOUBLE, None),
    "sasl.kerberos.service.name": (_STRING, None),
    "sasl.kerberos.kinit.cmd": (_STRING, None),
    "sasl.kerberos.principal.to.local.rules": (_LIST, None),
    "sasl.login.refresh.window.factor": (_DOUBLE, None),
    "sasl.login.refresh.window.jitter": (_DOUBLE, None),
    "sasl.login.refresh.min.period.seconds": (_INT, None),
    "sasl.login.refresh.buffer.seconds": (_INT, None),
    "sasl.mechanism.inter.broker.protocol": (_STRING, None),
    "metric.reporters": (_LIST, None),
    "max.connection.creation.rate": (_INT, 0),
    "producer.id.expiration.ms": (_INT, 1),
    "transaction.partition.verification.enable": (_BOOLEAN, None),
    "leader.replication.throttled.rate": (_LONG, 0),
    "follower.replication.throttled.rate": (_LONG, 0),
    "replica.alter.log.dirs.io.max.bytes.per.second": (_LONG, 0),
    "log.local.retention.ms": (_LONG, -2),
    "log.local.retention.bytes": (_LONG, -2),
}


def _kafka_set(keys: Iterable[str]) -> str:
    """Keys as Kafka's messages print a Scala set."""
    return "Set(%s)" % ", ".join(sorted(keys))


def per_broker_only(key: str) -> bool:
    """Whether Kafka takes ``key`` only for one broker, not as the cluster-wide default."""
    if key.startswith(_LISTENER_PREFIX):
        base = key[len(_LISTENER_PREFIX):].partition(".")[2]
        return base not in _CLUSTER_LEVEL_LISTENER
    return key in _PER_BROKER


class DynamicBrokerConfig:
    """A broker's dynamic configs (the default set and its own) over its static configuration.

    ``effective()`` is the configuration the broker runs with: the static settings with the
    default set, then its own set, on top. The sets are replaced whole, never changed in
    place, so a reader that took one sees a consistent set; the broker serializes writers.
    """

    def __init__(self, static: BrokerConfig) -> None:
        self.static = static
        self.default: Dict[str, str] = {}
        self.per_broker: Dict[str, str] = {}

    def validate(self, props: Mapping[str, str], per_broker: bool) -> BrokerConfig:
        """Check a resource's whole new set as Kafka does; -> the effective configuration it
        would make. Raises ConfigError with Kafka's message."""
        read_only = [k for k in props if self.static.dotted_key(k) is not None and not is_dynamic_in_kafka(k)]
        if read_only:
            raise ConfigError("Cannot update these configs dynamically: %s" % _kafka_set(read_only))
        unprefixed = [k for k in props if k in _LISTENER_PREFIX_ONLY]
        if unprefixed:
            raise ConfigError("These security configs can be dynamically updated only per-listener using the "
                              "listener prefix: %s" % _kafka_set(unprefixed))
        for key, value in props.items():
            base = key[len(_LISTENER_PREFIX):].partition(".")[2] if key.startswith(_LISTENER_PREFIX) else key
            if base in _UNDECLARED_TYPES:
                kind, at_least = _UNDECLARED_TYPES[base]
                parse_setting(key, kind, value, at_least=at_least)
        if not per_broker:
            only = [k for k in props if per_broker_only(k)]
            if only:
                raise ConfigError("Cannot update these configs at default cluster level, broker id must be "
                                  "specified: %s" % _kafka_set(only))
        passwords = [k for k in props if k.endswith(_PASSWORD_KEYS)]
        if passwords and not per_broker:
            raise ConfigError("Password config can be defined only at broker level")
        if passwords:
            # Kafka stores a dynamic password only encrypted with password.encoder.secret;
            # pylogq has no password encoder, so it refuses them as Kafka does without one.
            raise ConfigError("Password encoder secret not configured")
        if per_broker:
            return self.effective(per_broker=props)
        return self.effective(default=props)

    def effective(self, default: Optional[Mapping[str, str]] = None,
                  per_broker: Optional[Mapping[str, str]] = None) -> BrokerConfig:
        """The static configuration with the default set, then the broker's own, on top (the
        current sets unless given). Keys pylogq declares no setting for are left out."""
        merged: Dict[str, Any] = {}
        for layer in (self.default if default is None else default,
                      self.per_broker if per_broker is None else per_broker):
            for key, value in layer.items():
                dotted = self.static.dotted_key(key)
                if dotted is not None:
                    merged[dotted] = value
        return self.static.with_dynamic(merged) if merged else self.static

    def usable(self, props: Mapping[str, str], per_broker: bool, where: str) -> Dict[str, str]:
        """The keys of a stored set that pass ``validate`` alone (Kafka ignores, with a
        warning, the ones that no longer do; ``where`` names the set in the message)."""
        kept: Dict[str, str] = {}
        for key, value in props.items():
            try:
                self.validate({key: value}, per_broker)
            except ConfigError as exc:
                log.warning("%s: ignoring dynamic config %s=%s: %s",
                            where, key, value, exc)
                continue
            kept[key] = value
        return kept

    def layers(self, key: str) -> Iterable[Tuple[str, str]]:
        """(source, value) of ``key``'s dynamic values, the winning first (Kafka's synonym order)."""
        if key in self.per_broker:
            yield "DYNAMIC_BROKER_CONFIG", self.per_broker[key]
        if key in self.default:
            yield "DYNAMIC_DEFAULT_BROKER_CONFIG", self.default[key]


def read_config_file(data_dir: str) -> Dict[str, Dict[str, str]]:
    """A single node's stored dynamic configs: entity -> its set (empty when there is no file)."""
    path = os.path.join(data_dir, DYNAMIC_CONFIG_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return {}
    import json  # here: a broker without the file starts without the module

    try:
        obj = json.loads(raw.decode("utf-8"))
        if not isinstance(obj, dict) or obj.get("version") != 1:
            raise ValueError("expected {\"version\": 1, ...}")
        return {str(entity): {str(k): str(v) for k, v in config.items()}
                for entity, config in obj.items() if entity != "version"}
    except (ValueError, AttributeError, UnicodeDecodeError) as exc:
        raise ConfigError("%s holds no dynamic broker configs: %s; move it away to start without them"
                          % (path, exc)) from None


def write_config_file(data_dir: str, sets: Mapping[str, Mapping[str, str]]) -> None:
    """Store a single node's dynamic configs (replacing the file atomically)."""
    import json

    obj: Dict[str, Any] = {"version": 1}
    obj.update({entity: dict(sorted(config.items())) for entity, config in sorted(sets.items()) if config})
    write_atomically(os.path.join(data_dir, DYNAMIC_CONFIG_FILE), (json.dumps(obj, indent=1) + "\n").encode())
