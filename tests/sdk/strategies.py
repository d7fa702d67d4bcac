"""Hypothesis strategies for valid Protocol v1 values, built from the SDK models.

Every value these strategies produce must validate; JSON numbers stay within what every JSON stack holds
exactly (integers within ±2**53, finite floats).
"""

from __future__ import annotations

from typing import Any, TypeVar

from agentrunner import (
    ActionRequestedData,
    ActionRequestedResult,
    ActorContext,
    AdapterContext,
    AgentEventContext,
    AgentInput,
    AgentResources,
    AgentRunContext,
    AgentRunState,
    AgentRuntimeContext,
    AgentTrigger,
    ArtifactCreatedData,
    ArtifactCreatedResult,
    ArtifactRef,
    AssistantMessage,
    AssistantMessageChunk,
    AudioContent,
    ContentElement,
    ContextAccess,
    ContextAPICapabilities,
    ConversationContext,
    DeliveryContext,
    FileContent,
    FileResource,
    ImageContent,
    InlineContextPolicy,
    KnowledgeBaseResource,
    MessageCompletedData,
    MessageCompletedResult,
    MessageDeltaData,
    MessageDeltaResult,
    ModelResource,
    RawEventRef,
    RunCompletedData,
    RunCompletedResult,
    RunFailedData,
    RunFailedResult,
    StateUpdatedData,
    StateUpdatedResult,
    StaticContextRef,
    StorageResource,
    SubjectContext,
    TextContent,
    ToolCallCompletedData,
    ToolCallCompletedResult,
    ToolCallStartedData,
    ToolCallStartedResult,
    ToolResource,
)
from agentrunner.results import AgentRunResultBase
from hypothesis import strategies as st
from pydantic import JsonValue

_T = TypeVar("_T")

MAX_SAFE_INT = 2**53


def optional(strategy: st.SearchStrategy[_T]) -> st.SearchStrategy[_T | None]:
    """``None`` or a value of *strategy*."""
    return st.none() | strategy


texts = st.text(max_size=20)
ids = st.text(min_size=1, max_size=24)
epoch_ms = st.integers(min_value=0, max_value=MAX_SAFE_INT)

json_scalars: st.SearchStrategy[JsonValue] = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values: st.SearchStrategy[JsonValue] = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=8,
)
json_objects: st.SearchStrategy[dict[str, Any]] = st.dictionaries(texts, json_values, max_size=3)

http_urls = st.builds(
    "{}://{}.test/{}".format,
    st.sampled_from(["http", "https"]),
    st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9._~/-]{0,16}", fullmatch=True),
)

artifact_refs = st.builds(
    ArtifactRef,
    artifact_id=st.text(min_size=1, max_size=40),
    artifact_type=st.sampled_from(["file", "image", "audio", "video", "tool_result"]),
    mime_type=optional(texts),
    name=optional(texts),
    size=optional(st.integers(min_value=0, max_value=MAX_SAFE_INT)),
    digest=optional(texts),
    summary=optional(texts),
    expires_at=optional(epoch_ms),
    permissions=st.lists(st.sampled_from(["metadata", "read"]), max_size=2),
    metadata=json_objects,
)


def _binary_source(kind: type[_T], **extra: st.SearchStrategy[Any]) -> st.SearchStrategy[_T]:
    # An image, file or audio element needs at least one of artifact and url.
    return st.builds(kind, artifact=artifact_refs, url=optional(http_urls), **extra) | st.builds(
        kind, artifact=optional(artifact_refs), url=http_urls, **extra
    )


content_elements: st.SearchStrategy[ContentElement] = st.one_of(
    st.builds(TextContent, text=texts),
    _binary_source(ImageContent, mime_type=optional(texts), alt=optional(texts)),
    _binary_source(FileContent, name=optional(texts), mime_type=optional(texts)),
    _binary_source(AudioContent, mime_type=optional(texts), duration_ms=optional(epoch_ms)),
)
contents = st.lists(content_elements, max_size=3)

_operations = st.lists(st.sampled_from(["invoke", "stream", "rerank"]), max_size=3, unique=True)

