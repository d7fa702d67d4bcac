"""Remote runtimes: the same wire protocol over an authenticated WebSocket on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agentrunner import AgentRunner, codec
from agentrunner.wire import load_runners
from agentrunner.wire.websocket import TOKEN_ENV, serve_websocket
from agentrunner_host.errors import RunnerTransportError
from agentrunner_host.runtime import RemoteRuntimeServer
from agentrunner_host.runtime.connection import RunnerConnection
from websockets.exceptions import InvalidStatus

from .helpers import ECHO_DIR, FakeBackCallHandler, make_request

TOKEN = "tok-echo-0123456789abcdef"
OTHER_TOKEN = "tok-other-0123456789abcdef"


@pytest.fixture
def runners(monkeypatch: pytest.MonkeyPatch) -> list[AgentRunner]:
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_runners puts the plugin dir on sys.path
    return load_runners(plugin_dir=ECHO_DIR)


@pytest.fixture
async def server(handler: FakeBackCallHandler) -> AsyncIterator[RemoteRuntimeServer]:
    # A call waits for its runtime to connect and returns as soon as it has: the bound only decides when a
    # runtime that never comes is given up on. 5 s failed under load, where starting `agentrunner-plugin
    # --connect` (a fresh interpreter importing the SDK) took longer.
    async with RemoteRuntimeServer(
        handler, tokens={"tests/echo": TOKEN, "tests/other": OTHER_TOKEN}, connect_timeout=60.0
    ) as srv:
        yield srv


@pytest.fixture
def handler() -> FakeBackCallHandler:
    return FakeBackCallHandler()


async def _results(
    conn: RunnerConnection, runner: str, run_id: str, **config: object
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async for result in conn.run(make_request(runner, run_id=run_id, config=dict(config))):
        assert isinstance(result, dict)
        out.append(result)
    return out


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_runtime_with_its_token_serves_runs_and_back_calls(
    server: RemoteRuntimeServer, runners: list[AgentRunner], handler: FakeBackCallHandler
) -> None:
    """Runs stream with sequences and back-calls are stamped with the plugin of the token."""
    runtime = asyncio.create_task(serve_websocket(runners, server.url, token=TOKEN))
    try:
        conn = server.connection("tests/echo")
        assert isinstance(conn, RunnerConnection)
        assert len(await conn.list_runners()) == 7
        streamed = await _results(conn, "streamer", "ws-run", count=30)
        assert [r["sequence"] for r in streamed] == list(range(1, 33))
        called = await _results(conn, "caller", "ws-call")
        content = called[0]["data"]
        assert isinstance(content, dict)
        assert codec.loads(content["message"]["content"])["state"]["caller"] == "tests/echo"
        assert {r.caller for r in handler.requests} == {"tests/echo"}
    finally:
        await _stop(runtime)


async def test_the_token_not_the_runtime_decides_the_identity(
    server: RemoteRuntimeServer, runners: list[AgentRunner], handler: FakeBackCallHandler
) -> None:
    """A runtime holding another plugin's token acts as that plugin: its back-calls carry that identity and the
    runners it claims for tests/echo are not listed."""
    runtime = asyncio.create_task(serve_websocket(runners, server.url, token=OTHER_TOKEN))
    try:
        conn = server.connection("tests/other")
        assert await conn.list_runners() == []
        await _results(conn, "caller", "ws-other")
        assert {r.caller for r in handler.requests} == {"tests/other"}
    finally:
        await _stop(runtime)


async def test_a_runtime_without_a_valid_token_is_refused(
    server: RemoteRuntimeServer, runners: list[AgentRunner]
) -> None:
    """A wrong token gets HTTP 401 before any frame; the plugin stays unavailable."""
    with pytest.raises(InvalidStatus, match="server rejected WebSocket connection: HTTP 401") as info:
        await serve_websocket(runners, server.url, token="not-the-right-token")
    assert info.value.response.status_code == 401
    conn = server.connection("tests/echo")
    conn.connect_timeout = 0.2
    with pytest.raises(RunnerTransportError, match="no runtime connected within") as error:
        await conn.list_runners()
    assert error.value.code == "runtime.unavailable"


async def test_a_runtime_that_disconnects_mid_run_ends_its_runs_as_crashed(
    server: RemoteRuntimeServer, runners: list[AgentRunner]
) -> None:
    """Losing the WebSocket ends live runs with runtime.crashed, like a dead child process."""
    runtime = asyncio.create_task(serve_websocket(runners, server.url, token=TOKEN))
    conn = server.connection("tests/echo")
    stream = conn.run(make_request("sleeper", run_id="ws-sleep"))
    await anext(stream)
    await _stop(runtime)
    with pytest.raises(
        RunnerTransportError, match="plugin tests/echo: the runtime closed its stream"
    ) as info:
        await anext(stream)
    assert info.value.code == "runtime.crashed"


async def test_agentrunner_plugin_connects_over_a_websocket(server: RemoteRuntimeServer) -> None:
    """The runtime program with --connect and the token in its environment serves the host, and exits when the
    host closes the connection."""
    env = {"PATH": os.environ["PATH"], TOKEN_ENV: TOKEN}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentrunner.wire.plugin",
        "--plugin-dir",
        str(ECHO_DIR),
        "--connect",
        server.url,
        env=env,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        conn = server.connection("tests/echo")
        results = await _results(conn, "streamer", "ws-proc", count=3)
        assert results[-1]["type"] == "run.completed"
        await conn.aclose()
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _runtime_process(url: str) -> asyncio.subprocess.Process:
    """``agentrunner-plugin --connect``: a remote runtime in a process of its own (its loop can block)."""
    env = {"PATH": os.environ["PATH"], TOKEN_ENV: TOKEN}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentrunner.wire.plugin",
        "--plugin-dir",
        str(ECHO_DIR),
        "--connect",
        url,
        env=env,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def test_a_remote_runtime_that_stops_answering_is_dropped_and_a_reconnecting_one_serves(
    handler: FakeBackCallHandler,
) -> None:
    """A runner blocks the remote runtime's event loop (``time.sleep``): its TCP connection stays open, but the
    liveness ping goes unanswered, so its live runs end ``runtime.unresponsive`` and the connection is dropped.
    A runtime that connects again (as its supervisor would start it) serves the next run."""
    server = RemoteRuntimeServer(
        handler, tokens={"tests/echo": TOKEN}, connect_timeout=60.0, ping_interval=0.2, ping_timeout=2.0
    )
    await server.start()
    first = await _runtime_process(server.url)
    second: asyncio.subprocess.Process | None = None
    grandchild: int | None = None
    try:
        conn = server.connection("tests/echo")
        sibling = conn.run(make_request("sleeper", run_id="ws-sibling"))
        await anext(sibling)
        blocker = conn.run(make_request("spawner", run_id="ws-blocked"))
        said = await anext(blocker)
        assert isinstance(said, dict)
        raw: Any = said  # the wire shape the test knows
        grandchild = codec.loads(raw["data"]["message"]["content"])["grandchild"]
        for stream in (blocker, sibling):
            with pytest.raises(RunnerTransportError, match="no answer to a liveness ping") as info:
                await anext(stream)
            assert info.value.code == "runtime.unresponsive" and info.value.retryable
        assert not conn.connected
        second = await _runtime_process(server.url)
        results = await _results(conn, "streamer", "ws-after", count=3)
        assert results[-1]["type"] == "run.completed"
    finally:
        await server.aclose()
        for proc in (first, second):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()
        if grandchild is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(grandchild, signal.SIGKILL)
