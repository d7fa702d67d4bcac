"""SSE framing of a result stream: a batch of ready events is one chunk (bounded by bytes, read as it is
framed), a quiet feed gets keep-alive comments, the batch a run ends with is the last chunk, an error of the
results reaches the response, and closing the response closes the results. The live feed's batches. The
response that sends it: chunks as they come, no disconnect watcher for an answer complete at once, a client
disconnect ends it quietly and closes the stream, another cancel still cancels it."""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import cast

import pytest
from agentrunner_host.http.sse import KEEPALIVE, Chunk, EventStreamResponse, encode_event, sse_stream
from agentrunner_host.orchestrator import RunHandle
from agentrunner_host.service import ReplayItem, ResultBatch, RunFeed
from agentrunner_host.service.feeds import QUIET
from agentrunner_host.stores import ResultRecord


def _item(seq: int, size: int = 0) -> ReplayItem:
    return ReplayItem(seq, "message.delta", encoded=b'{"seq":%d,"pad":"%s"}' % (seq, b"x" * size))


async def _source(*batches: ResultBatch) -> AsyncIterator[ResultBatch]:
    for batch in batches:
        yield batch


class _LastBatch(ResultBatch):
    """A batch the run ended with."""

    @property
    def last(self) -> bool:
        return True


async def test_a_batch_of_ready_events_goes_out_as_one_chunk() -> None:
    """Three results ready together are one chunk: the events' frames joined, in order."""
    chunks = [chunk async for chunk in sse_stream(_source(ResultBatch([_item(1), _item(2), _item(3)])))]
    assert chunks == [(b"".join(encode_event(_item(seq)) for seq in (1, 2, 3)), False)]
    assert encode_event(_item(2)) == b'id: 2\nevent: message.delta\ndata: {"seq":2,"pad":""}\n\n'


async def test_the_batch_a_run_ends_with_is_the_last_chunk_and_ends_the_stream() -> None:
    """The end of the run is sent with its last results, and nothing is read after them."""
    after_end: list[int] = []

    async def batches() -> AsyncIterator[ResultBatch]:
        yield ResultBatch([_item(1)])
        yield _LastBatch([_item(2), _item(3)])
        after_end.append(1)
        yield ResultBatch([_item(4)])

    chunks = [chunk async for chunk in sse_stream(batches())]
    tail = encode_event(_item(2)) + encode_event(_item(3))
    assert chunks == [(encode_event(_item(1)), False), (tail, True)]
    assert after_end == []


async def test_a_batch_is_framed_in_chunks_of_at_most_64_kib_reading_one_result_at_a_time() -> None:
    """Large ready results are not all held at once: a chunk is sent as soon as the next event would take it
    past 64 KiB (an event larger than that goes alone), and the batch is read only as far as it was framed."""
    pulled: list[int] = []

    class Counting(ResultBatch):
        def __iter__(self) -> Iterator[ReplayItem]:
            for seq in range(1, 41):
                pulled.append(seq)
                yield _item(seq, 20 * 1024 if seq <= 30 else 100 * 1024)

    stream = sse_stream(_source(Counting()))
    first, more = await anext(stream)
    assert more is False
    assert first == b"".join(encode_event(_item(seq, 20 * 1024)) for seq in (1, 2, 3))
    assert pulled == [1, 2, 3, 4]
    rest = [chunk async for chunk, _ in stream]
    assert all(len(chunk) <= 64 * 1024 for chunk in rest[:-10])
    assert [len(chunk) > 100 * 1024 for chunk in rest[-10:]] == [True] * 10
    expected = b"".join(encode_event(_item(s, 20 * 1024 if s <= 30 else 100 * 1024)) for s in range(1, 41))
    assert first + b"".join(rest) == expected


async def test_a_quiet_batch_is_a_keep_alive_comment_then_the_next_event_follows() -> None:
    """The source's empty batch after its idle time is a comment; the results after it are sent as usual."""
    chunks = [chunk async for chunk in sse_stream(_source(QUIET, ResultBatch([_item(1)])))]
    assert chunks == [(KEEPALIVE, False), (encode_event(_item(1)), False)]


async def test_an_error_of_the_results_ends_the_response_with_it() -> None:
    """What was ready before the error is sent, then the error is raised to the response."""

    async def batches() -> AsyncIterator[ResultBatch]:
        yield ResultBatch([_item(1)])
        raise LookupError("gone")

    stream = sse_stream(batches())
    assert await anext(stream) == (encode_event(_item(1)), False)
    with pytest.raises(LookupError, match="gone"):
        await anext(stream)


