"""Token protection of every route (pure ASGI middleware, so streaming responses pass untouched).

Two credentials carry the configured token: ``Authorization: Bearer <token>`` (API clients) and the
console's session cookie, which the console's login form sets after checking the token once. The cookie
holds an HMAC of the token (never the token itself), is ``HttpOnly`` (scripts cannot read it) and
``SameSite=Strict`` (a browser never attaches it to a request another site starts). Cookie-authenticated
writes must also carry this server's own ``Origin``, so a cookie can never make a cross-site write possible
even in a browser that ignores ``SameSite``; the :class:`~agentrunner_host.http.guard.RequestGuard` in front
has already refused foreign origins and non-JSON bodies.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Final
from urllib.parse import quote

from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import error_response

__all__ = ["SESSION_COOKIE", "BearerTokenMiddleware", "session_value"]

SESSION_COOKIE: Final = "agentrunner_session"
"""Name of the console's session cookie."""

_SESSION_CONTEXT: Final = b"agentrunner console session v1"
_WRITE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def session_value(token: str) -> str:
    """The session cookie's value for *token*: an HMAC, so the cookie never holds the token itself and
    stops working when the token changes."""
    return hmac.new(token.encode(), _SESSION_CONTEXT, hashlib.sha256).hexdigest()


def _cookie(header: bytes, name: str) -> bytes | None:
    for part in header.split(b";"):
        key, sep, value = part.strip().partition(b"=")
        if sep and key == name.encode():
            return value.strip()
    return None


class BearerTokenMiddleware:
    """Answers 401 unless the request carries the configured token (bearer header or session cookie).

    Paths under *public_prefixes* (the console's login page and static assets) pass without a token; a
    browser asking for a page under *page_prefixes* without one is redirected to *login_path*."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        public_paths: Iterable[str] = (),
        public_prefixes: Iterable[str] = (),
        login_path: str | None = None,
        api_prefixes: Iterable[str] = ("/v1/", "/openapi.json", "/healthz", "/readyz"),
    ) -> None:
        self._app = app
        self._token = token.encode()
        self._session = session_value(token).encode()
        self._public_paths = frozenset(public_paths)
        self._public_prefixes = tuple(public_prefixes)
        self._login_path = login_path
        self._api_prefixes = tuple(api_prefixes)

    def _authenticated(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[bool, str]:
        header = headers.get(b"authorization")
        if header is not None:
            scheme, _, given = header.partition(b" ")
            # Constant-time comparison: response timing must not reveal how much of a guess was right.
            if scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token):
                return True, ""
            return False, "invalid bearer token"
        cookie = _cookie(headers.get(b"cookie", b""), SESSION_COOKIE)
        if cookie is None:
            return False, "missing bearer token"
        if not hmac.compare_digest(cookie, self._session):
            return False, "invalid session"
        if scope.get("method") in _WRITE_METHODS:
            host = headers.get(b"host", b"").strip().lower()
            origin = headers.get(b"origin", b"").strip().lower()
            if origin not in {b"http://" + host, b"https://" + host}:
                # Browsers send Origin with every write they make; a cookie write without our own is not ours.
                return False, "a session-authenticated write must come from this server's own pages"
        return True, ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if path in self._public_paths or path.startswith(self._public_prefixes):
            await self._app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", ()):
            headers.setdefault(name, value)
        ok, message = self._authenticated(scope, headers)
        if ok:
            await self._app(scope, receive, send)
            return
        is_page = not path.startswith(self._api_prefixes) and scope.get("method") in {"GET", "HEAD"}
        if is_page and self._login_path is not None:
            query = scope.get("query_string", b"").decode("latin-1")
            target = path + ("?" + query if query else "")
            redirect = RedirectResponse(f"{self._login_path}?next={quote(target, safe='')}", status_code=303)
            await redirect(scope, receive, send)
            return
        response = error_response(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)
