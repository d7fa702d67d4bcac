"""agentrunner MCP bridge: a run's allowed host tools, offered to external harnesses over MCP.

:class:`BridgeServer` is the long-lived server (streamable HTTP on loopback) that serves many runs, one bearer
token per run. :func:`create_external_mcp_bridge` registers one run on it for the duration of a block and
yields an :class:`ExternalMCPBridge` with the endpoint, the token and the Claude Code / Codex configurations.
``agentrunner-mcp-proxy`` forwards MCP over stdio to the bridge for harnesses that only launch stdio servers.
The tools themselves are the SDK's :mod:`agentrunner.external_tools` surface.

Names are imported on first use, so the stdio proxy (``python -m agentrunner_mcp.proxy``), which a harness
starts cold for every run, does not pay for the server side and the SDK models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .env import PROXY_TOKEN_ENV, PROXY_URL_ENV

if TYPE_CHECKING:
    from .bridge import (
        CLAUDE_CONFIG_FILE,
        CODEX_CONFIG_FILE,
        HOST_BRIDGE_METADATA_KEY,
        ExternalMCPBridge,
        create_external_mcp_bridge,
        host_endpoint,
    )
    from .errors import BridgeClosedError, BridgeError, BridgeNotStartedError, NonLoopbackBindError
    from .projections import BridgeEndpoint, HarnessTransport
    from .server import DEFAULT_SERVER_NAME, BridgeServer, RunRegistration

__all__ = (
    # serving
    "BridgeServer",
    "RunRegistration",
    "DEFAULT_SERVER_NAME",
    # per-run helper
    "create_external_mcp_bridge",
    "ExternalMCPBridge",
    "BridgeEndpoint",
    "HarnessTransport",
    "CLAUDE_CONFIG_FILE",
    "CODEX_CONFIG_FILE",
    "HOST_BRIDGE_METADATA_KEY",
    "host_endpoint",
    "PROXY_URL_ENV",
    "PROXY_TOKEN_ENV",
    # errors
    "BridgeError",
    "BridgeClosedError",
    "BridgeNotStartedError",
    "NonLoopbackBindError",
)

_HOMES = {
    "BridgeServer": "server",
    "RunRegistration": "server",
    "DEFAULT_SERVER_NAME": "server",
    "create_external_mcp_bridge": "bridge",
    "ExternalMCPBridge": "bridge",
    "CLAUDE_CONFIG_FILE": "bridge",
    "CODEX_CONFIG_FILE": "bridge",
    "HOST_BRIDGE_METADATA_KEY": "bridge",
    "host_endpoint": "bridge",
    "BridgeEndpoint": "projections",
    "HarnessTransport": "projections",
    "BridgeError": "errors",
    "BridgeClosedError": "errors",
    "BridgeNotStartedError": "errors",
    "NonLoopbackBindError": "errors",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
