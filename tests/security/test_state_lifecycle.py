"""State lifecycle through the service: ``[state]`` TTLs reach the store, and the service's sweep deletes what
expired (state values and artifacts). Values are aged in the database, so nothing waits on the clock."""

from __future__ import annotations

from agentrunner_host.access import StateOwner
from agentrunner_host.service import HostService
from sqlalchemy import text

from .conftest import SettingsFactory

OWNER = StateOwner("conversation", ("r", "b", "c", ""))


async def test_configured_ttls_expire_and_the_service_sweeps_them(make_settings: SettingsFactory) -> None:
    toml = "[state]\nttl_seconds = { conversation = 3600 }\nkey_ttl_seconds = { 'keep.*' = 0 }\n"
    async with HostService.open(make_settings(toml)) as service:
        state = service.stores.state
        assert state.ttl.seconds("conversation", "k") == 3600
        assert state.ttl.seconds("conversation", "keep.me") is None
        await state.set(OWNER, "k", "v", runner_id=None)
        await state.set(OWNER, "keep.me", "v", runner_id=None)
        assert await service.sweep_expired() == (0, 0)
        async with service.stores.engine.begin() as conn:
            await conn.execute(text("UPDATE state_entries SET updated_at = updated_at - 7200000"))
        assert await state.get(OWNER, "k") is None
        assert await service.sweep_expired() == (1, 0)
        assert await state.get(OWNER, "keep.me") is not None
