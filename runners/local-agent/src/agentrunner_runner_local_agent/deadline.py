"""The run's own time limit: the earlier of the host's deadline and the binding's ``timeout-seconds``."""

from __future__ import annotations

import asyncio
import time

__all__ = ["Deadline"]


class Deadline:
    """Bounds each awaited back-call. Scopes are opened around awaits only, never around a ``yield``, so the
    consumer's work between results is not cut by a timeout of ours."""

    __slots__ = ("at",)

    at: float | None
    """Unix epoch seconds after which the run gives up; ``None`` means no limit of ours."""

    def __init__(self, *, host_deadline: float | None, timeout_seconds: float | None) -> None:
        limits = [d for d in (host_deadline, time.time() + timeout_seconds if timeout_seconds else None) if d]
        self.at = min(limits) if limits else None

    def remaining(self) -> float | None:
        """Seconds left (never negative); ``None`` without a limit."""
        return None if self.at is None else max(0.0, self.at - time.time())

    def scope(self) -> asyncio.Timeout:
        """A timeout context ending at the deadline (raises :class:`TimeoutError` when it passes)."""
        remaining = self.remaining()
        if remaining is None:
            return asyncio.timeout(None)
        return asyncio.timeout_at(asyncio.get_running_loop().time() + remaining)
