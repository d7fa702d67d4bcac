"""The explicit tool surface a run projects to external harnesses (OFFICIAL_RUNNER_PLUGINS §6.2).

External harnesses such as Claude Code or Codex run their own tool loop and cannot hold the runner's
:class:`~agentrunner.api.AgentRunAPI`. An adapter (the MCP bridge in ``agentrunner_mcp``) offers them tools
instead, and this module is the one list of those tools. Each :class:`ExternalTool` names the back-call
action it maps to, its pydantic args model (the input schema is generated from it, mostly the params model
of :mod:`agentrunner.actions` itself) and a predicate over the run's :class:`AgentRunContext` saying whether
the run's snapshot allows it. Not every back-call action is exposed; adding a tool means adding it here.

Every granted host tool (``ctx.resources.tools`` with the ``call`` operation) is also offered as a tool of
its own, named from the resource (:func:`host_tool_exposed_name`), whose arguments are the tool's parameters.

This module depends on pydantic only; it never imports an MCP library.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, Field, JsonValue, ValidationError

from ._base import ProtocolModel
from .actions import (
    ACTIONS,
    ArtifactIdParams,
    ArtifactReadParams,
    EventGetParams,
    HistoryPageParams,
    HistorySearchParams,
    KnowledgeRetrieveParams,
    StateGetParams,
    StateSetParams,
    ToolCallParams,
)
from .api import AgentRunAPI
from .context import AgentRunContext
from .errors import InvalidArgumentError
from .resources import ToolResource

__all__ = [
    "EXTERNAL_TOOLS",
    "CurrentEventArgs",
    "CurrentEventSnapshot",
    "ExposedTool",
    "ExternalTool",
    "MAX_EXPOSED_NAME_LENGTH",
    "current_event_snapshot",
    "external_tool",
    "host_tool_exposed_name",
    "invoke_exposed_tool",
    "run_tool_surface",
]

MAX_EXPOSED_NAME_LENGTH: Final = 48
"""Longest exposed tool name. Harnesses prefix names (Claude Code: ``mcp__<server>__<tool>``) and model APIs
cap the whole at 64 characters, so names stay well below that."""

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_-]+")


class CurrentEventArgs(ProtocolModel):
    """``current_event`` takes no arguments."""


class CurrentEventSnapshot(ProtocolModel):
    """What ``current_event`` answers: the run's own event-first snapshot, never history."""

    run_id: str
    """This run."""
    trigger: dict[str, JsonValue]
    """Why the run started."""
    event: dict[str, JsonValue]
    """The current event."""
    input: dict[str, JsonValue]
    """The event's main input."""
    conversation: dict[str, JsonValue] | None = None
    """Where it happened."""
    actor: dict[str, JsonValue] | None = None
    """Who caused it."""
    subject: dict[str, JsonValue] | None = None
    """What it is about."""
    has_history_before: bool = False
    """Earlier transcript items exist (pull them with ``history_page`` when offered)."""
    latest_cursor: str | None = None
    """Cursor for ``history_page(before_cursor=...)``."""


def current_event_snapshot(ctx: AgentRunContext) -> CurrentEventSnapshot:
    """The ``current_event`` answer for *ctx*."""

    def dump(model: BaseModel | None) -> dict[str, JsonValue] | None:
        return None if model is None else model.model_dump(mode="json", exclude_none=True)

    return CurrentEventSnapshot(
        run_id=ctx.run_id,
        trigger=dump(ctx.trigger) or {},
        event=dump(ctx.event) or {},
        input=dump(ctx.input) or {},
        conversation=dump(ctx.conversation),
        actor=dump(ctx.actor),
        subject=dump(ctx.subject),
        has_history_before=ctx.context.has_history_before,
        latest_cursor=ctx.context.latest_cursor,
    )


