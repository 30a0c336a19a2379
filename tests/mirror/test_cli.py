"""``pylogq mirror-maker``: the command as a process (killed with -9 and restarted, stopped with
SIGTERM, MirrorMaker 1's flags), its console and metrics output, ``status`` and
``translate-offsets``, and its errors."""

from __future__ import annotations

import io
import os
import re
import signal
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

import pytest

from pylogq.cli.main import run
from pylogq.client.admin import AdminClient
from pylogq.client.consumer import OffsetAndMetadata, TopicPartition
from pylogq.mirror.worker import MirrorMaker

from ._support import METRICS, READY, Clusters, Load, MirrorProcess, count, read_to_end, read_topic, wait_for

# The command's processes and output: the same Python in both passes; the records they copy pass
# through the kernels and their twins in test_task.py and test_worker.py, which run in both.
pytestmark = pytest.mark.compiled_pass

PROGRESS = re.compile(r"^A->B: [0-9.]+ records/s, [0-9.]+ MB/s, (\d+) records, lag (\d+), tasks ([0-9,]+|none) of (\d+)$")
KILL_SETTINGS = {
    # A killed process's membership of the workers' group expires within a second.
    "B.consumer.session.timeout.ms": "1000",
    "tasks.max": "2",
}


def _holds_every_record(got: Dict[int, List[Any]], load: Load) -> bool:
    """Whether the copies read hold every record the load sent, in each of its 3 partitions."""
    return all(set(r.value for r in got.get(p, [])) >= set(load.sent[p]) for p in range(3))


def _duplicates_of_a_complete_copy(got: Dict[int, List[Any]], load: Load) -> int:
    """Check that each partition's copies, first occurrences taken, are the load's records in its
    order (none missing); -> how many copies are duplicates."""
    duplicates = 0
    for partition in range(3):
        values = [r.value for r in got[partition]]
        first_seen = list(dict.fromkeys(values))
        assert first_seen == load.sent[partition], "partition %d: a record missing or out of order" % partition
        duplicates += len(values) - len(first_seen)
    return duplicates


@pytest.mark.parametrize("eos", ["disabled", "enabled"])
def test_a_mirror_killed_with_kill_9_and_started_again(clusters: Clusters, tmp_path: Path, eos: str) -> None:
    clusters.a.create_topic("load", partitions=3)
    path = clusters.write_properties(tmp_path / "mm2.properties", **KILL_SETTINGS,
                                     **{"B.exactly.once.source.support": eos})
    first = MirrorProcess([str(path)], tmp_path / "first.log")
    first.wait_line(READY)
    load = Load(clusters, "load", 3, 3000)
    isolation = "read_committed" if eos == "enabled" else "read_uncommitted"
    read_topic(clusters.b_bootstrap, "A.load", lambda g: count(g) >= 300, isolation)
    if eos == "enabled":
        # Killed while one of its transactions is open (it lasts milliseconds; the kill follows
        # the answer at once): the copies it holds must never be read.
        with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
            wait_for(lambda: any(t.state == "Ongoing" for t in admin.describe_transactions(
                ["mm2-A->B-task-0", "mm2-A->B-task-1"], raise_errors=False).values()), "an open transaction")
            first.kill()
    else:
        first.kill()  # mid-stream
    second = MirrorProcess([str(path)], tmp_path / "second.log")
    try:
        second.wait_line(READY)
        load.join()
        got = read_topic(clusters.b_bootstrap, "A.load",
                         lambda g: _holds_every_record(g, load),
                         isolation, timeout=30)
    finally:
        assert second.stop() == 0, second.log()
    assert "pylogq mirror-maker stopped" in second.lines
    duplicates = _duplicates_of_a_complete_copy(got, load)
    print("%s: %d duplicates after kill -9" % ("exactly once" if eos == "enabled" else "at least once", duplicates))
    if eos == "enabled":
        assert duplicates == 0
        # What a read_uncommitted reader sees beyond: the copies of the transactions the kill left
        # open, which the restarted task's init_transactions aborted (none when the kill fell
        # between two transactions).
        committed = count(read_to_end(clusters.b_bootstrap, "A.load", "read_committed"))
        everything = count(read_to_end(clusters.b_bootstrap, "A.load"))
        assert committed == 3000
        print("exactly once: %d copies aborted" % (everything - committed))


