"""``write_topic``: a DataFrame's rows to a topic, through pylogq's producer in each Spark task.

The columns are those Spark's Kafka sink accepts: ``value`` (binary or
string, required; null is a tombstone), ``key`` (binary or string), ``headers``
(``array<struct<key: string, value: binary>>``), ``partition`` (int; null:
the default partitioner, murmur2 of the key as in Kafka, sticky for keyless
records) and ``topic`` (string; the ``topic`` argument, when given, wins).
Other columns are ignored.

Each task opens one :class:`pylogq.Producer` to ``target`` and sends its rows
in bulk (``send_batch``: whole batches built in one call, waited for), so a
send that fails after the producer's retries fails the task and Spark retries
it. As with Spark's Kafka sink, delivery is at least once: a retried task
sends its rows again.

Exactly once (``exactly_once=True``): each task writes its rows in one Kafka
transaction, so ``read_committed`` readers see a task's rows whole or not at
all. The task's transactional id is ``<base>-<partition id>``
(``<base>-<batch id>-<partition id>`` for a micro-batch), where the base is
the caller's ``transactional_id`` or a fresh id per :func:`write_topic` call,
never the attempt number: a retried or speculative attempt of a task takes
the same id, and its ``init_transactions`` fences the earlier attempt's
producer and aborts the transaction that attempt left open, whose rows
read_committed readers then never see.

The task does not commit: it sends every row, waits for them all to be
acknowledged, and returns its transaction's producer id and epoch
(:meth:`pylogq.Producer.prepare_transaction`); the driver commits each
(EndTxn) once Spark accepted every task, and aborts what a failed job left
open. A task cannot commit by itself safely: when an operator before it in
the same task fails (a UDF, a read), Spark shuts the input of the task's
Python worker, which sees the end of a clean Arrow stream, its rows so far
looking like all of them; a commit there would keep a failed attempt's rows
beside its retry's.

The rows reach the task as Arrow batches (``mapInArrow``) rather than pickled
``Row`` objects (``foreachPartition``): Arrow is several times cheaper per row,
and each task reports how many records it wrote.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from ..errors import ConfigError, InvalidArgumentError

__all__ = ["write_topic"]

_ARRAY_OF_HEADERS = "array<struct<key:string,value:binary>>"
_RESULT_DDL = "records BIGINT"
#: An exactly-once task's result: its count and the open transaction for the driver to commit.
_PREPARED_DDL = "records BIGINT, transactional_id STRING, producer_id BIGINT, producer_epoch INT, started BOOLEAN"
#: An exactly-once write's transaction timeout unless the caller sets one: Kafka's largest by default
#: (``transaction.max.timeout.ms``), since every task's transaction stays open until the job ends.
_EXACTLY_ONCE_TIMEOUT_MS = 900000
#: The local property Spark's micro-batch execution sets on its driver thread to the batch's id.
_BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: Seconds the driver spends on aborting, after a failed job, the transactions its tasks left open.
_CLEANUP_TIMEOUT_S = 30.0

log = logging.getLogger("pylogq.spark")


def _check_columns(df: Any, topic: Optional[str]) -> List[str]:
    """The SQL expressions selecting the sink columns of ``df``; a bad or missing column raises ValueError."""
    types: Dict[str, str] = {}
    for field in df.schema.fields:
        types[field.name.lower()] = field.dataType.simpleString()
    if "value" not in types:
        raise InvalidArgumentError("write_topic needs a 'value' column (binary or string); the DataFrame has: %s"
                                   % ", ".join(df.columns))
    exprs = []
    for name in ("key", "value"):
        kind = types.get(name)
        if kind is None:
            continue
        if kind not in ("binary", "string"):
            raise InvalidArgumentError("column %r must be binary or string, not %s" % (name, kind))
        exprs.append("CAST(`%s` AS BINARY) AS %s" % (name, name))
    kind = types.get("headers")
    if kind is not None:
        if kind.replace(" ", "") != _ARRAY_OF_HEADERS:
            raise InvalidArgumentError("column 'headers' must be %s, not %s" % (_ARRAY_OF_HEADERS, kind))
        exprs.append("headers")
    kind = types.get("partition")
    if kind is not None:
        if kind not in ("int", "smallint", "tinyint", "bigint"):
            raise InvalidArgumentError("column 'partition' must be an int, not %s" % kind)
        exprs.append("CAST(`partition` AS INT) AS partition")
    if topic is None:
        kind = types.get("topic")
        if kind is None:
            raise InvalidArgumentError("no topic: pass topic= or give the DataFrame a 'topic' column")
        if kind != "string":
            raise InvalidArgumentError("column 'topic' must be a string, not %s" % kind)
        exprs.append("topic")
    return exprs


def task_transactional_id(base: str, partition: int) -> str:
    """The transactional id of the task writing Spark partition ``partition`` with ids of ``base``:
    every attempt of the task has it, so each fences the one before."""
    return "%s-%d" % (base, partition)


class _TopicSender:
    """The function each task runs: Arrow batches of rows in, one row with the count of records sent out.

    Picklable by reference (a module-level class); the producer is opened in
    the task, after the function reached the worker. With a
    ``transactional_base`` the task's rows go in one transaction
    (:func:`task_transactional_id`), left open for the driver to commit once
    they are all acknowledged, and aborted when the task fails first.
    """

    def __init__(self, target: str, topic: Optional[str], configs: Dict[str, Any],
                 transactional_base: Optional[str] = None) -> None:
        self.target = target
        self.topic = topic
        self.configs = configs
        self.transactional_base = transactional_base

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        from .splits import _pyarrow

        pa = _pyarrow()
        if self.transactional_base is None:
            sent = self._send_all(batches)
            yield pa.RecordBatch.from_pydict({"records": pa.array([sent], pa.int64())})
            return
        sent, prepared = self._send_in_transaction(batches)
        yield pa.RecordBatch.from_pydict({
            "records": pa.array([sent], pa.int64()),
            "transactional_id": pa.array([prepared.transactional_id], pa.string()),
            "producer_id": pa.array([prepared.producer_id], pa.int64()),
            "producer_epoch": pa.array([prepared.producer_epoch], pa.int32()),
            "started": pa.array([prepared.started], pa.bool_()),
        })

    def _send_all(self, batches: Iterable[Any]) -> int:
        from ..client.producer import Producer

        producer = Producer(bootstrap_servers=self.target, **self.configs)
        sent = 0
        try:
            for batch in batches:
                sent += self._send(producer, batch)
            producer.flush()
        finally:
            producer.close()
        return sent

    def _send_in_transaction(self, batches: Iterable[Any]) -> Tuple[int, Any]:
        """Every row of the task in one transaction of the task's transactional id, left open:
        -> (rows sent, the :class:`~pylogq.client.producer.PreparedTransaction` to commit).

        ``init_transactions`` comes first, before the rows are read, even for a
        task with none: it fences an earlier attempt of this task that may still
        be running and aborts the transaction it left open. On any failure the
        transaction is aborted (when the producer can still tell the coordinator
        so; a later attempt, the driver, or the coordinator's timeout aborts it
        otherwise).
        """
        from pyspark import TaskContext

        from ..client.producer import Producer

        assert self.transactional_base is not None
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        transactional_id = task_transactional_id(self.transactional_base, partition)
        producer = Producer(bootstrap_servers=self.target, transactional_id=transactional_id, **self.configs)
        sent = 0
        try:
            producer.init_transactions()
            producer.begin_transaction()
            try:
                for batch in batches:
                    sent += self._send(producer, batch)
                prepared = producer.prepare_transaction()
            except BaseException:
                _abort_quietly(producer, transactional_id)
                raise
        finally:
            producer.close()  # (leaves a prepared transaction open for the driver; aborts one that is not)
        return sent, prepared

    def _send(self, producer: Any, batch: Any) -> int:
        n = batch.num_rows
        if n == 0:
            return 0
        names = batch.schema.names
        values = batch.column(names.index("value")).to_pylist()
        keys = batch.column(names.index("key")).to_pylist() if "key" in names else None
        headers: Optional[List[Any]] = None
        if "headers" in names:
            headers = [None if hs is None else [(h["key"], h["value"]) for h in hs]
                       for hs in batch.column(names.index("headers")).to_pylist()]
        partitions = batch.column(names.index("partition")).to_pylist() if "partition" in names else None
        topics = batch.column(names.index("topic")).to_pylist() if self.topic is None else None
        # Rows go out in groups of one (topic, partition), each in its input order.
        groups: Dict[Tuple[str, Optional[int]], List[int]] = {}
        for i in range(n):
            topic = self.topic if topics is None else topics[i]
            if topic is None:
                raise InvalidArgumentError("row %d has a null topic and write_topic was given no topic=" % i)
            groups.setdefault((topic, None if partitions is None else partitions[i]), []).append(i)
        if len(groups) == 1:
            (topic, partition), = groups
            producer.send_batch(topic, values, keys, partition=partition, headers=headers)
            return n
        for (topic, partition), rows in groups.items():
            producer.send_batch(topic, [values[i] for i in rows], None if keys is None else [keys[i] for i in rows],
                                partition=partition, headers=None if headers is None else [headers[i] for i in rows])
        return n


def _abort_quietly(producer: Any, transactional_id: str) -> None:
    """Abort ``producer``'s transaction if it still can; a failure here is logged, not raised (the
    error being handled is the one to report, and the next ``init_transactions`` of the id, or
    the coordinator's timeout, aborts it)."""
    try:
        producer.abort_transaction()
    except Exception as exc:  # (fenced, coordinator gone, producer in a fatal state)
        log.warning("write_topic: could not abort the transaction of %s: %s", transactional_id, exc)


