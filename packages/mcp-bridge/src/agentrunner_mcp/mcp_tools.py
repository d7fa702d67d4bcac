"""Projection of the SDK's external tool surface onto MCP tool and result types."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from agentrunner import _json
from agentrunner.errors import APIError
from agentrunner.external_tools import ExposedTool

__all__ = ["api_error_result", "mcp_tool", "tool_result"]


def mcp_tool(tool: ExposedTool) -> types.Tool:
    """The MCP ``Tool`` of one exposed tool."""
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            # Host tools are arbitrary; the surface's writes (state_set) only add or replace a key.
            destructive_hint=None if tool.read_only else tool.host_tool is not None,
            open_world_hint=tool.host_tool is not None,
        ),
    )


def tool_result(tool: ExposedTool, result: dict[str, Any]) -> types.CallToolResult:
    """The MCP result of a successful back-call.

    The JSON answer goes out as ``structuredContent`` and as text. A host tool's own answer
    (``ToolCallResult``) is unwrapped: its ``content`` becomes the text and its ``is_error`` the MCP
    ``isError``, so the harness sees the tool's output, not the envelope.
    """
    if tool.action == "tools.call":
        content = result.get("content")
        text = content if isinstance(content, str) else _json.dumps_str(content)
        return types.CallToolResult(
            content=[types.TextContent(text=text)],
            structured_content=result,
            is_error=bool(result.get("is_error", False)),
        )
    return types.CallToolResult(
        content=[types.TextContent(text=_json.dumps_str(result))], structured_content=result
    )


def api_error_result(exc: APIError) -> types.CallToolResult:
    """A refused or failed back-call as an MCP tool error (``isError``), so the model can see and adapt."""
    error = exc.to_wire().model_dump(mode="json")
    return types.CallToolResult(
        content=[types.TextContent(text=f"{exc.code}: {exc.message}")],
        structured_content={"error": error},
        is_error=True,
    )
