"""The database engine of the host and its schema migrations.

One engine serves every store. SQLite (the default, a single file under the data directory) runs in WAL
mode with ``synchronous=NORMAL``: readers never block the writer, and a commit costs a WAL append instead of
a full fsync. PostgreSQL is reached through asyncpg. Stores never build an engine: it is always injected.

Migrations are Alembic revisions shipped inside the package (``agentrunner_host/migrations``); Alembic is
configured in code, so no ``alembic.ini`` is needed.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Connection, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

if TYPE_CHECKING:
    # Alembic is imported when a migration runs, not with the stores: every ``agentrunner`` command imports
    # them, ``--help`` included, and Alembic costs about half a second of CPU to import.
    from alembic.config import Config

__all__ = [
    "DATABASE_FILE_NAME",
    "SQLITE_BUSY_TIMEOUT_MS",
    "alembic_config",
    "create_engine",
    "current_revision",
    "default_sqlite_url",
    "upgrade",
]

DATABASE_FILE_NAME: Final = "agentrunner.db"
"""File name of the default SQLite database inside the host's data directory."""

SQLITE_BUSY_TIMEOUT_MS: Final = 10_000
"""How long a SQLite connection waits for another process's write lock before failing."""

SQLITE_BEGIN_OPTION: Final = "agentrunner_sqlite_begin"
"""Execution option naming the ``BEGIN`` flavour of a SQLite transaction (``DEFERRED``, ``IMMEDIATE``), or
``None`` for none at all (single-statement reads run in autocommit)."""


def default_sqlite_url(data_dir: Path) -> str:
    """The URL of the default database: ``sqlite+aiosqlite:///<data_dir>/agentrunner.db``.

    The file sits next to the ``artifacts/`` directory of the same data directory, so backing up the data
    directory (with the host stopped) backs up every host-owned fact.
    """
    return f"sqlite+aiosqlite:///{(data_dir / DATABASE_FILE_NAME).resolve()}"


def create_engine(
    url: str,
    *,
    echo: bool = False,
    connect_args: Mapping[str, Any] | None = None,
    pool_size: int = 5,
) -> AsyncEngine:
    """An async engine for *url* (``sqlite+aiosqlite://`` or ``postgresql+asyncpg://``).

    SQLite connections get WAL, ``synchronous=NORMAL``, foreign keys and a busy timeout on every connect, and
    the host issues ``BEGIN`` itself so a writer can take the write lock up front (``BEGIN IMMEDIATE``)
    instead of failing when it upgrades a read lock. *connect_args* go to the driver unchanged (tests use
    them to pin a PostgreSQL ``search_path``).
    """
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    args = dict(connect_args or {})
    if backend == "sqlite":
        if parsed.get_driver_name() != "aiosqlite":
            raise ValueError("SQLite URLs must use the aiosqlite driver: sqlite+aiosqlite:///path/to/file.db")
        _private_database_file(parsed.database)
        engine = create_async_engine(
            parsed, echo=echo, connect_args=args, pool_size=pool_size, hide_parameters=True
        )
        _configure_sqlite(engine)
        return engine
    if backend == "postgresql":
        if parsed.get_driver_name() != "asyncpg":
            raise ValueError("PostgreSQL URLs must use the asyncpg driver: postgresql+asyncpg://...")
        return create_async_engine(
            parsed, echo=echo, connect_args=args, pool_size=pool_size, hide_parameters=True
        )
    raise ValueError(
        f"unsupported database backend {backend!r}: use SQLite (aiosqlite) or PostgreSQL (asyncpg)"
    )


class _NoDriverDebug(logging.Filter):
    """aiosqlite logs every call at DEBUG with its arguments: SQL parameters, message text included."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.DEBUG


_DRIVER_FILTER: Final = _NoDriverDebug()


def _private_database_file(database: str | None) -> None:
    """Create the SQLite file owner-only (0600) before SQLite does (it would use 0644); SQLite gives its WAL
    and SHM files the database file's mode, so they are private too. An existing file is tightened."""
    logging.getLogger("aiosqlite").addFilter(_DRIVER_FILTER)  # idempotent: a filter is added once
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            with contextlib.suppress(OSError):  # not ours to change (another owner), or absent
                if candidate.stat().st_mode & 0o077:
                    candidate.chmod(0o600)
    except OSError:
        return  # e.g. the directory does not exist yet: SQLite reports that itself
    else:
        os.close(fd)


def _configure_sqlite(engine: AsyncEngine) -> None:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # The driver's own implicit BEGIN is always DEFERRED; turning it off lets on_begin choose.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        finally:
            cursor.close()

    def on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(SQLITE_BEGIN_OPTION, "DEFERRED")
        if mode is not None:
            connection.exec_driver_sql(f"BEGIN {mode}")

    event.listen(engine.sync_engine, "connect", on_connect)
    event.listen(engine.sync_engine, "begin", on_begin)


def alembic_config() -> Config:
    """The Alembic configuration of the host's migrations (no ini file)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", "agentrunner_host:migrations")
    return config


async def upgrade(engine: AsyncEngine, *, revision: str = "head") -> None:
    """Migrate the database to *revision* (default: the newest) in one transaction; on PostgreSQL under an
    advisory lock, so hosts starting together migrate one at a time (the later ones find it done)."""
    async with engine.begin() as connection:
        await connection.run_sync(_upgrade_sync, revision)


MIGRATION_LOCK_KEY: Final = 0x61676E7472756E  # "agntrun"
"""PostgreSQL advisory lock held by a migration: hosts starting together migrate one after the other."""


def _upgrade_sync(connection: Connection, revision: str) -> None:
    if connection.dialect.name == "postgresql":
        # Several hosts may start at once against one database: without the lock their first migrations race
        # (duplicate CREATE TABLE). Released when the migration's transaction ends.
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at, or ``None`` before the first migration."""
    from alembic.runtime.migration import MigrationContext

    def read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as connection:
        return await connection.run_sync(read)
