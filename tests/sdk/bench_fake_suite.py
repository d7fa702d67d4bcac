"""A deterministic benchmark suite for the framework's smoke test (run with ``--module``)."""

from __future__ import annotations

import asyncio
import importlib
import os
from pathlib import Path
from typing import Any

# The benchmark package lives at the repository root, outside the type checker's view of the tests.
_bench: Any = importlib.import_module("bench")


def _note(line: str) -> None:
    with Path(os.environ["BENCH_FAKE_MARKER"]).open("a", encoding="utf-8") as marker:
        marker.write(line + "\n")


def measures(ctx: Any) -> list[Any]:
    """Rows whose verdicts do not depend on timing, an async operation and cleanups to run in order."""
    loop = ctx.loop

    async def on_the_suite_loop() -> None:
        assert asyncio.get_running_loop() is loop
        await asyncio.sleep(0)

    async def forever() -> None:
        await asyncio.sleep(3600)

    async def start_background_task() -> None:
        asyncio.get_running_loop().create_task(forever())  # left running on purpose: close() must cancel it

    async def async_cleanup() -> None:
        _note("async cleanup")

    ctx.run(start_background_task())
    ctx.add_cleanup(lambda: _note("sync cleanup"))
    ctx.add_cleanup(async_cleanup)
    return [
        _bench.Measure("fake: generous value goal", lambda: sum(range(10)), goal=_bench.Goal.value(1e9)),
        _bench.Measure(
            "fake: impossible ratio goal",
            lambda: sum(range(2000)),
            floor=lambda: None,
            floor_name="a call that does nothing",
            goal=_bench.Goal.ratio(1e-6),
        ),
        _bench.Measure("fake: async operation", on_the_suite_loop, unit="µs/step", per=2),
    ]
