"""The audit as a query (``stores.audit``).

The dispatcher files one record per back-call, allowed or denied, and the host one per tool a harness CLI
used (:mod:`agentrunner_host.harness_audit`, action ``harness.tool``); both are stored in the event log as
``host.backcall`` host records, in call order, with the call's time as ``event_time``, while the run is
live (see :mod:`agentrunner_host.live_audit`, :mod:`agentrunner_host.persistence`). This module reads them
back with filters and keyset paging; it adds no second copy of the facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal
from typing import cast as type_cast

from pydantic import ConfigDict, with_config
from sqlalchemy import ColumnElement, RowMapping, and_, cast, func, literal_column, select
from sqlalchemy.dialects.postgresql import JSONB

from agentrunner_host.stores._connections import Database

from .records import EVENTS
from .runs import RUNS
from .tables import BACKCALL_EVENT

# The type as a literal in the statement's text: ``ix_events_event_type_id`` holds only these rows, and a
# generic PostgreSQL plan (a statement prepared once) cannot use it for a bound parameter, whose value it
# does not know (SQLite compares the bound value with the index's literal itself).
_IS_BACKCALL: Final = EVENTS.c.event_type == literal_column(f"'{BACKCALL_EVENT}'")

__all__ = ["BACKCALL_EVENT", "MAX_AUDIT_PAGE", "AuditEntry", "AuditFilter", "AuditLog", "AuditPage"]

MAX_AUDIT_PAGE: Final = 500
"""Largest page."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditFilter:
    """Which records to return; every field left ``None`` matches everything."""

    run_id: str | None = None
    """Only this run's calls."""
    runner_id: str | None = None
    """Only calls of runs of this runner."""
    plugin_id: str | None = None
    """Only calls of runs of this plugin (``author/name``)."""
    action: str | None = None
    """Only this action (``models.invoke``...)."""
    outcome: str | None = None
    """``allowed``, ``denied`` (every refusal), or one refusal code (``unauthorized``...)."""
    since: int | None = None
    """Calls made at or after this instant (Unix epoch milliseconds)."""
    until: int | None = None
    """Calls made before this instant (Unix epoch milliseconds)."""


# ``GET /v1/audit`` answers these as they are (the OpenAPI component ``AuditEntry``): the config gives the
# component its field descriptions from the attribute docstrings and refuses unknown keys, as the HTTP bodies do.
@with_config(ConfigDict(extra="forbid", use_attribute_docstrings=True))
@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One back-call, allowed or refused, or one tool a harness CLI used (action ``harness.tool``), as stored."""

    seq: int
    """Position in the event log (the paging cursor)."""
    run_id: str | None
    """Run."""
    runner_id: str | None
    """Runner of the run."""
    plugin_id: str | None
    """Plugin of the run."""
    binding_id: str | None
    """Binding of the run."""
    caller: str | None
    """The identity the call came from."""
    action: str
    """Action."""
    resource: str | None
    """Resource the call named (model, tool, key...)."""
    scope: str | None
    """Conversation scope."""
    decision: str
    """``allowed`` or the refusal code."""
    latency_ms: float | None
    """Time the host spent on it."""
    at: int
    """When the call was made (Unix epoch milliseconds)."""
    risk: list[str]
    """Danger classes of the tool it called (``shell``, ``file_write``...), empty for the others."""
    detail: str | None = None
    """What a harness tool did (its command, file or URL); ``None`` for back-calls."""
    error: str | None = None
    """A harness tool's failure code (``tool.error``, ``tool.unfinished``); ``None`` when it succeeded."""


@dataclass(frozen=True, slots=True)
class AuditPage:
    """A page of records and the cursor of the next one (``None`` at the end)."""

    entries: list[AuditEntry]
    """Records, in the requested order."""
    next_cursor: int | None
    """Pass as ``cursor`` for the next page."""


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _entry(m: RowMapping) -> AuditEntry:
    raw: Any = m["data"]
    data: dict[str, Any] = type_cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
    latency = data.get("latency_ms")
    return AuditEntry(
        seq=m["id"],
        run_id=m["run_id"],
        runner_id=m["runner_id"],
        plugin_id=m["plugin_id"],
        binding_id=m["binding_id"],
        caller=_str(data.get("caller")),
        action=_str(data.get("action")) or "",
        resource=_str(data.get("resource")),
        scope=_str(data.get("scope")),
        decision=_str(data.get("decision")) or "",
        latency_ms=float(latency) if isinstance(latency, int | float) else None,
        at=m["at"],
        risk=[r for r in type_cast(list[Any], data.get("risk") or []) if isinstance(r, str)],
        detail=_str(data.get("detail")),
        error=_str(data.get("error")),
    )


class AuditLog:
    """Reads the stored audit (back-calls and harness tools)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def _field(self, name: str) -> ColumnElement[Any]:
        if self._db.dialect == "postgresql":
            return cast(EVENTS.c.data, JSONB)[name].astext
        return func.json_extract(EVENTS.c.data, f"$.{name}")

    async def page(
        self,
        where: AuditFilter = AuditFilter(),
        *,
        cursor: int | None = None,
        limit: int = 100,
        order: Literal["asc", "desc"] = "desc",
    ) -> AuditPage:
        """Records matching *where*, newest first (``order="desc"``) or in call order (``"asc"``), after
        *cursor* (a ``next_cursor``); at most *limit* (1 to :data:`MAX_AUDIT_PAGE`)."""
        limit = max(1, min(limit, MAX_AUDIT_PAGE))
        at = func.coalesce(EVENTS.c.event_time, EVENTS.c.created_at)
        conditions: list[ColumnElement[bool]] = [_IS_BACKCALL]
        if where.run_id is not None:
            conditions.append(EVENTS.c.run_id == where.run_id)
        if where.runner_id is not None:
            conditions.append(EVENTS.c.runner_id == where.runner_id)
        if where.plugin_id is not None:
            conditions.append(RUNS.c.plugin_id == where.plugin_id)
        if where.action is not None:
            conditions.append(self._field("action") == where.action)
        if where.outcome == "denied":
            conditions.append(self._field("decision") != "allowed")
        elif where.outcome is not None:
            conditions.append(self._field("decision") == where.outcome)
        if where.since is not None:
            conditions.append(at >= where.since)
        if where.until is not None:
            conditions.append(at < where.until)
        if cursor is not None:
            conditions.append(EVENTS.c.id < cursor if order == "desc" else EVENTS.c.id > cursor)
        stmt = (
            select(
                EVENTS.c.id,
                EVENTS.c.run_id,
                EVENTS.c.runner_id,
                EVENTS.c.data,
                at.label("at"),
                RUNS.c.plugin_id,
                RUNS.c.binding_id,
            )
            .select_from(EVENTS.outerjoin(RUNS, RUNS.c.run_id == EVENTS.c.run_id))
            .where(and_(*conditions))
            .order_by(EVENTS.c.id.desc() if order == "desc" else EVENTS.c.id)
            .limit(limit + 1)
        )
        async with self._db.read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        entries = [_entry(row) for row in rows[:limit]]
        more = len(rows) > limit
        return AuditPage(entries, entries[-1].seq if more and entries else None)
