"""``POST /v1/events``: accepted, streamed (SSE), waited for; duplicates and unbound events."""

from __future__ import annotations

import httpx
from agentrunner import codec as json
from agentrunner_host.service import HostService
from httpx_sse import aconnect_sse

from .conftest import SettingsFactory, client_for


async def test_an_event_is_accepted_with_202_and_its_run_id(
    client: httpx.AsyncClient, service: HostService
) -> None:
    """Without stream or wait the answer is 202 with the run id, and the run then completes."""
    response = await client.post("/v1/events", json={"text": "hello", "conversation_id": "c1"})
    assert response.status_code == 202
    body = response.json()
    assert body["run_id"].startswith("run_") and body["status"] == "running"
    assert response.headers["location"] == f"/v1/runs/{body['run_id']}"
    items = [item async for item in service.follow(body["run_id"])]
    assert [i.type for i in items][-1] == "run.completed"


async def test_a_streamed_event_answers_server_sent_events_with_host_seq_ids(
    client: httpx.AsyncClient,
) -> None:
    """Each SSE event has ``id`` = host_seq, ``event`` = result type and the result JSON as data."""
    text = "a message long enough to be streamed in several deltas"
    async with aconnect_sse(
        client, "POST", "/v1/events", json={"text": text, "conversation_id": "c-sse"}
    ) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        events = [sse async for sse in source.aiter_sse()]
    assert [int(e.id) for e in events] == list(range(1, len(events) + 1))
    kinds = [e.event for e in events]
    assert "message.delta" in kinds and kinds[-1] == "run.completed"
    deltas = [json.loads(e.data)["data"]["chunk"]["content"] for e in events if e.event == "message.delta"]
    assert "".join(deltas) == text
    assert all(json.loads(e.data)["type"] == e.event for e in events)


async def test_stream_query_parameter_also_selects_server_sent_events(client: httpx.AsyncClient) -> None:
    """``?stream=true`` streams even without the Accept header."""
    response = await client.post("/v1/events?stream=true", json={"text": "hi"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "event: run.completed" in response.text


async def test_wait_answers_the_finished_run_with_every_result(client: httpx.AsyncClient) -> None:
    """``?wait=true`` answers once the run ended, with its status and all results in order."""
    response = await client.post("/v1/events?wait=true", json={"text": "echo me", "conversation_id": "c-w"})
    assert response.status_code == 200
    body = response.json()
    assert body["run"]["status"] == "completed" and body["run"]["results"] == len(body["results"])
    completed = next(r for r in body["results"] if r["type"] == "message.completed")
    assert completed["result"]["data"]["message"]["content"] == "echo me"


async def test_a_duplicate_event_id_answers_409_with_the_first_run_id(client: httpx.AsyncClient) -> None:
    """Re-submitting an event id is a typed conflict naming the run of the first delivery."""
    first = await client.post("/v1/events?wait=true", json={"text": "once", "event_id": "evt-dup-1"})
    again = await client.post("/v1/events", json={"text": "once", "event_id": "evt-dup-1"})
    assert again.status_code == 409
    error = again.json()["error"]
    assert error["code"] == "duplicate_event" and error["run_id"] == first.json()["run"]["run_id"]


async def test_an_event_no_binding_handles_answers_404_with_a_typed_error(
    make_settings: SettingsFactory,
) -> None:
    """With the default binding switched off, an unbound event is 404 ``binding_not_found``."""
    settings = make_settings("[defaults]\nbinding = false\n")
    async with HostService.open(settings) as service, client_for(service) as client:
        response = await client.post("/v1/events", json={"text": "anyone?"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "binding_not_found"


async def test_invalid_bodies_answer_422_naming_the_field(client: httpx.AsyncClient) -> None:
    """Unknown fields, both text and input, wrong types and an empty body are refused with the key path."""
    unknown = await client.post("/v1/events", json={"text": "x", "surprise": 1})
    assert unknown.status_code == 422 and "surprise" in unknown.json()["error"]["message"]
    both = await client.post("/v1/events", json={"text": "x", "input": {"text": "y"}})
    assert both.status_code == 422 and "either text or input" in both.json()["error"]["message"]
    wrong = await client.post("/v1/events", json={"event_type": 5})
    assert wrong.status_code == 422 and "event_type" in wrong.json()["error"]["message"]
    empty = await client.post("/v1/events", content=b"")
    assert empty.status_code == 422 and empty.json()["error"]["code"] == "invalid_request"
    conflicting = await client.post("/v1/events?stream=true&wait=true", json={"text": "x"})
    assert conflicting.status_code == 422


async def test_an_oversized_body_answers_413(client: httpx.AsyncClient) -> None:
    """Bodies above the limit are refused before parsing."""
    response = await client.post("/v1/events", json={"text": "x" * (1024 * 1024 + 10)})
    assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large"
