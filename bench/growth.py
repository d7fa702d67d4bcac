"""Cost growth: per-run cost, ``history.page`` and a run's replay as every table a run writes grows (issues 8, 16).

Run: ``uv run --with matplotlib python -m bench.growth [--quick]``. For each size (10k / 100k / 1M transcript
rows; ``--quick``: 1k / 10k) it builds a SQLite database with the migrations and fills **every table a run
writes**, in the proportions an echo run leaves them (per past run: one ``runs`` row, three ``events`` — the
trigger, ``run.started``, ``run.completed`` —, two transcript items, four ``run_results``; one state entry
per conversation; the ``sequence_counters`` rows), with the migrations' FTS trigger kept: every transcript
item is indexed in ``transcript_fts`` as a real insert is. At 1M transcript rows that is 500k runs, 1.5M
events, 2M results and 1M indexed items. Conversations hold 10k items (``--quick``: 1k) at every size, so
what grows is the tables, not the conversation that is read. Then, on that database:

* a persisted in-process run through the host (52 results, the ``host`` suite's runner) in a conversation
  of the table;
* ``history.page`` (50 items) through ``PullAPI`` from cursors spread over that conversation;
* the replay of a stored run's results (``runs.results_after``, 50 rows) from runs spread over the table.

Sizes are interleaved per repeat; medians are printed with the largest ÷ smallest ratio of each series
(goal: flat, ≤ 1.3×), and ``bench/growth.png`` is written (log-scale x). matplotlib is only needed for the
picture, so it is not a project dependency (``--with`` brings it).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .host_runs import BenchEchoRunner

PAGE = 50
OUT = Path(__file__).parent / "growth.png"


def _fill(path: Path, rows: int, per_conversation: int) -> None:
    """Fill every growing table for *rows* transcript items (set-up with plain sqlite3, not timed)."""
    conversations = max(1, rows // per_conversation)
    runs_per = per_conversation // 2
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=OFF")

        def items() -> Iterator[tuple[Any, ...]]:
            for c in range(conversations):
                for seq in range(1, per_conversation + 1):
                    run = (seq - 1) // 2
                    yield (
                        f"conv-{c}",
                        "",
                        seq,
                        f"it-{c}-{seq}",
                        "user" if seq % 2 else "assistant",
                        "message",
                        f"run-{c}-{run}",
                        f"message number {seq} of conversation {c}, a few words long",
                        "[]",
                        "[]",
                        "{}",
                        _T0 + seq,
                    )

        db.executemany(
            "INSERT INTO transcript_items (conversation_id, thread_id, seq, item_id, role, item_type, run_id, "
            "content, contents, artifacts, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            items(),
        )

        def runs() -> Iterator[tuple[Any, ...]]:
            for c in range(conversations):
                for k in range(runs_per):
                    yield (
                        f"run-{c}-{k}",
                        "plugin:bench/host/default",
                        "bench/host",
                        "growth",
                        f"ev-{c}-{k}",
                        f"conv-{c}",
                        "",
                        None,
                        "completed",
                        '{"grants":["history.page"]}',
                        "sha256:growth",
                        _T0 + k,
                        _T0 + k + 1,
                        "{}",
                    )

        db.executemany(
            "INSERT INTO runs (run_id, runner_id, plugin_id, binding_id, event_id, conversation_id, thread_id, "
            "workspace_id, status, snapshot, snapshot_hash, started_at, ended_at, usage) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            runs(),
        )

        def events() -> Iterator[tuple[Any, ...]]:
            kinds = (("message.received", "event", "ev"), ("run.started", "host", "started"))
            kinds += (("run.completed", "host", "completed"),)
            for c in range(conversations):
                for k in range(runs_per):
                    for n, (event_type, kind, prefix) in enumerate(kinds):
                        event_id = f"ev-{c}-{k}" if prefix == "ev" else f"{prefix}:run-{c}-{k}"
                        yield (
                            event_id,
                            event_type,
                            "bench",
                            kind,
                            f"conv-{c}",
                            "",
                            3 * k + n + 1,
                            f"run-{c}-{k}",
                            "hello",
                            "{}",
                            _T0 + k,
                        )

        db.executemany(
            "INSERT INTO events (event_id, event_type, source, kind, conversation_id, thread_id, seq, run_id, "
            "summary, data, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            events(),
        )

        def results() -> Iterator[tuple[Any, ...]]:
            types = ("state.updated", "message.delta", "message.completed", "run.completed")
            for c in range(conversations):
                for k in range(runs_per):
                    run_id = f"run-{c}-{k}"
                    for n, kind in enumerate(types, start=1):
                        payload = f'{{"run_id":"{run_id}","type":"{kind}","data":{{"text":"hello"}}}}'
                        yield (run_id, n, n, kind, payload, _T0 + k)

        db.executemany(
            "INSERT INTO run_results (run_id, host_seq, runner_sequence, type, payload, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            results(),
        )
        db.executemany(
            "INSERT INTO state_entries (owner_hash, key, scope, owner, value, size, version, runner_id, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    f"{c:064x}",
                    "echo.turns",
                    "conversation",
                    f'["conversation","conv-{c}"]',
                    str(runs_per),
                    4,
                    runs_per,
                    "plugin:bench/host/default",
                    _T0,
                    _T0 + runs_per,
                )
                for c in range(conversations)
            ),
        )
        db.executemany(
            "INSERT INTO sequence_counters (stream, conversation_id, thread_id, last_seq) VALUES (?, ?, ?, ?)",
            [
                *(("transcript", f"conv-{c}", "", per_conversation) for c in range(conversations)),
                *(("event", f"conv-{c}", "", 3 * runs_per) for c in range(conversations)),
            ],
        )
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        counts = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in _GROWING}
    print(f"filled {rows:,}: " + ", ".join(f"{t} {n:,}" for t, n in counts.items()), flush=True)


_T0 = 1_700_000_000_000
_GROWING = ("runs", "events", "transcript_items", "transcript_fts", "run_results", "state_entries")


class _Subject:
    """One database of a given size with a host on it; the two operations the table compares."""

    async def open(self, rows: int, per_conversation: int) -> None:
        from agentrunner.actions import HistoryPageParams
        from agentrunner_host.access import ConversationKey, RunAccess
        from agentrunner_host.definitions import AgentBinding, AgentEventEnvelope
        from agentrunner_host.facts_api import PullAPI
        from agentrunner_host.host import Host
        from agentrunner_host.stores import HostStores
        from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade

        directory = Path(tempfile.mkdtemp(prefix=f"agentrunner-growth-{rows}-"))
        engine = create_engine(default_sqlite_url(directory))
        await upgrade(engine)
        await engine.dispose()
        _fill(directory / "agentrunner.db", rows, per_conversation)
        self.engine = create_engine(default_sqlite_url(directory))
        self.stores = await HostStores.open(self.engine, data_dir=directory)
        pull = PullAPI(self.stores, cursor_key=b"growth-cursor-key-0123456789abcdef")
        target = ConversationKey("conv-0")
        access = RunAccess(
            run_id="r",
            runner_id="bench/x:y",
            plugin_id="bench/x",
            binding_id="b",
            event_id="e",
            conversation=target,
        )
        cursors = [
            pull.history_cursor(target, 2 * (per_conversation - k * (per_conversation // 16)))
            for k in range(16)
        ]
        binding = AgentBinding(binding_id="growth", runner_id="plugin:bench/host/default", event_types=["*"])
        self.host = Host.create(
            plugins={"bench/host": [BenchEchoRunner()]}, bindings=[binding], stores=self.stores
        )
        counter = itertools.count()
        pages = itertools.count()

        async def one_run() -> None:
            event = AgentEventEnvelope.model_validate(
                {
                    "event_id": f"g-{next(counter)}",
                    "event_type": "message.received",
                    "conversation_id": "conv-0",
                    "input": {"text": "hello"},
                    "delivery": {"surface": "bench", "supports_streaming": True},
                }
            )
            handle = await self.host.orchestrator.submit(event)
            async for _ in handle.results():
                pass

        async def one_page() -> None:
            cursor = cursors[next(pages) % len(cursors)]
            await pull.history_page(access, HistoryPageParams(before_cursor=cursor, limit=PAGE))

        conversations = max(1, rows // per_conversation)
        stored_runs = [
            f"run-{(k * 7919) % conversations}-{(k * 104729) % (per_conversation // 2)}" for k in range(64)
        ]
        replays = itertools.count()

        async def one_replay() -> None:
            run_id = stored_runs[next(replays) % len(stored_runs)]
            if not await self.stores.runs.results_after(run_id, after_host_seq=0, limit=PAGE):
                raise RuntimeError(f"no stored results for {run_id}")

        self.one_run = one_run
        self.one_page = one_page
        self.one_replay = one_replay
        for _ in range(5):  # warm up every path
            await one_run()
            await one_page()
            await one_replay()

    async def close(self) -> None:
        await self.host.aclose()
        await self.stores.aclose()
        await self.engine.dispose()


async def _measure(
    sizes: list[int], repeats: int
) -> tuple[list[list[tuple[float, ...]]], list[float], list[float], list[float]]:
    """Every size's database is built first; then each repeat measures every size in turn (interleaved); the
    first value is, per series, each repeat's samples of every size."""
    subjects: list[_Subject] = []
    for size in sizes:
        subject = _Subject()
        await subject.open(size, sizes[0])
        subjects.append(subject)
    runs: list[list[float]] = [[] for _ in sizes]
    pages: list[list[float]] = [[] for _ in sizes]
    replays: list[list[float]] = [[] for _ in sizes]
    for repeat in range(repeats):
        # the order of the sizes rotates per repeat: a position effect (the first database of a repeat paying
        # for a wake-up, a burst of load) then falls on each size in turn instead of always on the smallest
        order = [(repeat + k) % len(subjects) for k in range(len(subjects))]
        for index in order:
            subject = subjects[index]
            started = time.perf_counter()
            for _ in range(10):
                await subject.one_run()
            runs[index].append((time.perf_counter() - started) / 10 * 1e6)
            started = time.perf_counter()
            for _ in range(50):
                await subject.one_page()
            pages[index].append((time.perf_counter() - started) / 50 * 1e6)
            started = time.perf_counter()
            for _ in range(50):
                await subject.one_replay()
            replays[index].append((time.perf_counter() - started) / 50 * 1e6)
    for subject in subjects:
        await subject.close()
    return (
        [list(zip(*series, strict=True)) for series in (runs, pages, replays)],
        [statistics.median(r) for r in runs],
        [statistics.median(p) for p in pages],
        [statistics.median(r) for r in replays],
    )


