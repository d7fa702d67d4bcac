"""WireSession's back-call path, driven frame by frame: the test plays the runtime over an in-memory channel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentrunner import codec
from agentrunner_host.errors import RunnerTransportError
from agentrunner_host.runtime import WireSession

from .helpers import FakeBackCallHandler, make_request

_HANG_GUARD = 30.0
"""Seconds a wait for a frame may take: a hang guard for a loaded machine, not a timing claim."""


class FakeRuntimeChannel:
    """The host's end of a wire; the test writes the runtime's frames into ``inbox`` and reads ``sent``."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def feed(self, *frames: dict[str, Any]) -> None:
        """Queue *frames* at once, so the session reads them all in one turn of the loop."""
        for frame in frames:
            self.inbox.put_nowait(codec.dumps(frame) + b"\n")

    async def next_sent(self, kind: str) -> dict[str, Any]:
        """The next frame of *kind* the session sent (earlier frames of other kinds are skipped)."""
        async with asyncio.timeout(_HANG_GUARD):
            while True:
                frame = await self.sent.get()
                if frame["kind"] == kind:
                    return frame

    async def receive(self) -> bytes | None:
        return await self.inbox.get()

    async def send(self, data: bytes) -> None:
        self.send_nowait(data)

    async def send_batched(self, data: bytes) -> None:
        self.send_nowait(data)

    def send_nowait(self, data: bytes) -> None:
        self.sent.put_nowait(codec.loads(data))

    async def aclose(self) -> None:
        self.inbox.put_nowait(None)


class FakeAnswerHandler(FakeBackCallHandler):
    """Answers every unary call with a fixed result object."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__()
        self.result = result

    async def handle(self, request: Any) -> dict[str, Any]:
        self.requests.append(request)
        return self.result


@pytest.fixture
def channel() -> FakeRuntimeChannel:
    return FakeRuntimeChannel()


async def _live_run(channel: FakeRuntimeChannel, session: WireSession, run_id: str) -> asyncio.Task[None]:
    """Start *run_id* on *session* (the run frame is consumed) and keep it live until the task is cancelled."""

    async def consume() -> None:
        async for _ in session.run(make_request("echo", run_id=run_id)):
            pass

    session.start()
    task = asyncio.create_task(consume())
    await channel.next_sent("run")
    return task


def _call(call_id: Any, run_id: str, *, caller: str | None = None, **extra: Any) -> dict[str, Any]:
    request = {"run_id": run_id, "action": "state.get", "params": {"scope": "conversation", "key": "k"}}
    if caller is not None:
        request["caller"] = caller
    return {"kind": "call", "id": call_id, "request": request, **extra}


async def _stop(session: WireSession, run: asyncio.Task[None]) -> None:
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    await session.aclose()


async def test_a_unary_call_is_answered_with_the_handlers_result_and_the_connections_identity(
    channel: FakeRuntimeChannel,
) -> None:
    """The call is served with caller = the connection's plugin, whatever the frame said, and answered by id."""
    handler = FakeBackCallHandler()
    session = WireSession(channel, plugin_id="tests/echo", handler=handler)
    run = await _live_run(channel, session, "run-1")
    channel.feed(_call(3, "run-1", caller="someone/else", window=4))
    answer = await channel.next_sent("call_result")
    assert answer["id"] == 3
    assert answer["result"]["value"] == {"caller": "tests/echo", "run_id": "run-1"}
    await _stop(session, run)


async def test_a_call_id_the_frame_model_coerces_is_answered_under_the_id_it_means(
    channel: FakeRuntimeChannel,
) -> None:
    """A frame outside the fast path's exact shape (an id written as a string) still goes through CallFrame."""
    session = WireSession(channel, plugin_id="tests/echo", handler=FakeBackCallHandler())
    run = await _live_run(channel, session, "run-1")
    channel.feed(_call("7", "run-1"))
    answer = await channel.next_sent("call_result")
    assert answer["id"] == 7
    await _stop(session, run)


async def test_a_unary_call_with_a_window_below_one_is_a_protocol_error(channel: FakeRuntimeChannel) -> None:
    """The fast path refuses what CallFrame refuses: the session fails instead of serving the call."""
    handler = FakeBackCallHandler()
    session = WireSession(channel, plugin_id="tests/echo", handler=handler)
    run = await _live_run(channel, session, "run-1")
    channel.feed(_call(1, "run-1", window=0))
    with pytest.raises(RunnerTransportError, match="invalid 'call' frame"):
        async with asyncio.timeout(_HANG_GUARD):
            await run
    assert session.failure is not None
    assert session.failure.code == "runtime.protocol_error"
    assert handler.requests == []
    await session.aclose()


