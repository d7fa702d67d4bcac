"""The ``security/audited`` test plugin: a runner making a known set of back-calls (a fake)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import ClassVar

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunnerPermissions,
    AgentRunResult,
    I18nObject,
    UnauthorizedError,
)


class Audited(AgentRunner):
    """``storage.set``, then (``config.hold``: until that file exists) ``storage.get`` and a ``tools.call``
    its manifest does not ask for (refused): three audit records, one refused."""

    manifest: ClassVar[AgentRunnerManifest] = AgentRunnerManifest(
        id="plugin:security/audited/audited",
        name="audited",
        label=I18nObject(en_US="Audited"),
        permissions=AgentRunnerPermissions(storage=["plugin"]),
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        await api.storage.set("plugin", "seen", b"1")
        hold = ctx.config.get("hold")
        if isinstance(hold, str):
            # the test reads the audit of the first call meanwhile; a file is a signal that works in every
            # run kind (host process, plugin process, remote runtime), an asyncio.Event in none but the first
            while not os.path.exists(hold):  # noqa: ASYNC110, ASYNC240 - polled across processes
                await asyncio.sleep(0.02)
        await api.storage.get("plugin", "seen")
        with contextlib.suppress(UnauthorizedError):
            await api.tools.call("shell", {})
        out = self.emitter(ctx)
        yield out.message("audited")
        yield out.complete()
