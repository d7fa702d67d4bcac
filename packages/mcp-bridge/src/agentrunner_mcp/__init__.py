"""agentrunner MCP bridge: a run's allowed host tools, offered to external harnesses over MCP.

:class:`BridgeServer` is the long-lived server (streamable HTTP on loopback) that serves many runs, one bearer
token per run. :func:`create_external_mcp_bridge` registers one run on it for the duration of a block and
yields an :class:`ExternalMCPBridge` with the endpoint, the token and the Claude Code / Codex configurations.
``agentrunner-mcp-proxy`` forwards MCP over stdio to the bridge for harnesses that only launch stdio servers.
The tools themselves are the SDK's :mod:`agentrunner.external_tools` surface.
"""

from .bridge import CLAUDE_CONFIG_FILE, CODEX_CONFIG_FILE, ExternalMCPBridge, create_external_mcp_bridge
from .errors import BridgeClosedError, BridgeError, BridgeNotStartedError, NonLoopbackBindError
from .projections import PROXY_TOKEN_ENV, PROXY_URL_ENV, BridgeEndpoint, HarnessTransport
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
    "PROXY_URL_ENV",
    "PROXY_TOKEN_ENV",
    # errors
    "BridgeError",
    "BridgeClosedError",
    "BridgeNotStartedError",
    "NonLoopbackBindError",
)
