"""Replica assignment: Kafka's own expected assignments, and the properties it promises."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pylogq.cluster.replica_assignment import assign_replicas, rack_alternated
from pylogq.errors import InvalidReplicationFactorError


def test_kafkas_assignment_without_racks():
    # AdminRackAwareTest.testReplicaAssignment: 5 brokers, 10 partitions, 3 replicas, start 0.
    assert assign_replicas(10, 3, {b: None for b in range(5)}, fixed_start=0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_kafkas_rack_alternated_list_and_assignment():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas(7, 3, racks, fixed_start=0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]}


@pytest.mark.parametrize("factor", [0, -1, 6])
def test_a_bad_replication_factor_is_refused(factor):
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(10, factor, {b: None for b in range(5)})


def test_racks_on_some_brokers_only_are_refused_naming_them():
    with pytest.raises(InvalidReplicationFactorError, match=r"\[2\]"):
        assign_replicas(3, 2, {0: "a", 1: "b", 2: None})


@settings(max_examples=200, deadline=None)
@given(brokers=st.integers(1, 9), factor=st.integers(1, 9), partitions=st.integers(1, 40),
       racks=st.integers(0, 4), seed=st.integers(0, 1 << 30), start=st.integers(0, 30))
def test_replicas_are_distinct_and_spread(brokers, factor, partitions, racks, seed, start):
    if factor > brokers:
        return
    rack_of = {b: ("r%d" % (b % racks) if racks else None) for b in range(brokers)}
    out = assign_replicas(partitions, factor, rack_of, start_partition=start, rng=random.Random(seed))
    assert sorted(out) == list(range(start, start + partitions))
    for replicas in out.values():
        assert len(replicas) == factor == len(set(replicas))
        if racks:
            # A replica shares a rack with another only when every rack already has one.
            assert len({rack_of[r] for r in replicas}) == min(factor, len(set(rack_of.values())))
    # Preferred leaders go round-robin: no broker leads two more than another.
    leaders = Counter(r[0] for r in out.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in range(brokers)) <= 1
