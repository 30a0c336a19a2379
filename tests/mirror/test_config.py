"""MirrorMaker 2's properties read as flows: Kafka's keys, defaults and precedence, the seeds'
examples, bad values named by their key, and MirrorMaker 1's flags."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from pylogq.errors import ConfigError
from pylogq.mirror.config import FlowConfig, MirrorConfig, legacy_config, load_config, parse_config
from pylogq.mirror.policy import DefaultReplicationPolicy, IdentityReplicationPolicy

pytestmark = pytest.mark.compiled_pass

ROOT = Path(__file__).resolve().parent.parent.parent
BASIC = {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092", "A->B.enabled": "true"}


def _config(**extra: str) -> MirrorConfig:
    props = dict(BASIC)
    props.update({k.replace("__", "->").replace("_", "."): v for k, v in extra.items()})
    return parse_config(props)


def _parse(text: str) -> MirrorConfig:
    return load_config(text + "\n")


# -- the shipped file and Kafka's sample ---------------------------------------------------------


def test_the_shipped_file_makes_two_flows() -> None:
    config = load_config(ROOT / "config" / "connect-mirror-maker.properties")
    assert config.clusters == ("A", "B") and [f.name for f in config.flows] == ["A->B", "B->A"]
    assert config.unused == {}
    for flow in config.flows:
        assert flow.topics == (".*",)
        assert (flow.replication_factor, flow.checkpoints_topic_replication_factor,
                flow.heartbeats_topic_replication_factor, flow.offset_syncs_topic_replication_factor) == (1, 1, 1, 1)
    a_to_b = config.flow("A", "B")
    assert a_to_b.client_config("source", "consumer")["bootstrap.servers"] == "A_host1:9092, A_host2:9092, A_host3:9092"
    assert a_to_b.client_config("target", "producer")["bootstrap.servers"] == "B_host1:9092, B_host2:9092, B_host3:9092"


def test_kafkas_sample_settings_load_with_connects_keys_reported_unused() -> None:
    """The settings of Kafka's config/connect-mirror-maker.properties, its Connect worker keys included."""
    config = _parse("""
clusters = A, B
A.bootstrap.servers = A_host1:9092, A_host2:9092, A_host3:9092
B.bootstrap.servers = B_host1:9092, B_host2:9092, B_host3:9092
A->B.enabled = true
A->B.topics = .*
B->A.enabled = true
B->A.topics = .*
replication.factor=1
checkpoints.topic.replication.factor=1
heartbeats.topic.replication.factor=1
offset-syncs.topic.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
config.storage.replication.factor=1
""")
    assert [f.name for f in config.flows] == ["A->B", "B->A"]
    assert sorted(config.unused) == ["config.storage.replication.factor", "offset.storage.replication.factor",
                                     "status.storage.replication.factor"]
    assert set(config.unused.values()) == {"a Kafka Connect setting the mirror does not use"}


# -- defaults ------------------------------------------------------------------------------------


