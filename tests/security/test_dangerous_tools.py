"""Dangerous-tool classification: host tools that run commands, write files, reach the network or destroy data
are left out of a run unless its binding grants them explicitly, and every call of one is audited with its
classes. End to end: a real host, a real MCP server of tools, and a runner calling them through the real MCP
bridge with the ``mcp`` client, as a harness would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunnerPermissions,
    I18nObject,
)
from agentrunner import codec as json
from agentrunner_host import Host
from agentrunner_host.catalog import ResourceCatalog
from agentrunner_host.definitions import ResourcePolicy
from agentrunner_host.harness import BRIDGE_METADATA_KEY, HarnessPolicy
from agentrunner_host.providers.tools import HostTools, MCPServerConfig
from agentrunner_host.stores import HostStores
from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade
from agentrunner_host.tool_risk import classify_tool, grants_dangerous_tool, name_words
from host.fakes import PLUGIN, binding, event
from loopback_uvicorn import serve_app
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from . import mcp_risky_server

ALL_TOOLS = ["risky__run_shell", "risky__writeFile", "risky__tidy", "risky__lookup", "risky__sweep_cache"]


def test_names_and_annotations_classify_tools() -> None:
    """Words of the name (any case style) and the MCP hints give the classes; the operator's word replaces
    both, and a ``readOnlyHint`` never clears what the name says."""
    assert name_words("runShell-now_x") == ["run", "shell", "now", "x"]
    assert classify_tool("run_shell") == {"shell"}
    assert classify_tool("writeFile") == {"file_write"}
    assert classify_tool("http-fetch") == {"network"}
    assert classify_tool("drop_table") == {"destructive"}
    assert classify_tool("lookup") == frozenset()
    assert classify_tool("tidy", destructive_hint=True) == {"destructive"}
    assert classify_tool("lookup", open_world_hint=True) == {"network"}
    assert classify_tool("delete_file", destructive_hint=False) == {"file_write"}
    assert classify_tool("run_shell", declared=[]) == frozenset()
    assert classify_tool("lookup", declared=["file_write"]) == {"file_write"}


def test_a_grant_names_the_tool_or_every_one_of_its_classes() -> None:
    assert grants_dangerous_tool("t", (), ())
    assert grants_dangerous_tool("t", ("shell",), ("t",))
    assert grants_dangerous_tool("t", ("shell", "network"), ("shell", "network"))
    assert not grants_dangerous_tool("t", ("shell", "network"), ("shell",))
    assert not grants_dangerous_tool("t", ("shell",), ())


def _manifest() -> AgentRunnerManifest:
    return AgentRunnerManifest(
        id=f"plugin:{PLUGIN}/bridged",
        name="bridged",
        label=I18nObject(en_US="bridged"),
        capabilities=AgentRunnerCapabilities(tool_calling=True, mcp_bridge=True),
        permissions=AgentRunnerPermissions(tools=["detail", "call"]),
    )


class BridgeCaller(AgentRunner):
    """Lists the tools of its run's MCP bridge and calls every host tool by name through ``call_tool``,
    reporting what each call gave (as a harness CLI would see it)."""

    manifest = _manifest()

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[Any]:
        bridge = ctx.runtime.metadata[BRIDGE_METADATA_KEY]
        assert isinstance(bridge, dict)
        headers = {"Authorization": f"Bearer {bridge['token']}"}
        report: dict[str, Any] = {"calls": {}}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(str(bridge["url"]), http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            report["listed"] = sorted(t.name for t in (await client.list_tools()).tools)
            for name in ALL_TOOLS:
                args: dict[str, Any] = {"run_shell": {"command": "id"}, "lookup": {"word": "hi"}}.get(
                    name.split("__")[1], {}
                )
                if name.endswith("writeFile"):
                    args = {"path": "x", "text": "y"}
                result = await client.call_tool("call_tool", {"tool_name": name, "parameters": args})
                error = (result.structured_content or {}).get("error") if result.is_error else None
                report["calls"][name] = (error or {}).get("code", "ok") if result.is_error else "ok"
                if error:
                    report.setdefault("messages", {})[name] = error.get("message", "")
        out = self.emitter(ctx)
        yield out.message(json.dumps_str(report))
        yield out.complete()


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[HostStores]:
    engine = create_engine(default_sqlite_url(tmp_path))
    await upgrade(engine)
    opened = await HostStores.open(engine, data_dir=tmp_path)
    yield opened
    await opened.aclose()
    await engine.dispose()


async def _run_with(stores: HostStores, policy: ResourcePolicy) -> tuple[dict[str, Any], list[Any]]:
    """One run of :class:`BridgeCaller` under *policy*: its report and the run's ``host.backcall`` records."""
    mcp_risky_server.CALLS.clear()
    async with serve_app(mcp_risky_server.server.streamable_http_app()) as port:
        config = MCPServerConfig(
            name="risky",
            transport="streamable_http",
            url=f"http://127.0.0.1:{port}/mcp",
            tool_risks={"sweep_cache": ["file_write"]},
        )
        tools = HostTools(mcp_servers=[config], python_tools=[], artifacts=stores.artifacts)
        await tools.refresh()
        host = Host.create(
            plugins={PLUGIN: [BridgeCaller()]},
            catalog=ResourceCatalog(tools=tools.resources(), tool_risks=tools.risks()),
            tools=tools,
            stores=stores,
            harness=HarnessPolicy(),
        )
        try:
            results = [
                r
                async for r in host.orchestrator.run(event("go"), binding("bridged", resource_policy=policy))
            ]
        finally:
            await host.aclose()
            await tools.aclose()
    assert results[-1].type == "run.completed", results
    message = next(r for r in results if r.type == "message.completed")
    report = json.loads(message.data.message.text())
    records = await stores.events.for_run(results[-1].run_id)
    kinds = [r.event_type for r in records]
    # audit completeness: the run's start and end are recorded, and each call of the runner exactly once
    assert kinds[0] == "run.started" and kinds[-1] == "run.completed", kinds
    audit = [r for r in records if r.event_type == "host.backcall"]
    calls = [r for r in audit if r.data["action"] == "tools.call"]
    assert sorted(str(r.data["resource"]) for r in calls) == sorted(ALL_TOOLS), calls
    return report, audit


