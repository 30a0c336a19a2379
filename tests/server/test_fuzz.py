"""Bad input: at least 10,000 random and mutated requests against one broker per run.

The seeds are real requests: every API at every advertised version framed by
:mod:`pylogq.protocol` with realistic values, and the frames kafka-python and
confluent-kafka send through a recording proxy while they create topics, produce,
consume in a group, commit and administer. Each is mutated (bit flips, byte and
integer overwrites at random places, which hit length fields, truncation,
extension, splicing, random API keys and versions, random bytes) and sent with a
probe request behind it. After each the connection must answer it (the response's
correlation id is the request's, and a response to a known API and version
decodes), or give no answer only where Kafka gives none (Produce with acks=0), or
close; a request that waits (a long poll, a join) is abandoned with its connection.
Size prefixes are corrupted in a stream mode of their own, since they unframe the
rest of the connection; in another, whole frames arrive in small pieces and the
connection ends inside a partial one (every whole frame answered, then a close).

Produce seeds carry compressed batches of every codec: ordinary ones, valid ones
of extreme ratio (megabytes from a few kilobytes, validated as they decompress),
ones damaged before compression behind a good CRC (the damage reaches the record
walk) and ones whose compressed bytes are cut short; and v0/v1 wrappers.

Afterwards the broker must still serve a real client, log no error (an unhandled
exception would), and its logs must be valid: every segment scans whole and
CRC-clean, and reopened without the clean-shutdown marker no log truncates a byte.

``PYLOGQ_FUZZ_SEED`` replays a run (each failure message names its seed).
"""

from __future__ import annotations

import errno
import logging
import os
import random
import socket
import struct
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from pylogq import Broker
from pylogq.cluster.broker import broker as broker_module
from pylogq.errors import ProtocolError
from pylogq.protocol import (
    REQUEST_HEADER,
    REQUESTS,
    RESPONSE_HEADER,
    RESPONSES,
    SUPPORTED_VERSIONS,
    Reader,
    header_versions,
)
from pylogq.records import build_batch, valid_prefix_length
from pylogq.records.legacy import LegacyRecordBatchBuilder
from pylogq.storage.checkpoint import CLEAN_SHUTDOWN_FILE

from .test_server import encode_request

REQUESTS_PER_RUN = 10_000
STREAM_RUNS = 300  # connections whose size prefixes are corrupted (counted on top)
PARTIAL_RUNS = 200  # connections sending whole frames in pieces, then a partial one (on top)
WORKERS = 4
#: A request of an API that may wait (a long poll, a join) not answered in this time is abandoned
#: with its connection; that is an outcome, not a failure.
WAITING_S = 3.0
WAITING_APIS = {1: "Fetch", 11: "JoinGroup", 14: "SyncGroup"}
#: Any other answer, or close, that has not come in this time never will: a failure. Generous, so
#: that a loaded machine is never mistaken for a broker that stopped answering.
ANSWER_TIMEOUT_S = 60.0
SEED = int(os.environ.get("PYLOGQ_FUZZ_SEED", random.randrange(1 << 32)))

TOPIC = "fuzz"
GROUP = "fuzz-group"
FUZZ_CONFIG: Dict[str, Any] = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 2,
    # Short group timeouts: members that fuzzed requests leave behind expire at once,
    # so a join never waits long for them.
    "group.min.session.timeout.ms": 10,
    "group.max.session.timeout.ms": 1000,
    "connections.max.idle.ms": 5000,
    "log.segment.bytes": 256 * 1024,
}
RECORDING_CONFIG: Dict[str, Any] = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 2}

Frame = bytes  # a whole request frame: size prefix, header, body


# -- seeds: generated requests ---------------------------------------------------------


