"""The agents pages: ``/agents`` (every agent with its runner, where it is defined and the bindings that use
it), ``/agents/new`` and ``/agents/{agent_id}/edit`` (a form generated from the runner's
``DynamicFormItemSchema``, see :mod:`.forms`).

The pages are rendered on the server; ``static/js/agents.js`` reads the form back into an ``AgentConfig`` and
writes it through ``POST /v1/agents`` or ``PUT /v1/agents/{agent_id}``, so the API's admission (secrets as
environment references, the runner's form) decides, and its error is shown as it is. Agents defined in the
configuration file are read-only, as in the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentrunner_host.admission import is_valid_id
from agentrunner_host.config.secrets import redact_config
from agentrunner_host.definitions import AgentConfig
from agentrunner_host.registry import RunnerDescriptor
from agentrunner_host.service import HostService, NotFoundError

from .forms import PROMPT_ROLES, FormField, form_fields, pick_locale, text_in
from .pages import ConsolePage, NavEntry, render, render_missing

__all__ = ["PAGE", "POLICY_KEYS"]

POLICY_KEYS: Final = ("resource_policy", "state_policy", "delivery_policy", "run_policy")
"""The agent's policies, edited together as one JSON object."""


@dataclass(frozen=True, slots=True)
class AgentRow:
    """One line of the list."""

    agent_id: str
    label: str
    runner_id: str
    runner_label: str
    source: str
    bindings: tuple[str, ...]
    available: bool


def _locale(request: Request) -> str:
    return pick_locale(request.query_params.get("lang"), request.headers.get("accept-language"))


async def agents_page(request: Request) -> Response:
    """``GET /agents``."""
    service: HostService = request.app.state.service
    service.refresh_bindings()
    locale = _locale(request)
    runners = {d.runner_id: d for d in await service.runners()}
    used: dict[str, list[str]] = {}
    for entry in service.directory.bindings():
        used.setdefault(entry.binding.agent_id, []).append(entry.binding.binding_id)
    rows = [
        AgentRow(
            agent_id=a.agent_id,
            label=a.label or "",
            runner_id=a.runner_id,
            runner_label=text_in(runners[a.runner_id].manifest.label, locale)
            if a.runner_id in runners
            else "",
            source=e.source,
            bindings=tuple(used.get(a.agent_id, ())),
            available=a.runner_id in runners,
        )
        for e in service.directory.agents()
        for a in (e.agent,)
    ]
    return render(
        request,
        "agents.html",
        {"rows": rows, "saved": request.query_params.get("saved", "")},
        current="agents",
        title="Agents",
    )


def _runner_choices(runners: list[RunnerDescriptor], locale: str) -> list[tuple[str, str]]:
    return [
        (d.runner_id, f"{text_in(d.manifest.label, locale) or d.runner_id} ({d.runner_id})") for d in runners
    ]


def _resources(service: HostService) -> dict[str, list[str]]:
    config = service.settings.config
    return {
        "llms": [m.id for m in config.models if m.model_type == "llm"],
        "reranks": [m.id for m in config.models if m.model_type == "rerank"],
        "knowledge_bases": [k.id for k in config.knowledge_bases],
    }


def _policies_text(agent: AgentConfig | None) -> str:
    if agent is None:
        return "{}"
    changed = agent.model_dump(mode="json", include=set(POLICY_KEYS), exclude_defaults=True)
    return orjson.dumps(changed, option=orjson.OPT_INDENT_2).decode()


def _form(
    request: Request,
    *,
    service: HostService,
    runners: list[RunnerDescriptor],
    runner: RunnerDescriptor | None,
    agent: AgentConfig | None,
    source: str,
) -> Response:
    locale = _locale(request)
    fields: list[FormField] = []
    extra = "{}"
    if runner is not None:
        schema = runner.manifest.config_schema
        fields = form_fields(
            schema, agent.runner_config if agent else None, locale=locale, **_resources(service)
        )
        if agent is not None:
            # keys the form does not declare (legacy or hand-written ones) are kept, shown redacted
            declared = {item.name for item in schema}
            rest = {k: v for k, v in agent.runner_config.items() if k not in declared}
            extra = orjson.dumps(redact_config(rest), option=orjson.OPT_INDENT_2).decode() if rest else "{}"
    editing = agent is not None
    title = f"Edit agent {agent.agent_id}" if agent is not None else "New agent"
    return render(
        request,
        "agent_form.html",
        {
            "agent": agent,
            "editing": editing,
            "read_only": source in {"config", "default"},
            "source": source,
            "runner": runner,
            "runner_label": text_in(runner.manifest.label, locale) if runner else "",
            "runner_help": text_in(runner.manifest.description, locale) if runner else "",
            "runners": _runner_choices(runners, locale),
            "fields": fields,
            "extra": extra,
            "policies": _policies_text(agent),
            "prompt_roles": PROMPT_ROLES,
            "locale": locale,
        },
        current="agents",
        title=title,
    )


async def new_agent_page(request: Request) -> Response:
    """``GET /agents/new?runner=<runner_id>``: the form of the chosen runner (the first one by default)."""
    service: HostService = request.app.state.service
    runners = await service.runners()
    wanted = request.query_params.get("runner", "")
    runner = next((d for d in runners if d.runner_id == wanted), runners[0] if runners else None)
    return _form(request, service=service, runners=runners, runner=runner, agent=None, source="api")


async def edit_agent_page(request: Request) -> Response:
    """``GET /agents/{agent_id}/edit``."""
    service: HostService = request.app.state.service
    agent_id = str(request.path_params["agent_id"])
    service.refresh_bindings()
    try:
        if not is_valid_id(agent_id):
            raise NotFoundError(f"no agent {agent_id!r}")
        entry = service.directory.agent(agent_id)
    except NotFoundError:
        return render_missing(request, "agent", section="agents")
    runners = await service.runners()
    runner = next((d for d in runners if d.runner_id == entry.agent.runner_id), None)
    return _form(
        request, service=service, runners=runners, runner=runner, agent=entry.agent, source=entry.source
    )


PAGE: Final = ConsolePage(
    nav=NavEntry(slug="agents", label="Agents", href="/agents"),
    routes=(
        Route("/agents", agents_page, methods=["GET"]),
        Route("/agents/new", new_agent_page, methods=["GET"]),
        Route("/agents/{agent_id}/edit", edit_agent_page, methods=["GET"]),
    ),
)
"""The agents pages."""
