"""A fake DashScope application API on loopback (fakes only; tests only), built on the HTTP kit's
:class:`~agentrunner_http_kit.testing.FakePlatform`.

It answers ``POST /api/v1/apps/{app_id}/completion`` as the Model Studio application API documents it:

* ``Authorization: Bearer <key>`` is checked; a wrong or missing key gets HTTP 401
  ``{"code": "InvalidApiKey", "message": "Invalid API-key provided.", "request_id"}`` — as JSON, or for a
  streaming request as one ``event:error`` frame (``:HTTP_STATUS/401``), as are scripted 4xx/5xx failures;
* with ``X-DashScope-SSE: enable`` the answer is ``text/event-stream`` with frames ``id:N`` / ``event:result`` /
  ``:HTTP_STATUS/200`` / ``data:{"output": {...}, "usage": {"models": [...]}, "request_id"}``, incremental when
  the body asks for ``incremental_output`` (else every frame repeats the text so far, as DashScope does);
  agent apps put reasoning in ``output.thoughts[0].thought``, workflow apps in ``message_format`` mode put the
  answer in ``output.workflow_message.message.content``; the last frame has ``finish_reason: "stop"``;
* without the header the answer is one JSON body with the whole text;
* ``output.session_id`` is the session the request named, or a new one.

A test scripts the next answer with :attr:`DashScopeFake.script` (:class:`Script`).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from agentrunner_http_kit.testing import FakePlatform, FakeResponse, RecordedRequest

__all__ = ["AGENT_APP", "WORKFLOW_APP", "DashScopeFake", "Script"]

AGENT_APP = "agent-app-1"
"""The agent application's id."""
WORKFLOW_APP = "workflow-app-1"
"""The workflow application's id."""


@dataclass
class Script:
    """How the next answers look."""

    pieces: list[str] = field(default_factory=lambda: ["Hello", " from", " DashScope"])
    """The reply's increments, one frame each."""
    thoughts: list[str] = field(default_factory=list[str])
    """Agent apps: reasoning increments sent before the reply."""
    doc_references: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """Sent with the last frame."""
    error_event: dict[str, Any] | None = None
    """Send this ``event:error`` payload after the first frame instead of the rest."""
    status: int | None = None
    """Answer with this HTTP status and :attr:`error_body` instead."""
    error_body: dict[str, Any] = field(
        default_factory=lambda: {"code": "InternalError", "message": "An internal error has occured."}
    )
    """The body of a :attr:`status` answer."""
    delay: float = 0.0
    """Seconds before each frame."""
    hold: bool = False
    """Keep the stream open after the frames (a reply that never ends)."""
    unknown_events: bool = False
    """Interleave frames of an event type the runner does not know."""


def _frame(number: int, payload: dict[str, Any], *, event: str = "result", status: int = 200) -> str:
    data = json.dumps(payload, ensure_ascii=False)  # noqa: TID251 - test fake
    return f"id:{number}\nevent:{event}\n:HTTP_STATUS/{status}\ndata:{data}\n\n"


