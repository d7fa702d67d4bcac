"""The run context a runner receives (PROTOCOL_V1 §5): event first, handles only, never a history window."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue

from ._base import ProtocolModel
from .common import ArtifactRef, ContentElement, RawEventRef, StaticContextRef, TextContent
from .resources import AgentResources
from .results import StateScope
from .version import PROTOCOL_VERSION

__all__ = [
    "ActorContext",
    "AdapterContext",
    "AgentEventContext",
    "AgentInput",
    "AgentRunContext",
    "AgentRunRequest",
    "AgentRunState",
    "AgentRuntimeContext",
    "AgentTrigger",
    "ContextAPICapabilities",
    "ContextAccess",
    "ConversationContext",
    "DeliveryContext",
    "InlineContextPolicy",
    "SubjectContext",
    "TriggerSource",
]

TriggerSource = Literal["platform", "webui", "api", "scheduler", "system", "host_adapter"]
InlineMode = Literal["none", "current_event", "recent_tail", "summary_tail"]
"""What a host inlined besides the current event; v1 hosts use ``current_event``."""


class AgentTrigger(ProtocolModel):
    """Why the run started (§5.3)."""

    type: str
    """Equal to ``event.event_type`` or coarser."""
    source: TriggerSource
    """Which entry produced the event."""
    timestamp: int | None = None
    """Unix epoch milliseconds."""


class AgentEventContext(ProtocolModel):
    """The current event (§5.4). Platform names appear only in ``source_event_type``."""

    event_id: str
    """Host-scoped event id."""
    event_type: str
    """Stable protocol name: ``message.received``, ``message.recalled``, ``schedule.triggered``, ..."""
    event_time: int | None = None
    """Unix epoch milliseconds of the event."""
    source: str
    """Adapter that produced it."""
    source_event_type: str | None = None
    """The platform's own event name."""
    raw_ref: RawEventRef | None = None
    """The raw payload, kept by the host when it is large."""
    data: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Small structured event data (the host moves anything large to ``raw_ref``)."""


class ConversationContext(ProtocolModel):
    """Where the event happened (§5.5)."""

    conversation_id: str | None = None
    """Conversation."""
    thread_id: str | None = None
    """Thread inside the conversation."""
    launcher_type: str | None = None
    """``person`` or ``group`` on IM platforms."""
    launcher_id: str | None = None
    """Platform id of the chat."""
    bot_id: str | None = None
    """Bot that received the event."""
    workspace_id: str | None = None
    """Workspace."""


class ActorContext(ProtocolModel):
    """Who caused the event (§5.5)."""

    actor_type: str
    """``user``, ``system``, ``bot``, ..."""
    actor_id: str | None = None
    """Platform id."""
    actor_name: str | None = None
    """Display name."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Extra non-secret data."""


class SubjectContext(ProtocolModel):
    """What the event is about (§5.5): the message, the membership, the schedule..."""

    subject_type: str
    """Kind of subject."""
    subject_id: str | None = None
    """Its id."""
    data: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Small structured data."""


class AgentInput(ProtocolModel):
    """The current event's main input (§5.6); never history."""

    text: str | None = None
    """Plain text, when there is any."""
    contents: list[ContentElement] = Field(
        default_factory=list[ContentElement], json_schema_extra={"default": []}
    )
    """Structured content in order (text, images, files, audio)."""
    attachments: list[ArtifactRef] = Field(
        default_factory=list[ArtifactRef], json_schema_extra={"default": []}
    )
    """Stored attachments."""
    message_chain: dict[str, Any] | None = None
    """Platform compatibility field; do not depend on it."""

    def text_parts(self) -> list[str]:
        """All text: ``text`` when set, else the text content elements."""
        parts = [c.text for c in self.contents if isinstance(c, TextContent)]
        if self.text is not None and not parts:
            return [self.text]
        return parts


