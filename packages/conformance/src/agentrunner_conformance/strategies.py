"""Public Hypothesis strategies for Protocol v1: run contexts, resources, fault plans and result streams.

Runner authors use them to fuzz their own runners (``@given(strategies.run_contexts())``); the host uses the
result-stream strategies, valid and adversarial, for its own robustness tests. Every strategy builds SDK
models, so what it produces is always valid for the schema unless the strategy says otherwise.

>>> from hypothesis import given
>>> @given(strategies.run_contexts(event_types=["message.received"]))
... def test_my_runner(ctx): ...
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from agentrunner import (
    ActorContext,
    AgentEventContext,
    AgentInput,
    AgentResources,
    AgentRunContext,
    AgentRunState,
    AgentRuntimeContext,
    AgentTrigger,
    ArtifactRef,
    AudioContent,
    ContentElement,
    ContextAccess,
    ContextAPICapabilities,
    ConversationContext,
    DeliveryContext,
    FileContent,
    FileResource,
    ImageContent,
    KnowledgeBaseResource,
    ModelResource,
    ResultEmitter,
    StorageResource,
    SubjectContext,
    TextContent,
    ToolResource,
)
from agentrunner.context import TriggerSource
from agentrunner.results import MAX_STATE_VALUE_BYTES, AgentRunResult
from hypothesis import strategies as st
from pydantic import JsonValue

from .host import FAULT_CODES, CallBehaviour, FaultPlan

__all__ = [
    "ADVERSARIAL_DEFECTS",
    "EVENT_TYPES",
    "MESSAGE_EVENT_TYPES",
    "AdversarialStream",
    "Defect",
    "adversarial_result_streams",
    "agent_inputs",
    "artifact_refs",
    "available_apis",
    "call_behaviours",
    "contents",
    "delivery_contexts",
    "fault_plans",
    "json_values",
    "resources",
    "result_streams",
    "run_contexts",
    "run_ids",
    "texts",
]

EVENT_TYPES: Final[tuple[str, ...]] = (
    "message.received",
    "message.recalled",
    "group.member_joined",
    "friend.request_received",
    "schedule.triggered",
    "api.invoked",
)
"""The event kinds the kit generates."""

MESSAGE_EVENT_TYPES: Final[frozenset[str]] = frozenset({"message.received", "api.invoked"})
"""Event kinds whose input carries user content; the others carry only event data."""

_MARKER_FREE = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="#\u2063")


@functools.cache
def texts(*, min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[str]:
    """User text: any printable Unicode (CJK, emoji, RTL), never the ``#`` that run markers use."""
    return st.text(_MARKER_FREE, min_size=min_size, max_size=max_size)


@functools.cache
def json_values(*, max_leaves: int = 8) -> st.SearchStrategy[JsonValue]:
    """Small JSON values."""
    scalars: st.SearchStrategy[JsonValue] = (
        st.none() | st.booleans() | st.integers(-(2**31), 2**31) | texts(max_size=12)
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(texts(min_size=1, max_size=8), inner, max_size=3)
        ),
        max_leaves=max_leaves,
    )


def run_ids() -> st.SearchStrategy[str]:
    """Opaque run ids."""
    return st.integers(1, 10**9).map(lambda n: f"run-{n}")


@functools.cache
def artifact_refs(*, artifact_type: str | None = None) -> st.SearchStrategy[ArtifactRef]:
    """Artifact refs of every kind (or one kind), with and without size, MIME type and summary."""
    kinds = (
        st.just(artifact_type)
        if artifact_type
        else st.sampled_from(["file", "image", "audio", "video", "tool_result"])
    )
    return st.builds(
        ArtifactRef,
        artifact_id=st.integers(0, 10**6).map(lambda n: f"art-{n}"),
        artifact_type=kinds,
        mime_type=st.sampled_from([None, "image/png", "application/pdf", "audio/ogg", "text/plain"]),
        name=st.none() | st.sampled_from(["a.png", "report.pdf", "voice.ogg", "说明.txt"]),
        size=st.none() | st.integers(0, 4096),
        summary=st.none() | texts(max_size=20),
    )


