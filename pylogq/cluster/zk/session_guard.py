"""Whether this broker's metadata store session still vouches for the leaderships it holds.

A broker leads a partition because the controller said so, and the controller moves that
leadership elsewhere once the broker's session expires. A broker that was paused past its
session (SIGSTOP, a long GC-like stall, a suspended VM) or cut off from the store and from
its followers long enough does not hear of it at once: until the controller's next request
reaches it, it still believes it leads. Answering clients as a leader meanwhile does harm:

- an idempotent producer that has moved on to the new leader comes back with sequence
  numbers this broker never saw, and is told OUT_OF_ORDER_SEQUENCE_NUMBER (fatal to
  librdkafka) instead of NOT_LEADER_OR_FOLLOWER;
- the group coordinator of a ``__consumer_offsets`` partition answers OffsetFetch from its
  cache, older than the commits the new coordinator has taken: committed offsets seem to
  go backwards;
- a consumer fetching from it is told its position is out of range (this log ends where
  the pause began) and resets to ``auto.offset.reset``, then commits what it read again.

So a leadership is *in doubt*, and this broker refuses to act on it (produce, consumer
fetches and ListOffsets: NOT_LEADER_OR_FOLLOWER; its groups: NOT_COORDINATOR), while any of
these holds:

- **paused**: the broker's own clock shows a gap of more than two thirds of the session
  timeout between two ticks of a thread that ticks every 100 ms (the process did not run;
  kazoo's pings are a third of the session apart, so the server may have heard nothing for
  the whole session). The doubt ends when a store call shows this broker's registration
  still owned by its session (the session survived), or as for an expired session.
- **expired**: the store reported the session expired, or a paused broker found its
  registration gone. The doubt ends when the controller speaks (LeaderAndIsr or
  UpdateMetadata) to the registration made since.
- **cut off**: the store connection has been suspended for more than a third of the session
  timeout (with kazoo's read timeout, the session is about to expire on the server) *and*
  the partition's in-sync followers have all been silent for more than two thirds of it.
  During a ZooKeeper outage the followers go on fetching, and the leader goes on serving:
  writes continue while ZooKeeper is down.

Kafka (ZooKeeper mode) has no such rule: its stale leader goes on answering until the
controller reaches it, and its acks=all writes time out rather than succeed. Pauses are
watched only for a broker with a store of its own (a process): the in-process cluster's
brokers share the test's process and its pauses with their store.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional

from .store import CONNECTED, EXPIRED, SUSPENDED

__all__ = ["SessionGuard", "TICK_S"]

log = logging.getLogger("pylogq.cluster")

#: How often the pause watcher ticks.
TICK_S = 0.1
#: How long a verification of the session waits between attempts when the store does not answer.
VERIFY_RETRY_S = 0.5

PAUSED = "paused"
EXPIRED_DOUBT = "expired"


class SessionGuard:
    """See the module docstring. Thread-safe; every check is cheap and takes no other lock.

    ``session_timeout_ms``: the store session's. ``owned_registration``: a store call ->
    the epoch of this broker's registration if its current session owns it, else None,
    raising if the store does not answer. ``broker_epoch``: the current registration's
    epoch. ``watch_pauses``: run the pause watcher.
    """

    def __init__(self, session_timeout_ms: int, owned_registration: Callable[[], Optional[int]],
                 broker_epoch: Callable[[], int], watch_pauses: bool,
                 clock: Callable[[], float] = time.monotonic) -> None:
        session_s = session_timeout_ms / 1000.0
        self.pause_s = session_s * 2.0 / 3.0
        self.suspended_s = session_s / 3.0
        self.followers_silent_ms = int(self.pause_s * 1000)
        self._owned_registration = owned_registration
        self._broker_epoch = broker_epoch
        self._clock = clock
        self._lock = threading.Lock()
        self._doubt: Optional[str] = None  # PAUSED or EXPIRED_DOUBT
        self._doubt_epoch = -1  # the registration the doubt is about
        self._suspended_since: Optional[float] = None
        self._last_tick = clock()
        self._verifying = False
        self._closed = threading.Event()
        self._watcher: Optional[threading.Thread] = None
        if watch_pauses:
            self._watcher = threading.Thread(target=self._watch, name="pylogq-session-guard", daemon=True)
            self._watcher.start()

    # -- what callers ask ---------------------------------------------------------------

    def doubt(self, followers_silent_ms: Callable[[], Optional[int]]) -> Optional[str]:
        """Why a leadership is in doubt, or None. ``followers_silent_ms``: how long every
        in-sync follower of the partition has been silent (None: it has no other in-sync
        replica), asked only when the store connection has been suspended long enough."""
        now = self._clock()
        if self._watcher is not None:
            self._check_gap(now)
        with self._lock:
            if self._doubt is not None:
                return "this broker %s its metadata store session" % (
                    "was paused past" if self._doubt == PAUSED else "lost")
            since = self._suspended_since
        if since is None or now - since <= self.suspended_s:
            return None
        silent = followers_silent_ms()
        if silent is None or silent <= self.followers_silent_ms:
            return None
        return "this broker has been cut off from the metadata store for %.1f s and its followers for %.1f s" % (
            now - since, silent / 1000.0)

    @property
    def in_doubt(self) -> bool:
        """Whether every leadership is in doubt (a pause or an expired session)."""
        return self.doubt(lambda: None) is not None

    # -- what the broker tells it -------------------------------------------------------

    def session_state(self, state: str) -> None:
        """A store session state change (the store's listener)."""
        with self._lock:
            if state == SUSPENDED:
                if self._suspended_since is None:
                    self._suspended_since = self._clock()
            elif state == CONNECTED:
                self._suspended_since = None
            elif state == EXPIRED:
                self._suspended_since = None
                self._set_expired_locked()

    def controller_spoke(self, broker_epoch: int) -> None:
        """A controller request addressed to ``broker_epoch`` was applied: an expired
        session's doubt ends once the controller speaks to the registration made since."""
        with self._lock:
            if self._doubt == EXPIRED_DOUBT and broker_epoch > self._doubt_epoch:
                log.info("the controller has spoken to this broker's registration at epoch %d: "
                         "its leaderships are no longer in doubt", broker_epoch)
                self._doubt = None

    def close(self) -> None:
        self._closed.set()

    # -- internals ----------------------------------------------------------------------

    def _set_expired_locked(self) -> None:
        if self._doubt != EXPIRED_DOUBT:
            log.warning("this broker's metadata store session expired: it refuses to act as a leader "
                        "until the controller speaks to its new registration")
        self._doubt = EXPIRED_DOUBT
        self._doubt_epoch = max(self._doubt_epoch, self._broker_epoch())

    def _watch(self) -> None:
        while not self._closed.wait(TICK_S):
            self._check_gap(self._clock())

    def _check_gap(self, now: float) -> None:
        with self._lock:
            gap = now - self._last_tick
            self._last_tick = max(self._last_tick, now)
            if gap <= self.pause_s or self._doubt is not None:
                return
            log.warning("this broker did not run for %.1f s (more than two thirds of its metadata store "
                        "session): it refuses to act as a leader until its session is confirmed", gap)
            self._doubt = PAUSED
            self._doubt_epoch = max(self._doubt_epoch, self._broker_epoch())
            if self._verifying:
                return
            self._verifying = True
        threading.Thread(target=self._verify, name="pylogq-session-verify", daemon=True).start()

    def _verify(self) -> None:
        """Ask the store whether the session survived the pause, until it answers."""
        try:
            while not self._closed.is_set():
                try:
                    owned = self._owned_registration()
                except Exception as exc:  # noqa: BLE001 - the store does not answer yet: ask again
                    log.info("cannot confirm the metadata store session yet: %s", exc)
                    if self._closed.wait(VERIFY_RETRY_S):
                        return
                    continue
                with self._lock:
                    if self._doubt != PAUSED:
                        return  # expired meanwhile: the controller's word ends it
                    if owned is not None and owned == self._doubt_epoch:
                        log.info("this broker's metadata store session survived its pause")
                        self._doubt = None
                    else:
                        self._set_expired_locked()
                return
        finally:
            with self._lock:
                self._verifying = False
