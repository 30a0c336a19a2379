"""Reading a replicated topic from every broker's log directories: one in-sync replica per partition.

Real brokers of a :class:`pylogq.Cluster` (real logs, replication, elections) in
this process, written by pylogq's Producer; the rows of ``read_split`` must be
exactly what a pylogq Consumer reads, each partition taken from one replica's
directory. No Spark JVM: the planner and the reader are plain Python.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

pa = pytest.importorskip("pyarrow")

import pylogq  # noqa: E402
from pylogq import Broker, Consumer, records  # noqa: E402
from pylogq.client.consumer import TopicPartition  # noqa: E402
from pylogq.cluster.broker.local_cluster import Cluster  # noqa: E402
from pylogq.errors import InvalidArgumentError, PylogqError  # noqa: E402
from pylogq.spark.replicas import broker_id_of  # noqa: E402
from pylogq.spark.splits import Split, _log_end, partition_bounds, plan_splits, read_split  # noqa: E402
from pylogq.storage.checkpoint import REPLICATION_CHECKPOINT  # noqa: E402
from pylogq.storage.partition_metadata import META_FILE  # noqa: E402

TS = 1_700_000_000_000
FAST = {
    "zookeeper.session.timeout.ms": 600,
    "replica.lag.time.max.ms": 2000,
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 50,
    "offsets.topic.num.partitions": 2,
}
TIMEOUT_S = 30.0

Row = Tuple[int, Optional[bytes], Optional[bytes], int]


@pytest.fixture
def cluster(tmp_path: Any) -> Iterator[Cluster]:
    c = Cluster(3, str(tmp_path / "cluster"), **FAST)
    try:
        c.serve()
        yield c
    finally:
        c.close()


def log_dirs(c: Cluster) -> List[str]:
    """Every broker's log directory, running or not (a stopped broker's files stay)."""
    return [os.path.join(c.data_dir, "broker-%d" % b) for b in range(c.n_brokers)]


def produce(c: Cluster, topic: str, partitions: int, count: int, first: int = 0) -> None:
    """``count`` keyed records per partition with acks=all, each with its own timestamp."""
    producer = pylogq.Producer(bootstrap_servers=c.bootstrap_servers, acks="all", retries=1000,
                               metadata_max_age_ms=500, request_timeout_ms=20000)
    try:
        futures = [producer.send(topic, key=b"k%d" % (i % 7) if i % 5 else None, value=b"p%d-v%d" % (p, i),
                                 partition=p, timestamp_ms=TS + i)
                   for i in range(first, first + count) for p in range(partitions)]
        producer.flush(TIMEOUT_S)
        assert all(f.get(TIMEOUT_S) is not None for f in futures)
    finally:
        producer.close()


def settled(c: Cluster, topic: str, partitions: int, end: int, replicas: int) -> bool:
    """Every running replica's high watermark is ``end`` and each leader's ISR has ``replicas`` members."""
    for p in range(partitions):
        leader = c.running(c.leader(topic, p))
        lead = leader.hosted((topic, p)) if leader is not None else None
        if lead is None or not lead.is_leader or len(lead.isr) != replicas:
            return False
        for b in c.brokers:
            part = b.hosted((topic, p))
            if part is None or part.high_watermark != end:
                return False
    return True


def checkpoint(c: Cluster) -> None:
    """Every running broker writes its high watermarks to its replication-offset-checkpoint now."""
    for b in c.brokers:
        b.checkpoint_high_watermarks()


def consumed(bootstrap: str, topic: str, partition: int) -> List[Row]:
    """What a pylogq Consumer reads of the partition (up to its high watermark)."""
    consumer = Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, partition)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        rows: List[Row] = []
        deadline = time.monotonic() + TIMEOUT_S
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, "consumer stuck at %d of %d" % (consumer.position(tp), end)
            for batch in consumer.poll(timeout_ms=500, max_records=100000).values():
                rows.extend((r.offset, r.key, r.value, r.timestamp) for r in batch)
    finally:
        consumer.close(autocommit=False)
    return rows


def read(splits: List[Split]) -> Tuple[Dict[int, List[Row]], Dict[int, str]]:
    """(partition -> rows read, partition -> the one directory its splits read)."""
    rows: Dict[int, List[Row]] = {}
    dirs: Dict[int, str] = {}
    for s in splits:
        assert dirs.setdefault(s.partition, s.directory) == s.directory, "one partition read from two replicas"
        for rb in read_split(s):
            d = rb.to_pydict()
            micros = rb.column("timestamp").cast(pa.int64()).to_pylist()
            rows.setdefault(s.partition, []).extend(
                (d["offset"][i], d["key"][i], d["value"][i], micros[i] // 1000) for i in range(rb.num_rows))
    return rows, dirs


def broker_of(directory: str) -> int:
    found = broker_id_of(os.path.dirname(directory))
    assert found is not None
    return found


# -- a cluster with full ISRs ----------------------------------------------------------------------


def test_every_partition_is_read_once_from_one_replica_spread_over_the_brokers(cluster: Cluster) -> None:
    cluster.create_topic("t", 4, 3, config={"segment.bytes": "1024"})
    for first in range(0, 150, 30):  # a batch per partition each time: several segments
        produce(cluster, "t", 4, 30, first)
    cluster.wait_until(lambda: settled(cluster, "t", 4, 150, 3), TIMEOUT_S, "full ISRs at high watermark 150")
    checkpoint(cluster)
    expected = {p: consumed(cluster.bootstrap_servers, "t", p) for p in range(4)}
    assert all(len(rows) == 150 for rows in expected.values())
    for options in ({}, {"bootstrap_servers": cluster.bootstrap_servers}):
        splits = plan_splits(log_dirs(cluster), "t", max_split_bytes=1024, **options)
        assert len(splits) > 4  # several splits per partition, all of one replica
        rows, dirs = read(splits)
        assert rows == expected, options
        # Equal replicas: partition p from the (p mod 3)-th broker, so every broker serves some.
        assert {p: broker_of(d) for p, d in dirs.items()} == {p: p % 3 for p in range(4)}, options
    # The same list as a comma-separated source.
    assert read(plan_splits(",".join(log_dirs(cluster)), "t"))[0] == expected


def test_a_stopped_replica_whose_high_watermark_is_lower_is_not_read(cluster: Cluster) -> None:
    """Broker 1 stops (leader of one partition, follower of the others) after 40 committed records;
    40 more are committed without it. Its files and checkpoint say 40: every partition is read from
    the others, up to 80."""
    cluster.create_topic("t", 3, 3)
    produce(cluster, "t", 3, 40)
    cluster.wait_until(lambda: settled(cluster, "t", 3, 40, 3), TIMEOUT_S, "full ISRs at 40")
    assert 1 in {cluster.leader("t", p) for p in range(3)}
    cluster.stop_broker(1, abrupt=True)  # its close writes its checkpoint: 40
    produce(cluster, "t", 3, 40, first=40)
    cluster.wait_until(lambda: settled(cluster, "t", 3, 80, 2), TIMEOUT_S, "ISRs of two at 80")
    checkpoint(cluster)
    stopped_dir = log_dirs(cluster)[1]
    assert partition_bounds([stopped_dir], "t") == {p: (0, 40, os.path.join(stopped_dir, "t-%d" % p))
                                                    for p in range(3)}
    expected = {p: consumed(cluster.bootstrap_servers, "t", p) for p in range(3)}
    assert all(len(rows) == 80 for rows in expected.values())
    rows, dirs = read(plan_splits(log_dirs(cluster), "t"))
    assert rows == expected
    assert {broker_of(d) for d in dirs.values()} <= {0, 2}
    assert {p: broker_of(d) for p, d in dirs.items()} == {p: (0, 2)[p % 2] for p in range(3)}


def test_an_ex_leader_with_records_nobody_took_is_never_read(tmp_path: Any,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """The leader appends 30 records (acks=1) that no follower takes, and dies; the new leader
    commits 20 others at the same offsets. The old leader's files hold offsets up to 130, more
    than any other replica's; its checkpoint says 100. The read takes the new records, from the
    files or with the cluster's ISR, and refuses the old leader's directory alone when the
    cluster says it is out of the ISR."""
    # A lag time longer than the test: the cut followers stay in the ISR until the leader dies.
    with Cluster(3, str(tmp_path / "cluster"), **dict(FAST, **{"replica.lag.time.max.ms": 60000})) as c:
        c.serve()
        c.create_topic("t", 1, 3)
        produce(c, "t", 1, 100)
        c.wait_until(lambda: settled(c, "t", 1, 100, 3), TIMEOUT_S, "full ISR at 100")
        old = c.leader("t", 0)
        followers = [b for b in range(3) if b != old]
        caplog.set_level(logging.DEBUG, logger="pylogq.replica_fetcher")
        seen = len(caplog.records)
        for b in followers:
            c.cut(old, b)

        def refused(follower: int) -> bool:
            # A fetch of this follower failed on the cut link: the fetch it had parked at the
            # leader before the cut (which the append below would have answered) is over.
            prefix = "pylogq-replica-fetcher-%d-from-%d-" % (follower, old)
            return any(r.getMessage().startswith(prefix) and "unreachable" in r.getMessage()
                       for r in caplog.records[seen:])

        c.wait_until(lambda: all(refused(b) for b in followers), TIMEOUT_S, "the followers cut off")
        values = [b"never committed %d" % i for i in range(30)]
        result = c.broker(old).produce("t", 0, bytes(records.build_batch(values)), acks=1)
        assert result.error_code == 0 and result.base_offset == 100
        assert c.broker(old).hosted(("t", 0)).high_watermark == 100
        c.stop_broker(old, abrupt=True)
        c.heal()
        c.wait_until(lambda: c.leader("t", 0) not in (old, -1), TIMEOUT_S, "a new leader")
        produce(c, "t", 1, 20, first=100)
        c.wait_until(lambda: settled(c, "t", 1, 120, 2), TIMEOUT_S, "an ISR of two at 120")
        c.wait_until(lambda: all(old not in b.describe_topic("t").partitions[0].isr for b in c.brokers), TIMEOUT_S,
                     "every broker's metadata without the old leader in the ISR")
        checkpoint(c)
        boot = c.bootstrap_servers
        expected = consumed(boot, "t", 0)
        assert [r[0] for r in expected] == list(range(120)) and expected[100][2] == b"p0-v100"
        dirs = log_dirs(c)
        old_dir = os.path.join(dirs[old], "t-0")
        assert _log_end(old_dir) == 130  # the longest log holds what was never committed ...
        assert partition_bounds([dirs[old]], "t")[0][:2] == (0, 100)  # ... above its own high watermark
        for options in ({}, {"bootstrap_servers": boot}):
            rows, chosen = read(plan_splits(dirs, "t", **options))
            assert rows == {0: expected}, options
            assert broker_of(chosen[0]) != old
        with pytest.raises(PylogqError, match=r"t-0: no log directory given is of a replica in its ISR \[") as info:
            plan_splits([dirs[old]], "t", bootstrap_servers=boot)
        assert old_dir in str(info.value) and "broker %d" % old in str(info.value)


def test_client_rack_reads_an_in_sync_replica_of_that_rack(tmp_path: Any) -> None:
    """Brokers 0, 1 and 2 in racks a, b and b. A read for rack a takes broker 0's files, for rack b
    those of 1 and 2 in turn; once broker 0 is out of every ISR, a read for rack a takes the
    in-sync replicas elsewhere, as a read without a rack does: a rack never makes a copy that
    is not safe to read eligible."""
    racks = {0: "a", 1: "b", 2: "b"}
    with Cluster(3, str(tmp_path / "cluster"), broker_config={b: {"broker.rack": r} for b, r in racks.items()},
                 **FAST) as c:
        boot = c.serve()
        c.create_topic("t", 3, 3)
        produce(c, "t", 3, 20)
        c.wait_until(lambda: settled(c, "t", 3, 20, 3), TIMEOUT_S, "full ISRs at 20")
        dirs = log_dirs(c)
        expected = {p: consumed(boot, "t", p) for p in range(3)}
        for rack, brokers in (("a", {0: 0, 1: 0, 2: 0}), ("b", {0: 1, 1: 2, 2: 1}), ("z", {0: 0, 1: 1, 2: 2})):
            rows, chosen = read(plan_splits(dirs, "t", bootstrap_servers=boot, client_rack=rack))
            assert rows == expected, rack
            assert {p: broker_of(d) for p, d in chosen.items()} == brokers, rack
        # The same through partition_bounds.
        assert {p: broker_of(d) for p, (_, _, d) in partition_bounds(dirs, "t", boot, client_rack="a").items()} \
            == {0: 0, 1: 0, 2: 0}
        with pytest.raises(InvalidArgumentError, match="client_rack 'a' needs bootstrap_servers"):
            plan_splits(dirs, "t", client_rack="a")
        c.stop_broker(0, abrupt=True)
        produce(c, "t", 3, 10, first=20)
        c.wait_until(lambda: settled(c, "t", 3, 30, 2), TIMEOUT_S, "ISRs of two at 30")
        c.wait_until(lambda: all(0 not in info.isr for b in c.brokers for info in b.describe_topic("t").partitions),
                     TIMEOUT_S, "every broker's metadata without broker 0 in the ISRs")
        expected = {p: consumed(c.bootstrap_servers, "t", p) for p in range(3)}
        rows, chosen = read(plan_splits(dirs, "t", bootstrap_servers=c.bootstrap_servers, client_rack="a"))
        assert rows == expected
        assert {p: broker_of(d) for p, d in chosen.items()} == {0: 1, 1: 2, 2: 1}


# -- directories of brokers, without a cluster ------------------------------------------------------------


def _broker_dir(path: str, broker_id: int, batches: int) -> str:
    """A single broker's log directory holding ``t-0`` with ``batches`` batches of 5 records, closed."""
    with Broker(path, broker_id=broker_id) as broker:
        broker.create_topic("t", 1)
        for i in range(batches):
            broker.produce("t", 0, bytes(records.build_batch([b"v%d.%d" % (i, j) for j in range(5)],
                                                             timestamps=TS + i)))
    return path


