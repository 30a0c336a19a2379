"""pylogq: Kafka's partitioned, replicated commit log as an embeddable Python library."""

from . import errors
from .broker import Broker
from .client.admin import AdminClient
from .client.consumer import Consumer
from .client.producer import Producer
from .storage.log import Log

__version__ = "0.1.0.dev0"

__all__ = ["AdminClient", "Broker", "Consumer", "Log", "Producer", "errors", "__version__"]
