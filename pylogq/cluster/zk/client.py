"""The cluster's metadata operations on a metadata store, in Kafka's znode layout (KafkaZkClient).

Every read and write the brokers and the controller make of the shared metadata goes
through here: broker registration, controller election and its epoch, topic
assignments and configs, partition states, deletion markers, ISR change and config
change notifications, producer id blocks and the cluster id. The layout and the JSON
are :mod:`pylogq.cluster.zk.data`'s (Kafka's). The store is either ZooKeeper or the in-memory one,
behind :class:`~pylogq.cluster.zk.store.MetadataStore`.

Writes that decide a partition's state are conditional: the controller's carry a
check of the controller epoch znode's version (a controller that lost its election
cannot write, Kafka's "zombie controller" fencing), and every partition state write
names the state's version it read (its partition epoch). Thread-safe as the store is.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ... import errors
from ..contract import BrokerRegistration
from ..names import desanitize, sanitize
from .data import (
    BROKER_IDS_PATH,
    CLUSTER_ID_PATH,
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_PATH,
    ISR_CHANGE_PREFIX,
    LOG_DIR_EVENT_PATH,
    LOG_DIR_EVENT_PREFIX,
    PERSISTENT_PATHS,
    PREFERRED_ELECTION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    REASSIGN_PARTITIONS_PATH,
    TOPICS_PATH,
    PartitionState,
    TopicAssignment,
    broker_config_path,
    broker_path,
    decode_broker,
    decode_broker_config,
    decode_cluster_id,
    decode_config_change,
    decode_controller,
    decode_entity_config,
    decode_isr_change,
    decode_log_dir_event,
    decode_partition_state,
    decode_producer_id_block,
    decode_reassignment,
    decode_topic_assignment,
    decode_topic_config,
    delete_topic_path,
    encode_broker,
    encode_cluster_id,
    encode_config_change,
    encode_controller,
    encode_isr_change,
    encode_log_dir_event,
    encode_partition_state,
    encode_producer_id_block,
    encode_reassignment,
    encode_topic_assignment,
    encode_topic_config,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
)
from .store import CheckOp, CreateOp, DeleteOp, MetadataStore, Op, SetOp, WatchedEvent, ZnodeStat

log = logging.getLogger("pylogq.zk")

__all__ = ["ControllerEpochZkVersion", "KafkaZkClient", "Watcher"]

Watcher = Callable[[WatchedEvent], None]
#: How often a broker waiting for its previous registration to expire looks at it again.
REGISTRATION_RECHECK_S = 1.0
#: (controller epoch, version of the controller epoch znode): a controller's writes check it.
ControllerEpochZkVersion = Tuple[int, int]


class KafkaZkClient:
    """Kafka's metadata operations over one metadata store session. Thread-safe."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    # -- layout and identity ------------------------------------------------------------

    def ensure_layout(self) -> None:
        """Create the persistent paths a cluster needs (each broker does it at start)."""
        for path in PERSISTENT_PATHS:
            self.store.ensure_path(path)

    def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster's id; the first broker to start writes ``proposed``."""
        try:
            data, _ = self.store.get(CLUSTER_ID_PATH)
            return decode_cluster_id(data)
        except errors.NoNodeError:
            pass
        try:
            self.store.create(CLUSTER_ID_PATH, encode_cluster_id(proposed), makepath=True)
            return proposed
        except errors.NodeExistsError:  # another broker was first
            data, _ = self.store.get(CLUSTER_ID_PATH)
            return decode_cluster_id(data)

    # -- brokers ------------------------------------------------------------------------

    def register_broker(self, registration: BrokerRegistration, wait_s: float) -> int:
        """Create ``/brokers/ids/<id>`` for this session; -> the broker epoch (its czxid).

        A registration left by this broker's previous life (a session that has not yet
        expired) is waited for, up to ``wait_s``, as Kafka does; one held by another
        live broker with the same id raises ConfigError once the wait is over.
        """
        path = broker_path(registration.broker_id)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.store.create(path, encode_broker(registration), ephemeral=True)
                stat = self.store.exists(path)
                if stat is None:
                    continue  # gone already (a session expiry in between): register again
                return stat.czxid
            except errors.NodeExistsError:
                pass
            gone = threading.Event()
            stat = self.store.exists(path, watch=lambda event: gone.set())
            if stat is None:
                continue
            if stat.ephemeral_owner == self.store.session_id:
                return stat.czxid
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.ConfigError(
                    "broker.id %d is registered in %s by another session (owner 0x%x) and it did not "
                    "expire within %.0f s: another broker is running with the same broker.id"
                    % (registration.broker_id, path, stat.ephemeral_owner, wait_s))
            # Looked at again every second too: a watch is lost with the store's connection.
            if gone.wait(min(left, REGISTRATION_RECHECK_S)):
                log.info("the registration of broker %d from an earlier session expired; registering",
                         registration.broker_id)

    def own_registration_epoch(self, broker_id: int) -> Optional[int]:
        """The epoch of ``/brokers/ids/<broker_id>`` if this session holds it, else None (not
        registered, or registered by another session: an earlier life still to expire)."""
        stat = self.store.exists(broker_path(broker_id))
        if stat is None or stat.ephemeral_owner != self.store.session_id:
            return None
        return stat.czxid

    def get_broker_ids(self, watch: Optional[Watcher] = None) -> List[int]:
        return sorted(int(c) for c in self.store.get_children(BROKER_IDS_PATH, watch=watch) if c.isdigit())

    def get_broker(self, broker_id: int, watch: Optional[Watcher] = None) -> Optional[BrokerRegistration]:
        try:
            data, stat = self.store.get(broker_path(broker_id), watch=watch)
        except errors.NoNodeError:
            return None
        return decode_broker(broker_id, data, stat.czxid)

    def get_all_brokers(self) -> Dict[int, BrokerRegistration]:
        out = {}
        for broker_id in self.get_broker_ids():
            found = self.get_broker(broker_id)
            if found is not None:
                out[broker_id] = found
        return out

    # -- controller ---------------------------------------------------------------------

    def get_controller_id(self, watch: Optional[Watcher] = None) -> Optional[int]:
        """The active controller's broker id, None when there is none; ``watch`` fires when
        ``/controller`` is created, changed or deleted."""
        stat = self.store.exists(CONTROLLER_PATH, watch=watch)
        if stat is None:
            return None
        try:
            data, _ = self.store.get(CONTROLLER_PATH)
        except errors.NoNodeError:
            return None
        return decode_controller(data)

    def try_become_controller(self, broker_id: int) -> Optional[ControllerEpochZkVersion]:
        """Elect this broker if no controller is active: -> the new controller epoch and its
        znode version, or None when another broker holds ``/controller``."""
        try:
            self.store.create(CONTROLLER_PATH, encode_controller(broker_id), ephemeral=True)
        except errors.NodeExistsError:
            return None
        while True:
            try:
                data, stat = self.store.get(CONTROLLER_EPOCH_PATH)
            except errors.NoNodeError:
                try:
                    self.store.create(CONTROLLER_EPOCH_PATH, b"1")
                    stat_new = self.store.exists(CONTROLLER_EPOCH_PATH)
                    return 1, stat_new.version if stat_new is not None else 0
                except errors.NodeExistsError:
                    continue
            epoch = int(data.decode("ascii") or "0") + 1
            try:
                new = self.store.set(CONTROLLER_EPOCH_PATH, str(epoch).encode("ascii"), version=stat.version)
                return epoch, new.version
            except errors.BadVersionError:
                # A controller elected before us bumped it after losing /controller: read again.
                continue

    def get_controller_epoch(self) -> Optional[ControllerEpochZkVersion]:
        try:
            data, stat = self.store.get(CONTROLLER_EPOCH_PATH)
        except errors.NoNodeError:
            return None
        return int(data.decode("ascii") or "0"), stat.version

    def resign_controller(self, broker_id: int) -> None:
        """Delete ``/controller`` if this broker holds it."""
        try:
            data, stat = self.store.get(CONTROLLER_PATH)
            if decode_controller(data) == broker_id and stat.ephemeral_owner == self.store.session_id:
                self.store.delete(CONTROLLER_PATH, version=stat.version)
        except (errors.NoNodeError, errors.BadVersionError):
            pass

    # -- topics -------------------------------------------------------------------------

    def get_topics(self, watch: Optional[Watcher] = None) -> List[str]:
        return sorted(self.store.get_children(TOPICS_PATH, watch=watch))

    def topic_exists(self, topic: str) -> bool:
        return self.store.exists(topic_path(topic)) is not None

    def create_topic(self, topic: str, assignment: TopicAssignment, config: Mapping[str, str]) -> None:
        """Write a new topic's config and assignment (the controller takes it from there).
        Raises TopicAlreadyExistsError when it exists (or is being deleted)."""
        if self.store.exists(delete_topic_path(topic)) is not None:
            raise errors.TopicAlreadyExistsError("topic %r is marked for deletion" % topic)
        ops: List[Op] = [
            CreateOp(topic_config_path(topic), encode_topic_config(config)),
            CreateOp(topic_path(topic), encode_topic_assignment(assignment)),
        ]
        try:
            existing_config = self.store.exists(topic_config_path(topic))
            if existing_config is not None:  # a stale config of a topic deleted half-way: replace it
                ops[0] = SetOp(topic_config_path(topic), encode_topic_config(config), existing_config.version)
            self.store.multi(ops)
        except errors.NodeExistsError:
            raise errors.TopicAlreadyExistsError("topic %r already exists" % topic) from None

    def get_topic_assignment(self, topic: str, watch: Optional[Watcher] = None
                             ) -> Optional[Tuple[TopicAssignment, int]]:
        """(assignment, znode version), None when the topic does not exist."""
        try:
            data, stat = self.store.get(topic_path(topic), watch=watch)
        except errors.NoNodeError:
            return None
        return decode_topic_assignment(topic, data), stat.version

    def set_topic_assignment(self, topic: str, assignment: TopicAssignment, version: int = -1,
                             controller: Optional[ControllerEpochZkVersion] = None) -> None:
        """Replace a topic's assignment: conditionally on ``version`` (added partitions), or
        fenced by the controller's epoch (a reassignment's steps). Raises ControllerMovedError
        when ``controller`` is stale."""
        data = encode_topic_assignment(assignment)
        if controller is None:
            self.store.set(topic_path(topic), data, version=version)
            return
        self._fenced([SetOp(topic_path(topic), data, version)], controller)

    def _fenced(self, ops: Sequence[Op], controller: ControllerEpochZkVersion) -> List[object]:
        """``ops`` in one transaction with a check of the controller epoch's version."""
        try:
            return self.store.multi([CheckOp(CONTROLLER_EPOCH_PATH, controller[1]), *ops])
        except errors.BadVersionError:
            epoch = self.get_controller_epoch()
            if epoch is None or epoch[1] != controller[1]:
                raise errors.ControllerMovedError("controller epoch %d is stale" % controller[0]) from None
            raise

    def get_topic_config(self, topic: str) -> Dict[str, str]:
        try:
            data, _ = self.store.get(topic_config_path(topic))
        except errors.NoNodeError:
            return {}
        return decode_topic_config(topic, data)

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Write a topic's config overrides and notify every broker (a config change notification)."""
        self._set_entity_config(topic_config_path(topic), config, "topics/%s" % topic)

    def _set_entity_config(self, path: str, config: Mapping[str, str], entity_path: str) -> None:
        """Write an entity's whole config as Kafka does (``{"version":1,"config":{...}}``, the
        same for a topic, a broker and a user), then a change notification naming ``entity_path``."""
        data = encode_topic_config(config)
        try:
            self.store.set(path, data)
        except errors.NoNodeError:
            self.store.create(path, data, makepath=True)
        self.store.create("%s/%s" % (CONFIG_CHANGES_PATH, CONFIG_CHANGE_PREFIX),
                          encode_config_change(entity_path), sequential=True, makepath=True)

    def get_broker_config(self, entity: str) -> Dict[str, str]:
        """The dynamic configs of broker ``entity`` (its id, or ``<default>`` for the cluster-wide default)."""
        try:
            data, _ = self.store.get(broker_config_path(entity))
        except errors.NoNodeError:
            return {}
        return decode_broker_config(entity, data)

    def set_broker_config(self, entity: str, config: Mapping[str, str]) -> None:
        """Write broker ``entity``'s dynamic configs (all of them) and notify every broker."""
        self._set_entity_config(broker_config_path(entity), config, "brokers/%s" % entity)

    # -- users (SCRAM credentials): /config/users/<url-encoded name>, Kafka's entity config ----

    def get_user_names(self) -> List[str]:
        """Every user with a config znode (names decoded)."""
        try:
            children = self.store.get_children(USERS_CONFIG_PATH)
        except errors.NoNodeError:
            return []
        return sorted(desanitize(child) for child in children)

    def get_user_config(self, user: str) -> Dict[str, str]:
        """``/config/users/<user>``'s config map (its name sanitized as Kafka does)."""
        return self.get_entity_config("users/%s" % sanitize(user))

    def set_user_config(self, user: str, config: Mapping[str, str]) -> None:
        """Write a user's config (an empty one too, as Kafka does) and notify every broker."""
        self._set_entity_config(user_config_path(user), config, "users/%s" % sanitize(user))

    # -- client quota entities: /config/clients, /config/users (and <user>/clients), /config/ips ----

    def get_entity_names(self, kind: str) -> List[str]:
        """The (url-encoded) names of the entity config znodes under ``/config/<kind>``."""
        try:
            return sorted(self.store.get_children("/config/%s" % kind))
        except errors.NoNodeError:
            return []

    def get_entity_config(self, entity_path: str) -> Dict[str, str]:
        """The config map of ``/config/<entity_path>`` (every key; empty when there is none)."""
        path = "/config/%s" % entity_path
        try:
            data, _ = self.store.get(path)
        except errors.NoNodeError:
            return {}
        return decode_entity_config(path, data)

    def set_entity_config(self, entity_path: str, config: Mapping[str, str]) -> None:
        """Write ``/config/<entity_path>``'s whole config map and notify every broker."""
        self._set_entity_config("/config/%s" % entity_path, config, entity_path)

    def get_config_changes(self, watch: Optional[Watcher] = None) -> List[str]:
        """The names of the pending config change notifications, oldest first."""
        return sorted(c for c in self.store.get_children(CONFIG_CHANGES_PATH, watch=watch)
                      if c.startswith(CONFIG_CHANGE_PREFIX))

    def read_config_change(self, name: str) -> Optional[str]:
        """The entity a notification names (``topics/<name>``), None if it is gone."""
        path = "%s/%s" % (CONFIG_CHANGES_PATH, name)
        try:
            data, _ = self.store.get(path)
        except errors.NoNodeError:
            return None
        return decode_config_change(path, data)

    def delete_config_changes(self, names: Sequence[str]) -> None:
        for name in names:
            try:
                self.store.delete("%s/%s" % (CONFIG_CHANGES_PATH, name))
            except errors.NoNodeError:
                pass

    # -- partition state ----------------------------------------------------------------

    def get_partition_state(self, topic: str, partition: int, watch: Optional[Watcher] = None
                            ) -> Optional[PartitionState]:
        try:
            data, stat = self.store.get(partition_state_path(topic, partition), watch=watch)
        except errors.NoNodeError:
            return None
        return decode_partition_state(topic, partition, data, stat.version)._replace(zxid=stat.mzxid)

    def get_partition_states(self, topic: str, partitions: Sequence[int]) -> Dict[int, PartitionState]:
        out = {}
        for p in partitions:
            found = self.get_partition_state(topic, p)
            if found is not None:
                out[p] = found
        return out

    def create_partition_states(self, states: Mapping[Tuple[str, int], PartitionState],
                                controller: ControllerEpochZkVersion) -> Dict[Tuple[str, int], PartitionState]:
        """Write the first state of new partitions, each checked against the controller epoch;
        -> the states written (with their partition epoch 0). A partition whose state
        already exists is left out (its topic was being created by a previous controller).
        Raises ControllerMovedError when this controller's epoch is stale."""
        written = {}
        for (topic, p), state in states.items():
            self.store.ensure_path("%s/%d" % (partitions_path(topic), p))
            try:
                self.store.multi([CheckOp(CONTROLLER_EPOCH_PATH, controller[1]),
                                  CreateOp(partition_state_path(topic, p), encode_partition_state(state))])
            except errors.BadVersionError:
                raise errors.ControllerMovedError("controller epoch %d is stale" % controller[0]) from None
            except errors.NodeExistsError:
                continue
            written[(topic, p)] = state._replace(partition_epoch=0)
        return written

    def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                               controller: Optional[ControllerEpochZkVersion] = None) -> Optional[PartitionState]:
        """Replace a partition's state if its version is still ``state.partition_epoch``; -> the
        state as written (its new partition epoch), or None when the version moved on.

        The controller passes its epoch (the write is then also fenced by it: raises
        ControllerMovedError when a newer controller exists); a leader changing its ISR
        does not.
        """
        path = partition_state_path(topic, partition)
        data = encode_partition_state(state)
        try:
            if controller is None:
                stat = self.store.set(path, data, version=state.partition_epoch)
                return state._replace(partition_epoch=stat.version, zxid=stat.mzxid)
            results = self.store.multi([CheckOp(CONTROLLER_EPOCH_PATH, controller[1]),
                                        SetOp(path, data, state.partition_epoch)])
        except errors.BadVersionError:
            if controller is not None:
                epoch = self.get_controller_epoch()
                if epoch is not None and epoch[1] != controller[1]:
                    raise errors.ControllerMovedError("controller epoch %d is stale" % controller[0]) from None
                return None
            # A leader's write retried after a lost connection may find its own first try
            # applied (Kafka's checkLeaderAndIsrZkData): the same state at the next version.
            current = self.get_partition_state(topic, partition)
            if current is not None and current.partition_epoch == state.partition_epoch + 1 and \
                    current[:4] == state[:4]:
                return current
            return None
        except errors.NoNodeError:
            return None
        stat_out = results[1]
        assert isinstance(stat_out, ZnodeStat)
        return state._replace(partition_epoch=stat_out.version, zxid=stat_out.mzxid)

    def propagate_isr_changes(self, partitions: Sequence[Tuple[str, int]]) -> None:
        """Tell the controller that these partitions' ISR changed (it then updates every
        broker's metadata)."""
        self.store.create("%s/%s" % (ISR_CHANGE_PATH, ISR_CHANGE_PREFIX), encode_isr_change(partitions),
                          sequential=True, makepath=True)

    def get_isr_changes(self, watch: Optional[Watcher] = None) -> List[str]:
        return sorted(c for c in self.store.get_children(ISR_CHANGE_PATH, watch=watch)
                      if c.startswith(ISR_CHANGE_PREFIX))

    def read_isr_change(self, name: str) -> List[Tuple[str, int]]:
        path = "%s/%s" % (ISR_CHANGE_PATH, name)
        try:
            data, _ = self.store.get(path)
        except errors.NoNodeError:
            return []
        try:
            return decode_isr_change(path, data)
        except errors.CorruptMetadataError as exc:
            log.warning("ignoring a malformed ISR change notification: %s", exc)
            return []

    def delete_isr_changes(self, names: Sequence[str]) -> None:
        for name in names:
            try:
                self.store.delete("%s/%s" % (ISR_CHANGE_PATH, name))
            except errors.NoNodeError:
                pass

    # -- log directory failures -------------------------------------------------------

    def propagate_log_dir_event(self, broker_id: int) -> None:
        """Tell the controller that a log directory of ``broker_id`` failed (Kafka's
        propagateLogDirEvent): it then learns from the broker which replicas are offline."""
        self.store.create("%s/%s" % (LOG_DIR_EVENT_PATH, LOG_DIR_EVENT_PREFIX), encode_log_dir_event(broker_id),
                          sequential=True, makepath=True)

    def get_log_dir_events(self, watch: Optional[Watcher] = None) -> List[str]:
        return sorted(c for c in self.store.get_children(LOG_DIR_EVENT_PATH, watch=watch)
                      if c.startswith(LOG_DIR_EVENT_PREFIX))

    def read_log_dir_event(self, name: str) -> Optional[int]:
        """-> the broker a notification names (None when it is gone or malformed)."""
        path = "%s/%s" % (LOG_DIR_EVENT_PATH, name)
        try:
            data, _ = self.store.get(path)
        except errors.NoNodeError:
            return None
        try:
            return decode_log_dir_event(path, data)
        except errors.CorruptMetadataError as exc:
            log.warning("ignoring a malformed log directory event notification: %s", exc)
            return None

    def delete_log_dir_events(self, names: Sequence[str]) -> None:
        for name in names:
            try:
                self.store.delete("%s/%s" % (LOG_DIR_EVENT_PATH, name))
            except errors.NoNodeError:
                pass

    # -- topic deletion -----------------------------------------------------------------

    def mark_topic_for_deletion(self, topic: str) -> None:
        try:
            self.store.create(delete_topic_path(topic), makepath=True)
        except errors.NodeExistsError:
            pass

    def get_topics_to_delete(self, watch: Optional[Watcher] = None) -> List[str]:
        return sorted(self.store.get_children(DELETE_TOPICS_PATH, watch=watch))

    def is_marked_for_deletion(self, topic: str) -> bool:
        return self.store.exists(delete_topic_path(topic)) is not None

    def delete_topic(self, topic: str, controller: ControllerEpochZkVersion) -> None:
        """Remove a deleted topic's znodes (states, assignment, config, the marker)."""
        try:
            self.store.multi([CheckOp(CONTROLLER_EPOCH_PATH, controller[1])])
        except errors.BadVersionError:
            raise errors.ControllerMovedError("controller epoch %d is stale" % controller[0]) from None
        for path in (topic_path(topic), topic_config_path(topic), delete_topic_path(topic)):
            try:
                self.store.delete(path, recursive=True)
            except errors.NoNodeError:
                pass

    # -- reassignments and elections a tool asks for ------------------------------------

    def get_reassignment_request(self, watch: Optional[Watcher] = None) -> Optional[Dict[Tuple[str, int], List[int]]]:
        """``/admin/reassign_partitions``: the target replicas a tool asked for, None when there
        is no such request; ``watch`` fires when it is created, changed or deleted."""
        return self._admin_request(REASSIGN_PARTITIONS_PATH, watch)

    def set_reassignment_request(self, targets: Mapping[Tuple[str, int], Sequence[int]],
                                 controller: Optional[ControllerEpochZkVersion] = None) -> None:
        """Write ``/admin/reassign_partitions`` (a tool's request; the controller, fenced,
        rewrites it without the partitions it completed), or delete it when ``targets`` is
        empty."""
        path = REASSIGN_PARTITIONS_PATH
        if controller is not None:
            try:
                if targets:
                    self._fenced([SetOp(path, encode_reassignment(targets), -1)], controller)
                else:
                    self._fenced([DeleteOp(path, -1)], controller)
            except errors.NoNodeError:
                pass
            return
        if not targets:
            try:
                self.store.delete(path)
            except errors.NoNodeError:
                pass
            return
        try:
            self.store.create(path, encode_reassignment(targets), makepath=True)
        except errors.NodeExistsError:
            raise errors.ReassignmentInProgressError(
                "%s exists: a reassignment a tool asked for is still under way" % path) from None

    def get_preferred_election_request(self, watch: Optional[Watcher] = None) -> Optional[List[Tuple[str, int]]]:
        """``/admin/preferred_replica_election``: the partitions a tool asked to give back to
        their preferred leaders, None when there is no request."""
        found = self._admin_request(PREFERRED_ELECTION_PATH, watch)
        return None if found is None else sorted(found)

    def request_preferred_election(self, partitions: Sequence[Tuple[str, int]]) -> None:
        """Write ``/admin/preferred_replica_election`` (as a tool does): the controller gives
        these partitions back to their preferred replicas, then deletes it."""
        try:
            self.store.create(PREFERRED_ELECTION_PATH, encode_reassignment({tp: [] for tp in partitions}),
                              makepath=True)
        except errors.NodeExistsError:
            raise errors.PreferredLeaderNotAvailableError(
                "%s exists: a preferred replica election a tool asked for is still under way"
                % PREFERRED_ELECTION_PATH) from None

    def delete_preferred_election_request(self, controller: ControllerEpochZkVersion) -> None:
        try:
            self._fenced([DeleteOp(PREFERRED_ELECTION_PATH, -1)], controller)
        except errors.NoNodeError:
            pass

    def _admin_request(self, path: str, watch: Optional[Watcher]) -> Optional[Dict[Tuple[str, int], List[int]]]:
        if self.store.exists(path, watch=watch) is None:
            return None
        try:
            data, _ = self.store.get(path)
        except errors.NoNodeError:
            return None
        return decode_reassignment(path, data)

    # -- producer ids -------------------------------------------------------------------

    def allocate_producer_id_block(self, broker_id: int, size: int) -> Tuple[int, int]:
        """The next block of ``size`` producer ids, unique across the cluster: -> (first, last)."""
        while True:
            try:
                data, stat = self.store.get(PRODUCER_ID_BLOCK_PATH)
            except errors.NoNodeError:
                self.store.ensure_path(PRODUCER_ID_BLOCK_PATH)
                continue
            start = 0
            if data:
                _, _, last = decode_producer_id_block(data)
                start = last + 1
            end = start + size - 1
            try:
                self.store.set(PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(broker_id, start, end),
                               version=stat.version)
                return start, end
            except errors.BadVersionError:
                continue  # another broker took a block meanwhile


#: Kafka's user entity configs (SCRAM credentials, quotas), one znode per url-encoded name.
USERS_CONFIG_PATH = "/config/users"


def user_config_path(user: str) -> str:
    """``/config/users/<name>``, the name url-encoded as Kafka's Sanitizer does (``*`` too)."""
    return "%s/%s" % (USERS_CONFIG_PATH, sanitize(user))
