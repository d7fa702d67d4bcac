"""Serving the API with uvicorn, with a graceful shutdown on SIGINT/SIGTERM.

On the first signal the live runs are cancelled at once (each ends ``run.failed``/``cancelled`` and is
recorded), which also ends every open result stream, so uvicorn's connection drain is short; then the
listener closes and the caller closes the service. A second SIGINT forces the exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Generator
from typing import Final

import uvicorn

from agentrunner_host.service import HostService

from .app import create_app

__all__ = ["serve"]

log = logging.getLogger("agentrunner.http")

_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, *, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: object) -> None:
        if not self.should_exit:
            self._on_exit()
        super().handle_exit(sig, None)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        # uvicorn re-raises a captured signal after serving, which would interrupt the service's own cleanup;
        # the loop's handlers below stop the server and leave the rest of the shutdown to the caller.
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        loop = asyncio.get_running_loop()
        for sig in _SIGNALS:
            loop.add_signal_handler(sig, self.handle_exit, sig, None)
        try:
            yield
        finally:
            for sig in _SIGNALS:
                loop.remove_signal_handler(sig)


async def serve(
    service: HostService,
    *,
    host: str,
    port: int,
    api_token: str | None,
    log_level: str = "info",
    graceful_shutdown_seconds: float = 5.0,
) -> None:
    """Serve the API until a signal arrives (or the server fails to start: ``SystemExit`` from uvicorn)."""
    app = create_app(service, api_token=api_token)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="off",
        access_log=log_level == "debug",
        server_header=False,
        timeout_graceful_shutdown=max(1, round(graceful_shutdown_seconds)),
    )
    tasks: set[asyncio.Task[None]] = set()

    def begin_shutdown() -> None:
        log.info("shutting down: cancelling live runs")
        task = asyncio.get_running_loop().create_task(service.cancel_all())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    server = _Server(config, on_exit=begin_shutdown)
    await server.serve()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
