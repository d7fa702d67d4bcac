"""PluginRuntime's result frames, read off an in-memory channel: what the runner yields is what the host gets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from agentrunner import (
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunResult,
    I18nObject,
    MessageDeltaResult,
    codec,
)
from agentrunner.wire import PluginRuntime

from .helpers import make_request

_HANG_GUARD = 30.0
"""Seconds a wait for a frame may take: a hang guard for a loaded machine, not a timing claim."""


class FakeHostChannel:
    """The runtime's end of a wire; the test writes the host's frames into ``inbox`` and reads ``sent``."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def receive(self) -> bytes | None:
        return await self.inbox.get()

    async def send(self, data: bytes) -> None:
        self.send_nowait(data)

    async def send_batched(self, data: bytes) -> None:
        self.send_nowait(data)

    def send_nowait(self, data: bytes) -> None:
        assert data.endswith(b"\n")
        assert data.count(b"\n") == 1
        self.sent.put_nowait(codec.loads(data))

    async def aclose(self) -> None:
        pass


class FakeMixedRunner(AgentRunner):
    """Yields the emitter's kinds of result, one without a sequence and one whose usage was mutated to NaN."""

    manifest = AgentRunnerManifest(
        id="plugin:tests/echo/mixed", name="mixed", label=I18nObject(en_US="mixed")
    )

    def __init__(self) -> None:
        self.yielded: list[AgentRunResult] = []

    async def run(self, ctx: AgentRunContext, api: object) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        results: list[AgentRunResult] = [
            out.delta("a\nb"),
            out.message("the whole answer", metadata={"k": [1]}),
        ]
        results.append(
            MessageDeltaResult.model_validate({"run_id": ctx.run_id, "data": {"chunk": {"content": "x"}}})
        )
        final = out.complete(usage={"tokens": 1.5})
        final.data.usage["tokens"] = float("nan")  # past validation: JSON cannot carry it
        results.append(final)
        for result in results:
            self.yielded.append(result)
            yield result


async def test_result_frames_carry_each_results_json_dump_with_its_sequence() -> None:
    """Each result frame holds model_dump(mode='json') of what was yielded: its own sequence, else the next one,
    and NaN written as null (as the dict path always did), never as a token the host's parser refuses."""
    runner = FakeMixedRunner()
    runtime = PluginRuntime([runner])
    channel = FakeHostChannel()
    serving = asyncio.create_task(runtime.serve(channel))
    request = make_request("mixed", run_id="run-1")
    run_frame = {"kind": "run", "run_id": "run-1", "request": request.model_dump(mode="json"), "window": 64}
    channel.inbox.put_nowait(codec.dumps(run_frame) + b"\n")
    frames: list[dict[str, Any]] = []
    async with asyncio.timeout(_HANG_GUARD):
        while (frame := await channel.sent.get())["kind"] != "run_end":
            frames.append(frame)
    assert frame["error"] is None
    assert [f["sequence"] for f in frames] == [1, 2, 3, 3]
    expected = [r.model_dump(mode="json") for r in runner.yielded]
    expected[2]["sequence"] = 3  # the one without a sequence gets the one after the last
    expected[3]["data"]["usage"]["tokens"] = None
    assert [f["result"] for f in frames] == expected
    assert all(f["run_id"] == "run-1" for f in frames)
    channel.inbox.put_nowait(None)
    async with asyncio.timeout(_HANG_GUARD):
        await serving