@functools.cache
def contents(*, multimodal: bool = True, max_size: int = 4) -> st.SearchStrategy[list[ContentElement]]:
    """Structured message content; with *multimodal*, images, files and audio by artifact ref or URL."""
    text: st.SearchStrategy[ContentElement] = st.builds(TextContent, text=texts())
    if not multimodal:
        return st.lists(text, max_size=max_size)
    url = st.sampled_from(
        ["https://example.org/a.png", "https://example.org/f.pdf", "http://example.org/v.ogg"]
    )
    image: st.SearchStrategy[ContentElement] = st.one_of(
        st.builds(
            ImageContent, artifact=artifact_refs(artifact_type="image"), alt=st.none() | texts(max_size=10)
        ),
        st.builds(ImageContent, url=url),
    )
    file: st.SearchStrategy[ContentElement] = st.one_of(
        st.builds(FileContent, artifact=artifact_refs(artifact_type="file")), st.builds(FileContent, url=url)
    )
    audio: st.SearchStrategy[ContentElement] = st.one_of(
        st.builds(AudioContent, artifact=artifact_refs(artifact_type="audio")),
        st.builds(AudioContent, url=url),
    )
    return st.lists(st.one_of(text, image, file, audio), max_size=max_size)


@functools.cache
def _optional_text(allow_empty: bool) -> st.SearchStrategy[str | None]:
    return st.none() | texts(min_size=0 if allow_empty else 1)


@functools.cache
def _attachments() -> st.SearchStrategy[list[ArtifactRef]]:
    return st.lists(artifact_refs(), max_size=2)


@st.composite
def agent_inputs(draw: st.DrawFn, *, multimodal: bool = False, allow_empty: bool = True) -> AgentInput:
    """The current input: text only, structured text, or (with *multimodal*) mixed media and attachments.

    Without *multimodal* the input holds text parts and artifact refs only, as a host delivers to runners
    that do not declare ``multimodal_input``.
    """
    text = draw(_optional_text(allow_empty))
    parts = draw(contents(multimodal=multimodal))
    attachments = draw(_attachments())
    if not allow_empty and not parts and not text:
        text = "hello"
    return AgentInput(text=text, contents=parts, attachments=attachments)


@functools.cache
def available_apis() -> st.SearchStrategy[ContextAPICapabilities]:
    """Any combination of pull APIs switched on or off."""
    flag = st.booleans()
    return st.builds(
        ContextAPICapabilities,
        history_page=flag,
        history_search=flag,
        event_get=flag,
        event_page=flag,
        artifact_metadata=flag,
        artifact_read=flag,
        state=flag,
        storage=flag,
    )


@functools.cache
def delivery_contexts() -> st.SearchStrategy[DeliveryContext]:
    """Delivery surfaces with and without streaming."""
    return st.builds(
        DeliveryContext,
        surface=st.sampled_from(["http.stream", "http.wait", "cli", "mcp", "platform"]),
        supports_streaming=st.booleans(),
        supports_edit=st.booleans(),
        max_message_size=st.none() | st.integers(1, 4000),
    )


@functools.cache
def _nonempty_subset(options: tuple[str, ...]) -> st.SearchStrategy[list[Any]]:
    return st.lists(st.sampled_from(options), min_size=1, max_size=len(options), unique=True)


@functools.cache
def _models() -> st.SearchStrategy[list[ModelResource]]:
    return st.lists(
        st.builds(
            ModelResource,
            model_id=st.sampled_from(["m-primary", "m-fallback", "m-rerank"]),
            model_type=st.sampled_from(["llm", "rerank"]),
            role=st.none() | st.sampled_from(["primary", "fallback", "rerank"]),
            operations=_nonempty_subset(("invoke", "stream", "rerank")),
        ),
        max_size=2,
        unique_by=lambda m: m.model_id,
    )


@functools.cache
def _tools(granted: bool | None) -> st.SearchStrategy[list[ToolResource]]:
    return st.lists(
        st.builds(
            ToolResource,
            tool_name=st.sampled_from(["search", "calculator", "weather"]),
            description=st.none() | texts(max_size=20),
            parameters=st.just({"type": "object", "properties": {"q": {"type": "string"}}}),
            operations=_nonempty_subset(("detail", "call")),
        ),
        min_size=1 if granted else 0,
        max_size=0 if granted is False else 2,
        unique_by=lambda t: t.tool_name,
    )


