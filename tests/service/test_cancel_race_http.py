"""The cancel race through the real HTTP API (issue 17): 200 concurrent runs, each followed over SSE and
cancelled with ``POST /v1/runs/{id}/cancel`` at a random point while its stream is open.

The server is a real uvicorn on a loopback port of its own: ``httpx.ASGITransport`` (the in-process client of
the other service tests) runs the app to completion and buffers the whole body before it returns a response, so
an SSE stream that ends only after the cancel would wait for itself forever.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import uvicorn
from agentrunner import codec as json
from agentrunner_host.http import create_app
from agentrunner_host.service import HostService
from httpx_sse import aconnect_sse
from loopback_uvicorn import serve_on_loopback

from .conftest import SettingsFactory
from .fakes import FAST_RUNNER_ID, FakeFastStreamer, install_fakes

# About a minute per mode on the loaded shared machine: a generous hang guard instead of the suite's 120 s.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

RUNS = 200
DELAY_MS = 200
"""Between two deltas of a run. 200 live runs then produce 1,000 results a second in all, which one loaded
2-core machine serves with the SSE clients in the same process; a cancel after 1-15 results lands in a run's
first 3 s. (Fast single streams are raced at random points in tests/host/test_faults.py, through the
orchestrator.) Much faster, the SSE readers fall behind the live window and replay from the store, and at
200 x 20 results a second the run-start reads and the cancel endpoint's run read waited over 30 s for one of
the 15 pooled database connections and failed with 500: a capacity limit, reported, not what this tests."""
PLUGINS = Path(__file__).resolve().parent / "plugins"
"""``tests/slow``: its dripper streams out of process, as fast as it is read with ``delay_ms = 0``."""
_OUT_OF_PROCESS_TOML = f"""
[runners]
plugin_dirs = ["{PLUGINS}"]

[[agents]]
agent_id = "race"
runner_id = "plugin:tests/slow/dripper"
runner_config = {{ count = 1000000, delay_ms = {DELAY_MS} }}

[[bindings]]
binding_id = "race"
agent_id = "race"
scope = {{ type = "conversation", id = "race" }}
"""


@pytest.fixture(params=["in-process", "out-of-process"])
def race_mode(request: pytest.FixtureRequest) -> str:
    """Where the streaming runner runs."""
    mode: str = request.param
    return mode


@pytest.fixture
async def race_service(race_mode: str, make_settings: SettingsFactory) -> AsyncIterator[HostService]:
    """A service with a runner streaming without end (bound to conversation ``race`` out of process; in
    process the test binds it through the API)."""
    toml = _OUT_OF_PROCESS_TOML if race_mode == "out-of-process" else None
    async with HostService.open(make_settings(toml)) as opened:
        if race_mode == "in-process":
            install_fakes(opened, FakeFastStreamer())
        yield opened


@pytest.fixture
async def base_url(race_service: HostService) -> AsyncIterator[str]:
    """The service's API served by uvicorn on a loopback port the kernel picks (no port race with others)."""
    # uvicorn closes a keep-alive connection idle for 5 s; on a loaded machine the client can pick that very
    # connection from its pool as it closes (a ReadError). No idle timeout within the test's life.
    config = uvicorn.Config(
        create_app(race_service, api_token=None),
        host="127.0.0.1",
        port=0,
        lifespan="off",
        log_level="warning",
        timeout_keep_alive=600,
    )
    async with serve_on_loopback(config) as port:
        yield f"http://127.0.0.1:{port}"


@dataclass
class _Race:
    """What one client saw of its run."""

    cancel_after: int
    run_id: str = ""
    events: list[tuple[int, str, dict[str, object]]] = field(
        default_factory=list[tuple[int, str, dict[str, object]]]
    )
    cancel_status: int = 0
    cancel_body: dict[str, object] = field(default_factory=dict[str, object])


async def _bind_in_process(client: httpx.AsyncClient) -> None:
    agent = await client.post(
        "/v1/agents",
        json={"agent_id": "race", "runner_id": FAST_RUNNER_ID, "runner_config": {"delay_ms": DELAY_MS}},
    )
    assert agent.status_code == 201, agent.text
    binding = await client.post(
        "/v1/bindings",
        json={"binding_id": "race", "agent_id": "race", "scope": {"type": "conversation", "id": "race"}},
    )
    assert binding.status_code == 201, binding.text


