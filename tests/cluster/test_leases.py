"""Run ownership and leases: a run records the host executing it; recovery closes only runs whose owner holds
no live lease (this machine's dead previous incarnation at once, another host once its lease expired), never
a live host's run."""

from __future__ import annotations

import subprocess
import sys

from agentrunner_host.service import HostService
from agentrunner_host.stores import RunStart

from .conftest import HostSettings, client_for

ECHO = "plugin:agentrunner/echo/default"
_LONG_MS = 600_000


def _start(run_id: str) -> RunStart:
    return RunStart(
        run_id=run_id,
        runner_id=ECHO,
        plugin_id="agentrunner/echo",
        binding_id="default",
        event_id=f"evt_{run_id}",
        conversation=None,
        snapshot={},
        snapshot_hash="h",
        deadline_at=None,
        started_at=1,
    )


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def _ghost_run(service: HostService, host_id: str, run_id: str, *, machine: str, pid: int) -> None:
    """Register another host incarnation and store a running run it owns (as that host would have)."""
    await service.stores.hosts.register(host_id, machine=machine, pid=pid, lease_ms=_LONG_MS)
    runs = service.stores.runs
    mine = runs.owner_host
    runs.owner_host = host_id
    try:
        await runs.start(_start(run_id))
    finally:
        runs.owner_host = mine


async def test_runs_record_their_owner_and_a_live_hosts_runs_are_never_closed(
    shared_url: str, host_settings: HostSettings
) -> None:
    """A's finished run names A as its owner; B starting with recovery and beating leaves a live host's
    running run alone; once that host's lease expires, B's next heartbeat closes it as host_restarted."""
    async with HostService.open(host_settings("a", shared_url)) as a, client_for(a) as client:
        done = (await client.post("/v1/events?wait=true", json={"text": "x"})).json()
        run = await a.stores.runs.get(done["run"]["run_id"])
        assert a.membership is not None and run is not None and run.owner_host == a.membership.host_id
        await _ghost_run(a, "host_other", "run_other", machine="elsewhere", pid=1)

        async with HostService.open(host_settings("b", shared_url)) as b:
            assert b.membership is not None
            assert "run_other" not in b.recovered_runs
            assert await b.membership.beat() == []
            still = await b.stores.runs.get("run_other")
            assert still is not None and still.status == "running"
            hosts = {h.host_id: h for h in await b.stores.hosts.registered()}
            assert hosts[a.membership.host_id].live and hosts[b.membership.host_id].live

            await b.stores.hosts.renew("host_other", lease_ms=-1)  # its lease is over now
            assert await b.membership.beat() == ["run_other"]
            closed = await b.stores.runs.get("run_other")
            assert closed is not None and closed.status == "failed" and closed.code == "host_restarted"
            replay = await b.stored_results("run_other", after=0, limit=10)
            assert [r.type for r in replay] == ["run.failed"]
            assert await b.membership.beat() == []  # closed once
        mine = await a.stores.runs.get(done["run"]["run_id"])
        assert mine is not None and mine.status == "completed"


async def test_a_restart_on_the_same_machine_closes_the_previous_incarnations_runs_at_once(
    shared_url: str, host_settings: HostSettings
) -> None:
    """The runs of a dead process of this machine (its lease still long) are closed when the new one starts;
    a live process of this machine (the same pid space, a different, living pid) keeps its runs."""
    settings = host_settings("a", shared_url)
    async with HostService.open(settings) as first:
        assert first.membership is not None
        machine = first.membership.machine
        await _ghost_run(first, "host_dead", "run_dead", machine=machine, pid=_dead_pid())
        await _ghost_run(first, "host_alive", "run_alive", machine=machine, pid=1)
    async with HostService.open(settings) as second:
        assert second.recovered_runs == ["run_dead"]
        alive = await second.stores.runs.get("run_alive")
        assert alive is not None and alive.status == "running"
        registered = {h.host_id for h in await second.stores.hosts.registered()}
        assert "host_dead" not in registered and first.membership.host_id not in registered


async def test_chat_style_processes_close_nothing(shared_url: str, host_settings: HostSettings) -> None:
    """A service opened without recovery (``agentrunner chat``) registers, owns its runs and closes no run."""
    async with HostService.open(host_settings("a", shared_url)) as a:
        await a.stores.hosts.register("host_gone", machine="elsewhere", pid=1, lease_ms=-1)
        runs = a.stores.runs
        runs.owner_host, mine = "host_gone", runs.owner_host
        await runs.start(_start("run_gone"))
        runs.owner_host = mine
        async with HostService.open(host_settings("b", shared_url), recover=False) as b:
            assert b.membership is not None and b.recovered_runs == []
            assert await b.membership.beat() == []
        assert a.membership is not None and await a.membership.beat() == ["run_gone"]
