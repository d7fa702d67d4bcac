"""Edges the OpenAPI fuzzing found: strict types, header encoding, Allow headers, HEAD, cursor syntax."""

from __future__ import annotations

import httpx
import pytest
from agentrunner_host.http.routes import _query
from starlette.requests import Request

ECHO = "plugin:agentrunner/echo/default"


async def test_bodies_are_validated_strictly_against_the_documented_types(client: httpx.AsyncClient) -> None:
    """``0`` is not a boolean and ``"1"`` is not an integer: the document's types hold as written."""
    await client.post("/v1/agents", json={"agent_id": "a", "runner_id": ECHO})
    as_int = await client.post("/v1/bindings", json={"binding_id": "b", "agent_id": "a", "enabled": 0})
    assert as_int.status_code == 422 and "enabled" in as_int.json()["error"]["message"]
    as_text = await client.post("/v1/bindings", json={"binding_id": "b", "agent_id": "a", "priority": "1"})
    assert as_text.status_code == 422
    zero_size = await client.post(
        "/v1/agents", json={"agent_id": "z", "runner_id": ECHO, "delivery_policy": {"max_message_size": 0}}
    )
    assert zero_size.status_code == 422


async def test_ids_are_percent_encoded_in_location(client: httpx.AsyncClient) -> None:
    """A created agent whose id holds reserved URL characters gets a valid Location header, and the id
    round-trips; ids outside the id pattern (non-ASCII included) are refused (tests/security)."""
    created = await client.post("/v1/agents", json={"agent_id": "team:a@b+1", "runner_id": ECHO})
    assert created.status_code == 201
    assert created.headers["location"] == "/v1/agents/team%3Aa%40b%2B1"
    assert (await client.get(created.headers["location"])).json()["agent"]["agent_id"] == "team:a@b+1"
    refused = await client.post("/v1/agents", json={"agent_id": "代理-1", "runner_id": ECHO})
    assert refused.status_code == 422 and "agent_id" in refused.json()["error"]["message"]


async def test_a_wrong_method_lists_every_allowed_method(client: httpx.AsyncClient) -> None:
    """405 answers carry ``Allow`` with all the methods of the path."""
    response = await client.patch("/v1/agents/x")
    assert response.status_code == 405
    assert set(response.headers["allow"].replace(" ", "").split(",")) >= {"GET", "PUT", "DELETE"}


async def test_head_is_answered_like_get(client: httpx.AsyncClient) -> None:
    """HEAD on a GET route answers the GET status without a body."""
    response = await client.head("/healthz")
    assert response.status_code == 200 and response.content == b""


async def test_cursors_and_integers_must_be_plain_ascii_digits(client: httpx.AsyncClient) -> None:
    """``1_0``, full-width digits and signs are refused where the document promises an integer or a cursor."""
    run = (await client.post("/v1/events?wait=true", json={"text": "x"})).json()["run"]["run_id"]
    for value in ("1_0", "１", " 1"):
        response = await client.get(f"/v1/runs/{run}/results", params={"after": value})
        assert response.status_code == 422, value
    assert (await client.get(f"/v1/runs/{run}/results", params={"after": "-1"})).status_code == 422
    empty = await client.get(f"/v1/runs/{run}/results", headers={"Last-Event-ID": ""})
    assert empty.status_code == 200 and empty.json()["results"][0]["host_seq"] == 1
    assert (await client.get(f"/v1/runs/{run}/results", headers={"Last-Event-ID": "x1"})).status_code == 422
    assert (await client.get("/v1/conversations/c/transcript", params={"cursor": "１"})).status_code == 422


@pytest.mark.parametrize(
    "data",
    [
        b'{"n": 9223372036854775807, "m": -9223372036854775808}',
        b'{"x": 1.7e308, "y": 1e-400, "z": 123456789012345678.5}',
        b'{"text": "NaN, Infinity and 12345678901234567890 are words here", "id": "e309"}',
    ],
)
async def test_numbers_the_stores_keep_are_accepted_wherever_they_look_like_the_refused_ones(
    client: httpx.AsyncClient, data: bytes
) -> None:
    """The largest 64-bit integers, finite floats near the limits and strings that merely spell the refused
    numbers go through (whether or not the body takes the slow checks)."""
    response = await client.post(
        "/v1/events?wait=true",
        content=b'{"text": "x", "data": %s}' % data,
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 200, response.text


async def test_integers_beyond_64_bits_are_refused_before_they_reach_the_stores(
    client: httpx.AsyncClient,
) -> None:
    """JSON allows any integer; the stores do not, so the API answers 422 instead of failing later."""
    response = await client.post(
        "/v1/events",
        content=b'{"text": "x", "data": {"n": 123456789012345678901234567890}}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422 and "cannot be stored" in response.json()["error"]["message"]
    just_past = await client.post(
        "/v1/events",
        content=b'{"text": "x", "data": {"n": [18446744073709551616]}}',
        headers={"content-type": "application/json"},
    )
    assert just_past.status_code == 422 and "cannot be stored" in just_past.json()["error"]["message"]
    config = await client.post(
        "/v1/agents",
        content=b'{"agent_id": "big", "runner_id": "%s", "runner_config": {"n": -99999999999999999999999}}'
        % ECHO.encode(),
        headers={"content-type": "application/json"},
    )
    assert config.status_code == 422


@pytest.mark.parametrize(
    "query",
    [
        b"",
        b"stream=true",
        b"stream=true&wait=1",
        b"stream",
        b"a=1&&a=2",
        b"=x&limit=",
        b"k=a=b",
        b"v=\xc3\xa9",
    ],
)
def test_query_parameters_split_directly_are_those_starlette_parses(query: bytes) -> None:
    """An unescaped query string read without Starlette's parser gives the same values (the last of a
    repeated name, blank values kept, the rest after the first ``=`` part of the value)."""
    request = Request({"type": "http", "query_string": query, "headers": []})
    assert dict(_query(request)) == dict(request.query_params)
    assert _query(request) is not request.query_params
