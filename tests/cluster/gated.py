"""The set-up and checks of the cross-host cancel tests: hosts A and B on one database, both serving the gated
fake runner (A's instance is the test's, so the test sees it start and knows its gate was never opened), and
a run cancelled through B's HTTP API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from agentrunner_host.service import HostService, RunFeed
from service.fakes import GATED_RUNNER_ID, FakeGatedRunner, install_fakes

from .conftest import HostSettings, client_for

__all__ = ["WAIT", "GatedHosts", "cancel_through", "assert_ended_cancelled", "gated_hosts", "until"]

# generous: these tests run on a loaded machine; the bound is a hang guard, not a timing
WAIT = 120.0


@dataclass(frozen=True)
class GatedHosts:
    a: HostService
    b: HostService
    client_b: httpx.AsyncClient
    runner: FakeGatedRunner
    """A's gated runner."""


@asynccontextmanager
async def gated_hosts(host_settings: HostSettings, url: str) -> AsyncGenerator[GatedHosts]:
    """A and B open on *url*, agent ``gated`` defined through B and loaded by A."""
    runner = FakeGatedRunner()
    async with (
        HostService.open(host_settings("a", url)) as a,
        HostService.open(host_settings("b", url)) as b,
        client_for(b) as client_b,
    ):
        install_fakes(a, runner)
        install_fakes(b, FakeGatedRunner())
        agent = {"agent_id": "gated", "runner_id": GATED_RUNNER_ID}
        assert (await client_b.post("/v1/agents", json=agent)).status_code == 201
        await a.reload_definitions()
        yield GatedHosts(a, b, client_b, runner)


async def until(what: str, check: Callable[[], bool]) -> None:
    """Wait for a condition the service changes on its own event loop."""
    async with asyncio.timeout(WAIT):
        while not check():  # noqa: ASYNC110 - the condition has no event of its own
            await asyncio.sleep(0.01)
    assert check(), what


async def cancel_through(client: httpx.AsyncClient, run_id: str) -> dict[str, object]:
    """Cancel *run_id* through *client*'s host, which accepts it (202, ``cancelled``); returns the answer."""
    response = await client.post(f"/v1/runs/{run_id}/cancel")
    assert response.status_code == 202, response.text
    answer: dict[str, object] = response.json()
    assert answer["cancelled"] is True
    return answer


async def assert_ended_cancelled(feed: RunFeed, client: httpx.AsyncClient) -> None:
    """The run of *feed* ends ``cancelled``, as its owner's feed and *client*'s host both say."""
    outcome = await asyncio.wait_for(feed.outcome(), WAIT)
    assert outcome.status == "failed" and outcome.code == "cancelled"
    status = (await client.get(f"/v1/runs/{feed.run_id}")).json()
    assert status["status"] == "failed" and status["code"] == "cancelled"
