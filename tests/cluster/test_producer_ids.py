"""pylogq-producer-ids: blocks reserved before use, and a damaged file refused rather than guessed."""

from __future__ import annotations

import pytest

from pylogq.cluster.state.producer_ids import PRODUCER_IDS_FILE, ProducerIdManager
from pylogq.errors import CorruptMetadataError


def test_ids_continue_past_the_reserved_block_after_a_restart(tmp_path):
    first = ProducerIdManager(str(tmp_path), block_size=10)
    assert [first.next_id() for _ in range(3)] == [(0, 0), (1, 0), (2, 0)]
    assert (tmp_path / PRODUCER_IDS_FILE).read_text() == "10\n"
    assert ProducerIdManager(str(tmp_path), block_size=10).next_id() == (10, 0)


@pytest.mark.parametrize("content", [b"", b"\x00\xff", b"abc\n", b"-5\n", b"12 13\n", b"1e9\n", b"%d\n" % 2**63])
def test_a_damaged_file_is_refused_naming_it_and_the_way_out(tmp_path, content):
    (tmp_path / PRODUCER_IDS_FILE).write_bytes(content)
    with pytest.raises(CorruptMetadataError) as raised:
        ProducerIdManager(str(tmp_path))
    message = str(raised.value)
    assert message.startswith("cannot read %s: " % (tmp_path / PRODUCER_IDS_FILE)) and "\n" not in message
    assert "write into it a number above every producer id" in message