resources = st.builds(
    AgentResources,
    models=st.lists(
        st.builds(
            ModelResource,
            model_id=ids,
            model_type=st.sampled_from(["llm", "rerank", "embedding"]),
            role=optional(st.sampled_from(["primary", "fallback", "rerank"])),
            provider=optional(texts),
            capabilities=st.lists(texts, max_size=3),
            context_window=optional(st.integers(min_value=1, max_value=10_000_000)),
            operations=_operations,
            metadata=json_objects,
        ),
        max_size=3,
    ),
    tools=st.lists(
        st.builds(
            ToolResource,
            tool_name=ids,
            description=optional(texts),
            parameters=json_objects,
            operations=st.lists(st.sampled_from(["detail", "call"]), max_size=2, unique=True),
        ),
        max_size=3,
    ),
    knowledge_bases=st.lists(
        st.builds(
            KnowledgeBaseResource,
            kb_id=ids,
            name=optional(texts),
            operations=st.lists(st.sampled_from(["list", "retrieve"]), max_size=2, unique=True),
        ),
        max_size=2,
    ),
    files=st.lists(
        st.builds(
            FileResource, file_id=ids, kind=st.sampled_from(["config", "knowledge"]), artifact=artifact_refs
        ),
        max_size=2,
    ),
    storage=st.builds(
        StorageResource,
        plugin_storage=st.booleans(),
        workspace_storage=st.booleans(),
        binding_storage=st.booleans(),
    ),
    platform_capabilities=json_objects,
)

context_access = st.builds(
    ContextAccess,
    conversation_id=optional(ids),
    thread_id=optional(ids),
    latest_cursor=optional(ids),
    event_seq=optional(st.integers(min_value=0, max_value=MAX_SAFE_INT)),
    transcript_seq=optional(st.integers(min_value=0, max_value=MAX_SAFE_INT)),
    has_history_before=st.booleans(),
    inline_policy=st.builds(
        InlineContextPolicy,
        mode=st.sampled_from(["none", "current_event", "recent_tail", "summary_tail"]),
        delivered_count=st.integers(min_value=0, max_value=1000),
        source_total_count=optional(st.integers(min_value=0, max_value=MAX_SAFE_INT)),
        messages_complete=st.booleans(),
        reason=optional(texts),
    ),
    available_apis=st.builds(
        ContextAPICapabilities,
        history_page=st.booleans(),
        history_search=st.booleans(),
        event_get=st.booleans(),
        artifact_read=st.booleans(),
        state=st.booleans(),
        storage=st.booleans(),
    ),
)

contexts: st.SearchStrategy[AgentRunContext] = st.builds(
    AgentRunContext,
    run_id=ids,
    trigger=st.builds(
        AgentTrigger,
        type=texts,
        source=st.sampled_from(["platform", "webui", "api", "scheduler", "system", "host_adapter"]),
        timestamp=optional(epoch_ms),
    ),
    event=st.builds(
        AgentEventContext,
        event_id=ids,
        event_type=st.sampled_from(["message.received", "message.recalled", "schedule.triggered"]) | texts,
        event_time=optional(epoch_ms),
        source=texts,
        source_event_type=optional(texts),
        raw_ref=optional(
            st.builds(RawEventRef, ref_id=ids, source=optional(texts), artifact=optional(artifact_refs))
        ),
        data=json_objects,
    ),
    conversation=optional(
        st.builds(
            ConversationContext,
            conversation_id=optional(ids),
            thread_id=optional(ids),
            launcher_type=optional(st.sampled_from(["person", "group"])),
            launcher_id=optional(ids),
            bot_id=optional(ids),
            workspace_id=optional(ids),
        )
    ),
    actor=optional(
        st.builds(
            ActorContext,
            actor_type=texts,
            actor_id=optional(ids),
            actor_name=optional(texts),
            metadata=json_objects,
        )
    ),
    subject=optional(
        st.builds(SubjectContext, subject_type=texts, subject_id=optional(ids), data=json_objects)
    ),
    input=st.builds(
        AgentInput,
        text=optional(texts),
        contents=contents,
        attachments=st.lists(artifact_refs, max_size=2),
        message_chain=optional(json_objects),
    ),
    delivery=st.builds(
        DeliveryContext,
        surface=st.sampled_from(["http.stream", "http.wait", "cli", "mcp", "platform"]),
        reply_target=optional(json_objects),
        supports_streaming=st.booleans(),
        supports_edit=st.booleans(),
        max_message_size=optional(st.integers(min_value=1, max_value=1_000_000)),
        platform_capabilities=json_objects,
    ),
    resources=resources,
    context=context_access,
    state=st.builds(AgentRunState, conversation=json_objects, actor=json_objects, runner=json_objects),
    runtime=st.builds(
        AgentRuntimeContext,
        trace_id=ids,
        deadline_at=optional(st.floats(min_value=0, max_value=4e9)),
        locale=optional(texts),
        timezone=optional(texts),
        static_refs=st.dictionaries(
            texts, st.builds(StaticContextRef, ref=texts, version=optional(texts), hash=texts), max_size=2
        ),
        metadata=json_objects,
    ),
    config=json_objects,
    adapter=optional(st.builds(AdapterContext, extra=json_objects)),
    metadata=json_objects,
)
"""Valid run contexts, from minimal to fully populated."""

