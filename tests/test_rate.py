"""The rate meters the quotas measure with (pylogq/rate.py): Kafka's ``Rate`` and
``SimpleRate`` windows, its throttle time and ``TokenBucket``, on a clock the test moves."""

from __future__ import annotations

import pytest

from pylogq.errors import InvalidArgumentError
from pylogq.rate import Rate, SimpleRate, TokenBucket, throttle_time_ms

MB = 1 << 20


def test_a_new_rate_is_measured_over_the_window_less_one_sample() -> None:
    rate = Rate(samples=11, window_s=1.0)
    assert rate.measure(100.0) == 0 and rate.window_size(100.0) == pytest.approx(10.0)
    rate.record(10 * MB, 100.0)
    # One burst is spread over ten whole windows, not measured as 10 MB in no time.
    assert rate.measure(100.0) == pytest.approx(MB)
    # 2.5 s later: two whole windows elapsed, and eight are added: 10.5 s, as Kafka counts.
    assert rate.window_size(102.5) == pytest.approx(10.5)
    assert rate.measure(102.5) == pytest.approx(10 * MB / 10.5)


def test_a_simple_rate_counts_a_burst_over_one_window() -> None:
    simple, rate = SimpleRate(samples=11, window_s=1.0), Rate(samples=11, window_s=1.0)
    for meter in (simple, rate):
        meter.record(10 * MB, 100.0)
    # The burst counts whole over one window, where a Rate spreads it over ten or more.
    assert simple.measure(100.0) == pytest.approx(10 * MB)
    assert simple.measure(100.5) == pytest.approx(10 * MB)
    assert rate.measure(100.5) == pytest.approx(10 * MB / 10.5)
    # Past one window, both measure since the oldest sample started; a Rate still adds the
    # whole windows missing from ten.
    assert simple.window_size(104.0) == pytest.approx(4.0)
    assert rate.window_size(104.0) == pytest.approx(10.0)
    assert simple.measure(110.5) == pytest.approx(10 * MB / 10.5)
    # The samples expire as a Rate's do.
    assert simple.measure(111.0) == 0 and simple.window_size(111.0) == pytest.approx(1.0)


def test_samples_start_when_a_window_has_passed_and_expire_after_the_window() -> None:
    rate = Rate(samples=3, window_s=1.0)
    for t in (100.0, 100.5, 101.0, 102.2):
        rate.record(1, t)
    # 100 and 100.5 share a sample; 101 starts the second; 102.2 the third.
    assert [s[2] for s in rate.samples_kept(102.2)] == [2, 1, 1]
    # A sample counts until its last record is three windows old (Kafka's purge).
    assert [s[2] for s in rate.samples_kept(103.4)] == [2, 1, 1]
    assert [s[2] for s in rate.samples_kept(103.5)] == [1, 1]
    assert rate.total(110.0) == 0 and rate.measure(110.0) == 0
    # At most samples + 1 are kept, however they were recorded.
    for t in range(200, 210):
        rate.record(1, float(t))
    assert len(rate.samples_kept(209.0)) == 3


def test_one_sample_measures_as_kafkas_rate_does() -> None:
    rate = Rate(samples=1, window_s=1.0)  # quota.window.num=1 is a legal config
    rate.record(100, 10.0)
    # No whole window is added (Kafka's windowSize: samples - 1 of them): the rate is over the
    # time since its sample started, at least 1 ms.
    assert rate.window_size(10.0) == pytest.approx(0.001)
    assert rate.window_size(10.5) == pytest.approx(0.5) and rate.measure(10.5) == pytest.approx(200)
    rate.record(100, 10.9)  # the same sample: its window has not passed
    # A sample no longer counts one window after its last record.
    assert rate.total(11.8) == 200 and rate.total(11.9) == 0
    with pytest.raises(InvalidArgumentError, match="at least 1"):
        Rate(samples=0)


def test_a_negative_record_takes_back_what_was_recorded() -> None:
    rate = Rate(samples=11, window_s=1.0)
    rate.record(5000, 10.0)
    rate.record(-5000, 10.2)
    assert rate.total(10.2) == 0


def test_the_throttle_time_brings_the_rate_back_to_the_bound() -> None:
    rate = Rate(samples=11, window_s=1.0)
    rate.record(20 * MB, 50.0)  # 2 MB/s over the 10 s window
    assert throttle_time_ms(rate, 4 * MB, 50.0) == 0
    # At 1 MB/s: (2 - 1) / 1 * 10 s = 10 s, after which 20 MB over 20 s is 1 MB/s.
    assert throttle_time_ms(rate, MB, 50.0) == 10000
    assert rate.total(60.0) / (rate.window_size(50.0) + 10.0) == pytest.approx(MB)
    assert throttle_time_ms(rate, 0, 50.0) == 10000  # a zero quota: the whole window


def test_the_token_bucket_starts_full_refills_and_owes() -> None:
    bucket = TokenBucket(rate=2.0, samples=11, window_s=1.0)
    assert bucket.tokens(0.0) == pytest.approx(22.0)  # burst: samples * window * rate
    bucket.take(30, 0.0)
    assert bucket.tokens(0.0) == pytest.approx(-8.0)
    assert bucket.throttle_time_ms(0.0) == 4000  # 8 tokens at 2 a second
    assert bucket.tokens(3.0) == pytest.approx(-2.0)
    assert bucket.throttle_time_ms(4.0) == 0
    assert bucket.tokens(100.0) == pytest.approx(22.0)  # never past the burst
