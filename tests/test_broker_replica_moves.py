"""Moving a replica between a broker's log directories (AlterReplicaLogDirs) while it is written.

The move copies the log into a future log in the destination, which DescribeLogDirs lists as a
future replica with its lag, then puts the copy in the log's place once it has caught up:
every record acknowledged before or during the move reads back in order at its offset, from
the new directory, also after a restart, and the old copy is removed. A directory that is not
one of the broker's answers LOG_DIR_NOT_FOUND; a partition the broker has no replica of yet
answers REPLICA_NOT_AVAILABLE and is created in the directory named when it comes. A move
cancelled by a second move back leaves the replica where it was.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest

import pylogq
from pylogq import errors, records

TS = 1_700_000_000_000


def batch(values: List[bytes]) -> bytes:
    return bytes(records.build_batch(values, timestamps=TS))


def read_values(broker: pylogq.Broker, topic: str, partition: int) -> List[Tuple[int, bytes]]:
    lg = broker.logs.get_log(topic, partition)
    assert lg is not None
    out: List[Tuple[int, bytes]] = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:  # a read stops at its segment's end
        data = lg.read(offset, 1 << 30).read()
        out += [(r.offset, bytes(r.value or b"")) for info in records.iter_batches(data)
                for r in records.RecordBatch(data, info.position)]
        offset = out[-1][0] + 1
    return out


def where(broker: pylogq.Broker) -> Dict[str, Dict[Tuple[str, int], bool]]:
    """DescribeLogDirs: directory -> {partition: is a future replica}."""
    return {d.path: {(r.topic, r.partition): r.is_future for r in d.replicas} for d in broker.describe_log_dirs()}


def eventually(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "%s: not within %.0f s" % (what, timeout)
        time.sleep(0.02)  # a poll's pacing


@pytest.fixture
def dirs(tmp_path: Path) -> Tuple[Path, Path]:
    return tmp_path / "a", tmp_path / "b"


def open_broker(dirs: Tuple[Path, Path]) -> pylogq.Broker:
    return pylogq.Broker(str(dirs[0]), log_dirs="%s,%s" % dirs)


def test_a_replica_moves_to_the_other_directory_while_it_is_written(dirs: Tuple[Path, Path]) -> None:
    a, b = (str(d) for d in dirs)
    with open_broker(dirs) as broker:
        broker.create_topic("t", partitions=1, config={"segment.bytes": 64 * 1024, "file.delete.delay.ms": 0})
        source = broker.logs.dir_of("t", 0)
        target = b if source == a else a
        acked: List[Tuple[int, bytes]] = []
        for i in range(300):
            value = b"before-%d-" % i + b"x" * 500
            acked.append((broker.produce("t", 0, batch([value])).base_offset, value))
        stop = threading.Event()

        def write() -> None:
            i = 0
            while not stop.is_set():
                value = b"during-%d" % i
                acked.append((broker.produce("t", 0, batch([value])).base_offset, value))
                i += 1

        writer = threading.Thread(target=write)
        writer.start()
        try:
            assert broker.alter_replica_log_dirs({("t", 0): target}) == {("t", 0): 0}
            assert where(broker)[target].get(("t", 0)) is True or broker.logs.dir_of("t", 0) == target
            eventually(lambda: broker.logs.dir_of("t", 0) == target, "the replica in %s" % target)
        finally:
            stop.set()
            writer.join()
        assert where(broker)[target] == {("t", 0): False} and ("t", 0) not in where(broker)[source]
        assert read_values(broker, "t", 0) == acked
        assert len(acked) > 300
        eventually(lambda: not (Path(source) / "t-0").exists(), "the old copy removed")
        # Appends go on in the new directory.
        value = b"after"
        acked.append((broker.produce("t", 0, batch([value])).base_offset, value))
    with open_broker(dirs) as broker:
        assert broker.logs.dir_of("t", 0) == target
        assert read_values(broker, "t", 0) == acked
        assert not [p for p in Path(source).iterdir() if p.name.startswith("t-0")]


def test_errors_and_a_replica_created_where_it_was_asked(dirs: Tuple[Path, Path], tmp_path: Path) -> None:
    a, b = (str(d) for d in dirs)
    with open_broker(dirs) as broker:
        broker.create_topic("t", partitions=1)
        assert broker.alter_replica_log_dirs({("t", 0): str(tmp_path / "elsewhere")}) == {
            ("t", 0): errors.LogDirNotFoundError.code}
        here = broker.logs.dir_of("t", 0)
        assert broker.alter_replica_log_dirs({("t", 0): here}) == {("t", 0): 0}  # there already
        assert broker.log_dir_mover is None or broker.log_dir_mover.moving() == {}
        # No replica yet: recorded, and the log is made there (whichever directory holds fewer).
        emptier = b if here == a else a
        other = a if emptier == b else b
        assert broker.alter_replica_log_dirs({("u", 0): other}) == {("u", 0): errors.ReplicaNotAvailableError.code}
        broker.create_topic("u", partitions=1)
        assert broker.logs.dir_of("u", 0) == other


def test_a_move_replaced_by_a_move_back_leaves_the_replica_where_it_was(dirs: Tuple[Path, Path]) -> None:
    a, b = (str(d) for d in dirs)
    with open_broker(dirs) as broker:
        broker.create_topic("t", partitions=1)
        for i in range(50):
            broker.produce("t", 0, batch([b"v%d" % i]))
        before = read_values(broker, "t", 0)
        source = broker.logs.dir_of("t", 0)
        target = b if source == a else a
        mover_bound = 1  # one byte a second: the move cannot finish
        broker.alter_broker_configs(str(broker.broker_id), [("SET", "replica.alter.log.dirs.io.max.bytes.per.second",
                                                             str(mover_bound))], incremental=True)
        assert broker.alter_replica_log_dirs({("t", 0): target}) == {("t", 0): 0}
        assert broker.logs.future_dir("t", 0) == target
        assert broker.alter_replica_log_dirs({("t", 0): source}) == {("t", 0): 0}
        assert broker.logs.future_dir("t", 0) is None and broker.logs.dir_of("t", 0) == source
        eventually(lambda: not [p for p in Path(target).iterdir() if p.name.startswith("t-0")],
                   "the abandoned copy removed")
        assert read_values(broker, "t", 0) == before


def test_the_admin_client_moves_a_replica_in_process(dirs: Tuple[Path, Path]) -> None:
    from pylogq.client.admin import AdminClient

    a, b = (str(d) for d in dirs)
    with open_broker(dirs) as broker:
        broker.create_topic("t", partitions=1)
        broker.produce("t", 0, batch([b"v"]))
        source = broker.logs.dir_of("t", 0)
        target = b if source == a else a
        me = broker.broker_id
        with AdminClient(broker=broker) as admin:
            answered = admin.alter_replica_log_dirs({("t", 0, me): target, ("t", 0, me + 1): target},
                                                    raise_errors=False)
            assert answered[("t", 0, me)] is None
            assert isinstance(answered[("t", 0, me + 1)], errors.BrokerNotAvailableError)  # no such broker here
            eventually(lambda: admin.describe_replica_log_dirs([("t", 0, me)])[("t", 0, me)] == {
                "current_replica_log_dir": target, "current_replica_offset_lag": 0,
                "future_replica_log_dir": None, "future_replica_offset_lag": -1}, "the move reported done")
            with pytest.raises(errors.LogDirNotFoundError):
                admin.alter_replica_log_dirs({("t", 0, me): "/no/such/dir"})
            with pytest.raises(errors.BrokerNotAvailableError):
                admin.alter_replica_log_dirs({("t", 0, me + 1): target})
        assert read_values(broker, "t", 0) == [(0, b"v")]
