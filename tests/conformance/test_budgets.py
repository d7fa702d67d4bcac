"""Wall-clock budgets: a check, an example and a shrink are bounded, so a hung runner is reported, not waited for."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult
from agentrunner_conformance import Outcome, check_runner
from agentrunner_runner_echo import EchoRunner

from .support import FAST


class _NeverEnds(AgentRunner):
    """Waits forever on every run (no deadline, no interrupt): only the example budget can end it."""

    manifest = EchoRunner.manifest.model_copy(
        update={"capabilities": EchoRunner.manifest.capabilities.model_copy(update={"interrupt": False})}
    )

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        await asyncio.Event().wait()
        yield self.emitter(ctx).complete("unreachable")


def test_a_spent_check_budget_blocks_the_probes_it_did_not_run() -> None:
    """With no time left, every run-based requirement is BLOCKED with the reason; nothing passes unchecked."""
    report = check_runner(EchoRunner, profile=dataclasses.replace(FAST, check_budget=0.0), seed=3)
    blocked = report.by_outcome(Outcome.BLOCKED)
    assert blocked
    assert all("budget ran out" in r.message for r in blocked), report.summary()
    assert report.results["manifest.protocol-version"].outcome is Outcome.PASS
    assert not report.by_outcome(Outcome.FAIL)


def test_a_run_that_never_ends_fails_within_the_example_budget() -> None:
    """The example budget turns a hang into a FAIL of result.terminal.exactly-one instead of a stuck check."""
    profile = dataclasses.replace(FAST, max_examples=3, example_budget=0.3, shrink_budget=0.5)
    report = check_runner(_NeverEnds, profile=profile, seed=5, only=["result.terminal.exactly-one"])
    failure = report.results["result.terminal.exactly-one"]
    assert failure.outcome is Outcome.FAIL, report.summary()
    assert "never ended" in failure.message
