"""The partial indexes of the event log (migration ``0005_partial_indexes``), on both engines.

A partial index is used only by a query whose ``WHERE`` implies the index's, so these tests run the stores'
own statements (captured as they are sent) through the planner and look for the index in the plan:
SQLite's ``EXPLAIN QUERY PLAN`` with the statement's bound parameters, PostgreSQL's ``EXPLAIN`` of a
generic plan (``plan_cache_mode = force_generic_plan``: parameter values unknown, as for a statement
prepared once) with sequential scans priced out, so an unusable index shows as a ``Seq Scan``. The
migration tests check that upgrading a database holding data keeps every row and every uniqueness, and
that the reflected index conditions are the models' (Alembic's comparison ignores ``WHERE``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from agentrunner_host.access import ConversationKey
from agentrunner_host.stores import BACKCALL_EVENT, AuditFilter, EventEntry, HostStores, RunFinish
from agentrunner_host.stores.engine import alembic_config, current_revision, upgrade
from agentrunner_host.stores.tables import Base
from alembic import command
from sqlalchemy import Connection, event, inspect, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from .helpers import run_start, uid

_BEFORE = "0004_host_requests"
_SEQ_CLASH = r"UNIQUE constraint failed: events\.conversation_id, events\.seq|uq_events_conversation_seq"

Statement = tuple[str, Any]


@asynccontextmanager
async def _captured(engine: AsyncEngine) -> AsyncGenerator[list[Statement]]:
    """The statements sent while the block runs (every connection of the stores reports to the engine)."""
    sent: list[Statement] = []

    def record(_conn: object, _cursor: object, statement: str, parameters: Any, *_rest: object) -> None:
        sent.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


async def _plan(engine: AsyncEngine, statement: str, parameters: Any) -> str:
    """The plan of *statement*, one line per step."""
    if engine.dialect.name == "sqlite":
        async with engine.connect() as conn:
            rows = (await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)).all()
        return "\n".join(str(row[-1]) for row in rows)
    count = max((int(n) for n in re.findall(r"\$(\d+)", statement)), default=0)
    async with engine.connect() as conn:
        raw: Any = (await conn.get_raw_connection()).driver_connection
        await raw.execute("SET enable_seqscan = off")
        await raw.execute("SET plan_cache_mode = force_generic_plan")
        await raw.execute(f"PREPARE planned AS {statement}")
        try:
            args = f"({', '.join(['NULL'] * count)})" if count else ""
            rows = await raw.fetch(f"EXPLAIN EXECUTE planned{args}")
        finally:
            await raw.execute("DEALLOCATE planned")
            await raw.execute("RESET enable_seqscan")
            await raw.execute("RESET plan_cache_mode")
        return "\n".join(str(row[0]) for row in rows)


async def _plans_of(engine: AsyncEngine, work: Callable[[], Awaitable[object]], table: str) -> list[str]:
    """The plans of the statements *work* sends that read *table*."""
    async with _captured(engine) as sent:
        await work()
    reads = [
        (statement, parameters)
        for statement, parameters in sent
        if re.search(rf"\bFROM {table}\b", statement) and not isinstance(parameters, list)
    ]
    assert reads, f"no statement read {table}"
    return [await _plan(engine, statement, parameters) for statement, parameters in reads]


def _full_scan(plan: str, table: str) -> bool:
    return bool(re.search(rf"^(SCAN {table}\b|.*Seq Scan on {table}\b)", plan, re.MULTILINE))


def _audit_record(run_id: str, conversation_id: str | None) -> EventEntry:
    return EventEntry(
        event_id=uid("host"),
        event_type=BACKCALL_EVENT,
        source="host",
        kind="host",
        conversation_id=conversation_id,
        run_id=run_id,
        runner_id="acme/echo:echo",
        data={"action": "state.get", "decision": "allowed"},
        event_time=1_500,
    )


async def _seed(stores: HostStores) -> ConversationKey:
    conversation = ConversationKey("c1", None)
    for run_id, key in (("r1", conversation), ("r2", None)):
        await stores.runs.start(run_start(run_id, key))
        await stores.runs.finish(
            RunFinish(
                run_id=run_id,
                status="completed",
                ended_at=2_000,
                events=[_audit_record(run_id, None if key is None else key.conversation_id)],
            )
        )
    await stores.runs.start(run_start("r3", conversation))
    return conversation


async def test_the_conversation_reads_use_the_partial_conversation_indexes(
    stores: HostStores, engine: AsyncEngine
) -> None:
    """Paging a thread, its newest seq and a run start's positions each read the partial (conversation,
    thread, seq) index: ``conversation_id = :id`` implies ``conversation_id IS NOT NULL``."""
    conversation = await _seed(stores)
    reads: list[Callable[[], Awaitable[object]]] = [
        lambda: stores.events.page(conversation=conversation, before_seq=5, limit=10, include_host=True),
        lambda: stores.events.page(conversation=conversation, before_seq=None, limit=10),
        lambda: stores.events.latest_seq(conversation=conversation),
        lambda: stores.positions(conversation=conversation),
    ]
    for read in reads:
        for plan in await _plans_of(engine, read, "events"):
            assert "ix_events_conversation_thread_seq" in plan, plan
            assert not _full_scan(plan, "events"), plan


async def test_sqlite_numbers_an_event_through_the_partial_unique_index(
    stores: HostStores, engine: AsyncEngine
) -> None:
    """SQLite takes ``MAX(seq) + 1`` of the conversation inside the ``INSERT``: one probe of
    ``uq_events_conversation_seq`` (PostgreSQL numbers from ``sequence_counters`` and reads no event)."""
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite numbers events inside the INSERT; PostgreSQL uses sequence_counters")
    conversation = await _seed(stores)
    entry = EventEntry(
        event_id=uid("ev"),
        event_type="message.received",
        source="t",
        conversation_id=conversation.conversation_id,
    )
    plans = await _plans_of(engine, lambda: stores.events.append(entry), "events")
    assert any("uq_events_conversation_seq" in plan for plan in plans), plans
    assert not any(_full_scan(plan, "events") for plan in plans), plans


async def test_a_runs_events_are_read_through_the_partial_run_index(
    stores: HostStores, engine: AsyncEngine
) -> None:
    """``run_id = :id`` implies ``run_id IS NOT NULL``: the run's events come from ``ix_events_run_id``."""
    await _seed(stores)
    for plan in await _plans_of(engine, lambda: stores.events.for_run("r1"), "events"):
        assert "ix_events_run_id" in plan, plan
        assert not _full_scan(plan, "events"), plan


