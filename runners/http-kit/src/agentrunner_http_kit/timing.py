"""The run's HTTP time limit: the earlier of the config ``timeout`` and the host's deadline."""

from __future__ import annotations

import asyncio
import time

__all__ = ["RunDeadline", "effective_timeout"]


def effective_timeout(
    timeout: float | None, deadline_at: float | None, *, now: float | None = None
) -> float | None:
    """``min(timeout, deadline_at - now)`` in seconds (never negative); ``None`` when neither limits."""
    now = time.time() if now is None else now
    limits = [t for t in (timeout, None if deadline_at is None else deadline_at - now) if t is not None]
    return max(0.0, min(limits)) if limits else None


class RunDeadline:
    """One absolute limit for every HTTP call of a run. Scopes are opened around single awaits, never around a
    ``yield``: a timeout must not fire in the consumer's code while the runner is suspended."""

    __slots__ = ("at", "seconds")

    def __init__(self, timeout: float | None, deadline_at: float | None) -> None:
        self.seconds = effective_timeout(timeout, deadline_at)
        """The limit in seconds when the run started (``None``: unbounded)."""
        self.at = None if self.seconds is None else time.time() + self.seconds
        """Unix epoch seconds when the run gives up."""

    def remaining(self) -> float | None:
        """Seconds left (never negative); ``None`` without a limit."""
        return None if self.at is None else max(0.0, self.at - time.time())

    def scope(self) -> asyncio.Timeout:
        """A timeout context ending at the deadline (raises :class:`TimeoutError` when it passes)."""
        remaining = self.remaining()
        if remaining is None:
            return asyncio.timeout(None)
        return asyncio.timeout_at(asyncio.get_running_loop().time() + remaining)


class ReadWatch:
    """The deadline of many reads of one stream with one timer: what :meth:`RunDeadline.scope` around each
    read does, without an ``asyncio.Timeout`` and a timer handle per read (a streamed answer is read in
    dozens of steps, and those were a tenth of a run's own cost).

    The timer fires once, at the deadline. It cancels the reading task only while a read is in progress
    (between :meth:`start` and :meth:`stop`), never while the stream's consumer runs: a read started after the
    deadline fails at once instead. :meth:`stop` turns the cancellation it caused into :class:`TimeoutError`
    with the same accounting as ``asyncio.Timeout`` (``Task.uncancel``), so a cancellation from elsewhere
    still propagates. Call :meth:`close` when the stream ends."""

    __slots__ = ("_cancelling", "_fired", "_handle", "_task", "expired")

    def __init__(self, deadline: RunDeadline) -> None:
        self.expired = False
        """The deadline passed."""
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._fired = False
        remaining = deadline.remaining()
        self._handle = (
            None if remaining is None else asyncio.get_running_loop().call_later(remaining, self._expire)
        )

    def _expire(self) -> None:
        self.expired = True
        task = self._task
        if task is not None and not self._fired:
            self._fired = True
            task.cancel()

    def start(self) -> None:
        """A read begins in the current task (:class:`TimeoutError` if the deadline already passed)."""
        if self.expired:
            raise TimeoutError
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - reads always run in a task
            raise RuntimeError("ReadWatch.start outside a task")
        self._cancelling = task.cancelling()
        self._task = task

    def stop(self, exc: BaseException | None = None) -> None:
        """The read ended (with *exc* if it raised). Raises :class:`TimeoutError` when the read was cancelled
        by the deadline alone."""
        task, self._task = self._task, None
        if self._fired and task is not None:
            self._fired = False
            if task.uncancel() <= self._cancelling and isinstance(exc, asyncio.CancelledError):
                raise TimeoutError from exc

    def close(self) -> None:
        """Drop the timer."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
