"""Cost growth: per-run cost and ``history.page`` latency as the transcript grows (issue 8).

Run: ``uv run --with matplotlib python -m bench.growth [--quick]``. For each table size (10k / 100k / 1M
transcript rows; ``--quick``: 1k / 10k) it builds a SQLite database, then measures, on that database:

* a persisted in-process run through the host (52 results, the ``host`` suite's runner) in a conversation
  of the table, median over repeats;
* ``history.page`` (50 items) through ``PullAPI`` from cursors spread over that conversation.

It prints a table and writes ``bench/growth.png`` (log-scale x). Keyset paging and per-run writes must stay
flat as the table grows: the ratio of the largest to the smallest size is printed next to each series.
matplotlib is only needed for the picture, so it is not a project dependency (``--with`` brings it).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from .host_runs import BenchEchoRunner
from .stores import _fill_transcript

PAGE = 50
OUT = Path(__file__).parent / "growth.png"


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
        _fill_transcript(directory / "agentrunner.db", rows, max(1, rows // per_conversation))
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

        self.one_run = one_run
        self.one_page = one_page
        for _ in range(5):  # warm up both paths
            await one_run()
            await one_page()

    async def close(self) -> None:
        await self.host.aclose()
        await self.stores.aclose()
        await self.engine.dispose()


async def _measure(sizes: list[int], repeats: int) -> tuple[list[float], list[float]]:
    """Every size's database is built first; then each repeat measures every size in turn (interleaved)."""
    subjects: list[_Subject] = []
    for size in sizes:
        subject = _Subject()
        await subject.open(size, sizes[0])
        subjects.append(subject)
    runs: list[list[float]] = [[] for _ in sizes]
    pages: list[list[float]] = [[] for _ in sizes]
    for _ in range(repeats):
        for index, subject in enumerate(subjects):
            started = time.perf_counter()
            for _ in range(10):
                await subject.one_run()
            runs[index].append((time.perf_counter() - started) / 10 * 1e6)
            started = time.perf_counter()
            for _ in range(50):
                await subject.one_page()
            pages[index].append((time.perf_counter() - started) / 50 * 1e6)
    for subject in subjects:
        await subject.close()
    return [statistics.median(r) for r in runs], [statistics.median(p) for p in pages]


def _plot(sizes: list[int], runs: list[float], pages: list[float]) -> None:
    # imported by name: matplotlib is not a project dependency, so the type checker does not see it
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")

    figure, axis = plt.subplots(figsize=(7, 4))
    axis.plot(sizes, [r / 1000 for r in runs], marker="o", label="persisted run, 52 results (ms)")
    axis.plot(sizes, [p / 1000 for p in pages], marker="s", label="history.page, 50 items (ms)")
    axis.set_xscale("log")
    axis.set_xlabel("transcript rows in the database")
    axis.set_ylabel("median latency (ms)")
    axis.set_ylim(bottom=0)
    axis.set_title("agentrunner: cost as the transcript grows (SQLite, one host process)")
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
    runs, pages = asyncio.run(_measure(sizes, args.repeats))
    print("| transcript rows | persisted run (µs) | history.page (µs) |")
    print("|---:|---:|---:|")
    for size, run_us, page_us in zip(sizes, runs, pages, strict=True):
        print(f"| {size:,} | {run_us:.0f} | {page_us:.0f} |")
    print(f"| largest ÷ smallest | {runs[-1] / runs[0]:.2f}x | {pages[-1] / pages[0]:.2f}x |")
    try:
        _plot(sizes, runs, pages)
    except ImportError:
        print("matplotlib is not installed: run with `uv run --with matplotlib python -m bench.growth`")
    else:
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
