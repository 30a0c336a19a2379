"""Topic administration against a served broker: it never stalls the event loop, a
delete is all or nothing, a create that fails keeps nothing, and Metadata's
auto-creation is bounded and off the loop.

Probes are raw Kafka requests on their own connections, each given 1 s: the
broker must answer them while another request is doing (or stuck in) topic work.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import pylogq
from pylogq import errors
from pylogq.client.connection import BrokerConnection
from pylogq.protocol import ApiKey
from pylogq.records import build_batch
from pylogq.server.handlers import MAX_AUTO_CREATE_PER_REQUEST
from pylogq.storage import manager as manager_module

# A liveness bound, not a speed target: how promptly the loop answers is shown by the order of
# events (a probe answered whole while the admin work is still in flight), whatever the load.
PROBE_TIMEOUT_S = 30.0
STORAGE_ERROR = errors.KafkaStorageError.code
LEADER_NOT_AVAILABLE = errors.LeaderNotAvailableError.code


def _connect(address: Tuple[str, int], timeout_s: float = 30.0) -> BrokerConnection:
    return BrokerConnection(address[0], address[1], "probe", timeout_s)


def _metadata(conn: BrokerConnection, names: Optional[List[str]], auto_create: bool = False,
              timeout_s: float = PROBE_TIMEOUT_S) -> Dict[str, int]:
    body = {"topics": None if names is None else [{"name": n, "topic_id": None} for n in names],
            "allow_auto_topic_creation": auto_create, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}
    response = conn.request(ApiKey.METADATA, body, timeout_s=timeout_s)
    return {t["name"]: t["error_code"] for t in response["topics"]}


def _produce(conn: BrokerConnection, topic: str, value: bytes, timeout_s: float = PROBE_TIMEOUT_S) -> int:
    batch = build_batch([value], timestamps=int(time.time() * 1000))
    response = conn.request(ApiKey.PRODUCE, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
        timeout_s=timeout_s)
    part = response["responses"][0]["partition_responses"][0]
    assert part["error_code"] == 0, part
    return int(part["base_offset"])


def _fetch_code(conn: BrokerConnection, topic: str, offset: int, timeout_s: float = PROBE_TIMEOUT_S) -> int:
    """Fetch one partition from ``offset`` (no wait); -> its error code (records must be there)."""
    response = conn.request(ApiKey.FETCH, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": topic, "topic_id": None, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}, timeout_s=timeout_s)
    part = response["responses"][0]["partitions"][0]
    if part["error_code"] == 0:
        assert part["records"], "fetch at %d returned no records" % offset
    return int(part["error_code"])


def _probe(address: Tuple[str, int], topic: str) -> None:
    """A client that is not doing topic work: connects, asks for versions and metadata, produces and fetches."""
    conn = _connect(address)
    try:
        conn.request(ApiKey.API_VERSIONS, {"client_software_name": "probe", "client_software_version": "1"},
                     timeout_s=PROBE_TIMEOUT_S)
        assert _metadata(conn, [topic]) == {topic: 0}
        assert _metadata(conn, None)[topic] == 0
        offset = _produce(conn, topic, b"probe")
        assert _fetch_code(conn, topic, offset) == 0
    finally:
        conn.close()


class _Call(threading.Thread):
    """A blocking call on a thread of its own, its result or exception kept."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self._fn = fn
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self._fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc

    def outcome(self, timeout: float = 60.0) -> Any:
        self.join(timeout)
        assert not self.is_alive(), "the call did not finish within %.0f s" % timeout
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[pylogq.Broker, Tuple[str, int]]]:
    broker = pylogq.Broker(str(tmp_path / "data"), num_partitions=1)
    try:
        address = broker.serve()
        broker.create_topic("probe")
        yield broker, address
    finally:
        broker.close()


def _delete_topics(conn: BrokerConnection, names: List[str], timeout_s: float = 60.0) -> Dict[str, int]:
    response = conn.request(ApiKey.DELETE_TOPICS, {"topics": [], "topic_names": names, "timeout_ms": 30000},
                            timeout_s=timeout_s)
    return {r["name"]: r["error_code"] for r in response["responses"]}


