"""``pylogq demo``: the README's run command, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

from pylogq import records


def test_demo_writes_and_reads_back_every_format(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pylogq", "demo", str(tmp_path)], capture_output=True, text=True,
                         check=True, timeout=120)
    log = tmp_path / "00000000000000000000.log"
    data = log.read_bytes()
    assert "valid prefix %d of %d bytes" % (len(data), len(data)) in out.stdout
    assert "columnar: 5200 records, offsets 0..5199" in out.stdout
    for word in ("none", "gzip", "snappy", "lz4", "zstd", "legacy v0", "legacy v1"):
        assert word in out.stdout
    cols = records.decode_columns(data)
    assert cols.offsets.tolist() == list(range(5200))
    assert os.path.getsize(log) == len(data)


def test_unknown_command_is_a_usage_error():
    out = subprocess.run([sys.executable, "-m", "pylogq", "bogus"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "invalid choice" in out.stderr