@functools.cache
def _knowledge_bases(granted: bool | None) -> st.SearchStrategy[list[KnowledgeBaseResource]]:
    return st.lists(
        st.builds(
            KnowledgeBaseResource,
            kb_id=st.sampled_from(["kb-docs", "kb-faq"]),
            name=st.none() | texts(max_size=10),
            operations=_nonempty_subset(("list", "retrieve")),
        ),
        min_size=1 if granted else 0,
        max_size=0 if granted is False else 2,
        unique_by=lambda k: k.kb_id,
    )


@functools.cache
def _files() -> st.SearchStrategy[list[FileResource]]:
    return st.lists(
        st.builds(
            FileResource,
            file_id=st.integers(0, 99).map(lambda n: f"file-{n}"),
            kind=st.sampled_from(["config", "knowledge"]),
            artifact=artifact_refs(artifact_type="file"),
        ),
        max_size=1,
    )


_STORAGE = st.builds(
    StorageResource,
    plugin_storage=st.booleans(),
    workspace_storage=st.booleans(),
    binding_storage=st.booleans(),
)
_ACTIONS = st.lists(st.sampled_from(["message.edit", "message.react"]), max_size=2, unique=True)


@st.composite
def resources(draw: st.DrawFn, *, tools: bool | None = None, knowledge: bool | None = None) -> AgentResources:
    """Authorized resources. *tools* / *knowledge*: ``True`` forces some, ``False`` none, ``None`` either."""
    actions = draw(_ACTIONS)
    return AgentResources(
        models=draw(_models()),
        tools=draw(_tools(tools)),
        knowledge_bases=draw(_knowledge_bases(knowledge)),
        files=draw(_files()),
        storage=draw(_STORAGE),
        platform_capabilities={"actions": actions} if actions else {},
    )


@functools.cache
def _event_data(event_type: str) -> st.SearchStrategy[dict[str, JsonValue]]:
    match event_type:
        case "message.recalled":
            return st.fixed_dictionaries({"message_id": st.integers(1, 999).map(lambda n: f"msg-{n}")})
        case "group.member_joined":
            return st.fixed_dictionaries({"member_id": st.integers(1, 999).map(lambda n: f"user-{n}")})
        case "friend.request_received":
            return st.fixed_dictionaries({"comment": texts(max_size=20)})
        case "schedule.triggered":
            return st.fixed_dictionaries({"schedule_id": st.just("daily"), "cron": st.just("0 9 * * *")})
        case _:
            return st.just({})


_SMALL = st.integers(0, 3)
_LAUNCHERS = st.sampled_from(["person", "group"])
_ACTOR_TYPES = st.sampled_from(["user", "system", "bot"])
_SUBJECT_TYPES = st.sampled_from(["message", "member", "schedule"])
_TRIGGER_SOURCES: st.SearchStrategy[TriggerSource] = st.sampled_from(
    ("platform", "webui", "api", "scheduler")
)
_SOURCES = st.sampled_from(["telegram", "webui", "scheduler", "api"])
_LOCALES = st.none() | st.sampled_from(["en_US", "zh_Hans"])
_CONFIGS = st.sampled_from([{}, {"prefix": ""}, {"prefix": "echo: "}])
_ACTOR_NAMES = st.none() | texts(max_size=10)


