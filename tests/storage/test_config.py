"""Kafka's log configs: defaults, parsing of both key spellings, validation, broker-key mapping."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq.errors import ConfigError
from pylogq.config import LONG_MAX, LogConfig, parse_properties
from pylogq.storage.config import LogManagerConfig

KAFKA_TOPIC_DEFAULTS: Dict[str, Any] = {
    "segment.bytes": 1073741824,
    "segment.ms": 604800000,
    "segment.jitter.ms": 0,
    "segment.index.bytes": 10485760,
    "index.interval.bytes": 4096,
    "max.message.bytes": 1048588,
    "message.timestamp.type": "CreateTime",
    "message.timestamp.difference.max.ms": 9223372036854775807,
    "flush.messages": 9223372036854775807,
    "flush.ms": 9223372036854775807,
    "retention.ms": 604800000,
    "retention.bytes": -1,
    "cleanup.policy": ("delete",),
    "min.cleanable.dirty.ratio": 0.5,
    "delete.retention.ms": 86400000,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 9223372036854775807,
    "file.delete.delay.ms": 60000,
    "preallocate": False,
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": False,
    "compression.type": "producer",
}

KAFKA_BROKER_DEFAULTS: Dict[str, Any] = {
    "log.dirs": ("/tmp/kafka-logs",),
    "log.flush.scheduler.interval.ms": 9223372036854775807,
    "log.flush.offset.checkpoint.interval.ms": 60000,
    "log.flush.start.offset.checkpoint.interval.ms": 60000,
    "log.retention.check.interval.ms": 300000,
    "log.cleaner.enable": True,
    "log.cleaner.threads": 1,
    "log.cleaner.io.max.bytes.per.second": math.inf,
    "log.cleaner.dedupe.buffer.size": 134217728,
    "log.cleaner.io.buffer.size": 524288,
    "log.cleaner.io.buffer.load.factor": 0.9,
    "log.cleaner.backoff.ms": 15000,
    "log.segment.bytes": 1073741824,
    "log.roll.hours": 168,
    "log.retention.hours": 168,
    "log.retention.bytes": -1,
    "log.cleanup.policy": ("delete",),
    "message.max.bytes": 1048588,
}


# --------------------------------------------------------------------------- defaults


def test_topic_defaults_are_kafkas() -> None:
    config = LogConfig()
    values = config.to_dict()
    for key, default in KAFKA_TOPIC_DEFAULTS.items():
        assert values[key] == default, key
        assert getattr(config, key.replace(".", "_")) == default, key
    assert LONG_MAX == 2**63 - 1
    assert config.overrides() == {}
    assert config.delete and not config.compact and not config.log_append_time


def test_broker_defaults_are_kafkas() -> None:
    config = LogManagerConfig()
    values = config.to_dict()
    for key, default in KAFKA_BROKER_DEFAULTS.items():
        assert values[key] == default, key
    assert config.effective_log_retention_ms == 168 * 3600 * 1000
    assert config.effective_log_roll_ms == 168 * 3600 * 1000
    assert config.effective_log_flush_interval_ms == LONG_MAX
    assert dict(config.extra) == {}


def test_broker_defaults_give_topic_defaults() -> None:
    assert LogManagerConfig().default_log_config() == LogConfig()


def test_known_keys_and_defaults_cover_every_attribute() -> None:
    assert LogConfig.known_keys() == tuple(LogConfig.defaults())
    assert set(KAFKA_TOPIC_DEFAULTS) <= set(LogConfig.known_keys())
    assert "message.format.version" in LogConfig.known_keys()
    assert set(KAFKA_BROKER_DEFAULTS) <= set(LogManagerConfig.known_keys())


# --------------------------------------------------------------------------- construction and parsing


def test_snake_dotted_and_properties_agree() -> None:
    snake = LogConfig(segment_bytes=1024, cleanup_policy=["compact", "delete"], preallocate=True,
                      min_cleanable_dirty_ratio=0.25, message_timestamp_type="LogAppendTime")
    dotted = LogConfig.from_dict({"segment.bytes": 1024, "cleanup.policy": "compact,delete", "preallocate": True,
                                  "min.cleanable.dirty.ratio": 0.25, "message.timestamp.type": "LogAppendTime"})
    props = LogConfig.from_properties(
        "# topic overrides\n"
        "segment.bytes = 1024\n"
        "cleanup.policy: compact, delete\n"
        "preallocate TRUE\n"
        "min.cleanable.dirty.ratio=.25\n"
        "message.timestamp.type=LogAppendTime\n"
    )
    mixed = LogConfig.from_dict({"segment_bytes": "1024", "cleanup.policy": ("compact", "delete"),
                                 "preallocate": "true", "min_cleanable_dirty_ratio": "0.25",
                                 "message.timestamp.type": " LogAppendTime "})
    assert snake == dotted == props == mixed
    assert hash(snake) == hash(props)
    assert snake.compact and snake.delete and snake.log_append_time
    assert snake.cleanup_policy == ("compact", "delete")


def test_dotted_keys_through_kwargs() -> None:
    assert LogConfig(**{"segment.bytes": 100}).segment_bytes == 100


def test_string_values_are_parsed_to_kafkas_types() -> None:
    config = LogConfig.from_dict({
        "segment.ms": "9223372036854775807", "retention.bytes": "-1", "flush.messages": "+5",
        "unclean.leader.election.enable": "False", "min.cleanable.dirty.ratio": "1",
        "cleanup.policy": "compact", "message.format.version": " 0.10.2 ",
    })
    assert config.segment_ms == LONG_MAX
    assert config.retention_bytes == -1
    assert config.flush_messages == 5
    assert config.unclean_leader_election_enable is False
    assert config.min_cleanable_dirty_ratio == 1.0 and isinstance(config.min_cleanable_dirty_ratio, float)
    assert config.compact and not config.delete
    assert config.message_format_version == "0.10.2"


def test_empty_cleanup_policy_means_neither() -> None:
    config = LogConfig(cleanup_policy="")
    assert config.cleanup_policy == () and not config.compact and not config.delete


def test_immutable() -> None:
    config = LogConfig()
    with pytest.raises(AttributeError, match="immutable"):
        config.segment_bytes = 5
    with pytest.raises(AttributeError, match="immutable"):
        del config.segment_bytes
    assert config.segment_bytes == LogConfig.segment_bytes == 1073741824


def test_equality_hash_and_repr_follow_the_values() -> None:
    a, b = LogConfig(segment_bytes=2048), LogConfig.from_dict({"segment.bytes": "2048"})
    assert a == b and hash(a) == hash(b) and a != LogConfig() and len({a, b, LogConfig()}) == 2
    assert a != LogManagerConfig() and LogManagerConfig() == LogManagerConfig()
    assert repr(a).startswith("LogConfig(segment_bytes=2048, segment_ms=604800000, ")
    loose = LogManagerConfig(strict=False, **{"broker.id": 3})
    assert loose != LogManagerConfig() and hash(loose) == hash(LogManagerConfig())  # extra: compared, not hashed
    assert repr(loose).endswith("extra=mappingproxy({'broker.id': 3}))")


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "key, value, rule",
    [
        ("segment.bytes", 13, "at least 14"),
        ("segment.bytes", 2**31, "out of range for type INT"),
        ("segment.bytes", "1GB", "not a number of type INT"),
        ("segment.bytes", 1.5, "expected a 32-bit integer"),
        ("segment.bytes", True, "not a boolean"),
        ("segment.ms", 0, "at least 1"),
        ("segment.ms", 2**63, "out of range for type LONG"),
        ("segment.ms", "1e3", "not a number of type LONG"),
        ("segment.jitter.ms", -1, "at least 0"),
        ("segment.index.bytes", 3, "at least 4"),
        ("index.interval.bytes", -1, "at least 0"),
        ("max.message.bytes", -1, "at least 0"),
        ("flush.messages", 0, "at least 1"),
        ("flush.ms", -1, "at least 0"),
        ("retention.ms", -2, "at least -1"),
        ("min.cleanable.dirty.ratio", 1.01, "no more than 1"),
        ("min.cleanable.dirty.ratio", -0.1, "at least 0"),
        ("min.cleanable.dirty.ratio", "half", "not a number of type DOUBLE"),
        ("min.cleanable.dirty.ratio", "nan", "NaN"),
        ("delete.retention.ms", -1, "at least 0"),
        ("max.compaction.lag.ms", 0, "at least 1"),
        ("min.insync.replicas", 0, "at least 1"),
        ("preallocate", "yes", "either true or false"),
        ("preallocate", 1, "either true or false"),
        ("cleanup.policy", "compact,remove", "'remove' is not one of compact, delete"),
        ("cleanup.policy", "compact,,delete", "empty entry"),
        ("cleanup.policy", "delete,delete", "duplicate entry"),
        ("cleanup.policy", ["compact", 1], "expected a list of strings"),
        ("cleanup.policy", 5, "comma-separated string"),
        ("message.timestamp.type", "BrokerTime", "is not one of CreateTime, LogAppendTime"),
        ("compression.type", "brotli", "is not one of producer"),
        ("compression.type", 3, "expected a string"),
        ("segment.bytes", None, "a value of type INT is required"),
    ],
)
def test_validation_errors_name_key_value_and_rule(key: str, value: Any, rule: str) -> None:
    with pytest.raises(ConfigError) as info:
        LogConfig.from_dict({key: value})
    message = str(info.value)
    assert key in message
    assert repr(value) in message
    assert rule in message
    snake = key.replace(".", "_")
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        LogConfig(**{snake: value})


@pytest.mark.parametrize(
    "value, suggestion",
    [("LogappendTime", "LogAppendTime"), ("createtime", "CreateTime")],
)
def test_choice_errors_suggest(value: str, suggestion: str) -> None:
    with pytest.raises(ConfigError, match="did you mean %r" % suggestion):
        LogConfig(message_timestamp_type=value)


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        LogConfig(segment_bytes=1)


@pytest.mark.parametrize(
    "key, suggestion",
    [
        ("segment.byte", "segment.bytes"),
        ("retention_msec", "retention_ms"),
        ("cleanup.polcy", "cleanup.policy"),
        ("min.insync.replica", "min.insync.replicas"),
    ],
)
def test_unknown_keys_are_rejected_with_a_suggestion(key: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as info:
        LogConfig.from_dict({key: 1})
    assert repr(key) in str(info.value)
    assert "did you mean %r" % suggestion in str(info.value)


def test_parse_checks_one_value_naming_the_key_as_written() -> None:
    """Config.parse: a value of a prefixed or per-flow key, the error naming that key."""
    assert LogConfig.parse("segment.bytes", "1024") == 1024
    assert LogConfig.parse("segment_bytes", 1024, spelled="topic.segment.bytes") == 1024
    with pytest.raises(ConfigError, match=r"Invalid value '1' for configuration A->B\.segment\.bytes: value must be "
                                          r"at least 14"):
        LogConfig.parse("segment.bytes", "1", spelled="A->B.segment.bytes")
    with pytest.raises(ConfigError, match="Unknown configuration 'segment.byte'.*did you mean 'segment.bytes'"):
        LogConfig.parse("segment.byte", "1")


def test_a_dashed_key_is_an_attribute_with_underscores() -> None:
    from pylogq.config import Config, setting

    class Dashed(Config):
        offset_syncs_topic_location: str = setting("offset-syncs.topic.location", "STRING", "source")

    assert Dashed(offset_syncs_topic_location="target").offset_syncs_topic_location == "target"
    assert Dashed.build({"offset-syncs.topic.location": "x"}).to_dict() == {"offset-syncs.topic.location": "x"}


def test_unknown_key_without_close_match() -> None:
    with pytest.raises(ConfigError, match="Unknown configuration 'zzz'") as info:
        LogConfig(zzz=1)
    assert "did you mean" not in str(info.value)


def test_same_setting_given_twice_is_rejected() -> None:
    with pytest.raises(ConfigError, match="segment.bytes given twice"):
        LogConfig.from_dict({"segment.bytes": 100, "segment_bytes": 100})


def test_non_string_key_is_rejected() -> None:
    with pytest.raises(ConfigError, match="keys must be strings"):
        LogConfig.from_dict({1: 2})  # type: ignore[dict-item]


def test_compaction_lags_must_be_ordered() -> None:
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"):
        LogConfig(min_compaction_lag_ms=10, max_compaction_lag_ms=5)
    with pytest.raises(ConfigError, match="log.cleaner.min.compaction.lag.ms"):
        LogManagerConfig(log_cleaner_min_compaction_lag_ms=10, log_cleaner_max_compaction_lag_ms=5)


# --------------------------------------------------------------------------- overrides and round trips


def test_with_overrides_and_merged_return_new_configs() -> None:
    base = LogConfig(segment_bytes=1000)
    changed = base.with_overrides(retention_ms=-1, **{"cleanup.policy": "compact"})
    merged = base.merged({"retention.ms": "-1", "cleanup_policy": ["compact"]})
    assert changed == merged
    assert base.retention_ms == 604800000 and base.delete
    assert changed.segment_bytes == 1000 and changed.retention_ms == -1 and changed.compact
    assert changed.overrides() == {"segment.bytes": 1000, "retention.ms": -1, "cleanup.policy": ("compact",)}
    with pytest.raises(ConfigError, match="segment.bytes"):
        base.with_overrides(segment_bytes=0)
    with pytest.raises(ConfigError, match="did you mean 'retention.ms'"):
        base.merged({"retention.m": 1})


def test_to_strings_and_properties_round_trip() -> None:
    config = LogConfig(segment_bytes=2048, cleanup_policy="compact,delete", preallocate=True,
                       min_cleanable_dirty_ratio=0.75)
    strings = config.to_strings()
    assert strings["cleanup.policy"] == "compact,delete"
    assert strings["preallocate"] == "true"
    assert strings["flush.ms"] == "9223372036854775807"
    assert strings["min.cleanable.dirty.ratio"] == "0.75"
    assert LogConfig.from_dict(strings) == config
    text = config.to_properties()
    assert "segment.bytes=2048\n" in text
    assert LogConfig.from_properties(text) == config


@settings(max_examples=80, deadline=None)
@given(
    segment_bytes=st.integers(14, 2**31 - 1),
    retention_ms=st.integers(-1, 2**63 - 1),
    ratio=st.floats(0, 1),
    policy=st.sampled_from(["delete", "compact", "compact,delete", "delete,compact", ""]),
    preallocate=st.booleans(),
    compression=st.sampled_from(["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]),
)
def test_dict_round_trip(segment_bytes: int, retention_ms: int, ratio: float, policy: str, preallocate: bool,
                         compression: str) -> None:
    config = LogConfig(segment_bytes=segment_bytes, retention_ms=retention_ms, min_cleanable_dirty_ratio=ratio,
                       cleanup_policy=policy, preallocate=preallocate, compression_type=compression)
    assert LogConfig.from_dict(config.to_dict()) == config
    assert LogConfig.from_dict(config.to_strings()) == config
    assert LogConfig.from_properties(config.to_properties()) == config
    assert LogConfig().merged(config.overrides()) == config


# --------------------------------------------------------------------------- broker level


@pytest.mark.parametrize(
    "settings_, expected",
    [
        ({}, 168 * 3600000),
        ({"log.retention.hours": 1}, 3600000),
        ({"log.retention.minutes": 5, "log.retention.hours": 1}, 300000),
        ({"log.retention.ms": 1234, "log.retention.minutes": 5, "log.retention.hours": 1}, 1234),
        ({"log.retention.ms": "1234", "log.retention.hours": "2"}, 1234),
        ({"log.retention.ms": -1}, -1),
        ({"log.retention.hours": -1}, -1),
        ({"log.retention.minutes": -5}, -1),
    ],
)
def test_retention_precedence_ms_minutes_hours(settings_: Dict[str, Any], expected: int) -> None:
    config = LogManagerConfig.from_dict(settings_)
    assert config.effective_log_retention_ms == expected
    assert config.default_log_config().retention_ms == expected


def test_roll_and_flush_precedence() -> None:
    hours = LogManagerConfig(log_roll_hours=2, log_roll_jitter_hours=1)
    assert hours.default_log_config().segment_ms == 7200000
    assert hours.default_log_config().segment_jitter_ms == 3600000
    millis = LogManagerConfig(log_roll_hours=2, log_roll_ms=500, log_roll_jitter_hours=1, log_roll_jitter_ms=7)
    assert millis.default_log_config().segment_ms == 500
    assert millis.default_log_config().segment_jitter_ms == 7
    scheduler = LogManagerConfig(log_flush_scheduler_interval_ms=2000)
    assert scheduler.default_log_config().flush_ms == 2000
    both = LogManagerConfig(log_flush_scheduler_interval_ms=2000, log_flush_interval_ms=10000)
    assert both.default_log_config().flush_ms == 10000


def test_broker_keys_map_onto_topic_defaults() -> None:
    broker = LogManagerConfig.from_properties(
        "log.segment.bytes=1048576\n"
        "log.index.size.max.bytes=4096\n"
        "log.index.interval.bytes=1024\n"
        "message.max.bytes=2000000\n"
        "log.segment.delete.delay.ms=0\n"
        "log.cleaner.delete.retention.ms=1000\n"
        "log.cleaner.min.cleanable.ratio=0.1\n"
        "log.cleaner.min.compaction.lag.ms=5\n"
        "log.cleaner.max.compaction.lag.ms=50\n"
        "log.cleanup.policy=compact\n"
        "log.retention.bytes=999\n"
        "log.flush.interval.messages=20000\n"
        "log.message.timestamp.type=LogAppendTime\n"
        "log.preallocate=true\n"
        "min.insync.replicas=2\n"
        "unclean.leader.election.enable=true\n"
        "compression.type=zstd\n"
    )
    topic = broker.default_log_config()
    assert topic.overrides() == {
        "segment.bytes": 1048576,
        "segment.index.bytes": 4096,
        "index.interval.bytes": 1024,
        "max.message.bytes": 2000000,
        "file.delete.delay.ms": 0,
        "delete.retention.ms": 1000,
        "min.cleanable.dirty.ratio": 0.1,
        "min.compaction.lag.ms": 5,
        "max.compaction.lag.ms": 50,
        "cleanup.policy": ("compact",),
        "retention.bytes": 999,
        "flush.messages": 20000,
        "message.timestamp.type": "LogAppendTime",
        "preallocate": True,
        "min.insync.replicas": 2,
        "unclean.leader.election.enable": True,
        "compression.type": "zstd",
    }


def test_topic_overrides_win_over_broker_defaults() -> None:
    broker = LogManagerConfig(log_segment_bytes=4096, log_retention_hours=1)
    topic = broker.default_log_config({"segment.bytes": "8192"})
    assert topic.segment_bytes == 8192 and topic.retention_ms == 3600000
    with pytest.raises(ConfigError, match="Unknown configuration 'log.segment.bytes' for LogConfig"):
        broker.default_log_config({"log.segment.bytes": 1})


def test_log_dir_and_log_dirs(tmp_path: Path) -> None:
    assert LogManagerConfig.from_dict({"log.dir": "/data/a"}).log_dirs == ("/data/a",)
    assert LogManagerConfig(log_dir="/data/a").log_dirs == ("/data/a",)
    assert LogManagerConfig.from_dict({"log.dir": "/data/a", "log.dirs": "/x, /y"}).log_dirs == ("/x", "/y")
    assert LogManagerConfig(log_dirs=[tmp_path, str(tmp_path / "b")]).log_dirs == (str(tmp_path),
                                                                                   str(tmp_path / "b"))
    assert LogManagerConfig(log_dirs=tmp_path).log_dirs == (str(tmp_path),)
    assert LogManagerConfig(log_dirs="/a").with_overrides(log_dir="/b").log_dirs == ("/b",)
    with pytest.raises(ConfigError, match="log.dirs.*at least one entry"):
        LogManagerConfig(log_dirs="")
    with pytest.raises(ConfigError, match="log.dirs"):
        LogManagerConfig(log_dirs=[b"/bytes"])


SERVER_PROPERTIES = r"""
# Server basics
broker.id=0
listeners=PLAINTEXT://127.0.0.1:9092
zookeeper.connect=localhost:2181
num.network.threads=3

