"""Host-internal models (HOST_SDK_INFRASTRUCTURE §4.1–4.2). Never part of the SDK.

An :class:`AgentEventEnvelope` is what enters the host; an :class:`AgentBinding` is the resolved answer to
"which runner handles this event, with which config and policies".
"""

from __future__ import annotations

from typing import Any, Literal

from agentrunner import (
    ActorContext,
    AgentInput,
    DeliveryContext,
    RawEventRef,
    RunnerId,
    SubjectContext,
)
from agentrunner.context import TriggerSource
from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from agentrunner_host.admission import Identifier

__all__ = [
    "BINDING_SCOPE_PRECEDENCE",
    "AgentBinding",
    "AgentConfig",
    "AgentEventEnvelope",
    "BindingScope",
    "BindingScopeType",
    "DeliveryPolicy",
    "EventFilter",
    "ResourcePolicy",
    "RunPolicy",
    "StatePolicy",
]


class _HostModel(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class AgentEventEnvelope(_HostModel):
    """An event entering the host, normalised by an entry adapter (HTTP API, CLI, pipeline adapter...)."""

    event_id: str = Field(min_length=1, max_length=200)
    """Host-scoped id; the same id delivered twice is one event."""
    event_type: str = Field(min_length=1, max_length=100)
    """Stable protocol name (``message.received``, ``message.recalled``, ``schedule.triggered``...)."""
    event_time: int | None = None
    """Unix epoch milliseconds."""
    source: TriggerSource = "api"
    """Which entry produced it."""
    source_event_type: str | None = None
    """The platform's own event name."""
    bot_id: str | None = None
    """Receiving bot."""
    workspace_id: str | None = None
    """Workspace."""
    conversation_id: str | None = Field(default=None, max_length=200)
    """Conversation, when the event has one."""
    thread_id: str | None = Field(default=None, max_length=200)
    """Thread."""
    launcher_type: str | None = None
    """``person`` / ``group`` on IM platforms."""
    launcher_id: str | None = None
    """Platform chat id."""
    actor: ActorContext | None = None
    """Who caused it."""
    subject: SubjectContext | None = None
    """What it is about."""
    input: AgentInput = Field(default_factory=AgentInput)
    """Current input."""
    delivery: DeliveryContext = Field(default_factory=lambda: DeliveryContext(surface="api"))
    """How results reach the user."""
    raw_ref: RawEventRef | None = None
    """Raw payload reference."""
    data: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Structured event data (the context builder caps what reaches the runner)."""
    params: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Entry-adapter parameters (e.g. pipeline query variables); filtered before reaching ``ctx.adapter``."""
    locale: str | None = None
    """User locale."""
    timezone: str | None = None
    """User time zone."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Host-side metadata (never sent to runners)."""


BindingScopeType = Literal["conversation", "actor", "bot", "workspace", "global"]

BINDING_SCOPE_PRECEDENCE: dict[str, int] = {
    "conversation": 5,
    "actor": 4,
    "bot": 3,
    "workspace": 2,
    "global": 1,
}
"""Higher wins: a conversation binding beats an actor binding beats a bot binding..."""


class BindingScope(_HostModel):
    """Where a binding applies."""

    type: BindingScopeType = "global"
    """Scope kind."""
    id: Identifier | None = None
    """The conversation / actor / bot / workspace id; ``None`` only for ``global``."""

    def matches(self, event: AgentEventEnvelope) -> bool:
        """Whether an event falls inside this scope."""
        match self.type:
            case "global":
                return True
            case "workspace":
                return event.workspace_id == self.id
            case "bot":
                return event.bot_id == self.id
            case "actor":
                return event.actor is not None and event.actor.actor_id == self.id
            case "conversation":
                return event.conversation_id == self.id


class EventFilter(_HostModel):
    """An extra condition on an event field (EVENT_BASED_AGENT §4)."""

    field: Literal[
        "source",
        "source_event_type",
        "bot_id",
        "workspace_id",
        "conversation_id",
        "actor_type",
        "actor_id",
        "launcher_type",
        "subject_type",
    ]
    """Event field tested."""
    equals: str | None = None
    """The field must equal this."""
    one_of: list[str] | None = None
    """The field must be one of these."""

    def matches(self, event: AgentEventEnvelope) -> bool:
        """Whether the event passes this filter."""
        value = _event_field(event, self.field)
        if self.equals is not None and value != self.equals:
            return False
        return not (self.one_of is not None and value not in self.one_of)


def _event_field(event: AgentEventEnvelope, name: str) -> str | None:
    if name == "actor_type":
        return event.actor.actor_type if event.actor else None
    if name == "actor_id":
        return event.actor.actor_id if event.actor else None
    if name == "subject_type":
        return event.subject.subject_type if event.subject else None
    value = getattr(event, name)
    return value if isinstance(value, str) else None


class ResourcePolicy(_HostModel):
    """What a binding lets its runner use (the second of the three authorization layers)."""

    models: list[str] | None = None
    """Allowed model ids; ``None`` = the models the runner config selects (if configured on the host)."""
    tools: list[str] = Field(default_factory=list[str], json_schema_extra={"default": []})
    """Tools granted to the binding (by name); empty = the host tools the runner config selects."""
    dangerous_tools: list[str] = Field(default_factory=list[str], json_schema_extra={"default": []})
    """Dangerous tools the binding grants explicitly, by tool name or by class (``shell``, ``file_write``,
    ``network``, ``destructive``; see :mod:`agentrunner_host.tool_risk`). A tool the host classifies dangerous
    is left out of every run of the binding unless this names it or all of its classes; each call of one is
    audited with its classes."""
    knowledge_bases: list[str] | None = None
    """Allowed knowledge bases; ``None`` = those the runner config selects."""
    files: list[str] = Field(default_factory=list[str], json_schema_extra={"default": []})
    """Configured files granted (by file id)."""
    storage: list[Literal["plugin", "workspace", "binding"]] = Field(
        default_factory=lambda: ["plugin", "binding"], json_schema_extra={"default": ["plugin", "binding"]}
    )
    """Storage areas granted (still needs the manifest permission)."""
    history: bool = True
    """History/event pull APIs of the event's own conversation."""
    readable_conversations: list[str] = Field(default_factory=list[str], json_schema_extra={"default": []})
    """Other conversations the runner may read (needs the manifest's ``cross_conversation_history``)."""
    platform_actions: list[str] = Field(default_factory=list[str], json_schema_extra={"default": []})
    """Platform actions the binding allows (still needs the manifest's ``platform_api``)."""
    action_approval: Literal["none", "admin", "user"] = "admin"
    """Approval a platform action would need (recorded; v1 never executes actions)."""


class StatePolicy(_HostModel):
    """Which host-owned state scopes the runner may use."""

    enabled: bool = True
    """Master switch."""
    scopes: list[Literal["conversation", "actor", "subject", "runner", "binding", "workspace"]] = Field(
        default_factory=lambda: ["conversation", "actor", "runner"],
        json_schema_extra={"default": ["conversation", "actor", "runner"]},
    )
    """Granted scopes (a scope also needs the event to have that identity)."""
    snapshot: bool = True
    """Inline a bounded snapshot of the granted scopes into ``ctx.state``."""


class DeliveryPolicy(_HostModel):
    """How results may be delivered."""

    streaming: bool = True
    """Allow streaming when the surface supports it."""
    max_message_size: int | None = Field(default=None, ge=1)
    """Cap on message size for this binding."""


class RunPolicy(_HostModel):
    """Run limits."""

    timeout_seconds: float = Field(default=300.0, gt=0)
    """Deadline of a run (capped by the host's maximum)."""
    max_result_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest single result (JSON bytes); larger fails the run with ``payload_too_large``."""
    max_results: int = Field(default=100_000, ge=1)
    """Results per run before the host stops the run (``runner.too_many_results``)."""
    max_output_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    """Encoded bytes of all of a run's results together; more fails the run with ``runner.output_too_large``."""
    backcall_rate: float = Field(default=200.0, gt=0)
    """Sustained back-calls per second per run, once the burst is spent (a runaway loop of calls is held to
    this; a run's ordinary calls never reach it)."""
    backcall_burst: int = Field(default=1000, ge=1)
    """Back-calls a run may make back to back before the sustained rate applies (e.g. reading a few hundred
    state keys or history pages at its start). Past both, a call is refused ``rate_limited`` (retryable)."""
    max_backcall_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest back-call request or response (JSON bytes)."""


class AgentConfig(_HostModel):
    """A configured agent: a runner plus its config and policies (the product-level object)."""

    agent_id: Identifier
    """Id (:data:`~agentrunner_host.admission.ID_PATTERN`)."""
    runner_id: str
    """Runner id ``plugin:author/plugin/runner``."""
    runner_config: dict[str, Any] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """The runner's config (its form); secrets marked ``secret`` in the form are redacted in outputs."""
    resource_policy: ResourcePolicy = ResourcePolicy()
    """Resource grants."""
    state_policy: StatePolicy = StatePolicy()
    """State grants."""
    delivery_policy: DeliveryPolicy = DeliveryPolicy()
    """Delivery rules."""
    run_policy: RunPolicy = RunPolicy()
    """Run limits."""
    label: str | None = None
    """Display name."""

    @field_validator("runner_id")
    @classmethod
    def _valid_runner_id(cls, value: str) -> str:
        return str(RunnerId.parse(value))


class AgentBinding(_HostModel):
    """Event → runner binding, resolved once per event (one event → one binding → one run)."""

    binding_id: Identifier
    """Id (:data:`~agentrunner_host.admission.ID_PATTERN`)."""
    enabled: bool = True
    """Disabled bindings never match."""
    scope: BindingScope = BindingScope()
    """Where it applies."""
    event_types: list[str] = Field(
        default_factory=lambda: ["message.received"], json_schema_extra={"default": ["message.received"]}
    )
    """Event types it handles (``*`` = any)."""
    filters: list[EventFilter] = Field(default_factory=list[EventFilter], json_schema_extra={"default": []})
    """Extra conditions; a binding with more filters is more specific."""
    priority: int = 0
    """Tie-breaker set by the operator: higher wins among equally specific bindings."""
    runner_id: str
    """Runner id."""
    runner_config: dict[str, Any] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """The runner's config."""
    resource_policy: ResourcePolicy = ResourcePolicy()
    """Resource grants."""
    state_policy: StatePolicy = StatePolicy()
    """State grants."""
    delivery_policy: DeliveryPolicy = DeliveryPolicy()
    """Delivery rules."""
    run_policy: RunPolicy = RunPolicy()
    """Run limits."""
    agent_id: str | None = None
    """The agent it was projected from."""

    @field_validator("runner_id")
    @classmethod
    def _valid_runner_id(cls, value: str) -> str:
        return str(RunnerId.parse(value))

    @classmethod
    def from_agent(
        cls,
        agent: AgentConfig,
        *,
        binding_id: str | None = None,
        scope: BindingScope | None = None,
        event_types: list[str] | None = None,
        filters: list[EventFilter] | None = None,
        priority: int = 0,
    ) -> AgentBinding:
        """Project an agent into a binding for a scope."""
        return cls(
            binding_id=binding_id or f"agent:{agent.agent_id}",
            scope=scope or BindingScope(),
            event_types=event_types or ["message.received"],
            filters=filters or [],
            priority=priority,
            runner_id=agent.runner_id,
            runner_config=agent.runner_config,
            resource_policy=agent.resource_policy,
            state_policy=agent.state_policy,
            delivery_policy=agent.delivery_policy,
            run_policy=agent.run_policy,
            agent_id=agent.agent_id,
        )

    def handles(self, event: AgentEventEnvelope) -> bool:
        """Whether this binding matches the event (enabled, type, scope, filters)."""
        if not self.enabled:
            return False
        if "*" not in self.event_types and event.event_type not in self.event_types:
            return False
        if not self.scope.matches(event):
            return False
        return all(f.matches(event) for f in self.filters)

    def precedence(self) -> tuple[int, int, int, int]:
        """Sort key: scope specificity, number of filters, explicit event type over ``*``, priority."""
        explicit = 0 if "*" in self.event_types else 1
        return (BINDING_SCOPE_PRECEDENCE[self.scope.type], len(self.filters), explicit, self.priority)
