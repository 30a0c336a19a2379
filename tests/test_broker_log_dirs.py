"""A single node with several log directories when one fails (JBOD).

The failing directory is an ext4 file system on a loop device that the test shuts down, as a
disk dies (root only; skipped with the reason otherwise, a failure under
``PYLOGQ_REQUIRE_ALL=1``). Its partitions answer KAFKA_STORAGE_ERROR from then on, the other
directory's partitions are served as before, DescribeLogDirs names the failed directory with
KAFKA_STORAGE_ERROR, and with every directory failed the broker stops (``on_storage_failure``).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

import pylogq
from pylogq import errors, records

from ._filesystem import FailingDisk, failing_disk

TS = 1_700_000_000_000


def batch(value: bytes) -> bytes:
    return bytes(records.build_batch([value], timestamps=TS))


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[FailingDisk]:
    with failing_disk(tmp_path / "second", 16 * 1024 * 1024) as made:
        yield made


def placed(broker: pylogq.Broker) -> Dict[str, List[Tuple[str, int]]]:
    """Each log directory -> the partitions whose logs it holds."""
    return {path: [(lg.topic, lg.partition) for lg in logs] for path, logs in broker.logs.logs_by_dir()}


def test_the_partitions_of_a_failed_directory_fail_and_the_others_are_served(
        tmp_path: Path, disk: FailingDisk) -> None:
    first = tmp_path / "first"
    with pylogq.Broker(str(first), log_dirs="%s,%s" % (first, disk.path)) as broker:
        broker.create_topic("t", partitions=4)
        by_dir = placed(broker)
        on_disk = [p for t, p in by_dir[str(disk.path)] if t == "t"]
        on_first = [p for t, p in by_dir[str(first)] if t == "t"]
        assert on_disk and on_first, by_dir
        for p in range(4):
            broker.produce("t", p, batch(b"before-%d" % p))
        stopped = threading.Event()
        broker.on_storage_failure = lambda why: stopped.set()
        # Told after the broker (listeners are called in order): its part is done by then.
        offline = threading.Event()
        broker.logs.add_dir_failure_listener(lambda path, tps, online: offline.set())

        disk.fail()
        with pytest.raises(errors.KafkaStorageError):
            broker.produce("t", on_disk[0], batch(b"after"))
        assert offline.wait(10), "the failed directory did not go offline"
        described = {d.path: d.error_code for d in broker.describe_log_dirs()}
        assert described == {str(first): 0, str(disk.path): errors.KafkaStorageError.code}
        for p in on_disk:
            with pytest.raises(errors.KafkaStorageError):
                broker.produce("t", p, batch(b"after"))
            [result] = broker.fetch([("t", p, 0, 1 << 20)], max_wait_ms=0).values()
            assert result.error_code == errors.KafkaStorageError.code
        for p in on_first:
            result = broker.produce("t", p, batch(b"after-%d" % p))
            assert result.base_offset == 1
        assert not stopped.is_set()  # one directory is left


def test_a_broker_whose_every_directory_failed_stops(tmp_path: Path, disk: FailingDisk) -> None:
    with pylogq.Broker(str(disk.path)) as broker:
        broker.create_topic("t")
        broker.produce("t", 0, batch(b"before"))
        stopped = threading.Event()
        reasons: List[str] = []
        broker.on_storage_failure = lambda why: (reasons.append(why), stopped.set())
        disk.fail()
        with pytest.raises(errors.KafkaStorageError):
            broker.produce("t", 0, batch(b"after"))
        assert stopped.wait(10), "the broker was not told that every log directory is offline"
        assert reasons and "every log directory is offline" in reasons[0]
