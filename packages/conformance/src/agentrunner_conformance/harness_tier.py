"""The harness tier: checks a runner that drives an external harness CLI (Claude Code, Codex...) against a stub
CLI its own tests supply.

Protocol v1 fuzzing exercises a harness runner only as far as its stub happens to answer. This tier scripts the
harness side on purpose, through a :class:`HarnessStub` (the runner's test double of the CLI: it prints the
native output lines it is given, and records each launch):

==============================  =====  ======================================================================
requirement                     level  rule
==============================  =====  ======================================================================
``harness.output.mapped``       MUST   Each native output fixture becomes a valid result stream that ends as the
                                       fixture says (run.completed or run.failed), passing the per-run invariants.
``harness.projection.private``  MUST   Files handed to the harness are owner-only and are gone after the run.
``harness.process.cleanup``     MUST   No harness process is left after a run, nor after a cancelled one.
``harness.cancel.stops``        MUST   Cancelling a run whose harness hangs stops the run within the grace.
==============================  =====  ======================================================================
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, Protocol

from agentrunner import AgentRunContext, AgentRunner, RunCompletedResult, RunFailedResult

from .execution import CancelPlan, RunRecord, drive_run
from .host import SimulatedHost
from .http_tier import TierReport, TierResult
from .invariants import evaluate_run

__all__ = [
    "HARNESS_TIER_REQUIREMENTS",
    "HarnessLaunch",
    "HarnessStub",
    "NativeFixture",
    "check_harness_runner",
]

HARNESS_TIER_REQUIREMENTS: Final[dict[str, str]] = {
    "harness.output.mapped": "Each native output fixture becomes a valid result stream that ends as the fixture says.",
    "harness.projection.private": "Files handed to the harness are owner-only and are gone after the run.",
    "harness.process.cleanup": "No harness process is left after a run, nor after a cancelled one.",
    "harness.cancel.stops": "Cancelling a run whose harness hangs stops the run within the grace.",
}
"""The tier's requirements and their rules."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeFixture:
    """Native output of one harness run, and how the run must end."""

    lines: Sequence[str]
    """What the harness prints on stdout, line by line."""
    ends: Literal["completed", "failed"]
    """The terminal result the runner must map it to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HarnessLaunch:
    """One start of the stub CLI, as the stub recorded it."""

    pid: int
    """Its process id."""
    files: Mapping[str, int]
    """Files it was handed (paths named on its command line that existed), with their permission bits."""


class HarnessStub(Protocol):
    """What the tier asks of the stub CLI a runner's tests supply."""

    def play(self, lines: Sequence[str], *, hang: bool = False) -> None:
        """The next launches print *lines*, then exit 0 (or, with *hang*, never exit)."""
        ...

    def launches(self) -> Sequence[HarnessLaunch]:
        """Every launch since the last :meth:`play`."""
        ...


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    status = Path(f"/proc/{pid}/status")
    try:
        return (
            "\nState:\tZ" not in status.read_text()
        )  # a zombie has ended (its parent just has not reaped it)
    except OSError:
        return False


def _launch_problems(stub: HarnessStub, what: str) -> tuple[list[str], list[str]]:
    private: list[str] = []
    cleanup: list[str] = []
    for launch in stub.launches():
        for path, mode in launch.files.items():
            if mode & 0o077:
                private.append(f"{what}: {path} was handed over with mode {mode:o}")
            if Path(path).exists():
                private.append(f"{what}: {path} still exists after the run")
        if _alive(launch.pid):
            cleanup.append(f"{what}: harness process {launch.pid} is still running")
    return private, cleanup


def _terminal(record: RunRecord) -> str | None:
    for observed in reversed(record.results):
        if isinstance(observed.parsed, RunCompletedResult):
            return "completed"
        if isinstance(observed.parsed, RunFailedResult):
            return "failed"
    return None


def _result(requirement_id: str, problems: Sequence[str]) -> TierResult:
    return TierResult(
        requirement_id=requirement_id, outcome="FAIL" if problems else "PASS", message="; ".join(problems)
    )


async def check_harness_runner(
    factory: Callable[[], AgentRunner],
    stub: HarnessStub,
    *,
    fixtures: Mapping[str, NativeFixture],
    context: Callable[[str], AgentRunContext],
    cancel_after: float = 5.0,
    grace: float = 10.0,
) -> TierReport:
    """Check a harness runner against *stub* with each native output fixture (see the module docstring).

    *context(run_id)* gives one run's context. A hanging harness is cancelled after its first result, or after
    *cancel_after* seconds; the run then has *grace* seconds to stop.
    """
    manifest = type(factory()).manifest
    report = TierReport(runner_id=manifest.id)
    mapped: list[str] = []
    private: list[str] = []
    cleanup: list[str] = []
    for name, fixture in fixtures.items():
        stub.play(fixture.lines)
        record = await drive_run(factory(), context(f"tier-{name}"), SimulatedHost())
        mapped += [f"{name}: {v.message}" for v in evaluate_run(record, manifest)]
        if _terminal(record) != fixture.ends:
            mapped.append(f"{name}: expected run.{fixture.ends}, got {record.describe()}")
        more_private, more_cleanup = _launch_problems(stub, name)
        private += more_private
        cleanup += more_cleanup
        if not stub.launches():
            mapped.append(f"{name}: the harness was never started")

    first = next(iter(fixtures.values()), NativeFixture(lines=(), ends="completed"))
    stub.play(first.lines[:1], hang=True)
    plan = CancelPlan(after_results=1, after_seconds=cancel_after, grace=grace)
    record = await drive_run(factory(), context("tier-cancel"), SimulatedHost(), cancel=plan)
    stops = [] if record.stopped_in_grace is not False else ["the run did not stop within the grace period"]
    if record.cancelled_at is None:
        stops.append(f"the run ended before it could be cancelled ({record.describe()})")
    more_private, more_cleanup = _launch_problems(stub, "cancelled run")
    private += more_private
    cleanup += more_cleanup
    report.results = {
        "harness.output.mapped": _result("harness.output.mapped", mapped),
        "harness.projection.private": _result("harness.projection.private", private),
        "harness.process.cleanup": _result("harness.process.cleanup", cleanup),
        "harness.cancel.stops": _result("harness.cancel.stops", stops),
    }
    return report
