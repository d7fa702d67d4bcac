"""Errors say whose fault they are (issue 17): a model provider refusing the host's key is ``model.auth_failed``,
a model failure local-agent falls back from, never the host's ``unauthorized`` (reserved for grant refusals)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agentrunner import RunCompletedResult, RunnerId
from agentrunner_host import Host
from agentrunner_host.catalog import ResourceCatalog
from agentrunner_host.definitions import AgentBinding
from agentrunner_host.providers.llm import ModelConfig, OpenAICompatibleModels
from agentrunner_host.stores import HostStores
from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade
from agentrunner_runner_local_agent import RUNNER_ID, LocalAgentRunner
from fakes_openai import FakeOpenAIServer
from host.fakes import event


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[HostStores]:
    engine = create_engine(default_sqlite_url(tmp_path))
    await upgrade(engine)
    opened = await HostStores.open(engine, data_dir=tmp_path)
    yield opened
    await opened.aclose()
    await engine.dispose()


@pytest.mark.parametrize("status", [401, 403])
async def test_a_provider_refusing_the_key_on_the_primary_falls_back_and_is_recorded(
    stores: HostStores, status: int
) -> None:
    """Primary answers 401/403, the fallback answers: the run completes on the fallback, and the primary's failure
    is in ``model_failures`` with the provider-auth code."""
    async with FakeOpenAIServer() as server:
        models = OpenAICompatibleModels(
            [
                ModelConfig(id="revoked", base_url=server.base_url, model="m-a", capabilities=["streaming"]),
                ModelConfig(id="working", base_url=server.base_url, model="m-b", capabilities=["streaming"]),
            ]
        )
        plugin = RunnerId.parse(RUNNER_ID).plugin_id
        host = Host.create(
            plugins={plugin: [LocalAgentRunner()]},
            catalog=ResourceCatalog(models=models.resources()),
            models=models,
            stores=stores,
        )
        binding = AgentBinding(
            binding_id="b-auth",
            runner_id=RUNNER_ID,
            event_types=["*"],
            runner_config={"model": {"primary": "revoked", "fallbacks": ["working"]}},
        )
        try:
            server.error(status, "Incorrect API key provided")
            server.reply("from the fallback")
            results = [r async for r in host.orchestrator.run(event("question"), binding)]
        finally:
            await host.aclose()
            await models.aclose()
    terminal = results[-1]
    assert isinstance(terminal, RunCompletedResult), terminal
    meta = terminal.metadata
    assert meta["model_id"] == "working" and meta["fallback_used"] is True
    failures = meta["model_failures"]
    assert isinstance(failures, list) and len(failures) == 1
    assert failures[0]["model_id"] == "revoked"  # pyright: ignore[reportArgumentType, reportCallIssue, reportIndexIssue, reportOptionalSubscript]
    assert failures[0]["code"] == "model.auth_failed"  # pyright: ignore[reportArgumentType, reportCallIssue, reportIndexIssue, reportOptionalSubscript]
    assert [r.body["model"] for r in server.requests] == ["m-a", "m-b"]
