"""``agentrunner runs cancel/show --url`` against a real HTTP server on loopback (uvicorn in this process)."""

from __future__ import annotations

import asyncio
import io
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvicorn
from agentrunner import codec as json
from agentrunner_host.cli import EXIT_FAILURE, EXIT_OK, cli
from agentrunner_host.http import create_app
from agentrunner_host.service import HostService

from .conftest import TOKEN, client_for
from .fakes import GATED_RUNNER_ID, FakeGatedRunner, install_fakes


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def server(service: HostService) -> AsyncIterator[str]:
    """The service's API with a token, served by uvicorn on a free loopback port."""
    port = _free_port()
    config = uvicorn.Config(
        create_app(service, api_token=TOKEN), host="127.0.0.1", port=port, lifespan="off", log_level="warning"
    )
    instance = uvicorn.Server(config)
    task = asyncio.create_task(instance.serve())
    while not instance.started:
        assert not task.done(), "uvicorn did not start"
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        instance.should_exit = True
        await task


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
    await asyncio.wait_for(runner.started.wait(), timeout=5)
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
