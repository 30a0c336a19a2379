"""Client quota configs: where a broker keeps them, and DescribeClientQuotas and AlterClientQuotas.

Quotas are entity configs, as Kafka keeps them in ZooKeeper mode (KIP-55, KIP-546, KIP-612):

    /config/clients/<client-id>                  producer_byte_rate, consumer_byte_rate,
    /config/clients/<default>                    request_percentage, controller_mutation_rate
    /config/users/<user>                         the same keys (beside the user's SCRAM credentials)
    /config/users/<default>
    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/ips/<ip> and /config/ips/<default>   connection_creation_rate

Names are url-encoded as Kafka's Sanitizer encodes them; ``<default>`` is the entity type's
default. Each change writes the entity's whole config map (a user's SCRAM credentials are
read and written back unchanged) and a config change notification naming the entity path
(``users/alice/clients/app``), which every broker applies to its cache.

- a single node keeps them in its data directory (``pylogq-quotas.json``, replaced
  atomically on each change, keyed by the same entity paths): :class:`FileClientQuotas`;
- a broker of a cluster keeps them in ZooKeeper: :class:`ZkClientQuotas`.

Each store holds a cache of every entity's quota values (floats) that the server's quota
managers read, and tells its watchers the whole cache after each change. DescribeClientQuotas
and AlterClientQuotas follow Kafka's ZooKeeper-mode admin manager (``ZkAdminManager``):
its filters, its checks and its error messages.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import threading
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ... import errors
from ...config import java_double
from ...storage.checkpoint import write_atomically
from ..contract import QuotaAlteration, QuotaEntity, QuotaFilterComponent
from ..names import desanitize, sanitize

if TYPE_CHECKING:  # a single node never loads the cluster's modules
    from ..zk.client import KafkaZkClient

__all__ = ["CLIENT_QUOTA_KEYS", "ClientQuotaStore", "DEFAULT", "FileClientQuotas", "IP_QUOTA_KEYS", "QUOTAS_FILE",
           "ZkClientQuotas", "entity_path", "entity_of_path"]

log = logging.getLogger("pylogq.broker")

QUOTAS_FILE = "pylogq-quotas.json"
#: The entity name of a type's default.
DEFAULT = "<default>"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
#: The quota keys of user and client-id entities, with Kafka's types (QuotaConfig).
CLIENT_QUOTA_KEYS: Dict[str, str] = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
}
#: The quota keys of ip entities (KIP-612).
IP_QUOTA_KEYS: Dict[str, str] = {"connection_creation_rate": "INT"}
# Match types of a DescribeClientQuotas filter component.
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
_EPSILON = 1e-6
_INT_MAX = 2 ** 31 - 1
_LONG_MAX = 2 ** 63 - 1

QuotaValues = Dict[QuotaEntity, Dict[str, float]]
Watcher = Callable[[QuotaValues], None]


def _path_name(name: Optional[str]) -> str:
    """An entity name as its path spells it: sanitized, ``<default>`` for None."""
    return DEFAULT if name is None else sanitize(name)


def _name_of_path(name: str) -> Optional[str]:
    return None if name == DEFAULT else desanitize(name)


def entity_path(entity: QuotaEntity) -> str:
    """The entity's config path below ``/config`` (``users/alice/clients/app``)."""
    names = dict(entity)
    if set(names) == {USER, CLIENT_ID}:
        return "users/%s/clients/%s" % (_path_name(names[USER]), _path_name(names[CLIENT_ID]))
    if set(names) == {USER}:
        return "users/" + _path_name(names[USER])
    if set(names) == {CLIENT_ID}:
        return "clients/" + _path_name(names[CLIENT_ID])
    if set(names) == {IP}:
        return "ips/" + _path_name(names[IP])
    raise errors.InvalidRequestError("Invalid client quota entity")


def entity_of_path(path: str) -> Optional[QuotaEntity]:
    """The entity an entity path names (None: not a quota entity's path)."""
    parts = path.split("/")
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return ((CLIENT_ID, _name_of_path(parts[3])), (USER, _name_of_path(parts[1])))
    if len(parts) == 2 and parts[1]:
        kind = {"users": USER, "clients": CLIENT_ID, "ips": IP}.get(parts[0])
        if kind is not None:
            return ((kind, _name_of_path(parts[1])),)
    return None


def _keys_of(entity: QuotaEntity) -> Dict[str, str]:
    return IP_QUOTA_KEYS if entity and entity[0][0] == IP else CLIENT_QUOTA_KEYS


