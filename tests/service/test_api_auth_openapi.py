"""Bearer-token protection, the OpenAPI document, transcripts and health endpoints."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
import pytest
from agentrunner_host.config import ConfigFileError
from agentrunner_host.http import ENDPOINTS
from agentrunner_host.http.markdown import render_current
from agentrunner_host.service import HostService
from agentrunner_host.stores import AuditEntry
from sqlalchemy import text

from .conftest import TOKEN, SettingsFactory, client_for


async def test_every_route_requires_the_bearer_token_when_one_is_configured(service: HostService) -> None:
    """No header or a wrong token is 401 with a typed body on every route, the right token passes."""
    async with client_for(service, token=TOKEN, send_token=False) as anonymous:
        for path in ("/healthz", "/readyz", "/openapi.json", "/v1/runners", "/v1/agents"):
            response = await anonymous.get(path)
            assert response.status_code == 401, path
            assert response.json()["error"]["code"] == "unauthorized"
            assert response.headers["www-authenticate"] == "Bearer"
        posted = await anonymous.post("/v1/events", json={"text": "x"})
        assert posted.status_code == 401
        wrong = await anonymous.get("/healthz", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["message"] == "invalid bearer token"
    async with client_for(service, token=TOKEN) as authorised:
        assert (await authorised.get("/healthz")).status_code == 200
        assert (await authorised.post("/v1/events?wait=true", json={"text": "x"})).status_code == 200


def test_binding_a_non_loopback_address_without_a_token_is_refused(make_settings: SettingsFactory) -> None:
    """An open API on a public address is a configuration error naming the token variable; loopback is fine."""
    exposed = make_settings(environ={"AGENTRUNNER_HTTP_HOST": "0.0.0.0"})
    with pytest.raises(ConfigFileError, match="AGENTRUNNER_API_TOKEN"):
        exposed.require_token_for_bind()
    strong = "Vq3tX9mZ2kLp8RwN4yHs7DfB1cJg6UeA0oTiQbWxYz"  # a public bind needs a strong token
    make_settings(
        environ={"AGENTRUNNER_HTTP_HOST": "0.0.0.0", "AGENTRUNNER_API_TOKEN": strong}
    ).require_token_for_bind()
    make_settings().require_token_for_bind()


async def test_the_openapi_document_describes_every_route_with_resolvable_schemas(
    client: httpx.AsyncClient,
) -> None:
    """OpenAPI 3.1 with one operation per endpoint; every ``$ref`` points at a component schema."""
    document = (await client.get("/openapi.json")).json()
    assert document["openapi"] == "3.1.0"
    operations = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    assert operations == {(ep.method, ep.path) for ep in ENDPOINTS}
    schemas = document["components"]["schemas"]
    assert {"EventSubmission", "ErrorBody", "RunOut", "AgentConfig", "BindingSpec"} <= set(schemas)
    refs: list[str] = []

    def collect(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref":
                    refs.append(value)
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(document)
    assert refs and all(ref.removeprefix("#/components/schemas/") in schemas for ref in refs)
    submit = document["paths"]["/v1/events"]["post"]
    assert "text/event-stream" in submit["responses"]["200"]["content"]
    assert "security" not in submit


async def test_an_audit_entry_is_the_stores_audit_entry_in_the_document(client: httpx.AsyncClient) -> None:
    """One declaration of an audit record: the page's entries are the stores' ``AuditEntry``, every field."""
    schemas = (await client.get("/openapi.json")).json()["components"]["schemas"]
    entries = schemas["AuditPageOut"]["properties"]["entries"]
    assert entries["items"] == {"$ref": "#/components/schemas/AuditEntry"}
    entry = schemas["AuditEntry"]
    assert list(entry["properties"]) == [f.name for f in dataclasses.fields(AuditEntry)]
    assert entry["additionalProperties"] is False
    assert entry["properties"]["risk"]["description"].startswith("Danger classes")
    assert "AuditEntryOut" not in schemas


async def test_a_secured_openapi_document_declares_the_bearer_scheme(service: HostService) -> None:
    """With a token, operations require the ``bearer`` scheme and list the 401 answer."""
    async with client_for(service, token=TOKEN) as client:
        document = (await client.get("/openapi.json")).json()
    assert document["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    operation = document["paths"]["/v1/runners"]["get"]
    assert operation["security"] == [{"bearer": []}] and "401" in operation["responses"]


async def test_the_transcript_is_paged_oldest_first_with_a_cursor(client: httpx.AsyncClient) -> None:
    """Three turns make six items; pages of four and two, ``next_cursor`` null at the end."""
    for n in range(3):
        await client.post("/v1/events?wait=true", json={"text": f"turn {n}", "conversation_id": "talk"})
    first = (await client.get("/v1/conversations/talk/transcript", params={"limit": 4})).json()
    assert [i["seq"] for i in first["items"]] == [1, 2, 3, 4]
    assert [i["role"] for i in first["items"]] == ["user", "assistant", "user", "assistant"]
    assert first["items"][0]["content"] == "turn 0" and first["next_cursor"] == "4"
    second = (
        await client.get(
            "/v1/conversations/talk/transcript", params={"limit": 4, "cursor": first["next_cursor"]}
        )
    ).json()
    assert [i["content"] for i in second["items"]] == ["turn 2", "turn 2"] and second["next_cursor"] is None
    bad = await client.get("/v1/conversations/talk/transcript", params={"cursor": "abc"})
    assert bad.status_code == 422
    # an empty value is not the integer the document declares (schemathesis found `?limit=` answered 200)
    for query in ("limit=", "limit=%201"):
        assert (await client.get(f"/v1/conversations/talk/transcript?{query}")).status_code == 422, query
    for flag in ("wait", "stream"):  # a boolean query parameter given empty is neither true nor false
        sent = await client.post(f"/v1/events?{flag}=", json={"text": "x", "conversation_id": "talk"})
        assert sent.status_code == 422, flag
        assert "must be true or false" in sent.text
    empty = (await client.get("/v1/conversations/nobody/transcript")).json()
    assert empty["items"] == [] and empty["next_cursor"] is None


async def test_readiness_reports_a_database_behind_the_migrations(
    client: httpx.AsyncClient, service: HostService
) -> None:
    """``/readyz`` is 200 at head and 503 when the database's revision is not the newest; ``/healthz`` stays 200."""
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    async with service.engine.begin() as conn:
        await conn.execute(text("UPDATE alembic_version SET version_num = 'older'"))
    behind = await client.get("/readyz")
    assert behind.status_code == 503 and "older" in behind.json()["detail"]
    assert (await client.get("/healthz")).status_code == 200


async def test_unknown_routes_and_methods_answer_typed_json_errors(client: httpx.AsyncClient) -> None:
    """Even the router's own 404/405 use the error body."""
    missing = await client.get("/v2/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    method = await client.delete("/v1/runners")
    assert method.status_code == 405 and method.json()["error"]["code"] == "method_not_allowed"


async def test_runners_are_listed_with_their_config_forms(client: httpx.AsyncClient) -> None:
    """The echo runner is available in-process with its form."""
    runners = (await client.get("/v1/runners")).json()["runners"]
    echo = next(r for r in runners if r["runner_id"] == "plugin:agentrunner/echo/default")
    assert echo["plugin_id"] == "agentrunner/echo" and echo["label"]["en_US"] == "Echo"
    assert [f["name"] for f in echo["config_schema"]] == ["prefix"]


def test_the_http_api_reference_in_docs_matches_the_openapi_document() -> None:
    """``docs/http-api.md`` is the rendering of the current document (regenerate it when this fails)."""
    path = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"
    assert path.read_text(encoding="utf-8") == render_current(), (
        "docs/http-api.md is stale: python -m agentrunner_host.http.markdown > docs/http-api.md"
    )
