"""Runners importable by a plugin process, for running the same orchestrator tests in and out of process.

This module imports only the SDK, so a child started with ``--plugin-dir tests/host`` can load it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
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
    DynamicFormItemSchema,
    I18nObject,
)

PLUGIN = "test/transport"


def _manifest(
    name: str,
    *,
    streaming: bool = True,
    permissions: AgentRunnerPermissions | None = None,
    config_schema: list[DynamicFormItemSchema] | None = None,
) -> AgentRunnerManifest:
    return AgentRunnerManifest(
        id=f"plugin:{PLUGIN}/{name}",
        name=name,
        label=I18nObject(en_US=name),
        capabilities=AgentRunnerCapabilities(streaming=streaming, interrupt=True),
        permissions=permissions or AgentRunnerPermissions(),
        config_schema=config_schema or [],
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


MODEL_FORM = [
    DynamicFormItemSchema(name="model", label=I18nObject(en_US="Model"), type="model-fallback-selector")
]


class FakeModelStreamRunner(AgentRunner):
    """Relays a granted model's stream (``models.stream``), one delta per chunk, as fast as it comes."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest(
        "modelstream", permissions=AgentRunnerPermissions(models=["stream"]), config_schema=MODEL_FORM
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        model = ctx.config["model"]
        assert isinstance(model, dict)
        async for chunk in api.models.stream(str(model["primary"]), [{"role": "user", "content": "go"}]):
            yield out.delta(chunk.delta or "")
        yield out.complete()


class FakeDieRunner(AgentRunner):
    """Kills its whole runtime process mid-run (out of process only: in process it would end the host)."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("die")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        yield self.emitter(ctx).delta("dying")
        await asyncio.sleep(0.01)
        if os.environ.get("AGENTRUNNER_PLUGIN_ID"):  # set only in a plugin process started by the host
            os._exit(3)
        yield self.emitter(ctx).fail("runner.refused", "not in a plugin process")


SWALLOW_RELEASE = threading.Event()
"""Set by an in-process test that must close its event loop: lets :class:`FakeSwallowRunner` stop."""


class FakeSwallowRunner(AgentRunner):
    """Swallows every cancellation (a hostile runner); with input ``spawn`` it first starts a child process and
    reports its pid."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("swallow")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        if ctx.input.text == "spawn":
            child = subprocess.Popen(["sleep", "600"])  # noqa: ASYNC220
            yield out.delta(f"pid:{child.pid}")
        else:
            yield out.delta("stuck")
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if SWALLOW_RELEASE.is_set():
                    raise
        yield out.complete()  # pragma: no cover


class FakeBlockingRunner(AgentRunner):
    """Blocks its event loop with a synchronous sleep: the whole runtime stops answering."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("blocking")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        yield self.emitter(ctx).delta("about to block")
        time.sleep(120)  # noqa: ASYNC251 - blocking the loop is the point
        yield self.emitter(ctx).complete()


class FakeForgerRunner(AgentRunner):
    """Reads and writes conversation state as the run named in its input (``forge:<run id>``), or its own."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("forger")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        text = ctx.input.text or ""
        if text == "hold":  # the victim: live until cancelled
            yield out.delta("holding")
            await asyncio.sleep(3600)
        target = text.removeprefix("forge:") if text.startswith("forge:") else ctx.run_id
        forged = (
            api
            if target == ctx.run_id
            else AgentRunAPI(api.transport, run_id=target, deadline_at=ctx.runtime.deadline_at)
        )
        try:
            value = await forged.state.get("conversation", "secret")
            await forged.state.set("conversation", "secret", "overwritten")
        except APIError as exc:
            yield out.message(f"denied:{exc.code}")
        else:
            yield out.message(f"read:{value.value}")
        yield out.complete()


class FakeNanStateRunner(AgentRunner):
    """Yields a raw state.updated dict whose value is NaN."""

    manifest: ClassVar[AgentRunnerManifest] = _manifest("nanstate")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        raw = {
            "type": "state.updated",
            "data": {"scope": "conversation", "key": "keep", "value": float("nan")},
        }
        yield raw  # type: ignore[misc]
        yield self.emitter(ctx).complete()


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
    FakeModelStreamRunner,
    FakeSwallowRunner,
    FakeBlockingRunner,
    FakeForgerRunner,
    FakeNanStateRunner,
    FakeDieRunner,
]
