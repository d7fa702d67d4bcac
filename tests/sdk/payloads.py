"""Example wire payloads shared by the SDK tests: one realistic value of each protocol message."""

from __future__ import annotations

import copy
from typing import Any

RUN_ID = "run-0001"

ARTIFACT: dict[str, Any] = {
    "artifact_id": "art-1",
    "artifact_type": "image",
    "mime_type": "image/png",
    "name": "cat.png",
    "size": 2048,
    "digest": "sha256:" + "ab" * 32,
    "summary": "a cat",
    "expires_at": 1_767_000_000_000,
    "permissions": ["metadata", "read"],
    "metadata": {"width": 64},
}

CONTEXT: dict[str, Any] = {
    "run_id": RUN_ID,
    "trigger": {"type": "message.received", "source": "host_adapter", "timestamp": 1_767_000_000_000},
    "event": {
        "event_id": "evt-1",
        "event_type": "message.received",
        "event_time": 1_767_000_000_000,
        "source": "telegram",
        "source_event_type": "message",
        "raw_ref": {"ref_id": "raw-1", "source": "telegram", "size": 812},
        "data": {"message_id": "m-1", "mentions": ["bot"]},
    },
    "conversation": {
        "conversation_id": "conv-1",
        "thread_id": "th-1",
        "launcher_type": "group",
        "launcher_id": "g-42",
        "bot_id": "bot-1",
        "workspace_id": "ws-1",
    },
    "actor": {"actor_type": "user", "actor_id": "u-7", "actor_name": "Ada", "metadata": {"lang": "en"}},
    "subject": {"subject_type": "message", "subject_id": "m-1", "data": {}},
    "input": {
        "text": "what is in this picture?",
        "contents": [
            {"type": "text", "text": "what is in this picture?"},
            {"type": "image", "artifact": ARTIFACT, "alt": "photo"},
            {"type": "file", "url": "https://example.org/a.pdf", "name": "a.pdf"},
            {
                "type": "audio",
                "artifact": {"artifact_id": "art-2", "artifact_type": "audio"},
                "duration_ms": 900,
            },
        ],
        "attachments": [ARTIFACT],
    },
    "delivery": {
        "surface": "platform",
        "reply_target": {"chat_id": "g-42"},
        "supports_streaming": True,
        "supports_edit": True,
        "max_message_size": 4096,
    },
    "resources": {
        "models": [
            {
                "model_id": "mdl-1",
                "role": "primary",
                "provider": "openai",
                "name": "gpt-x",
                "capabilities": ["vision", "tool_calling"],
                "context_window": 128_000,
                "operations": ["invoke", "stream"],
            },
            {"model_id": "mdl-2", "model_type": "rerank", "role": "rerank", "operations": ["rerank"]},
        ],
        "tools": [
            {
                "tool_name": "web_search",
                "description": "Search the web",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                "operations": ["detail", "call"],
            }
        ],
        "knowledge_bases": [{"kb_id": "kb-1", "name": "Docs", "operations": ["retrieve"]}],
        "files": [{"file_id": "f-1", "kind": "config", "artifact": {"artifact_id": "art-3"}}],
        "storage": {"plugin_storage": True},
    },
    "context": {
        "conversation_id": "conv-1",
        "thread_id": "th-1",
        "latest_cursor": "c-99",
        "event_seq": 100,
        "transcript_seq": 99,
        "has_history_before": True,
        "inline_policy": {"mode": "current_event", "reason": "self_managed_context"},
        "available_apis": {"history_page": True, "event_get": True, "state": True},
    },
    "state": {"conversation": {"external.session_id": "s-1"}},
    "runtime": {
        "trace_id": "trace-1",
        "deadline_at": 1_767_000_030.5,
        "locale": "en_US",
        "timezone": "Europe/Paris",
        "static_refs": {"tool_schemas": {"ref": "tool_schemas", "hash": "sha256:" + "cd" * 32}},
        "metadata": {"session_key": "bot-1:conv-1"},
    },
    "config": {"prompt": "be brief", "api_key": "sk-secret"},
    "adapter": {"extra": {"params": {"x": 1}}},
    "metadata": {"origin": "test"},
}

MESSAGE: dict[str, Any] = {
    "role": "assistant",
    "content": "hello",
    "contents": [{"type": "text", "text": "hello"}],
    "artifacts": [ARTIFACT],
    "metadata": {"model": "gpt-x"},
}

