"""Fake runners for the service tests (installed into a running service's registry in process)."""

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
    AgentRunResult,
    DynamicFormItemSchema,
    I18nObject,
)
from agentrunner_host.runtime.inprocess import InProcessConnection
from agentrunner_host.service import HostService

FAKE_PLUGIN = "test/fake"
GATED_RUNNER_ID = "plugin:test/fake/gated"
SECRET_RUNNER_ID = "plugin:test/fake/secretive"


class FakeGatedRunner(AgentRunner):
    """Streams one delta, then waits for ``gate`` before completing (or forever, until cancelled)."""

    manifest: ClassVar[AgentRunnerManifest] = AgentRunnerManifest(
        id=GATED_RUNNER_ID,
        name="gated",
        label=I18nObject(en_US="Fake gated"),
        capabilities=AgentRunnerCapabilities(streaming=True, interrupt=True),
    )

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.delta("first ")
        self.started.set()
        await self.gate.wait()
        yield out.delta("second")
        yield out.message("first second")
        yield out.complete()


class FakeSecretiveRunner(AgentRunner):
    """Declares a config field marked ``secret`` whose name does not look like a secret."""

    manifest: ClassVar[AgentRunnerManifest] = AgentRunnerManifest(
        id=SECRET_RUNNER_ID,
        name="secretive",
        label=I18nObject(en_US="Fake secretive"),
        config_schema=[
            DynamicFormItemSchema(
                name="access_code", label=I18nObject(en_US="Access code"), type="string", secret=True
            ),
            DynamicFormItemSchema(name="greeting", label=I18nObject(en_US="Greeting"), type="string"),
        ],
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.message(str(ctx.config.get("greeting", "hi")))
        yield out.complete()


def install_fakes(service: HostService, *runners: AgentRunner) -> None:
    """Register the fake plugin in the service's registry (its runners are then available like any other)."""
    service.host.registry.add(InProcessConnection(FAKE_PLUGIN, runners, handler=service.host.dispatcher))


FAST_RUNNER_ID = "plugin:test/fake/fast"


class FakeFastStreamer(AgentRunner):
    """Streams ``config.count`` deltas (default: a million) ``config.delay_ms`` apart (default 0: as fast as
    they are consumed), then completes; it yields to the event loop between deltas, so a cancellation lands at
    any of them."""

    manifest: ClassVar[AgentRunnerManifest] = AgentRunnerManifest(
        id=FAST_RUNNER_ID,
        name="fast",
        label=I18nObject(en_US="Fake fast streamer"),
        capabilities=AgentRunnerCapabilities(streaming=True, interrupt=True),
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        delay = float(ctx.config.get("delay_ms", 0)) / 1000
        for i in range(int(ctx.config.get("count", 1_000_000))):
            yield out.delta(f"d{i} ")
            await asyncio.sleep(delay)
        yield out.message("done")
        yield out.complete()