async def test_a_call_cancelled_before_its_task_ran_frees_its_id(channel: FakeRuntimeChannel) -> None:
    """call then call_cancel in one read: the handler never sees the call, and the id can be used again."""
    handler = FakeBackCallHandler()
    session = WireSession(channel, plugin_id="tests/echo", handler=handler)
    run = await _live_run(channel, session, "run-1")
    channel.feed(_call(1, "run-1"), {"kind": "call_cancel", "id": 1}, _call(1, "run-1"))
    answer = await channel.next_sent("call_result")
    assert answer["id"] == 1
    assert len(handler.requests) == 1
    assert session.alive
    await _stop(session, run)


async def test_a_result_that_is_not_json_is_answered_runtime_error(channel: FakeRuntimeChannel) -> None:
    """The handler's object cannot be encoded: the call fails with runtime_error, the session lives on."""
    session = WireSession(channel, plugin_id="tests/echo", handler=FakeAnswerHandler({"value": object()}))
    run = await _live_run(channel, session, "run-1")
    channel.feed(_call(2, "run-1"))
    error = await channel.next_sent("call_error")
    assert error["id"] == 2
    assert error["error"]["code"] == "runtime_error"
    assert "result is not JSON" in error["error"]["message"]
    assert session.alive
    await _stop(session, run)


async def test_a_result_over_the_frame_limit_is_answered_payload_too_large(
    channel: FakeRuntimeChannel,
) -> None:
    """A result the runtime would refuse as a frame is never sent: the call fails with payload_too_large."""
    handler = FakeAnswerHandler({"value": "x" * 20_000})
    session = WireSession(channel, plugin_id="tests/echo", handler=handler, max_frame_bytes=10_000)
    run = await _live_run(channel, session, "run-1")
    channel.feed(_call(2, "run-1"))
    error = await channel.next_sent("call_error")
    assert error["id"] == 2
    assert error["error"]["code"] == "payload_too_large"
    assert session.alive
    await _stop(session, run)


async def test_a_streaming_call_is_served_chunk_by_chunk_under_its_credit(
    channel: FakeRuntimeChannel,
) -> None:
    """Two chunks of credit: two chunks, then nothing until stream_credit, then the rest and call_end."""
    session = WireSession(channel, plugin_id="tests/echo", handler=FakeBackCallHandler(stream_chunks=3))
    run = await _live_run(channel, session, "run-1")
    request = {"run_id": "run-1", "action": "models.stream", "params": {}}
    channel.feed({"kind": "call", "id": 5, "request": request, "stream": True, "window": 2})
    first = [await channel.next_sent("chunk"), await channel.next_sent("chunk")]
    assert [c["chunk"] for c in first] == [{"delta": "c0"}, {"delta": "c1"}]
    assert channel.sent.empty()
    channel.feed({"kind": "stream_credit", "id": 5, "n": 5})
    assert (await channel.next_sent("chunk"))["chunk"] == {"delta": "c2"}
    assert (await channel.next_sent("call_end"))["id"] == 5
    await _stop(session, run)


async def test_the_run_frame_carries_the_requests_json_dump(channel: FakeRuntimeChannel) -> None:
    """The request goes out as model_dump(mode='json'); a NaN inside a JSON-valued field is written as null (as
    the dict path always did), never as a token the runtime's parser refuses."""
    session = WireSession(channel, plugin_id="tests/echo", handler=FakeBackCallHandler())
    session.start()
    for run_id, config in (("run-1", {"a": [1, "b"]}), ("run-2", {"a": float("nan")})):
        request = make_request("echo", run_id=run_id, config=config)
        stream = session.run(request)
        task = asyncio.create_task(anext(stream))
        frame = await channel.next_sent("run")
        expected = request.model_dump(mode="json")
        if run_id == "run-2":
            expected["context"]["config"]["a"] = None
        assert frame == {"kind": "run", "run_id": run_id, "request": expected, "window": frame["window"]}
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await stream.aclose()
    await session.aclose()
