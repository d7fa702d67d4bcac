"""Images and files of the input: where they are, and their bytes (read through the run API)."""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass
from typing import Final, Literal

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    APIError,
    ArtifactRef,
    AudioContent,
    FileContent,
    ImageContent,
)

from .errors import PlatformError

__all__ = ["MAX_MEDIA_BYTES", "MediaFile", "MediaInput", "MediaKind", "media_inputs", "read_media"]

MediaKind = Literal["image", "audio", "video", "document"]
"""What a platform is told the file is."""

MAX_MEDIA_BYTES: Final = 32 * 1024 * 1024
"""Largest input file read for an upload."""

_READ_CHUNK: Final = 512 * 1024


@dataclass(frozen=True, slots=True)
class MediaInput:
    """One image, audio clip or file of the input: an artifact to read, or a URL to forward."""

    kind: MediaKind
    """What it is."""
    artifact: ArtifactRef | None = None
    """The host artifact holding the bytes."""
    url: str | None = None
    """A public URL (when there is no artifact)."""
    name: str | None = None
    """File name, when known."""
    mime_type: str | None = None
    """MIME type, when known."""


@dataclass(frozen=True, slots=True)
class MediaFile:
    """The bytes of a :class:`MediaInput`, ready for a multipart upload."""

    name: str
    """File name (a generic one when the input had none)."""
    mime_type: str
    """MIME type (``application/octet-stream`` when unknown)."""
    data: bytes
    """The bytes."""


def _kind(mime: str | None, artifact_type: str | None = None) -> MediaKind:
    major = (mime or "").partition("/")[0]
    if major == "image" or artifact_type == "image":
        return "image"
    if major == "audio" or artifact_type == "audio":
        return "audio"
    if major == "video" or artifact_type == "video":
        return "video"
    return "document"


def media_inputs(ctx: AgentRunContext) -> list[MediaInput]:
    """Every image, audio and file of the input, in order: content parts first, then attachments not
    already referenced by a part (one artifact is never sent twice).

    Fails ``input_error`` (before any request) when an artifact's bytes cannot be read in this run — the host
    switched ``artifact_read`` off or the reference lacks the ``read`` permission: an input is never dropped
    silently."""
    found = _collect(ctx)
    readable = ctx.context.available_apis.artifact_read
    for item in found:
        if item.artifact is not None and (not readable or "read" not in item.artifact.permissions):
            raise PlatformError(
                "input_error",
                f"attachment {item.artifact.artifact_id} cannot be read in this run (artifact reads are not available)",
                details={"artifact_id": item.artifact.artifact_id},
            )
    return found


def _collect(ctx: AgentRunContext) -> list[MediaInput]:
    found: list[MediaInput] = []
    seen: set[str] = set()
    for part in ctx.input.contents:
        if isinstance(part, ImageContent):
            mime = part.mime_type or (part.artifact.mime_type if part.artifact else None)
            item = MediaInput(
                "image", part.artifact, part.url, part.artifact.name if part.artifact else None, mime
            )
        elif isinstance(part, FileContent):
            mime = part.mime_type or (part.artifact.mime_type if part.artifact else None)
            name = part.name or (part.artifact.name if part.artifact else None)
            item = MediaInput(_kind(mime), part.artifact, part.url, name, mime)
        elif isinstance(part, AudioContent):
            mime = part.mime_type or (part.artifact.mime_type if part.artifact else None)
            item = MediaInput(
                "audio", part.artifact, part.url, part.artifact.name if part.artifact else None, mime
            )
        else:
            continue
        if item.artifact is not None:
            if item.artifact.artifact_id in seen:
                continue
            seen.add(item.artifact.artifact_id)
        elif item.url is None:
            continue
        found.append(item)
    for ref in ctx.input.attachments:
        if ref.artifact_id not in seen:
            seen.add(ref.artifact_id)
            found.append(
                MediaInput(_kind(ref.mime_type, ref.artifact_type), ref, None, ref.name, ref.mime_type)
            )
    return found


async def read_media(api: AgentRunAPI, item: MediaInput, *, max_bytes: int = MAX_MEDIA_BYTES) -> MediaFile:
    """The bytes of an artifact input, read range by range through the run API (``artifacts: [read]``).
    Raises ``input_error`` when the artifact cannot be read or is larger than *max_bytes*."""
    if item.artifact is None:
        raise PlatformError("input_error", "this input has no artifact to read (it is a URL)")
    artifact_id = item.artifact.artifact_id
    out = bytearray()
    offset = 0
    mime = item.mime_type
    try:
        while True:
            chunk = await api.artifacts.read_range(artifact_id, offset=offset, length=_READ_CHUNK)
            out += base64.b64decode(chunk.data_base64)
            mime = mime or chunk.mime_type
            offset += chunk.length
            if len(out) > max_bytes:
                raise PlatformError(
                    "input_error", f"attachment {artifact_id} is larger than {max_bytes} bytes"
                )
            if not chunk.has_more or chunk.length == 0:
                break
    except APIError as exc:
        raise PlatformError(
            "input_error",
            f"attachment {artifact_id} could not be read: {exc.code}",
            details={"artifact_id": artifact_id, "code": exc.code},
        ) from exc
    mime = mime or "application/octet-stream"
    name = item.name or f"{item.kind}{mimetypes.guess_extension(mime) or ''}"
    return MediaFile(name=name, mime_type=mime, data=bytes(out))
