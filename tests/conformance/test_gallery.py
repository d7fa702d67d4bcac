"""Acceptance: every deliberately broken runner fails exactly the requirement it breaks; echo passes."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from agentrunner import AgentRunAPI, AgentRunContext, AgentRunner, AgentRunResult
from agentrunner_conformance import Outcome, check_runner
from agentrunner_runner_echo import EchoRunner

from .gallery import BROKEN, OUT_OF_PROCESS
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


def _plugin_dir(tmp_path: Path, runner: type[AgentRunner]) -> Path:
    """A plugin directory whose manifest declares *runner* from a copy of the gallery module."""
    manifest = runner.manifest
    shutil.copy(Path(__file__).with_name("gallery.py"), tmp_path / "main.py")
    caps = manifest.capabilities.model_dump(mode="json")
    (tmp_path / "manifest.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "agentrunner/v1",
                "kind": "AgentRunner",
                "metadata": {
                    "author": "gallery",
                    "name": "broken",
                    "runner": manifest.name,
                    "label": {"en_US": manifest.name},
                },
                "spec": {"protocol_version": "1", "capabilities": caps},
                "execution": {"python": {"path": "./main.py", "attr": runner.__name__}},
            }
        )
    )
    return tmp_path


@pytest.mark.parametrize("runner", OUT_OF_PROCESS, ids=lambda r: r.__name__)
def test_the_five_reported_patterns_are_caught_out_of_process_too(
    tmp_path: Path, runner: type[AgentRunner]
) -> None:
    """Through the wire, in a child process, each pattern fails exactly its requirement: a fresh wire run id per
    attempt keeps replays apart, and a forwarded cancel lets the kit judge the child's own reaction."""
    from agentrunner_conformance.out_of_process import OutOfProcessTarget

    target = OutOfProcessTarget(_plugin_dir(tmp_path, runner))
    report = check_runner(target.runner_class, profile=FAST, seed=1234, close=target.aclose)
    assert report.failed_ids == {BROKEN[runner]}, report.summary()
    assert not report.by_outcome(Outcome.BLOCKED), report.summary()
