"""The conformance kit's public surface is curated, and every exported name resolves lazily."""

from __future__ import annotations

import agentrunner_conformance
import pytest
from agentrunner_conformance import strategies

EXPECTED = (
    "check_runner",
    "load_target",
    "Report",
    "RequirementResult",
    "Outcome",
    "Profile",
    "PROFILES",
    "Probe",
    "PROBES",
    "compare_expected",
    "load_expected_failures",
    "REQUIREMENTS",
    "Requirement",
    "Gate",
    "SimulatedHost",
    "FaultPlan",
    "CallBehaviour",
    "CallRecord",
    "CancelPlan",
    "RunHandle",
    "RunRecord",
    "drive_run",
    "start_run",
    "evaluate_run",
    "Violation",
    "ConformanceError",
    "UnknownRequirementError",
    "TargetError",
    "ExpectedFailuresError",
)


def test_the_package_exports_exactly_the_curated_names() -> None:
    """API growth shows up in this diff."""
    assert agentrunner_conformance.__all__ == EXPECTED


def test_every_exported_name_resolves() -> None:
    """The lazy loader knows where each name lives, and unknown names still raise AttributeError."""
    for name in EXPECTED:
        assert getattr(agentrunner_conformance, name) is not None
    for name in strategies.__all__:
        assert getattr(strategies, name) is not None
    with pytest.raises(
        AttributeError, match="module 'agentrunner_conformance' has no attribute 'no_such_name'"
    ):
        getattr(agentrunner_conformance, "no_such_name")  # noqa: B009
