"""``pylogq produce`` / ``pylogq consume``: Kafka's console producer and consumer, on an in-process broker."""

from __future__ import annotations

import io
import re
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import pytest

from pylogq import Consumer, records
from pylogq.cli import console
from pylogq.cli.clients import Clients
from pylogq.cli.main import build_parser
from pylogq.client.admin import AdminClient
from pylogq.client.consumer import TopicPartition
from pylogq.errors import CommandError
from pylogq.records import codecs

from .conftest import Cli, run_cli, run_process

DEADLINE_S = 30.0


def stored(broker: Any, topic: str, partition: int = 0) -> List[Any]:
    """Every record of a partition as the broker holds it."""
    with Consumer(broker=broker, enable_auto_commit=False) as consumer:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: List[Any] = []
        while len(out) < end:
            for batch in consumer.poll(timeout_ms=1000).values():
                out.extend(batch)
        return out


def batch_codecs(broker: Any, topic: str) -> List[int]:
    region = broker.fetch([(topic, 0, 0, 1 << 20)], 0, 1, 1 << 20, "read_uncommitted")[(topic, 0)].records
    data = region.read()
    return [records.RecordBatch(data[i.position:i.position + i.size]).compression_type
            for i in records.iter_batches(data)]


def topic(cli: Cli, name: str = "t", partitions: int = 1) -> None:
    assert cli("topics", "--create", "--topic", name, "--partitions", str(partitions)).status == 0


# -- produce ---------------------------------------------------------------------------------------


def test_produce_sends_a_record_per_line_and_consume_prints_them(cli: Cli, broker: Any) -> None:
    topic(cli)
    sent = cli("produce", "--topic", "t", stdin=b"my test message 1\nmy test message 2\r\n\nlast, no newline")
    assert sent == (0, "", "")
    assert [r.value for r in stored(broker, "t")] == [b"my test message 1", b"my test message 2", b"",
                                                      b"last, no newline"]
    assert all(r.key is None for r in stored(broker, "t"))
    read = cli("consume", "--topic", "t", "--from-beginning", "--max-messages", "4")
    assert read == (0, "my test message 1\nmy test message 2\n\nlast, no newline\n",
                    "Processed a total of 4 messages\n")


def test_parse_key_with_a_separator(cli: Cli, broker: Any) -> None:
    topic(cli)
    sent = cli("produce", "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:",
               stdin=b"k1:v1\nk2:v:with:colons\n:empty key\n")
    assert sent.status == 0
    assert [(r.key, r.value) for r in stored(broker, "t")] == [
        (b"k1", b"v1"), (b"k2", b"v:with:colons"), (b"", b"empty key")]


def test_parse_key_default_separator_is_a_tab(cli: Cli, broker: Any) -> None:
    topic(cli)
    assert cli("produce", "--topic", "t", "--property", "parse.key=true", stdin=b"k\tv\n").status == 0
    assert [(r.key, r.value) for r in stored(broker, "t")] == [(b"k", b"v")]


def test_a_line_without_the_key_separator_stops_the_producer(cli: Cli, broker: Any) -> None:
    topic(cli)
    failed = cli("produce", "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:",
                 stdin=b"a:1\nno separator here\nb:2\n")
    assert failed.status == 1
    assert "No key separator found on line number 2: 'no separator here'" in failed.err
    assert [r.value for r in stored(broker, "t")] == [b"1"]  # the lines before it were sent


def test_ignore_error_sends_such_a_line_without_a_key(cli: Cli, broker: Any) -> None:
    topic(cli)
    sent = cli("produce", "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:",
               "--property", "ignore.error=true", stdin=b"a:1\nplain\n")
    assert sent.status == 0
    assert [(r.key, r.value) for r in stored(broker, "t")] == [(b"a", b"1"), (None, b"plain")]


