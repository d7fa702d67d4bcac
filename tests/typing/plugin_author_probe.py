# pyright: strict
"""Typing probe of the plugin-author API: what docs/tutorial-first-runner.md and docs/mcp-bridge.md show a
runner author writing, checked strictly, as pyright sees it in the author's own project.

Each line ending in ``# pyright: ignore[<rule>]`` is a misuse that must be reported with exactly that rule:
pyright flags an ignore comment that suppresses nothing (``reportUnnecessaryTypeIgnoreComment``), and
``test_plugin_author_probe.py`` checks the copy without the comments reports those errors and no other.
Nothing here runs; it is only type-checked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunResult,
    APIError,
    I18nObject,
    InvalidArgumentError,
    StateValue,
    codec,
)
from agentrunner.testing import FakeHost, RunOutcome, collect, make_context


class ProbeEcho(AgentRunner):
    manifest = AgentRunnerManifest(
        id="plugin:me/probe/default",
        name="default",
        label=I18nObject(en_US="Probe"),
        capabilities=AgentRunnerCapabilities(streaming=True, interrupt=True),
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        reply = "".join(ctx.input.text_parts())
        turns = 0
        if "conversation" in (ctx.context.available_apis.state_scopes or []):
            try:
                seen: StateValue = await api.state.get("conversation", "turns")
                count = seen.value if isinstance(seen.value, int) else 0
                await api.state.set("conversation", "turns", count + 1, expected_version=seen.version)
                turns = count + 1
            except InvalidArgumentError as exc:
                turns = -1 if exc.details.get("reason") == "version_conflict" else 0
            except APIError:
                turns = 0
        if ctx.delivery.supports_streaming:
            yield out.delta(reply)
        yield out.message(reply)
        yield out.complete(usage={"turn": turns, "bytes": codec.json_size(reply)})


async def unit_test_with_the_fake_host() -> str:
    host = FakeHost()
    outcome: RunOutcome = await collect(ProbeEcho(), make_context("hi", streaming=True), host=host)
    assert outcome.completed and outcome.failure is None
    return outcome.text


async def harness_with_the_bridge(ctx: AgentRunContext, api: AgentRunAPI, workdir: Path) -> list[str]:
    async with AgentRunner.create_external_mcp_bridge(ctx, api) as bridge:
        env: dict[str, str] = {**bridge.env, **bridge.claude_env}
        assert env
        return ["claude", "-p", "hi", *bridge.claude_cli_args(workdir), *bridge.tool_names]


async def misuse(ctx: AgentRunContext, api: AgentRunAPI, workdir: Path) -> None:
    out = AgentRunner.emitter(ctx)
    ctx.input.text_partz()  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    await api.state.gett("conversation", "k")  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
    await api.state.get("everywhere", "k")  # pyright: ignore[reportArgumentType]
    await api.state.set("conversation", "k", 1, 3)  # pyright: ignore[reportCallIssue]
    out.complete(usage="all of it")  # pyright: ignore[reportArgumentType]
    AgentRunnerCapabilities(streeming=True)  # pyright: ignore[reportCallIssue]
    await collect(ProbeEcho, make_context())  # pyright: ignore[reportArgumentType]
    async with AgentRunner.create_external_mcp_bridge(ctx, api) as bridge:
        bridge.claude_cli_arg(workdir)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
