"""The service forgets old idempotency answers: ``[state] idempotency_ttl_seconds`` reaches the sweep, and the
service's periodic sweeper calls it. Answers are aged in the database, so nothing waits on the clock's
passing; the periodic test waits for the sweeper's effect, a condition, not for a time."""

from __future__ import annotations

import asyncio

import pytest
from agentrunner_host.config import ConfigFileError
from agentrunner_host.service import HostService
from sqlalchemy import text

from .conftest import SettingsFactory

SCOPE = ("agentrunner/echo", "default", "state.set")


async def _age(service: HostService, key: str, *, ms: int) -> None:
    async with service.stores.engine.begin() as conn:
        await conn.execute(
            text("UPDATE idempotency_keys SET created_at = created_at - :ms WHERE key = :key"),
            {"ms": ms, "key": key},
        )


async def test_answers_older_than_the_ttl_are_forgotten_and_younger_ones_kept(
    make_settings: SettingsFactory,
) -> None:
    async with HostService.open(make_settings("[state]\nidempotency_ttl_seconds = 3600\n")) as service:
        keys = service.stores.idempotency
        await keys.put(SCOPE, "old", {"answer": 1})
        await keys.put(SCOPE, "young", {"answer": 2})
        assert await service.sweep_idempotency_keys() == 0
        await _age(service, "old", ms=3_601_000)
        await _age(service, "young", ms=3_000_000)
        assert await service.sweep_idempotency_keys() == 1
        assert await keys.get(SCOPE, "old") is None
        assert await keys.get(SCOPE, "young") == {"answer": 2}
        # A forgotten key acts again: its next answer is stored as the first.
        assert await keys.put(SCOPE, "old", {"answer": 3}) == {"answer": 3}


async def test_the_services_periodic_sweeper_forgets_old_answers(make_settings: SettingsFactory) -> None:
    toml = "[state]\nidempotency_ttl_seconds = 3600\nsweep_interval_seconds = 0.05\n"
    async with HostService.open(make_settings(toml)) as service:
        keys = service.stores.idempotency
        await keys.put(SCOPE, "old", {"answer": 1})
        await keys.put(SCOPE, "young", {"answer": 2})
        await _age(service, "old", ms=7_200_000)

        async def forgotten() -> None:
            while await keys.get(SCOPE, "old") is not None:  # noqa: ASYNC110 - the sweeper's effect is in the database
                await asyncio.sleep(0.02)

        await asyncio.wait_for(forgotten(), timeout=60)
        assert await keys.get(SCOPE, "young") == {"answer": 2}


def test_the_default_ttl_is_a_week_and_must_be_positive(make_settings: SettingsFactory) -> None:
    assert make_settings().config.state.idempotency_ttl_seconds == 7 * 24 * 3600
    with pytest.raises(ConfigFileError, match="idempotency_ttl_seconds"):
        make_settings("[state]\nidempotency_ttl_seconds = 0\n")
