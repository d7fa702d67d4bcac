"""The HTTP-API tier: checks a runner that calls a remote platform (Dify, n8n, Coze, DashScope...) against the
fake platform server its own tests supply.

The Protocol v1 fuzzing of :func:`~agentrunner_conformance.check_runner` never reaches a platform: without one
the runner is not configured, or its calls fail. This tier drives the platform side on purpose, through a
:class:`PlatformScript` (any loopback server that emulates the platform as documented, scripted by the test):

==============================  =====  ======================================================================
requirement                     level  rule
==============================  =====  ======================================================================
``http.answer.completes``       MUST   A normal platform answer ends in run.completed with a non-empty message.
``http.errors.mapped``          MUST   Each HTTP error status ends in run.failed with a code (never run.completed,
                                       never an exception), and every run passes the per-run invariants.
``http.errors.retryable``       SHOULD 429 and 503 are reported ``retryable``; 400, 401, 403 and 404 are not.
``http.cancel.closes-stream``   MUST   Cancelling a run while the platform streams closes that HTTP stream.
==============================  =====  ======================================================================

``check_http_api_runner(factory, platform)`` returns a :class:`TierReport`; each run is driven with
:func:`~agentrunner_conformance.drive_run` on a :class:`~agentrunner_conformance.SimulatedHost`, so the usual
stream rules (one terminal result, valid results, output present...) are judged on every run too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

from agentrunner import AgentRunContext, AgentRunner, RunCompletedResult, RunFailedResult

from .execution import CancelPlan, RunRecord, drive_run
from .host import SimulatedHost
from .invariants import evaluate_run

__all__ = [
    "DEFAULT_STATUSES",
    "HTTP_TIER_REQUIREMENTS",
    "PlatformScript",
    "TierReport",
    "TierResult",
    "check_http_api_runner",
]

DEFAULT_STATUSES: Final = (400, 401, 403, 404, 429, 500, 502, 503)
"""HTTP error statuses the tier makes the platform answer, one run each."""

HTTP_TIER_REQUIREMENTS: Final[dict[str, str]] = {
    "http.answer.completes": "A normal platform answer ends in run.completed with a non-empty message.",
    "http.errors.mapped": "Each HTTP error status ends in run.failed with a code, never run.completed or a crash.",
    "http.errors.retryable": "429 and 503 are reported retryable; 400, 401, 403 and 404 are not.",
    "http.cancel.closes-stream": "Cancelling a run while the platform streams closes that HTTP stream.",
}
"""The tier's requirements and their rules."""

_RETRYABLE: Final = {429: True, 503: True, 400: False, 401: False, 403: False, 404: False}


class PlatformScript(Protocol):
    """What the tier asks of the fake platform server a runner's tests supply.

    Every method changes what the **next** requests are answered with, until changed again.
    """

    def answer_normally(self) -> None:
        """Answer as the platform does for a successful request (with some text in the answer)."""
        ...

    def answer_with_status(self, status: int) -> None:
        """Answer every request with this HTTP error status (and the platform's error body)."""
        ...

    def hold_stream_open(self) -> None:
        """Start a streaming answer (send its first chunk), then send nothing more and never end it."""
        ...

    async def stream_closed(self, *, timeout: float) -> bool:
        """Wait up to *timeout* seconds for the client to close the held stream; whether it did."""
        ...


