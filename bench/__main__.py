"""Command line of the benchmarks; the module docstring of :mod:`bench` says what it does."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from . import SUITES, SuiteRef
from ._framework import Mode, environment, render_table, run_suites, write_progress


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected suites and print one table; returns the exit status (1 when a suite broke)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description="Run the agentrunner benchmarks.")
    parser.add_argument("--quick", action="store_true", help="few, short repeats (CI); figures are rough")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        choices=[suite.name for suite in SUITES],
        help="run only this suite (repeatable); one of: " + ", ".join(suite.name for suite in SUITES),
    )
    parser.add_argument(
        "--module",
        action="append",
        metavar="DOTTED",
        help="run the suite of this module, registered or not (repeatable); without --only, only these run",
    )
    parser.add_argument("--repeats", type=int, metavar="N", help="override the number of repeats")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the report to FILE")
    parser.add_argument(
        "--suite-timeout",
        type=float,
        metavar="SECONDS",
        help="treat a suite running longer as hung: print every stack and exit 1 (default 600, quick 120)",
    )
    args = parser.parse_args(argv)

    mode = Mode.quick() if args.quick else Mode.full()
    if args.repeats is not None:
        if args.repeats < 1:
            parser.error("--repeats must be at least 1")
        mode = dataclasses.replace(mode, repeats=args.repeats)
    if args.suite_timeout is not None:
        mode = dataclasses.replace(mode, suite_timeout=args.suite_timeout)
    selected = [suite for suite in SUITES if args.only is None or suite.name in args.only]
    if args.module:
        if args.only is None:
            selected = []
        selected += [
            SuiteRef(module.rsplit(".", 1)[-1], module, f"module {module}") for module in args.module
        ]

    env = environment()  # before measuring, so the load average is the one the run started under
    http_report = ""
    if not args.quick and any(suite.module == "bench.http_echo" for suite in selected):
        # issue 16's HTTP measures (server CPU per request among them) in the same run as the table, first: made
        # after the suites (2026-12-07 13:23 UTC), the report found both servers slower than alone (the bare one
        # 444 µs of CPU per request against 357-375 µs in the three runs before, serial p50 2.3 ms against 1.0)
        from .http_echo import report as http_echo_report

        write_progress("http: the issue-16 report (bench.http_echo)")
        http_report = asyncio.run(http_echo_report())
    rows, errors = run_suites(selected, mode, quick=args.quick, progress=write_progress)
    # the start's load alone hides a machine that got busy during the run (eight people share it)
    env["load average at the end (1/5/15 min)"] = " / ".join(f"{load:.2f}" for load in os.getloadavg())
    env["ended"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    report = render_table(rows, env, mode, quick=args.quick, errors=errors)
    if http_report:
        report += "\n## The issue-16 HTTP report (`bench.http_echo`), in this run\n\n" + http_report
    print(report, end="")
    if args.markdown is not None:
        args.markdown.write_text(report, encoding="utf-8")
    for error in errors:
        print(error, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
