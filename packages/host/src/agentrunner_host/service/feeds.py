"""Live result feeds: one run's results fanned out to any number of readers.

A :class:`~agentrunner_host.orchestrator.RunHandle` has one consumer. The service makes it a
:class:`RunFeed`, so the client that submitted the event, a client that reconnects with ``Last-Event-ID`` and
a ``?wait=true`` caller all read the same results. Every result a handle hands out is already committed, so
the feed keeps only a short window of the newest ones for readers following live; a reader further behind
reads the store until it reaches the window. Memory per run is bounded by the window, not by the run's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Final, cast

from agentrunner import TERMINAL_RESULT_TYPES
from agentrunner import codec as json
from agentrunner.codec import JsonObject

from agentrunner_host.deadlines import deadlines
from agentrunner_host.orchestrator import DeliveredResult, RunHandle, RunOutcome
from agentrunner_host.stores import ResultRecord

__all__ = ["FEED_WINDOW", "QUIET", "REPLAY_PAGE", "ReplayItem", "ResultBatch", "RunFeed"]

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


class ResultBatch:
    """Results a reader can have at once: iterate it once, then :attr:`last` tells whether the run ended with
    them."""

    __slots__ = ("_items", "quiet")

    def __init__(self, items: Sequence[ReplayItem] = (), *, quiet: bool = False) -> None:
        self._items = items
        self.quiet = quiet
        """No result came for the reader's *idle* time (the batch is empty)."""

    def __iter__(self) -> Iterator[ReplayItem]:
        return iter(self._items)

    @property
    def last(self) -> bool:
        """No result follows the batch (known of a live run's feed only: a stored run's end is read from the
        store, after its last batch)."""
        return False


QUIET: Final = ResultBatch(quiet=True)
"""The batch a quiet feed hands out after a reader's *idle* time."""


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class RunFeed:
    """Results of one live run, readable from any position by several readers.

    The feed takes the handle's results by callback (:meth:`RunHandle.subscribe`): the run's own task hands
    each committed result over as it queues it, whether anyone reads or not, so no task of the feed's wakes up
    per result and the run never waits on a reader that went away.
    """

    def __init__(
        self,
        handle: RunHandle,
        *,
        event_id: str,
        replay: Replay,
        on_end: Callable[[RunFeed], None] | None = None,
    ) -> None:
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
        self._on_end = on_end
        handle.subscribe(self._take)

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

    def held(self, host_seq: int) -> ReplayItem | None:
        """The result at *host_seq* if the window holds it."""
        # host_seq is 1-based and gap-free: the position in the window follows from it
        index = host_seq - 1 - (self._count - len(self._window))
        return self._window[index] if 0 <= index < len(self._window) else None

    def _notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def _take(self) -> None:
        # the handle's listener: runs in the run's task, so it only moves results and wakes readers
        if self._done:
            return
        handle = self.handle
        ready = handle.take_ready()
        moved = bool(ready)
        if moved:
            window = self._window
            for item in ready:
                window.append(ReplayItem.of(item))
            self._count = ready[-1].host_seq
        if handle.drained:
            self._done = True
            moved = True
            handle.unsubscribe()
            if self._on_end is not None:
                self._on_end(self)
        if moved:
            self._notify()

    async def ended(self) -> None:
        """Wait until every result of the run is in the feed."""
        while not self._done:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.add(waiter)
            try:
                await waiter
            finally:
                self._waiters.discard(waiter)

    async def follow(self, *, after: int = 0) -> AsyncIterator[ReplayItem]:
        """Results with ``host_seq`` greater than *after*, the live ones as they arrive, until the run ends."""
        async with contextlib.aclosing(self.batches(after=after)) as batches:
            async for batch in batches:
                for item in batch:
                    yield item

    async def batches(self, *, after: int = 0, idle: float | None = None) -> AsyncGenerator[ResultBatch]:
        """The results of :meth:`follow` in batches of those ready together; with *idle*, an empty batch after
        *idle* seconds without a result (a reader's cue for a keep-alive, with no timer of its own)."""
        cursor = _Cursor(self, max(0, after))
        waited_for_end = False
        while True:
            first = self._count - len(self._window) + 1  # host_seq of the oldest result in the window
            if cursor.position + 1 < first:
                page = await self._replay(cursor.position, min(REPLAY_PAGE, first - 1 - cursor.position))
                if not page:
                    # cannot happen: a handle hands out committed results only
                    raise RuntimeError(f"run {self.run_id}: results after {cursor.position} are not stored")
                cursor.position = page[-1].host_seq
                yield ResultBatch([ReplayItem.of(record) for record in page])
                continue
            if cursor.position < self._count:
                if not self._done and not waited_for_end and self._window[-1].type in TERMINAL_RESULT_TYPES:
                    # the run's end is recorded right after its terminal result is: wait for it once, so the
                    # reader sends the last results and the end of the stream together
                    waited_for_end = True
                else:
                    yield cursor
                    continue
            elif self._done:
                return
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.add(waiter)
            # the idle time on the one timer all readers share: a timer each would be made and cancelled
            # for nearly every wait
            due = None if idle is None else deadlines(idle)
            if due is not None:
                due.add(waiter, functools.partial(_wake, waiter))
            try:
                await waiter
            finally:
                self._waiters.discard(waiter)
                if due is not None:
                    due.discard(waiter)
            if cursor.position >= self._count and not self._done:
                yield QUIET
            elif waited_for_end and not self._done:
                yield cursor  # the end did not follow within the idle time: the results go out without it

    async def outcome(self) -> RunOutcome:
        """Wait for the end of the run."""
        return await self.handle.outcome()


class _Cursor(ResultBatch):
    """A reader's position in a live feed; as a batch, the window's results after it, read as it is iterated:
    a reader holds one result at a time, however many are ready, and one that fell behind the window while
    sending stops at its edge (its next batch is read from the store)."""

    __slots__ = ("_feed", "position")

    def __init__(self, feed: RunFeed, position: int) -> None:
        super().__init__()
        self._feed = feed
        self.position = position

    def __iter__(self) -> Iterator[ReplayItem]:
        # ends at the newest result, or where the window moved on while this reader was away (the store then)
        while (item := self._feed.held(self.position + 1)) is not None:
            self.position = item.host_seq
            yield item

    @property
    def last(self) -> bool:
        return self._feed.done and self.position >= self._feed.delivered
