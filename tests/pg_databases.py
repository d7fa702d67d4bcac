"""PostgreSQL for the tests: the test cluster's URL and databases made for one test.

The cluster is named by ``AGENTRUNNER_TEST_PG_URL`` (``source .ci/postgres.sh`` starts a private one and sets
it). Without it a PostgreSQL leg is skipped with a visible reason, unless ``AGENTRUNNER_REQUIRE_PG=1`` (CI),
where a missing server fails the run instead of passing it quietly.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncGenerator, Generator
from contextlib import asynccontextmanager, contextmanager

import pytest
from agentrunner_host.stores.engine import create_engine
from sqlalchemy import text
from sqlalchemy.engine import make_url

PG_URL_ENV = "AGENTRUNNER_TEST_PG_URL"
REQUIRE_PG_ENV = "AGENTRUNNER_REQUIRE_PG"


def pg_base_url() -> str:
    """The test cluster's URL, or a skip (a failure when ``AGENTRUNNER_REQUIRE_PG=1``)."""
    url = os.environ.get(PG_URL_ENV)
    if not url:
        if os.environ.get(REQUIRE_PG_ENV) == "1":
            pytest.fail(f"{REQUIRE_PG_ENV}=1 but {PG_URL_ENV} is not set: the PostgreSQL leg must run")
        pytest.skip(f"PostgreSQL leg skipped: {PG_URL_ENV} is not set (source .ci/postgres.sh to run it)")
    return url


async def _admin(sql: str) -> None:
    # CREATE/DROP DATABASE cannot run inside a transaction block
    admin = create_engine(pg_base_url())
    try:
        async with admin.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(sql))
    finally:
        await admin.dispose()


async def create_pg_database() -> str:
    """A new, empty database on the test cluster; returns its URL."""
    base = pg_base_url()
    name = f"t_{uuid.uuid4().hex[:12]}"
    await _admin(f'CREATE DATABASE "{name}"')
    return make_url(base).set(database=name).render_as_string(hide_password=False)


async def drop_pg_database(url: str) -> None:
    """Drop a database made by :func:`create_pg_database`; connections still open to it are closed (a host
    the test killed may have left some)."""
    await _admin(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')


@asynccontextmanager
async def temporary_pg_database() -> AsyncGenerator[str]:
    """The URL of a database made on entry and dropped on exit."""
    url = await create_pg_database()
    try:
        yield url
    finally:
        await drop_pg_database(url)


@contextmanager
def temporary_pg_database_sync() -> Generator[str]:
    """:func:`temporary_pg_database` for synchronous tests and fixtures (those starting ``serve`` processes);
    not from inside a running event loop."""
    url = asyncio.run(create_pg_database())
    try:
        yield url
    finally:
        asyncio.run(drop_pg_database(url))
