"""Login and logout: the token asked once, kept by the browser as an ``HttpOnly`` ``SameSite=Strict`` cookie.

``POST /login`` takes ``{"token": "..."}`` as JSON (the request guard refuses other bodies, so a plain
cross-site form cannot even reach it) and answers 204 with the session cookie; the cookie holds an HMAC of
the token (:func:`~agentrunner_host.http.auth.session_value`), never the token. ``POST /logout`` clears it.
Wrong tokens are rate limited per client (:mod:`.throttle`, ``[http] login_max_failures`` /
``login_window_seconds``); the cookie is ``Secure`` over HTTPS, or always with ``[http] cookie_secure_mode =
"always"`` (behind a TLS-terminating proxy).
"""

from __future__ import annotations

import hmac
from typing import Final, cast
from urllib.parse import urlsplit

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from agentrunner_host.http.auth import SESSION_COOKIE, session_value

from .pages import render
from .throttle import LoginThrottle

__all__ = ["SESSION_ROUTES"]

_MAX_LOGIN_BYTES: Final = 4096


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _safe_next(raw: str | None) -> str:
    # Only a path on this server: an absolute or scheme-relative URL would make the form an open redirect.
    if not raw or not raw.startswith("/") or raw.startswith("//") or "\\" in raw:
        return "/"
    parts = urlsplit(raw)
    return "/" if parts.scheme or parts.netloc else raw


async def login_page(request: Request) -> Response:
    """``GET /login``."""
    target = _safe_next(request.query_params.get("next"))
    if request.app.state.console.token is None:
        return RedirectResponse(target, status_code=303)
    return render(request, "login.html", {"next": target}, current="", title="Sign in")


async def login(request: Request) -> Response:
    """``POST /login``: checks the token and sets the session cookie."""
    console = request.app.state.console
    token: str | None = console.token
    if token is None:
        return Response(status_code=204)
    throttle: LoginThrottle = console.throttle
    client = request.client.host if request.client is not None else ""
    wait = throttle.retry_after(client)
    if wait is not None:
        answer = _error(429, "too_many_attempts", f"too many wrong tokens; try again in {wait} s")
        answer.headers["Retry-After"] = str(wait)
        return answer
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > _MAX_LOGIN_BYTES:
            return _error(413, "payload_too_large", "the login body is too large")
    try:
        body = orjson.loads(raw)
    except ValueError:
        return _error(422, "invalid_request", 'send {"token": "..."} as JSON')
    given: object = cast("dict[str, object]", body).get("token") if isinstance(body, dict) else None
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), token.encode()):
        throttle.failed(client)
        return _error(401, "unauthorized", "that is not this server's token")
    throttle.succeeded(client)
    response = Response(status_code=204)
    response.set_cookie(
        SESSION_COOKIE,
        session_value(token),
        httponly=True,
        samesite="strict",
        secure=console.secure_cookie or request.url.scheme == "https",
        path="/",
    )
    return response


async def logout(request: Request) -> Response:
    """``POST /logout``: clears the session cookie."""
    response = Response(status_code=204)
    secure = request.app.state.console.secure_cookie or request.url.scheme == "https"
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=secure)
    return response


SESSION_ROUTES: Final = (
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
)
"""The console's login and logout routes."""
