"""The result stream a runner returns (PROTOCOL_V1 §7).

:data:`AgentRunResult` is a union discriminated on ``type``. Parse untrusted input with :func:`parse_result`:
a result of a ``type`` this SDK does not know becomes an :class:`UnknownResult` (hosts ignore it with a
warning, §3) instead of raising; a result of a known ``type`` with invalid ``data`` raises
``pydantic.ValidationError`` naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal, TypeAlias

from pydantic import ConfigDict, Field, JsonValue, TypeAdapter

from . import codec
from ._base import ProtocolModel
from .common import ArtifactRef, ContentElement, TextContent

__all__ = [
    "KNOWN_RESULT_TYPES",
    "MAX_STATE_VALUE_BYTES",
    "STATE_SCOPES",
    "TERMINAL_RESULT_TYPES",
    "ActionRequestedData",
    "ActionRequestedResult",
    "AgentRunResult",
    "AgentRunResultAdapter",
    "AgentRunResultBase",
    "ArtifactCreatedData",
    "ArtifactCreatedResult",
    "AssistantMessage",
    "AssistantMessageChunk",
    "MessageCompletedData",
    "MessageCompletedResult",
    "MessageDeltaData",
    "MessageDeltaResult",
    "ParsedResult",
    "ResultType",
    "RunCompletedData",
    "RunCompletedResult",
    "RunFailedData",
    "RunFailedResult",
    "StateScope",
    "StateUpdatedData",
    "StateUpdatedResult",
    "ToolCallCompletedData",
    "ToolCallCompletedResult",
    "ToolCallStartedData",
    "ToolCallStartedResult",
    "UnknownResult",
    "parse_result",
]

ResultType = Literal[
    "message.delta",
    "message.completed",
    "tool.call.started",
    "tool.call.completed",
    "artifact.created",
    "state.updated",
    "action.requested",
    "run.completed",
    "run.failed",
]

KNOWN_RESULT_TYPES: Final[frozenset[str]] = frozenset(ResultType.__args__)
"""The nine stable result types of Protocol v1."""

TERMINAL_RESULT_TYPES: Final[frozenset[str]] = frozenset({"run.completed", "run.failed"})
"""Exactly one of these ends every run."""

StateScope = Literal["conversation", "actor", "subject", "runner", "binding", "workspace"]

STATE_SCOPES: Final[frozenset[str]] = frozenset(StateScope.__args__)
"""Valid ``state.updated`` scopes."""

MAX_STATE_VALUE_BYTES: Final = 256 * 1024
"""Largest JSON-encoded state value a host accepts."""


class AssistantMessageChunk(ProtocolModel):
    """A piece of a streamed assistant message. Chunks are incremental, not cumulative."""

    role: Literal["assistant"] = "assistant"
    """Always ``assistant``."""
    content: str | None = None
    """Text of this piece."""
    contents: list[ContentElement] = Field(default_factory=list[ContentElement])
    """Structured pieces."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Extra data."""


class AssistantMessage(ProtocolModel):
    """A complete assistant message."""

    role: Literal["assistant"] = "assistant"
    """Always ``assistant``."""
    content: str | None = None
    """Plain text."""
    contents: list[ContentElement] = Field(default_factory=list[ContentElement])
    """Structured content."""
    artifacts: list[ArtifactRef] = Field(default_factory=list[ArtifactRef])
    """Artifacts attached to the message."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Extra data."""

    def text(self) -> str:
        """The message's text: ``content``, else the joined text elements."""
        if self.content is not None:
            return self.content
        return "".join(c.text for c in self.contents if isinstance(c, TextContent))


class MessageDeltaData(ProtocolModel):
    """``message.delta`` payload."""

    chunk: AssistantMessageChunk
    """The piece."""


class MessageCompletedData(ProtocolModel):
    """``message.completed`` payload."""

    message: AssistantMessage
    """The message."""


class ToolCallStartedData(ProtocolModel):
    """``tool.call.started`` payload (telemetry)."""

    tool_call_id: str = Field(min_length=1)
    """Pairs with the matching ``tool.call.completed``."""
    tool_name: str
    """Tool name."""
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    """Arguments."""


class ToolCallCompletedData(ProtocolModel):
    """``tool.call.completed`` payload (telemetry)."""

    tool_call_id: str = Field(min_length=1)
    """Same id as the started result."""
    tool_name: str
    """Tool name."""
    result_preview: dict[str, JsonValue] | None = None
    """A small preview of the result."""
    error_code: str | None = None
    """Set when the call failed."""
    error_message: str | None = None
    """Human-readable failure."""


class ArtifactCreatedData(ProtocolModel):
    """``artifact.created`` payload.

    ``content_base64`` is an optional extension for small artifacts (the host caps it): the host stores the
    bytes and computes ``size`` and ``digest`` itself, ignoring any value the runner declared.
    """

    artifact: ArtifactRef
    """The artifact."""
    content_base64: str | None = None
    """Small inline content to store."""


class StateUpdatedData(ProtocolModel):
    """``state.updated`` payload: a request to update host-owned state."""

    scope: StateScope
    """Scope; the binding's state policy must grant it."""
    key: str = Field(min_length=1, max_length=200)
    """Key; dotted names such as ``external.session_id`` are conventional."""
    value: JsonValue
    """New value (JSON, at most 256 KiB encoded); ``null`` deletes."""


