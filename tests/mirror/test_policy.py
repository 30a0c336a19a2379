"""Replication policies, filters and loop prevention, on Kafka's own test cases
(ReplicationPolicyTest, MirrorClientTest, MirrorSourceConnectorTest)."""

from __future__ import annotations

import pytest

from pylogq.errors import ConfigError
from pylogq.mirror.config import FlowConfig
from pylogq.mirror.policy import (
    ConfigPropertyFilter,
    DefaultReplicationPolicy,
    GroupFilter,
    IdentityReplicationPolicy,
    TopicFilter,
    checkpoint_topics,
    count_hops_for_topic,
    heartbeat_topics,
    is_cycle,
    remote_topics,
    replication_hops,
    upstream_clusters,
)

pytestmark = pytest.mark.compiled_pass

DEFAULT = DefaultReplicationPolicy()


def test_default_policy_names_remote_topics_by_their_source() -> None:
    assert DEFAULT.format_remote_topic("us-west", "orders") == "us-west.orders"
    assert DEFAULT.topic_source("us-west.orders") == "us-west"
    assert DEFAULT.upstream_topic("us-west.orders") == "orders"
    assert DEFAULT.topic_source("orders") is None and DEFAULT.upstream_topic("orders") is None
    # Several hops: the immediate source first, the original name at the end.
    assert DEFAULT.topic_source("B.A.orders") == "B"
    assert DEFAULT.upstream_topic("B.A.orders") == "A.orders"
    assert DEFAULT.original_topic("B.A.orders") == "orders"
    assert DEFAULT.original_topic("orders") == "orders"


def test_default_policy_splits_as_java_does() -> None:
    """Java's String.split drops trailing empty strings and keeps a leading one."""
    assert DEFAULT.topic_source("a.") is None
    assert DEFAULT.topic_source(".a") == "" and DEFAULT.upstream_topic(".a") == "a"
    assert DEFAULT.topic_source("a..b") == "a" and DEFAULT.upstream_topic("a..b") == ".b"
    assert DEFAULT.topic_source("...") is None
    assert DEFAULT.topic_source("") is None


def test_internal_topics() -> None:
    """ReplicationPolicyTest.testInternalTopic."""
    assert DEFAULT.is_internal_topic("__consumer_offsets")
    assert DEFAULT.is_internal_topic(".hiddentopic")
    assert DEFAULT.is_internal_topic("mm2-offsets.CLUSTER.internal")
    assert DEFAULT.is_internal_topic("mm2-offsets-CLUSTER-internal")
    assert not DEFAULT.is_internal_topic("mm2-offsets_CLUSTER_internal")


def test_internal_topics_follow_the_separator_unless_told_not_to() -> None:
    """ReplicationPolicyTest: offset syncs and checkpoints topics with separator "__"."""
    custom = DefaultReplicationPolicy("__")
    legacy = DefaultReplicationPolicy("__", internal_topic_separator_enabled=False)
    assert custom.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs__CLUSTER__internal"
    assert legacy.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs.CLUSTER.internal"
    assert custom.checkpoints_topic("CLUSTER") == "CLUSTER__checkpoints__internal"
    assert legacy.checkpoints_topic("CLUSTER") == "CLUSTER.checkpoints.internal"
    assert custom.heartbeats_topic() == legacy.heartbeats_topic() == "heartbeats"
    assert custom.is_checkpoints_topic("CLUSTER__checkpoints__internal")
    assert not custom.is_checkpoints_topic("CLUSTER.checkpoints.internal")
    assert custom.is_internal_topic("mm2-offset-syncs__CLUSTER__internal")
    assert custom.format_remote_topic("b", "topic1") == "b__topic1"


