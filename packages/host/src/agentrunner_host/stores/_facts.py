"""Writing event-log events and transcript items inside a caller's transaction, with few statements.

Both streams are numbered without gaps (events per conversation, transcript items per thread):

* on SQLite every write runs under the single-writer lock, so the number is taken inside the ``INSERT``
  itself (``MAX(seq) + 1`` over the clustered key): no extra statement, no race;
* on PostgreSQL the numbers come from ``sequence_counters``: one multi-row ``INSERT ... ON CONFLICT DO
  UPDATE ... RETURNING`` per transaction reserves every range it needs and row-locks the counters until
  commit, in sorted order so two transactions never wait on each other in a cycle.

Ingestion is idempotent on ``event_id`` / ``item_id``. The first attempt is optimistic (plain ``INSERT``:
ids are almost always new); when a unique constraint fires, the transaction is rolled back and retried
*carefully*: known ids are looked up first and reported as duplicates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Final, TypeVar, cast

from sqlalchemy import ColumnElement, Insert, ScalarSelect, Table, bindparam, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agentrunner_host.stores.tables import SequenceCounterRow

from ._compiled import Positional, hot
from ._connections import _SyncExecutor  # pyright: ignore[reportPrivateUsage]
from ._sql import insert_for, main_line
from .records import (
    EVENT_KEYS,
    EVENTS,
    ITEMS,
    AppendOutcome,
    EventEntry,
    StoredEvent,
    StoredTranscriptItem,
    TranscriptEntry,
    event_from_row,
    event_row,
    event_values,
    item_from_row,
    item_row,
)

__all__ = ["Written", "bindable_rows", "write_facts"]

_COUNTERS: Final = cast(Table, SequenceCounterRow.__table__)
_E = TypeVar("_E")
_CHUNK: Final = 500
# C getters, not a lambda made per call and a Python frame per entry
_EVENT_ID: Final[Callable[[EventEntry], str]] = attrgetter("event_id")
_ITEM_ID: Final[Callable[[TranscriptEntry], str]] = attrgetter("item_id")


@dataclass(slots=True)
class Written:
    """What :func:`write_facts` stored (filled only when asked to return it)."""

    events: list[AppendOutcome] = field(default_factory=list[AppendOutcome])
    """One outcome per event entry, in order."""
    items: list[StoredTranscriptItem] = field(default_factory=list[StoredTranscriptItem])
    """One stored item per transcript entry, in order (the earlier one for known ids)."""


def bindable_rows(
    conn: AsyncConnection, keys: tuple[str, ...], rows: list[tuple[object, ...]]
) -> Sequence[Mapping[str, object]]:
    """The parameters of a hot insert of *rows* (values of *keys*) for *conn*: the tuples themselves on the
    SQLite batch's executor, whose compiled path binds them as they are (see :class:`Positional`); dicts
    for SQLAlchemy's connections."""
    if isinstance(conn, _SyncExecutor):
        return Positional(keys, rows)
    return Positional(keys, rows).dicts()


def _next_seq_sqlite(table: Table, *conditions: ColumnElement[bool]) -> ScalarSelect[int]:
    return select(func.coalesce(func.max(table.c.seq), 0) + 1).where(*conditions).scalar_subquery()


_SQLITE_EVENT_INSERT: Final[Insert] = hot(
    insert(EVENTS).values(
        seq=_next_seq_sqlite(EVENTS, EVENTS.c.conversation_id == bindparam("seq_conversation_id"))
    )
)
_SQLITE_ITEM_INSERT: Final[Insert] = hot(
    insert(ITEMS).values(
        seq=_next_seq_sqlite(
            ITEMS,
            ITEMS.c.conversation_id == bindparam("seq_conversation_id"),
            ITEMS.c.thread_id == bindparam("seq_thread_id"),
        )
    )
)
_INSERT_EVENTS: Final[Insert] = hot(insert(EVENTS))
_INSERT_ITEMS: Final[Insert] = hot(insert(ITEMS))
# Built once and compiled once per list length on SQLite's compiled path: a run start looks its trigger up
# on every request, and a fresh select with literal ids went through SQLAlchemy's whole execute path.
_KNOWN_EVENTS: Final = hot(select(EVENTS).where(EVENTS.c.event_id.in_(bindparam("ids", expanding=True))))
_KNOWN_ITEMS: Final = hot(select(ITEMS).where(ITEMS.c.item_id.in_(bindparam("ids", expanding=True))))