def quota_values(entity: QuotaEntity, config: Mapping[str, str]) -> Dict[str, float]:
    """The quota keys of an entity's config map as numbers (other keys, a user's SCRAM
    credentials among them, and values that are not numbers are left out)."""
    out: Dict[str, float] = {}
    for key in _keys_of(entity):
        if key in config:
            try:
                out[key] = float(config[key])
            except ValueError:
                log.warning("ignoring quota %s=%r of %s: not a number", key, config[key], entity_path(entity))
    return out


def normalize_entity(pairs: Iterable[Tuple[str, Optional[str]]]) -> QuotaEntity:
    """An entity from the (type, name) pairs of a request (a type named twice keeps its last
    name, as Kafka's map does), checked as Kafka checks it."""
    names: Dict[str, Optional[str]] = {}
    for kind, name in pairs:
        names[kind] = name
    if not names:
        raise errors.InvalidRequestError("Invalid empty client quota entity")
    for kind, name in names.items():
        if kind not in (USER, CLIENT_ID, IP):
            raise errors.InvalidRequestError("Unhandled client quota entity type: %s" % kind)
        if name is not None and not name:
            raise errors.InvalidRequestError("Empty %s not supported" % kind)
    if IP in names and len(names) > 1:
        raise errors.InvalidRequestError("Invalid quota entity combination, IP entity should not be used with "
                                         "user/client ID entity.")
    if IP in names and names[IP] is not None and not _valid_ip_entity(str(names[IP])):
        raise errors.InvalidRequestError("%s is not a valid IP or resolvable host." % _path_name(names[IP]))
    return tuple(sorted(names.items()))


