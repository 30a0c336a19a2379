"""A plain consume-and-produce loop: what a mirror does at its simplest, as a process of its own.

``python tests/mirror/_copy_loop.py SOURCE TARGET TOPIC REMOTE_TOPIC GROUP [KEY=VALUE ...]`` copies
every partition of ``TOPIC`` on the cluster at ``SOURCE`` to the same partition of
``REMOTE_TOPIC`` on the cluster at ``TARGET`` (which must exist with at least as many
partitions), with each record's key, value, headers and timestamp, in order. It reads
with pylogq's Consumer (assigned every partition, no group membership), writes with
pylogq's idempotent Producer, and after each poll waits for the copies to be
acknowledged and then commits the next offsets to read, as group ``GROUP`` on the
source: a restarted loop resumes there (at least once: a kill between the
acknowledgement and the commit copies those records again). ``KEY=VALUE`` arguments are
client settings, kafka-python's names prefixed ``consumer.`` or ``producer.``
(``producer.linger_ms=5``); an integer value is passed as an int.

It prints ``ready`` once its clients are connected and it knows the partitions, then
copies until SIGTERM, which it answers by finishing the current poll's copies and
commit and exiting with status 0.

It stands in for ``pylogq mirror-maker`` where the harness itself is tested, and it is
the reference of the mirror's throughput benchmark (benchmarks/test_mirror.py).
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple, cast

from pylogq.client.consumer import Consumer, OffsetAndMetadata, TopicPartition
from pylogq.client.producer import Producer

READY = "ready"


def client_settings(items: List[str]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``consumer.KEY=VALUE`` / ``producer.KEY=VALUE`` arguments -> (consumer, producer) settings."""
    consumer: Dict[str, Any] = {}
    producer: Dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        kind, dot, name = key.partition(".")
        if not sep or not dot or kind not in ("consumer", "producer"):
            raise SystemExit("bad setting %r: expected consumer.KEY=VALUE or producer.KEY=VALUE" % item)
        value: Any = int(raw) if raw.lstrip("-").isdigit() else raw
        (consumer if kind == "consumer" else producer)[name] = value
    return consumer, producer


def copy(source: str, target: str, topic: str, remote: str, group: str, consumer_settings: Dict[str, Any],
         producer_settings: Dict[str, Any], stop: threading.Event) -> int:
    """Copy until ``stop`` is set; -> the records copied."""
    consumer = Consumer(bootstrap_servers=source, group_id=group, enable_auto_commit=False,
                        auto_offset_reset="earliest", **consumer_settings)
    producer = Producer(bootstrap_servers=target, **producer_settings)
    copied = 0
    try:
        partitions: Optional[set] = consumer.partitions_for_topic(topic)  # type: ignore[type-arg]
        if not partitions:
            raise SystemExit("topic %r not found on %s" % (topic, source))
        producer.partitions_for(remote)  # the target's metadata now, not at the first copy
        consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
        print(READY, flush=True)
        send = producer.send
        while not stop.is_set():
            batch = consumer.poll(timeout_ms=200)
            if not batch:
                continue
            positions: Dict[TopicPartition, OffsetAndMetadata] = {}
            for tp, records in batch.items():
                for r in records:
                    # A header's value may be null, which send() takes though its signature says bytes.
                    headers = cast(List[Tuple[str, bytes]], list(r.headers)) if r.headers else None
                    send(remote, r.value, key=r.key, headers=headers, partition=tp.partition, timestamp_ms=r.timestamp)
                positions[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
                copied += len(records)
            producer.flush()
            consumer.commit(positions)
    finally:
        producer.close()
        consumer.close(autocommit=False)
    return copied


def main(argv: List[str]) -> int:
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    source, target, topic, remote, group = argv[:5]
    consumer_settings, producer_settings = client_settings(argv[5:])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    copied = copy(source, target, topic, remote, group, consumer_settings, producer_settings, stop)
    print("copied %d records" % copied, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