def test_null_marker_makes_nulls(cli: Cli, broker: Any) -> None:
    topic(cli)
    sent = cli("produce", "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:",
               "--property", "null.marker=<null>", stdin=b"k:<null>\n<null>:v\n")
    assert sent.status == 0
    assert [(r.key, r.value) for r in stored(broker, "t")] == [(b"k", None), (None, b"v")]
    printed = cli("consume", "--topic", "t", "--from-beginning", "--max-messages", "2",
                  "--property", "print.key=true", "--property", "null.literal=NULL")
    assert printed.out == "k\tNULL\nNULL\tv\n"


def test_headers_round_trip(cli: Cli, broker: Any) -> None:
    topic(cli)
    sent = cli("produce", "--topic", "t", "--property", "parse.headers=true", "--property", "parse.key=true",
               "--property", "key.separator=|",
               stdin=b"h1:v1,h2:v2\tkey|value\n\tk2|no headers\nflag\tk3|header without value\n")
    assert sent.status == 0
    got = stored(broker, "t")
    assert [list(r.headers) for r in got] == [[("h1", b"v1"), ("h2", b"v2")], [], [("flag", None)]]
    assert [(r.key, r.value) for r in got] == [(b"key", b"value"), (b"k2", b"no headers"),
                                               (b"k3", b"header without value")]
    printed = cli("consume", "--topic", "t", "--from-beginning", "--max-messages", "3",
                  "--property", "print.headers=true", "--property", "print.key=true")
    assert printed.out == ("h1:v1,h2:v2\tkey\tvalue\nNO_HEADERS\tk2\tno headers\n"
                           "flag:null\tk3\theader without value\n")


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compression_type(cli: Cli, broker: Any, codec: str) -> None:
    topic(cli)
    lines = b"".join(b"line %d of some compressible text\n" % i for i in range(200))
    assert cli("produce", "--topic", "t", "--compression-type", codec, stdin=lines).status == 0
    assert set(batch_codecs(broker, "t")) == {codecs.codec_id(None if codec == "none" else codec)}
    assert [r.value for r in stored(broker, "t")] == lines.splitlines()


@pytest.mark.parametrize("acks", ["0", "1", "-1", "all"])
def test_acks(cli: Cli, broker: Any, acks: str) -> None:
    topic(cli)
    assert cli("produce", "--topic", "t", "--acks", acks, stdin=b"a\nb\n").status == 0
    assert [r.value for r in stored(broker, "t")] == [b"a", b"b"]


def test_producer_settings_from_properties_and_a_file(cli: Cli, broker: Any, tmp_path: Any) -> None:
    topic(cli)
    config = tmp_path / "producer.properties"
    config.write_text("# the seeds' style\ncompression.type=gzip\nbootstrap.servers=ignored:9092\n")
    sent = cli("produce", "--topic", "t", "--producer.config", str(config), "--producer-property", "linger.ms=5",
               stdin=b"x\n")
    assert sent.status == 0 and batch_codecs(broker, "t") == [codecs.GZIP]
    bad = cli("produce", "--topic", "t", "--producer-property", "no.such.setting=1", stdin=b"x\n")
    assert bad.status == 1 and "configuration: no.such.setting" in bad.err


def test_unknown_line_reader_property_is_refused(cli: Cli) -> None:
    bad = cli("produce", "--topic", "t", "--property", "parse.kye=true", stdin=b"x\n")
    assert bad.status == 1 and "unknown property parse.kye" in bad.err
    flag = cli("produce", "--topic", "t", "--property", "parse.key=yes", stdin=b"x\n")
    assert flag.status == 1 and "parse.key='yes': expected true or false" in flag.err


def test_a_record_too_large_is_reported_and_the_rest_sent(cli: Cli, broker: Any) -> None:
    topic(cli)
    big = b"x" * 2_000_000
    sent = cli("produce", "--topic", "t", stdin=b"small\n" + big + b"\nafter\n")
    assert sent.status == 1 and "Error: sending a message to topic t failed: MESSAGE_TOO_LARGE" in sent.err
    assert [r.value for r in stored(broker, "t")] == [b"small", b"after"]


