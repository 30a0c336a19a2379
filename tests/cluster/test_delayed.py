"""Delayed operations: complete once, by their condition, their deadline, or force."""

from __future__ import annotations

import threading
import time
from typing import Iterator, List, Optional

import pytest

from pylogq.cluster.delayed import DelayedCall, DelayedOperation, DelayedOperationPurgatory, Timer


@pytest.fixture
def timer() -> Iterator[Timer]:
    t = Timer("test-timer")
    yield t
    t.close()


@pytest.fixture
def purgatory(timer: Timer) -> DelayedOperationPurgatory:
    return DelayedOperationPurgatory("test", timer)


class Box:
    """A value the conditions below look at, changed by the test."""

    def __init__(self) -> None:
        self.value: Optional[str] = None


def call(box: Box, answers: List[str], deadline_s: Optional[float] = 60.0) -> "DelayedCall[str]":
    deadline = None if deadline_s is None else time.monotonic() + deadline_s
    return DelayedCall(deadline, lambda: box.value, lambda: "expired", answers.append)


def test_completes_at_once_when_its_condition_holds(purgatory: DelayedOperationPurgatory) -> None:
    box, answers = Box(), []
    box.value = "ready"
    op = call(box, answers)
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert answers == ["ready"] and op.answer() == "ready" and not op.expired
    assert purgatory.watched() == 0


def test_watched_operation_completes_when_its_key_is_checked(purgatory: DelayedOperationPurgatory) -> None:
    box, answers = Box(), []
    op = call(box, answers)
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is False
    assert purgatory.watched() == 1
    assert purgatory.check_and_complete("a") == 0  # checked, condition not yet true
    box.value = "data"
    assert purgatory.check_and_complete("other") == 0
    assert answers == []
    assert purgatory.check_and_complete("b") == 1
    assert answers == ["data"]
    assert purgatory.check_and_complete("a") == 0  # completed ones are not completed twice
    assert answers == ["data"]
    assert purgatory.watched() == 0


def test_a_change_between_the_first_check_and_the_watch_is_not_missed(purgatory: DelayedOperationPurgatory) -> None:
    checks: List[int] = []

    def check() -> Optional[str]:
        checks.append(1)
        # The event lands right after the first look, before the operation is watched:
        # nobody will call check_and_complete for it again.
        return None if len(checks) == 1 else "late"

    answers: List[str] = []
    op = DelayedCall(time.monotonic() + 60, check, lambda: "expired", answers.append)
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert answers == ["late"]


def test_the_deadline_answers_with_the_expiry_answer(purgatory: DelayedOperationPurgatory) -> None:
    box, answers = Box(), []
    expired = threading.Event()

    class Op(DelayedCall[str]):
        def on_expiration(self) -> None:
            expired.set()

    op = Op(time.monotonic() + 0.05, lambda: box.value, lambda: "expired", answers.append)
    assert purgatory.try_complete_else_watch(op, ["k"]) is False
    assert op.wait(10.0)
    assert expired.wait(10.0)
    assert answers == ["expired"] and op.expired
    box.value = "too late"
    assert purgatory.check_and_complete("k") == 0
    assert answers == ["expired"]


def test_completion_before_the_deadline_is_never_followed_by_expiry(timer: Timer,
                                                                      purgatory: DelayedOperationPurgatory) -> None:
    box, answers = Box(), []
    op = call(box, answers, deadline_s=0.05)
    purgatory.try_complete_else_watch(op, ["k"])
    box.value = "in time"
    assert purgatory.check_and_complete("k") == 1
    # A later operation's expiry proves the timer went past the first deadline.
    later: List[str] = []
    second = call(Box(), later, deadline_s=0.1)
    purgatory.try_complete_else_watch(second, ["k"])
    assert second.wait(10.0)
    assert answers == ["in time"] and not op.expired and later == ["expired"]


def test_exactly_once_when_many_threads_race_to_complete(purgatory: DelayedOperationPurgatory) -> None:
    for _ in range(50):
        box, answers = Box(), []
        op = call(box, answers)
        purgatory.try_complete_else_watch(op, ["k"])
        box.value = "v"
        start = threading.Barrier(8)

        def race(i: int) -> None:
            start.wait()
            if i % 2:
                purgatory.check_and_complete("k")
            else:
                op.force_complete()

        threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(answers) == 1


def test_an_operation_without_deadline_waits_until_completed(purgatory: DelayedOperationPurgatory) -> None:
    box, answers = Box(), []
    op = call(box, answers, deadline_s=None)
    purgatory.try_complete_else_watch(op, ["k"])
    assert not op.wait(0.01)
    box.value = "v"
    purgatory.check_and_complete("k")
    assert op.wait(0) and answers == ["v"]


