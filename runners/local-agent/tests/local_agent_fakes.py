"""Fakes for the local-agent unit tests: a scripted host behind the SDK's ``APITransport``, and context makers."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunResult,
    APIError,
    BackCallRequest,
    InvalidArgumentError,
    NotFoundError,
)
from agentrunner_runner_local_agent import LocalAgentRunner

_R = TypeVar("_R")


@dataclass(slots=True)
class FakeReply:
    """One scripted model answer (or failure)."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    finish_reason: str = "stop"
    chunks: list[str] | None = None
    """How a stream splits ``text`` (default: pieces of 3 characters)."""
    error: APIError | None = None
    """Raised instead of answering (after ``fail_after_chunks`` chunks when streaming)."""
    fail_after_chunks: int = 0
    delay: float = 0.0
    usage: tuple[int, int] = (10, 5)


def call(name: str, arguments: dict[str, Any] | None = None, *, call_id: str = "c1") -> dict[str, Any]:
    """A model tool call."""
    return {"id": call_id, "name": name, "arguments": arguments or {}}


def item(n: int, role: str, content: str, **extra: Any) -> dict[str, Any]:
    """A transcript item (its cursor is assigned by the fake)."""
    return {
        "item_id": f"item-{n}",
        "cursor": "",
        "conversation_id": "conv-1",
        "role": role,
        "content": content,
        "created_at": 1_700_000_000_000 + n,
        **extra,
    }


class FakeHost:
    """A scripted host: answers every back-call the runner makes and records the requests."""

    def __init__(self) -> None:
        self.requests: list[BackCallRequest] = []
        self.replies: dict[str, list[FakeReply]] = {}
        self.transcript: list[dict[str, Any]] = []
        self.hits: dict[str, list[dict[str, Any]]] = {}
        self.rerank_order: list[int] | None = None
        self.tools: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self.tool_details: dict[str, dict[str, Any]] = {}
        self.state: dict[str, Any] = {}
        self.state_versions: dict[str, int] = {}
        self.artifacts: dict[str, bytes] = {}
        self.errors: dict[str, APIError] = {}
        self.streams_closed = 0

    # -- scripting ----------------------------------------------------------------------------------------

    def script(self, model_id: str, *replies: FakeReply | str) -> None:
        """Queue answers of *model_id*."""
        queue = self.replies.setdefault(model_id, [])
        queue.extend(FakeReply(text=r) if isinstance(r, str) else r for r in replies)

    def history(self, *items: dict[str, Any]) -> None:
        """Append transcript items (oldest first)."""
        self.transcript.extend(items)

    @property
    def latest_cursor(self) -> str:
        """The cursor just after the newest item."""
        return f"c{len(self.transcript)}"

    # -- what the runner sent ----------------------------------------------------------------------------

    def actions(self) -> list[str]:
        """Action of every request, in order."""
        return [r.action for r in self.requests]

    def of(self, action: str) -> list[dict[str, Any]]:
        """Params of every request of *action*."""
        return [r.params for r in self.requests if r.action == action]

    def model_calls(self) -> list[dict[str, Any]]:
        """Params of every ``models.invoke`` / ``models.stream`` (messages without empty ``tool_calls``)."""
        out: list[dict[str, Any]] = []
        for r in self.requests:
            if r.action in ("models.invoke", "models.stream"):
                messages = [{k: v for k, v in m.items() if v != []} for m in r.params["messages"]]
                out.append({**r.params, "messages": messages})
        return out

    # -- APITransport ------------------------------------------------------------------------------------

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> dict[str, Any]:
        self.requests.append(request)
        p = request.params
        if request.action in self.errors:
            raise self.errors[request.action]
        match request.action:
            case "models.invoke":
                reply = await self._next(p["model_id"])
                if reply.error is not None:
                    raise reply.error
                return {
                    "model_id": p["model_id"],
                    "message": {"role": "assistant", "content": reply.text, "tool_calls": reply.tool_calls},
                    "finish_reason": "tool_calls" if reply.tool_calls else reply.finish_reason,
                    "usage": _usage(reply),
                }
            case "models.rerank":
                order = self.rerank_order or list(range(len(p["documents"])))
                return {
                    "results": [
                        {"index": i, "score": 1.0 - n / 10, "document": p["documents"][i]}
                        for n, i in enumerate(order[: p.get("top_k") or len(order)])
                    ]
                }
            case "knowledge.retrieve":
                return {"hits": self.hits.get(p["kb_id"], [])[: p["top_k"]]}
            case "tools.get_detail":
                return self.tool_details[p["tool_name"]]
            case "tools.call":
                return self.tools[p["tool_name"]](p.get("parameters", {}))
            case "history.page":
                return self._page(p)
            case "state.get":
                found = p["key"] in self.state
                return {
                    "scope": p["scope"],
                    "key": p["key"],
                    "value": self.state.get(p["key"]),
                    "exists": found,
                    "version": self.state_versions.get(p["key"], 0),
                }
            case "state.set":
                current = self.state_versions.get(p["key"], 0)
                expected = p.get("expected_version")
                if expected is not None and expected != current:
                    raise InvalidArgumentError("version conflict", details={"reason": "version_conflict"})
                self.state[p["key"]] = p["value"]
                self.state_versions[p["key"]] = current + 1
                return {
                    "scope": p["scope"],
                    "key": p["key"],
                    "value": p["value"],
                    "exists": True,
                    "version": current + 1,
                }
            case "artifacts.read_range":
                data = self.artifacts[p["artifact_id"]]
                offset, length = p.get("offset", 0), p.get("length", 65536)
                piece = data[offset : offset + length]
                return {
                    "artifact_id": p["artifact_id"],
                    "offset": offset,
                    "length": len(piece),
                    "size": len(data),
                    "data_base64": base64.b64encode(piece).decode(),
                    "has_more": offset + len(piece) < len(data),
                }
            case _:
                raise NotFoundError(f"no fake for {request.action}")

    async def stream(
        self, request: BackCallRequest, *, timeout: float | None
    ) -> AsyncIterator[dict[str, Any]]:
        self.requests.append(request)
        if request.action in self.errors:
            raise self.errors[request.action]
        reply = await self._next(request.params["model_id"])
        chunks = (
            reply.chunks
            if reply.chunks is not None
            else [reply.text[i : i + 3] for i in range(0, len(reply.text), 3)]
        )
        try:
            for n, piece in enumerate(chunks):
                if reply.error is not None and n >= reply.fail_after_chunks:
                    raise reply.error
                yield {"delta": piece}
            if reply.error is not None:
                raise reply.error
            yield {
                "tool_calls": reply.tool_calls,
                "finish_reason": "tool_calls" if reply.tool_calls else reply.finish_reason,
                "usage": _usage(reply),
            }
        finally:
            self.streams_closed += 1

    async def _next(self, model_id: str) -> FakeReply:
        queue = self.replies.get(model_id)
        if not queue:
            raise AssertionError(f"the test scripted no more answers of {model_id}")
        reply = queue.pop(0)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        return reply

    def _page(self, p: dict[str, Any]) -> dict[str, Any]:
        items = [{**it, "cursor": f"i{n}"} for n, it in enumerate(self.transcript)]
        before = p.get("before_cursor")
        end = int(before[1:]) if isinstance(before, str) and before.startswith("c") else len(items)
        start = max(0, end - p.get("limit", 50))
        return {
            "items": items[start:end],
            "next_cursor": f"c{start}" if start > 0 else None,
            "has_more": start > 0,
        }