async def test_closing_the_response_closes_the_results() -> None:
    """A client that goes away (the response closes its stream) ends the reader of the results."""
    closed = asyncio.Event()
    never = asyncio.Event()

    async def batches() -> AsyncIterator[ResultBatch]:
        try:
            yield ResultBatch([_item(1)])
            await never.wait()
        finally:
            closed.set()

    stream = sse_stream(batches())
    assert await anext(stream) == (encode_event(_item(1)), False)
    await stream.aclose()
    assert closed.is_set()


# -- the live feed's batches ----------------------------------------------------------------------------------


class FakeHandle:
    """The part of a run handle a feed reads: its id and its results by callback, released by the test."""

    run_id = "run_fake"

    def __init__(self) -> None:
        self.ready: deque[ReplayItem] = deque()
        self.ended = False
        self.listener: Callable[[], None] | None = None

    def subscribe(self, listener: Callable[[], None]) -> None:
        self.listener = listener
        listener()

    def unsubscribe(self) -> None:
        self.listener = None

    def take(self) -> ReplayItem | None:
        return self.ready.popleft() if self.ready else None

    def take_ready(self) -> list[ReplayItem]:
        ready = list(self.ready)
        self.ready.clear()
        return ready

    @property
    def drained(self) -> bool:
        return self.ended and not self.ready

    def release(self, *items: ReplayItem, end: bool = False) -> None:
        """Results committed (and the run's end, with *end*), told to the feed as a run's task does."""
        self.ready.extend(items)
        self.ended = self.ended or end
        if self.listener is not None:
            self.listener()


async def _no_replay(after: int, limit: int) -> list[ResultRecord]:
    raise AssertionError(f"the store was read after {after}")


async def test_a_live_feed_hands_out_the_ready_results_quiet_batches_and_the_end() -> None:
    """Results released together are one batch; a quiet feed gives an empty batch after the idle time; the
    batch read after the run's end says it is the last."""
    handle = FakeHandle()
    feed = RunFeed(cast(RunHandle, handle), event_id="evt_1", replay=_no_replay)
    batches = feed.batches(idle=0.01)
    quiet = await anext(batches)
    assert quiet.quiet and list(quiet) == [] and not quiet.last
    handle.release(_item(1), _item(2))
    batch = await anext(batches)
    assert [i.host_seq for i in batch] == [1, 2]
    assert not batch.last and not batch.quiet
    handle.release(_item(3), end=True)
    assert feed.done
    batch = await anext(batches)
    assert [i.host_seq for i in batch] == [3]
    assert batch.last
    assert [b async for b in batches] == []


async def test_a_feed_takes_results_whether_or_not_anyone_reads_and_tells_when_it_ended() -> None:
    """Without a reader the feed still takes every result from the handle (the run never waits on one); its
    end is reported once, and a late reader gets the window."""
    handle = FakeHandle()
    ended: list[str] = []
    feed = RunFeed(
        cast(RunHandle, handle), event_id="evt_1", replay=_no_replay, on_end=lambda f: ended.append(f.run_id)
    )
    handle.release(_item(1), _item(2))
    assert not handle.ready and feed.delivered == 2 and not feed.done
    handle.release(ReplayItem(3, "run.completed", encoded=b"{}"), end=True)
    assert feed.done and ended == ["run_fake"]
    assert handle.listener is None  # the feed lets go of its handle at the end
    await asyncio.wait_for(feed.ended(), timeout=30)
    batch = await anext(feed.batches(after=1))
    assert [i.host_seq for i in batch] == [2, 3] and batch.last


async def test_a_runs_terminal_result_waits_for_the_runs_end_so_both_go_out_together() -> None:
    """Results ending with the terminal one are handed out with the run's end (the batch is the last) when it
    follows; when it does not follow within the idle time, they are handed out without it."""
    handle = FakeHandle()
    feed = RunFeed(cast(RunHandle, handle), event_id="evt_1", replay=_no_replay)
    handle.release(_item(1), ReplayItem(2, "run.completed", encoded=b"{}"))

    async def first_batch() -> tuple[list[int], bool]:
        batch = await anext(feed.batches())
        return [i.host_seq for i in batch], batch.last  # read when handed out, as a response does

    reading = asyncio.create_task(first_batch())
    # the reader looks first (its task was scheduled first), then the end comes
    asyncio.get_running_loop().call_soon(functools.partial(handle.release, end=True))
    assert await reading == ([1, 2], True)
    assert feed.done

    handle = FakeHandle()
    feed = RunFeed(cast(RunHandle, handle), event_id="evt_2", replay=_no_replay)
    handle.release(ReplayItem(1, "run.failed", encoded=b"{}"))
    batches = feed.batches(idle=0.01)
    batch = await anext(batches)
    assert [i.host_seq for i in batch] == [1] and not batch.last
    handle.release(end=True)
    assert [b async for b in batches] == []


