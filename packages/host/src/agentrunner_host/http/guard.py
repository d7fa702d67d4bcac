"""Request admission in front of every route: the ``Host`` allowlist, the ``Origin`` check and JSON-only writes.

Pure ASGI middleware (streaming answers pass untouched), outside the bearer-token check, so a foreign
``Host`` (421) or a cross-site ``Origin`` (403) is refused whether or not a token is configured or sent:

- ``Host`` must be a loopback name (``localhost``, ``127.0.0.0/8``, ``::1``) or one of ``http.allowed_hosts``.
  A DNS-rebinding page reaches the API under *its own* name, so it is refused here.
- ``Origin`` (sent by browsers on every cross-origin request and on every ``POST``) must be the API's own
  origin or one of ``http.allowed_origins``; ``Sec-Fetch-Site: cross-site`` without an allowed origin is
  refused too. A page on another site therefore cannot drive the API even though the browser would send
  the request without a CORS preflight.
- A ``POST``/``PUT``/``PATCH``/``DELETE`` with a body (or a declared content type) must be
  ``application/json`` (415 otherwise): the media types a browser may send without a preflight are not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from agentrunner_host.config import is_loopback_host

from .errors import error_response

__all__ = ["RequestGuard", "host_name"]

_WRITE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_SEEN_HOSTS: Final = 256
"""``Host`` header values whose answer is remembered."""


def host_name(header: str) -> str:
    """The name part of a ``Host`` header value (``[::1]:8420`` → ``::1``, ``Example:80`` → ``example``)."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    name, sep, port = value.rpartition(":")
    return name if sep and port.isdigit() else value


def _origin_of(value: str) -> str | None:
    """``scheme://host[:port]`` of an ``Origin`` header, lowercased, or ``None`` when it is not one."""
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return None
    if parts.scheme not in {"http", "https"} or not parts.netloc or parts.path not in {"", "/"}:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


class RequestGuard:
    """Refuses requests for a foreign ``Host`` (421), from a foreign ``Origin`` (403) and non-JSON writes (415)."""

    def __init__(
        self, app: ASGIApp, *, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = ()
    ) -> None:
        self._app = app
        hosts = {h.strip().lower() for h in allowed_hosts}
        self._any_host = "*" in hosts
        self._hosts = frozenset(host_name(h) for h in hosts - {"*"})
        self._origins = frozenset(o for o in (_origin_of(v) for v in allowed_origins) if o is not None)
        self._seen_hosts: dict[str, bool] = {}

    def _host_allowed(self, host: str) -> bool:
        if self._any_host:
            return True
        known = self._seen_hosts.get(host)
        if known is not None:
            return known
        name = host_name(host)
        allowed = is_loopback_host(name) or name in self._hosts
        # the answer depends on the header alone: remembered for the few Host values a server sees (parsing
        # an address per request cost as much as the rest of the guard); a flood of made-up ones is not kept
        if len(self._seen_hosts) < _SEEN_HOSTS:
            self._seen_hosts[host] = allowed
        return allowed

    def _refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", ()):
            headers.setdefault(name, value)
        host = headers.get(b"host", b"").decode("latin-1")
        if not host:
            return 421, "misdirected_request", "a Host header is required"
        if not self._host_allowed(host):
            return 421, "misdirected_request", f"host {host_name(host)!r} is not served here"
        raw_origin = headers.get(b"origin")
        if raw_origin is not None:
            origin = _origin_of(raw_origin.decode("latin-1"))
            same = origin is not None and origin.split("://", 1)[1] == host.strip().lower()
            if origin is None or not (same or origin in self._origins):
                return 403, "forbidden_origin", "requests from this origin are not allowed"
        elif headers.get(b"sec-fetch-site") == b"cross-site":
            return 403, "forbidden_origin", "cross-site requests are not allowed"
        if scope.get("method") in _WRITE_METHODS:
            content_type = headers.get(b"content-type")
            length = headers.get(b"content-length", b"")
            has_body = b"transfer-encoding" in headers or length.strip() not in {b"", b"0"}
            if content_type is not None or has_body:
                media = (content_type or b"").split(b";", 1)[0].strip().lower()
                if media != b"application/json":
                    return 415, "unsupported_media_type", "request bodies must be application/json"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in {"http", "websocket"}:
            await self._app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            status, code, message = refusal
            await error_response(status, code, message)(scope, receive, send)
            return
        await self._app(scope, receive, send)