def test_the_loop_answers_while_a_delete_waits_for_a_clean_to_stop(
        served: Tuple[pylogq.Broker, Tuple[str, int]]) -> None:
    """The deadlock's shape: a delete waits for a clean of its log to stop. Other
    clients' requests (Metadata, which reads the topics the delete is changing, and
    produce and fetch) are answered meanwhile; the delete finishes when the clean does."""
    broker, address = served
    broker.create_topic("doomed", partitions=2, config={"cleanup.policy": "compact"})
    log_ = broker.logs.get_log("doomed", 1)
    assert log_ is not None
    clean = broker.logs.cleaning.try_begin(log_)  # a clean of it "in progress", as a cleaner's
    assert clean is not None
    admin = _connect(address, timeout_s=60.0)
    ended = False
    try:
        deleting = _Call(lambda: _delete_topics(admin, ["doomed"]))
        # The delete has taken the topic out of service and now waits for the clean.
        deadline = time.monotonic() + 30
        while not clean.aborted.wait(0.05):
            assert time.monotonic() < deadline, "the delete never asked the clean to stop"
        for _ in range(3):
            _probe(address, "probe")
        assert deleting.is_alive()
        broker.logs.cleaning.end(clean)  # the clean stops
        ended = True
        assert deleting.outcome() == {"doomed": 0}
    finally:
        if not ended:
            broker.logs.cleaning.end(clean)
        admin.close()
    assert "doomed" not in broker.list_topics()
    assert not any(p.name.startswith("doomed-") and not p.name.endswith("-delete")
                   for p in Path(broker.data_dir).iterdir())