# -- the response ---------------------------------------------------------------------------------------------


class _Client:
    """The ASGI side of one streaming response: what was sent, and a disconnect to trigger."""

    def __init__(self) -> None:
        self.sent: list[dict[str, object]] = []
        self.tasks_at_send: list[int] = []
        self.body_seen = asyncio.Event()
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, object]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, object]) -> None:
        self.sent.append(message)
        self.tasks_at_send.append(len(asyncio.all_tasks()))
        if message.get("body"):
            self.body_seen.set()


async def test_the_response_sends_each_chunk_and_ends_with_the_last_without_a_watcher_task() -> None:
    """Headers, every chunk as it comes, the last one ending the body; an answer complete at once starts no
    disconnect watcher (the task count never grows) and leaves nothing behind."""

    async def body() -> AsyncIterator[Chunk]:
        yield b"one", False
        yield b"two", True

    client = _Client()
    before = len(asyncio.all_tasks())
    response = EventStreamResponse(body(), headers={"X-Run-Id": "r1"})
    await response({"type": "http"}, client.receive, client.send)  # pyright: ignore[reportArgumentType]
    start, *bodies = client.sent
    assert start["status"] == 200
    headers = dict(start["headers"])  # pyright: ignore[reportArgumentType, reportCallIssue]
    assert headers[b"x-run-id"] == b"r1"
    assert headers[b"content-type"].startswith(b"text/event-stream")
    assert [(m["body"], m["more_body"]) for m in bodies] == [(b"one", True), (b"two", False)]
    assert client.tasks_at_send == [before] * 3
    assert len(asyncio.all_tasks()) == before


async def test_a_body_that_ends_without_a_last_chunk_is_ended_by_the_response() -> None:
    """When the stream stops without saying its chunk was the last, an empty final body ends the answer."""

    async def body() -> AsyncIterator[Chunk]:
        yield b"one", False

    client = _Client()
    response = EventStreamResponse(body())
    await response({"type": "http"}, client.receive, client.send)  # pyright: ignore[reportArgumentType]
    assert [(m["body"], m["more_body"]) for m in client.sent[1:]] == [(b"one", True), (b"", False)]


async def test_a_client_that_goes_away_closes_the_stream_and_ends_the_response_quietly() -> None:
    """Once the response has sent for its watch delay, the disconnect cancels the send loop (not the caller):
    the body's ``finally`` runs, nothing is raised, the watcher does not outlive the response."""
    closed = asyncio.Event()
    never = asyncio.Event()

    async def body() -> AsyncIterator[Chunk]:
        try:
            yield b"first", False
            await never.wait()
        finally:
            closed.set()

    client = _Client()
    before = len(asyncio.all_tasks())
    response = EventStreamResponse(body(), watch_after=0.01)
    sending = asyncio.create_task(response({"type": "http"}, client.receive, client.send))  # pyright: ignore[reportArgumentType]
    await client.body_seen.wait()
    client.gone.set()
    await sending  # no CancelledError: the client's leaving is how a stream ends
    assert closed.is_set()
    assert not sending.cancelled()
    await asyncio.sleep(0)  # the cancelled watcher ends on the loop's next turn
    assert len(asyncio.all_tasks()) == before


async def test_a_cancel_from_elsewhere_still_cancels_the_response() -> None:
    """A shutdown cancelling the request's task is not mistaken for a disconnect."""
    never = asyncio.Event()

    async def body() -> AsyncIterator[Chunk]:
        yield b"first", False
        await never.wait()

    client = _Client()
    response = EventStreamResponse(body(), watch_after=0)
    sending = asyncio.create_task(response({"type": "http"}, client.receive, client.send))  # pyright: ignore[reportArgumentType]
    await client.body_seen.wait()
    sending.cancel()
    await asyncio.gather(sending, return_exceptions=True)
    assert sending.cancelled()
