"""The pipeline compatibility entry: a LangBot-style pipeline configuration plus one incoming message become
an :class:`~agentrunner_host.definitions.AgentEventEnvelope` and the :class:`~agentrunner_host.definitions.AgentBinding`
that runs it.

Differences from the reference's query entry adapter, on purpose:

* the event id hashes a canonical JSON array of its parts (no ``|``-joining ambiguity) and, when the platform
  gives neither a message id nor a time, a random nonce instead of a per-process counter that repeats after a
  restart;
* launcher type and id stay on the event, and the delivery surface reports the platform's real streaming
  support (never hard-coded) while the binding's delivery policy honours the pipeline's output settings;
* attachments are the artifact refs of the content elements, each once;
* grants never come from mutable query variables: models and knowledge bases are what the runner config
  selects, tools follow the pipeline's MCP-server preferences, and a runner whose plugin is not bound to the
  pipeline cannot run at all (:class:`RunnerNotBoundError`);
* parameters drop ``_``-prefixed names, names that look like secrets (whole-word matching) and values that
  are not plain JSON.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from agentrunner import (
    ActorContext,
    AgentInput,
    ArtifactRef,
    ContentElement,
    DeliveryContext,
    RunnerId,
    SubjectContext,
    TextContent,
)
from agentrunner import codec as json
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agentrunner_host.context_builder import is_secret_name
from agentrunner_host.definitions import (
    AgentBinding,
    AgentEventEnvelope,
    BindingScope,
    DeliveryPolicy,
    ResourcePolicy,
)
from agentrunner_host.errors import ConfigurationError, HostError

from .migration import expire_seconds, resolve_runner_config, resolve_runner_id

__all__ = [
    "EVENT_ID_PREFIX",
    "MCP_NAME_SEPARATOR",
    "NO_TOOLS",
    "ExtensionPreferences",
    "OutputSettings",
    "PipelineEntry",
    "PipelineEntryError",
    "PipelineMessage",
    "RunnerNotBoundError",
    "RunnerNotConfiguredError",
    "filter_query_variables",
    "is_json_safe",
    "output_settings",
    "pipeline_entry",
    "scoped_event_id",
]

EVENT_ID_PREFIX: Final = "host:"
"""Prefix of every event id this entry produces."""

_MAX_PARAM_DEPTH: Final = 32
_MAX_CONVERSATION_ID: Final = 200

NO_TOOLS: Final = "__none__"
"""The tool grant of a pipeline that enables no tools: a name no catalog tool has (a form's "none" value)."""

MCP_NAME_SEPARATOR: Final = "__"
"""How MCP tools are named (``<server>__<tool>``), as in :mod:`agentrunner_host.providers.tools` (not imported
from there: that would load the MCP client into every pipeline entry)."""


class PipelineEntryError(HostError):
    """A pipeline message cannot become a run."""


class RunnerNotConfiguredError(PipelineEntryError, ConfigurationError):
    """The pipeline names no runner id (a legacy configuration must be migrated first)."""


class RunnerNotBoundError(PipelineEntryError):
    """The pipeline's runner belongs to a plugin that is not bound to the pipeline."""

    def __init__(self, runner_id: str, plugin_id: str) -> None:
        super().__init__(
            f"runner {runner_id} belongs to plugin {plugin_id}, which is not bound to this pipeline"
        )
        self.runner_id = runner_id
        self.plugin_id = plugin_id


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ExtensionPreferences(_Model):
    """Which plugins and MCP servers a pipeline uses (LangBot's ``extensions_preferences``)."""

    enable_all_plugins: bool = True
    """Every installed plugin is bound."""
    plugins: list[str] = []
    """Bound plugins (``author/name``) when ``enable_all_plugins`` is off."""
    enable_all_mcp_servers: bool = True
    """Every configured MCP server's tools are granted."""
    mcp_servers: list[str] = []
    """Granted MCP servers (host server names) when ``enable_all_mcp_servers`` is off."""


class OutputSettings(_Model):
    """How answers may be delivered to the platform."""

    streaming: bool = False
    """The platform adapter can show streamed answers, and the pipeline allows it."""
    max_message_size: int | None = Field(default=None, ge=1)
    """Largest message the platform accepts."""
    quote_origin: bool = False
    """Answers quote the user's message."""
    at_sender: bool = False
    """Answers mention the sender (groups)."""


def output_settings(pipeline_config: Mapping[str, Any], *, platform_streaming: bool) -> OutputSettings:
    """Output settings of a pipeline on a platform: streaming when the platform adapter can stream, and the
    pipeline's ``output.misc`` ``at-sender`` / ``quote-origin`` switches."""
    output = pipeline_config.get("output")
    misc = cast(dict[str, Any], output).get("misc") if isinstance(output, dict) else None
    flags = cast(dict[str, Any], misc) if isinstance(misc, dict) else {}
    return OutputSettings(
        streaming=platform_streaming,
        quote_origin=flags.get("quote-origin") is True,
        at_sender=flags.get("at-sender") is True,
    )


class PipelineMessage(_Model):
    """One platform message entering a pipeline."""

    pipeline_id: str = Field(min_length=1, max_length=200)
    """Pipeline id (uuid)."""
    bot_id: str | None = None
    """Receiving bot."""
    launcher_type: str = Field(min_length=1, max_length=50)
    """``person`` or ``group``."""
    launcher_id: str = Field(min_length=1, max_length=200)
    """Platform chat id."""
    sender_id: str = Field(min_length=1, max_length=200)
    """Platform user id."""
    sender_name: str | None = None
    """Display name."""
    message_id: str | int | None = None
    """Platform message id (``-1`` or ``None`` when the platform has none)."""
    time: float | None = None
    """Platform time, Unix epoch seconds."""
    source_event_type: str | None = None
    """Platform event name (``FriendMessage``, ``GroupMessage``...)."""
    text: str | None = None
    """Plain text; derived from the text elements of ``contents`` when unset."""
    contents: list[ContentElement] = []
    """Content elements (binary parts as artifact refs or http(s) URLs)."""
    conversation_id: str | None = None
    """The active conversation, when the platform session has one."""
    query_id: str | int | None = None
    """The platform query's id (kept as metadata only)."""
    query_variables: dict[str, Any] = {}
    """Query variables; only the safe ones reach the runner as ``params``."""
    bound_plugins: list[str] | None = None
    """Plugins bound to the pipeline (``author/name``); ``None`` = decided by ``extension_preferences``."""
    extension_preferences: ExtensionPreferences = ExtensionPreferences()
    """Plugin and MCP-server preferences."""
    output: OutputSettings = OutputSettings()
    """Output settings."""
    platform_event: dict[str, Any] | None = None
    """The platform event, serialised (its raw ``source_platform_object`` is dropped)."""


@dataclass(frozen=True, slots=True)
class PipelineEntry:
    """What one pipeline message becomes."""

    event: AgentEventEnvelope
    """The event to run."""
    binding: AgentBinding
    """The binding to run it with."""


def is_json_safe(value: object, *, _depth: int = 0) -> bool:
    """True for None, str, bool, int, finite float, and lists/tuples/str-keyed dicts of those (bounded depth)."""
    if _depth > _MAX_PARAM_DEPTH:
        return False
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(is_json_safe(v, _depth=_depth + 1) for v in cast(Iterable[object], value))
    if isinstance(value, dict):
        items = cast(dict[object, object], value).items()
        return all(isinstance(k, str) and is_json_safe(v, _depth=_depth + 1) for k, v in items)
    return False


def _json_value(value: object) -> JsonValue:
    # tuples become lists; only called on values is_json_safe accepted
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in cast(Iterable[object], value)]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in cast(dict[object, object], value).items()}
    return cast(JsonValue, value)


