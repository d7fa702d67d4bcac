"""``BridgeServer``: one long-lived MCP server (streamable HTTP on loopback) serving many runs.

Each run is registered with :meth:`BridgeServer.open_run`, which mints a random bearer token bound to that
run's :class:`~agentrunner.AgentRunContext` and :class:`~agentrunner.AgentRunAPI`. Every HTTP request is
authenticated by its token before it reaches MCP; ``tools/list`` answers the tools that run's snapshot
allows, and ``tools/call`` becomes one back-call through the run's API, so the host's dispatcher checks it
against the same live run as any other back-call. Closing the registration revokes the token at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import logging
import secrets
import socket
import time
import warnings
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Final, Self, TypeVar

import mcp_types as types
import uvicorn
from agentrunner import AgentRunAPI
from agentrunner.context import AgentRunContext
from agentrunner.errors import APIError, NotFoundError, RuntimeAPIError, UnauthorizedError
from agentrunner.external_tools import ExposedTool, invoke_exposed_tool, run_tool_surface
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .content import ArtifactBody, artifact_id_of, read_artifact
from .errors import BridgeClosedError, BridgeNotStartedError, NonLoopbackBindError
from .mcp_tools import api_error_result, mcp_tool, tool_result
from .resources import (
    ARTIFACT_TEMPLATE,
    artifact_resources,
    artifact_template,
    complete_artifact_id,
    readable,
)

__all__ = ["DEFAULT_SERVER_NAME", "PROGRESS_INTERVAL", "BridgeServer", "RunRegistration"]

T = TypeVar("T")

DEFAULT_SERVER_NAME: Final = "agentrunner"
"""MCP server name, and the key harness configs use (Claude Code tools become ``mcp__agentrunner__<tool>``)."""

_LOOPBACK_NAMES: Final = frozenset({"localhost"})
PROGRESS_INTERVAL: Final = 0.2
"""Seconds between progress notifications while a back-call waits for the host (when the client asked)."""
_LOG_LEVELS: Final[tuple[types.LoggingLevel, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_RESOURCE_NOT_FOUND: Final = -32002
_logger = logging.getLogger(__name__)


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _token_key(token: str) -> bytes:
    # Runs are looked up by a digest of the token, so the lookup's timing tells nothing about a guess.
    return hashlib.sha256(token.encode()).digest()


@dataclass(eq=False, slots=True)
class _Run:
    key: str
    token_key: bytes
    ctx: AgentRunContext
    api: AgentRunAPI
    tools: dict[str, ExposedTool]
    listing: types.ListToolsResult | None = None
    log_levels: dict[str, int] = field(default_factory=lambda: dict[str, int]())
    """The minimum log level each of the run's MCP sessions asked for (``logging/setLevel``), by session id;
    a session that never asked gets no log messages."""
    user: AuthenticatedUser = field(init=False)

    def __post_init__(self) -> None:
        # The client id is the registration, so a session opened with one run's token is refused (404) when
        # another token presents its session id: mcp binds sessions to the principal that created them.
        self.user = AuthenticatedUser(AccessToken(token="", client_id=self.key, scopes=[]))

    def list_tools(self) -> types.ListToolsResult:
        if self.listing is None:
            self.listing = types.ListToolsResult(tools=[mcp_tool(t) for t in self.tools.values()])
        return self.listing


class RunRegistration:
    """One run's place on a :class:`BridgeServer`: its token, endpoint and tools. Close it when the run ends."""

    run_id: str
    """The run."""
    token: str
    """Bearer token of this run; a secret for the harness only."""
    url: str
    """The server's MCP endpoint."""
    tool_names: tuple[str, ...]
    """Names of the tools this run offers, in list order."""

    def __init__(
        self,
        *,
        run_id: str,
        token: str,
        url: str,
        tool_names: tuple[str, ...],
        revoke: Callable[[], None],
        is_live: Callable[[], bool],
    ) -> None:
        self.run_id = run_id
        self.token = token
        self.url = url
        self.tool_names = tool_names
        self._revoke = revoke
        self._is_live = is_live

    @property
    def closed(self) -> bool:
        """The token is revoked."""
        return not self._is_live()

    def close(self) -> None:
        """Revoke the token: from now on its requests answer 401 and its tools are gone. Idempotent."""
        self._revoke()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