def test_heartbeats_and_checkpoints_topics_are_recognised() -> None:
    """MirrorClientTest.testIsHeartbeatTopic and testIsCheckpointTopic."""
    for topic in ("heartbeats", "source1.heartbeats", "source2.source1.heartbeats"):
        assert DEFAULT.is_heartbeats_topic(topic), topic
    for topic in ("heartbeats!", "!heartbeats", "source1heartbeats", "source1-heartbeats"):
        assert not DEFAULT.is_heartbeats_topic(topic), topic
    assert DEFAULT.is_checkpoints_topic("source1.checkpoints.internal")
    for topic in ("checkpoints.internal", "checkpoints-internal", "checkpoints.internal!", "!checkpoints.internal",
                  "source1checkpointsinternal"):
        assert not DEFAULT.is_checkpoints_topic(topic), topic


def test_hops_between_clusters() -> None:
    """MirrorClientTest.countHopsForTopicTest and replicationHopsTest."""
    assert count_hops_for_topic(DEFAULT, "topic", "source") == -1
    assert count_hops_for_topic(DEFAULT, "source", "source") == -1
    assert count_hops_for_topic(DEFAULT, "sourcetopic", "source") == -1
    assert count_hops_for_topic(DEFAULT, "source1.topic", "source2") == -1
    assert count_hops_for_topic(DEFAULT, "source1.topic", "source1") == 1
    assert count_hops_for_topic(DEFAULT, "source2.source1.topic", "source2") == 1
    assert count_hops_for_topic(DEFAULT, "source2.source1.topic", "source1") == 2
    assert count_hops_for_topic(DEFAULT, "source3.source2.source1.topic", "source1") == 3
    assert count_hops_for_topic(DEFAULT, "source3.source2.source1.topic", "source4") == -1
    topics = ["topic1", "topic2", "heartbeats", "source1.heartbeats", "source1.source2.heartbeats", "source3.heartbeats"]
    assert replication_hops(DEFAULT, topics, "source1") == 1
    assert replication_hops(DEFAULT, topics, "source2") == 2
    assert replication_hops(DEFAULT, topics, "source3") == 1
    assert replication_hops(DEFAULT, topics, "source4") == -1


def test_heartbeats_checkpoints_and_remote_topics_of_a_cluster() -> None:
    """MirrorClientTest.heartbeatTopicsTest, checkpointsTopicsTest, remoteTopicsTest, remoteTopicsSeparatorTest."""
    assert heartbeat_topics(DEFAULT, ["topic1", "topic2", "heartbeats", "source1.heartbeats",
                                      "source2.source1.heartbeats", "source3.heartbeats"]) == {
        "heartbeats", "source1.heartbeats", "source2.source1.heartbeats", "source3.heartbeats"}
    assert checkpoint_topics(DEFAULT, ["topic1", "topic2", "checkpoints.internal", "source1.checkpoints.internal",
                                       "source2.source1.checkpoints.internal", "source3.checkpoints.internal"]) == {
        "source1.checkpoints.internal", "source2.source1.checkpoints.internal", "source3.checkpoints.internal"}
    assert remote_topics(DEFAULT, ["topic1", "topic2", "topic3", "source1.topic4", "source1.source2.topic5",
                                   "source3.source4.source5.topic6"]) == {
        "source1.topic4", "source1.source2.topic5", "source3.source4.source5.topic6"}
    assert remote_topics(DEFAULT, ["topic1", "source1.topic4", "source2.topic5"], source="source1") == {"source1.topic4"}
    assert remote_topics(DefaultReplicationPolicy("__"), ["topic1", "source1__topic4", "source1__source2__topic5",
                                                          "source3__source4__source5__topic6"]) == {
        "source1__topic4", "source1__source2__topic5", "source3__source4__source5__topic6"}


def test_upstream_clusters_from_heartbeats() -> None:
    """MirrorClientTest.upstreamClustersTest and testIdentityReplicationUpstreamClusters."""
    topics = ["topic1", "topic2", "heartbeats", "source1.heartbeats", "source1.source2.heartbeats",
              "source3.source4.source5.heartbeats"]
    expected = {"source1", "source2", "source3", "source4", "source5"}
    assert upstream_clusters(DEFAULT, topics) == expected
    assert upstream_clusters(IdentityReplicationPolicy("source"), topics) == expected