! Log basics
log.dirs=/var/lib/kafka/a,\
         /var/lib/kafka/b
num.partitions=8
log.retention.hours=72
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
log.cleaner.enable=false
"""


def test_server_properties_with_strict_false_keeps_extra() -> None:
    config = LogManagerConfig.from_properties(SERVER_PROPERTIES, strict=False)
    assert config.log_dirs == ("/var/lib/kafka/a", "/var/lib/kafka/b")
    assert config.effective_log_retention_ms == 72 * 3600000
    assert config.log_cleaner_enable is False
    assert dict(config.extra) == {
        "broker.id": "0",
        "listeners": "PLAINTEXT://127.0.0.1:9092",
        "zookeeper.connect": "localhost:2181",
        "num.network.threads": "3",
        "num.partitions": "8",
    }
    assert "listeners" not in config.to_dict()
    assert config.with_overrides(log_cleaner_threads=2).extra == config.extra
    with pytest.raises(TypeError):
        config.extra["x"] = 1  # type: ignore[index]
    loose = LogManagerConfig(strict=False, listeners="PLAINTEXT://:0")
    assert dict(loose.extra) == {"listeners": "PLAINTEXT://:0"}


def test_server_properties_strict_rejects_unknown_keys() -> None:
    with pytest.raises(ConfigError, match="Unknown configuration 'broker.id' for LogManagerConfig"):
        LogManagerConfig.from_properties(SERVER_PROPERTIES)
    with pytest.raises(ConfigError, match="did you mean 'log.retention.hours'"):
        LogManagerConfig.from_dict({"log.retention.hour": 1})


def test_strict_false_still_validates_known_keys() -> None:
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        LogManagerConfig.from_dict({"listeners": "x", "log.segment.bytes": "big"}, strict=False)


@pytest.mark.parametrize(
    "key, value, rule",
    [
        ("log.cleaner.threads", -1, "at least 0"),
        ("log.cleaner.io.buffer.load.factor", 2, "no more than 1"),
        ("log.cleaner.enable", "on", "either true or false"),
        ("log.roll.hours", 0, "at least 1"),
        ("log.retention.minutes", "5m", "not a number of type INT"),
        ("log.flush.offset.checkpoint.interval.ms", -5, "at least 0"),
        ("log.cleanup.policy", "remove", "is not one of compact, delete"),
        ("log.retention.check.interval.ms", 0, "at least 1"),
    ],
)
def test_broker_validation_errors(key: str, value: Any, rule: str) -> None:
    with pytest.raises(ConfigError) as info:
        LogManagerConfig.from_dict({key: value})
    assert key in str(info.value) and repr(value) in str(info.value) and rule in str(info.value)


def test_broker_double_accepts_infinity_and_round_trips() -> None:
    config = LogManagerConfig(log_cleaner_io_max_bytes_per_second="Infinity", log_retention_minutes=3)
    assert config.log_cleaner_io_max_bytes_per_second == math.inf
    assert LogManagerConfig.from_dict(config.to_dict()) == config
    assert LogManagerConfig.from_dict(config.to_strings()) == config
    assert LogManagerConfig.from_properties(config.to_properties()) == config
    assert LogManagerConfig(log_cleaner_io_max_bytes_per_second=1e6).to_strings()[
        "log.cleaner.io.max.bytes.per.second"] == "1000000.0"


# --------------------------------------------------------------------------- properties files


def test_parse_properties_java_rules() -> None:
    text = (
        "# comment\n"
        "   ! another comment\n"
        "\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "  d=  spaced value  \n"
        "e=\n"
        "f\n"
        "g=x=y:z\n"
        "h=first \\\n"
        "     second\\\n"
        "third\n"
        "path=C:\\\\dir\\\\file\n"
        "key\\ with\\ space=v\n"
        "colon\\:key=v2\n"
        "tab=\\tx\n"
        "uni=\\u00e9t\\u00E9\n"
        "a=override\n"
        "k2=v # not a comment\n"
        "ends=with\\\\\n"
        "next=ok\r\n"
    )
    assert parse_properties(text) == {
        "a": "override",
        "b": "2",
        "c": "3",
        "d": "spaced value",
        "e": "",
        "f": "",
        "g": "x=y:z",
        "h": "first secondthird",
        "path": "C:\\dir\\file",
        "key with space": "v",
        "colon:key": "v2",
        "tab": "\tx",
        "uni": "\u00e9t\u00e9",
        "k2": "v # not a comment",
        "ends": "with\\",
        "next": "ok",
    }


def test_parse_properties_continuation_at_end_of_text() -> None:
    assert parse_properties("a=b\\") == {"a": "b"}
    assert parse_properties("") == {}
    assert parse_properties("# only\n\n") == {}


def test_properties_escaping_round_trip() -> None:
    config = LogManagerConfig(log_dirs=["C:\\kafka\\logs", "/tmp/x"])
    assert LogManagerConfig.from_properties(config.to_properties()) == config
