"""Serving the API with uvicorn, with a graceful shutdown on SIGINT/SIGTERM.

On the first signal the live runs are cancelled at once (each ends ``run.failed``/``cancelled`` and is
recorded), which also ends every open result stream, so uvicorn's connection drain is short; then the
listener closes and the caller closes the service. A second SIGINT forces the exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import resource
import signal
import socket
import threading
from collections.abc import Callable, Generator
from typing import Final, cast

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from agentrunner_host.config import HttpConfig
from agentrunner_host.service import HostService

from .app import create_app
from .coalescing import CoalescingTransport

__all__ = [
    "OWN_FILES",
    "freeze_startup_heap",
    "guarded_protocol",
    "raise_open_files_limit",
    "serve",
    "server_config",
]

log = logging.getLogger("agentrunner.http")
_log = log

_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)

OWN_FILES: Final = 1024
"""Descriptors ``serve`` keeps for itself besides its connections: database files, plugin pipes, logs."""


def raise_open_files_limit(connections: int) -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` so that *connections* sockets fit besides
    :data:`OWN_FILES` (never above the hard limit, never lowered); returns the soft limit now in force.

    Many systems start services with a soft limit of 1,024 descriptors, which would make ``accept`` fail
    long before ``[http] max_connections`` open SSE streams; the hard limit is usually far higher and an
    unprivileged process may raise its soft limit up to it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + OWN_FILES
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        soft = wanted
    if soft != resource.RLIM_INFINITY and soft < connections + OWN_FILES:
        log.warning(
            "open-files limit %d is below [http] max_connections %d + %d of serve's own: connections past it"
            " fail to be accepted",
            soft,
            connections,
            OWN_FILES,
        )
    return soft


def guarded_protocol(header_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing any connection that has not sent a complete request head within
    *header_timeout* seconds of connecting or of its previous answer, and sending the writes of one loop turn
    as one (:class:`~.coalescing.CoalescingTransport`).

    uvicorn itself only times out idle keep-alive connections *between* requests; a client that opens a
    connection and never finishes its headers (a half-open or slowloris connection) would hold it forever.
    """

    class _GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(header_timeout, self._expire, self.cycle)

        def _expire(self, cycle: object) -> None:
            self._head_timer = None
            # A new request cycle began since the timer was armed: its head arrived in time.
            if self.cycle is cycle and not self.transport.is_closing():
                _log.debug("closing a connection that sent no complete request head in %.1fs", header_timeout)
                self.transport.close()

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # pyright: ignore[reportArgumentType]
            # the responses' writes through a transport that sends one turn's writes at once (uvicorn's flow
            # control keeps the socket transport: super() gave it that one)
            self.transport = CoalescingTransport(self.transport, self.loop)
            self._arm()

        def _between_requests(self) -> bool:
            # uvicorn annotates the cycle as always set; it is None until the first request head arrives.
            cycle = cast("RequestResponseCycle | None", self.cycle)
            return cycle is None or cycle.response_complete

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._between_requests():
                self._arm()
            else:
                self._disarm()

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return _GuardedH11Protocol


def freeze_startup_heap() -> None:
    """Move every object alive now (the imported modules, the app, the service) out of the cyclic garbage
    collector's reach (:func:`gc.freeze`). They live as long as the process, yet each full collection walked
    all of them (~158,000): about once per thousand echo requests, ~80 ms each, some 80 µs of CPU per
    request, more than all the younger collections together. Garbage made from now on is collected as
    before; a cycle among the frozen objects that becomes garbage later is never freed (it would have been
    startup data)."""
    gc.collect()
    gc.freeze()


class _Server(uvicorn.Server):
    def __init__(
        self,
        config: uvicorn.Config,
        *,
        on_exit: Callable[[], None],
        on_listening: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        self._on_listening = on_listening

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit or self._on_listening is None or not self.servers:
            return
        # The bound port, not the configured one: with port 0 the kernel chose it while binding.
        bound: tuple[str, int] = self.servers[0].sockets[0].getsockname()[:2]
        self._on_listening(int(bound[1]))

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


def server_config(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    http: HttpConfig,
    log_level: str = "info",
    graceful_shutdown_seconds: float = 5.0,
) -> uvicorn.Config:
    """The uvicorn configuration of ``serve``: the guarded protocol (request-head timeout), the keep-alive
    timeout and the connection limit from *http*."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="off",
        access_log=log_level == "debug",
        server_header=False,
        # uvicorn's loggers propagate to the root handlers, where the host's secret redaction sits.
        log_config=None,
        http=guarded_protocol(http.header_timeout_seconds),
        timeout_keep_alive=http.keep_alive_seconds,
        limit_concurrency=http.max_connections,
        timeout_graceful_shutdown=max(1, round(graceful_shutdown_seconds)),
    )


async def serve(
    service: HostService,
    *,
    host: str,
    port: int,
    api_token: str | None,
    log_level: str = "info",
    graceful_shutdown_seconds: float = 5.0,
    http: HttpConfig | None = None,
    on_listening: Callable[[int], None] | None = None,
) -> None:
    """Serve the API until a signal arrives (or the server fails to start: ``SystemExit`` from uvicorn).

    *http* (default: the service's ``[http]`` settings) gives the request guard's allowlists and the
    connection limits: request-head and keep-alive timeouts, and the most concurrent connections.
    *on_listening* is called with the bound port once the server listens (with *port* 0, the one the
    kernel chose)."""
    limits = http or service.settings.config.http
    app = create_app(
        service,
        api_token=api_token,
        allowed_hosts=limits.allowed_hosts,
        allowed_origins=limits.allowed_origins,
    )
    config = server_config(
        app,
        host=host,
        port=port,
        http=limits,
        log_level=log_level,
        graceful_shutdown_seconds=graceful_shutdown_seconds,
    )
    raise_open_files_limit(limits.max_connections)
    tasks: set[asyncio.Task[None]] = set()

    def begin_shutdown() -> None:
        log.info("shutting down: cancelling live runs")
        task = asyncio.get_running_loop().create_task(service.cancel_all())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    server = _Server(config, on_exit=begin_shutdown, on_listening=on_listening)
    freeze_startup_heap()
    await server.serve()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
