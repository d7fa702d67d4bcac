"""A cancel another host sends as soon as it sees a run's committed start is not lost when the owner takes it
before its orchestrator holds the run: between the start's commit and the run's registration there is a
moment in which the run is ``running`` in the store (so another host asks) but unknown to the owner's
orchestrator. The owner keeps such a cancel and applies it once the run is registered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from agentrunner import AgentInput
from agentrunner_host.definitions import AgentEventEnvelope
from agentrunner_host.service import HostService
from agentrunner_host.stores import RunStart, StartFacts, StartReads
from service.fakes import GATED_RUNNER_ID, FakeGatedRunner, install_fakes

from .conftest import HostSettings, client_for

pytestmark = [pytest.mark.timeout(300)]

_WAIT = 120.0


async def _until(what: str, check: Callable[[], bool]) -> None:
    """Wait (generously) for a condition the service changes on its own event loop."""
    async with asyncio.timeout(_WAIT):
        while not check():  # noqa: ASYNC110 - the condition has no event of its own
            await asyncio.sleep(0.01)
    assert check(), what


async def test_a_cancel_taken_between_a_runs_committed_start_and_its_registration_ends_the_run(
    shared_url: str, host_settings: HostSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's start of a run is held right after its commit (the run is ``running`` and owned by A in the store,
    A's orchestrator does not hold it yet). B cancels it: a stored request A takes at once. Once A's start
    goes on, the run ends ``cancelled`` instead of running on (without the kept cancel it ran until its
    runner finished: the request row was deleted when taken)."""
    runner = FakeGatedRunner()
    async with (
        HostService.open(host_settings("a", shared_url)) as a,
        HostService.open(host_settings("b", shared_url)) as b,
        client_for(b) as client_b,
    ):
        install_fakes(a, runner)
        install_fakes(b, FakeGatedRunner())
        agent = {"agent_id": "gated", "runner_id": GATED_RUNNER_ID}
        assert (await client_b.post("/v1/agents", json=agent)).status_code == 201
        await a.reload_definitions()

        committed = asyncio.Event()
        release = asyncio.Event()
        start_run = a.stores.start_run

        async def held_start(reads: StartReads, build: Callable[[StartFacts], RunStart]) -> StartFacts:
            facts = await start_run(reads, build)
            committed.set()
            await release.wait()
            return facts

        monkeypatch.setattr(a.stores, "start_run", held_start)
        event = AgentEventEnvelope(
            event_id="evt-cancel-before-registration",
            event_type="message.received",
            input=AgentInput(text="x"),
            conversation_id="early-cancel",
        )
        submitting = asyncio.create_task(a.submit(event, agent_id="gated"))
        await committed.wait()
        run_id = await b.stores.runs.for_event(event.event_id)
        assert run_id is not None
        assert a.host.orchestrator.handle(run_id) is None  # committed, not registered

        cancel = await client_b.post(f"/v1/runs/{run_id}/cancel")
        assert cancel.status_code == 202, cancel.text
        assert cancel.json()["cancelled"] is True

        await _until("A to take the cancel request", lambda: a.requests_taken == 1)
        release.set()
        feed = await submitting
        outcome = await asyncio.wait_for(feed.outcome(), _WAIT)
        assert outcome.status == "failed" and outcome.code == "cancelled"
        assert not runner.gate.is_set()  # ended by the cancel, not by its runner
        status = (await client_b.get(f"/v1/runs/{run_id}")).json()
        assert status["status"] == "failed" and status["code"] == "cancelled"