RESULT_DATA: dict[str, dict[str, Any]] = {
    "message.delta": {"chunk": {"role": "assistant", "content": "hel", "metadata": {}}},
    "message.completed": {"message": MESSAGE},
    "tool.call.started": {"tool_call_id": "tc-1", "tool_name": "web_search", "parameters": {"q": "cats"}},
    "tool.call.completed": {
        "tool_call_id": "tc-1",
        "tool_name": "web_search",
        "result_preview": {"hits": 3},
        "error_code": None,
    },
    "artifact.created": {"artifact": ARTIFACT, "content_base64": "aGVsbG8="},
    "state.updated": {"scope": "conversation", "key": "external.session_id", "value": {"id": "s-2", "n": 2}},
    "action.requested": {
        "action": "message.edit",
        "target": {"message_id": "m-9"},
        "payload": {"text": "edited"},
        "idempotency_key": "run-0001:edit:m-9",
        "approval_hint": "edits a sent message",
    },
    "run.completed": {"finish_reason": "stop", "message": MESSAGE, "usage": {"input_tokens": 10}},
    "run.failed": {
        "code": "runner.error",
        "message": "upstream failed",
        "retryable": True,
        "details": {"n": 1},
    },
}
"""A valid ``data`` payload for each of the nine result types."""

MANIFEST: dict[str, Any] = {
    "id": "plugin:acme/helper/default",
    "name": "default",
    "label": {"en_US": "Helper", "zh_Hans": "助手"},
    "description": "Answers questions",
    "protocol_version": "1",
    "capabilities": {"streaming": True, "tool_calling": True, "interrupt": True},
    "permissions": {"models": ["invoke", "stream"], "tools": ["detail", "call"], "history": ["page"]},
    "context": {"supports_history_search": True},
    "config_schema": [
        {"name": "model", "label": "Model", "type": "llm-model-selector", "required": True},
        {"name": "api_key", "label": {"en_US": "API key"}, "type": "string", "secret": True},
        {
            "name": "style",
            "label": "Style",
            "type": "select",
            "default": "short",
            "options": [{"name": "short", "label": "Short"}, {"name": "long", "label": "Long"}],
        },
    ],
    "metadata": {"homepage": "https://example.org"},
}


def context(**overrides: Any) -> dict[str, Any]:
    """A deep copy of :data:`CONTEXT` with top-level keys replaced."""
    value = copy.deepcopy(CONTEXT)
    value.update(overrides)
    return value


def result(result_type: str, **overrides: Any) -> dict[str, Any]:
    """A valid result envelope of *result_type* with top-level keys replaced."""
    value: dict[str, Any] = {
        "type": result_type,
        "run_id": RUN_ID,
        "sequence": 1,
        "timestamp": 1_767_000_000_123,
        "metadata": {},
        "data": copy.deepcopy(RESULT_DATA[result_type]),
    }
    value.update(overrides)
    return value


def manifest(**overrides: Any) -> dict[str, Any]:
    """A deep copy of :data:`MANIFEST` with top-level keys replaced."""
    value = copy.deepcopy(MANIFEST)
    value.update(overrides)
    return value


_TRANSCRIPT_ITEM: dict[str, Any] = {
    "item_id": "i-1",
    "cursor": "c-1",
    "conversation_id": "conv-1",
    "thread_id": "th-1",
    "role": "assistant",
    "item_type": "message",
    "event_id": "evt-0",
    "run_id": "run-0000",
    "content": "earlier answer",
    "contents": [{"type": "text", "text": "earlier answer"}],
    "artifacts": [ARTIFACT],
    "created_at": 1_766_999_000_000,
    "metadata": {"edited": False},
}
_EVENT_RECORD: dict[str, Any] = {
    "event_id": "evt-0",
    "event_type": "message.received",
    "cursor": "e-1",
    "source": "telegram",
    "source_event_type": "message",
    "conversation_id": "conv-1",
    "actor_type": "user",
    "actor_id": "u-7",
    "subject_type": "message",
    "subject_id": "m-0",
    "summary": "hello",
    "data": {"message_id": "m-0"},
    "created_at": 1_766_999_000_000,
}
_CHUNK: dict[str, Any] = {
    "artifact_id": "art-1",
    "offset": 0,
    "length": 5,
    "size": 5,
    "data_base64": "aGVsbG8=",
    "mime_type": "text/plain",
}
_STATE_VALUE: dict[str, Any] = {
    "scope": "conversation",
    "key": "k",
    "value": [1, "two"],
    "exists": True,
    "version": 4,
}
_STORAGE_VALUE: dict[str, Any] = {
    "area": "plugin",
    "key": "k",
    "value_base64": "aGk=",
    "exists": True,
    "size": 2,
}
_CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {
        "role": "user",
        "content": [{"type": "text", "text": "hi"}, {"type": "image", "url": "https://x.test/i.png"}],
    },
    {"role": "assistant", "tool_calls": [{"id": "call-1", "name": "web", "arguments": {"q": "x"}}]},
    {"role": "tool", "tool_call_id": "call-1", "name": "web", "content": "{}"},
]

