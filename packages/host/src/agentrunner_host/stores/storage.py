"""Plugin storage: byte values in ``plugin``, ``workspace`` and ``binding`` areas, with a size cap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, cast

from sqlalchemy import Table, delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agentrunner_host.access import StorageOwner
from agentrunner_host.stores._connections import Database, now_ms
from agentrunner_host.stores.tables import StorageRow

from ._sql import insert_for
from .errors import InvalidValueError, ValueTooLargeError
from .state import prefix_filter

__all__ = ["DEFAULT_STORAGE_MAX_BYTES", "MAX_STORAGE_KEY_CHARS", "StorageItem", "StorageKey", "StorageStore"]

DEFAULT_STORAGE_MAX_BYTES: Final = 1024 * 1024
"""Default cap of one value."""
MAX_STORAGE_KEY_CHARS: Final = 200
"""Longest key."""
STORAGE_AREAS: Final = frozenset({"plugin", "workspace", "binding"})

STORAGE: Final = cast(Table, StorageRow.__table__)


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageItem:
    """A stored value."""

    owner: StorageOwner
    """Area and owner."""
    key: str
    """Key."""
    value: bytes
    """Bytes."""
    created_at: int
    """First write, Unix epoch milliseconds."""
    updated_at: int
    """Last write, Unix epoch milliseconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageKey:
    """A key of a listing (values are not loaded)."""

    key: str
    """Key."""
    size: int
    """Bytes."""
    updated_at: int
    """Last write, Unix epoch milliseconds."""


class StorageStore:
    """Storage areas (``stores.storage``)."""

    def __init__(self, db: Database, *, max_value_bytes: int = DEFAULT_STORAGE_MAX_BYTES) -> None:
        self._db = db
        self.max_value_bytes = max_value_bytes
        """Largest value accepted by ``set``."""

    @staticmethod
    def _check(owner: StorageOwner, key: str) -> None:
        if owner.area not in STORAGE_AREAS:
            raise InvalidValueError(f"unknown storage area {owner.area!r}")
        if not key or len(key) > MAX_STORAGE_KEY_CHARS:
            raise InvalidValueError(f"storage keys are 1 to {MAX_STORAGE_KEY_CHARS} characters")

    async def get(self, owner: StorageOwner, key: str) -> StorageItem | None:
        """The value, or ``None``."""
        stmt = select(STORAGE.c.value, STORAGE.c.created_at, STORAGE.c.updated_at).where(
            STORAGE.c.area == owner.area, STORAGE.c.owner_id == owner.owner_id, STORAGE.c.key == key
        )
        async with self._db.read() as conn:
            row = (await conn.execute(stmt)).first()
        if row is None:
            return None
        return StorageItem(owner=owner, key=key, value=bytes(row[0]), created_at=row[1], updated_at=row[2])

    async def set(self, owner: StorageOwner, key: str, value: bytes) -> StorageItem:
        """Write the value (atomic upsert); raises :class:`ValueTooLargeError` past the cap."""
        self._check(owner, key)
        if len(value) > self.max_value_bytes:
            raise ValueTooLargeError("storage value", size=len(value), limit=self.max_value_bytes)

        async def work(conn: AsyncConnection) -> StorageItem:
            now = now_ms()
            stmt = (
                insert_for(self._db.dialect, STORAGE)
                .values(
                    area=owner.area,
                    owner_id=owner.owner_id,
                    key=key,
                    value=value,
                    size=len(value),
                    created_at=now,
                    updated_at=now,
                )
                .on_conflict_do_update(
                    index_elements=["area", "owner_id", "key"],
                    set_={"value": value, "size": len(value), "updated_at": now},
                )
                .returning(STORAGE.c.created_at)
            )
            created_at: int = (await conn.execute(stmt)).scalar_one()
            return StorageItem(
                owner=owner, key=key, value=bytes(value), created_at=created_at, updated_at=now
            )

        return await self._db.transact(work)

    async def delete(self, owner: StorageOwner, key: str) -> bool:
        """Remove the key; ``True`` when it existed."""

        async def work(conn: AsyncConnection) -> bool:
            result = await conn.execute(
                delete(STORAGE).where(
                    STORAGE.c.area == owner.area, STORAGE.c.owner_id == owner.owner_id, STORAGE.c.key == key
                )
            )
            return result.rowcount > 0

        return await self._db.transact(work)

    async def list(
        self, owner: StorageOwner, *, prefix: str | None = None, after_key: str | None = None, limit: int
    ) -> tuple[list[StorageKey], bool]:
        """Up to *limit* keys after *after_key* in key order, starting with *prefix* (literally), and whether
        more follow."""
        stmt = select(STORAGE.c.key, STORAGE.c.size, STORAGE.c.updated_at).where(
            STORAGE.c.area == owner.area, STORAGE.c.owner_id == owner.owner_id
        )
        if prefix:
            stmt = stmt.where(*prefix_filter(STORAGE.c.key, prefix))
        if after_key is not None:
            stmt = stmt.where(STORAGE.c.key > after_key)
        stmt = stmt.order_by(STORAGE.c.key).limit(max(0, limit) + 1)
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        keys = [StorageKey(key=r[0], size=r[1], updated_at=r[2]) for r in rows[:limit]]
        return keys, len(rows) > limit
