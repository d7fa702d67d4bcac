"""Operator controls on runners: the per-runner disable switch (``stores.controls``).

A row in ``runner_controls`` means the runner is disabled: the orchestrator reads it before every run starts
(one primary-key read, inside the run's start transaction), so a switch set by another process — the CLI, another host on the same database —
takes effect for the next event, with no cache to go stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, cast

from sqlalchemy import RowMapping, Table, bindparam, delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agentrunner_host.stores._connections import Database, now_ms
from agentrunner_host.stores.tables import RunnerControlRow

from ._compiled import hot
from ._sql import insert_for

__all__ = ["CONTROLS", "RunnerControl", "RunnerControlStore", "read_control"]

CONTROLS: Final = cast(Table, RunnerControlRow.__table__)
MAX_REASON_CHARS: Final = 1000
"""Longest reason kept (it is shown in every refusal)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerControl:
    """A disabled runner."""

    runner_id: str
    """Canonical runner id."""
    reason: str
    """Why, as the operator said it."""
    disabled_by: str | None
    """Who disabled it (``api``, ``cli``...)."""
    disabled_at: int
    """Unix epoch milliseconds."""


def _control(m: RowMapping) -> RunnerControl:
    return RunnerControl(
        runner_id=m["runner_id"],
        reason=m["reason"],
        disabled_by=m["disabled_by"],
        disabled_at=m["disabled_at"],
    )


_CONTROL: Final = hot(select(CONTROLS).where(CONTROLS.c.runner_id == bindparam("runner_id")))


async def read_control(conn: AsyncConnection, runner_id: str) -> RunnerControl | None:
    """The control of *runner_id* on *conn* (statements only: a run's start reads it in its own transaction)."""
    row = (await conn.execute(_CONTROL, {"runner_id": runner_id})).mappings().first()
    return None if row is None else _control(row)


class RunnerControlStore:
    """The disable switch of each runner."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def disable(self, runner_id: str, *, reason: str, by: str | None = None) -> RunnerControl:
        """Disable *runner_id* (again: the reason and time are replaced); returns the stored control."""
        values = {
            "runner_id": runner_id,
            "reason": reason[:MAX_REASON_CHARS],
            "disabled_by": by,
            "disabled_at": now_ms(),
        }

        async def work(conn: AsyncConnection) -> None:
            stmt = insert_for(self._db.dialect, CONTROLS).values(**values)
            await conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["runner_id"],
                    set_={k: v for k, v in values.items() if k != "runner_id"},
                )
            )

        await self._db.transact(work)
        return RunnerControl(**values)  # pyright: ignore[reportArgumentType]

    async def enable(self, runner_id: str) -> bool:
        """Enable *runner_id*; False when it was not disabled."""

        async def work(conn: AsyncConnection) -> bool:
            return (
                await conn.execute(delete(CONTROLS).where(CONTROLS.c.runner_id == runner_id))
            ).rowcount > 0

        return await self._db.transact(work)

    async def get(self, runner_id: str) -> RunnerControl | None:
        """The control of *runner_id* when it is disabled, else ``None``."""
        async with self._db.read() as conn:
            return await read_control(conn, runner_id)

    async def disabled(self) -> dict[str, RunnerControl]:
        """Every disabled runner, by id."""
        async with self._db.read() as conn:
            rows = (await conn.execute(select(CONTROLS).order_by(CONTROLS.c.runner_id))).mappings().all()
        return {row["runner_id"]: _control(row) for row in rows}
