"""Granted tools as OpenAI function schemas, and tool results as text a model can read.

Host tool names may contain characters function-calling APIs refuse (``acme/search``), so each granted tool is
offered under a safe alias and mapped back when the model calls it. Only tools in ``ctx.resources.tools`` with
the ``call`` operation are ever offered or called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from agentrunner import AgentResources, ToolCallResult, ToolResource
from agentrunner import codec as json
from pydantic import JsonValue

__all__ = ["RESULT_CHARS", "Toolbox", "preview", "result_text"]

RESULT_CHARS: Final = 16_000
"""Most characters of one tool result fed back to the model."""
_PREVIEW_CHARS: Final = 500
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_EMPTY_SCHEMA: Final[dict[str, Any]] = {"type": "object", "properties": {}}


def _alias(name: str, taken: set[str]) -> str:
    base = _UNSAFE.sub("_", name)[:60] or "tool"
    alias, n = base, 1
    while alias in taken:
        n += 1
        alias = f"{base[:56]}_{n}"
    return alias


@dataclass(slots=True)
class Toolbox:
    """The tools one run may call, by the alias the model sees."""

    by_alias: dict[str, ToolResource] = field(default_factory=dict[str, ToolResource])
    """Alias → granted tool."""

    @classmethod
    def from_resources(cls, resources: AgentResources) -> Toolbox:
        """Every granted tool with the ``call`` operation."""
        box = cls()
        for tool in resources.tools:
            if "call" in tool.operations:
                box.by_alias[_alias(tool.tool_name, set(box.by_alias))] = tool
        return box

    def __bool__(self) -> bool:
        return bool(self.by_alias)

    def resolve(self, name: str) -> ToolResource | None:
        """The granted tool the model means by *name* (its alias, or the host name itself)."""
        found = self.by_alias.get(name)
        if found is not None:
            return found
        return next((t for t in self.by_alias.values() if t.tool_name == name), None)

    def needs_detail(self) -> list[ToolResource]:
        """Tools whose argument schema is unknown but may be asked for with ``tools.get_detail``."""
        return [t for t in self.by_alias.values() if not t.parameters and "detail" in t.operations]

    def update(self, tool: ToolResource) -> None:
        """Replace a tool's description (e.g. with what ``tools.get_detail`` said)."""
        for alias, known in self.by_alias.items():
            if known.tool_name == tool.tool_name:
                self.by_alias[alias] = tool

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI function tool schemas."""
        out: list[dict[str, Any]] = []
        for alias, tool in self.by_alias.items():
            function: dict[str, Any] = {
                "name": alias,
                "description": tool.description or tool.tool_name,
                "parameters": tool.parameters or _EMPTY_SCHEMA,
            }
            out.append({"type": "function", "function": function})
        return out


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [truncated, {len(text) - limit} more characters]"


def _as_text(value: JsonValue) -> str:
    if isinstance(value, str):
        return value
    return json.dumps_str(value)


def result_text(result: ToolCallResult) -> str:
    """What the model reads as the tool's answer."""
    text = _clip(_as_text(result.content), RESULT_CHARS)
    if result.artifact is not None:
        ref = result.artifact
        text += (
            f"\n[the full result is stored as artifact {ref.artifact_id}"
            f" ({ref.mime_type or 'unknown type'}, {ref.size if ref.size is not None else '?'} bytes)]"
        )
    if result.is_error:
        text = f"Tool error: {text}"
    return text


def preview(result: ToolCallResult) -> dict[str, JsonValue]:
    """A small preview for ``tool.call.completed``."""
    data: dict[str, JsonValue] = {"content": _clip(_as_text(result.content), _PREVIEW_CHARS)}
    if result.artifact is not None:
        data["artifact_id"] = result.artifact.artifact_id
    return data
