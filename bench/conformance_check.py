"""Conformance kit: what one fuzzed run costs, and how long a whole ``check`` of the echo runner takes.

* ``uv run python -m bench --only conformance``: the per-run rows of the shared table (one echo run driven by the
  kit through the simulated host, next to the same run with a stub transport and nobody watching).
* ``uv run python -m bench.conformance_check [--profile default] [--seed N]``: a whole ``check_runner`` of the echo
  runner, timed per probe. A check drives thousands of runs and sleeps through cancel and deadline budgets, so it
  is far too long for the sampling engine; this standalone mode reports its wall time instead (no assertion).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ._framework import Goal, Measure, SuiteContext

__all__ = ["main", "measures"]


def _context() -> Any:
    from agentrunner import (
        AgentEventContext,
        AgentInput,
        AgentResources,
        AgentRunContext,
        AgentRuntimeContext,
        AgentTrigger,
        ContextAccess,
        ContextAPICapabilities,
        ConversationContext,
        DeliveryContext,
    )

    return AgentRunContext(
        run_id="bench-run",
        trigger=AgentTrigger(type="message.received", source="platform"),
        event=AgentEventContext(event_id="evt-1", event_type="message.received", source="telegram"),
        conversation=ConversationContext(conversation_id="conv-1"),
        input=AgentInput(text="a message of about sixty characters, streamed back in chunks"),
        delivery=DeliveryContext(surface="http.stream", supports_streaming=True),
        resources=AgentResources(),
        context=ContextAccess(conversation_id="conv-1", available_apis=ContextAPICapabilities(state=True)),
        runtime=AgentRuntimeContext(trace_id="trace-1"),
    )


class _StubTransport:
    """Answers ``state.get`` with an unset key and does nothing else: the cheapest host there is."""

    async def call(self, request: Any, *, timeout: float | None) -> dict[str, Any]:
        return {"scope": "conversation", "key": "echo.turns", "value": None, "exists": False, "version": 0}

    def stream(self, request: Any, *, timeout: float | None) -> AsyncIterator[dict[str, Any]]:
        return _no_chunks()


async def _no_chunks() -> AsyncIterator[dict[str, Any]]:
    return
    yield {}


def measures(ctx: SuiteContext) -> list[Measure]:
    """One echo run through the kit vs the bare run."""
    from agentrunner import AgentRunAPI
    from agentrunner_conformance import SimulatedHost, drive_run, evaluate_run
    from agentrunner_runner_echo import EchoRunner

    run_ctx = _context()
    runner = EchoRunner()
    record = ctx.run(drive_run(runner, run_ctx, SimulatedHost()))

    async def kit_run() -> None:
        await drive_run(runner, run_ctx, SimulatedHost())

    async def bare_run() -> None:
        api = AgentRunAPI(_StubTransport(), run_id=run_ctx.run_id)
        async for _ in runner.run(run_ctx, api):
            pass

    def judge() -> None:
        evaluate_run(record, EchoRunner.manifest)

    return [
        Measure(
            "conformance: one echo run driven through the simulated host",
            kit_run,
            floor=bare_run,
            floor_name="the same echo run iterated directly, its back-call answered by a stub transport",
            # The kit adds one task, one validation per result (~6 µs each, perf-floors rows B/D) and an
            # admission check per back-call: about as much again as the run itself.
            goal=Goal.ratio(3, source="one task + one result validation per result, perf-floors rows B/D"),
            unit="µs/run",
        ),
        Measure(
            f"conformance: every per-run invariant over a {len(record.results)}-result record",
            judge,
            unit="µs/run",
            goal=Goal.value(100, source="20 invariants, each one pass over a handful of results"),
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Time a whole check of the echo runner and print one Markdown table."""
    from agentrunner_conformance import PROFILES, check_runner
    from agentrunner_runner_echo import EchoRunner

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--profile", action="append", choices=sorted(PROFILES), help="default: quick and default"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print("| profile | probe | seconds |\n|---|---|---|")
    for profile in args.profile or ["quick", "default"]:
        marks: list[tuple[str, float]] = []
        started = time.monotonic()

        def progress(probe: str, status: str, *, marks: list[tuple[str, float]] = marks) -> None:
            marks.append((f"{probe} {status}", time.monotonic()))

        report = check_runner(EchoRunner, profile=profile, seed=args.seed, progress=progress)
        previous = started
        for label, at in marks:
            if not label.endswith("started"):
                print(f"| {profile} | {label} | {at - previous:.1f} |")
            previous = at
        counts = report.counts()
        print(
            f"| {profile} | **whole check** ({counts['PASS']} pass, {counts['FAIL']} fail) | {report.duration:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