def write_topic(df: Any, target: str, topic: Optional[str] = None, acks: Any = "all", exactly_once: bool = False,
                transactional_id: Optional[str] = None, batch_id: Optional[int] = None,
                **producer_configs: Any) -> int:
    """Send the rows of ``df`` to ``topic`` at the broker ``target`` ("host:port,..."); -> records sent.

    Runs as a Spark job, one producer per task, ``acks="all"`` by default;
    ``producer_configs`` are :class:`pylogq.Producer`'s keyword arguments
    (``compression_type``, ``linger_ms``, ...). A failed send fails its task
    (Spark retries it, so delivery is at least once). Without ``topic`` each
    row names its own in a ``topic`` column.

    ``exactly_once=True``: each task writes its rows in one transaction
    (idempotent, ``acks="all"``), which the driver commits once Spark
    accepted every task, so a ``read_committed`` reader sees each row once
    however often Spark ran a task. The transactional ids are ``<transactional_id>-<partition id>``:
    give ``transactional_id`` to name the write (it must be unique among
    writes running at once, and be the same when the same write is run
    again, as a streaming query's ``foreachBatch`` runs a batch again after a
    restart), else a fresh id is made for this call. ``batch_id`` (a
    ``foreachBatch`` function's second argument; taken from Spark's
    micro-batch when the call is made in one) joins the id:
    ``<transactional_id>-<batch_id>-<partition id>``. A retried or
    speculative task attempt fences the earlier attempt and aborts its
    transaction; when the job fails, the driver aborts what its tasks left
    open. The transactions stay open until the job ends, so their timeout
    (``transaction_timeout_ms``) is 15 minutes unless given, Kafka's largest
    by default. Committing is one EndTxn per task: a driver that dies among
    them leaves the write partly committed (the rest is aborted by timeout,
    or at once by the same write run again with the same id), and a
    transaction the coordinator aborted first (its timeout passed, or a
    speculative copy of its task fenced it) raises PylogqError naming it,
    once the others are committed.
    """
    if not isinstance(target, str) or not target.strip():
        raise InvalidArgumentError("target must be a bootstrap address 'host:port[,host:port...]', not %r" % (target,))
    if topic is not None and (not isinstance(topic, str) or not topic):
        raise InvalidArgumentError("topic must be a non-empty str, not %r" % (topic,))
    from ..client.producer import DEFAULT_CONFIG

    unknown = sorted(set(producer_configs) - set(DEFAULT_CONFIG))
    if unknown:
        raise ConfigError("unknown producer configuration%s: %s"
                          % ("s" if len(unknown) > 1 else "", ", ".join(unknown)))
    base: Optional[str] = None
    if exactly_once:
        base = _transactional_base(df, acks, transactional_id, batch_id, producer_configs)
    elif transactional_id is not None or batch_id is not None:
        raise ConfigError("transactional_id and batch_id name the transactions of an exactly_once write: "
                          "pass exactly_once=True")
    configs = dict(producer_configs, acks=acks)
    if base is not None:
        configs.setdefault("transaction_timeout_ms", _EXACTLY_ONCE_TIMEOUT_MS)
    exprs = _check_columns(df, topic)
    selected = df.selectExpr(*exprs)
    sender = _TopicSender(target.strip(), topic, configs, base)
    jobs_before = _job_ids(df) if base is not None else None
    try:
        rows = selected.mapInArrow(sender, _RESULT_DDL if base is None else _PREPARED_DDL).collect()
    except BaseException:
        if base is not None:
            deadline = time.monotonic() + _CLEANUP_TIMEOUT_S
            _wait_for_tasks_to_end(df, jobs_before, deadline)
            try:
                partitions: Optional[int] = int(selected.rdd.getNumPartitions())
            except Exception:  # (a session that cannot say: the coordinator's timeout aborts them)
                partitions = None
            if partitions is not None:
                _abort_left_open(target.strip(), base, partitions, configs, deadline)
        raise
    if base is not None:
        _commit_all(target.strip(), rows, configs)
    return sum(int(r["records"]) for r in rows)


