"""The host registry: every running host process (incarnation) with a heartbeat lease.

A host registers with a random id when it starts and renews its lease every heartbeat; each run records the
host executing it (``runs.owner_host``). Times are read from the database's clock, never from the hosts'
own, so hosts whose clocks disagree still agree on whose lease has expired. A run is *orphaned* when its
owner holds no live lease: its row is gone (left, or pruned) or its lease expired. Only orphaned runs are
ever closed as ``host_restarted`` (see :meth:`RunStore.close_interrupted`); a live host's runs never are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, cast

from sqlalchemy import BigInteger, ColumnElement, Table, delete, insert, literal_column, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ._connections import Database
from .tables import HostRow, RunRow

__all__ = ["HostRecord", "HostStore"]

HOSTS: Final = cast(Table, HostRow.__table__)
RUNS: Final = cast(Table, RunRow.__table__)

_PRUNE_AFTER_MS: Final = 24 * 3600 * 1000
"""Rows of hosts whose lease expired this long ago are deleted (their runs were closed long before)."""


def db_now_ms(dialect: str) -> ColumnElement[int]:
    """The database's current time in Unix epoch milliseconds, as a SQL expression."""
    if dialect == "postgresql":
        expr = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
    else:
        expr = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    return literal_column(expr, BigInteger())


@dataclass(frozen=True, slots=True)
class HostRecord:
    """One registered host incarnation."""

    host_id: str
    """Random id of the incarnation."""
    machine: str
    """Machine name."""
    pid: int
    """Process id on that machine."""
    started_at: int
    """Registration (database clock, epoch ms)."""
    heartbeat_at: int
    """Last renewal (database clock, epoch ms)."""
    lease_expires_at: int
    """End of the lease (database clock, epoch ms)."""
    live: bool
    """The lease has not expired (as of the read)."""


class HostStore:
    """The ``hosts`` table (``stores.hosts``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def _now(self) -> ColumnElement[int]:
        return db_now_ms(self._db.dialect)

    async def register(self, host_id: str, *, machine: str, pid: int, lease_ms: int) -> None:
        """Add this incarnation with a lease of *lease_ms* from now."""
        now = self._now()

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(
                insert(HOSTS).values(
                    host_id=host_id,
                    machine=machine,
                    pid=pid,
                    started_at=now,
                    heartbeat_at=now,
                    lease_expires_at=now + lease_ms,
                )
            )

        await self._db.transact(work)

    async def renew(self, host_id: str, *, lease_ms: int) -> bool:
        """Extend the lease to *lease_ms* from now; False when it had already expired (other hosts may have
        closed this host's runs meanwhile) or the row is gone (it is then registered again)."""
        now = self._now()

        async def work(conn: AsyncConnection) -> bool:
            found = await conn.execute(
                select(HOSTS.c.lease_expires_at > now).where(HOSTS.c.host_id == host_id).with_for_update()
            )
            valid = found.scalar_one_or_none()
            if valid is None:
                return False
            await conn.execute(
                update(HOSTS)
                .where(HOSTS.c.host_id == host_id)
                .values(heartbeat_at=now, lease_expires_at=now + lease_ms)
            )
            return bool(valid)

        return await self._db.transact(work)

    async def leave(self, host_id: str) -> None:
        """Remove this incarnation (a clean shutdown: its runs have ended)."""

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(delete(HOSTS).where(HOSTS.c.host_id == host_id))

        await self._db.transact(work)

    async def forget(self, host_ids: Sequence[str]) -> None:
        """Remove incarnations known to be dead (e.g. this machine's previous process): their runs become
        orphaned at once instead of when their lease expires."""
        if not host_ids:
            return

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(delete(HOSTS).where(HOSTS.c.host_id.in_(list(host_ids))))

        await self._db.transact(work)

    async def prune(self) -> None:
        """Delete rows of hosts whose lease expired long ago (bounded table, no effect on any run)."""
        now = self._now()

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(delete(HOSTS).where(HOSTS.c.lease_expires_at < now - _PRUNE_AFTER_MS))

        await self._db.transact(work)

    async def registered(self, *, machine: str | None = None) -> list[HostRecord]:
        """Every registered incarnation (of one *machine*), live or not."""
        stmt = select(HOSTS, (HOSTS.c.lease_expires_at > self._now()).label("live"))
        if machine is not None:
            stmt = stmt.where(HOSTS.c.machine == machine)
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt.order_by(HOSTS.c.started_at))).mappings().all()
        return [
            HostRecord(
                host_id=r["host_id"],
                machine=r["machine"],
                pid=r["pid"],
                started_at=r["started_at"],
                heartbeat_at=r["heartbeat_at"],
                lease_expires_at=r["lease_expires_at"],
                live=bool(r["live"]),
            )
            for r in rows
        ]

    async def is_live(self, host_id: str) -> bool:
        """The host holds an unexpired lease."""
        stmt = select(HOSTS.c.host_id).where(
            HOSTS.c.host_id == host_id, HOSTS.c.lease_expires_at > self._now()
        )
        async with self._db.read() as conn:
            return (await conn.execute(stmt)).first() is not None

    def orphaned(self, *, include_unowned: bool) -> ColumnElement[bool]:
        """A filter on ``runs``: the run's owner holds no live lease (with *include_unowned*, runs recorded
        without an owner too, i.e. started by a version or a tool without the registry)."""
        live = select(HOSTS.c.host_id).where(HOSTS.c.lease_expires_at > self._now())
        owned_by_nobody = RUNS.c.owner_host.is_not(None) & RUNS.c.owner_host.not_in(live)
        if include_unowned:
            return or_(RUNS.c.owner_host.is_(None), owned_by_nobody)
        return owned_by_nobody