@dataclass(frozen=True, slots=True)
class ExternalTool:
    """One tool of the external surface."""

    name: str
    """Exposed name (``[A-Za-z0-9_-]``, at most :data:`MAX_EXPOSED_NAME_LENGTH` characters)."""
    description: str
    """What the tool does, written for the model that will call it."""
    args: type[BaseModel]
    """Arguments model; the input schema is its JSON schema."""
    action: str | None
    """The back-call action it becomes, or ``None`` for ``current_event``, which answers from the run's own
    context."""
    available: Callable[[AgentRunContext], bool]
    """Whether the run's snapshot allows this tool; a tool is offered only when this is true."""
    hint: Callable[[AgentRunContext], str | None] | None = None
    """Per-run addition to the description (e.g. the ids the run may pass)."""
    read_only: bool = True
    """Changes no host state."""
    input_schema: dict[str, Any] = field(init=False, repr=False, compare=False)
    """JSON schema of :attr:`args`, computed once."""

    def __post_init__(self) -> None:
        if not _SAFE_NAME.match(self.name) or len(self.name) > MAX_EXPOSED_NAME_LENGTH:
            raise ValueError(f"external tool name {self.name!r} is not a safe exposed name")
        if self.action is not None and self.action not in ACTIONS:
            raise ValueError(f"external tool {self.name!r} maps to unknown action {self.action!r}")
        object.__setattr__(self, "input_schema", _object_schema(self.args.model_json_schema()))

    def params(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Validate *arguments* against :attr:`args` and return the action's params.

        Raises :class:`~agentrunner.errors.InvalidArgumentError` when they do not fit.
        """
        try:
            model = self.args.model_validate(dict(arguments or {}))
        except ValidationError as exc:
            raise InvalidArgumentError(f"invalid arguments for {self.name}: {_short_errors(exc)}") from exc
        return model.model_dump(mode="json", exclude_none=True)


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    # MCP requires an object schema with "properties"; the empty models have none.
    # The model's title and docstring describe the params model, not the tool; the tool has its own text.
    out = {k: v for k, v in schema.items() if k not in ("title", "description")}
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    return out


def _short_errors(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()[:5]]
    return "; ".join(parts)


def _granted_kbs(ctx: AgentRunContext) -> list[str]:
    return [kb.kb_id for kb in ctx.resources.knowledge_bases if "retrieve" in kb.operations]


def _callable_tools(ctx: AgentRunContext) -> list[ToolResource]:
    return [t for t in ctx.resources.tools if "call" in t.operations]


def _kb_hint(ctx: AgentRunContext) -> str | None:
    names = [
        f"{kb.kb_id} ({kb.name})" if kb.name else kb.kb_id
        for kb in ctx.resources.knowledge_bases
        if "retrieve" in kb.operations
    ]
    return "Knowledge bases of this run: " + ", ".join(names) if names else None


def _tool_hint(ctx: AgentRunContext) -> str | None:
    names = [t.tool_name for t in _callable_tools(ctx)]
    return "Host tools of this run: " + ", ".join(names) if names else None


def external_tool(
    name: str,
    description: str,
    args: type[BaseModel],
    action: str | None,
    available: Callable[[AgentRunContext], bool],
    *,
    hint: Callable[[AgentRunContext], str | None] | None = None,
) -> ExternalTool:
    """An :class:`ExternalTool`; side effects are read from the action table."""
    spec = ACTIONS.get(action) if action is not None else None
    read_only = spec is None or not spec.side_effecting
    return ExternalTool(name, description, args, action, available, hint=hint, read_only=read_only)


EXTERNAL_TOOLS: Final[tuple[ExternalTool, ...]] = (
    external_tool(
        "current_event",
        "The current event of this run: trigger, event, input, conversation, actor and subject. "
        "It never contains earlier history.",
        CurrentEventArgs,
        None,
        lambda ctx: True,
    ),
    external_tool(
        "history_page",
        "A page of this conversation's transcript, oldest first. Walk back with before_cursor.",
        HistoryPageParams,
        "history.page",
        lambda ctx: ctx.context.available_apis.history_page,
    ),
    external_tool(
        "history_search",
        "Full-text search of this conversation's transcript.",
        HistorySearchParams,
        "history.search",
        lambda ctx: ctx.context.available_apis.history_search,
    ),
    external_tool(
        "event_get",
        "One event of this conversation's event log, by id.",
        EventGetParams,
        "events.get",
        lambda ctx: ctx.context.available_apis.event_get,
    ),
    external_tool(
        "knowledge_retrieve",
        "Retrieve passages from one of the run's knowledge bases.",
        KnowledgeRetrieveParams,
        "knowledge.retrieve",
        lambda ctx: bool(_granted_kbs(ctx)),
        hint=_kb_hint,
    ),
    external_tool(
        "call_tool",
        "Call one of the run's host tools by name with its parameters.",
        ToolCallParams,
        "tools.call",
        lambda ctx: bool(_callable_tools(ctx)),
        hint=_tool_hint,
    ),
    external_tool(
        "state_get",
        "Read a host-owned state key of one of the run's scopes.",
        StateGetParams,
        "state.get",
        lambda ctx: ctx.context.available_apis.state,
    ),
    external_tool(
        "state_set",
        "Write a host-owned state key; expected_version makes it a compare-and-set.",
        StateSetParams,
        "state.set",
        lambda ctx: ctx.context.available_apis.state,
    ),
    external_tool(
        "artifact_metadata",
        "Metadata of an artifact (attachment, file) the run may see.",
        ArtifactIdParams,
        "artifacts.metadata",
        lambda ctx: ctx.context.available_apis.artifact_metadata,
    ),
    external_tool(
        "artifact_read",
        "A byte range of an artifact, base64-encoded.",
        ArtifactReadParams,
        "artifacts.read_range",
        lambda ctx: ctx.context.available_apis.artifact_read,
    ),
)
"""The external surface, in the order tools are listed."""

_SURFACE_NAMES: Final = frozenset(t.name for t in EXTERNAL_TOOLS)


def host_tool_exposed_name(tool_name: str) -> str:
    """The exposed name of the granted host tool *tool_name*.

    A safe name (``[A-Za-z0-9_-]``, short enough, not a surface tool's name) is kept as it is; any other
    becomes ``host_<cleaned>_<hash>`` so it stays unique, stable and within every harness's limits.
    """
    if (
        _SAFE_NAME.match(tool_name)
        and len(tool_name) <= MAX_EXPOSED_NAME_LENGTH
        and tool_name not in _SURFACE_NAMES
    ):
        return tool_name
    cleaned = _UNSAFE_CHARS.sub("_", tool_name).strip("_")[:30] or "tool"
    digest = hashlib.sha256(tool_name.encode()).hexdigest()[:8]
    return f"host_{cleaned}_{digest}"


@dataclass(frozen=True, slots=True)
class ExposedTool:
    """One tool as offered to one run."""

    name: str
    """Exposed name."""
    description: str
    """Description, with the run's hint when there is one."""
    input_schema: dict[str, Any]
    """JSON schema of the arguments."""
    action: str | None
    """The back-call action it becomes (``None``: answered from the context)."""
    read_only: bool
    """Changes no host state."""
    surface: ExternalTool | None = None
    """The surface entry, for surface tools."""
    host_tool: str | None = None
    """The granted host tool's real name, for per-tool entries."""


def run_tool_surface(ctx: AgentRunContext) -> list[ExposedTool]:
    """The tools *ctx*'s snapshot allows: the allowed surface tools, then one per callable host tool."""
    out: list[ExposedTool] = []
    for tool in EXTERNAL_TOOLS:
        if not tool.available(ctx):
            continue
        hint = tool.hint(ctx) if tool.hint is not None else None
        description = f"{tool.description} {hint}." if hint else tool.description
        out.append(
            ExposedTool(tool.name, description, tool.input_schema, tool.action, tool.read_only, surface=tool)
        )
    seen = {t.name for t in out}
    for resource in _callable_tools(ctx):
        name = host_tool_exposed_name(resource.tool_name)
        if name in seen:
            continue
        seen.add(name)
        schema = _object_schema(resource.parameters) if resource.parameters else _object_schema({})
        description = resource.description or f"Host tool {resource.tool_name}."
        out.append(
            ExposedTool(
                name, description, schema, "tools.call", read_only=False, host_tool=resource.tool_name
            )
        )
    return out


class _HostToolCall(ProtocolModel):
    parameters: dict[str, JsonValue] = Field(default_factory=dict)


async def invoke_exposed_tool(
    tool: ExposedTool, ctx: AgentRunContext, api: AgentRunAPI, arguments: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Run *tool* for the run of *ctx* through *api* and return the JSON result.

    Raises :class:`~agentrunner.errors.InvalidArgumentError` for arguments that do not fit, and the host's
    :class:`~agentrunner.errors.APIError` when the back-call fails.
    """
    if tool.host_tool is not None:
        try:
            call = _HostToolCall(parameters=dict(arguments or {}))
        except ValidationError as exc:
            raise InvalidArgumentError(f"invalid arguments for {tool.name}: {_short_errors(exc)}") from exc
        params = {"tool_name": tool.host_tool, "parameters": call.parameters}
        return await api.call_raw("tools.call", params)
    surface = tool.surface
    if surface is None:  # pragma: no cover - ExposedTool values come from run_tool_surface
        raise InvalidArgumentError(f"{tool.name} is not a tool of the external surface")
    params = surface.params(arguments)
    if surface.action is None:
        return current_event_snapshot(ctx).model_dump(mode="json", exclude_none=True)
    return await api.call_raw(surface.action, params)
