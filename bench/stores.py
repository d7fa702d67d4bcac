"""Stores suite: what persisting a run and paging history cost (issue 4; perf-floors rows I–L).

* A persisted 52-result run through ``HostStores`` — ``runs.start`` (run row, ``run.started`` record, user
  item) then ``runs.finish`` (52 results, assistant item, ``run.completed`` record, outcome) — next to a
  SQLAlchemy Core floor writing the same rows in one transaction per run with no reads (row I). Goal ≤ 1.5×.
* The same rows committed one result at a time, the reference implementation's pattern, to show the gap.
* 20 such runs at once next to the same 20 one after another: concurrent starts and finishes share
  transactions on the single SQLite writer (group commit). Goal: at least 2× the serial throughput.
* ``history.page`` (50 items) through ``PullAPI`` at 10k / 100k / 1M transcript rows (1M only in full mode;
  quick mode uses 1k / 10k) next to the raw keyset query (``text()`` SQL on a held SQLAlchemy connection,
  rows as tuples) on the same database (row L). Goals ≤ 1.5× the floor, and the largest size ≤ 1.3× the
  smallest (keyset paging must not grow with the table).
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from ._framework import Goal, Measure, SuiteContext

__all__ = ["measures"]

RESULTS_PER_RUN = 52
CONCURRENT = 20
PAGE = 50


def _fill_transcript(path: Path, rows: int, conversations: int) -> None:
    """Write *rows* transcript items spread over *conversations* with plain sqlite3 (set-up, not timed)."""
    per = rows // conversations
    contents = "[]"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=OFF")
        # paging is measured here, not search: skip filling the full-text index (1M rows would take minutes)
        db.execute("DROP TRIGGER IF EXISTS transcript_items_fts")

        def generate() -> Any:
            for c in range(conversations):
                for seq in range(1, per + 1):
                    yield (
                        f"conv-{c}",
                        "",
                        seq,
                        f"it-{c}-{seq}",
                        "user" if seq % 2 else "assistant",
                        "message",
                        f"message number {seq} of conversation {c}, a few words long",
                        contents,
                        contents,
                        "{}",
                        1_700_000_000_000 + seq,
                    )

        db.executemany(
            "INSERT INTO transcript_items (conversation_id, thread_id, seq, item_id, role, item_type, content, "
            "contents, artifacts, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            generate(),
        )
        db.executemany(
            "INSERT INTO sequence_counters (stream, conversation_id, thread_id, last_seq) VALUES (?, ?, ?, ?)",
            [("transcript", f"conv-{c}", "", per) for c in range(conversations)],
        )
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def measures(ctx: SuiteContext) -> list[Measure]:
    from agentrunner.actions import HistoryPageParams
    from agentrunner_host.access import ConversationKey, RunAccess
    from agentrunner_host.facts_api import PullAPI
    from agentrunner_host.stores import (
        EventEntry,
        HostStores,
        ResultRecord,
        RunFinish,
        RunStart,
        TranscriptEntry,
    )
    from agentrunner_host.stores.engine import DATABASE_FILE_NAME, create_engine, default_sqlite_url, upgrade
    from agentrunner_host.stores.records import EVENTS, ITEMS
    from agentrunner_host.stores.runs import RESULTS, RUNS
    from sqlalchemy import insert, text
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

    tmp = Path(tempfile.mkdtemp(prefix="agentrunner-bench-stores-"))
    engines: list[AsyncEngine] = []
    opened: list[HostStores] = []
    held: list[AsyncConnection] = []

    template = tmp / "template"
    template.mkdir()
    migrator = create_engine(default_sqlite_url(template))
    ctx.run(upgrade(migrator))
    ctx.run(migrator.dispose())

    def new_engine(name: str) -> AsyncEngine:
        # a copy of one migrated file: migrating each database would dominate --quick
        directory = tmp / name
        directory.mkdir()
        shutil.copyfile(template / DATABASE_FILE_NAME, directory / DATABASE_FILE_NAME)
        engine = create_engine(default_sqlite_url(directory))
        engines.append(engine)
        return engine

    async def close() -> None:
        for connection in held:
            await connection.close()
        for stores in opened:
            await stores.aclose()
        for engine in engines:
            await engine.dispose()
        shutil.rmtree(tmp, ignore_errors=True)

    ctx.add_cleanup(close)

    # -- a persisted run ----------------------------------------------------------------------------------
    counter = itertools.count()
    conversation = ConversationKey("conv-bench", workspace_id="ws")
    run_engine = new_engine("runs")
    stores: HostStores = ctx.run(HostStores.open(run_engine, data_dir=tmp / "runs"))
    opened.append(stores)
    payloads: list[dict[str, Any]] = [
        {"run_id": "r", "type": "message.delta", "sequence": n, "data": {"chunk": "tok "}}
        for n in range(1, 51)
    ]
    payloads.append(
        {"run_id": "r", "type": "message.completed", "data": {"message": {"content": "tok " * 50}}}
    )
    payloads.append({"run_id": "r", "type": "run.completed", "data": {}})

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

    async def persisted_run() -> None:
        run_id = f"run-{next(counter)}"
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
                        run_id=run_id, host_seq=n, runner_sequence=n, type=p["type"], payload=p, created_at=2
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

    floor_engine = new_engine("floor")
    floor_seq = itertools.count(1)

    def floor_rows(
        run_id: str,
    ) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        run = {
            "run_id": run_id,
            "runner_id": "bench/x:y",
            "plugin_id": "bench/x",
            "binding_id": "b",
            "event_id": f"ev-{run_id}",
            "conversation_id": "conv-bench",
            "status": "completed",
            "snapshot": {"grants": ["history.page"]},
            "snapshot_hash": "sha256:0",
            "started_at": 1,
            "ended_at": 2,
            "usage": {},
        }
        results = [
            {
                "run_id": run_id,
                "host_seq": n,
                "runner_sequence": n,
                "type": p["type"],
                "payload": p,
                "created_at": 2,
            }
            for n, p in enumerate(payloads, start=1)
        ]
        events = [
            {
                "event_id": f"{kind}:{run_id}",
                "event_type": kind,
                "source": "host",
                "kind": "host",
                "conversation_id": "conv-bench",
                "thread_id": "",
                "seq": next(floor_seq),
                "run_id": run_id,
                "data": {"snapshot_hash": "sha256:0"},
                "created_at": 2,
            }
            for kind in ("run.started", "run.completed")
        ]
        items = [
            {
                "conversation_id": "conv-bench",
                "thread_id": "",
                "seq": next(floor_seq),
                "item_id": f"{role}-{run_id}",
                "role": role,
                "item_type": "message",
                "content": content,
                "contents": [],
                "artifacts": [],
                "metadata": {},
                "created_at": 2,
            }
            for role, content in (("user", "hello there"), ("assistant", "tok " * 50))
        ]
        return run, results, events, items

    async def floor_one_transaction() -> None:
        run, results, events, items = floor_rows(f"floor-{next(counter)}")
        async with floor_engine.begin() as conn:
            await conn.execute(insert(RUNS).values(run))
            await conn.execute(insert(RESULTS), results)
            await conn.execute(insert(EVENTS), events)
            await conn.execute(insert(ITEMS), items)

    async def commit_per_result() -> None:
        run, results, events, items = floor_rows(f"percommit-{next(counter)}")
        async with floor_engine.begin() as conn:
            await conn.execute(insert(RUNS).values(run))
        for row in results:
            async with floor_engine.begin() as conn:
                await conn.execute(insert(RESULTS).values(row))
        async with floor_engine.begin() as conn:
            await conn.execute(insert(EVENTS), events)
        async with floor_engine.begin() as conn:
            await conn.execute(insert(ITEMS), items)

    async def concurrent_runs() -> None:
        await asyncio.gather(*(persisted_run() for _ in range(CONCURRENT)))

    async def serial_runs() -> None:
        for _ in range(CONCURRENT):
            await persisted_run()

    rows: list[Measure] = [
        Measure(
            "stores: persist a 52-result run (start + finish)",
            persisted_run,
            floor=floor_one_transaction,
            floor_name="SQLAlchemy Core, one transaction per run, the same rows (run, 52 results, 2 records, "
            "2 items), no reads (row I)",
            goal=Goal.ratio(1.5, source="issue 4; perf-floors row I"),
            unit="µs/run",
        ),
        Measure(
            "stores: the same run, one commit per result (reference pattern)",
            commit_per_result,
            floor=floor_one_transaction,
            floor_name="SQLAlchemy Core, one transaction per run, the same rows (run, 52 results, 2 records, "
            "2 items), no reads (row I)",
            unit="µs/run",
        ),
        Measure(
            f"stores: {CONCURRENT} concurrent persisted runs, per run (group commit)",
            concurrent_runs,
            floor=serial_runs,
            floor_name=f"the same {CONCURRENT} runs one after another (ratio < 0.5 means ≥ 2× throughput)",
            goal=Goal.ratio(
                0.5, source="issue 4: concurrent runs share transactions on the one SQLite writer"
            ),
            unit="µs/run",
            per=CONCURRENT,
        ),
    ]

    # -- history.page at growing table sizes ---------------------------------------------------------------
    sizes = (
        [(1_000, "1k"), (10_000, "10k")]
        if ctx.quick
        else [(10_000, "10k"), (100_000, "100k"), (1_000_000, "1M")]
    )
    per_conversation = sizes[0][0]
    pages: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {}
    for size, label in sizes:
        engine = new_engine(f"history-{label}")
        _fill_transcript(tmp / f"history-{label}" / "agentrunner.db", size, size // per_conversation)
        page_stores: HostStores = ctx.run(HostStores.open(engine, data_dir=tmp / f"history-{label}"))
        opened.append(page_stores)
        pull = PullAPI(page_stores, cursor_key=b"bench-cursor-key-0123456789abcdef")
        target = ConversationKey(f"conv-{size // per_conversation - 1}")
        access = RunAccess(
            run_id="r",
            runner_id="bench/x:y",
            plugin_id="bench/x",
            binding_id="b",
            event_id="e",
            conversation=target,
        )
        # walk back from positions spread over the conversation, so pages are not all the newest one
        cursors = [
            pull.history_cursor(target, 2 * (per_conversation - k * (per_conversation // 16)))
            for k in range(16)
        ]
        positions = [per_conversation - k * (per_conversation // 16) for k in range(16)]
        cycle = itertools.count()
        raw_cycle = itertools.count()

        def make_page(
            pull: PullAPI = pull, access: RunAccess = access, cursors: list[str] = cursors, cycle: Any = cycle
        ) -> Callable[[], Coroutine[Any, Any, None]]:
            async def page() -> None:
                cursor = cursors[next(cycle) % len(cursors)]
                result = await pull.history_page(access, HistoryPageParams(before_cursor=cursor, limit=PAGE))
                assert len(result.items) == PAGE

            return page

        connection: AsyncConnection = ctx.run(engine.connect())
        held.append(connection)
        keyset = text(
            "SELECT * FROM transcript_items WHERE conversation_id = :c AND thread_id = '' AND seq < :s "
            "ORDER BY seq DESC LIMIT :n"
        )

        def make_raw(
            connection: AsyncConnection = connection,
            target: ConversationKey = target,
            positions: list[int] = positions,
            raw_cycle: Any = raw_cycle,
            keyset: Any = keyset,
        ) -> Callable[[], Coroutine[Any, Any, None]]:
            async def raw() -> None:
                before = positions[next(raw_cycle) % len(positions)]
                result = await connection.execute(
                    keyset, {"c": target.conversation_id, "s": before, "n": PAGE + 1}
                )
                assert len(result.all()) == PAGE + 1

            return raw

        pages[label] = make_page()
        rows.append(
            Measure(
                f"stores: history.page via PullAPI, {label} rows",
                pages[label],
                floor=make_raw(),
                floor_name="the keyset SELECT as text() SQL on a held SQLAlchemy connection, rows as tuples (row L)",
                goal=Goal.ratio(1.5, source="issue 4; perf-floors row L"),
                unit="µs/page",
            )
        )
    smallest, largest = sizes[0][1], sizes[-1][1]
    rows.append(
        Measure(
            f"stores: history.page {largest} ÷ {smallest} rows",
            pages[largest],
            floor=pages[smallest],
            floor_name=f"history.page via PullAPI on the {smallest}-row table",
            goal=Goal.ratio(1.3, source="issue 4: keyset paging does not grow with the table"),
            unit="µs/page",
        )
    )
    return rows
