"""A benchmark suite whose operation raises, for the framework's smoke test (run with ``--module``)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

_bench: Any = importlib.import_module("bench")


def _fail() -> None:
    raise RuntimeError("boom from the broken suite")


def measures(ctx: Any) -> list[Any]:
    """One row that cannot be measured, and a cleanup that must still run."""

    def cleanup() -> None:
        with Path(os.environ["BENCH_FAKE_MARKER"]).open("a", encoding="utf-8") as marker:
            marker.write("broken suite cleanup\n")

    ctx.add_cleanup(cleanup)
    return [_bench.Measure("broken: raises", _fail)]
