"""Operator-managed agents and bindings as rows, shared by every host on the database.

The set is changed as a whole under a version counter (compare-and-set): a writer names the version it read,
and a change made meanwhile by another host makes it read again instead of overwriting that change. Every
committed change bumps the counter; on PostgreSQL it is also announced on the ``agentrunner_agents``
channel (``NOTIFY``, delivered at commit), so other hosts reload within a notification's latency. The
definitions are stored as JSON exactly as given (environment references kept, never resolved values).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from sqlalchemy import Table, bindparam, delete, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ._connections import Database, now_ms
from ._loop_reads import PointRead
from .errors import StoreError
from .tables import AgentDefinitionRow, BindingDefinitionRow, ChangeCounterRow

__all__ = ["AGENTS_CHANNEL", "AgentStore", "DefinitionSet", "DefinitionsChangedError"]

AGENTS_CHANNEL: Final = "agentrunner_agents"
"""PostgreSQL ``NOTIFY`` channel announcing a committed change of the definitions (payload: the version)."""
_COUNTER: Final = "agents"

AGENTS: Final = cast(Table, AgentDefinitionRow.__table__)
BINDINGS: Final = cast(Table, BindingDefinitionRow.__table__)
COUNTERS: Final = cast(Table, ChangeCounterRow.__table__)
_VERSION: Final = select(COUNTERS.c.version).where(COUNTERS.c.name == bindparam("name"))
_VERSION_ON_LOOP: Final = PointRead.of(_VERSION)
"""``version`` on the loop (see :mod:`._loop_reads`): a host on SQLite polls it every second."""


class DefinitionsChangedError(StoreError):
    """The definitions changed since the version the writer read (another host wrote first)."""


@dataclass(frozen=True, slots=True)
class DefinitionSet:
    """Every operator agent and binding at one version."""

    version: int
    """The change counter (0 before the first change)."""
    agents: list[dict[str, Any]]
    """Agent definitions (JSON objects), ordered by id."""
    bindings: list[dict[str, Any]]
    """Binding specs (JSON objects), ordered by id."""


class AgentStore:
    """The shared operator definitions (``agent_definitions``, ``binding_definitions``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def version(self) -> int:
        """The current change counter (one indexed read: what a polling host checks; on a SQLite file it is
        answered on the loop's thread)."""
        reader = self._db.loop_reader
        rows = None if reader is None else reader.fetch(_VERSION_ON_LOOP, {"name": _COUNTER})
        if rows is not None:
            return int(cast(int, rows[0][0])) if rows else 0
        async with self._db.read() as conn:
            value = (await conn.execute(_VERSION, {"name": _COUNTER})).scalar_one_or_none()
        return 0 if value is None else int(value)

    async def load(self) -> DefinitionSet:
        """Every definition with the version they belong to. The version is read first: definitions newer
        than it only make the next check reload once more, never hide a change."""
        async with self._db.read() as conn:
            found = await conn.execute(select(COUNTERS.c.version).where(COUNTERS.c.name == _COUNTER))
            value = found.scalar_one_or_none()
            agents = await conn.execute(select(AGENTS.c.definition).order_by(AGENTS.c.agent_id))
            bindings = await conn.execute(select(BINDINGS.c.definition).order_by(BINDINGS.c.binding_id))
            return DefinitionSet(
                version=0 if value is None else int(value),
                agents=list(agents.scalars().all()),
                bindings=list(bindings.scalars().all()),
            )

    async def replace(
        self,
        *,
        agents: Sequence[tuple[str, dict[str, Any]]],
        bindings: Sequence[tuple[str, dict[str, Any]]],
        expected_version: int,
    ) -> int:
        """Make the stored set exactly *agents* and *bindings* (``(id, definition)`` pairs) if it is still at
        *expected_version*; returns the new version. Raises :class:`DefinitionsChangedError` otherwise."""

        async def work(conn: AsyncConnection, careful: bool) -> int:
            version = await self._bump(conn, expected_version, careful=careful)
            now = now_ms()
            await conn.execute(delete(AGENTS))
            await conn.execute(delete(BINDINGS))
            if agents:
                await conn.execute(
                    insert(AGENTS),
                    [{"agent_id": i, "definition": d, "updated_at": now} for i, d in agents],
                )
            if bindings:
                await conn.execute(
                    insert(BINDINGS),
                    [{"binding_id": i, "definition": d, "updated_at": now} for i, d in bindings],
                )
            await self._announce(conn, version)
            return version

        return await self._db.transact_optimistic(work)

    async def add_missing(
        self,
        *,
        agents: Sequence[tuple[str, dict[str, Any]]],
        bindings: Sequence[tuple[str, dict[str, Any]]],
    ) -> tuple[list[str], list[str]]:
        """Insert the definitions whose ids are not stored yet (an import run twice adds nothing the second
        time); returns the ids added. The version is bumped when anything was added."""

        async def work(conn: AsyncConnection, careful: bool) -> tuple[list[str], list[str]]:
            known_agents = set((await conn.execute(select(AGENTS.c.agent_id))).scalars().all())
            known_bindings = set((await conn.execute(select(BINDINGS.c.binding_id))).scalars().all())
            new_agents = [(i, d) for i, d in agents if i not in known_agents]
            new_bindings = [(i, d) for i, d in bindings if i not in known_bindings]
            if not new_agents and not new_bindings:
                return [], []
            now = now_ms()
            if new_agents:
                await conn.execute(
                    insert(AGENTS),
                    [{"agent_id": i, "definition": d, "updated_at": now} for i, d in new_agents],
                )
            if new_bindings:
                await conn.execute(
                    insert(BINDINGS),
                    [{"binding_id": i, "definition": d, "updated_at": now} for i, d in new_bindings],
                )
            version = await self._bump(conn, None, careful=careful)
            await self._announce(conn, version)
            return [i for i, _ in new_agents], [i for i, _ in new_bindings]

        return await self._db.transact_optimistic(work)

    async def _bump(self, conn: AsyncConnection, expected: int | None, *, careful: bool) -> int:
        """Raise the counter by one (only from *expected*, unless ``None``); returns the new value. The row
        is created by the first change; two first changes racing meet on its primary key."""
        if careful or expected is None:
            found = await conn.execute(
                select(COUNTERS.c.version).where(COUNTERS.c.name == _COUNTER).with_for_update()
            )
            current = found.scalar_one_or_none()
            if expected is not None and (current or 0) != expected:
                raise DefinitionsChangedError(
                    f"the agents and bindings changed meanwhile (version {current or 0}, not {expected})"
                )
            if current is None:
                await conn.execute(insert(COUNTERS).values(name=_COUNTER, version=1))
                return 1
            await conn.execute(
                update(COUNTERS).where(COUNTERS.c.name == _COUNTER).values(version=current + 1)
            )
            return int(current) + 1
        if expected == 0:
            # the row may not exist yet: a concurrent first insert fails on the key and we come back careful
            found = await conn.execute(select(COUNTERS.c.version).where(COUNTERS.c.name == _COUNTER))
            if found.scalar_one_or_none() is None:
                await conn.execute(insert(COUNTERS).values(name=_COUNTER, version=1))
                return 1
        updated = await conn.execute(
            update(COUNTERS)
            .where(COUNTERS.c.name == _COUNTER, COUNTERS.c.version == expected)
            .values(version=COUNTERS.c.version + 1)
        )
        if updated.rowcount != 1:
            raise DefinitionsChangedError(
                f"the agents and bindings changed meanwhile (not at version {expected})"
            )
        return expected + 1

    async def _announce(self, conn: AsyncConnection, version: int) -> None:
        if not self._db.is_sqlite:
            await conn.execute(
                text("SELECT pg_notify(:channel, :payload)"),
                {"channel": AGENTS_CHANNEL, "payload": str(version)},
            )