def _replica_of(source: str, path: str, broker_id: Optional[int]) -> str:
    """A copy of ``source``'s ``t-0`` in a log directory of broker ``broker_id`` (None: no meta.properties)."""
    shutil.copytree(os.path.join(source, "t-0"), os.path.join(path, "t-0"))
    if broker_id is not None:
        with open(os.path.join(path, META_FILE), "w") as f:
            f.write("version=0\nbroker.id=%d\ncluster.id=abc\n" % broker_id)
    return path


def test_one_broker_holding_a_partition_twice_is_refused(tmp_path: Any) -> None:
    a = _broker_dir(str(tmp_path / "a"), 4, 3)
    twice = _replica_of(a, str(tmp_path / "b"), 4)
    with pytest.raises(PylogqError, match="partition t-0 is in two log directories of broker 4"):
        plan_splits([a, twice], "t")
    unknown = _replica_of(a, str(tmp_path / "c"), None)
    with pytest.raises(PylogqError, match="cannot tell whether they are replicas on two brokers"):
        plan_splits([a, unknown], "t")
    # Of another broker, it is a replica: read once.
    other = _replica_of(a, str(tmp_path / "d"), 5)
    rows, dirs = read(plan_splits([a, other], "t"))
    assert [r[0] for r in rows[0]] == list(range(15))


