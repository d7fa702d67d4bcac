"""The bridge over streamable HTTP with the real ``mcp`` client: listing, calls, and every way in being refused.

One ``BridgeServer`` serves the whole module, as a host would run it; each test opens its own runs on it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
import pytest_asyncio
from agentrunner import AgentRunAPI
from agentrunner.actions import BackCallRequest
from agentrunner.errors import UnauthorizedError
from agentrunner_mcp import BridgeServer, NonLoopbackBindError, RunRegistration
from agentrunner_mcp.conformance_fixture import FixtureTransport, fixture_context
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_bridge_fakes import FakeTransport, make_api, make_context
from mcp_types import TextContent

pytestmark = pytest.mark.asyncio(loop_scope="module")

WEATHER = {
    "tool_name": "weather",
    "description": "Weather by city.",
    "operations": ["call"],
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncGenerator[BridgeServer]:
    async with BridgeServer() as bridge:
        yield bridge


@asynccontextmanager
async def session(url: str, token: str) -> AsyncGenerator[ClientSession]:
    """An initialized MCP client session that presents *token*."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=10) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


async def raw_initialize(url: str, headers: dict[str, str]) -> httpx2.Response:
    """POST an ``initialize`` request with exactly *headers* (plus the MCP content headers)."""
    async with httpx2.AsyncClient(timeout=10) as http:
        return await http.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})


def _text(content: object) -> str:
    assert isinstance(content, TextContent)
    return content.text


async def test_two_runs_with_different_grants_list_different_tools(server: BridgeServer) -> None:
    """``tools/list`` answers each token with exactly what its own run's snapshot allows."""
    rich = make_context("run-rich", history=True, tools=[WEATHER])
    bare = make_context("run-bare")
    with (
        server.open_run(rich, make_api(rich, FakeTransport())) as reg_rich,
        server.open_run(bare, make_api(bare, FakeTransport())) as reg_bare,
    ):
        async with session(server.url, reg_rich.token) as client:
            rich_tools = [t.name for t in (await client.list_tools()).tools]
        async with session(server.url, reg_bare.token) as client:
            bare_tools = [t.name for t in (await client.list_tools()).tools]
    assert rich_tools == ["current_event", "history_page", "history_search", "call_tool", "weather"]
    assert bare_tools == ["current_event"]


async def test_listed_tools_carry_schemas_and_read_only_hints(server: BridgeServer) -> None:
    """Listed tools have the surface's object schemas and mark writes as not read-only."""
    ctx = make_context("run-s", state=True)
    with server.open_run(ctx, make_api(ctx, FakeTransport())) as reg:
        async with session(server.url, reg.token) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["state_set"].input_schema["required"] == ["scope", "key", "value"]
    assert tools["state_get"].annotations is not None
    assert tools["state_get"].annotations.read_only_hint is True
    assert tools["state_set"].annotations is not None
    assert tools["state_set"].annotations.read_only_hint is False


async def test_a_call_becomes_one_back_call_of_the_right_run(server: BridgeServer) -> None:
    """``history_page`` reaches the fake transport as a ``history.page`` request of the token's run."""
    page: dict[str, object] = {"items": [], "next_cursor": "c-9", "has_more": True}
    transport = FakeTransport({"history.page": lambda r: page})
    ctx = make_context("run-call", history=True)
    with server.open_run(ctx, make_api(ctx, transport)) as reg:
        async with session(server.url, reg.token) as client:
            result = await client.call_tool("history_page", {"limit": 7, "before_cursor": "c-1"})
    assert result.is_error is False
    assert result.structured_content == page
    (request,) = transport.requests
    assert isinstance(request, BackCallRequest)
    assert (request.run_id, request.action) == ("run-call", "history.page")
    assert request.params["limit"] == 7
    assert request.params["before_cursor"] == "c-1"


async def test_a_host_tool_answers_with_its_own_content(server: BridgeServer) -> None:
    """A granted host tool is callable under its own name and its text comes back unwrapped."""
    transport = FakeTransport(
        {"tools.call": lambda r: {"content": "sunny in " + str(r.params["parameters"])}}
    )
    ctx = make_context("run-tool", tools=[WEATHER])
    with server.open_run(ctx, make_api(ctx, transport)) as reg:
        async with session(server.url, reg.token) as client:
            result = await client.call_tool("weather", {"city": "Oslo"})
    assert _text(result.content[0]) == "sunny in {'city': 'Oslo'}"
    assert transport.requests[0].params == {"tool_name": "weather", "parameters": {"city": "Oslo"}}