def _subscription(topic: str) -> bytes:
    """A consumer protocol subscription (version 0) for one topic."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


def _records(version: int) -> bytes:
    """The record format a client sends at this Produce version (magic 0, 1 or 2)."""
    if version >= 3:
        return bytes(build_batch([b"value-%d" % i for i in range(3)], keys=[b"k%d" % i for i in range(3)],
                                 compression_type="gzip" if version % 2 else 0))
    builder = LegacyRecordBatchBuilder(0 if version == 0 else 1)
    for i in range(3):
        builder.append(i, None, b"k%d" % i, b"value-%d" % i)
    return bytes(builder.build())


def request_body(api_key: int, version: int) -> Dict[str, Any]:
    """A realistic request body for ``api_key`` (fields a version lacks are ignored)."""
    topic_partition = [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1,
                                                        "current_leader_epoch": -1, "offset": 0,
                                                        "committed_offset": 1, "committed_metadata": ""}]}]
    partition_state = {"partition_index": 0, "controller_epoch": 1, "leader": 1, "leader_epoch": 1, "isr": [1],
                       "partition_epoch": 1, "replicas": [1], "adding_replicas": [], "removing_replicas": [],
                       "is_new": False, "leader_recovery_state": 0}
    metadata_state = {"partition_index": 0, "controller_epoch": 1, "leader": 1, "leader_epoch": 1, "isr": [1],
                      "zk_version": 1, "replicas": [1], "offline_replicas": []}
    topic_config = [{"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None,
                     "configs": [{"name": "retention.ms", "value": "86400000", "config_operation": 0}]}]
    acl_filter = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                  "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    bodies: Dict[int, Dict[str, Any]] = {
        0: {"transactional_id": None, "acks": [-1, 1, 0][version % 3], "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": _records(version)}]}]},
        1: {"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]},
        2: {"replica_id": -1, "isolation_level": 0, "topics": topic_partition},
        3: {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": True},
        # The controller's requests (a single node answers them STALE_CONTROLLER_EPOCH).
        4: {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "type": 0,
            "ungrouped_partition_states": [dict(partition_state, topic_name=TOPIC)],
            "topic_states": [{"topic_name": TOPIC, "topic_id": uuid.UUID(int=7), "partition_states": [partition_state]}],
            "live_leaders": [{"broker_id": 1, "host_name": "127.0.0.1", "port": 1}]},
        5: {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "delete_partitions": False,
            "ungrouped_partitions": [{"topic_name": TOPIC, "partition_index": 0}],
            "topics": [{"name": TOPIC, "partition_indexes": [0]}],
            "topic_states": [{"topic_name": TOPIC, "partition_states": [
                {"partition_index": 0, "leader_epoch": 1, "delete_partition": False}]}]},
        6: {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "type": 0,
            "ungrouped_partition_states": [dict(metadata_state, topic_name=TOPIC)],
            "topic_states": [{"topic_name": TOPIC, "topic_id": uuid.UUID(int=7), "partition_states": [metadata_state]}],
            "live_brokers": [{"id": 1, "v0_host": "127.0.0.1", "v0_port": 1, "rack": None, "endpoints": [
                {"port": 1, "host": "127.0.0.1", "listener": "PLAINTEXT", "security_protocol": 0}]}]},
        7: {"broker_id": 1, "broker_epoch": -1},
        23: {"replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        8: {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": topic_partition},
        9: {"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}]},
        10: {"key": GROUP, "key_type": 0},
        11: {"group_id": GROUP, "session_timeout_ms": 200, "rebalance_timeout_ms": 200, "member_id": "",
             "group_instance_id": None, "protocol_type": "consumer",
             "protocols": [{"name": "range", "metadata": _subscription(TOPIC)}]},
        12: {"group_id": GROUP, "generation_id": 1, "member_id": "member-1"},
        13: {"group_id": GROUP, "member_id": "member-1"},
        14: {"group_id": GROUP, "generation_id": 1, "member_id": "member-1", "assignments": []},
        15: {"groups": [GROUP]},
        16: {},
        17: {"mechanism": "PLAIN"},
        18: {},
        19: {"topics": [{"name": "fuzz-created", "num_partitions": 2, "replication_factor": 1, "assignments": [],
                         "configs": [{"name": "cleanup.policy", "value": "delete"}]}],
             "timeout_ms": 5000, "validate_only": version % 2 == 0},
        20: {"topic_names": ["fuzz-created"], "timeout_ms": 5000},
        21: {"topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout_ms": 5000},
        22: {"transactional_id": None, "transaction_timeout_ms": 60000},
        28: {"transactional_id": "fuzz-txn", "group_id": GROUP, "producer_id": 7, "producer_epoch": 0,
             "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                 {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                 "committed_leader_epoch": -1, "committed_metadata": None}]}]},
        32: {"resources": topic_config, "include_synonyms": True},
        33: {"resources": topic_config, "validate_only": False},
        36: {"auth_bytes": b"\x00alice\x00secret"},
        37: {"topics": [{"name": "fuzz-created", "count": 3, "assignments": None}], "timeout_ms": 5000,
             "validate_only": False},
        34: {"dirs": [{"path": "/nonexistent-log-dir", "topics": [{"name": TOPIC, "partitions": [0]}]}]},
        35: {"topics": [{"topic": TOPIC, "partitions": [0]}] if version % 2 else None},
        42: {"groups_names": [GROUP]},
        43: {"election_type": version % 2, "timeout_ms": 5000,
             "topic_partitions": [{"topic": TOPIC, "partitions": [0]}] if version % 2 else None},
        45: {"timeout_ms": 5000, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "replicas": [0, 7] if version % 2 else None}]}]},
        46: {"timeout_ms": 5000, "topics": [{"name": TOPIC, "partition_indexes": [0]}] if version % 2 else None},
        44: {"resources": topic_config, "validate_only": True},
        47: {"group_id": GROUP, "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]}]},
        48: {"components": [{"entity_type": "client-id", "match_type": version % 3, "match": "fuzz"}],
             "strict": bool(version % 2)},
        49: {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": None if version % 2 else "fuzz"}],
                          "ops": [{"key": "producer_byte_rate", "value": 1e9, "remove": False}]}],
             "validate_only": True},
        50: {"users": [{"name": "fuzz-user"}] if version % 2 else None},
        51: {"deletions": [{"name": "fuzz-gone", "mechanism": 2}],
             "upsertions": [{"name": "fuzz-user", "mechanism": 1, "iterations": 4096, "salt": b"salt",
                             "salted_password": b"\x01" * 32}]},
        60: {"include_cluster_authorized_operations": True, "endpoint_type": 1},
        61: {"topics": [{"name": TOPIC, "partition_indexes": [0, 7]}]},
        # The transaction APIs: a producer the coordinator does not know, a marker of one.
        24: {"v3_and_below_transactional_id": "fuzz-txn", "v3_and_below_producer_id": 7,
             "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": TOPIC, "partitions": [0, 9]}],
             "transactions": [{"transactional_id": "fuzz-txn", "producer_id": 7, "producer_epoch": 0,
                               "verify_only": bool(version % 2), "topics": [{"name": TOPIC, "partitions": [0]}]}]},
        25: {"transactional_id": "fuzz-txn", "producer_id": 7, "producer_epoch": 0, "group_id": "fuzz-group"},
        26: {"transactional_id": "fuzz-txn", "producer_id": 7, "producer_epoch": 0, "committed": bool(version % 2)},
        27: {"markers": [{"producer_id": 7, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
                          "topics": [{"name": TOPIC, "partition_indexes": [0, 9]}]}]},
        65: {"transactional_ids": ["fuzz-txn", ""]},
        66: {"state_filters": ["Ongoing", "Nonsense"], "producer_id_filters": [7], "duration_filter": -1},
        29: acl_filter,
        30: {"creations": [{"resource_type": 2, "resource_name": TOPIC, "resource_pattern_type": 3,
                            "principal": "User:fuzz", "host": "*", "operation": 3, "permission_type": 3}]},
        31: {"filters": [acl_filter]},
    }
    return bodies[api_key]


def generated_seeds() -> List[Frame]:
    """Every API at every advertised version."""
    out = []
    for api_key, (lo, hi) in sorted(SUPPORTED_VERSIONS.items()):
        for version in range(lo, hi + 1):
            out.append(encode_request(api_key, version, request_body(api_key, version), 1000 + api_key,
                                      client_id="fuzz-generated"))
    return out


def _produce_frame(version: int, batch: bytes, correlation_id: int) -> Frame:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}
    return encode_request(0, version, body, correlation_id, client_id="fuzz-compressed")


def compressed_seeds() -> List[Frame]:
    """Produce requests with compressed batches of every codec (see the module docstring)."""
    from pylogq.records import codecs
    from tests.records.test_fuzz import _damaged_compressed, _extreme_batch

    rng = random.Random(5)
    mib = 1 << 20
    out = []
    for codec in (codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD):
        name = codecs.NAMES[codec]
        out.append(_produce_frame(7, bytes(build_batch([b"value-%d" % i * 20 for i in range(30)],
                                                       keys=[b"k%d" % i for i in range(30)],
                                                       compression_type=name)), 2000 + codec))
        big = 12 * mib if codec == codecs.SNAPPY else 40 * mib  # snappy compresses 20:1 at most
        extreme = [(1, mib // 2, [])] * (big // mib * 2) if codec == codecs.SNAPPY else [(1, big, []), (1, 0, [])]
        out.append(_produce_frame(7, _extreme_batch(codec, extreme), 2100 + codec))
        for i in range(6):
            out.append(_produce_frame(7, _damaged_compressed(rng, codec), 2200 + 10 * codec + i))
    for magic, codec in ((1, codecs.GZIP), (1, codecs.SNAPPY), (1, codecs.LZ4), (0, codecs.LZ4), (0, codecs.GZIP)):
        legacy = LegacyRecordBatchBuilder(magic, codec)
        for i in range(5):
            legacy.append(i, None, b"k%d" % i, b"legacy-%d" % i * 10)
        out.append(_produce_frame(2 if magic else 1, bytes(legacy.build()), 2300 + 10 * magic + codec))
    return out


# -- seeds: recorded client traffic ----------------------------------------------------


class RecordingProxy:
    """A TCP proxy in front of a broker that keeps what clients send, per connection."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.target: Optional[Tuple[str, int]] = None
        self.streams: List[bytearray] = []
        self._threads: List[threading.Thread] = []
        self._open: List[socket.socket] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            assert self.target is not None
            upstream = socket.create_connection(self.target)
            stream = bytearray()
            self.streams.append(stream)
            self._open += [client, upstream]
            for src, dst, keep in ((client, upstream, stream), (upstream, client, None)):
                thread = threading.Thread(target=self._pipe, args=(src, dst, keep), daemon=True)
                thread.start()
                self._threads.append(thread)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, keep: Optional[bytearray]) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if keep is not None:
                    keep += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> List[Frame]:
        """Stop proxying; -> every whole request frame the clients sent."""
        self.sock.close()
        for s in self._open:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in self._threads:
            thread.join(5)
        for s in self._open:
            s.close()
        frames = []
        for stream in self.streams:
            pos = 0
            while len(stream) - pos >= 4:
                (size,) = struct.unpack_from(">i", stream, pos)
                if size < 0 or len(stream) - pos - 4 < size:
                    break
                frames.append(bytes(stream[pos:pos + 4 + size]))
                pos += 4 + size
        return frames


