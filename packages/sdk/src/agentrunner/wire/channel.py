"""Frame channels: the byte pipes a wire session runs over (a child's stdio, a WebSocket)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from agentrunner.errors import ProtocolError

from .frames import MAX_FRAME_BYTES

__all__ = ["FrameChannel", "StreamFrameChannel"]


class FrameChannel(Protocol):
    """Carries encoded frames (one NDJSON line each) between two peers, in order."""

    async def receive(self) -> bytes | None:
        """The next frame line, or ``None`` at the end of the stream.

        Raises :class:`~agentrunner.errors.ProtocolError` when the peer sent a frame larger than the limit.
        """
        ...

    async def send(self, data: bytes) -> None:
        """Send one frame line, waiting while the peer is not reading (backpressure)."""
        ...

    async def send_batched(self, data: bytes) -> None:
        """Like :meth:`send` for a frame of a burst (results): it may be written with the frames that follow it
        in the same turn of the event loop. Order with every other frame is kept."""
        ...

    def send_nowait(self, data: bytes) -> None:
        """Queue one small control frame without waiting (credits, cancels); safe in ``finally`` blocks."""
        ...

    async def aclose(self) -> None:
        """Close the sending side; the peer sees the end of its stream."""
        ...


class StreamFrameChannel:
    """A :class:`FrameChannel` over an asyncio stream pair, e.g. a child process's stdout and stdin.

    The reader must have been created with ``limit >= max_frame_bytes``: a line longer than that raises
    :class:`~agentrunner.errors.ProtocolError` instead of buffering without bound.

    Frames go out at once, except in a burst: the first frame sent with :meth:`send_batched` in a turn of the
    event loop is written at once, the ones that follow it in the same turn are written together at the end of
    the turn. A lone result (a delta from a model stream) is never delayed, and a burst of results costs two
    ``write`` system calls (and reader wake-ups), not one per frame. Code that blocks the loop right after a
    burst delays the burst's tail until the loop runs again.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.max_frame_bytes = max_frame_bytes
        self._batch: list[bytes] = []
        self._batch_bytes = 0
        self._turn_open = False

    async def receive(self) -> bytes | None:
        """The next non-empty line, or ``None`` at EOF (a truncated last line counts as EOF: the peer died)."""
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError:
                return None
            except asyncio.LimitOverrunError:
                raise ProtocolError(f"frame larger than {self.max_frame_bytes} bytes") from None
            if len(line) > self.max_frame_bytes + 1:
                raise ProtocolError(f"frame larger than {self.max_frame_bytes} bytes")
            if len(line) > 1:
                return line

    async def send(self, data: bytes) -> None:
        """Write *data* (after the open batch, if any); wait while the pipe is full (backpressure)."""
        self.send_nowait(data)
        await self._writer.drain()

    async def send_batched(self, data: bytes) -> None:
        """Write *data* now if it is the first frame of a burst in this turn, else add it to the turn's batch."""
        if self._writer.is_closing():
            return
        if not self._turn_open:
            self._turn_open = True
            asyncio.get_running_loop().call_soon(self._flush)
            self._writer.write(data)
        else:
            self._batch.append(data)
            self._batch_bytes += len(data)
            if self._batch_bytes >= _FLUSH_BYTES:
                self._write_batch()
            elif not self._writer.transport.get_write_buffer_size():
                # Nothing was written and nothing waits in the transport, so drain has nothing to wait for
                # (a paused writer always holds bytes): skipping it saves two coroutines per batched result.
                return
        await self._writer.drain()

    def send_nowait(self, data: bytes) -> None:
        """Write *data* now, or after the open batch so frames keep their order."""
        if self._writer.is_closing():
            return
        if self._batch:
            self._batch.append(data)
            self._batch_bytes += len(data)
        else:
            self._writer.write(data)

    def _flush(self) -> None:
        self._turn_open = False
        self._write_batch()

    def _write_batch(self) -> None:
        if not self._batch:
            return
        data = b"".join(self._batch)
        self._batch.clear()
        self._batch_bytes = 0
        if not self._writer.is_closing():
            self._writer.write(data)

    async def aclose(self) -> None:
        """Write what is queued, then close the writer (the peer reads EOF)."""
        if self._writer.is_closing():
            return
        self._write_batch()
        self._writer.close()
        with contextlib.suppress(ConnectionError, BrokenPipeError):
            await self._writer.wait_closed()


_FLUSH_BYTES = 256 * 1024
"""Write a batch at once when it grows past this, so one turn of the loop never buffers without bound."""
