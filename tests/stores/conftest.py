"""Fixtures of the store tests: one suite, two engines.

``engine`` is parametrized ``sqlite`` / ``postgres``. The PostgreSQL leg needs ``AGENTRUNNER_TEST_PG_URL``
(``source .ci/postgres.sh`` starts a private cluster and sets it); without it the leg is skipped with a
visible reason, unless ``AGENTRUNNER_REQUIRE_PG=1`` (CI), where a missing server fails the run.

Migrating costs more than most tests, so it happens once per session: SQLite tests get a copy of a migrated
template file, PostgreSQL tests share one migrated schema that is emptied (``TRUNCATE``, sequences restarted)
before each test. ``raw_engine`` (an empty database: a fresh file, a fresh schema dropped afterwards) is for
the migration tests.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from agentrunner_host.facts_api import PullAPI
from agentrunner_host.stores import HostStores
from agentrunner_host.stores.engine import DATABASE_FILE_NAME, create_engine, default_sqlite_url, upgrade
from agentrunner_host.stores.tables import Base
from pg_databases import pg_base_url
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

CURSOR_KEY = b"test-cursor-key-0123456789abcdef"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def raw_engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """An engine on an empty database (not migrated)."""
    if request.param == "sqlite":
        engine = create_engine(default_sqlite_url(tmp_path))
        try:
            yield engine
        finally:
            await engine.dispose()
        return
    url = pg_base_url()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(url)
    try:
        async with admin.begin() as conn:
            await conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        engine = create_engine(url, connect_args={"server_settings": {"search_path": schema}}, pool_size=10)
        try:
            yield engine
        finally:
            await engine.dispose()
            async with admin.begin() as conn:
                await conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        await admin.dispose()


def _run_aside(work: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run async set-up on its own loop in a helper thread (these session fixtures are first requested from
    inside a running test loop)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(lambda: asyncio.run(work())).result()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database file migrated to head, copied by each test."""
    directory = tmp_path_factory.mktemp("template")

    async def migrate() -> None:
        engine = create_engine(default_sqlite_url(directory))
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()

    _run_aside(migrate)
    return directory / DATABASE_FILE_NAME


@pytest.fixture(scope="session")
def pg_schema() -> Iterator[str]:
    """A PostgreSQL schema migrated to head, shared by the session and dropped at its end."""
    url = pg_base_url()
    schema = f"s_{uuid.uuid4().hex[:16]}"

    async def create() -> None:
        admin = create_engine(url)
        try:
            async with admin.begin() as conn:
                await conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        finally:
            await admin.dispose()
        engine = create_engine(url, connect_args={"server_settings": {"search_path": schema}})
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()

    async def drop() -> None:
        admin = create_engine(url)
        try:
            async with admin.begin() as conn:
                await conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        finally:
            await admin.dispose()

    _run_aside(create)
    try:
        yield schema
    finally:
        _run_aside(drop)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """An engine on an empty database migrated to head."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        shutil.copyfile(template, tmp_path / DATABASE_FILE_NAME)
        engine = create_engine(default_sqlite_url(tmp_path))
    else:
        schema: str = request.getfixturevalue("pg_schema")
        engine = create_engine(
            pg_base_url(), connect_args={"server_settings": {"search_path": schema}}, pool_size=10
        )
        tables = ", ".join(f'"{table.name}"' for table in Base.metadata.sorted_tables)
        async with engine.begin() as conn:
            await conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    try:
        yield engine
    finally:
        await engine.dispose()


@pytest.fixture
async def stores(engine: AsyncEngine, tmp_path: Path) -> AsyncIterator[HostStores]:
    """The host stores over the migrated database, artifacts under ``tmp_path``."""
    opened = await HostStores.open(engine, data_dir=tmp_path / "data")
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
def pull(stores: HostStores) -> PullAPI:
    """The pull APIs over ``stores``."""
    return PullAPI(stores, cursor_key=CURSOR_KEY)
