"""Names of the environment variables the stdio proxy reads (dependency-free, so the proxy starts fast)."""

from __future__ import annotations

from typing import Final

__all__ = ["PROXY_TOKEN_ENV", "PROXY_URL_ENV"]

PROXY_URL_ENV: Final = "AGENTRUNNER_MCP_URL"
"""Environment variable the stdio proxy reads the bridge endpoint from."""
PROXY_TOKEN_ENV: Final = "AGENTRUNNER_MCP_TOKEN"
"""Environment variable the stdio proxy (and Codex over HTTP) reads the run's bearer token from."""
