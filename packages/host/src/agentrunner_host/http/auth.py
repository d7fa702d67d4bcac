"""Bearer-token protection of every route (pure ASGI middleware, so streaming responses pass untouched)."""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import error_response

__all__ = ["BearerTokenMiddleware"]


class BearerTokenMiddleware:
    """Answers 401 unless ``Authorization: Bearer <token>`` carries the configured token."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self._app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        header = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value
                break
        scheme, _, given = header.partition(b" ")
        # Constant-time comparison: response timing must not reveal how much of a guess was right.
        if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self._token):
            message = "missing bearer token" if not header else "invalid bearer token"
            response = error_response(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        await self._app(scope, receive, send)
