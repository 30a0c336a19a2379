"""``pylogq-broker`` killed and stopped: acknowledged records survive, SIGTERM is clean.

The broker runs as a real process. Under acks=all load from confluent-kafka it is
killed with SIGKILL after some thousands of acknowledgements and restarted on the
same data directory: every record the client saw acknowledged must be at the
offset it was acknowledged with. SIGTERM instead must answer what is in flight,
exit 0 and leave the logs closed cleanly, so the next start runs no recovery. A restarted
broker's log cleaner, which starts before the partitions open, cleans the compacted logs and
takes no record of a transaction still open as committed.
"""

from __future__ import annotations

import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from pylogq.storage.checkpoint import CLEAN_SHUTDOWN_FILE

from .. import _compaction_restart as compaction_restart
from .test_server import FETCH, Wire, fetch_body, fetched_values

READY = re.compile(r"^pylogq-broker (\d+) ready on (\S+):(\d+)$")
START_TIMEOUT_S = 30.0
TOPIC = "crash"
PARTITIONS = 3
ACKED_BEFORE_KILL = 5000


class BrokerProcess:
    """``python -m pylogq.cli.broker`` on a data directory, its stderr kept in a file."""

    def __init__(self, data_dir: Path, log_path: Path, *args: str, sigint: Any = signal.SIG_DFL) -> None:
        """``sigint``: the disposition of SIGINT the broker starts with: by default as in a terminal
        (a suite started as a background job ignores SIGINT, and a child would inherit that)."""
        command = [sys.executable, "-m", "pylogq.cli.broker", "--data-dir", str(data_dir),
                   "--listeners", "PLAINTEXT://127.0.0.1:0",
                   "--override", "group.initial.rebalance.delay.ms=0",
                   "--override", "offsets.topic.num.partitions=2", *args]
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
        self.address = self._wait_ready()
        self.bootstrap = "%s:%d" % self.address

    def _wait_ready(self) -> Tuple[str, int]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not selector.select(deadline - time.monotonic()):
                    continue
                line = self.proc.stdout.readline().decode("utf-8", "replace").strip()
                match = READY.match(line)
                if match:
                    return match.group(2), int(match.group(3))
                if not line and self.proc.poll() is not None:
                    break
        self.kill()
        raise AssertionError("pylogq-broker did not get ready; its log:\n" + self.log())

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text("utf-8", "replace")

    def kill(self) -> None:
        """SIGKILL: no chance to flush, checkpoint or answer anything."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self._close()

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; -> the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("pylogq-broker ignored SIGTERM for %.0f s; its log:\n%s"
                                 % (timeout, self.log())) from None
        finally:
            self._close()

    def _close(self) -> None:
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


@pytest.fixture
def started(tmp_path: Path) -> Any:
    """Start ``pylogq-broker`` processes on ``tmp_path/data``; any left running are killed."""
    processes: List[BrokerProcess] = []

    def start(*args: str, sigint: Any = signal.SIG_DFL) -> BrokerProcess:
        broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", *args, sigint=sigint)
        processes.append(broker)
        return broker

    yield start
    for broker in processes:
        if broker.proc.poll() is None:
            broker.kill()


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        future.result(10)


def _read_all(bootstrap: str) -> Dict[Tuple[int, int], Tuple[bytes, bytes]]:
    """Every record of the topic: (partition, offset) -> (key, value)."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(PARTITIONS)])
        found: Dict[Tuple[int, int], Tuple[bytes, bytes]] = {}
        deadline = time.monotonic() + 30
        while len(found) < sum(ends.values()):
            assert time.monotonic() < deadline, "read %d of %d records" % (len(found), sum(ends.values()))
            for message in consumer.consume(1000, 0.2):
                assert message.error() is None, message.error()
                found[(message.partition(), message.offset())] = (message.key(), message.value())
        return found
    finally:
        consumer.close()


def test_kill_9_under_acks_all_load_keeps_every_acknowledged_record(started: Any) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker = started()
    _create_topic(broker.bootstrap)
    acked: Dict[Tuple[int, int], Tuple[bytes, bytes]] = {}
    failed: List[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failed.append(error)
            return
        acked[(message.partition(), message.offset())] = (message.key(), message.value())

    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2, "batch.num.messages": 200,
        "message.timeout.ms": 5000, "log_level": 0, "on_delivery": delivered})
    sent = 0
    deadline = time.monotonic() + 60
    while len(acked) < ACKED_BEFORE_KILL:
        assert time.monotonic() < deadline, "only %d records acknowledged" % len(acked)
        assert not failed, failed[:3]
        for _ in range(200):
            key = b"key-%d" % sent
            try:
                producer.produce(TOPIC, key=key, value=b"value-%d-" % sent + b"x" * (sent % 300))
            except BufferError:
                break
            sent += 1
        producer.poll(0.001)
    # Mid-load: more records are queued and in flight when the broker dies.
    for _ in range(500):
        producer.produce(TOPIC, key=b"key-%d" % sent, value=b"value-%d-" % sent)
        sent += 1
    producer.poll(0)
    broker.kill()
    seen_acked = len(acked)
    producer.purge()  # what was not acknowledged now never will be
    producer.flush(10)
    del producer
    assert seen_acked >= ACKED_BEFORE_KILL

    restarted = started()
    try:
        found = _read_all(restarted.bootstrap)
        missing = [(tp, kv) for tp, kv in acked.items() if found.get(tp) != kv]
        assert not missing, "%d of %d acknowledged records lost or changed, e.g. %s (found %s)" % (
            len(missing), len(acked), missing[:3], [found.get(tp) for tp, _ in missing[:3]])
        # Offsets stay dense: recovery kept whole batches only.
        for p in range(PARTITIONS):
            offsets = sorted(o for q, o in found if q == p)
            assert offsets == list(range(len(offsets)))
    finally:
        assert restarted.terminate() == 0
    assert "with recovery" in restarted.log(), "the restart after SIGKILL must run recovery"