async def test_the_audit_query_reads_the_partial_audit_index(stores: HostStores, engine: AsyncEngine) -> None:
    """The audit query states ``event_type = 'host.backcall'`` as a literal, so the index holding only the
    audit records serves it (a bound parameter would not imply the index's condition in a generic plan)."""
    await _seed(stores)
    for where in (AuditFilter(), AuditFilter(runner_id="acme/echo:echo", since=1_000)):
        for order in ("asc", "desc"):
            plans = await _plans_of(
                engine,
                lambda where=where, order=order: stores.audit.page(where, cursor=10, order=order),
                "events",
            )
            for plan in plans:
                assert "ix_events_event_type_id" in plan, plan
                assert not _full_scan(plan, "events"), plan
    for plan in await _plans_of(engine, lambda: stores.audit.page(AuditFilter(run_id="r1")), "events"):
        assert "ix_events_event_type_id" in plan or "ix_events_run_id" in plan, plan
        assert not _full_scan(plan, "events"), plan
    page = await stores.audit.page(AuditFilter(), order="asc")
    assert [e.run_id for e in page.entries] == ["r1", "r2"]


async def test_the_runs_of_gone_hosts_are_found_through_the_status_index(
    stores: HostStores, engine: AsyncEngine
) -> None:
    """The one query on ``runs.owner_host`` (no index of its own since ``0005``) reads the running runs
    through ``ix_runs_status`` and tests each owner."""
    await _seed(stores)
    for include_unowned in (True, False):
        where = stores.hosts.orphaned(include_unowned=include_unowned)
        plans = await _plans_of(
            engine, lambda where=where: stores.runs.close_interrupted(ended_at=3_000, where=where), "runs"
        )
        assert "ix_runs_status" in plans[0], plans[0]
        assert not _full_scan(plans[0], "runs"), plans[0]
    assert [r.run_id for r in await stores.runs.list_running()] == []


# -- the migration ---------------------------------------------------------------------------------------


def _normal(condition: object) -> str:
    """A condition as both engines' catalogs spell it, reduced to one form."""
    spelled = str(condition).lower().replace("::text", "")
    return re.sub(r"[()\s]+", " ", spelled).strip()


def _indexes(connection: Connection) -> dict[str, tuple[tuple[str, ...], bool, str | None]]:
    found: dict[str, tuple[tuple[str, ...], bool, str | None]] = {}
    inspector = inspect(connection)
    for table in ("events", "runs"):
        for index in inspector.get_indexes(table):
            if index.get("duplicates_constraint"):  # PostgreSQL's index of a unique constraint
                continue
            options = index.get("dialect_options", {})
            where = options.get("sqlite_where", options.get("postgresql_where"))
            name = str(index["name"])
            columns = tuple(str(c) for c in index["column_names"])
            found[name] = (columns, bool(index["unique"]), None if where is None else _normal(where))
    return found


