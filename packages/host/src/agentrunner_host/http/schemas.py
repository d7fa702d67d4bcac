"""Request and response bodies of the HTTP API. The OpenAPI document is generated from these models."""

from __future__ import annotations

from typing import Any, Literal

from agentrunner import ActorContext, AgentInput, SubjectContext
from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from agentrunner_host.admission import Identifier
from agentrunner_host.config import BindingSpec
from agentrunner_host.config.model import EVENT_TYPE_PATTERN
from agentrunner_host.definitions import AgentConfig

__all__ = [
    "AgentList",
    "AgentOut",
    "BindingList",
    "BindingOut",
    "CancelOut",
    "ErrorBody",
    "ErrorDetail",
    "EventSubmission",
    "Health",
    "Readiness",
    "ResultItem",
    "ResultPage",
    "RunAccepted",
    "RunOut",
    "RunWithResults",
    "FailedPluginOut",
    "RunnerList",
    "RunnerOut",
    "TranscriptItemOut",
    "TranscriptPage",
]

_ID = Field(min_length=1, max_length=200)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ErrorDetail(_Body):
    """What went wrong."""

    code: str
    """Stable machine-readable code (``binding_not_found``, ``duplicate_event``, ``unauthorized``...)."""
    message: str
    """Human-readable explanation."""
    run_id: str | None = None
    """For ``duplicate_event``: the run of the first delivery."""


class ErrorBody(_Body):
    """Every error answer."""

    error: ErrorDetail
    """The error."""


class EventSubmission(_Body):
    """An event to run: the part of an event envelope an API client provides (``source`` is always ``api``)."""

    event_id: Identifier | None = None
    """Idempotency key; a second submission with the same id answers 409 with the first run's id.
    Generated when absent."""
    event_type: str = Field(
        default="message.received", min_length=1, max_length=100, pattern=EVENT_TYPE_PATTERN
    )
    """Event type: a stable dotted name such as ``message.received`` (a platform's own name is refused)."""
    text: str | None = Field(default=None, max_length=100_000)
    """Shortcut for ``input.text``."""
    input: AgentInput | None = None
    """The full input (text, content parts, attachments); not together with ``text``."""
    conversation_id: Identifier | None = None
    """Conversation (transcript and conversation state are kept per conversation)."""
    thread_id: Identifier | None = None
    """Thread inside the conversation."""
    agent_id: Identifier | None = None
    """Send the event straight to this agent instead of resolving a binding (the console's debug chat,
    ``agentrunner chat --agent``); 404 ``not_found`` when there is no such agent."""
    bot_id: Identifier | None = None
    """Receiving bot (for bot-scoped bindings)."""
    workspace_id: Identifier | None = None
    """Workspace (for workspace-scoped bindings)."""
    actor: ActorContext | None = None
    """Who caused the event."""
    subject: SubjectContext | None = None
    """What it is about."""
    data: dict[str, JsonValue] = {}
    """Structured event data."""
    params: dict[str, JsonValue] = {}
    """Entry parameters."""
    locale: str | None = Field(default=None, max_length=35)
    """User locale."""
    timezone: str | None = Field(default=None, max_length=64)
    """User time zone."""
    event_time: int | None = Field(default=None, ge=0)
    """Unix epoch milliseconds."""

    @model_validator(mode="after")
    def _one_input(self) -> EventSubmission:
        if self.text is not None and self.input is not None:
            raise ValueError("give either text or input, not both")
        return self


class RunAccepted(_Body):
    """A submitted event's run."""

    run_id: str
    """The run; poll ``GET /v1/runs/{run_id}`` or stream ``GET /v1/runs/{run_id}/results``."""
    event_id: str
    """The event id (generated when the submission had none)."""
    status: Literal["running"] = "running"
    """Always ``running`` at acceptance."""


class RunOut(_Body):
    """A run."""

    run_id: str
    """Run id."""
    status: Literal["running", "completed", "failed"]
    """State."""
    code: str | None = None
    """Failure code (``cancelled``, ``deadline_exceeded``, ``host_restarted``...)."""
    message: str | None = None
    """Failure message."""
    runner_id: str
    """Runner."""
    binding_id: str
    """Binding that chose the runner."""
    event_id: str
    """Triggering event."""
    conversation_id: str | None = None
    """Conversation."""
    thread_id: str | None = None
    """Thread."""
    started_at: int | None = None
    """Unix epoch milliseconds."""
    ended_at: int | None = None
    """Unix epoch milliseconds."""
    results: int
    """Results so far (the terminal one included once the run ended)."""
    live: bool
    """The run is executing in this server process."""
    usage: dict[str, Any] = {}
    """Usage totals reported by the runner."""


