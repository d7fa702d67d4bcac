"""Host suite: whole runs through the orchestrator (PF1, PF2 of issue 8).

* PF1 — an in-process run of 52 results (50 deltas + message + terminal) through the host *without*
  persistence, next to the typed floor of the same work measured in the same run: validate the context dict,
  build the 52 typed results and dump each (perf-floors row D). Goal ≤ 2.5×.
* PF2 — the same run *persisted* to SQLite (WAL), next to an honest floor: the rows one real persisted run
  leaves (event, run, user and assistant transcript items, host records, 52 results, copied from the store)
  written with SQLAlchemy Core on one held connection into a database migrated by the same migrations (same
  tables, indexes and FTS triggers), in the two transactions the durability rule allows at minimum (the start,
  committed before the run is acknowledged; the results with the end). Goal ≤ 1.5×. A raw ``sqlite3`` row
  writes the same rows the same way, for reference. The older floor (a run row + 52 rows into two bare tables)
  is kept as a row of its own; it measures much less work than a run does. And the reference implementation's
  pattern, one commit per result, to show the gap.
* Throughput: runs per second at 1, 10 and 50 concurrent persisted runs; 50 concurrent ÷ serial ≥ 2×.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar, cast

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunResult,
    I18nObject,
    ResultEmitter,
)
from agentrunner import AgentRunContext as _Ctx

from ._framework import Goal, Measure, SuiteContext
from .sdk_models import DELTAS, build_context

__all__ = ["measures"]

_PLUGIN = "bench/host"


class BenchEchoRunner(AgentRunner):
    """Streams 50 deltas, one message and the terminal result: the 52-result run of perf-floors.md."""

    manifest: ClassVar[AgentRunnerManifest] = AgentRunnerManifest(
        id=f"plugin:{_PLUGIN}/default",
        name="default",
        label=I18nObject(en_US="Bench echo"),
        capabilities={"streaming": True},  # pyright: ignore[reportArgumentType]
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        for _ in range(DELTAS):
            yield out.delta("tok ")
        yield out.message("tok " * DELTAS)
        yield out.complete()


def measures(ctx: SuiteContext) -> list[Measure]:
    from agentrunner_host.definitions import AgentBinding, AgentEventEnvelope
    from agentrunner_host.host import Host
    from agentrunner_host.stores import HostStores
    from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade
    from sqlalchemy import Column, Integer, MetaData, String, Table, Text, insert

    counter = itertools.count()
    binding = AgentBinding(binding_id="bench", runner_id=f"plugin:{_PLUGIN}/default", event_types=["*"])
    bare = Host.create(plugins={_PLUGIN: [BenchEchoRunner()]}, bindings=[binding])

    def new_event(conversation: str = "conv-bench") -> AgentEventEnvelope:
        n = next(counter)
        return AgentEventEnvelope(
            event_id=f"evt-{n}",
            event_type="message.received",
            conversation_id=conversation,
            input={"text": "hello"},  # pyright: ignore[reportArgumentType]
            delivery={"surface": "bench", "supports_streaming": True},  # pyright: ignore[reportArgumentType]
        )

    async def bare_run() -> None:
        handle = await bare.orchestrator.start(new_event(), binding)
        async for _ in handle.results():
            pass

    context_dict = build_context()

    async def typed_floor() -> None:
        ctx_model = _Ctx.model_validate(context_dict)
        out = ResultEmitter(ctx_model.run_id)
        for _ in range(DELTAS):
            out.delta("tok ").model_dump_json()
        out.message("tok " * DELTAS).model_dump_json()
        out.complete().model_dump_json()

    tmp = Path(tempfile.mkdtemp(prefix="agentrunner-bench-"))
    engine = create_engine(default_sqlite_url(tmp))
    ctx.run(upgrade(engine))
    stores: HostStores = ctx.run(HostStores.open(engine, data_dir=tmp))
    persisted = Host.create(plugins={_PLUGIN: [BenchEchoRunner()]}, bindings=[binding], stores=stores)

    async def persisted_run() -> None:
        handle = await persisted.orchestrator.submit(new_event())
        async for _ in handle.results():
            pass
        await handle.outcome()

    floor_engine = create_engine(default_sqlite_url(tmp / "floor"))
    meta = MetaData()
    runs = Table("floor_runs", meta, Column("id", Integer, primary_key=True), Column("status", String(20)))
    rows = Table(
        "floor_results",
        meta,
        Column("id", Integer, primary_key=True),
        Column("run", Integer),
        Column("seq", Integer),
        Column("payload", Text),
    )
    (tmp / "floor").mkdir(exist_ok=True)

    async def create_floor_tables() -> None:
        async with floor_engine.begin() as conn:
            await conn.run_sync(meta.create_all)

    ctx.run(create_floor_tables())
    payload = ResultEmitter("r").delta("tok ").model_dump_json()

    async def floor_tx_per_run() -> None:
        n = next(counter)
        async with floor_engine.begin() as conn:
            await conn.execute(insert(runs).values(id=n, status="completed"))
            await conn.execute(insert(rows), [{"run": n, "seq": i, "payload": payload} for i in range(52)])

    async def commit_per_result() -> None:
        n = next(counter)
        async with floor_engine.begin() as conn:
            await conn.execute(insert(runs).values(id=n, status="completed"))
        for i in range(52):
            async with floor_engine.begin() as conn:
                await conn.execute(insert(rows).values(run=n, seq=i, payload=payload))

    honest = _HonestFloor(ctx, tmp, stores, persisted, new_event)

    def concurrent(n: int) -> Any:
        async def many() -> None:
            async def one(i: int) -> None:
                handle = await persisted.orchestrator.submit(new_event(f"conv-{i}"))
                async for _ in handle.results():
                    pass

            await asyncio.gather(*(one(i) for i in range(n)))

        return many

    async def serial_50() -> None:
        for i in range(50):
            handle = await persisted.orchestrator.submit(new_event(f"conv-s{i}"))
            async for _ in handle.results():
                pass

    async def close() -> None:
        await bare.aclose()
        await persisted.aclose()
        await stores.aclose()
        await engine.dispose()
        await floor_engine.dispose()

    ctx.add_cleanup(close)

    return [
        Measure(
            "host run in-process, no persistence (52 results)",
            bare_run,
            floor=typed_floor,
            floor_name="validate the context + build and dump 52 typed results (perf-floors row D)",
            goal=Goal.ratio(2.5, source="issue 8 PF1"),
            unit="µs/run",
        ),
        Measure(
            "host run in-process, persisted to SQLite (52 results)",
            persisted_run,
            floor=floor_tx_per_run,
            floor_name="SQLAlchemy Core, one transaction per run inserting a run row + 52 result rows (row I)",
            goal=Goal.ratio(1.5, source="issue 8 PF2"),
            unit="µs/run",
        ),
        Measure(
            "host run in-process, persisted to SQLite, vs the honest floor (52 results)",
            persisted_run,
            floor=honest.sa_core,
            floor_name="the same rows a persisted run leaves, same migrated tables/indexes/FTS triggers, "
            "SQLAlchemy Core on one held connection, 2 transactions (start; results + end)",
            goal=Goal.ratio(1.5, source="issue 16: persisted run ≤ 1.5× the honest floor"),
            unit="µs/run",
        ),
        Measure(
            "honest floor in raw sqlite3 (reference for the SQLAlchemy floor)",
            honest.sa_core,
            floor=honest.raw_sqlite3,
            floor_name="the same rows and 2 transactions through the stdlib sqlite3 module (no thread hops)",
            unit="µs/run",
        ),
        Measure(
            "reference pattern: one commit per result (52 results)",
            commit_per_result,
            floor=floor_tx_per_run,
            floor_name="SQLAlchemy Core, one transaction per run inserting a run row + 52 result rows (row I)",
            unit="µs/run",
        ),
        Measure(
            "50 concurrent persisted runs, per run",
            concurrent(50),
            floor=serial_50,
            floor_name="the same 50 persisted runs one after another (ratio < 0.5 means ≥ 2× throughput)",
            goal=Goal.ratio(0.5, source="issue 8 PF2: 50 concurrent ÷ serial throughput ≥ 2×"),
            unit="µs/run",
            per=50,
        ),
        Measure("10 concurrent persisted runs, per run", concurrent(10), unit="µs/run", per=10),
    ]


class _HonestFloor:
    """The rows of one real persisted run, replayed with fresh ids in two transactions (see the docstring)."""

    def __init__(self, ctx: SuiteContext, tmp: Path, stores: Any, host: Any, new_event: Any) -> None:
        import sqlite3

        from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade
        from agentrunner_host.stores.tables import EventRow, ResultRow, RunRow, TranscriptRow
        from sqlalchemy import Table, or_, select
        from sqlalchemy.ext.asyncio import AsyncConnection

        self._tables: dict[str, Table] = {
            "events": cast(Table, EventRow.__table__),
            "runs": cast(Table, RunRow.__table__),
            "items": cast(Table, TranscriptRow.__table__),
            "results": cast(Table, ResultRow.__table__),
        }
        events, runs, items, results = (self._tables[k] for k in ("events", "runs", "items", "results"))

        async def template() -> dict[str, list[dict[str, Any]]]:
            event = new_event("conv-honest")
            handle = await host.orchestrator.submit(event)
            async for _ in handle.results():
                pass
            await handle.outcome()
            rid = handle.run_id
            async with stores.engine.connect() as conn:

                async def rows(stmt: Any) -> list[dict[str, Any]]:
                    return [dict(m) for m in (await conn.execute(stmt)).mappings()]

                return {
                    "events": await rows(
                        select(events).where(or_(events.c.run_id == rid, events.c.event_id == event.event_id))
                    ),
                    "runs": await rows(select(runs).where(runs.c.run_id == rid)),
                    "items": await rows(select(items).where(items.c.conversation_id == "conv-honest")),
                    "results": await rows(select(results).where(results.c.run_id == rid)),
                }

        self._rows = ctx.run(template())
        self._n = itertools.count()
        directory = tmp / "honest"
        directory.mkdir()
        self._engine = create_engine(default_sqlite_url(directory))
        ctx.run(upgrade(self._engine))
        self._conn: AsyncConnection = ctx.run(self._engine.connect())
        raw_dir = tmp / "honest-raw"
        raw_dir.mkdir()
        raw_engine = create_engine(default_sqlite_url(raw_dir))
        ctx.run(upgrade(raw_engine))
        ctx.run(raw_engine.dispose())
        self._raw = sqlite3.connect(default_sqlite_url(raw_dir).split("///", 1)[1], isolation_level=None)
        self._raw.execute("PRAGMA journal_mode=WAL")
        self._raw.execute("PRAGMA synchronous=NORMAL")
        self._raw.execute("PRAGMA foreign_keys=ON")

        async def close() -> None:
            await self._conn.close()
            await self._engine.dispose()
            self._raw.close()

        ctx.add_cleanup(close)

    def _batch(self) -> tuple[list[tuple[str, list[dict[str, Any]]]], list[tuple[str, list[dict[str, Any]]]]]:
        """(start inserts, end inserts) of one run with fresh ids; the run row is inserted ``running`` and
        updated at the end, as the host does."""
        n = next(self._n)
        rid, conv = f"run-h{n}", f"conv-h{n}"
        seqs = itertools.count(1)
        item_seqs = itertools.count(1)

        def event_row(row: dict[str, Any]) -> dict[str, Any]:
            out = {k: v for k, v in row.items() if k != "id"}
            out["event_id"] = f"{row['event_id']}-h{n}"
            out["run_id"] = rid if row["run_id"] is not None else None
            out["conversation_id"] = conv
            out["seq"] = next(seqs)
            return out

        def item_row(row: dict[str, Any]) -> dict[str, Any]:
            return {
                **row,
                "item_id": f"{row['item_id']}-h{n}",
                "conversation_id": conv,
                "seq": next(item_seqs),
                "run_id": rid if row["run_id"] is not None else None,
            }

        start_events = [
            r for r in self._rows["events"] if r["event_type"] in ("message.received", "run.started")
        ]
        end_events = [r for r in self._rows["events"] if r not in start_events]
        user = [r for r in self._rows["items"] if r["role"] == "user"][:1]
        assistant = [r for r in self._rows["items"] if r["role"] == "assistant"][:1]
        run = {**self._rows["runs"][0], "run_id": rid, "conversation_id": conv, "status": "running"}
        start = [
            ("runs", [run]),
            ("events", [event_row(r) for r in start_events]),
            ("items", [item_row(r) for r in user]),
        ]
        end = [
            ("results", [{**r, "run_id": rid} for r in self._rows["results"]]),
            ("items", [item_row(r) for r in assistant]),
            ("events", [event_row(r) for r in end_events]),
            ("update", [{"run_id": rid}]),
        ]
        return start, end

    async def sa_core(self) -> None:
        from sqlalchemy import insert, update

        start, end = self._batch()
        runs = self._tables["runs"]
        for part in (start, end):
            async with self._conn.begin():
                for name, rows in part:
                    if name == "update":
                        await self._conn.execute(
                            update(runs).where(runs.c.run_id == rows[0]["run_id"]).values(status="completed")
                        )
                    elif rows:
                        await self._conn.execute(insert(self._tables[name]), rows)

    def raw_sqlite3(self) -> None:
        from agentrunner import codec

        start, end = self._batch()
        for part in (start, end):
            self._raw.execute("BEGIN")
            for name, rows in part:
                if name == "update":
                    self._raw.execute(
                        "UPDATE runs SET status = 'completed' WHERE run_id = ?", (rows[0]["run_id"],)
                    )
                    continue
                if not rows:
                    continue
                table = self._tables[name]
                columns = list(rows[0])
                sql = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
                self._raw.executemany(
                    sql,
                    [
                        tuple(codec.dumps_str(v) if isinstance(v, (dict, list)) else v for v in row.values())
                        for row in rows
                    ],
                )
            self._raw.execute("COMMIT")
