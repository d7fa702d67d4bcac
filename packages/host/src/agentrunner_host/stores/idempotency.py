"""First answers of side-effecting back-calls, so a repeated call with the same idempotency key gets the
same answer instead of acting twice."""

from __future__ import annotations

from typing import Final, cast

from agentrunner.codec import JsonObject
from sqlalchemy import Table, delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agentrunner_host.stores._connections import Database, now_ms
from agentrunner_host.stores.tables import IdempotencyRow

from ._sql import canonical, digest, insert_for

__all__ = ["IdempotencyStore"]

KEYS: Final = cast(Table, IdempotencyRow.__table__)


class IdempotencyStore:
    """Idempotency keys (``stores.idempotency``); *scope* is structured (e.g. plugin id, run id, action)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def get(self, scope: tuple[str, ...], key: str) -> JsonObject | None:
        """The first answer stored for (*scope*, *key*), or ``None``."""
        stmt = select(KEYS.c.result).where(KEYS.c.scope_hash == digest(canonical(scope)), KEYS.c.key == key)
        async with self._db.read() as conn:
            return (await conn.execute(stmt)).scalar_one_or_none()

    async def put(self, scope: tuple[str, ...], key: str, result: JsonObject) -> JsonObject:
        """Store *result* unless an answer is already stored; returns the answer that wins (the first)."""
        text = canonical(scope)

        async def work(conn: AsyncConnection) -> JsonObject:
            stmt = (
                insert_for(self._db.dialect, KEYS)
                .values(scope_hash=digest(text), key=key, scope=text, result=result, created_at=now_ms())
                .on_conflict_do_nothing(index_elements=["scope_hash", "key"])
                .returning(KEYS.c.result)
            )
            stored = (await conn.execute(stmt)).scalar_one_or_none()
            if stored is not None:
                return stored
            first = await conn.execute(
                select(KEYS.c.result).where(KEYS.c.scope_hash == digest(text), KEYS.c.key == key)
            )
            return first.scalar_one()

        return await self._db.transact(work)

    async def sweep(self, *, older_than: int) -> int:
        """Forget answers stored before *older_than* (Unix epoch milliseconds); returns how many."""

        async def work(conn: AsyncConnection) -> int:
            return (await conn.execute(delete(KEYS).where(KEYS.c.created_at < older_than))).rowcount

        return await self._db.transact(work)
