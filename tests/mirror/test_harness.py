"""The acceptance harness checked on its own (tests/mirror/_clusters.py).

The verifier's comparison on records made by hand: it must find a record missing, one out
of order, one that is not in the source, a changed timestamp, a malformed record and an
acknowledged record the source lost, and count duplicates and replays. Then the whole
harness against the two real clusters, with the plain consume-and-produce loop
(tests/mirror/_copy_loop.py) standing in for the mirror: numbered records at a fixed rate,
the leader of a source partition, the target broker and the loop each killed with SIGKILL
and started again, and the copy found complete and in order, its duplicates counted (with the full-size
acceptance, under ``PYLOGQ_MIRROR_SOAK=1``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterable, List, Sequence

import pytest

from ._clusters import (
    ACKED,
    FAILED,
    LoadGenerator,
    MirrorProcess,
    Records,
    TopicTail,
    TwoClusters,
    compare,
    copy_loop_command,
    create_topic,
    key_for,
    mirrored,
    value_for,
    wait_for,
    wait_mirrored,
)
from ._copy_loop import READY

PARTITIONS = 2


def _records(topic: str, per_partition: Sequence[Iterable[int]], stamp: int = 1000) -> Records:
    """Records holding, per partition, the numbered records ``per_partition[p]`` in that order,
    each with timestamp ``stamp + seq``."""
    out = Records(topic, len(per_partition))
    for p, seqs in enumerate(per_partition):
        for offset, seq in enumerate(seqs):
            out.add(p, offset, key_for(len(per_partition), p, seq), value_for(p, seq, 16), stamp + seq)
    return out


def test_a_faithful_copy_passes() -> None:
    source = _records("t", [range(5), range(3)])
    result = compare(source, _records("src.t", [range(5), range(3)]))
    assert result.failures == [] and result.duplicates == 0 and result.replays == 0
    assert (result.source_records, result.copies, result.missing) == (8, 8, 0)
    assert mirrored(source, _records("src.t", [range(5), range(3)]))


def test_duplicates_are_counted_with_their_replays() -> None:
    source = _records("t", [range(6), range(2)])
    # Partition 0 copied 0-3, then again from 2 (a restart from an older position), twice.
    target = _records("src.t", [[0, 1, 2, 3, 2, 3, 4, 3, 4, 5], [0, 1]])
    result = compare(source, target)
    assert result.failures == []
    assert (result.duplicates, result.replays, result.copies) == (4, 2, 12)


def test_a_missing_record_fails() -> None:
    source = _records("t", [range(5), range(3)])
    target = _records("src.t", [[0, 1, 3, 4], [0, 1, 2]])
    assert not mirrored(source, target)
    result = compare(source, target)
    assert result.missing == 1
    assert result.failures == ["src.t-0: 1 source records missing, first: [2]"]


def test_a_record_out_of_order_fails() -> None:
    source = _records("t", [range(4), range(1)])
    result = compare(source, _records("src.t", [[0, 2, 1, 3], [0]]))
    assert mirrored(source, _records("src.t", [[0, 2, 1, 3], [0]]))
    assert len(result.failures) == 1 and "not in the source's order" in result.failures[0], result.failures


def test_a_record_not_in_the_source_fails() -> None:
    result = compare(_records("t", [range(2), range(1)]), _records("src.t", [[0, 1, 7], [0]]))
    assert result.failures == ["src.t-0: 1 records not in the source, first: [7]"]


def test_a_changed_timestamp_fails() -> None:
    result = compare(_records("t", [range(2), range(1)]), _records("src.t", [range(2), range(1)], stamp=2000))
    assert len(result.failures) == 2 and all("another timestamp" in f for f in result.failures), result.failures


def test_a_record_in_another_partition_or_with_another_key_is_malformed() -> None:
    target = _records("src.t", [range(2), range(1)])
    target.add(1, 1, key_for(2, 0, 1), value_for(0, 1, 16), 1001)  # partition 0's record in partition 1
    target.add(0, 2, b"other", value_for(0, 2, 16), 1002)  # partition 0's record 2 with a foreign key
    result = compare(_records("t", [range(3), range(1)]), target)
    assert target.malformed_count == 2
    assert any(f.startswith("2 malformed records on the target") for f in result.failures), result.failures


def test_an_acknowledged_record_the_source_lost_fails() -> None:
    load = LoadGenerator("127.0.0.1:1", "t", 2, rate=1.0)  # never started: its outcomes set by hand
    load.status = [bytearray([ACKED, ACKED, ACKED]), bytearray([ACKED, FAILED])]
    source = _records("t", [[0, 2], [0]])
    result = compare(source, _records("src.t", [[0, 2], [0]]), load)
    assert result.failures == ["source t-0 lost 1 acknowledged records, first: [1]"]


@pytest.mark.compiled_pass  # broker processes and ZooKeeper (tests/conftest.py)
@pytest.mark.mirror_soak  # a check of the harness itself: runs with the full-size acceptance
def test_copy_loop_under_kills(mirror_clusters: TwoClusters, tmp_path: Path) -> None:
    clusters = mirror_clusters
    source, target = clusters.source, clusters.target
    topic, remote = "harness-load", "src.harness-load"
    create_topic(clusters, "source", topic, PARTITIONS)
    create_topic(clusters, "target", remote, PARTITIONS)
    load = LoadGenerator(source.bootstrap, topic, PARTITIONS, rate=400.0)
    loop = MirrorProcess("copy-loop", copy_loop_command(source.bootstrap, target.bootstrap, topic, remote,
                                                        "harness-copy"), tmp_path / "copy-loop.log")
    tails: List[TopicTail] = []
    try:
        loop.start().wait_output("^%s$" % READY)
        load.start()

        def after(n: int) -> None:
            """Wait until ``n`` more records were acknowledged (the load is flowing)."""
            goal = load.count(ACKED) + n
            wait_for(lambda: load.count(ACKED) >= goal, "%d more records acknowledged" % n, 60, clusters.logs)

        after(200)
        victim = source.state(topic, 0)[0]  # type: ignore[index]
        source.kill(victim)
        source.wait_until(lambda: (source.state(topic, 0) or (victim,))[0] not in (victim, -1),
                          "a new leader of %s-0" % topic)
        source.start(victim)
        after(200)
        target.kill(0)
        target.start(0)
        after(200)
        loop.kill()
        loop.start().wait_output("^%s$" % READY)
        after(200)
        load.stop()
        tails = [TopicTail(source.bootstrap, topic, PARTITIONS), TopicTail(target.bootstrap, remote, PARTITIONS)]
        started = time.monotonic()
        wait_mirrored(tails[0], tails[1], 120, lambda: loop.log_tail() + clusters.logs())
        result = compare(tails[0], tails[1], load)
        print("copy loop under kills: %s; %d sent, %d acknowledged, %d failed; complete %.1f s after the load "
              "stopped" % (result.summary(), load.total_sent, load.count(ACKED), load.count(FAILED),
                           time.monotonic() - started))
        assert result.failures == [], "\n".join(result.failures)
        assert result.source_records >= load.count(ACKED) > 0
    finally:
        for tail in tails:
            tail.close()
        load.stop()
        loop.close()
    assert loop.unclean == [], loop.unclean
