"""The local agent against the conformance kit (Protocol v1 requirements, fuzzed with a simulated host)."""

from __future__ import annotations

from agentrunner_conformance import Outcome, check_runner
from agentrunner_runner_local_agent import LocalAgentRunner


def test_the_local_agent_passes_the_conformance_kit_on_the_quick_profile() -> None:
    """Every requirement the kit judges passes; only the ones gated off by the manifest are skipped."""
    report = check_runner(LocalAgentRunner, profile="quick", seed=20261130)
    problems = {
        rid: f"{r.outcome.name}: {r.message}"
        for rid, r in report.results.items()
        if r.outcome not in (Outcome.PASS, Outcome.SKIPPED)
    }
    assert report.ok, problems
    assert problems == {}
    assert report.counts()["PASS"] >= 20
    skipped = {rid for rid, r in report.results.items() if r.outcome is Outcome.SKIPPED}
    assert "isolation.no-instance-state" not in skipped
    assert "capability.streaming.deltas-match-message" not in skipped
