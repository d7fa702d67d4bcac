"""The ``tests/slow`` fixture plugin: a runner that streams slowly (durability tests) or floods (memory tests)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunResult,
    I18nObject,
)


class Dripper(AgentRunner):
    """Streams ``config.count`` deltas of ``config.size`` characters, ``config.delay_ms`` apart, then completes.

    With ``config.state`` it first records ``state.updated`` (conversation scope, key ``progress``). The input
    text ``report`` makes it answer with the state it was given instead (``ctx.state`` as JSON).
    """

    manifest = AgentRunnerManifest(
        id="plugin:tests/slow/dripper",
        name="dripper",
        label=I18nObject(en_US="slow dripper"),
        capabilities=AgentRunnerCapabilities(streaming=True),
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        if ctx.input.text == "report":
            yield out.message(ctx.state.model_dump_json())
            yield out.complete()
            return
        if ctx.config.get("state"):
            yield out.state("conversation", "progress", {"run_id": ctx.run_id})
        count = int(ctx.config.get("count", 100))
        delay = float(ctx.config.get("delay_ms", 0)) / 1000
        filler = "x" * int(ctx.config.get("size", 0))
        for i in range(count):
            yield out.delta(f"d{i}{filler} ")
            if delay:
                await asyncio.sleep(delay)
        yield out.message("done")
        yield out.complete()