def _poll_until(poll: Callable[[], int], want: int, what: str) -> None:
    deadline = time.monotonic() + 20
    got = 0
    while got < want:
        assert time.monotonic() < deadline, "timed out waiting for " + what
        got += poll()


def _kafka_python_session(bootstrap: str) -> None:
    import kafka
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic("rec-kp", 2, 1)])
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
        for i in range(20):
            producer.send("rec-kp", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
        producer.flush()
        producer.close()
        consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id="rec-kp-group",
                                       auto_offset_reset="earliest", enable_auto_commit=False)
        # Known partitions before joining, polls longer than a join: kafka-python 3.0.12 can
        # lose a rebalance (tests/server/test_clients_kafka_python._subscribe).
        assert consumer.partitions_for_topic("rec-kp") == {0, 1}
        consumer.subscribe(["rec-kp"])
        _poll_until(lambda: sum(len(v) for v in consumer.poll(timeout_ms=1000).values()), 20, "kafka-python records")
        consumer.commit()
        consumer.close()
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "rec-kp")])
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "rec-kp", configs={"retention.ms": "3600000"})])
        admin.list_groups()
        admin.describe_groups(["rec-kp-group"])
        admin.list_group_offsets("rec-kp-group")
        admin.create_partitions({"rec-kp": NewPartitions(3)})
        admin.delete_records({kafka.TopicPartition("rec-kp", 0): 1})
        admin.delete_groups(["rec-kp-group"])
        admin.delete_topics(["rec-kp"])
    finally:
        admin.close()


