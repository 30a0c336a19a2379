"""The cluster's controller: one broker, elected through the metadata store, decides every
partition's leader and ISR (Kafka's KafkaController, ZooKeeper mode).

Every broker runs one; the one that creates the ephemeral ``/controller`` znode is
active, the others watch it and stand for election when it goes. The active
controller bumps ``/controller_epoch``, and every write it makes to a partition's
state checks that epoch's version, so a controller that lost its session without
noticing (a zombie) cannot change anything; brokers ignore requests from a
controller epoch older than one they have seen.

What it reacts to, each on its one event thread, in order:

- a broker registering (``/brokers/ids``): it gets the whole metadata, the states of
  its replicas (it becomes their follower, or their leader when it is the only one
  left), and partitions left without a live leader get one;
- a broker's registration going (its session expired: the process died or was cut
  off): each partition it led gets a new leader from its live ISR (clean election;
  the topic's ``unclean.leader.election.enable`` allows any live replica when no ISR
  member is left), with a new leader epoch; it leaves every ISR it was in. A
  partition with no eligible replica is offline (leader -1) until one comes back;
- a topic created (``/brokers/topics``) or given more partitions: each new
  partition's first live replica leads it, its live replicas are the ISR;
- a topic marked for deletion (``/admin/delete_topics``): its replicas stop and are
  deleted (StopReplica), then its znodes go; replicas on brokers that are down are
  deleted when they come back, and the topic's znodes only then;
- ISR changes a leader made (``/isr_change_notification``): every broker's metadata
  is updated;
- a broker's controlled shutdown: its leaderships move to other ISR members first
  (and it leaves the ISRs it follows in), so that clients see no error when it stops;
- reassignments (AlterPartitionReassignments, ``/admin/reassign_partitions``, and those
  the topics' znodes record when it takes over), carried out by :mod:`.reassignments`, and
  the state changes of reassigning partitions, which complete them;
- elections asked for (ElectLeaders, ``/admin/preferred_replica_election``), held by
  :mod:`.leader_election`.

The controller keeps what it knows of the cluster in a
:class:`~pylogq.cluster.controller.context.ControllerContext` and leaves the decisions to
its state machines: :mod:`.partition_state_machine` elects leaders and changes ISRs,
:mod:`.replica_state_machine` moves replicas online, offline and through deletion; this
module handles the events and says which partitions and replicas each one concerns.
Decisions reach the brokers as a :class:`~pylogq.cluster.controller.request_batch.RequestBatch`
through :class:`~pylogq.cluster.controller.channel.ControllerChannelManager`:
LeaderAndIsr to the replicas of a changed partition, UpdateMetadata to every live
broker, StopReplica to replicas that stop.

Thread-safety: all state is owned by the event thread; other threads only enqueue
events (watches fire on the store's thread) or wait for an event's answer.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

from ... import errors
from ..contract import (
    LEADER_DURING_DELETE,
    PartitionOutcome,
    BrokerRegistration,
    InterBrokerConnector,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from ..zk.client import ControllerEpochZkVersion, KafkaZkClient
from ..zk.data import PartitionState, TopicAssignment, broker_path
from ..zk.store import CONNECTED, EXPIRED, SUSPENDED, WatchedEvent
from .channel import ControllerChannelManager
from .context import ControllerContext, Reassignment, TopicPartition
from .leader_election import LeaderElections
from .partition_state_machine import PartitionStateMachine
from .reassignments import Reassignments
from .replica_state_machine import ReplicaStateMachine
from .request_batch import RequestBatch

__all__ = ["KafkaController"]

log = logging.getLogger("pylogq.controller")

#: The pause before the controller reads the cluster again after an event failed on a
#: metadata store error (doubling up to RESYNC_MAX_BACKOFF_S while it keeps failing).
RESYNC_BACKOFF_S = 0.2
RESYNC_MAX_BACKOFF_S = 5.0


class _Event:
    """Work for the controller thread; ``answer`` is set for events a caller waits on."""

    def __init__(self, name: str, fn: Callable[[], Any], wait: bool = False) -> None:
        self.name = name
        self.fn = fn
        self.done = threading.Event() if wait else None
        self.result: Any = None
        self.error: Optional[BaseException] = None


class KafkaController:
    """A broker's controller: active when elected, standing by otherwise."""

    def __init__(self, broker_id: int, zk: KafkaZkClient, connector: InterBrokerConnector,
                 unclean_leader_election: Callable[[str], bool], listener: Optional[str] = None,
                 on_delete_topic: Optional[Callable[[str], None]] = None, rebalance_interval_s: float = 0.0,
                 imbalance_percentage: int = 10) -> None:
        """``rebalance_interval_s`` > 0 checks every so often that each broker leads the
        partitions it is the preferred leader of (``auto.leader.rebalance.enable``,
        ``leader.imbalance.check.interval.seconds``), moving them back once more than
        ``imbalance_percentage`` of a broker's are led elsewhere."""
        self.broker_id = broker_id
        self._rebalance_interval_s = rebalance_interval_s
        self._imbalance_percentage = imbalance_percentage
        self._rebalancer: Optional[threading.Timer] = None
        self.zk = zk
        self._unclean = unclean_leader_election
        self._on_delete_topic = on_delete_topic
        self._listener = listener
        self.channel = ControllerChannelManager(connector, listener)
        self._events: "queue.Queue[Optional[_Event]]" = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="pylogq-controller-%d" % broker_id, daemon=True)
        self._stopped = False
        self._stopping = False
        # The active controller's state (empty while standing by), and the state machines
        # that decide on it: the partitions' leaders and ISRs, the replicas' transitions.
        self.active = False
        self.context = ControllerContext()
        self._partitions = PartitionStateMachine(self.context, zk, unclean_leader_election)
        self._replicas = ReplicaStateMachine(self.context)
        self._reassignments = Reassignments(
            self.context, zk, self._partitions,
            lambda tp: self._watch("reassigning-state-%s-%d" % tp, lambda: self._reassigning_state_changed(tp)),
            lambda: self._watch("reassign-partitions", self._reassignment_request_changed))
        self._elections = LeaderElections(
            self.context, zk, self._partitions,
            lambda: self._watch("preferred-replica-election", self._election_request_changed))
        self._session = -1
        #: The store's connection was lost since the watches were last set (kazoo drops them all).
        self._watches_lost = False
        self._resync_backoff_s = RESYNC_BACKOFF_S
        self._resync_timer: Optional[threading.Timer] = None

    # The context's state under the names it had here (the broker's metrics and tests read them).

    @property
    def epoch(self) -> ControllerEpochZkVersion:
        """The controller epoch and its znode version (the latest won, or (0, -1))."""
        return self.context.epoch

    @property
    def live(self) -> Dict[int, BrokerRegistration]:
        """The live brokers' registrations, by id."""
        return self.context.live

    @property
    def shutting_down(self) -> Set[int]:
        """The brokers in controlled shutdown."""
        return self.context.shutting_down

    @property
    def assignments(self) -> Dict[str, Dict[int, List[int]]]:
        """Every topic's replicas, by partition."""
        return self.context.assignments

    @property
    def topic_ids(self) -> Dict[str, str]:
        """Every topic's id."""
        return self.context.topic_ids

    @property
    def states(self) -> Dict[TopicPartition, PartitionState]:
        """Every partition's state, as last read or written."""
        return self.context.states

    @property
    def deleting(self) -> Set[str]:
        """The topics being deleted."""
        return self.context.deleting

    # -- lifecycle ----------------------------------------------------------------------

    def startup(self) -> None:
        self.zk.store.add_listener(self._session_state)
        self._session = self.zk.store.session_id
        self._thread.start()
        self._enqueue("elect", self._elect)
        self._schedule_rebalance()

    def _schedule_rebalance(self) -> None:
        if self._rebalance_interval_s <= 0 or self._stopped:
            return
        timer = threading.Timer(self._rebalance_interval_s, self._rebalance_due)
        timer.daemon = True
        timer.name = "pylogq-leader-rebalance-%d" % self.broker_id
        self._rebalancer = timer
        timer.start()

    def _rebalance_due(self) -> None:
        self._enqueue("preferred-leaders", self._rebalance_leaders)
        self._schedule_rebalance()

    def _rebalance_leaders(self) -> None:
        """Kafka's auto leader rebalance: where a broker's share of partitions led by another
        than their preferred leader (it) passes the threshold, give them back to it when it
        is alive and in sync."""
        if not self.active:
            return
        by_preferred: Dict[int, List[TopicPartition]] = {}
        for tp, state in self.context.states.items():
            replicas = self.context.assignments.get(tp[0], {}).get(tp[1])
            if replicas and tp[0] not in self.context.deleting:
                by_preferred.setdefault(replicas[0], []).append(tp)
        batch = RequestBatch()
        for broker, tps in by_preferred.items():
            if broker not in self.context.live or broker in self.context.shutting_down:
                continue
            elsewhere = [tp for tp in tps if self.context.states[tp].leader != broker]
            if not elsewhere or 100 * len(elsewhere) <= self._imbalance_percentage * len(tps):
                continue
            self._partitions.elect_preferred(broker, elsewhere, batch)
        self._send(batch)

    def shutdown(self) -> None:
        """Stop deciding (resigning if active): the next controller takes over."""
        try:
            self.zk.store.remove_listener(self._session_state)
        except errors.MetadataStoreError:
            pass  # an abandoned session (a broker stopped abruptly)
        self._stopping = True  # a watch firing on the resignation must not elect it again
        try:
            if self._thread.is_alive():
                self._enqueue("shutdown", self._resign_and_release, wait=True, timeout=30)
            else:  # never started (or already ended): nothing else touches the state
                self._resign_and_release()
        except (errors.MetadataStoreError, errors.BrokerError) as exc:
            log.info("controller %d: stopping without resigning: %s", self.broker_id, exc)
        self._stopped = True
        if self._rebalancer is not None:
            self._rebalancer.cancel()
        if self._resync_timer is not None:
            self._resync_timer.cancel()
        self._events.put(None)
        if threading.current_thread() is not self._thread and self._thread.is_alive():
            self._thread.join(30)
        self.channel.shutdown()

    def _session_state(self, state: str) -> None:
        """The store's session states (on its callback thread, in order). Watches do not
        survive a lost connection: after SUSPENDED, the same session connected again is
        read again as a whole with new watches (Kafka's ZooKeeper client sets its watches
        again on reconnect); a new session means a new election."""
        if state == SUSPENDED:
            self._watches_lost = True
        elif state == EXPIRED:
            self._watches_lost = True
            self._enqueue("session-expired", self._resign)
        elif state == CONNECTED and self.zk.store.session_id != self._session:
            self._session = self.zk.store.session_id
            self._watches_lost = False
            self._enqueue("new-session", self._elect)
        elif state == CONNECTED and self._watches_lost:
            self._watches_lost = False
            self._enqueue("reconnected", self._reconnected)

    def _enqueue(self, name: str, fn: Callable[[], Any], wait: bool = False, timeout: float = 60.0) -> Any:
        event = _Event(name, fn, wait)
        if self._stopped:
            if wait:
                raise errors.NotControllerError("the controller of broker %d is stopped" % self.broker_id)
            return None
        self._events.put(event)
        if not wait:
            return None
        assert event.done is not None
        if not event.done.wait(timeout):
            raise errors.RequestTimedOutError("the controller did not answer %s within %.0f s" % (name, timeout))
        if event.error is not None:
            raise event.error
        return event.result

    def _run(self) -> None:
        while True:
            event = self._events.get()
            if event is None:
                return
            try:
                event.result = event.fn()
            except errors.ControllerMovedError as exc:
                log.warning("controller %d: %s during %s; resigning", self.broker_id, exc, event.name)
                event.error = errors.NotControllerError(str(exc))
                self._resign()
                self._guarded(self._elect)
            except errors.MetadataStoreError as exc:
                # Part of the event's changes may be written: what it left undone is found by
                # reading the whole cluster again once the store answers (Kafka's controller
                # retries its ZooKeeper calls until they go through).
                log.warning("controller %d: %s failed on the metadata store (%s); reading the cluster again",
                            self.broker_id, event.name, exc)
                event.error = exc
                self._schedule_resync()
            except Exception as exc:  # noqa: BLE001 - the controller keeps running
                log.exception("controller %d: %s failed", self.broker_id, event.name)
                event.error = exc
                self._schedule_resync()
            if event.done is not None:
                event.done.set()

    def _guarded(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the event thread; a store error schedules a resync instead of escaping."""
        try:
            fn()
        except errors.MetadataStoreError as exc:
            log.warning("controller %d: %s; reading the cluster again", self.broker_id, exc)
            self._schedule_resync()

    def _schedule_resync(self) -> None:
        if self._stopped or self._stopping:
            return
        if self._resync_timer is not None:
            self._resync_timer.cancel()
        delay = self._resync_backoff_s
        self._resync_backoff_s = min(delay * 2, RESYNC_MAX_BACKOFF_S)
        timer = threading.Timer(delay, lambda: self._enqueue("resync", self._resync))
        timer.daemon = True
        timer.name = "pylogq-controller-resync-%d" % self.broker_id
        self._resync_timer = timer
        timer.start()

    def _reconnected(self) -> None:
        """The session came back after a lost connection, without its watches."""
        if self.active:
            self._resync()
        else:
            self._elect()

    def _resync(self) -> None:
        """Read the whole cluster again and act on what changed unseen (an event that failed
        half-way, watches lost with the connection): the active controller's failover, in
        the same controller epoch. A standby stands for election again (its watch on
        ``/controller`` may be lost too)."""
        if self._stopped or self._stopping:
            return
        if not self.active:
            self._elect()
            self._resync_backoff_s = RESYNC_BACKOFF_S
            return
        log.info("controller %d: reading the cluster again", self.broker_id)
        shutting_down = set(self.context.shutting_down)
        self._clear_state()
        self.context.shutting_down = shutting_down
        self._load_and_reconcile()
        self._resync_backoff_s = RESYNC_BACKOFF_S

    def _watch(self, name: str, fn: Callable[[], Any]) -> Callable[[WatchedEvent], None]:
        return lambda event: self._enqueue(name, fn)

    # -- election -----------------------------------------------------------------------

    def _elect(self) -> None:
        """Stand for election (again), and watch ``/controller`` to stand again when it goes."""
        if self._stopped or self._stopping:
            return
        current = self.zk.get_controller_id(watch=self._watch("controller-change", self._controller_changed))
        if current is not None:
            if current != self.broker_id and self.active:
                self._resign()
            if current == self.broker_id and not self.active:
                # Our own znode from a session that is still ours (a retried election).
                self._resign_and_release()
                self._elect()
            return
        won = self.zk.try_become_controller(self.broker_id)
        if won is None:
            return self._elect()  # someone else won: watch theirs
        self.context.epoch = won
        log.info("broker %d is the controller (epoch %d)", self.broker_id, won[0])
        self.active = True
        try:
            self._load_and_reconcile()
        except errors.ControllerMovedError:
            raise
        except Exception:
            log.exception("controller %d: failover failed; resigning", self.broker_id)
            self._resign_and_release()
            raise

    def _controller_changed(self) -> None:
        self._elect()

    def _resign(self) -> None:
        if self.active:
            log.info("broker %d is no longer the controller", self.broker_id)
        self.active = False
        self.channel.shutdown()
        self.channel = ControllerChannelManager(self.channel._connector, self.channel._listener)
        self._clear_state()

    def _clear_state(self) -> None:
        self.context.clear()
        self._replicas.clear()

    def _resign_and_release(self) -> None:
        was = self.active
        self._resign()
        if was:
            try:
                self.zk.resign_controller(self.broker_id)
            except errors.MetadataStoreError as exc:  # the session is gone: /controller goes with it
                log.info("controller %d: could not delete /controller (%s)", self.broker_id, exc)

    # -- failover -----------------------------------------------------------------------

    def _load_and_reconcile(self) -> None:
        """Read the cluster from the store (watching it), then repair every partition as if
        each broker that is not registered, or registered again since the partition's state
        was written, had just failed (Kafka's failover: its replica state machine takes the
        replicas of dead brokers out of the ISRs), give partitions without a live leader
        one, and tell every live broker the outcome."""
        ids = self.zk.get_broker_ids(watch=self._watch("broker-change", self._brokers_changed))
        for b in ids:
            reg = self._read_broker(b)
            if reg is not None:
                self.context.live[b] = reg
                self.channel.add_broker(reg)
        for b in self.channel.brokers():
            if b not in self.context.live:
                self.channel.remove_broker(b)
        self.context.shutting_down &= set(self.context.live)
        for topic in self.zk.get_topics(watch=self._watch("topic-change", self._topics_changed)):
            self._load_topic(topic)
        self.context.deleting = set(self.zk.get_topics_to_delete(watch=self._watch("topic-deletion",
                                                                                 self._deletions_changed)))
        self.zk.get_isr_changes(watch=self._watch("isr-change", self._isr_changed))
        self.zk.get_log_dir_events(watch=self._watch("log-dir-event", self._log_dir_events))
        batch = RequestBatch()
        batch.update_metadata_all = True
        self._partitions.repair([tp for tp in self.context.states if tp[0] not in self.context.deleting], batch)
        self._partitions.online([tp for tp in self.context.offline_partitions() if tp not in self.context.states],
                                batch)
        # Every replica learns its partition's state as now decided (after the repair: a
        # broker back with an empty disk must never hear that it still leads).
        for tp, state in self.context.states.items():
            if tp[0] not in self.context.deleting:
                live = [r for r in self.context.assignments[tp[0]][tp[1]] if r in self.context.live]
                batch.leader_and_isr_to(live, self.context.request_state(tp, state))
        self._send(batch)
        self._deletions_changed()
        self._isr_changed()
        self._log_dir_events()
        batch = RequestBatch()
        self._reassignments.resume(batch)
        self._elections.store_request_changed(batch)
        self._send(batch)
        log.info("controller %d: %d live brokers %s, %d topics, %d partitions, %d reassigning", self.broker_id,
                 len(self.context.live), sorted(self.context.live), len(self.context.assignments),
                 len(self.context.states), len(self.context.reassigning))

    def _load_topic(self, topic: str) -> Optional[TopicAssignment]:
        found = self.zk.get_topic_assignment(topic, watch=self._watch("partition-change-%s" % topic,
                                                                      lambda: self._partitions_changed(topic)))
        if found is None:
            return None
        assignment, _ = found
        self.context.assignments[topic] = {p: list(r) for p, r in assignment.partitions.items()}
        if assignment.topic_id is not None:
            self.context.topic_ids[topic] = assignment.topic_id
        # The reassignments its znode records (kept as they are where the context has them:
        # the controller's own writes come back through this watch).
        for p, replicas in assignment.partitions.items():
            adding, removing = assignment.adding.get(p, []), assignment.removing.get(p, [])
            known = self.context.reassigning.get((topic, p))
            if not adding and not removing:
                self.context.reassigning.pop((topic, p), None)
            elif known is None or known.adding != adding or known.removing != removing:
                self.context.reassigning[(topic, p)] = Reassignment(
                    [r for r in replicas if r not in removing], list(adding), list(removing))
        for p, state in self.zk.get_partition_states(topic, sorted(assignment.partitions)).items():
            self.context.states[(topic, p)] = state
        return assignment

    # -- requests -----------------------------------------------------------------------

    def _send(self, batch: RequestBatch) -> None:
        epoch = self.context.epoch[0]
        for broker, parts in batch.leader_and_isr.items():
            reg = self.context.live.get(broker)
            offline = self.context.offline_replicas.get(broker)
            if offline:  # a replica in a failed log directory hears nothing until its broker registers again
                parts = {tp: state for tp, state in parts.items() if tp not in offline}
            if reg is None or not parts:
                continue
            leaders = sorted({s.leader for s in parts.values() if s.leader in self.context.live})
            request = LeaderAndIsrRequest(self.broker_id, epoch, reg.epoch, list(parts.values()),
                                          {t: i for t, i in self.context.topic_ids.items() if any(t == s.topic for s in
                                                                                          parts.values())},
                                          [self._inter_broker_view(self.context.live[b]) for b in leaders])
            self.channel.send(broker, request, self._leader_and_isr_answered)
        if batch.update_metadata_all or batch.update_metadata:
            tps = list(self.context.states) if batch.update_metadata_all else sorted(batch.update_metadata)
            described: List[LeaderAndIsrPartition] = []
            for tp in tps:
                state = self.context.states.get(tp)
                if tp[0] in self.context.deleting:
                    described.append(LeaderAndIsrPartition(tp[0], tp[1], epoch, LEADER_DURING_DELETE, 0, [], 0,
                                                       self.context.assignments.get(tp[0], {}).get(tp[1], [])))
                elif state is not None:
                    described.append(self.context.request_state(tp, state))
            brokers = list(self.context.live.values())
            topic_ids = {t: i for t, i in self.context.topic_ids.items() if t not in self.context.deleting}
            for reg in brokers:
                self.channel.send(reg.broker_id, UpdateMetadataRequest(self.broker_id, epoch, reg.epoch, described,
                                                                       brokers, topic_ids))
        for broker, stops in batch.stop_replica.items():
            reg = self.context.live.get(broker)
            if reg is None:
                continue
            self.channel.send(broker, StopReplicaRequest(self.broker_id, epoch, reg.epoch, stops),
                              self._stop_replica_answered)

    def _inter_broker_view(self, reg: BrokerRegistration) -> BrokerRegistration:
        """A leader as LeaderAndIsr names it: by its inter-broker listener's endpoint (the
        request carries one endpoint per leader; its first could be a client listener)."""
        endpoint = reg.endpoint(self._listener) or reg.endpoint()
        return reg if endpoint is None else reg._replace(endpoints=(endpoint,))

    def _leader_and_isr_answered(self, broker: int, response: Tuple[int, Dict[TopicPartition, int]]) -> None:
        code, per_partition = response
        failed = {tp: c for tp, c in per_partition.items() if c}
        if code or failed:
            log.warning("controller: broker %d answered LeaderAndIsr with %s %s", broker, code, failed)
        offline = [tp for tp, c in failed.items() if c == errors.KafkaStorageError.code]
        if offline:
            self._enqueue("replicas-offline", lambda: self._replicas_offline(broker, offline))

    # -- failed log directories -------------------------------------------------------------

    def _log_dir_events(self) -> None:
        """A broker's log directory failed (``/log_dir_event_notification``): each broker named
        hears its partitions' states again, and its answer names the replicas that went
        offline with the directory (Kafka's onBrokerLogDirFailure)."""
        if not self.active:
            return
        names = self.zk.get_log_dir_events(watch=self._watch("log-dir-event", self._log_dir_events))
        if not names:
            return
        brokers = {b for b in (self.zk.read_log_dir_event(n) for n in names) if b is not None}
        log.info("controller: log directory failures on brokers %s", sorted(brokers))
        batch = RequestBatch()
        self._replicas.online(brokers & set(self.context.live), batch)
        self._send(batch)
        self.zk.delete_log_dir_events(names)

    def _replicas_offline(self, broker: int, tps: List[TopicPartition]) -> None:
        """``broker`` answered KAFKA_STORAGE_ERROR for these replicas: their log directory
        failed. They count as offline (out of the ISR, never elected) until the broker
        registers again; the partitions they led get new leaders (Kafka's
        onReplicasBecomeOffline)."""
        if not self.active or broker not in self.context.live:
            return
        known = self.context.offline_replicas.setdefault(broker, set())
        new = [tp for tp in tps if tp not in known and tp in self.context.states]
        if not new:
            return
        known.update(new)
        log.warning("controller: broker %d's replicas of %s are offline (failed log directory)", broker,
                    ", ".join("%s-%d" % tp for tp in sorted(new)))
        batch = RequestBatch()
        self._partitions.refresh(new)
        self._partitions.repair(new, batch)
        for tp in new:  # every broker's metadata names the offline replica
            batch.update_metadata.add(tp)
        self._send(batch)

    def _stop_replica_answered(self, broker: int, response: Tuple[int, Dict[TopicPartition, int]]) -> None:
        self._enqueue("stop-replica-answered", lambda: self._replicas_stopped(broker, response))

    # -- brokers ------------------------------------------------------------------------

    def _brokers_changed(self) -> None:
        if not self.active:
            return
        ids = set(self.zk.get_broker_ids(watch=self._watch("broker-change", self._brokers_changed)))
        current: Dict[int, BrokerRegistration] = {}
        for b in ids:
            reg = self.context.live.get(b)
            if reg is not None:
                stat = self.zk.store.exists(broker_path(b))
                if stat is None:
                    continue  # gone since the listing
                if stat.czxid != reg.epoch:
                    reg = None  # registered anew (a restart): read it
            if reg is None:
                reg = self._read_broker(b)
            if reg is not None:
                current[b] = reg
        dead = {b for b in self.context.live if b not in current or current[b].epoch != self.context.live[b].epoch}
        born = {b for b in current if b not in self.context.live or b in dead}
        if dead:
            self._on_brokers_failed(dead)
        if born:
            self._on_brokers_started({b: current[b] for b in born})

    def _read_broker(self, broker_id: int) -> Optional[BrokerRegistration]:
        """A broker's registration, watched for changes of its endpoints (Kafka's
        BrokerModifications: a listener opened after the broker registered)."""
        return self.zk.get_broker(broker_id, watch=self._watch("broker-modified-%d" % broker_id,
                                                                lambda: self._broker_modified(broker_id)))

    def _broker_modified(self, broker_id: int) -> None:
        if not self.active or broker_id not in self.context.live:
            return
        reg = self._read_broker(broker_id)
        if reg is None or reg.epoch != self.context.live[broker_id].epoch or reg == self.context.live[broker_id]:
            return  # gone or registered anew: the broker change handles it
        log.info("controller: broker %d now advertises %s", broker_id,
                 [e.connection_string() for e in reg.endpoints])
        self.context.live[broker_id] = reg
        self.channel.add_broker(reg)
        batch = RequestBatch()
        batch.update_metadata_all = True
        self._send(batch)

    def _on_brokers_failed(self, dead: Set[int]) -> None:
        log.info("controller: brokers %s went away", sorted(dead))
        for b in dead:
            self.context.live.pop(b, None)
            self.context.shutting_down.discard(b)
            self.context.offline_replicas.pop(b, None)
            self.channel.remove_broker(b)
        batch = RequestBatch()
        batch.update_metadata_all = True
        hosted = [tp for tp in self.context.states if tp[0] not in self.context.deleting
                  and dead & set(self.context.assignments.get(tp[0], {}).get(tp[1], []))]
        self._partitions.refresh(hosted)
        self._partitions.repair(hosted, batch)
        self._send(batch)

    def _on_brokers_started(self, born: Mapping[int, BrokerRegistration]) -> None:
        log.info("controller: brokers %s registered", sorted(born))
        for b, reg in born.items():
            self.context.live[b] = reg
            self.channel.add_broker(reg)
            self.context.offline_replicas.pop(b, None)  # its answers to LeaderAndIsr say anew
        batch = RequestBatch()
        batch.update_metadata_all = True
        self._replicas.online(born.keys(), batch)
        for b in born:
            self._reassignments.broker_started(b, batch)
        # A broker back in an ISR it never left (its last member, kept while it was down)
        # may have come back without its log: it leaves the ISR and rejoins once caught up.
        stale = [tp for tp, state in self.context.states.items() if tp[0] not in self.context.deleting
                 and state.leader in self.context.live and set(born) & set(state.isr)]
        self._partitions.refresh(stale)
        self._partitions.repair(stale, batch)
        self._partitions.online(self.context.offline_partitions(), batch)
        self._send(batch)
        if self.context.deleting:
            self._deletions_changed()

    # -- topics -------------------------------------------------------------------------

    def _topics_changed(self) -> None:
        if not self.active:
            return
        topics = set(self.zk.get_topics(watch=self._watch("topic-change", self._topics_changed)))
        gone = set(self.context.assignments) - topics
        batch = RequestBatch()
        for topic in gone:  # removed behind the controller's back (or after its deletion)
            self._forget_topic(topic, batch)
        new_tps: List[TopicPartition] = []
        for topic in sorted(topics - set(self.context.assignments)):
            if self._load_topic(topic) is not None:
                new_tps += [(topic, p) for p in self.context.assignments[topic]
                            if (topic, p) not in self.context.states]
        if new_tps:
            self._partitions.online(new_tps, batch)
        self._send(batch)

    def _partitions_changed(self, topic: str) -> None:
        if not self.active or topic not in self.context.assignments:
            return
        known = set(self.context.assignments[topic])
        if self._load_topic(topic) is None:
            return
        added = [(topic, p) for p in sorted(set(self.context.assignments[topic]) - known)]
        if added:
            log.info("controller: topic %s has %d new partitions", topic, len(added))
            batch = RequestBatch()
            self._partitions.online(added, batch)
            self._send(batch)

    def _forget_topic(self, topic: str, batch: RequestBatch) -> None:
        self._reassignments.topic_deleted(topic)
        for p in list(self.context.assignments.get(topic, {})):
            self.context.states.pop((topic, p), None)
            batch.update_metadata.add((topic, p))
        self.context.deleting.add(topic)  # so UpdateMetadata says "deleted" for its partitions
        self._send(batch)
        batch.update_metadata.clear()
        self.context.deleting.discard(topic)
        self.context.assignments.pop(topic, None)
        self.context.topic_ids.pop(topic, None)

    def _deletions_changed(self) -> None:
        if not self.active:
            return
        marked = set(self.zk.get_topics_to_delete(watch=self._watch("topic-deletion", self._deletions_changed)))
        for topic in sorted(marked):
            if topic not in self.context.assignments:
                self.zk.delete_topic(topic, self.context.epoch)  # nothing of it is left but the marker
                self.context.deleting.discard(topic)
                continue
            self._start_deletion(topic)

    def _start_deletion(self, topic: str) -> None:
        """Stop and delete every live replica of ``topic``; the znodes go once all are deleted."""
        first = topic not in self.context.deleting
        self.context.deleting.add(topic)
        batch = RequestBatch()
        if first:
            log.info("controller: deleting topic %s", topic)
            batch.update_metadata = {(topic, p) for p in self.context.assignments[topic]}
        self._replicas.start_deletion(topic, batch)
        self._send(batch)
        self._maybe_finish_deletion(topic)

    def _replicas_stopped(self, broker: int, response: Tuple[int, Dict[TopicPartition, int]]) -> None:
        for topic in self._replicas.replicas_stopped(broker, response):
            self._maybe_finish_deletion(topic)

    def _maybe_finish_deletion(self, topic: str) -> None:
        if topic not in self.context.deleting or topic not in self.context.assignments:
            return
        if not self._replicas.all_deleted(topic):
            return
        self.zk.delete_topic(topic, self.context.epoch)
        for p in self.context.assignments[topic]:
            self.context.states.pop((topic, p), None)
        self.context.assignments.pop(topic, None)
        self.context.topic_ids.pop(topic, None)
        self.context.deleting.discard(topic)
        self._replicas.forget(topic)
        self._reassignments.topic_deleted(topic)
        log.info("controller: topic %s deleted", topic)
        if self._on_delete_topic is not None:
            self._on_delete_topic(topic)

    # -- ISR changes --------------------------------------------------------------------

    def _isr_changed(self) -> None:
        if not self.active:
            return
        names = self.zk.get_isr_changes(watch=self._watch("isr-change", self._isr_changed))
        if not names:
            return
        tps: Set[TopicPartition] = set()
        for name in names:
            tps.update(self.zk.read_isr_change(name))
        batch = RequestBatch()
        for tp in sorted(tps):
            if tp[0] not in self.context.assignments or tp[0] in self.context.deleting:
                continue
            state = self.zk.get_partition_state(*tp)
            if state is not None:
                self.context.states[tp] = state
                batch.update_metadata.add(tp)
                self._reassignments.isr_changed(tp, batch)
        self._send(batch)
        self.zk.delete_isr_changes(names)

    # -- reassignments ------------------------------------------------------------------

    def alter_partition_reassignments(self, targets: Mapping[TopicPartition, Optional[List[int]]],
                                      timeout_s: float = 30.0) -> Dict[TopicPartition, PartitionOutcome]:
        """Reassign each partition to its target replicas (None cancels its reassignment);
        -> each partition's (error code, message). The active controller's (else every
        partition answers NOT_CONTROLLER)."""
        answer: Dict[TopicPartition, PartitionOutcome] = self._enqueue(
            "alter-reassignments", lambda: self._alter_reassignments(targets), wait=True, timeout=timeout_s)
        return answer

    def _alter_reassignments(self, targets: Mapping[TopicPartition, Optional[List[int]]]
                             ) -> Dict[TopicPartition, PartitionOutcome]:
        if not self.active:
            return {tp: (errors.NotControllerError.code, None) for tp in targets}
        batch = RequestBatch()
        try:
            return self._reassignments.alter(targets, batch)
        finally:
            self._send(batch)

    def list_partition_reassignments(self, tps: Optional[List[TopicPartition]] = None, timeout_s: float = 30.0
                                     ) -> Optional[Dict[TopicPartition, Reassignment]]:
        """The reassignments under way (of ``tps`` only, when given); None when this broker is
        not the active controller."""
        answer: Optional[Dict[TopicPartition, Reassignment]] = self._enqueue(
            "list-reassignments", lambda: self._reassignments.listing(tps) if self.active else None, wait=True,
            timeout=timeout_s)
        return answer

    def _reassigning_state_changed(self, tp: TopicPartition) -> None:
        if not self.active:
            return
        batch = RequestBatch()
        self._reassignments.state_changed(tp, batch)
        self._send(batch)

    def _reassignment_request_changed(self) -> None:
        if not self.active:
            return
        batch = RequestBatch()
        self._reassignments.store_request_changed(batch)
        self._send(batch)

    # -- elections asked for ------------------------------------------------------------

    def elect_leaders(self, election_type: int, tps: Optional[List[TopicPartition]], timeout_s: float = 30.0
                      ) -> Optional[Dict[TopicPartition, PartitionOutcome]]:
        """ElectLeaders: a preferred (0) or unclean (1) election of ``tps`` (None: every
        partition, those that needed none left out of the answer); -> each partition's
        (error code, message), or None when this broker is not the active controller."""
        answer: Optional[Dict[TopicPartition, PartitionOutcome]] = self._enqueue(
            "elect-leaders", lambda: self._elect_leaders(election_type, tps), wait=True, timeout=timeout_s)
        return answer

    def _elect_leaders(self, election_type: int, tps: Optional[List[TopicPartition]]
                       ) -> Optional[Dict[TopicPartition, PartitionOutcome]]:
        if not self.active:
            return None
        batch = RequestBatch()
        try:
            return self._elections.elect(election_type, tps, batch)
        finally:
            self._send(batch)

    def _election_request_changed(self) -> None:
        if not self.active:
            return
        batch = RequestBatch()
        self._elections.store_request_changed(batch)
        self._send(batch)

    # -- controlled shutdown ------------------------------------------------------------

    def controlled_shutdown(self, broker_id: int, broker_epoch: int, timeout_s: float = 30.0
                            ) -> Tuple[int, List[TopicPartition]]:
        """Move ``broker_id``'s leaderships away before it stops; -> (error code, partitions it
        still leads). Answered by the active controller only (else NOT_CONTROLLER)."""
        answer: Tuple[int, List[TopicPartition]] = self._enqueue(
            "controlled-shutdown", lambda: self._controlled_shutdown(broker_id, broker_epoch), wait=True,
            timeout=timeout_s)
        return answer

    def _controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Tuple[int, List[TopicPartition]]:
        if not self.active:
            return errors.NotControllerError.code, []
        reg = self.context.live.get(broker_id)
        if reg is None:
            return errors.BrokerNotAvailableError.code, []
        if broker_epoch != -1 and broker_epoch < reg.epoch:
            return errors.StaleBrokerEpochError.code, []
        self.context.shutting_down.add(broker_id)
        log.info("controller: broker %d shuts down; moving its leaderships", broker_id)
        batch = RequestBatch()
        hosted = [tp for tp in self.context.states if tp[0] not in self.context.deleting
                  and broker_id in self.context.assignments.get(tp[0], {}).get(tp[1], [])]
        self._partitions.refresh(hosted)
        # Its leaderships go to other ISR members, and it leaves those ISRs; it is told it
        # follows (so it takes no more writes), and stops fetching as it shuts down.
        led = [tp for tp in hosted if self.context.states[tp].leader == broker_id
               and len(self.context.assignments[tp[0]][tp[1]]) > 1]
        self._partitions.repair(led, batch, failed={broker_id}, moving=True)
        # The replicas it follows stop and leave their ISRs.
        followed = [tp for tp in hosted if self.context.states[tp].leader != broker_id]
        self._replicas.offline(broker_id, followed, batch)
        self._partitions.repair(followed, batch, failed={broker_id}, moving=True, untold={broker_id})
        self._send(batch)
        # What it still leads of the replicated partitions (a partition with one replica has
        # nowhere to go: it is not waited for, as in Kafka).
        remaining = sorted(tp for tp, s in self.context.states.items()
                           if s.leader == broker_id and len(self.context.assignments.get(tp[0], {}).get(tp[1], [])) > 1)
        return 0, remaining

    # -- introspection ------------------------------------------------------------------

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Block until every event queued before this call has been processed (tests, tools)."""
        self._enqueue("idle", lambda: None, wait=True, timeout=timeout)