def test_a_failed_delete_keeps_the_whole_topic(served: Tuple[pylogq.Broker, Tuple[str, int]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    broker, address = served
    broker.create_topic("kept", partitions=3)
    conn = _connect(address)
    try:
        for p in range(3):
            for i in range(5):
                broker.produce("kept", p, build_batch([b"v%d-%d" % (p, i)], keys=[b"k"]))
        renames: List[str] = []
        real_rename = os.rename

        def failing_rename(src: Any, dst: Any) -> None:
            if str(dst).endswith("-delete") and "kept-" in str(src):
                renames.append(str(src))
                if len(renames) == 2:
                    raise OSError(errno.EIO, "Input/output error", str(src))
            real_rename(src, dst)

        monkeypatch.setattr(manager_module.os, "rename", failing_rename)
        assert _delete_topics(conn, ["kept"]) == {"kept": STORAGE_ERROR}
        monkeypatch.setattr(manager_module.os, "rename", real_rename)
        assert len(renames) == 2
        assert "kept" in broker.list_topics()
        assert broker.partitions_for("kept") == 3
        for p in range(3):
            assert os.path.isdir(os.path.join(broker.data_dir, "kept-%d" % p))
            assert broker.list_offsets("kept", p, -1)[0] == 5
            broker.produce("kept", p, build_batch([b"after"], keys=[b"k"]))
        assert not [n for n in os.listdir(broker.data_dir) if n.endswith("-delete")]
        assert _metadata(conn, ["kept"]) == {"kept": 0}
    finally:
        conn.close()
    data_dir = broker.data_dir
    broker.close()
    with pylogq.Broker(data_dir) as again:
        assert again.partitions_for("kept") == 3
        for p in range(3):
            assert again.list_offsets("kept", p, -1)[0] == 6


@pytest.mark.parametrize("length", [214, 231, 249])
def test_topics_with_long_names_delete(tmp_path: Path, length: int) -> None:
    """Kafka allows 249 characters; the ``-delete`` directory name shortens the topic."""
    name = ("t%d-" % length + "x" * length)[:length]
    data_dir = str(tmp_path / "data")
    with pylogq.Broker(data_dir) as broker:
        broker.create_topic(name, partitions=12)
        broker.produce(name, 11, build_batch([b"v"], keys=[b"k"]))
        broker.delete_topic(name)
        assert name not in broker.list_topics()
        live = [n for n in os.listdir(data_dir) if n.startswith(name[:20]) and not n.endswith("-delete")]
        assert live == []
        assert all(len(n) <= 255 for n in os.listdir(data_dir))
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            broker.produce(name, 0, build_batch([b"v"], keys=[b"k"]), auto_create=False)
    with pylogq.Broker(data_dir) as broker:
        assert name not in broker.list_topics()


def test_a_create_that_fails_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of file descriptors at the sixth partition: the topic (or the growth) is not
    created at all, and the logs opened for it are gone."""
    with pylogq.Broker(str(tmp_path / "data")) as broker:
        broker.create_topic("grow", partitions=2)
        real = broker.logs.get_or_create_log

        def out_of_files(topic: str, partition: int, config: Any = None, is_new: bool = True) -> Any:
            if partition == 5:
                raise OSError(errno.EMFILE, "Too many open files")
            return real(topic, partition, config, is_new)

        monkeypatch.setattr(broker.logs, "get_or_create_log", out_of_files)
        with pytest.raises(errors.KafkaStorageError, match="Too many open files"):
            broker.create_topic("big", partitions=8)
        assert "big" not in broker.list_topics()
        with pytest.raises(errors.KafkaStorageError, match="Too many open files"):
            broker.create_partitions("grow", 9)
        assert broker.partitions_for("grow") == 2
        live = sorted(n for n in os.listdir(broker.data_dir)
                      if n.startswith(("big-", "grow-")) and not n.endswith("-delete"))
        assert live == ["grow-0", "grow-1"]
        assert broker.logs.get_log("big", 0) is None and broker.logs.get_log("grow", 2) is None
        monkeypatch.setattr(broker.logs, "get_or_create_log", real)
        assert len(broker.create_topic("big", partitions=8).partitions) == 8
        assert len(broker.create_partitions("grow", 9).partitions) == 9


@pytest.mark.parametrize("factor", [0, -1, -7])
def test_a_replication_factor_below_one_says_so(tmp_path: Path, factor: int) -> None:
    with pylogq.Broker(str(tmp_path / "data")) as broker:
        with pytest.raises(errors.InvalidReplicationFactorError, match="must be at least 1, got %d" % factor):
            broker.create_topic("t", replication_factor=factor)


def test_metadata_auto_creates_in_bounded_steps_while_others_are_answered(
        served: Tuple[pylogq.Broker, Tuple[str, int]]) -> None:
    """One Metadata request naming 500 new topics (five times the bound): created off the loop, at most
    MAX_AUTO_CREATE_PER_REQUEST a request (the rest LEADER_NOT_AVAILABLE, retried),
    while a probe is answered: some probe starts and ends while one creating request is
    out. (Were the creations on the loop, a probe could not end before the request they
    answer: its requests would wait for the loop, which answers the creator first.)"""
    broker, address = served
    names = ["auto-%04d" % i for i in range(500)]
    creator = _connect(address, timeout_s=120.0)
    rounds: List[Dict[str, int]] = []
    round_spans: List[Tuple[float, float]] = []
    probe_spans: List[Tuple[float, float]] = []

    def create_all() -> None:
        while True:
            started = time.monotonic()
            codes = _metadata(creator, names, auto_create=True, timeout_s=120.0)
            round_spans.append((started, time.monotonic()))
            rounds.append(codes)
            if all(code == 0 for code in codes.values()):
                return
            assert set(codes.values()) <= {0, LEADER_NOT_AVAILABLE}, set(codes.values())

    creating = _Call(create_all)
    try:
        while creating.is_alive() or not probe_spans:
            started = time.monotonic()
            _probe(address, "probe")
            probe_spans.append((started, time.monotonic()))
            creating.join(0.05)  # a client's pace, not back to back: the creations need the CPU too
        creating.outcome()
    finally:
        creator.close()
    first = rounds[0]
    assert sum(1 for code in first.values() if code == 0) == MAX_AUTO_CREATE_PER_REQUEST
    assert len(rounds) == len(names) // MAX_AUTO_CREATE_PER_REQUEST
    assert set(broker.list_topics()) >= set(names)
    inside = [(p, r) for p in probe_spans for r in round_spans if r[0] < p[0] and p[1] < r[1]]
    assert inside, "no probe was answered while a creating request was out: %s %s" % (probe_spans, round_spans)


STRESS_ROUNDS = 40
STRESS_ANSWER_S = 10.0  # a probe on a loaded 2-core machine; a stuck loop never answers


def test_topic_churn_with_background_work_keeps_the_broker_answering(tmp_path: Path) -> None:
    """Creates, deletes, added partitions and config changes from two clients while the
    cleaner compacts, retention deletes segments and flushes run (all on short periods):
    every probe is answered, no lock-order cycle stops the broker, and the logs the churn
    leaves read back whole."""
    broker = pylogq.Broker(str(tmp_path / "data"), num_partitions=2, log_cleaner_backoff_ms=5,
                           log_retention_check_interval_ms=20, log_flush_scheduler_interval_ms=10,
                           log_cleaner_threads=2)
    small = {"segment.bytes": "2048", "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
             "flush.ms": "5"}
    try:
        address = broker.serve()
        broker.create_topic("probe")
        failures: List[BaseException] = []

        def churn(worker: int) -> None:
            conn = _connect(address, timeout_s=60.0)
            try:
                for n in range(STRESS_ROUNDS):
                    name = "churn-%d-%d" % (worker, n)
                    response = conn.request(ApiKey.CREATE_TOPICS, {"topics": [
                        {"name": name, "num_partitions": 2, "replication_factor": 1, "assignments": [],
                         "configs": [{"name": k, "value": v} for k, v in small.items()]}],
                        "timeout_ms": 30000, "validate_only": False}, timeout_s=60.0)
                    assert response["topics"][0]["error_code"] == 0, response
                    for i in range(40):
                        batch = build_batch([b"v%d" % j for j in range(20)],
                                            keys=[b"k%d" % (j % 5) for j in range(20)])
                        broker.produce(name, i % 2, batch)
                    response = conn.request(ApiKey.CREATE_PARTITIONS, {"topics": [
                        {"name": name, "count": 3, "assignments": None}], "timeout_ms": 30000,
                        "validate_only": False}, timeout_s=60.0)
                    assert response["results"][0]["error_code"] == 0, response
                    response = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {"resources": [
                        {"resource_type": 2, "resource_name": name, "configs": [
                            {"name": "retention.bytes", "config_operation": 0, "value": "4096"}]}],
                        "validate_only": False}, timeout_s=60.0)
                    assert response["responses"][0]["error_code"] == 0, response
                    if n % 3 != 2:  # some stay, to be read back at the end
                        assert _delete_topics(conn, [name]) == {name: 0}
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                failures.append(exc)
            finally:
                conn.close()

        workers = [threading.Thread(target=churn, args=(w,), daemon=True) for w in range(2)]
        for w in workers:
            w.start()
        probes = 0
        while any(w.is_alive() for w in workers):
            conn = _connect(address, timeout_s=STRESS_ANSWER_S)
            try:
                assert _metadata(conn, None, timeout_s=STRESS_ANSWER_S)["probe"] == 0
                offset = _produce(conn, "probe", b"probe", timeout_s=STRESS_ANSWER_S)
                assert _fetch_code(conn, "probe", offset, timeout_s=STRESS_ANSWER_S) == 0
            finally:
                conn.close()
            probes += 1
            workers[0].join(0.05)
        assert not failures, failures
        assert probes > 1
        kept = [t for t in broker.list_topics() if t.startswith("churn-")]
        assert len(kept) == 2 * len([n for n in range(STRESS_ROUNDS) if n % 3 == 2])
        for name in kept:
            assert broker.partitions_for(name) == 3
            assert broker.describe_configs(name)["retention.bytes"][0] == "4096"
            for p in range(3):
                end = broker.list_offsets(name, p, -1)[0]
                start = broker.list_offsets(name, p, -2)[0]
                assert 0 <= start <= end
                assert end == (400 if p < 2 else 0)
                if start < end:
                    assert _read_all(broker, name, p, start) == end
    finally:
        broker.close()


def _read_all(broker: pylogq.Broker, topic: str, partition: int, offset: int) -> int:
    """Fetch from ``offset`` to the end; -> the offset after the last record read."""
    from pylogq.records import iter_batches

    next_offset = offset
    while True:
        result = broker.fetch([(topic, partition, next_offset, 1 << 20)], max_wait_ms=0)[(topic, partition)]
        assert result.error_code == 0, result
        data = result.records.read() if result.records is not None else b""
        if not data:
            return next_offset
        for header in iter_batches(data):
            next_offset = header.last_offset + 1
