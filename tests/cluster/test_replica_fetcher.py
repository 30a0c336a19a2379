"""ReplicaFetcherThread applying a leader's answers to a follower partition, against a fake leader."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

import pytest

from pylogq import errors, records
from pylogq.cluster.broker.replica_fetcher import FetcherSettings, ReplicaFetcherThread
from pylogq.cluster.contract import (
    BrokerEndpoint,
    BrokerRegistration,
    EpochEndOffset,
    FetchResult,
    LeaderAndIsrPartition,
    RecordBytes,
)
from pylogq.cluster.state.partition import Partition
from pylogq.storage.log import Log

TP = ("t", 0)
LEADER = BrokerRegistration(0, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9),))


def leader_batch(n: int, base_offset: int, seq: int) -> bytes:
    """What a leader serves: an idempotent producer's batch with its offsets and epoch 0."""
    data = bytearray(records.build_batch([b"v-%d" % i for i in range(n)], producer_id=7, producer_epoch=0,
                                         base_sequence=seq))
    records.assign_offsets(data, base_offset, 0)
    return bytes(data)


class FakeLeader:
    """Answers every fetch with the next of ``answers`` (an empty answer once they run out)."""

    def __init__(self, answers: List[bytes]) -> None:
        self.answers = answers
        self.fetches: List[int] = []  # the fetch offset of each fetch

    def replica_fetch(self, replica_id: int, broker_epoch: int, partitions: Any, max_wait_ms: int, min_bytes: int,
                      max_bytes: int) -> Dict[Tuple[str, int], FetchResult]:
        self.fetches.append(partitions[0].fetch_offset)
        data = self.answers.pop(0) if self.answers else b""
        return {TP: FetchResult(0, 0, 0, RecordBytes(data))}

    def offsets_for_leader_epoch(self, replica_id: int, asks: Any) -> Dict[Tuple[str, int], EpochEndOffset]:
        return {tp: EpochEndOffset(0, 0, 0) for tp in asks}

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def follower(tmp_path: Any) -> Any:
    with Log(str(tmp_path / "t-0")) as log:
        partition = Partition("t", 0, log, broker_id=1, single_replica=False)
        partition.make_follower(LeaderAndIsrPartition("t", 0, 1, 0, 0, [0, 1], 0, [0, 1]))
        yield partition


def fetcher_of(partition: Partition, leader: FakeLeader) -> ReplicaFetcherThread:
    """A fetcher of ``partition`` past its truncation, driven by the test (its thread not started)."""
    fetcher = ReplicaFetcherThread(1, LEADER, 0, FetcherSettings(backoff_ms=60000), lambda *a: leader,
                                   lambda tp: partition if tp == TP else None, lambda: 1)
    fetcher.add_partitions({TP: (0, 0)})
    fetcher._truncate(dict(fetcher._states))
    assert fetcher.fetch_state(TP) == ("fetching", 0, 0)
    return fetcher


def fetch_once(fetcher: ReplicaFetcherThread) -> None:
    now = time.monotonic()
    fetcher._fetch({tp: s for tp, s in fetcher._states.items() if s.delayed_until <= now})


def ready(fetcher: ReplicaFetcherThread) -> Optional[bool]:
    state = fetcher._states.get(TP)
    return None if state is None else state.delayed_until <= time.monotonic()


def test_fetched_batches_are_appended_as_they_are_with_their_producers(follower: Partition) -> None:
    leader = FakeLeader([leader_batch(3, 0, 0), leader_batch(2, 3, 3)])
    fetcher = fetcher_of(follower, leader)
    fetch_once(fetcher)
    fetch_once(fetcher)
    assert leader.fetches == [0, 3] and fetcher.fetch_state(TP) == ("fetching", 0, 5)
    assert follower.log_end_offset == 5
    assert [(p.producer_id, p.last_sequence) for p in follower.active_producers()] == [(7, 4)]


def test_bytes_that_fail_their_crc_are_refused_and_retried_after_the_back_off(follower: Partition) -> None:
    """The leader's copy is damaged: nothing is written, the partition truncates again, and not before
    replica.fetch.backoff.ms (the same bytes come back at every fetch: without it the fetcher would spin)."""
    damaged = bytearray(leader_batch(3, 0, 0))
    damaged[-1] ^= 0xFF
    leader = FakeLeader([bytes(damaged)])
    fetcher = fetcher_of(follower, leader)
    fetch_once(fetcher)
    assert follower.log_end_offset == 0 and fetcher.fetch_state(TP) == ("truncating", 0, 0)
    assert ready(fetcher) is False
    fetch_once(fetcher)
    assert leader.fetches == [0]


class TruncatedRegion:
    """An in-process answer's region of the leader's segment, truncated before the follower reads it."""

    def __len__(self) -> int:
        return 72

    def read(self) -> bytes:
        raise errors.OffsetOutOfRangeError("segment 0 was truncated while being read: 0 of 72 bytes at position 288")


def test_a_region_the_leader_truncated_before_it_was_read_is_asked_for_again_after_the_back_off(
        follower: Partition) -> None:
    """An in-process fetch answers with a region of the leader's segment, read by the follower;
    a leader that lost its leadership may truncate it first. The fetch is asked again after
    replica.fetch.backoff.ms, not raised into the fetcher's loop (where it was logged as a bug)."""
    leader = FakeLeader([])
    leader.replica_fetch = lambda *a: {TP: FetchResult(0, 0, 0, TruncatedRegion())}  # type: ignore[assignment]
    fetcher = fetcher_of(follower, leader)
    fetch_once(fetcher)
    assert follower.log_end_offset == 0 and fetcher.fetch_state(TP) == ("fetching", 0, 0)
    assert ready(fetcher) is False