def test_identity_policy_keeps_names_but_heartbeats() -> None:
    """MirrorClientTest.testIdentityReplicationTopicSource and testIdentityReplicationRemoteTopics."""
    identity = IdentityReplicationPolicy("primary")
    assert identity.format_remote_topic("primary", "topic1") == "topic1"
    assert identity.topic_source("topic1") == "primary"
    assert identity.upstream_topic("topic1") == "topic1"
    assert identity.original_topic("topic1") == "topic1"
    assert identity.format_remote_topic("backup", "heartbeats") == "backup.heartbeats"
    assert identity.topic_source("backup.heartbeats") == "backup"
    assert remote_topics(IdentityReplicationPolicy("source"), ["topic1", "topic2", "topic3", "heartbeats",
                                                                "backup.heartbeats"]) == {
        "topic1", "topic2", "topic3", "backup.heartbeats"}
    assert IdentityReplicationPolicy().topic_source("topic1") is None


def test_the_filters_defaults_are_kafkas() -> None:
    topics = TopicFilter()
    for topic in ("orders", "a.b", "heartbeats", "mm2-configs.A"):
        assert topics.should_replicate_topic(topic), topic
    for topic in ("__consumer_offsets", "x-internal", "mm2-offsets.A.internal", "x.replica"):
        assert not topics.should_replicate_topic(topic), topic
    groups = GroupFilter()
    assert groups.should_replicate_group("billing")
    for group in ("console-consumer-123", "connect-sink", "__internal"):
        assert not groups.should_replicate_group(group), group
    configs = ConfigPropertyFilter()
    assert configs.should_replicate_config_property("retention.ms")
    assert configs.should_replicate_config_property("cleanup.policy")
    for prop in ("min.insync.replicas", "message.timestamp.type", "unclean.leader.election.enable",
                 "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
                 "message.timestamp.difference.max.ms"):
        assert not configs.should_replicate_config_property(prop), prop
    # The dots are escaped: a look-alike name is not excluded.
    assert configs.should_replicate_config_property("min-insync-replicas")
    assert not configs.should_replicate_source_default("retention.ms")
    assert ConfigPropertyFilter(use_defaults_from="source").should_replicate_source_default("retention.ms")


def test_filters_match_whole_names_and_excludes_win() -> None:
    """Java's Pattern.matches: the whole name, not a part of it."""
    topics = TopicFilter(["orders", "pay.*"], ["payroll"])
    assert topics.should_replicate_topic("orders")
    assert not topics.should_replicate_topic("orders-eu")
    assert not topics.should_replicate_topic("eu-orders")
    assert topics.should_replicate_topic("payments")
    assert not topics.should_replicate_topic("payroll")
    # An empty list matches nothing (not everything, as an empty pattern would).
    assert not TopicFilter([], []).should_replicate_topic("orders")
    assert TopicFilter([".*"], []).should_replicate_topic("__consumer_offsets")


def test_a_bad_expression_names_its_key() -> None:
    with pytest.raises(ConfigError, match=r"configuration A->B.topics: 'orders\(' is not a regular expression"):
        TopicFilter(["ok", "orders("], include_key="A->B.topics")
    with pytest.raises(ConfigError, match="groups.exclude"):
        GroupFilter(exclude=["[unclosed"])


def test_the_separator_must_not_be_empty() -> None:
    with pytest.raises(ConfigError, match="replication.policy.separator"):
        DefaultReplicationPolicy("")


def _flow(**settings: object) -> FlowConfig:
    return FlowConfig("source", "target", **settings)


