"""The Kafka wire protocol server: ``pylogq-broker`` and :meth:`pylogq.Broker.serve`.

Importing it registers :class:`KafkaServer` as the listener that ``Broker.serve``
opens (the broker, a layer below, never imports the server).
"""

from typing import Any, Mapping

from ..cluster.contract import (
    InterBrokerClient,
    InterBrokerConnector,
    ServedBroker,
    register_inter_broker_connector,
    register_listener_factory,
)
from ..config import Config
from .config import ServerConfig
from .listeners import Listener, parse_jaas_users, parse_listeners
from .server import KafkaServer, new_event_loop

__all__ = ["KafkaServer", "Listener", "ServerConfig", "new_event_loop", "parse_jaas_users", "parse_listeners"]


def _serve(broker: ServedBroker, host: str, port: int, options: Mapping[str, Any]) -> KafkaServer:
    options = dict(options)
    listeners = options.pop("listeners", None)  # Kafka's listener string: SSL, SASL_SSL, named listeners
    server = KafkaServer(broker, listeners=[(host, port)] if listeners is None else listeners, **options)
    server.start_in_thread()
    return server


def _connect_to_broker(broker_id: int, host: str, port: int) -> InterBrokerClient:
    # Imported on a cluster's first connection between brokers: a single node never loads
    # the inter-broker client (nor the replication wire it encodes with).
    from .inter_broker import connect

    return connect(broker_id, host, port)


def _secured_connector(settings: Config, listener: str) -> InterBrokerConnector:
    if isinstance(settings, ServerConfig) and settings.protocol_map().get(listener.upper()) == "PLAINTEXT":
        return _connect_to_broker  # the inter-broker client still loads with the first request
    from .inter_broker import secured_connector

    return secured_connector(settings, listener)


register_listener_factory(_serve, ServerConfig)
register_inter_broker_connector(_connect_to_broker, _secured_connector)