def test_defaults_are_kafkas() -> None:
    flow = _config().flows[0]
    expected = {
        "tasks.max": 1, "topics": (".*",), "topics.exclude": (r".*[\-\.]internal", r".*\.replica", "__.*"),
        "groups": (".*",), "groups.exclude": ("console-consumer-.*", "connect-.*", "__.*"),
        "config.properties.exclude": (r"follower\.replication\.throttled\.replicas",
                                      r"leader\.replication\.throttled\.replicas",
                                      r"message\.timestamp\.difference\.max\.ms", r"message\.timestamp\.type",
                                      r"unclean\.leader\.election\.enable", r"min\.insync\.replicas"),
        "use.defaults.from": "target",
        "replication.factor": 2, "offset-syncs.topic.replication.factor": 3,
        "checkpoints.topic.replication.factor": 3, "heartbeats.topic.replication.factor": 3,
        "sync.topic.configs.enabled": True, "sync.topic.configs.interval.seconds": 600,
        "sync.topic.acls.enabled": True, "sync.topic.acls.interval.seconds": 600,
        "refresh.topics.enabled": True, "refresh.topics.interval.seconds": 600,
        "refresh.groups.enabled": True, "refresh.groups.interval.seconds": 600,
        "emit.checkpoints.enabled": True, "emit.checkpoints.interval.seconds": 60,
        "emit.heartbeats.enabled": True, "emit.heartbeats.interval.seconds": 1,
        "sync.group.offsets.enabled": False, "sync.group.offsets.interval.seconds": 60,
        "emit.offset-syncs.enabled": True, "heartbeats.replication.enabled": True,
        "offset-syncs.topic.location": "source", "offset.lag.max": 100,
        "consumer.poll.timeout.ms": 1000, "admin.timeout.ms": 60000,
        "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "replication.policy.separator": ".", "replication.policy.internal.topic.separator.enabled": True,
        "exactly.once.support": "requested", "exactly.once.source.support": "disabled",
    }
    values = flow.to_dict()
    assert {key: values[key] for key in expected} == expected
    assert flow.offset_syncs_topic_location == "source" and flow.emit_offset_syncs_enabled is True
    assert flow.policy == DefaultReplicationPolicy() and not flow.exactly_once
    assert (flow.period("refresh_topics"), flow.period("emit_checkpoints"), flow.period("emit_heartbeats"),
            flow.period("sync_group_offsets")) == (600, 60, 1, None)
    assert FlowConfig.tasks_max == 1  # the class reads as Kafka's defaults


def test_a_switch_or_a_negative_interval_turns_a_schedule_off() -> None:
    flow = _config(refresh_topics_enabled="false", emit_heartbeats_interval_seconds="-1",
                   sync_group_offsets_enabled="true").flows[0]
    assert flow.period("refresh_topics") is None and flow.period("emit_heartbeats") is None
    assert flow.period("sync_group_offsets") == 60


# -- precedence ----------------------------------------------------------------------------------


def test_a_flows_setting_overrides_the_top_level_one() -> None:
    config = _parse("""
clusters = A, B, C
A.bootstrap.servers = a:1
B.bootstrap.servers = b:1
C.bootstrap.servers = c:1
topics = orders.*
tasks.max = 5
A->B.enabled = true
A->B.topics = topic1, topic2
A->B.topics.exclude = topic3
A->B.tasks.max = 123
A->C.enabled = true
C->A.enabled = false
""")
    assert [f.name for f in config.flows] == ["A->B", "A->C"]
    a_b, a_c = config.flows
    assert (a_b.topics, a_b.topics_exclude, a_b.tasks_max) == (("topic1", "topic2"), ("topic3",), 123)
    assert a_b.should_replicate_topic("topic1") and not a_b.should_replicate_topic("topic3")
    assert (a_c.topics, a_c.tasks_max) == (("orders.*",), 5)
    assert a_c.should_replicate_topic("orders-eu") and not a_c.should_replicate_topic("topic1")


