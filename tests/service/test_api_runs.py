"""Runs over HTTP: status, result replay from a cursor (JSON and SSE), live continuation, cancellation."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from agentrunner import AgentInput
from agentrunner import codec as json
from agentrunner_host.definitions import AgentEventEnvelope
from agentrunner_host.service import HostService
from httpx_sse import aconnect_sse

from .fakes import GATED_RUNNER_ID, FakeGatedRunner, install_fakes


async def _finished_run(
    client: httpx.AsyncClient, text: str = "replay me please, in parts"
) -> dict[str, object]:
    response = await client.post("/v1/events?wait=true", json={"text": text, "conversation_id": "c-runs"})
    assert response.status_code == 200
    return response.json()


async def _bind_gated(client: httpx.AsyncClient, service: HostService, runner: FakeGatedRunner) -> None:
    install_fakes(service, runner)
    agent = await client.post("/v1/agents", json={"agent_id": "gated", "runner_id": GATED_RUNNER_ID})
    assert agent.status_code == 201, agent.text
    binding = await client.post(
        "/v1/bindings",
        json={"binding_id": "gated", "agent_id": "gated", "scope": {"type": "conversation", "id": "slow"}},
    )
    assert binding.status_code == 201, binding.text


async def test_a_run_reports_status_outcome_and_result_count(client: httpx.AsyncClient) -> None:
    """``GET /v1/runs/{id}`` shows the stored run: completed, its binding and runner, how many results."""
    finished = await _finished_run(client)
    run_id = finished["run"]["run_id"]  # type: ignore[index]
    response = await client.get(f"/v1/runs/{run_id}")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "completed" and body["binding_id"] == "default"
    assert body["runner_id"] == "plugin:agentrunner/echo/default"
    assert body["results"] == len(finished["results"])  # type: ignore[arg-type]
    missing = await client.get("/v1/runs/run_nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


async def test_results_replay_from_a_cursor_in_pages(client: httpx.AsyncClient) -> None:
    """``after`` skips what the client has; ``limit`` pages; ``done`` marks the terminal page."""
    finished = await _finished_run(client)
    run_id = finished["run"]["run_id"]  # type: ignore[index]
    total = len(finished["results"])  # type: ignore[arg-type]
    page = (await client.get(f"/v1/runs/{run_id}/results", params={"after": 1, "limit": 2})).json()
    assert [r["host_seq"] for r in page["results"]] == [2, 3] and page["next_after"] == 3
    assert page["done"] is (total == 3)
    rest = (await client.get(f"/v1/runs/{run_id}/results", params={"after": page["next_after"]})).json()
    assert [r["host_seq"] for r in rest["results"]] == list(range(4, total + 1)) and rest["done"] is True
    bad = await client.get(f"/v1/runs/{run_id}/results", params={"after": "x"})
    assert bad.status_code == 422


async def test_sse_replay_resumes_after_last_event_id(client: httpx.AsyncClient) -> None:
    """A reconnecting SSE client sends ``Last-Event-ID`` and gets only the later results."""
    finished = await _finished_run(client)
    run_id = finished["run"]["run_id"]  # type: ignore[index]
    total = len(finished["results"])  # type: ignore[arg-type]
    async with aconnect_sse(
        client, "GET", f"/v1/runs/{run_id}/results", headers={"Last-Event-ID": "2"}
    ) as source:
        events = [e async for e in source.aiter_sse()]
    assert [int(e.id) for e in events] == list(range(3, total + 1))
    assert events[-1].event == "run.completed"


async def test_a_live_runs_stream_replays_then_continues_live(
    client: httpx.AsyncClient, service: HostService
) -> None:
    """Joining a live run from a cursor gives the stored part, then the results produced afterwards."""
    runner = FakeGatedRunner()
    await _bind_gated(client, service, runner)
    accepted = await client.post("/v1/events", json={"text": "x", "conversation_id": "slow"})
    run_id = accepted.json()["run_id"]
    await runner.started.wait()
    feed = service.feed(run_id)
    assert feed is not None
    # The runner is past its first yield once the host has taken the delta, which is stored a flush window
    # later; the feed hands out only committed results, so its first item means the delta is in the store.
    async for first in feed.follow():
        assert first.type == "message.delta"
        break
    status = (await client.get(f"/v1/runs/{run_id}")).json()
    assert status["status"] == "running" and status["live"] is True
    page = (await client.get(f"/v1/runs/{run_id}/results")).json()
    assert [r["type"] for r in page["results"]] == ["message.delta"] and page["done"] is False

    async def read() -> list[str]:
        async with aconnect_sse(
            client, "GET", f"/v1/runs/{run_id}/results", params={"stream": "true"}
        ) as source:
            return [e.event async for e in source.aiter_sse()]

    reader = asyncio.create_task(read())
    # The in-process client shows nothing before the response ends, so watch the server side: the reader has
    # replayed the stored part once it waits on the run's feed for live results.
    while not feed._waiters:
        assert not reader.done(), reader
        await asyncio.sleep(0.01)
    runner.gate.set()
    kinds = await reader
    assert kinds == ["message.delta", "message.delta", "message.completed", "run.completed"]


async def test_cancelling_a_live_run_ends_it_as_cancelled(
    client: httpx.AsyncClient, service: HostService
) -> None:
    """``POST /cancel`` stops a live run: it ends ``run.failed``/``cancelled``, and a second cancel is a no-op."""
    runner = FakeGatedRunner()
    await _bind_gated(client, service, runner)
    run_id = (await client.post("/v1/events", json={"text": "x", "conversation_id": "slow"})).json()["run_id"]
    await runner.started.wait()
    response = await client.post(f"/v1/runs/{run_id}/cancel")
    assert response.status_code == 200
    assert response.json() == {"run_id": run_id, "cancelled": True, "status": "failed", "cancelling": False}
    run = (await client.get(f"/v1/runs/{run_id}")).json()
    assert run["code"] == "cancelled"
    results = (await client.get(f"/v1/runs/{run_id}/results")).json()["results"]
    assert results[-1]["type"] == "run.failed" and results[-1]["result"]["data"]["code"] == "cancelled"
    again = await client.post(f"/v1/runs/{run_id}/cancel")
    assert again.status_code == 200 and again.json()["cancelled"] is False
    unknown = await client.post("/v1/runs/run_unknown/cancel")
    assert unknown.status_code == 404


async def test_a_streamed_result_is_the_same_json_that_replay_returns(client: httpx.AsyncClient) -> None:
    """Live SSE data and the stored replay carry the same result for the same host_seq."""
    async with aconnect_sse(
        client, "POST", "/v1/events", json={"text": "same", "conversation_id": "c-eq"}
    ) as source:
        live = [e async for e in source.aiter_sse()]
    run_id = json.loads(live[0].data)["run_id"]
    stored = (await client.get(f"/v1/runs/{run_id}/results")).json()["results"]
    assert [(int(e.id), e.event) for e in live] == [(r["host_seq"], r["type"]) for r in stored]
    assert json.loads(live[-1].data)["data"] == stored[-1]["result"]["data"]


async def test_a_run_executing_in_another_process_is_followed_until_it_ends(
    client: httpx.AsyncClient, service: HostService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second service on the same database runs the event; this server's stream waits, then replays it all."""
    runner = FakeGatedRunner()
    install_fakes(service, FakeGatedRunner())  # the API admits agents only for runners it knows
    async with HostService.open(service.settings, recover=False) as other:
        await _bind_gated(client, other, runner)
        await other.reload_definitions()
        feed = await other.submit(
            AgentEventEnvelope(
                event_id="evt-elsewhere",
                event_type="message.received",
                input=AgentInput(text="x"),
                conversation_id="slow",
            )
        )
        await runner.started.wait()
        status = (await client.get(f"/v1/runs/{feed.run_id}")).json()
        assert status["status"] == "running" and status["live"] is False

        async def read() -> list[str]:
            async with aconnect_sse(client, "GET", f"/v1/runs/{feed.run_id}/results?stream=true") as source:
                return [e.event async for e in source.aiter_sse()]

        # The in-process client shows nothing before the response ends: watch the server side instead. The
        # stream follows a run executing elsewhere by polling its record; two polls mean it is waiting.
        polls = 0
        get_run = service.stores.runs.get

        async def counting_get(run_id: str) -> Any:
            nonlocal polls
            if run_id == feed.run_id:
                polls += 1
            return await get_run(run_id)

        monkeypatch.setattr(service.stores.runs, "get", counting_get)
        reader = asyncio.create_task(read())
        while polls < 2:
            assert not reader.done(), reader
            await asyncio.sleep(0.01)
        runner.gate.set()
        kinds = await reader
    assert kinds == ["message.delta", "message.delta", "message.completed", "run.completed"]