def _confluent_session(bootstrap: str) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("rec-ck", 1, 1)]).values():
        future.result(10)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5})
    for i in range(20):
        producer.produce("rec-ck", key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "rec-ck-group",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["rec-ck"])

    def poll() -> int:
        message = consumer.poll(0.2)
        return 1 if message is not None and message.error() is None else 0

    _poll_until(poll, 20, "confluent-kafka records")
    consumer.commit(asynchronous=False)
    consumer.close()


def recorded_seeds(tmp_dir: str) -> List[Frame]:
    """Frames real clients send, recorded through a proxy the broker advertises."""
    proxy = RecordingProxy()
    broker = Broker(tmp_dir, **RECORDING_CONFIG)
    try:
        broker.serve("127.0.0.1", 0, advertised_listeners="PLAINTEXT://127.0.0.1:%d" % proxy.port)
        # serve() returns the advertised address (the proxy's); the proxy needs the bound one.
        proxy.target = ("127.0.0.1", next(iter(broker._servers[-1]._bound))[0])  # (port, listener name)
        bootstrap = "127.0.0.1:%d" % proxy.port
        _kafka_python_session(bootstrap)
        _confluent_session(bootstrap)
    finally:
        frames = proxy.close()
        broker.close()
    return frames


# -- mutations -------------------------------------------------------------------------


