"""SDK suite: the cost of the typed protocol models next to the raw orjson floor of the same bytes.

* a realistic ~5 KB ``AgentRunContext``: ``model_validate_json`` vs ``orjson.loads``, ``model_dump_json`` vs
  ``orjson.dumps`` (perf-floors row A);
* a 52-result stream (50 ``message.delta`` + ``message.completed`` + ``run.completed``) built with
  ``ResultEmitter`` and dumped, vs ``orjson.dumps`` of 52 prebuilt dicts (rows B and D), and the host side:
  parsing the 52 encoded results through the discriminated union vs ``orjson.loads``.
"""

from __future__ import annotations

from typing import Any

import orjson
from agentrunner import AgentRunContext, AgentRunResultAdapter, ResultEmitter
from agentrunner.results import AgentRunResultBase

from ._framework import Goal, Measure, SuiteContext

__all__ = ["DELTAS", "build_context", "emit_stream", "measures"]

DELTAS = 50
"""Deltas per stream; with the completed message and the terminal result that makes 52 results."""

_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to search for."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
    },
    "required": ["query"],
}

_PROMPT = (
    "You are the support assistant of an online bookshop. Answer briefly and politely, in the user's "
    "language. Look up orders with the order tool before answering questions about them, never guess a "
    "delivery date, and hand over to a human when the user asks for one or is upset. "
) * 2


def build_context() -> dict[str, Any]:
    """A context of about 5 KB as a host would send it for a group chat message with an image."""
    artifact = {
        "artifact_id": "art_7f3a9c",
        "artifact_type": "image",
        "mime_type": "image/jpeg",
        "name": "receipt.jpg",
        "size": 183_204,
        "digest": "sha256:" + "9f" * 32,
        "summary": "photo of a paper receipt",
        "expires_at": 1_767_003_600_000,
    }
    return {
        "run_id": "run_01JD6V3Q4Z8X2M5N7P9R",
        "trigger": {"type": "message.received", "source": "host_adapter", "timestamp": 1_767_000_000_000},
        "event": {
            "event_id": "evt_01JD6V3Q4Z8X2M5N7P9S",
            "event_type": "message.received",
            "event_time": 1_767_000_000_000,
            "source": "telegram",
            "source_event_type": "message",
            "raw_ref": {"ref_id": "raw_5531", "source": "telegram", "size": 1412},
            "data": {"message_id": "48213", "reply_to": None, "mentions": ["@shopbot"]},
        },
        "conversation": {
            "conversation_id": "conv_tg_-100200300",
            "thread_id": "thr_main",
            "launcher_type": "group",
            "launcher_id": "-100200300",
            "bot_id": "bot_shop",
            "workspace_id": "ws_books",
        },
        "actor": {
            "actor_type": "user",
            "actor_id": "tg_55120",
            "actor_name": "Ada L.",
            "metadata": {"language_code": "en", "is_admin": False},
        },
        "subject": {"subject_type": "message", "subject_id": "48213", "data": {"has_media": True}},
        "input": {
            "text": "Where is my order 1182? The receipt is attached. It was due last Tuesday.",
            "contents": [
                {
                    "type": "text",
                    "text": "Where is my order 1182? The receipt is attached. It was due last Tuesday.",
                },
                {"type": "image", "artifact": artifact, "alt": "receipt"},
            ],
            "attachments": [artifact],
        },
        "delivery": {
            "surface": "platform",
            "reply_target": {"chat_id": "-100200300", "reply_to_message_id": "48213"},
            "supports_streaming": True,
            "supports_edit": True,
            "supports_reaction": True,
            "max_message_size": 4096,
            "platform_capabilities": {"markdown": True, "buttons": True},
        },
        "resources": {
            "models": [
                {
                    "model_id": "mdl_primary",
                    "model_type": "llm",
                    "role": "primary",
                    "provider": "openai",
                    "name": "gpt-4o-mini",
                    "capabilities": ["vision", "tool_calling", "streaming"],
                    "context_window": 128_000,
                    "max_output_tokens": 16_384,
                    "operations": ["invoke", "stream"],
                },
                {
                    "model_id": "mdl_fallback",
                    "model_type": "llm",
                    "role": "fallback",
                    "provider": "deepseek",
                    "name": "deepseek-chat",
                    "capabilities": ["tool_calling", "streaming"],
                    "context_window": 64_000,
                    "operations": ["invoke", "stream"],
                },
            ],
            "tools": [
                {
                    "tool_name": name,
                    "description": description,
                    "parameters": _TOOL_SCHEMA,
                    "tool_type": "mcp",
                    "operations": ["detail", "call"],
                }
                for name, description in [
                    ("order_lookup", "Find an order by number and return its status and carrier."),
                    ("handover", "Hand the conversation over to a human agent."),
                ]
            ],
            "knowledge_bases": [
                {
                    "kb_id": "kb_faq",
                    "name": "Shop FAQ",
                    "description": "Shipping and returns",
                    "operations": ["retrieve"],
                }
            ],
            "storage": {"plugin_storage": True, "binding_storage": True},
        },
        "context": {
            "conversation_id": "conv_tg_-100200300",
            "thread_id": "thr_main",
            "latest_cursor": "tc_000000000000004812",
            "event_seq": 9731,
            "transcript_seq": 4812,
            "has_history_before": True,
            "inline_policy": {
                "mode": "current_event",
                "delivered_count": 0,
                "reason": "self_managed_context",
            },
            "available_apis": {
                "history_page": True,
                "history_search": True,
                "event_get": True,
                "event_page": True,
                "artifact_metadata": True,
                "artifact_read": True,
                "state": True,
                "storage": True,
            },
        },
        "state": {
            "conversation": {"external.session_id": "sess_2b81", "summary.version": 14},
            "actor": {"preferred_language": "en"},
            "runner": {"prompt.cache_key": "pk_91ab"},
        },
        "runtime": {
            "host": "agentrunner",
            "protocol_version": "1",
            "trace_id": "trace_4bf92f3577b34da6a3ce929d0e0e4736",
            "deadline_at": 1_767_000_120.0,
            "locale": "en_US",
            "timezone": "Europe/London",
            "static_refs": {
                name: {"ref": name, "version": "3", "hash": "sha256:" + digit * 64}
                for name, digit in [("system_policy", "a"), ("tool_schemas", "b"), ("resource_manifest", "c")]
            },
            "metadata": {"session_key": "ws_books:bot_shop:conv_tg_-100200300:thr_main"},
        },
        "config": {
            "prompt": _PROMPT,
            "model": "mdl_primary",
            "fallback_models": ["mdl_fallback"],
            "max_tool_rounds": 6,
            "temperature": 0.3,
        },
        "adapter": {"extra": {"params": {"source": "telegram-webhook"}}},
        "metadata": {"binding_id": "bind_42", "agent_id": "agent_support"},
    }


