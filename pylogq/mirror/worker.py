"""A mirror maker process: its flows, and how processes share a flow's tasks.

:class:`MirrorMaker` runs every flow of a :class:`~pylogq.mirror.config.MirrorConfig`, each
in a :class:`FlowWorker`. Processes started with the same configuration share each flow's
``tasks.max`` tasks without any coordination of their own: the flow's tasks are the
partitions of a topic on the target, ``mm2-tasks.<source>.internal`` (``tasks.max``
partitions, made by the first process to start the flow), which every process subscribes
to in one consumer group of the target, ``mm2-<source>-><target>-workers``. The target's
group coordinator hands the partitions out, and a process runs task ``i`` while it is
assigned partition ``i`` (Kafka Connect spreads tasks over its workers through a group
too). A rebalance first revokes: the process stops those tasks cleanly (at least once:
their copies acknowledged and positions committed; exactly once: the last transaction
committed), then the new assignment starts tasks (exactly once: the new owner's
``init_transactions`` fences whatever the previous owner still runs). A process that
leaves cleanly hands its tasks over at once; one that dies (kill -9) does so when the
target's coordinator sees its session expire (the consumer's ``session.timeout.ms``,
10 s by default, as Kafka Connect's; set ``<target>.consumer.session.timeout.ms`` to
change it). The process that owns task 0 is the flow's leader
(:class:`~pylogq.mirror.leader.FlowLeader`).

A task that fails (an error its clients do not retry: a broker that stayed away past the
delivery timeout, a fenced transaction) is started again after a pause that doubles from
one second up to :data:`MAX_RESTART_BACKOFF_S` (Kafka Connect would leave it failed until
an operator restarts it; a mirror is expected to ride out a broker's restart). The
leader likewise.

Threads of a process: per flow, one that keeps the group membership (it polls the tasks
topic, starts and stops tasks), one per running task, and the leader's where task 0 runs;
plus the clients' own (a producer's sender, a group member's heartbeat). Thread-safe:
:meth:`MirrorMaker.stop` and the status properties may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Dict, List, Optional, Sequence

from ..client.consumer import Consumer, ConsumerRebalanceListener, TopicPartition
from ..errors import ConfigError, PylogqError
from ._threads import Threaded
from .clients import ClientOptions, FlowClients
from .config import FlowConfig, MirrorConfig
from .leader import FlowLeader, check_tasks_count, create_internal_topics, tasks_topic, workers_group
from .metrics import MirrorMetrics
from .task import SourceTask

__all__ = ["MAX_RESTART_BACKOFF_S", "FlowWorker", "MirrorMaker"]

log = logging.getLogger("pylogq.mirror.worker")

#: The longest pause before a failed task or leader is started again.
MAX_RESTART_BACKOFF_S = 10.0
#: The pause after the workers' group's coordinator did not answer.
RETRY_BACKOFF_S = 0.5
#: How long the membership thread's poll of the tasks topic waits (the longest a failed
#: task waits past its backoff, and a stop request to be seen).
MEMBERSHIP_POLL_MS = 200
#: How long a stopping task may take before the worker goes on without it.
TASK_STOP_TIMEOUT_S = 60.0


class _Restart:
    """When a failed task (or leader) may start again: after a pause that doubles."""

    __slots__ = ("failures", "at")

    def __init__(self) -> None:
        self.failures = 0
        self.at = 0.0

    def failed(self) -> float:
        """Another failure: -> the pause before the next start. A run that lasted longer than
        the longest pause counts as a success: the pauses start again from one second."""
        if time.monotonic() - self.at > 2 * MAX_RESTART_BACKOFF_S:
            self.failures = 0
        self.failures += 1
        pause = min(MAX_RESTART_BACKOFF_S, 2.0 ** (self.failures - 1))
        self.at = time.monotonic() + pause
        return pause


class FlowWorker(Threaded, ConsumerRebalanceListener):
    """This process's share of one flow: the tasks the workers' group assigns it (module docstring).

    :meth:`start` makes the flow's internal topics (raising what refuses them: a bad
    replication factor, a cluster that cannot be reached within ``admin.timeout.ms``) and
    starts the membership thread; :meth:`stop` stops the tasks and the leader cleanly and
    leaves the group. ``owned`` and ``tasks`` may be read from any thread.
    """

    def __init__(self, flow: FlowConfig, clients: FlowClients, metrics: MirrorMetrics) -> None:
        self.flow = flow
        self.clients = clients
        self.metrics = metrics
        self.topic = tasks_topic(flow)
        self.group = workers_group(flow)
        self._lock = threading.Lock()  # guards the maps below against readers on other threads
        self._tasks: Dict[int, SourceTask] = {}
        self._leader: Optional[FlowLeader] = None
        self._owned: List[int] = []
        self._restarts: Dict[int, _Restart] = {}
        self._restart_at: Dict[int, float] = {}  # failed task -> when it starts again
        self._leader_restart = _Restart()
        self._leader_restart_at: Optional[float] = None
        Threaded.__init__(self, "mirror-%s-worker" % flow.name)
        self._membership: Optional[Consumer] = None
        #: Why the membership thread ended, if it failed.
        self.error: Optional[BaseException] = None
        #: Task restarts after failures, since the start.
        self.restarts = 0
        #: Set once the first assignment arrived (even an empty one).
        self.joined = threading.Event()

    # -- control ----------------------------------------------------------------------------

    def start(self) -> None:
        create_internal_topics(self.flow, self.clients)
        # Made here, so a bad consumer setting fails the start rather than the thread.
        membership = self.clients.consumer(
            "target", {"client_id": "mm2-%s-worker" % self.flow.name, "session_timeout_ms": 10000,
                       "heartbeat_interval_ms": 3000},
            group_id=self.group, enable_auto_commit=False, auto_offset_reset="latest")
        membership.subscribe([self.topic], listener=self)
        self._membership = membership
        self._start_thread()

    @property
    def owned(self) -> List[int]:
        """The tasks the group assigned this process, sorted."""
        with self._lock:
            return list(self._owned)

    @property
    def tasks(self) -> Dict[int, SourceTask]:
        """The tasks running (or failed and waiting to restart) here, by index."""
        with self._lock:
            return dict(self._tasks)

    @property
    def leader(self) -> Optional[FlowLeader]:
        """The flow's leader, when this process owns task 0."""
        with self._lock:
            return self._leader

    # -- the membership thread ------------------------------------------------------------

    def _run(self) -> None:
        membership = self._membership
        assert membership is not None
        try:
            while not self._stopping.is_set():
                try:
                    membership.poll(timeout_ms=MEMBERSHIP_POLL_MS)  # the records are only the group's pulse
                except PylogqError as exc:
                    if not getattr(exc, "retriable", False):
                        raise
                    # The target's coordinator is away (a broker restarting): the tasks go on, and
                    # the membership is taken up again at the next poll.
                    log.warning("flow %s: the workers' group: %s", self.flow.name, exc)
                    self._stopping.wait(RETRY_BACKOFF_S)
                self._restart_failed()
        except BaseException as exc:
            self.error = exc
            log.error("flow %s: the workers' group membership failed: %s", self.flow.name, exc,
                      exc_info=not isinstance(exc, PylogqError))
        finally:
            self._stop_owned(self.owned)
            try:
                membership.close(autocommit=False)  # leaves the group: the others take the tasks at once
            except Exception as exc:
                log.debug("flow %s: leaving the workers' group: %s", self.flow.name, exc)

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        self._stop_owned([tp.partition for tp in revoked])

    def on_partitions_lost(self, lost: Sequence[TopicPartition]) -> None:
        # The membership expired (a process frozen or cut off past its session): the group has
        # handed these tasks to other processes, which may run them already.
        log.warning("flow %s: this process's membership of %s expired; its tasks %s run elsewhere now and are "
                    "stopped without committing", self.flow.name, self.group,
                    ", ".join(str(tp.partition) for tp in lost))
        self._stop_owned([tp.partition for tp in lost], lost=True)

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        try:
            self._check_tasks_count()
        except ConfigError as exc:
            # Another process runs the flow with another tasks.max: this one stops it (below,
            # the membership thread ends) before running any task of a different split.
            self.error = exc
            log.error("flow %s: %s", self.flow.name, exc)
            self._stopping.set()
            self.joined.set()
            return
        owned = sorted(tp.partition for tp in assigned if tp.partition < self.flow.tasks_max)
        with self._lock:
            self._owned = owned
        log.info("flow %s: this process runs tasks %s of %d", self.flow.name,
                 ", ".join(map(str, owned)) or "(none)", self.flow.tasks_max)
        for index in owned:
            self._restarts[index] = _Restart()
            self._restart_at.pop(index, None)
            self._start_task(index)
        if 0 in owned:
            self._leader_restart = _Restart()
            self._leader_restart_at = None
            self._start_leader()
        self.joined.set()

    def _check_tasks_count(self) -> None:
        """The tasks topic's partitions, as the target says now (not the membership's metadata,
        which may not have seen a grown topic yet), are ``tasks.max``: see
        :func:`~pylogq.mirror.leader.check_tasks_count`."""
        membership = self._membership
        assert membership is not None
        try:
            with self.clients.admin("target", {"client_id": "mm2-%s-worker" % self.flow.name}) as admin:
                found = admin.describe_topics([self.topic])[0]
            count = None if found["error_code"] else len(found["partitions"])
        except PylogqError as exc:  # the target not answering now: the membership's metadata will do
            log.warning("flow %s: could not describe %s: %s", self.flow.name, self.topic, exc)
            count = None
        if count is None:
            known = membership.partitions_for_topic(self.topic)
            if not known:
                return  # nothing to tell by: the assignment is the group's, from the topic it knows
            count = len(known)
        check_tasks_count(self.flow, count)

    def _start_task(self, index: int) -> None:
        task = SourceTask(self.flow, index, self.clients, self.metrics)
        with self._lock:
            self._tasks[index] = task
        task.start()

    def _start_leader(self) -> None:
        leader = FlowLeader(self.flow, self.clients, self.metrics, on_topics_changed=self._poke_tasks)
        with self._lock:
            self._leader = leader
        leader.start()

    def _poke_tasks(self) -> None:
        for task in self.tasks.values():
            task.poke()

    def _stop_owned(self, indexes: Sequence[int], lost: bool = False) -> None:
        """Stop these tasks (and the leader with task 0), all at once, and wait for them: cleanly,
        or, ``lost``, without committing anything more (:meth:`SourceTask.request_lost`)."""
        with self._lock:
            tasks = [self._tasks.pop(i) for i in indexes if i in self._tasks]
            leader = self._leader if 0 in indexes else None
            if leader is not None:
                self._leader = None
            self._owned = [i for i in self._owned if i not in indexes]
        if leader is not None:
            leader.request_stop()
        for task in tasks:
            if lost:
                task.request_lost()
            else:
                task.request_stop()
        deadline = time.monotonic() + TASK_STOP_TIMEOUT_S
        for task in tasks:
            if not task.join(max(0.0, deadline - time.monotonic())):
                log.error("flow %s: task %s did not stop within %g s", self.flow.name, task.name, TASK_STOP_TIMEOUT_S)
        if leader is not None and not leader.join(max(0.0, deadline - time.monotonic())):
            log.error("flow %s: the leader did not stop within %g s", self.flow.name, TASK_STOP_TIMEOUT_S)

    def _restart_failed(self) -> None:
        """Start again, once their pause is over, the tasks and the leader that failed."""
        now = time.monotonic()
        for index, task in self.tasks.items():
            if task.running or task.error is None:
                continue
            restart = self._restarts.setdefault(index, _Restart())
            at = self._restart_at.get(index)
            if at is None:
                pause = restart.failed()
                self._restart_at[index] = restart.at
                log.warning("flow %s: task %d failed (%s); starting it again in %g s", self.flow.name, index,
                            task.error, pause)
            elif now >= at and not self._stopping.is_set():
                del self._restart_at[index]
                self.restarts += 1
                self._start_task(index)
        leader = self.leader
        if leader is not None and not leader.running and leader.error is not None:
            if self._leader_restart_at is None:
                pause = self._leader_restart.failed()
                self._leader_restart_at = self._leader_restart.at
                log.warning("flow %s: the leader failed (%s); starting it again in %g s", self.flow.name,
                            leader.error, pause)
            elif now >= self._leader_restart_at and not self._stopping.is_set():
                self._leader_restart_at = None
                self._start_leader()


