"""Fixtures of the multi-host tests: one database shared by several hosts (SQLite file or a fresh PostgreSQL
database per test, reached with ``AGENTRUNNER_TEST_PG_URL``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from agentrunner_host.config import Settings, load_settings
from agentrunner_host.http import create_app
from agentrunner_host.service import HostService
from agentrunner_host.stores.engine import create_engine
from sqlalchemy import text
from sqlalchemy.engine import make_url

HostSettings = Callable[..., Settings]


def pg_base_url() -> str:
    """The test cluster's URL, or a skip (a failure when ``AGENTRUNNER_REQUIRE_PG=1``)."""
    base = os.environ.get("AGENTRUNNER_TEST_PG_URL")
    if not base:
        if os.environ.get("AGENTRUNNER_REQUIRE_PG") == "1":
            pytest.fail("AGENTRUNNER_REQUIRE_PG=1 but AGENTRUNNER_TEST_PG_URL is not set")
        pytest.skip("PostgreSQL leg skipped: AGENTRUNNER_TEST_PG_URL is not set (source .ci/postgres.sh)")
    return base


async def create_pg_database() -> str:
    """A new, empty database on the test cluster; returns its URL."""
    base = pg_base_url()
    name = f"mh_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    try:
        async with admin.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        await admin.dispose()
    return make_url(base).set(database=name).render_as_string(hide_password=False)


async def drop_pg_database(url: str) -> None:
    """Drop a database made by :func:`create_pg_database` (connections still open are closed)."""
    name = make_url(url).database
    admin = create_engine(pg_base_url())
    try:
        async with admin.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


@pytest.fixture
async def pg_database() -> AsyncIterator[str]:
    """The URL of a PostgreSQL database created for the test and dropped afterwards."""
    url = await create_pg_database()
    try:
        yield url
    finally:
        await drop_pg_database(url)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """One database for several hosts: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
        return
    url = await create_pg_database()
    try:
        yield url
    finally:
        await drop_pg_database(url)


@pytest.fixture
def host_settings(tmp_path: Path) -> HostSettings:
    """Settings of host *name* (its own data directory and machine name) on the database *url*, with more
    TOML text (keys of ``[cluster]`` come first)."""

    def make(name: str, url: str, toml: str = "", **overrides: object) -> Settings:
        home = tmp_path / name
        home.mkdir(exist_ok=True)
        path = home / "agentrunner.toml"
        # hosts of one test share a process: each needs its own machine name (a restart keeps it)
        path.write_text(f'[cluster]\nhost_name = "machine-{name}"\n{toml}', encoding="utf-8")
        env = {"AGENTRUNNER_DATA_DIR": str(home / "data"), "AGENTRUNNER_DATABASE_URL": url}
        return load_settings(path, environ=env, cwd=home, **overrides)  # pyright: ignore[reportArgumentType]

    return make


def client_for(service: HostService) -> httpx.AsyncClient:
    """An HTTP client of the service's app, in process."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(service, api_token=None)),
        base_url="http://127.0.0.1:8420",
    )