def test_heartbeats_are_mirrored_by_default_and_despite_the_filter() -> None:
    """MirrorSourceConnectorTest: testReplicatesHeartbeatsByDefault, ...DespiteFilter, ...WhenDisabled,
    ...WhenDisabledButFilterAllows."""
    flow = _flow()
    assert flow.should_replicate_topic("heartbeats") and flow.should_replicate_topic("us-west.heartbeats")
    nothing = _flow(topics="")
    assert nothing.should_replicate_topic("heartbeats") and nothing.should_replicate_topic("us-west.heartbeats")
    assert not nothing.should_replicate_topic("orders")
    underscore = _flow(topics="", replication_policy_separator="_")
    assert underscore.should_replicate_topic("heartbeats")
    assert not underscore.should_replicate_topic("us-west.heartbeats"), "not a heartbeats topic with separator _"
    disabled = _flow(heartbeats_replication_enabled=False, topics="")
    assert not disabled.should_replicate_topic("heartbeats")
    assert not disabled.should_replicate_topic("us-west.heartbeats")
    allowed = _flow(heartbeats_replication_enabled=False)
    assert allowed.should_replicate_topic("heartbeats") and allowed.should_replicate_topic("us-west.heartbeats")


def test_no_cycles() -> None:
    """MirrorSourceConnectorTest.testNoCycles: a topic that came from the target is never copied back."""
    flow = _flow(topics_exclude="")
    for topic in ("target.topic1", "target.source.topic1", "source.target.topic1", "target.source.target.topic1",
                  "source.target.source.topic1"):
        assert not flow.should_replicate_topic(topic), topic
        assert is_cycle(flow.policy, topic, "target"), topic
    assert flow.should_replicate_topic("topic1")
    assert flow.should_replicate_topic("source.topic1")
    assert not is_cycle(DEFAULT, ".b", "target")  # testIsCycleWithNullUpstreamTopic's topic


def test_identity_replication_allows_cycles_but_of_heartbeats() -> None:
    """MirrorSourceConnectorTest.testIdentityReplication (an identity policy given no source alias)."""
    identity = IdentityReplicationPolicy()
    for topic in ("target.topic1", "target.source.topic1", "source.target.topic1", "target.source.target.topic1",
                  "source.target.source.topic1", "topic1", "othersource.topic1", "heartbeats",
                  "othersource.heartbeats"):
        assert not is_cycle(identity, topic, "target"), topic
    for topic in ("target.heartbeats", "target.source.heartbeats", "source.target.heartbeats",
                  "target.source.target.heartbeats", "source.target.source.heartbeats"):
        assert is_cycle(identity, topic, "target"), topic
    # A flow's identity policy answers the flow's source: still no cycle for plain topics.
    flow = _flow(replication_policy_class="IdentityReplicationPolicy", topics_exclude="")
    assert flow.policy == IdentityReplicationPolicy("source")
    assert flow.should_replicate_topic("target.topic1") and flow.remote_topic("orders") == "orders"
    assert not flow.should_replicate_topic("target.heartbeats")


def test_a_flows_names_for_its_topics() -> None:
    flow = _flow()
    assert flow.remote_topic("orders") == "source.orders"
    assert flow.checkpoint_topic("orders") == "source.orders"
    # A topic the target sent here goes back under its original name (MirrorCheckpointTask.renameTopicPartition).
    assert flow.checkpoint_topic("target.orders") == "orders"
    assert flow.offset_syncs_topic == "mm2-offset-syncs.target.internal" and flow.offset_syncs_side == "source"
    on_target = _flow(offset_syncs_topic_location="target")
    assert on_target.offset_syncs_topic == "mm2-offset-syncs.source.internal" and on_target.offset_syncs_side == "target"
    assert flow.checkpoints_topic == "source.checkpoints.internal"
    assert flow.heartbeats_topic == "heartbeats"


def test_policies_and_filters_compare_by_value() -> None:
    assert DefaultReplicationPolicy("_") == DefaultReplicationPolicy("_") != DefaultReplicationPolicy(".")
    assert IdentityReplicationPolicy("a") != DefaultReplicationPolicy()
    assert len({TopicFilter(["a"]), TopicFilter(["a"])}) == 1
    assert TopicFilter(["a"]) != GroupFilter(["a"])
    assert ConfigPropertyFilter() == ConfigPropertyFilter() != ConfigPropertyFilter(["x"])
