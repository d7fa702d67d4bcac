"""Langflow run-API answers → reply text, without any I/O (pure, unit-tested on recorded bodies and events).

``POST /api/v1/run/{flow_id}?stream=false`` answers one JSON body (:func:`message_text` finds the reply in it);
``?stream=true`` answers a sequence of JSON objects separated by blank lines (not SSE: there is no ``data:``
prefix), each ``{"event": ..., "data": {...}}``:

* ``add_message`` — a chat message was stored (the user's, or the AI's before its tokens): ignored;
* ``token`` — ``data.chunk`` is the next piece of the AI's text (incremental);
* ``end`` — ``data.result`` is the same body a non-streaming call returns; its text is the reply when no
  tokens came (flows without a streaming model), and its ``session_id`` the session;
* ``error`` — ``data.error`` says why the flow failed.

Anything else is ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from agentrunner_http_kit import PlatformError, ReplyText

__all__ = ["LangflowReply", "message_text"]

log = logging.getLogger("agentrunner_runner_langflow")
_MAX_ERROR_CHARS: Final = 500


def _mapping(value: object) -> Mapping[str, Any] | None:
    # Decoded JSON objects are dicts; an exact dict check is several times cheaper than the Mapping ABC.
    return cast("Mapping[str, Any]", value) if isinstance(value, dict) else None


def _first(value: object) -> Mapping[str, Any] | None:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        items = cast("Sequence[object]", value)
        return _mapping(items[0]) if items else None
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def message_text(body: object) -> str | None:
    """The reply in a run-API body: ``outputs[0].outputs[0].results.message.text``, else
    ``….outputs.message.message``, else ``….messages[0].message``; ``None`` when there is none."""
    data = _mapping(body)
    if data is None:
        return None
    run = _first(data.get("outputs"))
    output = _first(run.get("outputs")) if run is not None else None
    if output is None:
        return None
    results = _mapping(output.get("results")) or {}
    found = _text((_mapping(results.get("message")) or {}).get("text"))
    if found is None:
        outputs = _mapping(output.get("outputs")) or {}
        found = _text((_mapping(outputs.get("message")) or {}).get("message"))
    if found is None:
        found = _text((_first(output.get("messages")) or {}).get("message"))
    return found


@dataclass
class LangflowReply:
    """Accumulates one flow run; :meth:`feed` takes each streamed event and returns the text to send."""

    session_id: str | None = None
    """The session Langflow reports (``session_id`` of the body or of the ``end`` result)."""
    finished: bool = False
    """The ``end`` event arrived (or the non-streaming body was read)."""
    tokens: int = 0
    """``token`` events seen."""

    def __post_init__(self) -> None:
        self._reply = ReplyText()

    @property
    def text(self) -> str:
        """The reply so far."""
        return self._reply.text

    def body(self, body: object) -> str:
        """Take a whole (non-streamed) body, or the ``end`` event's result; the text it adds."""
        data = _mapping(body)
        if data is None:
            raise PlatformError(
                "response_invalid", "Langflow answered with something that is not a JSON object"
            )
        self.session_id = _text(data.get("session_id")) or self.session_id
        self.finished = True
        if self._reply:
            return ""  # the tokens already carried the reply
        return self._reply.append(message_text(data) or "")

    def feed(self, event: object) -> str:
        """Take one streamed event; the new text (``""`` for events that carry none)."""
        frame = _mapping(event)
        if frame is None:
            raise PlatformError("response_invalid", "Langflow streamed something that is not a JSON object")
        kind = frame.get("event")
        data = _mapping(frame.get("data")) or {}
        if kind == "token":
            chunk = data.get("chunk")
            if isinstance(chunk, str) and chunk:
                self.tokens += 1
                return self._reply.append(chunk)
            return ""
        if kind == "end":
            return self.body(data.get("result") or {})
        if kind == "error":
            reason = data.get("error") or data.get("text") or "the flow failed"
            raise PlatformError("api_error", f"Langflow reported an error: {str(reason)[:_MAX_ERROR_CHARS]}")
        if kind != "add_message":
            log.debug("Langflow event %r ignored", kind)
        return ""
