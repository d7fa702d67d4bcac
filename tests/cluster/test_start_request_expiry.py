"""A ``start`` request whose sender is gone (it died, or its client went away) before it read the answer is
deleted by the request sweep of any host once it is older than a sender ever waits, instead of staying
until its target leaves."""

from __future__ import annotations

import asyncio

import pytest
from agentrunner_host.service import HostService
from agentrunner_host.service import host_service as host_service_module

from .conftest import HostSettings

pytestmark = [pytest.mark.timeout(300)]

_WAIT = 120.0


async def test_the_request_sweep_deletes_a_start_nobody_will_read(
    shared_url: str, host_settings: HostSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start addressed to a registered host that never takes it (and whose sender never comes back) stays
    through pruning (its target is registered); with the sweep's age limit at zero, A's own request watcher
    deletes it."""
    async with HostService.open(host_settings("a", shared_url)) as a:
        requests = a.stores.requests
        await a.stores.hosts.register("host_quiet", machine="m-quiet", pid=1, lease_ms=3_600_000)
        stale = await requests.ask("host_quiet", "start", body={"event": {}})
        assert await requests.answer_of(stale) == (False, None) and await requests.has_pending("host_quiet")
        assert await a.expire_start_requests() == 0  # younger than any sender waits: kept
        monkeypatch.setattr(host_service_module, "_START_REQUEST_TTL_SECONDS", 0.0)
        monkeypatch.setattr(host_service_module, "_REQUESTS_PRUNE_SECONDS", 0.0)
        async with asyncio.timeout(_WAIT):
            while await requests.has_pending("host_quiet"):  # noqa: ASYNC110 - the sweep announces nothing
                await asyncio.sleep(0.05)
