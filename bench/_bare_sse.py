"""The bare floor of the ``http`` suite: a Starlette app on uvicorn (same stack and protocol as ``serve``) that
answers ``POST /v1/events`` with fixed SSE bytes, the bytes ``serve`` sent for the same echo request.

``python -m bench._bare_sse FD BODY_FILE``: FD is an inherited TCP socket, bound and listening (the parent
picked nothing for this process to race for); prints ``ready`` as it starts serving it.
"""

from __future__ import annotations

import gc
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

KEEP_ALIVE_SECONDS = 3600
"""Idle keep-alive time of both servers in bench.http_echo (this app's uvicorn, ``serve``'s ``[http]
keep_alive_seconds``)."""


def app_for(events: list[bytes]) -> Starlette:
    """The app: read the JSON body, then stream *events* (one SSE event per chunk, as ``serve`` does)."""

    async def submit(request: Request) -> Response:
        await request.body()

        async def stream() -> AsyncIterator[bytes]:
            for event in events:
                yield event

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    return Starlette(routes=[Route("/v1/events", submit, methods=["POST"])])


def main() -> None:
    listening = socket.socket(fileno=int(sys.argv[1]))
    body = Path(sys.argv[2]).read_bytes()
    events = [chunk + b"\n\n" for chunk in body.split(b"\n\n") if chunk]
    config = uvicorn.Config(
        app_for(events),
        log_level="warning",
        lifespan="off",
        access_log=False,
        server_header=False,
        http="h11",
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    server = uvicorn.Server(config)
    # as serve does before it listens (agentrunner_host.http.server.freeze_startup_heap): the same collector
    # settings on both sides, so the floor pays no full collection over its startup objects either
    gc.collect()
    gc.freeze()
    print("ready", flush=True)
    server.run(sockets=[listening])


if __name__ == "__main__":
    main()
