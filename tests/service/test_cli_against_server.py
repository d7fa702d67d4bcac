"""``agentrunner runs cancel/show --url`` against a real HTTP server on loopback (uvicorn in this process)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvicorn
from agentrunner import codec as json
from agentrunner_host.cli import EXIT_FAILURE, EXIT_OK, cli
from agentrunner_host.http import create_app
from agentrunner_host.http.schemas import RunOut
from agentrunner_host.service import HostService, RunView
from loopback_uvicorn import serve_on_loopback

from .conftest import TOKEN, client_for
from .fakes import GATED_RUNNER_ID, FakeGatedRunner, install_fakes


@pytest.fixture
async def server(service: HostService) -> AsyncIterator[str]:
    """The service's API with a token, served by uvicorn on a loopback port the kernel picks (port 0; the
    bound port read from the listening socket, so no other process can take it in between)."""
    config = uvicorn.Config(
        create_app(service, api_token=TOKEN), host="127.0.0.1", port=0, lifespan="off", log_level="warning"
    )
    async with serve_on_loopback(config) as port:
        yield f"http://127.0.0.1:{port}"


async def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = await asyncio.to_thread(cli, list(argv), out=out)
    return code, out.getvalue()


async def test_runs_cancel_stops_a_live_run_through_the_servers_api(
    service: HostService, server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The CLI sends the token from the environment; the live run ends cancelled; show reads it back."""
    monkeypatch.setenv("AGENTRUNNER_API_TOKEN", TOKEN)
    monkeypatch.delenv("AGENTRUNNER_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    runner = FakeGatedRunner()
    install_fakes(service, runner)
    async with client_for(service) as client:
        await client.post("/v1/agents", json={"agent_id": "gated", "runner_id": GATED_RUNNER_ID})
        await client.post(
            "/v1/bindings",
            json={"binding_id": "gated", "agent_id": "gated", "scope": {"type": "bot", "id": "g"}},
        )
        run_id = (await client.post("/v1/events", json={"text": "x", "bot_id": "g"})).json()["run_id"]
    await asyncio.wait_for(runner.started.wait(), timeout=60)  # a hang guard, not a timing bound
    code, out = await _cli("runs", "cancel", run_id, "--url", server)
    assert code == EXIT_OK and json.loads(out) == {
        "run_id": run_id,
        "cancelled": True,
        "status": "failed",
        "cancelling": False,
    }
    code, out = await _cli("runs", "show", run_id, "--url", server)
    assert code == EXIT_OK and json.loads(out)["code"] == "cancelled"
    monkeypatch.setenv("AGENTRUNNER_API_TOKEN", "wrong")
    code, _ = await _cli("runs", "show", run_id, "--url", server)
    assert code == EXIT_FAILURE


def _fields_declared_by(model: type[object]) -> set[str]:
    return set(vars(model).get("__annotations__", {}))


def test_the_http_run_body_is_the_service_run_view_with_no_fields_of_its_own() -> None:
    """``RunOut`` (the OpenAPI component) only renames ``RunView``: a field added to one is in the other."""
    assert issubclass(RunOut, RunView) and _fields_declared_by(RunOut) == set()
    assert RunOut.model_fields.keys() == RunView.model_fields.keys()


async def test_runs_show_prints_the_same_run_from_the_database_and_from_the_servers_api(
    service: HostService, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``runs show ID`` (the CLI reads the database) and ``runs show ID --url`` (it asks the server) print the
    same JSON for an ended run, and the same keys for a live one (only ``live`` can tell them apart)."""
    monkeypatch.setenv("AGENTRUNNER_API_TOKEN", TOKEN)
    # The offline command opens the service's own database.
    monkeypatch.setenv("AGENTRUNNER_DATA_DIR", str(service.settings.data_dir))
    for name in ("AGENTRUNNER_CONFIG", "AGENTRUNNER_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(service.settings.data_dir.parent)
    runner = FakeGatedRunner()
    install_fakes(service, runner)
    async with client_for(service) as client:
        await client.post("/v1/agents", json={"agent_id": "gated", "runner_id": GATED_RUNNER_ID})
        await client.post(
            "/v1/bindings",
            json={"binding_id": "gated", "agent_id": "gated", "scope": {"type": "bot", "id": "g"}},
        )
        answer = await client.post(
            "/v1/events?wait=true", json={"text": "hello", "conversation_id": "c1", "thread_id": "t1"}
        )
        ended = answer.json()["run"]["run_id"]
        live = (await client.post("/v1/events", json={"text": "x", "bot_id": "g"})).json()["run_id"]
    await asyncio.wait_for(runner.started.wait(), timeout=30)
    await asyncio.wait_for(_no_feed(service, ended), timeout=30)

    async def both(run_id: str) -> tuple[dict[str, object], dict[str, object]]:
        code_db, from_db = await _cli("runs", "show", run_id)
        code_http, from_http = await _cli("runs", "show", run_id, "--url", server)
        assert (code_db, code_http) == (EXIT_OK, EXIT_OK)
        return json.loads(from_db), json.loads(from_http)

    from_db, from_http = await both(ended)
    assert from_db == from_http
    assert from_db["status"] == "completed" and from_db["conversation_id"] == "c1"
    assert from_db["thread_id"] == "t1" and from_db["results"] == len(answer.json()["results"])
    assert set(from_db) == set(RunView.model_fields)

    from_db, from_http = await both(live)
    assert (from_db["live"], from_http["live"]) == (False, True) and from_db.keys() == from_http.keys()
    # The server counts the results it has delivered, the database those stored so far.
    same = {key for key in from_db if key not in {"live", "results"}}
    assert {k: from_db[k] for k in same} == {k: from_http[k] for k in same}
    assert from_http["status"] == "running"
    runner.gate.set()
    await asyncio.wait_for(_no_feed(service, live), timeout=30)


async def _no_feed(service: HostService, run_id: str) -> None:
    # A run's feed is dropped just after its end is stored; until then the server reports it live.
    while service.feed(run_id) is not None:  # noqa: ASYNC110 - no event: the service's pump task drops it
        await asyncio.sleep(0.01)
