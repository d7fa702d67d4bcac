"""The service on PostgreSQL: a fresh database per test, reached with ``AGENTRUNNER_TEST_PG_URL``."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest
from agentrunner_host.service import HostService
from agentrunner_host.stores.engine import create_engine
from sqlalchemy import text
from sqlalchemy.engine import make_url

from .conftest import SettingsFactory, client_for

pytestmark = pytest.mark.postgres


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    """The URL of a database created for the test and dropped afterwards."""
    base = os.environ.get("AGENTRUNNER_TEST_PG_URL")
    if not base:
        if os.environ.get("AGENTRUNNER_REQUIRE_PG") == "1":
            pytest.fail("AGENTRUNNER_REQUIRE_PG=1 but AGENTRUNNER_TEST_PG_URL is not set")
        pytest.skip(
            "PostgreSQL leg skipped: AGENTRUNNER_TEST_PG_URL is not set (source .ci/postgres.sh to run it)"
        )
    name = f"svc_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    try:
        async with admin.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
        async with admin.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


async def test_the_service_runs_events_and_serves_transcripts_on_postgresql(
    make_settings: SettingsFactory, pg_url: str
) -> None:
    """Migrations, a run, the transcript, readiness and a restart, all on PostgreSQL."""
    settings = make_settings(environ={"AGENTRUNNER_DATABASE_URL": pg_url})
    async with HostService.open(settings) as service, client_for(service) as client:
        assert (await client.get("/readyz")).json()["ready"] is True
        answer = await client.post(
            "/v1/events?wait=true", json={"text": "on postgres", "conversation_id": "pg"}
        )
        assert answer.json()["run"]["status"] == "completed"
    async with HostService.open(settings) as service, client_for(service) as client:
        items = (await client.get("/v1/conversations/pg/transcript")).json()["items"]
        duplicate = await client.post("/v1/events", json={"text": "x", "event_id": "e-pg"})
        again = await client.post("/v1/events", json={"text": "x", "event_id": "e-pg"})
    assert [i["content"] for i in items] == ["on postgres", "on postgres"]
    assert duplicate.status_code == 202 and again.status_code == 409
    assert again.json()["error"]["run_id"] == duplicate.json()["run_id"]
