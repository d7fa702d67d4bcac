"""An MCP server with dangerous tools for the dangerous-tool tests, mounted over streamable HTTP in-process.
Nothing here touches the machine: the "shell" and "write" tools only say what they would have done."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer(name="risky", version="0.0.1")

CALLS: list[str] = []
"""Names of the tools that actually ran (the tests check refused calls never reach the server)."""


@server.tool()
def run_shell(command: str) -> str:
    """Pretend to run a shell command."""
    CALLS.append("run_shell")
    return f"would run {command}"


@server.tool()
def writeFile(path: str, text: str) -> str:  # camelCase on purpose: the classifier splits it
    """Pretend to write a file."""
    CALLS.append("writeFile")
    return f"would write {len(text)} characters to {path}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def tidy() -> str:
    """Harmless by name, destructive by its annotation."""
    CALLS.append("tidy")
    return "tidied"


@server.tool()
def lookup(word: str) -> str:
    """A safe tool: looks a word up."""
    CALLS.append("lookup")
    return word.upper()


@server.tool()
def sweep_cache() -> str:
    """Safe by name; the operator classifies it as file_write in the tests."""
    CALLS.append("sweep_cache")
    return "swept"
