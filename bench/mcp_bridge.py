"""MCP bridge suite: a tool call through the run-scoped bridge next to a raw ``mcp`` call, and per-run set-up.

* ``call_tool`` through the bridge (bearer authentication, per-run tool lookup, args validation against the
  SDK surface, one ``AgentRunAPI`` back-call over an in-memory transport, result projection) vs ``call_tool``
  of a trivial ``MCPServer`` tool; both over streamable HTTP on 127.0.0.1, both served by uvicorn on the same
  event loop, one ``ClientSession`` each (perf-floors row N; goal ≤ 1.2x);
* per-run set-up: ``BridgeServer.open_run`` + ``close`` on a running server (goal ≤ 10 ms; row O says a
  per-run server process would cost ~1.8 s);
* informational, full mode only (slow or spawning a process): opening a session (initialize + tools/list) on
  the bridge vs on the raw server, and ``call_tool`` through the stdio proxy vs the same call over HTTP.

Runs under ``python -m bench`` (``measures``) or alone: ``uv run python -m bench.mcp_bridge``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator
from typing import Any

import httpx2
import uvicorn
from agentrunner import AgentRunAPI
from agentrunner.actions import BackCallRequest
from agentrunner.context import AgentRunContext
from agentrunner_mcp import PROXY_TOKEN_ENV, PROXY_URL_ENV, BridgeServer
from agentrunner_mcp.projections import proxy_command
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp

from ._framework import Goal, Measure, SuiteContext

__all__ = ["measures"]

_STATE = {"scope": "runner", "key": "k", "value": "v", "exists": True, "version": 1}


class _MemoryTransport:
    """The host side reduced to a dict lookup, so the row shows the bridge's own cost."""

    async def call(self, request: BackCallRequest, *, timeout: float | None) -> dict[str, Any]:
        return _STATE

    def stream(self, request: BackCallRequest, *, timeout: float | None) -> AsyncIterator[dict[str, Any]]:
        raise NotImplementedError


def _context(run_id: str) -> AgentRunContext:
    return AgentRunContext.model_validate(
        {
            "run_id": run_id,
            "trigger": {"type": "message.received", "source": "api"},
            "event": {"event_id": "evt-bench", "event_type": "message.received", "source": "bench"},
            "conversation": {"conversation_id": "conv-bench"},
            "input": {"text": "bench"},
            "delivery": {"surface": "mcp"},
            "resources": {
                "tools": [
                    {"tool_name": f"tool_{i}", "operations": ["call"], "parameters": {"type": "object"}}
                    for i in range(5)
                ]
            },
            "context": {"available_apis": {"history_page": True, "history_search": True, "state": True}},
            "runtime": {"trace_id": "trace-bench"},
        }
    )


def _raw_server() -> MCPServer:
    raw = MCPServer(name="raw-floor", version="1")

    @raw.tool()
    async def state_get(scope: str, key: str) -> dict[str, Any]:
        """Return a fixed state value."""
        return _STATE

    return raw


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        yield


