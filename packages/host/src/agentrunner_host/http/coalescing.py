"""A connection's writes made in one turn of the event loop, sent as one.

uvicorn writes a response's head, each body chunk and the chunked encoding's last chunk separately, and
asyncio sends each write at once when nothing is buffered: a short SSE answer (head, its events, the end,
all written in one task step) took three ``send`` calls, each a trip through the kernel's TCP stack. :class:`CoalescingTransport` holds a connection's writes until the loop's
next turn (``call_soon``) and sends what was written by then in one call: a streamed delta leaves one turn
later than before, not one timer later, and the bytes and their order are unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Final

__all__ = ["HOLD_BYTES", "CoalescingTransport"]

HOLD_BYTES: Final = 64 * 1024
"""Most bytes held: a turn that writes more sends them at once (a live feed's window of up to 16 results of
up to 1 MiB each can be framed in one turn, and uvicorn waits for a full socket buffer only between writes:
it must see that buffer fill, not hold the whole window here)."""


class CoalescingTransport(asyncio.Transport):
    """*transport* (a connection's socket transport) with its writes held until the loop's next turn.

    It forwards what uvicorn's HTTP protocol calls (``write``, ``close``, ``is_closing``, ``get_extra_info``,
    the reading switches); any other transport method raises ``NotImplementedError`` (asyncio's default).
    Flow control is unchanged: uvicorn's flow control holds the socket transport itself, which pauses the
    protocol when its own buffer fills; what waits here is what one turn wrote, up to :data:`HOLD_BYTES`."""

    __slots__ = ("_held", "_loop", "_size", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._size = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if type(data) is not bytes:
            data = bytes(data)  # held past this call: a caller may reuse its buffer, as asyncio lets it
        if not self._held:
            self._loop.call_soon(self._send)
        self._held.append(data)
        self._size += len(data)
        if self._size >= HOLD_BYTES:
            self._send()

    def _send(self) -> None:
        held = self._held
        if not held:
            return  # sent by close(), or dropped by abort()
        data = held[0] if len(held) == 1 else b"".join(held)
        held.clear()
        self._size = 0
        if not self._transport.is_closing():
            # a connection lost since: asyncio would drop the bytes too (and log a warning for each write)
            self._transport.write(data)

    def close(self) -> None:
        """Send what is held, then close (asyncio sends its own buffer before it closes the socket)."""
        self._send()
        self._transport.close()

    def abort(self) -> None:
        """Drop what is held and close at once."""
        self._held.clear()
        self._size = 0
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: object = None) -> object:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._size