def _log_lines(text: str, start: int) -> List[str]:
    return text[start:].splitlines()


def test_sigterm_answers_in_flight_requests_and_restart_needs_no_recovery(started: Any, tmp_path: Path) -> None:
    kafka = pytest.importorskip("kafka")
    broker = started()
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for i in range(100):
            producer.send(TOPIC, key=b"k%d" % i, value=b"v%d" % i)
        producer.flush(10)
    finally:
        producer.close()
    # The fetch may wait longer than the reader's socket timeout: its empty answer is the shutdown's.
    with Wire(broker.address, timeout=60) as wire:
        cid = wire.send(FETCH, 11, fetch_body(TOPIC, 100, max_wait_ms=120000))
        # The fetch is parked once a request behind it on another connection is answered.
        with Wire(broker.address) as other:
            other.request(18, 2)
        assert broker.terminate() == 0
        got, response = wire.receive(FETCH, 11)
        assert got == cid and fetched_values(response) == []
        assert wire.closed_by_server()
    first_run = broker.log()
    assert "stopped cleanly" in first_run
    assert "Traceback" not in first_run
    assert (tmp_path / "data" / CLEAN_SHUTDOWN_FILE).exists()

    restarted = started()
    try:
        second_run = _log_lines(restarted.log(), len(first_run))
        loaded = [line for line in second_run if "loaded log" in line]
        assert any("loaded log %s-0" % TOPIC in line for line in loaded), second_run
        recovering = [line for line in loaded if "with recovery" in line]
        assert not recovering, "a clean shutdown must need no recovery: %s" % recovering[:3]
        consumer = kafka.KafkaConsumer(bootstrap_servers=restarted.bootstrap, auto_offset_reset="earliest")
        values: List[bytes] = []
        try:
            consumer.assign([kafka.TopicPartition(TOPIC, 0)])
            deadline = time.monotonic() + 20
            while len(values) < 100 and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=200).values():
                    values += [m.value for m in batch]
        finally:
            consumer.close()
        assert values == [b"v%d" % i for i in range(100)]
    finally:
        assert restarted.terminate() == 0


def test_sigint_stops_cleanly_too(started: Any, tmp_path: Path) -> None:
    broker = started()  # SIGINT at its default, as Ctrl-C in a terminal sends it
    broker.proc.send_signal(signal.SIGINT)
    assert broker.proc.wait(30) == 0
    broker.terminate()
    assert "stopped cleanly" in broker.log()
    assert (tmp_path / "data" / CLEAN_SHUTDOWN_FILE).exists()


def test_sigint_ignored_at_start_stays_ignored(started: Any, tmp_path: Path) -> None:
    """A broker started as a background job of a script (SIGINT ignored, as the shell sets it)
    keeps serving through a SIGINT meant for the foreground; SIGTERM still stops it cleanly."""
    broker = started(sigint=signal.SIG_IGN)
    broker.proc.send_signal(signal.SIGINT)
    # Still answering after the signal (a request sent after it is read after it).
    with Wire(broker.address) as wire:
        wire.request(18, 2)
    assert broker.proc.poll() is None
    assert broker.terminate() == 0
    log = broker.log()
    assert "signal=SIGINT" not in log and "stopped cleanly" in log, log
    assert (tmp_path / "data" / CLEAN_SHUTDOWN_FILE).exists()


def test_a_restarted_broker_cleans_compacted_logs_and_keeps_the_offset_an_open_transaction_would_hide(
        started: Any, tmp_path: Path) -> None:
    """``pylogq-broker`` started on a data directory whose ``__consumer_offsets`` holds an offset
    commit of a transaction still open: its cleaner, which starts before the partitions open,
    cleans the compacted logs and keeps the offset committed before the transaction
    (tests/_compaction_restart.py)."""
    data = tmp_path / "data"
    pid, epoch = compaction_restart.write_history(data)
    broker = started(*["--override=%s=%s" % item for item in compaction_restart.CLEANER.items()])
    try:
        found = compaction_restart.wait_until_cleaned(data)
    finally:
        assert broker.terminate() == 0
    assert "Traceback" not in broker.log()
    compaction_restart.check_cleaned_history(found)
    compaction_restart.abort_and_check(data, pid, epoch)
