"""docs/storage.md documents every configuration key, in tables generated from the config classes.

The tables between ``<!-- config-table: LogConfig -->`` and ``<!-- end config-table -->``
(and the same for LogManagerConfig) are generated from the dataclass fields of
:mod:`pylogq.storage.config`: key, type, default and valid values come from each
field's spec, the meaning from :data:`MEANINGS` (or the spec's own ``doc``). A
key added to the code without a meaning here, or a table edited by hand, fails
these tests. ``python tests/storage/test_storage_docs.py`` rewrites the tables.
"""

from __future__ import annotations

import math
import pathlib
import re
import sys
from typing import Any, Dict, List, Type

if __name__ == "__main__":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from pylogq.config import INT_MAX, LONG_MAX, LogConfig
from pylogq.storage.config import LogManagerConfig

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "storage.md"
TABLE = re.compile(r"(<!-- config-table: (\w+) -->\n)(.*?)(<!-- end config-table -->)", re.S)

_UNUSED = "Accepted and validated; the storage layer does not act on it"

#: What each key does in pylogq (where it differs from Kafka, what pylogq does).
MEANINGS: Dict[str, str] = {
    # -- topic level (LogConfig)
    "segment.bytes": "The active segment rolls when an append would take its .log past this size. "
                     "One append larger than this is refused (RecordListTooLargeError).",
    "segment.ms": "The active segment rolls when the new batch's max timestamp is this much later than the "
                  "first batch's (or the segment is this old, when batches carry no timestamp), less the jitter.",
    "segment.jitter.ms": "Upper bound of a per-partition jitter subtracted from segment.ms, so partitions "
                         "do not all roll at once; fixed for the life of the process.",
    "segment.index.bytes": "Size each .index and .timeindex is preallocated to (rounded down to whole "
                           "entries); the segment rolls when either index is full.",
    "index.interval.bytes": "Bytes of batches appended between two offset index entries (an entry is "
                            "added once more than this many bytes went by; 0 indexes every batch but the first).",
    "max.message.bytes": "Largest batch accepted (MessageTooLargeError above it); recovery also treats a "
                         "larger entry as invalid.",
    "message.timestamp.type": "CreateTime keeps the producer's timestamps; LogAppendTime stamps every "
                              "appended batch with the log's clock.",
    "message.timestamp.difference.max.ms": "With CreateTime, the records of a batch whose timestamps are "
                                           "further than this from the log's clock are refused, each named "
                                           "(InvalidTimestampError); the default for the two keys below.",
    "message.timestamp.before.max.ms": "With CreateTime, a record more than this before the log's clock is refused "
                                       "(InvalidTimestampError); Long.MAX_VALUE takes "
                                       "message.timestamp.difference.max.ms.",
    "message.timestamp.after.max.ms": "With CreateTime, a record more than this after the log's clock is refused "
                                      "(InvalidTimestampError); Long.MAX_VALUE takes "
                                      "message.timestamp.difference.max.ms.",
    "message.format.version": "Accepted and ignored, as Kafka 3.x ignores it: every append is written as v2 "
                              "batches (legacy message sets up-converted).",
    "message.downconversion.enable": _UNUSED + " (no down-conversion happens in storage).",
    "flush.messages": "fsync the log once this many records were appended since the last flush.",
    "flush.ms": "fsync the log when this long has passed since the last flush; checked by the log "
                "manager every log.flush.scheduler.interval.ms.",
    "retention.ms": "Retention deletes the oldest segments whose largest timestamp is older than this; "
                    "negative keeps them forever. Needs the delete policy.",
    "retention.bytes": "Retention deletes the oldest segments while the log stays at or above this size "
                       "without them; negative is unlimited. Needs the delete policy.",
    "local.retention.ms": _UNUSED + " (no tiered storage).",
    "local.retention.bytes": _UNUSED + " (no tiered storage).",
    "remote.storage.enable": _UNUSED + " (no tiered storage).",
    "cleanup.policy": "delete: retention.ms and retention.bytes apply; compact: the log cleaner compacts "
                      "the log; both may be given.",
    "min.cleanable.dirty.ratio": "The cleaner picks a compacted log once its dirty bytes are more than "
                                 "this share of its clean plus dirty bytes.",
    "delete.retention.ms": "How long a tombstone, or a transaction marker whose records are gone, survives "
                           "compaction once the data behind it was cleaned.",
    "min.compaction.lag.ms": "Segments whose largest timestamp is younger than this are not compacted yet.",
    "max.compaction.lag.ms": "A log with dirty data older than this is compacted whatever its dirty ratio.",
    "file.delete.delay.ms": "Delay between renaming a segment's files to .deleted and removing them.",
    "preallocate": "Reserve each new segment's blocks up front (posix_fallocate of segment.bytes), so appends "
    "write into allocated blocks; the file is cut to its data on roll and close, and recovery cuts the zero "
    "tail of a segment that was never closed.",
    "min.insync.replicas": "A replication setting; the storage layer does not use it.",
    "unclean.leader.election.enable": "A replication setting; the storage layer does not use it.",
    "compression.type": _UNUSED + ": batches are stored in the codec they arrive in.",
    "leader.replication.throttled.replicas": "A replication setting; the storage layer does not use it.",
    "follower.replication.throttled.replicas": "A replication setting; the storage layer does not use it.",
    # -- broker level (LogManagerConfig)
    "log.dirs": "Log directories; each holds partition directories and the manager's files. A new "
                "partition goes to the directory holding the fewest.",
    "num.recovery.threads.per.data.dir": _UNUSED + " (logs are loaded one after another).",
    "log.flush.scheduler.interval.ms": "Period of the manager's task that applies flush.ms (the default "
                                       "means it practically never runs).",
    "log.flush.interval.messages": "Broker default for flush.messages.",
    "log.flush.interval.ms": "Broker default for flush.ms; unset means log.flush.scheduler.interval.ms.",
    "log.flush.offset.checkpoint.interval.ms": "Period of writing recovery-point-offset-checkpoint (and, "
                                               "in pylogq, log-start-offset-checkpoint with it).",
    "log.flush.start.offset.checkpoint.interval.ms": _UNUSED + ": log start offsets are checkpointed with "
                                                     "the recovery points.",
    "log.retention.check.interval.ms": "Period of the manager's retention task.",
    "log.initial.task.delay.ms": _UNUSED + ": each background task first runs one period after start.",
    "log.cleaner.enable": "Start the log cleaner with the manager (logs with cleanup.policy=compact).",
    "log.cleaner.threads": "Cleaner threads; 0 starts none (clean_log() still works).",
    "log.cleaner.io.max.bytes.per.second": "Throttle on the bytes the cleaner reads and writes, shared by "
                                           "its threads.",
    "log.cleaner.dedupe.buffer.size": "Memory for the cleaners' offset maps, split evenly among the threads.",
    "log.cleaner.io.buffer.size": "Bytes of cleaned batches buffered before each write to a .cleaned segment.",
    "log.cleaner.io.buffer.load.factor": _UNUSED + ".",
    "log.cleaner.backoff.ms": "How long a cleaner thread sleeps when no log needs cleaning.",
    "log.cleaner.min.cleanable.ratio": "Broker default for min.cleanable.dirty.ratio.",
    "log.cleaner.delete.retention.ms": "Broker default for delete.retention.ms.",
    "log.cleaner.min.compaction.lag.ms": "Broker default for min.compaction.lag.ms.",
    "log.cleaner.max.compaction.lag.ms": "Broker default for max.compaction.lag.ms.",
    "log.segment.bytes": "Broker default for segment.bytes.",
    "log.roll.ms": "Broker default for segment.ms; wins over log.roll.hours.",
    "log.roll.hours": "Broker default for segment.ms, in hours.",
    "log.roll.jitter.ms": "Broker default for segment.jitter.ms; wins over log.roll.jitter.hours.",
    "log.roll.jitter.hours": "Broker default for segment.jitter.ms, in hours.",
    "log.retention.ms": "Broker default for retention.ms; wins over the minutes and hours keys.",
    "log.retention.minutes": "Broker default for retention.ms, in minutes; wins over log.retention.hours.",
    "log.retention.hours": "Broker default for retention.ms, in hours.",
    "log.retention.bytes": "Broker default for retention.bytes.",
    "log.cleanup.policy": "Broker default for cleanup.policy.",
    "log.index.size.max.bytes": "Broker default for segment.index.bytes.",
    "log.index.interval.bytes": "Broker default for index.interval.bytes.",
    "log.message.timestamp.type": "Broker default for message.timestamp.type.",
    "log.message.timestamp.difference.max.ms": "Broker default for message.timestamp.difference.max.ms.",
    "log.message.timestamp.before.max.ms": "Broker default for message.timestamp.before.max.ms.",
    "log.message.timestamp.after.max.ms": "Broker default for message.timestamp.after.max.ms.",
    "log.message.format.version": "Broker default for message.format.version.",
    "log.message.downconversion.enable": "Broker default for message.downconversion.enable.",
    "message.max.bytes": "Broker default for max.message.bytes.",
    "log.segment.delete.delay.ms": "Broker default for file.delete.delay.ms.",
    "log.preallocate": "Broker default for preallocate.",
}


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "Infinity" if math.isinf(value) else repr(value)
    if isinstance(value, tuple):
        return ",".join(value) if value else "(empty)"
    if value == LONG_MAX:
        return "Long.MAX_VALUE"
    if value == INT_MAX:
        return "Integer.MAX_VALUE"
    return str(value)


