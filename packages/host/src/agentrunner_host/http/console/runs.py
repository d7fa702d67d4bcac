"""The runs pages: ``/runs`` (a filtered list, newest first) and ``/runs/{run_id}`` (the run's result timeline
with host sequence, type and latency, its frozen authorization snapshot, its back-call audit and its events).

Both are rendered on the server and need no script. The back-call audit is read through the same query
``GET /v1/audit?run_id=`` answers (:meth:`HostService.audit <agentrunner_host.service.HostService.audit>`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, cast

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentrunner_host.admission import is_valid_id
from agentrunner_host.service import HostService, NotFoundError
from agentrunner_host.stores import MAX_AUDIT_PAGE, AuditEntry, AuditFilter, RunListFilter, RunStatus

from .pages import ConsolePage, NavEntry, render, render_missing

__all__ = ["PAGE", "RunFilters", "RunRowView", "list_runs"]

PAGE_SIZE: Final = 50
"""Runs per page of the list."""
_MAX_RESULTS: Final = 2000
_STATUSES: Final = ("running", "completed", "failed")
_CURSOR: Final = re.compile(r"([0-9]{1,15}):(.{1,255})")


@dataclass(frozen=True, slots=True)
class RunFilters:
    """What the list is filtered by; empty fields do not filter."""

    agent: str = ""
    """Agent id: runs of the bindings that use it, and runs sent to it directly."""
    runner: str = ""
    """Runner id."""
    status: str = ""
    """``running``, ``completed``, ``failed`` or ``cancelled`` (failed with code ``cancelled``)."""
    since: str = ""
    """Started at or after (``YYYY-MM-DDTHH:MM``, UTC)."""
    until: str = ""
    """Started before (``YYYY-MM-DDTHH:MM``, UTC)."""
    before: str = ""
    """Cursor: ``<started_at>:<run_id>`` of the last run of the previous page."""


@dataclass(frozen=True, slots=True)
class RunRowView:
    """One line of the list."""

    run_id: str
    status: str
    code: str | None
    runner_id: str
    binding_id: str
    conversation_id: str | None
    started_at: int
    ended_at: int | None

    @property
    def label(self) -> str:
        """``completed``, ``cancelled``, ``failed: <code>`` or ``running``."""
        if self.status == "failed" and self.code == "cancelled":
            return "cancelled"
        if self.status == "failed" and self.code:
            return f"failed: {self.code}"
        return self.status


def _parse_time(raw: str) -> int | None:
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _agent_bindings(service: HostService, agent_id: str) -> list[str]:
    service.refresh_bindings()
    ids = [f"agent:{agent_id}"]  # the binding id of events sent straight to an agent
    ids += [e.binding.binding_id for e in service.directory.bindings() if e.binding.agent_id == agent_id]
    return ids


async def list_runs(service: HostService, filters: RunFilters, *, limit: int = PAGE_SIZE) -> list[RunRowView]:
    """Runs matching *filters*, newest first, at most *limit* (read through the run store)."""
    status: RunStatus | None = None
    code: str | None = None
    if filters.status == "cancelled":
        status, code = "failed", "cancelled"
    elif filters.status in _STATUSES:
        status = filters.status
    cursor = _CURSOR.fullmatch(filters.before)
    where = RunListFilter(
        binding_ids=_agent_bindings(service, filters.agent) if filters.agent else None,
        runner_id=filters.runner or None,
        status=status,
        code=code,
        started_from=_parse_time(filters.since),
        started_before=_parse_time(filters.until),
        after=None if cursor is None else (int(cursor.group(1)), cursor.group(2)),
    )
    return [
        RunRowView(
            run_id=r.run_id,
            status=r.status,
            code=r.code,
            runner_id=r.runner_id,
            binding_id=r.binding_id,
            conversation_id=None if r.conversation is None else r.conversation.conversation_id,
            started_at=r.started_at,
            ended_at=r.ended_at,
        )
        for r in await service.stores.runs.page(where, limit=limit)
    ]


def _when(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _pretty(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()


def _service(request: Request) -> HostService:
    service: HostService = request.app.state.service
    return service


async def runs_page(request: Request) -> Response:
    """``GET /runs``."""
    service = _service(request)
    q = request.query_params
    filters = RunFilters(
        agent=q.get("agent", "").strip(),
        runner=q.get("runner", "").strip(),
        status=q.get("status", "").strip(),
        since=q.get("since", "").strip(),
        until=q.get("until", "").strip(),
        before=q.get("before", "").strip(),
    )
    rows = await list_runs(service, filters, limit=PAGE_SIZE + 1)
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    next_query = None
    if more:
        last = rows[-1]
        params = {k: v for k, v in _query_of(filters).items() if v and k != "before"}
        params["before"] = f"{last.started_at}:{last.run_id}"
        next_query = params
    service.refresh_bindings()
    runners = sorted(d.runner_id for d in await service.runners())
    agents = sorted(e.agent.agent_id for e in service.directory.agents())
    return render(
        request,
        "runs.html",
        {
            "rows": rows,
            "filters": filters,
            "next_query": next_query,
            "runners": runners,
            "agents": agents,
            "statuses": (*_STATUSES, "cancelled"),
            "when": _when,
        },
        current="runs",
        title="Runs",
    )


def _query_of(filters: RunFilters) -> dict[str, str]:
    """The filters as query parameters."""
    return {name: getattr(filters, name) for name in RunFilters.__slots__}


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One result in the detail's timeline."""

    host_seq: int
    type: str
    at: int
    latency_ms: int
    """Since the previous result (the first: since the run started)."""
    summary: str
    payload: str


