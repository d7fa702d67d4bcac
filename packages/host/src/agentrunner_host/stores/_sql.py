"""Dialect helpers shared by the stores: upserts and sequence allocation."""

from __future__ import annotations

import hashlib
from typing import Any

from agentrunner import _json
from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from .models import SequenceCounterRow

__all__ = ["allocate_seq", "canonical", "digest", "insert_for", "main_line", "thread_or_none"]

_COUNTERS: Table = SequenceCounterRow.__table__  # pyright: ignore[reportAssignmentType]


def insert_for(dialect: str, table: Table) -> Any:
    """An ``INSERT`` with the dialect's ``ON CONFLICT`` support (both have the same method names)."""
    if dialect == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


async def allocate_seq(
    conn: AsyncConnection, dialect: str, *, stream: str, conversation_id: str, thread_id: str, count: int
) -> int:
    """Reserve *count* consecutive numbers on a stream and return the first.

    The upsert locks the counter row until the transaction ends, so concurrent writers queue up and a
    rollback gives the numbers back: no gaps, no duplicates.
    """
    stmt = (
        insert_for(dialect, _COUNTERS)
        .values(stream=stream, conversation_id=conversation_id, thread_id=thread_id, last_seq=count)
        .on_conflict_do_update(
            index_elements=["stream", "conversation_id", "thread_id"],
            set_={"last_seq": _COUNTERS.c.last_seq + count},
        )
        .returning(_COUNTERS.c.last_seq)
    )
    last: int = (await conn.execute(stmt)).scalar_one()
    return last - count + 1


def main_line(thread_id: str | None) -> str:
    """The stored form of a thread id (``""`` for the main line)."""
    return thread_id or ""


def thread_or_none(stored: str | None) -> str | None:
    """The API form of a stored thread id."""
    return stored or None


def canonical(parts: tuple[str, ...] | list[str]) -> str:
    """A collision-free text form of structured parts: a JSON array (``["a:b"]`` ≠ ``["a","b"]``)."""
    return _json.dumps_str(list(parts))


def digest(text: str) -> str:
    """Hex SHA-256 of *text*, used as a fixed-width index key."""
    return hashlib.sha256(text.encode()).hexdigest()