async def test_a_host_refusal_is_an_mcp_tool_error(server: BridgeServer) -> None:
    """The dispatcher refusing a call (``unauthorized``) surfaces as ``isError`` with the code, not a crash."""

    def refuse(request: BackCallRequest) -> dict[str, object]:
        raise UnauthorizedError("conversation conv-other is not granted")

    transport = FakeTransport({"history.page": refuse})
    ctx = make_context("run-deny", history=True)
    with server.open_run(ctx, make_api(ctx, transport)) as reg:
        async with session(server.url, reg.token) as client:
            result = await client.call_tool("history_page", {"conversation_id": "conv-other"})
    assert result.is_error is True
    assert _text(result.content[0]) == "unauthorized: conversation conv-other is not granted"
    assert result.structured_content is not None
    assert result.structured_content["error"]["code"] == "unauthorized"


async def test_invalid_arguments_are_a_tool_error_and_reach_no_host(server: BridgeServer) -> None:
    """Arguments the args model rejects give ``isError`` with ``invalid_argument``; nothing is sent."""
    transport = FakeTransport()
    ctx = make_context("run-bad-args", state=True)
    with server.open_run(ctx, make_api(ctx, transport)) as reg:
        async with session(server.url, reg.token) as client:
            result = await client.call_tool("state_get", {"scope": "galaxy", "key": "k"})
    assert result.is_error is True
    assert _text(result.content[0]).startswith("invalid_argument: invalid arguments for state_get")
    assert transport.requests == []


async def test_a_tool_the_snapshot_does_not_allow_cannot_be_called(server: BridgeServer) -> None:
    """Calling a tool outside the run's list is a protocol error, and no back-call is made."""
    transport = FakeTransport()
    ctx = make_context("run-narrow")
    with server.open_run(ctx, make_api(ctx, transport)) as reg:
        async with session(server.url, reg.token) as client:
            with pytest.raises(MCPError, match="Unknown tool: history_page"):
                await client.call_tool("history_page", {})
    assert transport.requests == []


async def test_current_event_returns_the_runs_own_event(server: BridgeServer) -> None:
    """``current_event`` answers the token's run's event and input."""
    ctx = make_context("run-evt", text="what now?")
    with server.open_run(ctx, make_api(ctx, FakeTransport())) as reg:
        async with session(server.url, reg.token) as client:
            result = await client.call_tool("current_event", {})
    assert result.structured_content is not None
    assert result.structured_content["input"] == {"text": "what now?", "contents": [], "attachments": []}
    assert result.structured_content["event"]["event_id"] == "evt-run-evt"


async def test_a_missing_token_is_refused_with_401(server: BridgeServer) -> None:
    """A request without ``Authorization`` never reaches MCP."""
    response = await raw_initialize(server.url, {})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_a_wrong_token_is_refused_with_401(server: BridgeServer) -> None:
    """A token no run holds, or another scheme, is refused."""
    ctx = make_context("run-w")
    with server.open_run(ctx, make_api(ctx, FakeTransport())) as reg:
        assert (await raw_initialize(server.url, {"Authorization": "Bearer nope"})).status_code == 401
        basic = await raw_initialize(server.url, {"Authorization": f"Basic {reg.token}"})
        assert basic.status_code == 401
        good = await raw_initialize(server.url, {"Authorization": f"Bearer {reg.token}"})
        assert good.status_code == 200


async def test_a_finished_runs_token_is_refused(server: BridgeServer) -> None:
    """After the registration closes, the same token answers 401 and the open session stops working."""
    transport = FakeTransport({"history.page": lambda r: {"items": []}})
    ctx = make_context("run-done", history=True)
    reg: RunRegistration = server.open_run(ctx, make_api(ctx, transport))
    async with session(server.url, reg.token) as client:
        assert (await client.call_tool("history_page", {})).is_error is False
        reg.close()
        assert reg.closed
        with pytest.raises(MCPError, match="Server returned an error response"):
            await client.call_tool("history_page", {})
    assert (await raw_initialize(server.url, {"Authorization": f"Bearer {reg.token}"})).status_code == 401
    assert len(transport.requests) == 1


