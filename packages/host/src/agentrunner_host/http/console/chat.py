"""The debug chat: ``/chat`` (the page; ``static/js/chat.js`` does the talking over the HTTP API) and the two
artifact endpoints it needs: ``POST /artifacts`` (upload a file as JSON with base64 content; the answer is the
:class:`~agentrunner.ArtifactRef` to put in an event's input) and ``GET /artifacts/{artifact_id}`` (download).

Downloads are served so that nothing a runner stored can run as a page of this origin: only raster images
are shown inline, everything else is an attachment, always ``nosniff`` and under a ``sandbox`` policy.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import AsyncIterator
from typing import Final
from urllib.parse import quote

from agentrunner import ArtifactRef
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentrunner_host.admission import Identifier
from agentrunner_host.service import HostService
from agentrunner_host.stores import ArtifactOwner, ArtifactUnavailableError, ValueTooLargeError

from .pages import ConsolePage, NavEntry, render

__all__ = ["INLINE_TYPES", "MAX_UPLOAD_BYTES", "PAGE", "ArtifactUpload"]

MAX_UPLOAD_BYTES: Final = 8 * 1024 * 1024
"""Largest upload (decoded bytes)."""
_MAX_BODY: Final = MAX_UPLOAD_BYTES * 4 // 3 + 64 * 1024
INLINE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Types a download may show inline (raster images; never SVG or HTML, which can carry scripts)."""
_RECENT_CONVERSATIONS: Final = 30


class ArtifactUpload(BaseModel):
    """``POST /artifacts``: a file for the chat's next message."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    content_base64: str = Field(max_length=_MAX_BODY)
    """The bytes, base64."""
    name: str | None = Field(default=None, max_length=255)
    """File name (display only)."""
    mime_type: str | None = Field(default=None, max_length=255, pattern=r"^[\w.+-]+/[\w.+-]+$")
    """MIME type as the browser reported it."""
    conversation_id: Identifier | None = None
    """The conversation the file belongs to."""


def _service(request: Request) -> HostService:
    service: HostService = request.app.state.service
    return service


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


async def _recent_conversations(service: HostService) -> list[str]:
    return await service.stores.runs.recent_conversations(limit=_RECENT_CONVERSATIONS)


async def chat_page(request: Request) -> Response:
    """``GET /chat``."""
    service = _service(request)
    service.refresh_bindings()
    agents = [
        {"agent_id": e.agent.agent_id, "runner_id": e.agent.runner_id} for e in service.directory.agents()
    ]
    return render(
        request,
        "chat.html",
        {
            "agents": agents,
            "bindings": [e.binding.binding_id for e in service.directory.bindings()],
            "conversations": await _recent_conversations(service),
            "conversation": request.query_params.get("conversation", ""),
            "max_upload": MAX_UPLOAD_BYTES,
        },
        current="chat",
        title="Debug chat",
    )


async def upload_artifact(request: Request) -> Response:
    """``POST /artifacts``."""
    service = _service(request)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > _MAX_BODY:
            return _error(413, "payload_too_large", f"uploads are limited to {MAX_UPLOAD_BYTES} bytes")
    try:
        upload = ArtifactUpload.model_validate_json(bytes(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        return _error(422, "invalid_request", f"{'.'.join(map(str, first['loc']))}: {first['msg']}")
    try:
        data = base64.b64decode(upload.content_base64, validate=True)
    except (binascii.Error, ValueError):
        return _error(422, "invalid_request", "content_base64 is not base64")
    mime = upload.mime_type or "application/octet-stream"
    kind = "image" if mime.startswith("image/") else "audio" if mime.startswith("audio/") else "file"
    try:
        record = await service.stores.artifacts.put(
            data,
            mime_type=mime,
            name=upload.name,
            artifact_type=kind,
            source="console",
            owner=ArtifactOwner(conversation_id=upload.conversation_id),
            max_size=MAX_UPLOAD_BYTES,
        )
    except ValueTooLargeError:
        return _error(413, "payload_too_large", f"uploads are limited to {MAX_UPLOAD_BYTES} bytes")
    ref = ArtifactRef(
        artifact_id=record.artifact_id,
        artifact_type=record.artifact_type,
        mime_type=record.mime_type,
        name=record.name,
        size=record.size,
        digest=f"sha256:{record.sha256}",
    )
    return JSONResponse({"artifact": ref.model_dump(mode="json", exclude_none=True)}, status_code=201)


async def download_artifact(request: Request) -> Response:
    """``GET /artifacts/{artifact_id}`` (``?download=1`` always as an attachment)."""
    service = _service(request)
    record = await service.stores.artifacts.get(request.path_params["artifact_id"])
    if record is None:
        return _error(404, "not_found", "no such artifact (or it has expired)")
    chunks = service.stores.artifacts.stream(record)
    try:
        first = await anext(chunks, b"")
    except ArtifactUnavailableError as exc:
        return _error(404, "not_found", str(exc))
    mime = (record.mime_type or "application/octet-stream").lower()
    inline = mime in INLINE_TYPES and request.query_params.get("download") != "1"
    name = record.name or record.artifact_id
    disposition = "inline" if inline else "attachment"
    headers = {
        "Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(name, safe='')}",
        "Content-Length": str(record.size),
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Cache-Control": "private, max-age=300",
    }

    async def body() -> AsyncIterator[bytes]:
        yield first
        async for chunk in chunks:
            yield chunk

    return StreamingResponse(
        body(), media_type=mime if inline else "application/octet-stream", headers=headers
    )


PAGE: Final = ConsolePage(
    nav=NavEntry(slug="chat", label="Debug chat", href="/chat"),
    routes=(
        Route("/chat", chat_page, methods=["GET"]),
        Route("/artifacts", upload_artifact, methods=["POST"]),
        Route("/artifacts/{artifact_id}", download_artifact, methods=["GET"]),
    ),
)
"""The debug chat page and its artifact endpoints."""
