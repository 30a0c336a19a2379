"""write_topic(exactly_once=True): each task's rows in one transaction, whose id every attempt of the
task shares; a failed attempt's rows are aborted, so a read_committed read holds each row once.

The job runs in a Spark session of its own (tests/spark/_exactly_once_job.py: local[2,4],
``spark.task.maxFailures`` 4; the suite's local[2] session never retries a task), writing to a
broker served here. Every task's first attempt sends half of its rows and then fails; the retry
sends them all. A read_uncommitted read shows the failed attempts' rows (the failures were real);
a read_committed read shows every row exactly once. ``PYLOGQ_SPARK_EXACTLY_ONCE_ROWS`` sets the
size (default 100 000; the full check is 1 000 000).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List

import pytest

import pylogq
from pylogq.errors import ConfigError
from pylogq.spark.splits import plan_splits, read_split

from ._exactly_once_job import first_half, value_of
from .conftest import _java_problem

#: A Spark job of its own (seconds to start): the compiled pass only (tests/conftest.py); the
#: producer's twins it passes through are tested in both passes elsewhere.
pytestmark = pytest.mark.compiled_pass

ROWS = int(os.environ.get("PYLOGQ_SPARK_EXACTLY_ONCE_ROWS", "100000"))
TASKS = 4
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_exactly_once_job.py")


def _wait_committed(broker: pylogq.Broker, ids: List[str]) -> None:
    """Until the coordinator has written every transaction's markers: EndTxn answers once the
    commit is decided (PrepareCommit), and the markers follow, as in Kafka."""
    deadline = time.monotonic() + 30.0
    while True:
        states = [(d.error_code, d.state) for d in broker.describe_transactions(ids)]
        if states == [(0, "CompleteCommit")] * len(ids):
            return
        assert time.monotonic() < deadline, states
        time.sleep(0.02)


def _values(broker: pylogq.Broker, bootstrap: str, topic: str, isolation_level: str) -> Dict[int, List[bytes]]:
    """partition -> the values a read of the topic's files with ``isolation_level`` returns."""
    out: Dict[int, List[bytes]] = collections.defaultdict(list)
    for split in plan_splits(broker.data_dir, topic, bootstrap_servers=bootstrap, isolation_level=isolation_level):
        for batch in read_split(split, columns=["partition", "value"]):
            for p, v in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                out[p].append(v)
    return out


