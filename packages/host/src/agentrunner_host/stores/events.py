"""The event log: every platform event and host record, append-only, idempotent on ``event_id``.

Numbering: events with a conversation get ``seq``, a per-conversation counter starting at 1 with no gaps
and no duplicates, shared by all threads of the conversation (a thread's events are a subsequence).
Events without a conversation get ``seq = None``; they are kept (``get`` by id with no conversation) but
never paged.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from sqlalchemy import RowMapping, Table, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agentrunner_host.access import ConversationKey

from ._db import Database, now_ms
from ._sql import allocate_seq, main_line, thread_or_none
from .models import EventRow

__all__ = ["MAX_SUMMARY_CHARS", "AppendOutcome", "EventEntry", "EventKind", "EventLog", "StoredEvent"]

MAX_SUMMARY_CHARS: Final = 1000
"""Longer summaries are cut to this many characters (the last one becomes ``…``)."""

EventKind = Literal["event", "host"]

EVENTS: Final = cast(Table, EventRow.__table__)


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
    data: dict[str, Any] = field(default_factory=dict[str, Any])
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


def _summary(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_SUMMARY_CHARS:
        return text
    return text[: MAX_SUMMARY_CHARS - 1] + "…"


def _from_row(m: RowMapping) -> StoredEvent:
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


async def insert_events(
    conn: AsyncConnection, dialect: str, entries: Sequence[EventEntry], *, now: int
) -> list[AppendOutcome]:
    """Append *entries* inside the caller's transaction; one outcome per entry, in order.

    Known ids come back as duplicates. Numbers are reserved per conversation in sorted order (so two
    transactions never lock counters in opposite orders). A racing writer of the same id on PostgreSQL makes
    the insert fail with a unique violation; the transaction is then retried and sees the duplicate.
    """
    if not entries:
        return []
    ids = list({e.event_id for e in entries})
    existing: dict[str, StoredEvent] = {}
    for start in range(0, len(ids), 500):
        rows = (
            await conn.execute(select(EVENTS).where(EVENTS.c.event_id.in_(ids[start : start + 500])))
        ).mappings()
        for row in rows:
            stored = _from_row(row)
            existing[stored.event_id] = stored
    fresh: list[EventEntry] = []
    seen: set[str] = set()
    for entry in entries:
        if entry.event_id not in existing and entry.event_id not in seen:
            seen.add(entry.event_id)
            fresh.append(entry)
    per_conversation: dict[str, int] = {}
    for entry in fresh:
        if entry.conversation_id is not None:
            per_conversation[entry.conversation_id] = per_conversation.get(entry.conversation_id, 0) + 1
    next_seq: dict[str, int] = {}
    for conversation_id in sorted(per_conversation):
        next_seq[conversation_id] = await allocate_seq(
            conn,
            dialect,
            stream="event",
            conversation_id=conversation_id,
            thread_id="",
            count=per_conversation[conversation_id],
        )
    stored_new: dict[str, StoredEvent] = {}
    rows_out: list[dict[str, Any]] = []
    for entry in fresh:
        seq: int | None = None
        if entry.conversation_id is not None:
            seq = next_seq[entry.conversation_id]
            next_seq[entry.conversation_id] = seq + 1
        values = _fields(entry)
        values["summary"] = _summary(entry.summary)
        stored = StoredEvent(**values, seq=seq, created_at=now)
        stored_new[entry.event_id] = stored
        rows_out.append(_to_row(stored))
    if rows_out:
        await conn.execute(insert(EVENTS), rows_out)
    outcomes: list[AppendOutcome] = []
    emitted: set[str] = set()
    for entry in entries:
        if entry.event_id in existing:
            outcomes.append(AppendOutcome(existing[entry.event_id], True))
        else:
            # a batch naming one id twice stores it once; later copies are duplicates of the first
            outcomes.append(AppendOutcome(stored_new[entry.event_id], entry.event_id in emitted))
            emitted.add(entry.event_id)
    return outcomes


def _fields(entry: EventEntry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in EventEntry.__dataclass_fields__}


def _to_row(event: StoredEvent) -> dict[str, Any]:
    row = _fields(event)
    row["thread_id"] = main_line(event.thread_id)
    row["seq"] = event.seq
    row["created_at"] = event.created_at
    return row


class EventLog:
    """Append-only event log (``stores.events``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def append(self, entry: EventEntry) -> AppendOutcome:
        """Store *entry*, or report the earlier event with the same id as a duplicate (never raises for it)."""

        async def work(conn: AsyncConnection) -> AppendOutcome:
            return (await insert_events(conn, self._db.dialect, [entry], now=now_ms()))[0]

        return await self._db.transact(work)

    async def append_many(self, entries: Sequence[EventEntry]) -> list[AppendOutcome]:
        """Store several events (host records) in one transaction."""
        if not entries:
            return []

        async def work(conn: AsyncConnection) -> list[AppendOutcome]:
            return await insert_events(conn, self._db.dialect, entries, now=now_ms())

        return await self._db.transact(work)

    async def get(
        self, event_id: str, *, conversation: ConversationKey | None, also_readable: Collection[str] = ()
    ) -> StoredEvent | None:
        """The event, if it belongs to *conversation* (same conversation and thread) or to one of the
        *also_readable* conversation ids (any thread); ``None`` otherwise. ``conversation=None`` finds only
        events that have no conversation."""
        async with self._db.read() as conn:
            row = (await conn.execute(select(EVENTS).where(EVENTS.c.event_id == event_id))).mappings().first()
        if row is None:
            return None
        event = _from_row(row)
        if event.conversation_id is not None and event.conversation_id in also_readable:
            return event
        if conversation is None:
            return event if event.conversation_id is None else None
        if event.conversation_id == conversation.conversation_id and main_line(event.thread_id) == main_line(
            conversation.thread_id
        ):
            return event
        return None

    async def page(
        self,
        *,
        conversation: ConversationKey,
        before_seq: int | None,
        limit: int,
        event_types: Sequence[str] | None = None,
        include_host: bool = False,
    ) -> list[StoredEvent]:
        """Up to *limit* events of the conversation's thread older than *before_seq*, newest first."""
        stmt = select(EVENTS).where(
            EVENTS.c.conversation_id == conversation.conversation_id,
            EVENTS.c.thread_id == main_line(conversation.thread_id),
        )
        if before_seq is not None:
            stmt = stmt.where(EVENTS.c.seq < before_seq)
        if event_types is not None:
            stmt = stmt.where(EVENTS.c.event_type.in_(list(event_types)))
        if not include_host:
            stmt = stmt.where(EVENTS.c.kind == "event")
        stmt = stmt.order_by(EVENTS.c.seq.desc()).limit(max(0, limit))
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [_from_row(row) for row in rows]

    async def latest_seq(self, *, conversation: ConversationKey, include_host: bool = False) -> int | None:
        """The newest ``seq`` of the conversation's thread, or ``None`` when it has no events."""
        stmt = select(EVENTS.c.seq).where(
            EVENTS.c.conversation_id == conversation.conversation_id,
            EVENTS.c.thread_id == main_line(conversation.thread_id),
        )
        if not include_host:
            stmt = stmt.where(EVENTS.c.kind == "event")
        stmt = stmt.order_by(EVENTS.c.seq.desc()).limit(1)
        async with self._db.read() as conn:
            return (await conn.execute(stmt)).scalar_one_or_none()

    async def for_run(self, run_id: str, *, limit: int = 1000) -> list[StoredEvent]:
        """Events (and host records) of one run in insertion order, for audits and tests."""
        stmt = select(EVENTS).where(EVENTS.c.run_id == run_id).order_by(EVENTS.c.id).limit(limit)
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [_from_row(row) for row in rows]
