"""The report of a conformance check: one outcome per requirement, and its JSON / JUnit XML forms.

Every requirement ends in exactly one of four states: ``PASS``, ``FAIL``, ``SKIPPED`` (the runner does not
declare the capability that gates it) or ``BLOCKED`` (the environment kept the kit from checking it).
A failure carries the shrunk minimal example and the seed that reproduces it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, cast

import yaml
from agentrunner import codec

from .errors import ExpectedFailuresError
from .requirements import REQUIREMENTS, Requirement

__all__ = [
    "ExpectedFailuresVerdict",
    "Outcome",
    "Report",
    "RequirementResult",
    "compare_expected",
    "load_expected_failures",
]


class Outcome(StrEnum):
    """The end state of one requirement."""

    PASS = "PASS"
    """Checked and never violated."""
    FAIL = "FAIL"
    """Violated; see the example."""
    SKIPPED = "SKIPPED"
    """Not applicable: gated by a capability the runner does not (or does) declare."""
    BLOCKED = "BLOCKED"
    """Could not be checked in this environment (the runner could not be built, a probe could not run)."""


@dataclass(slots=True, kw_only=True)
class RequirementResult:
    """The outcome of one requirement."""

    requirement: Requirement
    """The requirement."""
    outcome: Outcome
    """Its end state."""
    message: str = ""
    """What was observed (FAIL), or why it was skipped or blocked."""
    example: str | None = None
    """The shrunk minimal example that breaks it (FAIL)."""
    probe: str | None = None
    """The probe that found it (FAIL)."""
    seed: int | None = None
    """The Hypothesis seed that reproduces it."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        req = self.requirement
        return {
            "id": req.id,
            "level": req.level,
            "section": req.section,
            "gate": req.gate.describe() if req.gate else None,
            "summary": req.summary,
            "outcome": self.outcome.value,
            "message": self.message,
            "example": self.example,
            "probe": self.probe,
            "seed": self.seed,
        }


@dataclass(slots=True, kw_only=True)
class Report:
    """The result of :func:`~agentrunner_conformance.check_runner`."""

    runner_id: str
    """The checked runner's id."""
    seed: int
    """The Hypothesis seed of the whole check (``--seed`` reproduces it)."""
    profile: str
    """The profile used."""
    results: dict[str, RequirementResult] = field(default_factory=lambda: dict[str, RequirementResult]())
    """Outcome per requirement id, in manifest order."""
    duration: float = 0.0
    """Wall time in seconds."""

    def by_outcome(self, outcome: Outcome) -> list[RequirementResult]:
        """The results with this outcome."""
        return [r for r in self.results.values() if r.outcome is outcome]

    @property
    def failed_ids(self) -> set[str]:
        """Ids of failed requirements."""
        return {r.requirement.id for r in self.by_outcome(Outcome.FAIL)}

    @property
    def ok(self) -> bool:
        """No requirement failed or was blocked."""
        return not self.by_outcome(Outcome.FAIL) and not self.by_outcome(Outcome.BLOCKED)

    def counts(self) -> dict[str, int]:
        """How many requirements ended in each state."""
        return {o.value: len(self.by_outcome(o)) for o in Outcome}

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "runner_id": self.runner_id,
            "seed": self.seed,
            "profile": self.profile,
            "duration": round(self.duration, 3),
            "counts": self.counts(),
            "requirements": [r.to_dict() for r in self.results.values()],
        }

    def to_json(self) -> str:
        """The JSON report."""
        return codec.dumps_str(self.to_dict())

    def to_junit_xml(self) -> str:
        """A JUnit XML report: one test case per requirement."""
        counts = self.counts()
        suite = ET.Element(
            "testsuite",
            name=f"agentrunner-conformance {self.runner_id}",
            tests=str(len(self.results)),
            failures=str(counts["FAIL"]),
            errors=str(counts["BLOCKED"]),
            skipped=str(counts["SKIPPED"]),
            time=f"{self.duration:.3f}",
        )
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="seed", value=str(self.seed))
        ET.SubElement(props, "property", name="profile", value=self.profile)
        for result in self.results.values():
            req = result.requirement
            case = ET.SubElement(suite, "testcase", classname=f"protocol-v1.{req.level}", name=req.id)
            if result.outcome is Outcome.FAIL:
                failure = ET.SubElement(case, "failure", message=result.message)
                failure.text = (
                    f"{result.message}\n\nminimal example:\n{result.example}\n\nseed: {result.seed}"
                )
            elif result.outcome is Outcome.BLOCKED:
                ET.SubElement(case, "error", message=result.message)
            elif result.outcome is Outcome.SKIPPED:
                ET.SubElement(case, "skipped", message=result.message)
        return ET.tostring(suite, encoding="unicode", xml_declaration=True)

    def summary(self) -> str:
        """A terminal summary: failures with their examples, then the counts and the seed."""
        lines: list[str] = []
        for result in self.results.values():
            req = result.requirement
            if result.outcome is Outcome.FAIL:
                lines.append(f"FAIL     {req.id} [{req.level}, {req.section}]")
                lines.append(f"         {result.message}")
                if result.example:
                    lines.extend(f"         | {line}" for line in result.example.splitlines())
                lines.append(
                    f"         reproduce: --seed {result.seed} --profile {self.profile} --only {req.id}"
                )
            elif result.outcome is Outcome.BLOCKED:
                lines.append(f"BLOCKED  {req.id}: {result.message}")
        counts = self.counts()
        lines.append(
            f"{self.runner_id}: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIPPED']} skipped, "
            f"{counts['BLOCKED']} blocked in {self.duration:.1f}s (profile {self.profile}, seed {self.seed})"
        )
        return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedFailuresVerdict:
    """How a report compares with an expected-failures baseline."""

    unexpected: frozenset[str]
    """Failed but not listed."""
    stale: frozenset[str]
    """Listed but no longer failing: remove them from the file."""

    @property
    def ok(self) -> bool:
        """Only listed requirements failed, and every listed one still fails."""
        return not self.unexpected and not self.stale


def load_expected_failures(path: Path) -> frozenset[str]:
    """Read an expected-failures file: a YAML list of ids, or a mapping ``{expected_failures: [...]}``.

    Raises :class:`ExpectedFailuresError` for unreadable files and unknown requirement ids.
    """
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ExpectedFailuresError(f"cannot read {path}: {exc}") from exc
    if isinstance(data, dict):
        data = cast(dict[str, Any], data).get("expected_failures", [])
    if data is None:
        data = []
    if not isinstance(data, list):
        raise ExpectedFailuresError(f"{path}: expected a list of requirement ids")
    items = cast(list[Any], data)
    if not all(isinstance(i, str) for i in items):
        raise ExpectedFailuresError(f"{path}: expected a list of requirement ids")
    ids = frozenset(str(i) for i in items)
    unknown = sorted(ids - REQUIREMENTS.keys())
    if unknown:
        raise ExpectedFailuresError(f"{path}: unknown requirement id(s) {unknown}")
    return ids


def compare_expected(report: Report, expected: frozenset[str]) -> ExpectedFailuresVerdict:
    """Compare the failures of *report* with the *expected* ids."""
    failed = frozenset(report.failed_ids)
    return ExpectedFailuresVerdict(unexpected=failed - expected, stale=expected - failed)
