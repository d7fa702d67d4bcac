"""A fake Tbox open API on loopback (fakes only; tests only), built on the HTTP kit's
:class:`~agentrunner_http_kit.testing.FakePlatform`.

It answers as Tbox's chat and upload APIs behave for their Python SDK (``tboxsdk`` 0.0.12):

* ``Authorization`` must be the raw token (no ``Bearer``); anything else gets HTTP 401 with a JSON
  ``{"errorCode", "errorMsg"}`` body (the status and code of a refused token are not documented publicly; the
  SDK fails on any non-200, which is what matters to the runner);
* ``POST /api/chat`` with ``"stream": true`` → ``text/event-stream``: ``event: message`` frames
  ``{"type", "lane": "default", "payload": "<JSON as a string>"}`` — ``header``, ``thinking`` (payload
  ``{"ext_data": {"text"}, "event": "flow.node.llm.thinking"}``), ``chunk`` (payload ``{"conversationId",
  "messageId", "text"}``), ``end``; a failure mid-stream is ``event: error`` (``{"description"}``);
* with ``"stream": false`` → ``{"errorCode": "0", "errorMsg": "success", "data": {"conversationId", "result":
  [{"chunk"}], "reasoningContent": [{"text"}]}}``; a scripted failure is an HTTP-200 body with another
  ``errorCode``;
* ``POST /api/file/upload`` (multipart ``file``) → ``{"errorCode": "0", "data": "<fileId>"}``; the files are kept
  in :attr:`TboxFake.uploads`;
* a request without ``conversationId`` starts a new conversation.

A test scripts the next answer with :attr:`TboxFake.script` (:class:`Script`).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from agentrunner_http_kit.testing import FakePlatform, FakeResponse, RecordedRequest

__all__ = ["APP_ID", "Script", "TboxFake", "Upload"]

APP_ID = "202512app0001"
"""The application the fake knows."""


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)  # noqa: TID251 - test fake


@dataclass
class Script:
    """How the next answers look."""

    pieces: list[str] = field(default_factory=lambda: ["Hello", " from", " Tbox"])
    """The reply, one ``chunk`` frame each."""
    thinking: list[str] = field(default_factory=list[str])
    """Reasoning pieces sent before the reply (``thinking`` frames)."""
    error_event: str | None = None
    """Send ``event: error`` with this description after the first chunk instead of the rest."""
    error_code: str | None = None
    """Answer an HTTP-200 body with this ``errorCode`` (and no reply)."""
    status: int | None = None
    """Answer with this HTTP status instead."""
    delay: float = 0.0
    """Seconds before each write."""
    hold: bool = False
    """Keep the stream open after the chunks."""
    unknown_frames: bool = False
    """Interleave frames of types that carry no text and of a type nobody knows."""


@dataclass(frozen=True)
class Upload:
    """A file the fake received."""

    file_id: str
    """The id it answered with."""
    filename: str
    """The multipart file name."""
    content_type: str
    """The part's content type."""
    data: bytes
    """The bytes."""


class TboxFake:
    """The fake API (use ``async with TboxFake("token") as fake``)."""

    def __init__(self, token: str, platform: FakePlatform | None = None) -> None:
        self.token = token
        """The only ``Authorization`` value accepted."""
        self.platform = platform or FakePlatform()
        """The loopback server (its ``requests``, ``disconnected`` and ``streaming``); pass one to route an
        existing server (e.g. ``fake_platform_in_thread``) instead of starting a new one."""
        self.script = Script()
        """What the next answers look like."""
        self.uploads: list[Upload] = []
        """Every file uploaded."""
        self._ids = itertools.count(1)
        self.platform.route("POST", "/api/chat", self._chat)
        self.platform.route("POST", "/api/file/upload", self._upload)

    async def __aenter__(self) -> TboxFake:
        await self.platform.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.platform.__aexit__(*exc_info)

    @property
    def base_url(self) -> str:
        """What the runner's ``base-url`` is set to."""
        return self.platform.base_url

    def calls(self) -> list[RecordedRequest]:
        """Every chat request received."""
        return self.platform.requests_to("/api/chat")

    def _refused(self, request: RecordedRequest) -> FakeResponse | None:
        if request.headers.get("authorization") != self.token:
            return FakeResponse.json(
                {"errorCode": "AUTH_FAILED", "errorMsg": "invalid authorization token", "traceId": "t-1"},
                status=401,
            )
        return None

    async def _upload(self, request: RecordedRequest) -> FakeResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        form = await request.form()
        part = form.files.get("file")
        if part is None:
            return FakeResponse.json({"errorCode": "PARAM_INVALID", "errorMsg": "file is required"})
        upload = Upload(
            file_id=f"file-{next(self._ids)}",
            filename=part.filename,
            content_type=part.content_type,
            data=part.data,
        )
        self.uploads.append(upload)
        return FakeResponse.json(
            {"errorCode": "0", "errorMsg": "success", "data": upload.file_id, "traceId": "t-2"}
        )

    def _chat(self, request: RecordedRequest) -> FakeResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        script = self.script
        if script.status is not None:
            return FakeResponse.json(
                {"errorCode": "SYSTEM_ERROR", "errorMsg": "system busy"}, status=script.status
            )
        if script.error_code is not None:
            return FakeResponse.json(
                {"errorCode": script.error_code, "errorMsg": "app is offline", "data": None}
            )
        body: dict[str, Any] = request.json()
        conversation = str(body.get("conversationId") or f"conv-tbox-{next(self._ids)}")
        if body.get("stream") is False:
            data = {
                "conversationId": conversation,
                "messageId": "msg-1",
                "result": [{"lane": "default", "mediaType": "text", "chunk": "".join(script.pieces)}],
                "reasoningContent": [{"text": "".join(script.thinking)}] if script.thinking else [],
            }
            return FakeResponse.json(
                {"errorCode": "0", "errorMsg": "success", "data": data, "traceId": "t-3"}, delay=script.delay
            )

        def frame(kind: str, payload: dict[str, Any]) -> str:
            data = {"type": kind, "lane": "default", "payload": _dumps(payload)}
            return f"event: message\ndata: {_dumps(data)}\n\n"

        frames = [frame("header", {"mediaType": "text"})]
        for text in script.thinking:
            frames.append(frame("thinking", {"ext_data": {"text": text}, "event": "flow.node.llm.thinking"}))
        for text in script.pieces:
            frames.append(
                frame("chunk", {"conversationId": conversation, "messageId": "msg-1", "text": text})
            )
            if script.unknown_frames:
                frames.append(frame("meta", {"nodeId": "llm-1"}))
                frames.append(frame("sparkle", {"what": "unknown to the runner"}))
                frames.append("event: ping\ndata: {}\n\n")
            if script.error_event is not None:
                frames.append(f"event: error\ndata: {_dumps({'description': script.error_event})}\n\n")
                break
        if script.error_event is None and not script.hold:
            frames.append(frame("end", {}))
        return FakeResponse.sse(frames, delay=script.delay, hold=script.hold)
