"""Server-Sent Events framing (``text/event-stream``) with keep-alive comments, and the response that sends it.

The framing is a few lines of the WHATWG format; a library would add its own shutdown machinery on top of
the service's, which already ends every stream by cancelling the live runs.

:class:`EventStreamResponse` replaces Starlette's ``StreamingResponse`` for event streams. Under uvicorn's
ASGI spec 2.3 that one runs the body in an anyio task group next to a task listening for the disconnect and
cancels the group through a cancel scope when the body ends (a task group, a second task, a cancel scope,
its delivery loop, and a task ``repr`` per response: about 7% of the loop thread's CPU per streamed echo
request, cProfile on thread time). Here the body is sent from the request's own task, and a plain asyncio
task waits for the disconnect only once the response has been sending for a moment (an answer complete
sooner starts none), cancelling the request's task only when the client went away first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Final

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agentrunner_host.deadlines import deadlines
from agentrunner_host.service import ReplayItem, ResultBatch

__all__ = [
    "KEEPALIVE_SECONDS",
    "SSE_HEADERS",
    "WATCH_AFTER_SECONDS",
    "Chunk",
    "EventStreamResponse",
    "encode_event",
    "sse_stream",
]

KEEPALIVE_SECONDS: Final = 15.0
"""A comment line is sent after this long without a result, so proxies keep the connection open."""
SSE_HEADERS: Final = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
"""Headers of every event stream."""
KEEPALIVE: Final = b": keep-alive\n\n"
"""The comment sent on a quiet stream."""
WATCH_AFTER_SECONDS: Final = 1.0
"""An event stream still sending after this long starts watching for the client's disconnect."""
_CHUNK_BYTES: Final = 64 * 1024
"""Ready events are joined into one chunk up to this size (larger events go out on their own, uncopied)."""

Chunk = tuple[bytes, bool]
"""A piece of the response body and whether it is the last one."""


def encode_event(item: ReplayItem) -> bytes:
    """``id: <host_seq>`` / ``event: <type>`` / ``data: <result JSON>`` (compact JSON never spans lines)."""
    return f"id: {item.host_seq}\nevent: {item.type}\ndata: ".encode() + item.encoded + b"\n\n"


async def sse_stream(batches: AsyncIterator[ResultBatch]) -> AsyncGenerator[Chunk]:
    """Frame *batches*: the events of a batch go out as one chunk (up to :data:`_CHUNK_BYTES`), an empty batch
    (the source was quiet for its idle time) as a ``: keep-alive`` comment, and a batch the run ended with is
    the last chunk.

    The batches are read from the response's own task (no reader task, no queue), and a batch reads its
    results only as it is framed: what this stream holds is bounded by bytes (one chunk and one event), not
    by a count of results of up to 1 MiB each.
    """
    try:
        async for batch in batches:
            frames: list[bytes] = []
            size = 0
            for item in batch:
                frame = encode_event(item)
                if frames and size + len(frame) > _CHUNK_BYTES:
                    yield (frames[0] if len(frames) == 1 else b"".join(frames)), False
                    frames = []
                    size = 0
                frames.append(frame)
                size += len(frame)
            last = batch.last
            if frames:
                yield (frames[0] if len(frames) == 1 else b"".join(frames)), last
            elif last:
                yield b"", True
            elif batch.quiet:
                yield KEEPALIVE, False
            if last:
                return
    finally:
        closer = getattr(batches, "aclose", None)
        if closer is not None:
            await closer()


class EventStreamResponse(Response):
    """A ``text/event-stream`` response sending each chunk of *body* as it comes; a client disconnect closes
    *body* (its ``finally`` blocks run) and ends the response quietly.

    The disconnect is watched only once the response has been sending for *watch_after* seconds: most answers
    (a short run's results committed together) are complete sooner, and then no watcher task is started at
    all; a client that leaves a longer stream is noticed from then on.
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        body: AsyncIterator[Chunk],
        *,
        headers: Mapping[str, str] | None = None,
        watch_after: float = WATCH_AFTER_SECONDS,
    ) -> None:
        self.body_iterator = body
        self.status_code = 200
        self.background = None
        self.init_headers(headers)
        self._watch_after = watch_after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - ASGI servers always run the app in a task
            raise RuntimeError("an event stream is sent from a task")
        loop = asyncio.get_running_loop()
        sending = True
        gone = False
        watchers: list[asyncio.Task[None]] = []

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            # the body may have ended meanwhile: only a response still sending is cancelled
            if sending:
                gone = True
                task.cancel()

        def start_watching() -> None:
            if sending:
                watchers.append(loop.create_task(watch(), name="agentrunner-sse-disconnect"))

        # one timer for every stream, not one each: nearly every answer is complete long before it is due
        due = deadlines(self._watch_after)
        due.add(self, start_watching)
        try:
            await send(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            async for chunk, last in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": not last})
                if last:
                    break
            else:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not gone:
                raise
            task.uncancel()  # the watcher's cancel, not anyone else's: the client went away
        finally:
            sending = False
            due.discard(self)
            for watcher in watchers:
                watcher.cancel()
            closer = getattr(self.body_iterator, "aclose", None)
            if closer is not None:
                await closer()
