"""Users' SCRAM credentials, stored as Kafka stores them: one string per mechanism per user.

A user's config maps a mechanism name (``SCRAM-SHA-256``) to its credential string
(``salt=...,stored_key=...,server_key=...,iterations=...``, see
:mod:`pylogq.protocol.scram`); other keys (Kafka's user quotas) are kept as found.

- a single node keeps them in its data directory (``pylogq-users.json``, replaced
  atomically on every change): :class:`FileUserCredentials`;
- a broker of a cluster keeps them in ZooKeeper's ``/config/users/<name>`` with a
  config change notification (``users/<name>``) that every broker applies to its
  cache: :class:`ZkUserCredentials`.

Authentication reads the cache (:meth:`cached`, a dict lookup, on the event loop);
the admin APIs read and write the authoritative store (off the loop).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Sequence

from ... import errors
from ...storage.checkpoint import write_atomically

if TYPE_CHECKING:  # a single node never loads the cluster's modules
    from ..zk.client import KafkaZkClient

__all__ = ["FileUserCredentials", "USERS_FILE", "UserCredentials", "ZkUserCredentials"]

log = logging.getLogger(__name__)

USERS_FILE = "pylogq-users.json"


class UserCredentials:
    """Users' configs: a cache for authentication, reads and writes for the admin APIs.

    Thread-safe: the cache is replaced per user under a lock, readers take a reference.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: Dict[str, Dict[str, str]] = {}

    def cached(self, user: str) -> Dict[str, str]:
        """The user's config as this broker last heard of it (empty for an unknown user)."""
        return self._cache.get(user, {})

    def read(self, users: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, str]]:
        """The configs of ``users`` (every user's when None), from the authoritative store."""
        raise NotImplementedError

    def write(self, user: str, config: Mapping[str, str]) -> None:
        """Replace one user's config (empty: the user has none)."""
        raise NotImplementedError

    def _remember(self, user: str, config: Mapping[str, str]) -> None:
        with self._lock:
            if config:
                self._cache[user] = dict(config)
            else:
                self._cache.pop(user, None)


class FileUserCredentials(UserCredentials):
    """A single node's users, in ``<data dir>/pylogq-users.json`` (survives restarts)."""

    def __init__(self, data_dir: str) -> None:
        super().__init__()
        self.path = os.path.join(data_dir, USERS_FILE)
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
            import json  # here: a broker without users starts without the module

            body = json.loads(raw.decode("utf-8"))
            users = body["users"]
            for user, config in users.items():
                self._cache[str(user)] = {str(k): str(v) for k, v in config.items()}
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise errors.CorruptRecordError("%s is not a users file: %s" % (self.path, exc)) from None

    def read(self, users: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, str]]:
        with self._lock:
            if users is None:
                return {u: dict(c) for u, c in self._cache.items()}
            return {u: dict(self._cache[u]) for u in users if u in self._cache}

    def write(self, user: str, config: Mapping[str, str]) -> None:
        with self._lock:
            users = dict(self._cache)
            if config:
                users[user] = dict(config)
            else:
                users.pop(user, None)
            import json

            body = json.dumps({"version": 1, "users": users}, sort_keys=True, indent=1)
            write_atomically(self.path, body.encode("utf-8"))
            self._cache = users


class ZkUserCredentials(UserCredentials):
    """A cluster member's view of ``/config/users``: loaded when it joins, refreshed per notification."""

    def __init__(self, zk: "KafkaZkClient") -> None:
        super().__init__()
        self.zk = zk

    def load(self) -> None:
        """Read every user's config (at start, before any change notification is applied)."""
        for user in self.zk.get_user_names():
            self.refresh(user)

    def refresh(self, user: str) -> None:
        """Re-read one user after a ``users/<name>`` notification."""
        try:
            config = self.zk.get_user_config(user)
        except (errors.MetadataStoreError, errors.CorruptMetadataError) as exc:  # the store failed, or a malformed znode
            log.warning("could not read the config of user %r: %s", user, exc)
            return
        self._remember(user, config)

    def read(self, users: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, str]]:
        names = self.zk.get_user_names() if users is None else list(users)
        found: Dict[str, Dict[str, str]] = {}
        for user in names:
            config = self.zk.get_user_config(user)
            if config:
                found[user] = config
        return found

    def write(self, user: str, config: Mapping[str, str]) -> None:
        self.zk.set_user_config(user, config)
        self._remember(user, config)  # this broker at once; the others on the notification
