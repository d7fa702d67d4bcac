"""Fixtures of the security suite: a zero-configuration service on a temporary data directory, its app in
process (``httpx.ASGITransport``), and a real uvicorn server on a free loopback port."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from agentrunner_host.config import Settings, load_settings
from agentrunner_host.http import create_app
from agentrunner_host.http.server import server_config
from agentrunner_host.service import HostService
from loopback_uvicorn import serve_on_loopback

TOKEN = "Vq3tX9mZ2kLp8RwN4yHs7DfB1cJg6UeA0oTiQbWxYz"
"""A token strong enough for a non-loopback bind."""

SettingsFactory = Callable[..., Settings]


@pytest.fixture
def make_settings(tmp_path: Path) -> SettingsFactory:
    """Settings from an optional TOML text and environment, with the data directory under ``tmp_path``."""

    def make(
        toml: str | None = None, *, environ: dict[str, str] | None = None, **overrides: object
    ) -> Settings:
        path = None
        if toml is not None:
            path = tmp_path / "agentrunner.toml"
            path.write_text(toml, encoding="utf-8")
        env = {"AGENTRUNNER_DATA_DIR": str(tmp_path / "data"), **(environ or {})}
        return load_settings(path, environ=env, cwd=tmp_path, **overrides)  # pyright: ignore[reportArgumentType]

    return make


@pytest.fixture
async def service(make_settings: SettingsFactory) -> AsyncIterator[HostService]:
    """A zero-configuration service (echo bound globally)."""
    async with HostService.open(make_settings()) as opened:
        yield opened


def client_for(
    service: HostService,
    *,
    token: str | None = None,
    base_url: str = "http://127.0.0.1:8420",
    **app_options: object,
) -> httpx.AsyncClient:
    """An in-process client of the service's app; sends the bearer token when one is given."""
    app = create_app(service, api_token=token, **app_options)  # pyright: ignore[reportArgumentType]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url, headers=headers)


class LiveServer:
    """A uvicorn server of the service's app, configured exactly as ``agentrunner serve`` configures it."""

    def __init__(self, service: HostService, *, token: str | None = None) -> None:
        app = create_app(service, api_token=token)
        self.config = server_config(app, host="127.0.0.1", port=0, http=service.settings.config.http)
        self._serving = contextlib.AsyncExitStack()
        self.port = 0

    async def __aenter__(self) -> LiveServer:
        self.port = await self._serving.enter_async_context(serve_on_loopback(self.config))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._serving.aclose()


@pytest.fixture
async def client(service: HostService) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of the zero-configuration service without a token."""
    async with client_for(service) as c:
        yield c
