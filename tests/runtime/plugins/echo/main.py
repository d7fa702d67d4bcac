"""Runners of the ``tests/echo`` fixture plugin; each one exercises one behaviour of the runtime."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunResult,
    APIError,
    I18nObject,
    codec,
)

# A plugin that prints while it is imported must not corrupt the wire either: the runtime protects stdout
# before importing plugin code, so this line lands in the host's log.
print("echo plugin imported")


def _manifest(name: str, **declared: object) -> AgentRunnerManifest:
    # manifest.yaml repeats these declarations; the host refuses a runner whose class disagrees with it.
    return AgentRunnerManifest.model_validate(
        {
            "id": f"plugin:tests/echo/{name}",
            "name": name,
            "label": I18nObject(en_US=f"echo {name}"),
            **declared,
        }
    )


class Streamer(AgentRunner):
    """Prints to stdout (which must not corrupt the wire), then streams ``config.count`` deltas and completes."""

    manifest = _manifest("streamer", capabilities={"streaming": True})

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        print("hello from print() token=supersecretvalue123")
        sys.stdout.write("raw stdout write\n")
        os.write(1, b"a write to fd 1\n")
        out = self.emitter(ctx)
        count = int(ctx.config.get("count", 50))
        for i in range(count):
            yield out.delta(f"d{i} ")
        yield out.message("done")
        yield out.complete()


class Caller(AgentRunner):
    """Back-calls: a unary ``state.get``, a streaming ``models.stream``, and a call for a foreign run id."""

    manifest = _manifest("caller", permissions={"models": ["stream"]})

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        value = await api.state.get("conversation", "k")
        yield out.message(codec.dumps_str({"state": value.value}))
        take = int(ctx.config.get("stream_take", 1_000_000))
        pieces: list[str] = []
        stream = api.models.stream("m1", [{"role": "user", "content": "hi"}])
        try:
            async for chunk in stream:
                pieces.append(chunk.delta or "")
                if len(pieces) >= take:
                    break
        finally:
            # Closing a stream left early sends call_cancel: the host stops serving it.
            await getattr(stream, "aclose")()  # noqa: B009 - AsyncIterator's annotation hides aclose
        yield out.message(codec.dumps_str({"stream": pieces}))
        foreign = AgentRunAPI(api.transport, run_id=str(ctx.config.get("foreign_run_id", "someone-else")))
        try:
            await foreign.state.get("conversation", "k")
            code = "none"
        except APIError as exc:
            code = exc.code
        yield out.message(codec.dumps_str({"foreign": code}))
        yield out.complete()


class Sleeper(AgentRunner):
    """Yields one delta, then sleeps until cancelled; records the cancellation in ``config.marker``."""

    manifest = _manifest("sleeper")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.delta("sleeping")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            marker = ctx.config.get("marker")
            if isinstance(marker, str):
                Path(marker).write_text("cancelled")  # noqa: ASYNC240 - a tiny file in a test fixture
            raise
        yield out.complete()


class Crasher(AgentRunner):
    """Yields one delta, then raises."""

    manifest = _manifest("crasher")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        yield self.emitter(ctx).delta("about to fail")
        raise RuntimeError("boom")


class EnvDump(AgentRunner):
    """Reports the environment variables named in ``config.names`` and its working directory."""

    manifest = _manifest("envdump")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        names = [str(n) for n in ctx.config.get("names", [])]
        seen = {name: os.environ.get(name) for name in names}
        out = self.emitter(ctx)
        yield out.message(codec.dumps_str({"env": seen, "cwd": os.getcwd(), "pid": os.getpid()}))
        yield out.complete()


class Spawner(AgentRunner):
    """Spawns a long-lived grandchild, reports its pid, then blocks the event loop (a hung runtime)."""

    manifest = _manifest("spawner")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        grandchild = subprocess.Popen(["sleep", "300"])  # noqa: ASYNC220 - a fixture that must outlive its parent
        yield self.emitter(ctx).message(codec.dumps_str({"grandchild": grandchild.pid}))
        time.sleep(300)  # noqa: ASYNC251 - blocks the loop on purpose: this runtime is hung


class Bigger(AgentRunner):
    """Yields a message of ``config.size`` characters, then completes."""

    manifest = _manifest("bigger")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.message("x" * int(ctx.config.get("size", 10)))
        yield out.complete()
