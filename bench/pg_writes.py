"""PostgreSQL writes of a run (issue 16): one statement per transaction, next to raw asyncpg and the old path.

Run: ``AGENTRUNNER_TEST_PG_URL=postgresql+asyncpg://… uv run python -m bench --module bench.pg_writes`` (not a
registered suite: it needs a server). It works in a fresh schema migrated by the project's migrations, so
the same tables, indexes, FTS index and ``NOTIFY`` trigger as production; the schema is dropped afterwards.

* **subject**: a persisted 52-result run through ``HostStores`` — ``runs.start`` (run row, the triggering
  event, ``run.started``, the user item) then ``runs.finish`` (52 results, the assistant item,
  ``run.completed``, the outcome) — which PostgreSQL writes as one statement per transaction, each in one
  round trip;
* **floor**: the very statements the subject sent (recorded once from a template run: same SQL text, same
  arrays) executed by raw asyncpg on a held connection in autocommit, their ids made fresh per run by
  replacing the template run id in every text value — the same rows in the same two transactions, with no
  SQLAlchemy, pool or store code. Goal ≤ 1.5× (perf-floors row 6: SQLAlchemy async Core ÷ asyncpg for 52
  rows executemany is 1.37–1.52×);
* **reference**: the same run through the multi-statement path (one round trip per statement plus
  ``BEGIN``/``COMMIT``, what PostgreSQL ran before), next to the one-statement path as its floor: the
  ratio is the old cost over the new.

Round trips per run (statements, ``BEGIN``s and ``COMMIT``s on each path) are counted on a template run at
set-up and printed above the table; the table's rows are timings.
"""

from __future__ import annotations

import importlib
import itertools
import os
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._framework import Goal, Measure, SuiteContext

__all__ = ["measures"]

_TEMPLATE = "tpl-run-0000"


def _never(_batch: object) -> bool:
    return False