@contextlib.asynccontextmanager
async def _serve(app: ASGIApp) -> AsyncGenerator[str]:
    """Serve *app* on a free loopback port; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _QuietServer(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
        await asyncio.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@contextlib.asynccontextmanager
async def _session(url: str, headers: dict[str, str]) -> AsyncGenerator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


class _Rig:
    """Servers and sessions held open by one background task (anyio scopes must exit in the task that
    entered them, and the framework runs each sample as its own task)."""

    def __init__(self, *, with_proxy: bool) -> None:
        self.with_proxy = with_proxy
        self.proxy_client: ClientSession | None = None
        self.bridge = BridgeServer()
        self.bridge_client: ClientSession | None = None
        self.raw_client: ClientSession | None = None
        self.raw_url = ""
        self.token = ""
        self.ready = asyncio.Event()
        self.done = asyncio.Event()

    async def hold(self) -> None:
        ctx = _context("run-bench")
        async with self.bridge, _serve(_raw_server().streamable_http_app()) as raw_base:
            registration = self.bridge.open_run(ctx, AgentRunAPI(_MemoryTransport(), run_id=ctx.run_id))
            self.token = registration.token
            self.raw_url = raw_base + "/mcp"
            async with (
                _session(self.bridge.url, {"Authorization": f"Bearer {self.token}"}) as bridge_client,
                _session(self.raw_url, {}) as raw_client,
            ):
                self.bridge_client, self.raw_client = bridge_client, raw_client
                if not self.with_proxy:
                    self.ready.set()
                    await self.done.wait()
                    return
                command, *args = proxy_command()
                env = {**os.environ, PROXY_URL_ENV: self.bridge.url, PROXY_TOKEN_ENV: self.token}
                params = StdioServerParameters(command=command, args=args, env=env)
                async with stdio_client(params) as (read, write), ClientSession(read, write) as proxy_client:
                    await proxy_client.initialize()
                    self.proxy_client = proxy_client
                    self.ready.set()
                    await self.done.wait()


def measures(ctx: SuiteContext) -> list[Measure]:
    """The suite's rows."""
    rig = _Rig(with_proxy=not ctx.quick)
    holder = ctx.loop.create_task(rig.hold())

    async def started() -> None:
        await asyncio.wait({holder, asyncio.ensure_future(rig.ready.wait())}, return_when="FIRST_COMPLETED")
        if holder.done():
            holder.result()

    ctx.run(started())

    async def stop() -> None:
        rig.done.set()
        await holder
        # sse_starlette polls for shutdown from one task per loop for as long as the loop lives; end it so
        # closing the suite's loop does not destroy it pending.
        for task in asyncio.all_tasks():
            if getattr(task.get_coro(), "__qualname__", "") == "_shutdown_watcher":
                task.cancel()

    ctx.add_cleanup(stop)
    bridge_client, raw_client = rig.bridge_client, rig.raw_client
    assert bridge_client is not None
    assert raw_client is not None
    args = {"scope": "runner", "key": "k"}

    async def bridge_call() -> None:
        result = await bridge_client.call_tool("state_get", args)
        assert not result.is_error

    async def raw_call() -> None:
        result = await raw_client.call_tool("state_get", args)
        assert not result.is_error

    run_ctx = _context("run-setup")
    run_api = AgentRunAPI(_MemoryTransport(), run_id=run_ctx.run_id)

    def open_and_close() -> None:
        rig.bridge.open_run(run_ctx, run_api).close()

    def session_open(url: str, headers: dict[str, str]) -> Callable[[], Awaitable[None]]:
        async def open_list_close() -> None:
            async with _session(url, headers) as client:
                await client.list_tools()

        return open_list_close

    bridge_headers = {"Authorization": f"Bearer {rig.token}"}
    rows: list[Measure] = []
    if not ctx.quick:  # a session costs tens of milliseconds: too slow for the CI smoke run
        rows.append(
            Measure(
                "new session on the bridge: initialize + tools/list + close (full mode only)",
                session_open(rig.bridge.url, bridge_headers),
                floor=session_open(rig.raw_url, {}),
                floor_name="the same against the raw MCPServer",
                unit="µs/session",
            )
        )
    proxy_client = rig.proxy_client
    if proxy_client is not None:

        async def proxy_call() -> None:
            result = await proxy_client.call_tool("state_get", args)
            assert not result.is_error

        rows.append(
            Measure(
                "call_tool through the stdio proxy (full mode only)",
                proxy_call,
                floor=bridge_call,
                floor_name="the same call over streamable HTTP straight to the bridge",
                unit="µs/call",
            )
        )
    return [
        Measure(
            "call_tool through the bridge (HTTP, back-call over memory)",
            bridge_call,
            floor=raw_call,
            floor_name="ClientSession.call_tool of a trivial async MCPServer tool over streamable HTTP on loopback",
            goal=Goal.ratio(1.2, source="issue 7; perf-floors row N"),
            unit="µs/call",
        ),
        Measure(
            "bridge per-run set-up: open_run + close",
            open_and_close,
            goal=Goal.value(10_000, source="issue 7; perf-floors row O"),
            unit="µs/run",
        ),
        *rows,
    ]


def main() -> None:
    """Run this suite alone and print its table."""
    from ._framework import Mode, environment, render_table, run_suites
    from ._framework import SuiteRef as _Ref

    ref = _Ref("mcp", __name__, "MCP bridge vs raw mcp")
    rows, errors = run_suites([ref], Mode.full(), quick=False)
    print(render_table(rows, environment(), Mode.full(), quick=False), end="")
    for error in errors:
        print(error)


if __name__ == "__main__":
    main()