INTERESTING = [0, 1, 2, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


def _interesting(rng: random.Random, width: int, body_len: int) -> bytes:
    value = rng.choice(INTERESTING + [body_len, body_len - 1, body_len + 1, rng.getrandbits(width * 8)])
    return (value & ((1 << (width * 8)) - 1)).to_bytes(width, "big")


INT_VALUES = [0, 1, -1, 2, 3, 100, 0x7F, -0x80, 0x7FFF, -0x8000, 0x7FFFFFFF, -0x80000000,
              (1 << 63) - 1, -(1 << 63)]


def _mutate_value(rng: random.Random, value: Any) -> Any:
    """Another value of the same shape: the request stays well-formed, its meaning does not."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice(INT_VALUES + [value + 1, value - 1, rng.randrange(-1000, 1000)])
    if isinstance(value, str) or value is None and rng.random() < 0.5:
        return rng.choice([None, "", "x" * rng.randint(200, 2000), "\u00e9\u4e2d\U0001f600", "..", "a/b",
                           "__consumer_offsets", "fuzz", "fuzz-created", "rec-kp"])
    if isinstance(value, (bytes, bytearray)) or value is None:
        return rng.choice([None, b"", rng.randbytes(rng.randint(1, 200))])
    if isinstance(value, list):
        if value and rng.random() < 0.5:
            return value * rng.randint(2, 5)
        return rng.choice([[], None])
    return value


def _mutate_fields(rng: random.Random, node: Any, depth: int = 0) -> bool:
    """Replace one leaf (or list) somewhere in a decoded request; -> whether one was."""
    if isinstance(node, dict) and node:
        key = rng.choice(list(node))
        child = node[key]
        if isinstance(child, (dict, list)) and child and depth < 6 and rng.random() < 0.7:
            if isinstance(child, list):
                item = rng.choice(child)
                if isinstance(item, (dict, list)) and _mutate_fields(rng, item, depth + 1):
                    return True
            elif _mutate_fields(rng, child, depth + 1):
                return True
        node[key] = _mutate_value(rng, child)
        return True
    if isinstance(node, list) and node:
        return _mutate_fields(rng, rng.choice(node), depth + 1)
    return False


def mutate_semantic(rng: random.Random, seed: Frame) -> Optional[bytes]:
    """The seed decoded, one field given a strange value, and encoded again; None if it cannot be."""
    parsed = parse_request(seed[4:])
    if parsed is None:
        return None
    api_key, version, request = parsed
    for _ in range(rng.randint(1, 3)):
        _mutate_fields(rng, request)
    try:
        frame = encode_request(api_key, version, request, struct.unpack_from(">i", seed, 8)[0],
                               client_id=rng.choice(["fuzz", None, "", "\u00e9" * 50]))
    except (ProtocolError, ValueError, TypeError, OverflowError, struct.error, UnicodeError, AttributeError,
            KeyError):
        return None
    return frame[4:]


def mutate(rng: random.Random, seeds: Sequence[Frame]) -> bytes:
    """A mutated request body (without its size prefix)."""
    seed = rng.choice(seeds)
    kind = rng.randrange(15)
    if kind >= 11:  # well-formed, with strange values (the handlers' share of the fuzz)
        semantic = mutate_semantic(rng, seed)
        if semantic is not None:
            return semantic
        kind = 0
    body = bytearray(seed[4:])
    if kind == 0:  # bit flips
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(body))
            body[pos] ^= 1 << rng.randrange(8)
    elif kind == 1:  # bytes overwritten
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(len(body))] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
    elif kind in (2, 3):  # an integer overwritten: hits length and count fields
        width = rng.choice([1, 2, 4, 8])
        pos = rng.randrange(max(1, len(body) - width + 1))
        body[pos:pos + width] = _interesting(rng, width, len(body))
    elif kind == 4:  # truncated
        del body[rng.randrange(len(body)):]
    elif kind == 5:  # extended
        body += rng.randbytes(rng.randint(1, 64))
    elif kind == 6:  # a slice deleted or duplicated
        i = rng.randrange(len(body))
        j = rng.randrange(i, min(len(body), i + 64) + 1)
        if rng.random() < 0.5:
            del body[i:j]
        else:
            body[i:i] = body[i:j]
    elif kind == 7:  # spliced with another request
        other = rng.choice(seeds)[4:]
        body = body[:rng.randrange(len(body) + 1)] + other[rng.randrange(len(other) + 1):]
    elif kind == 8:  # another API key or version
        keys = list(SUPPORTED_VERSIONS) + [rng.randrange(-5, 70), rng.randrange(-(1 << 15), 1 << 15)]
        if len(body) >= 4:
            body[0:2] = struct.pack(">h", rng.choice(keys))
            versions = [-1, 0, 1, 2, 3, 4, 5, 7, 9, 11, 12, 16, 17, rng.randrange(1 << 15)]
            body[2:4] = struct.pack(">h", rng.choice(versions))
    elif kind == 9:  # a valid header, then random bytes
        api_key = rng.choice(list(SUPPORTED_VERSIONS))
        lo, hi = SUPPORTED_VERSIONS[api_key]
        body = bytearray(struct.pack(">hhih", api_key, rng.randint(lo, hi), rng.getrandbits(31), 4) + b"fuzz"
                         + rng.randbytes(rng.randint(0, 128)))
    else:  # random bytes
        body = bytearray(rng.randbytes(rng.randint(0, 96)))
    if len(body) > 1 << 20:
        del body[1 << 20:]
    return bytes(body)


# -- checking one exchange -------------------------------------------------------------


def _read_exactly(sock: socket.socket, n: int) -> Optional[bytes]:
    chunks = []
    while n:
        try:
            chunk = sock.recv(min(n, 1 << 20))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> Optional[bytes]:
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    assert 4 <= size < 1 << 28, "response frame size %d" % size
    body = _read_exactly(sock, size)
    assert body is not None, "connection closed inside a %d-byte response" % size
    return body


def parse_request(body: bytes) -> Optional[Tuple[int, int, Dict[str, Any]]]:
    """(api key, version, decoded body) as the server would read it; None if it cannot be."""
    if len(body) < 8:
        return None
    api_key, version = struct.unpack_from(">hh", body)
    supported = SUPPORTED_VERSIONS.get(api_key)
    if supported is None or not supported[0] <= version <= supported[1]:
        return None
    r = Reader(body)
    try:
        REQUEST_HEADER.decode_from(r, header_versions(api_key, version)[0])
        request = REQUESTS[api_key].decode_from(r, version)
    except (ProtocolError, ValueError, UnicodeDecodeError):
        return None
    # Bytes after the body are ignored, as Kafka's RequestContext.parseRequest ignores them.
    return api_key, version, request


def check_response(request: bytes, frame: bytes) -> None:
    """A response to a request whose API and version are known must decode."""
    api_key, version = struct.unpack_from(">hh", request)
    supported = SUPPORTED_VERSIONS.get(api_key)
    if supported is None:
        raise AssertionError("a response to unknown API key %d" % api_key)
    if not supported[0] <= version <= supported[1]:
        if api_key == 18:
            version, header_version = 0, 0
        else:
            header_version = header_versions(api_key, version)[1]
    else:
        header_version = header_versions(api_key, version)[1]
    r = Reader(frame)
    RESPONSE_HEADER.decode_from(r, header_version)
    body = RESPONSES[api_key].decode_from(r, version)
    assert r.remaining == 0, "%d trailing bytes in the response" % r.remaining
    if not supported[0] <= struct.unpack_from(">h", request, 2)[0] <= supported[1]:
        assert body["error_code"] == 35


class Tally:
    """What the fuzzed requests got, across workers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Dict[str, int] = {"answered": 0, "no response (acks=0)": 0, "closed": 0, "waiting": 0,
                                       "stream": 0, "partial": 0}

    def add(self, outcome: str) -> None:
        with self.lock:
            self.counts[outcome] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())


