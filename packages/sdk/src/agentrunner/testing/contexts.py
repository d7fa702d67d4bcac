"""``make_context``: a valid :class:`~agentrunner.AgentRunContext` in one call, for a runner's unit tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final

from pydantic import JsonValue

from agentrunner.context import (
    ActorContext,
    AgentEventContext,
    AgentInput,
    AgentRunContext,
    AgentRunState,
    AgentRuntimeContext,
    AgentTrigger,
    ContextAccess,
    ContextAPICapabilities,
    ConversationContext,
    DeliveryContext,
)
from agentrunner.resources import AgentResources
from agentrunner.results import StateScope

__all__ = ["DEFAULT_STATE_SCOPES", "DEFAULT_STORAGE_AREAS", "make_context"]

DEFAULT_STATE_SCOPES: Final[tuple[StateScope, ...]] = ("conversation", "actor", "runner")
"""The state scopes a host grants when a binding's state policy says nothing (the host's default)."""

DEFAULT_STORAGE_AREAS: Final[tuple[str, ...]] = ("plugin", "binding")
"""The storage areas a host's default resource policy grants (the manifest must also ask for them)."""


def make_context(
    text: str | None = "hello",
    *,
    run_id: str | None = None,
    event_type: str = "message.received",
    conversation_id: str | None = "conv-1",
    thread_id: str | None = None,
    actor_id: str | None = "user-1",
    streaming: bool = False,
    config: Mapping[str, Any] | None = None,
    state_scopes: Iterable[StateScope] = DEFAULT_STATE_SCOPES,
    state: Mapping[StateScope, Mapping[str, JsonValue]] | None = None,
    resources: AgentResources | None = None,
    history: bool = False,
    deadline_in: float | None = 60.0,
    locale: str | None = None,
) -> AgentRunContext:
    """A context as a host would send it for one *event_type* event carrying *text*.

    Every required field is filled (``run_id`` and ids are fresh); ``available_apis`` says what the run may
    call: state when *state_scopes* is not empty (the scopes themselves are in ``available_apis.state_scopes``
    — give :class:`FakeHost` the same ones), the history and event pulls with *history*, storage when
    *resources* grants an area. *state* is the inlined snapshot (``ctx.state``), *deadline_in* the seconds
    until ``runtime.deadline_at`` (``None``: no deadline).
    """
    run = run_id or f"run-{uuid.uuid4().hex[:12]}"
    scopes = _usable_scopes(state_scopes, conversation_id=conversation_id, actor_id=actor_id)
    granted = resources or AgentResources()
    storage = granted.storage
    snapshot = state or {}
    now_ms = time.time_ns() // 1_000_000
    return AgentRunContext(
        run_id=run,
        trigger=AgentTrigger(type=event_type, source="api", timestamp=now_ms),
        event=AgentEventContext(
            event_id=f"evt-{uuid.uuid4().hex[:12]}",
            event_type=event_type,
            event_time=now_ms,
            source="api",
        ),
        conversation=None
        if conversation_id is None
        else ConversationContext(conversation_id=conversation_id, thread_id=thread_id),
        actor=None if actor_id is None else ActorContext(actor_type="user", actor_id=actor_id),
        input=AgentInput(text=text),
        delivery=DeliveryContext(surface="test", supports_streaming=streaming),
        resources=granted,
        context=ContextAccess(
            conversation_id=conversation_id,
            thread_id=thread_id,
            available_apis=ContextAPICapabilities(
                history_page=history and conversation_id is not None,
                history_search=history and conversation_id is not None,
                event_get=history and conversation_id is not None,
                event_page=history and conversation_id is not None,
                artifact_metadata=True,
                artifact_read=True,
                state=bool(scopes),
                state_scopes=list(scopes),
                storage=storage.plugin_storage or storage.workspace_storage or storage.binding_storage,
            ),
        ),
        state=AgentRunState(
            conversation=dict(snapshot.get("conversation", {})) if "conversation" in scopes else {},
            actor=dict(snapshot.get("actor", {})) if "actor" in scopes else {},
            subject=dict(snapshot.get("subject", {})) if "subject" in scopes else {},
            runner=dict(snapshot.get("runner", {})) if "runner" in scopes else {},
        ),
        runtime=AgentRuntimeContext(
            trace_id=f"trace-{uuid.uuid4().hex[:12]}",
            deadline_at=None if deadline_in is None else time.time() + deadline_in,
            locale=locale,
        ),
        config=dict(config or {}),
    )


def _usable_scopes(
    scopes: Iterable[StateScope], *, conversation_id: str | None, actor_id: str | None
) -> tuple[StateScope, ...]:
    # As on the host: a scope is granted only when the event has that identity (no subject in these events).
    missing = {
        "conversation": conversation_id is None,
        "actor": actor_id is None,
        "subject": True,
    }
    return tuple(dict.fromkeys(s for s in scopes if not missing.get(s, False)))