def test_client_settings_merge_in_kafkas_order() -> None:
    """MirrorMakerConfigTest.testClientConfigProperties and testWorkerConfigs, as a flow's clients see them."""
    config = _parse("""
clusters = a, b
security.protocol = SSL
ssl.truststore.password = secret1
a.security.protocol = PLAINTEXT
a.producer.security.protocol = SSL
a.bootstrap.servers = 127.0.0.1:9092, 127.0.0.2:9092
b.bootstrap.servers = 127.0.0.3:9092, 127.0.0.4:9092
b.producer.client.id = client-one
b.producer.security.protocol = SASL_SSL
a.xxx = yyy
xxx = zzz
a->b.enabled = true
a->b.producer.linger.ms = 5
a->b.producer.security.protocol = SASL_PLAINTEXT
a->b.consumer.max.poll.records = 100
a->b.consumer.security.protocol = SASL_PLAINTEXT
a.consumer.max.poll.records = 10
""")
    flow = config.flows[0]
    admin = flow.client_config("source", "admin")
    assert admin["bootstrap.servers"] == "127.0.0.1:9092, 127.0.0.2:9092"
    assert admin["security.protocol"] == "PLAINTEXT", "the cluster's over the top level's"
    assert admin["ssl.truststore.password"] == "secret1", "the top level's connection keys reach every cluster"
    assert "xxx" not in admin and "linger.ms" not in admin
    assert flow.client_config("source", "producer")["security.protocol"] == "SSL", "<alias>.producer.* wins"
    target_producer = flow.client_config("target", "producer")
    assert target_producer["client.id"] == "client-one"
    assert target_producer["security.protocol"] == "SASL_SSL"
    assert target_producer["linger.ms"] == "5", "the flow's producer settings reach its producers"
    assert flow.client_config("source", "producer")["linger.ms"] == "5"
    # A connection key of the flow's loses to the cluster's or the top level's (Kafka's order).
    assert flow.client_config("target", "consumer")["security.protocol"] == "SSL"
    assert flow.client_config("source", "consumer")["security.protocol"] == "PLAINTEXT"
    assert flow.client_config("target", "admin")["security.protocol"] == "SSL"
    consumer = flow.client_config("source", "consumer")
    assert consumer["max.poll.records"] == "10", "the cluster's consumer settings over the flow's"
    assert consumer["enable.auto.commit"] == "false" and consumer["auto.offset.reset"] == "earliest"
    assert flow.client_config("target", "consumer")["max.poll.records"] == "100"
    assert sorted(config.unused) == ["a.xxx", "xxx"]
    # A tool reaching a cluster outside a flow gets its connection keys only (MirrorClientConfig).
    assert config.client_config("a", "producer") == {
        "bootstrap.servers": "127.0.0.1:9092, 127.0.0.2:9092", "security.protocol": "SSL",
        "ssl.truststore.password": "secret1"}
    assert config.client_config("b", "admin")["security.protocol"] == "SSL"


def test_a_consumers_own_offset_reset_is_kept() -> None:
    flow = _config(**{"A.consumer.auto.offset.reset": "latest", "A.consumer.enable.auto.commit": "true"}).flows[0]
    consumer = flow.client_config("source", "consumer")
    assert consumer["auto.offset.reset"] == "latest" and consumer["enable.auto.commit"] == "false"


def test_security_protocol_is_case_insensitive() -> None:
    """MirrorMakerConfigTest.testCaseInsensitiveSecurityProtocol: kept as written."""
    flow = _config(**{"A.security.protocol": "sasl_ssl"}).flows[0]
    assert flow.client_config("source", "admin")["security.protocol"] == "sasl_ssl"


def test_exactly_once_is_set_per_target_cluster() -> None:
    config = _parse("""
clusters = A, B
A.bootstrap.servers = a:1
B.bootstrap.servers = b:1
B.exactly.once.source.support = Enabled
A->B.enabled = true
B->A.enabled = true
A->B.exactly.once.support = REQUIRED
A.consumer.isolation.level = read_committed
""")
    a_b, b_a = config.flows
    assert a_b.exactly_once and a_b.exactly_once_support == "required"
    assert not b_a.exactly_once and b_a.exactly_once_support == "requested"
    everywhere = _config(exactly_once_source_support="enabled").flows[0]
    assert everywhere.exactly_once


def test_exactly_once_required_needs_committed_reads_of_the_source() -> None:
    """Kafka's MirrorSourceConnector supports exactly once only with isolation.level=read_committed;
    Connect refuses a connector requiring it otherwise, where the worker has it enabled."""
    required = dict(BASIC, **{"B.exactly.once.source.support": "enabled", "exactly.once.support": "required"})
    with pytest.raises(ConfigError, match="isolation.level=read_uncommitted and would copy aborted records: set "
                                          "A.consumer.isolation.level = read_committed"):
        parse_config(required)
    assert parse_config(dict(required, **{"A.consumer.isolation.level": "READ_COMMITTED"})).flows[0].exactly_once
    # Not enabled on the target: the flow writes at least once and the setting is not checked, as in Kafka.
    assert not parse_config(dict(required, **{"B.exactly.once.source.support": "preparing"})).flows[0].exactly_once
    assert parse_config(dict(BASIC, **{"B.exactly.once.source.support": "enabled"})).flows[0].exactly_once


