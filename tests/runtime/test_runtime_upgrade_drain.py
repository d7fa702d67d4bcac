"""An upgraded plugin's old process is drained: new runs go to the new connection at once, a run live on the
old one keeps it until that run ends, then the old process is closed."""

from __future__ import annotations

import asyncio

from agentrunner_host.runtime import RuntimeManager

from .helpers import PLUGINS, FakeBackCallHandler, make_request, pid_alive


async def test_replace_routes_new_runs_to_the_new_process_and_drains_the_old_one() -> None:
    handler = FakeBackCallHandler()
    async with RuntimeManager.from_directories([PLUGINS], handler) as manager:
        old = manager.connection("tests/echo")
        live = old.run(make_request("sleeper", run_id="run-live"))
        first = await anext(live)
        assert isinstance(first, dict) and first["type"] == "message.delta"
        old_pid = old.pid
        assert old_pid is not None and old.live_runs == ["run-live"]

        replaced = manager.replace(manager.plugins["tests/echo"])
        assert replaced is old
        drain = asyncio.create_task(RuntimeManager.drain(old, poll=0.01))
        new = manager.connection("tests/echo")
        assert new is not old
        answer = [r async for r in new.run(make_request("streamer", run_id="run-new", config={"count": 2}))]
        last = answer[-1]
        assert isinstance(last, dict) and last["type"] == "run.completed"
        assert new.pid != old_pid
        # The new run came and went on the new process; the old one still serves its live run.
        assert not drain.done() and pid_alive(old_pid) and old.live_runs == ["run-live"]

        await live.aclose()  # the live run ends (cancelled): nothing is left on the old process
        await asyncio.wait_for(drain, timeout=60)
        assert not pid_alive(old_pid)
