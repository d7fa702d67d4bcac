"""``[runtime_server]``: ``HostService.open`` (what ``serve`` runs) starts the remote-runtime endpoint, refuses
an unset or weak token, records which runtimes are attached, and does not stall discovery on a plugin whose
runtime is not connected."""

from __future__ import annotations

import asyncio
import secrets
import sys
from pathlib import Path

import pytest
from agentrunner.wire import load_runners
from agentrunner.wire.websocket import serve_websocket
from agentrunner_host.config import Settings, load_settings
from agentrunner_host.errors import ConfigurationError
from agentrunner_host.service import HostService

ECHO_DIR = Path(__file__).resolve().parents[1] / "runtime" / "plugins" / "echo"
TOKEN_VARIABLE = "TESTS_ECHO_RUNTIME_TOKEN"


def _settings(tmp_path: Path, token: str | None) -> Settings:
    path = tmp_path / "agentrunner.toml"
    path.write_text(
        f'[runtime_server]\nport = 0\n\n[[runtime_server.plugins]]\nplugin_id = "tests/echo"\n'
        f'token_env = "{TOKEN_VARIABLE}"\n',
        encoding="utf-8",
    )
    env = {"AGENTRUNNER_DATA_DIR": str(tmp_path / "data")}
    if token is not None:
        env[TOKEN_VARIABLE] = token
    return load_settings(path, environ=env, cwd=tmp_path)


async def test_an_unset_token_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"\$TESTS_ECHO_RUNTIME_TOKEN\) is not set"):
        async with HostService.open(_settings(tmp_path, None), discover=False):
            pass


async def test_a_weak_token_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="the token of tests/echo is too weak"):
        async with HostService.open(_settings(tmp_path, "short-token"), discover=False):
            pass


async def test_a_runtime_attaching_is_recorded_and_serves_the_plugins_runners(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before a runtime connects, the plugin's discovery fails at once (no wait for a runtime); once
    ``agentrunner-plugin``'s WebSocket client connects with the token, the attachment is stored for this host
    and the runners are listed; when it goes away, the attachment is removed."""
    token = secrets.token_hex(24)
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_runners puts the plugin dir on sys.path
    async with HostService.open(_settings(tmp_path, token)) as service:
        server = service.runtime_server
        assert server is not None and server.url.startswith("ws://127.0.0.1:")
        assert not any(d.plugin_id == "tests/echo" for d in await service.runners())
        failure = service.host.registry.failure("tests/echo")
        assert failure is not None and "no runtime connected within 0s" in failure.reason
        runtime = asyncio.create_task(
            serve_websocket(load_runners(plugin_dir=ECHO_DIR), server.url, token=token)
        )
        try:
            async with asyncio.timeout(60):
                while await service.stores.requests.attached("tests/echo") != [service.host_id]:  # noqa: ASYNC110 - a stored row, no event
                    await asyncio.sleep(0.02)
            ids = {d.runner_id for d in await service.runners()}
            assert "plugin:tests/echo/streamer" in ids
        finally:
            runtime.cancel()
            await asyncio.gather(runtime, return_exceptions=True)
        async with asyncio.timeout(60):
            while await service.stores.requests.attached("tests/echo"):  # noqa: ASYNC110 - a stored row, no event
                await asyncio.sleep(0.02)
