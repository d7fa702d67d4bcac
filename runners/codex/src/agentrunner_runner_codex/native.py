"""``codex exec --json`` output (JSONL) → :mod:`agentrunner_harness.native` events.

``thread.started`` names the session; ``item.started`` / ``item.updated`` / ``item.completed`` carry items
(``agent_message``, ``reasoning``, ``command_execution``, ``mcp_tool_call``, ``file_change``, ``web_search``,
``todo_list``, ``error``); ``turn.completed`` ends the turn with usage and ``turn.failed`` / a top-level
``error`` fail it. An ``error`` *item* is a warning (e.g. unknown model metadata) and does not fail the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson
from agentrunner_harness import (
    NativeEvent,
    NativeResult,
    NativeSession,
    NativeText,
    NativeToolCompleted,
    NativeToolStarted,
    NativeUnknown,
    as_list,
    as_object,
)
from pydantic import JsonValue

__all__ = ["CodexParser"]

_QUIET_ITEMS: Final = frozenset({"reasoning", "todo_list", "error", "agent_message"})
_KNOWN: Final = frozenset({"turn.started"})


def _mcp_call(item: dict[str, Any]) -> tuple[str, object]:
    return f"mcp__{item.get('server')}__{item.get('tool')}", item.get("arguments")


def _command(item: dict[str, Any]) -> tuple[str, object]:
    return "command_execution", {"command": item.get("command")}


def _file_change(item: dict[str, Any]) -> tuple[str, object]:
    changes = [c for c in (as_object(c) for c in as_list(item.get("changes"))) if c is not None]
    return "file_change", {
        "path": [str(c.get("path")) for c in changes],
        "changes": [{"path": str(c.get("path")), "kind": str(c.get("kind"))} for c in changes],
    }


def _web_search(item: dict[str, Any]) -> tuple[str, object]:
    return "web_search", {"query": item.get("query")}


# The items that are tool uses, each to its tool's name and what it was asked to do (the audit's ``detail``
# prefers ``command``, then ``path``, then ``query``). Codex's own file edits (apply_patch) and web searches
# count: the host records each as a harness.tool audit record, like a command.
_TOOLS: Final[Mapping[str, Callable[[dict[str, Any]], tuple[str, object]]]] = {
    "command_execution": _command,
    "mcp_tool_call": _mcp_call,
    "file_change": _file_change,
    "web_search": _web_search,
}


def _preview(item: dict[str, Any]) -> str | None:
    if item.get("type") == "command_execution":
        out = item.get("aggregated_output")
        return out if isinstance(out, str) else None
    result = as_object(item.get("result"))
    if result is None:
        return None
    blocks = [as_object(c) or {} for c in as_list(result.get("content"))]
    return "".join(str(b.get("text")) for b in blocks if b.get("type") == "text")


def _error(item: dict[str, Any]) -> str | None:
    if item.get("type") == "command_execution":
        code = item.get("exit_code")
        return f"exit status {code}" if isinstance(code, int) and code != 0 else None
    error = item.get("error")
    detail = as_object(error)
    if detail is not None:
        return str(detail.get("message") or "the tool failed")
    if isinstance(error, str) and error:
        return error
    return "the tool failed" if item.get("status") == "failed" else None


class CodexParser:
    """A parser of one run's JSONL."""

    def __init__(self, *, jsonl: bool = True) -> None:
        # Without --json stdout is for people; the reply then comes from --output-last-message alone.
        self._jsonl = jsonl
        self._printed = False
        self._messages: dict[str, str] = {}
        self._last_message: str | None = None
        self._started: set[str] = set()
        self._usage: dict[str, JsonValue] = {}
        self._failed: str | None = None
        self._turns = 0

    def feed(self, line: bytes) -> list[NativeEvent]:
        """Events of one line."""
        if not line.strip():
            return []
        if not self._jsonl:
            self._printed = True
            return []
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            return [NativeUnknown("invalid")]
        event = as_object(obj)
        if event is None:
            return [NativeUnknown("invalid")]
        return self._event(event)

    def _event(self, obj: dict[str, Any]) -> list[NativeEvent]:
        kind = obj.get("type")
        if kind == "thread.started" and isinstance(obj.get("thread_id"), str):
            return [NativeSession(obj["thread_id"])]
        item = as_object(obj.get("item"))
        if kind in {"item.started", "item.updated", "item.completed"} and item is not None:
            return self._item(str(kind), item)
        if kind == "turn.completed":
            self._turns += 1
            self._usage = _usage(obj.get("usage"))
            return []
        if kind == "turn.failed":
            error = obj.get("error")
            detail = as_object(error)
            self._failed = str((detail or {}).get("message") or error or "the turn failed")
            return []
        if kind == "error":
            self._failed = str(obj.get("message") or "Codex reported an error")
            return []
        if kind in _KNOWN:
            return []
        return [NativeUnknown(str(kind))]

    def _item(self, kind: str, item: dict[str, Any]) -> list[NativeEvent]:
        item_id, item_type = str(item.get("id") or ""), item.get("type")
        if item_type == "agent_message":
            raw_text = item.get("text")
            text = raw_text if isinstance(raw_text, str) else ""
            seen = self._messages.get(item_id, "")
            events: list[NativeEvent] = []
            # item.updated repeats the text so far: emit only what is new.
            if text and text.startswith(seen) and len(text) > len(seen):
                events.append(NativeText(text[len(seen) :]))
            elif text and not text.startswith(seen):
                events.append(NativeText(text))
            self._messages[item_id] = text
            if kind == "item.completed" and text:
                self._last_message = text
            return events
        tool = _TOOLS.get(str(item_type))
        if tool is not None:
            name, params = tool(item)
            events = []
            if item_id not in self._started:
                self._started.add(item_id)
                events.append(
                    NativeToolStarted(
                        item_id, name, orjson.loads(orjson.dumps(params if isinstance(params, dict) else {}))
                    )
                )
            if kind == "item.completed":
                events.append(NativeToolCompleted(item_id, name, preview=_preview(item), error=_error(item)))
            return events
        if item_type in _QUIET_ITEMS:
            return []
        return [NativeUnknown(f"item.{item_type}")]

    def finish(self) -> list[NativeEvent]:
        """The turn's result, once the output ended."""
        if not self._jsonl:
            return [NativeResult()] if self._printed else []
        if self._failed is not None:
            return [
                NativeResult(
                    is_error=True, error_kind="turn_failed", error_message=self._failed, usage=self._usage
                )
            ]
        if self._turns == 0 and self._last_message is None:
            return []
        return [NativeResult(text=self._last_message, usage=self._usage, metadata={"num_turns": self._turns})]


def _usage(raw: object) -> dict[str, JsonValue]:
    data = as_object(raw)
    if data is None:
        return {}
    inp = int(data.get("input_tokens") or 0)
    out = int(data.get("output_tokens") or 0)
    return {
        "input_tokens": inp,
        "output_tokens": out,
        "total_tokens": inp + out,
        "cached_input_tokens": int(data.get("cached_input_tokens") or 0),
        "reasoning_output_tokens": int(data.get("reasoning_output_tokens") or 0),
    }
