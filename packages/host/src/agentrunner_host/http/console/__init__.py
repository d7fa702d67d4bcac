"""The web console served by ``agentrunner serve`` at ``/``: server-rendered pages (Jinja2) and plain ES
modules under ``/static/``, behind the API's token, ``Host`` and ``Origin`` rules. docs/console.md says how
to add a page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from . import agents, bindings, chat, runners, runs
from .pages import PAGE_HEADERS, ConsolePage, NavEntry, render
from .session import SESSION_ROUTES
from .throttle import LoginThrottle

__all__ = [
    "PAGES",
    "PAGE_HEADERS",
    "PUBLIC_PATHS",
    "PUBLIC_PREFIXES",
    "ConsolePage",
    "ConsoleState",
    "NavEntry",
    "console_routes",
    "console_state",
    "render",
]

PAGES: Final[tuple[ConsolePage, ...]] = (chat.PAGE, runs.PAGE, agents.PAGE, bindings.PAGE, runners.PAGE)
"""Every console page, in navigation order."""

PUBLIC_PATHS: Final = frozenset({"/login"})
"""Console paths served without a token (the login form)."""
PUBLIC_PREFIXES: Final = ("/static/",)
"""Console path prefixes served without a token (style sheets and scripts; they hold no data)."""

_STATIC: Final = Path(__file__).parent / "static"


@dataclass(frozen=True, slots=True)
class ConsoleState:
    """What every console page needs to know about the server (``app.state.console``)."""

    nav: tuple[NavEntry, ...]
    """The navigation bar."""
    token: str | None
    """The API token (``None``: the host has none and the console needs no login)."""
    throttle: LoginThrottle
    """The login rate limit."""
    secure_cookie: bool = False
    """Mark the session cookie ``Secure`` on every request, not only those that came over HTTPS."""

    @property
    def token_protected(self) -> bool:
        """The console asks for the token (and shows a sign-out button)."""
        return self.token is not None


async def _home(request: Request) -> Response:
    return RedirectResponse(PAGES[0].nav.href, status_code=303)


def console_routes() -> list[BaseRoute]:
    """The console's routes: home, login/logout, static files and every page's routes."""
    routes: list[BaseRoute] = [Route("/", _home, methods=["GET"]), *SESSION_ROUTES]
    for page in PAGES:
        routes.extend(page.routes)
    routes.append(Mount("/static", app=StaticFiles(directory=_STATIC), name="static"))
    return routes


def console_state(
    *, token: str | None, secure_cookie: bool = False, max_failures: int = 5, window_seconds: float = 60.0
) -> ConsoleState:
    """The console's state for an app protected by *token*: at most *max_failures* wrong tokens per client
    within *window_seconds*; the cookie always ``Secure`` when *secure_cookie*."""
    return ConsoleState(
        nav=tuple(p.nav for p in PAGES),
        token=token,
        throttle=LoginThrottle(max_failures=max_failures, window_seconds=window_seconds),
        secure_cookie=secure_cookie,
    )