PROBE = encode_request(18, 0, {}, 0x7ABCDEF0, client_id="probe")


def exchange_all(address: Tuple[str, int], rng: random.Random, seeds: Sequence[Frame], count: int,
                 tally: Tally) -> None:
    """Send ``count`` mutated requests, each followed by a probe, and check each outcome."""
    sock: Optional[socket.socket] = None
    for _ in range(count):
        if sock is None:
            sock = socket.create_connection(address, timeout=ANSWER_TIMEOUT_S)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = mutate(rng, seeds)
        api_key = struct.unpack_from(">h", body)[0] if len(body) >= 2 else None
        sock.settimeout(WAITING_S if api_key in WAITING_APIS else ANSWER_TIMEOUT_S)
        sock.sendall(struct.pack(">i", len(body)) + body + PROBE)
        outcome = _outcome(sock, body)
        tally.add(outcome)
        if outcome in ("closed", "waiting"):
            sock.close()
            sock = None
    if sock is not None:
        sock.close()


def _outcome(sock: socket.socket, body: bytes) -> str:
    described = "request %r" % body[:64]
    try:
        frame = read_frame(sock)
    except socket.timeout:
        api_key = struct.unpack_from(">h", body)[0] if len(body) >= 2 else None
        assert api_key in WAITING_APIS, "no answer and no close within %.0f s for %s" % (ANSWER_TIMEOUT_S, described)
        return "waiting"
    sock.settimeout(ANSWER_TIMEOUT_S)  # the probe behind it, and what follows, never waits
    if frame is None:
        return "closed"
    (cid,) = struct.unpack_from(">i", frame)
    if len(body) >= 8 and cid == struct.unpack_from(">i", body, 4)[0]:
        try:
            check_response(body, frame)
        except Exception as exc:
            raise AssertionError("bad response %r to %s: %s" % (frame[:64], described, exc)) from None
        probe = read_frame(sock)
        if probe is None:
            return "closed"
        assert struct.unpack_from(">i", probe)[0] == 0x7ABCDEF0, "probe answered out of order after " + described
        return "answered"
    assert cid == 0x7ABCDEF0, "response with correlation id %d to %s" % (cid, described)
    parsed = parse_request(body)
    assert parsed is not None and parsed[0] == 0 and parsed[2]["acks"] == 0, \
        "no response to %s, which is not a Produce with acks=0" % described
    return "no response (acks=0)"


