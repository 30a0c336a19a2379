"""Client quotas against real clients, and the failed-authentication delay against a guesser.

Group "produce quota": a ``pylogq-broker`` process; confluent-kafka producers send 10 KB
records as fast as they can for D seconds, and the rate is what the broker acknowledged
in that time (items = bytes acknowledged). Rows: ``throttled`` (client id with
``producer_byte_rate`` = 1 MB/s), ``unthrottled beside it`` (another client id on the same
broker, producing at the same time as a throttled one), and the peer ``unthrottled alone``.
Group "consume quota": the same with confluent-kafka consumers (assigned, no group) reading
a topic filled beforehand, ``consumer_byte_rate`` = 2 MB/s.

Targets (the issue's acceptance), asserted only when timing is on and the run is not quick
(``summary.asserting``): over D = 20 s with Kafka's windows (11 of 1 s), the throttled
client is within +-15% of its quota, and the unthrottled client beside it keeps at least
70% of its throughput alone. Kafka's quota lets a client's first burst fill the window
(10 s of quota at once) and the samples of that burst then expire together, so over the
first 20 s a throttled client of small requests moves about 10% more than its quota (the
same algorithm simulated gives +10.6% for 16 KB requests, and +1% over 120 s; a request of
librdkafka's default 1 MB batch, a second of quota in one, gives +38%: the rows use Java's
16 KB batches and 128 KB fetches).
At the smoke sizes (``summary.smoke``) D = 3 s with two 1 s windows, one round, nothing
asserted but the outcome (every row moved some bytes).

Group "password guessing": SCRAM-SHA-256 guesses of a user's password, one connection
each, in a loop for G guesses (items = guesses): ``failed authentication delay 100 ms``
(Kafka's default ``connection.failed.authentication.delay.ms``) against the peer ``no
delay``. The ratio says how much the delay slows a guesser; nothing is asserted.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
from peers import BrokerProcess, pylogq_broker
from summary import asserting, info, smoke

from pylogq import Broker
from pylogq.client.admin import AdminClient, ClientQuotaAlteration, NewTopic, UserScramCredentialUpsertion
from pylogq.client.connection import BrokerConnection
from pylogq.errors import SaslAuthenticationFailedError

confluent_kafka = pytest.importorskip("confluent_kafka")

MB = 1 << 20
VALUE = b"q" * 10000
PRODUCE_QUOTA = 1 * MB
CONSUME_QUOTA = 2 * MB
FULL = (20.0, 11, 200)  # seconds measured, quota windows, guesses
SMOKE = (3.0, 2, 10)


def _sizes(config: Any) -> Tuple[float, int, int]:
    return SMOKE if smoke(config) else FULL


@pytest.fixture(scope="module")
def server(request: Any, tmp_path_factory: Any) -> Iterator[BrokerProcess]:
    _, windows, _ = _sizes(request.config)
    process = pylogq_broker(str(tmp_path_factory.mktemp("quotas")), overrides={
        "quota.window.num": str(windows), "quota.window.size.seconds": "1"})
    try:
        process.start()
        admin = AdminClient(bootstrap_servers=process.bootstrap)
        try:
            admin.alter_client_quotas([
                ClientQuotaAlteration({"client-id": "capped-producer"}, [("producer_byte_rate", PRODUCE_QUOTA)]),
                ClientQuotaAlteration({"client-id": "capped-consumer"}, [("consumer_byte_rate", CONSUME_QUOTA)])])
        finally:
            admin.close()
        yield process
    finally:
        process.stop()


def _topic(server: BrokerProcess, partitions: int = 1) -> str:
    name = "quota-%s" % uuid.uuid4().hex[:8]
    admin = AdminClient(bootstrap_servers=server.bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


def _produce_for(bootstrap: str, topic: str, client_id: str, seconds: float) -> int:
    """Bytes acknowledged while producing as fast as the client can for ``seconds``."""
    acked = [0]

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += len(msg.value())

    # Java's batch size (16 KB), not librdkafka's 1 MB: Kafka's quota admits each request and
    # throttles after it, so a request worth a second of quota makes the rate as coarse.
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                                         "batch.size": 16384, "queue.buffering.max.kbytes": 4096})
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    counted = acked[0]  # what was acknowledged within the time, not what would flush after it
    producer.purge(in_queue=True, in_flight=True)  # a throttled client's backlog would take its quota's time
    producer.flush(10)
    return counted


def _consume_for(bootstrap: str, topic: str, client_id: str, seconds: float) -> int:
    """Bytes of records read in ``seconds``, from the start of partition 0 (again from the start
    at its end: an unthrottled consumer is not bounded by the topic's size)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                                         "group.id": "quota-bench-%s" % uuid.uuid4().hex[:6],
                                         "enable.auto.commit": False, "enable.partition.eof": True,
                                         # Fetches of 128 KB, as the producers' requests are small.
                                         "max.partition.fetch.bytes": 131072})
    start = confluent_kafka.TopicPartition(topic, 0, 0)
    consumer.assign([start])
    read = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error() is None:
                read += len(message.value())
            elif message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                consumer.seek(start)
    finally:
        consumer.close()
    return read


