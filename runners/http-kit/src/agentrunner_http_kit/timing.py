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
