"""Builders shared by the store tests."""

from __future__ import annotations

import uuid
from typing import Any

from agentrunner_host.access import ConversationKey, RunAccess, StateOwner, StorageOwner
from agentrunner_host.stores import EventEntry, RunStart, TranscriptEntry


def uid(prefix: str = "id") -> str:
    """A fresh unique id."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def event(conversation_id: str | None = "c1", *, thread_id: str | None = None, **fields: Any) -> EventEntry:
    """A platform event of *conversation_id*."""
    values: dict[str, Any] = {
        "event_id": uid("ev"),
        "event_type": "message.received",
        "source": "test",
        "conversation_id": conversation_id,
        "thread_id": thread_id,
        "summary": "hello",
    }
    values.update(fields)
    return EventEntry(**values)


def item(conversation: ConversationKey, content: str | None = "hi", **fields: Any) -> TranscriptEntry:
    """A transcript item of *conversation*."""
    values: dict[str, Any] = {
        "item_id": uid("it"),
        "conversation": conversation,
        "role": "user",
        "content": content,
    }
    values.update(fields)
    return TranscriptEntry(**values)


def access(
    conversation: ConversationKey | None,
    *,
    run_id: str = "run-1",
    readable: frozenset[str] = frozenset(),
    state_owners: dict[str, StateOwner] | None = None,
    storage_owners: dict[str, StorageOwner] | None = None,
    artifact_ids: frozenset[str] = frozenset(),
) -> RunAccess:
    """A run's access scope."""
    return RunAccess(
        run_id=run_id,
        runner_id="acme/echo:echo",
        plugin_id="acme/echo",
        binding_id="b1",
        event_id="ev-start",
        conversation=conversation,
        readable_conversations=readable,
        state_owners=state_owners or {},
        storage_owners=storage_owners or {},
        artifact_ids=artifact_ids,
    )


def run_start(run_id: str, conversation: ConversationKey | None, **fields: Any) -> RunStart:
    """A run start with a ``run.started`` host record."""
    values: dict[str, Any] = {
        "run_id": run_id,
        "runner_id": "acme/echo:echo",
        "plugin_id": "acme/echo",
        "binding_id": "b1",
        "event_id": uid("ev"),
        "conversation": conversation,
        "snapshot": {"grants": ["history.page"]},
        "snapshot_hash": "sha256:abc",
        "deadline_at": None,
        "started_at": 1_000,
        "start_events": [
            EventEntry(
                event_id=f"run.started:{run_id}",
                event_type="run.started",
                source="host",
                kind="host",
                conversation_id=None if conversation is None else conversation.conversation_id,
                thread_id=None if conversation is None else conversation.thread_id,
                run_id=run_id,
                data={"snapshot_hash": "sha256:abc"},
            )
        ],
    }
    values.update(fields)
    return RunStart(**values)
