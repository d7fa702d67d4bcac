"""Serve an ASGI app on 127.0.0.1 (a free port) for the duration of a test."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncGenerator, Generator
from typing import Any

import uvicorn


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        yield


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncGenerator[int]:
    """Run *app* with lifespan on a loopback port; yields the port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    server = _QuietServer(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=1)
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                await task
                raise RuntimeError("the loopback server stopped while starting")
            await asyncio.sleep(0.005)
        yield port
    finally:
        server.should_exit = True
        await task
        sock.close()
