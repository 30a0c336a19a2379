"""The Kafka wire protocol server: ``pylogq-broker`` and :meth:`pylogq.Broker.serve`."""

from .listeners import Listener, parse_jaas_users, parse_listeners
from .server import KafkaServer, new_event_loop

__all__ = ["KafkaServer", "Listener", "new_event_loop", "parse_jaas_users", "parse_listeners"]
