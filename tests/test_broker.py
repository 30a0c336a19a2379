"""pylogq.Broker: topics, produce, fetch with long-poll, offsets, configs, restarts."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from pylogq import Broker, errors, records
from pylogq.cluster.broker.broker import OFFSETS_TOPIC

from . import _compaction_restart as compaction_restart

TS = 1_700_000_000_000


def batch(values, keys=None, ts=TS):
    return bytes(records.build_batch(values, keys=keys, timestamps=ts))


@pytest.fixture
def broker(tmp_path):
    with Broker(str(tmp_path / "data"), group_initial_rebalance_delay_ms=0) as b:
        yield b


def fetched_values(result):
    cols = records.decode_columns(result.records.read())
    return [cols.value(i) for i in range(len(cols))]


def test_topics_create_list_describe_delete(broker):
    desc = broker.create_topic("events", partitions=3, config={"retention.ms": 1000, "cleanup_policy": "compact"})
    assert [p.partition for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader == broker.broker_id and p.isr == [broker.broker_id] for p in desc.partitions)
    assert desc.config == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert broker.list_topics() == ["events"]
    # __consumer_offsets is created on first use, as Kafka does.
    assert OFFSETS_TOPIC not in broker.list_topics(include_internal=True)
    assert broker.ensure_offsets_topic() == 0
    assert OFFSETS_TOPIC in broker.list_topics(include_internal=True)
    assert broker.describe_topic(OFFSETS_TOPIC).internal
    configs = broker.describe_configs("events")
    assert configs["retention.ms"] == ("1000", False) and configs["segment.bytes"][1] is True
    broker.delete_topic("events")
    assert broker.list_topics() == []
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        broker.describe_topic("events")


@pytest.mark.parametrize("name, error", [
    ("", errors.InvalidTopicError),
    ("x" * 250, errors.InvalidTopicError),
    ("bad name", errors.InvalidTopicError),
    ("..", errors.InvalidTopicError),
    (OFFSETS_TOPIC, errors.InvalidTopicError),
])
def test_topic_name_rules(broker, name, error):
    with pytest.raises(error):
        broker.create_topic(name)


def test_collisions_duplicates_and_bad_settings(broker):
    broker.create_topic("a.b")
    with pytest.raises(errors.InvalidTopicError, match="collides"):
        broker.create_topic("a_b")
    with pytest.raises(errors.TopicAlreadyExistsError):
        broker.create_topic("a.b")
    with pytest.raises(errors.InvalidPartitionsError):
        broker.create_topic("zero", partitions=0)
    with pytest.raises(errors.InvalidReplicationFactorError):
        broker.create_topic("rf", replication_factor=3)
    with pytest.raises(errors.InvalidConfigError, match="segment.byte"):
        broker.create_topic("cfg", config={"segment.byte": 100})
    with pytest.raises(errors.InvalidConfigError, match="retention.ms"):
        broker.create_topic("cfg", config={"retention.ms": "soon"})
    assert broker.list_topics() == ["a.b"]


def test_produce_fetch_round_trip_and_auto_create(broker):
    result = broker.produce("auto", 0, batch([b"a", b"b", b"c"]))
    assert (result.error_code, result.base_offset) == (0, 0)
    assert broker.partitions_for("auto") == 1  # num.partitions
    broker.produce("auto", 0, batch([b"d"]))
    fetched = broker.fetch([("auto", 0, 0, 1 << 20)], max_wait_ms=0)
    got = fetched[("auto", 0)]
    assert got.error_code == 0 and got.high_watermark == 4 and got.log_start_offset == 0
    assert fetched_values(got) == [b"a", b"b", b"c", b"d"]
    missing = broker.fetch([("auto", 5, 0, 100)], max_wait_ms=0)[("auto", 5)]
    assert missing.error_code == errors.UnknownTopicOrPartitionError.code
    out_of_range = broker.fetch([("auto", 0, 99, 100)], max_wait_ms=0)[("auto", 0)]
    assert out_of_range.error_code == errors.OffsetOutOfRangeError.code


def test_auto_create_can_be_disabled(tmp_path):
    with Broker(str(tmp_path / "d"), auto_create_topics_enable=False, group_initial_rebalance_delay_ms=0) as b:
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            b.produce("nope", 0, batch([b"x"]))


def test_fetch_long_poll_is_woken_by_a_produce(broker):
    """Its max_wait_ms is longer than the whole wait for it: an answer can only be the produce's."""
    broker.create_topic("t")
    results = {}

    def fetcher():
        results["r"] = broker.fetch([("t", 0, 0, 1 << 20)], max_wait_ms=600_000, min_bytes=1)

    thread = threading.Thread(target=fetcher, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while broker.fetch_purgatory.watched() != 1:  # parked: nothing to read yet
        assert time.monotonic() < deadline and thread.is_alive(), "the fetch did not park"
        time.sleep(0.005)
    broker.produce("t", 0, batch([b"wake"]))
    thread.join(60)
    assert not thread.is_alive(), "the fetch was not woken by the produce"
    assert fetched_values(results["r"][("t", 0)]) == [b"wake"]


def test_fetch_with_no_data_waits_without_spinning(broker):
    broker.create_topic("idle")
    cpu = time.thread_time()
    started = time.monotonic()
    result = broker.fetch([("idle", 0, 0, 1 << 20)], max_wait_ms=400, min_bytes=1)
    waited = time.monotonic() - started
    assert len(result[("idle", 0)].records) == 0
    assert waited >= 0.39
    assert time.thread_time() - cpu < 0.1  # asleep on a condition, not polling


def test_list_offsets_and_delete_records(broker):
    broker.create_topic("t")
    for i in range(5):
        broker.produce("t", 0, batch([b"v%d" % i] * 2, ts=TS + 1000 * i))
    assert broker.list_offsets("t", 0, -2) == (0, -1)
    assert broker.list_offsets("t", 0, -1)[0] == 10
    assert broker.list_offsets("t", 0, TS + 2500) == (6, TS + 3000)
    assert broker.list_offsets("t", 0, TS + 99_999) == (-1, -1)
    assert broker.delete_records("t", 0, 4) == 4
    assert broker.list_offsets("t", 0, -2)[0] == 4
    assert broker.fetch([("t", 0, 0, 100)], max_wait_ms=0)[("t", 0)].error_code == \
        errors.OffsetOutOfRangeError.code


def test_alter_configs_and_create_partitions(broker):
    broker.create_topic("t", partitions=2)
    broker.alter_configs("t", {"retention.ms": 5000})
    assert broker.describe_topic("t").config == {"retention.ms": "5000"}
    broker.alter_configs("t", {"segment.ms": 60000}, incremental=True)
    assert broker.describe_topic("t").config == {"retention.ms": "5000", "segment.ms": "60000"}
    broker.alter_configs("t", {"retention.ms": None}, incremental=True)
    assert broker.describe_topic("t").config == {"segment.ms": "60000"}
    with pytest.raises(errors.InvalidConfigError):
        broker.alter_configs("t", {"no.such.key": 1})
    desc = broker.create_partitions("t", 5)
    assert len(desc.partitions) == 5
    assert broker.produce("t", 4, batch([b"x"])).base_offset == 0
    with pytest.raises(errors.InvalidPartitionsError):
        broker.create_partitions("t", 3)


def test_topics_data_and_configs_survive_a_restart(tmp_path):
    path = str(tmp_path / "data")
    with Broker(path, group_initial_rebalance_delay_ms=0) as b:
        b.create_topic("kept", partitions=2, config={"retention.bytes": 123456})
        b.produce("kept", 1, batch([b"one", b"two"]))
        cluster = b.cluster_id
    with Broker(path, group_initial_rebalance_delay_ms=0) as b:
        assert b.cluster_id == cluster
        assert b.describe_topic("kept").config == {"retention.bytes": "123456"}
        assert b.partition("kept", 1).log.config.retention_bytes == 123456
        got = b.fetch([("kept", 1, 0, 1 << 20)], max_wait_ms=0)[("kept", 1)]
        assert fetched_values(got) == [b"one", b"two"]
    with pytest.raises(errors.ConfigError, match="broker.id"):
        Broker(path, broker_id=7)


def test_unknown_broker_config_is_an_error(tmp_path):
    with pytest.raises(errors.ConfigError, match="num.partition"):
        Broker(str(tmp_path / "d"), **{"num.partition": 3})
    with pytest.raises(errors.ConfigError, match="num.partitions"):
        Broker(str(tmp_path / "d"), num_partitions=0)


def test_producer_ids_are_unique_across_restarts(tmp_path):
    path = str(tmp_path / "data")
    with Broker(path, group_initial_rebalance_delay_ms=0) as b:
        first = [b.init_producer_id() for _ in range(3)]
    with Broker(path, group_initial_rebalance_delay_ms=0) as b:
        later = b.init_producer_id()
    assert [pid for pid, _ in first] == [0, 1, 2] and all(epoch == 0 for _, epoch in first)
    assert later[0] > 2
    with Broker(path, group_initial_rebalance_delay_ms=0) as b:
        pid, epoch = b.init_producer_id("txn")  # a transactional id's: from the same blocks
        assert pid > later[0] and epoch == 0
        assert b.init_producer_id("txn") == (pid, 1)


def _high_watermarks(log_dir):
    from pylogq.storage.checkpoint import REPLICATION_CHECKPOINT, OffsetCheckpoint

    return OffsetCheckpoint(str(log_dir / REPLICATION_CHECKPOINT)).read()


def test_high_watermarks_are_checkpointed_periodically_and_at_close(tmp_path):
    """replication-offset-checkpoint: Kafka's high watermark file, what file readers take as committed."""
    broker = Broker(str(tmp_path), **{"replica.high.watermark.checkpoint.interval.ms": 20})
    try:
        broker.create_topic("t", 2)
        broker.produce("t", 1, records.build_batch([b"a", b"b", b"c"]))
        deadline = time.monotonic() + 10
        while _high_watermarks(tmp_path).get(("t", 1)) != 3:
            assert time.monotonic() < deadline, "the high watermark was never checkpointed"
            time.sleep(0.01)  # polling a file the broker's scheduler writes, with a deadline
        broker.produce("t", 0, records.build_batch([b"d"]))
    finally:
        broker.close()
    marks = _high_watermarks(tmp_path)
    assert marks[("t", 0)] == 1 and marks[("t", 1)] == 3


def test_an_embedded_broker_starts_from_the_development_defaults(tmp_path):
    # Kafka's shipped single-node server.properties: a new group's first member is
    # answered at once, not after the 3 s that suit a production cluster.
    with Broker(str(tmp_path / "plain")) as b:
        assert b.config["group.initial.rebalance.delay.ms"] == 0
        assert b.group_coordinator.initial_rebalance_delay_ms == 0
    with Broker(str(tmp_path / "snake"), group_initial_rebalance_delay_ms=250) as b:
        assert b.group_coordinator.initial_rebalance_delay_ms == 250  # a key given in either spelling wins
    with Broker(str(tmp_path / "dotted"), **{"group.initial.rebalance.delay.ms": 250}) as b:
        assert b.group_coordinator.initial_rebalance_delay_ms == 250
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions=2\n")
    with Broker(str(tmp_path / "file"), config_file=str(properties)) as b:  # a file: Kafka's defaults
        assert b.group_coordinator.initial_rebalance_delay_ms == 3000
        assert b.config["num.partitions"] == 2
    with Broker(str(tmp_path / "kafka"), development_defaults=False) as b:
        assert b.group_coordinator.initial_rebalance_delay_ms == 3000


def test_an_embedded_group_consumer_gets_its_partitions_on_the_first_poll(tmp_path):
    from pylogq import Consumer

    with Broker(str(tmp_path / "data")) as b:
        b.create_topic("t", 2)
        b.produce("t", 0, batch([b"first"]))
        consumer = Consumer("t", broker=b, group_id="g", auto_offset_reset="earliest")
        try:
            polled = consumer.poll(timeout_ms=2500)  # under Kafka's 3 s delay this is empty
            assert {tp.partition for tp in consumer.assignment()} == {0, 1}
            assert [r.value for rs in polled.values() for r in rs] == [b"first"]
        finally:
            consumer.close()


def test_offsets_topic_is_made_once_on_first_group_use_and_kept_across_restarts(tmp_path):
    from pylogq import Consumer
    from pylogq.client.consumer import OffsetAndMetadata, TopicPartition

    path = str(tmp_path / "data")
    with Broker(path, offsets_topic_num_partitions=3) as b:
        b.create_topic("t", 1)
    with Broker(path, offsets_topic_num_partitions=3) as b:  # a restart does not make it either
        assert b.list_topics(include_internal=True) == ["t"] and not b.offsets_topic_ready()
        # Racing first users make it once.
        codes = []
        threads = [threading.Thread(target=lambda: codes.append(b.ensure_offsets_topic())) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert codes == [0] * 8 and b.partitions_for(OFFSETS_TOPIC) == 3
        consumer = Consumer(broker=b, group_id="g")
        consumer.commit({TopicPartition("t", 0): OffsetAndMetadata(5, "m", -1)})
        consumer.close()
    with Broker(path, offsets_topic_num_partitions=3) as b:  # loaded at start, not made again
        assert b.offsets_topic_ready()
        consumer = Consumer(broker=b, group_id="g")
        assert consumer.committed(TopicPartition("t", 0)) == 5
        consumer.close()


def test_close_answers_parked_fetches_and_deleting_a_topic_answers_its_own(broker):
    broker.create_topic("gone")
    broker.create_topic("stays")
    parked = {name: broker.fetch_async([(name, 0, 0, 1 << 20)], max_wait_ms=60_000, min_bytes=1,
                                    max_bytes=1 << 20)
              for name in ("gone", "stays")}
    assert broker.fetch_purgatory.watched() == 2
    broker.delete_topic("gone")
    assert parked["gone"].wait(10)
    assert parked["gone"].answer()[("gone", 0)].error_code == errors.UnknownTopicOrPartitionError.code
    assert not parked["stays"].completed
    broker.close()
    assert parked["stays"].wait(10)
    answer = parked["stays"].answer()[("stays", 0)]
    assert answer.error_code == errors.NotLeaderOrFollowerError.code and not parked["stays"].expired


def test_a_high_watermark_advance_completes_parked_fetches(broker):
    broker.create_topic("t")
    op = broker.fetch_async([("t", 0, 0, 1 << 20)], max_wait_ms=60_000, min_bytes=1,
                                    max_bytes=1 << 20)
    part = broker.partition("t", 0)
    # An append outside Broker.produce (a follower's, later) wakes nobody until the high
    # watermark moves: the partition's hook does that.
    part.single_replica = False
    part.append(batch([b"x"]))
    assert not op.completed
    part.update_high_watermark(1)
    assert op.wait(10) and fetched_values(op.answer()[("t", 0)]) == [b"x"]


def test_every_wait_of_a_broker_runs_on_one_timer_thread(tmp_path):
    before = {t.name for t in threading.enumerate()}
    with Broker(str(tmp_path / "data")) as b:
        assert b.group_coordinator._delay_timer is b.timer
        started = [t.name for t in threading.enumerate() if t.name not in before]
        assert started.count("pylogq-delayed-timer") == 1
        assert not [name for name in started if "coordinator" in name]
    assert "pylogq-delayed-timer" not in {t.name for t in threading.enumerate()} - before


# -- metadata files found damaged or missing on restart, and a full disk (issue 14) --------------


WRONG_VALUES = {"meta.properties": b"version=0\nbroker.id=zero\ncluster.id=abc\n",
                "pylogq-topics.json": b'{"version": 1, "topics": {"kept": {"partitions": "two", "config": {}}}}',
                "pylogq-producer-ids": b"-5\n"}


def _garbage(path, kind):
    garbage = {"binary": b"\x00\xff\xfe garbage \x80\x81", "empty": b"", "text": b"hello world\n",
               "wrong values": WRONG_VALUES.get(path.name)}[kind]
    with open(path, "wb") as f:
        f.write(garbage)


METADATA_FILES = ["meta.properties", "pylogq-topics.json", "pylogq-producer-ids"]


def _broker_data_dir(tmp_path):
    """A data dir with every metadata file written: a topic with records, a producer id handed out."""
    path = tmp_path / "data"
    with Broker(str(path), group_initial_rebalance_delay_ms=0) as b:
        b.create_topic("kept", 2)
        b.produce("kept", 1, batch([b"one", b"two"]))
        b.init_producer_id()
    return path


@pytest.mark.parametrize("kind", ["binary", "empty", "text", "wrong values"])
@pytest.mark.parametrize("name", METADATA_FILES)
def test_an_unreadable_metadata_file_stops_the_broker_naming_the_file_and_the_way_out(tmp_path, name, kind):
    path = _broker_data_dir(tmp_path)
    _garbage(path / name, kind)
    with pytest.raises(errors.CorruptMetadataError) as raised:
        Broker(str(path), group_initial_rebalance_delay_ms=0)
    message = str(raised.value)
    assert str(path / name) in message and "\n" not in message
    assert any(way in message for way in ("restore it from a backup", "write into it"))
    # Nothing was locked or half-started: once the file is dealt with as the message says, the broker starts.
    os.unlink(path / name)
    with Broker(str(path), group_initial_rebalance_delay_ms=0) as b:
        got = b.fetch([("kept", 1, 0, 1 << 20)], max_wait_ms=0)[("kept", 1)]
        assert fetched_values(got) == [b"one", b"two"]


@pytest.mark.parametrize("name", METADATA_FILES)
def test_pylogq_broker_prints_one_line_for_an_unreadable_metadata_file(tmp_path, name):
    path = _broker_data_dir(tmp_path)
    _garbage(path / name, "binary")
    done = subprocess.run([sys.executable, "-m", "pylogq.cli.broker", "--data-dir", str(path),
                           "--listeners", "PLAINTEXT://127.0.0.1:0"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("Error: cannot read %s: " % (path / name)), lines


def test_a_missing_topics_file_is_rebuilt_from_the_partition_directories(tmp_path, caplog):
    path = tmp_path / "data"
    with Broker(str(path), group_initial_rebalance_delay_ms=0) as b:
        b.create_topic("events", 3, config={"retention.bytes": 123456})
        b.create_topic("one", 1)
        for p in range(3):
            b.produce("events", p, batch([b"e%d" % p]))
        b.produce("one", 0, batch([b"only"]))
        b.ensure_offsets_topic()
        offsets_partitions = b.partitions_for(OFFSETS_TOPIC)
    os.unlink(path / "pylogq-topics.json")
    with Broker(str(path), group_initial_rebalance_delay_ms=0) as b:
        assert b.list_topics() == ["events", "one"]
        assert (b.partitions_for("events"), b.partitions_for("one")) == (3, 1)
        assert b.partitions_for(OFFSETS_TOPIC) == offsets_partitions
        for p in range(3):
            assert fetched_values(b.fetch([("events", p, 0, 1 << 20)], max_wait_ms=0)[("events", p)]) == [b"e%d" % p]
        assert fetched_values(b.fetch([("one", 0, 0, 1 << 20)], max_wait_ms=0)[("one", 0)]) == [b"only"]
        assert b.describe_topic("events").config == {}  # configs are not in the directories: defaults
        assert b.describe_configs(OFFSETS_TOPIC)["cleanup.policy"][0] == "compact"  # the broker knows its own
        assert b.partition(OFFSETS_TOPIC, 0).log.config.compact
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("pylogq-topics.json is missing" in w and "events (3 partitions)" in w for w in warnings), warnings
    with Broker(str(path), group_initial_rebalance_delay_ms=0) as b:  # written back: no warning the next time
        assert b.list_topics() == ["events", "one"]
    assert os.path.exists(path / "pylogq-topics.json")


def _produce_over_the_wire(wire, values):
    from .server.test_server import PRODUCE, produce_body

    response = wire.request(PRODUCE, 7, produce_body("t", values))
    answer = response["responses"][0]["partition_responses"][0]
    return answer["error_code"], answer["base_offset"]


def test_a_full_disk_answers_produce_with_kafka_storage_error_and_keeps_every_acknowledged_record(tmp_path):
    from ._filesystem import fill, small_tmpfs
    from .server.test_server import Wire

    with small_tmpfs(tmp_path / "disk", 8 * 1024 * 1024) as disk:
        data = str(disk / "data")
        settings = dict(group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=1)
        acked = []
        broker = Broker(data, **settings)
        try:
            broker.create_topic("t", 1)
            log = broker.partition("t", 0).log
            with Wire(broker.serve("127.0.0.1", 0)) as wire:
                for i in range(20):
                    values = [b"before-%d-%d-" % (i, j) + b"." * 200 for j in range(10)]
                    code, base = _produce_over_the_wire(wire, values)
                    assert (code, base) == (0, len(acked))
                    acked += values
                fill(disk / "filler")
                end, size = log.log_end_offset, os.path.getsize(log.active_segment.log_path)
                entries = log.active_segment.offset_index.entries
                for i in range(3):  # each larger than the free bytes of the last page
                    code, _ = _produce_over_the_wire(wire, [b"refused-%d-" % i + b"x" * 20_000])
                    assert code == errors.KafkaStorageError.code == 56
                    assert (log.log_end_offset, os.path.getsize(log.active_segment.log_path)) == (end, size)
                    assert log.active_segment.offset_index.entries == entries
                os.unlink(disk / "filler")
                for i in range(20):
                    values = [b"after-%d-%d-" % (i, j) + b"." * 2000 for j in range(10)]
                    code, base = _produce_over_the_wire(wire, values)
                    assert (code, base) == (0, len(acked))
                    acked += values
        finally:
            broker.close()
        with Broker(data, **settings) as again:
            got, offset = [], 0
            while offset < len(acked):
                result = again.fetch([("t", 0, offset, 1 << 20)], max_wait_ms=0)[("t", 0)]
                values = fetched_values(result)
                assert values, "nothing read at offset %d of %d" % (offset, len(acked))
                got += values
                offset += len(values)
            assert got == acked
            assert again.partition("t", 0).log.log_end_offset == len(acked)


def test_a_restart_cleans_compacted_logs_and_keeps_the_offset_an_open_transaction_would_hide(tmp_path):
    """The cleaner starts with the log manager, before the partitions open and replay their
    producers: a compacted topic and ``__consumer_offsets`` are cleaned, and the record of an
    offset commit whose transaction is open is not taken as committed, so the offset committed
    before it is still the group's once the transaction aborts (tests/_compaction_restart.py)."""
    path = tmp_path / "data"
    pid, epoch = compaction_restart.write_history(path)
    assert compaction_restart.cleaned(path) == {}
    with Broker(str(path), **compaction_restart.SETTINGS, **compaction_restart.CLEANER):
        compaction_restart.check_cleaned_history(compaction_restart.wait_until_cleaned(path))
    compaction_restart.abort_and_check(path, pid, epoch)
