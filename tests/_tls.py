"""A broker serving TLS (and SASL) listeners in this process, for the tests of TLS clients and tools.

:func:`start` runs a :class:`pylogq.Broker` with a :class:`~pylogq.server.KafkaServer` on
its own thread, each listener of ``settings["listeners"]`` on an OS-chosen port;
:func:`stop` shuts both down. The certificates come from ``tests/_certs.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Tuple

import pylogq
from pylogq.server import KafkaServer
from pylogq.server.connection import Connection

Address = Tuple[str, int]


class TlsBroker(NamedTuple):
    broker: pylogq.Broker
    server: KafkaServer
    addresses: Dict[str, Address]

    def bootstrap(self, listener: str) -> str:
        return "%s:%d" % self.addresses[listener]

    def connections(self) -> List[Connection]:
        return list(self.server._connections)


def start(data_dir: Path, settings: Dict[str, Any]) -> TlsBroker:
    broker = pylogq.Broker(str(data_dir), **settings)
    try:  # a listener's settings are checked by the server: a refused one leaves no broker open
        server = KafkaServer(broker)
        server.start_in_thread()
    except BaseException:
        broker.close()
        raise
    return TlsBroker(broker, server, {lst.name: addr for lst, addr in zip(server.listeners, server.addresses)})


def stop(tls: TlsBroker) -> None:
    tls.server.stop_thread()
    tls.broker.close()