def test_close_completes_every_waiting_operation(purgatory: DelayedOperationPurgatory) -> None:
    answers: List[str] = []
    ops = [call(Box(), answers) for _ in range(5)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, ["k%d" % (i % 2)])
    purgatory.close()
    assert answers == ["expired"] * 5 and all(op.completed for op in ops)
    late = call(Box(), answers)
    assert purgatory.try_complete_else_watch(late, ["k0"]) is True  # closed: answered at once
    assert answers[-1] == "expired"


def test_complete_with_gives_the_answer_once(purgatory: DelayedOperationPurgatory) -> None:
    box, answers = Box(), []
    op = call(box, answers)
    purgatory.try_complete_else_watch(op, ["k"])
    assert op.complete_with("shutdown") is True
    assert op.complete_with("again") is False
    box.value = "v"
    purgatory.check_and_complete("k")
    assert answers == ["shutdown"]


def test_completed_operations_leave_the_watch_lists(purgatory: DelayedOperationPurgatory) -> None:
    answers: List[str] = []
    ops = [call(Box(), answers) for _ in range(100)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["a", "b"])
    for op in ops[:90]:
        op.force_complete()
    assert purgatory.watched() == 10
    purgatory.purge()
    assert purgatory.watched() == 10
    assert len(purgatory._watchers["a"]) == 10  # the completed ones are gone from every key


def test_timer_expires_in_deadline_order(timer: Timer) -> None:
    order: List[int] = []
    done = threading.Event()

    class Op(DelayedOperation):
        def __init__(self, n: int, deadline: float) -> None:
            super().__init__(deadline)
            self.n = n

        def try_complete(self) -> bool:
            return False

        def on_complete(self) -> None:
            order.append(self.n)
            if len(order) == 3:
                done.set()

    now = time.monotonic()
    for n, delay in ((3, 0.09), (1, 0.03), (2, 0.06)):
        timer.add(Op(n, now + delay))
    assert done.wait(10.0)
    assert order == [1, 2, 3]


class Delivery:
    """A deliver callback that is also told when the operation could not make its answer."""

    def __init__(self) -> None:
        self.answers: List[str] = []
        self.failures: List[BaseException] = []
        self.done = threading.Event()

    def __call__(self, answer: str) -> None:
        self.answers.append(answer)
        self.done.set()

    def fail(self, exc: BaseException) -> None:
        self.failures.append(exc)
        self.done.set()


def _broken() -> str:
    raise ZeroDivisionError("a bug while making the answer")


def test_an_answer_that_raises_at_the_deadline_is_delivered_as_a_failure(
        purgatory: DelayedOperationPurgatory, caplog: pytest.LogCaptureFixture) -> None:
    delivery = Delivery()
    op = DelayedCall(time.monotonic() + 0.05, lambda: None, _broken, delivery)
    assert purgatory.try_complete_else_watch(op, ["k"]) is False
    assert delivery.done.wait(10.0) and op.wait(10.0)
    assert delivery.answers == [] and [type(e) for e in delivery.failures] == [ZeroDivisionError]
    assert op.completed and isinstance(op.error, ZeroDivisionError)
    with pytest.raises(ZeroDivisionError):
        op.answer()
    # The timer logged it and goes on expiring the others.
    box, answers = Box(), []
    other = call(box, answers, deadline_s=0.05)
    assert purgatory.try_complete_else_watch(other, ["k"]) is False
    assert other.wait(10.0) and answers == ["expired"]
    assert any("failed at its deadline" in r.getMessage() for r in caplog.records)


def test_a_condition_that_raises_completes_the_operation_with_its_error(
        purgatory: DelayedOperationPurgatory, caplog: pytest.LogCaptureFixture) -> None:
    box = Box()
    delivery = Delivery()
    healthy: List[str] = []

    def check() -> Optional[str]:
        if box.value is not None:
            raise ZeroDivisionError("a bug in the condition")
        return None

    op = DelayedCall(time.monotonic() + 60, check, lambda: "expired", delivery)
    fine = call(box, healthy)
    assert purgatory.try_complete_else_watch(op, ["k"]) is False
    assert purgatory.try_complete_else_watch(fine, ["k"]) is False
    box.value = "data"
    # The appender's check completes the healthy operation whatever the broken one does.
    assert purgatory.check_and_complete("k") == 1
    assert healthy == ["data"]
    assert op.completed and op.wait(0) and [type(e) for e in delivery.failures] == [ZeroDivisionError]
    assert delivery.answers == [] and purgatory.watched() == 0
    # Checked once more, it neither raises again nor answers twice.
    assert purgatory.check_and_complete("k") == 0
    assert len(delivery.failures) == 1
    assert sum("failed" in r.getMessage() for r in caplog.records) == 1