def filter_query_variables(variables: Mapping[str, Any]) -> dict[str, JsonValue]:
    """Query variables a runner may see: no ``_``-prefixed or secret-looking names, JSON values only."""
    return {
        key: _json_value(value)
        for key, value in variables.items()
        if not key.startswith("_") and not is_secret_name(key) and is_json_safe(value)
    }


def _source_message_id(message: PipelineMessage) -> str | None:
    mid = message.message_id
    if mid is None or mid == -1 or mid == "-1" or mid == "":
        return None
    return str(mid)


def scoped_event_id(message: PipelineMessage) -> str:
    """``host:`` + 32 hex digits of SHA-256 over pipeline, bot, launcher, sender, message id and time.

    Never the raw platform id. The same delivery always hashes the same (re-deliveries deduplicate); with
    neither a message id nor a time there is nothing stable to hash, so a random nonce keeps events apart.
    """
    mid = _source_message_id(message)
    nonce = secrets.token_hex(16) if mid is None and message.time is None else None
    parts = [
        "pipeline",
        message.pipeline_id,
        message.bot_id,
        message.launcher_type,
        message.launcher_id,
        message.sender_id,
        mid,
        message.time,
        nonce,
    ]
    return EVENT_ID_PREFIX + hashlib.sha256(json.dumps_canonical(parts)).hexdigest()[:32]


def _conversation_id(message: PipelineMessage) -> str:
    variable = message.query_variables.get("conversation_id")
    if message.conversation_id:
        chosen = message.conversation_id
    elif isinstance(variable, str) and variable:
        chosen = variable
    else:
        chosen = f"{message.launcher_type}_{message.launcher_id}"
    if len(chosen) > _MAX_CONVERSATION_ID:
        # the envelope caps ids; a long id is hashed rather than cut (cut ids could collide)
        chosen = "conv:" + hashlib.sha256(chosen.encode()).hexdigest()[:32]
    return chosen


def _input(message: PipelineMessage) -> AgentInput:
    contents: list[ContentElement] = list(message.contents)
    text = message.text
    if text is None:
        texts = [c.text for c in contents if isinstance(c, TextContent)]
        text = "".join(texts) if texts else None
    elif not contents and text:
        contents = [TextContent(text=text)]
    attachments: list[ArtifactRef] = []
    seen: set[str] = set()
    for element in contents:
        ref = None if isinstance(element, TextContent) else element.artifact
        if ref is not None and ref.artifact_id not in seen:
            seen.add(ref.artifact_id)
            attachments.append(ref)
    return AgentInput(text=text, contents=contents, attachments=attachments)


