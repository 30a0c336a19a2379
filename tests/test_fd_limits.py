"""A broker within Debian's default ``ulimit -n 1024``: 10,000 partitions served and restarted, and a topic
whose partitions cannot all be opened is not created at all.

The acceptance test runs ``pylogq-broker`` in a child process whose
``RLIMIT_NOFILE`` is 1024 (set by the child itself before it imports
anything) and talks to it over TCP from this process: it creates a topic of
10,000 partitions, produces to and fetches from a sample of them, fetches
from all of them at once, stops the broker and starts it again under the
same limit. The child's descriptors are counted in ``/proc/<pid>/fd`` at each
step and must stay well under the limit (before the file cache a broker held
three per segment and failed near 290 segments).
"""

from __future__ import annotations

import errno
import os
import random
import re
import sys
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from pylogq import Broker, errors, records
from pylogq.storage.manager import LogManager

from .server.conftest import BrokerProcess

LIMIT = 1024
PARTITIONS = 10_000
SAMPLE = 200
START_TIMEOUT_S = 120.0  # loading 10,000 logs on a loaded 2-core machine
REQUEST_TIMEOUT_MS = 120_000  # creating 10,000 partitions in one request
TS = 1_700_000_000_000

# The child sets its own limit, soft and hard, before pylogq is imported: the file cache
# derives its capacity from it.
CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (%d, %d))
from pylogq.cli.broker import main
sys.exit(main(sys.argv[1:]))
""" % (LIMIT, LIMIT)

needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/<pid>/fd")


def limited_broker(data_dir: Path, log_path: Path) -> BrokerProcess:
    """``pylogq-broker`` in a child process limited to LIMIT open files."""
    return BrokerProcess(data_dir, log_path,
                         "log.index.size.max.bytes=4096",  # small sparse index files
                         "log.segment.bytes=1048576",
                         command=(sys.executable, "-c", CHILD, "--log-level", "warning"),
                         start_timeout_s=START_TIMEOUT_S, stop_timeout_s=START_TIMEOUT_S)


def open_fds(broker: BrokerProcess) -> int:
    return len(os.listdir("/proc/%d/fd" % broker.proc.pid))


def batch(partition: int, round_: int) -> bytes:
    return bytes(records.build_batch([b"p%05d-r%d-%d" % (partition, round_, i) for i in range(3)],
                                     timestamps=TS + round_))


def values(data: bytes) -> List[bytes]:
    cols = records.decode_columns(data)
    return [cols.value(i) for i in range(len(cols))]


def fetch_all(transport, topic: str, partitions: List[int]):
    return transport.fetch([(topic, p, 0, 1 << 20) for p in partitions], 0, 1, 64 << 20, "read_uncommitted")


def check_fds(broker: BrokerProcess, step: str, counts: List[Tuple[str, int]]) -> None:
    n = open_fds(broker)
    counts.append((step, n))
    assert n < LIMIT // 2, "%s: the broker holds %d descriptors (limit %d): %s\n%s" % (
        step, n, LIMIT, counts, broker.log()[-5000:])


@needs_proc
@pytest.mark.slow
def test_a_broker_with_10000_partitions_starts_serves_and_restarts_under_ulimit_1024(tmp_path):
    from pylogq.client.tcp import TcpTransport

    data_dir = tmp_path / "data"
    log_path = tmp_path / "broker.log"
    sample = sorted(random.Random(14).sample(range(PARTITIONS), SAMPLE))
    counts: List[Tuple[str, int]] = []
    broker: Optional[BrokerProcess] = limited_broker(data_dir, log_path)
    try:
        assert broker is not None
        check_fds(broker, "started", counts)
        transport = TcpTransport(broker.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
        try:
            desc = transport.create_topic("many", PARTITIONS, 1, None)
            assert len(desc.partitions) == PARTITIONS
            check_fds(broker, "created %d partitions" % PARTITIONS, counts)
            for p in sample:
                assert transport.produce("many", p, batch(p, 0), 1).error_code == 0
            check_fds(broker, "produced to %d partitions" % SAMPLE, counts)
            fetched = fetch_all(transport, "many", sample)
            for p in sample:
                assert fetched[("many", p)].error_code == 0
                assert values(fetched[("many", p)].records.read()) == values(batch(p, 0))
            # A consumer of every partition: one fetch of all 10,000 (the idle ones answer empty).
            everything = fetch_all(transport, "many", list(range(PARTITIONS)))
            assert sum(1 for r in everything.values() if r.records is not None and len(r.records)) == SAMPLE
            assert all(r.error_code == 0 for r in everything.values())
            check_fds(broker, "fetched", counts)
        finally:
            transport.close()
        status = broker.stop()
        broker = None
        assert status == 0

        broker = limited_broker(data_dir, log_path)  # every log loaded again under the same limit
        check_fds(broker, "restarted", counts)
        transport = TcpTransport(broker.bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
        try:
            for p in sample:
                assert transport.produce("many", p, batch(p, 1), 1).base_offset == 3
            fetched = fetch_all(transport, "many", sample)
            for p in sample:
                assert values(fetched[("many", p)].records.read()) == values(batch(p, 0)) + values(batch(p, 1))
            check_fds(broker, "served after the restart", counts)
        finally:
            transport.close()
        status = broker.stop()
        broker = None
        assert status == 0
    finally:
        if broker is not None:
            broker.stop()
    text = log_path.read_text("utf-8", "replace")
    assert "Traceback" not in text and "Too many open files" not in text, text[-5000:]


# -- a topic that cannot be created whole is not created ---------------------------------


@pytest.fixture
def failing_open(monkeypatch):
    """Opening ``<topic>-<partition>`` named in ``fail`` raises EMFILE, as when out of descriptors."""
    fail = set()
    real = LogManager.get_or_create_log

    def get_or_create_log(self, topic, partition, config=None, is_new=True):
        if (topic, partition) in fail:
            raise OSError(errno.EMFILE, "Too many open files")
        return real(self, topic, partition, config, is_new)

    monkeypatch.setattr(LogManager, "get_or_create_log", get_or_create_log)
    return fail


def partition_dirs(data_dir: Path, topic: str) -> List[str]:
    return sorted(n for n in os.listdir(data_dir) if re.fullmatch(re.escape(topic) + r"-\d+", n))


def test_a_topic_whose_partitions_cannot_all_be_opened_is_not_created(tmp_path, failing_open):
    data_dir = tmp_path / "data"
    with Broker(str(data_dir)) as broker:
        failing_open.add(("events", 7))
        with pytest.raises(Exception):
            broker.create_topic("events", partitions=20)
        assert "events" not in broker.list_topics()
        assert partition_dirs(data_dir, "events") == []  # the 7 logs opened before were removed
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            broker.partition("events", 0)
    with Broker(str(data_dir)) as broker:  # nothing of it comes back after a restart
        assert "events" not in broker.list_topics() and partition_dirs(data_dir, "events") == []
        failing_open.clear()
        assert len(broker.create_topic("events", partitions=20).partitions) == 20  # and it can be made again


def test_partitions_that_cannot_all_be_added_are_not_added(tmp_path, failing_open):
    data_dir = tmp_path / "data"
    with Broker(str(data_dir)) as broker:
        broker.create_topic("events", partitions=2)
        assert broker.produce("events", 1, batch(1, 0)).base_offset == 0
        failing_open.add(("events", 5))
        with pytest.raises(Exception):
            broker.create_partitions("events", 10)
        assert len(broker.describe_topic("events").partitions) == 2
        assert partition_dirs(data_dir, "events") == ["events-0", "events-1"]
    with Broker(str(data_dir)) as broker:
        assert len(broker.describe_topic("events").partitions) == 2
        fetched = broker.fetch([("events", 1, 0, 1024)], max_wait_ms=0)[("events", 1)]
        assert values(fetched.records.read()) == values(batch(1, 0))
        failing_open.clear()
        assert len(broker.create_partitions("events", 10).partitions) == 10
