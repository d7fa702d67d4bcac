"""Callbacks due later, on one loop timer for all of them: :class:`Deadlines` for a fixed delay after they were
added, :class:`Alarms` for a loop time each.

Per-request guards (an event stream's disconnect watch, a reader's keep-alive) are almost always withdrawn
long before they are due. A timer handle each costs its creation, a push onto the loop's heap and a cancel,
and a cancelled handle stays in that heap until its time comes or the loop rebuilds the heap. With one delay
for all entries their due times come in the order they were added, so a dict in insertion order is their
queue and one timer, armed for the oldest entry, serves them all; withdrawing one is a dict pop.

A run's deadline and its force-end watchdog are such guards too, but each falls due at a time of its own (the
run's policy sets its timeout): :class:`Alarms` keeps them in a heap of plain tuples (compared in C, where the
loop's heap compares its timer handles in Python) with one loop timer armed for the earliest, and drops
withdrawn entries as they reach the top or, once they are most of the heap, all at once.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable
from typing import Final

__all__ = ["Alarm", "Alarms", "Deadlines", "TaskTimeout", "alarms", "deadlines"]

_SLACK: Final = 0.001
"""An entry due within this many seconds of its timer's call runs with it (the loop runs timers a clock
resolution early, and re-arming for the rest would cost a loop turn)."""
_RESOLUTION: Final = time.get_clock_info("monotonic").resolution
"""What the loop itself runs a timer early by (BaseEventLoop's clock resolution): an alarm is run exactly when a
timer of its own would have been."""
_COMPACT_AT: Final = 64
"""Withdrawn entries the alarms' heap may hold before it is rebuilt without them (once they are most of it)."""


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


class TaskTimeout:
    """``asyncio.timeout(delay)`` around a step of the current task, on the shared :class:`Deadlines` of that
    delay instead of a loop timer of its own (created, pushed onto the loop's heap and cancelled per use, where
    an entry here is a dict insert and pop): due, it cancels the task; :meth:`withdraw` says whether that
    cancellation is the one the step ended by (the caller then raises its own timeout error for it)."""

    __slots__ = ("_cancelling", "_due", "_expired", "_task")

    def __init__(self, delay: float) -> None:
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - a timeout is kept for a task
            raise RuntimeError("a timeout is kept for a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._expired = False
        self._due = deadlines(delay)
        self._due.add(self, self._expire)

    def _expire(self) -> None:
        self._expired = True
        self._task.cancel()

    def withdraw(self) -> bool:
        """Stop the timeout (idempotent); ``True`` when it cancelled the task and nothing else did since it
        started (the cancellation is the timeout's, taken back here as ``asyncio.Timeout``'s exit does)."""
        self._due.discard(self)
        if not self._expired:
            return False
        self._expired = False
        return self._task.uncancel() <= self._cancelling


class Alarm:
    """One callback of :class:`Alarms`; :meth:`cancel` withdraws it (as a loop timer handle's does)."""

    __slots__ = ("_alarms", "callback")

    def __init__(self, alarms: Alarms, callback: Callable[[], None]) -> None:
        self._alarms: Alarms | None = alarms
        """Its alarms while it waits in their heap (``None`` once taken out to run)."""
        self.callback: Callable[[], None] | None = callback
        """What runs when it falls due; ``None`` once it ran or was cancelled."""

    def cancel(self) -> None:
        """Withdraw the callback if it has not run (idempotent)."""
        if self.callback is not None:
            self.callback = None
            if self._alarms is not None:
                self._alarms.withdrawn()


class Alarms:
    """Callbacks run at a loop time each, unless cancelled first, on one loop timer for all of them."""

    __slots__ = ("_heap", "_loop", "_seq", "_stale", "_timer", "_timer_at")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[tuple[float, int, Alarm]] = []
        self._seq = 0
        """Added so far: orders alarms due at the same time as they were added (and keeps the tuples' order
        from ever comparing two alarms)."""
        self._stale = 0
        """Cancelled alarms still in the heap."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop its timer runs on."""
        return self._loop

    def __len__(self) -> int:
        return len(self._heap) - self._stale

    def call_at(self, at: float, callback: Callable[[], None]) -> Alarm:
        """Run *callback* at loop time *at* (as ``loop.call_at``) unless the returned alarm is cancelled first."""
        alarm = Alarm(self, callback)
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, alarm))
        if self._timer is None or at < self._timer_at:
            self._arm(at)
        return alarm

    def withdrawn(self) -> None:
        """An alarm in the heap was cancelled (called by :meth:`Alarm.cancel`)."""
        self._stale += 1
        if self._stale > _COMPACT_AT and 2 * self._stale > len(self._heap):
            self._heap = [entry for entry in self._heap if entry[2].callback is not None]
            heapq.heapify(self._heap)
            self._stale = 0

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(at, self._fire)
        self._timer_at = at

    def _fire(self) -> None:
        self._timer = None
        end = self._loop.time() + _RESOLUTION
        due: list[Alarm] = []
        while self._heap:
            at, _, alarm = self._heap[0]
            if alarm.callback is None:
                heapq.heappop(self._heap)
                self._stale -= 1
            elif at < end:
                heapq.heappop(self._heap)
                alarm._alarms = None  # pyright: ignore[reportPrivateUsage]
                due.append(alarm)
            else:
                break
        # run after the heap settled: a callback may add or cancel alarms (one cancelled by an earlier one of
        # these does not run)
        try:
            for alarm in due:
                callback, alarm.callback = alarm.callback, None
                if callback is not None:
                    self._run(callback)
        finally:
            self._rearm()

    def _run(self, callback: Callable[[], None]) -> None:
        # as the loop runs a timer's callback: an error is reported, and the alarms due with it still run
        try:
            callback()
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._loop.call_exception_handler(
                {"message": "Exception in an alarm's callback", "exception": exc}
            )

    def _rearm(self) -> None:
        heap = self._heap
        while heap and heap[0][2].callback is None:
            heapq.heappop(heap)
            self._stale -= 1
        if heap and (self._timer is None or heap[0][0] < self._timer_at):
            self._arm(heap[0][0])


_alarms: Alarms | None = None


def alarms() -> Alarms:
    """The running loop's :class:`Alarms` (made on first use)."""
    loop = asyncio.get_running_loop()
    current = _alarms
    # as deadlines(): another loop (a test's) gets one of its own; alarms added to one replaced here still run,
    # each cancelled through its own Alarm
    if current is None or current.loop is not loop:
        current = _set_alarms(Alarms(loop))
    return current


def _set_alarms(current: Alarms) -> Alarms:
    global _alarms
    _alarms = current
    return current
