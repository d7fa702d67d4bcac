"""Server-Sent Events framing (``text/event-stream``) with keep-alive comments, and the response that sends it.

The framing is a few lines of the WHATWG format; a library would add its own shutdown machinery on top of
the service's, which already ends every stream by cancelling the live runs.

:class:`EventStreamResponse` replaces Starlette's ``StreamingResponse`` for event streams. Under uvicorn's
ASGI spec 2.3 that one runs the body in an anyio task group next to a task listening for the disconnect and
cancels the group through a cancel scope when the body ends (a task group, a second task, a cancel scope,
its delivery loop, and a task ``repr`` per response: about 7% of the loop thread's CPU per streamed echo
request, cProfile on thread time). Here the body is sent from the request's own task and one plain asyncio
task waits for the disconnect, cancelling the request's task only when the client went away first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Final

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agentrunner_host.service import ReplayItem

__all__ = ["KEEPALIVE_SECONDS", "SSE_HEADERS", "EventStreamResponse", "encode_event", "sse_stream"]

KEEPALIVE_SECONDS: Final = 15.0
"""A comment line is sent after this long without a result, so proxies keep the connection open."""
SSE_HEADERS: Final = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
"""Headers of every event stream."""
KEEPALIVE: Final = b": keep-alive\n\n"
"""The comment sent on a quiet stream."""
_READY: Final = 4
"""Framed events held for a slow client before the reader of the results waits (results are up to 1 MiB
each: host memory stays bounded by the feed's window, not by this queue)."""
_CHUNK_BYTES: Final = 64 * 1024
"""Ready events are joined into one chunk up to this size (larger events go out on their own, uncopied)."""


def encode_event(item: ReplayItem) -> bytes:
    """``id: <host_seq>`` / ``event: <type>`` / ``data: <result JSON>`` (compact JSON never spans lines)."""
    return f"id: {item.host_seq}\nevent: {item.type}\ndata: ".encode() + item.encoded + b"\n\n"


class _End:
    """The results ended (``error``: how, when they failed)."""

    __slots__ = ("error",)

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error


async def sse_stream(
    items: AsyncIterator[ReplayItem], *, keepalive: float = KEEPALIVE_SECONDS
) -> AsyncGenerator[bytes]:
    """Frame *items*; a ``: keep-alive`` comment fills every quiet *keepalive* seconds.

    One task reads *items* for the whole stream (not one per result, nor a wait with a timer around each), and
    the events that are ready together go out as one chunk: a run's results committed in one transaction
    reach the client in one write.
    """
    ready: asyncio.Queue[bytes | _End] = asyncio.Queue(maxsize=_READY)

    async def read() -> None:
        try:
            async for item in items:
                await ready.put(encode_event(item))
        except Exception as exc:  # handed to the response, which fails as it would have
            await ready.put(_End(exc))
            return
        await ready.put(_End())

    reader = asyncio.create_task(read(), name="agentrunner-sse-reader")
    try:
        while True:
            try:
                async with asyncio.timeout(keepalive):
                    first = await ready.get()
            except TimeoutError:
                yield KEEPALIVE
                continue
            frames: list[bytes] = []
            size = 0
            end: _End | None = None
            entry: bytes | _End = first
            while True:
                if isinstance(entry, _End):
                    end = entry
                    break
                frames.append(entry)
                size += len(entry)
                if ready.empty() or size >= _CHUNK_BYTES:
                    break
                entry = ready.get_nowait()
            if frames:
                yield frames[0] if len(frames) == 1 else b"".join(frames)
            if end is not None:
                if end.error is not None:
                    raise end.error
                return
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        closer = getattr(items, "aclose", None)
        if closer is not None:
            await closer()


class EventStreamResponse(Response):
    """A ``text/event-stream`` response sending each chunk of *body* as it comes; a client disconnect closes
    *body* (its ``finally`` blocks run) and ends the response quietly."""

    media_type = "text/event-stream"

    def __init__(self, body: AsyncIterator[bytes], *, headers: Mapping[str, str] | None = None) -> None:
        self.body_iterator = body
        self.status_code = 200
        self.background = None
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - ASGI servers always run the app in a task
            raise RuntimeError("an event stream is sent from a task")
        state = {"sending": True, "gone": False}

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            # the body may have ended meanwhile: only a response still sending is cancelled
            if state["sending"]:
                state["gone"] = True
                task.cancel()

        watcher = asyncio.get_running_loop().create_task(watch(), name="agentrunner-sse-disconnect")
        try:
            await send(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not state["gone"]:
                raise
            task.uncancel()  # the watcher's cancel, not anyone else's: the client went away
        finally:
            state["sending"] = False
            watcher.cancel()
            closer = getattr(self.body_iterator, "aclose", None)
            if closer is not None:
                await closer()