def _commit_all(target: str, rows: List[Any], configs: Dict[str, Any]) -> None:
    """Commit the transaction of every task Spark accepted (EndTxn with its producer id and epoch),
    retrying what the coordinator answers as retriable until ``max_block_ms``; each is tried
    whatever became of the others, and those that could not be committed raise PylogqError
    naming them at the end."""
    from ..client.transaction_manager import retry_retriable
    from ..client.transport import TCP_OPTIONS, connect
    from ..errors import BrokerError, PylogqError

    wanted = [r for r in rows if r["started"]]
    if not wanted:
        return
    transport = connect(bootstrap_servers=target, **{k: v for k, v in configs.items() if k in TCP_OPTIONS})
    backoff = configs.get("retry_backoff_ms", 100) / 1000.0
    max_block_s = configs.get("max_block_ms", 60000) / 1000.0
    failed: List[str] = []
    try:
        for row in wanted:
            transactional_id, producer_id, epoch = (row["transactional_id"], int(row["producer_id"]),
                                                    int(row["producer_epoch"]))
            try:
                retry_retriable("EndTxn(commit) of transactional id %r" % transactional_id,
                                lambda: transport.end_txn(transactional_id, producer_id, epoch, True),
                                time.monotonic() + max_block_s, backoff)
            except BrokerError as exc:
                failed.append("%s (producer id %d, epoch %d): %s" % (transactional_id, producer_id, epoch, exc))
    finally:
        transport.close()
    if failed:
        raise PylogqError("write_topic: %d of %d tasks' transactions could not be committed, and their rows are not "
                          "visible to read_committed readers (the others were committed): %s"
                          % (len(failed), len(wanted), "; ".join(failed)))


