"""pylogq: Kafka's partitioned, replicated commit log as an embeddable Python library."""

from . import errors
from .broker import Broker
from .storage.log import Log

__version__ = "0.1.0.dev0"

__all__ = ["Broker", "Log", "errors", "__version__"]
