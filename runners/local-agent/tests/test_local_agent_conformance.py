"""The local agent against the conformance kit (Protocol v1 requirements, fuzzed with a simulated host)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from agentrunner_conformance import PROFILES, Outcome, check_runner
from agentrunner_conformance.out_of_process import OutOfProcessTarget
from agentrunner_runner_local_agent import RUNNER_ID, LocalAgentRunner

# The quick profile with generous graces: the kit judges "stops within the grace" by the clock, and on a loaded
# machine a correct run (a child process to kill, a late-scheduled loop) overran quick's 0.2 s.
QUICK = dataclasses.replace(PROFILES["quick"], cancel_grace=2.0, deadline_grace=2.0)

PLUGIN_DIR = Path(__file__).resolve().parents[1]


def test_the_local_agent_passes_the_conformance_kit_on_the_quick_profile() -> None:
    """Every requirement the kit judges passes; only the ones gated off by the manifest are skipped."""
    report = check_runner(LocalAgentRunner, profile=QUICK, seed=20261130)
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


def test_the_local_agent_passes_the_conformance_kit_in_its_own_plugin_process() -> None:
    """The same check over the wire: the runner started from manifest.yaml in a child process."""
    target = OutOfProcessTarget(PLUGIN_DIR)
    assert target.manifest.id == RUNNER_ID
    report = check_runner(target.runner_class, profile=QUICK, seed=20261130, close=target.aclose)
    problems = {
        rid: f"{r.outcome.name}: {r.message}"
        for rid, r in report.results.items()
        if r.outcome not in (Outcome.PASS, Outcome.SKIPPED)
    }
    assert problems == {}
    assert report.ok
