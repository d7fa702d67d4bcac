"""The service on PostgreSQL: a fresh database per test, reached with ``AGENTRUNNER_TEST_PG_URL``."""

from __future__ import annotations

import pytest
from agentrunner_host.service import HostService

from .conftest import SettingsFactory, client_for

pytestmark = pytest.mark.postgres


async def test_the_service_runs_events_and_serves_transcripts_on_postgresql(
    make_settings: SettingsFactory, pg_database: str
) -> None:
    """Migrations, a run, the transcript, readiness and a restart, all on PostgreSQL."""
    settings = make_settings(environ={"AGENTRUNNER_DATABASE_URL": pg_database})
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