def _transactional_base(df: Any, acks: Any, transactional_id: Optional[str], batch_id: Optional[int],
                        producer_configs: Dict[str, Any]) -> str:
    """The prefix of an exactly-once write's transactional ids, its settings checked on the driver."""
    if acks not in ("all", -1, "-1"):
        raise ConfigError("exactly_once needs acks='all' (idempotence, as Kafka requires), not acks=%r" % (acks,))
    if producer_configs.get("enable_idempotence", True) is False or producer_configs.get("retries") == 0:
        raise ConfigError("exactly_once needs idempotence: enable_idempotence=False and retries=0 cannot be used "
                          "with it")
    if transactional_id is not None and (not isinstance(transactional_id, str) or not transactional_id):
        raise ConfigError("transactional_id must be a non-empty str, not %r" % (transactional_id,))
    if batch_id is None:
        try:
            found = df.sparkSession.sparkContext.getLocalProperty(_BATCH_ID_PROPERTY)
        except Exception:  # (Spark Connect: no SparkContext here; pass batch_id)
            found = None
        batch_id = None if found is None else int(found)
    elif isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise ConfigError("batch_id must be a micro-batch id (an int >= 0), not %r" % (batch_id,))
    base = transactional_id or "pylogq-spark-%s" % uuid.uuid4().hex
    return base if batch_id is None else "%s-%d" % (base, batch_id)


