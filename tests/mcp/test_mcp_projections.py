"""``create_external_mcp_bridge`` and the Claude Code / Codex configurations it projects."""

from __future__ import annotations

import stat
import sys
import tomllib
from pathlib import Path

import httpx2
import pytest
from agentrunner import codec
from agentrunner_mcp import (
    CLAUDE_CONFIG_FILE,
    CODEX_CONFIG_FILE,
    PROXY_TOKEN_ENV,
    PROXY_URL_ENV,
    BridgeEndpoint,
    create_external_mcp_bridge,
)
from agentrunner_mcp.projections import codex_cli_overrides, codex_config_toml
from mcp_bridge_fakes import FakeTransport, make_api, make_context

ENDPOINT = BridgeEndpoint(
    url="http://127.0.0.1:4321/mcp",
    token="tok-secret",
    server_name="agentrunner",
    tool_names=("current_event", "history_page"),
)
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


async def test_the_helper_serves_the_run_only_inside_its_block(tmp_path: Path) -> None:
    """Without a shared server the helper starts its own; the token works inside the block and is refused after."""
    ctx = make_context("run-h", history=True)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with create_external_mcp_bridge(ctx, make_api(ctx, FakeTransport())) as bridge:
        assert bridge.tool_names == ("current_event", "history_page", "history_search")
        assert bridge.env == {PROXY_URL_ENV: bridge.url, PROXY_TOKEN_ENV: bridge.token}
        auth = {**headers, "Authorization": f"Bearer {bridge.token}"}
        async with httpx2.AsyncClient(timeout=10) as http:
            inside = await http.post(bridge.url, json=INIT, headers=auth)
        written = bridge.claude_cli_args(tmp_path)
    assert inside.status_code == 200
    assert bridge.closed
    assert written[:3] == ["--mcp-config", str(tmp_path / CLAUDE_CONFIG_FILE), "--strict-mcp-config"]
    async with httpx2.AsyncClient(timeout=10) as http:
        with pytest.raises(httpx2.ConnectError, match="All connection attempts failed"):
            await http.post(bridge.url, json=INIT, headers=auth)


async def test_claude_http_config_points_at_the_bridge_with_the_token(tmp_path: Path) -> None:
    """The Claude ``--mcp-config`` file names one HTTP server with the run's bearer header, owner-only."""
    ctx = make_context("run-c", tools=[{"tool_name": "weather", "operations": ["call"]}])
    async with create_external_mcp_bridge(ctx, make_api(ctx, FakeTransport())) as bridge:
        args = bridge.claude_cli_args(tmp_path)
        path = tmp_path / CLAUDE_CONFIG_FILE
        config = codec.loads(path.read_bytes())
        url, token = bridge.url, bridge.token
    assert config == {
        "mcpServers": {
            "agentrunner": {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}
        }
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert args == [
        "--mcp-config",
        str(path),
        "--strict-mcp-config",
        "--allowedTools",
        "mcp__agentrunner__current_event,mcp__agentrunner__call_tool,mcp__agentrunner__weather",
    ]


async def test_claude_stdio_config_launches_the_proxy_with_its_env(tmp_path: Path) -> None:
    """The stdio projection runs the proxy module with this interpreter and hands it endpoint and token."""
    ctx = make_context("run-cs")
    async with create_external_mcp_bridge(ctx, make_api(ctx, FakeTransport())) as bridge:
        path = bridge.write_claude_config(tmp_path, transport="stdio")
        server = codec.loads(path.read_bytes())["mcpServers"]["agentrunner"]
        assert server == {
            "type": "stdio",
            "command": sys.executable,
            "args": ["-m", "agentrunner_mcp.proxy"],
            "env": {PROXY_URL_ENV: bridge.url, PROXY_TOKEN_ENV: bridge.token},
        }
        assert bridge.claude_allowed_tools == ["mcp__agentrunner__current_event"]


def test_codex_http_entry_is_required_pre_approved_and_keeps_the_token_out() -> None:
    """The Codex HTTP table has ``required``, ``default_tools_approval_mode`` and reads the token from env."""
    text = codex_config_toml(ENDPOINT)
    assert "tok-secret" not in text
    assert tomllib.loads(text) == {
        "mcp_servers": {
            "agentrunner": {
                "url": "http://127.0.0.1:4321/mcp",
                "bearer_token_env_var": PROXY_TOKEN_ENV,
                "required": True,
                "default_tools_approval_mode": "approve",
            }
        }
    }


def test_codex_stdio_entry_launches_the_proxy_without_writing_the_token() -> None:
    """The Codex stdio table starts the proxy, forwards its two variables from Codex's env, and is pre-approved."""
    text = codex_config_toml(ENDPOINT, transport="stdio")
    assert "tok-secret" not in text
    assert tomllib.loads(text)["mcp_servers"]["agentrunner"] == {
        "command": sys.executable,
        "args": ["-m", "agentrunner_mcp.proxy"],
        "env_vars": [PROXY_URL_ENV, PROXY_TOKEN_ENV],
        "required": True,
        "default_tools_approval_mode": "approve",
    }


def test_codex_overrides_carry_the_same_entry_as_dash_c_arguments() -> None:
    """Each ``-c`` override parses as TOML to the same key and value as the file."""
    args = codex_cli_overrides(ENDPOINT)
    assert args[0::2] == ["-c"] * 4
    parsed: dict[str, object] = {}
    for assignment in args[1::2]:
        parsed.update(tomllib.loads(assignment)["mcp_servers"]["agentrunner"])
    assert tomllib.loads(codex_config_toml(ENDPOINT))["mcp_servers"]["agentrunner"] == parsed
    assert parsed["required"] is True


def test_toml_strings_survive_quotes_and_backslashes() -> None:
    """Values with quotes, backslashes and newlines round-trip through the TOML writer."""
    odd = BridgeEndpoint(url='http://h/"a"\\b\n', token="t", server_name="x-1", tool_names=())
    entry = tomllib.loads(codex_config_toml(odd))["mcp_servers"]["x-1"]
    assert entry["url"] == 'http://h/"a"\\b\n'


async def test_codex_config_file_is_written_owner_only(tmp_path: Path) -> None:
    """``write_codex_config`` writes ``config.toml`` readable only by its owner."""
    ctx = make_context("run-x")
    async with create_external_mcp_bridge(ctx, make_api(ctx, FakeTransport())) as bridge:
        path = bridge.write_codex_config(tmp_path, transport="stdio")
        assert path == tmp_path / CODEX_CONFIG_FILE
        entry = tomllib.loads(path.read_text())["mcp_servers"]["agentrunner"]
        assert entry["env_vars"] == list(bridge.env)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_server_names_are_restricted_to_safe_keys() -> None:
    """A server name that would break ``mcp__<server>__<tool>`` or a TOML key is refused."""
    with pytest.raises(ValueError, match="server name"):
        BridgeEndpoint(url="u", token="t", server_name="bad.name", tool_names=())


def test_claude_is_told_to_wait_for_the_runs_server() -> None:
    """``claude -p`` otherwise starts its first turn without a server that has not listed its tools yet."""
    from agentrunner_mcp.projections import claude_env

    assert claude_env() == {"MCP_CONNECTION_NONBLOCKING": "0"}
