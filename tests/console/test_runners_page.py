"""The console's runners page over HTTP, in process: every runner with its risk badge, process status and
disable switch; a switch set through the API shows with its reason and the next event is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from agentrunner_host.config import ECHO_RUNNER_ID, load_settings
from agentrunner_host.http import create_app
from agentrunner_host.service import HostService

TOKEN = "console-token-0123456789"
BASE = "http://127.0.0.1:8420"
ORIGIN = {"Origin": BASE}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = load_settings(None, environ={"AGENTRUNNER_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    async with HostService.open(settings) as service:
        app = create_app(service, api_token=TOKEN)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
            signed = await c.post("/login", json={"token": TOKEN}, headers=ORIGIN)
            assert signed.status_code == 204, signed.text
            yield c


async def test_the_runners_page_shows_the_risk_and_the_switch(client: httpx.AsyncClient) -> None:
    """The page lists echo with its risk level, process mode and a disable form; after a disable through
    the API (as the page's script does) it shows the reason and an enable form, and events are refused."""
    page = await client.get("/runners")
    assert page.status_code == 200, page.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    html = page.text
    assert f'data-runner="{ECHO_RUNNER_ID}"' in html
    assert 'data-risk="medium"' in html  # echo runs in the host process
    assert 'data-action="disable"' in html
    assert 'href="/runners"' in html  # in the navigation

    put = await client.put(
        f"/v1/runners/{ECHO_RUNNER_ID}/disabled", json={"reason": "<b>ops</b> pause"}, headers=ORIGIN
    )
    assert put.status_code == 200, put.text
    html = (await client.get("/runners")).text
    assert "data-disabled" in html
    assert 'data-action="enable"' in html
    assert "&lt;b&gt;ops&lt;/b&gt; pause" in html  # the reason is text, never markup
    refused = await client.post("/v1/events", json={"input": {"text": "x"}}, headers=ORIGIN)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "runner_disabled"


async def test_the_runners_page_needs_the_token(tmp_path: Path) -> None:
    """Without the session the page sends the browser to the login form."""
    settings = load_settings(None, environ={"AGENTRUNNER_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)
    async with HostService.open(settings) as service:
        app = create_app(service, api_token=TOKEN)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
            answer = await c.get("/runners")
            assert answer.status_code in {303, 401}, answer.text
