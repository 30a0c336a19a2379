"""The mirror's acceptance: ``pylogq mirror-maker`` between two clusters, under load, while
brokers and a mirror process are killed.

The source is three ``pylogq-broker`` processes, the target one, on real ZooKeeper
(tests/mirror/_clusters.py). Two ``pylogq mirror-maker`` processes run the same
configuration (one flow, four tasks shared through the flow's workers group). A load
generator writes numbered records at a fixed rate to several partitions of a topic
(``load``) and, slower, of a second one (``orders``) that a consumer group reads as it
goes. In turn, while the load runs: the leader of a source partition is killed with
SIGKILL and started again; a topic is created on the source with configs of its own and
written to; the target broker is killed and started again; one of the two mirror
processes is killed and started again. Then:

- every record of every topic is on the target, in the remote topic's same partition, with
  its key and timestamp, the first copies in the source's order, nothing else; in
  at-least-once the duplicates are counted and printed, in exactly-once
  (``<target>.exactly.once.source.support = enabled``, read with read_committed) there are
  none;
- consumer failover: the group reading ``orders`` stopped ``FAILOVER_LAG`` records short of
  the end of each partition (a consumer a little behind, as a live one is); once its
  committed offsets are checkpointed, ``pylogq mirror-maker translate-offsets`` gives its
  offsets on the target (the same as Kafka's ``RemoteClusterUtils.translateOffsets`` reads
  from the checkpoints topic), and a consumer of the group there, started at them, misses
  nothing and reads again at most one sync interval's worth of records it had processed:
  ``offset.lag.max`` of them (set small here, as ``emit.checkpoints.interval.seconds``),
  or, where the mirror wrote its offset syncs further apart around the group's offset,
  the records between the last sync before it and it (the figures are printed);
- config sync: the topic created during the run is on the target with its configs, less
  those Kafka's filter keeps to the source cluster (``min.insync.replicas``,
  ``message.timestamp.type``), and its records were copied too;
- ``pylogq mirror-maker status`` answers, and both mirror processes stop cleanly on SIGTERM.

The suite runs it small (``QUICK``: about 1,000 records a second for a dozen seconds);
``PYLOGQ_MIRROR_SOAK=1`` selects the issue's full run (``SOAK``: 20,000 records a second
for 60 s; tests/conftest.py deselects it otherwise).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import pytest

from pylogq.client.consumer import Consumer, TopicPartition
from pylogq.mirror.config import FlowConfig, load_config
from pylogq.mirror.offsets import translate_offsets
from pylogq.mirror.records import Checkpoint, OffsetSync

from ._clusters import (
    ACKED,
    FAILED,
    Comparison,
    GroupReader,
    LoadGenerator,
    MirrorProcess,
    TopicTail,
    TwoClusters,
    compare,
    create_topic,
    mirror_command,
    mirror_properties,
    parse_value,
    partition_count,
    wait_for,
    wait_mirrored,
)

#: Broker and mirror processes and ZooKeeper: the compiled pass only (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass


class Size(NamedTuple):
    """How big a run is."""

    rate: float  #: records a second into ``load``
    seconds: float  #: how long the load runs (at least: it runs until every fault was injected)
    partitions: int  #: of ``load``
    orders_rate: float  #: records a second into ``orders``
    created_rate: float  #: records a second into the topic created during the run
    value_size: int
    deadline: float  #: seconds allowed for the copy to complete after the load stopped


QUICK = Size(rate=1000, seconds=12, partitions=4, orders_rate=40, created_rate=20, value_size=64, deadline=90)
SOAK = Size(rate=20000, seconds=60, partitions=8, orders_rate=400, created_rate=200, value_size=100, deadline=300)

#: ``offset.lag.max``: a sync at least every this many target offsets; the bound on re-reads.
OFFSET_LAG_MAX = 10
#: How far behind the end the failover group stops (within ``offset.lag.max``: the sparse
#: offset-sync store keeps syncs that close to the end exactly enough).
FAILOVER_LAG = OFFSET_LAG_MAX // 2
ORDERS_PARTITIONS = 2
CREATED_PARTITIONS = 2
TASKS = 4
#: The created topic's configs: the first two are copied, the last two are the source cluster's
#: business (Kafka's default config.properties.exclude) and must not be.
COPIED = {"retention.ms": "3600000", "max.message.bytes": "500000"}
KEPT_AT_SOURCE = {"min.insync.replicas": "2", "message.timestamp.type": "LogAppendTime"}


def _cli(*arguments: str, timeout: float = 60.0) -> "subprocess.CompletedProcess[str]":
    """``pylogq ARGS`` run to its end."""
    return subprocess.run([sys.executable, "-m", "pylogq.cli.main", *arguments], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


class Run:
    """One acceptance run's clusters, topics, flow, processes and clients."""

    def __init__(self, clusters: TwoClusters, base: Path, size: Size, exactly_once: bool, tag: str) -> None:
        self.clusters = clusters
        self.size = size
        self.exactly_once = exactly_once
        self.source_alias, self.target_alias = tag + "src", tag + "dst"
        self.load_topic, self.orders_topic, self.created_topic = tag + "-load", tag + "-orders", tag + "-created"
        self.group = tag + "-app"
        self.config_path = base / "mm2.properties"
        self.config_path.write_text(mirror_properties(
            self.source_alias, clusters.source.bootstrap, self.target_alias, clusters.target.bootstrap,
            exactly_once=exactly_once,
            topics="%s-.*" % tag,
            tasks_max=TASKS,
            replication_factor=1,
            refresh_topics_interval_seconds=1,
            refresh_groups_interval_seconds=1,
            sync_topic_configs_interval_seconds=1,
            emit_checkpoints_interval_seconds=1,
            offset_lag_max=OFFSET_LAG_MAX,
            extra={
                # Each internal topic with its cluster's default factor: 3 on the source, 1 on the target.
                "offset-syncs.topic.replication.factor": -1, "checkpoints.topic.replication.factor": -1,
                "heartbeats.topic.replication.factor": -1,
                # A mirror process killed hands its tasks over once the workers' group (on the target)
                # sees its session expire: the broker's shortest (group.min.session.timeout.ms).
                "%s.consumer.session.timeout.ms" % self.target_alias: 6000,
                "%s.consumer.heartbeat.interval.ms" % self.target_alias: 1000}))
        self.flow: FlowConfig = load_config(str(self.config_path)).flow(self.source_alias, self.target_alias)
        self.mirrors = [MirrorProcess("mirror-%d" % i, mirror_command(self.config_path), base / ("mirror-%d.log" % i))
                        for i in (1, 2)]
        self.loads: Dict[str, LoadGenerator] = {}
        self.reader: Optional[GroupReader] = None
        self.tails: List[TopicTail] = []
        #: The topics read back on the source, and their remote topics on the target, by name.
        self.sources: Dict[str, TopicTail] = {}
        self.targets: Dict[str, TopicTail] = {}
        self.events: List[str] = []
        self.started = 0.0

    # -- what it prints ------------------------------------------------------------------------

    def note(self, what: str) -> None:
        self.events.append("%6.1f s  %s" % (time.monotonic() - self.started, what))

    def logs(self) -> str:
        """The run's events and the processes' last log lines (each mirror's threads' stacks first)."""
        for mirror in self.mirrors:
            mirror.dump_threads()
        return "\n".join([*self.events, *(m.log_tail(150) for m in self.mirrors), self.clusters.logs()])

    # -- the run ----------------------------------------------------------------------------------

    def start(self) -> None:
        size = self.size
        create_topic(self.clusters, "source", self.load_topic, size.partitions)
        create_topic(self.clusters, "source", self.orders_topic, ORDERS_PARTITIONS)
        self.started = time.monotonic()
        for mirror in self.mirrors:
            mirror.start()
        # The faults start once both processes run the flow: a mirror that cannot start (its
        # internal topics refused while a broker is down) is another matter than one that rides
        # out a broker's restart.
        for mirror in self.mirrors:
            mirror.wait_output(r"^pylogq mirror-maker ready: ", 60)
        ready = time.monotonic() - self.started
        self.started = time.monotonic()
        source = self.clusters.source.bootstrap
        self.loads["load"] = LoadGenerator(source, self.load_topic, size.partitions, size.rate,
                                           size.value_size).start()
        self.loads["orders"] = LoadGenerator(source, self.orders_topic, ORDERS_PARTITIONS, size.orders_rate,
                                             size.value_size).start()
        self.reader = GroupReader(source, self.orders_topic, ORDERS_PARTITIONS, self.group, FAILOVER_LAG).start()
        self.note("mirrors ready (%.1f s after they started), load started" % ready)

    def at(self, fraction: float) -> None:
        """Wait until ``fraction`` of the load's time has passed since the start (a schedule)."""
        due = self.started + fraction * self.size.seconds
        while time.monotonic() < due:
            time.sleep(min(0.1, due - time.monotonic()))  # the schedule's clock, not a synchronization

    def kill_source_leader(self) -> None:
        source = self.clusters.source
        victim = source.state(self.load_topic, 0)[0]  # type: ignore[index]
        source.kill(victim)
        self.note("source broker %d (leader of %s-0) killed" % (victim, self.load_topic))
        source.wait_until(lambda: (source.state(self.load_topic, 0) or (victim,))[0] not in (victim, -1),
                          "a new leader of %s-0" % self.load_topic)
        source.start(victim)
        self.note("source broker %d started again" % victim)

    def create_topic_during_run(self) -> None:
        create_topic(self.clusters, "source", self.created_topic, CREATED_PARTITIONS, {**COPIED, **KEPT_AT_SOURCE})
        self.loads["created"] = LoadGenerator(self.clusters.source.bootstrap, self.created_topic, CREATED_PARTITIONS,
                                              self.size.created_rate, self.size.value_size).start()
        self.note("topic %s created on the source" % self.created_topic)

    def kill_target(self) -> None:
        self.clusters.target.kill(0)
        self.note("target broker killed")
        self.clusters.target.start(0)
        self.note("target broker started again")

    def kill_mirror(self) -> None:
        self.mirrors[0].kill()
        self.note("mirror-1 killed")
        self.mirrors[0].start()
        self.note("mirror-1 started again")

    def stop_orders_reader(self) -> List[int]:
        """Once the mirror copies ``orders`` as it comes again (after the faults), stop writing it
        and stop the group FAILOVER_LAG records short of its ends; -> its committed offsets.

        The wait matters: records the mirror copies in one burst while catching up are synced
        more sparsely than those it copies as they come (as Kafka's are), and the failover
        bound is for a group whose offsets the mirror passed in its steady state: so the mirror
        must have caught up, and then 3 * offset.lag.max more records of each partition gone by."""
        orders = self.loads["orders"]
        source, target = self.readers(self.orders_topic, ORDERS_PARTITIONS)
        wait_mirrored(source, target, self.size.deadline, self.logs)
        goal = [n + 3 * OFFSET_LAG_MAX for n in orders.sent]
        wait_for(lambda: all(n >= g for n, g in zip(orders.sent, goal)), "%s written on to %s" % (
            self.orders_topic, goal), 60, self.logs)
        self.note("the mirror caught up with %s" % self.orders_topic)
        orders.stop()
        with Consumer(bootstrap_servers=self.clusters.source.bootstrap) as consumer:
            ends = consumer.end_offsets([TopicPartition(self.orders_topic, p) for p in range(ORDERS_PARTITIONS)])
        assert self.reader is not None
        committed = self.reader.finish([ends[TopicPartition(self.orders_topic, p)] for p in range(ORDERS_PARTITIONS)])
        self.note("group %s stopped at %s on the source (ends %s)" % (self.group, committed, sorted(ends.values())))
        return committed

    def stop_load(self) -> None:
        for name in ("load", "created"):
            if name in self.loads:
                self.loads[name].stop()
        self.note("load stopped: %s" % ", ".join(
            "%s %d sent (%.0f/s), %d failed" % (name, g.total_sent, g.achieved_rate(), g.count(FAILED))
            for name, g in self.loads.items()))

    # -- checks ------------------------------------------------------------------------------------

    def remote(self, topic: str) -> str:
        return self.flow.remote_topic(topic)

    def wait_remote_topic(self, topic: str, partitions: int, timeout: float = 60.0) -> None:
        admin = self.clusters.admin("target")
        wait_for(lambda: partition_count(admin, self.remote(topic)) == partitions,
                 "remote topic %s with %d partitions on the target" % (self.remote(topic), partitions), timeout,
                 self.logs)

    def readers(self, topic: str, partitions: int) -> Tuple[TopicTail, TopicTail]:
        """Readers of ``topic`` on the source and of its remote topic on the target (read_committed
        in exactly-once), made once (the remote topic waited for)."""
        if topic not in self.sources:
            self.wait_remote_topic(topic, partitions)
            isolation = "read_committed" if self.exactly_once else "read_uncommitted"
            self.sources[topic] = TopicTail(self.clusters.source.bootstrap, topic, partitions)
            self.targets[topic] = TopicTail(self.clusters.target.bootstrap, self.remote(topic), partitions, isolation)
            self.tails += [self.sources[topic], self.targets[topic]]
        return self.sources[topic], self.targets[topic]

    def check_copy(self, topic: str, partitions: int, load: LoadGenerator) -> Comparison:
        """Wait for every record of ``topic`` on the target, and compare."""
        source, target = self.readers(topic, partitions)
        seconds = wait_mirrored(source, target, self.size.deadline, self.logs)
        result = compare(source, target, load)
        self.note("%s: %s (complete %.1f s after the load stopped)" % (topic, result.summary(), seconds))
        return result

    def check_configs(self) -> Dict[str, Any]:
        """Wait for the created topic's configs on its remote topic; -> the remote topic's modified configs."""
        admin = self.clusters.admin("target")
        remote = self.remote(self.created_topic)

        def synced() -> Optional[Dict[str, Any]]:
            try:
                found = admin.describe_configs([_topic_resource(remote)])["topic"][remote]
            except Exception:  # noqa: BLE001 - not there yet: the condition is retried
                return None
            values = {key: entry["value"] for key, entry in found.items()}
            return values if all(values.get(k) == v for k, v in COPIED.items()) else None

        values: Dict[str, Any] = wait_for(synced, "the configs %s on %s" % (COPIED, remote), 60, self.logs)
        self.note("%s on the target with %s" % (remote, values))
        return values

    def checkpoints(self) -> List[Tuple[Optional[bytes], Optional[bytes]]]:
        """Every record of the flow's checkpoints topic on the target, in order."""
        return read_topic(self.clusters.target.bootstrap, self.flow.checkpoints_topic)

    def offset_syncs(self, topic: str) -> List[OffsetSync]:
        """The offset syncs of ``topic``'s partitions the flow wrote, in order."""
        side = self.clusters.source if self.flow.offset_syncs_side == "source" else self.clusters.target
        return [s for s in (OffsetSync.decode(k, v) for k, v in read_topic(side.bootstrap, self.flow.offset_syncs_topic))
                if s.topic == topic]

    def sync_gaps(self, topic: str, offsets: List[int]) -> Dict[int, int]:
        """Per partition, how many records lie between the last offset sync the flow wrote at or
        before ``offsets[p]`` and that offset: what a consumer reads again when its offset is
        translated through that sync (one past it); the offset itself when there is none."""
        syncs = self.offset_syncs(topic)
        gaps: Dict[int, int] = {}
        for p, offset in enumerate(offsets):
            before = [s.upstream_offset for s in syncs if s.partition == p and s.upstream_offset <= offset]
            gaps[p] = offset if not before else max(0, offset - max(before) - 1)
        return gaps

    def sync_spacing(self, topic: str) -> str:
        """How far apart (in target offsets) the flow wrote consecutive offset syncs of ``topic``'s
        partitions: median and largest (a rewind, a partition's first sync of a task's run, left out)."""
        last: Dict[int, int] = {}
        steps: List[int] = []
        for sync in self.offset_syncs(topic):
            previous = last.get(sync.partition)
            if previous is not None and sync.downstream_offset > previous:
                steps.append(sync.downstream_offset - previous)
            last[sync.partition] = sync.downstream_offset
        if not steps:
            return "no consecutive syncs"
        steps.sort()
        return "%d syncs apart by %d (median), %d (largest)" % (len(steps) + len(last), steps[len(steps) // 2],
                                                                steps[-1])

    def translation_state(self, topic: str) -> str:
        """What the flow's checkpoints and offset syncs say of ``topic`` (for a failure's message)."""
        remote = self.remote(topic)
        checkpoints = [c for c in (Checkpoint.decode(k, v) for k, v in self.checkpoints())
                       if c.group == self.group and c.topic == remote]
        return "the last checkpoints of %s: %s\nthe last offset syncs of %s: %s" % (
            self.group, checkpoints[-6:], topic, self.offset_syncs(topic)[-12:])

    def read_remote(self, topic: str, offsets: Dict[int, int], group: Optional[str] = None) -> Dict[int, List[int]]:
        """The sequence numbers of ``topic``'s remote partitions on the target from ``offsets`` to
        their ends; with ``group``, as that group's member from its committed offsets instead."""
        remote = self.remote(topic)
        tps = [TopicPartition(remote, p) for p in sorted(offsets)]
        read: Dict[int, List[int]] = {p: [] for p in offsets}
        isolation = "read_committed" if self.exactly_once else "read_uncommitted"
        with Consumer(bootstrap_servers=self.clusters.target.bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="none", isolation_level=isolation) as consumer:
            if group is None:
                consumer.assign(tps)
                for tp in tps:
                    consumer.seek(tp, offsets[tp.partition])
            else:
                consumer.subscribe([remote])
            ends = consumer.end_offsets(tps)
            deadline = time.monotonic() + 30
            while len(consumer.assignment()) < len(tps) or any(consumer.position(tp) < ends[tp] for tp in tps):
                assert time.monotonic() < deadline, "could not read %s on the target to %s" % (remote, ends)
                for tp, records in consumer.poll(timeout_ms=200).items():
                    read[tp.partition] += [parse_value(r.value)[1] for r in records]
        return read

    def rereads(self, committed: List[int], read: Dict[int, List[int]]) -> Dict[int, int]:
        """Of the records read on the target after failover, per partition, how many the group
        had processed on the source; AssertionError if one it had not is missing."""
        source = self.sources[self.orders_topic]
        out: Dict[int, int] = {}
        for p, seqs in read.items():
            processed = set(source.seqs[p][:committed[p]])
            missed = sorted(set(source.seqs[p][committed[p]:]) - set(seqs))
            assert not missed, "after failover the group misses %d records of %s-%d, first: %s" % (
                len(missed), self.remote(self.orders_topic), p, missed[:10])
            out[p] = sum(1 for seq in seqs if seq in processed)
        return out

    def failover(self, committed: List[int]) -> Tuple[Dict[int, int], Dict[int, int]]:
        """Switch the group to the target at its translated offsets, once the checkpoints of its
        committed offsets have become precise; -> (re-reads, their bound), per partition.

        One sync interval's worth is the bound: ``offset.lag.max`` records, or, where the
        flow wrote its offset syncs further apart around the committed offset (copies
        acknowledged together are synced together), the records between the last sync before
        it and it. A checkpoint of an offset the mirror has not copied yet translates through
        the last sync before it (Kafka's rule: safe, not precise); once the copies and their
        syncs are there, the next checkpoint moves the group's offset on the target forward.
        So the wait is for a checkpoint of the committed offsets within the bound; the first
        checkpoint's figure is noted too."""
        remote = self.remote(self.orders_topic)
        first: Dict[int, int] = {}
        found: Dict[str, Any] = {}

        def precise() -> Optional[Dict[int, Checkpoint]]:
            latest: Dict[int, Checkpoint] = {}
            for key, value in self.checkpoints():
                c = Checkpoint.decode(key, value)
                if c.group == self.group and c.topic == remote:
                    latest[c.partition] = c
            if not all(p in latest and latest[p].upstream_offset == committed[p] for p in range(ORDERS_PARTITIONS)):
                return None
            reread = self.rereads(committed, self.read_remote(
                self.orders_topic, {p: c.downstream_offset for p, c in latest.items()}))
            gaps = self.sync_gaps(self.orders_topic, committed)
            found.update(reread=reread, gaps=gaps, bound={p: max(OFFSET_LAG_MAX, gaps[p]) for p in gaps})
            if not first:
                first.update(reread)
            return latest if all(reread[p] <= found["bound"][p] for p in reread) else None

        started = time.monotonic()
        latest = wait_for(precise, "checkpoints of group %s at %s from which at most one sync interval's worth of "
                          "records is read again" % (self.group, committed), 60,
                          lambda: "re-reads from the last checkpoints: %s (bound %s)\n%s\n%s" % (
                              found.get("reread"), found.get("bound"), self.translation_state(self.orders_topic),
                              self.logs()), interval=0.2)
        self.note("checkpoints of group %s at %s: %s records read again from the first, %s from the one %.1f s "
                  "later; records between the last sync and the committed offset: %s (offset.lag.max %d; %s: %s)" % (
                      self.group, committed, first, found["reread"], time.monotonic() - started, found["gaps"],
                      OFFSET_LAG_MAX, self.orders_topic, self.sync_spacing(self.orders_topic)))
        translated = translate_offsets(self.checkpoints(), self.group)
        ours = {tp.partition: o.offset for tp, o in translated.items() if tp.topic == remote}
        assert ours == {p: c.downstream_offset for p, c in latest.items()}, (ours, latest)
        answer = _cli("mirror-maker", "translate-offsets", "--config", str(self.config_path),
                      "--source", self.source_alias, "--target", self.target_alias, "--group", self.group,
                      "--execute")
        assert answer.returncode == 0, answer.stderr
        printed = _offsets_printed(answer.stdout, remote)
        assert printed == ours, "translate-offsets printed %s, the checkpoints say %s:\n%s" % (
            printed, ours, answer.stdout)
        self.note("group %s translated: %s" % (self.group, printed))
        tps = [TopicPartition(remote, p) for p in range(ORDERS_PARTITIONS)]
        committed_there = self.clusters.admin("target").list_consumer_group_offsets(self.group, tps)
        assert {tp.partition: o.offset for tp, o in committed_there.items()} == printed, committed_there
        # The group on the target, from the offsets --execute committed, to the end of each partition.
        reread = self.rereads(committed, self.read_remote(self.orders_topic, printed, group=self.group))
        self.note("group %s on the target read again %s records it had processed" % (self.group, reread))
        return reread, found["bound"]

    def status(self) -> str:
        answer = _cli("mirror-maker", "status", "--config", str(self.config_path))
        assert answer.returncode == 0, "status failed (%d):\n%s%s" % (answer.returncode, answer.stdout, answer.stderr)
        assert self.remote(self.load_topic) in answer.stdout or self.load_topic in answer.stdout, answer.stdout
        return answer.stdout

    def close(self) -> List[str]:
        """Stop everything; -> the mirror processes' unclean ends."""
        if self.reader is not None:
            self.reader.close()
        for load in self.loads.values():
            try:
                load.stop()
            except AssertionError:
                pass  # the run's own failure is the one reported
        for tail in self.tails:
            tail.close()
        for mirror in self.mirrors:
            mirror.close()
        return [line for mirror in self.mirrors for line in mirror.unclean]


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> List[Tuple[Optional[bytes], Optional[bytes]]]:
    """Every record of ``topic`` (its partitions one after the other) as (key, value); [] when
    there is no such topic."""
    with Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest") as consumer:
        partitions = sorted(consumer.partitions_for_topic(topic) or ())
        if not partitions:
            return []
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        out: Dict[int, List[Tuple[Optional[bytes], Optional[bytes]]]] = {p: [] for p in partitions}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "could not read %s to %s" % (topic, ends)
            for tp, records in consumer.poll(timeout_ms=200).items():
                out[tp.partition] += [(r.key, r.value) for r in records]
        return [record for p in partitions for record in out[p]]


def _topic_resource(name: str) -> Any:
    from pylogq.client.admin import ConfigResource

    return ConfigResource("TOPIC", name)


def _offsets_printed(text: str, topic: str) -> Dict[int, int]:
    """The partition -> offset lines of ``topic`` in a reset plan as kafka-consumer-groups prints
    it (``GROUP TOPIC PARTITION NEW-OFFSET``)."""
    found: Dict[int, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if topic in fields:
            at = fields.index(topic)
            numbers = [f for f in fields[at + 1:] if re.fullmatch(r"-?\d+", f)]
            if len(numbers) >= 2:
                found[int(numbers[0])] = int(numbers[1])
    return found


DELIVERIES = [pytest.param(False, id="at-least-once"), pytest.param(True, id="exactly-once")]
SIZES = [pytest.param(QUICK, id="quick"), pytest.param(SOAK, id="soak", marks=pytest.mark.mirror_soak)]


@pytest.mark.parametrize("exactly_once", DELIVERIES)
@pytest.mark.parametrize("size", SIZES)
def test_mirror_under_kills(mirror_clusters: TwoClusters, tmp_path: Path, request: pytest.FixtureRequest,
                            size: Size, exactly_once: bool) -> None:
    tag = ("eos" if exactly_once else "alo") + ("soak" if size is SOAK else "")
    run = Run(mirror_clusters, tmp_path, size, exactly_once, tag)
    unclean: List[str] = []
    try:
        run.start()
        steps: List[Tuple[float, Callable[[], Any]]] = [
            (0.10, run.kill_source_leader),
            (0.30, run.create_topic_during_run),
            (0.35, run.kill_target),
            (0.60, run.kill_mirror),
        ]
        for fraction, step in steps:
            run.at(fraction)
            step()
        run.at(0.80)
        committed = run.stop_orders_reader()
        run.at(1.0)
        run.stop_load()

        configs = run.check_configs()
        results = {name: run.check_copy(topic, partitions, run.loads[name]) for name, topic, partitions in (
            ("load", run.load_topic, size.partitions),
            ("orders", run.orders_topic, ORDERS_PARTITIONS),
            ("created", run.created_topic, CREATED_PARTITIONS))}
        reread, bound = run.failover(committed)
        run.note("offset syncs of %s: %s" % (run.load_topic, run.sync_spacing(run.load_topic)))
        status = run.status()
        run.note("status:\n%s" % status.rstrip())
    finally:
        unclean = run.close()
        print("\n".join(run.events))
    failures = [f for r in results.values() for f in r.failures]
    assert failures == [], "\n".join(failures)
    assert all(r.missing == 0 for r in results.values())
    if exactly_once:
        assert {n: r.duplicates for n, r in results.items()} == {n: 0 for n in results}, "duplicates read committed"
    total = sum(r.duplicates for r in results.values())
    print("%s: %d duplicates in all (%s)" % (request.node.name, total,
                                              ", ".join("%s %d" % (n, r.duplicates) for n, r in results.items())))
    assert results["load"].source_records >= run.loads["load"].count(ACKED) > 0
    for key in KEPT_AT_SOURCE:
        assert key not in configs, "%s=%s was copied to the target" % (key, configs[key])
    assert all(reread[p] <= bound[p] for p in reread), (
        "the group read again %s records after failover, more than one sync interval's worth (%s)" % (reread, bound))
    assert unclean == [], "\n".join(unclean)
