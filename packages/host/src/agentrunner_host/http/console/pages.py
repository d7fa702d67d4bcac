"""The page convention of the console: a :class:`ConsolePage` per page module, and :func:`render`.

A page module (``http/console/<name>.py``) defines ``PAGE = ConsolePage(...)`` with its navigation entry and
its Starlette routes; ``http/console/__init__.py`` lists the pages in navigation order. A handler answers
with :func:`render`, which fills ``templates/<name>.html`` (extending ``base.html``) and adds the console's
security headers. docs/console.md has the walk-through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute

__all__ = ["PAGE_HEADERS", "ConsolePage", "NavEntry", "render", "render_missing"]

PAGE_HEADERS: Final = {
    # Scripts and styles come only from this server's /static/ files: no inline script runs, so even markup
    # that slipped past the Markdown renderer could not execute; nothing loads from another host.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
"""Headers of every console page."""


@dataclass(frozen=True, slots=True)
class NavEntry:
    """One link of the navigation bar."""

    slug: str
    """Stable id (``chat``, ``runs``); the template marks the current page with it."""
    label: str
    """Link text."""
    href: str
    """Where the link goes."""


@dataclass(frozen=True, kw_only=True)
class ConsolePage:
    """One page of the console: its navigation entry and its routes."""

    nav: NavEntry
    """Its link in the navigation bar."""
    routes: Sequence[BaseRoute] = field(default_factory=tuple[BaseRoute, ...])
    """Its Starlette routes (pages and any page-private endpoints)."""


_ENV: Final = Environment(
    loader=PackageLoader("agentrunner_host.http.console", "templates"),
    autoescape=select_autoescape(["html"], default=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render(
    request: Request,
    template: str,
    context: Mapping[str, object],
    *,
    current: str,
    title: str,
    status: int = 200,
) -> HTMLResponse:
    """*template* rendered inside the base layout; *current* is the ``slug`` of the active navigation entry."""
    console = request.app.state.console
    page = _ENV.get_template(template).render(
        {
            **context,
            "nav": console.nav,
            "current": current,
            "title": title,
            "token_protected": console.token_protected,
        }
    )
    return HTMLResponse(page, status_code=status, headers=PAGE_HEADERS)


def render_missing(request: Request, what: str, *, section: str) -> HTMLResponse:
    """The 404 page for a *what* (``agent``, ``run``...) that does not exist, linking back to */section*."""
    return render(
        request,
        "missing.html",
        {"what": what, "back": f"/{section}"},
        current=section,
        title=f"No such {what}",
        status=404,
    )
