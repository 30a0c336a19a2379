"""A broker's part in a replicated cluster (Kafka's KafkaServer in ZooKeeper mode, with its
ZkAdminManager): registration, the controller, the replicas, the cluster's metadata,
and topic administration through the metadata store.

A :class:`pylogq.Broker` given ``zookeeper.connect`` (or, in one process, a store of
:class:`pylogq.Cluster`'s) is a member of a cluster; this object holds everything that
makes it one:

- its registration in ``/brokers/ids`` (an ephemeral znode: it goes when the broker's
  session does, and the controller acts on that), kept with the session: a new
  session registers again;
- its :class:`~pylogq.cluster.controller.controller.KafkaController`, active when elected;
- its :class:`~pylogq.cluster.broker.replica_manager.ReplicaManager` (leaders, followers, fetchers);
- its :class:`~pylogq.cluster.broker.metadata_cache.MetadataCache`, which the controller keeps current and
  from which every broker answers Metadata alike;
- topic administration: CreateTopics writes the assignment (spread over the live
  brokers, racks considered, or as the request gives it) and the config; the controller does the rest and the
  call returns once this broker's metadata shows a leader for every new partition.
  Deletion marks the topic; the controller stops and deletes its replicas. Config
  changes are written with a change notification each broker applies to its logs.

Thread-safety: the calls are made by the broker from any thread; the parts guard
their own state.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ... import errors
from ..broker_link import BrokerLink
from ..contract import (
    BrokerEndpoint,
    BrokerRegistration,
    InterBrokerConnector,
    LeaderAndIsrRequest,
    PartitionReassignment,
    PartitionOutcome,
    StopReplicaRequest,
    TopicDescription,
    TopicPartitionInfo,
    UpdateMetadataRequest,
)
from ..controller.controller import KafkaController
from ..names import INTERNAL_TOPICS, collides, validate_topic_name
from ..replica_assignment import assign_replicas, check_added_assignment, check_new_assignment
from ..zk.client import KafkaZkClient
from ..zk.data import DEFAULT_BROKER_ENTITY, TopicAssignment, broker_path, encode_broker, topic_path
from ..zk.session_guard import SessionGuard
from ..zk.store import CONNECTED, EXPIRED, MetadataStore, WatchedEvent
from .metadata_cache import MetadataCache
from .replica_fetcher import FetcherSettings
from .replica_manager import ReplicaHost, ReplicaManager, ReplicationSettings
from .client_quotas import ZkClientQuotas
from .user_credentials import ZkUserCredentials

if TYPE_CHECKING:  # the broker owns this object; only its type is needed here
    from .config import NodeConfig

__all__ = ["ClusterNode"]

log = logging.getLogger("pylogq.cluster")

TopicPartition = Tuple[str, int]
#: How long an admin call waits for the controller to carry it out by default.
ADMIN_TIMEOUT_S = 30.0
#: The broker epoch of a broker that has not registered yet: larger than any real one, so
#: every controller request naming an epoch is taken for one of an earlier life.
NOT_REGISTERED = (1 << 63) - 1


class ClusterNode:
    """Everything that makes a broker a member of a cluster."""

    def __init__(self, broker_id: int, node: "NodeConfig", store: MetadataStore, connector: InterBrokerConnector,
                 host: ReplicaHost, timer: Any, schedule: Callable[[Callable[[], None], float, Optional[float], str], None],
                 unclean_leader_election: Callable[[str], bool], consumer_fetches: Any,
                 on_leadership: Optional[Callable[[List[TopicPartition], List[TopicPartition]], None]] = None,
                 on_topic_config: Optional[Callable[[str, Dict[str, str]], None]] = None,
                 watch_pauses: bool = False,
                 on_broker_config: Optional[Callable[[str, Dict[str, str]], None]] = None) -> None:
        self.broker_id = broker_id
        self.node = node
        self.store = store
        self.zk = KafkaZkClient(store)
        #: Users' SCRAM credentials (/config/users), refreshed by ``users/`` notifications.
        self.users = ZkUserCredentials(self.zk)
        #: Client quotas (/config/clients, /config/users, /config/ips), refreshed by their notifications.
        self.quotas = ZkClientQuotas(self.zk)
        self.metadata = MetadataCache()
        self._metadata_changed = threading.Condition()
        self._on_topic_config = on_topic_config
        # Told the dynamic configs of an entity (this broker's id or <default>) at start and on change.
        self._on_broker_config = on_broker_config
        self._registration: Optional[BrokerRegistration] = None
        self._epoch = -1
        self._lock = threading.RLock()
        self._seen_changes: Set[str] = set()  # config change notifications already applied
        self.closed = False
        self.stopping = False  # set by begin_close: waits for metadata end, the node is going
        self.controller = KafkaController(
            broker_id, self.zk, connector, unclean_leader_election, node.inter_broker_listener,
            rebalance_interval_s=node.leader_imbalance_check_interval_seconds if node.auto_leader_rebalance_enable
            else 0.0, imbalance_percentage=node.leader_imbalance_per_broker_percentage)
        settings = ReplicationSettings(
            replica_lag_time_max_ms=node.replica_lag_time_max_ms,
            fetcher=FetcherSettings(node.replica_fetch_wait_max_ms, node.replica_fetch_min_bytes,
                                    node.replica_fetch_max_bytes, node.replica_fetch_response_max_bytes,
                                    node.replica_fetch_backoff_ms, node.num_replica_fetchers),
            inter_broker_listener=node.inter_broker_listener,
            quota_window_num=node.replication_quota_window_num,
            quota_window_s=float(node.replication_quota_window_size_seconds))
        self.guard = SessionGuard(store.session_timeout_ms, self._owned_registration, lambda: self._epoch,
                                  watch_pauses)
        self.replicas = ReplicaManager(broker_id, host, self.zk, settings, connector, timer, schedule,
                                       self._fencing_epoch, on_leadership, consumer_fetches, self.guard)
        self._schedule = schedule
        self._connector = connector

    # -- membership ---------------------------------------------------------------------

    @property
    def broker_epoch(self) -> int:
        return self._epoch

    def _fencing_epoch(self) -> int:
        """The epoch controller requests are checked against (KIP-380): this broker's
        registration's. Before it has registered (a broker restarted at once waits for its
        previous registration to expire, its listener already bound), the one it has just
        created if the store has it, else :data:`NOT_REGISTERED`: a request meant for the
        previous life of this broker.id (which may have led partitions whose records this
        disk no longer has) must not make it a leader. Kafka closes the same gap by
        handling no request before it has registered."""
        if self._epoch != -1:
            return self._epoch
        try:
            own = self.zk.own_registration_epoch(self.broker_id)
        except errors.MetadataStoreError:
            return NOT_REGISTERED
        return NOT_REGISTERED if own is None else own

    def _owned_registration(self) -> Optional[int]:
        """The epoch of this broker's registration if its current session owns it, else None
        (a store call: raises when the store does not answer)."""
        stat = self.store.exists(broker_path(self.broker_id))
        if stat is None or stat.ephemeral_owner != self.store.session_id:
            return None
        return stat.czxid

    def start(self, cluster_id: str, endpoints: Sequence[BrokerEndpoint]) -> str:
        """Join: the cluster id (the first broker writes it), then registration and the
        controller. -> the cluster's id."""
        self.zk.ensure_layout()
        cluster_id = self.zk.get_or_create_cluster_id(cluster_id)
        self._registration = BrokerRegistration(self.broker_id, tuple(endpoints), self.node.broker_rack)
        self._register()
        self.store.add_listener(self._session_state)
        self.zk.get_config_changes(watch=self._config_changes_watch)
        self.users.load()  # after the watch: a change from now on is a notification
        self.quotas.load()
        if self._on_broker_config is not None:  # before any replica is hosted: logs open with them
            for entity in (DEFAULT_BROKER_ENTITY, str(self.broker_id)):
                self._on_broker_config(entity, self.zk.get_broker_config(entity))
        self.controller.startup()
        return cluster_id

    def _register(self) -> None:
        assert self._registration is not None
        wait_s = max(self.store.session_timeout_ms / 1000.0 * 1.5, 1.0)
        self._epoch = self.zk.register_broker(self._registration, wait_s)
        log.info("broker %d registered at epoch %d with endpoints %s", self.broker_id, self._epoch,
                 [e.connection_string() for e in self._registration.endpoints])

    def _session_state(self, state: str) -> None:
        """On the store's thread: a lost connection loses this broker's watches (the config
        changes'), an expired session its registration too; both come back once connected."""
        self.guard.session_state(state)
        if state == CONNECTED and not self.closed and self._registration is not None:
            threading.Thread(target=self._reconnected, name="pylogq-register-%d" % self.broker_id,
                             daemon=True).start()
        elif state == EXPIRED:
            log.warning("broker %d lost its metadata store session; it registers again when connected",
                        self.broker_id)

    def _reconnected(self) -> None:
        try:
            owned = self._owned_registration()
            if owned is None:
                self._register()
            elif owned != self._epoch:
                # Made by this session, its answer lost with the connection (registering
                # again after an expiry): the broker's epoch is that registration's.
                self._epoch = owned
                log.info("broker %d registered at epoch %d (found after a lost answer)", self.broker_id, owned)
        except (errors.StoreConnectionError, errors.SessionExpiredError) as exc:
            # The connection went again (ZooKeeper restarting) or took the session with it: the
            # next connection runs this again, as the first did.
            log.warning("broker %d could not register again yet (%s); it tries again once connected",
                        self.broker_id, exc)
            return
        except Exception:  # noqa: BLE001 - logged; the broker keeps serving what it has
            log.exception("broker %d could not register again", self.broker_id)
        # Config changes made while disconnected are read now, and the watch set again.
        self._apply_config_changes()

    def update_endpoints(self, endpoints: Sequence[BrokerEndpoint]) -> None:
        """Advertise new endpoints (a listener opened after the broker joined)."""
        with self._lock:
            assert self._registration is not None
            self._registration = self._registration._replace(endpoints=tuple(endpoints))
            self.store.set(broker_path(self.broker_id), encode_broker(self._registration))

    @property
    def registration(self) -> Optional[BrokerRegistration]:
        return self._registration

    def link_to(self, broker: BrokerRegistration) -> BrokerLink:
        """A client to another broker at its inter-broker listener, opened when first used."""
        return BrokerLink(broker, self._connector, self.node.inter_broker_listener)

    # -- requests from the controller ---------------------------------------------------

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> Tuple[int, Dict[TopicPartition, int]]:
        return self.replicas.become_leader_or_follower(request)

    def update_metadata(self, request: UpdateMetadataRequest) -> int:
        stale = self.replicas.fence(request.controller_epoch, request.broker_epoch, "UpdateMetadata")
        if stale is not None:
            return stale
        self.metadata.update(request)
        with self._metadata_changed:
            self._metadata_changed.notify_all()
        return 0

    def stop_replica(self, request: StopReplicaRequest) -> Tuple[int, Dict[TopicPartition, int]]:
        return self.replicas.stop_replicas(request)

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[TopicPartition]]:
        """Answered by the active controller; others say NOT_CONTROLLER."""
        if not self.controller.active:
            return errors.NotControllerError.code, []
        return self.controller.controlled_shutdown(broker_id, broker_epoch)

    def alter_partition_reassignments(self, targets: Mapping[TopicPartition, Optional[List[int]]]
                                      ) -> Dict[TopicPartition, PartitionOutcome]:
        """AlterPartitionReassignments: the active controller's; others answer NOT_CONTROLLER."""
        if not self.controller.active:
            return {tp: (errors.NotControllerError.code, None) for tp in targets}
        return self.controller.alter_partition_reassignments(targets, ADMIN_TIMEOUT_S)

    def elect_leaders(self, election_type: int, partitions: Optional[Sequence[TopicPartition]] = None
                      ) -> Optional[Dict[TopicPartition, PartitionOutcome]]:
        """ElectLeaders: the active controller's (None from the others)."""
        if not self.controller.active:
            return None
        return self.controller.elect_leaders(election_type, None if partitions is None else list(partitions),
                                             ADMIN_TIMEOUT_S)

    def list_partition_reassignments(self, partitions: Optional[Sequence[TopicPartition]] = None
                                     ) -> Optional[Dict[TopicPartition, PartitionReassignment]]:
        """ListPartitionReassignments: the active controller's (None from the others)."""
        if not self.controller.active:
            return None
        found = self.controller.list_partition_reassignments(None if partitions is None else list(partitions),
                                                              ADMIN_TIMEOUT_S)
        if found is None:
            return None
        return {tp: PartitionReassignment(r.replicas, list(r.adding), list(r.removing)) for tp, r in found.items()}

    # -- waiting for the cluster ----------------------------------------------------------

    def wait_for_metadata(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``condition()`` holds of this broker's metadata (woken by UpdateMetadata)."""
        deadline = time.monotonic() + timeout_s
        with self._metadata_changed:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0 or self.closed or self.stopping:
                    return condition()
                self._metadata_changed.wait(min(left, 0.5))
        return True

    # -- topics ---------------------------------------------------------------------------

    def list_topics(self, include_internal: bool = False) -> List[str]:
        return [t for t in self.metadata.topics() if include_internal or t not in INTERNAL_TOPICS]

    def describe_topic(self, name: str, config: Optional[Dict[str, str]] = None) -> TopicDescription:
        parts = self.metadata.partitions_of(name)
        if not parts:
            raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % name)
        infos = [TopicPartitionInfo(p, s.leader, list(s.replicas), list(s.isr), list(s.offline_replicas), s.leader_epoch)
                 for p, s in sorted(parts.items())]
        return TopicDescription(name, infos, dict(config or {}), name in INTERNAL_TOPICS,
                                self.metadata.topic_id(name) or "AAAAAAAAAAAAAAAAAAAAAA")

    def live_brokers(self) -> Dict[int, Optional[str]]:
        """Live broker id -> rack, from the store (what a new topic's replicas spread over)."""
        brokers = self.zk.get_all_brokers()
        return {b: r.rack for b, r in brokers.items()}

    def create_topic(self, name: str, partitions: int, replication_factor: int, config: Mapping[str, str],
                     topic_id: str, validate_only: bool = False, timeout_s: float = ADMIN_TIMEOUT_S,
                     assignment: Optional[Dict[int, List[int]]] = None) -> Dict[int, List[int]]:
        """Write a new topic; -> its assignment. Waits for leaders unless ``validate_only``.

        ``assignment`` (partition -> broker ids, the first the preferred leader) places the
        replicas as given, after Kafka's checks against the registered brokers; without
        it they are spread over the live brokers.
        """
        validate_topic_name(name)
        for existing in self.zk.get_topics():
            if existing == name:
                raise errors.TopicAlreadyExistsError("topic %r already exists" % name)
            if collides(name, existing):
                raise errors.InvalidTopicError("topic %r collides with existing topic %r ('.' and '_' are the same "
                                               "in metric names)" % (name, existing))
        if assignment is not None:  # placed as given, once Kafka's checks pass
            assignment = check_new_assignment(assignment, set(self.live_brokers()))
        else:
            brokers = self.live_brokers()
            if replication_factor > len(brokers):
                raise errors.InvalidReplicationFactorError(
                    "replication factor: %d larger than available brokers: %d" % (replication_factor, len(brokers)))
            assignment = assign_replicas(partitions, replication_factor, brokers)
        if validate_only:
            return assignment
        self.zk.create_topic(name, TopicAssignment(assignment, topic_id), config)
        self._wait_for_leaders(name, len(assignment), timeout_s)
        return assignment

    def _wait_for_leaders(self, name: str, count: int, timeout_s: float) -> None:
        def ready() -> bool:
            parts = self.metadata.partitions_of(name)
            return len(parts) >= count and all(s.leader >= 0 for s in parts.values())

        if not self.wait_for_metadata(ready, timeout_s):
            self._check_not_stopping("topic %r was created; its leaders were not known here yet" % name)
            raise errors.RequestTimedOutError("topic %r was created but not every partition had a leader within "
                                              "%.0f s (are its replicas' brokers alive?)" % (name, timeout_s))

    def delete_topic(self, name: str, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        """Mark a topic for deletion; -> once this broker's metadata no longer has it (as
        Kafka's DeleteTopics answers) and, within ``timeout_s``, once its replicas are deleted
        and its znodes gone, so that the name can be used again. Replicas on brokers that
        are down are deleted when they come back; the topic's znodes go only then."""
        if not self.zk.topic_exists(name):
            raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % name)
        deadline = time.monotonic() + timeout_s
        self.zk.mark_topic_for_deletion(name)
        if not self.wait_for_metadata(lambda: not self.metadata.has_topic(name), timeout_s):
            self._check_not_stopping("topic %r is marked for deletion" % name)
            raise errors.RequestTimedOutError("topic %r is marked for deletion; the controller had not started "
                                              "within %.0f s" % (name, timeout_s))
        while time.monotonic() < deadline and not self.stopping:
            gone = threading.Event()
            if self.store.exists(topic_path(name), watch=lambda event: gone.set()) is None:
                return
            # Looked at again every second too: a watch is lost with the store's connection.
            gone.wait(min(1.0, max(0.0, deadline - time.monotonic())))
        log.info("topic %s is still being deleted (a replica's broker may be down)", name)

    def create_partitions(self, name: str, total: int, validate_only: bool = False,
                          timeout_s: float = ADMIN_TIMEOUT_S,
                          assignment: Optional[Sequence[Sequence[int]]] = None) -> None:
        """Grow a topic to ``total`` partitions, the new ones continuing its pattern, or
        placed as ``assignment`` lists them (one replica list per new partition, checked
        as Kafka checks them). Refused while a partition of the topic is being reassigned
        (REASSIGNMENT_IN_PROGRESS)."""
        for _attempt in range(5):
            found = self.zk.get_topic_assignment(name)
            if found is None or self.zk.is_marked_for_deletion(name):
                raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % name)
            current, version = found
            if current.adding or current.removing:
                # As Kafka: the controller writes the topic's znode as it moves replicas, from its
                # own view of the topic, so partitions added meanwhile could be lost.
                raise errors.ReassignmentInProgressError(
                    "a partition reassignment is in progress for topic %r (partitions %s); add partitions once it "
                    "completes" % (name, sorted(set(current.adding) | set(current.removing))))
            have = len(current.partitions)
            if total <= have:
                raise errors.InvalidPartitionsError("topic %r has %d partitions; the new total %r must be larger"
                                                    % (name, have, total))
            factor = len(current.partitions[0])
            brokers = self.live_brokers()
            if assignment is not None:
                added = check_added_assignment(current.partitions, total, assignment, set(brokers))
            else:
                if factor > len(brokers):
                    raise errors.InvalidReplicationFactorError(
                        "replication factor: %d larger than available brokers: %d" % (factor, len(brokers)))
                order = sorted(brokers)
                first = current.partitions[0][0]
                start = order.index(first) if first in order else -1
                added = assign_replicas(total - have, factor, brokers, start_partition=have, fixed_start=start)
            if validate_only:
                return
            partitions = dict(current.partitions)
            partitions.update(added)
            try:
                self.zk.set_topic_assignment(name, current._replace(partitions=partitions), version)
            except errors.BadVersionError:
                continue  # another change of the topic got there first: compute again
            self._wait_for_leaders(name, total, timeout_s)
            return
        raise errors.RequestTimedOutError("the partitions of %r kept changing; try again" % name)

    def topic_config(self, name: str) -> Dict[str, str]:
        return self.zk.get_topic_config(name)

    def set_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        if not self.zk.topic_exists(name):
            raise errors.UnknownTopicOrPartitionError("topic %r does not exist" % name)
        self.zk.set_topic_config(name, config)

    def _config_changes_watch(self, event: WatchedEvent) -> None:
        threading.Thread(target=self._apply_config_changes, name="pylogq-config-changes-%d" % self.broker_id,
                         daemon=True).start()

    def _apply_config_changes(self) -> None:
        """Apply topic config changes to this broker's logs (each broker reads every notification;
        the controller-side cleanup of old notifications is Kafka's 15-minute expiry)."""
        if self.closed:
            return
        try:
            names = self.zk.get_config_changes(watch=self._config_changes_watch)
        except errors.MetadataStoreError as exc:  # unreachable (or the session gone): the next connection reads them
            log.warning("could not read config changes (%s); they are read again once connected", exc)
            return
        except Exception:  # noqa: BLE001 - a bug: logged, the next change retries
            log.exception("could not read config changes")
            return
        with self._lock:
            seen = self._seen_changes
            for name in names:
                if name in seen:
                    continue
                seen.add(name)
                entity = self.zk.read_config_change(name)
                if entity is not None and self.quotas.refresh(entity):  # a client, user or ip entity
                    if entity.startswith("users/") and entity.count("/") == 1:  # the user's credentials too
                        self.users.refresh(urllib.parse.unquote(entity[len("users/"):]))
                    continue
                if entity is not None and entity.startswith("users/"):
                    continue
                if entity is not None and entity.startswith("brokers/"):
                    target = entity[len("brokers/"):]
                    mine = target in (DEFAULT_BROKER_ENTITY, str(self.broker_id))
                    if self._on_broker_config is not None and mine:
                        self._on_broker_config(target, self.zk.get_broker_config(target))
                    continue
                if entity is None or not entity.startswith("topics/"):
                    continue
                topic = entity[len("topics/"):]
                if self._on_topic_config is not None:
                    self._on_topic_config(topic, self.zk.get_topic_config(topic))

    # -- lifecycle ----------------------------------------------------------------------

    def controlled_shutdown_request(self, retries: int, backoff_s: float) -> bool:
        """Ask the controller to move this broker's leaderships away; -> whether it succeeded."""
        self.replicas.shutting_down = True
        for attempt in range(retries + 1):
            try:
                others = [b for b in self.zk.get_broker_ids() if b != self.broker_id]
            except errors.MetadataStoreError:
                others = [-1]  # unknown: ask the controller all the same
            if not others:
                log.info("controlled shutdown of broker %d: no other broker is alive to take its leaderships",
                         self.broker_id)
                return True
            controller = self.metadata.controller_id
            if controller < 0:
                found = self.zk.get_controller_id()
                controller = found if found is not None else -1
            try:
                if controller == self.broker_id:
                    code, remaining = self.controller.controlled_shutdown(self.broker_id, self._epoch)
                else:
                    reg = self.zk.get_broker(controller) if controller >= 0 else None
                    if reg is None:
                        raise errors.BrokerNotAvailableError("no controller is reachable")
                    link = BrokerLink(reg, self._connector, self.node.inter_broker_listener)
                    try:
                        code, remaining = link.client().controlled_shutdown(self.broker_id, self._epoch)
                    finally:
                        link.close()
                if code == 0 and not remaining:
                    log.info("controlled shutdown of broker %d: every leadership moved", self.broker_id)
                    return True
                refused = errors.error_for_code(code)
                log.info("controlled shutdown of broker %d: %s%d partitions still led (attempt %d)",
                         self.broker_id, "refused with %s, " % refused.name if refused is not None else "",
                         len(remaining), attempt + 1)
            except (errors.BrokerError, errors.MetadataStoreError, errors.PylogqError) as exc:
                log.info("controlled shutdown of broker %d: %s (attempt %d)", self.broker_id, exc, attempt + 1)
            if attempt < retries:
                time.sleep(backoff_s)
        return False

    def log_dir_failed(self, path: str, tps: Sequence[TopicPartition]) -> None:
        """A log directory of this broker failed and took ``tps`` with it: they stop here, and
        the controller is told through ``/log_dir_event_notification`` (tried again every
        second while the store cannot be written); it moves their leaderships."""
        self.replicas.log_dir_failed(tps)
        self._propagate_log_dir_event(path)

    def _propagate_log_dir_event(self, path: str) -> None:
        if self.closed:
            return
        try:
            self.zk.propagate_log_dir_event(self.broker_id)
        except errors.PylogqError as exc:
            log.warning("could not tell the controller that log directory %s failed (%s); trying again", path, exc)
            self._schedule(lambda: self._propagate_log_dir_event(path), 1.0, None, "log-dir-event")
            return
        log.info("broker %d told the controller that log directory %s failed", self.broker_id, path)

    def begin_close(self) -> None:
        """The broker is going: waits for metadata end now. Its listeners answer the requests
        in flight before :meth:`close`, and a request waiting for this node's metadata (a
        topic's leaders, say) could otherwise wait out its timeout for a controller that can
        no longer reach a broker being removed."""
        self.stopping = True
        with self._metadata_changed:
            self._metadata_changed.notify_all()

    def _check_not_stopping(self, what: str) -> None:
        if self.stopping or self.closed:
            raise errors.BrokerNotAvailableError("broker %d is shutting down: %s" % (self.broker_id, what))

    def close(self) -> None:
        self.begin_close()
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self.guard.close()
        self.store.remove_listener(self._session_state)
        with self._metadata_changed:
            self._metadata_changed.notify_all()
        self.controller.shutdown()
        self.replicas.close()
        try:
            self.store.close()  # the registration goes with the session
        except Exception:  # noqa: BLE001 - closing a broken session
            log.debug("closing the metadata store session", exc_info=True)
