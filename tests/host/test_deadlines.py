"""Deadlines: callbacks due a fixed delay after they were added, on one loop timer for all of them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from agentrunner_host.deadlines import Deadlines, deadlines


class FakeLoop:
    """A loop's clock and timers, advanced by the test."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> object:
        self.timers.append((when, callback))
        return object()  # a handle: Deadlines only keeps it

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