def stream_run(address: Tuple[str, int], rng: random.Random, seeds: Sequence[Frame]) -> None:
    """A few frames, one with a corrupted size prefix, then end of input: the server must
    answer with whole frames and close, whatever it made of the bytes."""
    with socket.create_connection(address, timeout=ANSWER_TIMEOUT_S) as sock:
        frames = [rng.choice(seeds) for _ in range(rng.randint(1, 4))]
        bad = bytearray(rng.choice(seeds))
        bad[0:4] = struct.pack(">i", rng.choice([0, 1, 7, len(bad) - 5, len(bad) - 3, len(bad) + 20, -1,
                                                 1 << 20, 0x7FFFFFFF, -(1 << 31), rng.randrange(-100, 1000)]))
        frames.insert(rng.randrange(len(frames) + 1), bytes(bad))
        try:
            sock.sendall(b"".join(frames))
            sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            # The server may close on the corrupt prefix before the client has sent (or ended)
            # the rest; its unread bytes then reset the connection (ENOTCONN on shutdown).
            if exc.errno not in (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN):
                raise
        for _ in range(len(frames) + 1):
            try:
                if read_frame(sock) is None:
                    return
            except socket.timeout:
                raise AssertionError("the server neither answered nor closed after %r" % frames) from None
        raise AssertionError("more responses than requests for %r" % frames)


