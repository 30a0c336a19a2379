"""An exactly-once write_topic job whose tasks each fail once, run in a Spark session of its own.

Run by tests/spark/test_exactly_once.py as a script:
``python _exactly_once_job.py BOOTSTRAP TOPIC ROWS TASKS TRANSACTIONAL_ID SCRATCH``. The suite's
session runs local[2], where Spark never retries a task; this one is local[2,4] with
``spark.task.maxFailures`` 4. Spark partition p of ``spark.range(ROWS)`` becomes rows
:func:`value_of` ``(p, id)`` for topic partition p. The first attempt of every task yields about half of its
rows (:func:`first_half`), waits until the broker holds some of them (the write_topic task
downstream sent them, in its open transaction: Spark hands it its input in batches, not
necessarily as they come), then raises; the second attempt yields them all. Prints
the count write_topic returned, as JSON, on its last line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Iterator

DEADLINE_S = 60.0
#: Rows per Arrow batch between the two Python stages of a task (Spark's
#: ``spark.sql.execution.arrow.maxRecordsPerBatch``): the write_topic stage gets its input in
#: batches this large, so the first attempt yields whole batches of them.
ARROW_BATCH = 1000


#: Bytes that pad every value: Spark buffers what passes between a task's Python stages, so the
#: first attempt's rows must be many and large enough to reach the write_topic stage at all.
PAD = 200


def value_of(partition: int, i: int) -> bytes:
    """Row ``i``'s value, written to topic partition ``partition``."""
    return b"%d-%d-" % (partition, i) + b"x" * PAD


def first_half(rows: int) -> int:
    """The rows a task of ``rows`` sends in its first attempt: about half, in whole Arrow batches."""
    return rows // 2 // ARROW_BATCH * ARROW_BATCH


def _high_watermark(bootstrap: str, topic: str, partition: int) -> int:
    from pylogq.client.consumer import Consumer, TopicPartition

    consumer = Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close(autocommit=False)


def failing_first_attempt(bootstrap: str, topic: str) -> Any:
    """The mapInArrow function making each task's rows, failing its first attempt half way."""

    def rows(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId()
        ids = [i for batch in batches for i in batch.column(0).to_pylist()]
        half = first_half(len(ids))
        first = context.attemptNumber() == 0
        step = ARROW_BATCH
        for start in range(0, half if first else len(ids), step):
            chunk = ids[start:min(start + step, half if first else len(ids))]
            yield pa.RecordBatch.from_pydict({
                "value": pa.array([value_of(partition, i) for i in chunk], pa.binary()),
                "partition": pa.array([partition] * len(chunk), pa.int32()),
            })
        if first:
            # The write_topic task downstream sends what it gets as it gets it: once the broker
            # holds some of this task's rows (its partition had none before), fail the attempt.
            deadline = time.monotonic() + DEADLINE_S
            while _high_watermark(bootstrap, topic, partition) < 1:
                if time.monotonic() > deadline:
                    raise TimeoutError("the first attempt's rows never reached the broker")
                time.sleep(0.05)
            raise RuntimeError("attempt 0 of task %d fails on purpose after sending some of its rows" % partition)

    return rows


def main() -> None:
    bootstrap, topic, rows, tasks, transactional_id, scratch = sys.argv[1:7]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from pylogq.spark import write_topic

    spark = (SparkSession.builder.master("local[2,4]").appName("pylogq-exactly-once")
             .config("spark.task.maxFailures", "4")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH))
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.local.dir", os.path.join(scratch, "local"))
             .config("spark.sql.warehouse.dir", os.path.join(scratch, "warehouse"))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        df = spark.range(int(rows), numPartitions=int(tasks)).mapInArrow(
            failing_first_attempt(bootstrap, topic), "value BINARY, partition INT")
        sent = write_topic(df, bootstrap, topic, exactly_once=True, transactional_id=transactional_id)
    finally:
        spark.stop()
    print(json.dumps({"sent": sent}))


if __name__ == "__main__":
    main()
