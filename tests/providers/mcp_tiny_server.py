"""A tiny MCP server for the tool-provider tests: ``python mcp_tiny_server.py`` serves stdio; the tests also
mount :data:`server`'s streamable-HTTP app on loopback in-process."""

from __future__ import annotations

import os

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer(name="tiny", version="0.0.1")

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))


@server.tool()
def echo_upper(text: str) -> str:
    """Return the text upper-cased, prefixed with ECHO:."""
    return "ECHO:" + text.upper()


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def big(size: int):  # no return annotation: plain text content, no structured content
    """Return *size* characters of text."""
    return "x" * size


@server.tool()
def boom() -> str:
    """Always fails, deliberately (its message reaches the client)."""
    raise ToolError("kaput")


@server.tool()
def picture() -> Image:
    """Return a small PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def exit_now() -> str:
    """Kill the server process (for restart tests)."""
    os._exit(3)


if __name__ == "__main__":
    server.run()