def _allowed_plugins(message: PipelineMessage) -> set[str] | None:
    prefs = message.extension_preferences
    allowed: set[str] | None = None if prefs.enable_all_plugins else set(prefs.plugins)
    if message.bound_plugins is not None:
        bound = set(message.bound_plugins)
        allowed = bound if allowed is None else allowed & bound
    return allowed


def _granted_tools(message: PipelineMessage, tool_names: Iterable[str]) -> list[str]:
    prefs = message.extension_preferences
    granted: list[str] = []
    for name in tool_names:
        server, sep, _ = name.partition(MCP_NAME_SEPARATOR)
        if not sep or prefs.enable_all_mcp_servers or server in prefs.mcp_servers:
            granted.append(name)  # host Python tools (no server prefix) follow the pipeline itself
    # An empty grant list lets the runner config select any catalog tool; a grant naming nothing real keeps
    # "no MCP server enabled" meaning no tools at all.
    return granted or [NO_TOOLS]


def pipeline_entry(
    pipeline_config: Mapping[str, Any],
    message: PipelineMessage,
    *,
    tool_names: Iterable[str] = (),
) -> PipelineEntry:
    """The event and binding of *message* under *pipeline_config* (already migrated: only ``ai.runner.id``
    and ``ai.runner_config`` are read). *tool_names* are the host's catalog tools the pipeline may grant.

    Raises :class:`RunnerNotConfiguredError` without a runner id and :class:`RunnerNotBoundError` when the
    runner's plugin is not bound to the pipeline.
    """
    runner_id = resolve_runner_id(pipeline_config)
    if runner_id is None:
        raise RunnerNotConfiguredError(
            f"pipeline {message.pipeline_id} configures no runner (ai.runner.id); "
            "legacy configurations must be migrated with migrate_pipeline_config first"
        )
    parsed = RunnerId.parse(runner_id)
    allowed = _allowed_plugins(message)
    if allowed is not None and parsed.plugin_id not in allowed:
        raise RunnerNotBoundError(str(parsed), parsed.plugin_id)

    mid = _source_message_id(message)
    conversation_id = _conversation_id(message)
    event_time = None if message.time is None else int(message.time * 1000)
    data: dict[str, JsonValue] = {}
    if message.platform_event is not None:
        raw = {k: v for k, v in message.platform_event.items() if k != "source_platform_object"}
        data = filter_json(raw)
    metadata: dict[str, JsonValue] = {
        "origin": "pipeline_adapter",
        "pipeline_id": message.pipeline_id,
        "conversation_expire_seconds": expire_seconds(pipeline_config),
    }
    if message.query_id is not None:
        metadata["query_id"] = str(message.query_id)
    event = AgentEventEnvelope(
        event_id=scoped_event_id(message),
        event_type="message.received",
        event_time=event_time,
        source="host_adapter",
        source_event_type=message.source_event_type,
        bot_id=message.bot_id,
        conversation_id=conversation_id,
        launcher_type=message.launcher_type,
        launcher_id=message.launcher_id,
        actor=ActorContext(actor_type="user", actor_id=message.sender_id, actor_name=message.sender_name),
        subject=SubjectContext(
            subject_type="message",
            subject_id=mid,
            data={
                "launcher_type": message.launcher_type,
                "launcher_id": message.launcher_id,
                "sender_id": message.sender_id,
                "bot_id": message.bot_id,
            },
        ),
        input=_input(message),
        delivery=DeliveryContext(
            surface="platform",
            reply_target={"message_id": mid},
            supports_streaming=message.output.streaming,
            max_message_size=message.output.max_message_size,
            platform_capabilities={
                "quote_origin": message.output.quote_origin,
                "at_sender": message.output.at_sender,
            },
        ),
        data=data,
        params=filter_query_variables(message.query_variables),
        metadata=metadata,
    )
    binding = AgentBinding(
        binding_id=f"pipeline:{message.pipeline_id}",
        scope=BindingScope(type="bot", id=message.bot_id) if message.bot_id else BindingScope(),
        event_types=["message.received"],
        runner_id=str(parsed),
        runner_config=resolve_runner_config(pipeline_config, runner_id),
        resource_policy=ResourcePolicy(tools=_granted_tools(message, tool_names)),
        delivery_policy=DeliveryPolicy(
            streaming=message.output.streaming, max_message_size=message.output.max_message_size
        ),
        agent_id=message.pipeline_id,
    )
    return PipelineEntry(event=event, binding=binding)


def filter_json(values: Mapping[str, Any]) -> dict[str, JsonValue]:
    """The entries of *values* that are plain JSON (others are dropped)."""
    return {k: _json_value(v) for k, v in values.items() if is_json_safe(v)}