def test_a_task_failing_after_sending_part_of_its_rows_leaves_each_row_committed_once(
        pylogq_broker: pylogq.Broker, pylogq_bootstrap: str, tmp_path: Any) -> None:
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'pyspark>=4.0' pyarrow 'pandas<3')")
    problem = _java_problem()
    if problem:
        pytest.skip(problem)
    broker, bootstrap = pylogq_broker, pylogq_bootstrap
    broker.create_topic("once", TASKS)
    done = subprocess.run([sys.executable, JOB, bootstrap, "once", str(ROWS), str(TASKS), "spark-once",
                           str(tmp_path)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"sent": ROWS}

    _wait_committed(broker, ["spark-once-%d" % p for p in range(TASKS)])
    per_task = ROWS // TASKS
    expected = {p: sorted(value_of(p, i) for i in range(p * per_task, (p + 1) * per_task)) for p in range(TASKS)}
    committed = _values(broker, bootstrap, "once", "read_committed")
    assert {p: sorted(v) for p, v in committed.items()} == expected  # every row once, no aborted one
    # The failed attempts were real: their rows were written, then aborted.
    everything = _values(broker, bootstrap, "once", "read_uncommitted")
    for p in range(TASKS):
        counts = collections.Counter(everything[p])
        assert set(counts) == set(expected[p])
        twice = {v for v, n in counts.items() if n == 2}
        sent_first = range(p * per_task, p * per_task + len(twice))  # the first attempt sent a prefix of its half
        assert 0 < len(twice) <= first_half(per_task) and twice == {value_of(p, i) for i in sent_first}
        assert max(counts.values()) == 2
    # Each task's id served two attempts: the retry's init_transactions gave it a later epoch.
    described = broker.describe_transactions(["spark-once-%d" % p for p in range(TASKS)])
    assert all(d.producer_epoch >= 1 for d in described), described
    for p in range(TASKS):
        assert broker.partition("once", p).last_stable_offset == broker.partition("once", p).high_watermark


def test_exactly_once_settings_are_checked_on_the_driver(spark: Any) -> None:
    from pylogq.spark import write_topic

    df = spark.range(3).selectExpr("CAST(CAST(id AS STRING) AS BINARY) AS value")
    for kwargs, match in [({"acks": 1}, "acks='all'"), ({"enable_idempotence": False}, "idempotence"),
                          ({"retries": 0}, "idempotence"), ({"transactional_id": ""}, "non-empty"),
                          ({"batch_id": -1}, "batch_id"),
                          ({"batch_id": "7"}, "batch_id")]:
        with pytest.raises(ConfigError, match=match):
            write_topic(df, "127.0.0.1:9", "t", exactly_once=True, **kwargs)
    with pytest.raises(ConfigError, match="exactly_once=True"):
        write_topic(df, "127.0.0.1:9", "t", transactional_id="x")


def test_a_failed_job_leaves_no_transaction_open(spark: Any, pylogq_broker: pylogq.Broker,
                                                 pylogq_bootstrap: str) -> None:
    """The suite's session never retries, so the first attempt's failure fails the job: the driver
    aborts the transactions its tasks left open at once (read_committed readers are not held at
    the last stable offset until the transaction timeout)."""
    from pylogq.spark import write_topic

    from ._exactly_once_job import ARROW_BATCH, failing_first_attempt

    pylogq_broker.create_topic("doomed", 2)
    df = spark.range(40000, numPartitions=2).mapInArrow(failing_first_attempt(pylogq_bootstrap, "doomed"),
                                                       "value BINARY, partition INT")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH))
    try:
        with pytest.raises(Exception, match="fails on purpose"):
            write_topic(df, pylogq_bootstrap, "doomed", exactly_once=True, transactional_id="doomed")
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    # (The job fails with the first task to fail; the other may be killed before it sent a row.)
    assert sum(pylogq_broker.partition("doomed", p).high_watermark for p in range(2)) > 0
    for p in range(2):
        part = pylogq_broker.partition("doomed", p)
        assert part.last_stable_offset == part.high_watermark
    assert _values(pylogq_broker, pylogq_bootstrap, "doomed", "read_committed") == {}
    assert sum(map(len, _values(pylogq_broker, pylogq_bootstrap, "doomed", "read_uncommitted").values())) > 0


def test_a_micro_batchs_id_joins_the_transactional_ids(spark: Any, pylogq_broker: pylogq.Broker,
                                                       pylogq_bootstrap: str) -> None:
    from pylogq.spark import write_topic

    pylogq_broker.create_topic("batches", 2)
    df = spark.range(100, numPartitions=2).selectExpr("CAST(CAST(id AS STRING) AS BINARY) AS value")
    assert write_topic(df, pylogq_bootstrap, "batches", exactly_once=True, transactional_id="q", batch_id=7) == 100
    # In Spark's micro-batch thread (foreachBatch) the batch id is found without batch_id.
    spark.sparkContext.setLocalProperty("streaming.sql.batchId", "8")
    try:
        assert write_topic(df, pylogq_bootstrap, "batches", exactly_once=True, transactional_id="q") == 100
    finally:
        spark.sparkContext.setLocalProperty("streaming.sql.batchId", None)
    _wait_committed(pylogq_broker, ["q-%d-%d" % (b, p) for b in (7, 8) for p in range(2)])
    committed = _values(pylogq_broker, pylogq_bootstrap, "batches", "read_committed")
    assert sorted(v for vs in committed.values() for v in vs) == sorted([b"%d" % i for i in range(100)] * 2)


