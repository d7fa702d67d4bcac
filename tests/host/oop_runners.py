"""Runners importable by a plugin process, for running the same orchestrator tests in and out of process.

This module imports only the SDK, so a child started with ``--plugin-dir tests/host`` can load it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import ClassVar

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunnerPermissions,
    AgentRunResult,
    APIError,
    I18nObject,
)

PLUGIN = "test/transport"


def _manifest(
    name: str, *, streaming: bool = True, permissions: AgentRunnerPermissions | None = None
) -> AgentRunnerManifest:
    return AgentRunnerManifest(
        id=f"plugin:{PLUGIN}/{name}",
        name=name,
        label=I18nObject(en_US=name),
        capabilities=AgentRunnerCapabilities(streaming=streaming, interrupt=True),
        permissions=permissions or AgentRunnerPermissions(),
    )


class FakeEchoRunner(AgentRunner):
    """Streams the input back in two deltas, then the message and the terminal result."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("echo")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        text = ctx.input.text or ""
        yield out.delta(text[: len(text) // 2])
        yield out.delta(text[len(text) // 2 :])
        yield out.message(text)
        yield out.complete()


class FakeCrashRunner(AgentRunner):
    """Says one thing, then raises."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("crash")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        yield self.emitter(ctx).delta("part")
        raise ValueError("boom mid-stream")


class FakeHangRunner(AgentRunner):
    """Says one thing and then waits forever (until cancelled)."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("hang")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.delta("working")
        await asyncio.sleep(3600)
        yield out.complete()


class FakeFloodRunner(AgentRunner):
    """Ten thousand deltas."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("flood")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        for _ in range(10_000):
            yield out.delta("x")
        yield out.complete()


class FakeBigRunner(AgentRunner):
    """A 2 MiB message."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("big")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.message("x" * (2 * 1024 * 1024))
        yield out.complete()


class FakeLiarRunner(AgentRunner):
    """Claims another run's id."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("liar")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        yield self.emitter(ctx.model_copy(update={"run_id": "run_someone_else"})).message("not mine")
        yield self.emitter(ctx).complete()


class FakeSilentRunner(AgentRunner):
    """Completes without saying anything."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("silent")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        yield self.emitter(ctx).complete()


class FakeUnfinishedRunner(AgentRunner):
    """Talks but never ends its stream with a terminal result."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("unfinished")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        yield self.emitter(ctx).message("half")


class FakeNoStreamRunner(AgentRunner):
    """Streams although it does not declare streaming."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("nostream", streaming=False)

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.delta("a")
        yield out.message("a")
        yield out.complete()


class FakeBackCallRunner(AgentRunner):
    """Asks for state it is not granted and reports the error code it got."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("backcall")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        try:
            await api.state.get("workspace", "secret")
        except APIError as exc:
            yield out.message(f"denied:{exc.code}")
        else:
            yield out.message("allowed")
        yield out.complete()


ALL = [
    FakeEchoRunner,
    FakeCrashRunner,
    FakeHangRunner,
    FakeFloodRunner,
    FakeBigRunner,
    FakeLiarRunner,
    FakeSilentRunner,
    FakeUnfinishedRunner,
    FakeNoStreamRunner,
    FakeBackCallRunner,
]