class ActionRequestedData(ProtocolModel):
    """``action.requested`` payload. Recorded, never executed in v1."""

    action: str
    """Platform action name, e.g. ``message.edit``."""
    target: dict[str, JsonValue]
    """What it acts on."""
    payload: dict[str, JsonValue] = Field(default_factory=dict)
    """Arguments."""
    idempotency_key: str | None = None
    """Stable de-duplication key; required for any side-effecting action."""
    approval_hint: str | None = None
    """Why a human might approve it."""


class RunCompletedData(ProtocolModel):
    """``run.completed`` payload."""

    finish_reason: str = "stop"
    """``stop``, ``length``, ``tool_calls``, ..."""
    message: AssistantMessage | None = None
    """Optional final message (delivered and recorded like ``message.completed``)."""
    usage: dict[str, JsonValue] = Field(default_factory=dict)
    """Token usage and other counters."""


class RunFailedData(ProtocolModel):
    """``run.failed`` payload."""

    code: str = Field(min_length=1)
    """Failure code: ``runner.error``, ``cancelled``, ``deadline_exceeded``, ..."""
    message: str
    """Human-readable message."""
    retryable: bool = False
    """The whole run could be retried by an upper layer; v1 never retries by itself."""
    details: dict[str, JsonValue] = Field(default_factory=dict)
    """Extra data."""


class AgentRunResultBase(ProtocolModel):
    """Fields common to every result (§7.1)."""

    run_id: str
    """The run this result belongs to."""
    sequence: int | None = Field(default=None, ge=1)
    """1-based, strictly increasing per run; required on buffering transports."""
    timestamp: int | None = None
    """Unix epoch milliseconds."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Extra data."""


class MessageDeltaResult(AgentRunResultBase):
    """A streamed message piece."""

    type: Literal["message.delta"] = "message.delta"
    """Discriminator."""
    data: MessageDeltaData
    """Payload."""


class MessageCompletedResult(AgentRunResultBase):
    """A complete message."""

    type: Literal["message.completed"] = "message.completed"
    """Discriminator."""
    data: MessageCompletedData
    """Payload."""


class ToolCallStartedResult(AgentRunResultBase):
    """A tool call began."""

    type: Literal["tool.call.started"] = "tool.call.started"
    """Discriminator."""
    data: ToolCallStartedData
    """Payload."""


class ToolCallCompletedResult(AgentRunResultBase):
    """A tool call ended."""

    type: Literal["tool.call.completed"] = "tool.call.completed"
    """Discriminator."""
    data: ToolCallCompletedData
    """Payload."""


class ArtifactCreatedResult(AgentRunResultBase):
    """The runner produced an artifact."""

    type: Literal["artifact.created"] = "artifact.created"
    """Discriminator."""
    data: ArtifactCreatedData
    """Payload."""


class StateUpdatedResult(AgentRunResultBase):
    """The runner asks the host to update state."""

    type: Literal["state.updated"] = "state.updated"
    """Discriminator."""
    data: StateUpdatedData
    """Payload."""


class ActionRequestedResult(AgentRunResultBase):
    """The runner asks for a platform action."""

    type: Literal["action.requested"] = "action.requested"
    """Discriminator."""
    data: ActionRequestedData
    """Payload."""


class RunCompletedResult(AgentRunResultBase):
    """The run ended normally (terminal)."""

    type: Literal["run.completed"] = "run.completed"
    """Discriminator."""
    data: RunCompletedData = Field(default_factory=RunCompletedData)
    """Payload."""


class RunFailedResult(AgentRunResultBase):
    """The run failed (terminal)."""

    type: Literal["run.failed"] = "run.failed"
    """Discriminator."""
    data: RunFailedData
    """Payload."""


AgentRunResult: TypeAlias = Annotated[
    MessageDeltaResult
    | MessageCompletedResult
    | ToolCallStartedResult
    | ToolCallCompletedResult
    | ArtifactCreatedResult
    | StateUpdatedResult
    | ActionRequestedResult
    | RunCompletedResult
    | RunFailedResult,
    Field(discriminator="type"),
]
"""One result of the stream, discriminated on ``type``."""

AgentRunResultAdapter: TypeAdapter[AgentRunResult] = TypeAdapter(AgentRunResult)
"""Validates and dumps :data:`AgentRunResult`."""


class UnknownResult(ProtocolModel):
    """A result whose ``type`` this SDK does not know (a newer runner). Hosts ignore it with a warning."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="allow")

    type: str
    """The unknown type."""
    run_id: str | None = None
    """Run id, when present."""
    sequence: int | None = None
    """Sequence, when present."""
    data: Any = None
    """The payload, unvalidated."""


ParsedResult: TypeAlias = AgentRunResult | UnknownResult
"""What :func:`parse_result` returns."""


def parse_result(raw: dict[str, Any] | bytes | str) -> ParsedResult:
    """Parse one result from JSON bytes/str or a decoded dict.

    Returns an :class:`UnknownResult` for a ``type`` outside :data:`KNOWN_RESULT_TYPES`. Raises
    ``pydantic.ValidationError`` for a known type with invalid fields, and ``ValueError`` for input that is
    not a JSON object or has no string ``type``.
    """
    if isinstance(raw, (bytes, str)):
        raw = codec.loads(raw)
    if not isinstance(raw, dict):
        raise ValueError(f"a result must be a JSON object, got {type(raw).__name__}")
    result_type = raw.get("type")
    if not isinstance(result_type, str):
        raise ValueError("a result needs a string 'type'")
    if result_type not in KNOWN_RESULT_TYPES:
        return UnknownResult.model_validate(raw)
    return AgentRunResultAdapter.validate_python(raw)
