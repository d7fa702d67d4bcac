"""Shared test helpers: a small, fast search profile and a hand-written run context."""

from __future__ import annotations

from typing import Any

from agentrunner import (
    AgentEventContext,
    AgentInput,
    AgentResources,
    AgentRunContext,
    AgentRuntimeContext,
    AgentTrigger,
    ArtifactRef,
    ContentElement,
    ContextAccess,
    ContextAPICapabilities,
    ConversationContext,
    DeliveryContext,
)
from agentrunner_conformance import Profile

FAST = Profile(
    name="test",
    max_examples=10,
    stateful_steps=6,
    stateful_examples=5,
    # The graces are how long a run may go on after its cancel or deadline. The kit judges them by the clock, so
    # they are generous here: on a loaded machine a correct runner, above all one in a child process, can be
    # scheduled late by far more than a tenth of a second (0.02 s / 0.1 s failed the echo runner and correct
    # gallery runners under load). The broken gallery runners ignore cancels and deadlines for good (5 s, 30 s,
    # forever), so they fail with any grace, and a failed grace is shortened for the rest of the check.
    cancel_grace=2.0,
    deadline_grace=2.0,
)
"""Enough examples to catch every gallery runner, small enough to keep the suite fast."""


def make_context(
    text: str | None = "hello",
    *,
    run_id: str = "run-1",
    event_type: str = "message.received",
    streaming: bool = True,
    state: bool = True,
    conversation_id: str | None = "conv-1",
    deadline_at: float | None = None,
    contents: list[ContentElement] | None = None,
    attachments: list[ArtifactRef] | None = None,
    resources: AgentResources | None = None,
    config: dict[str, Any] | None = None,
) -> AgentRunContext:
    """A small, complete run context for hand-written tests."""
    return AgentRunContext(
        run_id=run_id,
        trigger=AgentTrigger(type=event_type, source="platform"),
        event=AgentEventContext(event_id=f"evt-{run_id}", event_type=event_type, source="telegram"),
        conversation=ConversationContext(conversation_id=conversation_id) if conversation_id else None,
        input=AgentInput(text=text, contents=contents or [], attachments=attachments or []),
        delivery=DeliveryContext(surface="http.stream", supports_streaming=streaming),
        resources=resources or AgentResources(),
        context=ContextAccess(
            conversation_id=conversation_id,
            available_apis=ContextAPICapabilities(state=state, event_get=True),
        ),
        runtime=AgentRuntimeContext(trace_id="trace-1", deadline_at=deadline_at),
        config=config or {},
    )
