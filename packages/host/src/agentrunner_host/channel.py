"""A bounded single-producer single-consumer channel, lighter than ``asyncio.Queue`` on the per-result path.

The producer (a run's task) waits when the channel is full, so a runner faster than its consumer is slowed
down and host memory stays bounded. ``push_final`` never waits and never drops: the end of a run is always
delivered, even to a consumer that stopped reading.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Channel", "ChannelClosed"]

T = TypeVar("T")


class ChannelClosed(Exception):
    """The channel was closed and is empty."""


class Channel(Generic[T]):
    """Bounded FIFO between one producer task and one consumer task."""

    __slots__ = ("_closed", "_getter", "_items", "_maxsize", "_putter", "listener")

    def __init__(self, maxsize: int) -> None:
        self._items: deque[T] = deque()
        self._maxsize = maxsize
        self._getter: asyncio.Future[None] | None = None
        self._putter: asyncio.Future[None] | None = None
        self._closed = False
        self.listener: Callable[[], None] | None = None
        """A consumer that takes items by callback instead of :meth:`pull`: called in the producer's stack
        whenever an item arrives or the channel closes (it must not raise or wait)."""

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        """No more items will come (some may still be queued)."""
        return self._closed

    def _wake(self, waiter: asyncio.Future[None] | None) -> None:
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _arrived(self) -> None:
        self._wake(self._getter)
        if self.listener is not None:
            self.listener()

    async def push(self, item: T) -> None:
        """Append *item*, waiting while the channel is full."""
        while len(self._items) >= self._maxsize and not self._closed:
            self._putter = asyncio.get_running_loop().create_future()
            await self._putter
        self._items.append(item)
        self._arrived()

    def offer(self, item: T) -> bool:
        """Append *item* if that needs no wait (room left, or closed); ``False`` when the caller must
        :meth:`push` instead. The per-result path takes this first: a coroutine per item costs more than the
        check."""
        if len(self._items) >= self._maxsize and not self._closed:
            return False
        self._items.append(item)
        self._arrived()
        return True

    def push_final(self, item: T) -> None:
        """Append *item* without waiting (may exceed the bound by one) and close the channel."""
        self._items.append(item)
        self.close()

    def close(self) -> None:
        """No more items will come; a waiting consumer is woken."""
        self._closed = True
        self._wake(self._putter)
        self._arrived()

    def clear(self) -> None:
        """Drop undelivered items (the consumer went away) and release a waiting producer."""
        self._items.clear()
        self._wake(self._putter)

    def peek(self) -> T:
        """The next item of a channel that holds one, left in place (raises ``IndexError`` if empty)."""
        return self._items[0]

    def pull_nowait(self) -> T:
        """The next item of a channel that holds one (check ``len()`` first; raises ``IndexError`` if empty)."""
        item = self._items.popleft()
        self._wake(self._putter)
        return item

    async def pull(self) -> T:
        """The next item; raises :class:`ChannelClosed` when closed and drained."""
        while not self._items:
            if self._closed:
                raise ChannelClosed
            self._getter = asyncio.get_running_loop().create_future()
            await self._getter
        item = self._items.popleft()
        self._wake(self._putter)
        return item
