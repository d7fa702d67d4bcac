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
from agentrunner_host.stores import RunStart, StartFacts, StartReads

from .conftest import HostSettings
from .gated import assert_ended_cancelled, cancel_through, gated_hosts, until

pytestmark = [pytest.mark.timeout(300)]


async def test_a_cancel_taken_between_a_runs_committed_start_and_its_registration_ends_the_run(
    shared_url: str, host_settings: HostSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's start of a run is held right after its commit (the run is ``running`` and owned by A in the store,
    A's orchestrator does not hold it yet). B cancels it: a stored request A takes at once. Once A's start
    goes on, the run ends ``cancelled`` instead of running on (without the kept cancel it ran until its
    runner finished: the request row was deleted when taken)."""
    async with gated_hosts(host_settings, shared_url) as hosts:
        a, b = hosts.a, hosts.b
        committed = asyncio.Event()
        release = asyncio.Event()
        start_run = a.stores.start_run

        async def held_start(reads: StartReads, build: Callable[[StartFacts], RunStart]) -> StartFacts:
            facts = await start_run(reads, build)
            committed.set()
            await release.wait()
            return facts

        async def committed_first(reads: StartReads, /, *, event_id: str | None) -> StartFacts | None:
            return None  # the start is committed before the run is registered (PostgreSQL's way, always)

        monkeypatch.setattr(a.stores, "start_run", held_start)
        # on SQLite a start normally rides in the journal's commit, made only after the run is registered:
        # the window tested here is that of a start committed on its own
        monkeypatch.setattr(a.stores, "read_start", committed_first)
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

        await cancel_through(hosts.client_b, run_id)

        await until("A to take the cancel request", lambda: a.requests_taken == 1)
        release.set()
        feed = await submitting
        assert feed.run_id == run_id
        await assert_ended_cancelled(feed, hosts.client_b)
        assert not hosts.runner.gate.is_set()  # ended by the cancel, not by its runner
