"""The back-call actions a runner may make (PROTOCOL_V1 §8), as one table.

Every action has a name (``history.page``), a params model, a result model, and flags. The SDK client, the
host's dispatcher, the wire protocol, the MCP bridge and the conformance kit's simulated host all read
this table, so the vocabulary cannot drift between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, Field, JsonValue

from ._base import ProtocolModel
from .api_types import (
    ArtifactChunk,
    ArtifactMetadata,
    ChatMessage,
    EventPage,
    EventRecord,
    HistoryPage,
    KnowledgeBaseInfo,
    KnowledgeRetrieveResult,
    ModelResponse,
    ModelStreamChunk,
    PlatformActionReceipt,
    RerankResult,
    StateListPage,
    StateValue,
    StorageListPage,
    StorageValue,
    ToolCallResult,
    ToolDetail,
)
from .results import StateScope

__all__ = [
    "ACTIONS",
    "ActionSpec",
    "ArtifactIdParams",
    "ArtifactReadParams",
    "BackCallRequest",
    "EmptyParams",
    "EmptyResult",
    "EventGetParams",
    "EventPageParams",
    "HistoryPageParams",
    "HistorySearchParams",
    "KnowledgeListResult",
    "KnowledgeRetrieveParams",
    "ModelInvokeParams",
    "ModelRerankParams",
    "PlatformActionParams",
    "StateDeleteParams",
    "StateGetParams",
    "StateListParams",
    "StateSetParams",
    "StorageArea",
    "StorageDeleteParams",
    "StorageGetParams",
    "StorageListParams",
    "StorageSetParams",
    "ToolCallParams",
    "ToolDetailParams",
]

HISTORY_PAGE_DEFAULT_LIMIT: Final = 50
HISTORY_PAGE_MAX_LIMIT: Final = 100
StorageArea = Literal["plugin", "workspace", "binding"]


class BackCallRequest(ProtocolModel):
    """The envelope of one back-call, on every transport."""

    run_id: str = Field(min_length=1)
    """The live run the call acts for."""
    action: str
    """Action name from :data:`ACTIONS`."""
    params: dict[str, Any] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Action parameters (validated against the action's params model by the host)."""
    caller: str | None = None
    """Plugin identity ``author/plugin`` of the caller. Set by the transport, never by runner code: the host
    rejects a call without one as ``unauthorized``."""
    idempotency_key: str | None = Field(default=None, max_length=200)
    """De-duplication key of a side-effecting call; a repeat returns the first answer."""
    call_token: str | None = Field(default=None, repr=False)
    """The run's call credential (``AgentRunRequest.call_token``), presented by :class:`AgentRunAPI` on every call.
    A run id alone is not a credential: the host refuses a call whose token is not its run's as ``unauthorized``."""


class EmptyParams(ProtocolModel):
    """Params of actions that take none."""


class EmptyResult(ProtocolModel):
    """Result of actions that return nothing."""

    ok: bool = True
    """Always true."""


class ModelInvokeParams(ProtocolModel):
    """``models.invoke`` / ``models.stream``."""

    model_id: str
    """A model from ``ctx.resources.models``."""
    messages: list[ChatMessage] = Field(min_length=1)
    """Conversation to complete."""
    tools: list[dict[str, Any]] | None = None
    """OpenAI-style function tool schemas."""
    extra_args: dict[str, JsonValue] | None = None
    """Provider arguments merged over the model's configured ones."""


class ModelRerankParams(ProtocolModel):
    """``models.rerank``."""

    model_id: str
    """A rerank model from ``ctx.resources.models``."""
    query: str
    """Query."""
    documents: list[str] = Field(max_length=1000)
    """Documents to rank."""
    top_k: int | None = Field(default=None, ge=1)
    """Keep the best ``top_k``."""


class ToolDetailParams(ProtocolModel):
    """``tools.get_detail``."""

    tool_name: str
    """A tool from ``ctx.resources.tools``."""