async def _known_events(conn: AsyncConnection, ids: list[str]) -> dict[str, StoredEvent]:
    known: dict[str, StoredEvent] = {}
    for start in range(0, len(ids), _CHUNK):
        rows = await conn.execute(_KNOWN_EVENTS, {"ids": ids[start : start + _CHUNK]})
        for row in rows.mappings():
            event = event_from_row(row)
            known[event.event_id] = event
    return known


async def _known_items(conn: AsyncConnection, ids: list[str]) -> dict[str, StoredTranscriptItem]:
    known: dict[str, StoredTranscriptItem] = {}
    for start in range(0, len(ids), _CHUNK):
        rows = await conn.execute(_KNOWN_ITEMS, {"ids": ids[start : start + _CHUNK]})
        for row in rows.mappings():
            item = item_from_row(row)
            known[item.item_id] = item
    return known


def _first_copies(entries: Sequence[_E], key: Callable[[_E], str], known: Mapping[str, object]) -> list[_E]:
    fresh: list[_E] = []
    seen: set[str] = set()
    for entry in entries:
        ident = key(entry)
        if ident not in known and ident not in seen:
            seen.add(ident)
            fresh.append(entry)
    return fresh


async def _reserve_pg(
    conn: AsyncConnection, events: Sequence[EventEntry], items: Sequence[TranscriptEntry]
) -> dict[tuple[str, str, str], int]:
    counts: dict[tuple[str, str, str], int] = {}
    for event in events:
        if event.conversation_id is not None:
            line = ("event", event.conversation_id, "")
            counts[line] = counts.get(line, 0) + 1
    for item in items:
        line = ("transcript", item.conversation.conversation_id, main_line(item.conversation.thread_id))
        counts[line] = counts.get(line, 0) + 1
    if not counts:
        return {}
    lines = sorted(counts)
    stmt = (
        insert_for("postgresql", _COUNTERS)
        .values(
            [
                {"stream": s, "conversation_id": c, "thread_id": t, "last_seq": counts[(s, c, t)]}
                for s, c, t in lines
            ]
        )
        .on_conflict_do_update(
            index_elements=["stream", "conversation_id", "thread_id"],
            set_={"last_seq": _COUNTERS.c.last_seq + insert_for("postgresql", _COUNTERS).excluded.last_seq},
        )
        .returning(
            _COUNTERS.c.stream, _COUNTERS.c.conversation_id, _COUNTERS.c.thread_id, _COUNTERS.c.last_seq
        )
    )
    first: dict[tuple[str, str, str], int] = {}
    for row in (await conn.execute(stmt)).mappings():
        line = (str(row["stream"]), str(row["conversation_id"]), str(row["thread_id"]))
        first[line] = int(row["last_seq"]) - counts[line] + 1
    return first


async def known_events(conn: AsyncConnection, ids: list[str]) -> dict[str, StoredEvent]:
    """The stored events among *ids*."""
    return await _known_events(conn, ids)