def _plot(sizes: list[int], runs: list[float], pages: list[float], replays: list[float]) -> None:
    # imported by name: matplotlib is not a project dependency, so the type checker does not see it
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")

    figure, axis = plt.subplots(figsize=(7, 4))
    axis.plot(sizes, [r / 1000 for r in runs], marker="o", label="persisted run, 52 results (ms)")
    axis.plot(sizes, [p / 1000 for p in pages], marker="s", label="history.page, 50 items (ms)")
    axis.plot(sizes, [r / 1000 for r in replays], marker="^", label="replay of a stored run's results (ms)")
    axis.set_xscale("log")
    axis.set_xlabel("transcript rows in the database (every run table grows with them)")
    axis.set_ylabel("median latency (ms)")
    axis.set_ylim(bottom=0)
    axis.set_title("agentrunner: cost as the database grows (SQLite, FTS on, one host process)")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(OUT, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description="per-run cost and history.page latency vs table size")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    sizes = [1_000, 10_000] if args.quick else [10_000, 100_000, 1_000_000]
    print("load average at start: " + " / ".join(f"{v:.2f}" for v in os.getloadavg()), flush=True)
    ratios, runs, pages, replays = asyncio.run(_measure(sizes, args.repeats))
    print(
        "| transcript rows | persisted run, 52 results (µs) | history.page, 50 items (µs) | replay, 50 results (µs) |"
    )
    print("|---:|---:|---:|---:|")
    for size, run_us, page_us, replay_us in zip(sizes, runs, pages, replays, strict=True):
        print(f"| {size:,} | {run_us:.0f} | {page_us:.0f} | {replay_us:.0f} |")
    print(
        f"| largest ÷ smallest (ratio of the medians) | {runs[-1] / runs[0]:.2f}x | {pages[-1] / pages[0]:.2f}x "
        f"| {replays[-1] / replays[0]:.2f}x |"
    )
    print(
        "| largest ÷ smallest (median of the per-repeat ratios) | "
        + " | ".join(f"{statistics.median(s[-1] / s[0] for s in series):.2f}x" for series in ratios)
        + " |"
    )
    print("load average at end: " + " / ".join(f"{v:.2f}" for v in os.getloadavg()))
    try:
        _plot(sizes, runs, pages, replays)
    except ImportError:
        print("matplotlib is not installed: run with `uv run --with matplotlib python -m bench.growth`")
    else:
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
