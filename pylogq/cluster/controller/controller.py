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
  (and it leaves the ISRs it follows in), so that clients see no error when it stops.

Decisions reach the brokers through :class:`~pylogq.cluster.controller.channel.ControllerChannelManager`:
LeaderAndIsr to the replicas of a changed partition, UpdateMetadata to every live
broker, StopReplica to replicas that stop.

Thread-safety: all state is owned by the event thread; other threads only enqueue
events (watches fire on the store's thread) or wait for an event's answer.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import AbstractSet, Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ... import errors
from ..contract import (
    LEADER_DURING_DELETE,
    BrokerRegistration,
    InterBrokerConnector,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from ..zk.client import ControllerEpochZkVersion, KafkaZkClient
from ..zk.data import NO_LEADER, PartitionState, TopicAssignment, broker_path, partition_state_path
from ..zk.store import CONNECTED, EXPIRED, SUSPENDED, WatchedEvent
from .channel import ControllerChannelManager

__all__ = ["KafkaController"]

log = logging.getLogger("pylogq.controller")

TopicPartition = Tuple[str, int]
#: StopReplica's leader epoch for a partition being deleted.
EPOCH_DURING_DELETE = -2
#: How often a partition's state write is decided again on the state read back after a
#: conflicting write (a leader changing its ISR meanwhile) before the event gives up.
STATE_WRITE_ATTEMPTS = 10
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


class _Batch:
    """The requests one decision sends, gathered per broker then sent together
    (Kafka's ControllerBrokerRequestBatch)."""

    def __init__(self) -> None:
        self.leader_and_isr: Dict[int, Dict[TopicPartition, LeaderAndIsrPartition]] = {}
        self.update_metadata: Set[TopicPartition] = set()
        self.update_metadata_all = False
        self.stop_replica: Dict[int, Dict[TopicPartition, Tuple[int, bool]]] = {}

    def leader_and_isr_to(self, brokers: Iterable[int], state: LeaderAndIsrPartition) -> None:
        for b in brokers:
            self.leader_and_isr.setdefault(b, {})[(state.topic, state.partition)] = state
        self.update_metadata.add((state.topic, state.partition))

    def stop_replica_to(self, broker: int, tp: TopicPartition, epoch: int, delete: bool) -> None:
        self.stop_replica.setdefault(broker, {})[tp] = (epoch, delete)


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
        # The active controller's state (empty while standing by).
        self.active = False
        self.epoch: ControllerEpochZkVersion = (0, -1)
        self.live: Dict[int, BrokerRegistration] = {}
        self.shutting_down: Set[int] = set()
        self.assignments: Dict[str, Dict[int, List[int]]] = {}
        self.topic_ids: Dict[str, str] = {}
        self.states: Dict[TopicPartition, PartitionState] = {}
        self.deleting: Set[str] = set()
        #: Replicas of topics being deleted: asked to delete, and known deleted.
        self._awaiting_delete: Dict[str, Set[Tuple[TopicPartition, int]]] = {}
        self._deleted_replicas: Dict[str, Set[Tuple[TopicPartition, int]]] = {}
        self._session = -1
        #: The store's connection was lost since the watches were last set (kazoo drops them all).
        self._watches_lost = False
        self._resync_backoff_s = RESYNC_BACKOFF_S
        self._resync_timer: Optional[threading.Timer] = None

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
        for tp, state in self.states.items():
            replicas = self.assignments.get(tp[0], {}).get(tp[1])
            if replicas and tp[0] not in self.deleting:
                by_preferred.setdefault(replicas[0], []).append(tp)
        batch = _Batch()
        for broker, tps in by_preferred.items():
            if broker not in self.live or broker in self.shutting_down:
                continue
            elsewhere = [tp for tp in tps if self.states[tp].leader != broker]
            if not elsewhere or 100 * len(elsewhere) <= self._imbalance_percentage * len(tps):
                continue
            self._refresh(elsewhere)
            for tp in elsewhere:
                def back(state: PartitionState, broker: int = broker) -> Optional[PartitionState]:
                    if state.leader == broker or broker not in state.isr:
                        return None
                    return PartitionState(broker, state.leader_epoch + 1, list(state.isr), self.epoch[0])

                written = self._update_state(tp, back)
                if written is not None:
                    log.info("controller: %s-%d back to its preferred leader %d (epoch %d)", tp[0], tp[1], broker,
                             written.leader_epoch)
                    replicas = self.assignments[tp[0]][tp[1]]
                    batch.leader_and_isr_to([r for r in replicas if r in self.live],
                                            self._request_state(tp, written))
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
        shutting_down = set(self.shutting_down)
        self._clear_state()
        self.shutting_down = shutting_down
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
        self.epoch = won
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
        self.live.clear()
        self.shutting_down.clear()
        self.assignments.clear()
        self.topic_ids.clear()
        self.states.clear()
        self.deleting.clear()
        self._awaiting_delete.clear()
        self._deleted_replicas.clear()

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
                self.live[b] = reg
                self.channel.add_broker(reg)
        for b in self.channel.brokers():
            if b not in self.live:
                self.channel.remove_broker(b)
        self.shutting_down &= set(self.live)
        for topic in self.zk.get_topics(watch=self._watch("topic-change", self._topics_changed)):
            self._load_topic(topic)
        self.deleting = set(self.zk.get_topics_to_delete(watch=self._watch("topic-deletion", self._deletions_changed)))
        self.zk.get_isr_changes(watch=self._watch("isr-change", self._isr_changed))
        batch = _Batch()
        batch.update_metadata_all = True
        self._repair([tp for tp in self.states if tp[0] not in self.deleting], batch)
        self._online([tp for tp in self._offline_partitions() if tp not in self.states], batch)
        # Every replica learns its partition's state as now decided (after the repair: a
        # broker back with an empty disk must never hear that it still leads).
        for tp, state in self.states.items():
            if tp[0] not in self.deleting:
                live = [r for r in self.assignments[tp[0]][tp[1]] if r in self.live]
                batch.leader_and_isr_to(live, self._request_state(tp, state))
        self._send(batch)
        self._deletions_changed()
        self._isr_changed()
        log.info("controller %d: %d live brokers %s, %d topics, %d partitions", self.broker_id, len(self.live),
                 sorted(self.live), len(self.assignments), len(self.states))

    def _load_topic(self, topic: str) -> Optional[TopicAssignment]:
        found = self.zk.get_topic_assignment(topic, watch=self._watch("partition-change-%s" % topic,
                                                                      lambda: self._partitions_changed(topic)))
        if found is None:
            return None
        assignment, _ = found
        self.assignments[topic] = {p: list(r) for p, r in assignment.partitions.items()}
        if assignment.topic_id is not None:
            self.topic_ids[topic] = assignment.topic_id
        for p, state in self.zk.get_partition_states(topic, sorted(assignment.partitions)).items():
            self.states[(topic, p)] = state
        return assignment

    def _offline_partitions(self) -> List[TopicPartition]:
        """Partitions with no state yet or no live leader (deleting topics aside)."""
        out = []
        for topic, parts in self.assignments.items():
            if topic in self.deleting:
                continue
            for p in parts:
                state = self.states.get((topic, p))
                if state is None or state.leader not in self.live:
                    out.append((topic, p))
        return out

    # -- requests -----------------------------------------------------------------------

    def _request_state(self, tp: TopicPartition, state: PartitionState, is_new: bool = False) -> LeaderAndIsrPartition:
        replicas = self.assignments.get(tp[0], {}).get(tp[1], [])
        return LeaderAndIsrPartition(tp[0], tp[1], state.controller_epoch, state.leader, state.leader_epoch,
                                     list(state.isr), state.partition_epoch, list(replicas),
                                     [r for r in replicas if r not in self.live], is_new)

    def _send(self, batch: _Batch) -> None:
        epoch = self.epoch[0]
        for broker, parts in batch.leader_and_isr.items():
            reg = self.live.get(broker)
            if reg is None:
                continue
            leaders = sorted({s.leader for s in parts.values() if s.leader in self.live})
            request = LeaderAndIsrRequest(self.broker_id, epoch, reg.epoch, list(parts.values()),
                                          {t: i for t, i in self.topic_ids.items() if any(t == s.topic for s in
                                                                                          parts.values())},
                                          [self._inter_broker_view(self.live[b]) for b in leaders])
            self.channel.send(broker, request, self._leader_and_isr_answered)
        if batch.update_metadata_all or batch.update_metadata:
            tps = list(self.states) if batch.update_metadata_all else sorted(batch.update_metadata)
            described: List[LeaderAndIsrPartition] = []
            for tp in tps:
                state = self.states.get(tp)
                if tp[0] in self.deleting:
                    described.append(LeaderAndIsrPartition(tp[0], tp[1], epoch, LEADER_DURING_DELETE, 0, [], 0,
                                                       self.assignments.get(tp[0], {}).get(tp[1], [])))
                elif state is not None:
                    described.append(self._request_state(tp, state))
            brokers = list(self.live.values())
            topic_ids = {t: i for t, i in self.topic_ids.items() if t not in self.deleting}
            for reg in brokers:
                self.channel.send(reg.broker_id, UpdateMetadataRequest(self.broker_id, epoch, reg.epoch, described,
                                                                       brokers, topic_ids))
        for broker, stops in batch.stop_replica.items():
            reg = self.live.get(broker)
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

    def _stop_replica_answered(self, broker: int, response: Tuple[int, Dict[TopicPartition, int]]) -> None:
        self._enqueue("stop-replica-answered", lambda: self._replicas_stopped(broker, response))

    # -- leader election ----------------------------------------------------------------

    def _online(self, tps: Iterable[TopicPartition], batch: _Batch) -> None:
        """Give each partition a leader where a replica is eligible: new partitions their first
        live replica, others a live ISR member (:meth:`_repair`)."""
        new: Dict[TopicPartition, PartitionState] = {}
        tps = list(tps)
        existing = [tp for tp in tps if tp in self.states]
        self._refresh(existing)
        self._repair(existing, batch)
        for tp in tps:
            replicas = self.assignments.get(tp[0], {}).get(tp[1])
            if replicas is None or tp in self.states:
                continue
            live = [r for r in replicas if r in self.live and r not in self.shutting_down]
            if not live:
                log.warning("controller: no live replica of new partition %s-%d (replicas %s)", tp[0], tp[1],
                            replicas)
                continue
            new[tp] = PartitionState(live[0], 0, live, self.epoch[0])
        if new:
            written = self.zk.create_partition_states(new, self.epoch)
            for tp, state in written.items():
                self.states[tp] = state
                replicas = self.assignments[tp[0]][tp[1]]
                batch.leader_and_isr_to([r for r in replicas if r in self.live],
                                        self._request_state(tp, state, is_new=True))
                log.info("controller: new partition %s-%d led by %d, ISR %s", tp[0], tp[1], state.leader, state.isr)
            created = [tp for tp in new if tp not in written]  # by an earlier controller: read it
            self._refresh(created)
            self._repair([tp for tp in created if tp in self.states], batch)

    def _bounced(self, broker: int, state: PartitionState) -> bool:
        """Whether ``broker`` registered after ``state`` was written: it restarted since, and may
        have come back without the records the state counts it for (an empty disk)."""
        reg = self.live.get(broker)
        return reg is not None and state.zxid >= 0 and reg.epoch > state.zxid

    def _repair(self, tps: Iterable[TopicPartition], batch: _Batch, failed: AbstractSet[int] = frozenset(),
                moving: bool = False, untold: AbstractSet[int] = frozenset()) -> None:
        """Bring each partition's state in line with the live brokers (Kafka's OfflineReplica
        and OfflinePartition transitions, as one decision per partition).

        ``failed`` brokers are treated as gone even if registered (a controlled shutdown's
        broker, with ``moving``: its leaderships move only where another ISR member can
        take them). Every live replica hears the outcome except ``untold`` brokers.
        """
        for tp in tps:
            replicas = self.assignments.get(tp[0], {}).get(tp[1])
            if replicas is None or tp[0] in self.deleting:
                continue
            written = self._update_state(tp, lambda state: self._decide(tp, state, replicas, failed, moving))
            if written is not None:
                batch.leader_and_isr_to([r for r in replicas if r in self.live and r not in untold],
                                        self._request_state(tp, written))

    def _decide(self, tp: TopicPartition, state: PartitionState, replicas: List[int], failed: AbstractSet[int],
                moving: bool) -> Optional[PartitionState]:
        """A partition's next state given who is alive; None when it stays as it is.

        ISR members that are not registered, that registered again since the state was
        written, or that are in ``failed`` leave the ISR, which is never emptied (its last
        members stay: only they can hold every committed record). A leader among them is
        replaced by the first live ISR member in replica order that is not shutting down
        (a clean election); with none, by any live replica if the topic allows unclean
        elections; else by a live member the ISR kept (one that restarted: the only one
        that may have the records); else the partition has no leader (-1) until one
        returns. Any change bumps the leader epoch, as Kafka's ZooKeeper controller does.
        """
        gone = {r for r in state.isr if r not in self.live or r in failed or self._bounced(r, state)}
        isr = [r for r in state.isr if r not in gone]
        epoch = state.leader_epoch + 1
        if state.leader not in gone and state.leader in self.live:
            if isr == state.isr:
                return None
            return PartitionState(state.leader, epoch, isr or [state.leader], self.epoch[0])
        eligible = [r for r in replicas if r in isr and r not in self.shutting_down]
        if eligible:
            return PartitionState(eligible[0], epoch, isr, self.epoch[0])
        if moving:
            return None  # no other ISR member: it stays with the broker shutting down
        if self._unclean(tp[0]):
            candidates = [r for r in replicas if r in self.live and r not in failed and r not in self.shutting_down]
            if candidates:
                log.warning("controller: UNCLEAN leader election for %s-%d: %d leads without being in the ISR %s; "
                            "records only the old ISR had are lost", tp[0], tp[1], candidates[0], state.isr)
                return PartitionState(candidates[0], epoch, [candidates[0]], self.epoch[0])
        kept = isr or list(state.isr)
        back = [r for r in replicas if r in kept and r in self.live and r not in failed
                and r not in self.shutting_down]
        if back:
            log.warning("controller: %s-%d: its only in-sync replica %d restarted since it was last decided; it "
                        "leads again with whatever its log holds", tp[0], tp[1], back[0])
            return PartitionState(back[0], epoch, kept, self.epoch[0])
        if state.leader == NO_LEADER and kept == state.isr:
            return None
        log.error("controller: %s-%d is OFFLINE: no live in-sync replica (ISR %s, live %s)", tp[0], tp[1],
                  state.isr, sorted(self.live))
        return PartitionState(NO_LEADER, epoch, kept, self.epoch[0])

    def _update_state(self, tp: TopicPartition,
                      decide: Callable[[PartitionState], Optional[PartitionState]]) -> Optional[PartitionState]:
        """Write the state ``decide`` makes of a partition's current one; -> what was written,
        None when it decided to leave it. A conflicting write (a leader changed its ISR since
        the state was read) makes the whole decision again on the state read back, as
        Kafka's controller does, never a patch of the old one."""
        for _ in range(STATE_WRITE_ATTEMPTS):
            state = self.states.get(tp)
            if state is None:
                return None
            new = decide(state)
            if new is None:
                return None
            written = self.zk.update_partition_state(tp[0], tp[1], new._replace(
                controller_epoch=self.epoch[0], partition_epoch=state.partition_epoch), self.epoch)
            if written is not None:
                self.states[tp] = written
                if new.leader != state.leader:
                    log.info("controller: %s-%d led by %d in epoch %d, ISR %s", tp[0], tp[1], written.leader,
                             written.leader_epoch, written.isr)
                return written
            current = self.zk.get_partition_state(*tp)
            if current is None:
                self.states.pop(tp, None)
                return None
            self.states[tp] = current
        raise errors.MetadataStoreError(partition_state_path(*tp), "the state kept changing under %d writes"
                                        % STATE_WRITE_ATTEMPTS)

    def _refresh(self, tps: Iterable[TopicPartition]) -> None:
        """Read these partitions' states from the store: leaders change their ISRs there without
        the controller (it hears of it later, by a notification)."""
        for tp in tps:
            found = self.zk.get_partition_state(*tp)
            if found is not None:
                self.states[tp] = found

    # -- brokers ------------------------------------------------------------------------

    def _brokers_changed(self) -> None:
        if not self.active:
            return
        ids = set(self.zk.get_broker_ids(watch=self._watch("broker-change", self._brokers_changed)))
        current: Dict[int, BrokerRegistration] = {}
        for b in ids:
            reg = self.live.get(b)
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
        dead = {b for b in self.live if b not in current or current[b].epoch != self.live[b].epoch}
        born = {b for b in current if b not in self.live or b in dead}
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
        if not self.active or broker_id not in self.live:
            return
        reg = self._read_broker(broker_id)
        if reg is None or reg.epoch != self.live[broker_id].epoch or reg == self.live[broker_id]:
            return  # gone or registered anew: the broker change handles it
        log.info("controller: broker %d now advertises %s", broker_id,
                 [e.connection_string() for e in reg.endpoints])
        self.live[broker_id] = reg
        self.channel.add_broker(reg)
        batch = _Batch()
        batch.update_metadata_all = True
        self._send(batch)

    def _on_brokers_failed(self, dead: Set[int]) -> None:
        log.info("controller: brokers %s went away", sorted(dead))
        for b in dead:
            self.live.pop(b, None)
            self.shutting_down.discard(b)
            self.channel.remove_broker(b)
        batch = _Batch()
        batch.update_metadata_all = True
        hosted = [tp for tp in self.states if tp[0] not in self.deleting
                  and dead & set(self.assignments.get(tp[0], {}).get(tp[1], []))]
        self._refresh(hosted)
        self._repair(hosted, batch)
        self._send(batch)

    def _on_brokers_started(self, born: Mapping[int, BrokerRegistration]) -> None:
        log.info("controller: brokers %s registered", sorted(born))
        for b, reg in born.items():
            self.live[b] = reg
            self.channel.add_broker(reg)
        batch = _Batch()
        batch.update_metadata_all = True
        for tp, state in self.states.items():
            if tp[0] in self.deleting:
                continue
            replicas = self.assignments.get(tp[0], {}).get(tp[1], [])
            here = [r for r in replicas if r in born]
            if here:
                batch.leader_and_isr_to(here, self._request_state(tp, state))
        # A broker back in an ISR it never left (its last member, kept while it was down)
        # may have come back without its log: it leaves the ISR and rejoins once caught up.
        stale = [tp for tp, state in self.states.items() if tp[0] not in self.deleting
                 and state.leader in self.live and set(born) & set(state.isr)]
        self._refresh(stale)
        self._repair(stale, batch)
        self._online(self._offline_partitions(), batch)
        self._send(batch)
        if self.deleting:
            self._deletions_changed()

    # -- topics -------------------------------------------------------------------------

    def _topics_changed(self) -> None:
        if not self.active:
            return
        topics = set(self.zk.get_topics(watch=self._watch("topic-change", self._topics_changed)))
        gone = set(self.assignments) - topics
        batch = _Batch()
        for topic in gone:  # removed behind the controller's back (or after its deletion)
            self._forget_topic(topic, batch)
        new_tps: List[TopicPartition] = []
        for topic in sorted(topics - set(self.assignments)):
            if self._load_topic(topic) is not None:
                new_tps += [(topic, p) for p in self.assignments[topic] if (topic, p) not in self.states]
        if new_tps:
            self._online(new_tps, batch)
        self._send(batch)

    def _partitions_changed(self, topic: str) -> None:
        if not self.active or topic not in self.assignments:
            return
        known = set(self.assignments[topic])
        if self._load_topic(topic) is None:
            return
        added = [(topic, p) for p in sorted(set(self.assignments[topic]) - known)]
        if added:
            log.info("controller: topic %s has %d new partitions", topic, len(added))
            batch = _Batch()
            self._online(added, batch)
            self._send(batch)

    def _forget_topic(self, topic: str, batch: _Batch) -> None:
        for p in list(self.assignments.get(topic, {})):
            self.states.pop((topic, p), None)
            batch.update_metadata.add((topic, p))
        self.deleting.add(topic)  # so UpdateMetadata says "deleted" for its partitions
        self._send(batch)
        batch.update_metadata.clear()
        self.deleting.discard(topic)
        self.assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)

    def _deletions_changed(self) -> None:
        if not self.active:
            return
        marked = set(self.zk.get_topics_to_delete(watch=self._watch("topic-deletion", self._deletions_changed)))
        for topic in sorted(marked):
            if topic not in self.assignments:
                self.zk.delete_topic(topic, self.epoch)  # nothing of it is left but the marker
                self.deleting.discard(topic)
                continue
            self._start_deletion(topic)

    def _start_deletion(self, topic: str) -> None:
        """Stop and delete every live replica of ``topic``; the znodes go once all are deleted."""
        first = topic not in self.deleting
        self.deleting.add(topic)
        awaiting = self._awaiting_delete.setdefault(topic, set())
        batch = _Batch()
        if first:
            log.info("controller: deleting topic %s", topic)
            batch.update_metadata = {(topic, p) for p in self.assignments[topic]}
        for p, replicas in self.assignments[topic].items():
            for r in replicas:
                key = ((topic, p), r)
                if r in self.live and key not in awaiting:
                    awaiting.add(key)
                    batch.stop_replica_to(r, (topic, p), EPOCH_DURING_DELETE, True)
        self._send(batch)
        self._maybe_finish_deletion(topic)

    def _replicas_stopped(self, broker: int, response: Tuple[int, Dict[TopicPartition, int]]) -> None:
        code, per_partition = response
        for tp, c in per_partition.items():
            awaiting = self._awaiting_delete.get(tp[0])
            if awaiting is None:
                continue
            if code == 0 and c == 0:
                awaiting.discard((tp, broker))
                self._deleted_replicas.setdefault(tp[0], set()).add((tp, broker))
            else:
                log.warning("controller: broker %d could not delete %s-%d (error %d/%d); it is retried when the "
                            "broker registers again", broker, tp[0], tp[1], code, c)
        for topic in {tp[0] for tp in per_partition}:
            self._maybe_finish_deletion(topic)

    def _maybe_finish_deletion(self, topic: str) -> None:
        if topic not in self.deleting or topic not in self.assignments:
            return
        done = self._deleted_replicas.get(topic, set())
        every = {((topic, p), r) for p, replicas in self.assignments[topic].items() for r in replicas}
        if not every <= done:
            return
        self.zk.delete_topic(topic, self.epoch)
        for p in self.assignments[topic]:
            self.states.pop((topic, p), None)
        self.assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.deleting.discard(topic)
        self._awaiting_delete.pop(topic, None)
        self._deleted_replicas.pop(topic, None)
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
        batch = _Batch()
        for tp in sorted(tps):
            if tp[0] not in self.assignments or tp[0] in self.deleting:
                continue
            state = self.zk.get_partition_state(*tp)
            if state is not None:
                self.states[tp] = state
                batch.update_metadata.add(tp)
        self._send(batch)
        self.zk.delete_isr_changes(names)

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
        reg = self.live.get(broker_id)
        if reg is None:
            return errors.BrokerNotAvailableError.code, []
        if broker_epoch != -1 and broker_epoch < reg.epoch:
            return errors.StaleBrokerEpochError.code, []
        self.shutting_down.add(broker_id)
        log.info("controller: broker %d shuts down; moving its leaderships", broker_id)
        batch = _Batch()
        hosted = [tp for tp in self.states if tp[0] not in self.deleting
                  and broker_id in self.assignments.get(tp[0], {}).get(tp[1], [])]
        self._refresh(hosted)
        # Its leaderships go to other ISR members, and it leaves those ISRs; it is told it
        # follows (so it takes no more writes), and stops fetching as it shuts down.
        led = [tp for tp in hosted if self.states[tp].leader == broker_id and len(self.assignments[tp[0]][tp[1]]) > 1]
        self._repair(led, batch, failed={broker_id}, moving=True)
        # The replicas it follows stop and leave their ISRs.
        followed = [tp for tp in hosted if self.states[tp].leader != broker_id]
        for tp in followed:
            batch.stop_replica_to(broker_id, tp, self.states[tp].leader_epoch, False)
        self._repair(followed, batch, failed={broker_id}, moving=True, untold={broker_id})
        self._send(batch)
        # What it still leads of the replicated partitions (a partition with one replica has
        # nowhere to go: it is not waited for, as in Kafka).
        remaining = sorted(tp for tp, s in self.states.items()
                           if s.leader == broker_id and len(self.assignments.get(tp[0], {}).get(tp[1], [])) > 1)
        return 0, remaining

    # -- introspection ------------------------------------------------------------------

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Block until every event queued before this call has been processed (tests, tools)."""
        self._enqueue("idle", lambda: None, wait=True, timeout=timeout)
