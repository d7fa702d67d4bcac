"""The facts of the event log and the transcript as Python values, and how they map to table rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from agentrunner.codec import JsonObject
from sqlalchemy import Table

from agentrunner_host.access import ConversationKey
from agentrunner_host.stores.tables import EventRow, TranscriptRow

from ._sql import main_line, thread_or_none
from .errors import InvalidValueError

__all__ = [
    "EVENTS",
    "EVENT_KEYS",
    "ITEMS",
    "MAX_SUMMARY_CHARS",
    "AppendOutcome",
    "EventEntry",
    "EventKind",
    "Role",
    "StoredEvent",
    "StoredTranscriptItem",
    "TranscriptEntry",
    "TranscriptItemType",
    "check_contents",
    "event_from_row",
    "event_row",
    "event_values",
    "item_from_row",
    "item_row",
]

MAX_SUMMARY_CHARS: Final = 1000
"""Longer event summaries are cut to this many characters (the last one becomes ``…``)."""

EventKind = Literal["event", "host"]
Role = Literal["user", "assistant", "system", "tool", "event"]
TranscriptItemType = Literal["message", "event", "tool_call", "tool_result"]

EVENTS: Final = cast(Table, EventRow.__table__)
ITEMS: Final = cast(Table, TranscriptRow.__table__)


@dataclass(frozen=True, kw_only=True)
class EventEntry:
    """An event to append."""

    event_id: str
    """Idempotency key: appending the same id again stores nothing."""
    event_type: str
    """Stable type, e.g. ``message.received``; host records use ``run.`` / ``host.``."""
    source: str
    """Producer (adapter name, ``host``)."""
    kind: EventKind = "event"
    """``event`` for real events, ``host`` for host records (never shown to runners by ``events.page``)."""
    conversation_id: str | None = None
    """Conversation."""
    thread_id: str | None = None
    """Thread (``None`` = main line)."""
    workspace_id: str | None = None
    """Workspace."""
    bot_id: str | None = None
    """Bot."""
    actor_type: str | None = None
    """Actor kind."""
    actor_id: str | None = None
    """Actor id."""
    subject_type: str | None = None
    """Subject kind."""
    subject_id: str | None = None
    """Subject id."""
    source_event_type: str | None = None
    """Platform event name."""
    run_id: str | None = None
    """Related run."""
    runner_id: str | None = None
    """Related runner."""
    summary: str | None = None
    """Short text; cut to :data:`MAX_SUMMARY_CHARS`."""
    data: JsonObject = field(default_factory=JsonObject)
    """Small JSON data (the caller caps it)."""
    event_time: int | None = None
    """When it happened, Unix epoch milliseconds."""


@dataclass(frozen=True, kw_only=True)
class StoredEvent(EventEntry):
    """An event as stored."""

    seq: int | None
    """Per-conversation sequence (``None`` without a conversation)."""
    created_at: int
    """When the host stored it, Unix epoch milliseconds."""


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    """What ``append`` did."""

    event: StoredEvent
    """The stored event (the earlier one when ``duplicate``)."""
    duplicate: bool
    """The id was already stored; nothing was written."""


@dataclass(frozen=True, kw_only=True)
class TranscriptEntry:
    """A transcript item to append."""

    item_id: str
    """Stable id; appending the same id again stores nothing."""
    conversation: ConversationKey
    """Conversation and thread."""
    role: Role
    """Who."""
    item_type: TranscriptItemType = "message"
    """Kind of item."""
    event_id: str | None = None
    """The event-log event this item projects."""
    event_type: str | None = None
    """Event type of ``event`` items."""
    run_id: str | None = None
    """Producing run."""
    content: str | None = None
    """Plain text."""
    contents: list[JsonObject] = field(default_factory=list[JsonObject])
    """Content elements as JSON (binary parts only as artifact refs, never inline base64)."""
    artifacts: list[JsonObject] = field(default_factory=list[JsonObject])
    """Artifact refs as JSON."""
    metadata: JsonObject = field(default_factory=JsonObject)
    """Extra data."""
    created_at: int | None = None
    """Unix epoch milliseconds (``None``: when stored)."""


@dataclass(frozen=True, kw_only=True)
class StoredTranscriptItem(TranscriptEntry):
    """A transcript item as stored."""

    seq: int
    """Position in its thread, from 1."""
    created_at: int = 0
    """Unix epoch milliseconds (always set by the store)."""


def _summary(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_SUMMARY_CHARS:
        return text
    return text[: MAX_SUMMARY_CHARS - 1] + "…"


EVENT_KEYS: Final = (
    "event_id",
    "event_type",
    "source",
    "kind",
    "conversation_id",
    "thread_id",
    "seq",
    "workspace_id",
    "bot_id",
    "actor_type",
    "actor_id",
    "subject_type",
    "subject_id",
    "source_event_type",
    "run_id",
    "runner_id",
    "summary",
    "data",
    "event_time",
    "created_at",
)
"""The keys of :func:`event_values`: the columns of ``events`` but its ``id``, in the table's order (the order
of the SQLite writer's compiled insert, which binds such tuples as they are)."""


