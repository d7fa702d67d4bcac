"""Deadlines and alarms: callbacks due later (a fixed delay after they were added, or at a time each), on one loop
timer for all of them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from agentrunner_host.deadlines import Alarms, Deadlines, TaskTimeout, alarms, deadlines


class FakeTimer:
    """A handle of a fake loop's timer."""

    def __init__(self, loop: FakeLoop, timer: tuple[float, Callable[[], None]]) -> None:
        self.loop = loop
        self.timer = timer

    def cancel(self) -> None:
        if self.timer in self.loop.timers:
            self.loop.timers.remove(self.timer)


class FakeLoop:
    """A loop's clock and timers, advanced by the test."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.errors: list[dict[str, object]] = []

    def time(self) -> float:
        return self.now

    def call_exception_handler(self, context: dict[str, object]) -> None:
        self.errors.append(context)

    def call_at(self, when: float, callback: Callable[[], None]) -> FakeTimer:
        timer = (when, callback)
        self.timers.append(timer)
        return FakeTimer(self, timer)

    def run_timers(self, until: float) -> None:
        self.now = until
        while due := [t for t in self.timers if t[0] <= until]:
            self.timers.remove(due[0])
            due[0][1]()


def test_one_timer_serves_every_entry_in_the_order_they_fall_due() -> None:
    """Entries added later share the armed timer; when it fires, the due ones run and it is armed again for the
    oldest left; a withdrawn entry never runs."""
    loop = FakeLoop()
    due = Deadlines(cast(asyncio.AbstractEventLoop, loop), 1.0)
    ran: list[str] = []
    due.add("a", lambda: ran.append("a"))
    loop.now = 0.5
    due.add("b", lambda: ran.append("b"))
    due.add("c", lambda: ran.append("c"))
    due.discard("b")
    assert [when for when, _ in loop.timers] == [1.0]
    loop.run_timers(1.0)
    assert ran == ["a"] and [when for when, _ in loop.timers] == [1.5]
    loop.run_timers(1.5)
    assert ran == ["a", "c"] and not loop.timers and len(due) == 0
    due.add("d", lambda: ran.append("d"))  # none pending: a timer again
    assert [when for when, _ in loop.timers] == [2.5]


async def test_the_running_loops_deadlines_run_their_callbacks() -> None:
    """On a real loop, an entry runs after the delay unless it was withdrawn."""
    due = deadlines(0.01)
    assert deadlines(0.01) is due
    done = asyncio.Event()
    ran: list[str] = []
    due.add("gone", lambda: ran.append("gone"))
    due.discard("gone")
    due.add("kept", done.set)
    await asyncio.wait_for(done.wait(), timeout=30)
    assert ran == [] and len(due) == 0


def test_alarms_share_one_timer_armed_for_the_earliest() -> None:
    """Alarms run at their own times, earliest first, on one loop timer armed for the earliest pending one (an
    earlier alarm re-arms it); a cancelled alarm never runs and its entry is dropped when it reaches the top."""
    loop = FakeLoop()
    due = Alarms(cast(asyncio.AbstractEventLoop, loop))
    ran: list[str] = []
    due.call_at(5.0, lambda: ran.append("late"))
    gone = due.call_at(3.0, lambda: ran.append("gone"))
    due.call_at(2.0, lambda: ran.append("early"))
    due.call_at(2.0, lambda: ran.append("early, added second"))
    assert [when for when, _ in loop.timers] == [2.0] and len(due) == 4
    gone.cancel()
    gone.cancel()  # idempotent
    assert len(due) == 3
    loop.run_timers(2.0)
    assert ran == ["early", "early, added second"]
    # the cancelled alarm at 3.0 is skipped: the timer waits for the next live one
    assert [when for when, _ in loop.timers] == [5.0] and len(due) == 1
    loop.run_timers(10.0)
    assert ran == ["early", "early, added second", "late"] and not loop.timers and len(due) == 0


def test_an_alarm_cancelled_by_one_due_with_it_does_not_run() -> None:
    """Alarms due together run in order; one that an earlier one cancels does not run, and one an alarm adds
    for later gets the timer."""
    loop = FakeLoop()
    due = Alarms(cast(asyncio.AbstractEventLoop, loop))
    ran: list[str] = []
    second = due.call_at(1.0, lambda: ran.append("second"))

    def first() -> None:
        ran.append("first")
        second.cancel()
        due.call_at(4.0, lambda: ran.append("added"))

    due.call_at(0.5, first)
    loop.run_timers(1.0)
    assert ran == ["first"] and [when for when, _ in loop.timers] == [4.0] and len(due) == 1
    loop.run_timers(4.0)
    assert ran == ["first", "added"] and len(due) == 0


def test_an_alarm_that_raises_is_reported_and_the_others_still_run() -> None:
    """As with the loop's own timers: a callback's error goes to the loop's exception handler, the alarms due
    with it still run and the timer is armed for the next."""
    loop = FakeLoop()
    due = Alarms(cast(asyncio.AbstractEventLoop, loop))
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("boom")

    due.call_at(1.0, broken)
    due.call_at(1.0, lambda: ran.append("after"))
    due.call_at(2.0, lambda: ran.append("later"))
    loop.run_timers(1.0)
    assert ran == ["after"] and [when for when, _ in loop.timers] == [2.0]
    assert len(loop.errors) == 1 and isinstance(loop.errors[0]["exception"], RuntimeError)


def test_cancelled_alarms_do_not_pile_up() -> None:
    """Alarms cancelled long before they are due (a run's deadline, nearly always) leave the heap once they are
    most of it: memory follows the pending alarms, not every alarm ever added."""
    loop = FakeLoop()
    due = Alarms(cast(asyncio.AbstractEventLoop, loop))
    keep = due.call_at(1_000.0, lambda: None)
    for i in range(10_000):
        due.call_at(2_000.0 + i, lambda: None).cancel()
    assert len(due) == 1
    assert len(due._heap) < 200
    keep.cancel()


async def test_the_running_loops_alarms_run_their_callbacks() -> None:
    """On a real loop, an alarm runs at its time unless it was cancelled."""
    due = alarms()
    assert alarms() is due
    done = asyncio.Event()
    ran: list[str] = []
    loop = asyncio.get_running_loop()
    due.call_at(loop.time() + 0.01, lambda: ran.append("gone")).cancel()
    due.call_at(loop.time() + 0.02, done.set)
    await asyncio.wait_for(done.wait(), timeout=30)
    assert ran == [] and len(due) == 0


async def test_a_task_timeout_cancels_its_task_and_says_so_once() -> None:
    """Due, it cancels the task and withdraw() owns that cancellation (taken back, once); withdrawn first, it
    never fires; a cancellation of someone else's on top of it is not taken for the timeout's."""
    stuck = asyncio.get_running_loop().create_future()

    async def step(delay: float) -> str:
        limit = TaskTimeout(delay)
        try:
            await stuck
        except asyncio.CancelledError:
            if limit.withdraw():
                assert not limit.withdraw()  # once
                return "timed out"
            raise
        finally:
            limit.withdraw()
        return "done"

    assert await asyncio.create_task(step(0.01)) == "timed out"

    async def quick() -> bool:
        limit = TaskTimeout(0.01)
        withdrawn = limit.withdraw()
        later = asyncio.Event()
        deadlines(0.01).add("later", later.set)  # due after the withdrawn one would have been
        await later.wait()
        return withdrawn

    assert await asyncio.create_task(quick()) is False  # not cancelled by the withdrawn timeout

    task = asyncio.create_task(step(30.0))
    await asyncio.sleep(0)  # let it start waiting
    task.cancel()  # someone else's cancellation, the timeout not due
    await asyncio.wait([task])
    assert task.cancelled()