class MirrorMaker:
    """A mirror maker process: every flow of ``config``, with the clients ``client_options``
    converts (:func:`~pylogq.mirror.clients.plain_client_options` by default) and the
    metrics of ``metrics`` (a new :class:`~pylogq.mirror.metrics.MirrorMetrics` by default).

    ``with MirrorMaker(config) as mirror:`` starts it and stops it cleanly on the way out.
    """

    def __init__(self, config: MirrorConfig, client_options: Optional[ClientOptions] = None,
                 metrics: Optional[MirrorMetrics] = None) -> None:
        self.config = config
        self.metrics = metrics if metrics is not None else MirrorMetrics()
        self.flows: List[FlowWorker] = [FlowWorker(flow, FlowClients(flow, client_options), self.metrics)
                                        for flow in config.flows]
        self._started: List[FlowWorker] = []

    def start(self) -> None:
        """Start every flow (its internal topics made first); on a failure the flows started
        are stopped again and the error raised."""
        try:
            for worker in self.flows:
                worker.start()
                self._started.append(worker)
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: Optional[float] = None) -> bool:
        """Stop every flow cleanly (tasks finished, group left); -> whether all stopped in time."""
        for worker in self._started:
            worker.request_stop()
        deadline = None if timeout is None else time.monotonic() + timeout
        done = True
        for worker in self._started:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            done = worker.join(remaining) and done
        return done

    def wait_joined(self, timeout: Optional[float] = None) -> bool:
        """Wait until every flow had its first assignment from the workers' group."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for worker in self.flows:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not worker.joined.wait(remaining):
                return False
        return True

    def __enter__(self) -> "MirrorMaker":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