def event_values(entry: EventEntry, *, seq: int | None, now: int) -> tuple[object, ...]:
    """The ``events`` row of *entry* as values of :data:`EVENT_KEYS` (summary cut, thread stored as ``""``
    for the main line)."""
    summary = entry.summary
    return (
        entry.event_id,
        entry.event_type,
        entry.source,
        entry.kind,
        entry.conversation_id,
        entry.thread_id or "",  # main_line, inline: three rows per echo request
        seq,
        entry.workspace_id,
        entry.bot_id,
        entry.actor_type,
        entry.actor_id,
        entry.subject_type,
        entry.subject_id,
        entry.source_event_type,
        entry.run_id,
        entry.runner_id,
        summary if summary is None or len(summary) <= MAX_SUMMARY_CHARS else _summary(summary),
        entry.data,
        entry.event_time,
        now,
    )


def event_row(entry: EventEntry, *, seq: int | None, now: int) -> dict[str, object]:
    """The ``events`` row of *entry* (summary cut, thread stored as ``""`` for the main line)."""
    return dict(zip(EVENT_KEYS, event_values(entry, seq=seq, now=now), strict=True))


def event_from_row(m: Mapping[Any, Any]) -> StoredEvent:
    """The stored event of an ``events`` row."""
    return StoredEvent(
        event_id=m["event_id"],
        event_type=m["event_type"],
        source=m["source"],
        kind=m["kind"],
        conversation_id=m["conversation_id"],
        thread_id=thread_or_none(m["thread_id"]),
        workspace_id=m["workspace_id"],
        bot_id=m["bot_id"],
        actor_type=m["actor_type"],
        actor_id=m["actor_id"],
        subject_type=m["subject_type"],
        subject_id=m["subject_id"],
        source_event_type=m["source_event_type"],
        run_id=m["run_id"],
        runner_id=m["runner_id"],
        summary=m["summary"],
        data=m["data"],
        event_time=m["event_time"],
        seq=m["seq"],
        created_at=m["created_at"],
    )


_INLINE_BINARY_KEYS: Final = frozenset({"data", "base64", "data_base64", "content_base64", "bytes"})


def check_contents(entry: TranscriptEntry) -> None:
    """Refuse inline binary in content elements: bytes travel as artifact refs (or http(s) URLs), never as
    base64 fields or ``data:`` URLs, so the transcript stays small and pages stay cheap."""
    for element in entry.contents:
        if _INLINE_BINARY_KEYS & element.keys():
            raise InvalidValueError(
                f"transcript item {entry.item_id}: inline binary content; store an artifact"
            )
        url = element.get("url")
        if isinstance(url, str) and url[:5].lower() == "data:":
            raise InvalidValueError(f"transcript item {entry.item_id}: data: URL; store an artifact")


def item_row(entry: TranscriptEntry, *, seq: int, now: int) -> dict[str, object]:
    """The ``transcript_items`` row of *entry* (raises :class:`InvalidValueError` for inline binary)."""
    check_contents(entry)
    return {
        "conversation_id": entry.conversation.conversation_id,
        "thread_id": main_line(entry.conversation.thread_id),
        "seq": seq,
        "item_id": entry.item_id,
        "workspace_id": entry.conversation.workspace_id,
        "role": entry.role,
        "item_type": entry.item_type,
        "event_id": entry.event_id,
        "event_type": entry.event_type,
        "run_id": entry.run_id,
        "content": entry.content,
        "contents": entry.contents,
        "artifacts": entry.artifacts,
        "metadata": entry.metadata,
        "created_at": entry.created_at if entry.created_at is not None else now,
    }


def item_from_row(m: Mapping[Any, Any]) -> StoredTranscriptItem:
    """The stored item of a ``transcript_items`` row."""
    return StoredTranscriptItem(
        item_id=m["item_id"],
        conversation=ConversationKey(
            m["conversation_id"], thread_or_none(m["thread_id"]), workspace_id=m["workspace_id"]
        ),
        role=m["role"],
        item_type=m["item_type"],
        event_id=m["event_id"],
        event_type=m["event_type"],
        run_id=m["run_id"],
        content=m["content"],
        contents=m["contents"],
        artifacts=m["artifacts"],
        metadata=m["metadata"],
        seq=m["seq"],
        created_at=m["created_at"],
    )