def _usage(reply: FakeReply) -> dict[str, int]:
    i, o = reply.usage
    return {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}


def model(model_id: str, *, role: str | None = None, **extra: Any) -> dict[str, Any]:
    """A granted chat model."""
    return {"model_id": model_id, "role": role, "operations": ["invoke", "stream"], **extra}


def make_ctx(
    text: str | None = "hello",
    *,
    config: dict[str, Any] | None = None,
    models: Sequence[dict[str, Any]] = (),
    tools: Sequence[dict[str, Any]] = (),
    knowledge_bases: Sequence[str] = (),
    contents: Sequence[dict[str, Any]] = (),
    attachments: Sequence[dict[str, Any]] = (),
    streaming: bool = False,
    latest_cursor: str | None = None,
    history: bool = True,
    deadline_at: float | None = None,
    adapter_extra: dict[str, Any] | None = None,
    event_type: str = "message.received",
    run_id: str = "run-1",
) -> AgentRunContext:
    """A run context with the given grants."""
    return AgentRunContext.model_validate(
        {
            "run_id": run_id,
            "trigger": {"type": event_type, "source": "api"},
            "event": {"event_id": f"ev-{run_id}", "event_type": event_type, "source": "test"},
            "conversation": {"conversation_id": "conv-1"},
            "input": {"text": text, "contents": list(contents), "attachments": list(attachments)},
            "delivery": {"surface": "test", "supports_streaming": streaming},
            "resources": {
                "models": list(models),
                "tools": [{"operations": ["detail", "call"], **t} for t in tools],
                "knowledge_bases": [{"kb_id": k, "operations": ["retrieve"]} for k in knowledge_bases],
            },
            "context": {
                "conversation_id": "conv-1",
                "latest_cursor": latest_cursor,
                "has_history_before": latest_cursor is not None,
                "available_apis": {
                    "history_page": history,
                    "state": True,
                    "artifact_metadata": True,
                    "artifact_read": True,
                },
            },
            "runtime": {"trace_id": run_id, "deadline_at": deadline_at},
            "config": {"model": {"primary": "m1", "fallbacks": []}, **(config or {})},
            "adapter": {"extra": adapter_extra or {}},
        }
    )


async def drive(
    host: FakeHost, ctx: AgentRunContext, runner: LocalAgentRunner | None = None
) -> list[AgentRunResult]:
    """Every result of one run of the local agent against *host*."""
    api = AgentRunAPI(host, run_id=ctx.run_id, deadline_at=ctx.runtime.deadline_at)
    return [r async for r in (runner or LocalAgentRunner()).run(ctx, api)]


def only(results: Sequence[AgentRunResult], kind: type[_R]) -> list[_R]:
    """The results of one class."""
    return [r for r in results if isinstance(r, kind)]