async def _unauthorized(scope: Scope, receive: Receive, send: Send) -> None:
    response = JSONResponse(
        {"error": "invalid_token", "error_description": "a valid bearer token of a live run is required"},
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
    )
    await response(scope, receive, send)


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers: the embedding host owns the process's signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        yield


class BridgeServer:
    """A long-lived MCP bridge serving many runs; start it once and reuse it.

    Use it as an async context manager (``async with BridgeServer() as server``) or call :meth:`start` and
    :meth:`stop`. It listens on 127.0.0.1 (a random free port by default) and refuses any non-loopback
    address unless ``allow_non_loopback=True``.
    """

    host: str
    """Address it listens on."""
    path: str
    """Path of the MCP endpoint."""
    name: str
    """MCP server name."""
    security: TransportSecurityMiddleware
    """Host/Origin checks against DNS rebinding."""
    session_manager: StreamableHTTPSessionManager
    """mcp's streamable-HTTP session manager."""
    app: ASGIApp
    """The ASGI application (to embed the bridge in another server instead of calling :meth:`start`)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = "/mcp",
        name: str = DEFAULT_SERVER_NAME,
        allow_non_loopback: bool = False,
        allowed_hosts: list[str] | None = None,
        allowed_origins: list[str] | None = None,
        session_idle_timeout: float = 600.0,
    ) -> None:
        if not _is_loopback(host) and not allow_non_loopback:
            raise NonLoopbackBindError(
                f"refusing to listen on non-loopback address {host!r}; pass allow_non_loopback=True to do so"
            )
        self.host = host
        self._port = port
        self.path = path
        self.name = name
        hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
        if not _is_loopback(host):
            hosts.append(f"{host}:*")
            origins.append(f"http://{host}:*")
        self.security = TransportSecurityMiddleware(
            TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=allowed_hosts if allowed_hosts is not None else hosts,
                allowed_origins=allowed_origins if allowed_origins is not None else origins,
            )
        )
        self._runs: dict[bytes, _Run] = {}
        self._by_key: dict[str, _Run] = {}
        self._anonymous: _Run | None = None
        # logging/setLevel is deprecated from protocol 2026-07-28 on, but every handshake version up to
        # 2025-11-25 (what Claude Code, Codex and the conformance suite negotiate) has it.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self._mcp = self._make_server(name)
        self.session_manager = StreamableHTTPSessionManager(
            app=self._mcp,
            security_settings=self.security.settings,
            session_idle_timeout=session_idle_timeout,
        )
        self.app = self._asgi
        self._uvicorn: uvicorn.Server | None = None
        self._serving: asyncio.Task[None] | None = None
        self._bound_port: int | None = None
        self._cleanups: set[asyncio.Task[None]] = set()

    def _make_server(self, name: str) -> Server[Any]:
        return Server(  # pyright: ignore[reportDeprecated] - see the comment where it is called
            name,
            version="1",
            on_list_tools=self._on_list_tools,
            on_call_tool=self._on_call_tool,
            on_list_resources=self._on_list_resources,
            on_list_resource_templates=self._on_list_resource_templates,
            on_read_resource=self._on_read_resource,
            on_subscribe_resource=self._on_subscribe,
            on_unsubscribe_resource=self._on_subscribe,
            on_completion=self._on_completion,
            on_set_logging_level=self._on_set_logging_level,
        )

    # ---- lifecycle -------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port it listens on: the bound one once started, else the one asked for (if not 0)."""
        port = self._bound_port if self._bound_port is not None else self._port
        if port == 0:
            raise BridgeNotStartedError("the bridge server is not started and was given no fixed port")
        return port

    @property
    def url(self) -> str:
        """The MCP endpoint, e.g. ``http://127.0.0.1:43121/mcp``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"

    @property
    def started(self) -> bool:
        """Serving requests."""
        return self._serving is not None and not self._serving.done()

    async def start(self) -> None:
        """Bind and start serving in the current event loop."""
        if self._serving is not None:
            raise BridgeNotStartedError("a BridgeServer starts once; create a new one to serve again")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._port))
        except BaseException:
            sock.close()
            raise
        self._bound_port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            interface="asgi3",
            timeout_graceful_shutdown=2,
        )
        server = _QuietServer(config)
        self._uvicorn = server
        self._serving = asyncio.create_task(server.serve(sockets=[sock]), name="agentrunner-mcp-bridge")
        try:
            while not server.started:
                if self._serving.done():
                    await self._serving
                    raise BridgeNotStartedError("the bridge server stopped while starting")
                await asyncio.sleep(0.005)
        finally:
            if not server.started:
                sock.close()

    async def stop(self) -> None:
        """Revoke every run, end every open MCP session and stop serving."""
        for run in list(self._runs.values()):
            self._revoke(run)
        self._anonymous = None
        # uvicorn waits for open connections before the lifespan ends the sessions, so an idle GET stream
        # would hold shutdown for the whole grace period; end the sessions first.
        await self._terminate_sessions(None)
        if self._uvicorn is not None and self._serving is not None:
            self._uvicorn.should_exit = True
            await self._serving
        self._uvicorn = None

    async def _terminate_sessions(self, owner: str | None) -> None:
        # mcp has no public handle on open sessions; these two maps are its session table and their owners.
        manager: Any = self.session_manager
        instances: dict[str, Any] = getattr(manager, "_server_instances", {})
        owners: dict[str, Any] = getattr(manager, "_session_owners", {})
        for session_id, transport in list(instances.items()):
            if owner is None or owners.get(session_id, {}).get("client_id") == owner:
                await transport.terminate()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The ASGI front of the endpoint: Host/Origin first, then the bearer token, then mcp's transport.
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if scope["type"] != "http":  # pragma: no cover - uvicorn only sends http and lifespan here
            return
        if scope["path"] != self.path:
            await Response("Not Found", status_code=404)(scope, receive, send)
            return
        request = Request(scope, receive)
        # A page that rebinds a name to 127.0.0.1 learns nothing, not even whether a token it guessed is valid.
        refusal = await self.security.validate_request(request, is_post=False)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        run = self._authenticate(request.headers.get("authorization"))
        if run is None:
            await _unauthorized(scope, receive, send)
            return
        scope["user"] = run.user
        await self.session_manager.handle_request(scope, receive, send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Runs mcp's session manager for as long as the server lives.
        message = await receive()
        assert message["type"] == "lifespan.startup"
        async with self.session_manager.run():
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
        await send({"type": "lifespan.shutdown.complete"})

    # ---- runs ------------------------------------------------------------------------------------------

    def open_run(self, ctx: AgentRunContext, api: AgentRunAPI) -> RunRegistration:
        """Register a run and mint its bearer token. Cheap (no I/O); close the registration when the run ends."""
        return self._register(ctx, api, anonymous=False)

    def open_anonymous_fixture_run(self, ctx: AgentRunContext, api: AgentRunAPI) -> RunRegistration:
        """TEST FIXTURE ONLY: bind *ctx* to requests that carry **no** token (for the MCP conformance suite).

        The suite's client sends no ``Authorization`` header, so this one run answers token-less requests. It
        is refused on a non-loopback server; never use it for a real run.
        """
        if not _is_loopback(self.host):
            raise NonLoopbackBindError("an anonymous fixture run is only allowed on a loopback server")
        return self._register(ctx, api, anonymous=True)

    def _register(self, ctx: AgentRunContext, api: AgentRunAPI, *, anonymous: bool) -> RunRegistration:
        if api.run_id != ctx.run_id:
            raise ValueError(f"the API is bound to run {api.run_id!r}, not {ctx.run_id!r}")
        token = secrets.token_urlsafe(32)
        run = _Run(
            key=secrets.token_hex(8),
            token_key=_token_key(token),
            ctx=ctx,
            api=api,
            tools={t.name: t for t in run_tool_surface(ctx)},
        )
        self._runs[run.token_key] = run
        self._by_key[run.key] = run
        if anonymous:
            self._anonymous = run
        return RunRegistration(
            run_id=ctx.run_id,
            token=token,
            url=self.url,
            tool_names=tuple(run.tools),
            revoke=lambda: self._revoke(run),
            is_live=lambda: self._by_key.get(run.key) is run,
        )

    def _revoke(self, run: _Run) -> None:
        # Forget the token, then end the run's open MCP sessions.
        if self._by_key.pop(run.key, None) is None:
            return
        self._runs.pop(run.token_key, None)
        if self._anonymous is run:
            self._anonymous = None
        if not self.started:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # closed from outside the server's loop: the idle timeout ends the sessions
            return
        # A finished run's harness may keep a GET stream open; end it now rather than at the idle timeout.
        task = loop.create_task(self._terminate_sessions(run.key))
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    @property
    def open_runs(self) -> int:
        """How many runs are registered."""
        return len(self._runs)

    def _authenticate(self, authorization: str | None) -> _Run | None:
        # The live run an Authorization header value names, if any.
        if authorization is None:
            return self._anonymous
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        return self._runs.get(_token_key(token.strip()))

    def _run_of(self, ctx: ServerRequestContext[Any]) -> _Run:
        request: Any = ctx.request
        user = request.scope.get("user") if request is not None else None
        run = self._by_key.get(user.access_token.client_id) if isinstance(user, AuthenticatedUser) else None
        if run is None:
            # The token was revoked after this request was authenticated: the run is over.
            raise BridgeClosedError("this run's bridge is closed")
        return run

    # ---- MCP handlers ----------------------------------------------------------------------------------

    async def _on_list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            return self._run_of(ctx).list_tools()
        except BridgeClosedError as exc:
            raise MCPError(types.INVALID_REQUEST, exc.message) from exc

    def _live_run(self, ctx: ServerRequestContext[Any]) -> _Run:
        try:
            return self._run_of(ctx)
        except BridgeClosedError as exc:
            raise MCPError(types.INVALID_REQUEST, exc.message) from exc

    async def _log(self, ctx: ServerRequestContext[Any], level: types.LoggingLevel, message: str) -> None:
        """A log notification to this request's client, if its session asked for this level."""
        run = self._by_key.get(_client_id(ctx) or "")
        session_id = _session_id(ctx)
        wanted = run.log_levels.get(session_id) if run is not None and session_id is not None else None
        if wanted is None or _LOG_LEVELS.index(level) < wanted:
            return
        # Deprecated only from protocol 2026-07-28 on (see _make_server); a client that went away must not fail
        # the call.
        with warnings.catch_warnings(), contextlib.suppress(Exception):
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.session.send_log_message(  # pyright: ignore[reportDeprecated]
                level, message, logger="agentrunner.bridge", related_request_id=ctx.request_id
            )

    async def _on_set_logging_level(
        self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        run = self._live_run(ctx)
        session_id = _session_id(ctx)
        if session_id is not None:  # a stateless request has no session to remember it for
            run.log_levels[session_id] = _LOG_LEVELS.index(params.level)
        return types.EmptyResult()

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        run = self._live_run(ctx)
        tool = run.tools.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        action = tool.action or "context"
        await self._log(ctx, "debug", f"{params.name}: calling {action} for run {run.ctx.run_id}")
        started = time.monotonic()
        try:
            result = await self._with_progress(
                ctx, invoke_exposed_tool(tool, run.ctx, run.api, params.arguments), what=action
            )
        except APIError as exc:
            await self._log(ctx, "warning", f"{params.name}: {action} failed: {exc.code}: {exc.message}")
            return api_error_result(exc)
        except Exception:
            # A fault of the transport or of this bridge, not a refusal: log it here, and tell the harness only
            # that the call failed (details may hold host internals).
            _logger.exception("tool %s of run %s failed", params.name, run.ctx.run_id)
            return api_error_result(RuntimeAPIError(f"{params.name} failed inside the bridge"))
        elapsed = (time.monotonic() - started) * 1000
        await self._log(ctx, "debug", f"{params.name}: {action} answered in {elapsed:.0f} ms")

        async def note(message: str) -> None:
            await self._log(ctx, "debug", f"{params.name}: {message}")

        out = await tool_result(tool, result, run.api, note)
        kinds = ", ".join(block.type for block in out.content) or "none"
        await self._log(
            ctx, "debug", f"{params.name}: result as {len(out.content)} content block(s): {kinds}"
        )
        return out

    async def _with_progress(self, ctx: ServerRequestContext[Any], call: Awaitable[T], *, what: str) -> T:
        """Await *call*; when the client sent a progress token, tell it at the start, every
        :data:`PROGRESS_INTERVAL` while the host has not answered, and at the end."""
        token = ctx.meta.get("progress_token") if ctx.meta is not None else None
        if token is None:
            return await call
        task = asyncio.ensure_future(call)
        ticks = 0

        async def progress(message: str, *, total: float | None = None) -> None:
            with contextlib.suppress(Exception):
                await ctx.session.send_progress_notification(
                    token, float(ticks), total, message, related_request_id=str(ctx.request_id)
                )

        try:
            await progress(f"{what}: sent to the host")
            started = time.monotonic()
            while True:
                done, _ = await asyncio.wait({task}, timeout=PROGRESS_INTERVAL)
                if done:
                    break
                ticks += 1
                await progress(f"{what}: waiting for the host ({time.monotonic() - started:.1f} s)")
            ticks += 1
            await progress(f"{what}: answered", total=float(ticks))
            return task.result()
        finally:
            if not task.done():
                task.cancel()

    # ---- resources: the run's artifacts ------------------------------------------------------------------

    async def _on_list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=artifact_resources(self._live_run(ctx).ctx))

    async def _on_list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=artifact_template(self._live_run(ctx).ctx)
        )

    async def _on_read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        run = self._live_run(ctx)
        uri = str(params.uri)
        if not readable(run.ctx):
            raise MCPError(_RESOURCE_NOT_FOUND, f"Resource not found: {uri} (this run reads no artifacts)")
        artifact_id = artifact_id_of(uri)
        try:
            body = await self._with_progress(
                ctx, _read_body(run.api, artifact_id), what="artifacts.read_range"
            )
        except (NotFoundError, UnauthorizedError) as exc:
            raise MCPError(_RESOURCE_NOT_FOUND, f"Resource not found: {uri} ({exc.code})") from exc
        except APIError as exc:
            raise MCPError(types.INTERNAL_ERROR, f"{exc.code}: {exc.message}") from exc
        contents = body.resource_contents()
        if contents.uri != uri:  # keep the URI the client asked for (verbatim or encoded id alike)
            contents = contents.model_copy(update={"uri": uri})
        await self._log(ctx, "debug", f"read {uri}: {len(body.data)} bytes")
        return types.ReadResourceResult(contents=[contents])

    async def _on_subscribe(
        self,
        ctx: ServerRequestContext[Any],
        params: types.SubscribeRequestParams | types.UnsubscribeRequestParams,
    ) -> types.EmptyResult:
        # Artifacts are immutable once stored: a subscription is valid and simply never notified.
        self._live_run(ctx)
        return types.EmptyResult()

    async def _on_completion(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        run = self._live_run(ctx)
        values: list[str] = []
        ref = params.ref
        if (
            isinstance(ref, types.ResourceTemplateReference)
            and ref.uri == ARTIFACT_TEMPLATE
            and params.argument.name == "artifact_id"
        ):
            values = complete_artifact_id(run.ctx, params.argument.value)
        # Anything else (the bridge has no prompts) completes to nothing.
        return types.CompleteResult(completion=types.Completion(values=values, has_more=False))


def _session_id(ctx: ServerRequestContext[Any]) -> str | None:
    request: Any = ctx.request
    return request.headers.get("mcp-session-id") if isinstance(request, Request) else None


def _client_id(ctx: ServerRequestContext[Any]) -> str | None:
    request: Any = ctx.request
    user = request.scope.get("user") if isinstance(request, Request) else None
    return user.access_token.client_id if isinstance(user, AuthenticatedUser) else None


async def _read_body(api: AgentRunAPI, artifact_id: str) -> ArtifactBody:
    return await read_artifact(api, artifact_id)
