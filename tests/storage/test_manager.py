"""The log manager: log dirs, locks, checkpoints, the clean-shutdown marker, placement, deletion."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from pylogq import records
from pylogq.errors import LogDirInUseError
from pylogq.storage.checkpoint import OffsetCheckpoint
from pylogq.config import LogConfig
from pylogq.storage.config import LogManagerConfig
from pylogq.storage.manager import LogManager

TS = 1_700_000_000_000


def batch(n=5):
    return bytes(records.build_batch([b"value-%d" % i for i in range(n)], timestamps=TS))


def manager(*dirs, **config):
    return LogManager(config=LogManagerConfig(log_dirs=[str(d) for d in dirs], **config), background=False)


def test_new_partitions_go_to_the_dir_with_the_fewest(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    with manager(a, b) as m:
        for p in range(6):
            m.get_or_create_log("t", p)
        assert sorted(os.listdir(a)).count("t-0") == 1
        counts = [len([n for n in os.listdir(d) if n.startswith("t-")]) for d in (a, b)]
        assert counts == [3, 3]
        assert m.get_or_create_log("t", 0) is m.get_log("t", 0)


def test_checkpoints_and_clean_shutdown_marker(tmp_path):
    with manager(tmp_path) as m:
        lg = m.get_or_create_log("events", 2)
        lg.append(batch(7))
        assert not (tmp_path / ".kafka_cleanshutdown").exists()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert OffsetCheckpoint(str(tmp_path / "recovery-point-offset-checkpoint")).read() == {("events", 2): 7}
    assert OffsetCheckpoint(str(tmp_path / "log-start-offset-checkpoint")).read() == {("events", 2): 0}
    with manager(tmp_path) as m:
        lg = m.get_log("events", 2)
        assert lg is not None and lg.log_end_offset == 7 and lg.recovered_bytes == 0
        assert not (tmp_path / ".kafka_cleanshutdown").exists()  # a crash from here must not look clean


def test_a_dir_is_locked_while_in_use(tmp_path):
    with manager(tmp_path):
        with pytest.raises(LogDirInUseError, match="in use"):
            manager(tmp_path)
    with manager(tmp_path):
        pass


def test_after_a_crash_logs_recover_from_their_checkpointed_recovery_point(tmp_path):
    child = textwrap.dedent(
        """
        import os, sys
        from pylogq import records
        from pylogq.storage.config import LogManagerConfig
        from pylogq.storage.manager import LogManager
        m = LogManager(config=LogManagerConfig(log_dirs=[sys.argv[1]]), background=False)
        lg = m.get_or_create_log("t", 0)
        for i in range(4):
            lg.append(bytes(records.build_batch([b"x%d" % i] * 3, timestamps=0)))
        lg.flush()
        m.checkpoint()
        lg.append(bytes(records.build_batch([b"late"] * 3, timestamps=0)))
        os._exit(0)  # no close: no clean-shutdown marker, no final checkpoint
        """
    )
    subprocess.run([sys.executable, "-c", child, str(tmp_path)], check=True, timeout=60)
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    assert OffsetCheckpoint(str(tmp_path / "recovery-point-offset-checkpoint")).read() == {("t", 0): 12}
    log_file = tmp_path / "t-0" / ("%020d.log" % 0)
    with open(log_file, "ab") as f:
        f.write(b"\x00" * 40)  # a torn tail past the recovery point
    with manager(tmp_path) as m:
        lg = m.get_log("t", 0)
        assert lg.recovered_bytes == 40
        assert lg.log_end_offset == 15


def test_existing_partitions_are_loaded_and_stray_dirs_ignored(tmp_path):
    with manager(tmp_path) as m:
        m.get_or_create_log("a", 0).append(batch())
        m.get_or_create_log("b.c", 3).append(batch())
    (tmp_path / "not a partition").mkdir()
    (tmp_path / "old-1.0123abcd-delete").mkdir()
    with manager(tmp_path) as m:
        assert sorted((lg.topic, lg.partition) for lg in m.all_logs()) == [("a", 0), ("b.c", 3)]
    assert not (tmp_path / "old-1.0123abcd-delete").exists()


def test_delete_log(tmp_path):
    with manager(tmp_path) as m:
        m.get_or_create_log("gone", 0).append(batch())
        m.get_or_create_log("kept", 0).append(batch())
        assert m.delete_log("gone", 0)
        assert m.get_log("gone", 0) is None
        assert not m.delete_log("gone", 0)
        assert not (tmp_path / "gone-0").exists()
    assert not any("gone" in n for n in os.listdir(tmp_path))
    assert OffsetCheckpoint(str(tmp_path / "recovery-point-offset-checkpoint")).read() == {("kept", 0): 5}


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd to name synced files")
def test_deleting_a_log_does_not_fsync_its_data(tmp_path, monkeypatch):
    with manager(tmp_path) as m:
        m.get_or_create_log("gone", 0).append(batch())
        synced = []
        real_fsync = os.fsync

        def fsync(fd):
            synced.append(os.readlink("/proc/self/fd/%d" % fd))
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        assert m.delete_log("gone", 0)
        # The checkpoint files are still written safely; the doomed log's files are not synced.
        assert synced and not [path for path in synced if "gone-0" in path]


def test_topic_configs_and_broker_defaults(tmp_path):
    configs = {"compacted": LogConfig(cleanup_policy="compact", segment_bytes=5000)}
    m = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path)], log_segment_bytes=7000),
                   topic_config=configs.get, background=False)
    with m:
        assert m.get_or_create_log("compacted", 0).config.segment_bytes == 5000
        assert m.get_or_create_log("plain", 0).config.segment_bytes == 7000
        assert m.get_or_create_log("plain", 1, LogConfig(segment_bytes=9000)).config.segment_bytes == 9000


def test_a_log_loaded_from_disk_takes_the_config_it_is_opened_with(tmp_path):
    cfg = LogConfig(segment_bytes=9000, flush_messages=1)
    with manager(tmp_path) as m:
        m.get_or_create_log("t", 0, cfg).append(batch())
    # Loaded on demand (load_all=False): get_or_create_log's config, not the defaults.
    m = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path)]), load_all=False, background=False)
    with m:
        lg = m.get_or_create_log("t", 0, cfg)
        assert lg.log_end_offset == 5 and lg.config is cfg
    # Loaded at start: the topic's config.
    m = LogManager(config=LogManagerConfig(log_dirs=[str(tmp_path)]), topic_config={"t": cfg}.get,
                   background=False)
    with m:
        lg = m.get_log("t", 0)
        assert lg is not None and lg.config is cfg
        assert m.get_or_create_log("t", 0, cfg) is lg


def test_retention_pass_over_every_log(tmp_path):
    with manager(tmp_path, log_retention_bytes=2000, log_segment_bytes=1000,
                 log_segment_delete_delay_ms=0) as m:
        lg = m.get_or_create_log("t", 0)
        for _ in range(30):
            lg.append(batch(5))
        segments = lg.num_segments
        assert m.cleanup_logs() > 0
        assert lg.num_segments < segments
        assert lg.log_start_offset == lg.segments[0].base_offset > 0


def test_bad_topic_names_are_rejected(tmp_path):
    with manager(tmp_path) as m:
        with pytest.raises(ValueError, match="<topic>-<partition>"):
            m.get_or_create_log("bad name", 0)
