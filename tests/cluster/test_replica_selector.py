"""Kafka's RackAwareReplicaSelector and the replicas a leader offers it (KIP-392).

The selector picks, for a consumer's rack, the leader when it is in that rack, else the
most caught-up replica there (the longer log, then the one caught up more recently, then
the higher broker id), and the leader when the consumer names no rack or no replica is in
it. The view it chooses from holds only followers that may answer the consumer's next
fetch: in the ISR, on a live broker, holding the fetch offset.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import pytest

from pylogq.cluster.broker.config import BrokerConfig
from pylogq.cluster.broker.replica_selector import (
    KAFKA_RACK_AWARE_SELECTOR,
    PartitionView,
    RackAwareReplicaSelector,
    ReplicaView,
    partition_view,
    replica_selector,
)
from pylogq.errors import ConfigError

NOW_MS = 1_700_000_000_000
RACKS: Dict[int, Optional[str]] = {0: "a", 1: "b", 2: "b", 3: "c", 4: None}


def view(leader: ReplicaView, *followers: ReplicaView) -> PartitionView:
    return PartitionView((leader,) + followers, leader)


def select(client_rack: str, v: PartitionView) -> Optional[ReplicaView]:
    return RackAwareReplicaSelector().select("t", 0, client_rack, v)


LEADER = ReplicaView(0, "a", 100, 0)


def test_a_replica_in_the_consumer_s_rack_is_chosen() -> None:
    follower = ReplicaView(3, "c", 100, 5)
    assert select("c", view(LEADER, follower, ReplicaView(1, "b", 100, 5))) == follower


def test_the_leader_is_chosen_when_it_is_in_the_consumer_s_rack() -> None:
    assert select("a", view(LEADER, ReplicaView(1, "a", 100, 0))) == LEADER


@pytest.mark.parametrize("client_rack", ["", "elsewhere"], ids=["no rack", "a rack no replica is in"])
def test_the_leader_serves_a_consumer_without_a_rack_match(client_rack: str) -> None:
    assert select(client_rack, view(LEADER, ReplicaView(1, "b", 100, 0), ReplicaView(4, None, 100, 0))) == LEADER


def test_a_replica_without_a_rack_is_no_match_for_any_consumer() -> None:
    assert select("None", view(LEADER, ReplicaView(4, None, 100, 0))) == LEADER


def test_racks_are_compared_exactly() -> None:
    assert select("B", view(LEADER, ReplicaView(1, "b", 100, 0))) == LEADER


def test_among_replicas_of_the_rack_the_most_caught_up_wins() -> None:
    longer = ReplicaView(1, "b", 120, 900)
    assert select("b", view(LEADER, ReplicaView(2, "b", 110, 0), longer)) == longer
    # The same log end: the one caught up more recently; then the higher broker id.
    recent = ReplicaView(1, "b", 120, 10)
    assert select("b", view(LEADER, ReplicaView(2, "b", 120, 500), recent)) == recent
    assert select("b", view(LEADER, ReplicaView(1, "b", 120, 10), ReplicaView(2, "b", 120, 10))).broker_id == 2


def follower_state(log_start: int, log_end: int, caught_up_ago_ms: int) -> Tuple[int, int, int]:
    return log_start, log_end, NOW_MS - caught_up_ago_ms


def test_the_view_offers_only_live_in_sync_followers_holding_the_fetch_offset() -> None:
    followers = {
        1: follower_state(0, 100, 0),    # in the ISR, live, holds offset 50
        2: follower_state(0, 40, 0),     # ends before offset 50
        3: follower_state(60, 100, 0),   # starts after offset 50
        4: follower_state(0, 100, 0),    # not in the ISR
        5: follower_state(0, 100, 0),    # in the ISR, but its broker is not live
        6: follower_state(-1, -1, 0),    # has not fetched from this leader yet
    }
    racks = {b: "r%d" % b for b in range(5)}
    racks[6] = "r6"
    v = partition_view(0, 120, [0, 1, 2, 3, 5, 6], followers, racks, 50, NOW_MS)
    assert v.leader == ReplicaView(0, "r0", 120, 0)
    assert [r.broker_id for r in v.replicas] == [0, 1]
    # A follower holding exactly the fetch offset's ends qualifies.
    assert [r.broker_id for r in partition_view(0, 120, [0, 2], followers, racks, 40, NOW_MS).replicas] == [0, 2]
    assert [r.broker_id for r in partition_view(0, 120, [0, 3], followers, racks, 60, NOW_MS).replicas] == [0, 3]


def test_the_view_carries_how_long_ago_each_follower_was_caught_up() -> None:
    v = partition_view(0, 100, [0, 1], {1: follower_state(0, 90, 1500)}, {0: "a", 1: "b"}, 10, NOW_MS)
    assert v.replicas[1] == ReplicaView(1, "b", 90, 1500)


def test_replica_selector_class_takes_kafka_s_class_name_only() -> None:
    assert replica_selector(None) is None
    assert isinstance(replica_selector(KAFKA_RACK_AWARE_SELECTOR), RackAwareReplicaSelector)
    config = BrokerConfig({"replica.selector.class": KAFKA_RACK_AWARE_SELECTOR})
    assert config.node.replica_selector_class == KAFKA_RACK_AWARE_SELECTOR
    assert BrokerConfig({}).node.replica_selector_class is None  # Kafka's default: leaders only
    for bad in ("org.apache.kafka.common.replica.LeaderSelector", "RackAwareReplicaSelector", ""):
        with pytest.raises(ConfigError, match="replica.selector.class"):
            BrokerConfig({"replica.selector.class": bad})