def partial_run(address: Tuple[str, int], rng: random.Random, seeds: Sequence[Frame]) -> None:
    """Whole frames in small pieces, then the first part of another and end of input: the server
    answers every whole frame, in order, and closes without an answer to the partial one."""
    answered = [PROBE] + [seed for seed in seeds if struct.unpack_from(">h", seed, 4)[0] == 0
                          and (parse_request(seed[4:]) or (0, 0, {"acks": 0}))[2]["acks"] != 0]
    with socket.create_connection(address, timeout=ANSWER_TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        frames = [rng.choice(answered) for _ in range(rng.randint(1, 3))]
        partial = rng.choice(seeds)
        data = b"".join(frames) + partial[:rng.randrange(1, len(partial))]
        pos = 0
        while pos < len(data):
            step = rng.choice([1, 2, 3, 4, 5, 7, 64, 1000, rng.randrange(1, len(data) + 1)])
            sock.sendall(data[pos:pos + step])
            pos += step
        sock.shutdown(socket.SHUT_WR)
        for frame in frames:
            try:
                response = read_frame(sock)
            except socket.timeout:
                raise AssertionError("no answer to a whole frame sent in pieces: %r" % frame[:64]) from None
            assert response is not None, "closed before answering a whole frame sent in pieces: %r" % frame[:64]
            assert response[:4] == frame[8:12], "answers out of order"
        try:
            assert read_frame(sock) is None, "an answer to a partial frame"
        except socket.timeout:
            raise AssertionError("the server did not close after a partial frame and end of input") from None


# -- the run ---------------------------------------------------------------------------


class ErrorRecords(logging.Handler):
    """Keeps ERROR records of the server (and of asyncio, where unhandled task errors go)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: List[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> List[Frame]:
    pytest.importorskip("kafka")
    pytest.importorskip("confluent_kafka")
    recorded = recorded_seeds(str(tmp_path_factory.mktemp("recording")))
    apis = {struct.unpack_from(">h", f, 4)[0] for f in recorded}
    # The clients' sessions cover the data path, groups and admin APIs.
    assert {0, 1, 3, 8, 9, 10, 11, 14, 18, 19, 32}.issubset(apis), sorted(apis)
    return generated_seeds() + compressed_seeds() + recorded


@pytest.fixture
def error_records() -> Iterator[ErrorRecords]:
    handler = ErrorRecords()
    loggers = [logging.getLogger("pylogq"), logging.getLogger("asyncio")]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        yield handler
    finally:
        for lg in loggers:
            lg.removeHandler(handler)


def test_fuzzed_requests_never_break_the_broker(tmp_path: Any, seeds: List[Frame], error_records: ErrorRecords,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # Kafka's cap on partitions per request is 10,000; a fuzzed count near it would spend
    # the run creating logs (that path is tested elsewhere), so the cap is lowered here.
    monkeypatch.setattr(broker_module, "MAX_PARTITIONS_PER_REQUEST", 64)
    data_dir = str(tmp_path / "fuzz")
    broker = Broker(data_dir, **FUZZ_CONFIG)
    tally = Tally()
    failures: List[BaseException] = []
    try:
        broker.create_topic(TOPIC, 2)
        broker.create_topic("fuzz-created", 2)
        for name in ("rec-kp", "rec-ck"):  # the recorded requests' topics
            broker.create_topic(name, 3)
        plain = broker.serve("127.0.0.1", 0)
        sasl = broker.serve("127.0.0.1", 0, sasl_users={"alice": "secret"})

        def work(n: int) -> None:
            rng = random.Random(SEED + n)
            try:
                # One worker in four fuzzes the SASL listener before authentication.
                address = sasl if n == WORKERS - 1 else plain
                exchange_all(address, rng, seeds, REQUESTS_PER_RUN // WORKERS + 1, tally)
                for _ in range(STREAM_RUNS // WORKERS):
                    stream_run(address, rng, seeds)
                    tally.add("stream")
                for _ in range(PARTIAL_RUNS // WORKERS):
                    partial_run(plain, rng, seeds)  # (SASL closes before authentication)
                    tally.add("partial")
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(WORKERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(900)  # a generous bound on the whole run, not a speed target
        assert not any(t.is_alive() for t in threads), "fuzz workers still running (seed %d)" % SEED
        if failures:
            raise AssertionError("seed %d: %s" % (SEED, failures[0])) from failures[0]
        assert tally.total >= REQUESTS_PER_RUN, "seed %d: %s" % (SEED, tally.counts)
        assert tally.counts["answered"] > 1000 and tally.counts["closed"] > 1000, "seed %d: %s" % (SEED, tally.counts)
        assert tally.counts["waiting"] < 50, "seed %d: %s" % (SEED, tally.counts)

        try:
            _real_client_round_trip("%s:%d" % plain)
        except AssertionError as exc:
            raise AssertionError("seed %d: %s" % (SEED, exc)) from exc
    finally:
        broker.close()
    errors = ["%s: %s%s" % (r.name, r.getMessage(), "\n" + logging.Formatter().formatException(r.exc_info)
                            if r.exc_info else "") for r in error_records.records]
    assert not errors, "seed %d: the server logged errors:\n%s" % (SEED, "\n".join(errors[:5]))
    try:
        _check_logs_valid(data_dir)
    except AssertionError as exc:
        raise AssertionError("seed %d: %s" % (SEED, exc)) from exc


def _real_client_round_trip(bootstrap: str) -> None:
    import kafka

    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(10):
            producer.send("after-fuzz", key=b"k%d" % i, value=b"v%d" % i)
        producer.flush(60)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    values: List[bytes] = []
    try:
        consumer.assign([kafka.TopicPartition("after-fuzz", 0)])
        deadline = time.monotonic() + 60
        while len(values) < 10 and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                values += [m.value for m in batch]
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(10)]


def _check_logs_valid(data_dir: str) -> None:
    """Every segment scans whole; reopened as after a crash, recovery truncates nothing."""
    segments = 0
    for root, _, files in os.walk(data_dir):
        for name in files:
            if name.endswith(".log"):
                with open(os.path.join(root, name), "rb") as f:
                    data = f.read()
                assert valid_prefix_length(data) == len(data), "%s has invalid bytes" % os.path.join(root, name)
                segments += 1
    assert segments > 0
    os.unlink(os.path.join(data_dir, CLEAN_SHUTDOWN_FILE))
    reopened = Broker(data_dir, **FUZZ_CONFIG)
    try:
        logs = reopened.logs.all_logs()
        assert logs
        assert [lg.directory for lg in logs if lg.recovered_bytes] == []
        assert reopened.list_offsets("after-fuzz", 0, -1)[0] == 10
    finally:
        reopened.close()
