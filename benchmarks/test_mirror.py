"""The mirror's throughput: ``pylogq mirror-maker`` against a plain consume-and-produce loop.

Group "mirror 100B": a source topic of 4 partitions pre-filled with N keyed 100-byte
records is copied to the target, from the moment the copier is let go to the moment the
target holds them all (its end offsets, polled every few milliseconds). Source and target
are two ``pylogq-broker`` processes. Two copiers, each a process of its own with pylogq's
Consumer and Producer and the same client settings (:data:`CONSUMER`, :data:`PRODUCER`):

- the reference row: a plain loop (tests/mirror/_copy_loop.py) that polls the source,
  sends each record to the same partition of the remote topic, waits for the
  acknowledgements and commits its positions;
- ``pylogq mirror-maker`` with one flow and one task (at-least-once), which also writes
  offset syncs, keeps its positions on the target and its metrics.

Every round starts from the same state, outside the timed region: a fresh topic, the
copier started on it, one record per partition written and seen on the target (the copier
then has its connections, metadata and, for the mirror, its task and the remote topic),
the copier frozen (SIGSTOP), the N records written, and the copier thawed (SIGCONT) as the
round starts; after the round it is stopped (SIGTERM, status 0). The two alternate, a round
each (summary.alternate). The ratio is reported, no target asserted (the issue asks for it).

N is 200,000 with 3 rounds after a warm-up round; 20,000 and one round at the smoke sizes.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest
from peers import BrokerProcess, pylogq_broker
from summary import alternate, asserting, info, smoke

from pylogq.client.admin import AdminClient, NewTopic
from pylogq.client.consumer import Consumer, TopicPartition
from pylogq.client.producer import Producer
from tests.mirror._clusters import MirrorProcess, copy_loop_command, mirror_command, mirror_properties

FULL = 200_000
SMOKE = 20_000
PARTITIONS = 4
ROUNDS = 3
TIMEOUT = 120.0
VALUE = os.urandom(100)
GROUP = "mirror 100B"
SOURCE, TARGET = "bench", "backup"
#: The copiers' client settings, kafka-python's names (the loop's arguments) and Kafka's (the
#: mirror's properties): the same for both.
CONSUMER = {"max_poll_records": 2000, "fetch_max_wait_ms": 100}
PRODUCER = {"linger_ms": 5}

_names = itertools.count(1)


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: Any) -> Iterator[Dict[str, BrokerProcess]]:
    """The source and target ``pylogq-broker`` processes."""
    started: Dict[str, BrokerProcess] = {}
    try:
        for side in ("source", "target"):
            started[side] = pylogq_broker(str(tmp_path_factory.mktemp("mirror-%s" % side)),
                                          overrides={"offsets.topic.num.partitions": "4"}).start()
        yield started
    finally:
        for process in started.values():
            process.stop()


def _kafka_name(key: str) -> str:
    return key.replace("_", ".")


class Copy:
    """One copier's rounds: a fresh topic, the copier started, primed and frozen, N records
    written (untimed); the copier thawed, the target's end offsets polled to N (timed)."""

    def __init__(self, kind: str, brokers: Dict[str, BrokerProcess], n: int, base: Path) -> None:
        self.kind, self.n, self.base = kind, n, base
        self.source, self.target = brokers["source"].bootstrap, brokers["target"].bootstrap
        self.admins = {side: AdminClient(bootstrap_servers=b.bootstrap) for side, b in brokers.items()}
        self.process: Optional[MirrorProcess] = None
        self.topic = ""
        self.remote = ""
        self.watcher: Optional[Consumer] = None
        self.statuses: List[Optional[int]] = []

    def prepare(self) -> None:
        self.finish()
        self.topic = "mirror-bench-%d-%d" % (os.getpid(), next(_names))
        self.remote = "%s.%s" % (SOURCE, self.topic)
        self.admins["source"].create_topics([NewTopic(self.topic, PARTITIONS, 1)])
        log = self.base / ("%s.log" % self.kind)
        if self.kind == "loop":
            self.admins["target"].create_topics([NewTopic(self.remote, PARTITIONS, 1)])
            settings = {**{"consumer." + k: v for k, v in CONSUMER.items()},
                        **{"producer." + k: v for k, v in PRODUCER.items()}}
            command = copy_loop_command(self.source, self.target, self.topic, self.remote, "copy-" + self.topic,
                                        settings)
        else:
            config = self.base / ("%s.properties" % self.topic)
            extra: Dict[str, Any] = {"%s.consumer.%s" % (SOURCE, _kafka_name(k)): v for k, v in CONSUMER.items()}
            extra.update(("%s.producer.%s" % (TARGET, _kafka_name(k)), v) for k, v in PRODUCER.items())
            extra.update({"offset-syncs.topic.replication.factor": 1, "checkpoints.topic.replication.factor": 1,
                          "heartbeats.topic.replication.factor": 1})
            config.write_text(mirror_properties(SOURCE, self.source, TARGET, self.target, topics=self.topic,
                                                replication_factor=1, tasks_max=1, emit_heartbeats_enabled=False,
                                                emit_checkpoints_enabled=False, extra=extra))
            command = mirror_command(config)
        self.process = MirrorProcess(self.kind, command, log).start()
        self.watcher = Consumer(bootstrap_servers=self.target)
        # One record per partition, copied: the copier is running, with all it needs.
        self._write(PARTITIONS, one_each=True)
        self._wait_target(PARTITIONS)
        self.process.freeze()
        self._write(self.n)

    def _write(self, n: int, one_each: bool = False) -> None:
        with Producer(bootstrap_servers=self.source) as producer:
            send = producer.send
            for i in range(n):
                send(self.topic, VALUE, key=b"%d" % i, partition=i % PARTITIONS if one_each else None)
            producer.flush()

    def _copied(self) -> int:
        assert self.watcher is not None
        tps = [TopicPartition(self.remote, p) for p in range(PARTITIONS)]
        try:
            return sum(self.watcher.end_offsets(tps).values())
        except Exception:  # noqa: BLE001 - the remote topic not there yet
            return 0

    def _wait_target(self, total: int) -> None:
        deadline = time.monotonic() + TIMEOUT
        while self._copied() < total:
            if time.monotonic() > deadline:
                assert self.process is not None
                raise AssertionError("%s copied %d of %d records within %.0f s\n%s" % (
                    self.kind, self._copied(), total, TIMEOUT, self.process.log_tail()))
            time.sleep(0.005)  # the poll's period: the round's end is known to within it

    def run(self) -> int:
        assert self.process is not None
        self.process.thaw()
        self._wait_target(PARTITIONS + self.n)
        return self.n

    def finish(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.thaw()
            self.statuses.append(process.stop())
            process.close()
            assert not process.unclean, process.unclean
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            watcher.close()
        if self.topic:
            self.admins["source"].delete_topics([self.topic])
            self.admins["target"].delete_topics([self.remote])
            self.topic = ""

    def close(self) -> None:
        self.finish()
        for admin in self.admins.values():
            admin.close()


def _n(config: Any) -> int:
    return SMOKE if smoke(config) else FULL


def test_plain_loop(benchmark: Any, request: Any, brokers: Dict[str, BrokerProcess], tmp_path: Path) -> None:
    own = Copy("loop", brokers, _n(request.config), tmp_path)
    info(benchmark, GROUP, own.n, "records", peer=True)
    benchmark.name = "plain consume-produce loop (reference)"
    try:
        alternate(benchmark, own, None, ROUNDS if asserting(request.config) else 1, 1)
    finally:
        own.close()
    assert own.statuses and all(s == 0 for s in own.statuses), own.statuses


def test_mirror_maker(benchmark: Any, request: Any, brokers: Dict[str, BrokerProcess], tmp_path: Path) -> None:
    n = _n(request.config)
    own, peer = Copy("mirror", brokers, n, tmp_path), Copy("loop", brokers, n, tmp_path)
    info(benchmark, GROUP, n, "records", target="ratio reported (the issue asks for it)")
    benchmark.name = "pylogq mirror-maker, 1 task, at-least-once"
    try:
        alternate(benchmark, own, peer, ROUNDS if asserting(request.config) else 1, 1)
    finally:
        own.close()
        peer.close()
    assert own.statuses and all(s == 0 for s in own.statuses), own.statuses
