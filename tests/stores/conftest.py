"""Fixtures of the store tests: one suite, two engines.

``engine`` is parametrized ``sqlite`` / ``postgres``. The PostgreSQL leg needs ``AGENTRUNNER_TEST_PG_URL``
(``source .ci/postgres.sh`` starts a private cluster and sets it); without it the leg is skipped with a
visible reason, unless ``AGENTRUNNER_REQUIRE_PG=1`` (CI), where a missing server fails the run. Every
PostgreSQL test gets its own schema, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agentrunner_host.db import create_engine, default_sqlite_url, upgrade
from agentrunner_host.pull import PullAPI
from agentrunner_host.stores import HostStores
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

PG_URL_ENV = "AGENTRUNNER_TEST_PG_URL"
REQUIRE_PG_ENV = "AGENTRUNNER_REQUIRE_PG"
CURSOR_KEY = b"test-cursor-key-0123456789abcdef"


def _pg_url() -> str:
    url = os.environ.get(PG_URL_ENV)
    if not url:
        if os.environ.get(REQUIRE_PG_ENV) == "1":
            pytest.fail(f"{REQUIRE_PG_ENV}=1 but {PG_URL_ENV} is not set: the PostgreSQL leg must run")
        pytest.skip(f"PostgreSQL leg skipped: {PG_URL_ENV} is not set (source .ci/postgres.sh to run it)")
    return url


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
    url = _pg_url()
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


@pytest.fixture
async def engine(raw_engine: AsyncEngine) -> AsyncEngine:
    """An engine on a database migrated to head."""
    await upgrade(raw_engine)
    return raw_engine


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
