"""agentrunner conformance kit: fuzz any agent runner against Protocol v1 with Hypothesis.

One engine, :func:`check_runner`, returns a :class:`Report` with every requirement of
:data:`REQUIREMENTS` as PASS, FAIL, SKIPPED or BLOCKED. Two front-ends use it: the ``agentrunner-conformance``
CLI and the pytest plugin. :mod:`agentrunner_conformance.strategies` holds the public Hypothesis strategies
and :class:`SimulatedHost` the in-memory host, for runner authors' own tests.

The package imports lazily: its pytest plugin loads in every test session of a project that installs it, so
importing the package costs nothing until one of these names is used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import PROBES, Probe, check_runner
    from .errors import ConformanceError, ExpectedFailuresError, TargetError, UnknownRequirementError
    from .execution import CancelPlan, RunHandle, RunRecord, drive_run, start_run
    from .host import CallBehaviour, CallRecord, FaultPlan, SimulatedHost
    from .invariants import Violation, evaluate_run
    from .loading import load_target
    from .profiles import PROFILES, Profile
    from .report import Outcome, Report, RequirementResult, compare_expected, load_expected_failures
    from .requirements import REQUIREMENTS, Gate, Requirement

__all__ = (
    # the engine
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
    # requirements
    "REQUIREMENTS",
    "Requirement",
    "Gate",
    # driving runs yourself
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
    # errors
    "ConformanceError",
    "UnknownRequirementError",
    "TargetError",
    "ExpectedFailuresError",
)

_HOME: dict[str, str] = {
    "check_runner": "engine",
    "Probe": "engine",
    "PROBES": "engine",
    "load_target": "loading",
    "Report": "report",
    "RequirementResult": "report",
    "Outcome": "report",
    "compare_expected": "report",
    "load_expected_failures": "report",
    "Profile": "profiles",
    "PROFILES": "profiles",
    "REQUIREMENTS": "requirements",
    "Requirement": "requirements",
    "Gate": "requirements",
    "SimulatedHost": "host",
    "FaultPlan": "host",
    "CallBehaviour": "host",
    "CallRecord": "host",
    "CancelPlan": "execution",
    "RunHandle": "execution",
    "RunRecord": "execution",
    "drive_run": "execution",
    "start_run": "execution",
    "evaluate_run": "invariants",
    "Violation": "invariants",
    "ConformanceError": "errors",
    "UnknownRequirementError": "errors",
    "TargetError": "errors",
    "ExpectedFailuresError": "errors",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
