"""Compaction end to end in one process: producer -> broker -> log cleaner -> consumer.

The broker's background cleaner is off (``log.cleaner.enable=false``); the
test rolls the log and runs ``LogCleaner.clean_log`` itself, so every step is
synchronous. Each value is unique, so a consumed record can be matched to the
``RecordMetadata`` the producer got for it: compaction must keep exactly the
latest record of every key, at the offset it was given when produced. The
suite runs once per records implementation (compiled, then
``PYLOGQ_NO_EXTENSIONS=1``), which is what the cleaner and consumer decode with.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import pylogq
from pylogq.client.consumer import Consumer, TopicPartition
from pylogq.client.producer import Producer
from pylogq.storage.cleaner import LogCleaner

TOPIC = "compacted"
TP = TopicPartition(TOPIC, 0)
KEYS = [b"key-%02d" % i for i in range(20)]
DEAD = KEYS[7]  # the key whose last record is a tombstone
ROUNDS = 30
TS = 1_700_000_000_000
DEADLINE_S = 30.0

Produced = Dict[Tuple[bytes, Optional[bytes]], int]  # (key, value) -> offset from RecordMetadata


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[Any]:
    with pylogq.Broker(str(tmp_path / "data"), group_initial_rebalance_delay_ms=0,
                       log_cleaner_enable=False) as b:
        b.create_topic(TOPIC, 1, config={
            "cleanup.policy": "compact",
            "segment.bytes": 4096,
            "min.cleanable.dirty.ratio": 0.01,
            "delete.retention.ms": 0,
        })
        yield b


def _produce(broker: Any, rounds: range, keys: List[bytes], tombstone: Optional[bytes] = None) -> Produced:
    """Send one value per key per round (flushing each round); the tombstone goes last."""
    producer = Producer(broker=broker, acks=1)
    futures: List[Tuple[bytes, Optional[bytes], Any]] = []
    try:
        for r in rounds:
            for i, key in enumerate(keys):
                value = b"value-%s-round-%03d" % (key, r)
                futures.append((key, value, producer.send(TOPIC, value, key, timestamp_ms=TS + r * 100 + i)))
            producer.flush()
        if tombstone is not None:
            futures.append((tombstone, None, producer.send(TOPIC, None, tombstone,
                                                           timestamp_ms=TS + rounds.stop * 100)))
            producer.flush()
    finally:
        producer.close()
    return {(key, value): f.get(0).offset for key, value, f in futures}


def _latest(produced: Produced) -> Dict[bytes, Tuple[Optional[bytes], int]]:
    """Each key's last record as (value, offset)."""
    latest: Dict[bytes, Tuple[Optional[bytes], int]] = {}
    for (key, value), offset in produced.items():
        if key not in latest or offset > latest[key][1]:
            latest[key] = (value, offset)
    return latest


def _roll_and_clean(broker: Any) -> Any:
    log_ = broker.partition(TOPIC, 0).log
    log_.roll()
    stats = LogCleaner(broker.logs).clean_log(log_)
    assert not stats.aborted
    return log_


def _consume_all(broker: Any, end_offset: int) -> List[Any]:
    consumer = Consumer(broker=broker, auto_offset_reset="earliest")
    consumer.assign([TP])
    consumer.seek_to_beginning(TP)
    out: List[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while consumer.position(TP) < end_offset:
            assert time.monotonic() < deadline, "consumed only up to %d of %d" % (consumer.position(TP), end_offset)
            for records in consumer.poll(timeout_ms=1000).values():
                out.extend(records)
    finally:
        consumer.close()
    return out


def _check_exactly_latest(consumed: List[Any], produced: Produced,
                          latest: Dict[bytes, Tuple[Optional[bytes], int]]) -> None:
    offsets = [r.offset for r in consumed]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    for r in consumed:
        assert produced[(r.key, r.value)] == r.offset, "offset of %r moved" % (r.key,)
    assert {r.key: (r.value, r.offset) for r in consumed} == latest
    assert len(consumed) == len(latest) < len(produced)


def test_compaction_keeps_latest_per_key_at_its_offset(broker: Any) -> None:
    produced = _produce(broker, range(ROUNDS), KEYS, tombstone=DEAD)
    end = max(produced.values()) + 1
    log_ = _roll_and_clean(broker)
    assert len(log_.segments) > 1

    # The first clean has no clean section before it: every tombstone is kept.
    consumed = _consume_all(broker, end)
    _check_exactly_latest(consumed, produced, _latest(produced))
    assert [r.value for r in consumed if r.key == DEAD] == [None]
    assert log_.log_start_offset == 0 and log_.log_end_offset == end


def test_tombstone_dropped_once_behind_the_delete_horizon(broker: Any) -> None:
    produced = _produce(broker, range(ROUNDS), KEYS, tombstone=DEAD)
    _roll_and_clean(broker)

    # Newer data cleaned behind the tombstone moves the delete horizon
    # (delete.retention.ms=0) past the tombstone's segment, so it goes.
    live = [k for k in KEYS if k != DEAD]
    newer = _produce(broker, range(ROUNDS, ROUNDS + 3), live)
    end = max(newer.values()) + 1
    _roll_and_clean(broker)

    consumed = _consume_all(broker, end)
    everything = {**produced, **newer}
    latest = _latest(everything)
    del latest[DEAD]
    _check_exactly_latest(consumed, everything, latest)
    assert DEAD not in {r.key for r in consumed}
