"""An installed runner (the workspace's reference echo runner, exposed as an entry point) run out of process."""

from __future__ import annotations

from agentrunner_host.runtime import SubprocessRunnerConnection, discover_entry_points

from .helpers import FakeBackCallHandler, make_request


async def test_the_reference_echo_runner_runs_out_of_process_from_its_entry_point() -> None:
    """discover_entry_points finds agentrunner/echo; its runner streams, asks host state and completes over the
    wire, with every back-call stamped with its plugin identity."""
    found = discover_entry_points()
    spec = found.plugins["agentrunner/echo"]
    assert [r.ref for r in spec.runners] == ["agentrunner_runner_echo:EchoRunner"]
    handler = FakeBackCallHandler()
    request = make_request(
        "default",
        run_id="run-ep",
        plugin="agentrunner/echo",
        conversation={"conversation_id": "c1"},
        context={"available_apis": {"state": True}},
        delivery={"surface": "cli", "supports_streaming": True},
    )
    async with SubprocessRunnerConnection(spec, handler) as conn:
        manifests = await conn.list_runners()
        results = [r async for r in conn.run(request)]
    assert [m["id"] for m in manifests] == ["plugin:agentrunner/echo/default"]
    types = [r["type"] for r in results if isinstance(r, dict)]
    assert types[0] == "state.updated"
    assert types[-2:] == ["message.completed", "run.completed"]
    assert [(r.action, r.caller) for r in handler.requests] == [("state.get", "agentrunner/echo")]
