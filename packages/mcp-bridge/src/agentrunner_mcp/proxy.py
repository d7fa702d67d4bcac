"""``agentrunner-mcp-proxy``: MCP over stdio, forwarded to one run's HTTP bridge.

A harness that only launches stdio MCP servers starts this command. It reads the bridge endpoint from
``AGENTRUNNER_MCP_URL`` and the run's bearer token from ``AGENTRUNNER_MCP_TOKEN``, then relays every MCP
message between its stdin/stdout (mcp's stdio server transport) and the bridge (mcp's streamable-HTTP client
transport). It adds nothing and decides nothing: the bridge authenticates, filters and dispatches.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import cast

import anyio
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

from .env import PROXY_TOKEN_ENV, PROXY_URL_ENV

__all__ = ["ProxySettings", "main", "run_proxy"]

_logger = logging.getLogger("agentrunner_mcp.proxy")


class ProxySettings:
    """Where the proxy forwards to."""

    url: str
    """The bridge's streamable-HTTP endpoint."""
    token: str
    """The run's bearer token."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ProxySettings:
        """Read the settings from *environ*; raises ``KeyError`` naming a missing variable."""
        url = environ.get(PROXY_URL_ENV, "")
        token = environ.get(PROXY_TOKEN_ENV, "")
        if not url:
            raise KeyError(PROXY_URL_ENV)
        if not token:
            raise KeyError(PROXY_TOKEN_ENV)
        return cls(url, token)


async def _relay(
    source: ReadStream[SessionMessage | Exception], sink: WriteStream[SessionMessage], label: str
) -> None:
    async for item in source:
        if isinstance(item, Exception):
            # A malformed line or a transport failure concerns no request we could answer; say so and go on.
            _logger.warning("%s: %s", label, item)
            continue
        await sink.send(item)


async def run_proxy(settings: ProxySettings) -> None:
    """Relay MCP between this process's stdio and the bridge until stdin closes."""
    headers = {"Authorization": f"Bearer {settings.token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(settings.url, http_client=http) as (http_read, http_write),
        stdio_server() as (stdio_read, stdio_write),
    ):
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_relay, http_read, stdio_write, "bridge")
                # The harness closing stdin ends the session; the reverse relay has nothing left to carry.
                await _relay(stdio_read, http_write, "stdin")
                tg.cancel_scope.cancel()
        finally:
            # mcp's transports stop their writer tasks only when these streams close; without this the
            # process would outlive a harness that exits without killing it.
            await stdio_write.aclose()
            await http_write.aclose()


def _root_cause(exc: BaseException) -> BaseException:
    cause = exc
    while isinstance(cause, BaseExceptionGroup):
        inner = cast("tuple[BaseException, ...]", cause.exceptions)
        if len(inner) != 1:
            break
        cause = inner[0]
    return cast(BaseException, cause)


def main() -> int:
    """Console entry point."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="agentrunner-mcp-proxy: %(message)s")
    try:
        settings = ProxySettings.from_env(os.environ)
    except KeyError as exc:
        print(f"agentrunner-mcp-proxy: {exc.args[0]} is not set", file=sys.stderr)
        return 2
    try:
        anyio.run(run_proxy, settings)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        cause = _root_cause(exc)
        print(f"agentrunner-mcp-proxy: {settings.url}: {type(cause).__name__}: {cause}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