async def write_facts(
    conn: AsyncConnection,
    dialect: str,
    *,
    events: Sequence[EventEntry] = (),
    items: Sequence[TranscriptEntry] = (),
    now: int,
    careful: bool,
    returning: bool,
) -> Written:
    """Append *events* and *items* inside the caller's transaction.

    With ``careful`` false, ids are assumed new and a known one makes the statement fail with a unique
    violation (the caller retries carefully). With ``returning`` the stored rows come back (on SQLite that
    costs one statement per row, so bulk writes of a run pass ``False``).
    """
    known_events = await _known_events(conn, list({e.event_id for e in events})) if careful and events else {}
    known_items = await _known_items(conn, list({i.item_id for i in items})) if careful and items else {}
    fresh_events = _first_copies(events, _EVENT_ID, known_events)
    fresh_items = _first_copies(items, _ITEM_ID, known_items)
    stored_events: dict[str, StoredEvent] = {}
    stored_items: dict[str, StoredTranscriptItem] = {}

    if dialect == "sqlite":
        await _write_sqlite(conn, fresh_events, fresh_items, now, returning, stored_events, stored_items)
    else:
        first = await _reserve_pg(conn, fresh_events, fresh_items)
        event_rows: list[dict[str, object]] = []
        for entry in fresh_events:
            seq = None
            if entry.conversation_id is not None:
                line = ("event", entry.conversation_id, "")
                seq = first[line]
                first[line] = seq + 1
            row = event_row(entry, seq=seq, now=now)
            event_rows.append(row)
            stored_events[entry.event_id] = event_from_row(row)
        item_rows: list[dict[str, object]] = []
        for entry in fresh_items:
            line = ("transcript", entry.conversation.conversation_id, main_line(entry.conversation.thread_id))
            seq = first[line]
            first[line] = seq + 1
            row = item_row(entry, seq=seq, now=now)
            item_rows.append(row)
            stored_items[entry.item_id] = item_from_row(row)
        if event_rows:
            await conn.execute(_INSERT_EVENTS, event_rows)
        if item_rows:
            await conn.execute(_INSERT_ITEMS, item_rows)

    written = Written()
    if returning:
        emitted: set[str] = set()
        for entry in events:
            if entry.event_id in known_events:
                written.events.append(AppendOutcome(known_events[entry.event_id], True))
            else:
                # a batch naming one id twice stores it once; later copies are duplicates of the first
                written.events.append(AppendOutcome(stored_events[entry.event_id], entry.event_id in emitted))
                emitted.add(entry.event_id)
        written.items = [known_items.get(i.item_id) or stored_items[i.item_id] for i in items]
    return written


async def _write_sqlite(
    conn: AsyncConnection,
    events: list[EventEntry],
    items: list[TranscriptEntry],
    now: int,
    returning: bool,
    stored_events: dict[str, StoredEvent],
    stored_items: dict[str, StoredTranscriptItem],
) -> None:
    numbered: list[EventEntry] = []
    loose: list[EventEntry] = []
    for entry in events:  # one loop, not two comprehensions (a function object each on Python 3.11)
        (loose if entry.conversation_id is None else numbered).append(entry)
    if returning:
        for entry in numbered:
            row = event_row(entry, seq=None, now=now)
            del row["seq"]
            row["seq_conversation_id"] = entry.conversation_id
            seq = (await conn.execute(_SQLITE_EVENT_INSERT.returning(EVENTS.c.seq), row)).scalar_one()
            stored_events[entry.event_id] = event_from_row({**row, "seq": seq})
        for entry in items:
            row = item_row(entry, seq=0, now=now)
            del row["seq"]
            row["seq_conversation_id"] = row["conversation_id"]
            row["seq_thread_id"] = row["thread_id"]
            seq = (await conn.execute(_SQLITE_ITEM_INSERT.returning(ITEMS.c.seq), row)).scalar_one()
            stored_items[entry.item_id] = item_from_row({**row, "seq": seq})
    else:
        if numbered:
            rows: list[dict[str, object]] = []
            for entry in numbered:
                row = event_row(entry, seq=None, now=now)
                del row["seq"]
                row["seq_conversation_id"] = entry.conversation_id
                rows.append(row)
            await conn.execute(_SQLITE_EVENT_INSERT, rows)
        if items:
            item_rows: list[dict[str, object]] = []
            for entry in items:
                row = item_row(entry, seq=0, now=now)
                del row["seq"]
                row["seq_conversation_id"] = row["conversation_id"]
                row["seq_thread_id"] = row["thread_id"]
                item_rows.append(row)
            await conn.execute(_SQLITE_ITEM_INSERT, item_rows)
    if loose:
        loose_rows: list[tuple[object, ...]] = []
        for entry in loose:
            loose_rows.append(event_values(entry, seq=None, now=now))
        await conn.execute(_INSERT_EVENTS, bindable_rows(conn, EVENT_KEYS, loose_rows))
        if returning:  # the stored events are read only then: building them cost a dataclass per event
            for entry, values in zip(loose, loose_rows, strict=True):
                stored_events[entry.event_id] = event_from_row(dict(zip(EVENT_KEYS, values, strict=True)))
