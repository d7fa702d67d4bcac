"""The bindings pages: ``/bindings`` (every binding in precedence order, the rule that orders them, and where
each is defined), ``/bindings/new`` and ``/bindings/{binding_id}/edit``.

``static/js/bindings.js`` checks the form with ``POST /v1/bindings/check`` while it is edited and again before
saving, shows the bindings it would conflict with and its place in the order, and saves through ``POST
/v1/bindings`` or ``PUT /v1/bindings/{binding_id}`` only when the check passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, get_args

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentrunner_host.admission import is_valid_id
from agentrunner_host.config import BindingSpec
from agentrunner_host.definitions import BINDING_SCOPE_PRECEDENCE, BindingScopeType
from agentrunner_host.service import HostService, NotFoundError

from .pages import ConsolePage, NavEntry, render, render_missing

__all__ = ["PAGE", "SCOPE_TYPES"]

SCOPE_TYPES: Final[tuple[str, ...]] = tuple(
    sorted(get_args(BindingScopeType), key=lambda s: BINDING_SCOPE_PRECEDENCE[s], reverse=True)
)
"""Scope kinds, most specific first."""


@dataclass(frozen=True, slots=True)
class BindingRow:
    """One line of the list."""

    spec: BindingSpec
    source: str
    rank: int | None
    """Place in the precedence order (1 = tried first); ``None`` when disabled."""
    precedence: tuple[int, int, int, int] | None


def _filters_text(spec: BindingSpec) -> str:
    return "; ".join(
        f"{f.field} = {f.equals}" if f.equals is not None else f"{f.field} in {', '.join(f.one_of or [])}"
        for f in spec.filters
    )


async def bindings_page(request: Request) -> Response:
    """``GET /bindings``."""
    service: HostService = request.app.state.service
    service.refresh_bindings()
    ranked = sorted(
        (b for b in service.directory.binding_set().bindings if b.enabled),
        key=lambda b: b.precedence(),
        reverse=True,
    )
    place = {b.binding_id: (i + 1, b.precedence()) for i, b in enumerate(ranked)}
    rows = [
        BindingRow(
            spec=e.binding,
            source=e.source,
            rank=place[e.binding.binding_id][0] if e.binding.binding_id in place else None,
            precedence=place[e.binding.binding_id][1] if e.binding.binding_id in place else None,
        )
        for e in service.directory.bindings()
    ]
    rows.sort(key=lambda r: (r.rank is None, r.rank or 0, r.spec.binding_id))
    return render(
        request,
        "bindings.html",
        {"rows": rows, "filters_text": _filters_text, "saved": request.query_params.get("saved", "")},
        current="bindings",
        title="Bindings",
    )


def _form(request: Request, service: HostService, spec: BindingSpec | None, source: str) -> Response:
    agents = [e.agent.agent_id for e in service.directory.agents()]
    return render(
        request,
        "binding_form.html",
        {
            "spec": spec,
            "editing": spec is not None,
            "read_only": source in {"config", "default"},
            "source": source,
            "agents": agents,
            "scope_types": SCOPE_TYPES,
            "wanted_agent": request.query_params.get("agent", ""),
            "filters": orjson.dumps(
                [f.model_dump(mode="json", exclude_none=True) for f in spec.filters] if spec else [],
                option=orjson.OPT_INDENT_2,
            ).decode(),
        },
        current="bindings",
        title=f"Edit binding {spec.binding_id}" if spec else "New binding",
    )


async def new_binding_page(request: Request) -> Response:
    """``GET /bindings/new``."""
    service: HostService = request.app.state.service
    service.refresh_bindings()
    return _form(request, service, None, "api")


async def edit_binding_page(request: Request) -> Response:
    """``GET /bindings/{binding_id}/edit``."""
    service: HostService = request.app.state.service
    binding_id = str(request.path_params["binding_id"])
    service.refresh_bindings()
    try:
        if not is_valid_id(binding_id):
            raise NotFoundError(f"no binding {binding_id!r}")
        entry = service.directory.binding(binding_id)
    except NotFoundError:
        return render_missing(request, "binding", section="bindings")
    return _form(request, service, entry.binding, entry.source)


PAGE: Final = ConsolePage(
    nav=NavEntry(slug="bindings", label="Bindings", href="/bindings"),
    routes=(
        Route("/bindings", bindings_page, methods=["GET"]),
        Route("/bindings/new", new_binding_page, methods=["GET"]),
        Route("/bindings/{binding_id}/edit", edit_binding_page, methods=["GET"]),
    ),
)
"""The bindings pages."""
