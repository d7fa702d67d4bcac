"""Remote runtimes: the wire protocol over an authenticated WebSocket (RUNTIME_CONTROL_PLANE_V2 §5.3).

A runtime on another machine runs ``agentrunner-plugin --connect ws://host:port`` with its token in
``$AGENTRUNNER_RUNTIME_TOKEN``. :class:`RemoteRuntimeServer` accepts it only with a token configured for a plugin,
and **the token decides the identity**: every back-call from that connection is stamped with the token's
plugin id. :class:`RemoteRunnerConnection` is the :class:`~agentrunner_host.runtime.connection.RunnerConnection` of one
plugin served that way; a newer connection of the same plugin replaces the older one.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from http import HTTPStatus
from typing import Any

from agentrunner import AgentRunRequest
from agentrunner.wire import DEFAULT_RESULT_WINDOW, MAX_FRAME_BYTES
from agentrunner.wire.websocket import WebSocketFrameChannel
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

from agentrunner_host.errors import RunnerTransportError
from agentrunner_host.runtime.connection import BackCallHandler, RawResult

from .session import CLOSED, WireSession

__all__ = ["UNAVAILABLE", "RemoteRunnerConnection", "RemoteRuntimeServer"]

UNAVAILABLE = "runtime.unavailable"
"""Run failure code: no runtime of the plugin is connected."""

_log = logging.getLogger("agentrunner_host.runtime.remote")


class RemoteRunnerConnection:
    """The runners of one plugin whose runtime connects over a WebSocket.

    Calls wait up to ``connect_timeout`` for a runtime to be connected, then fail with ``runtime.unavailable``.
    """

    def __init__(
        self, plugin_id: str, *, connect_timeout: float = 10.0, list_timeout: float | None = None
    ) -> None:
        self._plugin_id = plugin_id
        self.connect_timeout = connect_timeout
        self.list_timeout = list_timeout
        """How long listing the runners waits for a runtime (``None``: ``connect_timeout``; 0: not at all, so
        discovery by a host with no runtime attached fails at once instead of stalling)."""
        self._session: WireSession | None = None
        self._connected = asyncio.Event()
        self._closed = False

    @property
    def plugin_id(self) -> str:
        """``author/plugin``, the identity of the token the runtime presented."""
        return self._plugin_id

    @property
    def connected(self) -> bool:
        """A runtime is connected and alive."""
        return self._session is not None and self._session.alive

    def attach(self, session: WireSession) -> WireSession | None:
        """Make *session* the live one; returns the session it replaces (the caller closes it)."""
        previous = self._session
        self._session = session
        self._connected.set()
        return previous

    def detach(self, session: WireSession) -> None:
        """Forget *session* if it is the live one."""
        if self._session is session:
            self._session = None
            self._connected.clear()

    async def _current(self, timeout: float | None = None) -> WireSession:
        wait = self.connect_timeout if timeout is None else timeout
        if self._closed:
            raise RunnerTransportError(CLOSED, f"plugin {self._plugin_id}: the connection is closed")
        session = self._session
        if session is not None and session.alive:
            return session
        try:
            # asyncio.timeout, never wait_for: a run's task waits here, and wait_for can swallow its cancel.
            async with asyncio.timeout(wait):
                while True:
                    session = self._session
                    if session is not None and session.alive:
                        return session
                    if self._closed:
                        raise RunnerTransportError(
                            CLOSED, f"plugin {self._plugin_id}: the connection is closed"
                        )
                    # A session that failed (dropped, unresponsive) and is not detached yet is as good as none:
                    # wait for the runtime to connect again.
                    self._connected.clear()
                    await self._connected.wait()
        except TimeoutError:
            raise RunnerTransportError(
                UNAVAILABLE,
                f"plugin {self._plugin_id}: no runtime connected within {wait:g}s",
            ) from None

    async def list_runners(self) -> list[dict[str, Any]]:
        """The connected runtime's runner manifests (those of other plugins are dropped by the session owner)."""
        session = await self._current(self.list_timeout)
        prefix = f"plugin:{self._plugin_id}/"
        return [m for m in await session.list_runners() if str(m.get("id", "")).startswith(prefix)]

    def run(self, request: AgentRunRequest) -> AsyncGenerator[RawResult, None]:
        """Run *request* on the connected runtime; see :meth:`WireSession.run`."""
        return self._run(request)

    async def _run(self, request: AgentRunRequest) -> AsyncGenerator[RawResult, None]:
        session = await self._current()
        stream = session.run(request)
        try:
            async for result in stream:
                yield result
        finally:
            await stream.aclose()

    async def cancel(self, run_id: str) -> None:
        """Ask the runtime to cancel *run_id*; a no-op when it is not running it."""
        session = self._session
        if session is not None and session.alive:
            await session.cancel(run_id)

    async def aclose(self) -> None:
        """Close the live session (its runs end ``runtime.closed``)."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.aclose()


class RemoteRuntimeServer:
    """Accepts remote runtimes on a WebSocket endpoint, each authenticated by its plugin's token.

    Each connected runtime is pinged every *ping_interval* seconds (``None``: never); one that has not answered
    within *ping_timeout* ends its live runs ``runtime.unresponsive`` and loses its connection. A run the host
    left (cancel, deadline) that the runtime has not ended within *cancel_grace* seconds means a runner ignores
    its cancellation: the connection is dropped the same way, its other runs end ``runtime.restarted``. The
    runtime's supervisor reconnects; the new connection serves the next runs.

    >>> server = RemoteRuntimeServer(handler, tokens={"acme/dify": token})   # doctest: +SKIP
    >>> await server.start()                                                 # doctest: +SKIP
    >>> conn = server.connection("acme/dify")                                # doctest: +SKIP
    """

    def __init__(
        self,
        handler: BackCallHandler,
        *,
        tokens: Mapping[str, str],
        host: str = "127.0.0.1",
        port: int = 0,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        result_window: int = DEFAULT_RESULT_WINDOW,
        handshake_timeout: float = 10.0,
        connect_timeout: float = 10.0,
        ping_interval: float | None = 10.0,
        ping_timeout: float = 10.0,
        cancel_grace: float | None = 5.0,
        list_timeout: float | None = None,
        on_change: Callable[[str], None] | None = None,
    ) -> None:
        for plugin_id, token in tokens.items():
            if len(token) < 16:
                raise ValueError(f"the token of {plugin_id} is too short (at least 16 characters)")
        self._handler = handler
        self._tokens = dict(tokens)
        self._host = host
        self._port = port
        self._max_frame_bytes = max_frame_bytes
        self._result_window = result_window
        self._handshake_timeout = handshake_timeout
        self._connect_timeout = connect_timeout
        # A remote runtime that stops answering (a blocked event loop) keeps its TCP connection open, so only a
        # wire-level ping tells: its session fails runtime.unresponsive, its runs end, and the connection is
        # dropped; the runtime's own supervisor reconnects (a new connection replaces a dead one at once).
        self._ping_interval = ping_interval
        self._ping_timeout = ping_timeout
        self._cancel_grace = cancel_grace
        self._list_timeout = list_timeout
        # Told the plugin id whenever a runtime attaches or detaches (the service records where runtimes are).
        self.on_change = on_change
        """Called with the plugin id whenever a runtime of it attaches or detaches."""
        self._connections: dict[str, RemoteRunnerConnection] = {}
        self._server: Server | None = None

    @property
    def port(self) -> int:
        """The port the server listens on (useful with ``port=0``)."""
        if self._server is None:
            raise RuntimeError("the server is not started")
        sockname: Any = next(iter(self._server.sockets)).getsockname()
        return int(sockname[1])

    @property
    def plugin_ids(self) -> list[str]:
        """The plugins a token is configured for."""
        return list(self._tokens)

    @property
    def url(self) -> str:
        """``ws://host:port`` of the endpoint."""
        return f"ws://{self._host}:{self.port}"

    def connection(self, plugin_id: str) -> RemoteRunnerConnection:
        """The connection of *plugin_id* (it waits for its runtime to connect)."""
        if plugin_id not in self._tokens:
            raise KeyError(f"no token is configured for plugin {plugin_id}")
        connection = self._connections.get(plugin_id)
        if connection is None:
            connection = RemoteRunnerConnection(
                plugin_id, connect_timeout=self._connect_timeout, list_timeout=self._list_timeout
            )
            self._connections[plugin_id] = connection
        return connection

    async def start(self) -> None:
        """Listen."""
        self._server = await serve(
            self._serve,
            self._host,
            self._port,
            process_request=self._authorize,
            max_size=self._max_frame_bytes,
            compression=None,
        )

    async def aclose(self) -> None:
        """Close every runtime connection and stop listening."""
        for connection in list(self._connections.values()):
            await connection.aclose()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> RemoteRuntimeServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _plugin_for(self, request: Request) -> str | None:
        header = request.headers.get("Authorization", "")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not presented:
            return None
        found = None
        for plugin_id, token in self._tokens.items():
            # Compare against every token, in constant time, so timing reveals neither token nor match.
            if hmac.compare_digest(token.encode(), presented.strip().encode()):
                found = plugin_id
        return found

    def _authorize(self, connection: ServerConnection, request: Request) -> Response | None:
        if self._plugin_for(request) is None:
            _log.warning(
                "refused a runtime connection from %s: bad or missing token", connection.remote_address
            )
            return connection.respond(HTTPStatus.UNAUTHORIZED, "a valid runtime token is required\n")
        return None

    async def _serve(self, websocket: ServerConnection) -> None:
        assert websocket.request is not None
        plugin_id = self._plugin_for(websocket.request)
        if plugin_id is None:  # pragma: no cover - refused in _authorize already
            return
        ended = asyncio.Event()
        channel = WebSocketFrameChannel(websocket, max_frame_bytes=self._max_frame_bytes)
        session = WireSession(
            channel,
            plugin_id=plugin_id,
            handler=self._handler,
            result_window=self._result_window,
            max_frame_bytes=self._max_frame_bytes,
            on_failure=lambda _error: ended.set(),
            cancel_grace=self._cancel_grace,
        )
        try:
            await session.handshake(timeout=self._handshake_timeout)
        except RunnerTransportError as exc:
            _log.warning("remote runtime of %s failed the handshake: %s", plugin_id, exc.message)
            await session.aclose()
            return
        connection = self.connection(plugin_id)
        replaced = connection.attach(session)
        _log.info("remote runtime of %s connected from %s", plugin_id, websocket.remote_address)
        if replaced is not None:
            await replaced.aclose()
        self._changed(plugin_id)
        watchdog: asyncio.Task[None] | None = None
        if self._ping_interval is not None:
            watchdog = asyncio.create_task(
                session.keepalive(
                    interval=self._ping_interval,
                    timeout=self._ping_timeout,
                    then="the host drops its connection",
                ),
                name=f"agentrunner-ping-remote-{plugin_id}",
            )
        try:
            await ended.wait()
        finally:
            if watchdog is not None:
                watchdog.cancel()
                await asyncio.gather(watchdog, return_exceptions=True)
            connection.detach(session)
            await session.aclose()
            self._changed(plugin_id)

    def _changed(self, plugin_id: str) -> None:
        if self.on_change is not None:
            try:
                self.on_change(plugin_id)
            except Exception:
                _log.exception("the attach/detach callback of %s failed", plugin_id)
