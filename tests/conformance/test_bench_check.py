"""The whole-check timings quoted in docs/conformance.md come from bench/conformance_check.py: it must run and
print its rows (the figures themselves are recorded in bench/RESULTS.md, never asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_whole_check_bench_prints_a_row_per_runner_and_profile() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.conformance_check", "--profile", "smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "| echo | smoke | **whole check** (" in done.stdout
    assert "| ignores-cancel | smoke | **whole check** (" in done.stdout
    assert "1 fail: cancel.stops-within-grace" in done.stdout
