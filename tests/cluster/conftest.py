"""Fixtures of the multi-host tests: one database shared by several hosts (SQLite file or a fresh PostgreSQL
database per test, reached with ``AGENTRUNNER_TEST_PG_URL``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from agentrunner_host.config import Settings, load_settings
from agentrunner_host.http import create_app
from agentrunner_host.service import HostService
from pg_databases import temporary_pg_database

HostSettings = Callable[..., Settings]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """One database for several hosts: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
        return
    async with temporary_pg_database() as url:
        yield url


@pytest.fixture
def host_settings(tmp_path: Path) -> HostSettings:
    """Settings of host *name* (its own data directory and machine name) on the database *url*, with more
    TOML text (keys of ``[cluster]`` come first)."""

    def make(name: str, url: str, toml: str = "", **overrides: object) -> Settings:
        home = tmp_path / name
        home.mkdir(exist_ok=True)
        path = home / "agentrunner.toml"
        # hosts of one test share a process: each needs its own machine name (a restart keeps it)
        path.write_text(f'[cluster]\nhost_name = "machine-{name}"\n{toml}', encoding="utf-8")
        env = {"AGENTRUNNER_DATA_DIR": str(home / "data"), "AGENTRUNNER_DATABASE_URL": url}
        return load_settings(path, environ=env, cwd=home, **overrides)  # pyright: ignore[reportArgumentType]

    return make


def client_for(service: HostService) -> httpx.AsyncClient:
    """An HTTP client of the service's app, in process."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(service, api_token=None)),
        base_url="http://127.0.0.1:8420",
    )
