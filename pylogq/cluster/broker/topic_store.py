"""The topic-metadata store: which topics exist, their partition counts and config overrides.

The broker reads and writes topic metadata only through :class:`TopicStore`. A
single node keeps it in ``pylogq-topics.json`` in its data directory
(:class:`FileTopicStore`, written atomically, so a crash leaves the old or the new
file, never a torn one); a cluster's stores (in memory for one process, ZooKeeper's
``/brokers/topics`` and ``/config/topics`` across processes) implement the same calls.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Protocol, Sequence

from ...errors import CorruptMetadataError, InconsistentTopicIdError, InvalidTopicError
from ...storage.checkpoint import write_atomically
from ...storage.log import parse_dir_name
from ...storage.partition_metadata import PARTITION_METADATA_FILE, new_topic_id, parse_topic_id, read_partition_metadata
from ..names import validate_topic_name

__all__ = ["FileTopicStore", "TOPICS_FILE", "TopicMetadata", "TopicStore"]

TOPICS_FILE = "pylogq-topics.json"

log = logging.getLogger("pylogq.broker")


class TopicMetadata(NamedTuple):
    """One topic: its partition count, its config overrides (dotted keys, string values) and its id.

    ``topic_id`` is Kafka's topic id (base64url, see :mod:`pylogq.storage.partition_metadata`),
    given at creation and kept for the topic's life; "" only before one is assigned.
    """

    partitions: int
    config: Dict[str, str]
    topic_id: str = ""


class TopicStore(Protocol):
    """Where topic metadata lives. Callers serialize changes (the broker's lock)."""

    def load(self) -> Dict[str, TopicMetadata]:
        """Every topic, as stored."""
        ...

    def put(self, name: str, metadata: TopicMetadata) -> None:
        """Create or replace a topic's metadata (durable when it returns)."""
        ...

    def remove(self, name: str) -> None:
        """Forget a topic (durable when it returns)."""
        ...


class FileTopicStore:
    """Topic metadata in one JSON file, rewritten atomically on every change. Not thread-safe.

    The file: ``{"version": 1, "topics": {"<name>": {"partitions": <n>, "config": {"<key>": "<value>"},
    "topic_id": "<id>"}}}``. One that does not parse stops the broker
    (:class:`~pylogq.errors.CorruptMetadataError`); a missing one is rebuilt from the partition
    directories, with a warning (see :meth:`load`).
    """

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, TOPICS_FILE)
        self._topics: Dict[str, TopicMetadata] = {}

    def load(self, log_dirs: Sequence[str] = (), configs: Optional[Mapping[str, Mapping[str, str]]] = None
             ) -> Dict[str, TopicMetadata]:
        """Every topic, as stored.

        When the file is missing but ``log_dirs`` hold partition directories, the
        topics are rebuilt from them rather than leaving their data orphaned: a
        topic's partition count is one past its highest partition directory; its
        config is ``configs[topic]`` where given (the broker's own topics), else
        the broker's defaults. The rebuilt file is written and a warning names the
        topics. A file that does not parse raises CorruptMetadataError.

        A topic without an id (the file of a pylogq that predates topic ids, or a
        rebuilt topic) takes the one its partition directories' ``partition.metadata``
        files agree on, else a new one, and the file is written back. Files that
        disagree raise InconsistentTopicIdError naming them.
        """
        if not os.path.exists(self.path):
            self._topics = self._rebuild(log_dirs, configs or {})
            if self._topics:
                self._save()
            return dict(self._topics)
        import json  # here and in _save: an empty data directory starts without it

        owners: Dict[str, str] = {}  # topic id -> name
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
            try:
                data = json.loads(raw.decode("utf-8"))
            except ValueError as exc:  # UnicodeDecodeError and json's JSONDecodeError
                raise ValueError("not JSON (%s)" % exc) from None
            topics = data.get("topics") if isinstance(data, dict) else None
            if not isinstance(topics, dict):
                raise ValueError('no "topics" object')
            self._topics = {name: _parse_topic(name, m) for name, m in topics.items()}
            for name, m in sorted(self._topics.items()):
                if m.topic_id and m.topic_id in owners:
                    raise ValueError("topics %s and %s have the same topic id %s" % (owners[m.topic_id], name,
                                                                                      m.topic_id))
                if m.topic_id:
                    owners[m.topic_id] = name
        except (OSError, ValueError) as exc:
            raise CorruptMetadataError(
                self.path, (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc),
                "restore it from a backup, or move it away to have the broker rebuild the topics from their "
                "partition directories (their configs reset to the broker's defaults)") from None
        without_id = sorted(name for name, m in self._topics.items() if not m.topic_id)
        if without_id:
            on_disk = _partition_dirs(log_dirs)
            for name in without_id:
                topic_id = _topic_id_from(name, on_disk.get(name, {}))
                if topic_id in owners:  # another topic's: a new id, and opening the partitions names the files
                    topic_id = new_topic_id()
                owners[topic_id] = name
                self._topics[name] = self._topics[name]._replace(topic_id=topic_id)
            self._save()
            log.info("%s: gave topic ids to %d topic%s that had none: %s", self.path, len(without_id),
                     "s" * (len(without_id) != 1), ", ".join(without_id))
        return dict(self._topics)

    def _rebuild(self, log_dirs: Sequence[str], configs: Mapping[str, Mapping[str, str]]) -> Dict[str, TopicMetadata]:
        """The topics the ``<topic>-<partition>`` directories of ``log_dirs`` make (see :meth:`load`)."""
        dirs = _partition_dirs(log_dirs)
        found: Dict[str, List[int]] = {t: sorted(ps) for t, ps in dirs.items()}
        if not found:
            return {}
        topics = {t: TopicMetadata(max(ps) + 1, dict(configs.get(t, {})), _topic_id_from(t, dirs[t]))
                  for t, ps in sorted(found.items())}
        log.warning("%s is missing but %d partition directories exist: rebuilt %s from them; topic configs "
                    "are the broker's defaults (set any overrides again)", self.path,
                    sum(len(ps) for ps in found.values()),
                    ", ".join("%s (%d partition%s)" % (t, m.partitions, "s" * (m.partitions != 1))
                              for t, m in topics.items()))
        for t, ps in sorted(found.items()):
            missing = sorted(set(range(max(ps) + 1)) - set(ps))
            if missing:
                log.warning("topic %s: no directory for partitions %s; they start empty",
                            t, ", ".join(str(p) for p in missing))
        return topics

    def put(self, name: str, metadata: TopicMetadata) -> None:
        parse_topic_id(metadata.topic_id)  # ValueError: every stored topic has its id
        self._topics[name] = metadata
        self._save()

    def remove(self, name: str) -> None:
        self._topics.pop(name, None)
        self._save()

    def __iter__(self) -> Iterator[str]:
        return iter(self._topics)

    def _save(self) -> None:
        import json

        # One topic a line, each encoded compactly (json's C encoder; its indenting one is
        # pure Python and made a broker of thousands of topics slow to create one).
        lines = ["%s: %s" % (json.dumps(name), json.dumps({"config": m.config, "partitions": m.partitions,
                                                           "topic_id": m.topic_id}, sort_keys=True))
                 for name, m in sorted(self._topics.items())]
        body = '{"topics": {\n%s\n}, "version": 1}\n' % ",\n".join(lines)
        write_atomically(self.path, body.encode())


