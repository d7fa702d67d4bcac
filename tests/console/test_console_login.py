"""The console's login rules beyond the cookie itself: wrong tokens are rate limited per client (429 with
``Retry-After``, other clients unaffected, a right token clears the record), and the session cookie is
``Secure`` behind a TLS-terminating proxy — configured (``[http] cookie_secure_mode = "always"``) or told by a
trusted proxy's ``X-Forwarded-Proto`` through uvicorn's proxy-header handling, which ``serve`` keeps on."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import httpx
import pytest
from agentrunner_host.config import load_settings
from agentrunner_host.http import create_app
from agentrunner_host.http.console.throttle import LoginThrottle
from agentrunner_host.http.server import server_config
from agentrunner_host.service import HostService
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

TOKEN = "console-token-0123456789"
BASE = "http://127.0.0.1:8420"
ORIGIN = {"Origin": BASE}


@contextlib.asynccontextmanager
async def _service(tmp_path: Path, config: str = "") -> AsyncGenerator[HostService]:
    (tmp_path / "agentrunner.toml").write_text(config, encoding="utf-8")
    settings = load_settings(
        tmp_path / "agentrunner.toml", environ={"AGENTRUNNER_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path
    )
    async with HostService.open(settings) as service:
        yield service


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[HostService]:
    """Three wrong tokens a minute per client."""
    async with _service(tmp_path, "[http]\nlogin_max_failures = 3\n") as opened:
        yield opened


def _client(app: object, *, address: str = "10.0.0.1", base: str = BASE) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))  # pyright: ignore[reportArgumentType]
    return httpx.AsyncClient(transport=transport, base_url=base)


async def test_wrong_tokens_are_rate_limited_per_client(service: HostService) -> None:
    app = create_app(service, api_token=TOKEN)
    async with _client(app) as attacker, _client(app, address="10.0.0.2") as other:
        for _ in range(3):
            wrong = await attacker.post("/login", json={"token": "guess"}, headers=ORIGIN)
            assert wrong.status_code == 401
        refused = await attacker.post("/login", json={"token": "guess"}, headers=ORIGIN)
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_attempts"
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        # even the right token waits: the limit is checked before the token
        assert (await attacker.post("/login", json={"token": TOKEN}, headers=ORIGIN)).status_code == 429
        assert "set-cookie" not in refused.headers
        # another client is not affected
        assert (await other.post("/login", json={"token": TOKEN}, headers=ORIGIN)).status_code == 204


def test_the_window_slides_and_a_right_token_clears_the_record() -> None:
    now = [1000.0]
    throttle = LoginThrottle(max_failures=2, window_seconds=60, clock=lambda: now[0])
    throttle.failed("a")
    now[0] += 30
    throttle.failed("a")
    assert throttle.retry_after("a") == 30  # until the first failure is 60 s old
    now[0] += 30
    assert throttle.retry_after("a") is None  # the first one left the window
    throttle.failed("a")
    assert throttle.retry_after("a") == 30
    throttle.succeeded("a")
    assert throttle.retry_after("a") is None


def test_memory_is_bounded_by_the_number_of_clients() -> None:
    throttle = LoginThrottle(max_failures=1, window_seconds=60, max_clients=2, clock=lambda: 0.0)
    for client in ("a", "b", "c"):
        throttle.failed(client)
    assert throttle.retry_after("a") is None  # forgotten: the least recently failing one
    assert throttle.retry_after("b") is not None and throttle.retry_after("c") is not None


async def test_secure_cookie_always_marks_it_secure_over_plain_http(tmp_path: Path) -> None:
    """Behind a TLS-terminating proxy the host sees plain HTTP; ``cookie_secure_mode = "always"`` still marks the
    cookie ``Secure`` (the default ``auto`` does not)."""
    async with (
        _service(tmp_path, '[http]\ncookie_secure_mode = "always"\n') as service,
        _client(create_app(service, api_token=TOKEN)) as client,
    ):
        answer = await client.post("/login", json={"token": TOKEN}, headers=ORIGIN)
        assert answer.status_code == 204 and "Secure" in answer.headers["set-cookie"]
        # (the client keeps a Secure cookie off plain HTTP, so sign out with the bearer token)
        out = await client.post("/logout", headers={**ORIGIN, "Authorization": f"Bearer {TOKEN}"})
        assert out.status_code == 204 and "Secure" in out.headers["set-cookie"]


async def test_a_trusted_proxys_forwarded_proto_makes_it_secure(service: HostService) -> None:
    """``serve`` keeps uvicorn's proxy headers on (trusting ``FORWARDED_ALLOW_IPS``, loopback by default): a
    proxy there saying ``X-Forwarded-Proto: https`` gets a ``Secure`` cookie; an untrusted client's claim is
    ignored."""
    app = create_app(service, api_token=TOKEN)
    config = server_config(app, host="127.0.0.1", port=0, http=service.settings.config.http)
    assert config.proxy_headers
    proxied = ProxyHeadersMiddleware(app, trusted_hosts="127.0.0.1")  # pyright: ignore[reportArgumentType]
    forwarded = {**ORIGIN, "X-Forwarded-Proto": "https"}
    async with _client(proxied, address="127.0.0.1") as via_proxy:
        answer = await via_proxy.post("/login", json={"token": TOKEN}, headers=forwarded)
        assert answer.status_code == 204 and "Secure" in answer.headers["set-cookie"]
    async with _client(proxied, address="10.9.9.9") as direct:
        answer = await direct.post("/login", json={"token": TOKEN}, headers=forwarded)
        assert answer.status_code == 204 and "Secure" not in answer.headers["set-cookie"]