class ToolCallParams(ProtocolModel):
    """``tools.call``."""

    tool_name: str
    """A tool from ``ctx.resources.tools``."""
    parameters: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Arguments."""


class KnowledgeRetrieveParams(ProtocolModel):
    """``knowledge.retrieve``."""

    kb_id: str
    """A knowledge base from ``ctx.resources.knowledge_bases``."""
    query_text: str = Field(min_length=1)
    """Query."""
    top_k: int = Field(default=5, ge=1, le=50)
    """Passages to return."""
    filters: dict[str, JsonValue] | None = None
    """Metadata filters (equality)."""


class KnowledgeListResult(ProtocolModel):
    """Answer of ``knowledge.list``."""

    knowledge_bases: list[KnowledgeBaseInfo] = Field(
        default_factory=list[KnowledgeBaseInfo], json_schema_extra={"default": []}
    )
    """The run's knowledge bases."""


class HistoryPageParams(ProtocolModel):
    """``history.page``."""

    conversation_id: str | None = None
    """Defaults to the run's conversation; another one needs an explicit grant."""
    thread_id: str | None = None
    """Defaults to the run's thread."""
    before_cursor: str | None = None
    """Items older than this cursor."""
    after_cursor: str | None = None
    """Items newer than this cursor."""
    limit: int = Field(default=HISTORY_PAGE_DEFAULT_LIMIT, ge=1)
    """Page size; the host caps it at 100."""
    direction: Literal["backward", "forward"] = "backward"
    """``backward`` walks to older items, ``forward`` to newer ones."""
    include_artifacts: bool = False
    """Include artifact refs of items."""


class HistorySearchParams(ProtocolModel):
    """``history.search``."""

    query: str = Field(min_length=1, max_length=1000)
    """Full-text query."""
    filters: dict[str, JsonValue] | None = None
    """``conversation_id`` (must be the run's unless granted), ``roles``, ``event_types``."""
    top_k: int = Field(default=10, ge=1)
    """Hits to return; the host caps it at 50."""


class EventGetParams(ProtocolModel):
    """``events.get``."""

    event_id: str
    """Event id."""


class EventPageParams(ProtocolModel):
    """``events.page``."""

    before_cursor: str | None = None
    """Records older than this cursor."""
    limit: int = Field(default=HISTORY_PAGE_DEFAULT_LIMIT, ge=1)
    """Page size; capped at 100."""
    event_types: list[str] | None = None
    """Only these types."""


class ArtifactIdParams(ProtocolModel):
    """``artifacts.metadata`` / ``artifacts.open_stream``."""

    artifact_id: str
    """Artifact."""


class ArtifactReadParams(ProtocolModel):
    """``artifacts.read_range``."""

    artifact_id: str
    """Artifact."""
    offset: int = Field(default=0, ge=0)
    """First byte."""
    length: int = Field(default=65536, ge=1)
    """Bytes to read; the host caps it (1 MiB)."""


class StateGetParams(ProtocolModel):
    """``state.get``."""

    scope: StateScope
    """Scope."""
    key: str = Field(min_length=1, max_length=200)
    """Key."""


class StateSetParams(ProtocolModel):
    """``state.set``."""

    scope: StateScope
    """Scope."""
    key: str = Field(min_length=1, max_length=200)
    """Key."""
    value: JsonValue
    """Value (at most 256 KiB encoded)."""
    expected_version: int | None = Field(default=None, ge=0)
    """Compare-and-set: write only if the current version is this (0 = key must not exist)."""


class StateDeleteParams(ProtocolModel):
    """``state.delete``."""

    scope: StateScope
    """Scope."""
    key: str = Field(min_length=1, max_length=200)
    """Key."""


class StateListParams(ProtocolModel):
    """``state.list``."""

    scope: StateScope
    """Scope."""
    prefix: str | None = None
    """Only keys starting with this (matched literally)."""
    cursor: str | None = None
    """Continue from a previous page."""
    limit: int = Field(default=100, ge=1)
    """Page size; capped at 100."""