def _bound(value: float) -> str:
    if value == LONG_MAX:
        return "Long.MAX_VALUE"
    return str(int(value)) if float(value).is_integer() else repr(value)


def _valid(spec: Any) -> str:
    parts: List[str] = []
    if spec.choices:
        parts.append(("list of " if spec.kind == "LIST" else "one of ") + ", ".join(spec.choices))
    if spec.at_least is not None and spec.at_most is not None:
        parts.append("[%s, %s]" % (_bound(spec.at_least), _bound(spec.at_most)))
    elif spec.at_least is not None:
        parts.append(">= %s" % _bound(spec.at_least))
    elif spec.at_most is not None:
        parts.append("<= %s" % _bound(spec.at_most))
    if spec.non_empty:
        parts.append("at least one")
    if spec.nullable:
        parts.append("or unset")
    return "; ".join(parts) or "any"


def specs(cls: Type[Any]) -> List[Any]:
    """The settings of a config class, in declaration order."""
    return list(cls._table()[0].values())


def config_table(cls: Type[Any]) -> str:
    """The Markdown table of every key of ``cls``."""
    rows = ["| Key | Type | Default | Valid values | Meaning in pylogq |", "|---|---|---|---|---|"]
    for spec in specs(cls):
        meaning = MEANINGS.get(spec.key) or spec.doc
        if not meaning:
            raise KeyError("no meaning documented for %s.%s: add it to MEANINGS" % (cls.__name__, spec.key))
        rows.append("| `%s` | %s | `%s` | %s | %s |" % (spec.key, spec.kind, _default(spec.default),
                                                         _valid(spec), meaning))
    return "\n".join(rows) + "\n"


CLASSES = {"LogConfig": LogConfig, "LogManagerConfig": LogManagerConfig}


def render(text: str) -> str:
    """``text`` with every config table regenerated."""
    return TABLE.sub(lambda m: m.group(1) + config_table(CLASSES[m.group(2)]) + m.group(4), text)


def test_every_config_key_appears_in_the_storage_doc():
    text = DOC.read_text()
    for cls in (LogConfig, LogManagerConfig):
        missing = [key for key in cls.known_keys() if "`%s`" % key not in text]
        assert not missing, "%s keys missing from docs/storage.md: %s" % (cls.__name__, missing)


def test_config_tables_are_generated_from_the_code():
    text = DOC.read_text()
    assert sorted(m.group(2) for m in TABLE.finditer(text)) == sorted(CLASSES)
    assert render(text) == text, "config tables are stale: run python tests/storage/test_storage_docs.py"


def test_every_meaning_belongs_to_a_key():
    known = set(LogConfig.known_keys()) | set(LogManagerConfig.known_keys())
    assert set(MEANINGS) <= known, sorted(set(MEANINGS) - known)


if __name__ == "__main__":
    DOC.write_text(render(DOC.read_text()))
    print("rewrote the config tables of %s" % DOC)
