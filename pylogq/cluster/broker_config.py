"""The broker's settings: Kafka's broker keys beside the log manager's (``log.*``).

One :class:`BrokerConfig` reads a whole ``server.properties``: the node's keys
(``broker.id``, ``num.partitions``, the group coordinator's, ...), every
:class:`~pylogq.storage.config.LogManagerConfig` key, and the listener keys that
:mod:`pylogq.server` reads from it. Values are parsed the way
:mod:`pylogq.config` parses every key; an unknown key raises ConfigError naming it,
with the closest known key as a suggestion.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ..config import suggest
from ..errors import ConfigError
from ..storage.config import LogManagerConfig

__all__ = ["BrokerConfig", "DEVELOPMENT_DEFAULTS"]

#: The settings of Kafka's shipped single-node ``config/server.properties`` that differ
#: from Kafka's defaults: what ``pylogq-broker`` without a properties file and an
#: embedded :class:`pylogq.Broker` start from (a consumer group's first member is
#: answered at once instead of after the 3 s that suit a production cluster).
DEVELOPMENT_DEFAULTS: Dict[str, Any] = {
    "group.initial.rebalance.delay.ms": 0,
}


def _as_int(key: str, value: Any, minimum: Optional[int] = None) -> int:
    try:
        result = int(value)
    except (TypeError, ValueError):
        raise ConfigError("Invalid value %r for configuration %s: expected an integer" % (value, key)) from None
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ConfigError("Invalid value %r for configuration %s: expected an integer" % (value, key))
    if minimum is not None and result < minimum:
        raise ConfigError("Invalid value %r for configuration %s: value must be at least %d" % (value, key, minimum))
    return result


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError("Invalid value %r for configuration %s: expected true or false" % (value, key))


def _as_str(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError("Invalid value %r for configuration %s: expected a string" % (value, key))
    return value.strip()


# Broker settings beside the log manager's, with Kafka's names and defaults.
_BROKER_KEYS: Dict[str, Tuple[Any, Callable[[str, Any], Any]]] = {
    "broker.id": (0, lambda k, v: _as_int(k, v, 0)),
    "num.partitions": (1, lambda k, v: _as_int(k, v, 1)),
    "default.replication.factor": (1, lambda k, v: _as_int(k, v, 1)),
    "auto.create.topics.enable": (True, _as_bool),
    "delete.topic.enable": (True, _as_bool),
    "offsets.topic.num.partitions": (50, lambda k, v: _as_int(k, v, 1)),
    "offsets.topic.replication.factor": (1, lambda k, v: _as_int(k, v, 1)),
    "offsets.topic.segment.bytes": (104857600, lambda k, v: _as_int(k, v, 14)),
    "group.initial.rebalance.delay.ms": (3000, lambda k, v: _as_int(k, v, 0)),
    "group.min.session.timeout.ms": (6000, lambda k, v: _as_int(k, v, 0)),
    "group.max.session.timeout.ms": (1800000, lambda k, v: _as_int(k, v, 0)),
    # How often the high watermarks go to replication-offset-checkpoint (Kafka's key and
    # default): readers of the files alone (pylogq.spark) take it as the committed end.
    "replica.high.watermark.checkpoint.interval.ms": (5000, lambda k, v: _as_int(k, v, 1)),
    # The network server's settings (pylogq.server), kept here so one file configures both.
    "listeners": ("PLAINTEXT://127.0.0.1:9092", lambda k, v: _as_str(k, v)),
    "advertised.listeners": (None, lambda k, v: _as_str(k, v)),
    "socket.request.max.bytes": (104857600, lambda k, v: _as_int(k, v, 1)),
    # Kafka's cap on one fetch response (KIP-541; Kafka's default is 55 MB). pylogq's is
    # 4 MiB: a consumer that asks for 50 MB gets it in responses it can decode while the
    # next one is on the wire, which librdkafka consumes at 2-3x the rate of one huge one.
    "fetch.max.bytes": (4194304, lambda k, v: _as_int(k, v, 1024)),
    "queued.max.requests": (500, lambda k, v: _as_int(k, v, 1)),
    "connections.max.idle.ms": (600000, lambda k, v: _as_int(k, v, 1)),
    # -1 (the OS's buffers, which Linux grows with the traffic) rather than Kafka's fixed
    # 100 KB, which turns a 4 MiB fetch response into dozens of sendfile calls and waits.
    "socket.send.buffer.bytes": (-1, lambda k, v: _as_int(k, v, -1)),
    "socket.receive.buffer.bytes": (-1, lambda k, v: _as_int(k, v, -1)),
    "sasl.enabled.mechanisms": ("PLAIN", lambda k, v: _as_str(k, v)),
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (None, lambda k, v: _as_str(k, v)),
    # Kafka settings that name JVM thread pools or ZooKeeper: accepted so a Kafka
    # server.properties loads unchanged; a single asyncio loop has no such pools.
    "num.network.threads": (3, lambda k, v: _as_int(k, v, 1)),
    "num.io.threads": (8, lambda k, v: _as_int(k, v, 1)),
    "zookeeper.connect": (None, lambda k, v: _as_str(k, v)),
    "zookeeper.connection.timeout.ms": (18000, lambda k, v: _as_int(k, v, 0)),
    "transaction.state.log.replication.factor": (1, lambda k, v: _as_int(k, v, 1)),
    "transaction.state.log.min.isr": (1, lambda k, v: _as_int(k, v, 1)),
}


class BrokerConfig:
    """Broker settings: Kafka's broker keys plus every log manager key (``log.*``).

    Accepts Kafka's dotted keys or snake_case keywords; an unknown key or a bad
    value raises ConfigError naming it.
    """

    def __init__(self, settings: Mapping[str, Any]) -> None:
        values = {k: default for k, (default, _) in _BROKER_KEYS.items()}
        rest: Dict[str, Any] = {}
        for key, value in settings.items():
            dotted = key.replace("_", ".") if key.replace("_", ".") in _BROKER_KEYS else key
            if dotted in _BROKER_KEYS:
                values[dotted] = _BROKER_KEYS[dotted][1](dotted, value)
            else:
                rest[key] = value
        self.values = values
        known = set(LogManagerConfig.known_keys())
        for key in rest:
            if key not in known and key.replace("_", ".") not in known and key not in LogManagerConfig._ALIASES \
                    and key.replace("_", ".") not in LogManagerConfig._ALIASES:
                raise ConfigError("Unknown broker configuration %r%s" % (
                    key, suggest(key, list(_BROKER_KEYS) + sorted(known))))
        self.log_manager = LogManagerConfig.from_dict(rest)
        if values["group.min.session.timeout.ms"] > values["group.max.session.timeout.ms"]:
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")

    def __getitem__(self, key: str) -> Any:
        return self.values[key]
