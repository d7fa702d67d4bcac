"""Host results as MCP content: text, images, audio and embedded resources, read from the run's artifacts.

A host tool answers ``tools.call`` with a :class:`~agentrunner.api_types.ToolCallResult`. Its ``content`` is
JSON; when that JSON is a list of typed content elements, each element becomes its own MCP block:

* Protocol v1 elements (``agentrunner.ContentElement``): ``text`` → text; ``image`` / ``audio`` with an artifact →
  the artifact's bytes (read through the run's ``artifacts.read_range`` back-calls) as an image / audio block;
  ``file`` with an artifact → an embedded resource (text when its MIME type is textual, else a blob); any of
  them by URL, or an artifact the host does not let the run read, → a resource link;
* MCP content blocks (``{"type": "image", "data": ..., "mimeType": ...}`` and the rest), as a host tool that
  is itself an MCP tool returns them, pass through unchanged.

Any other JSON is one text block (strings as they are, other values encoded). A result whose full body was
stored as an artifact (``ToolCallResult.artifact``) adds a resource link to it, so the client can read it.
Artifacts are addressed by :func:`artifact_uri`; bytes read for one block are capped at
:data:`MAX_ARTIFACT_BYTES`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from typing import Any, Final
from urllib.parse import quote, unquote, urlsplit

import mcp_types as types
from agentrunner import (
    AgentRunAPI,
    ArtifactRef,
    AudioContent,
    ContentElement,
    FileContent,
    ImageContent,
    TextContent,
    codec,
)
from agentrunner.api_types import ArtifactChunk
from agentrunner.errors import APIError, PayloadTooLargeError
from pydantic import TypeAdapter, ValidationError

__all__ = [
    "ARTIFACT_URI_PREFIX",
    "MAX_ARTIFACT_BYTES",
    "ArtifactBody",
    "artifact_id_of",
    "artifact_uri",
    "read_artifact",
    "result_blocks",
]

ARTIFACT_URI_PREFIX: Final = "agentrunner-artifact:///"
"""URI of an artifact whose id is not itself a URI: the prefix, then the id percent-encoded."""

MAX_ARTIFACT_BYTES: Final = 8 * 1024 * 1024
"""Most bytes the bridge reads from one artifact for one content block or resource."""

_CHUNK: Final = 1024 * 1024
_SDK_ELEMENTS: Final = TypeAdapter(list[ContentElement])
_MCP_BLOCKS: Final = TypeAdapter(list[types.ContentBlock])
_TEXT_MIME_TYPES: Final = frozenset(
    {"application/json", "application/xml", "application/yaml", "application/javascript", "application/toml"}
)

Log = Callable[[str], Awaitable[None]]
"""Where the mapping reports what it read (a debug log message to the client)."""


def artifact_uri(artifact_id: str) -> str:
    """The resource URI of an artifact: its id when the id already is an absolute URI, else
    ``agentrunner-artifact:///<id>``."""
    if _is_absolute_uri(artifact_id):
        return artifact_id
    return ARTIFACT_URI_PREFIX + quote(artifact_id, safe="")


def artifact_id_of(uri: str) -> str:
    """The artifact id a resource URI names (the inverse of :func:`artifact_uri`)."""
    if uri.startswith(ARTIFACT_URI_PREFIX):
        return unquote(uri[len(ARTIFACT_URI_PREFIX) :])
    return uri


def _is_absolute_uri(value: str) -> bool:
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return bool(parts.scheme) and len(parts.scheme) > 1 and (bool(parts.netloc) or bool(parts.path))


def is_textual(mime_type: str | None) -> bool:
    """Whether content of this MIME type is text (sent as ``text`` rather than a base64 ``blob``)."""
    if mime_type is None:
        return False
    base = mime_type.split(";", 1)[0].strip().lower()
    return base.startswith("text/") or base in _TEXT_MIME_TYPES or base.endswith(("+json", "+xml"))


class ArtifactBody:
    """The bytes of one artifact, as read through the run's back-calls."""

    def __init__(self, artifact_id: str, data: bytes, mime_type: str | None) -> None:
        self.artifact_id = artifact_id
        self.data = data
        self.mime_type = mime_type

    def resource_contents(self) -> types.TextResourceContents | types.BlobResourceContents:
        """As MCP resource contents: text for a textual MIME type that decodes as UTF-8, else a blob."""
        uri = artifact_uri(self.artifact_id)
        mime = self.mime_type or "application/octet-stream"
        if is_textual(self.mime_type):
            try:
                return types.TextResourceContents(uri=uri, mime_type=mime, text=self.data.decode("utf-8"))
            except UnicodeDecodeError:
                pass
        return types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(self.data).decode())