class StorageGetParams(ProtocolModel):
    """``storage.get``."""

    area: StorageArea
    """Area."""
    key: str = Field(min_length=1, max_length=200)
    """Key."""


class StorageSetParams(ProtocolModel):
    """``storage.set``."""

    area: StorageArea
    """Area."""
    key: str = Field(min_length=1, max_length=200)
    """Key."""
    value_base64: str
    """Bytes, base64 (the host caps the size)."""


class StorageDeleteParams(ProtocolModel):
    """``storage.delete``."""

    area: StorageArea
    """Area."""
    key: str = Field(min_length=1, max_length=200)
    """Key."""


class StorageListParams(ProtocolModel):
    """``storage.list``."""

    area: StorageArea
    """Area."""
    prefix: str | None = None
    """Only keys starting with this (matched literally)."""
    cursor: str | None = None
    """Continue from a previous page."""
    limit: int = Field(default=100, ge=1)
    """Page size; capped at 100."""


class PlatformActionParams(ProtocolModel):
    """``platform.request_action``."""

    action: str
    """Platform action."""
    target: dict[str, JsonValue]
    """Target."""
    payload: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Arguments."""
    idempotency_key: str = Field(min_length=1, max_length=200)
    """Required: platform actions have side effects."""


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """One back-call action."""

    name: str
    """Wire name."""
    params: type[BaseModel]
    """Params model."""
    result: type[BaseModel]
    """Result model (of each chunk, for streaming actions)."""
    streaming: bool = False
    """Answers with a stream of results."""
    side_effecting: bool = False
    """Changes host state; accepts an idempotency key."""


def _spec(
    name: str,
    params: type[BaseModel],
    result: type[BaseModel],
    *,
    streaming: bool = False,
    side_effecting: bool = False,
) -> tuple[str, ActionSpec]:
    return name, ActionSpec(name, params, result, streaming=streaming, side_effecting=side_effecting)


ACTIONS: Final[dict[str, ActionSpec]] = dict(
    [
        _spec("models.invoke", ModelInvokeParams, ModelResponse),
        _spec("models.stream", ModelInvokeParams, ModelStreamChunk, streaming=True),
        _spec("models.rerank", ModelRerankParams, RerankResult),
        _spec("tools.get_detail", ToolDetailParams, ToolDetail),
        _spec("tools.call", ToolCallParams, ToolCallResult, side_effecting=True),
        _spec("knowledge.list", EmptyParams, KnowledgeListResult),
        _spec("knowledge.retrieve", KnowledgeRetrieveParams, KnowledgeRetrieveResult),
        _spec("history.page", HistoryPageParams, HistoryPage),
        _spec("history.search", HistorySearchParams, HistoryPage),
        _spec("events.get", EventGetParams, EventRecord),
        _spec("events.page", EventPageParams, EventPage),
        _spec("artifacts.metadata", ArtifactIdParams, ArtifactMetadata),
        _spec("artifacts.read_range", ArtifactReadParams, ArtifactChunk),
        _spec("artifacts.open_stream", ArtifactIdParams, ArtifactChunk, streaming=True),
        _spec("state.get", StateGetParams, StateValue),
        _spec("state.set", StateSetParams, StateValue, side_effecting=True),
        _spec("state.delete", StateDeleteParams, EmptyResult, side_effecting=True),
        _spec("state.list", StateListParams, StateListPage),
        _spec("storage.get", StorageGetParams, StorageValue),
        _spec("storage.set", StorageSetParams, StorageValue, side_effecting=True),
        _spec("storage.delete", StorageDeleteParams, EmptyResult, side_effecting=True),
        _spec("storage.list", StorageListParams, StorageListPage),
        _spec("platform.request_action", PlatformActionParams, PlatformActionReceipt, side_effecting=True),
    ]
)
"""Every back-call action, by wire name."""