async def test_a_run_executing_in_another_process_on_the_same_sqlite_file_is_cancelled_through_this_one(
    client: httpx.AsyncClient, service: HostService
) -> None:
    """Nothing is announced on SQLite: the cancel is stored for the run's owner, which takes it on its poll;
    the run ends cancelled there and this server reports it (200 once ended, 202 while still cancelling)."""
    runner = FakeGatedRunner()
    install_fakes(service, FakeGatedRunner())
    async with HostService.open(service.settings, recover=False) as other:
        await _bind_gated(client, other, runner)
        await other.reload_definitions()
        feed = await other.submit(
            AgentEventEnvelope(
                event_id="evt-cancel-elsewhere",
                event_type="message.received",
                input=AgentInput(text="x"),
                conversation_id="slow",
            )
        )
        await runner.started.wait()
        cancel = await client.post(f"/v1/runs/{feed.run_id}/cancel")
        assert cancel.status_code in (200, 202), cancel.text
        assert cancel.json()["cancelled"] is True
        outcome = await feed.outcome()
        assert other.requests_taken >= 1
    assert outcome.status == "failed" and outcome.code == "cancelled"
    run = (await client.get(f"/v1/runs/{feed.run_id}")).json()
    assert run["status"] == "failed" and run["code"] == "cancelled"