class ResultItem(_Body):
    """One result of a run."""

    host_seq: int
    """1-based position assigned by the host; the replay cursor (``after``, SSE ``id``)."""
    type: str
    """Result type (``message.delta``, ``message.completed``, ``run.completed``...)."""
    result: dict[str, Any]
    """The result as the runner protocol defines it."""


class ResultPage(_Body):
    """Results after a cursor."""

    run_id: str
    """Run."""
    results: list[ResultItem]
    """Results in order."""
    next_after: int
    """Cursor for the next page."""
    done: bool
    """The run has ended and this page reaches its terminal result."""


class RunWithResults(_Body):
    """A finished run with all its results (``?wait=true``)."""

    run: RunOut
    """The run."""
    results: list[ResultItem]
    """Every result in order."""


class CancelOut(_Body):
    """Answer to a cancellation."""

    run_id: str
    """Run."""
    cancelled: bool
    """True when this request cancelled the run; false when it had already ended."""
    status: str
    """Run status after the request."""
    cancelling: bool = False
    """True when the run's cancellation is accepted (by this or an earlier request) but the run has not ended yet
    (answered ``202``); the host force-ends it after its grace period."""


class RunnerOut(_Body):
    """An available runner."""

    runner_id: str
    """``plugin:author/plugin/runner``."""
    plugin_id: str
    """Plugin."""
    label: dict[str, str]
    """Display name by locale."""
    description: dict[str, str] | None = None
    """Description by locale."""
    capabilities: dict[str, Any]
    """Declared capabilities."""
    permissions: dict[str, Any]
    """Declared permissions."""
    config_schema: list[dict[str, Any]]
    """The runner's config form (fields marked ``secret`` are redacted wherever a config is shown)."""


class FailedPluginOut(_Body):
    """A plugin that yields no runner, and why."""

    plugin_id: str | None
    """``author/plugin``, when known."""
    reason: str
    """Why it failed (e.g. the import error of its runtime)."""
    source: str
    """Where it was found: its manifest path or ``entry-point:<distribution>`` (empty when unknown)."""


class RunnerList(_Body):
    """Runners, and the plugins that failed to provide any."""

    runners: list[RunnerOut]
    """Every available runner."""
    failed: list[FailedPluginOut] = []
    """Plugins that failed to load, with the reason; their runners are not in ``runners``."""


class AgentOut(_Body):
    """An agent (runner config secrets redacted)."""

    agent: AgentConfig
    """The agent."""
    source: Literal["config", "api", "default"]
    """Where it is defined; only ``api`` agents can be changed through the API."""


class AgentList(_Body):
    """Agents."""

    agents: list[AgentOut]
    """Every agent."""


class BindingOut(_Body):
    """A binding."""

    binding: BindingSpec
    """The binding."""
    source: Literal["config", "api", "default"]
    """Where it is defined; only ``api`` bindings can be changed through the API."""


class BindingList(_Body):
    """Bindings."""

    bindings: list[BindingOut]
    """Every binding."""


class TranscriptItemOut(_Body):
    """One transcript item."""

    seq: int
    """Position in the thread, from 1."""
    item_id: str
    """Item id."""
    role: str
    """``user``, ``assistant``, ``tool``..."""
    item_type: str
    """``message``, ``event``, ``tool_call``, ``tool_result``."""
    content: str | None = None
    """Plain text."""
    contents: list[dict[str, Any]] = []
    """Content parts."""
    artifacts: list[dict[str, Any]] = []
    """Artifact references."""
    run_id: str | None = None
    """Producing run."""
    event_id: str | None = None
    """Source event."""
    created_at: int
    """Unix epoch milliseconds."""


class TranscriptPage(_Body):
    """A page of a conversation's transcript, oldest first."""

    conversation_id: str
    """Conversation."""
    thread_id: str | None = None
    """Thread (``null`` = main line)."""
    items: list[TranscriptItemOut]
    """Items."""
    next_cursor: str | None = None
    """Pass as ``cursor`` for the next page; ``null`` at the end."""


class Health(_Body):
    """Liveness."""

    status: Literal["ok"] = "ok"
    """Always ``ok`` while the process serves requests."""


class Readiness(_Body):
    """Readiness."""

    ready: bool
    """The database answers and is migrated to head."""
    detail: str
    """Why (not) ready; names the plugins that failed to load."""
    failed_plugins: list[FailedPluginOut] = []
    """Plugins that failed to load (they do not make the host unready: the other plugins keep working)."""
