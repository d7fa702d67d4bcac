"""The Starlette application of the HTTP API."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from agentrunner_host.errors import HostError
from agentrunner_host.service import HostService

from .auth import BearerTokenMiddleware
from .console import PUBLIC_PATHS, PUBLIC_PREFIXES, console_routes, console_state
from .errors import ApiError, error_response, from_host_error
from .guard import RequestGuard
from .openapi import Handler, build_openapi
from .routes import ENDPOINTS

__all__ = ["API_TITLE", "create_app"]

API_TITLE = "agentrunner host API"
"""``info.title`` of the OpenAPI document."""

log = logging.getLogger("agentrunner.http")


def _version() -> str:
    try:
        return version("agentrunner-host")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
        return "0.0.0"


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _host_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HostError)
    return from_host_error(exc).response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed"}
    return error_response(
        exc.status_code,
        codes.get(exc.status_code, "http_error"),
        str(exc.detail),
        headers=dict(exc.headers or {}),
    )


async def _unexpected(request: Request, exc: Exception) -> Response:
    # The message is generic on purpose: exception text can carry configuration details.
    log.exception("unhandled error in %s %s", request.method, request.url.path)
    return error_response(500, "internal", "internal server error")


def _paths() -> dict[str, dict[str, Handler]]:
    paths: dict[str, dict[str, Handler]] = {}
    for ep in ENDPOINTS:
        paths.setdefault(ep.route_path, {})[ep.method] = ep.handler
    return paths


def _by_method(handlers: dict[str, Handler]) -> Handler:
    # One route per path, so a 405 answer lists every method of the path in its Allow header.
    async def dispatch(request: Request) -> Response:
        # Starlette answers HEAD on GET routes; it is served by the GET handler.
        return await (handlers.get(request.method) or handlers["GET"])(request)

    return dispatch


def create_app(
    service: HostService,
    *,
    api_token: str | None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
) -> Starlette:
    """The API and the web console over an open *service*; every route requires *api_token* when one is
    given (the console's login form and static files excepted; its pages accept the session cookie).

    Every request first passes the :class:`~agentrunner_host.http.guard.RequestGuard` (``Host`` allowlist,
    ``Origin`` check, JSON-only writes); *allowed_hosts* and *allowed_origins* default to the service's
    ``[http]`` settings. CORS is answered only for *allowed_origins*, and is off when there are none."""
    http = service.settings.config.http
    hosts = list(http.allowed_hosts if allowed_hosts is None else allowed_hosts)
    origins = list(http.allowed_origins if allowed_origins is None else allowed_origins)
    document = build_openapi(ENDPOINTS, title=API_TITLE, version=_version(), secured=api_token is not None)

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    routes: list[BaseRoute] = [
        Route(path, _by_method(handlers), methods=list(handlers)) for path, handlers in _paths().items()
    ]
    routes.append(Route("/openapi.json", openapi, methods=["GET"]))
    routes.extend(console_routes())
    middleware = [Middleware(RequestGuard, allowed_hosts=hosts, allowed_origins=origins)]
    if origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=origins,
                allow_methods=["GET", "POST", "PUT", "DELETE"],
                allow_headers=["authorization", "content-type", "last-event-id", "accept"],
                expose_headers=["location", "x-run-id"],
            )
        )
    if api_token:
        middleware.append(
            Middleware(
                BearerTokenMiddleware,
                token=api_token,
                public_paths=PUBLIC_PATHS,
                public_prefixes=PUBLIC_PREFIXES,
                login_path="/login",
            )
        )
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            ApiError: _api_error,
            HostError: _host_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )
    app.state.service = service
    app.state.openapi = document
    app.state.console = console_state(
        token=api_token or None,
        secure_cookie=http.cookie_secure_mode == "always",
        max_failures=http.login_max_failures,
        window_seconds=http.login_window_seconds,
    )
    app.state.body_timeout = http.body_timeout_seconds
    return app