def measures(ctx: SuiteContext) -> list[Measure]:
    import asyncpg
    import asyncpg.transaction
    from agentrunner_host.access import ConversationKey
    from agentrunner_host.stores import (
        EventEntry,
        HostStores,
        ResultRecord,
        RunFinish,
        RunStart,
        TranscriptEntry,
    )
    from agentrunner_host.stores.engine import create_engine, upgrade
    from sqlalchemy import event, make_url, text

    url = os.environ.get("AGENTRUNNER_TEST_PG_URL")
    if not url:
        raise RuntimeError("set AGENTRUNNER_TEST_PG_URL to a postgresql+asyncpg:// URL")
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(url)

    async def create_schema() -> None:
        async with admin.begin() as conn:
            await conn.execute(text(f'CREATE SCHEMA "{schema}"'))

    async def drop_schema() -> None:
        async with admin.begin() as conn:
            await conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        await admin.dispose()

    ctx.run(create_schema())
    ctx.add_cleanup(drop_schema)
    engine = create_engine(url, connect_args={"server_settings": {"search_path": schema}})
    ctx.run(upgrade(engine))
    stores: HostStores = ctx.run(
        HostStores.open(engine, data_dir=Path(tempfile.mkdtemp(prefix="agentrunner-pg-")))
    )

    async def close_stores() -> None:
        await stores.aclose()
        await engine.dispose()

    ctx.add_cleanup(close_stores)
    conversation = ConversationKey("conv-bench", workspace_id="ws")
    payloads: list[dict[str, Any]] = [
        {"type": "message.delta", "sequence": n, "data": {"chunk": "tok "}} for n in range(1, 51)
    ]
    payloads.append({"type": "message.completed", "data": {"message": {"content": "tok " * 50}}})
    payloads.append({"type": "run.completed", "data": {}})

    def host_record(run_id: str, kind: str) -> EventEntry:
        return EventEntry(
            event_id=f"{kind}:{run_id}",
            event_type=kind,
            source="host",
            kind="host",
            conversation_id=conversation.conversation_id,
            run_id=run_id,
            runner_id="bench/x:y",
            data={"snapshot_hash": "sha256:0"},
        )

    async def persisted_run(run_id: str) -> None:
        await stores.runs.start(
            RunStart(
                run_id=run_id,
                runner_id="bench/x:y",
                plugin_id="bench/x",
                binding_id="b",
                event_id=f"ev-{run_id}",
                conversation=conversation,
                snapshot={"grants": ["history.page"]},
                snapshot_hash="sha256:0",
                deadline_at=None,
                started_at=1,
                user_turn=TranscriptEntry(
                    item_id=f"u-{run_id}", conversation=conversation, role="user", content="hello there"
                ),
                event=EventEntry(
                    event_id=f"ev-{run_id}",
                    event_type="message.received",
                    source="bench",
                    conversation_id=conversation.conversation_id,
                    summary="hello there",
                ),
                start_events=[host_record(run_id, "run.started")],
            )
        )
        await stores.runs.finish(
            RunFinish(
                run_id=run_id,
                status="completed",
                ended_at=2,
                results=[
                    ResultRecord(
                        run_id=run_id,
                        host_seq=n,
                        runner_sequence=n,
                        type=p["type"],
                        payload={"run_id": run_id, **p},
                        created_at=2,
                    )
                    for n, p in enumerate(payloads, start=1)
                ],
                transcript=[
                    TranscriptEntry(
                        item_id=f"a-{run_id}",
                        conversation=conversation,
                        role="assistant",
                        run_id=run_id,
                        content="tok " * 50,
                    )
                ],
                events=[host_record(run_id, "run.completed")],
            )
        )

    # the template run: record what the one-statement path sends, and count round trips on both paths
    recorded: list[tuple[str, tuple[Any, ...]]] = []
    begins: list[int] = []

    def on_statement(_c: object, _cur: object, statement: str, parameters: Any, *_: object) -> None:
        recorded.append((statement, tuple(parameters)))

    original_start: Any = asyncpg.transaction.Transaction.start

    async def counting_start(self: Any) -> None:
        begins.append(1)
        await original_start(self)

    pg_batch: Any = importlib.import_module("agentrunner_host.stores._pg_batch")
    covers: Callable[[Any], bool] = pg_batch.covers

    def multi_statement(run: Callable[[str], Any]) -> Callable[[str], Any]:
        async def patched(run_id: str) -> None:
            # the old path, exactly: every batch is declared not covered by the one statement
            pg_batch.covers = _never
            try:
                await run(run_id)
            finally:
                pg_batch.covers = covers

        return patched

    counts: dict[str, tuple[int, int]] = {}
    template: list[tuple[str, tuple[Any, ...]]] = []
    for name, run in (("one statement", persisted_run), ("multi-statement", multi_statement(persisted_run))):
        recorded.clear()
        begins.clear()
        event.listen(engine.sync_engine, "before_cursor_execute", on_statement)
        asyncpg.transaction.Transaction.start = counting_start
        try:
            ctx.run(run(_TEMPLATE if name == "one statement" else "tpl-multi"))
        finally:
            asyncpg.transaction.Transaction.start = original_start
            event.remove(engine.sync_engine, "before_cursor_execute", on_statement)
        counts[name] = (len(recorded), len(begins))
        if name == "one statement":
            template = list(recorded)
    print(
        "round trips per persisted run (statements + BEGIN + COMMIT): one statement "
        f"{counts['one statement'][0]} + {counts['one statement'][1]} + {counts['one statement'][1]}, "
        f"multi-statement {counts['multi-statement'][0]} + {counts['multi-statement'][1]} "
        f"+ {counts['multi-statement'][1]}",
        flush=True,
    )

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    raw: asyncpg.Connection = ctx.run(asyncpg.connect(dsn, server_settings={"search_path": schema}))
    ctx.add_cleanup(raw.close)
    prepared = [ctx.run(raw.prepare(sql)) for sql, _ in template]

    def fresh(value: Any, run_id: str) -> Any:
        if isinstance(value, str):
            return value.replace(_TEMPLATE, run_id)
        if isinstance(value, list):
            return [fresh(v, run_id) for v in value]
        return value

    counter = itertools.count()

    async def subject() -> None:
        await persisted_run(f"run-{next(counter):08d}")

    async def floor() -> None:
        run_id = f"flr-{next(counter):08d}"
        for statement, (_, parameters) in zip(prepared, template, strict=True):
            await statement.fetch(*(fresh(p, run_id) for p in parameters))

    async def old_path() -> None:
        await multi_statement(persisted_run)(f"old-{next(counter):08d}")

    return [
        Measure(
            "PostgreSQL: persist a 52-result run (start + finish), one statement per transaction",
            subject,
            floor=floor,
            floor_name="raw asyncpg, held connection, autocommit: the same two statements and arrays",
            goal=Goal.ratio(1.5, source="perf-floors row 6: SA async Core ÷ asyncpg, 52 rows"),
            unit="µs/run",
        ),
        Measure(
            "PostgreSQL: the same run through the multi-statement path (before)",
            old_path,
            floor=subject,
            floor_name="the one-statement path (the ratio is old ÷ new)",
            unit="µs/run",
        ),
    ]
