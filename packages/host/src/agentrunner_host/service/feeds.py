"""Live result feeds: one run's results fanned out to any number of readers.

A :class:`~agentrunner_host.orchestrator.RunHandle` has one consumer. The service pumps it into a
:class:`RunFeed`, so the client that submitted the event, a client that reconnects with ``Last-Event-ID`` and
a ``?wait=true`` caller all read the same results. Every result a handle hands out is already committed, so
the feed keeps only a short window of the newest ones for readers following live; a reader further behind
reads the store until it reaches the window. Memory per run is bounded by the window, not by the run's output.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

from agentrunner_host.orchestrator import DeliveredResult, RunHandle, RunOutcome
from agentrunner_host.stores import ResultRecord

__all__ = ["FEED_WINDOW", "REPLAY_PAGE", "RunFeed"]

FEED_WINDOW: Final = 16
"""Newest results a live feed keeps in memory for its readers."""
REPLAY_PAGE: Final = 16
"""Results a lagging reader reads from the store at a time (results are up to 1 MiB each)."""

Replay = Callable[[int, int], Awaitable[list[ResultRecord]]]
"""Stored results of the run after a ``host_seq``, at most a number of them."""


class RunFeed:
    """Results of one live run, readable from any position by several readers."""

    def __init__(self, handle: RunHandle, *, event_id: str, replay: Replay) -> None:
        self.handle = handle
        """The run."""
        self.event_id = event_id
        """The event that started it."""
        self._window: deque[DeliveredResult] = deque(maxlen=FEED_WINDOW)
        self._count = 0
        self._replay = replay
        self._waiters: set[asyncio.Future[None]] = set()
        self._done = False

    @property
    def run_id(self) -> str:
        """Run id."""
        return self.handle.run_id

    @property
    def done(self) -> bool:
        """The run has ended and every result is in the feed."""
        return self._done

    @property
    def delivered(self) -> int:
        """Results received so far (the newest ``host_seq``)."""
        return self._count

    def _notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def pump(self) -> None:
        """Move the handle's results into the feed until the run ends (run as a task)."""
        try:
            async for item in self.handle.results():
                self._window.append(item)
                self._count = item.host_seq
                self._notify()
        finally:
            self._done = True
            self._notify()

    async def follow(self, *, after: int = 0) -> AsyncIterator[DeliveredResult | ResultRecord]:
        """Results with ``host_seq`` greater than *after*, the live ones as they arrive, until the run ends."""
        cursor = max(0, after)
        while True:
            first = self._count - len(self._window) + 1  # host_seq of the oldest result in the window
            if cursor + 1 < first:
                page = await self._replay(cursor, min(REPLAY_PAGE, first - 1 - cursor))
                if not page:
                    # cannot happen: a handle hands out committed results only
                    raise RuntimeError(f"run {self.run_id}: results after {cursor} are not stored")
                for record in page:
                    cursor = record.host_seq
                    yield record
                continue
            # host_seq is 1-based and gap-free: the position in the window follows from the cursor
            while cursor < self._count:
                index = cursor - (self._count - len(self._window) + 1) + 1
                if index < 0:
                    break  # the window moved on while this reader was away: read the store
                item = self._window[index]
                cursor = item.host_seq
                yield item
            else:
                if self._done:
                    return
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.add(waiter)
                try:
                    await waiter
                finally:
                    self._waiters.discard(waiter)

    async def outcome(self) -> RunOutcome:
        """Wait for the end of the run."""
        return await self.handle.outcome()
