"""The SDK's external tool surface: which tools a snapshot allows, their schemas, and how calls map to actions."""

from __future__ import annotations

import subprocess
import sys

import pytest
from agentrunner.actions import ACTIONS, HistoryPageParams, StateSetParams
from agentrunner.errors import InvalidArgumentError, NotFoundError
from agentrunner.external_tools import (
    EXTERNAL_TOOLS,
    MAX_EXPOSED_NAME_LENGTH,
    external_tool,
    host_tool_exposed_name,
    invoke_exposed_tool,
    run_tool_surface,
)
from mcp_bridge_fakes import FakeTransport, make_api, make_context

WEATHER = {
    "tool_name": "weather",
    "description": "Weather by city.",
    "operations": ["call"],
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _names(ctx_kwargs: dict[str, object]) -> list[str]:
    ctx = make_context("run-x", **ctx_kwargs)  # pyright: ignore[reportArgumentType]
    return [t.name for t in run_tool_surface(ctx)]


def test_a_bare_snapshot_offers_only_the_current_event() -> None:
    """A run granted nothing sees just ``current_event``, which needs no grant."""
    assert _names({}) == ["current_event"]


def test_each_grant_adds_exactly_its_tools() -> None:
    """History, state, knowledge and host-tool grants each add their own tools and nothing else."""
    assert _names({"history": True}) == ["current_event", "history_page", "history_search"]
    assert _names({"state": True}) == ["current_event", "state_get", "state_set"]
    kb = {"kb_id": "kb-1", "name": "Docs", "operations": ["retrieve"]}
    assert _names({"knowledge_bases": [kb]}) == ["current_event", "knowledge_retrieve"]
    assert _names({"tools": [WEATHER]}) == ["current_event", "call_tool", "weather"]


def test_grants_without_the_needed_operation_add_nothing() -> None:
    """A tool granted only ``detail`` and a knowledge base granted only ``list`` are not callable."""
    tool = {**WEATHER, "operations": ["detail"]}
    kb = {"kb_id": "kb-1", "operations": ["list"]}
    assert _names({"tools": [tool], "knowledge_bases": [kb]}) == ["current_event"]


def test_surface_schemas_come_from_the_action_params_models() -> None:
    """Input schemas are generated from the same params models the back-call table validates with."""
    by_name = {t.name: t for t in EXTERNAL_TOOLS}
    page = by_name["history_page"]
    assert page.args is HistoryPageParams
    assert page.action is not None
    assert ACTIONS[page.action].params is HistoryPageParams
    assert set(page.input_schema["properties"]) == set(HistoryPageParams.model_fields)
    assert page.input_schema["type"] == "object"
    assert by_name["state_set"].args is StateSetParams
    assert by_name["state_set"].input_schema["required"] == ["scope", "key", "value"]


def test_side_effects_are_read_from_the_action_table() -> None:
    """Tools mapping to side-effecting actions are not read-only; the rest are."""
    writes = {t.name for t in EXTERNAL_TOOLS if not t.read_only}
    assert writes == {"call_tool", "state_set"}


def test_a_surface_tool_must_map_to_a_known_action() -> None:
    """Adding a tool for an action the protocol does not have fails at definition time."""
    with pytest.raises(ValueError, match="unknown action"):
        external_tool("nope", "x", HistoryPageParams, "history.rewrite", lambda ctx: True)


def test_hints_name_the_runs_own_resources() -> None:
    """The per-run description of ``call_tool`` and ``knowledge_retrieve`` lists the granted ids."""
    kb = {"kb_id": "kb-1", "name": "Docs", "operations": ["retrieve"]}
    ctx = make_context("run-x", tools=[WEATHER], knowledge_bases=[kb])
    by_name = {t.name: t for t in run_tool_surface(ctx)}
    assert "weather" in by_name["call_tool"].description
    assert "kb-1 (Docs)" in by_name["knowledge_retrieve"].description


def test_host_tool_names_are_kept_when_safe_and_rewritten_otherwise() -> None:
    """Safe names stay; unsafe, long or clashing names get a stable ``host_..._<hash>`` form."""
    assert host_tool_exposed_name("weather") == "weather"
    odd = host_tool_exposed_name("plugin/weather.get")
    assert odd.startswith("host_plugin_weather_get_")
    assert odd == host_tool_exposed_name("plugin/weather.get")
    assert host_tool_exposed_name("current_event").startswith("host_current_event_")
    long = host_tool_exposed_name("x" * 200)
    assert len(long) <= MAX_EXPOSED_NAME_LENGTH
    assert long != host_tool_exposed_name("x" * 199)


async def test_invoking_a_surface_tool_makes_the_mapped_back_call() -> None:
    """``history_page`` becomes one ``history.page`` back-call of the run, with validated params."""
    ctx = make_context("run-a", history=True)
    transport = FakeTransport({"history.page": lambda r: {"items": [], "has_more": False}})
    tool = next(t for t in run_tool_surface(ctx) if t.name == "history_page")
    result = await invoke_exposed_tool(tool, ctx, make_api(ctx, transport), {"limit": 3})
    assert result == {"items": [], "has_more": False}
    (request,) = transport.requests
    assert (request.run_id, request.action) == ("run-a", "history.page")
    assert request.params["limit"] == 3


async def test_invalid_arguments_fail_before_any_back_call() -> None:
    """Arguments that do not fit the args model raise ``InvalidArgumentError`` and reach no host."""
    ctx = make_context("run-a", history=True)
    transport = FakeTransport()
    tool = next(t for t in run_tool_surface(ctx) if t.name == "history_page")
    with pytest.raises(InvalidArgumentError, match="limit"):
        await invoke_exposed_tool(tool, ctx, make_api(ctx, transport), {"limit": "many"})
    assert transport.requests == []


async def test_current_event_answers_from_the_context_without_a_back_call() -> None:
    """``current_event`` returns the run's own event and input, and never calls the host."""
    ctx = make_context("run-a", text="hi there")
    transport = FakeTransport()
    tool = run_tool_surface(ctx)[0]
    result = await invoke_exposed_tool(tool, ctx, make_api(ctx, transport), None)
    assert result["run_id"] == "run-a"
    assert result["event"]["event_id"] == "evt-run-a"
    assert result["input"]["text"] == "hi there"
    assert transport.requests == []


async def test_a_host_tool_entry_calls_tools_call_with_the_real_name() -> None:
    """A per-resource tool becomes ``tools.call`` with the resource's own name and the arguments as parameters."""
    grant = {**WEATHER, "tool_name": "plugin/weather.get"}
    ctx = make_context("run-a", tools=[grant])
    transport = FakeTransport({"tools.call": lambda r: {"content": "sunny"}})
    tool = run_tool_surface(ctx)[-1]
    await invoke_exposed_tool(tool, ctx, make_api(ctx, transport), {"city": "Oslo"})
    (request,) = transport.requests
    assert request.params == {"tool_name": "plugin/weather.get", "parameters": {"city": "Oslo"}}


async def test_host_refusals_propagate_as_typed_errors() -> None:
    """An error of the host's dispatcher reaches the caller as the typed ``APIError``."""

    def refuse(request: object) -> dict[str, object]:
        raise NotFoundError("no such item")

    ctx = make_context("run-a", history=True)
    transport = FakeTransport({"history.search": refuse})
    tool = next(t for t in run_tool_surface(ctx) if t.name == "history_search")
    with pytest.raises(NotFoundError, match="no such item"):
        await invoke_exposed_tool(tool, ctx, make_api(ctx, transport), {"query": "x"})


def test_surface_names_are_unique_and_safe_for_every_harness() -> None:
    """Every surface tool has a distinct name within the exposed-name limits, and a description."""
    names = [t.name for t in EXTERNAL_TOOLS]
    assert len(set(names)) == len(names)
    assert all(len(n) <= MAX_EXPOSED_NAME_LENGTH and n.replace("_", "").isalnum() for n in names)
    assert all(t.description for t in EXTERNAL_TOOLS)


def test_a_host_tool_that_shares_a_safe_name_with_another_is_listed_once() -> None:
    """Two grants that project to the same exposed name do not produce duplicate MCP tools."""
    ctx = make_context("run-x", tools=[WEATHER, {**WEATHER, "description": "again"}])
    names = [t.name for t in run_tool_surface(ctx)]
    assert names == ["current_event", "call_tool", "weather"]


def test_the_sdk_surface_never_imports_mcp() -> None:
    """Importing ``agentrunner.external_tools`` in a fresh interpreter loads no ``mcp`` module."""
    code = "import sys, agentrunner.external_tools; print(sorted(m for m in sys.modules if m.split('.')[0] == 'mcp'))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
