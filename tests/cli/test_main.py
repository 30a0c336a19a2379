"""``pylogq demo``: the README's run command, as a user runs it."""

from __future__ import annotations

import subprocess
import sys

from pylogq import records
from pylogq.storage.log import Log


def test_demo_writes_a_log_and_reads_it_back(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pylogq", "demo", str(tmp_path)], capture_output=True, text=True,
                         check=True, timeout=120)
    assert "offsets 0..5199 in 2 segments" in out.stdout
    assert "reopened with 0 bytes recovered" in out.stdout
    for word in ("none", "gzip", "snappy", "lz4", "zstd", "legacy v0", "legacy v1"):
        assert word in out.stdout
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    with Log.open(str(tmp_path / "demo-0")) as log:
        assert (log.log_start_offset, log.log_end_offset, log.recovered_bytes) == (0, 5200, 0)
        cols = records.decode_columns(log.read(0, 1 << 30).read())
        assert cols.offsets.tolist() == list(range(len(cols)))


def test_unknown_command_is_a_usage_error():
    out = subprocess.run([sys.executable, "-m", "pylogq", "bogus"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "invalid choice" in out.stderr
