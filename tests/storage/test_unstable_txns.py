"""The transactions that keep offsets unstable: opened, decided, completed, replicated, truncated."""

from __future__ import annotations

import pytest

from pylogq.errors import IllegalStateError
from pylogq.storage.transaction_index import CompletedTxn
from pylogq.storage.unstable_txns import UnstableTxns


def test_first_unstable_offset_follows_ongoing_then_unreplicated_transactions():
    txns = UnstableTxns()
    assert not txns and txns.first_unstable_offset is None and txns.first_undecided_offset is None
    assert txns.begin(1, 10) and txns.begin(2, 12)
    assert not txns.begin(1, 11)  # its transaction is open: a later batch opens nothing
    assert txns.ongoing() == [(1, 10), (2, 12)] and txns.first_offset_of(1) == 10
    assert txns.first_unstable_offset == txns.first_undecided_offset == 10
    done = txns.end(1, 15, aborted=True)
    assert done == CompletedTxn(1, 10, 15, True)
    # Decided, not yet indexed: still ongoing, no longer open; other producers' count for its LSO.
    assert txns.first_offset_of(1) is None and txns.ongoing() == [(1, 10), (2, 12)]
    assert txns.last_stable_offset(done) == 12
    txns.complete(done)
    assert txns.ongoing() == [(2, 12)] and txns.unreplicated() == [done]
    assert txns.first_unstable_offset == 10 and txns.first_undecided_offset == 12  # until the HW passes 15
    txns.on_high_watermark(15)
    assert txns.first_unstable_offset == 10
    txns.on_high_watermark(16)
    assert txns.unreplicated() == [] and txns.first_unstable_offset == 12
    last = txns.end(2, 20, aborted=False)
    assert txns.last_stable_offset(last) == 21  # nothing else ongoing: one past its marker
    txns.complete(last, high_watermark=21)  # already below the high watermark: stable at once
    assert not txns and txns.first_unstable_offset is None


def test_a_marker_without_an_open_transaction_ends_nothing():
    txns = UnstableTxns()
    assert txns.end(7, 3, aborted=True) is None
    with pytest.raises(IllegalStateError, match="never started"):
        txns.complete(CompletedTxn(7, 0, 3, True))


def test_an_unreplicated_transaction_older_than_the_ongoing_one_is_the_first_unstable():
    txns = UnstableTxns()
    txns.begin(1, 0)
    txns.begin(2, 5)
    txns.complete(txns.end(1, 8, aborted=False))
    assert txns.first_unstable_offset == 0 and txns.first_undecided_offset == 5


def test_truncation_removes_what_started_there_and_reopens_what_ended_there():
    txns = UnstableTxns()
    txns.begin(1, 0)
    txns.begin(2, 3)
    txns.complete(txns.end(1, 6, aborted=True))  # unreplicated, marker at 6
    txns.begin(3, 7)
    txns.truncate_to(7)
    assert txns.ongoing() == [(2, 3)] and len(txns.unreplicated()) == 1
    txns.truncate_to(5)  # p1's marker went: its transaction is open again, the oldest
    assert txns.ongoing() == [(1, 0), (2, 3)] and txns.unreplicated() == []
    assert txns.first_offset_of(1) == 0 and txns.first_unstable_offset == 0
    txns.truncate_to(0)
    assert not txns and txns.ongoing() == []
