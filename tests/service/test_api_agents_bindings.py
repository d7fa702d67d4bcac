"""Agents and bindings over HTTP: CRUD, effect on the next event, conflicts, read-only definitions, secrets."""

from __future__ import annotations

import httpx
from agentrunner_host.service import HostService

from .conftest import SettingsFactory, client_for
from .fakes import SECRET_RUNNER_ID, FakeSecretiveRunner, install_fakes

ECHO = "plugin:agentrunner/echo/default"


async def test_agents_can_be_created_read_replaced_and_removed(client: httpx.AsyncClient) -> None:
    """The full lifecycle of an operator agent; the default agent is listed as ``default``."""
    created = await client.post(
        "/v1/agents", json={"agent_id": "shouty", "runner_id": ECHO, "runner_config": {"prefix": "!! "}}
    )
    assert created.status_code == 201 and created.headers["location"] == "/v1/agents/shouty"
    assert created.json()["source"] == "api"
    listed = (await client.get("/v1/agents")).json()["agents"]
    assert {(a["agent"]["agent_id"], a["source"]) for a in listed} == {
        ("default", "default"),
        ("shouty", "api"),
    }
    replaced = await client.put(
        "/v1/agents/shouty",
        json={"agent_id": "shouty", "runner_id": ECHO, "runner_config": {"prefix": ">> "}},
    )
    assert replaced.status_code == 200
    assert (await client.get("/v1/agents/shouty")).json()["agent"]["runner_config"] == {"prefix": ">> "}
    assert (
        await client.post("/v1/agents", json={"agent_id": "shouty", "runner_id": ECHO})
    ).status_code == 409
    assert (await client.delete("/v1/agents/shouty")).status_code == 204
    assert (await client.get("/v1/agents/shouty")).status_code == 404


async def test_a_new_binding_takes_effect_for_the_next_event(client: httpx.AsyncClient) -> None:
    """After adding a conversation binding, that conversation's next event goes to the new agent."""
    await client.post(
        "/v1/agents", json={"agent_id": "prefixed", "runner_id": ECHO, "runner_config": {"prefix": "P:"}}
    )
    created = await client.post(
        "/v1/bindings",
        json={"binding_id": "vip", "agent_id": "prefixed", "scope": {"type": "conversation", "id": "vip"}},
    )
    assert created.status_code == 201
    answer = await client.post("/v1/events?wait=true", json={"text": "hi", "conversation_id": "vip"})
    body = answer.json()
    assert body["run"]["binding_id"] == "vip"
    message = next(r for r in body["results"] if r["type"] == "message.completed")
    assert message["result"]["data"]["message"]["content"] == "P:hi"
    other = await client.post("/v1/events?wait=true", json={"text": "hi", "conversation_id": "elsewhere"})
    assert other.json()["run"]["binding_id"] == "default"
    assert (await client.delete("/v1/bindings/vip")).status_code == 204
    after = await client.post("/v1/events?wait=true", json={"text": "hi", "conversation_id": "vip"})
    assert after.json()["run"]["binding_id"] == "default"


async def test_conflicting_bindings_are_refused_with_the_conflict_message(client: httpx.AsyncClient) -> None:
    """Two bindings of the same precedence that can match the same event: the second is 409, nothing saved."""
    first = {"binding_id": "one", "agent_id": "default", "scope": {"type": "bot", "id": "b1"}}
    assert (await client.post("/v1/bindings", json=first)).status_code == 201
    second = {**first, "binding_id": "two"}
    response = await client.post("/v1/bindings", json=second)
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "binding_conflict" and "'one'" in error["message"] and "'two'" in error["message"]
    assert (await client.get("/v1/bindings/two")).status_code == 404


async def test_bindings_naming_unknown_agents_or_invalid_scopes_are_422(client: httpx.AsyncClient) -> None:
    """A binding must name an existing agent and a scope id when the scope is not global."""
    unknown = await client.post("/v1/bindings", json={"binding_id": "x", "agent_id": "ghost"})
    assert unknown.status_code == 422 and "ghost" in unknown.json()["error"]["message"]
    no_id = await client.post(
        "/v1/bindings", json={"binding_id": "y", "agent_id": "default", "scope": {"type": "bot"}}
    )
    assert no_id.status_code == 422 and "needs an id" in no_id.json()["error"]["message"]


