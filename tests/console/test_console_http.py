"""The console over HTTP, in process: token asked once (login form → HttpOnly SameSite=Strict cookie), the
cookie accepted by pages and API alike but never for a write without this server's own Origin, the pages'
security headers, artifact upload/download, and the runs pages' filters. The browser tests are in
test_browser.py."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from agentrunner_host.config import load_settings
from agentrunner_host.http import create_app
from agentrunner_host.http.auth import SESSION_COOKIE, session_value
from agentrunner_host.service import HostService

TOKEN = "console-token-0123456789"
BASE = "http://127.0.0.1:8420"
ORIGIN = {"Origin": BASE}


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[HostService]:
    """A zero-configuration service (echo bound to every message)."""
    settings = load_settings(None, environ={"AGENTRUNNER_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    async with HostService.open(settings) as opened:
        yield opened


def _client(service: HostService, *, token: str | None = TOKEN) -> httpx.AsyncClient:
    app = create_app(service, api_token=token)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)


async def _signed_in(client: httpx.AsyncClient) -> None:
    answer = await client.post("/login", json={"token": TOKEN}, headers=ORIGIN)
    assert answer.status_code == 204, answer.text


async def test_a_page_without_the_token_redirects_to_the_login_form_and_the_api_still_answers_401(
    service: HostService,
) -> None:
    async with _client(service) as client:
        page = await client.get("/runs?status=failed")
        assert page.status_code == 303
        assert page.headers["location"] == "/login?next=%2Fruns%3Fstatus%3Dfailed"
        api = await client.get("/v1/agents")
        assert api.status_code == 401 and api.json()["error"]["code"] == "unauthorized"
        form = await client.get("/login?next=/runs")
        assert form.status_code == 200 and 'data-next="/runs"' in form.text
        assert (await client.get("/static/js/api.js")).status_code == 200
        assert (await client.get("/static/console.css")).status_code == 200


async def test_login_sets_an_httponly_strict_cookie_holding_no_token_and_a_wrong_token_is_refused(
    service: HostService,
) -> None:
    async with _client(service) as client:
        wrong = await client.post("/login", json={"token": "guess"}, headers=ORIGIN)
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
        right = await client.post("/login", json={"token": TOKEN}, headers=ORIGIN)
        assert right.status_code == 204
        cookie = right.headers["set-cookie"]
        assert cookie.startswith(f"{SESSION_COOKIE}={session_value(TOKEN)};")
        assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower() and "Path=/" in cookie
        assert TOKEN not in cookie
        page = await client.get("/chat")
        assert page.status_code == 200 and "Debug chat" in page.text
        assert (await client.get("/v1/agents")).status_code == 200


async def test_over_https_the_cookie_is_secure_and_logout_clears_it(service: HostService) -> None:
    app = create_app(service, api_token=TOKEN)
    base = "https://127.0.0.1:8420"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base) as client:
        answer = await client.post("/login", json={"token": TOKEN}, headers={"Origin": base})
        assert "Secure" in answer.headers["set-cookie"]
        assert (await client.get("/chat")).status_code == 200
        out = await client.post("/logout", headers={"Origin": base})
        assert out.status_code == 204 and 'agentrunner_session=""' in out.headers["set-cookie"]
        assert (await client.get("/chat")).status_code == 303


async def test_the_login_form_only_redirects_to_paths_of_this_server(service: HostService) -> None:
    async with _client(service) as client:
        for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"):
            form = await client.get("/login", params={"next": target})
            assert 'data-next="/"' in form.text, target


async def test_the_login_form_refuses_a_form_post_and_a_foreign_origin(service: HostService) -> None:
    async with _client(service) as client:
        form = await client.post("/login", data={"token": TOKEN}, headers=ORIGIN)
        assert form.status_code == 415
        foreign = await client.post(
            "/login", json={"token": TOKEN}, headers={"Origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        assert SESSION_COOKIE not in client.cookies


async def test_a_cookie_never_authorises_a_write_without_this_servers_own_origin(
    service: HostService,
) -> None:
    async with _client(service) as client:
        await _signed_in(client)
        body = {"text": "hi", "conversation_id": "csrf"}
        bare = await client.post("/v1/events", json=body)
        assert bare.status_code == 401
        foreign = await client.post("/v1/events", json=body, headers={"Origin": "https://evil.example"})
        assert foreign.status_code == 403
        cross = await client.post("/v1/events", json=body, headers={"Sec-Fetch-Site": "cross-site"})
        assert cross.status_code == 403
        plain = await client.post(
            "/v1/events", content=b'{"text": "hi"}', headers={**ORIGIN, "Content-Type": "text/plain"}
        )
        assert plain.status_code == 415
        own = await client.post("/v1/events?wait=true", json=body, headers=ORIGIN)
        assert own.status_code == 200 and own.json()["run"]["status"] == "completed"
        # the bearer token keeps working without an Origin (API clients are not browsers)
        bearer = await client.post(
            "/v1/events?wait=true", json=body, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert bearer.status_code == 200


async def test_a_stale_cookie_is_refused(service: HostService) -> None:
    async with _client(service) as client:
        client.cookies.set(SESSION_COOKIE, session_value("an-older-token"))
        assert (await client.get("/v1/agents")).status_code == 401
        assert (await client.get("/chat")).status_code == 303


async def test_pages_carry_a_strict_content_security_policy(service: HostService) -> None:
    async with _client(service) as client:
        await _signed_in(client)
        for path in ("/chat", "/runs", "/login"):
            page = await client.get(path, follow_redirects=True)
            policy = page.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "default-src 'none'" in policy
            assert "unsafe-inline" not in policy
            assert page.headers["x-content-type-options"] == "nosniff"


async def test_without_a_token_the_console_needs_no_login(service: HostService) -> None:
    async with _client(service, token=None) as client:
        home = await client.get("/")
        assert home.status_code == 303 and home.headers["location"] == "/chat"
        assert (await client.get("/chat")).status_code == 200
        login = await client.get("/login?next=/runs")
        assert login.status_code == 303 and login.headers["location"] == "/runs"
        assert 'id="logout"' not in (await client.get("/chat")).text


async def test_an_uploaded_file_is_an_artifact_and_downloads_never_render_as_a_page(
    service: HostService,
) -> None:
    async with _client(service) as client:
        await _signed_in(client)
        html = b"<script>alert(1)</script>"
        up = await client.post(
            "/artifacts",
            json={
                "content_base64": base64.b64encode(html).decode(),
                "name": "../../evil.html",
                "mime_type": "text/html",
                "conversation_id": "files",
            },
            headers=ORIGIN,
        )
        assert up.status_code == 201, up.text
        ref = up.json()["artifact"]
        assert ref["name"] == "evil.html" and ref["size"] == len(html) and ref["artifact_type"] == "file"
        down = await client.get(f"/artifacts/{ref['artifact_id']}")
        assert down.status_code == 200 and down.content == html
        assert down.headers["content-type"] == "application/octet-stream"
        assert down.headers["content-disposition"].startswith("attachment;")
        assert down.headers["x-content-type-options"] == "nosniff"
        assert "sandbox" in down.headers["content-security-policy"]
        png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
        up = await client.post(
            "/artifacts",
            json={
                "content_base64": base64.b64encode(png).decode(),
                "name": "p.png",
                "mime_type": "image/png",
            },
            headers=ORIGIN,
        )
        image = up.json()["artifact"]
        assert image["artifact_type"] == "image"
        shown = await client.get(f"/artifacts/{image['artifact_id']}")
        assert shown.headers["content-type"] == "image/png"
        assert shown.headers["content-disposition"].startswith("inline;")
        saved = await client.get(f"/artifacts/{image['artifact_id']}?download=1")
        assert saved.headers["content-disposition"].startswith("attachment;")
        svg = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'
        up = await client.post(
            "/artifacts",
            json={"content_base64": base64.b64encode(svg).decode(), "mime_type": "image/svg+xml"},
            headers=ORIGIN,
        )
        vector = await client.get(f"/artifacts/{up.json()['artifact']['artifact_id']}")
        assert vector.headers["content-disposition"].startswith("attachment;")
        assert vector.headers["content-type"] == "application/octet-stream"
        assert (await client.get("/artifacts/art_0000")).status_code == 404
        bad = await client.post("/artifacts", json={"content_base64": "not base64!"}, headers=ORIGIN)
        assert bad.status_code == 422
        extra = await client.post("/artifacts", json={"content_base64": "", "path": "/etc"}, headers=ORIGIN)
        assert extra.status_code == 422


async def test_runs_list_filters_and_detail_show_timeline_snapshot_audit_and_events(
    service: HostService,
) -> None:
    async with _client(service) as client:
        await _signed_in(client)
        done = await client.post(
            "/v1/events?wait=true", json={"text": "one", "conversation_id": "runs-a"}, headers=ORIGIN
        )
        run_id = done.json()["run"]["run_id"]
        direct = await client.post(
            "/v1/events?wait=true",
            json={"text": "two", "conversation_id": "runs-b", "agent_id": "default"},
            headers=ORIGIN,
        )
        assert direct.status_code == 200, direct.text
        direct_id = direct.json()["run"]["run_id"]
        assert direct.json()["run"]["binding_id"] == "agent:default"
        listed = (await client.get("/runs")).text
        assert run_id in listed and direct_id in listed
        assert direct_id in (await client.get("/runs", params={"agent": "default"})).text
        assert run_id in (await client.get("/runs", params={"status": "completed"})).text
        assert run_id not in (await client.get("/runs", params={"status": "failed"})).text
        assert run_id not in (await client.get("/runs", params={"runner": "plugin:x/y/z"})).text
        assert run_id not in (await client.get("/runs", params={"since": "2999-01-01T00:00"})).text
        assert run_id in (await client.get("/runs", params={"until": "2999-01-01T00:00"})).text
        detail = (await client.get(f"/runs/{run_id}")).text
        assert 'id="timeline"' in detail and 'data-seq="1"' in detail and "run.completed" in detail
        assert "ms</td>" in detail  # latency column
        assert 'id="snapshot"' in detail and "&#34;deadline_at&#34;" in detail  # the frozen snapshot
        assert 'id="audit"' in detail and "state.get" in detail  # echo reads its turn counter
        # the audit table is what GET /v1/audit answers for the run, in call order
        api_audit = (await client.get("/v1/audit", params={"run_id": run_id, "order": "asc"})).json()
        table = detail[detail.index('id="audit"') : detail.index("</table>", detail.index('id="audit"'))]
        shown = [int(seq) for seq in re.findall(r'data-seq="(\d+)"', table)]
        assert shown == [e["seq"] for e in api_audit["entries"]] != []
        assert "message.received" in detail  # the triggering event
        missing = await client.get("/runs/run_missing")
        assert missing.status_code == 404
        assert (await client.get("/runs/bad%20id")).status_code == 404
