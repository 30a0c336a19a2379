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

The rows reach the task as Arrow batches (``mapInArrow``) rather than pickled
``Row`` objects (``foreachPartition``): Arrow is several times cheaper per row,
and each task reports how many records it wrote.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from ..errors import ConfigError, InvalidArgumentError

__all__ = ["write_topic"]

_ARRAY_OF_HEADERS = "array<struct<key:string,value:binary>>"
_RESULT_DDL = "records BIGINT"


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


class _TopicSender:
    """The function each task runs: Arrow batches of rows in, one row with the count of records sent out.

    Picklable by reference (a module-level class); the producer is opened in
    the task, after the function reached the worker.
    """

    def __init__(self, target: str, topic: Optional[str], configs: Dict[str, Any]) -> None:
        self.target = target
        self.topic = topic
        self.configs = configs

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        from ..client.producer import Producer
        from .splits import _pyarrow

        pa = _pyarrow()

        producer = Producer(bootstrap_servers=self.target, **self.configs)
        sent = 0
        try:
            for batch in batches:
                sent += self._send(producer, batch)
            producer.flush()
        finally:
            producer.close()
        yield pa.RecordBatch.from_pydict({"records": pa.array([sent], pa.int64())})

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


def write_topic(df: Any, target: str, topic: Optional[str] = None, acks: Any = "all", **producer_configs: Any) -> int:
    """Send the rows of ``df`` to ``topic`` at the broker ``target`` ("host:port,..."); -> records sent.

    Runs as a Spark job, one producer per task, ``acks="all"`` by default;
    ``producer_configs`` are :class:`pylogq.Producer`'s keyword arguments
    (``compression_type``, ``linger_ms``, ...). A failed send fails its task
    (Spark retries it, so delivery is at least once). Without ``topic`` each
    row names its own in a ``topic`` column.
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
    configs = dict(producer_configs, acks=acks)
    exprs = _check_columns(df, topic)
    rows = df.selectExpr(*exprs).mapInArrow(_TopicSender(target.strip(), topic, configs), _RESULT_DDL).collect()
    return sum(int(r["records"]) for r in rows)
