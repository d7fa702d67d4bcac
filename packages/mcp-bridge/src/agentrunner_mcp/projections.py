"""Harness configuration for one run's bridge: Claude Code ``--mcp-config`` and Codex ``mcp_servers``.

Two transports are projected. ``http`` points the harness straight at the bridge's streamable-HTTP endpoint
with the run's bearer token. ``stdio`` makes the harness launch ``agentrunner-mcp-proxy`` (as
``python -m agentrunner_mcp.proxy`` with this interpreter), which reads the endpoint and token from its
environment and forwards MCP to the bridge.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from agentrunner import codec

from .env import PROXY_TOKEN_ENV, PROXY_URL_ENV

__all__ = [
    "CLAUDE_ENV",
    "claude_env",
    "PROXY_TOKEN_ENV",
    "PROXY_URL_ENV",
    "BridgeEndpoint",
    "HarnessTransport",
    "claude_allowed_tools",
    "claude_cli_args",
    "claude_mcp_config",
    "codex_cli_overrides",
    "codex_config_toml",
    "proxy_command",
    "proxy_env",
    "write_private_file",
]


HarnessTransport = Literal["http", "stdio"]
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


@dataclass(frozen=True, slots=True)
class BridgeEndpoint:
    """What a harness needs to reach one run's tools."""

    url: str
    """Streamable-HTTP endpoint of the bridge."""
    token: str
    """The run's bearer token."""
    server_name: str
    """Key of the server in harness configs."""
    tool_names: tuple[str, ...]
    """The run's tools."""

    def __post_init__(self) -> None:
        if not _SERVER_NAME.match(self.server_name):
            raise ValueError(f"MCP server name {self.server_name!r} must match {_SERVER_NAME.pattern}")


def proxy_command() -> list[str]:
    """The command that starts the stdio proxy with the current interpreter."""
    return [sys.executable, "-m", "agentrunner_mcp.proxy"]


def proxy_env(endpoint: BridgeEndpoint) -> dict[str, str]:
    """The environment the stdio proxy needs (merge it into the harness's environment)."""
    return {PROXY_URL_ENV: endpoint.url, PROXY_TOKEN_ENV: endpoint.token}


def claude_mcp_config(endpoint: BridgeEndpoint, *, transport: HarnessTransport = "http") -> dict[str, Any]:
    """A Claude Code ``--mcp-config`` document holding just this run's server."""
    server: dict[str, Any]
    if transport == "http":
        server = {
            "type": "http",
            "url": endpoint.url,
            "headers": {"Authorization": f"Bearer {endpoint.token}"},
        }
    else:
        command, *args = proxy_command()
        server = {"type": "stdio", "command": command, "args": args, "env": proxy_env(endpoint)}
    return {"mcpServers": {endpoint.server_name: server}}


CLAUDE_ENV: Final[dict[str, str]] = {"MCP_CONNECTION_NONBLOCKING": "0"}
"""Environment for ``claude``: connect MCP servers *before* the first turn. By default ``claude -p`` (2.1.x)
connects them in the background and starts without a server that has not listed its tools yet."""


def claude_env() -> dict[str, str]:
    """Environment to merge into ``claude``'s: it waits for the run's MCP server (:data:`CLAUDE_ENV`)."""
    return dict(CLAUDE_ENV)


def claude_allowed_tools(endpoint: BridgeEndpoint) -> list[str]:
    """Claude Code's names of the run's tools (``mcp__<server>__<tool>``), for ``--allowedTools``."""
    return [f"mcp__{endpoint.server_name}__{name}" for name in endpoint.tool_names]


def claude_cli_args(config_path: Path, endpoint: BridgeEndpoint) -> list[str]:
    """Claude Code arguments: only this config's servers, and the run's tools pre-approved."""
    args = ["--mcp-config", str(config_path), "--strict-mcp-config"]
    allowed = claude_allowed_tools(endpoint)
    if allowed:
        args += ["--allowedTools", ",".join(allowed)]
    return args


def _toml_str(value: str) -> str:
    # A JSON string literal is a valid TOML basic string: both use \" \\ \n \t \uXXXX escapes.
    return codec.dumps_str(value)


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(_toml_str(v) for v in values) + "]"


def _codex_entries(endpoint: BridgeEndpoint, transport: HarnessTransport) -> list[tuple[str, str]]:
    entries: list[tuple[str, str]]
    if transport == "http":
        # The token stays out of the file: Codex reads it from the harness's environment.
        entries = [("url", _toml_str(endpoint.url)), ("bearer_token_env_var", _toml_str(PROXY_TOKEN_ENV))]
    else:
        command, *args = proxy_command()
        # env_vars forwards these from Codex's own environment to the proxy (Codex clears the rest), so the
        # token stays out of this file here too.
        entries = [
            ("command", _toml_str(command)),
            ("args", _toml_list(args)),
            ("env_vars", _toml_list([PROXY_URL_ENV, PROXY_TOKEN_ENV])),
        ]
    # required: Codex otherwise sends the first turn before tools/list has answered.
    # default_tools_approval_mode: `codex exec` otherwise refuses every MCP call ("approval policy is never").
    entries += [("required", "true"), ("default_tools_approval_mode", _toml_str("approve"))]
    return entries


def codex_config_toml(endpoint: BridgeEndpoint, *, transport: HarnessTransport = "http") -> str:
    """A Codex ``config.toml`` fragment: the ``[mcp_servers.<name>]`` table of this run's server.

    Neither transport writes the token: Codex must run with :func:`proxy_env` in its environment.
    """
    lines = [f"[mcp_servers.{endpoint.server_name}]"]
    lines += [f"{key} = {value}" for key, value in _codex_entries(endpoint, transport)]
    return "\n".join(lines) + "\n"


def codex_cli_overrides(endpoint: BridgeEndpoint, *, transport: HarnessTransport = "http") -> list[str]:
    """The same entry as ``codex -c key=value`` arguments, for runs that leave ``config.toml`` alone."""
    args: list[str] = []
    for key, value in _codex_entries(endpoint, transport):
        args += ["-c", f"mcp_servers.{endpoint.server_name}.{key}={value}"]
    return args


def write_private_file(path: Path, text: str) -> Path:
    """Write *text* to *path* readable by the owner only (configs can hold the run's token)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.chmod(path, 0o600)
    return path