@pytest.mark.parametrize("eos", ["disabled", "enabled"])
def test_a_mirror_frozen_past_its_session_and_resumed(clusters: Clusters, tmp_path: Path, eos: str) -> None:
    """SIGSTOP of one of two mirror processes past its session in the workers' group: the other
    takes its tasks over. Resumed, the frozen one still runs its old tasks until it learns that it
    left the group (a zombie, for a heartbeat or so), then joins again. At least once, every record
    is copied in order; exactly once, the new owners' init_transactions fenced the zombie's
    transactions, and nothing is copied twice."""
    # Partitions 0, 1 and 2 of "frozen" go to tasks 0, 1 and 1 of two: each process copies some.
    clusters.a.create_topic("frozen", partitions=3)
    path = clusters.write_properties(tmp_path / "mm2.properties", **KILL_SETTINGS,
                                     **{"B.exactly.once.source.support": eos})
    isolation = "read_committed" if eos == "enabled" else "read_uncommitted"
    first = MirrorProcess([str(path)], tmp_path / "first.log")
    second = MirrorProcess([str(path)], tmp_path / "second.log")
    try:
        first.wait_line(READY)
        second.wait_line(READY)
        with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
            def members() -> int:
                [workers] = admin.describe_consumer_groups(["mm2-A->B-workers"])
                return len(workers.members) if workers.state == "Stable" else -1

            wait_for(lambda: members() == 2, "both processes in the workers' group")
            load = Load(clusters, "frozen", 3, 20000)
            read_topic(clusters.b_bootstrap, "A.frozen", lambda g: count(g) >= 1000, isolation)
            os.kill(first.proc.pid, signal.SIGSTOP)
            try:
                wait_for(lambda: members() == 1, "the frozen process's session to expire")
                copied = count(read_to_end(clusters.b_bootstrap, "A.frozen", isolation))
                read_topic(clusters.b_bootstrap, "A.frozen", lambda g: count(g) >= copied + 1000, isolation)
            finally:
                os.kill(first.proc.pid, signal.SIGCONT)
            wait_for(lambda: members() == 2, "the resumed process back in the workers' group")
        load.join()
        got = read_topic(clusters.b_bootstrap, "A.frozen",
                         lambda g: _holds_every_record(g, load),
                         isolation, timeout=30)
    finally:
        statuses = [second.stop(), first.stop()]
    assert statuses == [0, 0], first.log() + second.log()
    duplicates = _duplicates_of_a_complete_copy(got, load)
    print("%s: %d duplicates after a freeze past the session" % (
        "exactly once" if eos == "enabled" else "at least once", duplicates))
    if eos == "enabled":
        assert duplicates == 0
        assert count(read_to_end(clusters.b_bootstrap, "A.frozen", "read_committed")) == 20000


def test_sigterm_stops_cleanly_after_progress_and_metrics(clusters: Clusters, tmp_path: Path) -> None:
    clusters.a.create_topic("t", partitions=2)
    clusters.produce("t", [(i % 2, None, b"%d" % i) for i in range(100)])
    path = clusters.write_properties(tmp_path / "mm2.properties")
    mirror = MirrorProcess([str(path), "--metrics-listener", "http://127.0.0.1:0", "--progress-interval", "0.2"],
                           tmp_path / "mirror.log")
    try:
        assert mirror.wait_line(READY).group(1) == "A->B"
        url = mirror.wait_line(METRICS).group(1)
        read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 100)
        progress = wait_for(lambda: (lambda m: m if m and int(m.group(1)) >= 100 else None)(
            mirror.wait_line(PROGRESS)), "a progress line with the copies")
        assert progress.group(3) == "0" and progress.group(4) == "1"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        assert ('kafka_connect_mirror_mirrorsourceconnector_record_count{partition="0",source="A",target="B",'
                'topic="A.t"} 50.0') in text
    finally:
        status = mirror.stop()
    assert status == 0, mirror.log()
    assert mirror.lines[-1] == "pylogq mirror-maker stopped"
    assert "Traceback" not in mirror.log()
    with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
        [workers] = admin.describe_consumer_groups(["mm2-A->B-workers"])
        assert workers.state == "Empty"  # it left the group
        assert {tp: o.offset for tp, o in admin.list_consumer_group_offsets("mm2-A->B").items()
                if tp.topic == "A.t"} == {TopicPartition("A.t", 0): 50, TopicPartition("A.t", 1): 50}


def test_mirrormaker_1_flags(clusters: Clusters, tmp_path: Path) -> None:
    clusters.a.create_topic("orders-eu", partitions=2)
    clusters.a.create_topic("audit", partitions=1)
    clusters.produce("orders-eu", [(i % 2, b"k", b"%d" % i) for i in range(10)])
    clusters.produce("audit", [(0, None, b"no")])
    (tmp_path / "consumer.properties").write_text("bootstrap.servers=%s\nauto.offset.reset=earliest\n"
                                                  % clusters.a_bootstrap)
    (tmp_path / "producer.properties").write_text("bootstrap.servers=%s\nlinger.ms=1\n" % clusters.b_bootstrap)
    mirror = MirrorProcess(["--consumer.config", str(tmp_path / "consumer.properties"),
                            "--producer.config", str(tmp_path / "producer.properties"),
                            "--whitelist", "orders.*", "--num.streams", "2", "--progress-interval", "0"],
                           tmp_path / "mirror.log")
    try:
        assert mirror.wait_line(READY).group(1) == "source->target"
        got = read_topic(clusters.b_bootstrap, "orders-eu", lambda g: count(g) >= 10)  # the name kept
    finally:
        assert mirror.stop() == 0, mirror.log()
    assert sorted(int(r.value) for rs in got.values() for r in rs) == list(range(10))
    with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
        names = admin.list_topics()
    assert "audit" not in names and not [n for n in names if "checkpoints" in n or "heartbeats" in n]


