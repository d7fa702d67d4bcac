"""Payloads returned by the back-call API (PROTOCOL_V1 §8, AGENT_CONTEXT_PROTOCOL §4).

Cursors are opaque strings: never parse them, never reuse one with another API, conversation or thread
(the host rejects that with ``invalid_argument``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue

from ._base import ProtocolModel
from .common import ArtifactRef, ContentElement

__all__ = [
    "ArtifactChunk",
    "ArtifactMetadata",
    "ChatMessage",
    "EventPage",
    "EventRecord",
    "HistoryPage",
    "KnowledgeBaseInfo",
    "KnowledgeHit",
    "KnowledgeRetrieveResult",
    "ModelResponse",
    "ModelStreamChunk",
    "ModelToolCall",
    "ModelUsage",
    "PlatformActionReceipt",
    "RerankItem",
    "RerankResult",
    "StateEntry",
    "StateListPage",
    "StateValue",
    "StorageEntry",
    "StorageListPage",
    "StorageValue",
    "ToolCallResult",
    "ToolDetail",
    "TranscriptItem",
]


class TranscriptItem(ProtocolModel):
    """One item of a conversation's transcript, the view projected from the event log."""

    item_id: str
    """Stable id."""
    cursor: str
    """Opaque cursor of this item, usable as ``before_cursor`` / ``after_cursor``."""
    conversation_id: str
    """Conversation."""
    thread_id: str | None = None
    """Thread."""
    role: Literal["user", "assistant", "system", "tool", "event"]
    """Who: ``event`` marks non-message events (never disguised as user text)."""
    item_type: Literal["message", "event", "tool_call", "tool_result"] = "message"
    """Kind of item."""
    event_id: str | None = None
    """The event-log event this item projects."""
    event_type: str | None = None
    """For ``event`` items: the event type, e.g. ``message.recalled``."""
    run_id: str | None = None
    """The run that produced it (assistant items)."""
    content: str | None = None
    """Plain text."""
    contents: list[ContentElement] = Field(
        default_factory=list[ContentElement], json_schema_extra={"default": []}
    )
    """Structured content; binary parts are artifact refs."""
    artifacts: list[ArtifactRef] = Field(default_factory=list[ArtifactRef], json_schema_extra={"default": []})
    """Attached artifacts (only when asked with ``include_artifacts``)."""
    created_at: int
    """Unix epoch milliseconds."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Extra data."""


class HistoryPage(ProtocolModel):
    """A page of transcript items, oldest first."""

    items: list[TranscriptItem] = Field(
        default_factory=list[TranscriptItem], json_schema_extra={"default": []}
    )
    """Items, in conversation order (oldest first) whatever the paging direction."""
    next_cursor: str | None = None
    """Continue in the same direction from here; ``None`` at the end."""
    prev_cursor: str | None = None
    """Page the other way from here."""
    has_more: bool = False
    """More items exist in the paging direction."""


class EventRecord(ProtocolModel):
    """One event of the conversation's event log, as a runner may see it."""

    event_id: str
    """Event id."""
    event_type: str
    """Stable event type; host records use the ``host.`` / ``run.`` prefixes."""
    cursor: str
    """Opaque cursor of this record."""
    source: str
    """Producer."""
    source_event_type: str | None = None
    """Platform event name."""
    conversation_id: str | None = None
    """Conversation."""
    thread_id: str | None = None
    """Thread."""
    actor_type: str | None = None
    """Actor kind."""
    actor_id: str | None = None
    """Actor id."""
    subject_type: str | None = None
    """Subject kind."""
    subject_id: str | None = None
    """Subject id."""
    run_id: str | None = None
    """Related run."""
    summary: str | None = None
    """Short text summary."""
    data: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Small structured data (large payloads stay behind ``raw_ref``)."""
    created_at: int
    """Unix epoch milliseconds."""


class EventPage(ProtocolModel):
    """A page of event records, oldest first."""

    items: list[EventRecord] = Field(default_factory=list[EventRecord], json_schema_extra={"default": []})
    """Records."""
    next_cursor: str | None = None
    """Older records continue here."""
    has_more: bool = False
    """More records exist."""


class ArtifactMetadata(ArtifactRef):
    """Everything the host tells a run about an artifact (never a host path)."""

    source: str | None = None
    """``platform``, ``runner``, ``tool``, ``host``."""
    conversation_id: str | None = None
    """Owning conversation."""
    run_id: str | None = None
    """Owning run."""
    created_at: int | None = None
    """Unix epoch milliseconds."""


class ArtifactChunk(ProtocolModel):
    """A byte range of an artifact."""

    artifact_id: str
    """Artifact."""
    offset: int = Field(ge=0)
    """Offset of the first byte."""
    length: int = Field(ge=0)
    """Bytes in ``data_base64``."""
    size: int = Field(ge=0)
    """Total size of the artifact."""
    data_base64: str
    """The bytes, base64."""
    has_more: bool = False
    """Bytes remain after this chunk."""
    mime_type: str | None = None
    """MIME type."""


class StateValue(ProtocolModel):
    """A state entry's value; ``exists`` is false when the key is unset."""

    scope: str
    """Scope."""
    key: str
    """Key."""
    value: JsonValue = None
    """Value (``None`` when unset)."""
    exists: bool = False
    """Whether the key is set."""
    version: int = 0
    """Monotonic per-key version for compare-and-set (0 = unset)."""


