"""The check's event loop, in a thread of its own that the kit can walk away from.

Hypothesis is synchronous, so every coroutine of a check runs on one event loop in a helper thread. A runner
that ignores cancellation can keep a task alive for as long as it likes, and ``asyncio.run`` (or anyio's
blocking portal) would wait for that task at shutdown: the check would hang exactly when it found the bug.
:class:`LoopThread` bounds both ends: :meth:`LoopThread.call` gives up on a coroutine after a timeout, and
:meth:`LoopThread.close` cancels what is left, waits a bounded time and otherwise leaves the daemon thread
behind (the process exits without waiting for it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["ExampleTimeoutError", "LoopThread"]

T = TypeVar("T")


class ExampleTimeoutError(Exception):
    """A coroutine run through :meth:`LoopThread.call` did not finish within its timeout."""


class LoopThread:
    """An asyncio event loop running in a daemon thread; synchronous code calls coroutines on it."""

    def __init__(self, *, name: str = "agentrunner-conformance") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self.abandoned = False
        """Whether :meth:`close` had to leave tasks (and the thread) running."""

    def call(self, func: Callable[..., Awaitable[T]], /, *args: object, timeout: float | None = None) -> T:
        """Run ``func(*args)`` on the loop and return its result; raise :class:`ExampleTimeoutError` after
        *timeout* seconds (the coroutine is cancelled, and left to the loop if it ignores that)."""

        async def main() -> T:
            return await func(*args)

        future = asyncio.run_coroutine_threadsafe(main(), self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ExampleTimeoutError(f"gave up after {timeout:g}s") from None

    def close(self, *, timeout: float = 2.0) -> None:
        """Cancel every task left on the loop, wait up to *timeout* seconds for them, then stop the loop.

        Tasks that outlive the wait (a runner swallowing every cancel) keep the loop and its daemon thread
        running; :attr:`abandoned` tells. The loop is closed only when nothing is left on it.
        """
        if not self._thread.is_alive():
            return

        async def cancel_all() -> bool:
            current = asyncio.current_task()
            left = [t for t in asyncio.all_tasks() if t is not current]
            for task in left:
                task.cancel()
            if left:
                _, pending = await asyncio.wait(left, timeout=timeout)
                return not pending
            return True

        try:
            clean = self.call(cancel_all, timeout=timeout + 1.0)
        except ExampleTimeoutError:
            clean = False
        if not clean:
            self.abandoned = True
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.abandoned = True
            return
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()