def test_line_reader_unit() -> None:
    reader = console.LineReader({"parse.key": "true", "key.separator": "\\t"})
    assert reader.key_separator == b"\t"
    assert reader.read(b"k\tv") == (b"k", b"v", None)
    with pytest.raises(CommandError, match="must differ"):
        console.LineReader({"parse.key": "true", "parse.headers": "true"})


# -- consume ---------------------------------------------------------------------------------------


def test_print_key_and_timestamp_in_kafka_format(cli: Cli, broker: Any) -> None:
    topic(cli)
    cli("produce", "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:",
        stdin=b"user1:login\nuser2:logout\n")
    expected = "".join("CreateTime:%d\t%s\t%s\n" % (r.timestamp, r.key.decode(), r.value.decode())
                       for r in stored(broker, "t"))
    printed = cli("consume", "--topic", "t", "--from-beginning", "--max-messages", "2",
                  "--property", "print.key=true", "--property", "print.timestamp=true")
    assert printed.out == expected
    assert re.fullmatch(r"CreateTime:\d{13}\tuser1\tlogin\nCreateTime:\d{13}\tuser2\tlogout\n", printed.out)
    custom = cli("consume", "--topic", "t", "--from-beginning", "--max-messages", "2",
                 "--property", "print.key=true", "--property", "key.separator= => ",
                 "--property", "print.partition=true", "--property", "print.offset=true",
                 "--property", "print.value=false")
    assert custom.out == "Partition:0 => Offset:0 => user1\nPartition:0 => Offset:1 => user2\n"


class FakeRecord(NamedTuple):
    timestamp: int
    timestamp_type: int
    partition: int
    offset: int
    headers: Sequence[Tuple[str, Optional[bytes]]]
    key: Optional[bytes]
    value: Optional[bytes]


def test_formatter_timestamp_types() -> None:
    formatter = console.MessageFormatter({"print.timestamp": "true", "line.separator": "\\r\\n"})
    assert formatter.format(FakeRecord(5, 1, 0, 0, (), None, b"v")) == b"LogAppendTime:5\tv\r\n"
    assert formatter.format(FakeRecord(-1, -1, 0, 0, (), None, b"v")) == b"NO_TIMESTAMP\tv\r\n"
    assert formatter.format(FakeRecord(7, 0, 0, 0, (), None, None)) == b"CreateTime:7\tnull\r\n"
    with pytest.raises(CommandError, match="unknown property print.kye"):
        console.MessageFormatter({"print.kye": "true"})


def test_max_messages_with_a_group_commits_exactly_what_was_printed(cli: Cli, broker: Any) -> None:
    topic(cli)
    cli("produce", "--topic", "t", stdin=b"".join(b"m%d\n" % i for i in range(10)))
    first = cli("consume", "--topic", "t", "--group", "g", "--from-beginning", "--max-messages", "3")
    assert first == (0, "m0\nm1\nm2\n", "Processed a total of 3 messages\n")
    with AdminClient(broker=broker) as admin:
        assert admin.list_consumer_group_offsets("g")[TopicPartition("t", 0)].offset == 3
    second = cli("consume", "--topic", "t", "--group", "g", "--max-messages", "4")
    assert second.out == "m3\nm4\nm5\nm6\n"  # resumes at the commit, --from-beginning or not


def test_timeout_ends_an_idle_consumer(cli: Cli) -> None:
    topic(cli)
    assert cli("consume", "--topic", "t", "--timeout-ms", "100") == (0, "", "Processed a total of 0 messages\n")


def test_without_from_beginning_only_new_records_are_printed(broker: Any) -> None:
    run_cli(broker, "topics", "--create", "--topic", "t")
    run_cli(broker, "produce", "--topic", "t", stdin=b"old\n")
    results: List[Any] = []
    reader = threading.Thread(target=lambda: results.append(
        run_cli(broker, "consume", "--topic", "t", "--max-messages", "1", "--timeout-ms", "30000")))
    reader.start()
    # The consumer positions itself at the end when it starts; keep producing until it has read one.
    deadline = threading.Event()
    timer = threading.Timer(DEADLINE_S, deadline.set)
    timer.start()
    try:
        while reader.is_alive() and not deadline.is_set():
            run_cli(broker, "produce", "--topic", "t", stdin=b"new\n")
            reader.join(0.05)
    finally:
        timer.cancel()
    reader.join()
    assert results[0] == (0, "new\n", "Processed a total of 1 messages\n")


