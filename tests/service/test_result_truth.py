"""One truth for a result's type: what the host stored, what the API returns as ``type`` and the SSE event name
are the host's final verdict, for every way a run can end (issue 17). Also: NaN/Infinity in HTTP input."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

import httpx
import pytest
from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerCapabilities,
    AgentRunnerManifest,
    AgentRunResult,
    I18nObject,
)
from agentrunner import codec as json
from agentrunner_host.runtime.inprocess import InProcessConnection
from agentrunner_host.service import HostService
from httpx_sse import aconnect_sse

PLUGIN = "test/truth"

Script = Callable[[AgentRunContext], AsyncIterator[Any]]


async def _echo(ctx: AgentRunContext) -> AsyncIterator[Any]:
    out = AgentRunner.emitter(ctx)
    yield out.message("hi")
    yield out.complete()


async def _deltas_only(ctx: AgentRunContext) -> AsyncIterator[Any]:
    out = AgentRunner.emitter(ctx)
    for _ in range(20):
        yield out.delta("x")  # dropped: the runner does not declare streaming
    yield out.complete()


async def _no_terminal(ctx: AgentRunContext) -> AsyncIterator[Any]:
    yield AgentRunner.emitter(ctx).message("half")


async def _raises(ctx: AgentRunContext) -> AsyncIterator[Any]:
    yield AgentRunner.emitter(ctx).message("half")
    raise RuntimeError("boom")


async def _invalid(ctx: AgentRunContext) -> AsyncIterator[Any]:
    yield AgentRunner.emitter(ctx).message("half")
    yield {"type": "run.failed", "run_id": ctx.run_id, "data": {}}


async def _foreign(ctx: AgentRunContext) -> AsyncIterator[Any]:
    yield AgentRunner.emitter(ctx.model_copy(update={"run_id": "run_someone_else"})).message("not mine")
    yield AgentRunner.emitter(ctx).complete()


async def _too_big(ctx: AgentRunContext) -> AsyncIterator[Any]:
    yield AgentRunner.emitter(ctx).message("x" * (2 * 1024 * 1024))
    yield AgentRunner.emitter(ctx).complete()


async def _own_failure(ctx: AgentRunContext) -> AsyncIterator[Any]:
    yield AgentRunner.emitter(ctx).fail("runner.upstream", "the upstream said no")


async def _hang(ctx: AgentRunContext) -> AsyncIterator[Any]:
    yield AgentRunner.emitter(ctx).delta("waiting")
    await asyncio.sleep(3600)


SWALLOW_STOP = asyncio.Event()


async def _swallow(ctx: AgentRunContext) -> AsyncIterator[Any]:
    yield AgentRunner.emitter(ctx).delta("stuck")
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if SWALLOW_STOP.is_set():  # lets the test's loop close; the host never relies on it
                raise


SCRIPTS: dict[str, tuple[Script, bool]] = {
    "echo": (_echo, True),
    "deltasonly": (_deltas_only, False),
    "noterminal": (_no_terminal, True),
    "raises": (_raises, True),
    "invalid": (_invalid, True),
    "foreign": (_foreign, True),
    "toobig": (_too_big, True),
    "ownfailure": (_own_failure, True),
    "hang": (_hang, True),
    "swallow": (_swallow, True),
}


def _runner(name: str, script: Script, streaming: bool) -> AgentRunner:
    class FakeTruthRunner(AgentRunner):
        manifest: ClassVar[AgentRunnerManifest] = AgentRunnerManifest(
            id=f"plugin:{PLUGIN}/{name}",
            name=name,
            label=I18nObject(en_US=name),
            capabilities=AgentRunnerCapabilities(streaming=streaming, interrupt=True),
        )

        async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
            async for item in script(ctx):
                yield item

    return FakeTruthRunner()


async def _bind(client: httpx.AsyncClient, name: str, run_policy: dict[str, Any] | None = None) -> None:
    agent: dict[str, Any] = {"agent_id": name, "runner_id": f"plugin:{PLUGIN}/{name}"}
    if run_policy:
        agent["run_policy"] = run_policy
    assert (await client.post("/v1/agents", json=agent)).status_code == 201
    binding = {"binding_id": name, "agent_id": name, "scope": {"type": "conversation", "id": f"c-{name}"}}
    assert (await client.post("/v1/bindings", json=binding)).status_code == 201


@pytest.fixture
async def truth_client(service: HostService, client: httpx.AsyncClient) -> httpx.AsyncClient:
    runners = [_runner(name, script, streaming) for name, (script, streaming) in SCRIPTS.items()]
    service.host.registry.add(InProcessConnection(PLUGIN, runners, handler=service.host.dispatcher))
    return client


async def _check_one_truth(client: httpx.AsyncClient, run_id: str, live: list[tuple[int, str]] | None) -> str:
    """The stored type, the API's ``type``, the SSE event names and the run's status agree; the terminal code."""
    run = (await client.get(f"/v1/runs/{run_id}")).json()
    stored = (await client.get(f"/v1/runs/{run_id}/results")).json()["results"]
    assert all(r["type"] == r["result"]["type"] for r in stored), stored
    async with aconnect_sse(client, "GET", f"/v1/runs/{run_id}/results", params={"stream": "true"}) as source:
        replay = [(int(e.id), e.event, json.loads(e.data)["type"]) async for e in source.aiter_sse()]
    assert [(seq, name) for seq, name, _ in replay] == [(r["host_seq"], r["type"]) for r in stored]
    assert all(name == inner for _, name, inner in replay)
    if live is not None:
        assert live == [(r["host_seq"], r["type"]) for r in stored]
    terminal = stored[-1]
    expected = "run.completed" if run["status"] == "completed" else "run.failed"
    assert terminal["type"] == expected, (run, terminal)
    if expected == "run.failed":
        assert terminal["result"]["data"]["code"] == run["code"]
        return str(run["code"])
    return "completed"


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("echo", "completed"),
        ("deltasonly", "runner.empty_output"),
        ("noterminal", "runner.no_terminal"),
        ("raises", "runner.error"),
        ("invalid", "runner.invalid_result"),
        ("foreign", "runner.protocol_error"),
        ("toobig", "payload_too_large"),
        ("ownfailure", "runner.upstream"),
        ("hang", "deadline_exceeded"),
    ],
)
async def test_stored_type_api_type_and_sse_event_agree_for_every_terminal(
    truth_client: httpx.AsyncClient, name: str, code: str
) -> None:
    """Streamed live, replayed as JSON and as SSE: one type per result, the host's verdict."""
    await _bind(truth_client, name, {"timeout_seconds": 0.5} if name == "hang" else None)
    async with aconnect_sse(
        truth_client, "POST", "/v1/events", json={"text": "go", "conversation_id": f"c-{name}"}
    ) as source:
        events = [e async for e in source.aiter_sse()]
    run_id = json.loads(events[0].data)["run_id"]
    live = [(int(e.id), e.event) for e in events]
    assert all(e.event == json.loads(e.data)["type"] for e in events)
    assert await _check_one_truth(truth_client, run_id, live) == code