async def test_dangerous_tools_are_refused_unless_granted_and_every_call_is_audited(
    stores: HostStores,
) -> None:
    """All five tools are granted by name, only ``run_shell`` also as dangerous: the bridge lists the safe tool
    and ``run_shell``; the file writer, the annotated-destructive tool and the operator-classified one are
    refused (``unauthorized``, the message says why) and never reach the MCP server; each dangerous call,
    allowed or refused, has an audit record carrying its classes."""
    policy = ResourcePolicy(tools=ALL_TOOLS, dangerous_tools=["risky__run_shell"])
    report, audit = await _run_with(stores, policy)
    assert "risky__run_shell" in report["listed"] and "risky__lookup" in report["listed"]
    assert not {"risky__writeFile", "risky__tidy", "risky__sweep_cache"} & set(report["listed"])
    assert report["calls"] == {
        "risky__run_shell": "ok",
        "risky__writeFile": "unauthorized",
        "risky__tidy": "unauthorized",
        "risky__lookup": "ok",
        "risky__sweep_cache": "unauthorized",
    }
    assert "classified dangerous (file_write)" in report["messages"]["risky__writeFile"]
    assert "dangerous_tools" in report["messages"]["risky__tidy"]
    assert mcp_risky_server.CALLS == ["run_shell", "lookup"]
    by_tool = {r.data["resource"]: r.data for r in audit if r.data["action"] == "tools.call"}
    assert set(by_tool) == set(ALL_TOOLS)
    assert (by_tool["risky__run_shell"]["decision"], by_tool["risky__run_shell"]["risk"]) == (
        "allowed",
        ["shell"],
    )
    assert by_tool["risky__writeFile"]["decision"] == "unauthorized"
    assert by_tool["risky__writeFile"]["risk"] == ["file_write"]
    assert by_tool["risky__tidy"]["risk"] == ["destructive"]
    assert by_tool["risky__sweep_cache"]["risk"] == ["file_write"]
    assert "risk" not in by_tool["risky__lookup"]


async def test_a_binding_can_grant_dangerous_tools_by_class(stores: HostStores) -> None:
    """``dangerous_tools = ["file_write"]`` grants both file writers (by name and by the operator's word)
    and nothing else dangerous."""
    policy = ResourcePolicy(tools=ALL_TOOLS, dangerous_tools=["file_write"])
    report, audit = await _run_with(stores, policy)
    assert report["calls"] == {
        "risky__run_shell": "unauthorized",
        "risky__writeFile": "ok",
        "risky__tidy": "unauthorized",
        "risky__lookup": "ok",
        "risky__sweep_cache": "ok",
    }
    assert mcp_risky_server.CALLS == ["writeFile", "lookup", "sweep_cache"]
    allowed = {r.data["resource"]: r.data.get("risk") for r in audit if r.data["decision"] == "allowed"}
    assert allowed == {
        "risky__writeFile": ["file_write"],
        "risky__lookup": None,
        "risky__sweep_cache": ["file_write"],
    }
