"""Live result feeds: one run's results fanned out to any number of readers.

A :class:`~agentrunner_host.orchestrator.RunHandle` has one consumer. The service pumps it into a
:class:`RunFeed`, so the client that submitted the event, a client that reconnects with ``Last-Event-ID`` and
a ``?wait=true`` caller all read the same results. A feed holds a run's results only while it is live; once
the run has ended, its results are in the store (the orchestrator persists them before it closes the
handle), and readers replay from there.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator

from agentrunner_host.orchestrator import DeliveredResult, RunHandle, RunOutcome

__all__ = ["RunFeed"]


class RunFeed:
    """Results of one live run, readable from any position by several readers."""

    def __init__(self, handle: RunHandle, *, event_id: str) -> None:
        self.handle = handle
        """The run."""
        self.event_id = event_id
        """The event that started it."""
        self._items: list[DeliveredResult] = []
        self._changed = asyncio.Condition()
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
        """Results received so far."""
        return len(self._items)

    async def pump(self) -> None:
        """Move the handle's results into the feed until the run ends (run as a task)."""
        try:
            async for item in self.handle.results():
                async with self._changed:
                    self._items.append(item)
                    self._changed.notify_all()
        finally:
            async with self._changed:
                self._done = True
                self._changed.notify_all()

    async def follow(self, *, after: int = 0) -> AsyncIterator[DeliveredResult]:
        """Results with ``host_seq`` greater than *after*, the live ones as they arrive, until the run ends."""
        # host_seq is 1-based and gap-free, so the position of the first unread item is the cursor itself.
        index = max(0, after)
        while True:
            while index < len(self._items):
                yield self._items[index]
                index += 1
            if self._done:
                return
            async with self._changed:
                await self._changed.wait_for(functools.partial(self._has_more, index))

    def snapshot(self, *, after: int = 0, limit: int = 100) -> list[DeliveredResult]:
        """The results received so far with ``host_seq`` greater than *after* (at most *limit*), without waiting."""
        start = max(0, after)
        return self._items[start : start + max(0, limit)]

    def _has_more(self, index: int) -> bool:
        return index < len(self._items) or self._done

    async def outcome(self) -> RunOutcome:
        """Wait for the end of the run."""
        return await self.handle.outcome()