async def test_a_token_cannot_use_another_runs_session(server: BridgeServer) -> None:
    """Presenting run B's token with run A's session id is answered as if the session did not exist."""
    a = make_context("run-a", history=True)
    b = make_context("run-b")
    transport_a = FakeTransport({"history.page": lambda r: {"items": []}})
    with (
        server.open_run(a, make_api(a, transport_a)) as reg_a,
        server.open_run(b, make_api(b, FakeTransport())) as reg_b,
    ):
        response = await raw_initialize(server.url, {"Authorization": f"Bearer {reg_a.token}"})
        session_id = response.headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "history_page"}}
        headers = {
            **MCP_HEADERS,
            "Authorization": f"Bearer {reg_b.token}",
            "mcp-session-id": session_id,
            "mcp-protocol-version": "2025-06-18",
        }
        async with httpx2.AsyncClient(timeout=10) as http:
            hijack = await http.post(server.url, json=call, headers=headers)
    assert hijack.status_code == 404
    assert transport_a.requests == []


async def test_a_token_only_reaches_its_own_runs_data(server: BridgeServer) -> None:
    """Two live runs calling the same tool each reach only their own run id on the host."""
    transport = FakeTransport({"history.page": lambda r: {"items": [], "next_cursor": r.run_id}})
    one = make_context("run-one", history=True)
    two = make_context("run-two", history=True)
    with (
        server.open_run(one, make_api(one, transport)) as reg_one,
        server.open_run(two, make_api(two, transport)) as reg_two,
    ):
        async with session(server.url, reg_two.token) as client:
            result = await client.call_tool("history_page", {})
    assert reg_one.run_id == "run-one"
    assert result.structured_content is not None
    assert result.structured_content["next_cursor"] == "run-two"
    assert [r.run_id for r in transport.requests] == ["run-two"]


async def test_a_rebinding_host_header_is_rejected(server: BridgeServer) -> None:
    """A request naming a foreign Host (DNS rebinding) is refused with 421 even with a valid token."""
    ctx = make_context("run-dns")
    with server.open_run(ctx, make_api(ctx, FakeTransport())) as reg:
        auth = {"Authorization": f"Bearer {reg.token}"}
        evil_host = await raw_initialize(server.url, {**auth, "Host": f"evil.example:{server.port}"})
        evil_origin = await raw_initialize(server.url, {**auth, "Origin": "http://evil.example"})
        no_token_evil = await raw_initialize(server.url, {"Host": "evil.example"})
    assert evil_host.status_code == 421
    assert evil_origin.status_code == 403
    assert no_token_evil.status_code == 421


async def test_other_paths_are_not_found(server: BridgeServer) -> None:
    """Only the MCP endpoint is served."""
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.get(server.url.replace("/mcp", "/admin"))
    assert response.status_code == 404


async def test_a_non_loopback_address_needs_explicit_consent() -> None:
    """Binding beyond loopback is refused unless ``allow_non_loopback=True``."""
    with pytest.raises(
        NonLoopbackBindError,
        match=r"refusing to listen on non-loopback address '0\.0\.0\.0'; pass allow_non_loopback=True to do",
    ):
        BridgeServer(host="0.0.0.0")
    assert BridgeServer(host="0.0.0.0", allow_non_loopback=True).host == "0.0.0.0"
    assert BridgeServer(host="::1").host == "::1"


async def test_an_api_bound_to_another_run_is_rejected() -> None:
    """``open_run`` refuses an API client whose run id is not the context's."""
    ctx = make_context("run-1")
    other = make_context("run-2")
    with pytest.raises(ValueError, match="run-2"):
        BridgeServer().open_run(ctx, make_api(other, FakeTransport()))


