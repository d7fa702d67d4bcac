"""``agentrunner-conformance``: the command-line front-end of :func:`~agentrunner_conformance.check_runner`.

The CLI adds only argument parsing, a progress display, report files and exit codes:

* ``0``: every requirement passed or was skipped (or failed only as listed in ``--expected-failures``);
* ``1``: a requirement failed or was blocked, or an expected failure now passes (a stale baseline entry);
* ``2``: the command line, the target or the expected-failures file is wrong.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TextIO

from .errors import ConformanceError, TargetError
from .profiles import PROFILES
from .requirements import REQUIREMENTS

__all__ = ["cli", "cli_exit"]


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Fuzz an agent runner against Protocol v1.")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="check one runner and report every requirement")
    check.add_argument(
        "target",
        metavar="TARGET",
        help="module:Class, file.py:Class, a plugin directory with manifest.yaml (DIR#runner for one of "
        "several), or an installed runner id such as plugin:agentrunner/echo/default",
    )
    check.add_argument("--profile", choices=sorted(PROFILES), default="default", help="search budget")
    check.add_argument(
        "--seed", type=int, help="Hypothesis seed (printed on every run; pass it to reproduce)"
    )
    check.add_argument("--json", metavar="FILE", help="write the JSON report to FILE ('-' for stdout)")
    check.add_argument("--junit-xml", metavar="FILE", help="write a JUnit XML report to FILE")
    check.add_argument(
        "--expected-failures",
        metavar="FILE",
        help="YAML list of requirement ids expected to fail; exit 0 when exactly those fail",
    )
    check.add_argument(
        "--only", metavar="ID", action="append", help="check only this requirement (repeatable)"
    )
    check.add_argument(
        "--out-of-process",
        action="store_true",
        help="run a plugin directory's runner in its own process, over the wire protocol (needs agentrunner-host)",
    )
    check.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="wall-clock budget of the whole check (default: the profile's); unfinished probes are BLOCKED",
    )
    check.add_argument("--quiet", action="store_true", help="no progress display")
    commands.add_parser("requirements", help="list every requirement")
    return parser


def _print_requirements(out: TextIO) -> None:
    for req in REQUIREMENTS.values():
        gate = f" [{req.gate.describe()}]" if req.gate else ""
        print(f"{req.id:52} {req.level:6} {req.section}{gate}\n{'':52} {req.summary}", file=out)


def _check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .engine import check_runner
    from .loading import load_target
    from .report import compare_expected, load_expected_failures

    expected = (
        None if args.expected_failures is None else load_expected_failures(Path(args.expected_failures))
    )
    only: list[str] | None = args.only
    for requirement_id in only or ():
        if requirement_id not in REQUIREMENTS:
            raise ConformanceError(f"unknown requirement id {requirement_id!r}")
    close: Callable[[], Awaitable[None]] | None = None
    if args.out_of_process:
        from .out_of_process import OutOfProcessTarget

        directory, _, name = args.target.partition("#")
        if not Path(directory).is_dir():
            raise TargetError("--out-of-process needs a plugin directory (with a manifest.yaml) as TARGET")
        remote = OutOfProcessTarget(Path(directory), runner_name=name or None)
        runner, close = remote.runner_class, remote.aclose
    else:
        runner = load_target(args.target)
    seed: int = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    where = " in its own process" if args.out_of_process else ""
    print(f"checking {runner.manifest.id}{where} (profile {args.profile}, seed {seed})", file=err, flush=True)

    def progress(probe: str, status: str) -> None:
        if not args.quiet:
            print(f"  {probe:15} {status}", file=err, flush=True)

    profile = PROFILES[args.profile]
    if args.budget is not None:
        profile = dataclasses.replace(profile, check_budget=args.budget)
    report = check_runner(runner, profile=profile, seed=seed, only=only, progress=progress, close=close)
    print(report.summary(), file=err if args.json == "-" else out)
    if args.json == "-":
        print(report.to_json(), file=out)
    elif args.json:
        Path(args.json).write_text(report.to_json(), encoding="utf-8")
    if args.junit_xml:
        Path(args.junit_xml).write_text(report.to_junit_xml(), encoding="utf-8")
    blocked = [r.requirement.id for r in report.results.values() if r.outcome.value == "BLOCKED"]
    if blocked:
        print(f"blocked: {', '.join(blocked)}", file=err)
    if expected is None:
        return 0 if report.ok else 1
    verdict = compare_expected(report, expected)
    if verdict.unexpected:
        print(f"unexpected failures: {', '.join(sorted(verdict.unexpected))}", file=err)
    if verdict.stale:
        print(
            f"expected failures that now pass (remove them from {args.expected_failures}): "
            f"{', '.join(sorted(verdict.stale))}",
            file=err,
        )
    return 0 if verdict.ok and not blocked else 1


def cli(argv: Sequence[str] | None = None, *, prog: str = "agentrunner-conformance") -> int:
    """Run the CLI with *argv* and return the exit code."""
    args = _parser(prog).parse_args(argv)
    if args.command == "requirements":
        _print_requirements(sys.stdout)
        return 0
    try:
        return _check(args, sys.stdout, sys.stderr)
    except ConformanceError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2


def cli_exit() -> None:
    """Entry point of the ``agentrunner-conformance`` script."""
    sys.exit(cli())