async def read_artifact(
    api: AgentRunAPI, artifact_id: str, *, limit: int = MAX_ARTIFACT_BYTES
) -> ArtifactBody:
    """Read a whole artifact with ``artifacts.read_range`` back-calls (the host authorizes each).

    Raises the host's :class:`~agentrunner.errors.APIError`, or
    :class:`~agentrunner.errors.PayloadTooLargeError` past *limit* bytes.
    """
    data = bytearray()
    mime: str | None = None
    offset = 0
    while True:
        raw = await api.call_raw(
            "artifacts.read_range", {"artifact_id": artifact_id, "offset": offset, "length": _CHUNK}
        )
        chunk = ArtifactChunk.model_validate(raw)
        mime = mime or chunk.mime_type
        if chunk.size > limit:
            raise PayloadTooLargeError(f"artifact {artifact_id} has {chunk.size} bytes, over {limit}")
        try:
            data += base64.b64decode(chunk.data_base64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise PayloadTooLargeError(f"artifact {artifact_id}: the host sent invalid base64") from exc
        offset += chunk.length
        if not chunk.has_more or chunk.length == 0:
            return ArtifactBody(artifact_id, bytes(data), mime)
        if len(data) > limit:
            raise PayloadTooLargeError(f"artifact {artifact_id} is over {limit} bytes")


def _link(
    ref: ArtifactRef | None, url: str | None, *, name: str | None, mime: str | None
) -> types.ResourceLink:
    if ref is not None:
        return types.ResourceLink(
            uri=artifact_uri(ref.artifact_id),
            name=ref.name or name or ref.artifact_id,
            mime_type=ref.mime_type or mime,
            size=ref.size,
            description=ref.summary,
        )
    assert url is not None  # the SDK's content elements always carry an artifact or a URL
    return types.ResourceLink(uri=url, name=name or url, mime_type=mime)


async def _element_block(element: ContentElement, api: AgentRunAPI, log: Log) -> types.ContentBlock:
    if isinstance(element, TextContent):
        return types.TextContent(text=element.text)
    name = element.name if isinstance(element, FileContent) else None
    if element.artifact is None:
        return _link(None, element.url, name=name, mime=element.mime_type)
    ref = element.artifact
    try:
        body = await read_artifact(api, ref.artifact_id)
    except APIError as exc:
        # Not readable for this run (or too large): the block still says what there is.
        await log(f"artifact {ref.artifact_id} not inlined ({exc.code}); sent as a resource link")
        return _link(ref, None, name=name, mime=element.mime_type)
    await log(f"read artifact {ref.artifact_id}: {len(body.data)} bytes")
    mime = element.mime_type or ref.mime_type or body.mime_type
    data = base64.b64encode(body.data).decode()
    if isinstance(element, ImageContent):
        return types.ImageContent(data=data, mime_type=mime or "application/octet-stream")
    if isinstance(element, AudioContent):
        return types.AudioContent(data=data, mime_type=mime or "application/octet-stream")
    body.mime_type = mime
    return types.EmbeddedResource(resource=body.resource_contents())


async def result_blocks(result: dict[str, Any], api: AgentRunAPI, log: Log) -> list[types.ContentBlock]:
    """The MCP content of a host tool's ``ToolCallResult`` (see the module docstring)."""
    content = result.get("content")
    blocks: list[types.ContentBlock] = []
    if isinstance(content, list) and content:
        try:
            elements = _SDK_ELEMENTS.validate_python(content)
        except ValidationError:
            elements = None
        if elements is not None:
            blocks = [await _element_block(e, api, log) for e in elements]
        else:
            try:
                blocks = list(_MCP_BLOCKS.validate_python(content))
            except ValidationError:
                blocks = []
    if not blocks and (content is not None or result.get("artifact") is None):
        blocks = [types.TextContent(text=content if isinstance(content, str) else codec.dumps_str(content))]
    artifact = result.get("artifact")
    if isinstance(artifact, dict):
        try:
            ref = ArtifactRef.model_validate(artifact)
        except ValidationError:
            ref = None
        if ref is not None:
            blocks.append(_link(ref, None, name="full result", mime=ref.mime_type))
    return blocks
