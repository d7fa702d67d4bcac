"""HTTP admission: Host allowlist (DNS rebinding), Origin check (cross-site requests), JSON-only writes and
CORS off by default, on every route of the app, with and without a bearer token."""

from __future__ import annotations

import re

import httpx
import pytest
from agentrunner_host.http import create_app
from agentrunner_host.service import HostService
from starlette.routing import Mount, Route

from .conftest import TOKEN, SettingsFactory, client_for

_WRITES = {"POST", "PUT", "PATCH", "DELETE"}


def _every_route(service: HostService) -> list[tuple[str, str]]:
    """``(method, path)`` of every route the app serves, path parameters filled in: new routes (the web
    console's included) are covered without touching this test."""
    app = create_app(service, api_token=None)
    pairs: list[tuple[str, str]] = []
    for route in app.routes:
        if isinstance(route, Mount):
            # the console's static files: one probe path under the mount
            pairs.append(("GET", f"{route.path}/probe-id"))
            continue
        assert isinstance(route, Route), route
        path = re.sub(r"\{[^}]+\}", "probe-id", route.path)
        pairs.extend((method, path) for method in sorted(route.methods or ()) if method != "HEAD")
    assert len(pairs) >= 19
    return pairs


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no-token", "token"])
async def test_a_foreign_host_is_refused_with_421_on_every_route(
    service: HostService, token: str | None
) -> None:
    """DNS rebinding: the page's own name arrives as ``Host``; refused before auth and before the handler,
    also when the right token is sent."""
    async with client_for(service, token=token) as client:
        for method, path in _every_route(service):
            for host in ("evil.example:8420", "127.0.0.1.example", "localhost.evil.example", "[::2]:8420"):
                response = await client.request(method, path, headers={"Host": host})
                assert response.status_code == 421, (method, path, host, response.text)
                assert response.json()["error"]["code"] == "misdirected_request"


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no-token", "token"])
async def test_a_cross_site_origin_is_refused_with_403_on_every_route(
    service: HostService, token: str | None
) -> None:
    """A page on another site (or another port of localhost, or a sandboxed ``null`` origin) gets 403."""
    async with client_for(service, token=token) as client:
        for method, path in _every_route(service):
            for origin in ("http://evil.example", "http://127.0.0.1:9999", "null", "http://localhost"):
                response = await client.request(method, path, headers={"Origin": origin})
                assert response.status_code == 403, (method, path, origin, response.text)
                assert response.json()["error"]["code"] == "forbidden_origin"
            fetched = await client.request(method, path, headers={"Sec-Fetch-Site": "cross-site"})
            assert fetched.status_code == 403, (method, path)


async def test_the_probe_requests_of_the_finding_are_refused(service: HostService) -> None:
    """The exact requests of the finding: a text/plain event from a foreign origin (no preflight in a browser),
    an agent added the same way, a transcript read under a foreign Host. Nothing is stored."""
    async with client_for(service) as client:
        event = await client.post(
            "/v1/events",
            content=b'{"text":"x","conversation_id":"victim"}',
            headers={"Content-Type": "text/plain", "Origin": "http://evil.example"},
        )
        assert event.status_code == 403
        agent = await client.post(
            "/v1/agents",
            content=b'{"agent_id":"evil","runner_id":"plugin:agentrunner/echo/default"}',
            headers={"Content-Type": "text/plain", "Origin": "http://evil.example"},
        )
        assert agent.status_code == 403
        transcript = await client.get(
            "/v1/conversations/victim/transcript", headers={"Host": "evil.example:8420"}
        )
        assert transcript.status_code == 421
        assert (await client.get("/v1/agents/evil")).status_code == 404
        items = (await client.get("/v1/conversations/victim/transcript")).json()["items"]
        assert items == []


async def test_writes_accept_only_application_json(service: HostService) -> None:
    """Every write route refuses the media types a browser sends without a preflight (and none at all)."""
    async with client_for(service) as client:
        for method, path in _every_route(service):
            if method not in _WRITES:
                continue
            for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
                response = await client.request(
                    method, path, content=b"{}", headers={"Content-Type": content_type}
                )
                assert response.status_code == 415, (method, path, content_type)
                assert response.json()["error"]["code"] == "unsupported_media_type"
            bare = await client.request(method, path, content=b"{}")
            assert bare.status_code == 415, (method, path)
        accepted = await client.post(
            "/v1/events?wait=true",
            content=b'{"text":"x"}',
            headers={"Content-Type": "application/json; charset=utf-8"},
        )
        assert accepted.status_code == 200
        # A write without a body (cancel) needs no content type.
        assert (await client.post("/v1/runs/nope/cancel")).status_code == 404


async def test_same_origin_and_loopback_names_are_served(service: HostService) -> None:
    """The API's own origin, and every loopback spelling of the host, pass."""
    for base in ("http://127.0.0.1:8420", "http://localhost:8420", "http://[::1]:8420", "http://127.0.0.2"):
        async with client_for(service, base_url=base) as client:
            assert (await client.get("/healthz")).status_code == 200, base
            origin = base.lower()
            same = await client.get("/v1/agents", headers={"Origin": origin})
            assert same.status_code == 200, base
            assert "access-control-allow-origin" not in same.headers


async def test_configured_hosts_are_served_and_star_serves_any(make_settings: SettingsFactory) -> None:
    """``http.allowed_hosts`` adds names; ``"*"`` turns the Host check off (behind a trusted proxy)."""
    settings = make_settings('[http]\nallowed_hosts = ["api.example.org"]\n')
    async with HostService.open(settings) as service:
        async with client_for(service, base_url="http://api.example.org") as client:
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/healthz", headers={"Host": "other.example.org"})).status_code == 421
        async with client_for(service, base_url="http://anything.example", allowed_hosts=["*"]) as client:
            assert (await client.get("/healthz")).status_code == 200


async def test_cors_is_off_unless_origins_are_configured(make_settings: SettingsFactory) -> None:
    """No CORS headers and a refused preflight by default; configured origins get CORS, others stay refused."""
    preflight = {"Origin": "https://console.example", "Access-Control-Request-Method": "POST"}
    async with HostService.open(make_settings()) as service, client_for(service) as client:
        refused = await client.options("/v1/events", headers=preflight)
        assert refused.status_code == 403
        assert "access-control-allow-origin" not in refused.headers
    settings = make_settings('[http]\nallowed_origins = ["https://console.example"]\n')
    async with HostService.open(settings) as service, client_for(service, token=TOKEN) as client:
        allowed = await client.options(
            "/v1/events",
            headers={**preflight, "Access-Control-Request-Headers": "authorization,content-type"},
        )
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == "https://console.example"
        listed = await client.get("/v1/agents", headers={"Origin": "https://console.example"})
        assert listed.status_code == 200
        assert listed.headers["access-control-allow-origin"] == "https://console.example"
        other = await client.get("/v1/agents", headers={"Origin": "https://evil.example"})
        assert other.status_code == 403


async def test_the_guard_answers_before_the_token_check(service: HostService) -> None:
    """Without the token, a foreign Host is 421 (not 401) and a good Host is 401: the guard is outermost."""
    app = create_app(service, api_token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8420") as anonymous:
        assert (await anonymous.get("/v1/agents", headers={"Host": "evil.example"})).status_code == 421
        assert (await anonymous.get("/v1/agents")).status_code == 401
