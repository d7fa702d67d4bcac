"""A cancel of a run another host executes is a stored request, not only a notification: the owner takes it
when its listening connection comes back, even though the notification was sent while it was down."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from agentrunner import AgentInput
from agentrunner_host.definitions import AgentEventEnvelope
from agentrunner_host.service import host_service as host_service_module
from agentrunner_host.stores.engine import create_engine
from sqlalchemy import text

from .conftest import HostSettings
from .gated import assert_ended_cancelled, cancel_through, gated_hosts, until

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(300)]


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
    async with gated_hosts(host_settings, pg_database) as hosts:
        a = hosts.a
        feed = await a.submit(
            AgentEventEnvelope(
                event_id="evt-durable-cancel",
                event_type="message.received",
                input=AgentInput(text="x"),
                conversation_id="slow",
            ),
            agent_id="gated",
        )
        await hosts.runner.started.wait()

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

        answer = await cancel_through(hosts.client_b, feed.run_id)
        assert answer == {  # the owner did not hear it: still running
            "run_id": feed.run_id,
            "cancelled": True,
            "status": "running",
            "cancelling": True,
        }
        assert a.requests_taken == 0 and not feed.done

        held.set()
        await assert_ended_cancelled(feed, hosts.client_b)
        assert a.requests_taken == 1
        await until("A to listen again", a.notifications.connected.is_set)
