"""Per-run call credentials through the MCP bridge (issue 17), against the real host: a runner that registers a
bridge run under a sibling run's id, with an API it built for that id, gets every relayed call refused
``unauthorized`` — the id alone is not the credential — while its own run's API is served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner
from agentrunner_host.access import StateOwner
from agentrunner_host.definitions import StatePolicy
from agentrunner_host.host import Host
from agentrunner_host.stores import HostStores
from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade
from agentrunner_mcp import BridgeServer
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from .fakes import PLUGIN, binding, event, scripted


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[HostStores]:
    engine = create_engine(default_sqlite_url(tmp_path))
    await upgrade(engine)
    opened = await HostStores.open(engine, data_dir=tmp_path)
    yield opened
    await opened.aclose()
    await engine.dispose()


@asynccontextmanager
async def session(url: str, token: str) -> AsyncGenerator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=10) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


async def test_a_bridge_run_registered_under_a_siblings_id_is_refused(stores: HostStores) -> None:
    owner = StateOwner("conversation", (f"plugin:{PLUGIN}/default", "b-1", "conv-victim", ""))
    await stores.state.set(owner, "secret", "victim's", runner_id=None)
    victim_live = asyncio.Event()
    seen: dict[str, Any] = {}

    async def script(ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        out = AgentRunner.emitter(ctx)
        text = ctx.input.text or ""
        if text == "hold":
            yield out.delta("holding")
            victim_live.set()
            await asyncio.sleep(3600)
        victim = text.removeprefix("forge:")
        forged_ctx = ctx.model_copy(update={"run_id": victim})
        forged_api = AgentRunAPI(api.transport, run_id=victim, deadline_at=ctx.runtime.deadline_at)
        async with BridgeServer() as bridge:
            with bridge.open_run(forged_ctx, forged_api) as forged:
                async with session(bridge.url, forged.token) as client:
                    seen["forged"] = await client.call_tool(
                        "state_get", {"scope": "conversation", "key": "secret"}
                    )
            with bridge.open_run(ctx, api) as own:
                async with session(bridge.url, own.token) as client:
                    seen["own"] = await client.call_tool(
                        "state_get", {"scope": "conversation", "key": "secret"}
                    )
        yield out.message("done")
        yield out.complete()

    host = Host.create(
        plugins={PLUGIN: [scripted(script)]},
        stores=stores,
        bindings=[binding(state_policy=StatePolicy(scopes=["conversation"]))],
    )
    try:
        victim = await host.orchestrator.start(
            event("hold", event_id="evt-v", conversation_id="conv-victim"),
            binding(state_policy=StatePolicy(scopes=["conversation"])),
        )
        await victim_live.wait()
        attacker = await host.orchestrator.start(
            event(f"forge:{victim.run_id}", event_id="evt-a", conversation_id="conv-attacker"),
            binding(state_policy=StatePolicy(scopes=["conversation"])),
        )
        _ = [i async for i in attacker.results()]
        await host.orchestrator.cancel(victim.run_id)
        victim.detach()
        await victim.outcome()
    finally:
        await host.aclose()
    forged = seen["forged"]
    assert forged.is_error is True
    assert forged.structured_content["error"]["code"] == "unauthorized"
    own = seen["own"]
    assert own.is_error is False and own.structured_content["exists"] is False
    audit = [r for r in await stores.events.for_run(victim.run_id) if r.event_type == "host.backcall"]
    assert [r.data["decision"] for r in audit] == ["unauthorized"]
    item = await stores.state.get(owner, "secret")
    assert item is not None and item.value == "victim's"
