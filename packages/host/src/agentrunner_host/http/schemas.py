"""Request and response bodies of the HTTP API. The OpenAPI document is generated from these models."""

from __future__ import annotations

from typing import Literal

from agentrunner import ActorContext, AgentInput, SubjectContext
from agentrunner.codec import WireObject
from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from agentrunner_host.admission import Identifier
from agentrunner_host.config import BindingSpec
from agentrunner_host.config.model import EVENT_TYPE_PATTERN
from agentrunner_host.definitions import AgentConfig
from agentrunner_host.service import RunView
from agentrunner_host.stores import AuditEntry

__all__ = [
    "AgentList",
    "AgentOut",
    "AuditEntryOut",
    "AuditPageOut",
    "BindingCheckOut",
    "BindingList",
    "BindingOut",
    "CancelOut",
    "DisableRunner",
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
    "ProcessStatusOut",
    "RunnerControlOut",
    "RunnerList",
    "RunnerOut",
    "RunnerRiskOut",
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
    # default factories, not ``{}`` defaults: validation deep-copied a mutable default at every submission
    data: dict[str, JsonValue] = Field(
        default_factory=dict[str, JsonValue], json_schema_extra={"default": {}}
    )
    """Structured event data."""
    params: dict[str, JsonValue] = Field(
        default_factory=dict[str, JsonValue], json_schema_extra={"default": {}}
    )
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


class RunOut(RunView):
    """A run."""

    # No fields of its own: every field is RunView's, the one shape ``runs show`` prints too. The subclass only
    # keeps the OpenAPI component's name ``RunOut`` (pydantic names a component after its class).


class ResultItem(_Body):
    """One result of a run."""

    host_seq: int
    """1-based position assigned by the host; the replay cursor (``after``, SSE ``id``)."""
    type: str
    """Result type (``message.delta``, ``message.completed``, ``run.completed``...)."""
    result: dict[str, JsonValue]
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


class RunnerControlOut(_Body):
    """An operator's disable switch on a runner."""

    runner_id: str
    """The runner."""
    reason: str
    """Why (shown in every refusal)."""
    disabled_by: str | None = None
    """Who: ``api`` or ``cli``."""
    disabled_at: int
    """Unix epoch milliseconds."""


class DisableRunner(_Body):
    """Disable a runner: no new run of it starts until it is enabled again."""

    reason: str = Field(min_length=1, max_length=1000)
    """Why; answered with every refused event."""


class RunnerRiskOut(_Body):
    """What a runner may touch, from its manifest, its agents and how its plugin runs (docs/security.md)."""

    level: Literal["low", "medium", "high"]
    """Overall level; ``reasons`` says why."""
    executes_code: bool
    """It runs an external harness that executes code."""
    network: Literal["host_only", "external_service", "unrestricted"]
    """What it is configured or able to contact (the host does not confine a plugin's own sockets)."""
    secrets: list[str]
    """Names of the environment variables whose values it receives (never the values)."""
    permissions: list[str]
    """What its manifest asks of the host, ``area:operation``."""
    mcp_bridge: bool
    """It uses the run-scoped MCP bridge."""
    mcp_servers: list[str]
    """Extra MCP servers a binding may give it."""
    runtime: Literal["in_process", "subprocess", "remote"]
    """Where it runs (``in_process`` shares the host's memory)."""
    agents: list[str]
    """Agents configured with it."""
    reasons: list[str]
    """One sentence per fact behind ``level``."""


class ProcessStatusOut(_Body):
    """How a runner's plugin runs right now."""

    mode: Literal["in_process", "subprocess", "remote"]
    """Where it runs."""
    warm: bool
    """Its process is up (or its remote runtime connected)."""
    pid: int | None = None
    """Process id of the live child."""
    starts: int = 0
    """Child processes started so far."""
    restarts: int = 0
    """Starts after the first."""
    live_runs: int = 0
    """Runs executing in it now."""


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
    capabilities: WireObject
    """Declared capabilities."""
    permissions: WireObject
    """Declared permissions."""
    config_schema: list[WireObject]
    """The runner's config form (fields marked ``secret`` are redacted wherever a config is shown)."""
    protocol_version: str = ""
    """The protocol version its manifest declares."""
    disabled: RunnerControlOut | None = None
    """Set when an operator disabled it: events bound to it are refused (403 ``runner_disabled``)."""
    risk: RunnerRiskOut | None = None
    """What it may touch."""
    process: ProcessStatusOut | None = None
    """How its plugin runs."""
    warnings: list[str] = []
    """Registry warnings about its plugin (manifests left out and why)."""


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


class BindingCheckOut(_Body):
    """What saving a binding would do (nothing is written)."""

    ok: bool
    """Saving it would succeed as far as bindings go (no conflict, its agent exists)."""
    conflicts: dict[str, str]
    """Bindings it conflicts with → why."""
    problems: list[str]
    """Other reasons it would be refused."""
    precedence: list[int] | None = None
    """Its sort key: scope specificity, number of filters, explicit event type (1) over ``*`` (0), priority."""
    order: list[str]
    """Enabled bindings, highest precedence first, with this one in its place; the first that matches an
    event handles it."""


AuditEntryOut = AuditEntry
"""One audit record: the stores' :class:`~agentrunner_host.stores.AuditEntry` itself (the
OpenAPI component ``AuditEntry``), so the API, ``audit`` on the CLI and the console read one declaration."""


class AuditPageOut(_Body):
    """A page of the back-call audit."""

    entries: list[AuditEntryOut]
    """Records in the requested order."""
    next_cursor: str | None = None
    """Pass as ``cursor`` for the next page; absent at the end."""


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
    contents: list[WireObject] = []
    """Content parts."""
    artifacts: list[WireObject] = []
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