def test_the_driver_commits_every_transaction_it_can_and_names_the_others(pylogq_broker: pylogq.Broker,
                                                                          pylogq_bootstrap: str) -> None:
    """A task's transaction aborted before the driver commits it (a speculative copy of the task
    fenced it, or its timeout passed) is named; the other tasks' are committed all the same."""
    from pylogq.errors import PylogqError
    from pylogq.spark.writer import _commit_all

    pylogq_broker.create_topic("handed", 2)
    prepared = []
    for p in range(2):
        with pylogq.Producer(bootstrap_servers=pylogq_bootstrap, transactional_id="handed-%d" % p) as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send_batch("handed", [b"row-%d" % p], partition=p)
            prepared.append(producer.prepare_transaction())
    with pylogq.Producer(bootstrap_servers=pylogq_bootstrap, transactional_id="handed-0") as successor:
        successor.init_transactions()  # fences handed-0's first producer and aborts its transaction
    rows = [dict(t._asdict(), records=1) for t in prepared]
    with pytest.raises(PylogqError, match=r"1 of 2 tasks' transactions could not be committed.*handed-0 "):
        _commit_all(pylogq_bootstrap, rows, {})
    _wait_committed(pylogq_broker, ["handed-1"])
    assert _values(pylogq_broker, pylogq_bootstrap, "handed", "read_committed") == {1: [b"row-1"]}


class _RefusingTransport:
    """A real transport whose InitProducerId of one transactional id is refused; records each
    InitProducerId's transactional id."""

    def __init__(self, transport: Any, refused: str) -> None:
        self._transport = transport
        self.refused = refused
        self.inits: List[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def init_producer_id(self, transactional_id: Any = None, *args: Any) -> Any:
        from pylogq.errors import TransactionalIdAuthorizationFailedError

        self.inits.append(transactional_id)
        if transactional_id == self.refused:
            raise TransactionalIdAuthorizationFailedError("refused for the test")
        return self._transport.init_producer_id(transactional_id, *args)


def test_after_a_failed_job_the_driver_aborts_every_transaction_it_can(pylogq_broker: pylogq.Broker,
                                                                       pylogq_bootstrap: str, monkeypatch: Any) -> None:
    """One connection for every task's id; an id that cannot be aborted (refused here) does not
    keep the others' transactions open, and each is retried while the coordinator answers
    CONCURRENT_TRANSACTIONS (it aborts the transaction, then gives the id a new epoch)."""
    import pylogq.client.producer
    import pylogq.client.transport
    from pylogq.spark.writer import _abort_left_open

    tasks = 4
    ids = ["left-%d" % p for p in range(tasks)]
    pylogq_broker.create_topic("left", tasks)
    for p in range(tasks):
        with pylogq.Producer(bootstrap_servers=pylogq_bootstrap, transactional_id=ids[p]) as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send_batch("left", [b"row-%d" % p], partition=p)
            producer.prepare_transaction()  # handed out, as a task's: closing leaves it open
    assert [d.state for d in pylogq_broker.describe_transactions(ids)] == ["Ongoing"] * tasks
    transports: List[_RefusingTransport] = []
    real_connect = pylogq.client.transport.connect

    def connect(**kwargs: Any) -> Any:
        transports.append(_RefusingTransport(real_connect(**kwargs), "left-1"))
        return transports[-1]

    monkeypatch.setattr(pylogq.client.transport, "connect", connect)
    monkeypatch.setattr(pylogq.client.producer, "connect", connect)
    _abort_left_open(pylogq_bootstrap, "left", tasks, {"retry_backoff_ms": 10}, time.monotonic() + 30)

    [transport] = transports
    assert transport.inits.count("left-1") == 1
    assert all(transport.inits.count(i) >= 2 for i in ("left-0", "left-2", "left-3"))  # CONCURRENT_TRANSACTIONS first
    # Each InitProducerId succeeded once its transaction's abort was complete: the id has a new
    # epoch and no transaction.
    assert [d.state for d in pylogq_broker.describe_transactions(ids)] == ["Empty", "Ongoing", "Empty", "Empty"]
    for p in (0, 2, 3):
        part = pylogq_broker.partition("left", p)
        assert part.last_stable_offset == part.high_watermark == 2  # the row and its ABORT marker
    assert pylogq_broker.partition("left", 1).last_stable_offset == 0  # left to its timeout