def _job_ids(df: Any) -> Optional[Set[int]]:
    """The ids of the Spark jobs of this thread's job group so far (None when the session cannot
    say: Spark Connect)."""
    try:
        context = df.sparkSession.sparkContext
        group = context.getLocalProperty("spark.jobGroup.id")
        return set(context.statusTracker().getJobIdsForGroup(group))
    except Exception:
        return None


def _wait_for_tasks_to_end(df: Any, before: Optional[Set[int]], deadline: float) -> None:
    """Until no task of the jobs started since ``before`` runs (or ``deadline``): a failed job's
    other tasks are being killed when the failure reaches the driver, and one that began its
    transaction after the driver's abort would hold it open until its timeout."""
    if before is None:
        return
    try:
        context = df.sparkSession.sparkContext
        tracker = context.statusTracker()
        jobs = set(tracker.getJobIdsForGroup(context.getLocalProperty("spark.jobGroup.id"))) - before
        stages = [stage for job in jobs for stage in (getattr(tracker.getJobInfo(job), "stageIds", None) or ())]
        while time.monotonic() < deadline:
            infos = [tracker.getStageInfo(stage) for stage in stages]
            if not any(info is not None and info.numActiveTasks > 0 for info in infos):
                return
            time.sleep(0.05)
    except Exception as exc:  # (a status the session cannot give: go on with the abort)
        log.debug("write_topic: cannot follow the failed job's tasks: %s", exc)


def _abort_left_open(target: str, base: str, partitions: int, configs: Dict[str, Any], deadline: float) -> None:
    """After a failed exactly-once job: abort the transactions its ``partitions`` tasks may have
    left open, as the next attempt of each would (InitProducerId of the task's transactional id
    fences the task's producer and aborts its transaction), so read_committed readers do not wait
    for the coordinator's timeout. One connection for them all; each id is tried whatever became
    of the others, what the coordinator answers as retriable (CONCURRENT_TRANSACTIONS while it
    aborts) retried, until ``deadline``. Best effort: what it cannot end is logged and left to
    that timeout."""
    from ..client.transaction_manager import retry_retriable
    from ..client.transport import TCP_OPTIONS, connect

    timeout_ms = int(configs.get("transaction_timeout_ms", _EXACTLY_ONCE_TIMEOUT_MS))
    backoff = configs.get("retry_backoff_ms", 100) / 1000.0
    failed: List[str] = []
    unended = 0
    try:
        transport = connect(bootstrap_servers=target, **{k: v for k, v in configs.items() if k in TCP_OPTIONS})
    except Exception as exc:
        log.warning("write_topic: could not connect to abort the failed job's transactions (%s-*), left to "
                    "their timeout: %s", base, exc)
        return
    try:
        for partition in range(partitions):
            transactional_id = task_transactional_id(base, partition)
            if time.monotonic() >= deadline:
                unended += partitions - partition
                failed.append("%s-%d..%d: out of time" % (base, partition, partitions - 1))
                break
            try:
                retry_retriable("InitProducerId of transactional id %r" % transactional_id,
                                lambda: transport.init_producer_id(transactional_id, timeout_ms), deadline, backoff)
            except Exception as exc:  # (refused, or unreachable: the other ids are still tried)
                unended += 1
                failed.append("%s: %s" % (transactional_id, exc))
    finally:
        transport.close()
    if failed:
        log.warning("write_topic: %d of the failed job's %d transactions could not be aborted and are left to the "
                    "coordinator's timeout: %s", unended, partitions, "; ".join(failed))