class DeliveryContext(ProtocolModel):
    """How results reach the user (§5.7)."""

    surface: str
    """``http.stream``, ``http.wait``, ``cli``, ``mcp``, ``platform``, ..."""
    reply_target: dict[str, JsonValue] | None = None
    """Where a reply goes."""
    supports_streaming: bool = False
    """Deltas are shown as they arrive."""
    supports_edit: bool = False
    """Sent messages can be edited."""
    supports_reaction: bool = False
    """Reactions can be added."""
    max_message_size: int | None = Field(default=None, ge=1)
    """Largest message the surface shows, in characters."""
    platform_capabilities: dict[str, Any] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Extra abilities."""


class InlineContextPolicy(ProtocolModel):
    """What the host inlined (§5.8). In v1 hosts inline the current event only."""

    mode: InlineMode
    """Inline mode."""
    delivered_count: int = 0
    """History items inlined."""
    source_total_count: int | None = None
    """History items that exist, when known."""
    messages_complete: bool = False
    """Whether the inlined items are the whole history."""
    reason: str | None = None
    """Why this mode."""


class ContextAPICapabilities(ProtocolModel):
    """Which pull APIs this run may call (§5.8); computed from the authorization snapshot."""

    history_page: bool = False
    """``history.page``."""
    history_search: bool = False
    """``history.search``."""
    event_get: bool = False
    """``events.get``."""
    event_page: bool = False
    """``events.page``."""
    artifact_metadata: bool = False
    """``artifacts.metadata``."""
    artifact_read: bool = False
    """``artifacts.read_range`` / ``open_stream``."""
    state: bool = False
    """``state.*`` (for at least one scope)."""
    state_scopes: list[StateScope] | None = None
    """The state scopes granted to this run (an extension of v1: ``None`` from a host that does not say; then
    ``state`` is all a runner knows, and a call for an ungranted scope fails ``unauthorized``)."""
    storage: bool = False
    """``storage.*``."""
    prompt_get: bool = False
    """Reserved; always false in v1 (HOST_SDK §4.8)."""


class ContextAccess(ProtocolModel):
    """Handles for pulling more context (§5.8)."""

    conversation_id: str | None = None
    """Conversation the history APIs read."""
    thread_id: str | None = None
    """Thread the history APIs read."""
    latest_cursor: str | None = None
    """Opaque cursor just after the newest history item, for ``history.page(before_cursor=...)``."""
    event_seq: int | None = None
    """Sequence of the current event in its conversation's event log."""
    transcript_seq: int | None = None
    """Sequence of the newest transcript item before this run."""
    has_history_before: bool = False
    """There is at least one earlier transcript item."""
    inline_policy: InlineContextPolicy = Field(
        default_factory=lambda: InlineContextPolicy(mode="current_event", reason="self_managed_context")
    )
    """What was inlined."""
    available_apis: ContextAPICapabilities = Field(default_factory=ContextAPICapabilities)
    """What may be pulled."""


class AgentRuntimeContext(ProtocolModel):
    """Runtime facts of the run (§5.9)."""

    host: str = "agentrunner"
    """Host implementation name."""
    protocol_version: str = PROTOCOL_VERSION
    """Protocol major version the host speaks."""
    langbot_version: str | None = None
    """Host version string (name kept from the spec)."""
    trace_id: str
    """Trace id for logs."""
    deadline_at: float | None = None
    """Unix epoch **seconds** (float) after which the host ends the run; bounds every back-call."""
    locale: str | None = None
    """User locale."""
    timezone: str | None = None
    """User time zone (IANA)."""
    static_refs: dict[str, StaticContextRef] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Content hashes of static context."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Extra data, e.g. ``session_key`` (a stable key for runners with native sessions)."""


class AgentRunState(ProtocolModel):
    """Snapshot of host-owned state the binding grants (§5.10)."""

    conversation: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Conversation scope."""
    actor: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Actor scope."""
    subject: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Subject scope."""
    runner: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Runner scope."""


class AdapterContext(ProtocolModel):
    """Entry-adapter metadata (§12): one-shot, JSON-safe, non-secret; never prompts, history or resources."""

    extra: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """E.g. ``params``."""


class AgentRunContext(ProtocolModel):
    """The one authoritative context a runner sees (§5.2)."""

    run_id: str
    """This run."""
    trigger: AgentTrigger
    """Why it started."""
    event: AgentEventContext
    """The current event."""
    conversation: ConversationContext | None = None
    """Where."""
    actor: ActorContext | None = None
    """Who."""
    subject: SubjectContext | None = None
    """About what."""
    input: AgentInput
    """Current input."""
    delivery: DeliveryContext
    """Delivery abilities."""
    resources: AgentResources
    """Authorized resources."""
    context: ContextAccess
    """Context handles."""
    state: AgentRunState = Field(default_factory=AgentRunState)
    """State snapshot."""
    runtime: AgentRuntimeContext
    """Runtime facts."""
    config: dict[str, Any] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """The binding's runner config (never plugin instance state)."""
    adapter: AdapterContext | None = None
    """Entry adapter metadata."""
    metadata: dict[str, Any] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Extra data."""


class AgentRunRequest(ProtocolModel):
    """``RUN_AGENT`` request from host to runtime (§5.1)."""

    runner_id: str
    """Runner to run."""
    runner_name: str
    """Runner name inside its plugin."""
    context: AgentRunContext
    """The run context."""
    call_token: str | None = Field(default=None, repr=False)
    """An unguessable per-run secret the host issues; every back-call of the run presents it
    (``BackCallRequest.call_token``). It is kept out of the context so runner code never logs it by dumping
    ``ctx``; only the run's own :class:`AgentRunAPI` holds it."""
