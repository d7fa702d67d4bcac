"""The docs stay true: the requirement table matches the manifest, the tutorial's runner is conformant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrunner_conformance import REQUIREMENTS, check_runner

from .support import FAST

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def _row(requirement_id: str) -> str:
    req = REQUIREMENTS[requirement_id]
    gate = req.gate.describe() if req.gate else "all runners"
    return f"| `{req.id}` | {req.level} | {gate} | {req.section} | {req.summary} |"


def test_the_requirement_table_matches_the_manifest() -> None:
    """Every requirement has its exact row, and the table has no other rows."""
    text = DOC.read_text(encoding="utf-8")
    for requirement_id in REQUIREMENTS:
        assert _row(requirement_id) in text, f"docs/conformance.md is stale for {requirement_id}"
    rows = [line for line in text.splitlines() if line.startswith("| `") and "." in line.split("`")[1]]
    assert len(rows) == len(REQUIREMENTS)


TUTORIAL = DOC.with_name("tutorial-first-runner.md")


def test_the_tutorial_runner_passes_the_conformance_check() -> None:
    """The runner the tutorial builds, taken from its code block, is conformant as the tutorial says."""
    text = TUTORIAL.read_text(encoding="utf-8")
    start = text.index("# src/my_echo/runner.py")
    code = text[start : text.index("```", start)]
    namespace: dict[str, Any] = {}
    exec(compile(code, str(TUTORIAL), "exec"), namespace)
    report = check_runner(namespace["MyEcho"], profile=FAST, seed=5)
    assert report.ok, report.summary()


def test_the_http_tier_table_lists_every_tier_requirement() -> None:
    from agentrunner_conformance.http_tier import HTTP_TIER_REQUIREMENTS

    text = DOC.read_text(encoding="utf-8")
    for requirement_id in HTTP_TIER_REQUIREMENTS:
        assert f"| {requirement_id} |" in text


def test_the_harness_tier_table_lists_every_tier_requirement() -> None:
    from agentrunner_conformance.harness_tier import HARNESS_TIER_REQUIREMENTS

    text = DOC.read_text(encoding="utf-8")
    for requirement_id in HARNESS_TIER_REQUIREMENTS:
        assert f"| {requirement_id} |" in text
