"""The engine factory and the migrations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentrunner_host.stores.engine import (
    alembic_config,
    create_engine,
    current_revision,
    default_sqlite_url,
    upgrade,
)
from agentrunner_host.stores.tables import Base, include_name
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine


def _head() -> str:
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert len(heads) == 1, f"the migrations have several heads: {heads}"
    return heads[0]


def _diff(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(
        connection, opts={"include_name": include_name, "compare_type": True}
    )
    return compare_metadata(context, Base.metadata)


async def test_migrating_an_empty_database_reaches_head_and_matches_the_models(
    raw_engine: AsyncEngine,
) -> None:
    """Upgrading from empty creates exactly the tables, columns and indexes the ORM models declare."""
    assert await current_revision(raw_engine) is None
    await upgrade(raw_engine)
    assert await current_revision(raw_engine) == _head()
    async with raw_engine.connect() as conn:
        diff = await conn.run_sync(_diff)
    assert diff == []


async def test_the_drift_check_notices_a_missing_index(raw_engine: AsyncEngine) -> None:
    """Dropping an index after migrating makes the model comparison report it (the check can fail)."""
    await upgrade(raw_engine)
    async with raw_engine.begin() as conn:
        await conn.execute(text("DROP INDEX ix_runs_status"))
    async with raw_engine.connect() as conn:
        diff = await conn.run_sync(_diff)
    assert any(entry[0] == "add_index" and entry[1].name == "ix_runs_status" for entry in diff)


async def test_upgrading_twice_is_a_no_op(engine: AsyncEngine) -> None:
    """A second upgrade on a migrated database changes nothing."""
    await upgrade(engine)
    assert await current_revision(engine) == _head()


async def test_sqlite_connections_use_wal_normal_sync_and_foreign_keys(tmp_path: Path) -> None:
    """Every SQLite connection runs in WAL mode with synchronous=NORMAL, foreign keys and a busy timeout."""
    engine = create_engine(default_sqlite_url(tmp_path))
    try:
        async with engine.connect() as conn:
            journal = (await conn.execute(text("PRAGMA journal_mode"))).scalar_one()
            synchronous = (await conn.execute(text("PRAGMA synchronous"))).scalar_one()
            foreign_keys = (await conn.execute(text("PRAGMA foreign_keys"))).scalar_one()
            busy = (await conn.execute(text("PRAGMA busy_timeout"))).scalar_one()
    finally:
        await engine.dispose()
    assert (journal, synchronous, foreign_keys) == ("wal", 1, 1)
    assert busy >= 1000


def test_the_default_database_lives_in_the_data_directory(tmp_path: Path) -> None:
    """The default URL points at ``<data_dir>/agentrunner.db`` through aiosqlite."""
    assert default_sqlite_url(tmp_path) == f"sqlite+aiosqlite:///{tmp_path.resolve()}/agentrunner.db"


def test_unsupported_drivers_are_refused() -> None:
    """Only aiosqlite and asyncpg URLs are accepted."""
    with pytest.raises(ValueError, match="aiosqlite"):
        create_engine("sqlite:///x.db")
    with pytest.raises(ValueError, match="asyncpg"):
        create_engine("postgresql+psycopg://u@h/db")
    with pytest.raises(ValueError, match="unsupported"):
        create_engine("mysql+aiomysql://u@h/db")
