"""pylogq: Kafka's partitioned, replicated commit log as an embeddable Python library.

The public names load on first use, so ``import pylogq.client`` for a TCP client
loads neither the storage engine nor the broker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import errors

if TYPE_CHECKING:
    from .client.admin import AdminClient
    from .client.consumer import Consumer
    from .client.producer import Producer
    from .cluster.broker.broker import Broker
    from .cluster.broker.local_cluster import Cluster
    from .storage.log import Log

from ._version import __version__

__all__ = ["AdminClient", "Broker", "Cluster", "Consumer", "Log", "Producer", "errors", "__version__"]

_LAZY = {
    "AdminClient": "pylogq.client.admin",
    "Broker": "pylogq.cluster.broker.broker",
    "Cluster": "pylogq.cluster.broker.local_cluster",
    "Consumer": "pylogq.client.consumer",
    "Log": "pylogq.storage.log",
    "Producer": "pylogq.client.producer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module 'pylogq' has no attribute %r" % name)
    if name in ("Broker", "Cluster"):
        importlib.import_module("pylogq.server")  # registers the Kafka listener that Broker.serve opens
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
