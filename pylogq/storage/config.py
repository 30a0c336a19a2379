"""Kafka's broker-level log settings: ``LogManagerConfig``.

Built on :mod:`pylogq.config` (the machinery and the topic-level
:class:`~pylogq.config.LogConfig`). The broker-level keys
that set topic defaults (``log.segment.bytes``, ``log.roll.hours``,
``message.max.bytes``, ...) map onto ``LogConfig`` through
``LogManagerConfig.default_log_config()``, with Kafka's precedence for the
time settings (``log.retention.ms`` > ``log.retention.minutes`` >
``log.retention.hours``; ``log.roll.ms`` > ``log.roll.hours``).
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any, ClassVar, Dict, Mapping, Optional, Tuple

from ..config import (
    _BOOLEAN,
    _DOUBLE,
    _INT,
    _LIST,
    _LONG,
    _STRING,
    CLEANUP_POLICIES,
    CLEANUP_POLICY_DELETE,
    COMPRESSION_TYPES,
    CREATE_TIME,
    DEFAULT_MESSAGE_FORMAT_VERSION,
    LONG_MAX,
    MIN_SEGMENT_BYTES,
    TIMESTAMP_TYPES,
    Config,
    LogConfig,
    parse_properties,
    setting,
)
from ..errors import ConfigError
from .file_cache import MIN_CAPACITY
from .reservation import DEFAULT_BUDGET

__all__ = ["LogManagerConfig"]


# --------------------------------------------------------------------------- broker level

_MS_PER_MINUTE = 60 * 1000
_MS_PER_HOUR = 60 * _MS_PER_MINUTE


class LogManagerConfig(Config):
    """Kafka's broker-level log settings, including the broker defaults for topic settings.

    Built like :class:`LogConfig`. With ``strict=False`` keys this class does
    not know (``listeners``, ``broker.id``, ...) are kept as given in
    ``extra`` instead of raising, so a whole ``server.properties`` can be
    read; they are not part of ``to_dict()``. ``log.dir`` is accepted for
    ``log.dirs`` (which wins when both are given). Immutable; safe to share
    between threads.
    """

    _ALIASES: ClassVar[Mapping[str, str]] = {"log.dir": "log.dirs"}

    log_dirs: Tuple[str, ...] = setting("log.dirs", _LIST, ("/tmp/kafka-logs",), paths=True, non_empty=True,
                                         doc="directories holding partition logs")
    num_recovery_threads_per_data_dir: int = setting("num.recovery.threads.per.data.dir", _INT, 1, at_least=1)
    log_flush_scheduler_interval_ms: int = setting("log.flush.scheduler.interval.ms", _LONG, LONG_MAX)
    log_flush_interval_messages: int = setting("log.flush.interval.messages", _LONG, LONG_MAX, at_least=1)
    log_flush_interval_ms: Optional[int] = setting("log.flush.interval.ms", _LONG, None, nullable=True,
                                                    at_least=0,
                                                    doc="unset: log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms: int = setting("log.flush.offset.checkpoint.interval.ms", _INT,
                                                            60000, at_least=0)
    log_flush_start_offset_checkpoint_interval_ms: int = setting(
        "log.flush.start.offset.checkpoint.interval.ms", _INT, 60000, at_least=0)
    log_retention_check_interval_ms: int = setting("log.retention.check.interval.ms", _LONG, 300000, at_least=1)
    log_initial_task_delay_ms: int = setting("log.initial.task.delay.ms", _LONG, 30000, at_least=0,
                                              doc="delay before the first background retention/flush task")
    log_cleaner_enable: bool = setting("log.cleaner.enable", _BOOLEAN, True)
    log_cleaner_threads: int = setting("log.cleaner.threads", _INT, 1, at_least=0)
    log_cleaner_io_max_bytes_per_second: float = setting("log.cleaner.io.max.bytes.per.second", _DOUBLE,
                                                          math.inf, at_least=0)
    log_cleaner_dedupe_buffer_size: int = setting("log.cleaner.dedupe.buffer.size", _LONG, 134217728,
                                                   at_least=0)
    log_cleaner_io_buffer_size: int = setting("log.cleaner.io.buffer.size", _INT, 524288, at_least=0)
    log_cleaner_io_buffer_load_factor: float = setting("log.cleaner.io.buffer.load.factor", _DOUBLE, 0.9,
                                                        at_least=0, at_most=1)
    log_cleaner_backoff_ms: int = setting("log.cleaner.backoff.ms", _LONG, 15000, at_least=0)
    log_cleaner_min_cleanable_ratio: float = setting("log.cleaner.min.cleanable.ratio", _DOUBLE, 0.5,
                                                      at_least=0, at_most=1)
    log_cleaner_delete_retention_ms: int = setting("log.cleaner.delete.retention.ms", _LONG, 86400000,
                                                    at_least=0)
    log_cleaner_min_compaction_lag_ms: int = setting("log.cleaner.min.compaction.lag.ms", _LONG, 0, at_least=0)
    log_cleaner_max_compaction_lag_ms: int = setting("log.cleaner.max.compaction.lag.ms", _LONG, LONG_MAX,
                                                      at_least=1)
    log_segment_bytes: int = setting("log.segment.bytes", _INT, 1073741824, at_least=MIN_SEGMENT_BYTES)
    log_roll_ms: Optional[int] = setting("log.roll.ms", _LONG, None, nullable=True, at_least=1,
                                          doc="wins over log.roll.hours")
    log_roll_hours: int = setting("log.roll.hours", _INT, 168, at_least=1)
    log_roll_jitter_ms: Optional[int] = setting("log.roll.jitter.ms", _LONG, None, nullable=True, at_least=0,
                                                 doc="wins over log.roll.jitter.hours")
    log_roll_jitter_hours: int = setting("log.roll.jitter.hours", _INT, 0, at_least=0)
    log_retention_ms: Optional[int] = setting("log.retention.ms", _LONG, None, nullable=True,
                                               doc="wins over log.retention.minutes and log.retention.hours")
    log_retention_minutes: Optional[int] = setting("log.retention.minutes", _INT, None, nullable=True,
                                                    doc="wins over log.retention.hours")
    log_retention_hours: int = setting("log.retention.hours", _INT, 168)
    log_retention_bytes: int = setting("log.retention.bytes", _LONG, -1)
    log_cleanup_policy: Tuple[str, ...] = setting("log.cleanup.policy", _LIST, (CLEANUP_POLICY_DELETE,),
                                                   choices=CLEANUP_POLICIES)
    log_index_size_max_bytes: int = setting("log.index.size.max.bytes", _INT, 10485760, at_least=4)
    log_index_interval_bytes: int = setting("log.index.interval.bytes", _INT, 4096, at_least=0)
    log_message_timestamp_type: str = setting("log.message.timestamp.type", _STRING, CREATE_TIME,
                                               choices=TIMESTAMP_TYPES)
    log_message_timestamp_difference_max_ms: int = setting("log.message.timestamp.difference.max.ms", _LONG,
                                                            LONG_MAX, at_least=0)
    log_message_timestamp_before_max_ms: int = setting("log.message.timestamp.before.max.ms", _LONG, LONG_MAX,
                                                        at_least=0)
    log_message_timestamp_after_max_ms: int = setting("log.message.timestamp.after.max.ms", _LONG, LONG_MAX,
                                                       at_least=0)
    log_message_format_version: str = setting("log.message.format.version", _STRING,
                                               DEFAULT_MESSAGE_FORMAT_VERSION)
    log_message_downconversion_enable: bool = setting("log.message.downconversion.enable", _BOOLEAN, True)
    message_max_bytes: int = setting("message.max.bytes", _INT, 1048588, at_least=0)
    log_segment_delete_delay_ms: int = setting("log.segment.delete.delay.ms", _LONG, 60000, at_least=0)
    log_preallocate: bool = setting("log.preallocate", _BOOLEAN, False)
    log_open_files_max: Optional[int] = setting(
        "log.open.files.max", _INT, None, nullable=True, at_least=MIN_CAPACITY,
        doc="pylogq's own key: most segment files and index maps open at once in the process (each holds one "
            "descriptor); segments are opened on demand and the least recently used let go. Unset: a quarter "
            "of the open-file limit (RLIMIT_NOFILE), from 16 to 16384. See docs/operations.md.")
    log_reserve_bytes_max: int = setting(
        "log.reserve.bytes.max", _LONG, DEFAULT_BUDGET, at_least=0,
        doc="pylogq's own key: disk space all active segments of the process may hold reserved ahead of "
            "their appends; only segments written at a sustained rate reserve, in chunks of 1 to 16 MiB. "
            "0 reserves nothing; log.preallocate is not counted. See docs/operations.md.")
    min_insync_replicas: int = setting("min.insync.replicas", _INT, 1, at_least=1)
    unclean_leader_election_enable: bool = setting("unclean.leader.election.enable", _BOOLEAN, False)
    compression_type: str = setting("compression.type", _STRING, "producer", choices=COMPRESSION_TYPES)
    #: Keys this class does not know, kept when built with ``strict=False``.
    extra: Mapping[str, Any]
    _COMPARED = ("extra",)

    def __init__(self, *, strict: bool = True, **settings: Any) -> None:
        self._build({}, settings, strict=strict)

    @classmethod
    def from_dict(cls, settings: Mapping[str, Any], *, strict: bool = True) -> "LogManagerConfig":
        """A LogManagerConfig from a mapping of dotted and/or snake_case keys."""
        config = object.__new__(cls)
        config._build({}, settings, strict=strict)
        return config

    @classmethod
    def from_properties(cls, text: str, *, strict: bool = True) -> "LogManagerConfig":
        """A LogManagerConfig from ``.properties`` text (a ``server.properties`` with ``strict=False``)."""
        return cls.from_dict(parse_properties(text), strict=strict)

    def with_overrides(self, *, strict: bool = True, **settings: Any) -> "LogManagerConfig":
        """A new LogManagerConfig with ``settings`` replacing this one's values (``extra`` kept)."""
        return self._replaced(settings, strict)

    def merged(self, settings: Mapping[str, Any], *, strict: bool = True) -> "LogManagerConfig":
        """A new LogManagerConfig with the mapping's settings replacing this one's values (``extra`` kept)."""
        return self._replaced(settings, strict)

    def _finish(self, unknown: Dict[str, Any]) -> None:
        object.__setattr__(self, "extra", MappingProxyType(dict(unknown)))

    def _extra(self) -> Mapping[str, Any]:
        return self.extra

    def _validate(self) -> None:
        if self.log_cleaner_min_compaction_lag_ms > self.log_cleaner_max_compaction_lag_ms:
            raise ConfigError(
                "conflicting settings: log.cleaner.min.compaction.lag.ms (%d) > log.cleaner.max.compaction.lag.ms (%d)"
                % (self.log_cleaner_min_compaction_lag_ms, self.log_cleaner_max_compaction_lag_ms))

    @property
    def effective_log_retention_ms(self) -> int:
        """Retention in ms: log.retention.ms, else minutes, else hours; any negative is -1 (unlimited)."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * _MS_PER_MINUTE
        else:
            millis = self.log_retention_hours * _MS_PER_HOUR
        return -1 if millis < 0 else millis

    @property
    def effective_log_roll_ms(self) -> int:
        """Roll age in ms: log.roll.ms, else log.roll.hours."""
        if self.log_roll_ms is not None:
            return self.log_roll_ms
        return self.log_roll_hours * _MS_PER_HOUR

    @property
    def effective_log_roll_jitter_ms(self) -> int:
        """Roll jitter in ms: log.roll.jitter.ms, else log.roll.jitter.hours."""
        if self.log_roll_jitter_ms is not None:
            return self.log_roll_jitter_ms
        return self.log_roll_jitter_hours * _MS_PER_HOUR

    @property
    def effective_log_flush_interval_ms(self) -> int:
        """Flush age in ms: log.flush.interval.ms, else log.flush.scheduler.interval.ms (Kafka's fallback)."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    def log_config_defaults(self) -> Dict[str, Any]:
        """Topic key -> the broker's default for it (Kafka's ``extractLogConfigMap``)."""
        return {
            "segment.bytes": self.log_segment_bytes,
            "segment.ms": self.effective_log_roll_ms,
            "segment.jitter.ms": self.effective_log_roll_jitter_ms,
            "segment.index.bytes": self.log_index_size_max_bytes,
            "index.interval.bytes": self.log_index_interval_bytes,
            "max.message.bytes": self.message_max_bytes,
            "message.timestamp.type": self.log_message_timestamp_type,
            "message.timestamp.difference.max.ms": self.log_message_timestamp_difference_max_ms,
            "message.timestamp.before.max.ms": self.log_message_timestamp_before_max_ms,
            "message.timestamp.after.max.ms": self.log_message_timestamp_after_max_ms,
            "message.format.version": self.log_message_format_version,
            "message.downconversion.enable": self.log_message_downconversion_enable,
            "flush.messages": self.log_flush_interval_messages,
            "flush.ms": self.effective_log_flush_interval_ms,
            "retention.ms": self.effective_log_retention_ms,
            "retention.bytes": self.log_retention_bytes,
            "cleanup.policy": self.log_cleanup_policy,
            "min.cleanable.dirty.ratio": self.log_cleaner_min_cleanable_ratio,
            "delete.retention.ms": self.log_cleaner_delete_retention_ms,
            "min.compaction.lag.ms": self.log_cleaner_min_compaction_lag_ms,
            "max.compaction.lag.ms": self.log_cleaner_max_compaction_lag_ms,
            "file.delete.delay.ms": self.log_segment_delete_delay_ms,
            "preallocate": self.log_preallocate,
            "min.insync.replicas": self.min_insync_replicas,
            "unclean.leader.election.enable": self.unclean_leader_election_enable,
            "compression.type": self.compression_type,
        }

    def default_log_config(self, overrides: Optional[Mapping[str, Any]] = None) -> LogConfig:
        """The topic defaults these broker settings imply, with a topic's ``overrides`` on top."""
        config = LogConfig.from_dict(self.log_config_defaults())
        return config.merged(overrides) if overrides else config