class DashScopeFake:
    """The fake application API (use ``async with DashScopeFake("sk-…") as fake``)."""

    def __init__(self, api_key: str, platform: FakePlatform | None = None) -> None:
        self.api_key = api_key
        """The only key accepted."""
        self.platform = platform or FakePlatform()
        """The loopback server (its ``requests``, ``disconnected`` and ``streaming``); pass one to route an
        existing server (e.g. ``fake_platform_in_thread``) instead of starting a new one."""
        self.script = Script()
        """What the next answers look like."""
        self._sessions = itertools.count(1)
        for app in (AGENT_APP, WORKFLOW_APP):
            self.platform.route("POST", f"/api/v1/apps/{app}/completion", self._completion)

    async def __aenter__(self) -> DashScopeFake:
        await self.platform.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.platform.__aexit__(*exc_info)

    @property
    def base_url(self) -> str:
        """What the runner's ``base-url`` is set to (``…/api/v1``)."""
        return f"{self.platform.base_url}/api/v1"

    def calls(self) -> list[RecordedRequest]:
        """Every completion request received."""
        return [r for r in self.platform.requests if r.path.endswith("/completion")]

    @staticmethod
    def _failure(body: dict[str, Any], *, status: int, sse: bool) -> FakeResponse:
        """A refused call: JSON, or for a streaming request one ``event:error`` frame with the failure's status
        (how DashScope answers an SSE request it refuses)."""
        if not sse:
            return FakeResponse.json(body, status=status)
        frame = _frame(1, body, event="error", status=status)
        return FakeResponse(status=status, chunks=[frame], content_type="text/event-stream")

    def _completion(self, request: RecordedRequest) -> FakeResponse:
        request_id = f"req-{len(self.platform.requests)}"
        sse = request.headers.get("x-dashscope-sse") == "enable"
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            refused = {
                "code": "InvalidApiKey",
                "message": "Invalid API-key provided.",
                "request_id": request_id,
            }
            return self._failure(refused, status=401, sse=sse)
        script = self.script
        if script.status is not None:
            return self._failure(
                {**script.error_body, "request_id": request_id}, status=script.status, sse=sse
            )
        body: dict[str, Any] = request.json()
        workflow = request.path == f"/api/v1/apps/{WORKFLOW_APP}/completion"
        parameters: dict[str, Any] = body.get("parameters") or {}
        app_input: dict[str, Any] = body.get("input") or {}
        session_id: str = app_input.get("session_id") or f"sess-{next(self._sessions)}"
        usage = {
            "models": [{"model_id": "qwen-plus", "input_tokens": 11, "output_tokens": len(script.pieces)}]
        }
        if not sse:
            output: dict[str, Any] = {
                "text": "".join(script.pieces),
                "finish_reason": "stop",
                "session_id": session_id,
                "doc_references": script.doc_references or None,
            }
            if not workflow and script.thoughts:
                output["thoughts"] = [{"thought": "".join(script.thoughts), "action_type": "reasoning"}]
            return FakeResponse.json({"output": output, "usage": usage, "request_id": request_id})

        incremental = parameters.get("incremental_output") is True
        frames: list[str] = []
        so_far = ""
        number = itertools.count(1)

        def output_of(piece: str, *, last: bool) -> dict[str, Any]:
            nonlocal so_far
            so_far += piece
            text = piece if incremental else so_far
            out: dict[str, Any] = {"session_id": session_id, "finish_reason": "stop" if last else "null"}
            if workflow:
                out["workflow_message"] = {
                    "node_id": "End_1",
                    "node_name": "End",
                    "node_type": "End",
                    "node_status": "success" if last else "executing",
                    "message": {"role": "assistant", "content": text},
                }
            else:
                out["text"] = text
            if last and script.doc_references:
                out["doc_references"] = script.doc_references
            return out

        if not workflow:
            for thought in script.thoughts:
                out: dict[str, Any] = {
                    "session_id": session_id,
                    "finish_reason": "null",
                    "thoughts": [{"thought": thought}],
                }
                frames.append(_frame(next(number), {"output": out, "usage": usage, "request_id": request_id}))
        for index, piece in enumerate(script.pieces):
            last = index == len(script.pieces) - 1 and not script.hold
            payload = {"output": output_of(piece, last=last), "usage": usage, "request_id": request_id}
            frames.append(_frame(next(number), payload))
            if script.unknown_events:
                frames.append(f"id:{next(number)}\nevent:heartbeat\ndata:{{}}\n\n")
            if script.error_event is not None:
                error = {**script.error_event, "request_id": request_id}
                frames.append(_frame(next(number), error, event="error", status=400))
                break
        return FakeResponse.sse(frames, delay=script.delay, hold=script.hold)
