"""A live event stream over the real server (``serve``'s uvicorn configuration, whose connections send one
loop turn's writes as one): its head and results leave as they are sent, not when the run ends."""

from __future__ import annotations

import httpx
from agentrunner_host.http import create_app
from agentrunner_host.http.server import server_config
from agentrunner_host.service import HostService
from loopback_uvicorn import serve_on_loopback

from .fakes import GATED_RUNNER_ID, FakeGatedRunner, install_fakes


async def test_a_live_stream_sends_its_head_and_first_result_while_the_run_waits(
    service: HostService,
) -> None:
    """The answer's head and the run's first delta reach the client while the run is held at its gate; the
    rest follows once it goes on."""
    runner = FakeGatedRunner()
    install_fakes(service, runner)
    app = create_app(service, api_token=None)
    config = server_config(app, host="127.0.0.1", port=0, http=service.settings.config.http)
    async with (
        serve_on_loopback(config) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
    ):
        agent = await client.post("/v1/agents", json={"agent_id": "gated", "runner_id": GATED_RUNNER_ID})
        assert agent.status_code == 201, agent.text
        body = {"text": "hi", "agent_id": "gated"}
        async with client.stream("POST", "/v1/events?stream=true", json=body) as response:
            assert response.status_code == 200 and response.headers["x-run-id"].startswith("run_")
            lines = response.aiter_lines()
            async for line in lines:
                if line == "event: message.delta":
                    break
            assert not runner.gate.is_set()  # the first result came while the run waits
            runner.gate.set()
            rest = [line async for line in lines]
        assert "event: run.completed" in rest
