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
from typing import Final, cast

from agentrunner import codec as json
from agentrunner.codec import JsonObject

from agentrunner_host.orchestrator import DeliveredResult, RunHandle, RunOutcome
from agentrunner_host.stores import ResultRecord

__all__ = ["FEED_WINDOW", "REPLAY_PAGE", "ReplayItem", "RunFeed"]

FEED_WINDOW: Final = 16
"""Newest results a live feed keeps in memory for its readers."""
REPLAY_PAGE: Final = 16
"""Results a lagging reader reads from the store at a time (results are up to 1 MiB each)."""

Replay = Callable[[int, int], Awaitable[list[ResultRecord]]]
"""Stored results of the run after a ``host_seq``, at most a number of them."""


class ReplayItem:
    """One result for a reader: its host sequence, type and wire payload (held as the JSON bytes the host
    stored when it has them: decoded only if a reader asks for :attr:`payload`)."""

    __slots__ = ("_encoded", "_payload", "host_seq", "type")

    def __init__(
        self,
        host_seq: int,
        type: str,
        payload: JsonObject | None = None,
        *,
        encoded: bytes | None = None,
    ) -> None:
        if payload is None and encoded is None:
            raise ValueError("a replay item needs its payload or its encoding")
        self.host_seq = host_seq
        """1-based, gap-free position in the run."""
        self.type = type
        """Result type."""
        self._payload = payload
        self._encoded = encoded

    @property
    def payload(self) -> JsonObject:
        """The result as JSON (decoded on each call when the item holds bytes: items wait in a live feed's
        window, which would otherwise hold both forms of results of up to 1 MiB)."""
        if self._payload is not None:
            return self._payload
        assert self._encoded is not None
        return cast(JsonObject, json.loads(self._encoded))

    @property
    def encoded(self) -> bytes:
        """The result's JSON bytes: the stored ones when known, else encoded on each call (not kept, as
        :attr:`payload`)."""
        if self._encoded is not None:
            return self._encoded
        return json.dumps(self._payload)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReplayItem):
            return NotImplemented
        return (self.host_seq, self.type, self.payload) == (other.host_seq, other.type, other.payload)

    __hash__ = None  # pyright: ignore[reportAssignmentType]

    def __repr__(self) -> str:
        return f"ReplayItem(host_seq={self.host_seq}, type={self.type!r})"

    @classmethod
    def of(cls, item: DeliveredResult | ResultRecord) -> ReplayItem:
        """From a live or a stored result."""
        if isinstance(item, DeliveredResult):
            if item.encoded is not None:
                # the bytes the orchestrator stored: a live result and its replay are the same JSON
                return cls(item.host_seq, item.result.type, encoded=item.encoded)
            return cls(item.host_seq, item.result.type, item.result.model_dump(mode="json"))
        payload = item.payload
        if isinstance(payload, dict):
            return cls(item.host_seq, item.type, payload)
        return cls(item.host_seq, item.type, encoded=payload)


class RunFeed:
    """Results of one live run, readable from any position by several readers."""

    def __init__(self, handle: RunHandle, *, event_id: str, replay: Replay) -> None:
        self.handle = handle
        """The run."""
        self.event_id = event_id
        """The event that started it."""
        # readers' items, not the handle's: the window holds each result's stored bytes, not its model too
        self._window: deque[ReplayItem] = deque(maxlen=FEED_WINDOW)
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
                self._window.append(ReplayItem.of(item))
                self._count = item.host_seq
                self._notify()
        finally:
            self._done = True
            self._notify()

    async def follow(self, *, after: int = 0) -> AsyncIterator[ReplayItem | ResultRecord]:
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
