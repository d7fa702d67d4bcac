"""Callbacks due a fixed delay after they were added, on one loop timer for all of them.

Per-request guards (an event stream's disconnect watch, a reader's keep-alive) are almost always withdrawn
long before they are due. A timer handle each costs its creation, a push onto the loop's heap and a cancel,
and a cancelled handle stays in that heap until its time comes or the loop rebuilds the heap. With one delay
for all entries their due times come in the order they were added, so a dict in insertion order is their
queue and one timer, armed for the oldest entry, serves them all; withdrawing one is a dict pop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

__all__ = ["Deadlines", "deadlines"]

_SLACK: Final = 0.001
"""An entry due within this many seconds of its timer's call runs with it (the loop runs timers a clock
resolution early, and re-arming for the rest would cost a loop turn)."""


class Deadlines:
    """Callbacks run *delay* seconds after :meth:`add`, unless withdrawn with :meth:`discard` first."""

    __slots__ = ("_delay", "_due", "_loop", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self._loop = loop
        self._delay = delay
        self._due: dict[object, tuple[float, Callable[[], None]]] = {}
        self._timer: asyncio.TimerHandle | None = None

    def add(self, key: object, callback: Callable[[], None]) -> None:
        """Run *callback* after the delay unless *key* is discarded first (a key is added once)."""
        at = self._loop.time() + self._delay
        self._due[key] = (at, callback)
        if self._timer is None:
            self._timer = self._loop.call_at(at, self._fire)

    def discard(self, key: object) -> None:
        """Withdraw *key*'s callback if it has not run."""
        self._due.pop(key, None)

    def __len__(self) -> int:
        return len(self._due)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop its timer runs on."""
        return self._loop

    def _fire(self) -> None:
        self._timer = None
        due = self._due
        while due:
            key = next(iter(due))
            at, callback = due[key]
            if at > self._loop.time() + _SLACK:
                self._timer = self._loop.call_at(at, self._fire)
                return
            del due[key]
            callback()


_by_delay: dict[float, Deadlines] = {}


def deadlines(delay: float) -> Deadlines:
    """The running loop's :class:`Deadlines` for *delay* (made on first use)."""
    loop = asyncio.get_running_loop()
    current = _by_delay.get(delay)
    # one loop per process in practice; another one (a test's) gets instances of its own, and one replaced
    # here still runs its entries, each withdrawn through the instance it was added to
    if current is None or current.loop is not loop:
        current = _by_delay[delay] = Deadlines(loop, delay)
    return current
