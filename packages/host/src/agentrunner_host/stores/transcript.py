"""The transcript: the conversation view projected from the event log, paged by keyset on
(conversation, thread, seq) and searchable with the engine's full-text index.

Each thread (the main line is thread ``""``) numbers its items 1, 2, 3 ... with no gaps. Search uses
SQLite FTS5 or PostgreSQL ``tsvector``; the query is split into word tokens that are quoted one by one, so
no query text is ever interpreted as search syntax (or as ``LIKE`` wildcards).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from sqlalchemy import RowMapping, Table, bindparam, insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from agentrunner_host.access import ConversationKey

from ._db import Database, now_ms
from ._sql import allocate_seq, canonical, digest, main_line, thread_or_none
from .models import TranscriptRow

__all__ = [
    "MAX_SEARCH_TERMS",
    "MAX_SEARCH_TOP_K",
    "Role",
    "StoredTranscriptItem",
    "Transcript",
    "TranscriptEntry",
    "TranscriptItemType",
    "search_terms",
]

MAX_SEARCH_TOP_K: Final = 50
"""Hard cap of ``search`` hits."""
MAX_SEARCH_TERMS: Final = 32
"""Words of a query beyond this many are ignored."""

Role = Literal["user", "assistant", "system", "tool", "event"]
TranscriptItemType = Literal["message", "event", "tool_call", "tool_result"]

ITEMS: Final = cast(Table, TranscriptRow.__table__)
_WORD: Final = re.compile(r"\w+")


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
    contents: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """Content elements as JSON (binary parts only as artifact refs, never inline base64)."""
    artifacts: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """Artifact refs as JSON."""
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])
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


def search_terms(query: str) -> list[str]:
    """The word tokens of *query* the search uses (punctuation and operators are dropped)."""
    return _WORD.findall(query)[:MAX_SEARCH_TERMS]


def _fts_scope(conversation_id: str, thread_id: str) -> str:
    return "s" + digest(canonical([conversation_id, thread_id]))[:32]


def _fts_body(entry: TranscriptEntry) -> str:
    parts = [entry.content] if entry.content else []
    for element in entry.contents:
        value = element.get("text")
        if element.get("type") == "text" and isinstance(value, str):
            parts.append(value)
    return "\n".join(parts)


def _from_row(m: RowMapping) -> StoredTranscriptItem:
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


async def insert_items(
    conn: AsyncConnection, dialect: str, entries: Sequence[TranscriptEntry], *, now: int
) -> list[StoredTranscriptItem]:
    """Append *entries* inside the caller's transaction; returns the stored items (earlier copies for ids
    already stored), in order."""
    if not entries:
        return []
    ids = list({e.item_id for e in entries})
    existing: dict[str, StoredTranscriptItem] = {}
    for start in range(0, len(ids), 500):
        rows = (
            await conn.execute(select(ITEMS).where(ITEMS.c.item_id.in_(ids[start : start + 500])))
        ).mappings()
        for row in rows:
            item = _from_row(row)
            existing[item.item_id] = item
    fresh: list[TranscriptEntry] = []
    seen: set[str] = set()
    for entry in entries:
        if entry.item_id not in existing and entry.item_id not in seen:
            seen.add(entry.item_id)
            fresh.append(entry)
    counts: dict[tuple[str, str], int] = {}
    for entry in fresh:
        line = (entry.conversation.conversation_id, main_line(entry.conversation.thread_id))
        counts[line] = counts.get(line, 0) + 1
    next_seq: dict[tuple[str, str], int] = {}
    for line in sorted(counts):
        next_seq[line] = await allocate_seq(
            conn, dialect, stream="transcript", conversation_id=line[0], thread_id=line[1], count=counts[line]
        )
    rows_out: list[dict[str, Any]] = []
    fts_rows: list[dict[str, Any]] = []
    stored: dict[str, StoredTranscriptItem] = {}
    for entry in fresh:
        line = (entry.conversation.conversation_id, main_line(entry.conversation.thread_id))
        seq = next_seq[line]
        next_seq[line] = seq + 1
        created_at = entry.created_at if entry.created_at is not None else now
        values = _fields(entry)
        values["created_at"] = created_at
        item = StoredTranscriptItem(**values, seq=seq)
        stored[entry.item_id] = item
        rows_out.append(
            {
                "conversation_id": line[0],
                "thread_id": line[1],
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
                "created_at": created_at,
            }
        )
        if dialect == "sqlite":
            body = _fts_body(entry)
            if body:
                fts_rows.append(
                    {"body": body, "scope": _fts_scope(*line), "c": line[0], "t": line[1], "s": seq}
                )
    if rows_out:
        await conn.execute(insert(ITEMS), rows_out)
    if fts_rows:
        await conn.execute(
            text(
                "INSERT INTO transcript_fts (body, scope, conversation_id, thread_id, seq) "
                "VALUES (:body, :scope, :c, :t, :s)"
            ),
            fts_rows,
        )
    return [existing[e.item_id] if e.item_id in existing else stored[e.item_id] for e in entries]


def _fields(entry: TranscriptEntry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in TranscriptEntry.__dataclass_fields__}


class Transcript:
    """The conversation transcript (``stores.transcript``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def append_many(self, entries: Sequence[TranscriptEntry]) -> list[StoredTranscriptItem]:
        """Append items in one transaction (ids already stored are skipped and returned as stored)."""
        if not entries:
            return []

        async def work(conn: AsyncConnection) -> list[StoredTranscriptItem]:
            return await insert_items(conn, self._db.dialect, entries, now=now_ms())

        return await self._db.transact(work)

    async def page(
        self,
        *,
        conversation: ConversationKey,
        before_seq: int | None = None,
        after_seq: int | None = None,
        limit: int,
        direction: Literal["backward", "forward"] = "backward",
    ) -> tuple[list[StoredTranscriptItem], bool]:
        """Up to *limit* items strictly between *after_seq* and *before_seq*, oldest first, and whether more
        exist in *direction*: ``backward`` takes the newest of the range (walking to older items),
        ``forward`` the oldest (walking to newer ones)."""
        stmt = select(ITEMS).where(
            ITEMS.c.conversation_id == conversation.conversation_id,
            ITEMS.c.thread_id == main_line(conversation.thread_id),
        )
        if before_seq is not None:
            stmt = stmt.where(ITEMS.c.seq < before_seq)
        if after_seq is not None:
            stmt = stmt.where(ITEMS.c.seq > after_seq)
        order = ITEMS.c.seq.desc() if direction == "backward" else ITEMS.c.seq.asc()
        stmt = stmt.order_by(order).limit(max(0, limit) + 1)
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        has_more = len(rows) > limit
        items = [_from_row(row) for row in rows[:limit]]
        if direction == "backward":
            items.reverse()
        return items, has_more

    async def latest_seq(self, *, conversation: ConversationKey) -> int | None:
        """The newest ``seq`` of the conversation's thread, or ``None`` when it is empty."""
        stmt = (
            select(ITEMS.c.seq)
            .where(
                ITEMS.c.conversation_id == conversation.conversation_id,
                ITEMS.c.thread_id == main_line(conversation.thread_id),
            )
            .order_by(ITEMS.c.seq.desc())
            .limit(1)
        )
        async with self._db.read() as conn:
            return (await conn.execute(stmt)).scalar_one_or_none()

    async def search(
        self,
        *,
        conversation: ConversationKey,
        query: str,
        roles: Sequence[str] | None = None,
        event_types: Sequence[str] | None = None,
        top_k: int = 10,
    ) -> list[StoredTranscriptItem]:
        """The *top_k* (at most 50) most relevant items of the thread matching every word of *query*,
        returned in conversation order. Operators and punctuation in *query* are plain text."""
        terms = search_terms(query)
        top_k = max(0, min(top_k, MAX_SEARCH_TOP_K))
        if not terms or top_k == 0:
            return []
        conversation_id = conversation.conversation_id
        thread_id = main_line(conversation.thread_id)
        params: dict[str, Any] = {"c": conversation_id, "t": thread_id, "k": top_k}
        filters = ""
        binds: list[Any] = []
        if roles is not None:
            filters += " AND t.role IN :roles"
            params["roles"] = list(roles)
            binds.append(bindparam("roles", expanding=True))
        if event_types is not None:
            filters += " AND t.event_type IN :event_types"
            params["event_types"] = list(event_types)
            binds.append(bindparam("event_types", expanding=True))
        if (roles is not None and not roles) or (event_types is not None and not event_types):
            return []
        if self._db.is_sqlite:
            quoted = " ".join('"' + term.replace('"', '""') + '"' for term in terms)
            params["q"] = f'scope : "{_fts_scope(conversation_id, thread_id)}" AND body : ({quoted})'
            sql = (
                "SELECT t.* FROM transcript_fts AS f JOIN transcript_items AS t "
                "ON t.conversation_id = f.conversation_id AND t.thread_id = f.thread_id AND t.seq = f.seq "
                "WHERE transcript_fts MATCH :q AND f.conversation_id = :c AND f.thread_id = :t"
                f"{filters} ORDER BY f.rank, t.seq DESC LIMIT :k"
            )
        else:
            params["q"] = " ".join(terms)
            vector = "to_tsvector('simple'::regconfig, coalesce(t.content, ''))"
            tsquery = "plainto_tsquery('simple'::regconfig, :q)"
            sql = (
                f"SELECT t.* FROM transcript_items AS t WHERE t.conversation_id = :c AND t.thread_id = :t "
                f"AND {vector} @@ {tsquery}{filters} "
                f"ORDER BY ts_rank({vector}, {tsquery}) DESC, t.seq DESC LIMIT :k"
            )
        clause = text(sql).bindparams(*binds) if binds else text(sql)
        stmt = clause.columns(*ITEMS.c)
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt, params)).mappings().all()
        items = [_from_row(row) for row in rows]
        items.sort(key=lambda item: item.seq)
        return items
