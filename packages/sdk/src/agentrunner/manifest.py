"""Discovery: what a runner declares about itself (PROTOCOL_V1 §4)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue, field_validator

from ._base import ProtocolModel
from .common import I18nObject
from .runner_id import RunnerId
from .version import PROTOCOL_VERSION

__all__ = [
    "AgentRunnerCapabilities",
    "AgentRunnerContextPolicy",
    "AgentRunnerManifest",
    "AgentRunnerPermissions",
    "DynamicFormItemSchema",
    "FormOption",
    "ListAgentRunnersResponse",
]


StorageAreaName = Literal["plugin", "workspace", "binding"]
"""A storage area of §8: the plugin's own, the workspace's, the binding's."""


class AgentRunnerCapabilities(ProtocolModel):
    """What a runner can do (§4.3). A host holds a runner to what it declares."""

    streaming: bool = False
    """May emit ``message.delta``. A runner without it must not stream."""
    tool_calling: bool = False
    """May call host tools; without it the run gets no tools."""
    knowledge_retrieval: bool = False
    """May call host knowledge bases; without it the run gets none."""
    multimodal_input: bool = False
    """Handles non-text input; without it the run receives text parts and artifact refs only."""
    skill_authoring: bool = False
    """Needs host skill-authoring tools."""
    skill_injection: bool = False
    """Needs the host to inject a skill index."""
    event_context: bool = True
    """Understands event-first input."""
    platform_api: bool = False
    """May request platform actions (``action.requested``)."""
    interrupt: bool = False
    """Stops promptly when cancelled. Runners without it are still cancelled, by the host ending the run."""
    stateful_session: bool = False
    """Keeps a native session across runs (keyed by ``runtime.metadata['session_key']``)."""
    self_managed_context: bool = True
    """Assembles its own working context; the host inlines no history."""
    executes_code: bool = False
    """Runs code the model writes (an external harness such as Claude Code or Codex). Hosts refuse such a
    runner unless the operator enabled code-executing runners explicitly."""
    mcp_bridge: bool = False
    """Hands the run's authorized tools to an external harness over MCP: the host registers each run on its
    long-lived bridge server and passes the endpoint in ``runtime.metadata['mcp_bridge']``."""


class AgentRunnerPermissions(ProtocolModel):
    """The most a runner may ever touch (§4.4); a binding and the event narrow it further."""

    models: list[Literal["invoke", "stream", "rerank"]] = Field(
        default_factory=list[Literal["invoke", "stream", "rerank"]], json_schema_extra={"default": []}
    )
    """Model operations."""
    tools: list[Literal["detail", "call"]] = Field(
        default_factory=list[Literal["detail", "call"]], json_schema_extra={"default": []}
    )
    """Tool operations."""
    knowledge_bases: list[Literal["list", "retrieve"]] = Field(
        default_factory=list[Literal["list", "retrieve"]], json_schema_extra={"default": []}
    )
    """Knowledge operations; ``list`` grants a ``knowledge.list`` call."""
    history: list[Literal["page", "search"]] = Field(
        default_factory=list[Literal["page", "search"]], json_schema_extra={"default": []}
    )
    """Transcript reads of the current conversation."""
    events: list[Literal["get", "page"]] = Field(
        default_factory=list[Literal["get", "page"]], json_schema_extra={"default": []}
    )
    """Event log reads of the current conversation."""
    artifacts: list[Literal["metadata", "read"]] = Field(
        default_factory=list[Literal["metadata", "read"]], json_schema_extra={"default": []}
    )
    """Artifact reads within the run's scope."""
    storage: list[StorageAreaName] = Field(
        default_factory=list[StorageAreaName], json_schema_extra={"default": []}
    )
    """Storage areas."""
    files: list[Literal["config", "knowledge"]] = Field(
        default_factory=list[Literal["config", "knowledge"]], json_schema_extra={"default": []}
    )
    """Reading configured files through the artifact API."""
    platform_api: list[str] = Field(default_factory=list[str], json_schema_extra={"default": []})
    """Platform actions the runner may request (e.g. ``message.edit``)."""
    cross_conversation_history: bool = False
    """Reading conversations other than the event's own (an extension of §4.4; a binding must also grant the
    conversations explicitly)."""