class _AllLive:
    """Every run has started and its stream is open: from then on the clients count toward their cancel point,
    so all 200 runs are live at once when the cancels come. Submissions go a few at a time until then (200
    run starts at once only measure how long 200 start reads queue for the database pool)."""

    def __init__(self, runs: int) -> None:
        self.waiting = runs
        self.event = asyncio.Event()
        self.submitting = asyncio.Semaphore(16)

    def started(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.event.set()


async def _one(client: httpx.AsyncClient, race: _Race, n: int, live: _AllLive) -> None:
    """Submit, follow the live SSE stream, cancel after ``cancel_after`` more results once every run is live,
    read on to the end."""
    body = {"text": f"race {n}", "conversation_id": "race"}
    counted = 0
    await live.submitting.acquire()
    submitting = True
    try:
        async with aconnect_sse(client, "POST", "/v1/events", json=body) as source:
            assert source.response.status_code == 200, source.response.status_code
            async for sse in source.aiter_sse():
                if not sse.data:
                    # A ``: keep-alive`` comment (a quiet stream on a loaded machine): httpx-sse hands it out as
                    # an event without data, because the spec keeps the last event id across events.
                    continue
                data = json.loads(sse.data)
                race.events.append((int(sse.id), sse.event, data))
                if submitting:
                    submitting = False
                    live.submitting.release()
                    race.run_id = str(data["run_id"])
                    live.started()
                if not live.event.is_set():
                    continue  # keep reading (a reader that stops falls behind the live window)
                counted += 1
                if counted == race.cancel_after:
                    answer = await client.post(f"/v1/runs/{race.run_id}/cancel")
                    race.cancel_status, race.cancel_body = answer.status_code, answer.json()
    finally:
        if submitting:
            live.submitting.release()


async def test_two_hundred_runs_cancelled_over_http_while_their_streams_are_open(
    race_mode: str, race_service: HostService, base_url: str
) -> None:
    """Every cancel is answered (200 or 202, never 5xx); every run's stream ends with exactly one terminal,
    ``run.failed`` / ``cancelled``; the stored results are exactly what the client saw; the host stays up."""
    rng = random.Random(1717)
    races = [_Race(cancel_after=rng.randint(1, 15)) for _ in range(RUNS)]
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(120.0)  # a hang guard on a loaded machine, not a timing claim
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout) as client:
        if race_mode == "in-process":
            await _bind_in_process(client)
        live = _AllLive(RUNS)
        await asyncio.gather(*(_one(client, race, n, live) for n, race in enumerate(races)))

        for race in races:
            assert race.cancel_status in (200, 202), (race.cancel_status, race.cancel_body)
            assert race.cancel_body["cancelled"] is True, race.cancel_body
            ids = [i for i, _, _ in race.events]
            assert ids == list(range(1, len(ids) + 1)), ids  # nothing lost, nothing twice
            kinds = [k for _, k, _ in race.events]
            terminals = [k for k in kinds if k in ("run.completed", "run.failed")]
            assert terminals == ["run.failed"] and kinds[-1] == "run.failed", kinds[-5:]
            final = race.events[-1][2]["data"]
            assert isinstance(final, dict) and final["code"] == "cancelled", final
            run = (await client.get(f"/v1/runs/{race.run_id}")).json()
            assert (run["status"], run["code"]) == ("failed", "cancelled"), run
            stored = (await client.get(f"/v1/runs/{race.run_id}/results", params={"limit": 1000})).json()
            assert stored["done"] is True
            assert [(r["host_seq"], r["type"]) for r in stored["results"]] == [
                (i, k) for i, k, _ in race.events
            ]

        assert race_service.host.dispatcher.live_count() == 0
        assert (await client.get("/readyz")).status_code == 200
        alive = await client.post(
            "/v1/events?wait=true", json={"text": "still here", "conversation_id": "after"}
        )
        assert alive.status_code == 200 and alive.json()["run"]["status"] == "completed", alive.text
