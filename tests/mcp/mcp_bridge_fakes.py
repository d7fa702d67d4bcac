"""Test doubles of the MCP bridge tests: a fake back-call transport and run contexts with chosen grants."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from agentrunner import AgentRunAPI
from agentrunner.actions import BackCallRequest
from agentrunner.context import AgentRunContext
from agentrunner.errors import APIError

Handler = Callable[[BackCallRequest], dict[str, Any]]


class FakeTransport:
    """An ``APITransport`` that records every request and answers from per-action handlers.

    A handler may raise an :class:`APIError` to play the host's dispatcher refusing the call.
    """

    def __init__(self, handlers: dict[str, Handler] | None = None) -> None:
        self.requests: list[BackCallRequest] = []
        self.handlers: dict[str, Handler] = dict(handlers or {})

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> dict[str, Any]:
        self.requests.append(request)
        handler = self.handlers.get(request.action)
        if handler is None:
            raise APIError(f"no fake answer for {request.action}")
        return handler(request)

    def stream(self, request: BackCallRequest, *, timeout: float | None) -> AsyncIterator[dict[str, Any]]:
        raise NotImplementedError("the bridge makes no streaming calls")


def make_context(
    run_id: str,
    *,
    history: bool = False,
    state: bool = False,
    tools: list[dict[str, Any]] | None = None,
    knowledge_bases: list[dict[str, Any]] | None = None,
    text: str = "hello",
) -> AgentRunContext:
    """A run context whose snapshot grants exactly what the keywords say."""
    return AgentRunContext.model_validate(
        {
            "run_id": run_id,
            "trigger": {"type": "message.received", "source": "api"},
            "event": {"event_id": f"evt-{run_id}", "event_type": "message.received", "source": "test"},
            "conversation": {"conversation_id": f"conv-{run_id}"},
            "input": {"text": text},
            "delivery": {"surface": "mcp"},
            "resources": {"tools": tools or [], "knowledge_bases": knowledge_bases or []},
            "context": {
                "conversation_id": f"conv-{run_id}",
                "available_apis": {"history_page": history, "history_search": history, "state": state},
            },
            "runtime": {"trace_id": f"trace-{run_id}"},
        }
    )


def make_api(ctx: AgentRunContext, transport: FakeTransport) -> AgentRunAPI:
    """The back-call client of *ctx*'s run over *transport*."""
    return AgentRunAPI(transport, run_id=ctx.run_id)
