"""Client quotas and connection creation rates, as Kafka's quota managers enforce them.

**Client quotas** (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599). Each quota type has a
:class:`ClientQuotaManager` (Kafka's ``ClientQuotaManager`` and its subclasses):

- ``Produce``: the bytes of Produce requests (``producer_byte_rate``);
- ``Fetch``: the bytes of consumers' Fetch responses (``consumer_byte_rate``);
- ``Request``: the time the broker spends handling a client's requests, as a percentage
  of one thread (``request_percentage``);
- ``ControllerMutation``: partitions created or deleted by CreateTopics, CreatePartitions
  and DeleteTopics (``controller_mutation_rate``), in a token bucket.

A quota is found for a request's user principal and client id by Kafka's precedence, the
most specific first::

    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<user>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/users/<default>
    /config/clients/<client-id>
    /config/clients/<default>

and the level it is found at names the sensor the request is recorded in (its metric
tags): a quota on ``/config/clients/app`` is shared by every user of client id ``app``,
one on ``/config/users/alice`` by all of alice's clients. Rates are measured over
``quota.window.num`` windows of ``quota.window.size.seconds`` (:class:`pylogq.rate.Rate`).

Throttling is KIP-219's: the response goes out at once, carrying ``throttle_time_ms``,
and the connection is muted (nothing more is read from it) for that long
(:meth:`pylogq.server.connection.Connection.mute_for`). A sensor nobody recorded in for an
hour is dropped (Kafka's inactive sensor expiry), so memory stays bounded by the clients
of the last hour.

**Connection creation rates** (KIP-612, :class:`ConnectionQuotas`): ``max.connection.creation.rate``
broker-wide and ``listener.name.<listener>.max.connection.creation.rate`` per listener delay the
acceptance of new connections (at most one window); ``connection_creation_rate`` on an ip
entity (``/config/ips/<ip>`` or ``<default>``) closes a new connection from that address,
after the throttle time, once its rate is past the bound.

Thread-safe: the managers and the connection rates are recorded on the event loop, read
by a metrics scrape's thread, and their quotas replaced from the thread that applied a
config change; each holds a lock for its rates, which are not thread-safe.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Tuple, Union

from ..cluster.contract import QuotaEntity
from ..cluster.names import sanitize
from ..rate import Rate, TokenBucket, throttle_time_ms

__all__ = ["ClientQuotaManager", "ClientQuotas", "ConnectionQuotas", "DEFAULT", "QuotaSettings",
           "REQUEST_PERCENT_PER_SECOND"]

#: A sensor unused this long is dropped (Kafka's InactiveSensorExpirationTimeSeconds).
INACTIVE_SENSOR_EXPIRATION_S = 3600.0
#: How often the managers look for inactive sensors.
EXPIRY_CHECK_INTERVAL_S = 30.0
#: Request handling time in seconds -> Kafka's request_percentage units (percent of one thread).
REQUEST_PERCENT_PER_SECOND = 100.0
_INT_MAX = 2 ** 31 - 1
#: The tokens an unbounded sensor's bucket reads (Kafka's TokenBucket without a quota: Long.MAX_VALUE).
_UNBOUNDED_TOKENS = float(2 ** 63 - 1)


#: The kinds of overrides (a user side, a client-id side) when only one kind is set.
_CLIENT_IDS_ONLY = frozenset({(False, True)})
_USERS_ONLY = frozenset({(True, False)})
_USER_CLIENT_IDS_ONLY = frozenset({(True, True)})


class _Default:
    """The default entity of a type (``<default>``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"


#: The default entity of a type in an override's key.
DEFAULT = _Default()
#: One side of an override's key: a name, the default, or None (the side is absent).
Side = Union[None, str, _Default]
#: (user side, client-id side) of a quota override: the user sanitized, as Kafka keys it.
OverrideKey = Tuple[Side, Side]
#: A sensor's metric tags: (sanitized user or "", client id or "").
Tags = Tuple[str, str]


class QuotaSettings(NamedTuple):
    """``quota.window.num``, ``quota.window.size.seconds`` and the controller mutations' own pair."""

    samples: int = 11
    window_s: float = 1.0
    controller_samples: int = 11
    controller_window_s: float = 1.0


class _ThrottleTimes:
    """The throttle times applied, averaged over the quota windows (Kafka's throttle-time
    sensor, an ``Avg``). Not thread-safe."""

    __slots__ = ("_sum", "_count")

    def __init__(self, samples: int, window_s: float) -> None:
        self._sum = Rate(samples, window_s)
        self._count = Rate(samples, window_s)

    def record(self, throttle_ms: float, now: float) -> None:
        self._sum.record(throttle_ms, now)
        self._count.record(1, now)

    def average(self, now: float) -> float:
        count = self._count.total(now)
        return self._sum.total(now) / count if count else 0.0


class _Sensor:
    """One set of metric tags' measurement of a quota type, and its throttle times. Its token
    bucket (controller mutations) exists only while a bound applies."""

    __slots__ = ("rate", "bucket", "bound", "throttles", "last")

    def __init__(self, samples: int, window_s: float, bound: Optional[float], token_bucket: bool) -> None:
        self.rate = Rate(samples, window_s)
        self.bucket: Optional[TokenBucket] = None
        self.bound: Optional[float] = None
        self.throttles = _ThrottleTimes(samples, window_s)
        self.last = 0.0
        self.set_bound(bound, token_bucket)

    def set_bound(self, bound: Optional[float], token_bucket: bool) -> None:
        """Take a new bound; an unbounded sensor drops its bucket, so a later bound starts
        with a full one (an unbounded bucket is always full)."""
        self.bound = bound
        if not token_bucket or bound is None:
            self.bucket = None
        elif self.bucket is None:
            self.bucket = TokenBucket(bound, self.rate.samples, self.rate.window_s)
        else:
            self.bucket.set_rate(bound, self.rate.samples, self.rate.window_s)


class ClientQuotaManager:
    """One quota type's overrides and sensors (Kafka's ``ClientQuotaManager``). Thread-safe."""

    def __init__(self, quota_type: str, key: str, samples: int = 11, window_s: float = 1.0,
                 max_throttle_ms: Optional[int] = None, token_bucket: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.quota_type = quota_type
        self.key = key
        self.samples = samples
        self.window_s = window_s
        self.max_throttle_ms = max_throttle_ms
        self.token_bucket = token_bucket
        self._clock = clock
        self._lock = threading.Lock()
        self._overrides: Dict[OverrideKey, float] = {}
        #: (has a user side, has a client-id side) of every override, set with them: with one
        #: kind only, a sensor's level is known without a lookup.
        self._kinds: FrozenSet[Tuple[bool, bool]] = frozenset()
        self._sensors: Dict[Tags, _Sensor] = {}
        self._next_expiry_check = 0.0
        #: Whether any quota of this type is set (unset, nothing is recorded): a plain flag,
        #: read on every request, set with the overrides.
        self.enabled = False

    def set_overrides(self, overrides: Mapping[OverrideKey, float]) -> None:
        """Replace every quota of this type; the sensors take their new bounds at once."""
        with self._lock:
            self._overrides = dict(overrides)
            self._kinds = frozenset((u is not None, c is not None) for u, c in self._overrides)
            self.enabled = bool(self._overrides)
            for tags, sensor in self._sensors.items():
                bound = self._limit(tags)
                if bound != sensor.bound:
                    sensor.set_bound(bound, self.token_bucket)

    # -- precedence ---------------------------------------------------------------------------

    def tags(self, user: str, client_id: str) -> Tags:
        """The metric tags (the sensor) of a sanitized user and a client id: the level of the
        most specific quota that applies, as Kafka's default quota callback picks it."""
        with self._lock:
            return self._tags(user, client_id)

    def _tags(self, user: str, client_id: str) -> Tags:
        overrides, kinds = self._overrides, self._kinds
        if not overrides or kinds == _CLIENT_IDS_ONLY:
            return "", client_id
        if kinds == _USERS_ONLY:
            return user, ""
        if kinds == _USER_CLIENT_IDS_ONLY:
            return user, client_id
        for key, tags in (((user, client_id), (user, client_id)),
                          ((user, DEFAULT), (user, client_id)),
                          ((user, None), (user, "")),
                          ((DEFAULT, client_id), (user, client_id)),
                          ((DEFAULT, DEFAULT), (user, client_id)),
                          ((DEFAULT, None), (user, ""))):
            if key in overrides:
                return tags
        return "", client_id

    def limit(self, user: str, client_id: str) -> Optional[float]:
        """The quota of a sanitized user and a client id (None: unbounded)."""
        with self._lock:
            return self._limit(self._tags(user, client_id))

    def _limit(self, tags: Tags) -> Optional[float]:
        user, client_id = tags
        overrides = self._overrides
        if user and client_id:
            order: Tuple[OverrideKey, ...] = ((user, client_id), (user, DEFAULT), (DEFAULT, client_id),
                                              (DEFAULT, DEFAULT))
        elif user:
            order = ((user, None), (DEFAULT, None))
        elif client_id:
            order = ((None, client_id), (None, DEFAULT))
        else:
            return None
        for key in order:
            if key in overrides:
                return overrides[key]
        return None

    # -- recording ------------------------------------------------------------------------------

    def _sensor(self, user: str, client_id: str, now: float) -> _Sensor:
        tags = self._tags(user, client_id)
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = _Sensor(self.samples, self.window_s, self._limit(tags), self.token_bucket)
        sensor.last = now
        if now >= self._next_expiry_check:
            self._next_expiry_check = now + EXPIRY_CHECK_INTERVAL_S
            horizon = now - INACTIVE_SENSOR_EXPIRATION_S
            for stale in [t for t, s in self._sensors.items() if s.last < horizon]:
                del self._sensors[stale]
        return sensor

    def record(self, user: str, client_id: str, value: float) -> int:
        """Record ``value`` and check the quota: -> the throttle time (ms), 0 within it."""
        if not self.enabled:
            return 0
        now = self._clock()
        with self._lock:
            sensor = self._sensor(user, client_id, now)
            sensor.rate.record(value, now)
            if sensor.bound is None:
                return 0
            throttle = throttle_time_ms(sensor.rate, sensor.bound, now)
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return throttle

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back a value recorded (a throttled fetch, answered without its records)."""
        if not self.enabled:
            return
        now = self._clock()
        with self._lock:
            self._sensor(user, client_id, now).rate.record(-value, now)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """The most that can be recorded at once without a throttle on an idle sensor (Kafka
        caps a consumer's fetch size by it): the quota over the window less one sample."""
        limit = self.limit(user, client_id) if self.enabled else None
        if limit is None:
            return float("inf")
        return limit * (self.samples - 1) * self.window_s

    def throttled(self, user: str, client_id: str, throttle_ms: int) -> None:
        """Note a throttle applied (the ``throttle-time`` metric: its average over the window)."""
        if throttle_ms <= 0 or not self.enabled:
            return
        now = self._clock()
        with self._lock:
            self._sensor(user, client_id, now).throttles.record(throttle_ms, now)

    # -- controller mutations (a token bucket) ------------------------------------------------

    def mutation_throttle_ms(self, user: str, client_id: str) -> int:
        """The throttle time a strict quota refuses mutations for (the bucket owes tokens), else 0."""
        if not self.enabled:
            return 0
        now = self._clock()
        with self._lock:
            sensor = self._sensor(user, client_id, now)
            if sensor.bucket is None or sensor.bound is None:
                return 0
            return sensor.bucket.throttle_time_ms(now)

    def take_mutations(self, user: str, client_id: str, permits: float) -> int:
        """Record ``permits`` mutations (partitions created or deleted), however deep into debt
        they take the bucket: -> the throttle time (ms) of the debt, which a permissive quota
        throttles by (a strict one refuses the next mutation instead)."""
        if not self.enabled:
            return 0
        now = self._clock()
        with self._lock:
            sensor = self._sensor(user, client_id, now)
            sensor.rate.record(permits, now)
            if sensor.bucket is None or sensor.bound is None:
                return 0
            sensor.bucket.take(permits, now)
            return sensor.bucket.throttle_time_ms(now)

    # -- metrics ----------------------------------------------------------------------------------

    def readings(self) -> List[Tuple[str, Tags, float, float, Optional[float]]]:
        """(quota type, tags, measured rate, average throttle time ms, tokens or None) per sensor,
        read under the lock (a scrape's thread reads while the loop records)."""
        out = []
        with self._lock:
            now = self._clock()
            for tags, sensor in self._sensors.items():
                tokens: Optional[float] = None
                if sensor.bucket is not None:
                    tokens = sensor.bucket.tokens(now)
                elif self.token_bucket:
                    tokens = _UNBOUNDED_TOKENS
                out.append((self.quota_type, tags, sensor.rate.measure(now), sensor.throttles.average(now), tokens))
        return out

    @property
    def sensor_count(self) -> int:
        return len(self._sensors)


class ClientQuotas:
    """The four client quota managers of a server, fed by the broker's quota configs."""

    def __init__(self, settings: QuotaSettings = QuotaSettings(), clock: Callable[[], float] = time.monotonic) -> None:
        s = settings
        self.produce = ClientQuotaManager("Produce", "producer_byte_rate", s.samples, s.window_s, clock=clock)
        self.fetch = ClientQuotaManager("Fetch", "consumer_byte_rate", s.samples, s.window_s, clock=clock)
        # Kafka bounds a request-time throttle by one window (ClientRequestQuotaManager).
        self.request = ClientQuotaManager("Request", "request_percentage", s.samples, s.window_s,
                                          max_throttle_ms=int(s.window_s * 1000), clock=clock)
        self.controller_mutation = ClientQuotaManager("ControllerMutation", "controller_mutation_rate",
                                                      s.controller_samples, s.controller_window_s,
                                                      token_bucket=True, clock=clock)
        self.managers = (self.produce, self.fetch, self.request, self.controller_mutation)
        #: ip (or None for <default>) -> connection_creation_rate, for the ConnectionQuotas.
        self.ip_rates: Dict[Optional[str], int] = {}
        #: Whether any client quota is set (a plain flag: read on every response, set by :meth:`update`).
        self.enabled = False

    def update(self, configs: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Take every entity's quota values (the broker's cache, after each change)."""
        per_key: Dict[str, Dict[OverrideKey, float]] = {m.key: {} for m in self.managers}
        ips: Dict[Optional[str], int] = {}
        for entity, values in configs.items():
            names = dict(entity)
            if "ip" in names:
                if "connection_creation_rate" in values:
                    ips[names["ip"]] = int(values["connection_creation_rate"])
                continue
            key: OverrideKey = (_side(names, "user", sanitized=True), _side(names, "client-id"))
            for quota_key, value in values.items():
                if quota_key in per_key:
                    per_key[quota_key][key] = value
        for manager in self.managers:
            manager.set_overrides(per_key[manager.key])
        self.enabled = any(m.enabled for m in self.managers)
        self.ip_rates = ips


def _side(names: Mapping[str, Optional[str]], kind: str, sanitized: bool = False) -> Side:
    if kind not in names:
        return None
    name = names[kind]
    if name is None:
        return DEFAULT
    return sanitize(name) if sanitized else name


class _RateQuota:
    """A connection creation rate and its bound (None: unbounded); a listener's also keeps the
    accept throttle times it applied (its ``connection-accept-throttle-time`` metric)."""

    __slots__ = ("rate", "bound", "throttles")

    def __init__(self, samples: int, window_s: float, bound: Optional[float], throttles: bool = False) -> None:
        self.rate = Rate(samples, window_s)
        self.bound = bound
        self.throttles = _ThrottleTimes(samples, window_s) if throttles else None


class ConnectionQuotas:
    """KIP-612's connection creation rates: broker-wide, per listener, per IP. Thread-safe:
    recorded on the loop and read by a metrics scrape's thread under one lock (the rates are
    not thread-safe); the ip bounds are replaced from another thread a whole dict at a time."""

    def __init__(self, broker_rate: Optional[int], listener_rates: Mapping[str, Optional[int]],
                 protected_listener: Optional[str], settings: QuotaSettings = QuotaSettings(),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.samples = settings.samples
        self.window_s = settings.window_s
        self.max_throttle_ms = int(settings.window_s * 1000)
        self._clock = clock
        self._broker = _RateQuota(self.samples, self.window_s, _bound(broker_rate))
        self._listeners = {name: _RateQuota(self.samples, self.window_s, _bound(rate), throttles=True)
                           for name, rate in listener_rates.items()}
        # The inter-broker listener is exempt from the broker-wide rate when there are others.
        self._protected = protected_listener if len(listener_rates) > 1 else None
        self._ip_bounds: Dict[Optional[str], int] = {}
        self._ips: Dict[str, Tuple[_RateQuota, float]] = {}  # ip -> (its rate, last recorded)
        self._next_expiry_check = 0.0
        self._lock = threading.Lock()

    def set_ip_rates(self, rates: Mapping[Optional[str], int]) -> None:
        """``connection_creation_rate`` per ip (None: ``<default>``); from any thread (the
        recorded rates take their bounds at their next connection)."""
        self._ip_bounds = dict(rates)

    def _ip_bound(self, ip: str) -> Optional[float]:
        bounds = self._ip_bounds
        rate = bounds.get(ip, bounds.get(None))
        return None if rate is None or rate >= _INT_MAX else float(rate)

    def limits(self, listener: str) -> bool:
        """Whether a broker-wide or ``listener``'s rate is bounded (else nothing is recorded)."""
        quota = self._listeners.get(listener)
        return (self._broker.bound is not None and listener != self._protected) or \
            (quota is not None and quota.bound is not None)

    def accept_delay_ms(self, listener: str) -> int:
        """Record a new connection on ``listener``: -> how long (ms) to delay its acceptance so
        that the broker's and the listener's rates stay within their bounds (at most a window)."""
        with self._lock:
            now = self._clock()
            throttle = 0
            if listener != self._protected:
                throttle = self._record(self._broker, now)
            quota = self._listeners.get(listener)
            if quota is not None:
                throttle = max(throttle, self._record(quota, now))
                if throttle > 0 and quota.throttles is not None:
                    quota.throttles.record(throttle, now)
            return throttle

    def ip_throttle_ms(self, ip: str, listener: str) -> int:
        """Record a new connection from ``ip``: -> 0 to accept it, else how long (ms) to hold it
        before closing it (its rate is past the ip's bound; the connection is taken back from
        every rate, as Kafka does)."""
        if not self._ip_bounds:
            return 0
        bound = self._ip_bound(ip)
        if bound is None:
            return 0
        with self._lock:
            now = self._clock()
            entry = self._ips.get(ip)
            quota = entry[0] if entry is not None else _RateQuota(self.samples, self.window_s, bound)
            quota.bound = bound
            self._ips[ip] = (quota, now)
            if now >= self._next_expiry_check:
                self._next_expiry_check = now + EXPIRY_CHECK_INTERVAL_S
                horizon = now - INACTIVE_SENSOR_EXPIRATION_S
                for stale in [k for k, (_, last) in self._ips.items() if last < horizon]:
                    del self._ips[stale]
            throttle = self._record(quota, now)
            if throttle > 0:
                quota.rate.record(-1, now)
                if listener != self._protected:
                    self._broker.rate.record(-1, now)
                listener_quota = self._listeners.get(listener)
                if listener_quota is not None:
                    listener_quota.rate.record(-1, now)
            return throttle

    def _record(self, quota: _RateQuota, now: float) -> int:
        quota.rate.record(1, now)
        if quota.bound is None:
            return 0
        return min(throttle_time_ms(quota.rate, quota.bound, now), self.max_throttle_ms)

    def readings(self) -> List[Tuple[str, float, float]]:
        """(listener, connection creation rate, average accept throttle time ms) per listener,
        read under the lock (from a scrape's thread)."""
        out = []
        with self._lock:
            now = self._clock()
            for name, quota in self._listeners.items():
                throttle = quota.throttles.average(now) if quota.throttles is not None else 0.0
                out.append((name, quota.rate.measure(now), throttle))
        return out


def _bound(rate: Optional[int]) -> Optional[float]:
    return None if rate is None or rate >= _INT_MAX else float(rate)