Outcome = Literal["PASS", "FAIL"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TierResult:
    """One tier requirement's outcome."""

    requirement_id: str
    """Requirement id (a key of the tier's requirements)."""
    outcome: Outcome
    """``PASS`` or ``FAIL``."""
    message: str = ""
    """What was observed, for a failure."""


@dataclass(slots=True, kw_only=True)
class TierReport:
    """Every requirement of a tier, each PASS or FAIL."""

    runner_id: str
    """The runner checked."""
    results: dict[str, TierResult] = field(default_factory=lambda: dict[str, TierResult]())
    """By requirement id."""

    @property
    def ok(self) -> bool:
        """Nothing failed."""
        return all(r.outcome == "PASS" for r in self.results.values())

    @property
    def failed_ids(self) -> set[str]:
        """Ids of the failed requirements."""
        return {k for k, r in self.results.items() if r.outcome == "FAIL"}

    def summary(self) -> str:
        """One line per requirement."""
        lines = [
            f"{self.runner_id}: {len(self.results) - len(self.failed_ids)} passed, {len(self.failed_ids)} failed"
        ]
        for result in self.results.values():
            lines.append(
                f"  {result.outcome:4} {result.requirement_id}"
                + (f": {result.message}" if result.message else "")
            )
        return "\n".join(lines)


def _record(report: TierReport, requirement_id: str, problems: Sequence[str]) -> None:
    outcome: Outcome = "FAIL" if problems else "PASS"
    report.results[requirement_id] = TierResult(
        requirement_id=requirement_id, outcome=outcome, message="; ".join(problems)
    )


def _terminal(record: RunRecord) -> RunCompletedResult | RunFailedResult | None:
    for observed in reversed(record.results):
        if isinstance(observed.parsed, RunCompletedResult | RunFailedResult):
            return observed.parsed
    return None


async def check_http_api_runner(
    factory: Callable[[], AgentRunner],
    platform: PlatformScript,
    *,
    context: Callable[[str], AgentRunContext],
    statuses: Sequence[int] = DEFAULT_STATUSES,
    cancel_after: float = 5.0,
    closed_within: float = 10.0,
) -> TierReport:
    """Check an HTTP-API runner against *platform* (see the module docstring).

    *factory* builds the runner configured against the fake platform; *context(run_id)* gives the run context
    of one run (a message the runner sends to the platform). *cancel_after* bounds how long the tier waits for
    the first result of the held stream before it cancels anyway; *closed_within* how long it waits for the
    platform to see the stream closed (generous: it is waited on, not slept).
    """
    runner = factory()
    report = TierReport(runner_id=type(runner).manifest.id)
    manifest = type(runner).manifest

    platform.answer_normally()
    record = await drive_run(factory(), context("tier-ok"), SimulatedHost())
    problems = [v.message for v in evaluate_run(record, manifest)]
    terminal = _terminal(record)
    if not isinstance(terminal, RunCompletedResult):
        problems.append(f"a normal answer gave {record.describe()}")
    _record(report, "http.answer.completes", problems)

    mapped: list[str] = []
    retryable: list[str] = []
    for status in statuses:
        platform.answer_with_status(status)
        record = await drive_run(factory(), context(f"tier-{status}"), SimulatedHost())
        mapped += [f"HTTP {status}: {v.message}" for v in evaluate_run(record, manifest)]
        terminal = _terminal(record)
        if not isinstance(terminal, RunFailedResult) or not terminal.data.code:
            mapped.append(f"HTTP {status} gave {record.describe()}")
            continue
        expected = _RETRYABLE.get(status)
        if expected is not None and terminal.data.retryable is not expected:
            retryable.append(
                f"HTTP {status} -> {terminal.data.code} with retryable={terminal.data.retryable}"
            )
    _record(report, "http.errors.mapped", mapped)
    _record(report, "http.errors.retryable", retryable)

    platform.hold_stream_open()
    plan = CancelPlan(after_results=1, after_seconds=cancel_after, grace=closed_within)
    record = await drive_run(factory(), context("tier-cancel"), SimulatedHost(), cancel=plan)
    closed = await platform.stream_closed(timeout=closed_within)
    problems = [] if closed else [f"the platform's stream stayed open after the cancel ({record.describe()})"]
    if record.stopped_in_grace is False:
        problems.append("the run did not stop after the cancel")
    _record(report, "http.cancel.closes-stream", problems)
    platform.answer_normally()
    return report
