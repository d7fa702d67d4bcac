"""The stdio proxy: a real ``mcp`` stdio client drives ``python -m agentrunner_mcp.proxy`` against the bridge."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import httpx2
import pytest
import pytest_asyncio
from agentrunner import codec
from agentrunner_mcp import PROXY_TOKEN_ENV, PROXY_URL_ENV, BridgeServer, create_external_mcp_bridge
from agentrunner_mcp.proxy import initialize_answer
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_bridge_fakes import FakeTransport, make_api, make_context

pytestmark = pytest.mark.asyncio(loop_scope="module")

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncGenerator[BridgeServer]:
    async with BridgeServer() as bridge:
        yield bridge


def _params(command: list[str], env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=command[0], args=command[1:], env={**os.environ, **env})


async def test_the_proxy_lists_and_calls_the_runs_tools_over_stdio(server: BridgeServer) -> None:
    """Through the proxy command a stdio client sees the run's tools and its calls reach the run's host."""
    transport = FakeTransport(
        {"state.get": lambda r: {"scope": "runner", "key": "k", "value": 42, "exists": True}}
    )
    ctx = make_context("run-stdio", state=True)
    async with create_external_mcp_bridge(ctx, make_api(ctx, transport), server=server) as bridge:
        params = _params(bridge.proxy_command, bridge.env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("state_get", {"scope": "runner", "key": "k"})
            # The bridge closes under a running proxy: the harness's next call fails instead of reaching the host.
            bridge.close()
            with pytest.raises(MCPError, match=r'the bridge answered HTTP 401: \{"error":"invalid_token"'):
                await client.call_tool("state_get", {"scope": "runner", "key": "k"})
    assert names == ["current_event", "state_get", "state_set"]
    assert result.structured_content is not None
    assert result.structured_content["value"] == 42
    assert [(r.run_id, r.action) for r in transport.requests] == [("run-stdio", "state.get")]


async def test_the_proxy_refuses_to_start_without_its_settings() -> None:
    """Without ``AGENTRUNNER_MCP_URL``/``AGENTRUNNER_MCP_TOKEN`` the proxy exits 2 naming what is missing."""
    env = {k: v for k, v in os.environ.items() if k not in (PROXY_URL_ENV, PROXY_TOKEN_ENV)}
    env[PROXY_URL_ENV] = "http://127.0.0.1:9/mcp"
    done = await anyio.run_process(
        [sys.executable, "-m", "agentrunner_mcp.proxy"], env=env, check=False, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2
    assert PROXY_TOKEN_ENV in done.stderr.decode()


async def test_the_proxy_exits_by_itself_when_the_harness_closes_stdin() -> None:
    """A harness that closes stdin without a word (or dies) leaves no proxy behind: it exits 0 promptly."""
    env = {**os.environ, PROXY_URL_ENV: "http://127.0.0.1:9/mcp", PROXY_TOKEN_ENV: "t"}
    with anyio.fail_after(30):
        done = await anyio.run_process(
            [sys.executable, "-m", "agentrunner_mcp.proxy"], input=b"", env=env, check=False
        )
    assert done.returncode == 0, done.stderr.decode()


async def test_an_unreachable_bridge_ends_the_proxy_with_one_line() -> None:
    """When the bridge cannot be reached the proxy exits 1 with a one-line reason, not a traceback."""
    initialize = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        b'"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n'
    )
    env = {**os.environ, PROXY_URL_ENV: "http://127.0.0.1:9/mcp", PROXY_TOKEN_ENV: "t"}
    with anyio.fail_after(30):
        done = await anyio.run_process(
            [sys.executable, "-m", "agentrunner_mcp.proxy"], input=initialize, env=env, check=False
        )
    assert done.returncode == 1
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith("agentrunner-mcp-proxy: http://127.0.0.1:9/mcp: ConnectionRefusedError: ")


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "1999-01-01"])
async def test_the_proxys_early_initialize_answer_is_the_bridges_own(
    server: BridgeServer, version: str
) -> None:
    """The answer the proxy gives before connecting says what the bridge itself answers: same protocol version
    for the same request, same capabilities, same server name."""
    request = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": version}}
    ctx = make_context("run-early")
    with server.open_run(ctx, make_api(ctx, FakeTransport())) as reg:
        async with httpx2.AsyncClient(timeout=30) as http:
            reply = await http.post(
                server.url, json=request, headers={**MCP_HEADERS, "Authorization": f"Bearer {reg.token}"}
            )
    bridge = codec.loads(next(line[5:] for line in reply.text.splitlines() if line.startswith("data:")))
    early = codec.loads(initialize_answer(codec.dumps(request)) or b"null")
    assert early["id"] == bridge["id"]
    assert early["result"]["protocolVersion"] == bridge["result"]["protocolVersion"]
    assert early["result"]["capabilities"] == bridge["result"]["capabilities"]
    assert early["result"]["serverInfo"]["name"] == bridge["result"]["serverInfo"]["name"]


async def test_the_proxy_answers_initialize_before_it_can_reach_the_bridge() -> None:
    """``initialize`` is answered from the proxy's own description, so a harness sees the server connected at
    once; the bridge (here unreachable) is only contacted afterwards."""
    initialize = codec.dumps(INITIALIZE) + b"\n"
    env = {**os.environ, PROXY_URL_ENV: "http://127.0.0.1:9/mcp", PROXY_TOKEN_ENV: "t"}
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [sys.executable, "-m", "agentrunner_mcp.proxy"], input=initialize, env=env, check=False
        )
    (answer,) = [codec.loads(line) for line in done.stdout.splitlines()]
    assert answer["id"] == 1
    assert answer["result"]["capabilities"]["tools"] == {"listChanged": False}
    assert done.returncode == 1  # and then it could not reach the bridge


async def test_help_prints_the_usage_without_the_bridge_settings() -> None:
    """``agentrunner-mcp-proxy --help`` prints its help and exits 0, even with no bridge configured."""
    env = {k: v for k, v in os.environ.items() if k not in {PROXY_URL_ENV, PROXY_TOKEN_ENV}}
    done = await anyio.run_process(
        [sys.executable, "-m", "agentrunner_mcp.proxy", "--help"], env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert "usage: agentrunner-mcp-proxy" in out and PROXY_URL_ENV in out
