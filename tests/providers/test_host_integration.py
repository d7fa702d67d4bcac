"""Providers behind the real dispatcher: a runner streams a model, meets a provider error with its §9 class,
and reads a large tool result back through the artifact pull API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerPermissions,
    ChatMessage,
    DynamicFormItemSchema,
    I18nObject,
    RateLimitedError,
)
from agentrunner_host import Host
from agentrunner_host.catalog import ResourceCatalog
from agentrunner_host.definitions import ResourcePolicy
from agentrunner_host.facts_api import PullAPI
from agentrunner_host.providers.llm import ModelConfig, OpenAICompatibleModels
from agentrunner_host.providers.tools import HostTools, MCPServerConfig
from agentrunner_host.stores import HostStores
from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade
from fakes_openai import FakeOpenAIServer, FakeToolCall
from host.fakes import PLUGIN, binding, event, scripted
from loopback_uvicorn import serve_app

from .mcp_tiny_server import server as tiny_server

SCHEMA = [DynamicFormItemSchema(name="model", label=I18nObject(en_US="Model"), type="llm-model-selector")]
PERMISSIONS = AgentRunnerPermissions(
    models=["invoke", "stream"], tools=["call"], artifacts=["metadata", "read"]
)


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[HostStores]:
    engine = create_engine(default_sqlite_url(tmp_path))
    await upgrade(engine)
    opened = await HostStores.open(engine, data_dir=tmp_path)
    yield opened
    await opened.aclose()
    await engine.dispose()


async def _run(host: Host, script_binding: Any) -> list[Any]:
    return [r async for r in host.orchestrator.run(event("question"), script_binding)]


async def test_a_runner_streams_a_model_and_sees_rate_limits_as_their_error_class(stores: HostStores) -> None:
    """Deltas and assembled tool calls cross the dispatcher; a provider 429 reaches the runner as rate_limited."""
    seen: dict[str, Any] = {}

    async def script(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        chunks = [
            c async for c in api.models.stream("gpt", [ChatMessage(role="user", content=ctx.input.text)])
        ]
        seen["deltas"] = [c.delta for c in chunks if c.delta]
        seen["calls"] = [(t.name, t.arguments) for c in chunks for t in c.tool_calls]
        try:
            await api.models.invoke("gpt", [ChatMessage(role="user", content="again")])
        except RateLimitedError as exc:
            seen["error"] = (exc.code, exc.retryable, exc.details.get("retry_after"))
        yield out.message("done")
        yield out.complete()

    runner = scripted(script, permissions=PERMISSIONS, config_schema=SCHEMA)
    async with FakeOpenAIServer() as server:
        models = OpenAICompatibleModels(
            [
                ModelConfig(
                    id="gpt",
                    base_url=server.base_url,
                    model="gpt-fake",
                    capabilities=["streaming", "tool_calling"],
                )
            ]
        )
        host = Host.create(
            plugins={PLUGIN: [runner]},
            catalog=ResourceCatalog(models=models.resources()),
            models=models,
            stores=stores,
        )
        try:
            server.reply("streamed answer", tool_calls=[FakeToolCall("lookup", {"id": 7})])
            server.error(429, "slow down", headers={"retry-after": "3"})
            results = await _run(host, binding(config={"model": "gpt"}))
        finally:
            await host.aclose()
            await models.aclose()
    assert results[-1].type == "run.completed", results
    assert seen["deltas"] == ["streamed", " answer"]
    assert seen["calls"] == [("lookup", {"id": 7})]
    assert seen["error"] == ("rate_limited", True, 3.0)
    assert server.requests[0].body["stream"] is True


async def test_a_large_mcp_tool_result_is_read_back_through_the_artifact_api(stores: HostStores) -> None:
    """The artifact a large tool result is stored in belongs to the run's conversation, so the run can read it."""
    seen: dict[str, Any] = {}

    async def script(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        result = await api.tools.call("tiny__big", {"size": 50_000})
        assert result.artifact is not None
        seen["preview"] = result.content
        seen["bytes"] = await api.artifacts.read_all(result.artifact.artifact_id)
        yield out.message("done")
        yield out.complete()

    runner = scripted(script, permissions=PERMISSIONS, tool_calling=True)
    async with serve_app(tiny_server.streamable_http_app()) as port:
        tools = HostTools(
            mcp_servers=[
                MCPServerConfig(name="tiny", transport="streamable_http", url=f"http://127.0.0.1:{port}/mcp")
            ],
            python_tools=[],
            artifacts=stores.artifacts,
        )
        await tools.refresh()
        host = Host.create(
            plugins={PLUGIN: [runner]},
            catalog=ResourceCatalog(tools=tools.resources()),
            tools=tools,
            stores=stores,
            pull=PullAPI(stores, cursor_key=b"0123456789abcdef0123456789abcdef"),
        )
        try:
            results = await _run(host, binding(resource_policy=ResourcePolicy(tools=["tiny__big"])))
        finally:
            await host.aclose()
            await tools.aclose()
    assert results[-1].type == "run.completed", results
    assert seen["bytes"] == b"x" * 50_000
    assert seen["preview"] == "x" * 1000
