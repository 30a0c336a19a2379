"""The tools' stop requests (pylogq.cli._interrupts): never raised inside a client, always taken after it.

A KeyboardInterrupt raised inside ``threading.Condition.wait`` can land between the
wait letting go of its lock and the ``try`` that takes it back; the ``with`` around it
then fails with ``RuntimeError: cannot release un-acquired lock`` and the tool dies
with a traceback (seen once in the console consumer's SIGINT test). These tests raise
the signal from inside the client's own calls, where Python's handler would raise.
"""

from __future__ import annotations

import signal
from typing import Any, List

import pytest

from pylogq import Consumer, Producer, records
from pylogq.cli import _interrupts
from pylogq.client.consumer import TopicPartition
from pylogq.errors import KafkaTimeoutError


def test_a_signal_outside_a_deferred_block_raises_at_once() -> None:
    with _interrupts.stop_signals():
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGTERM)
            pytest.fail("the signal did not raise where it landed")


def test_a_signal_inside_a_deferred_block_raises_at_its_end() -> None:
    steps: List[str] = []
    with _interrupts.stop_signals():
        with pytest.raises(KeyboardInterrupt):
            with _interrupts.deferred():
                signal.raise_signal(signal.SIGTERM)
                steps.append("after the signal")
            steps.append("after the block")  # not reached
        _interrupts.check()  # taken once, not again
    assert steps == ["after the signal"]


def test_check_takes_a_request_made_in_the_block() -> None:
    with _interrupts.stop_signals():
        with _interrupts.deferred():
            _interrupts.check()  # nothing asked yet
            signal.raise_signal(signal.SIGTERM)
            with pytest.raises(KeyboardInterrupt):
                _interrupts.check()
            _interrupts.check()  # taken once


def test_sigint_is_taken_as_sigterm() -> None:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        with _interrupts.stop_signals():
            assert signal.getsignal(signal.SIGINT) is _interrupts._handler
            with pytest.raises(KeyboardInterrupt):
                with _interrupts.deferred():
                    signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_ignored_sigint_stays_ignored() -> None:
    """A tool started as a background job (SIGINT ignored) is not stopped by the terminal's Ctrl-C."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _interrupts.stop_signals():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_handlers_are_put_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with _interrupts.stop_signals():
        assert signal.getsignal(signal.SIGTERM) is _interrupts._handler
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_inside_a_consumer_poll_lets_the_poll_finish(pylogq_broker: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal lands as the poll starts to wait (where the traceback came from); the poll ends
    normally, the stop is taken after it, and the consumer goes on working and closes cleanly."""
    pylogq_broker.create_topic("t", 1)
    tp = TopicPartition("t", 0)
    consumer = Consumer(broker=pylogq_broker, enable_auto_commit=False)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    fetch = consumer._fetch
    signalled: List[int] = []

    def fetch_after_a_signal(max_wait_ms: int) -> None:
        if not signalled:
            signalled.append(max_wait_ms)
            signal.raise_signal(signal.SIGTERM)  # the handler runs here, inside the client
        fetch(max_wait_ms)

    monkeypatch.setattr(consumer, "_fetch", fetch_after_a_signal)
    polled: List[Any] = []
    try:
        with _interrupts.stop_signals():
            with pytest.raises(KeyboardInterrupt):
                with _interrupts.deferred():
                    polled.append(consumer.poll(timeout_ms=200))
        assert signalled and polled == [{}]
        pylogq_broker.produce("t", 0, records.build_batch([b"a"]))
        got = consumer.poll(timeout_ms=10_000)
        assert [r.value for r in got[tp]] == [b"a"]
    finally:
        consumer.close()


def test_a_signal_inside_a_send_lets_the_record_be_sent(pylogq_broker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pylogq_broker.create_topic("t", 1)
    producer = Producer(broker=pylogq_broker)
    send = producer.send

    def send_after_a_signal(*args: Any, **kwargs: Any) -> Any:
        signal.raise_signal(signal.SIGTERM)
        return send(*args, **kwargs)

    monkeypatch.setattr(producer, "send", send_after_a_signal)
    futures: List[Any] = []
    try:
        with _interrupts.stop_signals():
            with pytest.raises(KeyboardInterrupt):
                with _interrupts.deferred():
                    futures.append(producer.send("t", b"v"))
        assert futures[0].get(timeout=10).offset == 0
    finally:
        producer.close()


class _SlowProducer:
    """A producer whose records are never all acknowledged: each flush times out."""

    def __init__(self, signal_at: int) -> None:
        self.calls: List[float] = []
        self.signal_at = signal_at

    def flush(self, timeout: float) -> None:
        self.calls.append(timeout)
        if len(self.calls) == self.signal_at:
            signal.raise_signal(signal.SIGTERM)
        raise KafkaTimeoutError("flush timed out")


def test_a_stoppable_flush_waits_in_slices_until_a_stop() -> None:
    producer = _SlowProducer(signal_at=3)
    with _interrupts.stop_signals():
        with pytest.raises(KeyboardInterrupt):
            _interrupts.flush(producer)
    assert producer.calls == [_interrupts.SLICE_S] * 3


def test_a_stoppable_flush_returns_when_done() -> None:
    class Done:
        def flush(self, timeout: float) -> None:
            pass

    with _interrupts.stop_signals():
        _interrupts.flush(Done())