def _beside(main: Callable[[], int], other: Callable[[], int]) -> int:
    """``main``'s result while ``other`` runs at the same time (in a thread)."""
    thread = threading.Thread(target=other, name="quota-bench-other", daemon=True)
    thread.start()
    try:
        return main()
    finally:
        thread.join(120)


ROWS = ["throttled", "unthrottled beside it", "unthrottled alone"]


def _run(benchmark: Any, request: Any, group: str, quota: int, move: Callable[[str, float], int]) -> Dict[str, int]:
    seconds, _, _ = _sizes(request.config)
    row = request.node.callspec.params["row"]
    info(benchmark, group, 0, "bytes", peer=row == "unthrottled alone",
         target="within 15%% of %d bytes/s" % quota if row == "throttled" else
         ("at least 70%% of its rate alone" if row == "unthrottled beside it" else ""))
    moved: Dict[str, int] = {}

    def round_() -> None:
        if row == "throttled":
            moved["bytes"] = move("capped", seconds)
        elif row == "unthrottled beside it":
            moved["bytes"] = _beside(lambda: move("free", seconds), lambda: move("capped", seconds))
        else:
            moved["bytes"] = move("free", seconds)

    benchmark.pedantic(round_, rounds=1, iterations=1, warmup_rounds=0)
    benchmark.extra_info["items"] = moved["bytes"]
    rate = moved["bytes"] / seconds
    benchmark.extra_info["bytes_per_s"] = rate
    assert moved["bytes"] > 0
    _rates[(group, row)] = rate
    if asserting(request.config):
        if row == "throttled":
            assert 0.85 * quota <= rate <= 1.15 * quota, "%.0f bytes/s under a %d bytes/s quota" % (rate, quota)
        if row == "unthrottled alone" and (group, "unthrottled beside it") in _rates:
            assert _rates[(group, "unthrottled beside it")] >= 0.7 * rate, _rates
    return moved


_rates: Dict[Tuple[str, str], float] = {}


@pytest.mark.parametrize("row", ROWS)
def test_produce_quota(benchmark: Any, request: Any, server: BrokerProcess, row: str) -> None:
    topic = _topic(server)
    _run(benchmark, request, "produce quota", PRODUCE_QUOTA,
         lambda who, seconds: _produce_for(server.bootstrap, topic, who + "-producer", seconds))


@pytest.fixture(scope="module")
def filled(request: Any, server: BrokerProcess) -> str:
    """A topic holding more than any row reads in its time (its first burst included)."""
    seconds, windows, _ = _sizes(request.config)
    topic = _topic(server)
    producer = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 20})
    size = int(CONSUME_QUOTA * (seconds + windows) * 1.5)
    for _ in range(size // len(VALUE)):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(300) == 0
    return topic


@pytest.mark.parametrize("row", ROWS)
def test_consume_quota(benchmark: Any, request: Any, server: BrokerProcess, filled: str, row: str) -> None:
    _run(benchmark, request, "consume quota", CONSUME_QUOTA,
         lambda who, seconds: _consume_for(server.bootstrap, filled, who + "-consumer", seconds))


# -- password guessing --------------------------------------------------------------------------------


@pytest.mark.parametrize("delay_ms", [100, 0], ids=["failed authentication delay 100 ms", "no delay"])
def test_password_guessing(benchmark: Any, request: Any, tmp_path: Any, delay_ms: int) -> None:
    _, _, guesses = _sizes(request.config)
    info(benchmark, "password guessing", guesses, "guesses", peer=delay_ms == 0)
    broker = Broker(str(tmp_path / "broker"), **{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                                                 "connection.failed.authentication.delay.ms": delay_ms})
    try:
        plain = broker.serve("127.0.0.1", 0)
        sasl = broker.serve("127.0.0.1", 0, sasl_users={"admin": "admin-secret"})
        admin = AdminClient(bootstrap_servers="%s:%d" % plain)
        try:
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion("alice", "SCRAM-SHA-256", "right")])
        finally:
            admin.close()
        refused: List[int] = []

        def guess_all() -> None:
            for i in range(guesses):
                try:
                    BrokerConnection(sasl[0], sasl[1], "guesser", 10.0, ("SCRAM-SHA-256", "alice", "guess-%d" % i))
                except SaslAuthenticationFailedError:
                    refused.append(i)

        benchmark.pedantic(guess_all, rounds=1, iterations=1, warmup_rounds=0)
        assert len(refused) == guesses
    finally:
        broker.close()
