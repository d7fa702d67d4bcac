"""PF7: host memory per in-flight run, with 1,000 concurrent runs waiting on a slow runner.

Run: ``uv run python -m bench.memory_inflight [--runs N]``. Memory is not a timing, so this is a standalone
measure (the table framework times operations); its figure goes into ``bench/RESULTS.md`` by hand.
The measured quantity is the Python heap growth (tracemalloc) while N runs are live, divided by N; the
runner instances themselves are shared, so the figure is what the host keeps per run: the snapshot, the
context, the dispatcher's live-run entry, the run task and its delivery channel.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import ClassVar

from agentrunner import (
    AgentRunAPI,
    AgentRunContext,
    AgentRunner,
    AgentRunnerManifest,
    AgentRunResult,
    I18nObject,
)

_PLUGIN = "bench/memory"
GOAL_BYTES = 64 * 1024


class SlowRunner(AgentRunner):
    """Says one thing, then waits until released."""

    manifest: ClassVar[AgentRunnerManifest] = AgentRunnerManifest(
        id=f"plugin:{_PLUGIN}/default", name="default", label=I18nObject(en_US="slow")
    )
    release: ClassVar[asyncio.Event | None] = None

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        out = self.emitter(ctx)
        yield out.message("waiting")
        assert SlowRunner.release is not None
        await SlowRunner.release.wait()
        yield out.complete()


async def measure(runs: int, *, stores: bool = False) -> float:
    from agentrunner_host.definitions import AgentBinding, AgentEventEnvelope
    from agentrunner_host.host import Host
    from agentrunner_host.stores import HostStores
    from agentrunner_host.stores.engine import create_engine, default_sqlite_url, upgrade

    SlowRunner.release = asyncio.Event()
    binding = AgentBinding(binding_id="mem", runner_id=f"plugin:{_PLUGIN}/default", event_types=["*"])
    opened: HostStores | None = None
    if stores:
        directory = Path(tempfile.mkdtemp(prefix="agentrunner-pf7-stores-"))
        engine = create_engine(default_sqlite_url(directory))
        await upgrade(engine)
        opened = await HostStores.open(engine, data_dir=directory)
    host = Host.create(plugins={_PLUGIN: [SlowRunner()]}, bindings=[binding], stores=opened)

    def ev(i: int) -> AgentEventEnvelope:
        return AgentEventEnvelope.model_validate(
            {
                "event_id": f"e{i}",
                "event_type": "message.received",
                "conversation_id": f"c{i}",
                "input": {"text": "hello"},
                "delivery": {"surface": "bench"},
            }
        )

    # Warm up validators and caches so they are not counted per run.
    warm = await (host.orchestrator.submit(ev(-1)) if stores else host.orchestrator.start(ev(-1), binding))
    await anext(warm.results())
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    handles = [
        await (host.orchestrator.submit(ev(i)) if stores else host.orchestrator.start(ev(i), binding))
        for i in range(runs)
    ]
    for h in handles:
        await anext(h.results())  # every run is live and has delivered its first result
    gc.collect()
    during = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    SlowRunner.release.set()
    for h in [warm, *handles]:
        async for _ in h.results():
            pass
    await host.aclose()
    if opened is not None:
        await opened.aclose()
        await opened.engine.dispose()
    return (during - before) / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument(
        "--stores", action="store_true", help="persist the runs to SQLite (HostStores), as serve does"
    )
    args = parser.parse_args()
    per_run = asyncio.run(measure(args.runs, stores=args.stores))
    verdict = "meets" if per_run <= GOAL_BYTES else "misses"
    print("| measure | value | goal | verdict |")
    print("|---|---:|---|---|")
    print(
        f"| host memory per in-flight run ({args.runs} concurrent, waiting"
        f"{', stored in SQLite' if args.stores else ''}) | {per_run / 1024:.1f} KiB | ≤ 64 KiB | {verdict} |"
    )


if __name__ == "__main__":
    main()