def _checkpoint_file(log_dir: str, high_watermark: Optional[int]) -> None:
    """Write (or remove, for None) the log directory's replication-offset-checkpoint entry of t-0."""
    path = os.path.join(log_dir, REPLICATION_CHECKPOINT)
    if high_watermark is None:
        if os.path.exists(path):
            os.remove(path)
        return
    with open(path, "w") as f:
        f.write("0\n1\nt 0 %d\n" % high_watermark)


def test_the_highest_checkpointed_high_watermark_wins_and_bounds_the_read(tmp_path: Any) -> None:
    """Broker 0 holds 20 records of t-0, broker 1 the first 10 of them."""
    a = _broker_dir(str(tmp_path / "a"), 0, 4)
    b = _broker_dir(str(tmp_path / "b"), 1, 2)
    in_a, in_b = os.path.join(a, "t-0"), os.path.join(b, "t-0")
    cases = [
        # (a's checkpoint, b's checkpoint) -> (end, the directory read)
        ((15, 10), (15, in_a)),  # the highest high watermark, and it bounds the read below the 20 on disk
        ((5, 10), (10, in_b)),  # a lagging replica is not read, though it holds more
        ((None, 10), (10, in_b)),  # a replica without an entry is not read while another has one
        ((15, None), (15, in_a)),
        ((None, None), (20, in_a)),  # no checkpoint anywhere: the longest log, to its end
        ((10, 10), (10, in_a)),  # equal: partition 0 from the first broker in id order
    ]
    for (mark_a, mark_b), (end, directory) in cases:
        _checkpoint_file(a, mark_a)
        _checkpoint_file(b, mark_b)
        for source in ([a, b], [b, a]):
            assert partition_bounds(source, "t") == {0: (0, end, directory)}, (mark_a, mark_b)
        rows, dirs = read(plan_splits([a, b], "t"))
        assert [r[0] for r in rows[0]] == list(range(end)) and dirs == {0: directory}