ACTION_PARAMS: dict[str, dict[str, Any]] = {
    "models.invoke": {
        "model_id": "mdl-1",
        "messages": _CHAT,
        "tools": [{"type": "function"}],
        "extra_args": {"t": 0},
    },
    "models.stream": {"model_id": "mdl-1", "messages": _CHAT[:2]},
    "models.rerank": {"model_id": "mdl-2", "query": "q", "documents": ["a", "b"], "top_k": 1},
    "tools.get_detail": {"tool_name": "web"},
    "tools.call": {"tool_name": "web", "parameters": {"q": "x"}},
    "knowledge.list": {},
    "knowledge.retrieve": {"kb_id": "kb-1", "query_text": "q", "top_k": 3, "filters": {"lang": "en"}},
    "history.page": {"before_cursor": "c-9", "limit": 20, "direction": "backward", "include_artifacts": True},
    "history.search": {"query": "cats", "filters": {"roles": ["user"]}, "top_k": 5},
    "events.get": {"event_id": "evt-0"},
    "events.page": {"before_cursor": "e-9", "limit": 10, "event_types": ["message.received"]},
    "artifacts.metadata": {"artifact_id": "art-1"},
    "artifacts.read_range": {"artifact_id": "art-1", "offset": 0, "length": 5},
    "artifacts.open_stream": {"artifact_id": "art-1"},
    "state.get": {"scope": "actor", "key": "k"},
    "state.set": {"scope": "conversation", "key": "k", "value": [1, "two"], "expected_version": 3},
    "state.delete": {"scope": "runner", "key": "k"},
    "state.list": {"scope": "binding", "prefix": "p.", "cursor": "x", "limit": 10},
    "storage.get": {"area": "plugin", "key": "k"},
    "storage.set": {"area": "workspace", "key": "k", "value_base64": "aGk="},
    "storage.delete": {"area": "binding", "key": "k"},
    "storage.list": {"area": "plugin", "prefix": "p", "limit": 5},
    "platform.request_action": {
        "action": "message.edit",
        "target": {"message_id": "m-9"},
        "payload": {"text": "t"},
        "idempotency_key": "k-1",
    },
}
"""Valid params of every back-call action."""

ACTION_RESULTS: dict[str, dict[str, Any]] = {
    "models.invoke": {
        "model_id": "mdl-1",
        "message": {"role": "assistant", "content": "hello", "tool_calls": []},
        "finish_reason": "stop",
        "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
    },
    "models.stream": {"delta": "hel", "tool_calls": [{"id": "call-1", "name": "web", "arguments": {}}]},
    "models.rerank": {"results": [{"index": 1, "score": 0.9, "document": "b"}]},
    "tools.get_detail": {"name": "web", "description": "search", "parameters": {"type": "object"}},
    "tools.call": {"content": {"hits": 2}, "is_error": False, "artifact": ARTIFACT},
    "knowledge.list": {"knowledge_bases": [{"kb_id": "kb-1", "name": "Docs"}]},
    "knowledge.retrieve": {
        "hits": [{"text": "t", "score": 0.5, "kb_id": "kb-1", "metadata": {"file": "a.md"}}]
    },
    "history.page": {
        "items": [_TRANSCRIPT_ITEM],
        "next_cursor": "c-0",
        "prev_cursor": "c-2",
        "has_more": True,
    },
    "history.search": {"items": [_TRANSCRIPT_ITEM]},
    "events.get": _EVENT_RECORD,
    "events.page": {"items": [_EVENT_RECORD], "next_cursor": "e-0", "has_more": True},
    "artifacts.metadata": {**ARTIFACT, "source": "platform", "conversation_id": "conv-1", "created_at": 5},
    "artifacts.read_range": _CHUNK,
    "artifacts.open_stream": _CHUNK,
    "state.get": _STATE_VALUE,
    "state.set": _STATE_VALUE,
    "state.delete": {"ok": True},
    "state.list": {
        "items": [{"key": "p.a", "version": 1, "updated_at": 5}],
        "next_cursor": "x",
        "has_more": True,
    },
    "storage.get": _STORAGE_VALUE,
    "storage.set": _STORAGE_VALUE,
    "storage.delete": {"ok": True},
    "storage.list": {"items": [{"key": "p", "size": 2, "updated_at": 5}]},
    "platform.request_action": {"accepted": True, "executed": False, "approval_required": "owner"},
}
"""A valid result (of one chunk, for streaming actions) of every back-call action."""
