"""One broker's connection to another, opened when first used.

The controller's senders (:mod:`pylogq.cluster.controller.channel`), the follower fetchers
(:mod:`pylogq.cluster.broker.replica_fetcher`) and a controlled shutdown's request each talk to one other
broker through an :class:`~.contract.InterBrokerClient`. A :class:`BrokerLink` opens
it at the endpoint of the inter-broker listener (the broker's first endpoint when it
advertises none by that name), and its owner closes it after a failed call so that
the next call connects again, to the endpoint the registration then names.
"""

from __future__ import annotations

import logging
from typing import Optional

from .. import errors
from .contract import BrokerRegistration, InterBrokerClient, InterBrokerConnector

__all__ = ["BrokerLink"]

log = logging.getLogger(__name__)


class BrokerLink:
    """A client to ``broker``, opened at the first :meth:`client` call and again after
    :meth:`close`. Used by one thread at a time, as the client is."""

    def __init__(self, broker: BrokerRegistration, connector: InterBrokerConnector,
                 listener: Optional[str]) -> None:
        self.broker = broker
        self._connector = connector
        self._listener = listener
        self._client: Optional[InterBrokerClient] = None

    def client(self) -> InterBrokerClient:
        """The open client; raises BrokerNotAvailableError when the broker has no endpoint."""
        if self._client is None:
            endpoint = self.broker.endpoint(self._listener) or self.broker.endpoint()
            if endpoint is None:
                raise errors.BrokerNotAvailableError("broker %d has no endpoint" % self.broker.broker_id)
            self._client = self._connector(self.broker.broker_id, endpoint.host, endpoint.port)
        return self._client

    def abort(self) -> None:
        """From another thread: end the client's call in flight at once (see
        :meth:`~.contract.InterBrokerClient.abort`)."""
        client = self._client
        if client is not None:
            client.abort()

    def close(self) -> None:
        """Close the client, if open (a broken connection's close errors are only logged)."""
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                log.debug("closing the connection to broker %d", self.broker.broker_id, exc_info=True)
