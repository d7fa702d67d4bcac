"""Group commit: concurrent requests of one kind written together in one transaction.

SQLite has one writer, so concurrent runs queue for it anyway; writing the queue as one transaction with one
multi-row statement per table costs about what one request costs alone. Only requests that arrived while
the writer was busy are grouped (no waiting for company), so a lone request is written at once.
When a grouped write fails, each request of the group is written on its own, so every caller gets its own
outcome and no request is hurt by another's error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Generic, TypeVar

__all__ = ["Coalescer"]

R = TypeVar("R")

MAX_GROUP: Final = 64
"""Largest group written in one transaction."""


class Coalescer(Generic[R]):
    """Writes requests through *write* (one call per group), grouping the ones that queue up."""

    def __init__(
        self, write: Callable[[Sequence[R]], Awaitable[None]], *, max_group: int = MAX_GROUP
    ) -> None:
        self._write = write
        self._max_group = max_group
        self._queue: list[tuple[R, asyncio.Future[None]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def submit(self, request: R) -> None:
        """Write *request* (possibly with others); returns once committed, raises its own error."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((request, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain())
        await asyncio.shield(future)

    async def _drain(self) -> None:
        while self._queue:
            group = self._queue[: self._max_group]
            del self._queue[: self._max_group]
            try:
                await self._write([request for request, _ in group])
            except asyncio.CancelledError:
                for _, future in group:
                    if not future.done():
                        future.set_exception(RuntimeError("the stores were closed during the write"))
                raise
            except Exception as exc:
                if len(group) == 1:
                    _settle(group[0][1], exc)
                    continue
                for request, future in group:
                    try:
                        await self._write([request])
                    except Exception as single:
                        _settle(future, single)
                    else:
                        _settle(future, None)
            else:
                for _, future in group:
                    _settle(future, None)

    async def aclose(self) -> None:
        """Wait for queued writes to finish."""
        if self._drainer is not None:
            await asyncio.gather(self._drainer, return_exceptions=True)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
