"""Tbox chat answers → reply text, without any I/O (pure, unit-tested on recorded frames and bodies).

The shapes are those of Tbox's chat API as its Python SDK (``tboxsdk`` 0.0.12) reads them:

* streamed (``"stream": true``): Server-Sent Events. ``event: message`` carries ``{"type", "lane", "payload"}``
  where **payload is a JSON document inside a string**. Types: ``header`` (a lane starts; payload has its
  ``mediaType``), ``chunk`` (payload ``{conversationId, messageId, text}``: the next piece, incremental),
  ``thinking`` (payload ``{ext_data: {text}, event: "flow.node.llm.thinking"}``: reasoning), ``end``, ``error``,
  and ``meta`` / ``followup`` / ``charge`` / ``revoke`` / ``unknown``, which carry no reply text. ``event: error``
  is a failure of the whole call (data ``{"description"...}``).
* not streamed (``"stream": false``): ``{"errorCode": "0", "errorMsg", "data": {"conversationId",
  "result": [{"chunk"}], "reasoningContent": [{"text"}]}}``; any other ``errorCode`` is a failure.

Reasoning is wrapped in one ``<think>…</think>`` block at the front of the reply.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from agentrunner import codec as json
from agentrunner_http_kit import PlatformError, ReplyText
from pydantic import JsonValue

__all__ = ["TboxReply", "error_from_body"]

log = logging.getLogger("agentrunner_runner_tbox")

THINK_OPEN: Final = "<think>\n"
THINK_CLOSE: Final = "\n</think>\n"
_MAX_ERROR_CHARS: Final = 300
_SILENT_TYPES: Final = frozenset({"header", "meta", "followup", "charge", "revoke", "unknown"})


def _mapping(value: object) -> Mapping[str, Any] | None:
    # Decoded JSON objects are dicts; an exact dict check is several times cheaper than the Mapping ABC.
    return cast("Mapping[str, Any]", value) if isinstance(value, dict) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _payload(value: object) -> Mapping[str, Any]:
    """A frame's payload: a JSON document in a string (as Tbox sends it), or already an object."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            raise PlatformError("response_invalid", "Tbox sent a payload that is not JSON") from None
    return _mapping(value) or {}


def _describe(data: Mapping[str, Any]) -> tuple[str, dict[str, JsonValue]]:
    code = _str(data.get("errorCode")) or _str(data.get("code"))
    message = (
        _str(data.get("errorMsg"))
        or _str(data.get("description"))
        or _str(data.get("message"))
        or _str(data.get("msg"))
        or "unknown error"
    )
    details: dict[str, JsonValue] = {}
    if code:
        details["platform_code"] = code
    trace = _str(data.get("traceId"))
    if trace:
        details["trace_id"] = trace
    return message[:_MAX_ERROR_CHARS], details


def error_from_body(body: object) -> PlatformError | None:
    """The failure a Tbox JSON body reports (``errorCode`` other than ``"0"``); ``None`` for a success."""
    data = _mapping(body)
    if data is None or "errorCode" not in data or str(data.get("errorCode")) == "0":
        return None
    message, details = _describe(data)
    return PlatformError("api_error", f"Tbox reported an error: {message}", details=details)


@dataclass
class TboxReply:
    """Accumulates one chat answer: :meth:`feed` per SSE event, or :meth:`body` for a non-streamed answer;
    each returns the text that became final (to send as a ``message.delta``)."""

    conversation_id: str | None = None
    """The conversation Tbox put this turn in (``payload.conversationId`` / ``data.conversationId``)."""
    finished: bool = False
    """The ``end`` frame (or the non-streamed body) arrived."""
    chunks: int = 0
    """``chunk`` frames with text."""

    def __post_init__(self) -> None:
        self._reply = ReplyText()
        self._thinking = False

    @property
    def text(self) -> str:
        """The reply so far."""
        return self._reply.text

    def feed(self, event: str, data: str) -> str:
        """Take one Server-Sent Event (its name and data); the new text."""
        if event == "error":
            try:
                parsed = _mapping(json.loads(data)) or {}
            except ValueError:
                parsed = {"description": data}
            message, details = _describe(parsed)
            raise PlatformError("api_error", f"Tbox reported an error: {message}", details=details)
        if event not in ("message", ""):
            log.debug("Tbox event %r ignored", event)
            return ""
        try:
            frame = _mapping(json.loads(data))
        except ValueError:
            raise PlatformError("response_invalid", "Tbox sent a frame that is not JSON") from None
        if frame is None:
            raise PlatformError("response_invalid", "Tbox sent a frame that is not a JSON object")
        kind = frame.get("type")
        if kind == "chunk":
            payload = _payload(frame.get("payload"))
            self.conversation_id = self.conversation_id or _str(payload.get("conversationId"))
            text = payload.get("text")
            if isinstance(text, str) and text:
                self.chunks += 1
                return self._close_think() + self._reply.append(text)
            return ""
        if kind == "thinking":
            payload = _payload(frame.get("payload"))
            text = (_mapping(payload.get("ext_data")) or {}).get("text")
            if isinstance(text, str) and text:
                return self._think(text)
            return ""
        if kind == "end":
            self.finished = True
            return self._close_think()
        if kind == "error":
            message, details = _describe(_payload(frame.get("payload")) or frame)
            raise PlatformError("api_error", f"Tbox reported an error: {message}", details=details)
        if kind not in _SILENT_TYPES:
            log.debug("Tbox frame type %r ignored", kind)
        return ""

    def body(self, body: object) -> str:
        """Take a whole non-streamed answer; its text. Raises ``api_error`` for an ``errorCode`` other than 0."""
        error = error_from_body(body)
        if error is not None:
            raise error
        data = _mapping((_mapping(body) or {}).get("data"))
        if data is None:
            raise PlatformError("response_invalid", "Tbox answered without a data object")
        self.conversation_id = _str(data.get("conversationId")) or self.conversation_id
        self.finished = True
        out = ""
        for item in _items(data.get("reasoningContent")):
            text = item.get("text")
            if isinstance(text, str) and text:
                out += self._think(text)
        for item in _items(data.get("result")):
            text = item.get("chunk")
            if isinstance(text, str) and text:
                self.chunks += 1
                out += self._close_think() + self._reply.append(text)
        return out + self._close_think()

    def finish(self) -> str:
        """End of the answer: closes a think block left open."""
        return self._close_think()

    def _think(self, text: str) -> str:
        if self._reply and not self._thinking:
            return ""  # reasoning after the answer started would land inside it: drop it
        opened = "" if self._thinking else self._reply.append(THINK_OPEN)
        self._thinking = True
        return opened + self._reply.append(text)

    def _close_think(self) -> str:
        if not self._thinking:
            return ""
        self._thinking = False
        return self._reply.append(THINK_CLOSE)


def _items(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [m for m in (_mapping(x) for x in cast("list[object]", value)) if m is not None]