assistant_messages = st.builds(
    AssistantMessage,
    content=optional(texts),
    contents=contents,
    artifacts=st.lists(artifact_refs, max_size=2),
    metadata=json_objects,
)

_payloads: list[tuple[type[AgentRunResultBase], st.SearchStrategy[Any]]] = [
    (
        MessageDeltaResult,
        st.builds(
            MessageDeltaData,
            chunk=st.builds(
                AssistantMessageChunk, content=optional(texts), contents=contents, metadata=json_objects
            ),
        ),
    ),
    (MessageCompletedResult, st.builds(MessageCompletedData, message=assistant_messages)),
    (
        ToolCallStartedResult,
        st.builds(ToolCallStartedData, tool_call_id=ids, tool_name=texts, parameters=json_objects),
    ),
    (
        ToolCallCompletedResult,
        st.builds(
            ToolCallCompletedData,
            tool_call_id=ids,
            tool_name=texts,
            result_preview=optional(json_objects),
            error_code=optional(texts),
            error_message=optional(texts),
        ),
    ),
    (
        ArtifactCreatedResult,
        st.builds(ArtifactCreatedData, artifact=artifact_refs, content_base64=optional(texts)),
    ),
    (
        StateUpdatedResult,
        st.builds(
            StateUpdatedData,
            scope=st.sampled_from(["conversation", "actor", "subject", "runner", "binding", "workspace"]),
            key=st.text(min_size=1, max_size=200),
            value=json_values,
        ),
    ),
    (
        ActionRequestedResult,
        st.builds(
            ActionRequestedData,
            action=texts,
            target=json_objects,
            payload=json_objects,
            idempotency_key=optional(ids),
            approval_hint=optional(texts),
        ),
    ),
    (
        RunCompletedResult,
        st.builds(
            RunCompletedData,
            finish_reason=st.sampled_from(["stop", "length", "tool_calls"]) | texts,
            message=optional(assistant_messages),
            usage=json_objects,
        ),
    ),
    (
        RunFailedResult,
        st.builds(RunFailedData, code=ids, message=texts, retryable=st.booleans(), details=json_objects),
    ),
]


def _result(
    cls: type[AgentRunResultBase], data: st.SearchStrategy[Any]
) -> st.SearchStrategy[AgentRunResultBase]:
    return st.builds(
        cls,
        run_id=ids,
        sequence=optional(st.integers(min_value=1, max_value=MAX_SAFE_INT)),
        timestamp=optional(epoch_ms),
        metadata=json_objects,
        data=data,
    )


results: st.SearchStrategy[AgentRunResultBase] = st.one_of([_result(cls, data) for cls, data in _payloads])
"""Valid results of all nine types."""
