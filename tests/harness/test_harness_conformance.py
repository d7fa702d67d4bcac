"""Both harness runners against the conformance kit, in process and in their own plugin process.

The CLI they start is the stub (a fake, put first on ``PATH`` as ``claude`` / ``codex``), so every generated
run goes through the whole harness path: workspace, projection, spawn, native parsing, results.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from agentrunner import AgentRunner
from agentrunner_conformance import PROFILES, Outcome, check_runner
from agentrunner_conformance.out_of_process import OutOfProcessTarget
from agentrunner_runner_claude_code import RUNNER_ID as CLAUDE_ID
from agentrunner_runner_claude_code import ClaudeCodeRunner
from agentrunner_runner_codex import RUNNER_ID as CODEX_ID
from agentrunner_runner_codex import CodexRunner
from harness_helpers import stub_on_path

# The quick profile with generous graces: the kit judges "stops within the grace" by the clock, and on a loaded
# machine a correct run (a child process to kill, a late-scheduled loop) overran quick's 0.2 s.
QUICK = dataclasses.replace(PROFILES["quick"], cancel_grace=2.0, deadline_grace=2.0)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    (ClaudeCodeRunner, "claude", ROOT / "runners" / "claude-code", CLAUDE_ID),
    (CodexRunner, "codex", ROOT / "runners" / "codex", CODEX_ID),
]


def _problems(report: object) -> dict[str, str]:
    results = report.results  # type: ignore[attr-defined]
    return {
        rid: f"{r.outcome.name}: {r.message}"
        for rid, r in results.items()
        if r.outcome not in (Outcome.PASS, Outcome.SKIPPED)
    }


@pytest.mark.parametrize(("cls", "cli", "plugin_dir", "runner_id"), CASES, ids=["claude-code", "codex"])
def test_in_process(
    cls: type[AgentRunner],
    cli: str,
    plugin_dir: Path,
    runner_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", f"{stub_on_path(tmp_path / 'bin', cli)}:{__import__('os').environ['PATH']}")
    report = check_runner(cls, profile=QUICK, seed=20261201)
    assert _problems(report) == {}
    assert report.ok
    assert report.counts()["PASS"] >= 20


@pytest.mark.parametrize(("cls", "cli", "plugin_dir", "runner_id"), CASES, ids=["claude-code", "codex"])
def test_out_of_process(
    cls: type[AgentRunner],
    cli: str,
    plugin_dir: Path,
    runner_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", f"{stub_on_path(tmp_path / 'bin', cli)}:{__import__('os').environ['PATH']}")
    target = OutOfProcessTarget(plugin_dir)
    assert target.manifest.id == runner_id
    report = check_runner(target.runner_class, profile=QUICK, seed=20261201, close=target.aclose)
    assert _problems(report) == {}
    assert report.ok
