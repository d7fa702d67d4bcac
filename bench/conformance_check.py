"""Conformance kit: what one fuzzed run costs, and how long a whole ``check`` of the echo runner takes.

* ``uv run python -m bench --only conformance``: the per-run rows of the shared table (one echo run driven by the
  kit through the simulated host, next to the same run with a stub transport and nobody watching).
* ``uv run python -m bench.conformance_check [--profile default] [--runner echo|ignores-cancel] [--seed N]``:
  whole ``check_runner`` calls of the echo runner and of a runner that ignores every cancel, timed (``--per-probe``
  adds a row per probe). A check drives thousands of runs and sleeps through cancel and deadline budgets, so it
  is far too long for the sampling engine; this standalone mode reports wall times and the one goal (a
  cancel-ignoring runner's default check under 60 s), with no assertion. docs/conformance.md quotes it.
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


class _IgnoresEveryCancel:
    """Built on first use (the SDK is imported lazily): the cancel-ignoring runner of issue 22."""

    @staticmethod
    def build() -> Any:
        import asyncio
        import contextlib

        from agentrunner import (
            AgentRunAPI,
            AgentRunContext,
            AgentRunner,
            AgentRunnerCapabilities,
            AgentRunnerManifest,
            AgentRunResult,
            I18nObject,
        )

        class IgnoresEveryCancel(AgentRunner):
            """Declares interrupt, then answers a cancel with 30 s of clean-up that swallows every cancel."""

            manifest = AgentRunnerManifest(
                id="plugin:bench/broken/ignores-every-cancel",
                name="ignores-every-cancel",
                label=I18nObject(en_US="ignores every cancel"),
                capabilities=AgentRunnerCapabilities(interrupt=True),
            )

            async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
                try:
                    await asyncio.sleep(0.02)
                except asyncio.CancelledError:
                    ends = time.monotonic() + 30
                    while (left := ends - time.monotonic()) > 0:
                        with contextlib.suppress(asyncio.CancelledError):
                            await asyncio.sleep(left)
                yield self.emitter(ctx).complete("".join(ctx.input.text_parts()) or "done")

        return IgnoresEveryCancel


_GOALS: dict[tuple[str, str], float] = {("ignores-cancel", "default"): 60.0}
"""Whole-check wall-time goals (seconds): issue 22 asks a cancel-ignoring runner's default check under 60 s."""


def main(argv: Sequence[str] | None = None) -> int:
    """Time whole checks (the echo runner, and a runner that ignores every cancel) and print one table."""
    from agentrunner_conformance import PROFILES, check_runner
    from agentrunner_runner_echo import EchoRunner

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--profile", action="append", choices=sorted(PROFILES), help="default: smoke, quick and default"
    )
    parser.add_argument("--runner", action="append", choices=["echo", "ignores-cancel"], help="default: both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-probe", action="store_true", help="also print one row per probe")
    args = parser.parse_args(argv)
    runners: dict[str, Any] = {"echo": EchoRunner, "ignores-cancel": None}
    print("| runner | profile | what | seconds | goal | verdict |\n|---|---|---|---|---|---|")
    for name in args.runner or ["echo", "ignores-cancel"]:
        target = runners[name] or _IgnoresEveryCancel.build()
        for profile in args.profile or ["smoke", "quick", "default"]:
            marks: list[tuple[str, float]] = []
            started = time.monotonic()

            def progress(probe: str, status: str, *, marks: list[tuple[str, float]] = marks) -> None:
                marks.append((f"{probe} {status}", time.monotonic()))

            report = check_runner(target, profile=profile, seed=args.seed, progress=progress)
            if args.per_probe:
                previous = started
                for label, at in marks:
                    if not label.endswith("started"):
                        print(f"| {name} | {profile} | {label} | {at - previous:.1f} | - | - |")
                    previous = at
            counts = report.counts()
            goal = _GOALS.get((name, profile))
            verdict = "-" if goal is None else ("meets" if report.duration < goal else "misses")
            failed = ", ".join(sorted(report.failed_ids)) or "none"
            print(
                f"| {name} | {profile} | **whole check** ({counts['PASS']} pass, {counts['FAIL']} fail: {failed}; "
                f"{counts['BLOCKED']} blocked) | {report.duration:.1f} | "
                f"{'-' if goal is None else f'< {goal:g} s'} | {verdict} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