def _declared(dialect: str) -> dict[str, tuple[tuple[str, ...], bool, str | None]]:
    declared: dict[str, tuple[tuple[str, ...], bool, str | None]] = {}
    for table in ("events", "runs"):
        for index in Base.metadata.tables[table].indexes:
            where = index.dialect_options[dialect]._non_defaults.get("where")
            columns = tuple(str(c.name) for c in index.columns)
            declared[str(index.name)] = (
                columns,
                bool(index.unique),
                None if where is None else _normal(where),
            )
    return declared


async def test_the_migrated_index_conditions_are_the_models(raw_engine: AsyncEngine) -> None:
    """Alembic's drift check compares columns and uniqueness but not ``WHERE``: this compares the
    reflected partial-index conditions with the models' (and that ``runs.owner_host`` has no index)."""
    await upgrade(raw_engine)
    async with raw_engine.connect() as conn:
        found = await conn.run_sync(_indexes)
    assert found == _declared(raw_engine.dialect.name)
    assert "ix_runs_owner_host" not in found
    assert found["ix_events_event_type_id"][2] == f"event_type = '{BACKCALL_EVENT}'"


_EVENT_COLUMNS = (
    "id, event_id, event_type, source, kind, conversation_id, thread_id, seq, run_id, data, created_at"
)


def _old_events() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for n in range(1, 4):  # a conversation numbered 1..3, with one back-call record
        rows.append(
            {
                "id": n * 10,
                "event_id": f"c-{n}",
                "event_type": BACKCALL_EVENT if n == 2 else "message.received",
                "source": "t",
                "kind": "host" if n == 2 else "event",
                "conversation_id": "c1",
                "thread_id": "",
                "seq": n,
                "run_id": "r1" if n == 2 else None,
                "data": "{}",
                "created_at": n,
            }
        )
    for n in range(4, 7):  # events without a conversation, one of a run
        rows.append(
            {
                "id": n * 10,
                "event_id": f"x-{n}",
                "event_type": "run.started" if n == 5 else "message.received",
                "source": "t",
                "kind": "event",
                "conversation_id": None,
                "thread_id": "",
                "seq": None,
                "run_id": "r2" if n == 5 else None,
                "data": "{}",
                "created_at": n,
            }
        )
    return rows


async def _events(engine: AsyncEngine) -> list[tuple[object, ...]]:
    async with engine.connect() as conn:
        rows = await conn.execute(text(f"SELECT {_EVENT_COLUMNS} FROM events ORDER BY id"))
        return [tuple(row) for row in rows]


async def _insert_event(engine: AsyncEngine, row: dict[str, object]) -> None:
    names = ", ".join(row)
    async with engine.begin() as conn:
        await conn.execute(
            text(f"INSERT INTO events ({names}) VALUES ({', '.join(':' + k for k in row)})"), row
        )


async def _assert_unique(engine: AsyncEngine) -> None:
    """A second (c1, 2) is refused; events without a conversation never conflict."""
    clash = {**_old_events()[1], "id": 1000, "event_id": "clash", "event_type": "message.received"}
    with pytest.raises(IntegrityError, match=_SEQ_CLASH):
        await _insert_event(engine, clash)
    loose = {**_old_events()[3], "id": 1001, "event_id": "loose"}
    await _insert_event(engine, loose)
    async with engine.begin() as conn:
        await conn.execute(text("DELETE FROM events WHERE id = 1001"))


async def test_upgrading_from_0004_keeps_the_events_and_their_uniqueness(raw_engine: AsyncEngine) -> None:
    """A database at ``0004`` with events (numbered and loose, ids with gaps) upgrades to head with every
    row and id as it was, ``(conversation_id, seq)`` still unique, and no drift from the models; the
    downgrade brings back the table constraint and keeps the rows too."""
    await upgrade(raw_engine, revision=_BEFORE)
    for row in _old_events():
        await _insert_event(raw_engine, row)
    before = await _events(raw_engine)
    await upgrade(raw_engine)
    assert await current_revision(raw_engine) != _BEFORE
    assert await _events(raw_engine) == before
    await _assert_unique(raw_engine)
    async with raw_engine.connect() as conn:
        found = await conn.run_sync(_indexes)
    assert found == _declared(raw_engine.dialect.name)

    await _downgrade(raw_engine, _BEFORE)
    assert await _events(raw_engine) == before
    await _assert_unique(raw_engine)
    async with raw_engine.connect() as conn:
        indexes = await conn.run_sync(_indexes)
    assert indexes["ix_runs_owner_host"] == (("owner_host",), False, None)
    assert all(where is None for _, _, where in indexes.values())
    await upgrade(raw_engine)
    assert await _events(raw_engine) == before


async def _downgrade(engine: AsyncEngine, revision: str) -> None:
    def run(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)

    async with engine.begin() as conn:
        await conn.run_sync(run)