def test_clusters_restricts_the_flows_to_those_into_them() -> None:
    props = dict(BASIC, **{"B->A.enabled": "true"})
    assert [f.name for f in parse_config(props, clusters=["A"]).flows] == ["B->A"]
    assert parse_config(props, clusters=["A"]).target_clusters == ("A",)
    with pytest.raises(ConfigError, match="--clusters names C, not among the clusters"):
        parse_config(props, clusters=["C"])
    with pytest.raises(ConfigError, match="No source->target replication flows into B .*the enabled ones go to A"):
        parse_config(dict(BASIC, **{"A->B.enabled": "false", "B->A.enabled": "true"}), clusters=["B"])


def test_aliases_may_hold_dots() -> None:
    config = _parse("""
clusters = us.west, us.east, us
us.west.bootstrap.servers = w:1
us.east.bootstrap.servers = e:1
us.bootstrap.servers = u:1
us.west->us.east.enabled = true
us.west->us.east.topics = foo
us.west->us.enabled = true
""")
    assert [f.name for f in config.flows] == ["us.west->us.east", "us.west->us"]
    assert config.flows[0].topics == ("foo",) and config.flows[1].topics == (".*",)
    assert config.flows[0].client_config("target", "producer")["bootstrap.servers"] == "e:1"


# -- the seeds' examples -------------------------------------------------------------------------


def test_the_geo_replication_example() -> None:
    """The active/passive example and the client settings of the operations chapter."""
    config = _parse("""
clusters = primary, secondary
primary.bootstrap.servers = broker3-primary:9092
secondary.bootstrap.servers = broker5-secondary:9092
primary->secondary.enabled = true
primary->secondary.topics = foobar-topic, quux-.*
primary.consumer.isolation.level = read_committed
primary.admin.bootstrap.servers = broker57-primary:9092
secondary.producer.compression.type = gzip
secondary.producer.buffer.memory = 32768
secondary.admin.bootstrap.servers = broker8-secondary:9092
primary.offset.storage.topic = my-mirrormaker-offsets
secondary.exactly.once.source.support = enabled
""")
    flow = config.flow("primary", "secondary")
    assert flow.should_replicate_topic("foobar-topic") and flow.should_replicate_topic("quux-1")
    assert not flow.should_replicate_topic("foobar")
    assert flow.remote_topic("foobar-topic") == "primary.foobar-topic"
    assert flow.client_config("source", "consumer")["isolation.level"] == "read_committed"
    assert flow.client_config("source", "admin")["bootstrap.servers"] == "broker57-primary:9092"
    assert flow.client_config("source", "consumer")["bootstrap.servers"] == "broker3-primary:9092"
    producer = flow.client_config("target", "producer")
    assert (producer["compression.type"], producer["buffer.memory"]) == ("gzip", "32768")
    assert flow.client_config("target", "admin")["bootstrap.servers"] == "broker8-secondary:9092"
    assert flow.exactly_once
    assert config.unused == {"primary.offset.storage.topic": "a Kafka Connect setting the mirror does not use"}


def test_a_custom_separator_for_one_flow() -> None:
    config = _parse("""
clusters = us-west, us-east
us-west.bootstrap.servers = w:1
us-east.bootstrap.servers = e:1
tasks.max = 5
us-west->us-east.enabled = true
us-east->us-west.enabled = true
us-west->us-east.replication.policy.separator = _
""")
    west_east, east_west = config.flows
    assert west_east.remote_topic("foo") == "us-west_foo" and west_east.tasks_max == 5
    assert west_east.offset_syncs_topic == "mm2-offset-syncs_us-east_internal"
    assert east_west.remote_topic("foo") == "us-east.foo"
    # Each flow refuses a topic its own policy says came from its target.
    assert not west_east.should_replicate_topic("us-east_foo") and west_east.should_replicate_topic("us-east.foo")
    assert not east_west.should_replicate_topic("us-west.foo") and east_west.should_replicate_topic("foo")


