"""SSE framing of a result stream: ready events share one chunk, a quiet stream gets keep-alive comments, an
error of the results reaches the response, and closing the response closes the results. The response that
sends it: chunks as they come, a client disconnect ends it quietly and closes the stream, another cancel
still cancels it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from agentrunner_host.http.sse import KEEPALIVE, EventStreamResponse, encode_event, sse_stream
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


class _Client:
    """The ASGI side of one streaming response: what was sent, and a disconnect to trigger."""

    def __init__(self) -> None:
        self.sent: list[dict[str, object]] = []
        self.body_seen = asyncio.Event()
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, object]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, object]) -> None:
        self.sent.append(message)
        if message.get("body"):
            self.body_seen.set()


async def test_the_response_sends_each_chunk_then_ends() -> None:
    """Headers, every chunk as it comes, then the end of the body; the disconnect watcher does not outlive it."""

    async def body() -> AsyncIterator[bytes]:
        yield b"one"
        yield b"two"

    client = _Client()
    before = len(asyncio.all_tasks())
    response = EventStreamResponse(body(), headers={"X-Run-Id": "r1"})
    await response({"type": "http"}, client.receive, client.send)  # pyright: ignore[reportArgumentType]
    start, *bodies = client.sent
    assert start["status"] == 200
    headers = dict(start["headers"])  # pyright: ignore[reportArgumentType, reportCallIssue]
    assert headers[b"x-run-id"] == b"r1"
    assert headers[b"content-type"].startswith(b"text/event-stream")
    assert [(m["body"], m["more_body"]) for m in bodies] == [(b"one", True), (b"two", True), (b"", False)]
    await asyncio.sleep(0)  # the cancelled watcher ends on the loop's next turn
    assert len(asyncio.all_tasks()) == before


async def test_a_client_that_goes_away_closes_the_stream_and_ends_the_response_quietly() -> None:
    """The disconnect cancels the send loop (not the caller): the body's ``finally`` runs, nothing is raised."""
    closed = asyncio.Event()
    never = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        try:
            yield b"first"
            await never.wait()
        finally:
            closed.set()

    client = _Client()
    response = EventStreamResponse(body())
    sending = asyncio.create_task(response({"type": "http"}, client.receive, client.send))  # pyright: ignore[reportArgumentType]
    await client.body_seen.wait()
    client.gone.set()
    await sending  # no CancelledError: the client's leaving is how a stream ends
    assert closed.is_set()
    assert not sending.cancelled()


async def test_a_cancel_from_elsewhere_still_cancels_the_response() -> None:
    """A shutdown cancelling the request's task is not mistaken for a disconnect."""
    never = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield b"first"
        await never.wait()

    client = _Client()
    response = EventStreamResponse(body())
    sending = asyncio.create_task(response({"type": "http"}, client.receive, client.send))  # pyright: ignore[reportArgumentType]
    await client.body_seen.wait()
    sending.cancel()
    await asyncio.gather(sending, return_exceptions=True)
    assert sending.cancelled()
