"""The codex runner: one ``codex exec --json`` per event (OFFICIAL_RUNNER_PLUGINS §7.2)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult
from agentrunner_harness import run_harness

from .adapter import CodexAdapter
from .manifest import MANIFEST

__all__ = ["CodexRunner"]


class CodexRunner(AgentRunner):
    """Runs the Codex CLI non-interactively; see ``docs/runners/codex.md``."""

    manifest = MANIFEST

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        """One CLI run (runner-requirements §b.7, §b.9)."""
        async for result in run_harness(CodexAdapter(), ctx, api):
            yield result
