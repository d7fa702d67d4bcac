"""``create_external_mcp_bridge``: the one helper a harness runner calls (OFFICIAL_RUNNER_PLUGINS §6.2)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path

from agentrunner import AgentRunAPI, codec
from agentrunner.context import AgentRunContext

from .projections import (
    BridgeEndpoint,
    HarnessTransport,
    claude_allowed_tools,
    claude_cli_args,
    claude_env,
    claude_mcp_config,
    codex_cli_overrides,
    codex_config_toml,
    proxy_command,
    proxy_env,
    write_private_file,
)
from .server import BridgeServer, RunRegistration

__all__ = [
    "CLAUDE_CONFIG_FILE",
    "CODEX_CONFIG_FILE",
    "HOST_BRIDGE_METADATA_KEY",
    "ExternalMCPBridge",
    "create_external_mcp_bridge",
    "host_endpoint",
]

HOST_BRIDGE_METADATA_KEY = "mcp_bridge"
"""``runtime.metadata`` key under which a host passes the run's registration on its own bridge."""


def host_endpoint(ctx: AgentRunContext) -> BridgeEndpoint | None:
    """The endpoint the host registered this run on, if it did."""
    raw = ctx.runtime.metadata.get(HOST_BRIDGE_METADATA_KEY)
    if not isinstance(raw, dict):
        return None
    url, token, name, tools = raw.get("url"), raw.get("token"), raw.get("server_name"), raw.get("tool_names")
    if not (
        isinstance(url, str) and isinstance(token, str) and isinstance(name, str) and isinstance(tools, list)
    ):
        return None
    return BridgeEndpoint(url=url, token=token, server_name=name, tool_names=tuple(str(t) for t in tools))


CLAUDE_CONFIG_FILE = "agentrunner-mcp.json"
"""File name of the Claude Code ``--mcp-config`` document written by :meth:`ExternalMCPBridge.write_claude_config`."""
CODEX_CONFIG_FILE = "config.toml"
"""File name written by :meth:`ExternalMCPBridge.write_codex_config` (point ``CODEX_HOME`` at the directory)."""


class ExternalMCPBridge:
    """One run's bridge: its endpoint and token, and the harness configurations that reach it.

    Valid while the ``create_external_mcp_bridge`` block runs; afterwards the token is refused.
    """

    endpoint: BridgeEndpoint
    """Endpoint, token, server name and tool names."""

    def __init__(
        self,
        registration: RunRegistration | None,
        server_name: str,
        *,
        endpoint: BridgeEndpoint | None = None,
    ) -> None:
        self._registration = registration
        if endpoint is None:
            assert registration is not None
            endpoint = BridgeEndpoint(
                url=registration.url,
                token=registration.token,
                server_name=server_name,
                tool_names=registration.tool_names,
            )
        self.endpoint = endpoint

    @property
    def url(self) -> str:
        """Streamable-HTTP endpoint."""
        return self.endpoint.url

    @property
    def token(self) -> str:
        """The run's bearer token."""
        return self.endpoint.token

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The run's tools."""
        return self.endpoint.tool_names

    @property
    def closed(self) -> bool:
        """The run's token has been revoked (a host-registered run: the host revokes it when the run ends)."""
        return self._registration is not None and self._registration.closed

    @property
    def env(self) -> dict[str, str]:
        """Environment for the harness: the stdio proxy's settings; also Codex's HTTP bearer token."""
        return proxy_env(self.endpoint)

    @property
    def proxy_command(self) -> list[str]:
        """Command of the stdio proxy."""
        return proxy_command()

    def close(self) -> None:
        """Revoke the token now (the ``async with`` block does it on exit)."""
        if self._registration is not None:
            self._registration.close()

    # ---- Claude Code -----------------------------------------------------------------------------------

    def claude_mcp_config(self, *, transport: HarnessTransport = "http") -> dict[str, object]:
        """The ``--mcp-config`` document."""
        return claude_mcp_config(self.endpoint, transport=transport)

    @property
    def claude_env(self) -> dict[str, str]:
        """Environment to merge into ``claude``'s: ``MCP_CONNECTION_NONBLOCKING=0``, so ``claude -p`` connects
        the run's server before its first turn instead of starting without its tools."""
        return claude_env()

    @property
    def claude_allowed_tools(self) -> list[str]:
        """``mcp__<server>__<tool>`` names for ``--allowedTools``."""
        return claude_allowed_tools(self.endpoint)

    def write_claude_config(self, directory: Path, *, transport: HarnessTransport = "http") -> Path:
        """Write the ``--mcp-config`` file into *directory* (owner-only) and return its path."""
        text = codec.dumps_str(self.claude_mcp_config(transport=transport))
        return write_private_file(Path(directory) / CLAUDE_CONFIG_FILE, text)

    def claude_cli_args(self, directory: Path, *, transport: HarnessTransport = "http") -> list[str]:
        """Write the config into *directory* and return ``--mcp-config … --strict-mcp-config --allowedTools …``."""
        return claude_cli_args(self.write_claude_config(directory, transport=transport), self.endpoint)

    # ---- Codex -----------------------------------------------------------------------------------------

    def codex_config_toml(self, *, transport: HarnessTransport = "http") -> str:
        """The ``[mcp_servers.<name>]`` table (``required = true``, ``default_tools_approval_mode = "approve"``)."""
        return codex_config_toml(self.endpoint, transport=transport)

    def write_codex_config(self, directory: Path, *, transport: HarnessTransport = "http") -> Path:
        """Write ``config.toml`` with the table into *directory* (owner-only; use it as ``CODEX_HOME`` or merge
        it into one) and return its path."""
        return write_private_file(
            Path(directory) / CODEX_CONFIG_FILE, self.codex_config_toml(transport=transport)
        )

    def codex_cli_overrides(self, *, transport: HarnessTransport = "http") -> list[str]:
        """The table as ``-c key=value`` arguments."""
        return codex_cli_overrides(self.endpoint, transport=transport)


@asynccontextmanager
async def create_external_mcp_bridge(
    ctx: AgentRunContext, api: AgentRunAPI, *, server: BridgeServer | None = None
) -> AsyncGenerator[ExternalMCPBridge]:
    """Expose the run's allowed tools to an external harness for the duration of the block.

    When the host already registered the run on its long-lived bridge (``ctx.runtime.metadata['mcp_bridge']``
    holds the endpoint and per-run token: ``agentrunner serve`` does this for runners declaring
    ``mcp_bridge``), that registration is used and nothing is started. Otherwise pass a long-lived *server*
    to register the run on it (milliseconds); without one, a private server is started for this run and
    stopped afterwards, which costs a server start-up per run.
    On exit the run's token is revoked, so a harness still running can no longer reach the run.
    """
    hosted = host_endpoint(ctx) if server is None else None
    if hosted is not None:
        yield ExternalMCPBridge(None, hosted.server_name, endpoint=hosted)
        return
    own = server is None
    bridge_server = BridgeServer() if server is None else server
    if own:
        await bridge_server.start()
    try:
        with bridge_server.open_run(ctx, api) as registration:
            yield ExternalMCPBridge(registration, bridge_server.name)
    finally:
        if own:
            await bridge_server.stop()
