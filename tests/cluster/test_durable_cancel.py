"""A cancel of a run another host executes is a stored request, not only a notification: the owner takes it
when its listening connection comes back, even though the notification was sent while it was down."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from agentrunner import AgentInput
from agentrunner_host.definitions import AgentEventEnvelope
from agentrunner_host.service import HostService
from agentrunner_host.service import host_service as host_service_module
from agentrunner_host.stores.engine import create_engine
from service.fakes import GATED_RUNNER_ID, FakeGatedRunner, install_fakes
from sqlalchemy import text

from .conftest import HostSettings, client_for

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]

_WAIT = 120.0


async def _until(what: str, check: Callable[[], bool]) -> None:
    """Wait (generously) for a condition the service changes on its own event loop."""
    async with asyncio.timeout(_WAIT):
        while not check():  # noqa: ASYNC110 - the condition has no event of its own
            await asyncio.sleep(0.01)
    assert check(), what


async def _terminate_backend(url: str, pid: int) -> None:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        await engine.dispose()


async def test_a_cancel_sent_while_the_owners_listener_was_down_is_taken_when_it_reconnects(
    pg_database: str, host_settings: HostSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A executes a run. A's listening connection is killed and its reconnect held back; B cancels the run
    (stored request + NOTIFY, which A cannot hear). With A's safety poll made very long, the run goes on
    while A is deaf; once A reconnects it reads the stored request and the run ends cancelled."""
    monkeypatch.setattr(host_service_module, "_REQUESTS_POLL_LISTENING", 3600.0)
    runner = FakeGatedRunner()
    async with (
        HostService.open(host_settings("a", pg_database)) as a,
        HostService.open(host_settings("b", pg_database)) as b,
        client_for(b) as client_b,
    ):
        install_fakes(a, runner)
        install_fakes(b, FakeGatedRunner())
        agent = {"agent_id": "gated", "runner_id": GATED_RUNNER_ID}
        assert (await client_b.post("/v1/agents", json=agent)).status_code == 201
        await a.reload_definitions()
        feed = await a.submit(
            AgentEventEnvelope(
                event_id="evt-durable-cancel",
                event_type="message.received",
                input=AgentInput(text="x"),
                conversation_id="slow",
            ),
            agent_id="gated",
        )
        await runner.started.wait()

        held = asyncio.Event()
        reconnecting = asyncio.Event()
        import asyncpg

        async def held_connect(dsn: str) -> object:
            reconnecting.set()
            await held.wait()
            connect: Callable[..., Awaitable[object]] = asyncpg.connect
            return await connect(dsn, timeout=10)

        a.notifications.connector = held_connect
        pid = a.notifications.backend_pid
        assert pid is not None
        await _terminate_backend(pg_database, pid)
        await reconnecting.wait()  # A's listener is down and trying to come back
        assert not a.notifications.connected.is_set()

        cancel = await client_b.post(f"/v1/runs/{feed.run_id}/cancel")
        assert cancel.status_code == 202, cancel.text  # the owner did not hear it: still running
        assert cancel.json() == {
            "run_id": feed.run_id,
            "cancelled": True,
            "status": "running",
            "cancelling": True,
        }
        assert a.requests_taken == 0 and not feed.done

        held.set()
        outcome = await asyncio.wait_for(feed.outcome(), _WAIT)
        assert outcome.status == "failed" and outcome.code == "cancelled"
        assert a.requests_taken == 1
        await _until("A to listen again", a.notifications.connected.is_set)
        status = (await client_b.get(f"/v1/runs/{feed.run_id}")).json()
        assert status["status"] == "failed" and status["code"] == "cancelled"