@pytest.mark.parametrize("text, key", [
    ("clusters = us-west, us-east   # defines cluster aliases", "clusters"),
    ("primary->secondary.topics = foo.* # only replicate some topics", "primary->secondary.topics"),
    ("topics = .*   # all topics to be replicated by default", "topics"),
])
def test_an_end_of_line_comment_is_refused_naming_the_key(text: str, key: str) -> None:
    """The seeds' examples put comments after values, which Java keeps as part of the value."""
    base = "clusters = primary, secondary\nprimary.bootstrap.servers = p:1\nsecondary.bootstrap.servers = s:1\n" \
           "primary->secondary.enabled = true\n"
    with pytest.raises(ConfigError, match=r"configuration %s: '#' after a blank is part of the value" % key):
        _parse(base + text)


def test_a_flow_to_a_cluster_not_in_clusters_is_refused() -> None:
    """The seeds' `us-west->us.east.topics` with clusters us-west and us-east."""
    with pytest.raises(ConfigError, match=r"us-west->us.east.topics names a flow from us-west to a cluster that is "
                                          r"not one of the clusters \(us-west, us-east\)"):
        _parse("clusters = us-west, us-east\nus-west->us-east.enabled = true\nus-west->us.east.topics = foo.*")
    with pytest.raises(ConfigError, match=r"C->A.enabled names a flow from 'C'"):
        parse_config(dict(BASIC, **{"C->A.enabled": "true"}))
    with pytest.raises(ConfigError, match="A->A.enabled: a flow goes between two different clusters"):
        parse_config(dict(BASIC, **{"A->A.enabled": "true"}))


def test_the_seeds_enable_typo_is_named() -> None:
    with pytest.raises(ConfigError, match=r"No source->target replication flows: A->B.enable is not a setting"):
        parse_config({"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
                      "A->B.enable": "true"})
    with pytest.raises(ConfigError, match="enable one with A->B.enabled = true"):
        parse_config({"clusters": "A, B"})


# -- bad values ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key, value, message", [
    ("A->B.tasks.max", "0", "value must be at least 1"),
    ("tasks.max", "many", "not a number of type INT"),
    ("replication.factor", "0", "at least 1, or -1"),
    ("A->B.heartbeats.topic.replication.factor", "40000", "no more than 32767"),
    ("emit.heartbeats.interval.seconds", "0", "an interval is at least 1 second"),
    ("A->B.offset-syncs.topic.location", "middle", "'middle' is not one of source, target"),
    ("A->B.enabled", "yes", "either true or false"),
    ("sync.group.offsets.enabled", "sometimes", "either true or false"),
    ("security.protocol", "abc", "String must be one of: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ("A.producer.security.protocol", "TLS", "String must be one of"),
    ("A.bootstrap.servers", "nohost", "not 'host:port'"),
    ("A->B.admin.bootstrap.servers", "a:b", "not 'host:port'"),
    ("A->B.topics", "ok, bad(", "'bad\\(' is not a regular expression"),
    ("groups.exclude", "[x", "'\\[x' is not a regular expression"),
    ("replication.policy.class", "com.example.MyPolicy", "is not one of"),
    ("topic.filter.class", "com.example.MyFilter", "is not one of"),
    ("A->B.replication.policy.separator", "", "the separator must not be empty"),
    ("exactly.once.support", "enabled", "'enabled' is not one of requested, required"),
    ("B.exactly.once.source.support", "on", "'on' is not one of disabled, preparing, enabled"),
    ("consumer.poll.timeout.ms", "-5", "value must be at least 0"),
])
def test_bad_values_name_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"configuration %s: .*%s" % (key.replace(".", r"\."), message)):
        parse_config(dict(BASIC, **{key: value}))