async def test_the_conformance_fixture_serves_token_less_requests_only_while_open() -> None:
    """The anonymous fixture run answers requests without a token; closing it restores the 401."""
    ctx = fixture_context()
    async with BridgeServer() as own:
        fixture = own.open_anonymous_fixture_run(ctx, AgentRunAPI(FixtureTransport(), run_id=ctx.run_id))
        async with (
            httpx2.AsyncClient(timeout=10) as http,
            streamable_http_client(own.url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            simple = await client.call_tool("test_simple_text", {})
            failing = await client.call_tool("test_error_handling", {})
        assert (await raw_initialize(own.url, {"Authorization": "Bearer wrong"})).status_code == 401
        fixture.close()
        assert (await raw_initialize(own.url, {})).status_code == 401
    assert _text(simple.content[0]) == "This is a simple text response for testing."
    assert failing.is_error is True


async def test_the_anonymous_fixture_is_refused_off_loopback() -> None:
    """A server bound beyond loopback never accepts token-less requests."""
    ctx = make_context("run-anon")
    wide = BridgeServer(host="0.0.0.0", allow_non_loopback=True)
    with pytest.raises(
        NonLoopbackBindError, match="an anonymous fixture run is only allowed on a loopback server"
    ):
        wide.open_anonymous_fixture_run(ctx, make_api(ctx, FakeTransport()))


async def test_closing_a_run_ends_its_open_event_stream(server: BridgeServer) -> None:
    """A harness's standing GET stream of a run ends as soon as the run's registration closes."""
    ctx = make_context("run-stream")
    reg = server.open_run(ctx, make_api(ctx, FakeTransport()))
    auth = {"Authorization": f"Bearer {reg.token}"}
    async with httpx2.AsyncClient(timeout=10) as http:
        init = await http.post(server.url, json=INITIALIZE, headers={**MCP_HEADERS, **auth})
        get_headers = {
            **auth,
            "Accept": "text/event-stream",
            "mcp-session-id": init.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        async with http.stream("GET", server.url, headers=get_headers) as stream:
            assert stream.status_code == 200
            reg.close()
            with anyio.fail_after(5):
                async for _ in stream.aiter_bytes():
                    pass


async def test_stopping_a_server_does_not_wait_for_idle_streams() -> None:
    """``stop`` ends open sessions itself instead of waiting out uvicorn's grace period."""
    ctx = make_context("run-stop")
    own = BridgeServer()
    await own.start()
    reg = own.open_run(ctx, make_api(ctx, FakeTransport()))
    auth = {"Authorization": f"Bearer {reg.token}"}
    async with httpx2.AsyncClient(timeout=10) as http:
        init = await http.post(own.url, json=INITIALIZE, headers={**MCP_HEADERS, **auth})
        get_headers = {
            **auth,
            "Accept": "text/event-stream",
            "mcp-session-id": init.headers["mcp-session-id"],
        }
        async with http.stream("GET", own.url, headers=get_headers) as stream:
            assert stream.status_code == 200
            await own.stop()  # an open stream must not hold it up (pytest-timeout guards a hang)
    assert own.open_runs == 0


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
async def test_every_protocol_era_reaches_only_the_tokens_run(server: BridgeServer, mode: str) -> None:
    """``mcp.Client`` in the handshake era, the stateless 2026-07-28 era and auto mode lists and calls alike."""
    transport = FakeTransport({"history.page": lambda r: {"items": [], "next_cursor": r.run_id}})
    ctx = make_context(f"run-{mode}", history=True)
    with server.open_run(ctx, make_api(ctx, transport)) as reg:
        headers = {"Authorization": f"Bearer {reg.token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=10) as http,
            Client(streamable_http_client(server.url, http_client=http), mode=mode) as client,
        ):
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("history_page", {})
    assert names == ["current_event", "history_page", "history_search"]
    assert result.structured_content == {"items": [], "next_cursor": f"run-{mode}"}


async def test_the_stateless_era_refuses_a_wrong_token(server: BridgeServer) -> None:
    """The 2026-07-28 per-request path is behind the same bearer check as the handshake era."""
    modern = {"mcp-protocol-version": "2026-07-28"}
    refused = await raw_initialize(server.url, {**modern, "Authorization": "Bearer nope"})
    assert refused.status_code == 401
    async with (
        httpx2.AsyncClient(headers={"Authorization": "Bearer nope"}, timeout=10) as http,
    ):
        with pytest.raises(ExceptionGroup) as info:  # noqa: PT011 - what the group holds is checked below
            async with Client(
                streamable_http_client(server.url, http_client=http), mode="2026-07-28"
            ) as client:
                await client.list_tools()
    assert info.group_contains(MCPError, depth=None)


async def test_a_transport_fault_is_a_generic_tool_error_without_details(
    server: BridgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A non-protocol exception in the back-call path is logged and reaches the harness as ``runtime_error``."""

    def explode(request: BackCallRequest) -> dict[str, object]:
        raise OSError("socket to host at 10.0.0.7 reset")

    ctx = make_context("run-fault", history=True)
    with server.open_run(ctx, make_api(ctx, FakeTransport({"history.page": explode}))) as reg:
        async with session(server.url, reg.token) as client:
            result = await client.call_tool("history_page", {})
    assert result.is_error is True
    assert _text(result.content[0]) == "runtime_error: history_page failed inside the bridge"
    assert "10.0.0.7" not in _text(result.content[0])
    assert any("run-fault" in record.getMessage() for record in caplog.records)


async def test_a_fixed_port_server_knows_its_url_before_starting() -> None:
    """Embedding hosts that pick the port can register runs (and print configs) before serving."""
    ctx = make_context("run-embed")
    fixed = BridgeServer(port=47123)
    with fixed.open_run(ctx, make_api(ctx, FakeTransport())) as reg:
        assert reg.url == "http://127.0.0.1:47123/mcp"
