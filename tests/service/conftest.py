"""Fixtures of the service tests: a zero-configuration service on a temporary data directory and an HTTP
client talking to its app in process (``httpx.ASGITransport``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from agentrunner_host.config import Settings, load_settings
from agentrunner_host.http import create_app
from agentrunner_host.service import HostService

TOKEN = "test-token-0123456789"

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
    service: HostService, *, token: str | None = None, send_token: bool = True
) -> httpx.AsyncClient:
    """An HTTP client of the service's app (bearer token sent when given and *send_token*)."""
    app = create_app(service, api_token=token)
    headers = {"Authorization": f"Bearer {token}"} if token and send_token else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8420", headers=headers
    )


@pytest.fixture
async def client(service: HostService) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the zero-configuration service without a token."""
    async with client_for(service) as c:
        yield c
