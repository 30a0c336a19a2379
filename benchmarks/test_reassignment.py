"""How fast a throttled reassignment copies a partition: three ``pylogq-broker`` processes on real ZooKeeper.

Group "throttled reassignment": a one-partition topic on brokers (a, b) holding N bytes
(1000-byte values, written with confluent-kafka, acks=all) gets a third replica, c, with
``pylogq reassign-partitions --execute --throttle RATE`` (which sets the leader and follower
rates on the brokers and the throttled replicas on the topic, as Kafka's tool does). Timed:
from ``--execute`` until the topic's znode no longer lists c as being added (the new replica
caught up and joined the ISR, and the controller completed the reassignment). ``--verify``
follows, untimed, and must report it complete and remove the throttles (checked: no
throttle config left on the brokers or the topic). items = N bytes per round, so the
summary's rate is the copy's; ``extra_info["bound_bytes_per_s"]`` is the throttle.

Rows: ``throttled`` and the reference ``unthrottled`` (the same reassignment without
``--throttle``), for scale: the ratio says how much the throttle slowed the copy.

Sizes: N = 200 MB at RATE 10 MB/s (``--throttle 10000000``; Kafka's default samples, 11 of 1 s: the rate is
measured as Kafka's SimpleRate measures it, over the time since the oldest sample started
and at least one window, so about one second's worth goes before the bound bites, and the
whole takes about N / RATE), the issue's case; target 10 MB/s +- 20% over the whole copy, asserted on
the median only when timing is on and the run is not quick (``summary.asserting``). At the
smoke sizes (``summary.smoke``) N = 16 MB at 4 MB/s with 2 samples of 1 s, one round.
Every run checks the outcome: the new replica's log ends where the leader's does, and the
throttles are gone after ``--verify``.
"""

from __future__ import annotations

import io
import json
import sys
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from summary import asserting, info, smoke

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.cluster._processes import ProcessCluster, cluster_on_own_zookeeper  # noqa: E402 - the suite's harness

from pylogq.cli.main import run as pylogq_cli  # noqa: E402

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

MB = 1 << 20
VALUE = b"r" * 1000
FULL = (200 * 1000 * 1000, 10 * 1000 * 1000, 11)  # bytes, throttle (the issue's --throttle 10000000), samples
SMOKE = (16 * MB, 4 * MB, 2)
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def _sizes(config: Any) -> Tuple[int, int, int]:
    return SMOKE if smoke(config) else FULL


@pytest.fixture(scope="module")
def cluster(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    _, _, samples = _sizes(request.config)
    with cluster_on_own_zookeeper(tmp_path_factory.mktemp("reassignment"), 3, {
            "replication.quota.window.num": samples, "replication.quota.window.size.seconds": 1}) as c:
        yield c


def _cli(*argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    status = pylogq_cli(list(argv), stdout=out, stderr=err)
    assert status == 0, "pylogq %s: exit %d\n%s%s" % (" ".join(argv), status, out.getvalue(), err.getvalue())
    return out.getvalue()


def _filled(c: ProcessCluster, replicas: List[int], size: int) -> str:
    name = "moving-%s" % uuid.uuid4().hex[:8]
    admin = confluent_admin.AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([confluent_admin.NewTopic(name, 1, replica_assignment=[replicas])])[name].result(30)
    c.wait_until(lambda: (lambda s: s is not None and len(s[1]) == len(replicas))(c.state(name, 0)), "the ISR")
    producer = confluent_kafka.Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5,
                                         "batch.size": 1000000, "queue.buffering.max.kbytes": 2097151})
    for _ in range(size // len(VALUE)):
        while True:
            try:
                producer.produce(name, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    return name


def _adding(c: ProcessCluster, topic: str) -> Dict[int, List[int]]:
    found = c.zk.get_topic_assignment(topic)
    assert found is not None
    return found[0].adding


def _throttles_left(c: ProcessCluster, topic: str) -> List[str]:
    """Throttle configs still stored: the brokers' dynamic sets and the topic's (the store's)."""
    sets = {"broker %s" % b: c.zk.get_broker_config(str(b)) for b in sorted(c.brokers)}
    sets["brokers' default"] = c.zk.get_broker_config("<default>")
    sets["topic %s" % topic] = c.zk.get_topic_config(topic)
    return ["%s: %s=%s" % (where, key, value) for where, config in sets.items()
            for key, value in sorted(config.items()) if key in THROTTLE_KEYS]


def _reassign(c: ProcessCluster, tmp_path: Path, size: int, throttle: int) -> Any:
    a, b, third = sorted(c.brokers)
    topic = _filled(c, [a, b], size)
    plan = tmp_path / ("%s.json" % topic)
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0,
                                                              "replicas": [a, b, third]}]}))
    execute = ["reassign-partitions", "--bootstrap-server", c.bootstrap, "--reassignment-json-file", str(plan)]
    state: Dict[str, Any] = {"topic": topic}

    def run() -> None:
        _cli(*(execute + ["--execute"] + (["--throttle", str(throttle)] if throttle else [])))
        c.wait_until(lambda: not _adding(c, topic), "the reassignment of %s to complete" % topic, timeout=600)

    state["run"] = run
    state["verify"] = lambda: _cli(*(execute + ["--verify"]))
    return state


@pytest.mark.parametrize("throttled", [True, False], ids=["throttled", "unthrottled"])
def test_throttled_reassignment(benchmark: Any, request: Any, cluster: ProcessCluster, tmp_path: Path,
                                throttled: bool) -> None:
    size, rate, _ = _sizes(request.config)
    info(benchmark, "throttled reassignment", size, "bytes", peer=not throttled,
         target="the throttle's rate +- 20%% (%d bytes/s)" % rate if throttled else "")
    if throttled:
        benchmark.extra_info["bound_bytes_per_s"] = rate
    rounds: List[Dict[str, Any]] = []

    def setup() -> Any:
        rounds.append(_reassign(cluster, tmp_path, size, rate if throttled else 0))
        return (), {}

    benchmark.pedantic(lambda: rounds[-1]["run"](), setup=setup, rounds=1, iterations=1, warmup_rounds=0)
    for r in rounds:
        report = r["verify"]()
        assert "is completed" in report and "still in progress" not in report, report
        assert not _throttles_left(cluster, r["topic"]), _throttles_left(cluster, r["topic"])
        ends = {b: cluster.state(r["topic"], 0) for b in cluster.brokers}
        assert all(e is not None and sorted(e[1]) == sorted(cluster.brokers) for e in ends.values()), ends
    if throttled and asserting(request.config):
        achieved = size / benchmark.stats.stats.median
        benchmark.extra_info["achieved_bytes_per_s"] = achieved
        assert 0.8 * rate <= achieved <= 1.2 * rate, "copied at %.0f bytes/s under a %d bytes/s throttle" % (
            achieved, rate)
