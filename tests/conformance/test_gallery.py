"""Acceptance: every deliberately broken runner fails exactly the requirement it breaks; echo passes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult
from agentrunner_conformance import Outcome, check_runner
from agentrunner_runner_echo import EchoRunner

from .gallery import BROKEN
from .support import FAST

BROKEN_BY_NAME = {runner.__name__: runner for runner in BROKEN}


@pytest.mark.parametrize(
    ("runner", "requirement_id"), list(BROKEN.items()), ids=lambda v: getattr(v, "__name__", v)
)
def test_a_broken_runner_fails_exactly_the_requirement_it_breaks(
    runner: type[AgentRunner], requirement_id: str
) -> None:
    """The check fails the one broken requirement, with a shrunk example and the seed, and nothing else."""
    report = check_runner(runner, profile=FAST, seed=1234)
    assert report.failed_ids == {requirement_id}, report.summary()
    failure = report.results[requirement_id]
    assert failure.example, "a failure carries its minimal example"
    assert failure.seed == 1234
    assert not report.by_outcome(Outcome.BLOCKED)


def test_the_gallery_covers_at_least_twelve_distinct_defects() -> None:
    """The acceptance gallery is broad: a dozen runners or more, across ten requirements or more."""
    assert len(BROKEN) >= 12
    assert len(set(BROKEN.values())) >= 10


def test_the_echo_runner_passes_every_requirement_that_applies_to_it() -> None:
    """The reference runner is conformant: no FAIL and no BLOCKED, and gated checks are SKIPPED."""
    report = check_runner(EchoRunner, profile=FAST, seed=99)
    assert report.ok, report.summary()
    assert report.results["capability.streaming.deltas-match-message"].outcome is Outcome.PASS
    assert report.results["cancel.stops-within-grace"].outcome is Outcome.PASS
    assert report.results["capability.multimodal-input.no-crash"].outcome is Outcome.SKIPPED


class _NeedsACredential(AgentRunner):
    """Cannot even be built without an environment variable: the environment, not the runner, is at fault."""

    manifest = EchoRunner.manifest

    def __init__(self) -> None:
        raise RuntimeError("API_KEY is not set")

    async def run(self, ctx: AgentRunContext, api: AgentRunAPI) -> AsyncIterator[AgentRunResult]:
        yield self.emitter(ctx).complete("unreachable")


def test_a_runner_that_cannot_be_built_is_blocked_not_failed() -> None:
    """Every run-based requirement is BLOCKED with the reason; the static manifest check still passes."""
    report = check_runner(_NeedsACredential, profile=FAST, seed=1)
    assert report.failed_ids == set()
    blocked = report.by_outcome(Outcome.BLOCKED)
    assert blocked
    assert all("API_KEY is not set" in r.message for r in blocked)
    assert report.results["manifest.protocol-version"].outcome is Outcome.PASS
    assert not report.ok


def test_the_same_seed_reproduces_the_same_minimal_example() -> None:
    """A failure's seed replays the search: same requirement, same shrunk example."""
    first = check_runner(BROKEN_BY_NAME["EmptySuccess"], profile=FAST, seed=42)
    again = check_runner(
        BROKEN_BY_NAME["EmptySuccess"], profile=FAST, seed=42, only=["result.output.present"]
    )
    assert first.results["result.output.present"].example == again.results["result.output.present"].example
    assert "reproduce: --seed 42" in first.summary()