def _obj(value: object) -> dict[str, object]:
    """*value* when it is a JSON object, else an empty one (results are validated; this only reads them)."""
    return cast("dict[str, object]", value) if isinstance(value, dict) else {}


def _summary(kind: str, payload: dict[str, Any]) -> str:
    data = _obj(payload.get("data"))
    match kind:
        case "message.delta":
            return str(_obj(data.get("chunk")).get("content") or "")
        case "message.completed":
            return str(_obj(data.get("message")).get("content") or "")
        case "tool.call.started" | "tool.call.completed":
            return str(data.get("tool_name", ""))
        case "state.updated":
            return f"{data.get('scope')}:{data.get('key')}"
        case "artifact.created":
            artifact = _obj(data.get("artifact"))
            return str(artifact.get("name") or artifact.get("artifact_id") or "")
        case "run.failed":
            return f"{data.get('code')}: {data.get('message')}"
        case "run.completed":
            return str(data.get("finish_reason", ""))
        case _:
            return ""


async def _run_audit(service: HostService, run_id: str) -> list[AuditEntry]:
    """The run's back-calls, oldest first, through the query ``GET /v1/audit?run_id=`` serves."""
    entries: list[AuditEntry] = []
    cursor: int | None = None
    while len(entries) < _MAX_RESULTS:
        page = await service.audit(
            AuditFilter(run_id=run_id), cursor=cursor, limit=MAX_AUDIT_PAGE, order="asc"
        )
        entries.extend(page.entries)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    return entries[:_MAX_RESULTS]


async def run_page(request: Request) -> Response:
    """``GET /runs/{run_id}``."""
    service = _service(request)
    run_id: str = request.path_params["run_id"]
    if not is_valid_id(run_id):
        return render_missing(request, "run", section="runs")
    try:
        view = await service.run(run_id)
    except NotFoundError:
        return render_missing(request, "run", section="runs")
    record = await service.stores.runs.get(run_id)
    results = await service.stores.runs.results_after(run_id, after_host_seq=0, limit=_MAX_RESULTS)
    timeline: list[TimelineEntry] = []
    previous = record.started_at if record is not None else (results[0].created_at if results else 0)
    for r in results:
        payload = r.payload if isinstance(r.payload, dict) else orjson.loads(r.payload)
        timeline.append(
            TimelineEntry(
                host_seq=r.host_seq,
                type=r.type,
                at=r.created_at,
                latency_ms=max(0, r.created_at - previous),
                summary=_summary(r.type, payload)[:200],
                payload=_pretty(payload),
            )
        )
        previous = r.created_at
    events = await service.stores.events.for_run(run_id)
    if record is not None and all(e.event_id != record.event_id for e in events):
        # the triggering event is stored before its run exists, so it does not carry the run's id
        trigger = await service.stores.events.lookup(record.event_id)
        events = [trigger, *events] if trigger is not None else events
    audit = await _run_audit(service, run_id)
    return render(
        request,
        "run.html",
        {
            "run": view,
            "record": record,
            "timeline": timeline,
            "truncated": len(results) >= _MAX_RESULTS,
            "snapshot": _pretty(record.snapshot) if record is not None else None,
            "audit": audit,
            "events": [(e, _pretty(e.data)) for e in events],
            "when": _when,
        },
        current="runs",
        title=f"Run {run_id}",
    )


PAGE: Final = ConsolePage(
    nav=NavEntry(slug="runs", label="Runs", href="/runs"),
    routes=(
        Route("/runs", runs_page, methods=["GET"]),
        Route("/runs/{run_id}", run_page, methods=["GET"]),
    ),
)
"""The runs pages."""
