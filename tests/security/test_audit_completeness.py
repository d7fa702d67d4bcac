"""Audit completeness across run kinds, and audit records of a run that is still live.

One runner (the ``security/audited`` test plugin) makes three back-calls, the second after the test lets it go
on. It runs in the host process, in a plugin process of its own, and as a remote runtime (the real
``agentrunner-plugin --connect`` over the authenticated WebSocket). In every kind the first call's record is
queryable over ``GET /v1/audit`` while the run is still running, and once it ended the run has its start,
its end and exactly one record per call, in call order, with its decision. Both engines: SQLite in the data
directory, and a PostgreSQL database made for the test (``AGENTRUNNER_TEST_PG_URL``; skipped without it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentrunner import codec
from agentrunner.wire import load_runners
from agentrunner.wire.websocket import TOKEN_ENV
from agentrunner_host.runtime import RemoteRuntimeServer
from agentrunner_host.runtime.inprocess import InProcessConnection
from agentrunner_host.service import HostService
from pg_databases import temporary_pg_database

from .conftest import SettingsFactory, client_for

PLUGIN_DIR = Path(__file__).parent / "plugins" / "audited"
PLUGIN = "security/audited"
RUNNER = "plugin:security/audited/audited"
TOKEN = "audited-runtime-token-0123456789"
KINDS = ["in_process", "subprocess", "remote"]


async def _eventually(probe: Any, what: str, *, timeout: float = 120.0) -> Any:
    """Poll *probe* (an async callable) until it returns something truthy; generous, for a loaded machine."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def engine_env(request: pytest.FixtureRequest) -> AsyncIterator[dict[str, str]]:
    """The service's environment for one engine: nothing (SQLite in the data directory), or the URL of a
    PostgreSQL database created for the test and dropped afterwards."""
    if request.param == "sqlite":
        yield {}
        return
    async with temporary_pg_database() as url:
        yield {"AGENTRUNNER_DATABASE_URL": url}


@contextlib.asynccontextmanager
async def _host(
    kind: str, make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> AsyncGenerator[HostService]:
    """A service serving the audited runner as *kind*, on the engine *environ* names."""
    toml = None
    if kind == "subprocess":
        toml = f"[runners]\nplugin_dirs = [{codec.dumps_str(str(PLUGIN_DIR))}]\n"
    async with HostService.open(make_settings(toml, environ=environ)) as service:
        if kind == "in_process":
            monkeypatch.setattr(sys, "path", list(sys.path))  # load_runners puts the plugin dir on sys.path
            runners = load_runners(plugin_dir=PLUGIN_DIR)
            service.host.registry.add(InProcessConnection(PLUGIN, runners, handler=service.host.dispatcher))
            yield service
        elif kind == "remote":
            async with RemoteRuntimeServer(
                service.host.dispatcher, tokens={PLUGIN: TOKEN}, connect_timeout=120.0
            ) as server:
                service.host.registry.add(server.connection(PLUGIN))
                env = {"PATH": os.environ["PATH"], TOKEN_ENV: TOKEN}
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "agentrunner.wire.plugin",
                    "--plugin-dir",
                    str(PLUGIN_DIR),
                    "--connect",
                    server.url,
                    env=env,
                    stderr=asyncio.subprocess.DEVNULL,
                )
                try:
                    yield service
                finally:
                    if proc.returncode is None:
                        proc.kill()
                    await proc.wait()
        else:
            yield service


async def _audit(client: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    response = await client.get("/v1/audit", params={"run_id": run_id, "order": "asc"})
    assert response.status_code == 200, response.text
    return response.json()["entries"]


@pytest.mark.parametrize("kind", KINDS)
async def test_every_call_is_audited_once_and_queryable_while_the_run_is_live(
    kind: str,
    tmp_path: Path,
    make_settings: SettingsFactory,
    monkeypatch: pytest.MonkeyPatch,
    engine_env: dict[str, str],
) -> None:
    """In process, in a plugin process and as a remote runtime: the first call's record is served while the
    run waits; at the end there are exactly three records (set, get, the refused tool call), in call order,
    none twice, between the run's start and its end."""
    hold = tmp_path / "go-on"
    async with _host(kind, make_settings, monkeypatch, engine_env) as service, client_for(service) as client:
        agent = {"agent_id": "audited", "runner_id": RUNNER, "runner_config": {"hold": str(hold)}}
        assert (await client.post("/v1/agents", json=agent)).status_code == 201, kind
        accepted = await client.post(
            "/v1/events", json={"agent_id": "audited", "conversation_id": "c-1", "text": "go"}
        )
        assert accepted.status_code == 202, accepted.text
        run_id = accepted.json()["run_id"]

        live = await _eventually(lambda: _audit(client, run_id), "the first call's record while live")
        status = (await client.get(f"/v1/runs/{run_id}")).json()
        assert status["status"] == "running", status  # the runner is still waiting for the file
        assert [(e["action"], e["decision"]) for e in live] == [("storage.set", "allowed")]

        hold.touch()
        feed = service.feed(run_id)
        assert feed is not None
        await asyncio.wait_for(feed.outcome(), 120)
        entries = await _audit(client, run_id)
        records = await service.stores.events.for_run(run_id)

    assert [(e["action"], e["resource"], e["decision"]) for e in entries] == [
        ("storage.set", "seen", "allowed"),
        ("storage.get", "seen", "allowed"),
        ("tools.call", "shell", "unauthorized"),
    ], kind
    assert entries[0]["seq"] == live[0]["seq"]  # the record served live is the one kept, not a copy
    assert all(e["runner_id"] == RUNNER and e["plugin_id"] == PLUGIN for e in entries)
    assert [e["at"] for e in entries] == sorted(e["at"] for e in entries)
    kinds = [r.event_type for r in records]
    assert kinds[0] == "run.started" and kinds[-1] == "run.completed", kinds
    assert kinds.count("host.backcall") == 3, kinds


async def test_a_run_ending_at_once_stores_its_records_with_its_end(
    make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch, engine_env: dict[str, str]
) -> None:
    """A run that ends before the live writer's delay writes its records in its end's transaction: the
    same three records, once each."""
    async with (
        _host("in_process", make_settings, monkeypatch, engine_env) as service,
        client_for(service) as client,
    ):
        agent = {"agent_id": "audited", "runner_id": RUNNER}
        assert (await client.post("/v1/agents", json=agent)).status_code == 201
        done = await client.post(
            "/v1/events?wait=true", json={"agent_id": "audited", "conversation_id": "c-2", "text": "go"}
        )
        assert done.status_code == 200, done.text
        run_id = done.json()["run"]["run_id"]
        entries = await _audit(client, run_id)
    assert [e["action"] for e in entries] == ["storage.set", "storage.get", "tools.call"]
