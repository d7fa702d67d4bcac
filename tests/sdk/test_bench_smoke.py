"""The benchmark runner works end to end in quick mode (its figures are never asserted on)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

EXPECTED_ROWS = [
    "| sdk | context model_validate_json (5.2 KB) |",
    "| sdk | context model_dump_json |",
    "| sdk | 52-result stream: ResultEmitter build + model_dump_json |",
    "| sdk | 52-result stream: host parse through the union |",
]


def _bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )


def test_quick_mode_of_the_sdk_suite_prints_one_table_with_its_rows(tmp_path: Path) -> None:
    """``python -m bench --quick --only sdk`` exits 0, prints the header and the four SDK rows, and writes the
    same report to ``--markdown``."""
    report = tmp_path / "results.md"
    done = _bench("--quick", "--only", "sdk", "--repeats", "1", "--markdown", str(report))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for key in (
        "- platform:",
        "- cpu count:",
        "- python:",
        "- pydantic:",
        "- orjson:",
        "- mode: quick (1 repeats",
    ):
        assert key in out, key
    assert out.count("| suite | measure | value | floor | ratio | goal | verdict |") == 1
    rows = [line for line in out.splitlines() if line.startswith("| sdk |")]
    assert [row[: row.index("|", 8) + 1] for row in rows] == EXPECTED_ROWS
    assert all(row.rstrip(" |").endswith(("meets", "misses")) for row in rows)
    assert report.read_text(encoding="utf-8") == out


def test_an_unknown_suite_name_is_a_usage_error() -> None:
    """``--only`` accepts registered suite names only."""
    done = _bench("--quick", "--only", "no-such-suite")
    assert done.returncode == 2
    assert "invalid choice" in done.stderr


def test_verdicts_async_operations_cleanups_and_a_broken_suite(tmp_path: Path) -> None:
    """Goals decide the verdict, async operations run on the suite's loop, cleanups run newest first even when
    a suite breaks, and a broken suite makes the exit status 1 without hiding the other suite's rows."""
    marker = tmp_path / "marker.txt"
    done = _bench(
        "--quick",
        "--repeats",
        "2",
        "--module",
        "tests.sdk.bench_fake_suite",
        "--module",
        "tests.sdk.bench_broken_suite",
        env={"BENCH_FAKE_MARKER": str(marker)},
    )
    assert done.returncode == 1
    rows = {
        line.split("|")[2].strip(): line for line in done.stdout.splitlines() if line.startswith("| bench_")
    }
    assert set(rows) == {"fake: generous value goal", "fake: impossible ratio goal", "fake: async operation"}
    assert rows["fake: generous value goal"].endswith("| meets |")
    assert rows["fake: impossible ratio goal"].endswith("| misses |")
    assert rows["fake: async operation"].endswith("| - | - |")
    assert "µs/step" in rows["fake: async operation"]
    assert "- *fake: impossible ratio goal*: a call that does nothing" in done.stdout
    assert "suite 'bench_broken_suite' failed" in done.stderr
    assert "boom from the broken suite" in done.stderr
    assert "Failed (no rows above):" in done.stdout
    assert "- suite 'bench_broken_suite' failed" in done.stdout
    assert "never awaited" not in done.stderr
    assert "Task was destroyed" not in done.stderr
    assert marker.read_text(encoding="utf-8").splitlines() == [
        "async cleanup",
        "sync cleanup",
        "broken suite cleanup",
    ]


def test_the_postgresql_writes_module_runs_and_counts_two_round_trips_per_run() -> None:
    """``bench.pg_writes`` (not registered: it needs a server) runs in quick mode against the test PostgreSQL,
    prints its two rows and counts the one-statement path at two statements and no ``BEGIN`` per run."""
    if not os.environ.get("AGENTRUNNER_TEST_PG_URL"):
        if os.environ.get("AGENTRUNNER_REQUIRE_PG") == "1":
            pytest.fail("AGENTRUNNER_REQUIRE_PG=1 but AGENTRUNNER_TEST_PG_URL is not set")
        pytest.skip("needs AGENTRUNNER_TEST_PG_URL (source .ci/postgres.sh)")
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--repeats", "1", "--module", "bench.pg_writes"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "one statement 2 + 0 + 0," in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith("| pg_writes |")]
    assert len(rows) == 2, done.stdout
