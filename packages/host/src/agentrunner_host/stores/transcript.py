"""The transcript: the conversation view projected from the event log, paged by keyset on
(conversation, thread, seq) and searchable with the engine's full-text index.

Each thread (the main line is thread ``""``) numbers its items 1, 2, 3 ... with no gaps. Search uses
SQLite FTS5 or PostgreSQL ``tsvector``; the query is split into word tokens that are quoted one by one, so
no query text is ever interpreted as search syntax (or as ``LIKE`` wildcards).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, Literal

from sqlalchemy import RowMapping, Select, bindparam, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from agentrunner_host.access import ConversationKey
from agentrunner_host.stores._connections import Database, now_ms

from ._facts import write_facts
from ._sql import main_line
from .records import ITEMS, Role, StoredTranscriptItem, TranscriptEntry, TranscriptItemType, item_from_row

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

_WORD: Final = re.compile(r"\w+")
_NO_UPPER: Final = 2**62


def _page_statement(order: Any) -> Select[Any]:
    # one prebuilt statement per direction, bounds always bound (open ends get sentinels): no statement is
    # built or cache key computed per call on the hot read path
    return (
        select(ITEMS)
        .where(
            ITEMS.c.conversation_id == bindparam("c"),
            ITEMS.c.thread_id == bindparam("t"),
            ITEMS.c.seq < bindparam("before"),
            ITEMS.c.seq > bindparam("after"),
        )
        .order_by(order)
        .limit(bindparam("n"))
    )


_PAGE_BACKWARD: Final = _page_statement(ITEMS.c.seq.desc())
_PAGE_FORWARD: Final = _page_statement(ITEMS.c.seq.asc())


def search_terms(query: str) -> list[str]:
    """The word tokens of *query* the search uses (punctuation and operators are dropped)."""
    return _WORD.findall(query)[:MAX_SEARCH_TERMS]


def fts_scope(conversation_id: str, thread_id: str) -> str:
    """The token naming one thread in the SQLite FTS table; the insert trigger of the migrations builds the
    same text with ``hex()``: unambiguous (length-prefixed) and a single word for the tokenizer."""
    return "s" + f"{len(conversation_id)}:{conversation_id}\x1f{thread_id}".encode().hex()


class Transcript:
    """The conversation transcript (``stores.transcript``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def append_many(self, entries: Sequence[TranscriptEntry]) -> list[StoredTranscriptItem]:
        """Append items in one transaction (ids already stored are skipped and returned as stored)."""
        if not entries:
            return []

        async def work(conn: AsyncConnection, careful: bool) -> list[StoredTranscriptItem]:
            written = await write_facts(
                conn, self._db.dialect, items=entries, now=now_ms(), careful=careful, returning=True
            )
            return written.items

        return await self._db.transact_optimistic(work)

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
        rows, has_more = await self.page_rows(
            conversation=conversation,
            before_seq=before_seq,
            after_seq=after_seq,
            limit=limit,
            direction=direction,
        )
        return [item_from_row(row) for row in rows], has_more

    async def page_rows(
        self,
        *,
        conversation: ConversationKey,
        before_seq: int | None = None,
        after_seq: int | None = None,
        limit: int,
        direction: Literal["backward", "forward"] = "backward",
    ) -> tuple[list[RowMapping], bool]:
        """:meth:`page` as ``transcript_items`` rows (JSON columns decoded, main line as thread ``""``): the
        pull API's fast path, which turns rows straight into wire items."""
        stmt = _PAGE_BACKWARD if direction == "backward" else _PAGE_FORWARD
        params = {
            "c": conversation.conversation_id,
            "t": main_line(conversation.thread_id),
            "before": _NO_UPPER if before_seq is None else before_seq,
            "after": -1 if after_seq is None else after_seq,
            "n": max(0, limit) + 1,
        }
        async with self._db.read() as conn:
            rows = list((await conn.execute(stmt, params)).mappings().all())
        has_more = len(rows) > limit
        del rows[limit:]
        if direction == "backward":
            rows.reverse()
        return rows, has_more

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
            params["q"] = f'scope : "{fts_scope(conversation_id, thread_id)}" AND body : ({quoted})'
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
        items = [item_from_row(row) for row in rows]
        items.sort(key=lambda item: item.seq)
        return items