async def test_definitions_from_the_configuration_are_read_only(make_settings: SettingsFactory) -> None:
    """Agents and bindings of the file (and the default ones) cannot be changed through the API."""
    toml = f"""
[[agents]]
agent_id = "fixed"
runner_id = "{ECHO}"

[[bindings]]
binding_id = "fixed"
agent_id = "fixed"
scope = {{ type = "workspace", id = "w1" }}
"""
    async with HostService.open(make_settings(toml)) as service, client_for(service) as client:
        assert (await client.get("/v1/agents/fixed")).json()["source"] == "config"
        put = await client.put("/v1/agents/fixed", json={"agent_id": "fixed", "runner_id": ECHO})
        assert put.status_code == 409 and put.json()["error"]["code"] == "read_only"
        assert (await client.delete("/v1/bindings/fixed")).status_code == 409
        assert (await client.delete("/v1/bindings/default")).status_code == 409
        in_use = await client.post("/v1/agents", json={"agent_id": "temp", "runner_id": ECHO})
        assert in_use.status_code == 201
        await client.post(
            "/v1/bindings", json={"binding_id": "t", "agent_id": "temp", "scope": {"type": "bot", "id": "b"}}
        )
        refused = await client.delete("/v1/agents/temp")
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "in_use"


async def test_operator_definitions_survive_a_restart(make_settings: SettingsFactory) -> None:
    """Agents and bindings added through the API are in the data directory and back after reopening."""
    settings = make_settings()
    async with HostService.open(settings) as service, client_for(service) as client:
        await client.post("/v1/agents", json={"agent_id": "kept", "runner_id": ECHO})
        await client.post(
            "/v1/bindings",
            json={"binding_id": "kept", "agent_id": "kept", "scope": {"type": "bot", "id": "b"}},
        )
    async with HostService.open(settings) as service, client_for(service) as client:
        assert (await client.get("/v1/bindings/kept")).json()["binding"]["agent_id"] == "kept"
        answer = await client.post("/v1/events?wait=true", json={"text": "x", "bot_id": "b"})
        assert answer.json()["run"]["binding_id"] == "kept"


async def test_literal_secrets_in_an_agent_are_refused(
    client: httpx.AsyncClient, service: HostService
) -> None:
    """Secret-looking keys, token-like values and fields the runner marks secret must be env references."""
    install_fakes(service, FakeSecretiveRunner())
    by_name = await client.post(
        "/v1/agents", json={"agent_id": "a1", "runner_id": ECHO, "runner_config": {"api_key": "abc"}}
    )
    assert by_name.status_code == 422 and by_name.json()["error"]["code"] == "literal_secret"
    by_value = await client.post(
        "/v1/agents",
        json={"agent_id": "a2", "runner_id": ECHO, "runner_config": {"prefix": "sk-abcdefghijklmnop"}},
    )
    assert by_value.status_code == 422
    by_form = await client.post(
        "/v1/agents",
        json={"agent_id": "a3", "runner_id": SECRET_RUNNER_ID, "runner_config": {"access_code": "1234"}},
    )
    assert by_form.status_code == 422 and "access_code" in by_form.json()["error"]["message"]
    as_ref = await client.post(
        "/v1/agents",
        json={
            "agent_id": "a4",
            "runner_id": SECRET_RUNNER_ID,
            "runner_config": {"access_code": {"env": "CODE"}},
        },
    )
    assert as_ref.status_code == 201
    assert as_ref.json()["agent"]["runner_config"] == {"access_code": {"env": "CODE"}}


async def test_secret_fields_of_configured_agents_are_redacted(make_settings: SettingsFactory) -> None:
    """A form field marked secret shows as ``***`` in every API answer; env references resolve only in runs."""
    toml = f"""
[[agents]]
agent_id = "s"
runner_id = "{SECRET_RUNNER_ID}"
runner_config = {{ access_code = "hunter2", greeting = "hello", nested = {{ password = {{ env = "PW" }} }} }}

[[bindings]]
binding_id = "s"
agent_id = "s"
scope = {{ type = "bot", id = "sb" }}
"""
    async with HostService.open(make_settings(toml, environ={"PW": "from-env"})) as service:
        install_fakes(service, FakeSecretiveRunner())
        async with client_for(service) as client:
            shown = (await client.get("/v1/agents/s")).json()["agent"]["runner_config"]
            listed = (await client.get("/v1/agents")).text
            answer = await client.post("/v1/events?wait=true", json={"text": "x", "bot_id": "sb"})
    assert shown == {"access_code": "***", "greeting": "hello", "nested": {"password": {"env": "PW"}}}
    assert "hunter2" not in listed and "from-env" not in listed
    assert answer.json()["run"]["status"] == "completed"


async def test_an_agent_whose_id_leaves_no_room_for_a_direct_binding_is_refused_not_a_500(
    client: httpx.AsyncClient,
) -> None:
    """``agent_id`` on ``POST /v1/events`` with a 200-character agent id (the identifier limit): the direct
    binding's id would pass its own limit, so the event is refused with a typed 422 (was a 500)."""
    agent_id = "a" * 200
    created = await client.post("/v1/agents", json={"agent_id": agent_id, "runner_id": ECHO})
    assert created.status_code == 201
    answer = await client.post("/v1/events", json={"text": "hi", "agent_id": agent_id})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "invalid_definition"
