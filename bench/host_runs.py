"""Host suite: whole runs through the orchestrator (PF1, PF2 of issue 8).

* PF1 — an in-process run of 52 results (50 deltas + message + terminal) through the host *without*
  persistence, next to the typed floor of the same work measured in the same run: validate the context dict,
  build the 52 typed results and dump each (perf-floors row D). Goal ≤ 2.5×.
* PF2 — the same run *persisted* to SQLite (WAL), next to a one-transaction-per-run SQLAlchemy Core floor that
  inserts the same 52 result rows plus a run row (perf-floors row I). Goal ≤ 1.5×. And the reference
  implementation's pattern, one commit per result, to show the gap.
* Throughput: runs per second at 1, 10 and 50 concurrent persisted runs; 50 concurrent ÷ serial ≥ 2×.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

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
    from agentrunner_host.db import create_engine, default_sqlite_url, upgrade
    from agentrunner_host.host import Host
    from agentrunner_host.models import AgentBinding, AgentEventEnvelope
    from agentrunner_host.stores import HostStores
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
