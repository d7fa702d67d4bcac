"""Serve an ASGI app on 127.0.0.1 (a port the kernel picks) for the duration of a test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any

import uvicorn
from loopback_uvicorn import serve_on_loopback


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncGenerator[int]:
    """Run *app* with lifespan on a loopback port; yields the port."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,
    )
    async with serve_on_loopback(config) as port:
        yield port
