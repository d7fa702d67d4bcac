"""Start-up recovery: runs a crash left ``running`` are closed as ``host_restarted`` and replayable."""

from __future__ import annotations

import asyncio

from agentrunner_host.service import HostService
from agentrunner_host.stores import HOST_RESTARTED, HostStores, RunStart
from agentrunner_host.stores.engine import create_engine, upgrade

from .conftest import SettingsFactory, client_for
from .fakes import GATED_RUNNER_ID, FakeGatedRunner, install_fakes


async def test_runs_left_running_by_a_crash_are_closed_at_start(make_settings: SettingsFactory) -> None:
    """A ``running`` row from a previous process ends ``failed``/``host_restarted`` with a terminal result."""
    settings = make_settings()
    settings.data_dir.mkdir(parents=True)
    engine = create_engine(settings.database_url)
    try:
        await upgrade(engine)
        stores = await HostStores.open(engine, data_dir=settings.data_dir)
        await stores.runs.start(
            RunStart(
                run_id="run_crashed",
                runner_id="plugin:agentrunner/echo/default",
                plugin_id="agentrunner/echo",
                binding_id="default",
                event_id="evt_crashed",
                conversation=None,
                snapshot={},
                snapshot_hash="h",
                deadline_at=None,
                started_at=1,
            )
        )
        await stores.aclose()
    finally:
        await engine.dispose()

    async with HostService.open(settings) as service, client_for(service) as client:
        assert service.recovered_runs == ["run_crashed"]
        run = (await client.get("/v1/runs/run_crashed")).json()
        results = (await client.get("/v1/runs/run_crashed/results")).json()
    assert run["status"] == "failed" and run["code"] == HOST_RESTARTED and run["live"] is False
    assert [r["type"] for r in results["results"]] == ["run.failed"] and results["done"] is True


async def test_closing_the_service_cancels_live_runs_and_records_them(make_settings: SettingsFactory) -> None:
    """Shutdown ends a live run ``run.failed``/``cancelled`` (not ``host_restarted``) and refuses new events."""
    settings = make_settings()
    runner = FakeGatedRunner()
    async with HostService.open(settings) as service, client_for(service) as client:
        install_fakes(service, runner)
        await client.post("/v1/agents", json={"agent_id": "gated", "runner_id": GATED_RUNNER_ID})
        await client.post(
            "/v1/bindings",
            json={"binding_id": "gated", "agent_id": "gated", "scope": {"type": "bot", "id": "g"}},
        )
        run_id = (await client.post("/v1/events", json={"text": "x", "bot_id": "g"})).json()["run_id"]
        await asyncio.wait_for(runner.started.wait(), timeout=60)  # a hang guard, not a timing bound
        await service.cancel_all()
        refused = await client.post("/v1/events", json={"text": "late"})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "unavailable"
    async with HostService.open(settings) as service, client_for(service) as client:
        assert service.recovered_runs == []
        run = (await client.get(f"/v1/runs/{run_id}")).json()
    assert run["status"] == "failed" and run["code"] == "cancelled"