def _parse_topic(name: Any, entry: Any) -> TopicMetadata:
    """One topic's entry of the file; ValueError saying what is wrong with it."""
    if not isinstance(name, str) or not name:
        raise ValueError("a topic name %r is not a non-empty string" % (name,))
    if not isinstance(entry, dict):
        raise ValueError("topic %s: its entry is not an object" % name)
    partitions = entry.get("partitions")
    if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
        raise ValueError("topic %s: partitions %r is not a positive integer" % (name, partitions))
    config = entry.get("config", {})
    if not isinstance(config, dict):
        raise ValueError("topic %s: config is not an object" % name)
    values: Dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (int, float)):
            value = str(value)  # a hand-edited number: Kafka's configs are strings
        if not isinstance(value, str):
            raise ValueError("topic %s: config %s is %r, not a string" % (name, key, value))
        values[key] = value
    topic_id = entry.get("topic_id")
    if topic_id is not None:  # absent in the file of a pylogq that predates topic ids: load() assigns one
        try:
            parse_topic_id(topic_id)
        except ValueError as exc:
            raise ValueError("topic %s: %s" % (name, exc)) from None
    return TopicMetadata(partitions, values, topic_id or "")


def _partition_dirs(log_dirs: Sequence[str]) -> Dict[str, Dict[int, str]]:
    """topic -> {partition: path} of the ``<topic>-<partition>`` directories in ``log_dirs``."""
    found: Dict[str, Dict[int, str]] = {}
    for log_dir in log_dirs:
        try:
            names = sorted(os.listdir(log_dir))
        except FileNotFoundError:
            continue
        for name in names:
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            try:
                topic, partition = parse_dir_name(path)
                validate_topic_name(topic)
            except (ValueError, InvalidTopicError):
                continue  # not a partition (the log manager warns about it)
            found.setdefault(topic, {})[partition] = path
    return found


def _topic_id_from(topic: str, dirs: Mapping[int, str]) -> str:
    """The id the ``partition.metadata`` files of ``dirs`` agree on, else a new one.

    Files that disagree raise InconsistentTopicIdError naming them (Kafka takes
    such a log directory offline); a file that does not parse, CorruptMetadataError.
    """
    ids: Dict[str, List[str]] = {}
    for _, path in sorted(dirs.items()):
        topic_id = read_partition_metadata(path)
        if topic_id is not None:
            ids.setdefault(topic_id, []).append(os.path.join(path, PARTITION_METADATA_FILE))
    if len(ids) > 1:
        raise InconsistentTopicIdError(
            "topic %s: its partition.metadata files hold different topic ids (%s); remove the wrong ones"
            % (topic, "; ".join("%s in %s" % (i, ", ".join(paths)) for i, paths in sorted(ids.items()))))
    if ids:
        return next(iter(ids))
    return new_topic_id()