def _valid_ip_entity(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


class ClientQuotaStore:
    """Every entity's quota values: a cache for the quota managers, reads and writes of the
    authoritative store for the admin APIs.

    Thread-safe: the cache is replaced whole under a lock (readers take a reference), and
    writes are serialized by the same lock.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._cache: QuotaValues = {}
        self._watchers: List[Watcher] = []

    def cached(self) -> QuotaValues:
        """Every entity's quota values as this broker last heard of them."""
        return self._cache

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """Tell ``watcher`` the cache now and after every change; -> the call that stops it."""
        with self._lock:
            self._watchers.append(watcher)
            cache = self._cache
        watcher(cache)

        def unwatch() -> None:
            with self._lock:
                if watcher in self._watchers:
                    self._watchers.remove(watcher)
        return unwatch

    # -- the authoritative store (subclasses) ---------------------------------------------

    def read(self, entity: QuotaEntity) -> Dict[str, str]:
        """The entity's whole config map (every key, as stored)."""
        raise NotImplementedError

    def read_all(self, kind: str) -> Dict[str, Dict[str, str]]:
        """Entity path -> config map of every stored entity under ``kind`` (``users``,
        ``clients``, ``ips``, or ``users/clients`` for every user's client entities)."""
        raise NotImplementedError

    def write(self, entity: QuotaEntity, config: Mapping[str, str]) -> None:
        """Replace the entity's whole config map (and tell every broker)."""
        raise NotImplementedError

    def _remember(self, entity: QuotaEntity, config: Mapping[str, str]) -> None:
        self._apply({entity: quota_values(entity, config)})

    def _apply(self, changes: Mapping[QuotaEntity, Dict[str, float]]) -> None:
        """Take each entity's quota values (none: it has no quota now) into a new cache, and
        tell the watchers once if it changed."""
        with self._lock:
            cache = dict(self._cache)
            for entity, values in changes.items():
                if values:
                    cache[entity] = values
                else:
                    cache.pop(entity, None)
            if cache == self._cache:
                return
            self._cache = cache
            watchers = list(self._watchers)
        for watcher in watchers:
            try:
                watcher(cache)
            except Exception:  # noqa: BLE001 - a watcher's bug must not stop the others
                log.exception("a client quota watcher failed")

    def _load_all(self) -> None:
        """Fill the cache from the authoritative store: every entity read, then one new cache
        (the watchers told once, however many entities there are)."""
        loaded: QuotaValues = {}
        for kind in ("clients", "users", "users/clients", "ips"):
            for path, config in self.read_all(kind).items():
                entity = entity_of_path(path)
                if entity is not None:
                    loaded[entity] = quota_values(entity, config)
        self._apply(loaded)

    # -- DescribeClientQuotas -----------------------------------------------------------------

    def describe(self, components: Sequence[QuotaFilterComponent], strict: bool) -> QuotaValues:
        """The entities the filter matches, with their quota values (Kafka's rules: a component
        per entity type; ``strict`` leaves out entities with a type no component names)."""
        by_type: Dict[str, QuotaFilterComponent] = {}
        for component in components:
            kind = component.entity_type
            if kind in (USER, CLIENT_ID, IP):
                if kind in by_type:
                    raise errors.InvalidRequestError("Duplicate %s filter component entity type"
                                                     % {USER: "user", CLIENT_ID: "client", IP: "ip"}[kind])
            elif kind == "":
                raise errors.InvalidRequestError("Unexpected empty filter component entity type")
            else:
                raise errors.UnsupportedVersionError("Custom entity type '%s' not supported" % kind)
            if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
                raise errors.UnknownServerError("Unexpected match type: %d" % component.match_type)
            by_type[kind] = component
        if IP in by_type and (USER in by_type or CLIENT_ID in by_type):
            raise errors.InvalidRequestError("Invalid entity filter component combination, IP filter component "
                                             "should not be used with user or clientId filter component.")
        found: QuotaValues = {}
        if IP not in by_type:
            found.update(self._describe_users_and_clients(by_type.get(USER), by_type.get(CLIENT_ID), strict))
        if USER not in by_type and CLIENT_ID not in by_type:
            found.update(self._describe_ips(by_type.get(IP), strict))
        return found

    def _describe_users_and_clients(self, user: Optional[QuotaFilterComponent], client: Optional[QuotaFilterComponent],
                                    strict: bool) -> QuotaValues:
        def matches(component: Optional[QuotaFilterComponent], name: Optional[str], present: bool) -> bool:
            if component is None:
                return not present or not strict
            if not present:
                return False
            if component.match_type == MATCH_EXACT:
                return name == component.match
            if component.match_type == MATCH_DEFAULT:
                return name is None
            return True

        candidates: Dict[QuotaEntity, Dict[str, str]] = {}
        for kind in ("users", "clients", "users/clients"):
            if kind == "users" and user is None and strict:
                continue
            if kind == "clients" and client is None and strict:
                continue
            for path, config in self.read_all(kind).items():
                entity = entity_of_path(path)
                if entity is not None:
                    candidates[entity] = config
        out: QuotaValues = {}
        for entity, config in candidates.items():
            names = dict(entity)
            if not (matches(user, names.get(USER), USER in names) and
                    matches(client, names.get(CLIENT_ID), CLIENT_ID in names)):
                continue
            values = quota_values(entity, config)
            if values:
                out[entity] = values
        return out

    def _describe_ips(self, ip: Optional[QuotaFilterComponent], strict: bool) -> QuotaValues:
        if ip is None and strict:
            return {}
        out: QuotaValues = {}
        for path, config in self.read_all("ips").items():
            entity = entity_of_path(path)
            if entity is None:
                continue
            name = entity[0][1]
            if ip is not None and ip.match_type == MATCH_EXACT and name != ip.match:
                continue
            if ip is not None and ip.match_type == MATCH_DEFAULT and name is not None:
                continue
            if ip is not None and ip.match_type == MATCH_ANY and name is None:
                continue
            values = quota_values(entity, config)
            if values:
                out[entity] = values
        return out

    # -- AlterClientQuotas --------------------------------------------------------------------

    def alter(self, alterations: Sequence[QuotaAlteration], validate_only: bool
              ) -> Dict[QuotaEntity, Tuple[int, Optional[str]]]:
        """Each entity's changes, checked as Kafka checks them; an entity with a bad change gets
        none of its changes, with the error of the first. -> entity -> (error code, message)."""
        out: Dict[QuotaEntity, Tuple[int, Optional[str]]] = {}
        for alteration in alterations:
            entity = tuple(alteration.entity)
            try:
                entity = normalize_entity(alteration.entity)
                self._alter_entity(entity, alteration.ops, validate_only)
                out[entity] = (0, None)
            except errors.BrokerError as exc:
                log.info("client quota change of %s refused: %s", entity_path_or(entity), exc)
                out[entity] = (int(exc.code), str(exc.args[0]) if exc.args else exc.message)  # Kafka's words
            except Exception as exc:  # noqa: BLE001 - the store failed: this entity's error
                log.error("client quota change of %s failed", entity_path_or(entity), exc_info=exc)
                out[entity] = (errors.UnknownServerError.code, str(exc) or type(exc).__name__)
        return out

    def _alter_entity(self, entity: QuotaEntity, ops: Sequence[Tuple[str, Optional[float]]],
                      validate_only: bool) -> None:
        keys = _keys_of(entity)
        with self._lock:
            config = self.read(entity)
            for key, value in ops:
                if value is None:
                    config.pop(key, None)
                    continue
                kind = keys.get(key)
                if kind is None:
                    raise errors.InvalidRequestError("Invalid configuration key %s" % key)
                if kind == "DOUBLE":
                    config[key] = java_double(value)  # as Kafka stores it
                    continue
                number = int(value + _EPSILON)
                if abs(number - value) > _EPSILON or number > (_INT_MAX if kind == "INT" else _LONG_MAX):
                    raise errors.InvalidRequestError("Configuration %s must be a %s value" % (key, kind))
                config[key] = str(number)
            if not validate_only:
                self.write(entity, config)
                log.info("client quotas of %s are now %s", entity_path(entity), quota_values(entity, config))


def entity_path_or(entity: Sequence[Tuple[str, Optional[str]]]) -> str:
    try:
        return entity_path(tuple(sorted(dict(entity).items())))
    except errors.BrokerError:
        return repr(tuple(entity))


class FileClientQuotas(ClientQuotaStore):
    """A single node's quotas, in ``<data dir>/pylogq-quotas.json`` (survives restarts)."""

    def __init__(self, data_dir: str) -> None:
        super().__init__()
        self.path = os.path.join(data_dir, QUOTAS_FILE)
        self._entities: Dict[str, Dict[str, str]] = {}
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return
        import json  # here: a broker without quotas starts without the module

        try:
            body = json.loads(raw.decode("utf-8"))
            if not isinstance(body, dict) or body.get("version") != 1:
                raise ValueError("expected {\"version\": 1, \"entities\": {...}}")
            for path, config in body["entities"].items():
                self._entities[str(path)] = {str(k): str(v) for k, v in config.items()}
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise errors.ConfigError("%s holds no client quotas: %s; move it away to start without them"
                                     % (self.path, exc)) from None
        self._load_all()

    def read(self, entity: QuotaEntity) -> Dict[str, str]:
        with self._lock:
            return dict(self._entities.get(entity_path(entity), {}))

    def read_all(self, kind: str) -> Dict[str, Dict[str, str]]:
        depth = 4 if kind == "users/clients" else 2
        root = kind.split("/")[0] + "/"
        with self._lock:
            return {path: dict(config) for path, config in self._entities.items()
                    if path.startswith(root) and path.count("/") + 1 == depth}

    def write(self, entity: QuotaEntity, config: Mapping[str, str]) -> None:
        import json

        path = entity_path(entity)
        with self._lock:
            entities = dict(self._entities)
            if config:
                entities[path] = dict(config)
            else:
                entities.pop(path, None)
            body = json.dumps({"version": 1, "entities": entities}, sort_keys=True, indent=1) + "\n"
            write_atomically(self.path, body.encode("utf-8"))
            self._entities = entities
            self._remember(entity, config)


class ZkClientQuotas(ClientQuotaStore):
    """A cluster member's view of the quota entities in the metadata store: loaded when it
    joins, refreshed per config change notification."""

    def __init__(self, zk: "KafkaZkClient") -> None:
        super().__init__()
        self.zk = zk

    def load(self) -> None:
        """Read every entity (at start, after the notification watch is set)."""
        self._load_all()

    def refresh(self, path: str) -> bool:
        """Re-read the entity a notification names; -> whether it names a quota entity."""
        entity = entity_of_path(path)
        if entity is None:
            return False
        try:
            config = self.zk.get_entity_config(path)
        except (errors.MetadataStoreError, errors.CorruptMetadataError) as exc:
            log.warning("could not read the quotas of %s: %s", path, exc)
            return True
        self._remember(entity, config)
        return True

    def read(self, entity: QuotaEntity) -> Dict[str, str]:
        return self.zk.get_entity_config(entity_path(entity))

    def read_all(self, kind: str) -> Dict[str, Dict[str, str]]:
        out: Dict[str, Dict[str, str]] = {}
        if kind == "users/clients":
            for user in self.zk.get_entity_names("users"):
                for client in self.zk.get_entity_names("users/%s/clients" % user):
                    path = "users/%s/clients/%s" % (user, client)
                    out[path] = self.zk.get_entity_config(path)
            return out
        for name in self.zk.get_entity_names(kind):
            path = "%s/%s" % (kind, name)
            out[path] = self.zk.get_entity_config(path)
        return out

    def write(self, entity: QuotaEntity, config: Mapping[str, str]) -> None:
        self.zk.set_entity_config(entity_path(entity), config)
        self._remember(entity, config)  # this broker at once; the others on the notification