def _run(*argv: str) -> tuple:
    out, err = io.StringIO(), io.StringIO()
    status = run(["mirror-maker", *argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def test_status_and_translate_offsets(clusters: Clusters, tmp_path: Path) -> None:
    clusters.a.create_topic("t", partitions=2)
    clusters.produce("t", [(i % 2, None, b"%d" % i) for i in range(40)])
    with AdminClient(bootstrap_servers=clusters.a_bootstrap) as admin:
        admin.alter_consumer_group_offsets("app", {TopicPartition("t", 0): 20, TopicPartition("t", 1): 20})
    path = clusters.write_properties(tmp_path / "mm2.properties", tasks_max=2)
    status, out, err = _run("status", "--config", str(path))
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["FLOW", "TOPIC", "PARTITION", "REMOTE-TOPIC", "TASK", "END-OFFSET", "POSITION", "LAG"]
    assert [line.split()[:4] + line.split()[5:] for line in lines[1:3]] == [
        ["A->B", "t", "0", "A.t", "20", "-", "20"], ["A->B", "t", "1", "A.t", "20", "-", "20"]]
    assert out.split("\n\n")[1].splitlines()[1].split() == ["A->B", "Dead", "-", "-", "-", "-"]
    status, _, err = _run("translate-offsets", "--config", str(path), "--source", "A", "--target", "B",
                          "--group", "app")
    assert status == 1 and err.startswith("Error: no checkpoints of group 'app' from A on B"), err
    with MirrorMaker(clusters.config(tasks_max=2)):
        read_topic(clusters.b_bootstrap, "A.t", lambda g: count(g) >= 40)

        def translated():
            found = _run("translate-offsets", "--config", str(path), "--source", "A", "--target", "B",
                         "--group", "app")
            # The first checkpoint may come before the sync of the partition's end: wait for the exact one.
            return found if found[0] == 0 and len(re.findall(r"A\.t +[01] +20$", found[1], re.M)) == 2 else None

        status, out, err = wait_for(translated, "the group's checkpoints")
        def positions():
            rows = [line.split() for line in _run("status", "--config", str(path))[1].splitlines()]
            return [row[-2:] for row in rows if row[1:2] == ["t"]] == [["20", "0"], ["20", "0"]]

        wait_for(positions, "the positions to be committed")
        status, text, err = _run("status", "--config", str(path))
    assert out.splitlines()[1].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    rows = [line.split() for line in out.splitlines()[2:]]
    assert rows == [["app", "A.t", "0", "20"], ["app", "A.t", "1", "20"]]
    workers = text.split("\n\n")[1].splitlines()
    assert workers[1].split()[:4] == ["A->B", "Stable", "0,1", "mm2-A->B-worker"]
    # --execute commits them to the group on the target.
    status, _, err = _run("translate-offsets", "--config", str(path), "--source", "A", "--target", "B",
                          "--group", "app", "--execute")
    assert status == 0, err
    with AdminClient(bootstrap_servers=clusters.b_bootstrap) as admin:
        assert admin.list_consumer_group_offsets("app") == {
            TopicPartition("A.t", 0): OffsetAndMetadata(20, "", -1), TopicPartition("A.t", 1): OffsetAndMetadata(20, "", -1)}


@pytest.mark.parametrize("argv, status, message", [
    ([], 2, "the properties file of the clusters and flows is required"),
    (["--consumer.config", "c.properties"], 2, "need --producer.config and --whitelist too"),
    (["CONFIG", "--whitelist", "x"], 2, "not both"),
    (["CONFIG", "--clusters", "C"], 1, "Error: --clusters names C, not among the clusters of the configuration"),
    (["missing.properties"], 1, "Error: cannot read the mirror maker configuration missing.properties"),
    (["status"], 2, "the following arguments are required: --config"),
])
def test_usage_and_configuration_errors(clusters: Clusters, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        argv: List[str], status: int, message: str, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    path = clusters.write_properties(tmp_path / "mm2.properties")
    argv = [str(path) if a == "CONFIG" else a for a in argv]
    try:
        code, _, err = _run(*argv)
    except SystemExit as exc:  # argparse's usage errors
        code, err = exc.code, capsys.readouterr().err
    assert code == status
    assert message in err, err


def test_an_internal_topic_the_target_refuses_fails_the_start(clusters: Clusters, tmp_path: Path) -> None:
    path = clusters.write_properties(tmp_path / "mm2.properties", **{"checkpoints.topic.replication.factor": "3"})
    status, out, err = _run(str(path), "--log-level", "ERROR")
    assert status == 1 and "ready" not in out
    assert re.search(r"^Error: .*A\.checkpoints\.internal on cluster B .*replication factor 3: "
                     r"checkpoints\.topic\.replication\.factor", err, re.M), err
