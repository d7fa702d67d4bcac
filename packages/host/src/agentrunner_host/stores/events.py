"""The event log: every platform event and host record, append-only, idempotent on ``event_id``.

Numbering: events with a conversation get ``seq``, a per-conversation counter starting at 1 with no gaps
and no duplicates, shared by all threads of the conversation (a thread's events are a subsequence).
Events without a conversation get ``seq = None``; they are kept (``get`` by id with no conversation) but
never paged.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from agentrunner_host.access import ConversationKey
from agentrunner_host.stores._connections import Database, now_ms

from ._facts import write_facts
from ._sql import main_line
from .records import (
    EVENTS,
    MAX_SUMMARY_CHARS,
    AppendOutcome,
    EventEntry,
    EventKind,
    StoredEvent,
    event_from_row,
)

__all__ = ["MAX_SUMMARY_CHARS", "AppendOutcome", "EventEntry", "EventKind", "EventLog", "StoredEvent"]


class EventLog:
    """Append-only event log (``stores.events``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def append(self, entry: EventEntry) -> AppendOutcome:
        """Store *entry*, or report the earlier event with the same id as a duplicate (never raises for it)."""

        async def work(conn: AsyncConnection, careful: bool) -> AppendOutcome:
            written = await write_facts(
                conn, self._db.dialect, events=[entry], now=now_ms(), careful=careful, returning=True
            )
            return written.events[0]

        return await self._db.transact_optimistic(work)

    async def append_many(self, entries: Sequence[EventEntry]) -> list[AppendOutcome]:
        """Store several events (host records) in one transaction."""
        if not entries:
            return []

        async def work(conn: AsyncConnection, careful: bool) -> list[AppendOutcome]:
            written = await write_facts(
                conn, self._db.dialect, events=entries, now=now_ms(), careful=careful, returning=True
            )
            return written.events

        return await self._db.transact_optimistic(work)

    async def store_many(self, entries: Sequence[EventEntry]) -> None:
        """Store several events (host records) in one transaction without reading them back: on SQLite the
        whole transaction is one hop to the writer thread (:meth:`append_many` reads each row back, a
        statement per row, and runs every statement through aiosqlite)."""
        if not entries:
            return

        async def work(conn: AsyncConnection, careful: bool) -> None:
            await write_facts(
                conn, self._db.dialect, events=entries, now=now_ms(), careful=careful, returning=False
            )

        await self._db.transact_batch(work)

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
        event = event_from_row(row)
        if event.conversation_id is not None and event.conversation_id in also_readable:
            return event
        if conversation is None:
            return event if event.conversation_id is None else None
        if event.conversation_id == conversation.conversation_id and main_line(event.thread_id) == main_line(
            conversation.thread_id
        ):
            return event
        return None

    async def lookup(self, event_id: str) -> StoredEvent | None:
        """The event whatever its conversation, or ``None``: the operator's view (the console's run page).
        Runners read events through :meth:`get`, which is scoped to their conversation."""
        async with self._db.read() as conn:
            row = (await conn.execute(select(EVENTS).where(EVENTS.c.event_id == event_id))).mappings().first()
        return None if row is None else event_from_row(row)

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
        return [event_from_row(row) for row in rows]

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
        return [event_from_row(row) for row in rows]
