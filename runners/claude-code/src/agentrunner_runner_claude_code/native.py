"""Claude Code's print-mode output → :mod:`agentrunner_harness.native` events.

``stream-json`` is one JSON object per line: ``system`` (``init`` names the session; ``api_retry`` and other
subtypes are progress), ``assistant`` (text and ``tool_use`` blocks), ``user`` (``tool_result`` blocks) and the
final ``result``. ``json`` is that ``result`` object alone; ``text`` is the bare reply. In ``result``,
``subtype`` says ``success`` even when the run failed: ``is_error`` decides.
"""

from __future__ import annotations

from typing import Any, Final, Literal

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

__all__ = ["ClaudeOutputFormat", "ClaudeParser", "result_event"]

ClaudeOutputFormat = Literal["json", "stream-json", "text"]
"""``--output-format``."""
_KNOWN_IGNORED: Final = frozenset({"stream_event", "rate_limit_event"})


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for raw in as_list(content):
        block = as_object(raw) or {}
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(str(block["text"]))
    return "".join(parts)


def _usage(raw: object, cost: object) -> dict[str, JsonValue]:
    usage: dict[str, JsonValue] = {}
    data = as_object(raw)
    if data is not None:
        inp = int(data.get("input_tokens") or 0)
        cached = int(data.get("cache_read_input_tokens") or 0) + int(
            data.get("cache_creation_input_tokens") or 0
        )
        outp = int(data.get("output_tokens") or 0)
        usage = {
            "input_tokens": inp + cached,
            "output_tokens": outp,
            "total_tokens": inp + cached + outp,
            "cached_input_tokens": cached,
        }
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        usage["cost_usd"] = float(cost)
    return usage


def result_event(obj: dict[str, Any]) -> NativeResult:
    """The ``result`` object as a :class:`NativeResult`."""
    subtype = str(obj.get("subtype") or "")
    is_error = bool(obj.get("is_error")) or subtype.startswith("error")
    text = obj.get("result") if isinstance(obj.get("result"), str) else None
    message = text
    if subtype == "error_max_turns":
        message = f"Claude Code stopped at its turn limit (max-turns, {obj.get('num_turns')} turns) before it answered"
    elif is_error and not message:
        errors = as_list(obj.get("errors"))
        message = (
            "; ".join(str(e) for e in errors) if errors else f"Claude Code failed ({subtype or 'error'})"
        )
    denials = obj.get("permission_denials")
    metadata: dict[str, JsonValue] = {
        "subtype": subtype,
        "num_turns": obj.get("num_turns") if isinstance(obj.get("num_turns"), int) else None,
        "duration_ms": obj.get("duration_ms") if isinstance(obj.get("duration_ms"), int) else None,
        "cost_usd": obj.get("total_cost_usd") if isinstance(obj.get("total_cost_usd"), int | float) else None,
        "permission_denials": orjson.loads(orjson.dumps(denials)) if isinstance(denials, list) else [],
    }
    return NativeResult(
        text=None if is_error else text,
        is_error=is_error,
        error_message=message if is_error else None,
        usage=_usage(obj.get("usage"), obj.get("total_cost_usd")),
        metadata=metadata,
        finish_reason="length" if subtype == "error_max_turns" else "stop",
    )


class ClaudeParser:
    """A parser of one run's stdout in the given format."""

    def __init__(self, output_format: ClaudeOutputFormat) -> None:
        self.output_format: ClaudeOutputFormat = output_format
        self._buffer: list[bytes] = []
        self._tool_names: dict[str, str] = {}

    def feed(self, line: bytes) -> list[NativeEvent]:
        """Events of one line."""
        if self.output_format != "stream-json":
            self._buffer.append(line)
            return []
        if not line.strip():
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
        if kind == "system":
            session = obj.get("session_id")
            if obj.get("subtype") == "init" and isinstance(session, str) and session:
                return [NativeSession(session)]
            return []
        if kind == "assistant":
            return self._assistant(obj.get("message"))
        if kind == "user":
            return self._user(obj.get("message"))
        if kind == "result":
            events: list[NativeEvent] = []
            session = obj.get("session_id")
            if isinstance(session, str) and session:
                events.append(NativeSession(session))
            events.append(result_event(obj))
            return events
        if kind in _KNOWN_IGNORED:
            return []
        return [NativeUnknown(str(kind))]

    def _assistant(self, message: object) -> list[NativeEvent]:
        events: list[NativeEvent] = []
        for raw in as_list((as_object(message) or {}).get("content")):
            b = as_object(raw)
            if b is None:
                continue
            if b.get("type") == "text" and isinstance(b.get("text"), str):
                events.append(NativeText(b["text"]))
            elif b.get("type") == "tool_use":
                call_id, name = str(b.get("id") or ""), str(b.get("name") or "")
                self._tool_names[call_id] = name
                params = as_object(b.get("input")) or {}
                events.append(NativeToolStarted(call_id, name, orjson.loads(orjson.dumps(params))))
        return events

    def _user(self, message: object) -> list[NativeEvent]:
        events: list[NativeEvent] = []
        for raw in as_list((as_object(message) or {}).get("content")):
            b = as_object(raw) or {}
            if b.get("type") == "tool_result":
                call_id = str(b.get("tool_use_id") or "")
                text = _text_of(b.get("content"))
                error = (text or "the tool failed") if b.get("is_error") else None
                events.append(
                    NativeToolCompleted(
                        call_id,
                        self._tool_names.get(call_id, "tool"),
                        preview=None if error else text,
                        error=error,
                    )
                )
        return events

    def finish(self) -> list[NativeEvent]:
        """The ``json`` / ``text`` result, from the whole output."""
        if self.output_format == "stream-json":
            return []
        data = b"\n".join(self._buffer).strip()
        if self.output_format == "text":
            return [NativeResult(text=data.decode("utf-8", "replace"))] if data else []
        if not data:
            return []
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            return [NativeResult(is_error=True, error_message=f"Claude Code's output is not JSON: {exc}")]
        if not isinstance(obj, dict) or obj.get("type") != "result":  # pyright: ignore[reportUnknownMemberType]
            return [
                NativeResult(is_error=True, error_message="Claude Code's JSON output has no result object")
            ]
        events: list[NativeEvent] = []
        session = obj.get("session_id")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(session, str) and session:
            events.append(NativeSession(session))
        events.append(result_event(obj))  # pyright: ignore[reportUnknownArgumentType]
        return events
