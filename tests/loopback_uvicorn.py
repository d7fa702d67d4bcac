"""uvicorn in the test's own event loop on a loopback port the kernel picks while uvicorn binds it (port 0):
the port is read from the listening socket, so no port is picked and released for another process to take,
and the wait for it is an event (set once uvicorn listens), not a poll of ``Server.started``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncGenerator, Generator
from typing import Any, Literal

import uvicorn


class _LoopbackServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        # the test process keeps its own SIGINT/SIGTERM handling (pytest's), so uvicorn installs none
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.listening.set()


@contextlib.asynccontextmanager
async def serve_on_loopback(config: uvicorn.Config) -> AsyncGenerator[int]:
    """Serve *config* (``host="127.0.0.1"``, ``port=0``) until the block ends; yields the port it listens on.

    A server that stops while starting (its lifespan failed, say) raises here instead of yielding."""
    if (config.host, config.port) != ("127.0.0.1", 0):
        raise ValueError(f"serve_on_loopback binds 127.0.0.1 port 0, not {config.host} port {config.port}")
    server = _LoopbackServer(config)
    task = asyncio.create_task(server.serve())
    listening = asyncio.create_task(server.listening.wait())
    try:
        await asyncio.wait({task, listening}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        listening.cancel()
        if not server.listening.is_set():
            task.cancel()  # cancelled while waiting: nothing else would stop it
    if not server.listening.is_set():
        await task  # raises what stopped it, if anything did
        raise RuntimeError("the loopback server stopped while starting")
    try:
        yield int(server.servers[0].sockets[0].getsockname()[1])
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def serve_app(app: Any, *, lifespan: Literal["on", "off"] = "on") -> AsyncGenerator[int]:
    """Serve the ASGI *app* quietly (warnings only, no access log, 1 s shutdown grace) with :func:`serve_on_loopback`;
    yields the port."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        access_log=False,
        lifespan=lifespan,
        timeout_graceful_shutdown=1,
    )
    async with serve_on_loopback(config) as port:
        yield port
