"""The current event's input as the user message: text, images kept by artifact ref, text files inlined.

Images go to the model as image content (the host resolves the artifact ref when it calls the model). A text
file's bytes are read through ``api.artifacts`` and inlined up to a cap; other files and audio are described
in a short note, so the model knows they exist. Retrieved knowledge is added as one more text part: the
input's own parts are never dropped.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Final

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    APIError,
    ArtifactRef,
    ContentElement,
    DeadlineExceededError,
    FileContent,
    ImageContent,
    TextContent,
)
from agentrunner import codec as json

from .deadline import Deadline

__all__ = ["FILE_BYTES", "MESSAGE_EVENTS", "UserInput", "build_user_input", "is_text_file"]

FILE_BYTES: Final = 32 * 1024
"""Most bytes of one text file inlined into the message."""

MESSAGE_EVENTS: Final = frozenset({"message.received", "api.invoked"})
"""Events whose input is something a user said."""

_TEXT_TYPES: Final = frozenset(
    {
        "application/json",
        "application/xml",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/javascript",
        "application/x-python",
        "application/sql",
    }
)
_TEXT_SUFFIXES: Final = (
    ".txt", ".md", ".markdown", ".csv", ".tsv", ".json", ".jsonl", ".yaml", ".yml", ".toml", ".xml",
    ".html", ".htm", ".py", ".js", ".ts", ".java", ".go", ".rs", ".c", ".h", ".cpp", ".sql", ".log", ".ini",
)  # fmt: skip


def is_text_file(mime_type: str | None, name: str | None) -> bool:
    """Whether a file is text a model can read inline."""
    if mime_type:
        base = mime_type.split(";", 1)[0].strip().lower()
        if base.startswith("text/") or base in _TEXT_TYPES or base.endswith(("+json", "+xml")):
            return True
    return name is not None and name.lower().endswith(_TEXT_SUFFIXES)


@dataclass(slots=True)
class UserInput:
    """The user message's parts and what went into them."""

    parts: list[ContentElement] = field(default_factory=list[ContentElement])
    """Content in input order."""
    images: int = 0
    """Images kept."""
    files_inlined: int = 0
    """Text files whose contents were inlined."""
    notes: int = 0
    """Files or audio described by a note instead of their bytes."""
    texts: list[str] = field(default_factory=list[str])
    """The user's own text parts (what retrieval searches with)."""

    def query_text(self) -> str:
        """The user's own text, for retrieval."""
        return "\n".join(t for t in self.texts if t.strip())

    def content(self) -> str | list[ContentElement]:
        """A plain string when the message is text only (the most widely understood form), else the parts."""
        if all(isinstance(p, TextContent) for p in self.parts):
            return "\n\n".join(p.text for p in self.parts if isinstance(p, TextContent))
        return list(self.parts)


def _describe(kind: str, ref: ArtifactRef | None, name: str | None, mime: str | None, url: str | None) -> str:
    label = name or (ref.name if ref else None) or url or "unnamed"
    facts = [mime or (ref.mime_type if ref else None) or "unknown type"]
    if ref is not None and ref.size is not None:
        facts.append(f"{ref.size} bytes")
    note = f"[{kind} attached: {label} ({', '.join(facts)})]"
    if ref is not None and ref.summary:
        note += f" {ref.summary}"
    return note


async def _read_text(api: AgentRunAPI, ref: ArtifactRef, deadline: Deadline) -> str | None:
    try:
        async with deadline.scope():
            chunk = await api.artifacts.read_range(ref.artifact_id, offset=0, length=FILE_BYTES + 1)
    except DeadlineExceededError:
        raise
    except APIError:
        # An unreadable attachment is described instead of read; the question itself can still be answered.
        return None
    data = base64.b64decode(chunk.data_base64)
    text = data[:FILE_BYTES].decode("utf-8", errors="replace")
    if len(data) > FILE_BYTES or chunk.has_more:
        text += f"\n… [truncated: the file has {chunk.size} bytes]"
    return text


async def build_user_input(ctx: AgentRunContext, api: AgentRunAPI, *, deadline: Deadline) -> UserInput:
    """The user message of this run (empty when the event carries no input at all)."""
    built = UserInput()
    elements: list[ContentElement] = list(ctx.input.contents)
    if ctx.input.text and not any(isinstance(e, TextContent) for e in elements):
        # Adapters may carry the text in ``text`` and only the media in ``contents`` (AgentInput.text_parts).
        elements.insert(0, TextContent(text=ctx.input.text))
    seen = {
        e.artifact.artifact_id for e in elements if not isinstance(e, TextContent) and e.artifact is not None
    }
    for ref in ctx.input.attachments:
        if ref.artifact_id in seen:
            continue
        seen.add(ref.artifact_id)
        is_image = ref.artifact_type == "image" or (ref.mime_type or "").startswith("image/")
        elements.append(
            ImageContent(artifact=ref, mime_type=ref.mime_type)
            if is_image
            else FileContent(artifact=ref, name=ref.name, mime_type=ref.mime_type)
        )
    can_read = ctx.context.available_apis.artifact_read
    for element in elements:
        if isinstance(element, TextContent):
            built.parts.append(element)
            built.texts.append(element.text)
        elif isinstance(element, ImageContent):
            built.parts.append(element)
            built.images += 1
        elif isinstance(element, FileContent):
            ref, name = (
                element.artifact,
                element.name or (element.artifact.name if element.artifact else None),
            )
            mime = element.mime_type or (ref.mime_type if ref else None)
            text = None
            if ref is not None and can_read and is_text_file(mime, name):
                text = await _read_text(api, ref, deadline)
            if text is not None:
                label = name or (ref.artifact_id if ref else "file")
                built.parts.append(TextContent(text=f"[file {label}]\n{text}"))
                built.files_inlined += 1
            else:
                built.parts.append(TextContent(text=_describe("file", ref, name, mime, element.url)))
                built.notes += 1
        else:
            built.parts.append(
                TextContent(text=_describe("audio", element.artifact, None, element.mime_type, element.url))
            )
            built.notes += 1
    if not built.parts and ctx.event.event_type not in MESSAGE_EVENTS:
        # A non-message event is described as what it is, never passed off as something the user said.
        data = json.dumps_str(ctx.event.data)[:4000] if ctx.event.data else "{}"
        built.parts.append(TextContent(text=f"[event {ctx.event.event_type}] {data}"))
    return built