def emit_stream(run_id: str) -> list[AgentRunResultBase]:
    """The results of one streamed reply: ``DELTAS`` deltas, the completed message and ``run.completed``."""
    out = ResultEmitter(run_id)
    results: list[AgentRunResultBase] = [out.delta(f"token{index} ") for index in range(DELTAS)]
    text = "".join(f"token{index} " for index in range(DELTAS))
    results.append(out.message(text))
    results.append(out.complete(usage={"input_tokens": 1840, "output_tokens": DELTAS, "total_tokens": 1890}))
    return results


def measures(ctx: SuiteContext) -> list[Measure]:
    """The SDK suite's rows."""
    context_dict = build_context()
    context_bytes = orjson.dumps(context_dict)
    context = AgentRunContext.model_validate_json(context_bytes)
    # The floor dumps exactly the data the model holds (defaults included), so both write the same JSON.
    context_data = orjson.loads(context.model_dump_json())

    stream = emit_stream(context.run_id)
    stream_dicts = [result.model_dump(mode="json") for result in stream]
    stream_bytes = [result.model_dump_json().encode() for result in stream]
    per_result = len(stream)

    def build_and_dump_stream() -> None:
        for result in emit_stream("run-bench"):
            result.model_dump_json()

    def dump_prebuilt_dicts() -> None:
        for item in stream_dicts:
            orjson.dumps(item)

    def parse_stream() -> None:
        for encoded in stream_bytes:
            AgentRunResultAdapter.validate_json(encoded)

    def load_stream() -> None:
        for encoded in stream_bytes:
            orjson.loads(encoded)

    return [
        Measure(
            f"context model_validate_json ({len(context_bytes) / 1000:.1f} KB)",
            lambda: AgentRunContext.model_validate_json(context_bytes),
            floor=lambda: orjson.loads(context_bytes),
            floor_name="`orjson.loads` of the same bytes",
            goal=Goal.ratio(5, source="perf-floors row A: 3.4-3.5x orjson.loads for a 4.9 KB context"),
        ),
        Measure(
            "context model_dump_json",
            context.model_dump_json,
            floor=lambda: orjson.dumps(context_data),
            floor_name="`orjson.dumps` of the same data as plain dicts",
            goal=Goal.ratio(12, source="perf-floors row A: 8.5x orjson.dumps"),
        ),
        Measure(
            f"{per_result}-result stream: ResultEmitter build + model_dump_json",
            build_and_dump_stream,
            floor=dump_prebuilt_dicts,
            floor_name=f"`orjson.dumps` of {per_result} prebuilt result dicts",
            goal=Goal.value(6, source="perf-floors rows B/D: about 6 µs per result is the typed floor"),
            unit="µs/result",
            per=per_result,
        ),
        Measure(
            f"{per_result}-result stream: host parse through the union",
            parse_stream,
            floor=load_stream,
            floor_name=f"`orjson.loads` of the same {per_result} encoded results",
            goal=Goal.ratio(5, source="perf-floors row B: 3.4x orjson.loads for one delta"),
            unit="µs/result",
            per=per_result,
        ),
    ]