class StateEntry(ProtocolModel):
    """A key of a state listing."""

    key: str
    """Key."""
    version: int
    """Version."""
    updated_at: int
    """Unix epoch milliseconds."""


class StateListPage(ProtocolModel):
    """A page of state keys, ordered by key."""

    items: list[StateEntry] = Field(default_factory=list[StateEntry], json_schema_extra={"default": []})
    """Keys."""
    next_cursor: str | None = None
    """Continue here."""
    has_more: bool = False
    """More keys exist."""


class StorageValue(ProtocolModel):
    """A storage entry's bytes."""

    area: str
    """Area."""
    key: str
    """Key."""
    value_base64: str | None = None
    """Bytes, base64 (``None`` when unset)."""
    exists: bool = False
    """Whether the key is set."""
    size: int = 0
    """Size in bytes."""

    def value_bytes(self) -> bytes | None:
        """The decoded bytes."""
        import base64

        return None if self.value_base64 is None else base64.b64decode(self.value_base64)


class StorageEntry(ProtocolModel):
    """A key of a storage listing."""

    key: str
    """Key."""
    size: int
    """Size in bytes."""
    updated_at: int
    """Unix epoch milliseconds."""


class StorageListPage(ProtocolModel):
    """A page of storage keys, ordered by key."""

    items: list[StorageEntry] = Field(default_factory=list[StorageEntry], json_schema_extra={"default": []})
    """Keys."""
    next_cursor: str | None = None
    """Continue here."""
    has_more: bool = False
    """More keys exist."""


class ModelToolCall(ProtocolModel):
    """A tool call a model asked for."""

    id: str
    """Call id, echoed in the tool message that answers it."""
    name: str
    """Tool name."""
    arguments: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Parsed arguments."""


class ChatMessage(ProtocolModel):
    """A message sent to or returned by a chat model (OpenAI-compatible roles)."""

    role: Literal["system", "user", "assistant", "tool"]
    """Role."""
    content: str | list[ContentElement] | None = None
    """Text, or structured content (images by artifact ref or URL)."""
    tool_calls: list[ModelToolCall] = Field(
        default_factory=list[ModelToolCall], json_schema_extra={"default": []}
    )
    """Tool calls (assistant messages)."""
    tool_call_id: str | None = None
    """The call answered (tool messages)."""
    name: str | None = None
    """Tool name (tool messages)."""


class ModelUsage(ProtocolModel):
    """Token usage."""

    input_tokens: int = 0
    """Prompt tokens."""
    output_tokens: int = 0
    """Completion tokens."""
    total_tokens: int = 0
    """Sum."""


class ModelResponse(ProtocolModel):
    """Answer of ``models.invoke``."""

    model_id: str
    """The model that answered."""
    message: ChatMessage
    """The assistant message."""
    finish_reason: str | None = None
    """``stop``, ``length``, ``tool_calls``, ..."""
    usage: ModelUsage = Field(default_factory=ModelUsage)
    """Token usage."""


class ModelStreamChunk(ProtocolModel):
    """One chunk of ``models.stream``; tool calls arrive complete in the last chunks."""

    delta: str | None = None
    """New text."""
    tool_calls: list[ModelToolCall] = Field(
        default_factory=list[ModelToolCall], json_schema_extra={"default": []}
    )
    """Complete tool calls."""
    finish_reason: str | None = None
    """Set on the last chunk."""
    usage: ModelUsage | None = None
    """Set on the last chunk when known."""


class RerankItem(ProtocolModel):
    """One reranked document."""

    index: int
    """Index in the input list."""
    score: float
    """Relevance."""
    document: str
    """The document text."""


class RerankResult(ProtocolModel):
    """Answer of ``models.rerank``, best first."""

    results: list[RerankItem] = Field(default_factory=list[RerankItem], json_schema_extra={"default": []})
    """Documents."""


class ToolDetail(ProtocolModel):
    """Answer of ``tools.get_detail``."""

    name: str
    """Tool name."""
    description: str | None = None
    """What it does."""
    parameters: dict[str, Any] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """JSON Schema of its arguments."""


class ToolCallResult(ProtocolModel):
    """Answer of ``tools.call``. A large result comes back as an artifact ref."""

    content: JsonValue = None
    """The tool's result (JSON), or a preview when ``artifact`` is set."""
    is_error: bool = False
    """The tool reported a failure of its own."""
    artifact: ArtifactRef | None = None
    """The full result, when it was too large to return inline."""


class KnowledgeBaseInfo(ProtocolModel):
    """One entry of ``knowledge.list``."""

    kb_id: str
    """Id."""
    name: str | None = None
    """Name."""
    description: str | None = None
    """Description."""


class KnowledgeHit(ProtocolModel):
    """One retrieved passage."""

    text: str
    """Passage text."""
    score: float
    """Relevance (higher is better)."""
    kb_id: str
    """Knowledge base."""
    document_id: str | None = None
    """Source document."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """E.g. file name, heading."""


class KnowledgeRetrieveResult(ProtocolModel):
    """Answer of ``knowledge.retrieve``, best first."""

    hits: list[KnowledgeHit] = Field(default_factory=list[KnowledgeHit], json_schema_extra={"default": []})
    """Passages."""


class PlatformActionReceipt(ProtocolModel):
    """Answer of ``platform.request_action``: v1 records the request and never executes it."""

    accepted: bool
    """Recorded."""
    executed: bool = False
    """Always false in v1."""
    approval_required: str | None = None
    """The approval the binding would require."""
