"""Projection of the SDK's external tool surface onto MCP tool and result types."""

from __future__ import annotations

from typing import Any, Final, cast

import mcp_types as types
from agentrunner import AgentRunAPI, codec
from agentrunner.errors import APIError
from agentrunner.external_tools import ExposedTool

from .content import Log, result_blocks

__all__ = ["ANY_JSON_SCHEMA", "api_error_result", "mcp_tool", "precise_schema", "tool_result"]

ANY_JSON_SCHEMA: Final[dict[str, Any]] = {
    "type": ["null", "boolean", "number", "string", "array", "object"],
    "description": "Any JSON value.",
}
"""What an unconstrained JSON value (pydantic's ``JsonValue``, schema ``{}``) is said to be: every JSON type,
explicitly (strict clients and model APIs reject or warn about an empty schema)."""

_SUBSCHEMA_KEYS: Final = ("items", "additionalProperties", "not", "contains", "propertyNames")
_SUBSCHEMA_LISTS: Final = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS: Final = ("properties", "$defs", "definitions", "patternProperties")


def precise_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """*schema* with every empty sub-schema (``{}``, or only annotations) replaced by :data:`ANY_JSON_SCHEMA`."""
    node = dict(schema)
    for key in _SUBSCHEMA_KEYS:
        value = node.get(key)
        if isinstance(value, dict):
            node[key] = _sub(cast(dict[str, Any], value))
    for key in _SUBSCHEMA_LISTS:
        value = node.get(key)
        if isinstance(value, list):
            node[key] = [
                _sub(cast(dict[str, Any], v)) if isinstance(v, dict) else v for v in cast(list[Any], value)
            ]
    for key in _SUBSCHEMA_MAPS:
        value = node.get(key)
        if isinstance(value, dict):
            node[key] = {
                name: _sub(cast(dict[str, Any], v)) if isinstance(v, dict) else v
                for name, v in cast(dict[str, Any], value).items()
            }
    return node


def _sub(schema: dict[str, Any]) -> dict[str, Any]:
    if not set(schema) - {"title", "description", "default", "examples"}:
        return {**ANY_JSON_SCHEMA, **schema}
    return precise_schema(schema)


def mcp_tool(tool: ExposedTool) -> types.Tool:
    """The MCP ``Tool`` of one exposed tool."""
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=precise_schema(tool.input_schema),
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            # Host tools are arbitrary; the surface's writes (state_set) only add or replace a key.
            destructive_hint=None if tool.read_only else tool.host_tool is not None,
            open_world_hint=tool.host_tool is not None,
        ),
    )


async def tool_result(
    tool: ExposedTool, result: dict[str, Any], api: AgentRunAPI, log: Log
) -> types.CallToolResult:
    """The MCP result of a successful back-call.

    The JSON answer goes out as ``structuredContent`` and as text. A host tool's own answer
    (``ToolCallResult``) is unwrapped: its ``content`` becomes MCP content (text, images, audio, embedded
    resources: :func:`agentrunner_mcp.content.result_blocks`) and its ``is_error`` the MCP ``isError``, so the
    harness sees the tool's output, not the envelope.
    """
    if tool.action == "tools.call":
        return types.CallToolResult(
            content=await result_blocks(result, api, log),
            structured_content=result,
            is_error=bool(result.get("is_error", False)),
        )
    return types.CallToolResult(
        content=[types.TextContent(text=codec.dumps_str(result))], structured_content=result
    )


def api_error_result(exc: APIError) -> types.CallToolResult:
    """A refused or failed back-call as an MCP tool error (``isError``), so the model can see and adapt."""
    error = exc.to_wire().model_dump(mode="json")
    return types.CallToolResult(
        content=[types.TextContent(text=f"{exc.code}: {exc.message}")],
        structured_content={"error": error},
        is_error=True,
    )
