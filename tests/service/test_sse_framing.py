"""SSE framing of a result stream: ready events share one chunk, a quiet stream gets keep-alive comments, an
error of the results reaches the response, and closing the response closes the results."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from agentrunner_host.http.sse import KEEPALIVE, encode_event, sse_stream
from agentrunner_host.service import ReplayItem


def _item(seq: int) -> ReplayItem:
    return ReplayItem(seq, "message.delta", encoded=b'{"seq":%d}' % seq)


async def test_events_ready_together_go_out_as_one_chunk() -> None:
    """Three results available at once are one chunk: the events' frames joined, in order."""

    async def results() -> AsyncIterator[ReplayItem]:
        for seq in (1, 2, 3):
            yield _item(seq)

    chunks = [chunk async for chunk in sse_stream(results())]
    assert chunks == [b"".join(encode_event(_item(seq)) for seq in (1, 2, 3))]
    assert encode_event(_item(2)) == b'id: 2\nevent: message.delta\ndata: {"seq":2}\n\n'


async def test_a_quiet_stream_gets_a_keep_alive_comment_then_the_next_event() -> None:
    """While no result comes, a comment is sent every *keepalive* seconds; the result follows it."""
    go = asyncio.Event()

    async def results() -> AsyncIterator[ReplayItem]:
        yield _item(1)
        await go.wait()
        yield _item(2)

    stream = sse_stream(results(), keepalive=0.01)
    assert await anext(stream) == encode_event(_item(1))
    assert await anext(stream) == KEEPALIVE
    go.set()
    while (chunk := await anext(stream)) == KEEPALIVE:
        pass
    assert chunk == encode_event(_item(2))
    assert [rest async for rest in stream] == []


async def test_an_error_of_the_results_ends_the_response_with_it() -> None:
    """What was ready before the error is sent, then the error is raised to the response."""

    async def results() -> AsyncIterator[ReplayItem]:
        yield _item(1)
        raise LookupError("gone")

    stream = sse_stream(results())
    assert await anext(stream) == encode_event(_item(1))
    with pytest.raises(LookupError, match="gone"):
        await anext(stream)


async def test_closing_the_response_closes_the_results() -> None:
    """A client that goes away (the response closes its stream) ends the reader of the results."""
    closed = asyncio.Event()
    never = asyncio.Event()

    async def results() -> AsyncIterator[ReplayItem]:
        try:
            yield _item(1)
            await never.wait()
        finally:
            closed.set()

    stream = sse_stream(results())
    assert await anext(stream) == encode_event(_item(1))
    await stream.aclose()
    assert closed.is_set()
