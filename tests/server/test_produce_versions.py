"""Produce over every version Kafka 3.9 serves (0-11, flexible from 9): records appended at
each, and from v8 the records that failed a batch named by their index (KIP-467)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import pytest

import pylogq
from pylogq.client.connection import BrokerConnection
from pylogq.errors import InvalidRecordError
from pylogq.protocol import SUPPORTED_VERSIONS, ApiKey
from pylogq.records import build_batch
from pylogq.records.legacy import LegacyRecordBatchBuilder

TS = 1_700_000_000_000


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Tuple[pylogq.Broker, BrokerConnection]]:
    with pylogq.Broker(str(tmp_path / "data")) as broker:
        host, port = broker.serve()
        broker.create_topic("plain")
        broker.create_topic("compacted", config={"cleanup.policy": "compact"})
        conn = BrokerConnection(host, port, "produce-versions-test", 10.0)
        try:
            yield broker, conn
        finally:
            conn.close()


def _records(version: int, keys: Any) -> bytes:
    if version >= 3:
        return bytes(build_batch([b"v%d" % i for i in range(len(keys))], keys=keys, timestamps=TS))
    builder = LegacyRecordBatchBuilder(0 if version < 2 else 1)
    for i, key in enumerate(keys):
        builder.append(i, TS if version >= 2 else None, key, b"v%d" % i)
    return bytes(builder.build())


def _produce(conn: BrokerConnection, version: int, topic: str, records: bytes) -> Dict[str, Any]:
    response = conn.request(ApiKey.PRODUCE, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}, version=version)
    [topic_out] = response["responses"]
    [part] = topic_out["partition_responses"]
    return part


def test_every_kafka_version_is_served() -> None:
    assert SUPPORTED_VERSIONS[ApiKey.PRODUCE] == (0, 11)


@pytest.mark.parametrize("version", range(12))
def test_each_version_appends(served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    before = broker.list_offsets("plain", 0, -1)[0]
    part = _produce(conn, version, "plain", _records(version, [b"a", b"b", b"c"]))
    assert part["error_code"] == 0 and part["base_offset"] == before, part
    assert broker.list_offsets("plain", 0, -1)[0] == before + 3
    if version >= 5:
        assert part["log_start_offset"] == 0
    if version >= 8:
        assert part["record_errors"] == [] and part["error_message"] is None


@pytest.mark.parametrize("version", range(3, 12))
def test_a_keyless_record_in_a_compacted_topic_is_named_by_its_index(
        served: Tuple[pylogq.Broker, BrokerConnection], version: int) -> None:
    broker, conn = served
    part = _produce(conn, version, "compacted", _records(version, [b"k0", b"k1", None, b"k3"]))
    assert part["error_code"] == InvalidRecordError.code
    assert broker.list_offsets("compacted", 0, -1)[0] == 0  # the batch is refused whole, as in Kafka
    if version >= 8:
        [error] = part["record_errors"]
        assert error["batch_index"] == 2
        assert error["batch_index_error_message"] == (
            "Compacted topic cannot accept message without key in topic partition compacted-0.")
        assert "rejected due to 1 record errors" in part["error_message"]
