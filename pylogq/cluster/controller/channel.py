"""The controller's requests to the brokers, one sender thread per broker (Kafka's
ControllerChannelManager and RequestSendThread).

Each live broker has a queue: LeaderAndIsr, UpdateMetadata and StopReplica requests go
out in the order the controller made them, one at a time, so a slow or unreachable
broker delays only its own queue and never the controller. A request that cannot be
delivered is retried (the broker may be restarting) until it is delivered or the
broker is removed from the channel (its registration went: the controller will send
it everything again when it comes back). A response goes to the request's callback,
on the sender thread.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, Union

from ... import errors
from ..broker_link import BrokerLink
from ..contract import (
    BrokerRegistration,
    InterBrokerConnector,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

__all__ = ["ControllerChannelManager", "ControllerRequest"]

log = logging.getLogger("pylogq.controller")

ControllerRequest = Union[LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest]
Callback = Callable[[int, Any], None]  # (broker id, response)

#: How long a sender waits before retrying an undeliverable request.
RETRY_BACKOFF_S = 0.1


class _Sender:
    """One broker's queue and the thread that empties it."""

    def __init__(self, broker: BrokerRegistration, connector: InterBrokerConnector, listener: Optional[str]) -> None:
        self.broker = broker
        self._link = BrokerLink(broker, connector, listener)
        self._cond = threading.Condition()
        self._queue: Deque[Tuple[ControllerRequest, Optional[Callback]]] = deque()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="pylogq-controller-to-broker-%d" % broker.broker_id,
                                        daemon=True)
        self._thread.start()

    def enqueue(self, request: ControllerRequest, callback: Optional[Callback]) -> None:
        with self._cond:
            self._queue.append((request, callback))
            self._cond.notify()

    def stop(self) -> None:
        """Stop sending; a request in flight to a broker that stopped answering is abandoned."""
        with self._cond:
            self._stopped = True
            self._queue.clear()
            self._cond.notify()
        self._link.abort()

    def join(self, timeout: float) -> None:
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    break
                request, callback = self._queue[0]
            response = self._deliver(request)
            with self._cond:
                if self._stopped:
                    break
                self._queue.popleft()
            if callback is not None and response is not None:
                try:
                    callback(self.broker.broker_id, response)
                except Exception:  # noqa: BLE001 - a callback must not stop the sender
                    log.exception("controller callback for broker %d failed", self.broker.broker_id)
        self._link.close()

    def _deliver(self, request: ControllerRequest) -> Optional[Any]:
        """Send until delivered; None when the sender was stopped first."""
        while True:
            with self._cond:
                if self._stopped:
                    return None
            try:
                client = self._link.client()
                if isinstance(request, LeaderAndIsrRequest):
                    return client.leader_and_isr(request)
                if isinstance(request, UpdateMetadataRequest):
                    return client.update_metadata(request)
                return client.stop_replica(request)
            except errors.BrokerNotAvailableError as exc:
                log.debug("controller: broker %d unreachable (%s); retrying", self.broker.broker_id, exc)
            except Exception:  # noqa: BLE001 - retried like an unreachable broker
                log.exception("controller: sending %s to broker %d failed; retrying", type(request).__name__,
                              self.broker.broker_id)
            self._link.close()
            with self._cond:
                if self._stopped:
                    return None
                self._cond.wait(RETRY_BACKOFF_S)


class ControllerChannelManager:
    """The controller's senders, by broker id. Thread-safe."""

    def __init__(self, connector: InterBrokerConnector, listener: Optional[str] = None) -> None:
        self._connector = connector
        self._listener = listener
        self._lock = threading.Lock()
        self._senders: Dict[int, _Sender] = {}

    def add_broker(self, broker: BrokerRegistration) -> None:
        with self._lock:
            old = self._senders.get(broker.broker_id)
            if old is not None and old.broker == broker:
                return
            if old is not None:
                old.stop()
            self._senders[broker.broker_id] = _Sender(broker, self._connector, self._listener)

    def remove_broker(self, broker_id: int) -> None:
        with self._lock:
            sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.stop()

    def send(self, broker_id: int, request: ControllerRequest, callback: Optional[Callback] = None) -> bool:
        """Queue ``request`` for ``broker_id``; False when that broker is not in the channel."""
        with self._lock:
            sender = self._senders.get(broker_id)
        if sender is None:
            return False
        sender.enqueue(request, callback)
        return True

    def brokers(self) -> List[int]:
        with self._lock:
            return sorted(self._senders)

    def pending(self) -> int:
        """Requests not yet delivered, over all brokers."""
        with self._lock:
            senders = list(self._senders.values())
        return sum(s.pending() for s in senders)

    def shutdown(self) -> None:
        with self._lock:
            senders = list(self._senders.values())
            self._senders.clear()
        for s in senders:
            s.stop()
        for s in senders:
            s.join(10)