def test_required_keys() -> None:
    with pytest.raises(ConfigError, match="Missing required configuration \"clusters\""):
        parse_config({"A->B.enabled": "true"})
    with pytest.raises(ConfigError, match="B.bootstrap.servers is required: the flow A->B connects to cluster B"):
        parse_config({"clusters": "A, B", "A.bootstrap.servers": "a:1", "A->B.enabled": "true"})
    # A top-level bootstrap.servers is every cluster's (Kafka's clusterProps).
    config = parse_config({"clusters": "A, B", "bootstrap.servers": "x:1", "A->B.enabled": "true"})
    assert config.flows[0].client_config("target", "producer")["bootstrap.servers"] == "x:1"


def test_unused_keys_say_why() -> None:
    config = _config(**{"producer.linger.ms": "5", "enabled": "true", "A.topics": "x", "A->B.topicz": "x",
                        "A->B.exactly.once.source.support": "enabled", "A->B.bootstrap.servers": "x:1",
                        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"})
    unused = config.unused
    assert unused["producer.linger.ms"].startswith("client settings are given per cluster")
    assert unused["enabled"] == "flows are enabled one by one: A->B.enabled = true"
    assert unused["A.topics"].startswith("a flow setting: set it for every flow (topics) or for one")
    assert unused["A->B.topicz"] == "not a MirrorMaker setting; did you mean 'topics'?"
    assert unused["A->B.exactly.once.source.support"] == "set per target cluster: <target>.exactly.once.source.support"
    assert unused["A->B.bootstrap.servers"].startswith("a connection setting is given per cluster")
    assert unused["key.converter"] == "a Kafka Connect setting the mirror does not use"
    assert not config.flows[0].exactly_once
    stray = _config(**{"C.bootstrap.servers": "c:1", "C.producer.acks": "all"}).unused
    assert stray == {"C.bootstrap.servers": "a setting of cluster 'C', which is not one of the clusters (A, B)",
                     "C.producer.acks": "a setting of cluster 'C', which is not one of the clusters (A, B)"}


# -- reading, building, showing ------------------------------------------------------------------


def test_load_config_reads_a_path_or_the_text(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text("\n".join("%s = %s" % kv for kv in BASIC.items()) + "\n")
    assert [f.name for f in load_config(path).flows] == ["A->B"]
    assert [f.name for f in load_config(str(path)).flows] == ["A->B"]
    assert [f.name for f in load_config(path.read_text()).flows] == ["A->B"]
    with pytest.raises(ConfigError, match="cannot read the mirror maker configuration .*missing.properties"):
        load_config(tmp_path / "missing.properties")


def test_flows_compare_by_value_and_hide_secrets() -> None:
    props = dict(BASIC, **{"A.ssl.keystore.password": "hunter2", "A.sasl.jaas.config": "secret jaas"})
    flow = parse_config(props).flows[0]
    assert flow == parse_config(props).flows[0]
    assert flow != parse_config(dict(props, **{"A->B.tasks.max": "2"})).flows[0]
    shown = repr(flow)
    assert "hunter2" not in shown and "secret jaas" not in shown and "[hidden]" in shown
    assert "hunter2" not in repr(parse_config(props))
    assert flow.client_config("source", "admin")["ssl.keystore.password"] == "hunter2"


def test_a_flow_built_directly() -> None:
    flow = FlowConfig("A", "B", source_client={"bootstrap.servers": "a:1"}, target_client={"bootstrap.servers": "b:1"},
                      tasks_max=3, **{"offset-syncs.topic.location": "target", "topics": ["x", "y"]})
    assert (flow.tasks_max, flow.offset_syncs_topic_location, flow.topics) == (3, "target", ("x", "y"))
    assert flow.client_config("target", "admin") == {"bootstrap.servers": "b:1"}
    with pytest.raises(ConfigError, match="not from 'A' to itself"):
        FlowConfig("A", "A")
    with pytest.raises(ConfigError, match="Unknown configuration 'task.max'.*did you mean 'tasks.max'"):
        FlowConfig("A", "B", **{"task.max": 3})
    with pytest.raises(ConfigError, match="kind must be one of consumer, producer, admin"):
        flow.client_config("source", "streams")
    with pytest.raises(ConfigError, match="is not an enabled flow"):
        _config().flow("B", "A")
    with pytest.raises(TypeError, match="built with its clusters"):
        FlowConfig.build({"tasks.max": 2})


# -- MirrorMaker 1's flags -------------------------------------------------------------------------


def test_legacy_flags_make_one_identity_flow() -> None:
    consumer = {"bootstrap.servers": "dc1:9092", "group.id": "mirrormaker.dc1", "security.protocol": "SSL",
                "ssl.truststore.location": "/etc/ca.pem"}
    producer = {"metadata.broker.list": "kaf0000:9092", "compression.type": "snappy", "acks": "all"}
    config = legacy_config(consumer, producer, '".*"', 2)
    assert config.legacy and config.clusters == ("source", "target")
    flow = config.flow("source", "target")
    assert flow.policy == IdentityReplicationPolicy("source")
    assert flow.remote_topic("my-topic") == "my-topic"
    assert (flow.tasks_max, flow.topics) == (2, (".*",))
    assert not (flow.emit_checkpoints_enabled or flow.emit_heartbeats_enabled or flow.emit_offset_syncs_enabled)
    assert flow.replication_factor == -1
    source_consumer = flow.client_config("source", "consumer")
    assert source_consumer["bootstrap.servers"] == "dc1:9092" and source_consumer["group.id"] == "mirrormaker.dc1"
    assert flow.client_config("source", "admin") == {"bootstrap.servers": "dc1:9092", "security.protocol": "SSL",
                                                     "ssl.truststore.location": "/etc/ca.pem"}
    target_producer = flow.client_config("target", "producer")
    assert target_producer == {"bootstrap.servers": "kaf0000:9092", "compression.type": "snappy", "acks": "all"}
    assert config.unused == {}


def test_legacy_include_is_mirrormaker_1s_regex() -> None:
    """A comma is an alternative, blanks go, surrounding quotes go; internal topics stay out."""
    flow = legacy_config({"bootstrap.servers": "a:1"}, {"bootstrap.servers": "b:1"}, "'orders, pay.*'", 1).flows[0]
    assert flow.topics == ("orders|pay.*",)
    assert flow.should_replicate_topic("orders") and flow.should_replicate_topic("payments")
    assert not flow.should_replicate_topic("orders2")
    everything = legacy_config({"bootstrap.servers": "a:1"}, {"bootstrap.servers": "b:1"}, ".*", 1).flows[0]
    assert everything.should_replicate_topic("anything")
    assert not everything.should_replicate_topic("__consumer_offsets")


@pytest.mark.parametrize("consumer, producer, include, streams, message", [
    ({"group.id": "g", "zookeeper.connect": "zoo:2181"}, {"bootstrap.servers": "b:1"}, ".*", 1,
     "--consumer.config: bootstrap.servers is required \\(zookeeper.connect is the old consumer's"),
    ({"bootstrap.servers": "a:1"}, {"acks": "all"}, ".*", 1, "--producer.config: bootstrap.servers is required"),
    ({"bootstrap.servers": "a:1"}, {"bootstrap.servers": "b:1"}, ".*", 0, "--num.streams: at least 1"),
    ({"bootstrap.servers": "a:1"}, {"bootstrap.servers": "b:1"}, "(", 1, "--include \\(--whitelist\\): not a regular"),
    ({"bootstrap.servers": "a:1"}, {"bootstrap.servers": "b:1"}, "''", 1, "a regular expression of the topics is"),
    ({"bootstrap.servers": "a:1", "security.protocol": "nope"}, {"bootstrap.servers": "b:1"}, ".*", 1,
     "--consumer.config: Invalid value 'nope' for configuration security.protocol"),
])
def test_legacy_flags_errors_name_the_flag(consumer: Dict[str, str], producer: Dict[str, str], include: str,
                                           streams: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        legacy_config(consumer, producer, include, streams)
