"""A fake Langflow server on loopback (fakes only; tests only), built on the HTTP kit's
:class:`~agentrunner_http_kit.testing.FakePlatform`.

It answers ``POST /api/v1/run/{flow_id}`` as Langflow's "Flow trigger endpoints" page documents it:

* ``x-api-key`` is checked: missing or wrong → **403** ``{"detail": ...}`` (what Langflow answers, not 401);
* an unknown flow → 404 ``{"detail": "Flow identifier … not found"}``;
* ``?stream=false`` → one JSON body ``{"session_id", "outputs": [{"inputs", "outputs": [{"results":
  {"message": {"text"}}, "outputs": {"message": {"message", "type"}}, "messages": [...]}]}]}``;
* ``?stream=true`` → JSON objects separated by blank lines: ``add_message`` (the user's message, then the AI's),
  ``token`` ``{"chunk", "id", "timestamp"}`` per piece, then ``end`` ``{"result": <the non-stream body>}``; or an
  ``error`` event ``{"error": ...}``;
* the session id is the one the request named (Langflow starts a session for an id it has not seen).

A test scripts the next answer with :attr:`LangflowFake.script` (:class:`Script`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentrunner_http_kit.testing import FakePlatform, FakeResponse, RecordedRequest

__all__ = ["FLOW_ID", "MISSING_FLOW", "LangflowFake", "Script"]

FLOW_ID = "3f1c2b7e-flow"
"""The flow the fake knows."""
MISSING_FLOW = "no-such-flow"
"""A flow id the fake answers 404 for."""


@dataclass
class Script:
    """How the next answers look."""

    pieces: list[str] = field(default_factory=lambda: ["Hello", " from", " Langflow"])
    """The reply, one ``token`` event per piece."""
    tokens: bool = True
    """Stream ``token`` events; ``False`` is a flow without a streaming model (only ``end`` carries the text)."""
    error: str | None = None
    """Send an ``error`` event with this text after the first token instead of the rest."""
    status: int | None = None
    """Answer with this HTTP status and ``{"detail": …}`` instead."""
    delay: float = 0.0
    """Seconds before each write."""
    hold: bool = False
    """Keep the stream open after the tokens (a flow that never ends)."""
    unknown_events: bool = False
    """Interleave events of a type the runner does not know."""
    split: bool = False
    """Cut the stream at arbitrary points, so objects span writes."""


def _event(kind: str, data: dict[str, Any]) -> str:
    return json.dumps({"event": kind, "data": data}, ensure_ascii=False) + "\n\n"  # noqa: TID251 - test fake


def run_body(text: str, session_id: str, input_value: str) -> dict[str, Any]:
    """The body Langflow returns for a Chat Input → model → Chat Output flow."""
    message = {"text": text, "sender": "Machine", "sender_name": "AI", "session_id": session_id}
    return {
        "session_id": session_id,
        "outputs": [
            {
                "inputs": {"input_value": input_value},
                "outputs": [
                    {
                        "results": {"message": message},
                        "artifacts": {"message": text, "sender": "Machine", "type": "object"},
                        "outputs": {"message": {"message": text, "type": "text"}},
                        "logs": {"message": []},
                        "messages": [{"message": text, "sender": "Machine", "sender_name": "AI"}],
                        "component_display_name": "Chat Output",
                        "component_id": "ChatOutput-x1Y2z",
                        "used_frozen_result": False,
                    }
                ],
            }
        ],
    }


class LangflowFake:
    """The fake server (use ``async with LangflowFake("key") as fake``)."""

    def __init__(self, api_key: str, platform: FakePlatform | None = None) -> None:
        self.api_key = api_key
        """The only key accepted."""
        self.platform = platform or FakePlatform()
        """The loopback server (its ``requests``, ``disconnected`` and ``streaming``); pass one to route an
        existing server (e.g. ``fake_platform_in_thread``) instead of starting a new one."""
        self.script = Script()
        """What the next answers look like."""
        self.platform.route("POST", f"/api/v1/run/{FLOW_ID}", self._run)
        self.platform.route("POST", f"/api/v1/run/{MISSING_FLOW}", self._missing)

    async def __aenter__(self) -> LangflowFake:
        await self.platform.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.platform.__aexit__(*exc_info)

    @property
    def base_url(self) -> str:
        """What the runner's ``base-url`` is set to."""
        return self.platform.base_url

    def calls(self) -> list[RecordedRequest]:
        """Every run request received."""
        return [r for r in self.platform.requests if r.path.startswith("/api/v1/run/")]

    def _refused(self, request: RecordedRequest) -> FakeResponse | None:
        key = request.headers.get("x-api-key")
        if not key:
            return FakeResponse.json({"detail": "An API key must be passed as query or header"}, status=403)
        if key != self.api_key:
            return FakeResponse.json({"detail": "Invalid or missing API key"}, status=403)
        return None

    def _missing(self, request: RecordedRequest) -> FakeResponse:
        return self._refused(request) or FakeResponse.json(
            {"detail": f"Flow identifier {MISSING_FLOW} not found"}, status=404
        )

    def _run(self, request: RecordedRequest) -> FakeResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        script = self.script
        if script.status is not None:
            return FakeResponse.json({"detail": "Error running graph: boom"}, status=script.status)
        body: dict[str, Any] = request.json()
        session_id = str(body.get("session_id") or "generated-session")
        input_value = str(body.get("input_value", ""))
        text = "".join(script.pieces)
        if request.query.get("stream", "false").lower() != "true":
            return FakeResponse.json(run_body(text, session_id, input_value), delay=script.delay)
        message_id = "0b1c-ai-message"
        events = [
            _event("add_message", {"sender": "User", "text": input_value, "session_id": session_id}),
            _event(
                "add_message", {"sender": "Machine", "text": "", "session_id": session_id, "id": message_id}
            ),
        ]
        for piece in script.pieces if script.tokens else []:
            events.append(
                _event("token", {"chunk": piece, "id": message_id, "timestamp": "2026-12-01 20:00:00 UTC"})
            )
            if script.unknown_events:
                events.append(_event("vertices_sorted", {"ids": ["ChatInput-1"], "to_run": ["ChatOutput-1"]}))
            if script.error is not None:
                events.append(_event("error", {"error": script.error}))
                break
        if script.error is None and not script.hold:
            events.append(_event("end", {"result": run_body(text, session_id, input_value)}))
        if script.split:
            whole = "".join(events)
            events = [whole[i : i + 7] for i in range(0, len(whole), 7)]
        return FakeResponse(
            chunks=events, content_type="text/event-stream", delay=script.delay, hold=script.hold
        )