def test_partition_and_offset(cli: Cli, broker: Any) -> None:
    topic(cli, partitions=2)
    for partition in (0, 1):
        values = [b"p%d-%d" % (partition, i) for i in range(4)]
        broker.produce("t", partition, records.build_batch(values))
    read = cli("consume", "--topic", "t", "--partition", "1", "--offset", "2", "--max-messages", "2")
    assert read.out == "p1-2\np1-3\n"
    earliest = cli("consume", "--topic", "t", "--partition", "0", "--offset", "earliest", "--max-messages", "1")
    assert earliest.out == "p0-0\n"
    nothing_new = cli("consume", "--topic", "t", "--partition", "0", "--timeout-ms", "100")
    assert nothing_new.out == ""
    bad = cli("consume", "--topic", "t", "--partition", "5")
    assert bad.status == 1 and "has no partition 5" in bad.err
    assert cli("consume", "--topic", "t", "--partition", "0", "--group", "g").status == 1
    assert cli("consume", "--topic", "t", "--offset", "3").status == 1


def test_include_reads_every_matching_topic(cli: Cli) -> None:
    for name in ("logs-a", "logs-b", "other"):
        topic(cli, name)
        cli("produce", "--topic", name, stdin=name.encode() + b"\n")
    read = cli("consume", "--include", "logs-.*", "--from-beginning", "--max-messages", "2")
    assert sorted(read.out.splitlines()) == ["logs-a", "logs-b"]
    assert cli("consume", "--include", "logs-[", "--timeout-ms", "10").status == 1