@functools.cache
def _sampled(options: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.sampled_from(options)


@functools.cache
def _state_values() -> tuple[
    st.SearchStrategy[dict[str, JsonValue]], st.SearchStrategy[dict[str, JsonValue]]
]:
    conversation = st.dictionaries(
        st.sampled_from(["topic", "echo.turns", "external.session_id"]), json_values(max_leaves=3), max_size=2
    )
    actor = st.dictionaries(st.sampled_from(["lang", "tier"]), json_values(max_leaves=2), max_size=1)
    return conversation, actor


@st.composite
def run_contexts(
    draw: st.DrawFn,
    *,
    event_types: Sequence[str] = EVENT_TYPES,
    multimodal: bool = False,
    marker: str | None = None,
    run_id: str | None = None,
    deadline_at: float | None = None,
    tools: bool | None = None,
    knowledge: bool | None = None,
) -> AgentRunContext:
    """Complete run contexts of every event kind, with optional sections missing and APIs switched off.

    *marker*, when given, is put at the start of the input text (message events) or of the event data, and
    into every id the context carries, so leaks between runs can be spotted in another run's output.
    *multimodal* adds images, files and audio to message inputs; *tools* / *knowledge* force or forbid those
    resources (see :func:`resources`).
    """
    event_type = draw(_sampled(tuple(event_types)))
    tag = marker or ""
    rid = run_id or draw(run_ids())
    has_conversation = draw(st.booleans()) if marker is None else True
    conversation = (
        ConversationContext(
            conversation_id=f"conv{tag}-{draw(_SMALL)}",
            launcher_type=draw(_LAUNCHERS),
            launcher_id=f"chat{tag}",
            bot_id="bot-1",
            workspace_id=f"ws{tag}" if draw(st.booleans()) else None,
        )
        if has_conversation
        else None
    )
    actor = (
        ActorContext(
            actor_type=draw(_ACTOR_TYPES),
            actor_id=f"user{tag}-{draw(_SMALL)}",
            actor_name=draw(_ACTOR_NAMES),
        )
        if draw(st.booleans())
        else None
    )
    subject = (
        SubjectContext(subject_type=draw(_SUBJECT_TYPES), subject_id=f"subj{tag}")
        if draw(st.booleans())
        else None
    )
    data = dict(draw(_event_data(event_type)))
    if event_type in MESSAGE_EVENT_TYPES:
        agent_input = draw(agent_inputs(multimodal=multimodal))
        if marker is not None:
            agent_input = agent_input.model_copy(
                update={"text": f"{marker} {agent_input.text or ''}".strip()}
            )
    else:
        agent_input = AgentInput()
        if marker is not None:
            data["marker"] = marker
    apis = draw(available_apis())
    conversation_state, actor_state = _state_values()
    state = AgentRunState(conversation=draw(conversation_state), actor=draw(actor_state))
    return AgentRunContext(
        run_id=rid,
        trigger=AgentTrigger(type=event_type, source=draw(_TRIGGER_SOURCES)),
        event=AgentEventContext(
            event_id=f"evt{tag}-{draw(_SMALL)}",
            event_type=event_type,
            event_time=1_700_000_000_000,
            source=draw(_SOURCES),
            data=data,
        ),
        conversation=conversation,
        actor=actor,
        subject=subject,
        input=agent_input,
        delivery=draw(delivery_contexts()),
        resources=draw(resources(tools=tools, knowledge=knowledge)),
        context=ContextAccess(
            conversation_id=conversation.conversation_id if conversation else None,
            has_history_before=draw(st.booleans()),
            available_apis=apis,
        ),
        state=state,
        runtime=AgentRuntimeContext(
            trace_id=f"trace{tag}",
            deadline_at=deadline_at,
            locale=draw(_LOCALES),
            metadata={"session_key": f"session{tag}"},
        ),
        config=dict(draw(_CONFIGS)),
    )


def call_behaviours(
    *, errors: Sequence[str] = FAULT_CODES, max_delay: float = 0.01, error_weight: float = 0.5
) -> st.SearchStrategy[CallBehaviour]:
    """How one back-call is answered: normally, with a §9 error, or after a short delay."""
    codes = [c for c in FAULT_CODES if c in errors]
    ok = st.builds(CallBehaviour, delay=st.sampled_from([0.0, max_delay / 2, max_delay]))
    failing = st.builds(CallBehaviour, error=st.sampled_from(codes), delay=st.sampled_from([0.0, max_delay]))
    if error_weight >= 1:
        return failing
    if error_weight <= 0:
        return ok
    return st.one_of(ok, failing) if error_weight >= 0.5 else st.one_of(ok, ok, ok, failing)


def fault_plans(
    *,
    errors: Sequence[str] = FAULT_CODES,
    max_delay: float = 0.01,
    error_weight: float = 0.5,
    max_calls: int = 4,
) -> st.SearchStrategy[FaultPlan]:
    """Fault plans: a behaviour per call for the first *max_calls* calls, then a default behaviour."""
    behaviour = call_behaviours(errors=errors, max_delay=max_delay, error_weight=error_weight)
    return st.builds(FaultPlan, calls=st.lists(behaviour, max_size=max_calls).map(tuple), default=behaviour)


@st.composite
def result_streams(draw: st.DrawFn, *, run_id: str = "run-1", streaming: bool = True) -> list[AgentRunResult]:
    """Valid result streams: optional state updates, paired tool calls, (streamed) messages, one terminal."""
    out = ResultEmitter(run_id)
    results: list[AgentRunResult] = []
    for key in draw(st.lists(st.sampled_from(["topic", "external.session_id"]), max_size=2, unique=True)):
        results.append(out.state("conversation", key, draw(json_values(max_leaves=3))))
    for n in range(draw(st.integers(0, 2))):
        call_id = f"call-{n}"
        results.append(out.tool_started(call_id, "search", {"q": draw(texts(max_size=8))}))
        failed = draw(st.booleans())
        results.append(
            out.tool_completed(
                call_id,
                "search",
                error_code="runtime_error" if failed else None,
                result_preview=None if failed else {"hits": 1},
            )
        )
    text = draw(texts(min_size=1))
    if streaming and draw(st.booleans()):
        cut = draw(st.integers(0, len(text)))
        results.extend([out.delta(text[:cut]), out.delta(text[cut:])])
    if draw(st.booleans()):
        results.append(out.message(text))
        results.append(out.complete(usage={"input_tokens": len(text), "output_tokens": len(text)}))
    elif draw(st.booleans()):
        results.append(out.complete(text))
    else:
        results.append(
            out.fail(draw(st.sampled_from(["runner.error", "cancelled", "deadline_exceeded"])), "failed")
        )
    return results


Defect = Literal[
    "wrong_run_id",
    "bad_sequence",
    "missing_terminal",
    "two_terminals",
    "output_after_terminal",
    "oversized_state",
    "unknown_type",
    "invalid_data",
]
"""How an adversarial stream is broken."""

ADVERSARIAL_DEFECTS: Final[tuple[Defect, ...]] = Defect.__args__
"""Every defect :func:`adversarial_result_streams` can produce."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdversarialStream:
    """A result stream (as JSON objects) with exactly one kind of defect."""

    defect: Defect
    """What is wrong with it."""
    run_id: str
    """The run it claims to belong to."""
    results: list[dict[str, Any]]
    """The results, as a runner would send them over the wire."""


@st.composite
def adversarial_result_streams(
    draw: st.DrawFn, *, run_id: str = "run-1", defects: Sequence[Defect] = ADVERSARIAL_DEFECTS
) -> AdversarialStream:
    """Broken result streams, each with one labelled defect, built from a valid stream."""
    defect = draw(st.sampled_from(list(defects)))
    valid = draw(result_streams(run_id=run_id))
    results = [r.model_dump(mode="json") for r in valid]
    terminal = results[-1]
    match defect:
        case "wrong_run_id":
            index = draw(st.integers(0, len(results) - 1))
            results[index]["run_id"] = f"{run_id}-other"
        case "bad_sequence":
            if len(results) == 1:
                results[0]["sequence"] = draw(st.integers(2, 5))
            else:
                index = draw(st.integers(1, len(results) - 1))
                results[index]["sequence"] = results[index - 1]["sequence"]
        case "missing_terminal":
            results.pop()
            if not results:
                results.append(ResultEmitter(run_id).message("partial").model_dump(mode="json"))
        case "two_terminals":
            second = dict(terminal, sequence=terminal["sequence"] + 1)
            results.append(second)
        case "output_after_terminal":
            extra = ResultEmitter(run_id).message("late").model_dump(mode="json")
            extra["sequence"] = terminal["sequence"] + 1
            results.append(extra)
        case "oversized_state":
            big = ResultEmitter(run_id).state("conversation", "blob", "x" * (MAX_STATE_VALUE_BYTES + 1))
            dumped = big.model_dump(mode="json")
            results.insert(0, dumped)
            for n, result in enumerate(results, start=1):
                result["sequence"] = n
        case "unknown_type":
            results.insert(0, {"type": "thought.delta", "run_id": run_id, "data": {"text": "hmm"}})
            for n, result in enumerate(results, start=1):
                result["sequence"] = n
        case "invalid_data":
            results.insert(
                0,
                {
                    "type": "state.updated",
                    "run_id": run_id,
                    "data": {"scope": "galaxy", "key": "k", "value": 1},
                },
            )
            for n, result in enumerate(results, start=1):
                result["sequence"] = n
    return AdversarialStream(defect=defect, run_id=run_id, results=results)
