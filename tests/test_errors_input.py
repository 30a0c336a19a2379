"""Bad input to the public API raises a pylogq error that is also the builtin it used to be, naming the value."""

from __future__ import annotations

import pytest

import pylogq
from pylogq import errors
from pylogq.client.admin import AdminClient
from pylogq.client.consumer import Consumer
from pylogq.client.producer import Producer
from pylogq.cluster.contract import TopicPartition
from pylogq.cluster.partitioner import partition_for_key
from pylogq.records.legacy import LegacyRecordBatchBuilder
from pylogq.storage.index import OffsetIndex
from pylogq.storage.log import parse_dir_name


def check(raised: pytest.ExceptionInfo, builtin: type, *shown: str) -> None:
    """The error is a PylogqError and ``builtin``, and its message shows each of ``shown``."""
    exc = raised.value
    assert isinstance(exc, errors.PylogqError), type(exc)
    assert isinstance(exc, builtin), type(exc)
    for text in shown:
        assert text in str(exc), (text, str(exc))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with pylogq.Broker(str(tmp_path_factory.mktemp("data")), group_initial_rebalance_delay_ms=0) as b:
        b.create_topic("t", partitions=2)
        yield b


@pytest.fixture
def producer(broker):
    with Producer(broker=broker) as p:
        yield p


@pytest.fixture
def consumer(broker):
    with Consumer(broker=broker) as c:
        yield c


def test_the_classes():
    assert issubclass(errors.InvalidArgumentError, ValueError)
    assert issubclass(errors.InvalidArgumentTypeError, TypeError)
    assert issubclass(errors.InvalidArgumentTypeError, errors.InvalidArgumentError)
    for cls in (errors.InvalidArgumentError, errors.InvalidArgumentTypeError):
        assert issubclass(cls, errors.PylogqError) and not issubclass(cls, errors.BrokerError)
        assert cls.__name__ in errors.__all__


# ------------------------------------------------------------------ producer


@pytest.mark.parametrize("topic, shown", [(42, "42"), ("", "''"), (None, "None")])
def test_send_bad_topic(producer, topic, shown):
    with pytest.raises(TypeError) as raised:
        producer.send(topic, b"v")
    check(raised, TypeError, "topic", shown)


@pytest.mark.parametrize("partition", [-1, "0", True])
def test_send_bad_partition(producer, partition):
    with pytest.raises(ValueError) as raised:
        producer.send("t", b"v", partition=partition)
    check(raised, ValueError, "partition", repr(partition))


def test_send_unknown_partition(producer):
    with pytest.raises(ValueError) as raised:
        producer.send("t", b"v", partition=7)
    check(raised, ValueError, "7", "'t'")


def test_send_bad_headers(producer):
    with pytest.raises(TypeError) as raised:
        producer.send("t", b"v", headers={"h": b"1"})
    check(raised, TypeError, "headers", "dict")
    with pytest.raises(TypeError) as raised:
        producer.send("t", b"v", headers=[("h", "not bytes")])
    check(raised, TypeError, "headers", "('h', 'not bytes')")


def test_send_bad_key_and_value_types(producer):
    with pytest.raises(TypeError) as raised:
        producer.send("t", b"v", key="a str")
    check(raised, TypeError, "key", "str")
    with pytest.raises(TypeError) as raised:
        producer.send("t", 12)
    check(raised, TypeError, "value", "int")


# ------------------------------------------------------------------ consumer


def test_consumer_bad_seek_and_poll(consumer):
    tp = TopicPartition("t", 0)
    consumer.assign([tp])
    with pytest.raises(ValueError) as raised:
        consumer.seek(tp, -5)
    check(raised, ValueError, "offset", "-5")
    with pytest.raises(ValueError) as raised:
        consumer.poll(timeout_ms=-1)
    check(raised, ValueError, "timeout_ms", "-1")
    with pytest.raises(ValueError) as raised:
        consumer.poll(max_records=0)
    check(raised, ValueError, "max_records", "0")


