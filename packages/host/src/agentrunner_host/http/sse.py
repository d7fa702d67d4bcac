"""Server-Sent Events framing (``text/event-stream``) with keep-alive comments.

The framing is a few lines of the WHATWG format; a library would add its own shutdown machinery on top of
the service's, which already ends every stream by cancelling the live runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Final

from agentrunner_host.service import ReplayItem

__all__ = ["KEEPALIVE_SECONDS", "SSE_HEADERS", "encode_event", "sse_stream"]

KEEPALIVE_SECONDS: Final = 15.0
"""A comment line is sent after this long without a result, so proxies keep the connection open."""
SSE_HEADERS: Final = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
"""Headers of every event stream."""


def encode_event(item: ReplayItem) -> bytes:
    """``id: <host_seq>`` / ``event: <type>`` / ``data: <result JSON>`` (compact JSON never spans lines)."""
    return f"id: {item.host_seq}\nevent: {item.type}\ndata: ".encode() + item.encoded + b"\n\n"


async def sse_stream(
    items: AsyncIterator[ReplayItem], *, keepalive: float = KEEPALIVE_SECONDS
) -> AsyncIterator[bytes]:
    """Frame *items*; a ``: keep-alive`` comment fills every quiet *keepalive* seconds."""
    iterator = aiter(items)
    pending: asyncio.Task[ReplayItem] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(iterator))
            done, _ = await asyncio.wait({pending}, timeout=keepalive)
            if not done:
                yield b": keep-alive\n\n"
                continue
            try:
                item = pending.result()
            except StopAsyncIteration:
                return
            finally:
                pending = None
            yield encode_event(item)
    finally:
        if pending is not None:
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
        closer = getattr(iterator, "aclose", None)
        if closer is not None:
            await closer()