class _Interrupting(Clients):
    """Builds consumers whose second poll is interrupted, as Ctrl-C interrupts the tool."""

    def consumer(self, *topics: str, **configs: Any) -> Any:
        consumer = super().consumer(*topics, **configs)
        poll = consumer.poll
        calls = [0]

        def interrupted_poll(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            if calls[0] > 1:
                raise KeyboardInterrupt
            return poll(*args, **kwargs)

        consumer.poll = interrupted_poll
        return consumer


def test_ctrl_c_reports_the_count_and_commits(broker: Any) -> None:
    run_cli(broker, "topics", "--create", "--topic", "t")
    run_cli(broker, "produce", "--topic", "t", stdin=b"a\nb\n")
    args = build_parser().parse_args(["consume", "--topic", "t", "--group", "g", "--from-beginning"])
    out, err = io.BytesIO(), io.StringIO()
    clients = _Interrupting(broker=broker)
    status = console.run_consume(args, clients, out, err)
    clients.close()
    assert (status, out.getvalue(), err.getvalue()) == (130, b"a\nb\n", "Processed a total of 2 messages\n")
    with AdminClient(broker=broker) as admin:
        assert admin.list_consumer_group_offsets("g")[TopicPartition("t", 0)].offset == 2
        assert admin.describe_consumer_groups(["g"])[0].state == "Empty"  # it left the group


class _ClosedPipe(io.BytesIO):
    def write(self, data: Any) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_pipe_ends_the_consumer_quietly(broker: Any) -> None:
    run_cli(broker, "topics", "--create", "--topic", "t")
    run_cli(broker, "produce", "--topic", "t", stdin=b"a\n")
    args = build_parser().parse_args(["consume", "--topic", "t", "--from-beginning"])
    err = io.StringIO()
    with Clients(broker=broker) as clients:
        assert console.run_consume(args, clients, _ClosedPipe(), err) == 0
    assert err.getvalue() == "Processed a total of 0 messages\n"


# -- over TCP, as a user runs it --------------------------------------------------------------------


def test_quickstart_produce_then_consume_processes(pylogq_bootstrap: str) -> None:
    assert run_process(pylogq_bootstrap, "topics", "--create", "--topic", "test").status == 0
    sent = run_process(pylogq_bootstrap, "produce", "--topic", "test", "--property", "parse.key=true",
                       "--property", "key.separator=:", "--compression-type", "lz4",
                       stdin=b"k1:my test message 1\nk2:my test message 2\n")
    assert sent == (0, "", "")
    read = run_process(pylogq_bootstrap, "consume", "--topic", "test", "--from-beginning", "--max-messages", "2",
                       "--property", "print.key=true")
    assert read == (0, "k1\tmy test message 1\nk2\tmy test message 2\n", "Processed a total of 2 messages\n")


def test_records_cross_between_the_tools_and_kafka_python(pylogq_bootstrap: str) -> None:
    import kafka

    assert run_process(pylogq_bootstrap, "topics", "--create", "--topic", "t").status == 0
    assert run_process(pylogq_bootstrap, "produce", "--topic", "t", "--property", "parse.key=true",
                       stdin=b"from\tpylogq\n").status == 0
    producer = kafka.KafkaProducer(bootstrap_servers=pylogq_bootstrap)
    producer.send("t", key=b"from", value=b"kafka-python", headers=[("h", b"1")]).get(timeout=DEADLINE_S)
    producer.close()
    read = run_process(pylogq_bootstrap, "consume", "--topic", "t", "--from-beginning", "--max-messages", "2",
                       "--property", "print.key=true", "--property", "print.headers=true")
    assert read.out == "NO_HEADERS\tfrom\tpylogq\nh:1\tfrom\tkafka-python\n"
    consumer = kafka.KafkaConsumer("t", bootstrap_servers=pylogq_bootstrap, auto_offset_reset="earliest",
                                   consumer_timeout_ms=int(DEADLINE_S * 1000))
    first = next(iter(consumer))
    consumer.close()
    assert (first.key, first.value) == (b"from", b"pylogq")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_consumer_cleanly(pylogq_broker: Any, pylogq_bootstrap: str, signum: int) -> None:
    pylogq_broker.create_topic("t", 1)
    pylogq_broker.produce("t", 0, records.build_batch([b"a", b"b"]))
    # As in a terminal: SIGINT at its default, even when the suite itself was started with
    # it ignored (a shell's background job), which a child would inherit and keep.
    proc = subprocess.Popen([sys.executable, "-m", "pylogq", "consume", "--bootstrap-server", pylogq_bootstrap,
                             "--topic", "t", "--group", "g", "--from-beginning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        got = b""
        deadline = time.monotonic() + DEADLINE_S
        while got.count(b"\n") < 2 and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
            if ready:
                chunk = proc.stdout.read1(4096)  # type: ignore[union-attr]
                if not chunk:
                    break
                got += chunk
        assert got == b"a\nb\n"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and out == b"", err
    assert err.decode() == "Processed a total of 2 messages\n"
    with AdminClient(broker=pylogq_broker) as admin:
        assert admin.list_consumer_group_offsets("g")[TopicPartition("t", 0)].offset == 2
        assert admin.describe_consumer_groups(["g"])[0].state == "Empty"


def test_consume_into_a_pipe_closed_early(pylogq_broker: Any, pylogq_bootstrap: str) -> None:
    pylogq_broker.create_topic("t", 1)
    for start in range(0, 20000, 5000):
        pylogq_broker.produce("t", 0, records.build_batch([b"record %d" % i for i in range(start, start + 5000)]))
    command = "%s -m pylogq consume --bootstrap-server %s --topic t --from-beginning --timeout-ms 5000 | head -n 1" % (
        shlex.quote(sys.executable), pylogq_bootstrap)
    proc = subprocess.run(["sh", "-c", command], capture_output=True, timeout=DEADLINE_S)
    assert proc.stdout == b"record 0\n"
    assert b"Traceback" not in proc.stderr and b"Exception ignored" not in proc.stderr
    assert re.fullmatch(rb"Processed a total of \d+ messages\n", proc.stderr)