def test_consumer_bad_assign_and_subscribe(consumer):
    with pytest.raises(TypeError) as raised:
        consumer.assign(["t"])
    check(raised, TypeError, "TopicPartition", "'t'")
    with pytest.raises(TypeError) as raised:
        consumer.subscribe([7])
    check(raised, TypeError, "topic", "7")
    with pytest.raises(TypeError) as raised:
        consumer.subscribe(["t"], listener=object())
    check(raised, TypeError, "listener", "object")


def test_consumer_bad_config(broker):
    with pytest.raises(ValueError) as raised:
        Consumer(broker=broker, auto_offset_reset="first")
    assert isinstance(raised.value, errors.ConfigError)
    check(raised, ValueError, "auto_offset_reset", "'first'")


# ------------------------------------------------------------------ admin


def test_admin_bad_arguments(broker):
    with AdminClient(broker=broker) as admin:
        with pytest.raises(TypeError) as raised:
            admin.delete_topics("t")
        check(raised, TypeError, "topics", "'t'")
        with pytest.raises(TypeError) as raised:
            admin.create_topics([3])
        check(raised, TypeError, "new_topics", "3")
        with pytest.raises(ValueError) as raised:
            admin.create_topics([])
        check(raised, ValueError, "new_topics", "[]")
        with pytest.raises(TypeError) as raised:
            admin.find_coordinator(5)
        check(raised, TypeError, "group_id", "5")
        with pytest.raises(TypeError) as raised:
            admin.create_partitions(["t"])
        check(raised, TypeError, "topic_partitions", "['t']")


# ------------------------------------------------------------------ lower layers


def test_partitioner_and_storage_arguments(tmp_path):
    with pytest.raises(ValueError) as raised:
        partition_for_key(b"k", 0)
    check(raised, ValueError, "num_partitions", "0")
    with pytest.raises(ValueError) as raised:
        parse_dir_name("/data/no_partition")
    check(raised, ValueError, "'no_partition'")
    with pytest.raises(ValueError) as raised:
        OffsetIndex(tmp_path / "x.index", -3)
    check(raised, ValueError, "base_offset", "-3")
    with pytest.raises(ValueError) as raised:
        LegacyRecordBatchBuilder(magic=2)
    check(raised, ValueError, "magic", "2")
    builder = LegacyRecordBatchBuilder(magic=1)
    with pytest.raises(TypeError) as raised:
        builder.append(0, timestamp=None, key=None, value="a str")
    check(raised, TypeError, "value", "str")


# ------------------------------------------------------------------ spark (no JVM: options and arguments only)


def test_spark_arguments():
    pytest.importorskip("pyarrow")
    from pylogq.spark import splits

    with pytest.raises(ValueError) as raised:
        splits.parse_columns(["nope"])
    check(raised, ValueError, "'nope'")
    with pytest.raises(ValueError) as raised:
        splits.plan_splits("/nowhere", "t", max_split_bytes=0)
    check(raised, ValueError, "max_split_bytes", "0")
    with pytest.raises(TypeError) as raised:
        splits.plan_splits(42, "t")
    check(raised, TypeError, "source", "42")


@pytest.mark.parametrize("options, shown", [
    ({"failOnDataLoss": "maybe"}, ("failOnDataLoss", "'maybe'")),
    ({"maxOffsetsPerTrigger": "0"}, ("maxOffsetsPerTrigger", "'0'")),
    ({"topic": "a,b"}, ("topic", "'a,b'")),
    ({"startingOffsetsByTimestampStrategy": "first"}, ("startingOffsetsByTimestampStrategy", "'first'")),
])
def test_spark_options(options, shown):
    pytest.importorskip("pyspark")
    from pylogq.spark.datasource import _Settings

    with pytest.raises(ValueError) as raised:
        _Settings(dict({"source": "/nowhere", "topic": "t"}, **options), streaming=False)
    assert isinstance(raised.value, errors.ConfigError)
    check(raised, ValueError, *shown)
