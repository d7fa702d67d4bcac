"""The claude-code runner: one ``claude -p`` per event (OFFICIAL_RUNNER_PLUGINS §7.1)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult
from agentrunner_harness import run_harness

from .adapter import ClaudeCodeAdapter
from .manifest import MANIFEST

__all__ = ["ClaudeCodeRunner"]


class ClaudeCodeRunner(AgentRunner):
    """Runs the Claude Code CLI in print mode; see ``docs/runners/claude-code.md``."""

    manifest = MANIFEST

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        """One CLI run (runner-requirements §b.7–b.8)."""
        async for result in run_harness(ClaudeCodeAdapter(), ctx, api):
            yield result