class AgentRunnerContextPolicy(ProtocolModel):
    """How a runner manages context (§4.5). The host never inlines history whatever it says."""

    supports_history_pull: bool = True
    """Pulls history through ``history.page``."""
    supports_history_search: bool = False
    """Uses ``history.search``."""
    supports_artifact_pull: bool = True
    """Reads artifacts through the API."""
    owns_compaction: bool = True
    """Keeps its own summaries/checkpoints."""
    wants_static_context_refs: bool = True
    """Wants ``runtime.static_refs``."""


class FormOption(ProtocolModel):
    """One choice of a ``select`` form item."""

    name: str
    """Stored value."""
    label: I18nObject
    """Shown label."""


class DynamicFormItemSchema(ProtocolModel):
    """One field of a runner's configuration form.

    ``type`` is an open set: ``string``, ``text``, ``integer``, ``float``, ``boolean``, ``select``, ``json``,
    ``prompt-editor`` and the resource selectors (``llm-model-selector``, ``model-fallback-selector``,
    ``rerank-model-selector``, ``knowledge-base-multi-selector``, ``tool-multi-selector``). A host maps selector
    types to resources by registration, so new ones need no protocol change.
    """

    name: str = Field(min_length=1)
    """Key of the value in ``ctx.config``."""
    label: I18nObject
    """Shown label."""
    type: str = Field(min_length=1)
    """Widget / value type."""
    required: bool = False
    """The binding must provide a value."""
    default: JsonValue = None
    """Default value."""
    description: I18nObject | None = None
    """Help text."""
    options: list[FormOption] = Field(default_factory=list[FormOption], json_schema_extra={"default": []})
    """Choices of a ``select``: its value must be one of them. On any other type they are suggestions a form
    may offer (a ``string`` with options still takes any string, e.g. a self-hosted API base)."""
    aliases: list[str] = Field(default_factory=list[str], json_schema_extra={"default": []})
    """Other keys the runner also reads this field from (legacy spellings a migrated configuration carries).
    A host checks a value under an alias as this field's and does not count the alias as an unknown key."""
    secret: bool = False
    """The value is a credential: hosts redact it in every API, CLI and log output."""


class AgentRunnerManifest(ProtocolModel):
    """A runner's self-description, returned by discovery (§4.2)."""

    id: str
    """Stable runner id ``plugin:author/plugin/runner``."""
    name: str = Field(min_length=1)
    """Runner name inside its plugin, e.g. ``default``."""
    label: I18nObject
    """Display name."""
    description: I18nObject | None = None
    """Display description."""
    protocol_version: str = PROTOCOL_VERSION
    """Protocol major version implemented."""
    capabilities: AgentRunnerCapabilities = Field(default_factory=AgentRunnerCapabilities)
    """Capabilities."""
    permissions: AgentRunnerPermissions = Field(default_factory=AgentRunnerPermissions)
    """Maximum permissions."""
    context: AgentRunnerContextPolicy = Field(default_factory=AgentRunnerContextPolicy)
    """Context policy."""
    config_schema: list[DynamicFormItemSchema] = Field(
        default_factory=list[DynamicFormItemSchema], json_schema_extra={"default": []}
    )
    """The binding configuration form."""
    metadata: dict[str, Any] = Field(default_factory=dict, json_schema_extra={"default": {}})
    """Display / diagnostic data only."""

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        return str(RunnerId.parse(value))

    @property
    def runner_id(self) -> RunnerId:
        """The parsed id."""
        return RunnerId.parse(self.id)

    def secret_fields(self) -> frozenset[str]:
        """Names of config fields marked ``secret``."""
        return frozenset(item.name for item in self.config_schema if item.secret)


class ListAgentRunnersResponse(ProtocolModel):
    """Answer to ``LIST_AGENT_RUNNERS`` (§4.1)."""

    runners: list[AgentRunnerManifest] = Field(
        default_factory=list[AgentRunnerManifest], json_schema_extra={"default": []}
    )
    """The runners a plugin exposes."""