async def test_a_cancelled_run_is_stored_and_served_as_run_failed(truth_client: httpx.AsyncClient) -> None:
    """Cancelled through the API: the same agreement, code ``cancelled``; a repeated cancel is not a 409."""
    await _bind(truth_client, "hang")
    run_id = (await truth_client.post("/v1/events", json={"text": "go", "conversation_id": "c-hang"})).json()[
        "run_id"
    ]
    # A client's view: poll the API until the first result is stored (no limit here: pytest-timeout guards hangs).
    while not (await truth_client.get(f"/v1/runs/{run_id}/results")).json()["results"]:  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    first = await truth_client.post(f"/v1/runs/{run_id}/cancel")
    assert first.status_code == 200 and first.json()["cancelled"] is True
    assert await _check_one_truth(truth_client, run_id, None) == "cancelled"
    again = await truth_client.post(f"/v1/runs/{run_id}/cancel")
    assert again.status_code == 200 and again.json()["cancelled"] is False


@pytest.mark.parametrize(
    "literal", ["NaN", "Infinity", "-Infinity", "1e999", "1.8e308", "-1E+0400", "[[2e308]]"]
)
async def test_nan_or_infinity_in_event_data_is_refused(client: httpx.AsyncClient, literal: str) -> None:
    """Python's JSON parser accepts them; stored they would become null. A typed 422 instead."""
    body = '{"text": "x", "data": {"score": ' + literal + "}}"
    response = await client.post("/v1/events", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_request"
    assert "NaN" in response.json()["error"]["message"]


async def test_a_run_that_ignores_its_cancel_is_answered_cancelling_then_force_ended(
    truth_client: httpx.AsyncClient, service: HostService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint answers within its settle time with the run's state (202 ``cancelling``), a repeated cancel
    says the same (not 409), and after the grace the run is recorded force-ended (``runner.cancel_ignored``)."""
    from agentrunner_host.http import routes

    monkeypatch.setattr(routes, "_CANCEL_SETTLE_SECONDS", 0.2)
    service.host.orchestrator.force_end_grace_seconds = 1.0
    await _bind(truth_client, "swallow")
    run_id = (
        await truth_client.post("/v1/events", json={"text": "go", "conversation_id": "c-swallow"})
    ).json()["run_id"]
    while not (await truth_client.get(f"/v1/runs/{run_id}/results")).json()["results"]:  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    first = await truth_client.post(f"/v1/runs/{run_id}/cancel")
    assert first.status_code == 202, first.text
    assert first.json() == {"run_id": run_id, "cancelled": True, "status": "running", "cancelling": True}
    again = await truth_client.post(f"/v1/runs/{run_id}/cancel")
    assert again.status_code == 202 and again.json()["cancelling"] is True
    feed = service.feed(run_id)
    if feed is not None:
        await feed.outcome()
    assert await _check_one_truth(truth_client, run_id, None) == "runner.cancel_ignored"
    SWALLOW_STOP.set()
